%%% What the collector's readings of the watched processes cost a window
%%% (msgflow_store_waits, issue 56), beside what the readings of 0.1
%%% cost (message_queue_len only), interleaved in one run: 50 gen_servers
%%% kept busy by 50 callers each (the receivers watched) and 50 of the
%%% callers (watched as callers), the budget 5 ms of the collector a
%%% window.  Each window: 40 readings and the window's close (its last
%%% reading, the heaps read, the figures made).  Prints, judges nothing.
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
    ok.

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
