#!/bin/sh
# Doc chunks for h/2 (erl) and h/1 (iex): msgflow's API reference, from
# the facade's edoc (erl/msgflow.erl), written where code:get_doc/1 looks
# for them, the application directory's doc/chunks beside its ebin; every
# other module of msgflow gets a chunk that marks it hidden (internal).
# Run by rebar3's compile post-hook (REBAR_BUILD_DIR: the profile's
# build directory, for a dependency too); `tools/doc-chunks.sh html DIR'
# writes the browsable HTML of the same docs into DIR (make docs).
# edoc, not OTP 27's -doc attributes: it reads the same comments on every
# release msgflow supports (25 has no doc attributes).
cd "$(dirname "$0")/.." || exit 1
if [ "$1" = html ]; then
    exec erl -noshell -eval '
        [Dir] = init:get_plain_arguments(),
        case edoc:files(["erl/msgflow.erl"], [{dir, Dir}, {preprocess, true},
                                             {title, "msgflow API reference"}]) of
            ok -> halt(0);
            _ -> halt(1)
        end.' -extra "$2"
fi
app="${REBAR_BUILD_DIR:-_build/default}/lib/msgflow"
[ -d "$app/ebin" ] || { echo "msgflow: no $app/ebin: doc chunks not written" >&2; exit 0; }
erl -noshell -eval '
    [App] = init:get_plain_arguments(),
    Doc = filename:join(App, "doc"),
    ok = edoc:files(["erl/msgflow.erl"], [{doclet, edoc_doclet_chunks},
                                          {layout, edoc_layout_chunks},
                                          {dir, Doc}, {preprocess, true}]),
    Hidden = fun(M) ->
                     Chunk = {docs_v1, erl_anno:new(0), erlang, <<"application/erlang+html">>,
                              hidden, #{}, []},
                     file:write_file(filename:join([Doc, "chunks", M ++ ".chunk"]),
                                     term_to_binary(Chunk, [compressed]))
             end,
    [ok = Hidden(filename:basename(B, ".beam"))
     || B <- filelib:wildcard(filename:join([App, "ebin", "*.beam"])),
        filename:basename(B) =/= "msgflow.beam"],
    halt().' -extra "$app" >/dev/null ||
    echo "msgflow: doc chunks not written (edoc failed on erl/msgflow.erl)" >&2
