%%% Bottlenecks on planted causes whose answer is known (issue 56): a
%%% chain of calls to a slow server, one server flooded by casts, the
%%% same casts spread over 20 servers with room to spare, and call cycles
%%% that deadlock.  The cases assert verdicts and chains, never timings:
%%% a server that sleeps 2 ms a call is saturated by 100 callers however
%%% fast the machine is, and on a machine whose cores are busy with other
%%% work a `node_saturated' finding may come too (never another process).
%%% Barriers: msgflow_collector:await_windows/2 (the readings of a window
%%% are those of the processes chosen as the one before closed).
-module(msgflow_bottlenecks_SUITE).
-include_lib("stdlib/include/assert.hrl").
-include_lib("common_test/include/ct.hrl").
-export([suite/0, all/0]).
-export([chain/1, flooded_by_casts/1, room_to_spare/1, deadlock_two/1, deadlock_three/1, cycle_by_name/1,
         hotspots_first/1,
         bad_process/1, selective_receive/1, large_messages/1, accumulating_relay/1, alerts/1,
         across_nodes/1]).
-export([log/2, b_loop/0]).

suite() ->
    [{ct_hooks, [msgflow_test_hook]}, {timetrap, {minutes, 3}}].

all() ->
    [chain, flooded_by_casts, room_to_spare, deadlock_two, deadlock_three, cycle_by_name, hotspots_first,
     bad_process,
     selective_receive, large_messages, accumulating_relay, alerts, across_nodes].

%% 100 callers -> front (forwards each call to back) -> back (sleeps 2
%% ms a call): back is the one root, front is blocked on it and the
%% callers wait on front; why/1 of front and of a caller ends at back.
chain(_Config) ->
    ok = msgflow:start(#{interval => 300}),
    Back = msgflow_planted:server({sleep, 2}),
    Front = msgflow_planted:server({forward, Back}),
    Callers = msgflow_planted:callers(100, Front, req),
    ok = msgflow_collector:await_windows(4, 30000),
    V = msgflow:view(bottlenecks, #{}),
    msgflow_planted:stop(Callers ++ [Front, Back]),
    ct:log("~ts", [msgflow_bottlenecks_view:text(V, #{}, #{width => 120, height => 40})]),
    [Root] = processes(V),
    ?assertMatch(#{verdict := saturated, subject := Back}, Root),
    #{evidence := #{busy := Busy}, waiters := Waiters} = Root,
    ?assert(Busy >= 0.9),
    %% front waits on back, and the callers on front
    [#{waiter := Front, waiters := FrontWaiters}] = [W || W = #{waiter := P} <- Waiters, P =:= Front],
    ?assertEqual(100, lists:sum([N || #{members := N, label := L} <- FrontWaiters,
                                      L =:= <<"msgflow_planted:callers/3 fun">>])),
    [#{share := Share, on := Back}] = [B || B = #{process := P} <- maps:get(blocked, V), P =:= Front],
    ?assert(Share >= 0.5),
    %% no finding names a caller
    ?assertEqual([], [C || C = #{subject := S} <- maps:get(causes, V), lists:member(S, Callers)]),
    Why = text(msgflow:view(bottlenecks, #{process => Front})),
    {match, _} = re:run(Why, "waits on: .*" ++ pid_re(Back) ++ ".* root: saturated"),
    WhyCaller = text(msgflow:view(bottlenecks, #{process => hd(Callers)})),
    ct:log("~ts~n~ts", [Why, WhyCaller]).

%% 50 casters, one cast each every 5 ms, to one server that sleeps 1 ms a
%% cast: it is saturated (its mailbox grows), a root with its arrivals.
flooded_by_casts(_Config) ->
    ok = msgflow:start(#{interval => 300}),
    Srv = msgflow_planted:server({sleep, 1}),
    Casters = msgflow_planted:casters(50, [Srv], 5, work),
    ok = msgflow_collector:await_windows(4, 30000),
    V = msgflow:view(bottlenecks, #{}),
    msgflow_planted:stop(Casters ++ [Srv]),
    ct:log("~ts", [msgflow_bottlenecks_view:text(V, #{}, #{width => 120, height => 40})]),
    [#{verdict := saturated, subject := Srv, evidence := E}] = processes(V),
    ?assert(maps:get(busy, E) >= 0.9 orelse maps:get(growing, E)),
    ?assert(maps:get(in_per_s, E) > 0).

%% The same casts spread over 20 servers that answer at once: no process
%% is a bottleneck.
room_to_spare(_Config) ->
    ok = msgflow:start(#{interval => 300}),
    Srvs = [msgflow_planted:server(idle) || _ <- lists:seq(1, 20)],
    Casters = msgflow_planted:casters(50, Srvs, 5, work),
    ok = msgflow_collector:await_windows(4, 30000),
    V = msgflow:view(bottlenecks, #{}),
    msgflow_planted:stop(Casters ++ Srvs),
    ct:log("~ts", [msgflow_bottlenecks_view:text(V, #{}, #{width => 120, height => 40})]),
    ?assertEqual([], processes(V)),
    %% every server was watched: the verdict is from their readings, not
    %% from none
    ?assertEqual(lists:sort(Srvs), lists:sort([P || #{process := P} <- maps:get(loads, V), lists:member(P, Srvs)])).

%% Two servers that call each other at once (30 s timeouts): a deadlock,
%% from the exact counts of calls and replies.
deadlock_two(_Config) ->
    deadlock(2).

%% Three in a cycle: a deadlock of three.
deadlock_three(_Config) ->
    deadlock(3).

deadlock(N) ->
    ok = msgflow:start(#{interval => 300}),
    Srvs = [begin {ok, P} = gen_server:start(msgflow_planted, {peer, 30000}, []), P end
            || _ <- lists:seq(1, N)],
    Self = self(),
    Runner = spawn(fun() -> Self ! {cycle, msgflow_planted:cycle(Srvs, 30000)} end),
    %% each server in its call to the next, then the calls counted
    ok = blocked(Srvs),
    _ = [erlang:trace_delivered(P) || P <- [Runner | Srvs]],
    ok = msgflow_collector:await_windows(2, 30000),
    V = msgflow:view(bottlenecks, #{}),
    ct:log("~ts", [msgflow_bottlenecks_view:text(V, #{}, #{width => 120, height => 40})]),
    msgflow_planted:stop([Runner | Srvs]),
    [#{verdict := deadlock, subject := Cycle, evidence := #{unanswered := Un}}] =
        [C || C = #{verdict := D} <- maps:get(causes, V), D =:= deadlock orelse D =:= call_cycle],
    ?assertEqual(lists:sort(Srvs), lists:sort(Cycle)),
    ?assertEqual(N, length(Un)),
    ?assert(lists:all(fun({_, _, U}) -> U =:= 1 end, Un)).

%% Two pools that call each other, though no process does: pool a
%% (msgflow_planted servers, label `msgflow_planted:init/1') and pool b
%% (processes of this suite's b_loop/0); a1 calls b1 and b2 calls a2, 5
%% times each, every call answered.  One cause: a call cycle by name
%% a -> b -> a, 5 calls each way from one process to one; no cycle of
%% processes.
cycle_by_name(_Config) ->
    ok = msgflow:start(#{interval => 300}),
    [A1, A2] = [msgflow_planted:server({peer, 5000}) || _ <- [1, 2]],
    [B1, B2] = [proc_lib:spawn_link(?MODULE, b_loop, []) || _ <- [1, 2]],
    [pong = gen_server:call(A1, {call, B1}) || _ <- lists:seq(1, 5)],
    [pong = gen_server:call(B2, {call, A2}) || _ <- lists:seq(1, 5)],
    _ = [erlang:trace_delivered(P) || P <- [A1, A2, B1, B2]],
    ok = msgflow_collector:await_windows(2, 30000),
    V = msgflow:view(bottlenecks, #{}),
    ct:log("~ts", [text(V)]),
    %% hotspots() lists it first, as it prints it
    Hot = unicode:characters_to_binary(msgflow_test_io:capture(fun() -> msgflow:hotspots() end)),
    ct:log("~ts", [Hot]),
    ?assertMatch({match, _}, re:run(Hot, "bottleneck +.*call cycle by name: ")),
    msgflow_planted:stop([A1, A2, B1, B2]),
    LA = <<"msgflow_planted:init/1">>,
    LB = <<"msgflow_bottlenecks_SUITE:b_loop/0">>,
    Cycles = [C || C = #{verdict := D} <- maps:get(causes, V), D =:= deadlock orelse D =:= call_cycle],
    ?assertMatch([#{verdict := call_cycle, evidence := #{by := name}}], Cycles),
    [#{subject := Subject, evidence := #{calls := Calls}}] = Cycles,
    ?assertEqual(lists:sort([LA, LB]), lists:sort(Subject)),
    ?assertEqual(lists:sort([{LA, LB, 5, 1, 1}, {LB, LA, 5, 1, 1}]), lists:sort(Calls)),
    ?assertMatch({match, _}, re:run(text(V), "call cycle by name: ")).

%% A process that answers `ping' and, told `{call, Peer}', calls Peer's
%% `ping' and answers with what it got (gen_server's call protocol, by hand).
b_loop() ->
    receive
        {'$gen_call', From, ping} ->
            gen_server:reply(From, pong);
        {'$gen_call', From, {call, Peer}} ->
            gen_server:reply(From, gen_server:call(Peer, ping))
    end,
    b_loop().

%% hotspots() lists the bottlenecks before the other rules' findings.
hotspots_first(_Config) ->
    ok = msgflow:start(#{interval => 300}),
    Srv = msgflow_planted:server({sleep, 1}),
    Casters = msgflow_planted:casters(50, [Srv], 5, work),
    ok = msgflow_collector:await_windows(4, 30000),
    Fs = msgflow:view(hotspots, #{}),
    msgflow_planted:stop(Casters ++ [Srv]),
    ct:log("~p", [Fs]),
    [#{rule := bottleneck, subject := Srv, evidence := #{verdict := saturated}} | _] = Fs.

%% A process nobody holds is an error naming it, not a crash.
bad_process(_Config) ->
    ok = msgflow:start(#{interval => 300}),
    {error, {badopt, {process, no_such_name_here}, _}} = msgflow:view(bottlenecks, #{process => no_such_name_here}),
    {error, {badopt, {process, "<0.x.0>"}, _}} = msgflow:view(bottlenecks, #{process => "<0.x.0>"}),
    {error, {badopt, {process, 42}, _}} = msgflow:view(bottlenecks, #{process => 42}).

%% A server whose every cast looks through its whole mailbox, fed by 20
%% casters: the mailbox grows and each look costs more; a root, busy.
selective_receive(_Config) ->
    ok = msgflow:start(#{interval => 300}),
    Srv = msgflow_planted:server(selective),
    Casters = msgflow_planted:casters(20, [Srv], 5, work),
    ok = msgflow_collector:await_windows(4, 30000),
    V = msgflow:view(bottlenecks, #{}),
    msgflow_planted:stop(Casters ++ [Srv]),
    ct:log("~ts", [msgflow_bottlenecks_view:text(V, #{}, #{width => 120, height => 40})]),
    [#{verdict := saturated, subject := Srv, evidence := E}] = processes(V),
    ?assert(maps:get(busy, E) >= 0.9 orelse maps:get(growing, E)).

%% A server that copies the 1 MB binary each cast carries, flooded: a
%% head-of-line root, with the size named.
large_messages(_Config) ->
    ok = msgflow:start(#{interval => 300, size_sample => 1}),
    Srv = msgflow_planted:server(copy),
    Big = binary:copy(<<1>>, 1 bsl 20),
    Casters = msgflow_planted:casters(20, [Srv], 1, {big, Big}),
    ok = msgflow_collector:await_windows(4, 30000),
    V = msgflow:view(bottlenecks, #{}),
    msgflow_planted:stop(Casters ++ [Srv]),
    Text = text(V),
    ct:log("~ts", [Text]),
    [#{verdict := head_of_line, subject := Srv, evidence := #{size := #{bytes_mean := B}}}] = processes(V),
    ?assert(B >= 1 bsl 20),
    {match, _} = re:run(Text, "head-of-line: .*\n.*carry 1\.0M each").

%% A relay that takes 1,000 casts/s and passes 1 in 10 on, keeping the
%% rest in its state: accumulating, its downstream named.
accumulating_relay(_Config) ->
    ok = msgflow:start(#{interval => 300}),
    Down = msgflow_planted:server(idle),
    Relay = msgflow_planted:server({relay, Down, 10}),
    Casters = msgflow_planted:casters(10, [Relay], 10, {work, lists:seq(1, 20)}),
    ok = msgflow_collector:await_windows(5, 30000),
    V = msgflow:view(bottlenecks, #{}),
    msgflow_planted:stop(Casters ++ [Relay, Down]),
    ct:log("~ts", [text(V)]),
    [#{verdict := accumulating, subject := Relay, evidence := #{downstream := Down}}] = processes(V).

%% A chain across nodes: 30 callers here calling a server on another node
%% that sleeps 2 ms a call.  The server's node names it (its replies are
%% counted there, its calls here); the callers, counted here, are joined
%% to it as its waiters.
across_nodes(_Config) ->
    {Peer, Node} = msgflow_test_lib:cluster_peer(true),
    try
        {ok, Srv} = erpc:call(Node, gen_server, start, [msgflow_planted, {sleep, 2}, []]),
        ok = msgflow:start(#{interval => 300, nodes => [Node]}),
        Callers = msgflow_planted:callers(30, Srv, req),
        ok = msgflow_collector:await_windows(4, 30000),
        ok = erpc:call(Node, msgflow_collector, await_windows, [2, 30000]),
        V = msgflow:view(bottlenecks, #{}),
        msgflow_planted:stop(Callers),
        ct:log("~ts", [text(V)]),
        [#{verdict := saturated, subject := Srv, node := Node, waiters := Ws}] = processes(V),
        ?assertEqual(30, lists:sum([N || #{label := L, members := N} <- Ws,
                                         L =:= <<"msgflow_planted:callers/3 fun">>]))
    after
        ok = msgflow:stop(),
        peer:stop(Peer)
    end.

%% The detector logs a root once as it appears and once as it clears,
%% /metrics has it while it stands, and the run's history holds both
%% marks: in the writer's report (info()'s `history', which the web
%% page's slider marks) and in the segment's frames.
alerts(Config) ->
    ok = logger:add_handler(bottleneck_test, ?MODULE, #{config => #{pid => self()}}),
    Dir = filename:join(?config(priv_dir, Config), "alerts_history"),
    try
        ok = msgflow:start(#{interval => 300, history => #{dir => Dir}}),
        Srv = msgflow_planted:server({sleep, 1}),
        Casters = msgflow_planted:casters(50, [Srv], 5, work),
        #{verdict := saturated, label := Label} = receive_log(appeared, Srv),
        Fs = msgflow_alerts:families(),
        {_, gauge, _, Series} = lists:keyfind(<<"msgflow_bottleneck">>, 1, Fs),
        ?assert(lists:member({[{process, Label}, {verdict, <<"saturated">>}], 1}, Series)),
        msgflow_planted:stop(Casters),
        #{verdict := saturated} = receive_log(cleared, Srv),
        msgflow_planted:stop([Srv]),
        %% once each
        receive {bottleneck_log, #{event := E, subject := Srv}} -> ct:fail({again, E}) after 0 -> ok end,
        %% (the detector has marked it once it answers; the stop closes a
        %% last window, written with the marks the writer holds)
        _ = msgflow_alerts:roots(),
        ok = msgflow:stop(),
        Subject = list_to_binary(pid_to_list(Srv)),
        Mine = fun(Ms) -> [{E1, V} || {_, E1, V, L, S} <- Ms, L =:= Label, S =:= Subject] end,
        Expected = [{<<"appeared">>, <<"saturated">>}, {<<"cleared">>, <<"saturated">>}],
        #{history := #{marks := Reported}} = msgflow:info(),
        ?assertEqual(Expected, lists:reverse(Mine(Reported))),
        Written = lists:append([Ms || #{file := F} <- msgflow_history_file:list(Dir, [node()]),
                                      {ok, Wins, _} <- [msgflow_history_file:read(F)],
                                      #{marks := Ms} <- Wins]),
        ?assertEqual(Expected, Mine(Written))
    after
        logger:remove_handler(bottleneck_test)
    end.

%% (logger handler callback: the reports to the test process)
log(#{msg := {report, R = #{msgflow := bottleneck}}}, #{config := #{pid := Pid}}) ->
    Pid ! {bottleneck_log, R};
log(_, _) ->
    ok.

receive_log(Event, Subject) ->
    receive
        {bottleneck_log, R = #{event := Event, subject := Subject}} -> R
    after 60000 -> ct:fail({no_log, Event, Subject})
    end.

%% Each of Srvs waiting in a call (polled: the cycle's calls are made
%% by other processes, and only their state says they are in it).
blocked(Srvs) ->
    blocked(Srvs, 2000).

blocked(_, 0) ->
    error(not_blocked);
blocked(Srvs, Tries) ->
    case lists:all(fun(P) -> case process_info(P, current_function) of {current_function, {gen, do_call, _}} -> true; _ -> false end end, Srvs) of
        true -> ok;
        false -> receive after 5 -> blocked(Srvs, Tries - 1) end
    end.

%% The causes that name a process (a node's saturation aside).
processes(#{causes := Cs}) ->
    [C || C = #{verdict := V} <- Cs, V =/= node_saturated].

text(V) ->
    unicode:characters_to_list(msgflow_bottlenecks_view:text(V, #{}, #{width => 120, height => 40})).

pid_re(P) ->
    re:replace(pid_to_list(P), "[<>.]", "\\\\&", [global, {return, list}]).
