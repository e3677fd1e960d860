%%% @doc Trace flags: which processes and ports msgflow traces, set and
%%% cleared in one place.  The collector calls it; it keeps no state.
%%%
%%% msgflow sets `send' (what is counted) and `procs' (spawn and register
%%% events, so that a process keeps its name and initial call after it
%%% exits) with `{tracer, msgflow_tracer, Session}'.  It never traces its
%%% own processes (the collector, its supervisor, the application master)
%%% nor ERTS's dirty process signal handlers.
-module(msgflow_flags).

-export([resolve/1, resolve_one/1, on/2, off/1, own_pids/0, slice_on/3]).
-export_type([targets/0]).

-define(FLAGS, [send, procs]).

%% What the flags are set on: a process spec, or the pids of a list.
-type targets() :: all | new | existing | [pid()].

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
%% `{error, {noproc, Who}}', or `{error, {badarg, Who}}' for anything
%% that is not a local pid, port or atom.
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
    {error, {badarg, Other}}.

%% @doc Sets the flags for Session on the targets (a list: each pid or
%% port; raises if one is gone).  A spec leaves msgflow's own processes
%% untraced.  `all' and `existing' are set process by process (and `new'
%% as the default for processes to come), not with one call over every
%% process, which holds the scheduler for tens of ms on a node with
%% 100,000 processes.
-spec on(targets() | [pid() | port()], msgflow_tracer:session()) -> ok.
on(new, Session) ->
    _ = erlang:trace(new, true, [{tracer, msgflow_tracer, Session} | ?FLAGS]),
    ok;
on(Spec, Session) when Spec =:= all; Spec =:= existing ->
    _ = Spec =:= all andalso on(new, Session),
    Own = own_pids(),
    each(fun(P) -> catch erlang:trace(P, true, [{tracer, msgflow_tracer, Session} | ?FLAGS]) end,
         fun() -> [P || P <- processes(), not lists:member(P, Own)] ++ erlang:ports() end),
    ok;
on(Pids, Session) ->
    _ = [erlang:trace(P, true, [{tracer, msgflow_tracer, Session} | ?FLAGS]) || P <- Pids],
    ok.

%% @doc Clears the flags: of every process and port for a spec (and the
%% default for new processes), else of each listed process or port (one
%% that is gone is skipped); process by process, as on/2 sets them.
-spec off(targets() | [pid() | port()]) -> ok.
off(Spec) when is_atom(Spec) ->
    _ = (catch erlang:trace(new, false, ?FLAGS)),
    each(fun(P) -> catch erlang:trace(P, false, ?FLAGS) end,
         fun() -> processes() ++ erlang:ports() end),
    ok;
off(Pids) ->
    _ = [catch erlang:trace(P, false, ?FLAGS) || P <- Pids],
    ok.

%% F on each of the pids and ports List() gives, each call counted as the
%% work it is (a trace call locks the process), so that the process doing
%% it is scheduled out in time.  In a process of its own whose heap holds
%% the list from the start (no garbage collection over 100,000 pids).
each(F, List) ->
    Words = 3 * (erlang:system_info(process_count) + erlang:system_info(port_count)) + 1000,
    {Pid, Ref} = spawn_opt(fun() ->
                                   %% msgflow's own: untraced, though born
                                   %% after `new' was set
                                   _ = erlang:trace(self(), false, ?FLAGS),
                                   lists:foreach(fun(X) -> erlang:bump_reductions(20), F(X) end,
                                                 List())
                           end, [monitor, {min_heap_size, Words}]),
    receive {'DOWN', Ref, process, Pid, _} -> ok end.

%% @doc The start of a traced slice when sampling: the targets' flags on
%% again, but not those of processes untrace/1 dropped.
-spec slice_on(targets(), [pid() | port()], msgflow_tracer:session()) -> ok.
slice_on(Spec, Excluded, Session) when is_atom(Spec) ->
    _ = (catch on(Spec, Session)),
    off(Excluded);
slice_on(Pids, _Excluded, Session) ->
    _ = [catch on([P], Session) || P <- Pids],   %% some may have died
    ok.

%% @doc Processes msgflow never traces: the collector, its supervisor, the
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
    [P || P <- [whereis(msgflow_collector), whereis(msgflow_sup) | Masters ++ Handlers],
          is_pid(P)].
