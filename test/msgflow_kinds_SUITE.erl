%%% The kinds and tags of messages (issue 22): every (pair, kind, tag)
%%% counted exactly against a workload of known kinds, max_kinds'
%%% overflow, and kinds off.  Barriers are msgflow:stop/0 (flags off,
%%% erlang:trace_delivered/1, final snapshot); cases run one at a time, each on its own.
-module(msgflow_kinds_SUITE).
-include_lib("stdlib/include/assert.hrl").
-include_lib("common_test/include/ct.hrl").
-export([all/0, groups/0, init_per_suite/1, end_per_suite/1]).
-export([kinds_exact/1, kinds_max_overflow/1, kinds_off/1, kinds_views/1, replies_no_fan_out/1,
         flow_kinds/1, slow_reads/1, reads_workload/0, log/2,
         native_records/1, records_workload/0, priority_alias/1]).

all() ->
    [{group, kinds}].

groups() ->
    [{kinds, [], [kinds_exact, kinds_max_overflow, kinds_off, kinds_views,
                          replies_no_fan_out, flow_kinds, slow_reads, native_records,
                          priority_alias]}].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Config.

end_per_suite(_Config) ->
    ok = msgflow:stop(),
    ok.

-define(GETS, 40).
-define(PUTS, 7).
-define(CASTS, 30).
-define(TICKS, 20).
-define(BINS, 5).
-define(EXITS, 3).
-define(DOWNS, 2).
-define(PACKETS, 4).

%% Calls with `{get, K}' and `put', casts, `{tick, N}' infos (each making
%% the server send itself a `'$gen_event''), `'EXIT'' and `'DOWN''
%% messages (sent as messages: the exit and monitor signals the VM
%% delivers are no sends), binaries, and a port's data: every count of
%% every (pair, kind, tag) exact.
kinds_exact(Config) ->
    {ok, Srv} = gen_server:start(msgflow_kinds_srv, [], []),
    {Client, Port, PortOwner} = workload(Srv),
    ok = msgflow:stop(),
    Ends = [Client, Srv, Port, PortOwner],
    Kinds = [E || E = {S, R, _, _, _} <- msgflow:pairs(kinds),
                  lists:member(S, Ends), lists:member(R, Ends)],
    %% the client's last call ({get, 0}) waits for the server to be done
    Expected = lists:sort(
                 [{Client, Srv, call, get, ?GETS + 1}, {Client, Srv, call, put, ?PUTS},
                  {Client, Srv, cast, add, ?CASTS}, {Client, Srv, info, tick, ?TICKS},
                  {Client, Srv, info, binary, ?BINS}, {Client, Srv, exit, shutdown, ?EXITS},
                  {Client, Srv, down, normal, ?DOWNS},
                  {Srv, Srv, event, xmlstreamelement, ?TICKS},
                  {PortOwner, Port, info, command, ?PACKETS},
                  {Port, PortOwner, info, data, ?PACKETS}]),
    ?assertEqual(Expected, lists:sort(Kinds)),
    %% the replies are rolled up into the views' (server, caller) row
    Rows = view_rows(#{by => process, limit => all}),
    #{kinds := SrvToClient} = row_of(Srv, Client, Rows),
    ?assertEqual([{reply, ok, ?GETS + 1 + ?PUTS}], SrvToClient),
    #{kinds := ClientToSrv, count := Total} = row_of(Client, Srv, Rows),
    ?assertEqual(Total, lists:sum([N || {_, _, N} <- ClientToSrv])),
    ?assertEqual({call, get, ?GETS + 1}, hd(ClientToSrv)),
    #{events := Events, held := Held, rolled_up := Folded, overflow := Over} =
        msgflow_collector:balance(),
    ?assertEqual(Events, Held + Folded + Over),
    %% the dump (version 5) read back by the C decoder: msgflow-report's
    %% CSV by process has each pair's kinds, `kind:tag=N'
    Etf = filename:join(?config(priv_dir, Config), "kinds.etf"),
    Csv = filename:join(?config(priv_dir, Config), "kinds.csv"),
    ok = msgflow:export(Etf, etf),
    {0, _} = msgflow_test_io:run(msgflow_test_io:tool("msgflow-report"), [Etf, "--csv", Csv],
                                 []),
    {ok, CsvBin} = file:read_file(Csv),
    Text = fun msgflow_fmt:endpoint/1,
    CKinds = lists:sort(
               [{S, R, binary_to_atom(K), binary_to_atom(T), binary_to_integer(N)}
                || Line <- tl(string:split(CsvBin, "\n", all)), Line =/= <<>>,
                   [SB, RB | Rest] <- [string:split(Line, ",", all)],
                   S <- [E || E <- Ends, Text(E) =:= SB],
                   R <- [E || E <- Ends, Text(E) =:= RB],
                   KindsField <- [lists:nth(5, Rest)],   %% kinds, the seventh field
                   Entry <- string:lexemes(KindsField, " "),
                   [K, T, N] <- [string:lexemes(Entry, ":=")]]),
    ct:log("~p", [CKinds]),
    %% the replies are rolled up into the (server, client) row in the views
    %% and the dump alike
    ?assertEqual(lists:sort(Expected ++ [{Srv, Client, reply, ok, ?GETS + 1 + ?PUTS}]),
                 CKinds),
    gen_server:stop(Srv).

%% max_kinds 3: a pair keeps three (kind, tag) of its own, the others'
%% messages are `{info, other}', and the pair's total stays exact.
kinds_max_overflow(_Config) ->
    Srv = spawn(fun sink/0),
    Tags = [t1, t2, t3, t4, t5, t6],
    Client = spawn(fun() -> receive go -> ok end,
                            [[Srv ! {T, I} || I <- lists:seq(1, N)]
                             || {N, T} <- lists:enumerate(Tags)] end),
    Ref = monitor(process, Client),
    ok = msgflow:start(#{procs => [Client], max_kinds => 3, interval => 3600000}),
    Client ! go,
    receive {'DOWN', Ref, process, Client, normal} -> ok end,
    ok = msgflow:stop(),
    Got = [{K, T, N} || {S, R, K, T, N} <- msgflow:pairs(kinds), S =:= Client, R =:= Srv],
    {Other, Own} = lists:partition(fun({_, T, _}) -> T =:= other end, Got),
    ?assertEqual(3, length(Own)),
    [?assertEqual(index(T, Tags), N) || {info, T, N} <- Own],
    ?assertEqual([{info, other, 21 - lists:sum([N || {_, _, N} <- Own])}], Other),
    ?assertEqual([{Client, Srv, 21}], [P || P = {S, _, _} <- msgflow:pairs(), S =:= Client]),
    exit(Srv, kill).

%% kinds => false: no kinds anywhere, counts as before.
kinds_off(_Config) ->
    Srv = spawn(fun sink/0),
    Client = spawn(fun() -> receive go -> ok end, [Srv ! {tick, I} || I <- lists:seq(1, 9)] end),
    Ref = monitor(process, Client),
    ok = msgflow:start(#{procs => [Client], kinds => false, interval => 3600000}),
    Client ! go,
    receive {'DOWN', Ref, process, Client, normal} -> ok end,
    ok = msgflow:stop(),
    ?assertEqual([], msgflow:pairs(kinds)),
    ?assertEqual([{Client, Srv, 9}], msgflow:pairs()),
    ?assertMatch(#{kinds := []}, row_of(Client, Srv, view_rows(#{by => process, limit => all}))),
    exit(Srv, kill).

%% top by kind and kinds/2 print what pairs(kinds) holds; options are
%% checked.
kinds_views(_Config) ->
    {ok, Srv} = gen_server:start(msgflow_kinds_srv, [], []),
    {Client, _, _} = workload(Srv),
    ok = msgflow:stop(),
    ByKind = view_rows(#{by => kind, limit => all}),
    #{count := Gets} = row_of(call, get, ByKind),
    ?assertEqual(?GETS + 1, Gets),
    #{count := Events} = row_of(event, xmlstreamelement, ByKind),
    ?assertEqual(?TICKS, Events),
    Printed = msgflow_test_io:capture(fun() -> ok = msgflow:kinds(Client, Srv) end),
    ?assertMatch({match, _}, re:run(Printed, "call +get +41 ")),
    ?assertMatch({match, _}, re:run(Printed, "cast +add +30 ")),
    ?assertEqual({error, {badopt, {sort, bad}, [messages, rate, peak, bytes, wait]}},
                 msgflow:top(3, #{sort => bad})),
    ?assertMatch({error, {badarg, {pair, _}, _}}, msgflow:kinds(Srv, self())),
    Top = msgflow_test_io:capture(fun() -> ok = msgflow:top(50, [{by, kind}]) end),
    ?assertMatch({match, _}, re:run(Top, "call +get +41 ")),
    %% the matrix of one kind, or of a kind and tag: those messages only
    Cell = fun(M) -> maps:get(count, maps:get({Client, Srv}, maps:get(cells, M))) end,
    ?assertEqual(?GETS + 1 + ?PUTS, Cell(msgflow:view(matrix, #{by => process, kind => call}))),
    ?assertEqual(?PUTS, Cell(msgflow:view(matrix, [{by, process}, {kind, {call, put}}]))),
    ?assertEqual(?CASTS, Cell(msgflow:view(matrix, #{by => process, kind => cast}))),
    ?assertEqual(error, maps:find({Client, Srv}, maps:get(cells, msgflow:view(matrix, #{by => process, kind => io})))),
    ?assertMatch({error, {badopt, {kind, chat}, [call | _]}}, msgflow:matrix(name, #{kind => chat})),
    ?assertMatch({error, {badopt, {kind, {call, 1}}, _}}, msgflow:matrix(name, #{kind => {call, 1}})),
    gen_server:stop(Srv).

%% A gen_server answering 50 callers sends to 50 receivers: its replies
%% (to their aliases, and to their pids for calls with timeout infinity)
%% are no fan_out.  A process casting to 25 receivers is one, and the
%% finding names the kind of what it sends.
replies_no_fan_out(_Config) ->
    {ok, Srv} = gen_server:start(msgflow_kinds_srv, [], []),
    ok = msgflow:start(#{procs => all, interval => 100}),
    Callers = [spawn(fun() -> paced_calls(Srv, 2) end) || _ <- lists:seq(1, 50)],
    Sinks = [spawn(fun sink/0) || _ <- lists:seq(1, 25)],
    Spreader = spawn(fun() -> spread(Sinks) end),
    ok = msgflow_collector:await_windows(4, 10000),
    Found = msgflow:view(hotspots, #{}),
    [exit(P, kill) || P <- [Spreader | Callers ++ Sinks]],
    ok = msgflow:stop(),
    ct:log("~p", [Found]),
    FanOut = [F || F = #{rule := fan_out} <- Found],
    ?assertMatch([#{subject := Spreader, evidence := #{receivers := 25, kind := {cast, m, 100}}}],
                 FanOut),
    gen_server:stop(Srv).

%% A followed request records the kind and tag of each send: the call
%% `{get, 1}' and its reply `{ok, 1}'; the sequence diagram labels its
%% arrows with them.
flow_kinds(Config) ->
    {ok, Srv} = gen_server:start(msgflow_kinds_srv, [], []),
    ok = msgflow:start(),
    {{ok, 1}, Flow} = msgflow:follow(fun() -> gen_server:call(Srv, {get, 1}) end),
    #{events := Evs} = Flow,
    Self = self(),
    ?assertEqual([{Self, Srv, call, get}, {Srv, Self, reply, ok}],
                 [{F, T, K, Tg} || #{from := F, to := T, kind := K, tag := Tg} <- Evs]),
    Mmd = filename:join(?config(priv_dir, Config), "flow.mmd"),
    ok = msgflow:export(Mmd, mermaid),
    {ok, Bin} = file:read_file(Mmd),
    Arrows = [L || L <- binary:split(Bin, <<"\n">>, [global]), binary:match(L, <<"->>">>) =/= nomatch],
    ?assertMatch([_, _], Arrows),
    [A1, A2] = Arrows,
    ?assertMatch({match, _}, re:run(A1, ": call get \\(d1 ")),
    ?assertMatch({match, _}, re:run(A2, ": reply ok \\(d2 ")),
    Text = iolist_to_binary(msgflow_flow_render:text(Flow)),
    ?assertMatch({match, _}, re:run(Text, "call get \\{")),
    ok = msgflow:stop(),
    gen_server:stop(Srv).

%% The term reads through enif alone (MSGFLOW_TERM_READS=off, as on a VM
%% whose layout the checks at load refuse), on a peer node: lib_info says
%% every read is off, and a workload of calls with `infinity' (replies to
%% the caller's pid), casts and infos counts exactly what it counts here
%% with the reads on.  (A reply to an alias needs the alias's words: with
%% the reads off it is a pair to the alias, rolled up; not in this
%% workload.)
slow_reads(_Config) ->
    {Peer, Node} = reads_off_peer(),
    try
        {Off, SlowPairs, [Warning]} = erpc:call(Node, ?MODULE, reads_workload, [], 60000),
        ?assertEqual(#{fast_extra => false, alias_owner => false, fast_terms => false,
                       plain_refs => false, fast_resources => false}, Off),
        %% said at start, each read named
        [?assertMatch({_, _}, binary:match(Warning, atom_to_binary(R)))
         || R <- [fast_extra, fast_terms, alias_owner, plain_refs, fast_resources]],
        {On, FastPairs, []} = reads_workload(),
        ?assertEqual(#{fast_extra => true, alias_owner => true, fast_terms => true,
                       plain_refs => true, fast_resources => true}, On),
        ?assertEqual(FastPairs, SlowPairs),
        %% the last call waits for the server to be done with the rest
        ?assertEqual(lists:sort([{client, srv, call, get, 8}, {client, srv, cast, add, 5},
                                 {client, srv, info, tick, 3}, {srv, srv, event, xmlstreamelement, 3},
                                 {srv, client, reply, ok, 8}]), FastPairs)
    after
        peer:stop(Peer)
    end.

%% OTP 29's native records as messages, requests, casts, replies and a
%% spawn's argument: tagged `record' (read from their words, checked at
%% load), counted exactly, and the VM stays up (enif_term_type aborts it
%% on a record); with every read through the API (a peer with
%% MSGFLOW_TERM_READS=off) the same counts, tagged `other'.
native_records(_Config) ->
    case erlang:is_builtin(records, create, 4) of
        false ->
            msgflow_test_lib:skip("native records are OTP 29's");
        true ->
            {Peer, Node} = reads_off_peer(),
            try
                Expected = fun(Tag) ->
                                   lists:sort([{client, srv, info, Tag, 3},
                                               {client, srv, call, Tag, 2},
                                               {client, srv, cast, Tag, 2},
                                               {srv, client, reply, Tag, 2}])
                           end,
                {read, Fast} = records_workload(),
                ?assertEqual(Expected(record), Fast),
                {unread, Slow} = erpc:call(Node, ?MODULE, records_workload, [], 60000),
                ?assertEqual(Expected(other), Slow)
            after
                peer:stop(Peer)
            end
    end.

%% OTP 28's priority messages: sends to a priority alias (with and
%% without `[priority]') are pairs to the alias's owner, each by its own
%% kind and tag (info, not reply: they answer no call), and a priority
%% send to a pid is like any other.
priority_alias(_Config) ->
    Self = self(),
    Receiver = spawn(fun() ->
                             A = try alias([priority]) catch error:badarg -> none end,
                             Self ! {alias, self(), A},
                             receive stop -> ok end
                     end),
    case receive {alias, Receiver, A0} -> A0 end of
        none ->
            exit(Receiver, kill),
            msgflow_test_lib:skip("priority messages are OTP 28's");
        Alias ->
            Sender = spawn(fun() ->
                                   receive go -> ok end,
                                   Prio = fun(To, M) -> apply(erlang, send, [To, M, [priority]]) end,
                                   [Prio(Alias, {prio, I}) || I <- lists:seq(1, 4)],
                                   [Alias ! {plain, I} || I <- lists:seq(1, 3)],
                                   [Prio(Receiver, {prio_pid, I}) || I <- lists:seq(1, 2)],
                                   Self ! {done, self()}
                           end),
            ok = msgflow:start(#{procs => [Sender, Receiver], interval => 3600000}),
            Sender ! go,
            receive {done, Sender} -> ok end,
            ok = msgflow:stop(),
            %% pairs of the owner's, as if sent to its pid
            ?assertEqual(lists:sort([{Sender, Receiver, info, prio, 4},
                                     {Sender, Receiver, info, plain, 3},
                                     {Sender, Receiver, info, prio_pid, 2}]),
                         lists:sort([P || {S, R, _, _, _} = P <- msgflow:pairs(kinds),
                                          S =:= Sender, R =:= Receiver])),
            #{kinds := Kinds, count := 9} = row_of(Sender, Receiver,
                                                    view_rows(#{by => process, limit => all})),
            ?assertEqual(lists:sort([{info, prio, 4}, {info, plain, 3}, {info, prio_pid, 2}]),
                         lists:sort(Kinds)),
            exit(Receiver, kill),
            ok
    end.

%% Run on a node: native records sent 3 times as messages, twice as a
%% call's request with timeout infinity (the server replies with it, to
%% the caller's pid) and twice as a cast, and a
%% spawn of erlang:apply with one as its fun; what lib_info says of
%% native records, and the pairs of kinds between client and srv.
records_workload() ->
    {ok, _} = application:ensure_all_started(msgflow),
    {ok, Srv} = gen_server:start(msgflow_kinds_srv, [], []),
    Rec = apply(records, create, [?MODULE, point, [{x, 1}, {y, 2}], #{is_exported => true}]),
    Self = self(),
    Client = spawn(fun() ->
                           receive go -> ok end,
                           [Srv ! Rec || _ <- lists:seq(1, 3)],
                           [Rec = gen_server:call(Srv, Rec, infinity) || _ <- lists:seq(1, 2)],
                           [gen_server:cast(Srv, Rec) || _ <- lists:seq(1, 2)],
                           %% its process dies of badfun (an error report)
                           _ = spawn(erlang, apply, [Rec, []]),
                           Self ! {done, self()}
                   end),
    ok = msgflow:start(#{procs => [Client, Srv], interval => 3600000}),
    {maps:get(native_records, msgflow_tracer:lib_info()), client_pairs(Client, Srv)}.

%% Run on a node: 7 calls with `infinity', 5 casts, 3 infos and one more
%% call from a client to a msgflow_kinds_srv, counted; the term reads lib_info reports, and
%% the pairs of kinds between the two (as client and srv).
reads_workload() ->
    {ok, _} = application:ensure_all_started(msgflow),
    {ok, Srv} = gen_server:start(msgflow_kinds_srv, [], []),
    Self = self(),
    Client = spawn(fun() ->
                           receive go -> ok end,
                           [{ok, 1} = gen_server:call(Srv, {get, 1}, infinity) || _ <- lists:seq(1, 7)],
                           [gen_server:cast(Srv, {add, 1}) || _ <- lists:seq(1, 5)],
                           [Srv ! {tick, I} || I <- lists:seq(1, 3)],
                           {ok, 1} = gen_server:call(Srv, {get, 1}, infinity),
                           Self ! {done, self()}
                   end),
    %% the warning at start, if any: logged by the collector before it
    %% answers start/1, so here by then
    ok = logger:add_handler(msgflow_reads, ?MODULE, #{config => #{to => self()}}),
    ok = msgflow:start(#{procs => [Client, Srv], interval => 3600000}),
    ok = logger:remove_handler(msgflow_reads),
    Warnings = receive {logged, W} -> [W] after 0 -> [] end,
    Pairs = client_pairs(Client, Srv),
    {maps:with([fast_extra, alias_owner, fast_terms, plain_refs, fast_resources],
               msgflow_tracer:lib_info()), Pairs,
     Warnings}.

%% A peer node with this suite on its path whose tracer reads every term
%% through the API (MSGFLOW_TERM_READS=off): {Peer, Node}.
reads_off_peer() ->
    _ = msgflow_test_lib:start_distribution(),
    Args = lists:append([["-pa", filename:dirname(code:which(M))]
                         || M <- [msgflow, ?MODULE, msgflow_kinds_srv]]),
    {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(), args => Args,
                                         env => [{"MSGFLOW_TERM_READS", "off"}]}),
    {Peer, Node}.

%% With msgflow counting: lets Client go and waits for its `done', stops
%% msgflow and Srv; the pairs of kinds between the two, as client and srv.
client_pairs(Client, Srv) ->
    Client ! go,
    receive {done, Client} -> ok end,
    ok = msgflow:stop(),
    Name = fun(P) when P =:= Client -> client; (P) when P =:= Srv -> srv; (P) -> P end,
    Pairs = lists:sort([{Name(S), Name(R), K, T, N}
                        || {S, R, K, T, N} <- msgflow:pairs(kinds), lists:member(S, [Client, Srv]),
                           lists:member(R, [Client, Srv])]),
    gen_server:stop(Srv),
    Pairs.

%% logger handler of reads_workload/0: msgflow's warnings, as text
log(#{level := warning, msg := {Fmt, Args}}, #{config := #{to := To}})
  when is_list(Fmt), is_list(Args) ->
    case lists:prefix("msgflow:", Fmt) of
        true -> To ! {logged, unicode:characters_to_binary(io_lib:format(Fmt, Args))};
        false -> ok
    end;
log(_, _) ->
    ok.

%%% Helpers

%% A call every Ms milliseconds until killed (the workload's pace).
paced_calls(Srv, Ms) ->
    {ok, 1} = gen_server:call(Srv, {get, 1}),
    {ok, 1} = gen_server:call(Srv, {get, 1}, infinity),
    receive after Ms -> paced_calls(Srv, Ms) end.

%% A cast to each of Sinks every 5 ms until killed.
spread(Sinks) ->
    [gen_server:cast(S, m) || S <- Sinks],
    receive after 5 -> spread(Sinks) end.


workload(Srv) ->
    Self = self(),
    PortOwner = spawn(fun() ->
                              P = open_port({spawn, "cat"}, [binary, {packet, 4}]),
                              Self ! {port, P},
                              receive go -> ok end,
                              [begin P ! {self(), {command, <<I>>}},
                                     receive {P, {data, _}} -> ok end end
                               || I <- lists:seq(1, ?PACKETS)],
                              Self ! port_done,
                              receive stop -> port_close(P) end
                      end),
    Port = receive {port, P} -> P end,
    Client = spawn(fun() ->
                           receive go -> ok end,
                           [{ok, I} = gen_server:call(Srv, {get, I}) || I <- lists:seq(1, ?GETS)],
                           [ok = gen_server:call(Srv, put) || _ <- lists:seq(1, ?PUTS)],
                           [gen_server:cast(Srv, {add, I}) || I <- lists:seq(1, ?CASTS)],
                           [Srv ! {tick, I} || I <- lists:seq(1, ?TICKS)],
                           [Srv ! <<"bin">> || _ <- lists:seq(1, ?BINS)],
                           [Srv ! {'EXIT', self(), shutdown} || _ <- lists:seq(1, ?EXITS)],
                           [Srv ! {'DOWN', make_ref(), process, self(), normal}
                            || _ <- lists:seq(1, ?DOWNS)],
                           %% the server has handled all: its events are sent
                           {ok, 0} = gen_server:call(Srv, {get, 0}),
                           ok
                   end),
    Ref = monitor(process, Client),
    ok = msgflow:start(#{procs => all, interval => 3600000}),
    Client ! go,
    PortOwner ! go,
    receive {'DOWN', Ref, process, Client, normal} -> ok end,
    receive port_done -> ok end,
    PortOwner ! stop,
    {Client, Port, PortOwner}.

view_rows(Spec) ->
    Store = msgflow_collector:store(true),
    #{rows := Rows} = msgflow_rows:build(Store, Spec),
    Rows.

row_of(S, R, Rows) ->
    case [Row || Row = #{sender := S1, receiver := R1} <- Rows, S1 =:= S, R1 =:= R] of
        [Row] -> Row;
        [] -> error({no_row, S, R})
    end.

index(T, Tags) ->
    length(lists:takewhile(fun(X) -> X =/= T end, Tags)) + 1.

sink() ->
    receive _ -> sink() end.
