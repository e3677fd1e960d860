%%% A run's life: started, stopped by its duration or its owner's exit, the
%%% collector or the session's owner killed, options refused, other tools'
%%% tracing left alone; never a trace flag left behind.
%%% Cases run one at a time (tracing is node-global), each on its own;
%%% barriers are msgflow:stop/0 and messages from the workload, never
%%% sleeps.  Helpers shared with other suites are in msgflow_test_lib and
%%% msgflow_workloads.
-module(msgflow_run_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([duration_autostop/1, stop_leaves_no_flags/1, collector_killed/1,
         orphaned_session/1, persistent_terms_kept/1, session_owner_down/1,
         bad_options/1, trace_untrace/1, other_tool_kept/1, dbg_alongside/1,
         session_dies_with_collector/1, remote_shell_owner/1]).

all() ->
    [duration_autostop, stop_leaves_no_flags, collector_killed, orphaned_session,
     persistent_terms_kept, session_owner_down, bad_options, trace_untrace,
     other_tool_kept, dbg_alongside, session_dies_with_collector,
     remote_shell_owner].

%% set-up and clean-up around the suite and each case: msgflow_test_hook
suite() ->
    [{ct_hooks, [msgflow_test_hook]}].

%% A run asked from a remote shell (the caller's group leader on a peer)
%% with no duration stops `grace' after the peer halts, leaving no trace
%% flag; with `detach => true' it is not owned by the shell and goes on;
%% a run asked here is never owned.
remote_shell_owner(_Config) ->
    {Peer, Node} = msgflow_test_lib:cluster_peer(true),
    ok = erpc:call(Node, msgflow_test_lib, start_as_shell, [node(), #{grace => 200, interval => 100}]),
    ?assertMatch(#{owner := GL} when node(GL) =:= Node, run_opts()),
    peer:stop(Peer),
    ?assertEqual(stopped, until_stopped(erlang:monotonic_time(millisecond) + 60000)),
    ?assertEqual([], msgflow_test_lib:flagged()),
    ?assertEqual({flags, []}, erlang:trace_info(new, flags)),
    {Peer2, Node2} = msgflow_test_lib:cluster_peer(true),
    ok = erpc:call(Node2, msgflow_test_lib, start_as_shell, [node(), #{grace => 200, detach => true}]),
    ?assertNot(is_map_key(owner, run_opts())),
    peer:stop(Peer2),
    ok = msgflow:stop(),
    ok = msgflow:start(#{}),
    ?assertNot(is_map_key(owner, run_opts())),
    ok = msgflow:stop().

%% The options the collector's run has (its state's `opts', the record's
%% fourth element).
run_opts() ->
    element(4, sys:get_state(msgflow_collector)).

until_stopped(Deadline) ->
    case msgflow:info() of
        #{running := false} -> stopped;
        _ ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> running;
                false -> receive after 50 -> until_stopped(Deadline) end
            end
    end.

%% `duration' stops tracing by itself, flags and all.
duration_autostop(_Config) ->
    ok = msgflow:start(#{duration => 50, interval => 10}),
    ?assertMatch(#{running := true}, msgflow:info()),
    ok = msgflow:wait(10000),
    ?assertMatch(#{running := false}, msgflow:info()),
    ?assertEqual({flags, []}, erlang:trace_info(new, flags)),
    ?assertEqual([], msgflow_test_lib:flagged()).

%% stop/0 leaves no flag on any process or port, in every procs mode.
stop_leaves_no_flags(_Config) ->
    Pid = spawn_link(fun msgflow_test_lib:sink/0),
    [begin
         ok = msgflow:start(#{procs => Procs}),
         [Pid ! x || _ <- lists:seq(1, 10)],
         spawn(fun() -> Pid ! y end),
         ok = msgflow:stop(),
         ?assertEqual({Procs, []}, {Procs, msgflow_test_lib:flagged()}),
         ?assertEqual({Procs, {flags, []}}, {Procs, erlang:trace_info(new, flags)})
     end || Procs <- [all, new, existing, [Pid, self()]]],
    unlink(Pid),
    exit(Pid, kill).

%% Killing the collector: its session answers remove to trace_status, the
%% restarted collector clears the flags left behind, the node lives on and
%% msgflow can start again.
collector_killed(_Config) ->
    Echo = spawn_link(fun Loop() -> receive {From, M} -> From ! M, Loop() end end),
    %% the legacy session's flags outlive the collector (on OTP 27+ a trace
    %% session goes with it: session_dies_with_collector)
    ok = msgflow:start(#{procs => all, trace_mode => legacy}),
    {tracer, {msgflow_tracer, Session}} = erlang:trace_info(Echo, tracer),
    ?assertEqual(trace, msgflow_tracer:enabled(trace_status, Session, Echo)),
    %% what a restarted collector finds (see orphaned_session)
    ?assertEqual(Session, msgflow_run:legacy_session()),
    Collector = whereis(msgflow_collector),
    MRef = monitor(process, Collector),
    exit(Collector, kill),
    receive {'DOWN', MRef, process, Collector, killed} -> ok end,
    %% the supervisor restarted the collector (which_children is served after
    %% the supervisor handled the exit): its init stopped the session, unless
    %% the session's monitor on the dead collector came first
    {msgflow_collector, New, worker, _} =
        lists:keyfind(msgflow_collector, 1, supervisor:which_children(msgflow_sup)),
    ?assert(is_pid(New) andalso New =/= Collector),
    ?assertMatch(#{state := S} when S =:= stopped; S =:= collector_down,
                 msgflow_tracer:session_info(Session)),
    ?assertEqual(remove, msgflow_tracer:enabled(trace_status, Session, Echo)),
    %% and it swept the flags: read them raw, without asking the tracer
    ?assertEqual({trace, 0}, process_info(Echo, trace)),
    ?assertEqual([], [P || P <- processes(), process_info(P, trace) =/= {trace, 0}]),
    Echo ! {self(), ping},
    receive ping -> ok end,
    ?assertMatch(#{running := false}, msgflow:info()),
    ok = msgflow:start(#{procs => [Echo]}),
    Echo ! {self(), ping},
    receive ping -> ok end,
    ok = msgflow:stop(),
    ?assertEqual([{Echo, self(), 1}], msgflow:pairs()),
    unlink(Echo),
    exit(Echo, kill).

%% What a restarted collector finds of its predecessor's run: the session
%% in the supervisor's table (msgflow_run:legacy_table/0).  It stops that session itself (whose
%% owner here stays alive, so no monitor can have done it) and clears the
%% flags left with it.
orphaned_session(_Config) ->
    Self = self(),
    Owner = spawn_link(fun() -> Self ! {session, msgflow_tracer:session_new(self(), 10, 0)},
                                receive stop -> ok end end),
    Session = receive {session, S} -> S end,
    Flagged = spawn_link(fun msgflow_test_lib:sink/0),
    1 = erlang:trace(Flagged, true, [send, {tracer, msgflow_tracer, Session}]),
    true = ets:insert(msgflow_run_legacy, {session, Session}),
    Collector = whereis(msgflow_collector),
    MRef = monitor(process, Collector),
    exit(Collector, kill),
    receive {'DOWN', MRef, process, Collector, killed} -> ok end,
    {msgflow_collector, New, worker, _} =
        lists:keyfind(msgflow_collector, 1, supervisor:which_children(msgflow_sup)),
    ?assert(is_pid(New) andalso New =/= Collector),
    ?assertMatch(#{state := stopped}, msgflow_tracer:session_info(Session)),
    ?assertEqual({trace, 0}, process_info(Flagged, trace)),
    ?assertEqual(undefined, msgflow_run:legacy_session()),
    unlink(Owner),
    exit(Owner, kill),
    unlink(Flagged),
    exit(Flagged, kill).

%% A run in legacy mode and the page, started and stopped, leave every
%% persistent term as it was: erasing or replacing one that holds a boxed
%% term makes every process on the node scan its heap for it (a literal
%% area collection), which at every stop on a node of 100,000 processes
%% is 100,000 heaps read.  (A run before this one made the terms msgflow
%% keeps for the VM's life: they are written once, never changed.)
persistent_terms_kept(_Config) ->
    ok = msgflow:start(#{procs => [self()], trace_mode => legacy}),
    ok = msgflow_collector:await_census(10000),
    {ok, _} = msgflow:web(#{port => 0}),
    ok = msgflow_web:stop(),
    ok = msgflow:stop(),
    Before = msgflow_terms(),
    ok = msgflow:start(#{procs => [self()], trace_mode => legacy}),
    {ok, Url} = msgflow:web(#{port => 0}),
    ?assertEqual(Url, msgflow_web:url()),
    ?assertNotEqual(undefined, msgflow_run:legacy_session()),
    ?assertEqual({[], []}, terms_changed(Before)),
    ok = msgflow_web:stop(),
    ?assertEqual(undefined, msgflow_web:url()),
    ok = msgflow:stop(),
    ?assertEqual(undefined, msgflow_run:legacy_session()),
    ?assertEqual({[], []}, terms_changed(Before)).

%% msgflow's persistent terms (a key naming a module of msgflow's, or a
%% tuple whose first element does): the VM's and other applications'
%% (the logger's, say) may change meanwhile.
msgflow_terms() ->
    lists:sort([KV || KV = {K, _} <- persistent_term:get(), msgflow_key(K)]).

msgflow_key(K) when is_tuple(K), tuple_size(K) > 0 -> msgflow_key(element(1, K));
msgflow_key(K) when is_atom(K) -> lists:prefix("msgflow", atom_to_list(K));
msgflow_key(_) -> false.

%% msgflow's persistent terms written and those gone since Before.
terms_changed(Before) ->
    After = msgflow_terms(),
    {After -- Before, Before -- After}.

%% A session whose owner dies turns itself off (its monitor on the owner):
%% collector_down, and trace_status then answers remove.  The monitor fires
%% while the owner exits, maybe after our 'DOWN': wait for it by yielding.
session_owner_down(_Config) ->
    Self = self(),
    Owner = spawn(fun() -> Self ! {session, msgflow_tracer:session_new(self(), 10, 0)},
                           receive stop -> ok end end),
    Session = receive {session, S} -> S end,
    ?assertMatch(#{state := active}, msgflow_tracer:session_info(Session)),
    ?assertEqual(trace, msgflow_tracer:enabled(trace_status, Session, Self)),
    MRef = monitor(process, Owner),
    exit(Owner, kill),
    receive {'DOWN', MRef, process, Owner, killed} -> ok end,
    ?assertEqual(collector_down, state_after(Session, active, 1000000)),
    ?assertEqual(remove, msgflow_tracer:enabled(trace_status, Session, Self)),
    %% remove is the answer to trace_status only
    ?assertEqual(discard, msgflow_tracer:enabled(send, Session, Self)).

%% The session's state once it is no longer From, yielding at most Tries
%% times in between.
state_after(Session, From, Tries) ->
    case msgflow_tracer:session_info(Session) of
        #{state := From} when Tries > 0 ->
            erlang:yield(),
            state_after(Session, From, Tries - 1);
        #{state := State} ->
            State
    end.

bad_options(Config) ->
    Dead = spawn(fun() -> ok end),
    MRef = monitor(process, Dead),
    receive {'DOWN', MRef, process, Dead, _} -> ok end,
    Cases = [{#{interval => -1}, {badopt, {interval, -1}}},
             {#{interval => 5}, {badopt, {interval, 5}}},
             {#{interval => fast}, {badopt, {interval, fast}}},
             {#{max_pairs => 0}, {badopt, {max_pairs, 0}}},
             {#{max_pairs => 1.5}, {badopt, {max_pairs, 1.5}}},
             {#{duration => -5}, {badopt, {duration, -5}}},
             {#{duration => never}, {badopt, {duration, never}}},
             {#{windows => 0}, {badopt, {windows, 0}}},
             {#{procs => everything}, {badopt, {procs, everything}}},
             {#{procs => []}, {badopt, {procs, []}}},
             {#{procs => [self(), 1]}, {badopt, {procs, [self(), 1]}}},
             {#{bogus => 1}, {badopt, {bogus, 1}}},
             {#{sample => {0, 10}}, {badopt, {sample, {0, 10}}}},
             {#{sample => {10, 10}}, {badopt, {sample, {10, 10}}}},
             {#{sample => 10}, {badopt, {sample, 10}}},
             {#{procs => new, sample => {1, 10}}, {badopt, {sample, {1, 10}}}},
             {procs_all, {badopt, procs_all}},
             {[{procs, all}, oops], {badopt, [{procs, all}, oops]}},
             {#{procs => [no_such_process_name]}, {noproc, no_such_process_name}},
             {#{procs => [Dead]}, {noproc, Dead}}],
    %% one shape: the offending value and a non-empty list of what is
    %% allowed (the keys, for an unknown key)
    Named = fun({error, {badopt, What, [_ | _] = Allowed}}) when is_list(Allowed) ->
                    {error, {badopt, What}};
               (Other) -> Other
            end,
    [?assertEqual({Opts, {error, Why}}, {Opts, Named(msgflow:start(Opts))}) || {Opts, Why} <- Cases],
    ?assertEqual({error, {badopt, {bogus, 1}, lists:sort(maps:keys(msgflow_opts:defaults())
                                                         ++ [owner])}},
                 msgflow:start(#{bogus => 1})),
    %% what msgflow's cluster gives a node it starts is no user's option
    Keys = lists:sort(maps:keys(msgflow_opts:defaults()) ++ [owner]),
    [?assertEqual({error, {badopt, {K, V}, Keys}}, msgflow:start(#{K => V}))
     || {K, V} <- [{coordinator, self()}, {resume, true}]],
    ?assertMatch(#{running := false}, msgflow:info()),
    ok = msgflow:start(),
    ?assertEqual({error, already_started}, msgflow:start()),
    ?assertEqual({error, already_started}, msgflow:start(#{procs => existing})),
    ok = msgflow:stop(),
    ok = msgflow:stop(),
    ?assertEqual({error, {badarg, {n, 0}, [<<"an integer from 1 to 100000000 (rows)">>]}},
                 msgflow:top(0)),
    Missing = "/nonexistent/dir/x.csv",
    ?assertEqual({error, {enoent, Missing}}, msgflow:export(Missing, csv)),
    Csv = filename:join(?config(priv_dir, Config), "x.csv"),
    ?assertEqual({error, {badarg, {format, bogus}, [mermaid | msgflow_report:formats()]}},
                 msgflow:export(Csv, bogus)),
    %% the arguments swapped: the hint names the call that works
    ?assertEqual({error, {badarg, {format, Csv},
                          [iolist_to_binary(["export(\"", Csv, "\", csv): the path comes first"])]}},
                 msgflow:export(csv, Csv)),
    ?assertEqual({error, enoent}, file:read_file_info(Csv)).

%% trace/1 and untrace/1 while running, like dbg:p/2: counts start and stop
%% exactly at the calls.
trace_untrace(_Config) ->
    Sink = spawn_link(fun msgflow_test_lib:sink/0),
    A = spawn_link(fun() -> burst_on_demand(Sink) end),
    B = spawn_link(fun() -> burst_on_demand(Sink) end),
    ?assertEqual({error, not_started}, msgflow:trace(A)),
    ok = msgflow:start(#{procs => [A]}),
    msgflow_workloads:burst(A, 2),
    msgflow_workloads:burst(B, 7),                        %% not traced yet
    ok = msgflow:trace(B),
    msgflow_workloads:burst(B, 5),
    ok = msgflow:untrace(A),
    msgflow_workloads:burst(A, 4),                        %% no longer traced
    ?assertEqual({error, {noproc, no_such_name}}, msgflow:trace(no_such_name)),
    ?assertEqual({error, {badarg, {who, "x"}, [<<"a local pid, port or registered name">>]}},
                 msgflow:untrace("x")),
    ok = msgflow:stop(),
    Self = self(),
    ?assertEqual(lists:sort([{A, Sink, 2}, {A, Self, 1}, {B, Sink, 5}, {B, Self, 1}]),
                 lists:sort(msgflow:pairs())),
    [begin unlink(P), exit(P, kill) end || P <- [A, B, Sink]].

burst_on_demand(Sink) ->
    receive {burst, From, N} -> [Sink ! m || _ <- lists:seq(1, N)], From ! {burst_done, self()} end,
    burst_on_demand(Sink).

%% Another tool traces a worker's sends (a process tracer, as recon or
%% redbug set) before msgflow starts: it gets every event before, during
%% and after msgflow's run, and keeps its flags after stop.  In a session
%% msgflow counts the worker too; in legacy mode it leaves the worker
%% alone and says so.
other_tool_kept(_Config) ->
    [begin
         Sink = spawn_link(fun msgflow_test_lib:sink/0),
         W = spawn_link(fun msgflow_workloads:worker/0),
         Tool = spawn_link(fun() -> msgflow_workloads:tool(Sink, 0) end),
         1 = erlang:trace(W, true, [send, {tracer, Tool}]),
         ok = msgflow:start(#{procs => all, trace_mode => Mode, interval => 3600000}),
         ?assertMatch(#{trace_mode := Mode}, msgflow:info()),
         ok = msgflow_workloads:work(W, Sink, 100),
         ok = msgflow:stop(),
         ok = msgflow_workloads:work(W, Sink, 50),
         ?assertEqual({Mode, 150}, {Mode, tool_count(Tool, W)}),
         ?assertEqual({Mode, {tracer, Tool}}, {Mode, erlang:trace_info(W, tracer)}),
         ?assertEqual({Mode, {flags, [send]}}, {Mode, erlang:trace_info(W, flags)}),
         ?assertEqual({Mode, []}, {Mode, msgflow_test_lib:flagged() -- [W]}),
         Counted = [N || {S, R, N} <- msgflow:pairs(), S =:= W, R =:= Sink],
         case Mode of
             session ->
                 ?assertEqual([100], Counted),
                 ?assertMatch(#{skipped := 0}, msgflow:info());
             legacy ->
                 ?assertEqual([], Counted),
                 #{skipped := Skipped, skipped_examples := Examples} = msgflow:info(),
                 ?assert(Skipped >= 1),
                 ?assert(lists:member(W, Examples))
         end,
         erlang:trace(W, false, [send]),
         [begin unlink(P), exit(P, kill) end || P <- [Sink, W, Tool]]
     end || Mode <- msgflow_test_lib:modes()].

%% dbg traces a worker while msgflow runs: dbg's events are all there
%% after msgflow stops, and msgflow's counts are exact.  Where either has
%% a trace session (OTP 27+: dbg always has one) both see everything;
%% where both are in the legacy session (OTP 25/26) the worker has one
%% tracer: msgflow's, there first, and dbg is refused.
dbg_alongside(_Config) ->
    [begin
         Sink = spawn_link(fun msgflow_test_lib:sink/0),
         W = spawn_link(fun msgflow_workloads:worker/0),
         ok = msgflow:start(#{procs => all, trace_mode => Mode, interval => 3600000}),
         Self = self(),
         Seen = counters:new(1, []),
         {ok, _} = dbg:tracer(process, {fun({trace, P, send, done, _}, D) when P =:= W ->
                                                Self ! {dbg_done, counters:get(Seen, 1)}, D;
                                           ({trace, P, send, m, To}, D) when P =:= W, To =:= Sink ->
                                                counters:add(Seen, 1, 1), D;
                                           (_, D) -> D
                                        end, ok}),
         DbgGot = dbg:p(W, [s]),
         ok = msgflow_workloads:work(W, Sink, 100),
         ok = msgflow:stop(),
         ok = msgflow_workloads:work(W, Sink, 50),
         Counted = [N || {S, R, N} <- msgflow:pairs(), S =:= W, R =:= Sink],
         case {Mode, DbgGot} of
             {_, {ok, [{matched, _, 1}]}} ->
                 %% dbg has a session of its own (OTP 27+), or msgflow
                 %% has: both see everything
                 ?assertEqual([100], Counted),
                 ?assertEqual([100, 150], dbg_counts(2));
             {legacy, {ok, [{matched, _, 0, _}]}} ->
                 %% the worker's one tracer is msgflow's: dbg is refused,
                 %% and msgflow's stop does not take its flags away later
                 ?assertEqual([100], Counted),
                 ok = msgflow_workloads:work(W, Sink, 10),
                 ?assertEqual({flags, []}, erlang:trace_info(W, flags));
             Other ->
                 ct:fail({unexpected, Other})
         end,
         dbg:stop(),
         [begin unlink(P), exit(P, kill) end || P <- [Sink, W]]
     end || Mode <- msgflow_test_lib:modes()].

%% The counts dbg's handler had each time it saw the worker's `done' (the
%% worker sends one after each piece of work), the first N.
dbg_counts(0) -> [];
dbg_counts(N) -> [receive {dbg_done, C} -> C after 10000 -> timeout end | dbg_counts(N - 1)].

%% On OTP 27+ the trace session lives as long as the collector: killed,
%% the session is gone with all its flags, the node lives on, and the
%% restarted collector starts clean.
session_dies_with_collector(_Config) ->
    case lists:member(session, msgflow_test_lib:modes()) of
        false ->
            msgflow_test_lib:skip("no trace sessions before OTP 27");
        true ->
            Sink = spawn_link(fun msgflow_test_lib:sink/0),
            W = spawn_link(fun msgflow_workloads:worker/0),
            ok = msgflow:start(#{procs => all}),
            ?assertMatch(#{trace_mode := session}, msgflow:info()),
            Trace = trace,
            ?assert(lists:keymember(msgflow, 1, Trace:session_info(W))),
            Collector = whereis(msgflow_collector),
            MRef = monitor(process, Collector),
            exit(Collector, kill),
            receive {'DOWN', MRef, process, Collector, killed} -> ok end,
            ?assertEqual([], sessions_after(W, 1000000)),
            ok = msgflow_workloads:work(W, Sink, 10),              %% the node and the worker live on
            ?assertEqual(undefined, msgflow_run:legacy_session()),
            ok = msgflow:start(#{procs => [W]}),
            ok = msgflow_workloads:work(W, Sink, 5),
            ok = msgflow:stop(),
            ?assertEqual([{W, Sink, 5}], [P || P = {S, R, _} <- msgflow:pairs(), S =:= W, R =:= Sink]),
            [begin unlink(P), exit(P, kill) end || P <- [Sink, W]]
    end.

%% msgflow's trace sessions on P once the dead collector's handle is
%% gone, yielding at most Tries times in between.
sessions_after(P, Tries) ->
    Trace = trace,
    case [S || S = {msgflow, _} <- Trace:session_info(P)] of
        [_ | _] when Tries > 0 -> erlang:yield(), sessions_after(P, Tries - 1);
        Left -> Left
    end.

tool_count(Tool, _W) ->
    Tool ! {get, self()},
    receive {tool, N} -> N end.
