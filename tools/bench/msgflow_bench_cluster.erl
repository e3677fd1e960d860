%%% @doc `make bench-cluster' (also the end of `make bench-scale'): what
%%% msgflow's views cost across a cluster.  Starts MSGFLOW_CLUSTER_NODES
%%% (10) peer nodes on this machine, counts on all of them from this one
%%% (`nodes => all'), and makes MSGFLOW_CLUSTER_PAIRS (200,000) distinct
%%% pairs on each (2,000 senders x 100 receivers, one message each).  Then
%%% it times top(20), matrix(node), nodes() and pairs() (the full merge),
%%% wall ms, median of 3 after a warm-up, and samples this node's memory
%%% (erlang:memory(total) and RSS, msgflow_bench's sampler) while they run.  Prints,
%%% judges nothing.
-module(msgflow_bench_cluster).
-export([main/0, load/2]).

-spec main() -> no_return().
main() ->
    Code = try run() of ok -> 0
           catch C:R:St -> io:format("bench-cluster failed: ~p:~p~n~p~n", [C, R, St]), 1
           end,
    erlang:halt(Code).

env(Name, Default) ->
    case os:getenv(Name) of
        false -> Default;
        V -> list_to_integer(V)
    end.

run() ->
    K = env("MSGFLOW_CLUSTER_NODES", 10),
    Pairs = env("MSGFLOW_CLUSTER_PAIRS", 200000),
    Receivers = 100,
    Senders = max(1, Pairs div Receivers),
    _ = os:cmd("epmd -daemon"),
    {ok, _} = net_kernel:start([list_to_atom("msgflow_bench_" ++ os:getpid()), shortnames]),
    {ok, _} = application:ensure_all_started(msgflow),
    Paths = [filename:dirname(code:which(M)) || M <- [msgflow, ?MODULE]],
    Peers = [begin
                 {ok, P, N} = peer:start(#{name => peer:random_name(),
                                           args => ["-connect_all", "false"]
                                               ++ lists:append([["-pa", D] || D <- Paths])}),
                 {P, N}
             end || _ <- lists:seq(1, K)],
    Nodes = [N || {_, N} <- Peers],
    io:format("msgflow bench-cluster: ~b peer nodes on this machine (~b schedulers, "
              "OTP ~s), ~s pairs each (~b senders x ~b receivers, one message each)~n",
              [K, erlang:system_info(schedulers_online), erlang:system_info(otp_release),
               msgflow_fmt:int(Senders * Receivers), Senders, Receivers]),
    garbage_collect(),
    Before = msgflow_bench:stop_sampler(msgflow_bench:start_sampler()),
    ok = msgflow:start(#{nodes => all}),
    T0 = erlang:monotonic_time(millisecond),
    _ = [R || {_, {ok, R}} <- msgflow_cluster:call_all(Nodes, ?MODULE, load,
                                                         [Senders, Receivers])],
    %% every node took a snapshot of all of it
    [ok = gen_server:call({msgflow_collector, N}, {await_windows, 1}, infinity)
     || N <- [node() | Nodes]],
    LoadMs = erlang:monotonic_time(millisecond) - T0,
    Events = lists:sum([E || #{events := E} <- msgflow:view(nodes, #{})]),
    io:format("loaded in ~s ms: ~s messages counted on ~b nodes~n",
              [msgflow_fmt:int(LoadMs), msgflow_fmt:int(Events), K + 1]),
    Time = fun(F) ->
                   _ = F(),
                   Ms = [element(1, timer:tc(F)) div 1000 || _ <- lists:seq(1, 3)],
                   lists:nth(2, lists:sort(Ms))
           end,
    Sampler = msgflow_bench:start_sampler(),
    Top = Time(fun() -> msgflow_bench_scale:quiet(fun() -> msgflow:top(20) end) end),
    Matrix = Time(fun() -> msgflow:view(matrix, #{by => node}) end),
    NodesMs = Time(fun() -> msgflow:view(nodes, #{}) end),
    %% a node left out after the views' second would make them look cheap
    Missing = lists:usort([N || V <- [msgflow:view(top, #{limit => 20}),
                                      msgflow:view(matrix, #{by => node})],
                                {N, _} <- maps:get(missing, V)]),
    {ViewsPeakMem, ViewsPeakRss} = msgflow_bench:stop_sampler(Sampler),
    Sampler2 = msgflow_bench:start_sampler(),
    Where = spawn(fun() -> biggest([]) end),
    {PairsUs, All} = timer:tc(fun() -> msgflow:pairs() end),
    NPairs = case All of
                 {partial, Got, Missing2} -> io:format("pairs() partial: ~p~n", [Missing2]), length(Got);
                 _ -> length(All)
             end,
    {PairsPeakMem, PairsPeakRss} = msgflow_bench:stop_sampler(Sampler2),
    Where ! {done, self()},
    receive {biggest, Big} -> io:format("peak during pairs(): ~p~n", [Big]) end,
    ok = msgflow:stop(),
    %% before: main at 6640f04 (issue 37's figures, this machine)
    io:format("~n  ~-34s ~10s ~8s ~26s~n", ["call (this node, coordinator)", "ms", "target",
                                             "before (6640f04)"]),
    [io:format("  ~-34s ~10s ~8s ~26s~n", [Name, msgflow_fmt:int(V), Target, Then])
     || {Name, V, Target, Then} <-
            [{"top(20)", Top, "300", "1,322"}, {"matrix(node)", Matrix, "300", "28"},
             {"nodes()", NodesMs, "", ""},
             {"pairs() (" ++ msgflow_fmt:int(NPairs) ++ " pairs, once)", PairsUs div 1000,
              "5,000", "5,050 (1,048 pairs)"}]],
    io:format("  nodes that did not answer top(20) or matrix(node) in time: ~p~n", [Missing]),
    MB = fun(B) -> io_lib:format("~.1f MB", [B / 1048576]) end,
    io:format("~n  coordinator memory: before start ~s (RSS ~s); peak during top/matrix/nodes "
              "~s (RSS ~s); peak during pairs() ~s (RSS ~s; target 300 MB, before 805 MB)~n",
              [MB(element(1, Before)), MB(element(2, Before)), MB(ViewsPeakMem),
               MB(ViewsPeakRss), MB(PairsPeakMem), MB(PairsPeakRss)]),
    [peer:stop(P) || {P, _} <- Peers],
    ok.

%% The peak of this node's memory by type, and the biggest process then.
biggest(Peak) ->
    receive
        {done, From} -> From ! {biggest, Peak}
    after 20 ->
            M = erlang:memory(),
            Total = proplists:get_value(total, M),
            case Peak of
                [{total, T} | _] when T >= Total -> biggest(Peak);
                _ ->
                    Procs = [{Mem, P, process_info(P, [registered_name, current_function,
                                                       initial_call, message_queue_len])}
                             || P <- processes(), {memory, Mem} <- [process_info(P, memory)]],
                    Top = lists:sublist(lists:reverse(lists:sort(Procs)), 3),
                    biggest([{total, Total}, {processes, proplists:get_value(processes, M)},
                                {binary, proplists:get_value(binary, M)},
                                {biggest, Top}])
            end
    end.

%% @doc On a peer: Senders processes each send one message to each of
%% Receivers processes; returns once all were sent.
-spec load(pos_integer(), pos_integer()) -> ok.
load(Senders, Receivers) ->
    Rs = [spawn(fun idle/0) || _ <- lists:seq(1, Receivers)],
    Self = self(),
    Ss = [spawn(fun() -> [R ! m || R <- Rs], Self ! {sent, self()}, idle() end)
          || _ <- lists:seq(1, Senders)],
    [receive {sent, S} -> ok end || S <- Ss],
    ok.

idle() ->
    receive stop -> ok end.
