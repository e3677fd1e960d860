#!/bin/sh
# Doc chunks for h/2 (erl) and h/1 (iex): msgflow's API reference, from
# the facade's edoc (erl/msgflow.erl), written where code:get_doc/1 looks
# for them, the application directory's doc/chunks beside its ebin; every
# other module of msgflow gets a chunk that marks it hidden (internal).
# Run by rebar3's compile post-hook: the application directory is
# REBAR_BUILD_DIR's lib/msgflow, or, for a checkout (_checkouts),
# REBAR_CHECKOUTS_OUT_DIR's msgflow: whichever was compiled last.
# `tools/doc-chunks.sh html DIR' writes the browsable HTML of the same
# docs into DIR (make docs).  edoc, not OTP 27's -doc attributes: it reads
# the same comments on every release msgflow supports (25 has no doc
# attributes).  A failure is said (on stdout: rebar3 shows a hook's
# stdout) and the build goes on.
cd "$(dirname "$0")/.." || exit 1
if [ "$1" = html ]; then
    [ -n "$2" ] || { echo "usage: tools/doc-chunks.sh html DIR" >&2; exit 2; }
    exec erl -noshell -eval '
        [Dir] = init:get_plain_arguments(),
        try edoc:files(["erl/msgflow.erl"], [{dir, Dir}, {preprocess, true},
                                            {title, "msgflow API reference"}]) of
            ok -> halt(0)
        catch C:R -> io:format("msgflow: edoc failed: ~p~n", [{C, R}]), halt(1)
        end.' -extra "$2"
fi
app=""
for d in "${REBAR_BUILD_DIR:-_build/default}/lib/msgflow" "${REBAR_CHECKOUTS_OUT_DIR:-/nonexistent}/msgflow"; do
    if [ -f "$d/ebin/msgflow.beam" ] && { [ -z "$app" ] || [ "$d/ebin/msgflow.beam" -nt "$app/ebin/msgflow.beam" ]; }; then
        app=$d
    fi
done
if [ -z "$app" ]; then
    echo "msgflow: no compiled msgflow found: doc chunks not written"
    exit 0
fi
ERL_CRASH_DUMP=/dev/null erl -noshell -eval '
    [App] = init:get_plain_arguments(),
    Doc = filename:join(App, "doc"),
    try
        ok = edoc:files(["erl/msgflow.erl"], [{doclet, edoc_doclet_chunks},
                                              {layout, edoc_layout_chunks},
                                              {dir, Doc}, {preprocess, true}]),
        Hidden = {docs_v1, erl_anno:new(0), erlang, <<"application/erlang+html">>,
                  hidden, #{}, []},
        [ok = file:write_file(filename:join([Doc, "chunks", filename:basename(B, ".beam") ++
                                                 ".chunk"]),
                              term_to_binary(Hidden, [compressed]))
         || B <- filelib:wildcard(filename:join([App, "ebin", "*.beam"])),
            filename:basename(B) =/= "msgflow.beam"],
        halt(0)
    catch C:R ->
        io:format("msgflow: doc chunks not written (h(msgflow, F) will find none): ~p~n",
                  [{C, R}]),
        halt(0)
    end.' -extra "$app"
