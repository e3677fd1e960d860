%%% The NIF library: reloaded, deleted and purged while it traces, loaded
%%% from another directory or with another resource ABI, and its allocators
%%% (jemalloc, enif_alloc forced), each counting exactly.
%%% Cases run one at a time (tracing is node-global), each on its own;
%%% barriers are msgflow:stop/0 and messages from the workload, never
%%% sleeps.  Helpers shared with other suites are in msgflow_test_lib and
%%% msgflow_workloads.
-module(msgflow_library_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([reload_while_tracing/1, reload_under_calls/1, delete_while_tracing/1,
         reload_from_other_dir/1, reload_other_abi/1, allocator_jemalloc/1,
         allocator_enif_forced/1]).
%% run by spawn, peers or behaviours
-export([other_abi_run/1, other_dir_runs/2]).

all() ->
    [reload_while_tracing, reload_under_calls, delete_while_tracing,
     reload_from_other_dir, reload_other_abi, allocator_jemalloc,
     allocator_enif_forced].

%% set-up and clean-up around the suite and each case: msgflow_test_hook
suite() ->
    [{ct_hooks, [msgflow_test_hook]}].

%% Reload the NIF module 15 times under live traffic, purging the old code
%% each time: the VM survives, the session (taken over by each new
%% instance) keeps counting, counts taken before are kept exactly, and the
%% term reads stay as they were.
reload_while_tracing(_Config) ->
    Reads = maps:with([fast_resources, fast_terms], msgflow_tracer:lib_info()),
    ok = msgflow:start(#{procs => all, interval => 10}),
    Before = msgflow_workloads:counted_burst(300),
    Noise = start_pingpong(),
    Reloads = [begin
                   _ = code:purge(msgflow_tracer),
                   code:load_file(msgflow_tracer)
               end || _ <- lists:seq(1, 15)],
    ?assertEqual(lists:duplicate(15, {module, msgflow_tracer}), Reloads),
    %% each instance's checks found the reads as the first
    ?assertEqual(Reads, maps:with([fast_resources, fast_terms], msgflow_tracer:lib_info())),
    After = msgflow_workloads:counted_burst(200),       %% still counting with the new code
    Noise ! {self(), ping},
    receive pong -> ok end,
    stop_pingpong(Noise),
    ok = msgflow:stop(),
    Pairs = msgflow:pairs(),
    [?assertEqual({S, R, N}, lists:keyfind(R, 2, [P || P = {S1, _, _} <- Pairs, S1 =:= S]))
     || {S, R, N} <- Before ++ After],
    ?assertEqual({flags, []}, erlang:trace_info(new, flags)),
    ?assertEqual([], msgflow_test_lib:flagged()).

%% msgflow's code and NIF loaded from another priv_dir during a run, as a
%% release upgrade does, and the old code purged (its library unmapped
%% but for the pin), then traffic and stop/0: 20 runs, in a peer (a
%% crash of its VM fails the case), every count exact.
reload_from_other_dir(Config) ->
    Dirs = [begin
                D = filename:join([?config(priv_dir, Config), "release" ++ integer_to_list(I), "priv"]),
                ok = filelib:ensure_path(D),
                {ok, _} = file:copy(filename:join(code:priv_dir(msgflow), "msgflow_tracer.so"),
                                    filename:join(D, "msgflow_tracer.so")),
                D
            end || I <- [1, 2]],
    {Peer, Node} = msgflow_test_lib:cluster_peer(true),
    Runs = erpc:call(Node, ?MODULE, other_dir_runs, [Dirs, 20], 300000),
    ok = peer:stop(Peer),
    ?assertEqual(lists:duplicate(20, exact), Runs).

%% A library whose resources' layout differs (mf_abi.h: here its type
%% names patched to another MF_ABI) loaded during a run: it never reads
%% the old library's resources, so the VM lives; the run ends (the
%% collector restarts), no trace flag is left, and a new run counts
%% exactly with the new library.
reload_other_abi(Config) ->
    D = filename:join([?config(priv_dir, Config), "other_abi", "priv"]),
    ok = filelib:ensure_path(D),
    {ok, So} = file:read_file(filename:join(code:priv_dir(msgflow), "msgflow_tracer.so")),
    Patched = lists:foldl(fun(Base, B) ->
                                  Old = <<Base/binary, ".1", 0>>,
                                  ?assertMatch({_, _}, binary:match(B, Old)),
                                  binary:replace(B, Old, <<Base/binary, ".9", 0>>)
                          end, So, [<<"msgflow_session">>, <<"msgflow_take">>, <<"msgflow_entry">>,
                                    <<"msgflow_agg">>]),
    ok = file:write_file(filename:join(D, "msgflow_tracer.so"), Patched),
    {Peer, Node} = msgflow_test_lib:cluster_peer(true),
    R = erpc:call(Node, ?MODULE, other_abi_run, [D], 120000),
    ok = peer:stop(Peer),
    ?assertMatch(#{flags := [], new_run := exact}, R).

%% Run on the peer: a run, the library of another layout loaded from Dir
%% mid-run, the old code purged; what is left, and a new run's counts.
other_abi_run(Dir) ->
    {ok, _} = application:ensure_all_started(msgflow),
    ok = msgflow:start(#{procs => all, interval => 10}),
    _ = msgflow_workloads:counted_burst(300),
    ok = application:set_env(msgflow, priv_dir, Dir),
    _ = code:purge(msgflow_tracer),
    {module, msgflow_tracer} = code:load_file(msgflow_tracer),
    _ = code:purge(msgflow_tracer),
    _ = msgflow:stop(),
    Flags = msgflow_test_lib:flagged(),
    ok = msgflow:start(#{procs => all, interval => 10}),
    Burst = msgflow_workloads:counted_burst(200),
    ok = msgflow:stop(),
    Pairs = msgflow:pairs(),
    #{flags => Flags,
      new_run => case [E || E = {S, R, _} <- Burst,
                            lists:keyfind(R, 2, [P || P = {S1, _, _} <- Pairs, S1 =:= S]) =/= E] of
                     [] -> exact;
                     Wrong -> Wrong
                 end}.

%% Run on the peer: N runs, each reloading the tracer from the next of
%% Dirs mid-run; `exact' for a run whose counts are.
other_dir_runs(Dirs, N) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Noise = start_pingpong(),
    Runs = [begin
                ok = msgflow:start(#{procs => all, interval => 10}),
                Before = msgflow_workloads:counted_burst(300),
                ok = application:set_env(msgflow, priv_dir, lists:nth(1 + I rem length(Dirs), Dirs)),
                _ = code:purge(msgflow_tracer),
                {module, msgflow_tracer} = code:load_file(msgflow_tracer),
                _ = code:purge(msgflow_tracer),       %% (the old library goes)
                #{pinned := true} = msgflow_tracer:lib_info(),
                After = msgflow_workloads:counted_burst(200),
                ok = msgflow:stop(),
                Pairs = msgflow:pairs(),
                case [E || E = {S, R, _} <- Before ++ After,
                           lists:keyfind(R, 2, [P || P = {S1, _, _} <- Pairs, S1 =:= S]) =/= E] of
                    [] -> exact;
                    Wrong -> {I, Wrong}
                end
            end || I <- lists:seq(1, N)],
    stop_pingpong(Noise),
    Runs.

%% The tracer reloaded 20 times while a client makes gen_server:calls
%% (each with a fresh alias for its reply), every call sampled: the
%% checks at load publish what they find in one step, so a callback of
%% the old code never reads a layout half made.  Every reply is counted
%% for its caller (none as a send to an alias), and every sampled call is
%% answered.
reload_under_calls(_Config) ->
    {ok, Server} = gen_server:start(msgflow_slow_server, [], []),
    Self = self(),
    Client = spawn(fun() -> receive go -> ok end, Self ! {calls, call_loop(Server, 0)} end),
    ok = msgflow:start(#{procs => [Server, Client], call_sample => 1, call_timeout => 60000,
                         interval => 50}),
    Client ! go,
    %% each reload while calls go on: the next waits for a call made after
    %% the last
    Reloads = [begin
                   Before = calls_made(Client),
                   _ = code:purge(msgflow_tracer),
                   Loaded = code:load_file(msgflow_tracer),
                   calls_after(Client, Before),
                   Loaded
               end || _ <- lists:seq(1, 20)],
    Client ! stop,
    K = receive {calls, Made} -> Made end,
    ok = msgflow:stop(),
    ?assertEqual(lists:duplicate(20, {module, msgflow_tracer}), Reloads),
    ?assert(K >= 20),
    ?assertEqual([], [P || P = {_, R, _} <- msgflow:pairs(), is_reference(R)]),
    #{rows := Rows} = msgflow:view(top, #{limit => 10}),
    ?assertEqual(#{{Client, Server} => K, {Server, Client} => K},
                 maps:from_list([{{S, R}, C} || #{sender := S, receiver := R, count := C} <- Rows,
                                                S =:= Server orelse R =:= Server])),
    #{entries := [#{caller := Client, server := Server, tag := count, calls := K, sampled := K,
                    unanswered := 0}]} = msgflow:view(calls, #{}),
    gen_server:stop(Server).

%% gen_server:calls until told to stop: how many were made (so far in
%% its dictionary, `calls').
call_loop(Server, N) ->
    receive stop -> N
    after 0 -> 0 = gen_server:call(Server, count), put(calls, N + 1), call_loop(Server, N + 1)
    end.

calls_made(Client) ->
    {dictionary, D} = process_info(Client, dictionary),
    proplists:get_value(calls, D, 0).

%% Returns once Client has made a call after its first Before.
calls_after(Client, Before) ->
    case calls_made(Client) > Before of
        true -> ok;
        false -> erlang:yield(), calls_after(Client, Before)
    end.

%% Deleting and purging the tracer module while processes are traced with
%% it (code:delete/1, code:purge/1), then loading it again, ten times under
%% traffic: every traced process keeps answering (none spins inside the
%% VM), the counts taken before stay, stop/0 leaves no flags, and a new
%% run counts with the code loaded last.
delete_while_tracing(_Config) ->
    ok = msgflow:start(#{procs => all, interval => 10}),
    Before = msgflow_workloads:counted_burst(300),
    Noise = [start_pingpong() || _ <- lists:seq(1, 4)],
    [begin
         _ = code:purge(msgflow_tracer),
         _ = code:delete(msgflow_tracer),
         _ = code:purge(msgflow_tracer),
         [begin
              P ! {self(), ping},
              receive pong -> ok after 5000 -> ct:fail({no_answer, P, round, I}) end
          end || P <- Noise],
         {module, msgflow_tracer} = code:ensure_loaded(msgflow_tracer)
     end || I <- lists:seq(1, 10)],
    [stop_pingpong(P) || P <- Noise],
    ok = msgflow:stop(),
    Pairs = msgflow:pairs(),
    [?assert(lists:member(E, Pairs)) || E <- Before],
    ?assertEqual([], msgflow_test_lib:flagged()),
    ok = msgflow:start(#{procs => all}),
    _ = msgflow_workloads:counted_burst(100),
    ok = msgflow:stop(),
    ?assertEqual([], msgflow_test_lib:flagged()).

start_pingpong() ->
    Pong = spawn(fun Pong() -> receive {From, ping} -> From ! pong, Pong(); stop -> ok end end),
    spawn(fun() -> pingpong(Pong) end).

pingpong(Pong) ->
    Pong ! {self(), ping},
    receive pong -> ok end,
    receive
        {From, ping} -> From ! pong, pingpong(Pong);
        stop -> Pong ! stop
    after 0 -> pingpong(Pong)
    end.

stop_pingpong(P) ->
    P ! stop.

%% Without the glibc tunable jemalloc cannot load: enif_alloc, and why.
%% With no tunable and no system libjemalloc in the way, the tables live in
%% msgflow's own arena of the jemalloc built from Debian's source and
%% linked in (tools/jemalloc.sh), and info() gives jemalloc's figures for it.
allocator_jemalloc(_Config) ->
    {Rotations, {Expected, Got, Info}} = on_peer([]),
    ?assertEqual(ok, Rotations),
    ?assertEqual(Expected, Got),
    ?assertMatch(#{allocator := jemalloc, jemalloc_error := <<>>, jemalloc_build := static},
                 Info),
    ?assert(maps:get(memory, Info) > 0),
    #{jemalloc_allocated := Allocated, jemalloc_resident := Resident} = Info,
    ?assert(Allocated > 0),
    ?assert(Resident >= Allocated).

%% MSGFLOW_ALLOCATOR=enif wins over jemalloc; there are no arena figures.
allocator_enif_forced(_Config) ->
    {Rotations, {Expected, Got, Info}} = on_peer([{"MSGFLOW_ALLOCATOR", "enif"}]),
    ?assertEqual(ok, Rotations),
    ?assertEqual(Expected, Got),
    ?assertMatch(#{allocator := enif, jemalloc_allocated := undefined}, Info).

%%% The C tools

%% Runs exact_workload/0 on a fresh peer node started with Env, with
%% msgflow and this suite in its code path.
on_peer(Env) ->
    Paths = [filename:dirname(code:which(M)) || M <- [msgflow, ?MODULE]],
    {ok, Peer, _Node} = peer:start_link(#{connection => standard_io, env => Env,
                                          args => lists:append([["-pa", P] || P <- Paths])}),
    try
        {peer:call(Peer, msgflow_workloads, rotations, [], 60000),
     peer:call(Peer, msgflow_workloads, exact_workload, [], 60000)}
    after
        peer:stop(Peer)
    end.

%%% Churn (issue 12)
