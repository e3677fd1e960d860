#!/usr/bin/env escript
%%% The call direction of msgflow's Erlang side, checked with OTP's xref
%%% on the compiled modules: a module's layer is its folder under erl/
%%% (a module at the top of erl/ is the facade), and calls go only the
%%% ways ?ALLOWED lists, or within a layer.  `make test' runs it:
%%%   tools/check/layers.escript EBIN_DIR      the check; exit 1 on a call
%%%                                            against the direction
%%%   tools/check/layers.escript --selftest    shows it catches one
-mode(compile).

%% The one place the allowed directions stand: layer => layers it may call.
%% Data flows up: how names and numbers are written (text), files written
%% privately and read without atoms (files), the NIF and run control
%% (tracer), endpoints' labels (labels), the history's writer and segment
%% format (history), the collector and the store it keeps (store), the
%% row builder views share (rows), the views, each an implementation of
%% the view behaviour (views; cluster and flows add the views of what
%% they keep), the one query path with the view behaviour and its
%% registry, and the history's ranges read back as stores (query), the
%% renderers: shell, exports, reports, dumps, /metrics (output), the
%% servers for tools outside the VM (web), the facade (msgflow, its
%% application).
-define(BELOW_VIEWS, [rows, store, history, labels, tracer, files, text]).
-define(ALLOWED, #{facade => [web, output, query, flows, cluster, views | ?BELOW_VIEWS],
                   web => [output, query, cluster, views | ?BELOW_VIEWS],
                   output => [query, flows, views | ?BELOW_VIEWS],
                   query => [flows, cluster, views | ?BELOW_VIEWS],
                   flows => [cluster, views | ?BELOW_VIEWS],
                   cluster => [views | ?BELOW_VIEWS],
                   views => ?BELOW_VIEWS,
                   rows => [store, history, labels, tracer, files, text],
                   store => [history, labels, tracer, files, text],
                   history => [tracer, files, text],
                   labels => [tracer, text],
                   tracer => [],
                   files => [],
                   text => []}).

main(["--selftest"]) ->
    Layers = #{a => views, b => output, c => store},
    case {against([{a, b}, {b, a}, {b, c}], Layers), against([{c, a}], Layers)} of
        {[{a, b}], [{c, a}]} ->
            io:format("layers self-test: a views->output call and a store->views call are "
                      "caught~n");
        Other ->
            io:format("layers self-test FAILED: ~p~n", [Other]),
            halt(1)
    end;
main([Ebin]) ->
    Root = filename:join(filename:dirname(escript:script_name()), "../.."),
    Layers = layers(filename:join(Root, "erl")),
    {ok, _} = xref:start(?MODULE),
    ok = xref:set_default(?MODULE, [{warnings, false}, {verbose, false}]),
    {ok, _} = xref:add_directory(?MODULE, Ebin),
    {ok, Calls} = xref:q(?MODULE, "ME ||| AM"),
    Edges = Calls ++ registry_calls(Ebin),
    Mine = [{A, B} || {A, B} <- Edges, is_map_key(A, Layers), is_map_key(B, Layers)],
    Unplaced = [M || {M, _} <- lists:usort(Edges), lists:prefix("msgflow", atom_to_list(M)),
                     not is_map_key(M, Layers)],
    case {against(Mine, Layers), Unplaced} of
        {[], []} ->
            io:format("layers: ~b modules in ~b layers, ~b calls between modules, all in "
                      "the allowed direction~n",
                      [map_size(Layers), length(lists:usort(maps:values(Layers))), length(Mine)]);
        {Bad, Unplaced} ->
            [io:format("layers: ~s (~s) calls ~s (~s): not allowed~n",
                       [A, maps:get(A, Layers), B, maps:get(B, Layers)]) || {A, B} <- Bad],
            [io:format("layers: ~s is in no layer folder~n", [M]) || M <- Unplaced],
            io:format("allowed: ~p~n", [?ALLOWED]),
            halt(1)
    end;
main(_) ->
    io:format("usage: layers.escript EBIN_DIR | --selftest~n"),
    halt(2).

%% The calls xref cannot see: msgflow_view calls each view module it
%% names in registry/0 (by the name a user gives, through module/1), so
%% each registered module is a call of msgflow_view's.
registry_calls(Ebin) ->
    true = code:add_patha(Ebin),
    [{msgflow_view, M} || {_, M} <- msgflow_view:registry()].

%% module => layer, from where its source is.
layers(Erl) ->
    Top = [{M, facade} || M <- modules(Erl)],
    Sub = [{M, list_to_atom(L)} || L <- lists:sort(filelib:wildcard("*", Erl)),
                                  filelib:is_dir(filename:join(Erl, L)),
                                  M <- modules(filename:join(Erl, L))],
    maps:from_list(Top ++ Sub).

modules(Dir) ->
    [list_to_atom(filename:basename(F, ".erl")) || F <- filelib:wildcard(filename:join(Dir, "*.erl"))].

%% The calls between layers that ?ALLOWED does not list.
against(Edges, Layers) ->
    [{A, B} || {A, B} <- Edges, A =/= B,
               LA <- [maps:get(A, Layers)], LB <- [maps:get(B, Layers)],
               LA =/= LB, not lists:member(LB, maps:get(LA, ?ALLOWED))].
