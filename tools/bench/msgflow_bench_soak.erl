%%% @doc The soak of `make bench-scale' (alone: `make soak'): msgflow left
%%% running on a node that starts a process per request.
%%%
%%% 200 gen_servers; every 100 ms, 500 new clients (5,000 a second), each
%%% making 20 `gen_server:call's to a server chosen at random and exiting.
%%% Each call is a request to the server's pid and a reply to a fresh alias
%%% (OTP 24+), so the node makes 10,000 new sender-receiver pairs of pids
%%% and 100,000 aliases a second.  msgflow runs with `max_pairs => 50000'
%%% and its defaults otherwise (1 s windows).
%%%
%%% Every 30 s it prints: clients started and calls made, the VM's memory
%%% (erlang:memory(total)), the OS process's resident set, the collector's
%%% (its heap and its ETS tables), the NIF's tables (msgflow's count, and
%%% jemalloc's resident bytes for its arenas), the pairs held, the rolled up
%%% rows, rolled up and overflow messages, and whether `events = pairs +
%%% rolled up + overflow' holds in one store.  At the end: the targets of
%%% issue 12 beside the figures, and top(10, #{by => name}).
%%%
%%% MSGFLOW_SOAK_S sets the length in seconds (1,800 by default).  The
%%% exit status is 1 when the collector's memory (its heap and tables)
%%% rose more than 1 MB per 10 minutes after the first 5 (issue 53).
%%% MSGFLOW_SOAK_HISTORY_BYTES keeps the history too (history => Dir in
%%% _build/bench/soak-history, fresh, with that budget, 3 segments of a
%%% minute kept whole and 3 at a tenth): each report then
%%% adds the history's bytes on disk (sampled every window: the largest
%%% seen), its segments by level, the windows written and dropped, and
%%% the summary whether the budget held.
-module(msgflow_bench_soak).
-behaviour(gen_server).

-export([main/0, run/1, client/2, acceptor/0]).
-export([init/1, handle_call/3, handle_cast/2]).

-define(SERVERS, 200).
-define(CLIENTS_PER_TICK, 500).
-define(TICK_MS, 100).
-define(CALLS, 20).
-define(REPORT_MS, 30000).
-define(MAX_PAIRS, 50000).

-spec main() -> no_return().
main() ->
    Secs = case os:getenv("MSGFLOW_SOAK_S") of
               false -> 1800;
               S -> list_to_integer(S)
           end,
    Code = try run(Secs) of
               ok -> 0;
               {grew, _} -> 1
           catch C:R:St -> io:format("soak failed: ~p:~p~n~p~n", [C, R, St]), 1
           end,
    erlang:halt(Code).

%% @doc The soak for Secs seconds (msgflow's application started here):
%% `ok', or `{grew, MBPer10Min}' when the collector's memory (its heap and
%% its tables) rose more than 1 MB per 10 minutes after the first 5 (the
%% slope of a least-squares line through the reports from 300 s on).
-spec run(pos_integer()) -> ok | {grew, float()}.
run(Secs) ->
    {ok, _} = application:ensure_all_started(msgflow),
    io:format("~nmsgflow soak: ~b s, ~b servers, ~b new clients/s x ~b gen_server:calls, "
              "max_pairs ~b; OTP ~s, ~b schedulers~n",
              [Secs, ?SERVERS, ?CLIENTS_PER_TICK * 1000 div ?TICK_MS, ?CALLS, ?MAX_PAIRS,
               erlang:system_info(otp_release), erlang:system_info(schedulers_online)]),
    Servers = list_to_tuple([element(2, gen_server:start(?MODULE, [], []))
                             || _ <- lists:seq(1, ?SERVERS)]),
    History = case os:getenv("MSGFLOW_SOAK_HISTORY_BYTES") of
                  false -> #{};
                  B -> Dir = filename:join(["_build", "bench", "soak-history"]),
                       _ = file:del_dir_r(Dir),
                       %% a short schedule: the run's 10 minutes see
                       %% every level (3 minutes whole, 3 at a tenth)
                       #{history => #{dir => Dir, max_bytes => list_to_integer(B),
                                      tiers => #{tier0 => 3, tier1 => 3}}}
              end,
    ok = msgflow:start(History#{max_pairs => ?MAX_PAIRS}),
    _ = map_size(History) > 0 andalso spawn(fun() -> watch_history(maps:get(history, History)) end),
    ok = msgflow:untrace(self()),
    %% clients are spawned by a traced process, as a listener's acceptor
    %% would, so that msgflow has their process events
    Acceptor = spawn(?MODULE, acceptor, []),
    io:format("~6s ~9s ~11s ~8s ~8s ~9s ~9s ~9s ~7s ~7s ~11s ~9s ~5s~n",
              ["s", "clients", "calls", "VM MB", "RSS MB", "coll. MB", "NIF MB", "je res MB",
               "pairs", "rolled_up", "rolled_up msg", "overflow", "exact"]),
    Calls = counters:new(1, [write_concurrency]),
    T0 = erlang:monotonic_time(millisecond),
    Rows = loop({Acceptor, Servers}, Calls, T0, T0 + Secs * 1000, 0, T0 + ?REPORT_MS, []),
    exit(Acceptor, kill),
    {Clients, _} = lists:last(Rows),
    Verdict = summary(Secs, Clients, [R || {_, R} <- Rows]),   %% top while still running
    ok = msgflow:stop(),
    [gen_server:stop(element(I, Servers)) || I <- lists:seq(1, ?SERVERS)],
    Verdict.

%% Starts a tick's clients every ?TICK_MS ms (on time, not after the
%% previous ones ended), and reports every ?REPORT_MS.
loop(Who, Calls, T0, End, Started, NextReport, Rows) ->
    Now = erlang:monotonic_time(millisecond),
    if
        Now >= End ->
            lists:reverse([{Started, report(Now - T0, Started, Calls)} | Rows]);
        Now >= NextReport ->
            Row = report(Now - T0, Started, Calls),
            loop(Who, Calls, T0, End, Started, NextReport + ?REPORT_MS,
                 [{Started, Row} | Rows]);
        true ->
            {Acceptor, _} = Who,
            Acceptor ! {start, Who, Calls},
            Due = T0 + (Started div ?CLIENTS_PER_TICK + 1) * ?TICK_MS,
            receive after max(0, Due - erlang:monotonic_time(millisecond)) -> ok end,
            loop(Who, Calls, T0, End, Started + ?CLIENTS_PER_TICK, NextReport, Rows)
    end.

%% @private Starts a tick's clients when told.
-spec acceptor() -> no_return().
acceptor() ->
    receive
        {start, {_, Servers}, Calls} ->
            [spawn(?MODULE, client, [element(rand:uniform(?SERVERS), Servers), Calls])
             || _ <- lists:seq(1, ?CLIENTS_PER_TICK)],
            acceptor()
    end.

%% @private A client: ?CALLS calls, then it exits.
-spec client(pid(), counters:counters_ref()) -> ok.
client(Server, Calls) ->
    [ok = gen_server:call(Server, ping) || _ <- lists:seq(1, ?CALLS)],
    counters:add(Calls, 1, ?CALLS).

report(Ms, Started, Calls) ->
    Info = msgflow:info(),
    %% a collector far behind (a machine busy beside the soak) may not
    %% answer the balance within its deadline: that reading says so
    {Exact, FM, O} = case msgflow_collector:balance() of
                         #{events := E, held := Held, rolled_up := FM0, overflow := O0} ->
                             {E =:= Held + FM0 + O0, FM0, O0};
                         %% (undefined: no run, which a reading never meets)
                         _NotAnswered ->
                             {not_read, maps:get(rolled_up, Info, 0), maps:get(overflow, Info, 0)}
                     end,
    #{pairs := P, rolled_up := F} = msgflow_collector:store(false),
    Coll = element(2, process_info(whereis(msgflow_collector), memory))
        + maps:get(store_memory, Info),
    Je = case maps:get(jemalloc_resident, Info) of undefined -> 0; J -> J end,
    R = #{s => Ms div 1000, vm => erlang:memory(total), rss => rss(), collector => Coll,
          nif => maps:get(memory, Info), je => Je, pairs => msgflow_row_table:size(P),
          rolled_up_rows => msgflow_row_table:size(F), rolled_up => FM, overflow => O, exact => Exact,
          calls => counters:get(Calls, 1)},
    io:format("~6b ~9s ~11s ~8.1f ~8.1f ~9.1f ~9.1f ~9.1f ~7b ~7b ~11s ~9s ~5s~n",
              [Ms div 1000, msgflow_fmt:int(Started), msgflow_fmt:int(maps:get(calls, R)),
               mb(maps:get(vm, R)), mb(maps:get(rss, R)), mb(Coll), mb(maps:get(nif, R)), mb(Je),
               maps:get(pairs, R), maps:get(rolled_up_rows, R), msgflow_fmt:int(FM),
               msgflow_fmt:int(O), atom_to_list(Exact)]),
    case Info of
        #{history := H = #{dir := Dir}} ->
            Levels = [L || #{level := L} <- msgflow_history_file:list(Dir, [node()])],
            io:format("       history: ~.2f MB of ~.2f (largest seen ~.2f), segments ~b/~b/~b "
                      "(whole/tenths/merged), windows written ~b, dropped ~b~n",
                      [mb(maps:get(bytes, H, 0)), mb(maps:get(budget, H)),
                       mb(largest_history()), count(0, Levels), count(1, Levels),
                       count(2, Levels), maps:get(windows_written, H, 0),
                       maps:get(windows_dropped, H, 0)]);
        _ -> ok
    end,
    %% MSGFLOW_SOAK_TABLES=1: the collector's heap and its biggest tables,
    %% to see what grows
    _ = os:getenv("MSGFLOW_SOAK_TABLES") =:= "1" andalso tables(),
    R.

tables() ->
    Coll = whereis(msgflow_collector),
    Ts = lists:sublist(lists:reverse(lists:sort(
                                       [{ets:info(T, memory) * erlang:system_info(wordsize), ets:info(T, name),
                                         ets:info(T, size)}
                                        || T <- ets:all(), ets:info(T, owner) =:= Coll])), 8),
    io:format("       heap ~.1f MB; ~s~n",
              [mb(element(2, process_info(Coll, memory))),
               lists:join(", ", [io_lib:format("~s ~b rows ~.1f MB", [Name, N, mb(B)]) || {B, Name, N} <- Ts])]).

count(X, L) -> length([Y || Y <- L, Y =:= X]).

%% The history's files summed after every window (the largest kept in
%% a persistent term for the reports).
watch_history(Dir) ->
    persistent_term:put({?MODULE, largest}, 0),
    watch_history(Dir, 0).

watch_history(Dir, Max) ->
    case msgflow_collector:await_windows(1, 60000) of
        ok ->
            Now = lists:sum([B || #{bytes := B} <- msgflow_history_file:list(Dir, [node()])]),
            persistent_term:put({?MODULE, largest}, max(Max, Now)),
            watch_history(Dir, max(Max, Now));
        _ ->
            ok
    end.

largest_history() ->
    persistent_term:get({?MODULE, largest}, 0).

rss() ->
    {ok, Status} = file:read_file("/proc/self/status"),
    [Kb] = [binary_to_integer(string:trim(hd(string:split(V, "kB"))))
            || <<"VmRSS:", V/binary>> <- binary:split(Status, <<"\n">>, [global])],
    Kb * 1024.

mb(B) -> B / 1048576.

summary(Secs, Clients, Rows) ->
    First = hd(Rows),     %% the first report, 30 s in
    Last = lists:last(Rows),
    AtMinute = case [R || R = #{s := S} <- Rows, S >= 60] of
                   [M | _] -> M;
                   [] -> First
               end,
    Growth = fun(K) ->
                     G = 100 * (maps:get(K, Last) / max(1, maps:get(K, AtMinute)) - 1),
                     io_lib:format("~s~.1f % (~.1f -> ~.1f MB)",
                                   [case G >= 0 of true -> "+"; false -> "" end, G,
                                    mb(maps:get(K, AtMinute)), mb(maps:get(K, Last))])
             end,
    io:format("~nafter ~b s: ~s clients (~b/s), ~s calls; memory from ~b s to the end:~n",
              [Secs, msgflow_fmt:int(Clients), Clients div Secs,
               msgflow_fmt:int(maps:get(calls, Last)), maps:get(s, AtMinute)]),
    io:format("  ~-36s ~-10s ~s~n", ["", "target", "measured"]),
    io:format("  ~-36s ~-10s ~s~n", ["overflow messages", "0", msgflow_fmt:int(maps:get(overflow, Last))]),
    io:format("  ~-36s ~-10s ~s~n", ["VM memory (erlang:memory)", "< +10 %", Growth(vm)]),
    io:format("  ~-36s ~-10s ~s~n", ["OS resident set", "< +10 %", Growth(rss)]),
    io:format("  ~-36s ~-10s ~s~n", ["collector (heap and tables)", "< +10 %", Growth(collector)]),
    %% the NIF's tables grow between rotations and drop at each: their
    %% range over the run says whether they stay bounded
    Nif = [maps:get(nif, R) || R <- Rows],
    io:format("  ~-36s ~-10s ~.1f-~.1f MB over the run (first ~.1f, last ~.1f)~n",
              ["NIF tables (saw-tooth: rotations)", "bounded", mb(lists:min(Nif)),
               mb(lists:max(Nif)), mb(hd(Nif)), mb(lists:last(Nif))]),
    Read = [X || #{exact := X} <- Rows, X =/= not_read],
    io:format("  ~-36s ~-10s ~s~s~n", ["events = pairs + rolled_up + overflow", "always",
                                      atom_to_list(lists:all(fun(X) -> X end, Read)),
                                      case length(Rows) - length(Read) of
                                          0 -> "";
                                          N -> io_lib:format(" (~b of ~b readings not answered in time: "
                                                             "the collector behind)", [N, length(Rows)])
                                      end]),
    case msgflow:info() of
        #{history := #{budget := Budget}} ->
            io:format("  ~-36s ~-10s ~.2f MB at most of ~.2f: ~s~n",
                      ["history on disk", "<= budget", mb(largest_history()), mb(Budget),
                       case largest_history() =< Budget of true -> "held"; false -> "EXCEEDED" end]);
        _ -> ok
    end,
    %% flat: after the first 5 minutes, at most 1 MB more per 10 minutes
    Slope = slope([{S, maps:get(collector, R)} || R = #{s := S} <- Rows, S >= 300]),
    io:format("  ~-36s ~-10s ~s~n", ["collector's growth after 300 s", "<= 1 MB/10 min",
                                    case Slope of
                                        undefined -> "too short to say (under 3 reports after 300 s)";
                                        _ -> io_lib:format("~.2f MB per 10 min", [mb(Slope * 600)])
                                    end]),
    io:format("~ntop(10, #{by => name}), still running:~n"),
    ok = msgflow:top(10, #{by => name}),
    PerTen = case Slope of undefined -> 0.0; _ -> mb(Slope * 600) end,
    case Slope =/= undefined andalso PerTen > 1.0 of
        true -> io:format("~nsoak: the collector's memory grew ~.2f MB per 10 minutes~n", [PerTen]),
                {grew, PerTen};
        false -> ok
    end.

%% The least-squares slope of Y over X (bytes a second), or undefined with
%% fewer than 3 points.
slope(Points) when length(Points) < 3 ->
    undefined;
slope(Points) ->
    N = length(Points),
    Mx = lists:sum([X || {X, _} <- Points]) / N,
    My = lists:sum([Y || {_, Y} <- Points]) / N,
    lists:sum([(X - Mx) * (Y - My) || {X, Y} <- Points])
        / max(1.0e-9, lists:sum([(X - Mx) * (X - Mx) || {X, _} <- Points])).

%%% The servers

%% @private
-spec init([]) -> {ok, non_neg_integer()}.
init([]) -> {ok, 0}.

%% @private
-spec handle_call(ping, gen_server:from(), non_neg_integer()) ->
          {reply, ok, non_neg_integer()}.
handle_call(ping, _From, N) -> {reply, ok, N + 1}.

%% @private
-spec handle_cast(term(), non_neg_integer()) -> {noreply, non_neg_integer()}.
handle_cast(_, N) -> {noreply, N}.
