%%% @doc `make bench-scale': what msgflow's views cost on a big node.
%%% Two workloads, each counted by msgflow with the defaults (interval
%%% 1000 ms, 60 windows kept):
%%% <ul>
%%% <li>`100k': 100,000 processes, spawned from one fun before start(),
%%%     each sending one message to each of two others in each of three
%%%     windows (200,000 pairs, 600,000 sends); the first hotspots() and
%%%     matrix by process are timed right after the first round's sends
%%%     (they wait for its merge and its 100,000 new endpoints' labels);
%%%     the processes stay alive, so stop() clears 100,000 traced
%%%     processes;</li>
%%% <li>`1M': 1,000 senders x 1,000 receivers, each pair of 1 to 3 kinds
%%%     (an info, a call, a cast: 1,000,000 pairs, 2,000,000 messages),
%%%     with max_memory 2 GiB (a million pairs take more than its
%%%     default); hotspots() is also timed, over and over, while the
%%%     messages are sent and merged (it reads closed windows and waits for
%%%     no merge), the median.</li>
%%% </ul>
%%% For each it times the API calls (wall ms, median of 3 after one
%%% warm-up, in the caller), counts the windows the collector closed while
%%% views ran back to back for 3 s, the long_schedule events (> 1 ms) of
%%% msgflow's own processes over the whole run beside those of a control
%%% process that only computes (and each per second of its work), the
%%% garbage collections over 1 ms (long_gc) of the collector, of
%%% msgflow's view processes, of the bench's process and of the
%%% workload's (MSGFLOW_GC_DEBUG=1 prints each with where it ran;
%%% MSGFLOW_LONG_DEBUG=1 each long_schedule and long_gc of the last
%%% part, stamped with the OS's monotonic clock in ns, so that they line
%%% up with `perf record -k CLOCK_MONOTONIC -e sched:sched_switch -a':
%%% whether the thread was on a core for the slice, or waited for one), and
%%% memory per distinct pair.  Prints a table beside issue 37's targets
%%% and main's figures before it (before/0); judges nothing.  Then the
%%% merge of a million new pairs alone and beside a reader of every pair,
%%% and each workload's merge with views running and a process doing plain
%%% work whenever the collector works: the long_schedule events of each
%%% (merge_beside_scan/0).
-module(msgflow_bench_scale).
-export([main/0]).
%% output thrown away, for the other benches too
-export([quiet/1]).
%% the merge beside a scan, by itself
-export([merge_beside_scan/0]).
%% shared with msgflow_bench_live
-export([top_once/0, tc/1]).

-spec main() -> no_return().
main() ->
    Code = try run() of ok -> 0
           catch C:R:St -> io:format("bench-scale failed: ~p:~p~n~p~n", [C, R, St]), 1
           end,
    erlang:halt(Code).

run() ->
    %% distributed, so that msgflow-top can attach to this node
    os:cmd("epmd -daemon"),
    {ok, _} = net_kernel:start([list_to_atom("msgflow_bench_" ++ os:getpid()), shortnames]),
    {ok, _} = application:ensure_all_started(msgflow),
    io:format("msgflow bench-scale on ~s, OTP ~s, ~b schedulers~n~n",
              [hd(string:split(os:cmd("uname -srm"), "\n")), erlang:system_info(otp_release),
               erlang:system_info(schedulers_online)]),
    A = workload_100k(),
    B = workload_1m(),
    print(A, B),
    merge_beside_scan(),
    ok.

%%% Workloads

workload_100k() ->
    N = 100000,
    Procs = [spawn(fun idle/0) || _ <- lists:seq(1, N)],
    T = list_to_tuple(Procs),
    Work0 = collector_work(),
    Monitor = start_monitor(),
    ok = msgflow:start(#{}),
    %% the first views right after the first round's sends: they wait for
    %% its merge, and the labels of 100,000 endpoints not seen before
    First = lists:foldl(
              fun(Round, Acc) ->
                      run_senders([{P, [element(1 + (I + 1) rem N, T),
                                        element(1 + (I + 7) rem N, T)]}
                                   || {I, P} <- lists:zip(lists:seq(0, N - 1), Procs)]),
                      Acc1 = case Round of
                                 1 ->
                                     {H, _} = tc(fun() -> msgflow:view(hotspots, #{}) end),
                                     {M, _} = tc(fun() -> msgflow:view(matrix, #{by => process}) end),
                                     #{first_hotspots => H, first_matrix => M};
                                 _ ->
                                     Acc
                             end,
                      await_windows(1),
                      Acc1
              end, #{}, lists:seq(1, 3)),
    await_windows(1),
    R0 = measure(#{name => "100k processes, 200k pairs"}),
    R = R0#{times := maps:merge(maps:get(times, R0), First)},
    Work = collector_work() - Work0,
    {StopMs, _} = tc(fun() -> ok = msgflow:stop() end),
    Events = (stop_monitor(Monitor))#{own_busy_ms => Work},
    [exit(P, kill) || P <- Procs],
    R#{stop => StopMs, long => Events}.

workload_1m() ->
    Rs = [spawn(fun idle/0) || _ <- lists:seq(1, 1000)],
    Ss = [spawn(fun idle/0) || _ <- lists:seq(1, 1000)],
    Work0 = collector_work(),
    Monitor = start_monitor(),
    %% a million pairs take more than max_memory's default (256 MiB)
    ok = msgflow:start(#{max_memory => 2 bsl 30}),
    %% 1 to 3 kinds a pair (an info, then a call, then a cast), 2,000,000
    %% messages
    Kinds = [m, {'$gen_call', {self(), tag}, {get, 1}}, {'$gen_cast', {add, 1}}],
    %% hotspots() over and over while the million pairs' messages are sent
    %% (1,000 senders, each to 1,000 receivers: the windows they close in
    %% hold fan_out findings, one for the group), the median
    Done = start_senders([{S, [{R, lists:sublist(Kinds, 1 + (I + J) rem 3)}
                               || {J, R} <- lists:enumerate(Rs)]}
                          || {I, S} <- lists:enumerate(Ss)]),
    Runs = hotspots_until(Done, 1000, []),
    Busy = lists:nth(1 + length(Runs) div 2, lists:sort([Ms || {Ms, _} <- Runs])),
    %% (Runs is newest first: the last is the first call after start())
    {FirstMs, _} = lists:last(Runs),
    io:format("hotspots() while sending and merging: ~b calls, the first ~.1f ms, "
              "the slowest of the others ~.1f ms, findings ~p~n",
              [length(Runs), FirstMs, lists:max([0.0 | [Ms || {Ms, _} <- lists:droplast(Runs)]]),
               lists:usort([{Rule, maps:get(members, F, 1)}
                                          || {_, Found} <- Runs, F = #{rule := Rule} <- Found])]),
    await_windows(2),
    R0 = measure(#{name => "1,000,000 pairs"}),
    R = R0#{times := (maps:get(times, R0))#{hotspots_busy => Busy}},
    Work = collector_work() - Work0,
    {StopMs, _} = tc(fun() -> ok = msgflow:stop() end),
    Events = (stop_monitor(Monitor))#{own_busy_ms => Work},
    [exit(P, kill) || P <- Rs ++ Ss],
    R#{stop => StopMs, long => Events}.

idle() ->
    receive
        {send, Done, To} ->
            [case P of
                 {Pid, Msgs} -> [Pid ! M || M <- Msgs];
                 _ -> P ! m
             end || P <- To],
            counters:add(Done, 1, 1),
            idle();
        _ -> idle()
    end.

%% hotspots() timed until the counter Done reaches N, then until a take
%% begun after that is merged (info/0 returns once one is: every message
%% sent is then in the store): [{Ms, Findings}].
hotspots_until(Done, N, Acc) ->
    case counters:get(Done, 1) >= N of
        true ->
            {_, Ref} = spawn_monitor(fun() -> _ = msgflow:info() end),
            hotspots_while(Ref, Acc);
        false ->
            hotspots_until(Done, N, [tc(fun() -> msgflow:view(hotspots, #{}) end) | Acc])
    end.

hotspots_while(Ref, Acc) ->
    receive
        {'DOWN', Ref, process, _, _} -> Acc
    after 0 ->
            hotspots_while(Ref, [tc(fun() -> msgflow:view(hotspots, #{}) end) | Acc])
    end.

%% The senders told to send; the counter they add 1 to when done.
start_senders(Plan) ->
    ok = msgflow:untrace(self()),
    Done = counters:new(1, []),
    [S ! {send, Done, To} || {S, To} <- Plan],
    Done.

%% Each sender sends one message to each of its receivers; returns when
%% all have.  The bench process is not traced, and the senders tell it
%% they are done through a counter, so the workload's pairs are exactly
%% its senders' (the bench polls: it is not a test).
run_senders(Plan) ->
    ok = msgflow:untrace(self()),
    Done = counters:new(1, []),
    [S ! {send, Done, To} || {S, To} <- Plan],
    wait_count(Done, length(Plan)).

wait_count(C, N) ->
    case counters:get(C, 1) >= N of
        true -> ok;
        false -> receive after 20 -> wait_count(C, N) end
    end.

await_windows(N) ->
    ok = msgflow_collector:await_windows(N, 120000).

%% The merge of a million new pairs (1,000 senders x 1,000 receivers, one
%% message each, merged by pairs()), alone and with a process that reads
%% every row of the pairs table over and over (asking the collector for
%% the store each time, as a view does): the collector's work and its
%% long_schedule events over 1 ms.  What the rows tables' locks are for
%% (msgflow_store:new_rows/0).  Then the collector beside plain work: the
%% merge of each workload's pairs and the two windows after it, with views
%% running over and over, and a process doing plain work whenever the
%% collector works (beside/1): the long_schedule events over 1 ms of each,
%% and each one's work.
merge_beside_scan() ->
    io:format("~nthe merge of 1,000,000 new pairs (pairs()), the collector's work ms and "
              "long_schedule > 1 ms:~n"),
    [begin
         #{collector := {Work, Long}} = merge(big, Beside),
         io:format("  ~-28s ~6b ms ~6b~n", [What, Work, Long])
     end || {Beside, What} <- [{none, "alone"}, {scan, "beside a scan of the pairs"}]],
    io:format("~nthe merge of new pairs and two windows after it, views running, "
              "and plain work whenever the collector works (three rounds, and their sum):~n"
              "~-36s ~12s ~12s ~12s ~12s ~12s ~12s ~12s~n",
              ["long_schedule > 1 ms", "collector", "views", "plain work", "collector ms",
               "plain ms", "collector /s", "plain /s"]),
    PerS = fun(N, W) -> io_lib:format("~.1f", [N * 1000 / max(1, W)]) end,
    Line = fun(What, {CW, CN}, V, {PW, PN}) ->
                   io:format("~-36s ~12b ~12b ~12b ~12b ~12b ~12s ~12s~n",
                             [What, CN, V, PN, CW, PW, PerS(CN, CW), PerS(PN, PW)])
           end,
    Add = fun({W1, N1}, {W2, N2}) -> {W1 + W2, N1 + N2} end,
    [begin
         Rounds = [merge(Load, plain) || _ <- lists:seq(1, 3)],
         [Line(io_lib:format("  ~s, round ~b", [What, I]), C, V, P)
          || {I, #{collector := C, views := V, plain := P}} <- lists:enumerate(Rounds)],
         Line(io_lib:format("  ~s, the three", [What]),
              lists:foldl(Add, {0, 0}, [C || #{collector := C} <- Rounds]),
              lists:sum([V || #{views := V} <- Rounds]),
              lists:foldl(Add, {0, 0}, [P || #{plain := P} <- Rounds]))
     end || {Load, What} <- [{small, "100k procs, 200k pairs"}, {big, "1M pairs"}]],
    ok.

%% Load `big' (1,000 x 1,000 pairs) or `small' (100,000 processes, each
%% to two others) sent once and merged, Beside it `none', `scan' (a
%% reader of every pair) or `plain' (views over and over, and plain work
%% beside the collector, whose long_schedule events are counted too):
%% #{collector => {WorkMs, Events}, views => Events, plain => {WorkMs, Events}}.
merge(Load, Beside) ->
    {Plan, Procs} =
        case Load of
            big ->
                Rs = [spawn(fun idle/0) || _ <- lists:seq(1, 1000)],
                Ss = [spawn(fun idle/0) || _ <- lists:seq(1, 1000)],
                {[{S, Rs} || S <- Ss], Rs ++ Ss};
            small ->
                N = 100000,
                Ps = [spawn(fun idle/0) || _ <- lists:seq(1, N)],
                T = list_to_tuple(Ps),
                {[{element(I, T), [element(1 + I rem N, T), element(1 + (I + 6) rem N, T)]}
                  || I <- lists:seq(1, N)], Ps}
        end,
    Work0 = collector_work(),
    Interval = case Beside of plain -> 1000; _ -> 3600000 end,
    ok = msgflow:start(#{max_memory => 2 bsl 30, interval => Interval}),
    Busy = atomics:new(1, []),
    Self = self(),
    Debug = os:getenv("MSGFLOW_LONG_DEBUG") =/= false,
    M = spawn(fun() ->
                      %% the events' times read as they come (below)
                      _ = Debug andalso process_flag(priority, high),
                      long_events(Self, #{})
              end),
    erlang:system_monitor(M, [{long_schedule, 1} | [{long_gc, 1} || Debug]]),
    Others = case Beside of
                 none -> [];
                 scan -> [spawn(fun scan/0)];
                 plain -> [spawn(fun views/0), register_plain(spawn(fun() -> beside(Busy) end))]
             end,
    run_senders(Plan),
    _ = msgflow:pairs(),
    Beside =:= plain andalso await_windows(2),
    Work = collector_work() - Work0,
    erlang:system_monitor(undefined),
    [exit(P, kill) || P <- Others],
    M ! {done, self()},
    Long = receive {long, L} -> L end,
    ok = msgflow:stop(),
    [exit(P, kill) || P <- Procs],
    #{collector => {Work, maps:get(collector, Long, 0)}, views => maps:get(views, Long, 0),
      plain => {atomics:get(Busy, 1) div 1000, maps:get(plain, Long, 0)}}.

register_plain(P) ->
    register(msgflow_bench_plain, P),
    P.

%% Views over and over, as a page and a shell would ask them.
views() ->
    quiet(fun() ->
                  _ = msgflow:view(top, #{limit => 20}),
                  _ = msgflow:view(hotspots, #{}),
                  _ = msgflow:view(matrix, #{by => name})
          end),
    views().

%% Plain work beside the collector: arithmetic for 5 ms at a time (many
%% slices, each ended by reductions) for as long as the collector is not
%% waiting for a message (read between two such stretches), and rest
%% (1 ms) while it waits; the µs of work added up in Busy.  A thread that
%% runs for long stretches is the one the OS takes the core from (a
%% long_schedule of about 4 ms, this kernel's tick), and the whole run's
%% control rests 50 ms out of 51: this one works when and about as long
%% as the collector does, so that their counts compare.
beside(Busy) ->
    Working = case whereis(msgflow_collector) of
                  C when is_pid(C) -> erlang:process_info(C, status) =/= {status, waiting};
                  _ -> false
              end,
    case Working of
        true ->
            T0 = erlang:monotonic_time(microsecond),
            work_until(T0 + 5000),
            atomics:add(Busy, 1, erlang:monotonic_time(microsecond) - T0),
            beside(Busy);
        false ->
            receive after 1 -> beside(Busy) end
    end.

work_until(T) ->
    _ = lists:sum(lists:seq(1, 2000)),
    case erlang:monotonic_time(microsecond) >= T of
        true -> ok;
        false -> work_until(T)
    end.

%% The collector's work since it started, ms (info/0 waits for a merge
%% under way; 30 s at a time).
collector_work() ->
    case msgflow:info() of
        #{collector_work_ms := Work} -> Work;
        {error, {timeout, _}} -> collector_work()
    end.

%% A view's read of every pair, over and over: the store asked for (as
%% a view asks, without a snapshot), then every row of the pairs read.
scan() ->
    #{pairs := T} = msgflow_collector:store(false),
    _ = msgflow_row_table:fold_select(T, [{'_', [], [true]}], fun(_, N) -> N + 1 end, 0),
    scan().

%% long_schedule events over 1 ms, by whose: `collector', `plain', or
%% `views' (a slice begun or ended in msgflow's code: the views' own
%% processes, and msgflow's API in the bench's process that asks them).
long_events(Bench, Acc) ->
    receive
        {monitor, P, long_schedule, Info} when is_pid(P) ->
            At = os_now(),
            %% read as the event comes: the plain process is registered
            %% after this one starts
            Whose = #{whereis(msgflow_collector) => collector,
                      whereis(msgflow_bench_plain) => plain},
            W = case Whose of
                    #{P := W0} -> W0;
                    _ -> case msgflow_code(Info) of true -> views; false -> other end
                end,
            %% (with the OS's monotonic clock as the event came: to line
            %% it up with `perf record -k CLOCK_MONOTONIC')
            os:getenv("MSGFLOW_LONG_DEBUG") =/= false andalso
                io:format(standard_error, "long ~p ~b ~p~n", [W, At, Info]),
            long_events(Bench, maps:update_with(W, fun(N) -> N + 1 end, 1, Acc));
        {monitor, P, long_gc, Info} ->
            At = os_now(),
            io:format(standard_error, "gc ~p ~b ~p~n",
                      [case whereis(msgflow_collector) of P -> collector; _ -> other end, At, Info]),
            long_events(Bench, Acc);
        {monitor, _, _, _} -> long_events(Bench, Acc);
        {done, Bench} -> Bench ! {long, Acc}
    end.

%% The OS's monotonic clock now, ns (the VM's native unit, which is ns
%% on Linux, converted).
os_now() ->
    erlang:convert_time_unit(proplists:get_value(time, erlang:system_info(
                                                          os_monotonic_time_source)),
                             native, nanosecond).

msgflow_code(Info) ->
    lists:any(fun({M, _, _}) ->
                      case atom_to_list(M) of
                          "msgflow_bench" ++ _ -> false;
                          "msgflow" ++ _ -> true;
                          _ -> false
                      end;
                 (_) -> false
              end, [proplists:get_value(K, Info) || K <- [in, out]]).

%%% Measurements

measure(R) ->
    Info = msgflow:info(),
    #{pairs := Pairs, memory := NifBytes, table_entries := Entries,
      store_memory := StoreBytes} = Info,
    Quiet = fun(F) -> fun() -> quiet(F) end end,
    Path = filename:absname("_build/bench-scale.html"),
    %% the busiest sender, opened as msgflow-top opens a row
    #{rows := [#{sender := Busiest} | _]} = msgflow:view(top, #{limit => 1}),
    Calls = [{top, Quiet(fun() -> ok = msgflow:top(20) end)},
             {matrix, fun() -> #{} = msgflow:view(matrix, #{by => name}) end},
             {matrix_printed, Quiet(fun() -> ok = msgflow:matrix(name) end)},
             {process, fun() -> #{sends_to := [_ | _]} = msgflow:view(process, #{pid => Busiest}) end},
             {hotspots, fun() -> true = is_list(msgflow:view(hotspots, #{})) end},
             {bottlenecks, fun() -> #{causes := _} = msgflow:view(bottlenecks, #{}) end},
             %% the svg export's heatmap, by process; and the same made
             %% the way it was before, from a row of every pair
             {heatmap, fun() -> #{} = msgflow:view(matrix, #{by => process, limit => 30}) end},
             {heatmap_rows, fun() -> #{} = heatmap_of_every_row(30) end},
             {export, fun() -> ok = msgflow:export(Path, html) end},
             {pairs, fun() -> true = length(msgflow:pairs()) >= Pairs end}],
    Times = maps:from_list([{K, median3(F)} || {K, F} <- Calls]),
    %% one refresh of the web page, in CPU ms of the whole VM (the views
    %% run in worker processes): what msgflow_web asks its source for
    Source = msgflow_web_source:source(#{metrics_edges => 100}),
    Web = [{web_name, fun() -> {ok, _} = Source({state, name, #{}}) end},
           {matrix_cpu, fun() -> #{} = msgflow:view(matrix, #{by => name}) end},
           {web_hotspots, fun() -> {ok, _} = Source(hotspots) end},
           %% what the alerts ask for each time they evaluate
           {bottlenecks_cpu, fun() -> #{causes := _} = msgflow:view(bottlenecks, #{}) end},
           {web_process, fun() -> {ok, _} = Source({state, process, #{}}) end},
           {web_metrics, fun() -> {ok, _} = Source(metrics) end},
           {top_cpu, Quiet(fun() -> ok = msgflow:top(20) end)}],
    Cpu0 = maps:from_list([{K, median3_cpu(F)} || {K, F} <- Web]),
    %% five browsers asking at once share one computation (a new server
    %% each time: nothing cached)
    Shared = fun() ->
                     _ = msgflow:web_stop(),
                     {ok, _} = msgflow:web(#{port => 0}),
                     at_once(5, fun() -> {ok, _} = msgflow_web:get({state, name, #{}}) end)
             end,
    %% msgflow-top's refresh: what it asked the node for before (the whole
    %% dump, regrouped in C) beside what it asks now (the rows it shows, from
    %% the query path: 20 with --once --top 20, 500 on a terminal)
    Remote = fun(Call) ->
                     fun() ->
                             Ref = make_ref(),
                             msgflow_remote ! {msgflow_call, self(), Ref, Call},
                             receive {msgflow_reply, Ref, Reply} -> true = is_binary(Reply) end
                     end
             end,
    TopReqs = [{top_dump, fun() -> true = is_binary(msgflow:dump()) end},
               {top_rows20, Remote({rows, #{limit => 20}})},
               {top_rows500, Remote({rows, #{limit => 500}})},
               {top_rows_name, Remote({rows, #{limit => 500, by => name}})}],
    Cpu = maps:merge(Cpu0#{web_shared => median3_cpu(Shared)},
                     maps:from_list([{K, median3_cpu(F)} || {K, F} <- TopReqs])),
    ok = msgflow:web_stop(),
    TopOnce = median3(fun() -> top_once() end),
    %% views back to back for 3 s: how many windows did the collector close?
    Closed0 = closed(),
    Until = erlang:monotonic_time(millisecond) + 3000,
    views_until(Until),
    Closed = closed() - Closed0,
    R#{pairs => Pairs, times => Times#{top_once => TopOnce}, cpu => Cpu, closed_3s => Closed,
       store_bytes => StoreBytes, nif_bytes => NifBytes, entries => Entries,
       collector_heap => element(2, process_info(whereis(msgflow_collector), memory))}.

closed() ->
    maps:get(closed, msgflow_collector:store(false)).

%% msgflow-top --once --top 20 run against this node, as a person runs it
%% (the build's C tool; it finds the run going on and shows it).
top_once() ->
    %% the build directory's bin/, beside BuildDir/default/lib/msgflow/ebin
    Ebin = filename:dirname(code:which(msgflow)),
    Tool = filename:absname(filename:join([filename:dirname(filename:dirname(
                                             filename:dirname(filename:dirname(Ebin)))),
                                           "bin", "msgflow-top"])),
    Port = open_port({spawn_executable, Tool},
                     [{args, ["--node", atom_to_list(node()), "--cookie",
                              atom_to_list(erlang:get_cookie()), "--once", "--top", "20"]},
                      binary, exit_status, use_stdio, stderr_to_stdout]),
    top_once_wait(Port, []).

top_once_wait(Port, Acc) ->
    receive
        {Port, {data, D}} -> top_once_wait(Port, [D | Acc]);
        {Port, {exit_status, 0}} -> ok;
        {Port, {exit_status, S}} -> error({msgflow_top, S, iolist_to_binary(lists:reverse(Acc))})
    end.

views_until(Until) ->
    case erlang:monotonic_time(millisecond) < Until of
        true -> _ = msgflow:view(matrix, #{by => name}), _ = quiet(fun() -> msgflow:top(20) end),
                views_until(Until);
        false -> ok
    end.

%% CPU ms of the whole VM (statistics(runtime)) F takes, median of 3 runs;
%% a page's document is cached for 1 s, so runs are 1.1 s apart
median3_cpu(F) ->
    _ = F(),
    Ts = lists:sort([begin
                         timer:sleep(1100),
                         {T0, _} = statistics(runtime),
                         _ = F(),
                         {T1, _} = statistics(runtime),
                         T1 - T0
                     end || _ <- [1, 2, 3]]),
    lists:nth(2, Ts).

%% F in N processes at once; returns when all are done.
at_once(N, F) ->
    Self = self(),
    Pids = [spawn(fun() -> F(), Self ! {at_once, self()} end) || _ <- lists:seq(1, N)],
    [receive {at_once, P} -> ok end || P <- Pids],
    ok.

median3(F) ->
    _ = F(),
    Ts = lists:sort([element(1, tc(F)) || _ <- [1, 2, 3]]),
    lists:nth(2, Ts).

%% F's wall time in ms (a float) and its value.
tc(F) ->
    T0 = erlang:monotonic_time(microsecond),
    V = F(),
    {(erlang:monotonic_time(microsecond) - T0) / 1000, V}.

%% Runs F with a group leader that drops what it prints.
%% @doc F() with its output (io to the group leader) thrown away.
-spec quiet(fun(() -> T)) -> T.
quiet(F) ->
    Old = group_leader(),
    GL = spawn(fun null_gl/0),
    group_leader(GL, self()),
    try F() after group_leader(Old, self()), exit(GL, kill) end.

null_gl() ->
    receive
        {io_request, From, Ref, getopts} -> From ! {io_reply, Ref, []}, null_gl();
        {io_request, From, Ref, _} -> From ! {io_reply, Ref, ok}, null_gl();
        _ -> null_gl()
    end.

%% long_schedule events over 1 ms, by process, while the workload runs;
%% and those of a control process that only computes in short bursts (its
%% slices are ended by reductions alone, no ETS, no NIF): what this machine
%% does to a slice by itself.
start_monitor() ->
    Self = self(),
    M = spawn(fun() -> monitor_loop(Self, []) end),
    Busy = atomics:new(1, []),
    persistent_term:put(msgflow_bench_control_busy, Busy),
    Control = spawn(fun() -> control(Busy) end),
    register(msgflow_bench_control, Control),
    erlang:system_monitor(M, [{long_schedule, 1}, {long_gc, 1}]),
    M.

stop_monitor(M) ->
    erlang:system_monitor(undefined),
    M ! {done, self()},
    receive {events, E} -> exit(whereis(msgflow_bench_control), kill) end,
    E#{control_busy_ms => atomics:get(persistent_term:get(msgflow_bench_control_busy), 1) div 1000}.

%% About 1 ms of arithmetic (several slices, each ended by reductions),
%% then 50 ms of rest (2% of a core), until killed; the µs of the bursts
%% added up in Busy (wall time: what the process was exposed to).
control(Busy) ->
    T0 = erlang:monotonic_time(microsecond),
    _ = lists:sum(lists:seq(1, 50000)),
    atomics:add(Busy, 1, erlang:monotonic_time(microsecond) - T0),
    receive stop -> ok after 50 -> control(Busy) end.

monitor_loop(Bench, Acc) ->
    receive
        {monitor, Pid, long_schedule, Info} when is_pid(Pid) ->
            monitor_loop(Bench, [{Pid, proplists:get_value(timeout, Info),
                                  {proplists:get_value(in, Info), proplists:get_value(out, Info)}}
                                 | Acc]);
        {monitor, Pid, long_gc, Info} when is_pid(Pid) ->
            os:getenv("MSGFLOW_GC_DEBUG") =/= false andalso
                io:format(standard_error, "gc ~p ~p ~p~n", [gc_of(Pid, Bench), erlang:process_info(Pid, current_stacktrace), Info]),
            monitor_loop(Bench, [{Pid, proplists:get_value(timeout, Info), {gc, gc_of(Pid, Bench)}}
                                 | Acc]);
        {monitor, _, _, _} ->
            monitor_loop(Bench, Acc);
        {done, From} ->
            Own = [whereis(msgflow_collector), whereis(msgflow_sup)],
            {Gcs, Slices} = lists:partition(fun({_, _, W}) -> element(1, W) =:= gc end, Acc),
            Mine = [Ms || {P, Ms, _} <- Slices, lists:member(P, Own)],
            Where = lists:sublist(lists:reverse(lists:sort([{Ms, W} || {P, Ms, W} <- Slices,
                                                                       lists:member(P, Own)])), 3),
            Caller = [Ms || {P, Ms, _} <- Slices, P =:= Bench],
            Control = [Ms || {P, Ms, _} <- Slices, P =:= whereis(msgflow_bench_control)],
            %% garbage collections over 1 ms (a big heap's major one runs
            %% on a dirty scheduler): msgflow's own (the collector, and
            %% the view processes, which are gone by now: not the
            %% bench's nor the workload's), and the rest
            Gc = fun(Class) -> [Ms || {_, Ms, {gc, C}} <- Gcs, C =:= Class] end,
            From ! {events, #{own => length(Mine), own_worst => lists:max([0 | Mine]),
                              own_where => Where,
                              caller => length(Caller), caller_worst => lists:max([0 | Caller]),
                              control => length(Control),
                              control_worst => lists:max([0 | Control]),
                              gc => maps:from_list([{C, {length(Gc(C)), lists:sum(Gc(C))}}
                                                    || C <- [collector, msgflow, bench, other]])}}
    end.

%% Whose garbage collection a long_gc event is: `msgflow' (its
%% collector, or a process running its code: a view's), `bench' (this
%% bench's process) or `other' (the workload's); read as the event comes,
%% while a view's process is still there.
gc_of(Bench, Bench) ->
    bench;
gc_of(Pid, _) ->
    case lists:member(Pid, [whereis(msgflow_collector), whereis(msgflow_sup)]) of
        true -> collector;
        false ->
            case erlang:process_info(Pid, current_stacktrace) of
                {current_stacktrace, Frames} ->
                    Mods = [atom_to_list(M) || {M, _, _, _} <- Frames],
                    case [M || M = "msgflow_" ++ Rest <- Mods, not lists:prefix("bench", Rest)] of
                        [] -> other;
                        _ -> msgflow
                    end;
                undefined -> other
            end
    end.

%% The heatmap of L by process as it was made before heat_by_process
%% (msgflow_rows_groups): a row of every pair, their senders' and
%% receivers' sums, the matrix of those (in the calling process).
heatmap_of_every_row(L) ->
    Store = msgflow_collector:store(false),
    View = #{rows := Rows} = msgflow_rows:build(Store, #{by => process, with_kinds => false}),
    msgflow_matrix_view:of_rows(View#{heatmap => msgflow_rows_ends:heatmap(Rows, L)}, L).

%%% Table

%% Figures of main before issue 37 (at 6640f04, `make bench-scale' on
%% this machine, 2026-11-25), by row: {100k, 1M}.
before() ->
    #{"first hotspots() after start ms" => {"1694.0", "-"},
      "first matrix(process) ms" => {"1315.0", "-"},
      "top(20) ms" => {"69.6", "405.6"},
      "view(process, busiest) ms" => {"79.8", "422.2"},
      "hotspots() ms" => {"119.6", "413.4"},
      "hotspots(), last window busy ms" => {"-", "24200 (issue)"},
      "export(Path, html) ms" => {"199.2", "820.6"},
      "pairs() ms" => {"131.8", "1063.9"},
      "web refresh by process, CPU ms" => {"81", "429"},
      "top(20), CPU ms" => {"83", "452"},
      "web hotspots (every 5 s), CPU ms" => {"81", "475"},
      "msgflow-top rows (20), CPU ms" => {"78", "388"},
      "msgflow-top --once --top 20 ms" => {"90.8", "387.2"},
      "own memory (store + tracer) MB" => {"92.3", "479.6"},
      "long_schedule > 1 ms, msgflow" => {"14 (worst 6)", "69 (worst 20)"},
      "long_schedule > 1 ms, control" => {"4 (worst 9)", "4 (worst 5)"}}.

print(A, B) ->
    Before = before(),
    Row = fun(What, Target, F) ->
                  {BA, BB} = maps:get(What, Before, {"", ""}),
                  io:format("~-34s ~-11s ~13s ~13s ~13s ~13s~n", [What, Target, BA, F(A), BB, F(B)])
          end,
    Ms = fun(K) -> fun(#{times := T}) -> io_lib:format("~.1f", [maps:get(K, T)]) end end,
    io:format("~-34s ~-11s ~13s ~13s ~13s ~13s~n",
              ["", "100k / 1M", "100k before", "100k procs", "1M before", "1M pairs"]),
    Row("distinct pairs", "", fun(#{pairs := P}) -> msgflow_fmt:int(P) end),
    MsOr = fun(K) -> fun(#{times := T}) ->
                             case T of #{K := V} -> io_lib:format("~.1f", [V]); _ -> "-" end
                     end end,
    Row("first hotspots() after start ms", "300", MsOr(first_hotspots)),
    Row("first matrix(process) ms", "300", MsOr(first_matrix)),
    Row("top(20) ms", "50 / 100", Ms(top)),
    Row("matrix(name) ms", "300", Ms(matrix)),
    Row("matrix(name) printed, 80x24 ms", "", Ms(matrix_printed)),
    Row("view(process, busiest) ms", "", Ms(process)),
    Row("hotspots() ms", "100 / 200", Ms(hotspots)),
    Row("bottlenecks() ms", "", Ms(bottlenecks)),
    Row("matrix(process), limit 30 ms", "", Ms(heatmap)),
    Row("  the same from every row ms", "", Ms(heatmap_rows)),
    Row("hotspots(), last window busy ms", "100 / 200", MsOr(hotspots_busy)),
    Row("export(Path, html) ms", "1500 / 3000", Ms(export)),
    Row("pairs() ms", "500 / 1000", Ms(pairs)),
    Cpu = fun(K) -> fun(#{cpu := C}) -> integer_to_list(maps:get(K, C)) end end,
    Row("matrix(name), CPU ms", "100", Cpu(matrix_cpu)),
    Row("web refresh by name, CPU ms", "", Cpu(web_name)),
    Row("web refresh by process, CPU ms", "50 / 100", Cpu(web_process)),
    Row("top(20), CPU ms", "", Cpu(top_cpu)),
    Row("web /metrics, CPU ms", "", Cpu(web_metrics)),
    Row("web hotspots (every 5 s), CPU ms", "", Cpu(web_hotspots)),
    Row("bottlenecks (the alerts), CPU ms", "", Cpu(bottlenecks_cpu)),
    Row("web, 5 browsers at once, CPU ms", "1 refresh", Cpu(web_shared)),
    Row("msgflow-top before: dump(), CPU ms", "", Cpu(top_dump)),
    Row("msgflow-top rows (20), CPU ms", "", Cpu(top_rows20)),
    Row("msgflow-top rows (500), CPU ms", "", Cpu(top_rows500)),
    Row("msgflow-top rows by name, CPU ms", "", Cpu(top_rows_name)),
    Row("msgflow-top --once --top 20 ms", "1000", Ms(top_once)),
    Row("stop() ms", "1000", fun(#{stop := S}) -> io_lib:format("~.1f", [S]) end),
    Row("windows closed in 3 s of views", "3", fun(#{closed_3s := C}) -> integer_to_list(C) end),
    Row("Erlang-side bytes per pair", "200",
        fun(#{store_bytes := S, pairs := P}) -> io_lib:format("~.1f", [S / max(1, P)]) end),
    Row("NIF bytes per pair", "",
        fun(#{nif_bytes := S, pairs := P}) -> io_lib:format("~.1f", [S / max(1, P)]) end),
    Row("own memory (store + tracer) MB", "80 / -",
        fun(#{store_bytes := S, nif_bytes := N}) -> io_lib:format("~.1f", [(S + N) / 1048576]) end),
    Row("NIF entries per pair", "",
        fun(#{entries := E, pairs := P}) -> io_lib:format("~.2f", [E / max(1, P)]) end),
    Row("collector heap MB", "",
        fun(#{collector_heap := H}) -> io_lib:format("~.1f", [H / 1048576]) end),
    Row("long_schedule > 1 ms, msgflow", "(below)",
        fun(#{long := #{own := N, own_worst := W}}) -> io_lib:format("~b (worst ~b)", [N, W]) end),
    Row("long_schedule > 1 ms, control", "",
        fun(#{long := #{control := N, control_worst := W}}) ->
                io_lib:format("~b (worst ~b)", [N, W]) end),
    PerBusy = fun(N, Busy) -> io_lib:format("~.1f", [N * 1000 / max(1, Busy)]) end,
    Row("  msgflow's per s of its work", "",
        fun(#{long := #{own := N, own_busy_ms := Busy}}) -> PerBusy(N, Busy) end),
    Row("  control's per s of its work", "",
        fun(#{long := #{control := N, control_busy_ms := Busy}}) -> PerBusy(N, Busy) end),
    Row("long_schedule > 1 ms, caller", "",
        fun(#{long := #{caller := N, caller_worst := W}}) ->
                io_lib:format("~b (worst ~b)", [N, W]) end),
    [Row("long_gc > 1 ms, " ++ What ++ " (ms)", "",
         fun(#{long := #{gc := #{C := {N, GcMs}}}}) -> io_lib:format("~b (~b)", [N, GcMs]) end)
     || {C, What} <- [{collector, "collector"}, {msgflow, "views"}, {bench, "caller"},
                      {other, "workload"}]],
    [io:format("~nworst long_schedule of msgflow's processes, ~s: ~p", [Name, W])
     || {Name, #{long := #{own_where := W}}} <- [{"100k", A}, {"1M", B}]],
    io:format("~nBefore this layout (issue 11, 100k processes, 200-300k pairs): top(20) "
              "2.9-4.7 s, matrix(name) 2.9-4.9 s, hotspots() 1.9-2.3 s, export html "
              "6.0-11.8 s.~n").
