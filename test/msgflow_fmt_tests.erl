%%% EUnit and PropEr tests of labels and table text.
-module(msgflow_fmt_tests).
-include_lib("proper/include/proper.hrl").  %% before eunit.hrl: both define LET
-include_lib("eunit/include/eunit.hrl").

int_test_() ->
    [?_assertEqual(Want, msgflow_fmt:int(N))
     || {N, Want} <- [{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"},
                      {-1234, "-1,234"}, {100000, "100,000"}]].

rate_test_() ->
    [?_assertEqual(Want, msgflow_fmt:rate(R))
     || {R, Want} <- [{0, "0.0"}, {0.04, "0.0"}, {16129.03, "16,129.0"}, {2.25, "2.3"}]].

cell_test_() ->
    [?_assertEqual("abc  ", msgflow_fmt:cell("abc", 5, "~")),
     ?_assertEqual("abcd~", msgflow_fmt:cell("abcdefgh", 5, "~")),
     ?_assertEqual("abcd" ++ [16#2026], msgflow_fmt:cell(<<"abcdefgh">>, 5, [16#2026])),
     ?_assertEqual("   42", msgflow_fmt:rcell("42", 5)),
     ?_assertEqual("123456", msgflow_fmt:rcell("123456", 5))].

%% Every endpoint as the views, the dump's `text' and the C tools write it
%% (the dump's text is what msgflow-report prints for a version 6 dump).
endpoint_test_() ->
    Ref = make_ref(),
    %% a pid and a port of node n@h (NEW_PID_EXT, V4_PORT_EXT)
    Remote = binary_to_term(<<131, 88, 100, 3:16, "n@h", 80:32, 0:32, 1:32>>),
    RemotePort = binary_to_term(<<131, 120, 100, 3:16, "n@h", 7:64, 1:32>>),
    Port = hd(erlang:ports()),
    [?_assertEqual(<<"foo">>, msgflow_fmt:endpoint(foo)),
     ?_assertEqual(iolist_to_binary([pid_to_list(Remote), "@n@h"]), msgflow_fmt:endpoint(Remote)),
     ?_assertEqual(list_to_binary(erlang:port_to_list(Port)), msgflow_fmt:endpoint(Port)),
     ?_assertEqual(list_to_binary(erlang:port_to_list(RemotePort)),
                   msgflow_fmt:endpoint(RemotePort)),
     ?_assertEqual(<<"exited#7">>, msgflow_fmt:endpoint({exited, 7, 'n@h'})),
     ?_assertEqual(<<"{foo,n@h}">>, msgflow_fmt:endpoint({foo, 'n@h'})),
     ?_assertEqual(iolist_to_binary(["alias ", ref_to_list(Ref)]), msgflow_fmt:endpoint(Ref)),
     ?_assertEqual(list_to_binary(pid_to_list(self())), msgflow_fmt:endpoint(self()))].

label_test_() ->
    {setup,
     fun() ->
             Named = spawn(fun() -> receive stop -> ok end end),
             register(msgflow_fmt_tests_named, Named),
             Plain = spawn(fun() -> receive stop -> ok end end),
             Gen = proc_lib:spawn(fun() -> receive stop -> ok end end),
             Dead = spawn(fun() -> ok end),
             Ref = monitor(process, Dead),
             receive {'DOWN', Ref, _, _, _} -> ok end,
             {Named, Plain, Gen, Dead}
     end,
     fun({Named, Plain, Gen, _}) -> [P ! stop || P <- [Named, Plain, Gen]] end,
     fun({Named, Plain, Gen, Dead}) ->
             [?_assertEqual(<<"msgflow_fmt_tests_named">>, msgflow_describe:label(Named)),
              %% spawned from a fun: where the fun was written
              ?_assertEqual(<<"msgflow_fmt_tests:label_test_/0 fun">>,
                            msgflow_describe:label(Plain)),
              ?_assertMatch(<<"msgflow_fmt_tests:", _/binary>>, msgflow_describe:label(Gen)),
              ?_assertEqual(list_to_binary(pid_to_list(Dead)), msgflow_describe:label(Dead)),
              ?_assertEqual(<<"some_name">>, msgflow_describe:label(some_name)),
              ?_assertMatch(#{label := <<"msgflow_fmt_tests_named">>, name := msgflow_fmt_tests_named,
                              module := msgflow_fmt_tests, group_leader := GL} when is_pid(GL),
                            msgflow_describe:describe(Named)),
              ?_assertMatch(#{name := undefined, module := msgflow_fmt_tests},
                            msgflow_describe:describe(Gen)),
              ?_assertEqual(undefined, msgflow_describe:describe(Dead))]
     end}.

%% mfa/3 writes what ~w:~w/~w writes, quoting included; an Elixir module
%% (`Elixir.' and more) as its alias, then `.F/A'.
prop_mfa_as_format() ->
    Word = ?LET(Cs, list(oneof([range($a, $z), range($A, $Z), range($0, $9), $_, $@, $-, $., $\s])),
                list_to_atom(Cs)),
    Atom = oneof([Word, oneof(['after', 'receive', 'maybe', 'else', 'end', ok, 'Elixir.Foo',
                               'Elixir.', 'Elixir', ''])]),
    ?FORALL({M, F, A}, {Atom, Atom, range(0, 255)},
            msgflow_fmt:mfa(M, F, A) =:=
                case atom_to_list(M) of
                    "Elixir." ++ Alias when Alias =/= "" ->
                        iolist_to_binary(io_lib:format("~ts.~w/~w", [Alias, F, A]));
                    _ ->
                        iolist_to_binary(io_lib:format("~w:~w/~w", [M, F, A]))
                end).

%% Removing the separators gives the plain digits back, and groups are 3 wide.
prop_int_roundtrip() ->
    ?FORALL(N, integer(),
            begin
                S = msgflow_fmt:int(N),
                [_ | Groups] = string:split(string:trim(S, leading, "-"), ",", all),
                lists:filter(fun(C) -> C =/= $, end, S) =:= integer_to_list(N)
                    andalso lists:all(fun(G) -> length(G) =:= 3 end, Groups)
            end).

%% A cell is always exactly Width columns.
prop_cell_width() ->
    ?FORALL({Text, Width}, {list(range($a, $z)), range(1, 40)},
            string:length(msgflow_fmt:cell(Text, Width, "~")) =:= Width).

proper_test_() ->
    [?_assert(proper:quickcheck(P, [{numtests, 500}, {to_file, user}]))
     || P <- [prop_int_roundtrip(), prop_cell_width(), prop_mfa_as_format()]].

%% Elixir modules and names as Elixir writes them; Erlang ones unchanged.
elixir_names_test() ->
    ?assertEqual(<<"My.Worker.init/1">>, msgflow_fmt:mfa('Elixir.My.Worker', init, 1)),
    ?assertEqual(<<"Task.Supervised.invoke_mfa/2">>,
                 msgflow_fmt:mfa('Elixir.Task.Supervised', invoke_mfa, [a, b])),
    ?assertEqual(<<"My.Worker.start/0 fun">>,
                 msgflow_fmt:mfa('Elixir.My.Worker', '-start/0-fun-0-', 0)),
    %% a fun reads as the function it was written in
    ?assertEqual(<<"ux_load:start/0 fun">>, msgflow_fmt:mfa(ux_load, '-start/0-fun-0-', 0)),
    ?assertEqual(<<"ux_load:start/0 fun">>,
                 msgflow_fmt:mfa(ux_load, '-start/0-lc$^0/1-0-', 2)),
    ?assertEqual(<<"ux_load:'-x'/1">>, msgflow_fmt:mfa(ux_load, '-x', 1)),
    ?assertEqual(<<"ux_load:'-x/y-'/1">>, msgflow_fmt:mfa(ux_load, '-x/y-', 1)),
    ?assertEqual(<<"Counter">>, msgflow_fmt:name('Elixir.Counter')),
    ?assertEqual(<<"Elixir">>, msgflow_fmt:name('Elixir')),
    ?assertEqual(<<"Elixir.">>, msgflow_fmt:name('Elixir.')),
    ?assertEqual(<<"code_server">>, msgflow_fmt:name(code_server)),
    ?assertEqual(<<"gen_server:init_it/6">>, msgflow_fmt:mfa(gen_server, init_it, 6)),
    ?assertEqual(<<"'Elixir':f/0">>, msgflow_fmt:mfa('Elixir', f, 0)).

%% A spawn event's fun names the process by where the fun was written; a
%% fun whose code was purged since has no name, and the process is
%% erlang:apply/2 (the collector once crashed on it: a name of `[]').
proc_event_call_fun_test() ->
    Forms = [{attribute, 1, module, msgflow_fmt_purged},
             {attribute, 2, export, [{f, 0}]},
             {function, 3, f, 0, [{clause, 3, [], [], [{'fun', 3, {clauses, [{clause, 3, [], [], [{atom, 3, ok}]}]}}]}]}],
    {ok, M, Bin} = compile:forms(Forms),
    {module, M} = code:load_binary(M, "msgflow_fmt_purged.erl", Bin),
    F = M:f(),
    ?assertEqual({msgflow_fmt_purged, '-f/0-fun-0-', 0}, msgflow_describe:proc_event_call({'fun', F})),
    ?assertEqual(<<"msgflow_fmt_purged:f/0 fun">>,
                 msgflow_fmt:mfa(msgflow_fmt_purged, '-f/0-fun-0-', 0)),
    true = code:delete(M),
    _ = code:purge(M),
    ?assertEqual({erlang, apply, 2}, msgflow_describe:proc_event_call({'fun', F})).
