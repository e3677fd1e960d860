%%% Views built from a live run: the communication matrix by each grouping,
%%% hotspots (a bottleneck found, a balanced load not), the kept history's
%%% windows, labels of exited and proc_lib processes.
%%% Cases run one at a time (tracing is node-global), each on its own;
%%% barriers are msgflow:stop/0 and messages from the workload, never
%%% sleeps.  Helpers shared with other suites are in msgflow_test_lib and
%%% msgflow_workloads.
-module(msgflow_views_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([matrix_groupings/1, hotspot_bottleneck/1, hotspot_balanced/1, history_windows/1,
         labels_after_exit/1, proc_lib_labels/1]).
%% run by spawn, peers or behaviours
-export([init/1, short_lived/2, short_lived/3]).

all() ->
    [matrix_groupings, hotspot_bottleneck, hotspot_balanced, history_windows,
     labels_after_exit, proc_lib_labels].

%% set-up and clean-up around the suite and each case: msgflow_test_hook
suite() ->
    [{ct_hooks, [msgflow_test_hook]}].

%% The matrix of a known workload (mx_workload/0), exact for every grouping.
matrix_groupings(_Config) ->
    Self = self(),
    {S1, S2, Sink} = msgflow_workloads:mx_workload(),
    Counts = fun(By) ->
                     #{by := By, cells := Cells} = msgflow:view(matrix, #{by => By}),
                     maps:map(fun(_, #{count := C}) -> C end, Cells)
             end,
    SelfMod = msgflow_describe:module_of(Self),
    SelfApp = case application:get_application(Self) of {ok, A} -> A; undefined -> undefined end,
    SelfLabel = msgflow_describe:label(Self),
    %% keys may coincide (e.g. the test process in no application): sum
    Expect = fun(KVs) -> lists:foldl(fun({K, N}, M) -> maps:update_with(K, fun(V) -> V + N end,
                                                                        N, M) end,
                                     #{}, KVs) end,
    ?assertEqual(#{{S1, Sink} => 8, {S2, Sink} => 7, {S1, Self} => 1, {S2, Self} => 1},
                 Counts(process)),
    ?assertEqual(#{{<<"msgflow_workloads:mx_sender/3">>, <<"msgflow_mx_sink">>} => 15,
                   {<<"msgflow_workloads:mx_sender/3">>, SelfLabel} => 2},
                 Counts(name)),
    ?assertEqual(Expect([{{msgflow_workloads, timer}, 15}, {{msgflow_workloads, SelfMod}, 2}]),
                 Counts(module)),
    ?assertEqual(Expect([{{undefined, undefined}, 15}, {{undefined, SelfApp}, 2}]),
                 Counts(application)),
    ?assertEqual(#{{node(), node()} => 17}, Counts(node)),
    #{rows := Rows, cols := Cols} = msgflow:view(matrix, #{by => process}),
    ?assertEqual(lists:sort([S1, S2]), lists:sort(Rows)),
    ?assertEqual(lists:sort([Sink, Self]), lists:sort(Cols)),
    ?assertEqual({error, {badarg, {by, bogus}, [process, name, module, application, node, kind]}},
                 msgflow:matrix(bogus)),
    [exit(P, kill) || P <- [S1, S2, Sink]].

%% Processes that exit before any snapshot keep the label they had: a
%% registered name, proc_lib's initial call (a supervisor is named as
%% proc_lib names it), the spawn's M:F/A, or where the fun it was spawned
%% from was written.  The interval is long, so the
%% only snapshot is the one stop/0 takes, after they all exited.
labels_after_exit(_Config) ->
    Self = self(),
    Sink = spawn_link(fun sink/0),
    ok = msgflow:start(#{procs => all, interval => 3600000}),
    Named = spawn(fun() -> register(msgflow_short, self()), short_lived(Sink, 3) end),
    Plain = spawn(?MODULE, short_lived, [Sink, 4]),
    Lib = proc_lib:spawn(?MODULE, short_lived, [Sink, 5, lib]),
    Anon = spawn(fun() -> short_lived(Sink, 6) end),
    {ok, Sup} = supervisor:start_link(?MODULE, []),
    unlink(Sup),
    Ref = make_ref(),
    Sup ! {'$gen_call', {Self, Ref}, which_children},
    receive {Ref, []} -> ok end,                %% the supervisor's reply
    SupRef = monitor(process, Sup),
    exit(Sup, kill),
    [begin MRef = monitor(process, P), receive {'DOWN', MRef, _, _, _} -> ok end end
     || P <- [Named, Plain, Lib, Anon]],
    receive {'DOWN', SupRef, _, _, _} -> ok end,
    ok = msgflow:stop(),
    Cells = maps:get(cells, msgflow:view(matrix, #{by => name})),
    Count = fun(From, To) -> maps:get(count, maps:get({From, To}, Cells, #{count => 0})) end,
    %% Sink, spawned from `fun sink/0' before tracing, is read live: the
    %% bottom of its stack
    SinkL = <<"msgflow_views_SUITE:sink/0">>,
    ?assertEqual(3, Count(<<"msgflow_short">>, SinkL)),
    ?assertEqual(4, Count(<<"msgflow_views_SUITE:short_lived/2">>, SinkL)),
    ?assertEqual(5, Count(<<"msgflow_views_SUITE:short_lived/3">>, SinkL)),
    %% spawned from a fun and gone before it was read: its spawn event
    %% named it
    ?assertEqual(6, Count(<<"msgflow_views_SUITE:labels_after_exit/1 fun">>, SinkL)),
    %% proc_lib's ack of the start and the reply to which_children
    ?assertEqual(2, Count(<<"supervisor:msgflow_views_SUITE/1">>, msgflow_describe:label(Self))),
    %% their module, from the spawn, for the module grouping
    MCells = maps:get(cells, msgflow:view(matrix, #{by => module})),
    ?assertMatch(#{count := 18}, maps:get({msgflow_views_SUITE, msgflow_views_SUITE}, MCells)),
    unlink(Sink),
    exit(Sink, kill).

%% A process that takes every message and keeps none; labelled as this
%% suite's (labels_after_exit reads it).
sink() ->
    receive _ -> sink() end.

%% supervisor callback for labels_after_exit: no children.
init([]) ->
    {ok, {#{}, []}}.

short_lived(Sink, N) ->
    [Sink ! m || _ <- lists:seq(1, N)],
    ok.

short_lived(Sink, N, _Tag) ->
    short_lived(Sink, N).

%% The planted bottleneck: 50 senders casting to one gen_server that
%% sleeps 1 ms per message, faster than it can serve.  After five windows
%% hotspots() reports a fan_in on it, with all 50 senders as evidence.
hotspot_bottleneck(_Config) ->
    {ok, Server} = gen_server:start(msgflow_slow_server, [], []),
    ok = msgflow:start(#{procs => all, interval => 100}),
    Senders = [spawn(fun() -> msgflow_workloads:paced_casts(Server, 2) end) || _ <- lists:seq(1, 50)],
    ok = msgflow_collector:await_windows(6, 10000),
    Found = msgflow:view(hotspots, #{}),
    [exit(S, kill) || S <- Senders],
    ok = msgflow:stop(),
    ct:log("~p", [Found]),
    FanIn = [F || F = #{rule := fan_in} <- Found],
    ?assertMatch([#{subject := Server, label := <<"msgflow_slow_server:init/1">>,
                    evidence := #{senders := 50, queue_len := [_, _, _, _, _]}}], FanIn),
    [#{evidence := #{queue_len := Lens}}] = FanIn,
    ?assert(lists:last(Lens) > hd(Lens)),
    exit(Server, kill).

%% The same 50 senders at a rate a plain sink keeps up with, and 50 pairs
%% of their own: no fan_in finding.  The sink keeps up however busy the
%% machine: a sender casts only while fewer than 8 of all their casts are
%% unread (a count each takes before a cast and the sink gives back as it
%% reads one), so its queue never reaches queue_min.
hotspot_balanced(_Config) ->
    Unread = atomics:new(1, []),
    Sink = spawn(fun() -> counting_sink(Unread) end),
    ok = msgflow:start(#{procs => all, interval => 100}),
    Senders = [spawn(fun() -> bounded_casts(Sink, Unread, 10) end) || _ <- lists:seq(1, 50)],
    Pairs = [begin R = spawn(fun msgflow_test_lib:sink/0), {spawn(fun() -> msgflow_workloads:paced_casts(R, 1) end), R} end
             || _ <- lists:seq(1, 50)],
    ok = msgflow_collector:await_windows(6, 10000),
    Found = msgflow:view(hotspots, #{}),
    [exit(P, kill) || P <- Senders ++ lists:append([[A, B] || {A, B} <- Pairs])],
    ok = msgflow:stop(),
    ct:log("~p", [Found]),
    ?assertEqual([], [F || F = #{rule := fan_in} <- Found]),
    exit(Sink, kill).

%% A cast every Ms milliseconds until killed, while fewer than 8 casts
%% counted in Unread are unread.
bounded_casts(To, Unread, Ms) ->
    case atomics:add_get(Unread, 1, 1) of
        N when N =< 8 -> gen_server:cast(To, m);
        _ -> atomics:sub(Unread, 1, 1)
    end,
    receive after Ms -> bounded_casts(To, Unread, Ms) end.

counting_sink(Unread) ->
    receive _ -> atomics:sub(Unread, 1, 1) end,
    counting_sink(Unread).

%% history/2 gives the pair's messages per window: a burst of 6, one window
%% later a burst of 9, a registered name merged with its pid.
history_windows(_Config) ->
    Sink = spawn_link(fun msgflow_test_lib:sink/0),
    register(msgflow_hist_sink, Sink),
    Self = self(),
    S = spawn_link(fun() -> hist_sender(Self) end),
    ok = msgflow:start(#{procs => [S], interval => 200}),
    ok = msgflow_collector:await_windows(1, 5000),
    msgflow_workloads:burst(S, 6),
    ok = msgflow_collector:await_windows(1, 5000),
    msgflow_workloads:burst(S, 9),
    ok = msgflow_collector:await_windows(1, 5000),
    ok = msgflow:stop(),
    Counts = [C || #{count := C} <- msgflow:history(S, msgflow_hist_sink)],
    ?assertEqual([0, 6, 9], lists:sublist(Counts, 3)),
    ?assertEqual(15, lists:sum(Counts)),
    ?assertEqual(Counts, [C || #{count := C} <- msgflow:history(S, Sink)]),
    [begin unlink(P), exit(P, kill) end || P <- [S, Sink]].

hist_sender(_Parent) ->
    receive {burst, From, N} -> [msgflow_hist_sink ! m || _ <- lists:seq(1, N)],
                                From ! {burst_done, self()} end,
    hist_sender(_Parent).

%% OTP 27+: a process labelled with proc_lib:set_label/1 has that label.
proc_lib_labels(_Config) ->
    case erlang:function_exported(proc_lib, set_label, 1) of
        false ->
            msgflow_test_lib:skip("proc_lib:set_label/1 is OTP 27+");
        true ->
            Self = self(),
            W = spawn_link(fun() -> ok = apply(proc_lib, set_label, [{worker, 7}]),
                                    Self ! ready, msgflow_test_lib:sink() end),
            receive ready -> ok end,
            S = spawn(fun() -> receive go -> W ! m end end),
            Ref = monitor(process, S),
            ok = msgflow:start(#{procs => [S]}),
            S ! go,
            receive {'DOWN', Ref, process, S, normal} -> ok end,
            ok = msgflow:stop(),
            ?assertMatch([{_, 1}], [{K, C} || {K = {_, <<"{worker,7}">>}, #{count := C}}
                                                  <- maps:to_list(maps:get(cells, msgflow:view(matrix, #{by => name})))]),
            unlink(W),
            exit(W, kill)
    end.


%%% Request flows
