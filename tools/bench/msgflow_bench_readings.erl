%%% What the collector's readings of the watched processes cost a window
%%% (msgflow_store_waits, issue 56), beside what the readings of 0.1
%%% cost (message_queue_len only), interleaved in one run: 50 gen_servers
%%% kept busy by 50 callers each (the receivers watched) and 50 of the
%%% callers (watched as callers), the budget 5 ms of the collector a
%%% window.  Each window: 40 readings and the window's close (its last
%%% reading, the heaps read, the figures made).  Then what the
%%% bottlenecks view costs the alerts each window at the most it reads
%%% whole: 310 callers calling 310 servers once each (96,100 call pairs),
%%% the view built, and its cycles of calls found as they are now (the
%%% edges that may lie on a cycle) beside as they were (every call edge
%%% in the digraph).  Prints, judges nothing.
-module(msgflow_bench_readings).
-export([main/0, run/1]).

-define(CALLERS_EACH, 4).

%% @doc `make bench-readings': 21 windows of each, interleaved.
-spec main() -> no_return().
main() ->
    run(21),
    erlang:halt(0).

%% @doc Windows windows of each kind of reading, interleaved, at 50 and at
%% 100 watched processes (half busy gen_servers, half their callers,
%% blocked in calls); the medians.
-spec run(pos_integer()) -> ok.
run(Windows) ->
    io:format("~nthe collector's readings a window (msgflow_store_waits), median of ~b windows each, "
              "interleaved~n  ~-58s ~10s ~8s~n", [Windows, "", "us/window", "us/proc"]),
    [watched(N, Windows) || N <- [50, 100]],
    call_pairs(310),
    ok.

%% N callers each calling N servers once (a `$gen_call' each, never
%% answered), counted; then the bottlenecks view, and its cycles of calls
%% now and as they were: median of 3 each, ms.
call_pairs(N) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Self = self(),
    Servers = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, N)],
    Callers = [spawn(fun() ->
                             receive go -> ok end,
                             [S ! {'$gen_call', {self(), make_ref()}, get} || S <- Servers],
                             Self ! {done, self()},
                             receive stop -> ok end
                     end) || _ <- lists:seq(1, N)],
    ok = msgflow:start(#{procs => Callers, interval => 1000}),
    [C ! go || C <- Callers],
    [receive {done, C} -> ok end || C <- Callers],
    ok = msgflow:sync(),
    ok = msgflow_collector:await_windows(2, 30000),
    Store = msgflow_collector:store(false),
    Calls = msgflow_wait_graph:calls(Store, 5),
    Label = fun(P) -> maps:get(label, msgflow_labels:meta(maps:get(labels, Store), P)) end,
    Ms = fun(F) -> median([element(1, timer:tc(F)) / 1000 || _ <- lists:seq(1, 3)]) end,
    View = Ms(fun() -> #{causes := _} = msgflow:view(bottlenecks, #{}) end),
    Now = Ms(fun() -> [] = msgflow_wait_graph:cycles(Calls, Label) end),
    Before = Ms(fun() -> [] = cycles_of_every_edge(Calls) end),
    io:format("~nthe bottlenecks view at ~s call pairs (~b callers x ~b servers), median of 3, ms~n"
              "  ~-58s ~10.1f~n  ~-58s ~10.1f~n  ~-58s ~10.1f~n",
              [msgflow_fmt:int(map_size(maps:get(recent, Calls))), N, N,
               "the view (what the alerts build a window)", View,
               "its cycles of calls: the edges that may lie on one (now)", Now,
               "its cycles of calls: every call edge (before)", Before]),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- Servers ++ Callers],
    ok.

%% The cycles of calls as they were found before: every call edge of
%% the windows looked at in the digraph.
cycles_of_every_edge(#{recent := Recent}) ->
    G = digraph:new(),
    try
        _ = [begin
                 digraph:add_vertex(G, A), digraph:add_vertex(G, B), digraph:add_edge(G, A, B)
             end || {A, B} <- maps:keys(Recent), is_pid(A), is_pid(B), A =/= B],
        [C || C <- digraph_utils:cyclic_strong_components(G), length(C) > 1]
    after
        digraph:delete(G)
    end.

watched(N, Windows) ->
    Servers = [spawn(fun() -> server() end) || _ <- lists:seq(1, N div 2)],
    Callers = [spawn(fun() -> caller(S) end) || S <- Servers, _ <- lists:seq(1, ?CALLERS_EACH)],
    Watched = lists:sublist(Callers, N div 2),
    %% the waits as a window's close leaves them: the servers watched as
    %% receivers, as many callers watched as callers
    In = fun(_MatchSpec) -> [{S, 100} || S <- Servers] end,
    Pairs = fun(_) -> [{{C, S}, 10} || {C, S} <- lists:zip(Watched, Servers)] end,
    Canon = fun(X) -> X end,
    {_, _, W1} = msgflow_store_waits:close(msgflow_store_waits:new(), In, Canon, 1000, 1, Pairs),
    Read = msgflow_store_waits:readings(),
    Full = fun() ->
                   W = lists:foldl(fun(_, A) -> msgflow_store_waits:sample(A) end, W1, lists:seq(2, Read)),
                   msgflow_store_waits:close(W, In, Canon, 1000, 1, Pairs)
           end,
    Watch = Servers ++ Watched,
    Old = fun() -> [[process_info(P, message_queue_len) || P <- Watch] || _ <- lists:seq(1, Read)] end,
    Times = [{timer:tc(Old), timer:tc(Full)} || _ <- lists:seq(1, Windows)],
    {OldUs, FullUs} = lists:unzip([{O, F} || {{O, _}, {F, _}} <- Times]),
    Row = fun(Name, Us) ->
                  M = median(Us),
                  io:format("  ~-58s ~10b ~8.1f~n", [Name, M, M / length(Watch)])
          end,
    Row(io_lib:format("~b watched: queue lengths only (0.1's readings)", [length(Watch)]), OldUs),
    Row(io_lib:format("~b watched: queues, status, function, heaps, monitors", [length(Watch)]), FullUs),
    [exit(P, kill) || P <- Servers ++ Callers],
    ok.

median(Xs) -> lists:nth((length(Xs) + 1) div 2, lists:sort(Xs)).

%% a server that takes 1 ms a call
server() ->
    receive
        {'$gen_call', From, _} -> timer:sleep(1), gen:reply(From, ok), server();
        _ -> server()
    end.

caller(S) ->
    _ = gen_server:call(S, req, infinity),
    caller(S).
