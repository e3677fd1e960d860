%%% A live node whose collector falls behind (issue 53): views do not wait
%%% for a merge of many new pairs, they answer from what the collector
%%% published and say so; the `sync' form waits for every send.  The merge
%%% is held half-way by the collector's test hook (the persistent term
%%% `{msgflow_collector, hold_take}'), so nothing here depends on how fast
%%% the machine is.  Exact counts of a known workload; its barrier is each
%%% sender's `done' (a traced send is counted within the send).
-module(msgflow_live_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_suite/1, end_per_suite/1, init_per_testcase/2, end_per_testcase/2]).
-export([views_while_behind/1, memory_bound/1, million_pairs_kept/1, proc_events_past_bound/1, overflow_busiest/1, reset_after_bound/1, sender/2, batch_sender/2, planted_sender/2]).

-define(SENDERS, 1000).
-define(RECEIVERS, 20).
-define(HOLD, {msgflow_collector, hold_take}).

all() ->
    [views_while_behind, memory_bound, million_pairs_kept, proc_events_past_bound, overflow_busiest, reset_after_bound].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Config.

end_per_suite(_Config) ->
    msgflow_test_lib:clean().

init_per_testcase(_Case, Config) ->
    ok = msgflow_test_lib:clean(),
    Config.

end_per_testcase(_Case, _Config) ->
    _ = persistent_term:erase(?HOLD),
    msgflow_test_lib:clean().

%% 1,000 senders, each to its own 20 receivers (20,000 new pairs, about 20
%% chunks of the collector's merge, past the 8 a view waits for), then a
%% `done' to this process (1,000 pairs more).  No window closes during
%% the case (interval of an hour): the one take is the one a sync view
%% begins, held by the hook once it is behind.
views_while_behind(_Config) ->
    Self = self(),
    Receivers = [spawn(fun() -> receive stop -> ok end end)
                 || _ <- lists:seq(1, ?SENDERS * ?RECEIVERS)],
    Senders = [spawn(?MODULE, sender, [Self, Rs]) || Rs <- chunks(Receivers, ?RECEIVERS)],
    ok = msgflow:start(#{procs => Senders, interval => 3600000}),
    %% a first, empty take: the counts published as of before the sends
    #{events := 0, behind := false} = msgflow:view(top, #{limit => 5, sync => true}),
    Before = erlang:system_time(millisecond),
    ok = persistent_term:put(?HOLD, Self),
    [S ! go || S <- Senders],
    [receive {done, S} -> ok end || S <- Senders],
    %% a sync view begins the take and waits for all of it
    Sync = spawn(fun() -> Self ! {sync, msgflow:view(top, #{limit => 5, sync => true})} end),
    Collector = receive {take_held, C} -> C end,
    %% the collector is held: what a view gets comes without a call to it
    #{behind := true, snapshot_at := At, events := Part} = msgflow:view(top, #{limit => 5}),
    ?assert(At =< Before),
    ?assert(Part < ?SENDERS * (?RECEIVERS + 1)),
    #{behind := true, running := true} = msgflow:info(),
    %% and it says so
    Text = unicode:characters_to_binary(msgflow_test_io:capture(fun() -> msgflow:top(5) end)),
    ?assertMatch({_, _}, binary:match(Text, <<"the collector is behind">>), Text),
    %% the sync view cannot have had its answer: the collector is held
    receive {sync, Early} -> ct:fail({sync_answered_while_held, Early}) after 0 -> ok end,
    true = persistent_term:erase(?HOLD),
    Collector ! take_release,
    Whole = receive {sync, V} -> V end,
    ?assertMatch(#{events := 21000, pairs := 21000}, Whole),
    ?assertEqual(false, maps:get(behind, Whole)),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- [Sync | Senders ++ Receivers]],
    ok.

%% @private One message to each of Rs, then `done' to Parent.
sender(Parent, Rs) ->
    receive go -> ok end,
    [R ! hello || R <- Rs],
    Parent ! {done, self()},
    receive stop -> ok end.

chunks([], _) -> [];
chunks(L, N) ->
    {H, T} = lists:split(N, L),
    [H | chunks(T, N)].

%% 300,000 new pairs (300 senders x 1,000 receivers, in 10 batches of 30
%% senders) under a max_memory of 30 MB: after each batch, once counted
%% (sync), what msgflow holds is within the bound, and every message is
%% somewhere: events = pairs held + rolled up + overflow, and events are
%% the messages sent (each batch's `done's to this process too).
memory_bound(_Config) ->
    Self = self(),
    Max = 30000000,
    Receivers = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 1000)],
    Senders = [spawn(?MODULE, batch_sender, [Self, Receivers]) || _ <- lists:seq(1, 300)],
    ok = msgflow:start(#{procs => Senders, max_memory => Max}),
    Owns = [begin
                [S ! go || S <- Batch],
                [receive {done, S} -> ok end || S <- Batch],
                ok = msgflow:sync(),
                I = #{own_memory := Own, max_memory := Max} = msgflow:info(),
                {Own, maps:with([collector_memory, store_memory, memory, workers_memory], I)}
            end || Batch <- chunks(Senders, 30)],
    ct:log("own_memory after each batch: ~p", [Owns]),
    ?assert(lists:all(fun({Own, _}) -> Own =< Max end, Owns), Owns),
    #{memory_full := true} = msgflow:info(),
    #{events := E, held := H, rolled_up := R, overflow := O} = msgflow_collector:balance(),
    ?assertEqual({300 * 1000 + 300, 300 * 1000 + 300}, {E, H + R + O}),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- Senders ++ Receivers],
    ok.

%% At the default max_memory a million pairs are held exactly, and the
%% busiest among them found in order: 1,000 senders each send one message
%% to each of 1,000 receivers, and sender k (of the first 20) 1,000 k
%% more to receiver k, then `done' to this process (1,000 pairs more).
%% Nothing goes to overflow, own_memory stays within the bound, the 20
%% busiest rows are the planted pairs with their exact counts.
million_pairs_kept(_Config) ->
    case erlang:system_info(schedulers_online) of
        N when N > 4 ->
            %% a pair counted on k threads takes k of the tracer's entries
            %% (1.3-1.5 a pair measured on 16 schedulers), and the default
            %% bound's 1.49 M entries are then not a million pairs
            msgflow_test_lib:skip(io_lib:format("~b schedulers: a million pairs at the default "
                                                 "bound is measured on 2", [N]));
        _ ->
            million_pairs_kept()
    end.

million_pairs_kept() ->
    Self = self(),
    Receivers = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 1000)],
    Senders = [spawn(?MODULE, batch_sender, [Self, Receivers]) || _ <- lists:seq(1, 1000)],
    Planted = [{S, R, 1000 * K} || {K, S, R} <- lists:zip3(lists:seq(1, 20), lists:sublist(Senders, 20),
                                                        lists:sublist(Receivers, 20))],
    ok = msgflow:start(#{procs => Senders}),
    [S ! {go, [{R, N} || {S1, R, N} <- Planted, S1 =:= S]} || S <- Senders],
    [receive {done, S} -> ok end || S <- Senders],
    #{rows := Rows, overflow := Overflow} = msgflow:view(top, #{limit => 20, sync => true}),
    #{pairs := Pairs, own_memory := Own, max_memory := Max, memory_full := Full} = msgflow:info(),
    ct:log("pairs ~p, own_memory ~p of ~p", [Pairs, Own, Max]),
    ?assertEqual({1001000, 0, false}, {Pairs, Overflow, Full}),
    ?assert(Own =< Max, {Own, Max}),
    ?assertEqual([{S, R, N + 1} || {S, R, N} <- lists:reverse(Planted)],
                 [{S, R, C} || #{sender := S, receiver := R, count := C} <- Rows]),
    #{events := E, held := H, rolled_up := Ru, overflow := O} = msgflow_collector:balance(),
    Sent = 1000 * 1000 + 210000 + 1000,
    ?assertEqual({Sent, Sent}, {E, H + Ru + O}),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- Senders ++ Receivers],
    ok.

%% Past max_memory the process events of new processes (which label the
%% ends of new pairs, and those go to overflow) are dropped, not kept:
%% 300,000 pairs fill a 30 MB bound, then a traced process spawns 10,000
%% processes that live on; their 10,000 spawns are counted as dropped.
proc_events_past_bound(_Config) ->
    Self = self(),
    Receivers = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 1000)],
    Fill = [spawn(?MODULE, batch_sender, [Self, Receivers]) || _ <- lists:seq(1, 300)],
    Spawner = spawn(fun() ->
                            receive go -> ok end,
                            Kids = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 10000)],
                            Self ! {kids, Kids},
                            receive stop -> ok end
                    end),
    ok = msgflow:start(#{procs => [Spawner | Fill], max_memory => 30000000}),
    [S ! go || S <- Fill],
    [receive {done, S} -> ok end || S <- Fill],
    ok = msgflow:sync(),
    #{memory_full := true, proc_events_dropped := D0} = msgflow:info(),
    Spawner ! go,
    Kids = receive {kids, K} -> K end,
    ok = msgflow:sync(),
    #{proc_events_dropped := D1} = msgflow:info(),
    ?assertEqual(10000, D1 - D0),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- [Spawner | Fill ++ Receivers ++ Kids]],
    ok.

%% @private One message to each of Rs once told to go (`{go, More}': then
%% N more to each `{R, N}' of More), then `done'.
batch_sender(Parent, Rs) ->
    More = receive go -> []; {go, M} -> M end,
    [R ! hello || R <- Rs],
    [[R ! hello || _ <- lists:seq(1, N)] || {R, N} <- More],
    Parent ! {done, self()},
    receive stop -> ok end.

%% Past max_memory the busiest pairs are still found.  A 30 MB bound is
%% reached by 300,000 new pairs of one message; then 20 new pairs, pair k
%% sending 1,000 k messages, come among 100,000 more of one message, all
%% in overflow.  The top view's busiest in overflow are those 20, in
%% order, each pair's true count between `count - error' and `count'
%% (the summary's least count, what 400,000 one-message pairs can raise
%% it to, stays below the 1,000 between them); totals balance.
overflow_busiest(Config) ->
    Self = self(),
    Receivers = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 1000)],
    Fill = [spawn(?MODULE, batch_sender, [Self, Receivers]) || _ <- lists:seq(1, 300)],
    More = [spawn(?MODULE, batch_sender, [Self, Receivers]) || _ <- lists:seq(1, 100)],
    Sinks = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 20)],
    Planted = [{spawn(?MODULE, planted_sender, [Self, Sink]), Sink, 1000 * K}
               || {K, Sink} <- lists:enumerate(Sinks)],
    PlantedSenders = [P || {P, _, _} <- Planted],
    ok = msgflow:start(#{procs => Fill ++ More ++ PlantedSenders, max_memory => 30000000}),
    [S ! go || S <- Fill],
    [receive {done, S} -> ok end || S <- Fill],
    ok = msgflow:sync(),
    #{memory_full := true} = msgflow:info(),
    %% the planted pairs' sends among the others'
    [S ! go || S <- More],
    [P ! {go, N} || {P, _, N} <- Planted],
    [receive {done, S} -> ok end || S <- More ++ PlantedSenders],
    #{overflow_top := #{pairs := Top, min := Min}, overflow := Overflow} =
        msgflow:view(top, #{limit => 20, sync => true}),
    ct:log("overflow ~p, least count ~p, busiest in overflow ~p", [Overflow, Min, Top]),
    ?assertEqual([{P, Sink} || {P, Sink, _} <- lists:reverse(Planted)],
                 [{S, R} || #{sender := S, receiver := R} <- Top]),
    Truth = maps:from_list([{{P, Sink}, N} || {P, Sink, N} <- Planted]),
    ?assertEqual([], [T || T = #{sender := S, receiver := R, count := C, error := E} <- Top,
                           not (C - E =< map_get({S, R}, Truth) andalso map_get({S, R}, Truth) =< C)]),
    ?assert(Min < 1000, Min),
    %% the web page's state has them too, in the same order, below its
    %% busiest pairs held
    #{<<"overflow_top">> := #{<<"pairs">> := WebTop, <<"min">> := WebMin}} =
        msgflow_web_page:state(process, all, false),
    ?assertEqual({[C || #{count := C} <- Top], Min},
                 {[M || #{<<"messages">> := M} <- lists:sublist(WebTop, 20)], WebMin}),
    %% and the dump: msgflow-report (and msgflow-top, whose table it
    %% shares) prints the busiest of them below the rows, in that order
    Etf = filename:join(?config(priv_dir, Config), "overflow.etf"),
    ok = msgflow:export(Etf, etf),
    {0, Out} = msgflow_test_lib:run(msgflow_test_lib:tool("msgflow-report"), [Etf, "--top", "20"]),
    [_, Below] = string:split(Out, "busiest in overflow"),
    %% each row: #, sender, receiver (either may hold spaces), MESSAGES, ERROR
    Counts = [binary_to_integer(iolist_to_binary(string:replace(lists:nth(length(Ls) - 1, Ls), ",", "", all)))
              || Line <- string:split(Below, "\n", all),
                 Ls <- [string:lexemes(Line, " ")], length(Ls) >= 5,
                 {_, <<>>} <- [string:to_integer(hd(Ls))]],
    %% (an export of every row lists the 10 busiest in overflow)
    ?assertEqual(lists:sublist([C || #{count := C} <- Top], 10), Counts, Out),
    #{events := Ev, held := H, rolled_up := Ru, overflow := O} = msgflow_collector:balance(),
    %% (and each sender's `done')
    Sent = 400 * 1000 + 210000 + 420,
    ?assertEqual({Sent, Sent}, {Ev, H + Ru + O}),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- Fill ++ More ++ PlantedSenders ++ Receivers ++ Sinks],
    ok.

%% A reset after the bound was reached starts anew: the tracer's tables,
%% whose cap the bound lowered and which held the old pairs, take new
%% pairs again.  300,000 pairs fill a 30 MB bound; after reset/0, 20,000
%% new pairs of one message are every one held, none in overflow.
reset_after_bound(_Config) ->
    Self = self(),
    Receivers = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 1000)],
    Fill = [spawn(?MODULE, batch_sender, [Self, Receivers]) || _ <- lists:seq(1, 300)],
    After = [spawn(?MODULE, batch_sender, [Self, Receivers]) || _ <- lists:seq(1, 20)],
    ok = msgflow:start(#{procs => Fill ++ After, max_memory => 30000000}),
    [S ! go || S <- Fill],
    [receive {done, S} -> ok end || S <- Fill],
    ok = msgflow:sync(),
    #{memory_full := true} = msgflow:info(),
    ok = msgflow:reset(),
    [S ! go || S <- After],
    [receive {done, S} -> ok end || S <- After],
    ok = msgflow:sync(),
    Into = maps:from_list([{R, true} || R <- Receivers]),
    Counted = [N || {_, R, N} <- msgflow:pairs(), is_map_key(R, Into)],
    #{overflow := Overflow, memory_full := Full} = msgflow:info(),
    ?assertEqual({20000, 20000, 0, false}, {length(Counted), lists:sum(Counted), Overflow, Full}),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- Fill ++ After ++ Receivers],
    ok.

%% @private N messages to Sink once told to, then `done'.
planted_sender(Parent, Sink) ->
    receive {go, N} -> ok end,
    [Sink ! hello || _ <- lists:seq(1, N)],
    Parent ! {done, self()},
    receive stop -> ok end.
