%%% @doc `make bench-history': what the kept history costs (issue 39).
%%% 100,000 processes, spawned from one fun before start(), each send one
%%% message to each of two others once a window (200,000 pairs with
%%% messages in every window), for ?ROUNDS windows of the default 1 s:
%%% counted with the history off, then on (a fresh directory), in one run.
%%% Prints, side by side: the collector's work per window (info()'s
%%% `collector_work_ms', ms of snapshots and window closes), the history
%%% writer's (`writer_ms': labelling, encoding, writing), the bytes
%%% written per window, the windows dropped; judges nothing.
-module(msgflow_bench_history).
-export([main/0]).

-define(PROCS, 100000).
-define(ROUNDS, 8).

-spec main() -> no_return().
main() ->
    Code = try run() of ok -> 0
           catch C:R:St -> io:format("bench-history failed: ~p:~p~n~p~n", [C, R, St]), 1
           end,
    erlang:halt(Code).

run() ->
    {ok, _} = application:ensure_all_started(msgflow),
    io:format("msgflow bench-history on ~s, OTP ~s, ~b schedulers~n"
              "~b processes, each sending 1 message to each of 2 others every window "
              "(~b pairs a window), ~b windows of 1 s~n~n",
              [hd(string:split(os:cmd("uname -srm"), "\n")), erlang:system_info(otp_release),
               erlang:system_info(schedulers_online), ?PROCS, 2 * ?PROCS, ?ROUNDS]),
    Procs = list_to_tuple([spawn(fun idle/0) || _ <- lists:seq(1, ?PROCS)]),
    Dir = filename:join(["_build", "bench", "history"]),
    _ = file:del_dir_r(Dir),
    Off = measure(Procs, #{}),
    On = measure(Procs, #{history => #{dir => Dir, max_bytes => 1 bsl 32}}),
    Row = fun(What, F) -> io:format("~-44s ~14s ~14s~n", [What, F(Off), F(On)]) end,
    Row("", fun(#{name := N}) -> N end),
    Row("collector ms per window (snapshots, closes)",
        fun(#{collector := C}) -> fmt(C / ?ROUNDS) end),
    Row("history writer ms per window", fun(#{writer := W}) -> fmt(W) end),
    Row("history bytes per window", fun(#{bytes := B}) -> fmt(B) end),
    Row("windows written / dropped", fun(#{written := Wr, dropped := D}) ->
                                             io_lib:format("~b / ~b", [Wr, D])
                                     end),
    Row("messages counted", fun(#{events := E}) -> integer_to_list(E) end),
    ok.

measure(Procs, Opts) ->
    ok = msgflow:start(Opts#{max_memory => 1 bsl 31}),
    ok = msgflow_collector:await_census(600000),
    ok = msgflow_collector:await_windows(1, 60000),
    #{collector_work_ms := C0} = msgflow:info(),
    [begin
         send_round(Procs),
         ok = msgflow_collector:await_windows(1, 60000)
     end || _ <- lists:seq(1, ?ROUNDS)],
    #{collector_work_ms := C1, events := E} = msgflow:info(),
    ok = msgflow:stop(),
    #{history := H} = msgflow:info(),
    Written = maps:get(windows_written, H, 0),
    #{name => case Opts of #{history := _} -> "history on"; _ -> "history off" end,
      collector => C1 - C0, events => E,
      writer => case Written of 0 -> 0; _ -> maps:get(writer_ms, H, 0) / Written end,
      bytes => case Written of 0 -> 0; _ -> maps:get(bytes, H, 0) / Written end,
      written => Written, dropped => maps:get(windows_dropped, H, 0)}.

%% every process sends one message to each of the next two, and counts
%% itself done in an atomic (no message: only the 200,000 pairs are
%% counted)
send_round(T) ->
    N = tuple_size(T),
    Done = atomics:new(1, []),
    [element(I, T) ! {send, [element((I rem N) + 1, T), element(((I + 1) rem N) + 1, T)], Done}
     || I <- lists:seq(1, N)],
    wait(Done, N),
    Barrier = erlang:trace_delivered(all),
    receive {trace_delivered, all, Barrier} -> ok end.

wait(Done, N) ->
    case atomics:get(Done, 1) >= N of
        true -> ok;
        false -> timer:sleep(5), wait(Done, N)
    end.

idle() ->
    receive
        {send, To, Done} -> [P ! x || P <- To], atomics:add(Done, 1, 1), idle();
        _ -> idle()
    end.

fmt(X) when is_integer(X) -> integer_to_list(X);
fmt(X) -> float_to_list(float(X), [{decimals, 1}]).
