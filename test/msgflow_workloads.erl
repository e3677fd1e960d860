%%% Workloads with known counts that the suites share, and the processes
%%% they run: senders with a planned count per receiver (exact_workload/0,
%%% sender/2), the matrix's senders (mx_workload/0), bursts and paced casts,
%%% rotations under load, a worker told to send, and a process
%%% tracer as another tool sets one (tool/2).  Peers get this directory in
%%% their code path, so a peer can run them too.
-module(msgflow_workloads).

-include_lib("stdlib/include/assert.hrl").

-export([exact_workload/0, sender/2, send_rounds/1, mx_sender/3, mx_workload/0,
         paced_casts/2, burst/2, counted_burst/1, rotations/0,
         summed/1, worker/0, work/3, tool/2]).

%% Run by exact_counts and by the allocator tests (also on peer nodes).
%% Returns {ExpectedPairs, CountedPairs, Info}, pairs sorted, restricted
%% to the workload's senders.
exact_workload() ->
    Parent = self(),
    Sinks = [spawn_link(fun msgflow_test_lib:sink/0) || _ <- lists:seq(1, 4)],
    Plan = [{I, [{Sink, 50 + (I * J * 37) rem 400}
                 || {J, Sink} <- lists:zip(lists:seq(1, 4), Sinks)]}
            || I <- lists:seq(1, 40)],
    Senders = [spawn_link(fun() -> sender(Parent, Sends) end) || {_, Sends} <- Plan],
    ok = msgflow:start(#{procs => all}),
    [S ! go || S <- Senders],
    [receive {done, S} -> ok end || S <- Senders],
    ok = msgflow:stop(),
    Expected = lists:sort(
                 lists:append([[{S, Sink, N} || {Sink, N} <- Sends] ++ [{S, Parent, 1}]
                               || {S, {_, Sends}} <- lists:zip(Senders, Plan)])),
    Got = lists:sort([P || P = {S, _, _} <- msgflow:pairs(), lists:member(S, Senders)]),
    [unlink(P) || P <- Sinks],
    [exit(P, kill) || P <- Sinks],
    {Expected, Got, msgflow:info()}.

sender(Parent, Sends) ->
    receive go -> ok end,
    %% interleave receivers so the process is preempted and migrates
    send_rounds(Sends),
    Parent ! {done, self()}.

send_rounds([]) ->
    ok;
send_rounds(Sends) ->
    Left = [begin Sink ! msg, {Sink, N - 1} end || {Sink, N} <- Sends],
    send_rounds([X || X = {_, N} <- Left, N > 0]).

mx_sender(Parent, Sink, {ByPid, ByName}) ->
    receive go -> ok end,
    [Sink ! m || _ <- lists:seq(1, ByPid)],
    [msgflow_mx_sink ! m || _ <- lists:seq(1, ByName)],
    Parent ! {done, self()},
    receive stop -> ok end.

%% Two senders (running this module) send to a sink (timer:sleep/1,
%% registered) by pid and by name, 8 and 7 messages, and one each to the
%% caller; everyone stays alive, so modules and names are read.  Returns
%% {S1, S2, Sink} after stop.
mx_workload() ->
    Self = self(),
    Sink = spawn(timer, sleep, [infinity]),
    register(msgflow_mx_sink, Sink),
    S1 = spawn(?MODULE, mx_sender, [Self, Sink, {5, 3}]),
    S2 = spawn(?MODULE, mx_sender, [Self, Sink, {7, 0}]),
    ok = msgflow:start(#{procs => [S1, S2]}),
    [S ! go || S <- [S1, S2]],
    [receive {done, S} -> ok end || S <- [S1, S2]],
    ok = msgflow:stop(),
    {S1, S2, Sink}.

%% A cast every Ms milliseconds until killed (the workload's pace, not a
%% barrier of the test).
paced_casts(To, Ms) ->
    gen_server:cast(To, m),
    receive after Ms -> paced_casts(To, Ms) end.

burst(P, N) ->
    P ! {burst, self(), N},
    receive {burst_done, P} -> ok end.

%% A process sends N messages to a sink; returns the exact pairs expected
%% and checks pairs/0 already holds them (pairs/0 takes a snapshot).
counted_burst(N) ->
    Self = self(),
    Sink = spawn(fun msgflow_test_lib:sink/0),
    %% both stay alive: pairs of exited processes leave pairs()
    S = spawn(fun() ->
                      [Sink ! m || _ <- lists:seq(1, N)],
                      Self ! {burst, self()},
                      receive after infinity -> ok end
              end),
    receive {burst, S} -> ok end,
    Expected = [{S, Sink, N}, {S, Self, 1}],
    Pairs = msgflow:pairs(),
    [?assertEqual(E, lists:keyfind(R, 2, [P || P = {S1, _, _} <- Pairs, S1 =:= S]))
     || E = {_, R, _} <- Expected],
    Expected.

%% @private The checks of rotate_direct/1, run here and on the peers of the
%% allocator tests (so that a generation is freed through each allocator):
%% ok, or what differed.
rotations() ->
    Self = self(),
    Session = msgflow_tracer:session_new(Self, 100, 0),
    [A, B] = [spawn(fun() -> ok end) || _ <- [1, 2]],
    Send = fun(To, N) -> [ok = msgflow_tracer:trace_send(send, Session, Self, m, #{extra => To})
                          || _ <- lists:seq(1, N)] end,
    Send(A, 5),
    First = summed(msgflow_tracer:snapshot(Session)),
    Send(A, 2),                                  %% taken only with the old generation
    ok = msgflow_tracer:session_rotate(Session),
    Send(A, 3),
    Send(B, 4),
    #{rotations := Rotations, retired := Retired} = msgflow_tracer:session_info(Session),
    Second = summed(msgflow_tracer:snapshot(Session)),
    #{retired := Left, freed := Freed, entries := Entries} = msgflow_tracer:session_info(Session),
    Third = summed(msgflow_tracer:snapshot(Session)),
    msgflow_tracer:session_stop(Session),
    Got = {First, Second, Third, Rotations, Retired >= 1, Left, Freed >= 1,
           Entries >= 2 andalso Entries =< 4},  %% (A, B) on the threads this ran on
    case {[{Self, A, 5}], [{Self, A, 5}, {Self, B, 4}], [], 1, true, 0, true, true} of
        Got -> ok;
        Want -> {want, Want, got, Got}
    end.

summed({Pairs, [], [], 0, 0}) ->
    lists:sort(maps:fold(fun({S, R}, N, Acc) -> [{S, R, N} | Acc] end, [],
                         lists:foldl(fun({S, R, N}, M) -> maps:update_with({S, R}, fun(X) -> X + N end, N, M) end,
                                     #{}, Pairs))).

%% A worker: sends N messages to Sink when told, then `done' to the
%% caller.
worker() ->
    receive {work, From, Sink, N} -> [Sink ! m || _ <- lists:seq(1, N)], From ! done end,
    worker().

%% W sends N messages to Sink; returns once they are sent and every trace
%% event of them was delivered.
work(W, Sink, N) ->
    W ! {work, self(), Sink, N},
    receive done -> ok end,
    Ref = erlang:trace_delivered(W),
    receive {trace_delivered, W, Ref} -> ok end.

%% A process tracer, as another tool sets one: counts W's sends to Sink.
tool(Sink, N) ->
    receive
        {trace, _, send, _, Sink} -> tool(Sink, N + 1);
        {get, From} -> From ! {tool, N}, tool(Sink, N);
        _ -> tool(Sink, N)
    end.
