%%% Request flows (seq_trace; the system tracer is node-global): a followed
%%% chain and port, follow_calls exact and sampled, the system tracer busy,
%%% odd callbacks, errors, a flow never quiet, the flow keeper killed.
%%% Cases run one at a time (tracing is node-global), each on its own;
%%% barriers are msgflow:stop/0 and messages from the workload, never
%%% sleeps.  Helpers shared with other suites are in msgflow_test_lib and
%%% msgflow_workloads.
-module(msgflow_flows_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([follow_chain/1, follow_port/1, follow_calls_exact/1, follow_calls_sample/1,
         follow_system_tracer_busy/1, flow_callbacks_odd/1, follow_calls_errors/1,
         follow_never_quiet/1, keeper_killed/1]).
%% run by spawn, peers or behaviours
-export([chain_hop/1, flow_caller/3, flow_plain_caller/2, flow_request/1]).

all() ->
    [follow_chain, follow_port, follow_calls_exact, follow_calls_sample,
     follow_system_tracer_busy, flow_callbacks_odd, follow_calls_errors,
     follow_never_quiet, keeper_killed].

%% set-up and clean-up around the suite and each case: msgflow_test_hook
suite() ->
    [{ct_hooks, [msgflow_test_hook]}].

%% A chain of three processes, the first registered: one request is 6
%% messages (3 down, 3 back), 6 deep, in causal order; the same whether
%% msgflow:start/1 runs or not, and the system tracer is false after.
follow_chain(_Config) ->
    C = spawn_link(?MODULE, chain_hop, [undefined]),
    B = spawn_link(?MODULE, chain_hop, [C]),
    A = spawn_link(?MODULE, chain_hop, [B]),
    register(flow_chain_a, A),
    Self = self(),
    Request = fun() -> Ref = make_ref(), flow_chain_a ! {Self, Ref, 7},
                       receive {Ref, X} -> X end end,
    Check = fun(Running) ->
                    {Result, Flow} = msgflow:follow(Request, #{print => Running}),
                    ?assertEqual(7, Result),
                    #{messages := 6, depth := 6, dropped := 0, processes := Procs,
                      pairs := Pairs, events := Evs, labels := Labels} = Flow,
                    ?assertEqual(lists:sort([Self, A, B, C]), lists:sort(Procs)),
                    ?assertEqual(lists:sort([{Self, A, 1}, {A, B, 1}, {B, C, 1}, {C, B, 1},
                                             {B, A, 1}, {A, Self, 1}]), lists:sort(Pairs)),
                    ?assertEqual([{Self, A, 1}, {A, B, 2}, {B, C, 3}, {C, B, 4}, {B, A, 5},
                                  {A, Self, 6}],
                                 [{F, T, D} || #{from := F, to := T, depth := D} <- Evs]),
                    Serials = [Cur || #{serial := {_, Cur}} <- Evs],
                    ?assertEqual(lists:sort(Serials), Serials),
                    ?assertEqual(<<"flow_chain_a">>, maps:get(A, Labels)),
                    ?assertEqual(<<"msgflow_flows_SUITE:chain_hop/1">>, maps:get(C, Labels)),
                    ?assertEqual(false, seq_trace:get_system_tracer()),
                    ?assertEqual([], seq_trace:get_token()),
                    Flow
            end,
    _ = Check(false),
    ok = msgflow:start(),
    Flow = Check(true),
    %% the shell's diagram and the Mermaid export of the last flow
    Text = lists:flatten(io_lib:format("~s", [msgflow_flow_render:text(Flow)])),
    ?assertMatch({match, _}, re:run(Text, "6 messages between 4 processes, depth 6")),
    Dir = ?config(priv_dir, _Config),
    Mmd = filename:join(Dir, "flow.mmd"),
    ok = msgflow:export(Mmd, mermaid),
    {ok, Bin} = file:read_file(Mmd),
    Lines = binary:split(Bin, <<"\n">>, [global, trim]),
    ?assertEqual(<<"sequenceDiagram">>, hd(Lines)),
    ?assertEqual(4, length([L || <<"    participant ", _/binary>> = L <- Lines])),
    ?assertEqual(6, length([L || L <- Lines, binary:match(L, <<"->>">>) =/= nomatch])),
    %% the HTML page has it, for Mermaid to draw as a sequence diagram
    Html = filename:join(Dir, "flow.html"),
    ok = msgflow:export(Html, html),
    {ok, H} = file:read_file(Html),
    [_, AfterState] = binary:split(H, <<"<script type=\"application/json\" id=\"msgflow-state\">">>),
    [State | _] = binary:split(AfterState, <<"</script>">>),
    [_, Last] = binary:split(State, <<"\"last\":{">>),
    ?assertNotEqual(nomatch, binary:match(Last, <<"sequenceDiagram">>)),
    ?assertEqual(6, length(binary:matches(Last, <<"->>">>))),
    ok = msgflow:stop(),
    [begin unlink(P), exit(P, kill) end || P <- [A, B, C]],
    ok.

chain_hop(Next) ->
    receive
        {From, Ref, X} when Next =:= undefined ->
            From ! {Ref, X};
        {From, Ref, X} ->
            R = make_ref(),
            Next ! {self(), R, X},
            receive {R, Y} -> From ! {Ref, Y} end
    end,
    chain_hop(Next).

%% seq_trace does not cross ports: the send to the port is in the flow,
%% and the port's answer is no message of it.  A message from a port
%% leaves its receiver's token as it was (ERTS marks it as having no token
%% information, unlike a process's message without a token, which clears
%% it), so what the worker sends after it (to the sink, back to the
%% caller) is in the flow, one step deeper than the request.
follow_port(_Config) ->
    Self = self(),
    Sink = spawn_link(fun msgflow_test_lib:sink/0),
    Worker = spawn_link(
               fun() ->
                       Port = open_port({spawn, "cat"}, [binary]),
                       Self ! {port, Port},
                       (fun Loop() ->
                                receive
                                    {From, Ref, Data} ->
                                        Port ! {self(), {command, Data}},
                                        receive {Port, {data, Got}} -> ok end,
                                        Sink ! Got,
                                        From ! {Ref, Got},
                                        Loop()
                                end
                        end)()
               end),
    Port = receive {port, P} -> P end,
    {<<"ping">>, Flow} =
        msgflow:follow(fun() -> Ref = make_ref(), Worker ! {Self, Ref, <<"ping">>},
                                receive {Ref, X} -> X end end),
    ?assertMatch(#{messages := 4, depth := 2}, Flow),
    ?assertEqual(lists:sort([{Self, Worker, 1}, {Worker, Port, 1}, {Worker, Sink, 1},
                             {Worker, Self, 1}]),
                 lists:sort(maps:get(pairs, Flow))),
    ?assertEqual([{Self, Worker, 1}, {Worker, Port, 2}, {Worker, Sink, 2}, {Worker, Self, 2}],
                 [{F, T, D} || #{from := F, to := T, depth := D} <- maps:get(events, Flow)]),
    %% the caller's token is back to what it was
    ?assertEqual([], seq_trace:get_token()),
    [begin unlink(X), exit(X, kill) end || X <- [Worker, Sink]],
    ok.

%% The entry point of the follow_calls tests: two gen_servers deep, so 4
%% messages a request.
flow_request(X) ->
    gen_server:call(flow_srv, {get, X}).

flow_servers() ->
    {ok, Db} = msgflow_flow_srv:start(flow_db, undefined),
    {ok, Srv} = msgflow_flow_srv:start(flow_srv, flow_db),
    {Srv, Db}.

%% A fresh caller: one request, then 2 messages to the sink while it still
%% holds the token the reply brought back; then it waits for `go' (a
%% message without a token, which clears it) and sends 1 more to the sink
%% and `done', neither counted.  It stays alive until `exit' so that its
%% label is read.
flow_caller(Parent, Sink, X) ->
    X = flow_request(X),
    Sink ! {after_reply, 1},
    Sink ! {after_reply, 2},
    Parent ! {replied, self()},
    receive go -> ok end,
    Sink ! cleared,
    Parent ! {done, self()},
    receive exit -> ok end.

flow_plain_caller(Parent, X) ->
    X = flow_request(X),
    Parent ! {done, self()}.

%% 20 fresh callers through a function followed with follow_calls/2, every
%% call: exactly 20 requests and 6 messages each (4 for the request, 2 the
%% caller sends while the reply's token is still its own), by label.
follow_calls_exact(_Config) ->
    {_Srv, _Db} = flow_servers(),
    Sink = spawn_link(fun msgflow_test_lib:sink/0),
    register(flow_sink, Sink),
    ok = msgflow:follow_calls({?MODULE, flow_request, 1}, #{}),
    ?assertMatch({msgflow_tracer, _}, seq_trace:get_system_tracer()),
    Self = self(),
    Callers = [spawn(?MODULE, flow_caller, [Self, flow_sink, I]) || I <- lists:seq(1, 20)],
    %% a caller sends `replied' while it holds the token: take it with
    %% this process's token cleared again after
    [receive {replied, C} -> ok end || C <- Callers],
    _ = seq_trace:set_token([]),
    [C ! go || C <- Callers],
    [receive {done, C} -> ok end || C <- Callers],
    [Summary] = msgflow_test_lib:flows_of(?MODULE, flow_request),
    Caller = <<"msgflow_flows_SUITE:flow_caller/3">>,
    Test = msgflow_describe:label(Self),
    ?assertMatch(#{entry := {?MODULE, flow_request, 1}, requests := 20, calls := 20,
                   messages := 140, depth := 5, depth_exact := true, running := true},
                 Summary),
    %% 20 `replied' messages to this process went with the token too
    ?assertEqual(lists:sort([{Caller, <<"flow_srv">>, 20}, {<<"flow_srv">>, <<"flow_db">>, 20},
                             {<<"flow_db">>, <<"flow_srv">>, 20}, {<<"flow_srv">>, Caller, 20},
                             {Caller, <<"flow_sink">>, 40}, {Caller, Test, 20}]),
                 lists:sort(maps:get(pairs, Summary))),
    ?assertEqual(7.0, maps:get(per_request, Summary)),
    ok = msgflow:unfollow(),
    ?assertEqual(false, seq_trace:get_system_tracer()),
    %% stopped: further calls are neither counted nor followed
    ok = flow_request_n(5),
    [Final] = msgflow_test_lib:flows_of(?MODULE, flow_request),
    ?assertMatch(#{requests := 20, calls := 20, messages := 140, running := false}, Final),
    [C ! exit || C <- Callers],
    [msgflow_flow_srv:stop(N) || N <- [flow_srv, flow_db]],
    unlink(Sink),
    exit(Sink, kill),
    ok.

flow_request_n(N) ->
    Self = self(),
    Ps = [spawn(?MODULE, flow_plain_caller, [Self, I]) || I <- lists:seq(1, N)],
    [receive {done, P} -> ok end || P <- Ps],
    _ = seq_trace:set_token([]),
    ok.

%% sample => 10: 50 calls, 5 followed, 4 messages each; the servers drop
%% the token at the next request, which has none.
follow_calls_sample(_Config) ->
    flow_servers(),
    ok = msgflow:follow_calls({?MODULE, flow_request, 1}, #{sample => 10}),
    %% one at a time: a server holds a followed request's token until the
    %% next request (without one) reaches it
    [ok = flow_request_n(1) || _ <- lists:seq(1, 50)],
    [S] = msgflow_test_lib:flows_of(?MODULE, flow_request),
    %% each followed caller also sent `done' with the token
    ?assertMatch(#{requests := 5, calls := 50, messages := 25, depth := 5, sample := 10}, S),
    ok = msgflow:unfollow(),
    [msgflow_flow_srv:stop(N) || N <- [flow_srv, flow_db]],
    ok.

%% Another tool's system tracer is never replaced.
follow_system_tracer_busy(_Config) ->
    Other = spawn_link(fun msgflow_test_lib:sink/0),
    false = seq_trace:set_system_tracer(Other),
    try
        ?assertEqual({error, {system_tracer_busy, Other}}, msgflow:follow(fun() -> ok end)),
        ?assertEqual({error, {system_tracer_busy, Other}},
                     msgflow:follow_calls({?MODULE, flow_request, 1}, #{})),
        ?assertEqual(Other, seq_trace:get_system_tracer()),
        ?assertEqual([], seq_trace:get_token())
    after
        seq_trace:set_system_tracer(false)
    end,
    unlink(Other),
    exit(Other, kill),
    ok.

%% The callbacks never raise: any label, print and 'receive' events, odd
%% shapes, states that are no flow session; counts stay exact.
flow_callbacks_odd(_Config) ->
    FS = msgflow_tracer:flow_session_new(self(), 100),
    Self = self(),
    Labels = [0, <<"bin">>, #{a => 1}, {deep, [1, 2, 3]}, make_ref(), 1.5],
    [ok = msgflow_tracer:trace(seq_trace, FS, L, {send, {0, I}, Self, Self, msg}, #{})
     || {I, L} <- lists:zip(lists:seq(1, length(Labels)), Labels)],
    Odd = [{print, {0, 1}, Self, [], info}, {'receive', {0, 1}, Self, Self, m},
           {send, bad, Self, Self, m}, {send, {0, 1}}, not_a_tuple, {}],
    [ok = msgflow_tracer:trace(seq_trace, FS, 0, E, #{}) || E <- Odd],
    [ok = msgflow_tracer:trace(seq_trace, S, 0, {send, {0, 1}, Self, Self, m}, #{})
     || S <- [undefined, make_ref(), {x}, msgflow_tracer:entry_new(1)]],
    [?assertEqual(trace, msgflow_tracer:enabled(seq_trace, FS, T)) || T <- [Self, undefined]],
    [?assertEqual(discard, msgflow_tracer:enabled(seq_trace, S, Self))
     || S <- [undefined, msgflow_tracer:session_new(self(), 10, 0)]],
    ?assertEqual(discard, msgflow_tracer:enabled_call(call, undefined, Self)),
    {Pairs, [], [], 0, 0} = msgflow_tracer:snapshot(FS),
    ?assertEqual(lists:sort([{{L, Self}, Self, 1} || L <- Labels]), lists:sort(Pairs)),
    %% a watched label keeps its events up to its cap; all are counted
    ok = msgflow_tracer:flow_watch(FS, <<"w">>, 2),
    [ok = msgflow_tracer:trace(seq_trace, FS, <<"w">>, {send, {I - 1, I}, Self, Self, m}, #{})
     || I <- lists:seq(1, 5)],
    {[{1, 2, Self, Self, _, info, m}, {0, 1, Self, Self, _, info, m}], done} =
        msgflow_tracer:flow_take(FS, <<"w">>),
    ?assertEqual({[], done}, msgflow_tracer:flow_take(FS, <<"w">>)),
    %% in chunks of 500, newest first; the watch is closed at the first
    ok = msgflow_tracer:flow_watch(FS, <<"c">>, 1200),
    [ok = msgflow_tracer:trace(seq_trace, FS, <<"c">>, {send, {I - 1, I}, Self, Self, m}, #{})
     || I <- lists:seq(1, 1300)],
    {C1, more} = msgflow_tracer:flow_take(FS, <<"c">>),
    ok = msgflow_tracer:trace(seq_trace, FS, <<"c">>, {send, {0, 9999}, Self, Self, m}, #{}),
    {C2, more} = msgflow_tracer:flow_take(FS, <<"c">>),
    {C3, done} = msgflow_tracer:flow_take(FS, <<"c">>),
    ?assertEqual({500, 500, 200}, {length(C1), length(C2), length(C3)}),
    ?assertEqual(lists:seq(1200, 1, -1), [Cur || {_, Cur, _, _, _, _, _} <- C1 ++ C2 ++ C3]),
    ?assertMatch({[{{<<"c">>, Self}, Self, 1301}, {{<<"w">>, Self}, Self, 5}], [], [], 0, 0},
                 (fun({P, D, R, O, OD}) -> {lists:sort(P), D, R, O, OD} end)(
                   msgflow_tracer:snapshot(FS))),
    %% an entry samples the first call, then every Every-th
    E = msgflow_tracer:entry_new(3),
    ?assertEqual([trace, discard, discard, trace, discard],
                 [msgflow_tracer:enabled(call, E, Self) || _ <- lists:seq(1, 5)]),
    ?assertEqual({5, 2}, msgflow_tracer:entry_info(E)),
    ok = msgflow_tracer:entry_stop(E),
    ?assertEqual(remove, msgflow_tracer:enabled(trace_status, E, Self)),
    ?assertError(badarg, msgflow_tracer:entry_new(0)),
    ?assertError(badarg, msgflow_tracer:flow_watch(make_ref(), x, 1)),
    ok.

%% The flow keeper killed while a follow_calls entry is on: msgflow's
%% supervisor starts it again, and no pattern of msgflow's is left on the
%% function, nor its flow session as the system tracer (before OTP 27 the
%% new keeper clears them; with trace sessions the session goes with the
%% one that made it); following works again.
keeper_killed(_Config) ->
    MFA = {lists, reverse, 1},
    ok = msgflow:follow_calls(MFA, #{for => 600000}),
    case msgflow_flags:mode(auto) of
        {ok, legacy} -> ?assertMatch({meta, {msgflow_tracer, _}}, erlang:trace_info(MFA, meta));
        {ok, session} -> ok
    end,
    Old = whereis(msgflow_flow_keeper),
    Ref = monitor(process, Old),
    exit(Old, kill),
    receive {'DOWN', Ref, _, _, _} -> ok end,
    %% the new keeper has run its init once a call to it returns
    New = until_registered(msgflow_flow_keeper, Old),
    _ = sys:get_state(New),
    ?assertEqual({meta, false}, erlang:trace_info(MFA, meta)),
    ?assertEqual(false, seq_trace:get_system_tracer()),
    ok = msgflow:follow_calls(MFA, #{for => 600000}),
    ok = msgflow:unfollow(),
    ?assertEqual({meta, false}, erlang:trace_info(MFA, meta)).

until_registered(Name, Old) ->
    case whereis(Name) of
        P when is_pid(P), P =/= Old -> P;
        _ -> receive after 10 -> until_registered(Name, Old) end
    end.

%% Bad input is an error naming it, and leaves nothing behind.
follow_calls_errors(_Config) ->
    ?assertEqual({error, {no_such_function, {?MODULE, no_such_fun, 3}}},
                 msgflow:follow_calls({?MODULE, no_such_fun, 3}, #{})),
    ?assertMatch({error, {badopt, {sample, 0}, [_ | _]}},
                 msgflow:follow_calls({?MODULE, flow_request, 1}, #{sample => 0})),
    ?assertMatch({error, {badopt, {bogus, 1}, [_ | _]}}, msgflow:follow(fun() -> ok end, #{bogus => 1})),
    ?assertMatch({error, {badarg, {'fun', not_a_fun}, [_]}}, msgflow:follow(not_a_fun, #{})),
    ?assertMatch({error, {badarg, {mfa, {a, b}}, [_]}}, msgflow:follow_calls({a, b}, #{})),
    ok = msgflow:follow_calls({?MODULE, flow_request, 1}, #{for => 60000}),
    ?assertEqual({error, {already_following, {?MODULE, flow_request, 1}}},
                 msgflow:follow_calls({?MODULE, flow_request, 1}, #{})),
    ok = msgflow:unfollow(),
    %% another tool's meta pattern on the function stays: before OTP 27
    %% the function has one meta tracer, so follow_calls is refused; with
    %% trace sessions both have theirs
    MFA = {?MODULE, flow_request, 1},
    1 = erlang:trace_pattern(MFA, true, [{meta, self()}]),
    case msgflow_flags:mode(auto) of
        {ok, legacy} ->
            ?assertEqual({error, {meta_traced_by_another_tool, MFA}},
                         msgflow:follow_calls(MFA, #{}));
        {ok, session} ->
            ok = msgflow:follow_calls(MFA, #{}),
            ok = msgflow:unfollow()
    end,
    ?assertEqual({meta, self()}, erlang:trace_info(MFA, meta)),
    erlang:trace_pattern(MFA, false, [meta]),
    %% an exception in Fun is raised again, with the token put back
    ?assertError(boom, msgflow:follow(fun() -> error(boom) end)),
    ?assertEqual([], seq_trace:get_token()),
    ?assertEqual(false, seq_trace:get_system_tracer()),
    ok.

%% A process that keeps the token and sends to itself forever: follow/2
%% returns at its timeout with what was counted, `quiet => false'.
follow_never_quiet(_Config) ->
    Looper = spawn_link(fun() -> receive start -> ok end, self_loop_forever() end),
    T0 = erlang:monotonic_time(millisecond),
    {ok, Flow} = msgflow:follow(fun() -> Looper ! start, ok end, #{timeout => 300}),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ?assertMatch(#{quiet := false}, Flow),
    ?assert(Ms >= 300 andalso Ms < 5000),
    #{messages := M, pairs := [{Self, Looper, 1}, {Looper, Looper, Loops}]} =
        maps:update_with(pairs, fun lists:sort/1, Flow),
    ?assertEqual(self(), Self),
    ?assertEqual(M, Loops + 1),
    unlink(Looper),
    exit(Looper, kill),
    ?assertEqual(false, seq_trace:get_system_tracer()),
    ok.

self_loop_forever() ->
    self() ! tick,
    receive tick -> ok end,
    self_loop_forever().

%%% Cluster (issue 15): peer nodes on this machine
