%%% @doc Trace flags: which processes and ports msgflow traces, set and
%%% cleared in one place.  The collector calls it and holds the tracing
%%% value it returns; this module keeps no state.
%%%
%%% msgflow sets `send' (what is counted) and `procs' (spawn and register
%%% events, so that a process keeps its name and initial call after it
%%% exits) with its tracer module, msgflow_tracer, in one of two modes:
%%% <ul>
%%% <li>`session' (OTP 27+, where `trace:session_create/3' exists): a trace
%%%     session of msgflow's own, so that a process another tool traces
%%%     is counted too and that tool's flags are never touched; the session
%%%     handle lives in the tracing value, which only the collector holds,
%%%     so the session and all its flags go when the collector dies;</li>
%%% <li>`legacy' (OTP 25/26, or asked for): the node's one legacy session,
%%%     where a process has one tracer: a process or port that another
%%%     tool already traces is left alone and reported as skipped, and
%%%     flags are cleared only where msgflow's tracer is the one set.</li>
%%% </ul>
%%% It never traces its own processes (the collector, its supervisor, the
%%% application master) nor ERTS's dirty process signal handlers.
-module(msgflow_flags).

-export([untrace_self/0, mode/1, begin_tracing/2, end_tracing/1, resolve/1, resolve_one/1, on/2, off/2,
         own_pids/0, own_names/0, own/2, slice_on/3, new_tracer/1]).
-export_type([targets/0, tracing/0, mode/0, skipped/0]).

%% erlang:trace_info/2 returns `{tracer, {Module, State}}' for a tracer
%% module; OTP 25's specs do not say so.
-dialyzer({no_match, [untrace_self/0, new_tracer/1]}).

-define(FLAGS, [send, procs]).
%% skipped processes kept as examples
-define(EXAMPLES, 5).

%% What the flags are set on: a process spec, or the pids of a list.
-type targets() :: all | new | existing | [pid()].
-type mode() :: session | legacy.
%% How msgflow traces: its mode, the NIF session (the tracer state) and,
%% in `session' mode, the trace session's handle.
-opaque tracing() :: #{mode := mode(), nif := msgflow_tracer:session(), session => term()}.
%% Processes and ports left alone because another tool traces them
%% (legacy mode): how many, and a few of them.
-type skipped() :: {non_neg_integer(), [pid() | port()]}.

%% @doc The mode to trace in: `auto' is `session' where the VM has trace
%% sessions (OTP 27+), else `legacy'.  `{error, {no_trace_sessions,
%% Release}}' when `session' is asked for on a VM without them.
-spec mode(auto | mode()) -> {ok, mode()} | {error, {no_trace_sessions, string()}}.
mode(Want) ->
    Has = sessions_available(),
    case {Want, Has} of
        {auto, true} -> {ok, session};
        {auto, false} -> {ok, legacy};
        {legacy, _} -> {ok, legacy};
        {session, true} -> {ok, session};
        {session, false} -> {error, {no_trace_sessions, erlang:system_info(otp_release)}}
    end.

%% Whether the VM has trace sessions, asked of the code server once per
%% VM (a persistent term written once, never changed): on OTP 25 and 26
%% `trace' does not exist, and each ensure_loaded would be a request to
%% the code server, whose answer a run would count.
sessions_available() ->
    case persistent_term:get({?MODULE, sessions}, unknown) of
        unknown ->
            _ = code:ensure_loaded(trace),
            Has = erlang:function_exported(trace, session_create, 3),
            persistent_term:put({?MODULE, sessions}, Has),
            Has;
        Has ->
            Has
    end.

%% @doc A tracing value for the NIF session Nif: in `session' mode a new
%% trace session named msgflow whose tracer is `{msgflow_tracer, Nif}'.
%% Only the caller (the collector) may keep it.
-spec begin_tracing(mode(), msgflow_tracer:session()) -> tracing().
begin_tracing(legacy, Nif) ->
    #{mode => legacy, nif => Nif};
begin_tracing(session, Nif) ->
    %% trace is OTP 27+: called through a variable, so that OTP 25's tools
    %% do not look for it
    Trace = trace,
    #{mode => session, nif => Nif, session => Trace:session_create(msgflow, {msgflow_tracer, Nif}, [])}.

%% @doc Ends tracing: in `session' mode the trace session is destroyed
%% (every flag it set goes with it); in `legacy' mode nothing more (off/2
%% cleared the flags).
-spec end_tracing(tracing()) -> ok.
end_tracing(#{mode := session, session := S}) ->
    Trace = trace,
    Trace:session_destroy(S);
end_tracing(#{mode := legacy}) ->
    ok.

%% @doc `procs' of start/1 resolved now: a spec as it is, a list's names
%% to pids (msgflow's own processes left out).  `{error, {noproc, Who}}'
%% for a name not registered or a pid not alive.
-spec resolve(msgflow_opts:procs()) -> {ok, targets()} | {error, {noproc, term()}}.
resolve(P) when is_atom(P) ->
    {ok, P};
resolve(List) ->
    resolve_list(List, own_pids(), []).

resolve_list([], _Own, Acc) ->
    {ok, lists:usort(Acc)};
resolve_list([Name | Rest], Own, Acc) when is_atom(Name) ->
    case whereis(Name) of
        undefined -> {error, {noproc, Name}};
        Pid -> resolve_list([Pid | Rest], Own, Acc)
    end;
resolve_list([Pid | Rest], Own, Acc) ->
    case {lists:member(Pid, Own), is_process_alive(Pid)} of
        {true, _} -> resolve_list(Rest, Own, Acc);          %% never trace msgflow itself
        {false, true} -> resolve_list(Rest, Own, [Pid | Acc]);
        {false, false} -> {error, {noproc, Pid}}
    end.

%% @doc One process, port or registered name (trace/1, untrace/1).
%% `{error, {noproc, Who}}', or `{error, {badarg, {who, Who}, Allowed}}'
%% for anything that is not a local pid, port or atom.
-spec resolve_one(term()) -> {ok, pid() | port()} | {error, term()}.
resolve_one(Name) when is_atom(Name) ->
    case whereis(Name) of
        undefined -> {error, {noproc, Name}};
        P -> {ok, P}
    end;
resolve_one(P) when is_pid(P), node(P) =:= node() ->
    case is_process_alive(P) of
        true -> {ok, P};
        false -> {error, {noproc, P}}
    end;
resolve_one(P) when is_port(P), node(P) =:= node() ->
    case erlang:port_info(P, id) of
        undefined -> {error, {noproc, P}};
        _ -> {ok, P}
    end;
resolve_one(Other) ->
    {error, {badarg, {who, Other}, [<<"a local pid, port or registered name">>]}}.

%% @doc Sets the flags on the targets (a list: each pid or port; one that
%% is gone is left out).  A spec leaves msgflow's own processes untraced.
%% `all' and `existing' are set process by process (and `new' as the
%% default for processes to come), not with one call over every process,
%% which holds the scheduler for tens of ms on a node with 100,000
%% processes.  In legacy mode a process or port another tool traces is
%% left alone: returns those skipped.
-spec on(tracing(), targets() | [pid() | port()]) -> {ok, skipped()}.
on(T, new) ->
    ok = own(T, own_pids()),
    {ok, set_one(T, new, true, {0, []})};
on(T, Spec) when Spec =:= all; Spec =:= existing ->
    Own = own_pids(),
    ok = own(T, Own),
    Skipped0 = case Spec of
                   all -> set_one(T, new, true, {0, []});
                   existing -> {0, []}
               end,
    {ok, each(T, fun(P, Acc) -> set_one(T, P, true, Acc) end, Skipped0,
              fun() -> [P || P <- processes(), not lists:member(P, Own)] ++ erlang:ports() end)};
on(T, Pids) ->
    {ok, lists:foldl(fun(P, Acc) -> set_one(T, P, true, Acc) end, {0, []}, Pids)}.

%% @doc Clears msgflow's flags: of every process and port for a spec (and
%% the default for new processes), else of each listed process or port
%% (one that is gone is skipped); process by process, as on/2 sets them.
%% Never another tool's: in legacy mode only where msgflow's tracer is
%% set, and a session holds msgflow's flags only.
-spec off(tracing(), targets() | [pid() | port()]) -> ok.
off(T, Spec) when is_atom(Spec) ->
    _ = set_one(T, new, false, {0, []}),
    _ = each(T, fun(P, Acc) -> set_one(T, P, false, Acc) end, {0, []},
             fun() -> processes() ++ erlang:ports() end),
    ok;
off(T, Pids) ->
    _ = [set_one(T, P, false, {0, []}) || P <- Pids],
    ok.

%% The flags on or off on one process, port or `new'; Skipped counts a
%% process legacy mode leaves to the tool that traces it.  A process that
%% is gone is no error.
set_one(#{mode := session, session := S}, new, How, Skipped) ->
    %% a session's `new' is processes or ports, where legacy tracing's is
    %% both: ports opened during the run are traced too
    Trace = trace,
    _ = quietly(fun() -> Trace:process(S, new, How, ?FLAGS) end),
    _ = quietly(fun() -> Trace:port(S, new, How, [send]) end),
    Skipped;
set_one(#{mode := session, session := S}, P, How, Skipped) ->
    Trace = trace,
    _ = quietly(fun() ->
                        case is_port(P) of
                            true -> Trace:port(S, P, How, [send]);
                            false -> Trace:process(S, P, How, ?FLAGS)
                        end
                end),
    Skipped;
set_one(#{mode := legacy, nif := Nif}, P, How, Skipped = {N, Examples}) ->
    case {How, quietly(fun() -> erlang:trace_info(P, tracer) end)} of
        {true, {tracer, Tracer}} when Tracer =:= []; element(1, Tracer) =:= msgflow_tracer ->
            %% free, ours, or a msgflow session that has ended
            _ = quietly(fun() -> erlang:trace(P, true, [{tracer, msgflow_tracer, Nif} | ?FLAGS]) end),
            Skipped;
        {true, {tracer, _Other}} ->
            {N + 1, case length(Examples) < ?EXAMPLES of
                        true -> [P | Examples];
                        false -> Examples
                    end};
        {false, {tracer, {msgflow_tracer, Nif}}} ->
            _ = quietly(fun() -> erlang:trace(P, false, ?FLAGS) end),
            Skipped;
        _ ->
            Skipped      %% gone, or another tool's flags: left as they are
    end.

%% F(Item, Acc) on each of the pids and ports List() gives, each call
%% counted as the work it is (a trace call locks the process), so that the
%% process doing it is scheduled out in time.  In a process of its own
%% whose heap holds the list from the start (no garbage collection over
%% 100,000 pids); returns the final Acc.
each(T, F, Acc0, List) ->
    Words = 3 * (erlang:system_info(process_count) + erlang:system_info(port_count)) + 1000,
    {Pid, Ref} = spawn_opt(fun() ->
                                   %% msgflow's own: untraced, though born
                                   %% after `new' was set
                                   _ = set_one(T, self(), false, Acc0),
                                   exit({done, lists:foldl(fun(X, Acc) ->
                                                                   erlang:bump_reductions(20),
                                                                   F(X, Acc)
                                                           end, Acc0, List())})
                           end, [monitor, {min_heap_size, Words}]),
    receive
        {'DOWN', Ref, process, Pid, {done, Acc}} -> Acc;
        {'DOWN', Ref, process, Pid, Other} -> exit(Other)
    end.

%% @doc Who traces processes spawned from now on: `msgflow' while it is
%% msgflow's session (always in `session' mode, where another tool has
%% sessions of its own), else the tracer another tool set on `new' in the
%% legacy session (`[]' when none is left), which then gets those
%% processes instead of msgflow: msgflow cannot prevent it (dbg:p(all,
%% ...) does it), but says so (info/0, top).
-spec new_tracer(tracing()) -> msgflow | term().
new_tracer(#{mode := session}) ->
    msgflow;
new_tracer(#{mode := legacy, nif := Nif}) ->
    case erlang:trace_info(new, tracer) of
        {tracer, {msgflow_tracer, Nif}} -> msgflow;
        {tracer, Other} -> Other
    end.

%% @doc The start of a traced slice when sampling: the targets' flags on
%% again, but not those of processes untrace/1 dropped.
-spec slice_on(tracing(), targets(), [pid() | port()]) -> ok.
slice_on(T, Spec, Excluded) when is_atom(Spec) ->
    _ = quietly(fun() -> on(T, Spec) end),
    off(T, Excluded);
slice_on(T, Pids, _Excluded) ->
    _ = [quietly(fun() -> on(T, [P]) end) || P <- Pids],   %% some may have died
    ok.

%% @doc Processes msgflow never traces: the collector, its supervisor, the
%% flow keeper, the cluster's coordinator,
%% application master pair when msgflow runs as an application, and the
%% VM's dirty signal handlers.
-spec own_pids() -> [pid()].
own_pids() ->
    Masters = case application_controller:get_master(msgflow) of
                  undefined -> [];
                  M -> [M | [P || P <- element(2, process_info(M, links)), is_pid(P),
                                  process_info(P, initial_call) =:=
                                      {initial_call, {application_master, start_it, 4}}]]
              end,
    %% The VM's dirty signal handlers answer process_info on processes that
    %% run dirty code; they loop by sending to themselves, so their traffic is
    %% mostly msgflow's own label and queue-length reads.
    %% They are among the first processes the VM starts (looked up by
    %% number: listing every process of a big node is not cheap).
    Handlers = [P || N <- lists:seq(0, 24), P <- [list_to_pid("<0." ++ integer_to_list(N) ++ ".0>")],
                     process_info(P, initial_call) =:=
                         {initial_call, {erts_dirty_process_signal_handler, start, 0}}],
    [P || P <- [whereis(msgflow_collector), whereis(msgflow_sup), whereis(msgflow_flow_keeper),
                whereis(msgflow_cluster), whereis(msgflow_remote), whereis(msgflow_web),
                whereis(msgflow_history)
                | Masters ++ Handlers ++ web_own()],
          is_pid(P)].

%% httpd's processes while msgflow's page is up: the web server
%% (msgflow_web) keeps them in its table msgflow_web_kept, read here by
%% name: the tracer layer calls nothing of the web layer.
web_own() ->
    try ets:lookup(msgflow_web_kept, own) of
        [{own, Own}] -> Own;
        [] -> []
    catch
        error:badarg -> []
    end.

%% @doc Makes Pids msgflow's own in the run's NIF session: a send from or
%% to one of them is no longer counted (msgflow_tracer:own/3), and each
%% keeps only the `procs' flag, so that a process it spawns (an httpd
%% connection's handler) is msgflow's too from its first message on.
-spec own(tracing(), [pid()]) -> ok.
own(T = #{nif := Nif}, Pids) ->
    _ = [own_one(T, Nif, P) || P <- Pids, is_pid(P), node(P) =:= node()],
    ok.

own_one(T, Nif, P) ->
    case quietly(fun() -> msgflow_tracer:own(Nif, add, P) end) of
        ok -> own_flags(T, Nif, P);
        _ -> ok                 %% the set is full (512): traced as any other
    end.

own_flags(T, Nif, P) ->
    case T of
        #{mode := session, session := S} ->
            Trace = trace,
            _ = quietly(fun() -> Trace:process(S, P, false, [send]) end),
            _ = quietly(fun() -> Trace:process(S, P, true, [procs]) end);
        #{mode := legacy} ->
            case quietly(fun() -> erlang:trace_info(P, tracer) end) of
                {tracer, Tracer} when Tracer =:= []; element(1, Tracer) =:= msgflow_tracer ->
                    _ = quietly(fun() -> erlang:trace(P, false, [send]) end),
                    _ = quietly(fun() ->
                                        erlang:trace(P, true, [{tracer, msgflow_tracer, Nif}, procs])
                                end);
                _ ->
                    ok          %% gone, or another tool's
            end
    end,
    ok.

%% @doc The names msgflow's own processes are registered under: a send
%% to one of them by name is msgflow's own too.
-spec own_names() -> [atom()].
own_names() ->
    [msgflow_collector, msgflow_sup, msgflow_flow_keeper, msgflow_cluster, msgflow_remote,
     msgflow_web, msgflow_history, msgflow_alerts].

%% @doc The calling process is one of msgflow's own (a view worker, an
%% erpc process running a node's part of a view): none of its messages
%% are counted in the run's NIF session from now on (msgflow_tracer:own/3;
%% its messages to the collector are not counted either way), and its
%% legacy flags (before OTP 27) are cleared; another tool's flags are
%% never touched.
-spec untrace_self() -> ok.
untrace_self() ->
    case erlang:trace_info(self(), tracer) of
        {tracer, {msgflow_tracer, _}} -> _ = erlang:trace(self(), false, [send, procs]);
        _ -> ok
    end,
    case msgflow_run:nif_session() of
        undefined -> ok;
        Nif -> _ = quietly(fun() -> msgflow_tracer:own(Nif, add, self()) end), ok
    end.

%% F(), or `error' when it raises (a process or port gone, a tracer
%% module deleted, another tool's flags).
quietly(F) ->
    try F() catch _:_ -> error end.
