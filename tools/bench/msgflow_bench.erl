%%% @doc `make bench': what a traced send costs under each tracer setup, side
%%% by side in one run.
%%%
%%% Workloads (known counts per pair): a ring of 1,000 processes with 100
%%% tokens in flight; 100 ping-pong pairs; 200 senders casting to one
%%% gen_server; one process sending to itself; 100 clients making
%%% gen_server:calls to 10 servers (each reply goes to a fresh alias,
%%% which msgflow counts for its caller; `exact' checks the requests).  Setups: untraced; the floor
%%% (a tracer NIF that does nothing); msgflow; msgflow sampled (10 ms traced
%%% of every 100 ms); dbg-style (`{tracer, Pid}', a process counting pairs
%%% in a map); the documentation's example NIF (sends `{trace, From, To}' to
%%% a counting process).  Runs are interleaved round by round and the
%%% medians printed, so drift of the machine cancels out.  Nothing here is a
%%% pass/fail test: it prints figures.
%%%
%%% MSGFLOW_BENCH_QUICK=1 runs one round at 1/20 of the sizes (a smoke run);
%%% MSGFLOW_BENCH_ROUNDS=N sets the rounds; MSGFLOW_BENCH_WORKLOADS=ring,fan_in
%%% picks workloads (the memory and snapshot checks then are skipped).
-module(msgflow_bench).
-behaviour(gen_server).

-export([main/0, main_ab/0, flow_request/2]).
%% the direct loop on a node of its own (term_reads/1, hot_path_ab/1)
-export([direct_costs/1, ab_rounds/2]).
%% the memory sampler, for the other benches too
-export([start_sampler/0, stop_sampler/1]).
-export([init/1, handle_call/3, handle_cast/2]).

%% msgflow: its defaults (call round trips of 1 in 64 calls sampled);
%% msgflow_no_rtt: the same with call_sample => off
-define(SETUPS, [untraced, floor, msgflow, msgflow_no_rtt, msgflow_sampled, dbg_style,
                 example_nif]).
-define(ALL_WORKLOADS, [ring, pingpong, fan_in, self_send, calls]).

-spec main() -> no_return().
main() ->
    Quick = not lists:member(os:getenv("MSGFLOW_BENCH_QUICK"), [false, "", "0"]),
    %% nine interleaved rounds: drift of a shared 2-core machine cancels
    %% in the medians (the spread column shows what is left)
    {Scale, Rounds0} = case Quick of true -> {0.05, 1}; false -> {1.0, 9} end,
    Rounds = case os:getenv("MSGFLOW_BENCH_ROUNDS") of
                 false -> Rounds0;
                 RoundsText -> list_to_integer(RoundsText)
             end,
    Workloads = case os:getenv("MSGFLOW_BENCH_WORKLOADS") of
                    false -> ?ALL_WORKLOADS;
                    W -> [list_to_existing_atom(X) || X <- string:lexemes(W, ",")]
                end,
    {ok, _} = application:ensure_all_started(msgflow),
    erlang:system_flag(microstate_accounting, true),
    io:format("msgflow bench: OTP ~s, ~b schedulers, ~s; ~b round(s), medians~n",
              [erlang:system_info(otp_release), erlang:system_info(schedulers_online),
               cpu_model(), Rounds]),
    Results = lists:foldl(
                fun(Round, Acc) ->
                        io:format("round ~b/~b~n", [Round, Rounds]),
                        lists:foldl(
                          fun(W, Acc1) ->
                                  lists:foldl(
                                    fun(S, Acc2) ->
                                            R = run(S, W, Scale),
                                            maps:update_with({W, S}, fun(L) -> [R | L] end,
                                                             [R], Acc2)
                                    end, Acc1, shuffle(?SETUPS))
                          end, Acc, Workloads)
                end, #{}, lists:seq(1, Rounds)),
    [report(W, Results) || W <- Workloads],
    summary(Workloads, Results),
    callbacks(Scale, Workloads, Results),
    case Workloads of
        ?ALL_WORKLOADS -> memory_flat(Scale), snapshot_large(Scale);
        _ -> ok
    end,
    flows(Scale, Rounds),
    msgflow_bench_readings:run(case Quick of true -> 3; false -> 21 end),
    erlang:halt(0).

%% `make bench-ab': the hot path's A/B alone (hot_path_ab/1).
-spec main_ab() -> no_return().
main_ab() ->
    {ok, _} = application:ensure_all_started(msgflow),
    io:format("msgflow bench: OTP ~s, ~b schedulers, ~s~n",
              [erlang:system_info(otp_release), erlang:system_info(schedulers_online),
               cpu_model()]),
    hot_path_ab(400000),
    erlang:halt(0).

%%% One run

run(Setup, Workload, Scale) ->
    garbage_collect(),
    Plan = #{pids := Pids, go := Go, expected := Expected, sends := Sends, done := Done} =
        prepare(Workload, Scale),
    Tracer = trace_on(Setup, Pids),
    Sampler = start_sampler(),
    C0 = cpu_ns(),
    T0 = erlang:monotonic_time(nanosecond),
    Go(),
    Done(),
    T1 = erlang:monotonic_time(nanosecond),
    C1 = cpu_ns(),
    Counts = collect(Setup, Tracer, Pids),
    T2 = erlang:monotonic_time(nanosecond),
    C2 = cpu_ns(),
    {PeakMem, PeakRss} = stop_sampler(Sampler),
    trace_off(Setup, Pids),
    [exit(P, kill) || P <- Pids],
    Checked = maps:get(senders, Plan, Pids),
    #{ns => (T1 - T0) / Sends, drain_ms => (T2 - T1) / 1.0e6, sends => Sends,
      cpu => (C2 - C0) / Sends, cpu_sends => (C1 - C0) / Sends,
      mem => PeakMem, rss => PeakRss, exact => exact(Counts, Expected, Checked)}.

trace_on(untraced, _Pids) ->
    none;
trace_on(floor, Pids) ->
    [erlang:trace(P, true, [send, {tracer, bench_floor_tracer, []}]) || P <- Pids],
    none;
trace_on(msgflow, Pids) ->
    started(msgflow:start(#{procs => Pids}));
trace_on(msgflow_no_rtt, Pids) ->
    started(msgflow:start(#{procs => Pids, call_sample => off}));
trace_on(msgflow_sampled, Pids) ->
    started(msgflow:start(#{procs => Pids, sample => {10, 100}}));
trace_on(dbg_style, Pids) ->
    Counter = spawn(fun() -> dbg_counter(#{}) end),
    [erlang:trace(P, true, [send, {tracer, Counter}]) || P <- Pids],
    Counter;
trace_on(example_nif, Pids) ->
    Counter = spawn(fun() -> nif_counter(#{}) end),
    [erlang:trace(P, true, [send, {tracer, bench_msg_tracer, Counter}]) || P <- Pids],
    Counter.

%% A run started: start/1 returns once the flags are set, and the
%% collector then reads the processes alive (their labels, the census) a
%% step at a time.  That is start/1's work, once per run, as setting the
%% flags is: untimed, as they are (the ring's 1,050 processes take it
%% 3.5-4.4 ms of CPU: 4 ns per send of the ring's million, 8 of the
%% fan-in's 500,000, were it timed).
started(ok) ->
    ok = msgflow_collector:await_census(60000),
    none.

%% What the setup counted, once complete: the drain is the time this takes.
collect(Setup, _, _) when Setup =:= untraced; Setup =:= floor ->
    none;
collect(Setup, _, _) when Setup =:= msgflow; Setup =:= msgflow_no_rtt;
                          Setup =:= msgflow_sampled ->
    %% pairs/0 takes a snapshot: every send made so far is in it.  Stopping
    %% (clearing the flags) comes after, untimed, as for the other setups.
    Pairs = msgflow:pairs(),
    case Setup of
        msgflow_sampled -> estimate;
        _ -> maps:from_list([{{S, R}, N} || {S, R, N} <- Pairs])
    end;
collect(_, Counter, _) ->
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} -> ok end,
    Counter ! {get, self()},
    receive {counts, Counter, Counts} -> Counts end.

trace_off(Setup, Pids) when Setup =:= floor; Setup =:= dbg_style; Setup =:= example_nif ->
    [try erlang:trace(P, false, [send]) catch _:_ -> 0 end || P <- Pids];
trace_off(Setup, _) when Setup =:= msgflow; Setup =:= msgflow_no_rtt;
                          Setup =:= msgflow_sampled ->
    ok = msgflow:stop();
trace_off(untraced, _) ->
    ok.

dbg_counter(M) ->
    receive
        {trace, From, _Tag, _Msg, To} -> dbg_counter(bump({From, To}, M));
        {get, Who} -> Who ! {counts, self(), M}
    end.

nif_counter(M) ->
    receive
        {trace, From, To} -> nif_counter(bump({From, To}, M));
        {get, Who} -> Who ! {counts, self(), M}
    end.

bump(K, M) ->
    case M of
        #{K := N} -> M#{K := N + 1};
        _ -> M#{K => 1}
    end.

exact(none, _, _) -> na;
exact(estimate, _, _) -> na;
exact(Counts, Expected, Pids) ->
    Set = maps:from_list([{P, true} || P <- Pids]),
    Got = lists:sort([{S, R, N} || {{S, R}, N} <- maps:to_list(Counts), is_map_key(S, Set)]),
    Got =:= lists:sort(Expected).

%%% Workloads: processes wait for `go'; `done' returns when the work is over.

prepare(ring, Scale) ->
    N = 1000, Tokens = 100, Laps = max(1, round(10 * Scale)),
    Hops = N * Laps,
    Self = self(),
    Procs = list_to_tuple([spawn_link(fun() -> ring_init(Self) end) || _ <- lists:seq(1, N)]),
    [element(I, Procs) ! {next, element(I rem N + 1, Procs)} || I <- lists:seq(1, N)],
    Starts = [element(1 + (T - 1) * (N div Tokens), Procs) || T <- lists:seq(1, Tokens)],
    Pids = tuple_to_list(Procs),
    Expected = [{element(I, Procs), element(I rem N + 1, Procs), Tokens * Laps}
                || I <- lists:seq(1, N)] ++ [{S, Self, 1} || S <- Starts],
    #{pids => Pids, sends => Tokens * Hops, expected => Expected,
      go => fun() -> [S ! {token, Hops} || S <- Starts] end,
      done => fun() -> [receive {ring_done, _} -> ok end || _ <- Starts] end};
prepare(pingpong, Scale) ->
    Pairs = 100, Rounds = max(1, round(5000 * Scale)),
    Self = self(),
    Ps = [begin
              B = spawn_link(fun pong/0),
              A = spawn_link(fun() -> receive go -> ok end, ping(B, Rounds), Self ! {pp_done, self()} end),
              {A, B}
          end || _ <- lists:seq(1, Pairs)],
    Expected = lists:append([[{A, B, Rounds}, {B, A, Rounds}, {A, Self, 1}] || {A, B} <- Ps]),
    #{pids => lists:append([[A, B] || {A, B} <- Ps]), sends => Pairs * Rounds * 2,
      expected => Expected,
      go => fun() -> [A ! go || {A, _} <- Ps] end,
      done => fun() -> [receive {pp_done, A} -> ok end || {A, _} <- Ps] end};
prepare(fan_in, Scale) ->
    Senders = 200, Casts = max(1, round(2500 * Scale)),
    Self = self(),
    {ok, Server} = gen_server:start(?MODULE, {Self, Senders * Casts}, []),
    Ss = [spawn_link(fun() -> receive go -> ok end, cast_n(Server, Casts) end)
          || _ <- lists:seq(1, Senders)],
    Expected = [{S, Server, Casts} || S <- Ss] ++ [{Server, Self, 1}],
    #{pids => [Server | Ss], sends => Senders * Casts, expected => Expected,
      go => fun() -> [S ! go || S <- Ss] end,
      done => fun() -> receive {fan_in_done, Server} -> ok end end};
prepare(calls, Scale) ->
    Clients = 100, Calls = max(1, round(1000 * Scale)),
    Self = self(),
    Servers = list_to_tuple([element(2, gen_server:start(?MODULE, {Self, 0}, []))
                             || _ <- lists:seq(1, 10)]),
    Cs = [begin
              S = element(1 + I rem 10, Servers),
              {spawn_link(fun() -> receive go -> ok end, call_n(S, Calls),
                                   Self ! {calls_done, self()} end), S}
          end || I <- lists:seq(1, Clients)],
    Expected = lists:append([[{C, S, Calls}, {C, Self, 1}] || {C, S} <- Cs]),
    #{pids => tuple_to_list(Servers) ++ [C || {C, _} <- Cs], senders => [C || {C, _} <- Cs],
      sends => 2 * Clients * Calls, expected => Expected,
      go => fun() -> [C ! go || {C, _} <- Cs] end,
      done => fun() -> [receive {calls_done, C} -> ok end || {C, _} <- Cs] end};
prepare(self_send, Scale) ->
    N = max(1, round(1000000 * Scale)),
    Self = self(),
    P = spawn_link(fun() -> receive go -> ok end, self_loop(N), Self ! {self_done, self()} end),
    #{pids => [P], sends => N, expected => [{P, P, N}, {P, Self, 1}],
      go => fun() -> P ! go end,
      done => fun() -> receive {self_done, P} -> ok end end}.

ring_init(Harness) ->
    receive {next, Next} -> ring(Next, Harness) end.

ring(Next, Harness) ->
    receive
        {token, 0} -> Harness ! {ring_done, self()}, ring(Next, Harness);
        {token, Left} -> Next ! {token, Left - 1}, ring(Next, Harness)
    end.

pong() ->
    receive {ping, From} -> From ! pong, pong() end.

ping(_B, 0) -> ok;
ping(B, N) ->
    B ! {ping, self()},
    receive pong -> ping(B, N - 1) end.

cast_n(_Server, 0) -> ok;
cast_n(Server, N) ->
    gen_server:cast(Server, msg),
    cast_n(Server, N - 1).

call_n(_Server, 0) -> ok;
call_n(Server, N) ->
    ok = gen_server:call(Server, ping),
    call_n(Server, N - 1).

self_loop(0) -> ok;
self_loop(N) ->
    self() ! x,
    receive x -> self_loop(N - 1) end.

%% The fan-in gen_server: counts casts, tells the harness at the last one.
-spec init({pid(), pos_integer()}) -> {ok, {pid(), non_neg_integer()}}.
init({Harness, Total}) -> {ok, {Harness, Total}}.

-spec handle_cast(msg, {pid(), non_neg_integer()}) -> {noreply, {pid(), non_neg_integer()}}.
handle_cast(msg, {Harness, 1}) -> Harness ! {fan_in_done, self()}, {noreply, {Harness, 0}};
handle_cast(msg, {Harness, N}) -> {noreply, {Harness, N - 1}}.

-spec handle_call(term(), term(), term()) -> {reply, ok, term()}.
handle_call(_, _, S) -> {reply, ok, S}.

%% CPU time the schedulers spent running code (microstate accounting:
%% emulator, gc and port states; not sleep, busy-wait or other), in ns.
%% Steadier than wall time on a shared machine, and it includes the work of
%% counting processes, so a drain is in it.
cpu_ns() ->
    lists:sum([erlang:convert_time_unit(maps:get(emulator, C) + maps:get(gc, C) +
                                            maps:get(port, C), perf_counter, nanosecond)
               || #{type := T, counters := C} <- erlang:statistics(microstate_accounting),
                  T =:= scheduler orelse T =:= dirty_cpu_scheduler]).

%%% Memory sampling (every 5 ms): peak erlang:memory(total) and OS RSS

%% @doc A process sampling this node's memory until stop_sampler/1, which
%% returns the peaks {ErlangMemoryTotal, Rss}, bytes.
-spec start_sampler() -> pid().
start_sampler() ->
    Self = self(),
    spawn_link(fun() -> sample(Self, 0, 0) end).

sample(Parent, Mem, Rss) ->
    M = max(Mem, erlang:memory(total)),
    R = max(Rss, rss()),
    receive {stop, Parent} -> Parent ! {peak, self(), M, R}
    after 5 -> sample(Parent, M, R)
    end.

-spec stop_sampler(pid()) -> {non_neg_integer(), non_neg_integer()}.
stop_sampler(S) ->
    S ! {stop, self()},
    receive {peak, S, M, R} -> unlink(S), {M, R} end.

rss() ->
    case file:read_file("/proc/self/status") of
        {ok, B} ->
            case re:run(B, "VmRSS:\\s+(\\d+) kB", [{capture, all_but_first, binary}]) of
                {match, [Kb]} -> binary_to_integer(Kb) * 1024;
                nomatch -> 0
            end;
        _ -> 0
    end.

%%% Report

%% Interquartile range over the median, in percent: the noise of a setup.
spread(L) ->
    S = lists:sort(L),
    N = length(S),
    Q = fun(F) -> lists:nth(max(1, min(N, round(F * (N - 1)) + 1)), S) end,
    100 * (Q(0.75) - Q(0.25)) / median(L).

median(L) ->
    S = lists:sort(L),
    lists:nth((length(S) + 1) div 2, S).

med(K, Rs) -> median([maps:get(K, R) || R <- Rs]).

report(W, Results) ->
    Base = med(ns, maps:get({W, untraced}, Results)),
    Floor = med(ns, maps:get({W, floor}, Results)) - Base,
    CpuBase = med(cpu, maps:get({W, untraced}, Results)),
    CpuFloor = med(cpu, maps:get({W, floor}, Results)) - CpuBase,
    #{sends := Sends} = hd(maps:get({W, untraced}, Results)),
    io:format("~n~s: ~s sends per run~n", [describe(W), msgflow_fmt:int(Sends)]),
    io:format("  ~-16s ~8s ~7s ~9s ~7s ~9s ~9s ~7s ~8s ~7s ~7s ~5s~n",
              ["setup", "wall ns", "spread", "added", "x floor", "drain ms", "cpu ns",
               "added", "x floor", "peak MB", "RSS MB", "exact"]),
    [begin
         Rs = maps:get({W, S}, Results),
         Ns = med(ns, Rs),
         Cpu = med(cpu, Rs),
         io:format("  ~-16s ~8.1f ~6.1f% ~9s ~7s ~9s ~9.1f ~7s ~8s ~7.1f ~7.1f ~5s~n",
                   [S, Ns, spread([maps:get(ns, R) || R <- Rs]), added(S, Ns - Base),
                    xfloor(S, Ns - Base, Floor), drain(S, med(drain_ms, Rs)),
                    Cpu, added(S, Cpu - CpuBase), xfloor(S, Cpu - CpuBase, CpuFloor),
                    med(mem, Rs) / 1048576, med(rss, Rs) / 1048576,
                    exact_text([maps:get(exact, R) || R <- Rs])])
     end || S <- ?SETUPS],
    ok.

describe(ring) -> "ring: 1,000 processes, 100 tokens in flight";
describe(pingpong) -> "ping-pong: 100 pairs";
describe(fan_in) -> "fan-in: 200 senders casting to one gen_server";
describe(self_send) -> "self-send: one process sending to itself";
describe(calls) -> "calls: 100 clients x gen_server:call, 10 servers (replies to aliases)".

added(untraced, _) -> "-";
added(_, A) -> io_lib:format("~.1f", [A]).

xfloor(S, _, _) when S =:= untraced; S =:= floor -> "-";
xfloor(_, A, Floor) -> ratio(A, Floor, 2).

drain(S, _) when S =:= untraced; S =:= floor -> "-";
drain(_, D) -> io_lib:format("~.1f", [D]).

exact_text(L) ->
    case lists:usort(L) of
        [na] -> "-";
        [true] -> "yes";
        _ -> "NO"
    end.

%% Ratios of added CPU cost from the medians, and msgflow/floor once more
%% from each setup's fastest run: noise on this kind of machine only adds
%% time, so the fastest runs are the other fair estimate; and from the
%% medians of the CPU until the workload was done, the drain apart (what
%% the sends cost; the drain is the collector's merge of what they
%% counted, which a running node pays once a window).
summary(Workloads, Results) ->
    io:format("~nmsgflow's added cost against the others, in CPU ns per send (medians with "
              "the drain, fastest runs, and medians without the drain):~n"),
    [begin
         Cost = fun(S) -> med(cpu, maps:get({W, S}, Results)) -
                              med(cpu, maps:get({W, untraced}, Results)) end,
         Fastest = fun(S) -> lists:min([maps:get(cpu, R) || R <- maps:get({W, S}, Results)]) end,
         Fast = fun(S) -> Fastest(S) - Fastest(untraced) end,
         MF = Cost(msgflow),
         Sends = fun(S) -> med(cpu_sends, maps:get({W, S}, Results)) -
                               med(cpu_sends, maps:get({W, untraced}, Results)) end,
         io:format("  ~-10s msgflow/floor ~5s (fastest ~5s, the drain apart ~5s)   dbg-style/msgflow ~5s   "
                   "example-nif/msgflow ~5s   sampled/msgflow ~5s~n",
                   [W, ratio(MF, Cost(floor), 2), ratio(Fast(msgflow), Fast(floor), 2),
                    ratio(Sends(msgflow), Sends(floor), 2),
                    ratio(Cost(dbg_style), MF, 1), ratio(Cost(example_nif), MF, 1),
                    ratio(Cost(msgflow_sampled), MF, 2)])
     end || W <- Workloads],
    ok.

%% A ratio of two added costs; "?" when the one below the line is not
%% above zero (noise put it under the untraced run).
ratio(_, Below, _) when Below =< 0 -> "?";
ratio(Above, Below, Digits) -> io_lib:format("~.*f", [Digits, Above / Below]).

%%% The callbacks alone: what msgflow's enabled_send/3 + trace_send/5 cost
%%% over the floor's, called directly in a loop over the ring's 1,000 pairs,
%%% with the enabled(trace_status) the VM asks when it schedules the
%%% receiver in (once per send in the ring and ping-pong).  The loop and the
%%% calls are the same for both, so the difference is msgflow's own work per
%%% send, without the scheduling of the workloads.
%%% 25 short runs of each, interleaved; the fastest run of each counts,
%%% since interference on a shared machine only ever adds time.  msgflow's
%%% counts are checked exact.

-define(CALLBACK_RUNS, 25).
%% a gen:call's request: its tag an alias, as OTP 24+ sends it
-define(BENCH_MSG, {'$gen_call', {self(), [alias | alias()]}, {get, 1}}).


callbacks(Scale, Workloads, Results) ->
    N = max(1000, round(400000 * Scale)),
    Pids = [spawn_link(fun sink/0) || _ <- lists:seq(1, 1000)],
    Pairs = list_to_tuple([{A, B, #{extra => B}}
                           || {A, B} <- lists:zip(Pids, tl(Pids) ++ [hd(Pids)])]),
    Off = msgflow_tracer:session_new(self(), 100000, 0),
    On = msgflow_tracer:session_new(self(), 100000, 8),
    %% kinds on and round trips of 1 in 64 calls (the defaults)
    Rtt = msgflow_tracer:session_new(self(), 100000, 8),
    ok = msgflow_tracer:calls_config(Rtt, 64, 5000),
    %% the same with a reply sent to the caller's pid, {Mref, ok} (gen's
    %% reply to a local call made with timeout infinity)
    OnReply = msgflow_tracer:session_new(self(), 100000, 8),
    RttReply = msgflow_tracer:session_new(self(), 100000, 8),
    ok = msgflow_tracer:calls_config(RttReply, 64, 5000),
    %% kinds, round trips and sizes of 1 in 64 sends (start/1's defaults)
    Sizes = msgflow_tracer:session_new(self(), 100000, 8),
    ok = msgflow_tracer:calls_config(Sizes, 64, 5000),
    ok = msgflow_tracer:sizes_config(Sizes, 64, msgflow_tracer:size_words()),
    Sessions = #{floor => [], msgflow => Off, msgflow_kinds => On, msgflow_rtt => Rtt,
                 kinds_reply => OnReply, rtt_reply => RttReply, msgflow_sizes => Sizes},
    %% msgflow's own processes and names, as a run holds them (a run of
    %% msgflow:start/1 leaves out their messages: every send is looked up)
    %% (a build before them has none: run on one to compare)
    OwnSet = [msgflow_collector, msgflow_sup, msgflow_flow_keeper, msgflow_cluster, msgflow_remote,
              msgflow_web | [spawn_link(fun sink/0) || _ <- lists:seq(1, 10)]],
    _ = [ok = msgflow_tracer:own(S, add, P) || erlang:function_exported(msgflow_tracer, own, 3),
                                              S <- [Off, On, Rtt, OnReply, RttReply, Sizes],
                                              P <- OwnSet],
    Reply = {erlang:monitor(process, self()), ok},
    Msg = fun(T) when T =:= kinds_reply; T =:= rtt_reply -> Reply;
             (_) -> ?BENCH_MSG
          end,
    Runs = lists:foldl(
             fun(_, Acc) ->
                     lists:foldl(fun(T, Acc1) ->
                                         R = call_loop(T, maps:get(T, Sessions), Pairs, N, Msg(T)),
                                         maps:update_with(T, fun(L) -> [R | L] end, [R], Acc1)
                                 end, Acc, shuffle(maps:keys(Sessions)))
             end, #{}, lists:seq(1, ?CALLBACK_RUNS)),
    {RttEdges, _} = msgflow_tracer:calls_take(Rtt),
    SizeEdges = sizes_taken(Sizes, []),
    Exact = [callbacks_exact(S, N, K) || {S, K} <- [{Off, none}, {On, {call, get}},
                                                    {Rtt, {call, get}}, {Sizes, {call, get}},
                                                    {OnReply, {reply, ok}},
                                                    {RttReply, {reply, ok}}]],
    [exit(P, kill) || P <- Pids],
    Floor = lists:min(maps:get(floor, Runs)),
    Own = lists:min(maps:get(msgflow, Runs)) - Floor,
    OwnK = lists:min(maps:get(msgflow_kinds, Runs)) - Floor,
    OwnR = lists:min(maps:get(msgflow_rtt, Runs)) - Floor,
    OwnKR = lists:min(maps:get(kinds_reply, Runs)) - Floor,
    OwnRR = lists:min(maps:get(rtt_reply, Runs)) - Floor,
    OwnS = lists:min(maps:get(msgflow_sizes, Runs)) - Floor,
    FloorAdded = [{W, med(cpu, maps:get({W, floor}, Results)) -
                          med(cpu, maps:get({W, untraced}, Results))} || W <- Workloads],
    io:format("~ncallbacks called directly, ~b runs of ~s calls over 1,000 pairs, message "
              "{'$gen_call', From, {get, 1}}, fastest: floor ~.1f ns, msgflow ~.1f ns per send;~n"
              "  msgflow's own work ~.1f ns per send with kinds off, ~.1f ns with kinds on "
              "(+~.1f ns; counts exact: ~s); on the floors above that is msgflow/floor~s~n",
              [?CALLBACK_RUNS, msgflow_fmt:int(N), Floor, Floor + Own, Own, OwnK, OwnK - Own,
               yes_no(lists:all(fun(E) -> E end, Exact)),
               [io_lib:format(" ~s ~s", [W, ratio(F + Own, F, 2)]) || {W, F} <- FloorAdded]]),
    io:format("  with round trips of 1 in 64 calls noted (every request an alias's call, no "
              "reply): ~.1f ns per send (+~.1f ns over kinds on; ~b calls given up unanswered)~n",
              [OwnR, OwnR - OwnK, lists:sum([U || {_, _, _, _, _, U, _} <- RttEdges])]),
    io:format("  a reply to the caller's pid, {Mref, ok}, instead: ~.1f ns per send with kinds on "
              "(+~.1f ns over kinds off), ~.1f ns with round trips (+~.1f ns)~n",
              [OwnKR, OwnKR - Own, OwnRR, OwnRR - Own]),
    io:format("  with sizes of 1 in 64 sends measured too (size_sample, the default): ~.1f ns per "
              "send, sizes off ~.1f ns (+~.1f ns; ~s messages measured, of ~b words each)~n",
              [OwnS, OwnR, OwnS - OwnR,
               msgflow_fmt:int(lists:sum([Sm || {_, _, Sm, _, _, _, _} <- SizeEdges])),
               erts_debug:flat_size(?BENCH_MSG)]),
    size_costs(Pairs, max(1000, N div 20)),
    term_reads(N),
    hot_path_ab(N).

%% What one measured message costs (size_sample 1 against sizes off, both
%% with kinds and round trips): a message of 1 KB (a list of 64 small
%% integers, 128 words), of 1 MB (a list of 65,536: the walk stops at its
%% budget of 1,024 terms) and a tuple holding a 1 MB binary (one term off
%% the heap); fastest of 5 runs each, interleaved.
size_costs(Pairs, N) ->
    Msgs = [{"1 KB list", lists:seq(1, 64)}, {"1 MB list", lists:seq(1, 65536)},
            {"1 MB binary", {binary:copy(<<1>>, 1 bsl 20)}}],
    Sess = fun(Sample) ->
                   S = msgflow_tracer:session_new(self(), 100000, 8),
                   ok = msgflow_tracer:calls_config(S, 64, 5000),
                   _ = Sample =:= off orelse
                       msgflow_tracer:sizes_config(S, Sample, msgflow_tracer:size_words()),
                   S
           end,
    Costs = [begin
                 Off = Sess(off),
                 Every = Sess(1),
                 Runs = [{T, call_loop(msgflow, S, Pairs, N, M)}
                         || _ <- lists:seq(1, 5), {T, S} <- shuffle([{off, Off}, {every, Every}])],
                 Min = fun(T) -> lists:min([R || {T1, R} <- Runs, T1 =:= T]) end,
                 _ = [msgflow_tracer:session_stop(S) || S <- [Off, Every]],
                 {Name, Min(every) - Min(off)}
             end || {Name, M} <- Msgs],
    io:format("  one measured message costs: ~s~n",
              [lists:join(", ", [io_lib:format("~s ~b ns", [Nm, round(C)]) || {Nm, C} <- Costs])]).

%%% The two paths of the tracer's term reads side by side: the same
%%% direct loop (kinds off and on) on two peer nodes started together,
%%% one with the reads the checks at load allow, one with
%%% MSGFLOW_TERM_READS=off (every read through the API, as on a VM whose
%%% layout the checks refuse).  Runs on each node one after the other, 25
%%% each, fastest counts.

term_reads(N) ->
    Result = try
                 ok = distributed(),
                 Paths = lists:append([["-pa", filename:dirname(code:which(M))]
                                       || M <- [msgflow, ?MODULE]]),
                 Run = fun(Env) ->
                               {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(),
                                                                    args => Paths, env => Env}),
                               try erpc:call(Node, ?MODULE, direct_costs, [N], 600000)
                               after peer:stop(Peer)
                               end
                       end,
                 {Run([]), Run([{"MSGFLOW_TERM_READS", "off"}])}
             catch
                 C:R -> {error, {C, R}}
             end,
    case Result of
        {{FastOff, FastOn, FastReads}, {SlowOff, SlowOn, SlowReads}} ->
            io:format("  term reads, two peer nodes: checked reads on (~s) ~.1f ns kinds off, "
                      "~.1f ns kinds on; all through the API (~s) ~.1f ns, ~.1f ns~n",
                      [FastReads, FastOff, FastOn, SlowReads, SlowOff, SlowOn]);
        {error, Why} ->
            io:format("  term reads: not measured (~0tp)~n", [Why])
    end.

%% @private On a node of its own: msgflow's own work in the direct loop
%% with kinds off and on (ns per send over the floor, fastest of 25
%% runs each, interleaved), and which term reads lib_info says are on.
-spec direct_costs(pos_integer()) -> {float(), float(), string()}.
direct_costs(N) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Pids = [spawn_link(fun sink/0) || _ <- lists:seq(1, 1000)],
    Pairs = list_to_tuple([{A, B, #{extra => B}}
                           || {A, B} <- lists:zip(Pids, tl(Pids) ++ [hd(Pids)])]),
    Sessions = #{floor => [], off => msgflow_tracer:session_new(self(), 100000, 0),
                 on => msgflow_tracer:session_new(self(), 100000, 8)},
    Msg = ?BENCH_MSG,
    Runs = lists:foldl(
             fun(_, Acc) ->
                     lists:foldl(fun(T, Acc1) ->
                                         Tracer = case T of floor -> floor; _ -> msgflow end,
                                         R = call_loop(Tracer, maps:get(T, Sessions), Pairs, N, Msg),
                                         maps:update_with(T, fun(L) -> [R | L] end, [R], Acc1)
                                 end, Acc, shuffle(maps:keys(Sessions)))
             end, #{}, lists:seq(1, ?CALLBACK_RUNS)),
    Floor = lists:min(maps:get(floor, Runs)),
    Reads = [atom_to_list(K) || {K, true} <- lists:sort(maps:to_list(
                                                maps:with([fast_extra, alias_owner, fast_terms,
                                                           plain_refs, fast_resources],
                                                          msgflow_tracer:lib_info())))],
    {lists:min(maps:get(off, Runs)) - Floor, lists:min(maps:get(on, Runs)) - Floor,
     case Reads of [] -> "none"; _ -> string:join(Reads, " ") end}.

%%% The hot path's A/B: the direct loop on this tree's library and on an
%%% older tree's (MSGFLOW_BENCH_BASE, its ebin directory, which `make
%%% bench' builds from BENCH_BASE: tools/bench/base.sh).  A peer node
%%% loads one tree's msgflow_tracer (module and NIF library, by reloading
%%% the module: an upgrade, as a release does), then the other's, in a
%%% shuffled order each round, so that both count the same pairs of the
%%% same processes in the same VM; 3 peers of 3 rounds each, 9 rounds a
%%% tree.  A round gives each setup's fastest of ?AB_RUNS runs
%%% (ab_costs/2) and the medians of the rounds are printed side by side.
%%% The same Erlang loop calls both libraries, so the difference is their
%%% C.

-define(AB_PEERS, 3).
-define(AB_ROUNDS, 3).
-define(AB_RUNS, 9).
-define(AB_SETUPS, [{off, "kinds off"}, {on, "kinds on, a call"}, {rtt, "+ round trips 1/64"},
                    {reply, "kinds on, {Mref, ok} to a pid"},
                    {sizes, "+ sizes 1/64 (start/1's defaults)"}]).

hot_path_ab(N) ->
    case {os:getenv("MSGFLOW_BENCH_BASE", ""), os:getenv("MSGFLOW_BENCH_BASE_REV", "?")} of
        {"", Rev} ->
            io:format("~nhot path A/B: not run (no build of ~s; `make bench' builds it)~n", [Rev]);
        {Base, Rev} ->
            ok = distributed(),
            NewEbin = filename:dirname(code:which(msgflow)),
            Trees = #{old => Base, new => NewEbin},
            Args = ["-pa", NewEbin, "-pa", filename:dirname(code:which(?MODULE))],
            Rounds = lists:append([peer_costs(Args, Trees, N) || _ <- lists:seq(1, ?AB_PEERS)]),
            Of = fun(Tree, K) -> [maps:get(K, C) || {T, C} <- Rounds, T =:= Tree] end,
            io:format("~nhot path A/B: the direct loop on ~s's library (old) and this tree's "
                      "(new), reloaded in turn in each of ~b peer nodes, ~b rounds each, ~b "
                      "runs of ~s sends a round; msgflow's own work per send over the floor, "
                      "ns, median of the rounds' fastest runs (spread: interquartile range / "
                      "median)~n"
                      "  ~-36s ~8s ~8s ~9s ~8s ~8s~n",
                      [Rev, ?AB_PEERS, ?AB_ROUNDS, ?AB_RUNS, msgflow_fmt:int(N), "setup", "old",
                       "new", "new-old", "old sp%", "new sp%"]),
            [begin
                 Old = Of(old, K),
                 New = Of(new, K),
                 D = median(New) - median(Old),
                 io:format("  ~-36s ~8.1f ~8.1f ~9s ~8.1f ~8.1f~n",
                           [Name, median(Old), median(New),
                            [case D < 0 of true -> "-"; false -> "+" end,
                             io_lib:format("~.1f", [abs(D)])],
                            spread(Old), spread(New)])
             end || {K, Name} <- ?AB_SETUPS],
            ok
    end.

%% This node distributed, for peer nodes.
distributed() ->
    _ = os:cmd("epmd -daemon"),
    _ = node() =:= nonode@nohost andalso
        net_kernel:start([list_to_atom("msgflow_bench_" ++ os:getpid()), shortnames]),
    ok.

%% ?AB_ROUNDS rounds on a fresh peer: `[{Tree, Costs}]'.
peer_costs(Args, Trees, N) ->
    {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(), args => Args}),
    try erpc:call(Node, ?MODULE, ab_rounds, [Trees, N], 1200000)
    after peer:stop(Peer)
    end.

%% @private On a node of its own: ?AB_ROUNDS rounds, each loading every
%% tree of Trees (`#{Name => EbinDir}') in turn, shuffled, and measuring
%% it (ab_costs/2) on the same 1,000 pairs.
-spec ab_rounds(#{atom() => file:filename()}, pos_integer()) -> [{atom(), map()}].
ab_rounds(Trees, N) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Pids = [spawn_link(fun sink/0) || _ <- lists:seq(1, 1000)],
    Pairs = list_to_tuple([{A, B, #{extra => B}}
                           || {A, B} <- lists:zip(Pids, tl(Pids) ++ [hd(Pids)])]),
    lists:append([[begin ok = load_tree(Ebin), {T, ab_costs(Pairs, N)} end
                   || {T, Ebin} <- shuffle(maps:to_list(Trees))]
                  || _ <- lists:seq(1, ?AB_ROUNDS)]).

%% msgflow_tracer, module and NIF library, from the tree whose ebin
%% directory is Ebin (priv/ beside it), loaded over the one loaded.
load_tree(Ebin) ->
    ok = application:set_env(msgflow, priv_dir, filename:join(filename:dirname(Ebin), "priv")),
    _ = code:purge(msgflow_tracer),
    {module, msgflow_tracer} = code:load_abs(filename:join(Ebin, "msgflow_tracer")),
    ok.

%% msgflow's own work in the direct loop over Pairs (ns per send over the
%% floor, fastest of ?AB_RUNS runs each, interleaved) for each of
%% ?AB_SETUPS: kinds off and on with a call's request, round trips of 1
%% in 64 calls noted, a reply to a pid with round trips, and sizes of 1
%% in 64 sends measured.  Its sessions are stopped before it returns.
ab_costs(Pairs, N) ->
    New = fun(Kinds, Calls, Sizes) ->
                  S = msgflow_tracer:session_new(self(), 100000, Kinds),
                  _ = Calls andalso msgflow_tracer:calls_config(S, 64, 5000),
                  _ = Sizes andalso msgflow_tracer:sizes_config(S, 64, msgflow_tracer:size_words()),
                  S
          end,
    Reply = {erlang:monitor(process, self()), ok},
    Setups = #{floor => {floor, [], ?BENCH_MSG},
               off => {msgflow, New(0, false, false), ?BENCH_MSG},
               on => {msgflow, New(8, false, false), ?BENCH_MSG},
               rtt => {msgflow, New(8, true, false), ?BENCH_MSG},
               reply => {msgflow, New(8, true, false), Reply},
               sizes => {msgflow, New(8, true, true), ?BENCH_MSG}},
    Runs = lists:foldl(
             fun(_, Acc) ->
                     lists:foldl(fun(T, Acc1) ->
                                         {Tracer, S, Msg} = maps:get(T, Setups),
                                         R = call_loop(Tracer, S, Pairs, N, Msg),
                                         maps:update_with(T, fun(L) -> [R | L] end, [R], Acc1)
                                 end, Acc, shuffle(maps:keys(Setups)))
             end, #{}, lists:seq(1, ?AB_RUNS)),
    _ = [msgflow_tracer:session_stop(S) || {msgflow, S, _} <- maps:values(Setups)],
    Floor = lists:min(maps:get(floor, Runs)),
    maps:from_list([{T, lists:min(L) - Floor} || {T, L} <- maps:to_list(Runs), T =/= floor]).

%% Every sized edge of a session, taken in chunks as the collector does.
sizes_taken(Session, Acc) ->
    case msgflow_tracer:sizes_take_some(Session, 65536) of
        {more, Es} -> sizes_taken(Session, Es ++ Acc);
        {done, Es} -> Es ++ Acc
    end.

%% Every call counted, in 1,000 pairs, under the kind expected.  (A pair
%% comes once per slot that counted it: a thread that turns to the other
%% session claims a new slot in it, as it does for any new session.)
callbacks_exact(Session, N, Kind) ->
    {Counted, _, [], Overflow, _} = msgflow_tracer:snapshot(Session),
    msgflow_tracer:session_stop(Session),
    Total = lists:sum([element(3, D) || D <- Counted]) + Overflow,
    Pairs = lists:usort([{element(1, D), element(2, D)} || D <- Counted]),
    Kinds = lists:usort([case D of {_, _, _} -> none; {_, _, _, K, T} -> {K, T} end
                         || D <- Counted]),
    Total =:= N * ?CALLBACK_RUNS andalso length(Pairs) =:= 1000 andalso Kinds =:= [Kind].

call_loop(Tracer, Session, Pairs, N, Msg) ->
    T0 = erlang:monotonic_time(nanosecond),
    case Tracer of
        floor -> floor_loop(Pairs, Msg, N);
        _ -> msgflow_loop(Session, Pairs, Msg, N)
    end,
    (erlang:monotonic_time(nanosecond) - T0) / N.

floor_loop(_, _, 0) -> ok;
floor_loop(Pairs, Msg, N) ->
    {From, To, Extra} = element(N rem 1000 + 1, Pairs),
    trace = bench_floor_tracer:enabled_send(send, [], From),
    ok = bench_floor_tracer:trace_send(send, [], From, Msg, Extra),
    trace = bench_floor_tracer:enabled(trace_status, [], To),
    floor_loop(Pairs, Msg, N - 1).

msgflow_loop(_, _, _, 0) -> ok;
msgflow_loop(Session, Pairs, Msg, N) ->
    {From, To, Extra} = element(N rem 1000 + 1, Pairs),
    trace = msgflow_tracer:enabled_send(send, Session, From),
    ok = msgflow_tracer:trace_send(send, Session, From, Msg, Extra),
    trace = msgflow_tracer:enabled(trace_status, Session, To),
    msgflow_loop(Session, Pairs, Msg, N - 1).

yes_no(true) -> "yes";
yes_no(false) -> "NO".

%%% Request flows: what follow_calls/2 costs a request.  A chain of three
%%% gen_servers (the first calls the second, which calls the third): 6
%%% messages a request, plus the caller's `done', which goes with the token
%%% the reply brought back.  Each request comes from a fresh process (so a
%%% token never stays with a caller), 10 lanes at a time.  Setups:
%%% untraced; the floor (every request followed, the system tracer a
%%% tracer module that does nothing: what seq_trace costs by itself);
%%% follow_calls on every request; on one in 100; and what tools do today, seq_trace to a process (the system tracer and the meta
%%% tracer a process that counts pairs in a map; its drain is timed).

-define(FLOW_LANES, 10).

flows(Scale, Rounds) ->
    Per = max(10, round(2000 * Scale)),          %% requests per lane
    S3 = msgflow_bench_hop:start(undefined),
    S2 = msgflow_bench_hop:start(S3),
    S1 = msgflow_bench_hop:start(S2),
    Setups = [untraced, floor, every, one_in_100, process],
    Rs = lists:foldl(fun(_, Acc) ->
                             lists:foldl(fun(Setup, A) ->
                                                 R = flow_run(Setup, S1, Per),
                                                 maps:update_with(Setup, fun(L) -> [R | L] end,
                                                                  [R], A)
                                         end, Acc, shuffle(Setups))
                     end, #{}, lists:seq(1, Rounds)),
    Requests = Per * ?FLOW_LANES,
    Base = med(ns, maps:get(untraced, Rs)),
    BaseCpu = med(cpu, maps:get(untraced, Rs)),
    io:format("~nflows: 3-hop gen_server chain, a fresh caller per request, ~s requests "
              "(~b lanes), ~b round(s), medians~n"
              "  ~-28s ~12s ~10s ~14s ~10s ~9s ~s~n",
              [msgflow_fmt:int(Requests), ?FLOW_LANES, Rounds, "setup", "ns/request",
               "x untraced", "CPU ns/request", "x untraced", "followed", "msgs/request"]),
    [begin
         L = maps:get(Setup, Rs),
         Ns = med(ns, L),
         Cpu = med(cpu, L),
         %% every round's figure, so that one short count shows
         PerReqs = lists:usort([PR || #{info := {_, PR}} <- L]),
         {Followed, _} = maps:get(info, hd(L)),
         PerReq = lists:join("/", PerReqs),
         io:format("  ~-28s ~12s ~10s ~14s ~10s ~9s ~s~n",
                   [Name, msgflow_fmt:int(round(Ns / Requests)), ratio(Ns, Base, 2),
                    msgflow_fmt:int(round(Cpu / Requests)), ratio(Cpu, BaseCpu, 2),
                    msgflow_fmt:int(Followed), PerReq])
     end || {Setup, Name} <- [{untraced, "untraced"}, {floor, "floor (no-op system tracer)"},
                              {every, "follow_calls, every request"},
                              {one_in_100, "follow_calls, 1 in 100"},
                              {process, "seq_trace to a process"}]],
    %% msgflow's own work: what following every request costs above the floor
    Own = med(cpu, maps:get(every, Rs)) - med(cpu, maps:get(floor, Rs)),
    io:format("  follow_calls' own work above the floor: ~s CPU ns per request, ~s per "
              "message of the flow~n",
              [msgflow_fmt:int(round(Own / Requests)), msgflow_fmt:int(round(Own / (Requests * 7)))]),
    [gen_server:stop(P) || P <- [S1, S2, S3]],
    ok.

flow_run(Setup, S1, Per) ->
    MFA = {?MODULE, flow_request, 2},
    Counter = case Setup of
                  untraced ->
                      none;
                  every ->
                      ok = msgflow:follow_calls(MFA, #{sample => 1});
                  one_in_100 ->
                      ok = msgflow:follow_calls(MFA, #{sample => 100});
                  floor ->
                      false = seq_trace:set_system_tracer({bench_floor_tracer, []}),
                      E = msgflow_tracer:entry_new(1),
                      1 = erlang:trace_pattern(MFA, [{'_', [], [{set_seq_token, label, msgflow_bench_floor},
                                                               {set_seq_token, send, true}]}],
                                               [{meta, msgflow_tracer, E}]),
                      E;
                  process ->
                      C = spawn_link(fun() -> seq_counter(#{}) end),
                      false = seq_trace:set_system_tracer(C),
                      1 = erlang:trace_pattern(MFA, [{'_', [], [{set_seq_token, label, msgflow_bench_seq},
                                                               {set_seq_token, send, true}]}],
                                               [{meta, C}]),
                      C
              end,
    Self = self(),
    garbage_collect(),
    C0 = cpu_ns(),
    T0 = erlang:monotonic_time(nanosecond),
    Lanes = [spawn_link(fun() -> flow_lane(S1, Per), Self ! {lane, self()} end)
             || _ <- lists:seq(1, ?FLOW_LANES)],
    [receive {lane, L} -> ok end || L <- Lanes],
    Drained = case Counter of
                  C2 when is_pid(C2) ->
                      %% everything was sent to it before this: its drain
                      C2 ! {sync, self()},
                      receive {sync, C2, Counts} -> Counts end;
                  _ -> #{}
              end,
    T1 = erlang:monotonic_time(nanosecond),
    C1 = cpu_ns(),
    {Followed, PerReq} = case Setup of
                             untraced ->
                                 {0, "-"};
                             floor ->
                                 erlang:trace_pattern(MFA, false, [meta]),
                                 seq_trace:set_system_tracer(false),
                                 {element(2, msgflow_tracer:entry_info(Counter)), "-"};
                             process ->
                                 erlang:trace_pattern(MFA, false, [meta]),
                                 seq_trace:set_system_tracer(false),
                                 unlink(Counter),
                                 exit(Counter, kill),
                                 Calls = maps:get(calls, Drained, 0),
                                 Msgs = lists:sum([N || {{_, _}, N} <- maps:to_list(Drained)]),
                                 {Calls, lists:flatten(io_lib:format("~.1f", [Msgs / max(1, Calls)]))};
                             _ ->
                                 #{entries := [#{requests := Rq, per_request := PR}]} = msgflow:view(flows, #{}),
                                 ok = msgflow:unfollow(),
                                 {Rq, lists:flatten(io_lib:format("~.1f", [PR]))}
                         end,
    #{ns => T1 - T0, cpu => C1 - C0, info => {Followed, PerReq}}.

%% A system tracer and meta tracer process: counts calls and pairs.
seq_counter(M) ->
    receive
        {seq_trace, _Label, {send, _, From, To, _}} ->
            seq_counter(maps:update_with({From, To}, fun(N) -> N + 1 end, 1, M));
        {trace_ts, _, call, _, _} ->
            seq_counter(maps:update_with(calls, fun(N) -> N + 1 end, 1, M));
        {sync, From} ->
            From ! {sync, self(), M},
            seq_counter(M);
        _ ->
            seq_counter(M)
    end.

%% Requests one after the other, each from a process of its own.
flow_lane(_S1, 0) ->
    ok;
flow_lane(S1, N) ->
    Self = self(),
    {Pid, Ref} = spawn_monitor(fun() -> N = flow_request(S1, N), Self ! {done, self()} end),
    receive {done, Pid} -> ok end,
    %% the `done' brought the token: drop it before the next request
    _ = seq_trace:set_token([]),
    receive {'DOWN', Ref, process, Pid, _} -> ok end,
    flow_lane(S1, N - 1).

%% @private The bench's entry point for follow_calls.
-spec flow_request(pid(), term()) -> term().
flow_request(S1, X) ->
    gen_server:call(S1, {get, X}).

%%% Memory: 10,000,000 sends between 1,000 pairs must not grow the VM.

memory_flat(Scale) ->
    Pairs = 1000, PerPair = max(1, round(10000 * Scale)),
    Self = self(),
    Sinks = [spawn_link(fun sink/0) || _ <- lists:seq(1, Pairs)],
    Senders = [spawn_link(fun() -> receive go -> ok end, blast(Sink, PerPair),
                                   Self ! {blasted, self()} end) || Sink <- Sinks],
    ok = msgflow:start(#{procs => Senders}),
    garbage_collect(),
    Before = erlang:memory(total),
    [S ! go || S <- Senders],
    [receive {blasted, S} -> ok end || S <- Senders],
    #{memory := Tables, table_entries := Entries} = msgflow:info(),
    [garbage_collect(P) || P <- Sinks],
    garbage_collect(),
    After = erlang:memory(total),
    ok = msgflow:stop(),
    #{events := Events} = msgflow:info(),
    [exit(P, kill) || P <- Sinks ++ Senders],
    io:format("~nmemory: ~s sends between ~s pairs: VM total ~s -> ~s bytes (~s); "
              "NIF tables ~s bytes for ~s entries~n",
              [msgflow_fmt:int(Events), msgflow_fmt:int(Pairs), msgflow_fmt:int(Before),
               msgflow_fmt:int(After), signed(After - Before), msgflow_fmt:int(Tables),
               msgflow_fmt:int(Entries)]).

sink() -> receive _ -> sink() end.

blast(_Sink, 0) -> ok;
blast(Sink, N) ->
    Sink ! m,
    %% keep the sink's queue short so the VM measures msgflow, not mailboxes
    case N rem 64 of 0 -> erlang:yield(); _ -> ok end,
    blast(Sink, N - 1).

signed(N) when N >= 0 -> [$+ | msgflow_fmt:int(N)];
signed(N) -> msgflow_fmt:int(N).

%%% Snapshot with 1,000,000 distinct pairs, watched by long_schedule.

snapshot_large(Scale) ->
    Side = max(10, round(1000 * math:sqrt(Scale))),
    Self = self(),
    Receivers = [spawn_link(fun sink/0) || _ <- lists:seq(1, Side)],
    Senders = [spawn_link(fun() -> receive go -> ok end, [R ! m || R <- Receivers],
                                   Self ! {sent, self()} end) || _ <- lists:seq(1, Side)],
    Session = msgflow_tracer:session_new(self(), 4 * Side * Side, 0),
    [erlang:trace(S, true, [send, {tracer, msgflow_tracer, Session}]) || S <- Senders],
    [S ! go || S <- Senders],
    [receive {sent, S} -> ok end || S <- Senders],
    [try erlang:trace(S, false, [send]) catch _:_ -> 0 end || S <- Senders],
    #{entries := Entries, memory := Bytes} = msgflow_tracer:session_info(Session),
    erlang:system_monitor(self(), [{long_schedule, 1}]),
    T0 = erlang:monotonic_time(microsecond),
    {Pairs, _, _, _, _} = msgflow_tracer:snapshot(Session),
    T1 = erlang:monotonic_time(microsecond),
    erlang:system_monitor(undefined),
    Long = flush_long([]),
    N = length(Pairs),
    msgflow_tracer:session_stop(Session),
    [exit(P, kill) || P <- Senders ++ Receivers],
    io:format("snapshot: ~s pairs (~s table entries, ~.1f bytes each, all overhead "
              "included) in ~s ms; long_schedule (>1 ms) events during it: ~b~s~n",
              [msgflow_fmt:int(N), msgflow_fmt:int(Entries), Bytes / max(1, Entries),
               msgflow_fmt:rate((T1 - T0) / 1000),
               length(Long), [io_lib:format(" ~p", [L]) || L <- lists:sublist(Long, 3)]]).

flush_long(Acc) ->
    receive {monitor, Pid, long_schedule, Info} -> flush_long([{Pid, Info} | Acc])
    after 0 -> lists:reverse(Acc)
    end.

%%% Misc

shuffle(L) ->
    [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- L])].

cpu_model() ->
    case file:read_file("/proc/cpuinfo") of
        {ok, B} ->
            case re:run(B, "model name\\s*:\\s*(.*)", [{capture, all_but_first, list}]) of
                {match, [M]} -> M;
                nomatch -> "unknown CPU"
            end;
        _ -> "unknown CPU"
    end.
