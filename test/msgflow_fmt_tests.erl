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

%% A label as msgflow makes them: a registered name, M:F/A (Erlang or
%% Elixir), a fun's `M:f/0 fun', a port's `driver <- owner label', the
%% unknown; and the pid or port text beside it, or none.
label_gen() ->
    Word = ?LET(W, non_empty(list(oneof([range($a, $z), $_]))), W),
    Mfa = ?LET({M, F, A}, {Word, Word, range(0, 12)},
               M ++ ":" ++ F ++ "/" ++ integer_to_list(A)),
    Label = oneof([Word, Mfa,
                   ?LET(M, Mfa, M ++ " fun"),
                   ?LET({M, F}, {Word, Word}, "Elixir." ++ M ++ "." ++ F ++ "/1"),
                   ?LET({D, O}, {oneof(["tcp_inet", "udp_inet", "spawn"]), oneof([Word, Mfa])},
                        D ++ " <- " ++ O),
                   "(unknown)"]),
    Text = oneof([none,
                  ?LET({A, B}, {range(0, 99999), range(0, 999)},
                       "<0." ++ integer_to_list(A) ++ "." ++ integer_to_list(B) ++ ">"),
                  ?LET(N, range(0, 9999), "#Port<0." ++ integer_to_list(N) ++ ">")]),
    {Label, Text}.

%% From 12 columns on, a label's cell is exactly its width and starts with
%% the label's first 8 characters or its whole name part (all but a last
%% `:f/1'); and one that fits is shown whole.
prop_label_cell() ->
    ?FORALL({{Label, Text}, Width}, {label_gen(), range(12, 90)},
            begin
                Cell = msgflow_fmt:label_cell(Label, Text, Width, "~"),
                Name = case re:run(Label, "^(.+?)[:.][^:./ ]+/[0-9]+(?: fun)?$",
                                   [{capture, all_but_first, list}]) of
                           {match, [N]} -> N;
                           nomatch -> Label
                       end,
                Whole = case Text of none -> Label; _ -> Label ++ " " ++ Text end,
                string:length(Cell) =:= Width
                    andalso (lists:prefix(lists:sublist(Label, 8), Cell)
                             orelse lists:prefix(Name, Cell))
                    andalso (length(Whole) > Width orelse string:trim(Cell, trailing) =:= Whole)
            end).

%% The steps of label_cell/4, widest first: whole, the number for the
%% pid, the name part, the name part cut.  test/c/test_dump.c checks
%% msgflow-top's and msgflow-report's cells against the same.
label_cell_test_() ->
    Port = <<"tcp_inet <- httpd_request_handler:init/1">>,
    Xmpp = <<"xmpp_stream_in:init/1">>,
    C = fun(L, T, W) -> string:trim(msgflow_fmt:label_cell(L, T, W, "~"), trailing) end,
    [?_assertEqual("xmpp_stream_in:init/1 <0.181.0>", C(Xmpp, "<0.181.0>", 40)),
     ?_assertEqual("xmpp_stream_in:init/1 <181>", C(Xmpp, "<0.181.0>", 30)),
     ?_assertEqual("xmpp_stream_in~ <181>", C(Xmpp, "<0.181.0>", 24)),
     ?_assertEqual("xmpp_stre~ <181>", C(Xmpp, "<0.181.0>", 16)),
     ?_assertEqual("xmpp_stream~", C(Xmpp, "<0.181.0>", 12)),
     ?_assertEqual("xmpp_stream_in~", C(Xmpp, none, 20)),
     ?_assertEqual("tcp_inet <- httpd_request_handler~ <8>", C(Port, "#Port<0.8>", 40)),
     ?_assertEqual("tcp_inet <- httpd_r~ <8>", C(Port, "#Port<0.8>", 24)),
     ?_assertEqual("ux_load~", C(<<"ux_load:start/0 fun">>, none, 12)),
     ?_assertEqual("file_server_2", C(<<"file_server_2">>, none, 20)),
     ?_assertEqual("My.Worker~", C(<<"My.Worker.init/1">>, none, 12)),
     %% two handlers that read the same are told apart by their numbers
     ?_assertNotEqual(C(Xmpp, "<0.181.0>", 20), C(Xmpp, "<0.182.0>", 20))].

proper_test_() ->
    [?_assert(proper:quickcheck(P, [{numtests, 500}, {to_file, user}]))
     || P <- [prop_int_roundtrip(), prop_cell_width(), prop_mfa_as_format(), prop_label_cell(),
              prop_visible(), prop_cells_visible()]].

%% The cases tools/c's test_dump checks mf_visible against too.
visible_cases_test_() ->
    {ok, Text} = file:read_file(filename:join(filename:dirname(?FILE), "data/visible.tsv")),
    Cases = [binary:split(L, <<"\t">>) || L <- binary:split(Text, <<"\n">>, [global]),
                                          L =/= <<>>, binary:first(L) =/= $#],
    [?_assertEqual(Want, msgflow_fmt:visible(binary:decode_hex(Hex))) || [Hex, Want] <- Cases].

%% Nothing a terminal acts on is left: no C0, DEL or C1 character, no
%% bidirectional control, no byte that is no UTF-8; a second pass changes
%% nothing; text with none of them is left as it is.
prop_visible() ->
    ?FORALL(B, oneof([binary(), utf8(), ?LET(A, utf8(), <<"x", A/binary, 27, "[31m">>)]),
            begin
                V = msgflow_fmt:visible(B),
                Cs = unicode:characters_to_list(V),
                is_list(Cs) andalso not lists:any(fun controls/1, Cs)
                    andalso msgflow_fmt:visible(V) =:= V
                    andalso (lists:any(fun controls/1, chars(B)) orelse V =:= B)
            end).

%% A cell or label cell of hostile text: visible, and exactly its width
%% (in characters that are one column each: controls, letters, CJK
%% aside, and bytes that are no UTF-8; a combining mark is no column of
%% its own, which string:length/1 cannot tell from a terminal's cells).
prop_cells_visible() ->
    Char = oneof([range(0, 16#1F), 16#7F, range(16#80, 16#9F), 16#202E, 16#2066, 16#200F,
                  range($a, $z), $\s, $:, $/, 16#E9]),
    Text = oneof([?LET(Cs, list(Char), unicode:characters_to_binary(Cs)),
                  ?LET({Cs, Bad}, {list(Char), range(16#80, 16#FF)},
                       <<(unicode:characters_to_binary(Cs))/binary, Bad>>)]),
    ?FORALL({B, W}, {Text, range(12, 60)},
            begin
                Cells = [msgflow_fmt:cell(B, W, "~"), msgflow_fmt:label_cell(B, W, "~"),
                         msgflow_fmt:label_cell(B, "<0.81.0>", W, "~")],
                lists:all(fun(C) -> string:length(C) =:= W andalso not lists:any(fun controls/1, C) end,
                          Cells)
            end).

controls(C) ->
    C < 16#20 orelse C =:= 16#7F orelse (C >= 16#80 andalso C =< 16#9F) orelse C =:= 16#61C
        orelse C =:= 16#200E orelse C =:= 16#200F orelse (C >= 16#202A andalso C =< 16#202E)
        orelse (C >= 16#2066 andalso C =< 16#2069).

%% B's characters, with a byte that is no UTF-8 read as a control.
chars(B) ->
    case unicode:characters_to_list(B) of
        L when is_list(L) -> L;
        _ -> [0]
    end.

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
