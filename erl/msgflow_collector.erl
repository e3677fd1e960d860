%%% @doc The collector: owns the tracing session, pulls a snapshot from the
%%% NIF every `interval' ms, and keeps the cumulative totals, the last
%%% `windows' windows (for rates) and a label for every endpoint seen.
%%%
%%% The counting itself happens in the NIF, in the tracees' own scheduler
%%% threads; this process only merges deltas, so its load grows with the
%%% number of distinct pairs per window, never with the number of messages.
%%% Use the API in module msgflow; the calls here are its back end.
-module(msgflow_collector).
-behaviour(gen_server).

-export([start_link/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(SERVER, ?MODULE).

-type pair() :: {msgflow_tracer:endpoint(), msgflow_tracer:endpoint()}.

-record(st, {
    running = false :: boolean(),
    session :: msgflow_tracer:session() | undefined,
    opts = msgflow_opts:defaults() :: msgflow_opts:opts(),
    traced = [] :: [pid()],                 %% procs given as a list
    run :: reference() | undefined,         %% tags this run's timers
    started_at :: integer() | undefined,    %% erlang:system_time(millisecond)
    stopped_at :: integer() | undefined,
    win_start = 0 :: integer(),             %% monotonic ms of the open window
    totals = #{} :: #{pair() => pos_integer()},
    cur = #{} :: #{pair() => pos_integer()},           %% the open window
    windows = queue:new() :: queue:queue(window()),    %% newest last
    events = 0 :: non_neg_integer(),
    dead_letters = 0 :: non_neg_integer(),
    overflow = 0 :: non_neg_integer(),
    labels = #{} :: #{msgflow_tracer:endpoint() => binary()},
    %% module and application of local processes, read while alive
    meta = #{} :: #{pid() => {module() | undefined, atom() | undefined}},
    names = #{} :: #{atom() => pid()},      %% registered names seen
    last_info = #{} :: map(),               %% session_info at stop
    waiters = [] :: [gen_server:from()]
}).

%% {EndMonotonicMs, DurationMs, Counts}
-type window() :: {integer(), non_neg_integer(), #{pair() => pos_integer()}}.

%% @private
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, [], []).

%% @private
-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    clear_orphaned_flags(),
    {ok, #st{}}.

%% A collector that died while running left processes flagged for its
%% session (it marks a run in the application environment).  Asking the VM
%% for their tracer makes it ask the session's trace_status, which answers
%% `remove' once its collector is gone: that clears them.
clear_orphaned_flags() ->
    case application:get_env(msgflow, running) of
        {ok, true} ->
            _ = [erlang:trace_info(P, tracer) || P <- [new | processes() ++ erlang:ports()]],
            application:unset_env(msgflow, running);
        _ ->
            ok
    end.

%% @private
-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}} | {noreply, #st{}}.
handle_call({start, _}, _From, St = #st{running = true}) ->
    {reply, {error, already_started}, St};
handle_call({start, Opts}, _From, St) ->
    case start_tracing(Opts, St) of
        {ok, St1} -> {reply, ok, St1};
        {error, _} = E -> {reply, E, St}
    end;
handle_call(stop, _From, St) ->
    {reply, ok, stop_tracing(St)};
handle_call(reset, _From, St) ->
    St1 = case St#st.running of
              true -> take(St);       %% drop what the NIF holds so far
              false -> St
          end,
    {reply, ok, St1#st{totals = #{}, cur = #{}, windows = queue:new(),
                       events = 0, dead_letters = 0, overflow = 0,
                       win_start = now_ms()}};
handle_call(pairs, _From, St) ->
    St1 = refresh(St),
    {reply, sort_desc(maps:to_list(St1#st.totals)), St1};
handle_call({top, N}, _From, St) ->
    St1 = refresh(St),
    {reply, top_rows(N, St1), St1};
handle_call(labelled_pairs, _From, St) ->
    St1 = refresh(St),
    Rows = [{S, R, label(S, St1), label(R, St1), C}
            || {S, R, C} <- sort_desc(maps:to_list(St1#st.totals))],
    {reply, Rows, St1};
handle_call({matrix, By}, _From, St) ->
    St1 = refresh(St),
    {reply, matrix(By, St1), St1};
handle_call(info, _From, St) ->
    St1 = refresh(St),
    {reply, info(St1), St1};
handle_call(wait, From, St = #st{running = true, waiters = W}) ->
    {noreply, St#st{waiters = [From | W]}};
handle_call(wait, _From, St) ->
    {reply, ok, St};
handle_call(Other, _From, St) ->
    {reply, {error, {unknown_call, Other}}, St}.

%% @private
-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

%% @private
-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info({tick, Run}, St = #st{run = Run, running = true}) ->
    St1 = close_window(take(St)),
    {noreply, schedule_tick(St1)};
handle_info({duration_over, Run}, St = #st{run = Run, running = true}) ->
    {noreply, stop_tracing(St)};
%% Sampling: outside a traced slice the flags are really off (not discarded
%% by the tracer), so the traced processes pay nothing there.
handle_info({slice_off, Run}, St = #st{run = Run, running = true,
                                       opts = #{sample := {Traced, Period}}}) ->
    clear_flags(targets(St)),
    erlang:send_after(Period - Traced, self(), {slice_on, Run}),
    {noreply, St};
handle_info({slice_on, Run}, St = #st{run = Run, running = true, session = Session,
                                      opts = #{sample := {Traced, _}}}) ->
    case targets(St) of
        Spec when is_atom(Spec) -> catch flags_on(Spec, Session);
        Pids -> [catch flags_on([P], Session) || P <- Pids]   %% some may have died
    end,
    erlang:send_after(Traced, self(), {slice_off, Run}),
    {noreply, St};
handle_info(_Msg, St) ->
    {noreply, St}.

%% @private
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, St) ->
    _ = stop_tracing(St),
    ok.

%%% Starting and stopping

start_tracing(Opts = #{procs := Procs, max_pairs := Max}, St) ->
    case resolve_procs(Procs) of
        {ok, Targets} ->
            try msgflow_tracer:session_new(self(), Max) of
                Session -> set_flags(Targets, Session, Opts, St)
            catch
                error:undef -> {error, {nif_not_loaded, code:which(msgflow_tracer)}};
                error:{not_loaded, _} = E -> {error, E}
            end;
        {error, _} = E ->
            E
    end.

resolve_procs(P) when is_atom(P) ->
    {ok, P};
resolve_procs(List) ->
    Own = own_pids(),
    resolve_list(List, Own, []).

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

set_flags(Targets, Session, Opts, St) ->
    try flags_on(Targets, Session) of
        ok ->
            application:set_env(msgflow, running, true),
            Run = make_ref(),
            St1 = St#st{running = true, session = Session, opts = Opts,
                        traced = case Targets of L when is_list(L) -> L; _ -> [] end,
                        run = Run, started_at = erlang:system_time(millisecond),
                        stopped_at = undefined, win_start = now_ms(),
                        totals = #{}, cur = #{}, windows = queue:new(),
                        events = 0, dead_letters = 0, overflow = 0, last_info = #{}},
            case Opts of
                #{duration := infinity} -> ok;
                #{duration := D} -> erlang:send_after(D, self(), {duration_over, Run})
            end,
            case Opts of
                #{sample := {Traced, _}} -> erlang:send_after(Traced, self(), {slice_off, Run});
                #{sample := off} -> ok
            end,
            {ok, schedule_tick(St1)}
    catch
        error:Reason ->
            msgflow_tracer:session_stop(Session),
            clear_flags(Targets),
            {error, {trace_failed, Reason}}
    end.

flags_on(Spec, Session) when is_atom(Spec) ->
    _ = erlang:trace(Spec, true, [send, {tracer, msgflow_tracer, Session}]),
    _ = [catch erlang:trace(P, false, [send]) || Spec =/= new, P <- own_pids()],
    ok;
flags_on(Pids, Session) ->
    _ = [erlang:trace(P, true, [send, {tracer, msgflow_tracer, Session}]) || P <- Pids],
    ok.

%% What the flags were set on: a spec (all, new, existing) or the pids.
targets(#st{opts = #{procs := P}}) when is_atom(P) -> P;
targets(#st{traced = Pids}) -> Pids.

%% msgflow's own processes: this collector, its supervisor, and the
%% application master pair when msgflow runs as an application.
own_pids() ->
    Masters = case application_controller:get_master(msgflow) of
                  undefined -> [];
                  M -> [M | [P || P <- element(2, process_info(M, links)), is_pid(P),
                                  process_info(P, initial_call) =:=
                                      {initial_call, {application_master, start_it, 4}}]]
              end,
    [P || P <- [self(), whereis(msgflow_sup) | Masters], is_pid(P)].

clear_flags(Spec) when is_atom(Spec) ->
    catch erlang:trace(all, false, [send]);
clear_flags(Pids) ->
    [catch erlang:trace(P, false, [send]) || P <- Pids].

%% Flags off, barrier, final snapshot: pairs() then holds every send traced
%% before stop was called.
stop_tracing(St = #st{running = false}) ->
    St;
stop_tracing(St = #st{session = Session}) ->
    clear_flags(targets(St)),
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} -> ok end,
    St1 = close_window(take(St)),
    Info = try msgflow_tracer:session_info(Session) catch error:_ -> #{} end,
    catch msgflow_tracer:session_stop(Session),
    application:unset_env(msgflow, running),
    [gen_server:reply(W, ok) || W <- St1#st.waiters],
    St1#st{running = false, session = undefined, run = undefined, waiters = [],
           stopped_at = erlang:system_time(millisecond), last_info = Info}.

%%% Snapshots and windows

schedule_tick(St = #st{run = Run, opts = #{interval := I}}) ->
    erlang:send_after(I, self(), {tick, Run}),
    St.

refresh(St = #st{running = true}) -> take(St);
refresh(St) -> St.

%% The totals taken so far must survive whatever happens to the tracer
%% module: while it is being loaded its NIFs are missing (undef); after it
%% was deleted and purged, the code loaded next has a new session resource
%% type and cannot read this session (badarg; the VM has by then removed
%% the module's trace flags).  Either way, skip the turn.
take(St = #st{session = Session}) ->
    try msgflow_tracer:snapshot(Session) of
        Snap -> merge(Snap, St)
    catch
        error:undef -> St;
        error:{not_loaded, _} -> St;
        error:badarg -> St
    end.

merge({Pairs, Dead, Overflow, OverflowDead}, St) ->
    St1 = lists:foldl(fun add_pair/2, St, Pairs),
    DeadN = lists:foldl(fun({_, _, N}, A) -> A + N end, OverflowDead, Dead),
    St1#st{overflow = St1#st.overflow + Overflow,
           events = St1#st.events + Overflow,
           dead_letters = St1#st.dead_letters + DeadN}.

add_pair({S, R, N}, St = #st{totals = T, cur = C, events = E}) ->
    K = {S, R},
    learn(R, learn(S, St#st{totals = bump(K, N, T), cur = bump(K, N, C), events = E + N})).

bump(K, N, M) ->
    case M of
        #{K := V} -> M#{K := V + N};
        _ -> M#{K => N}
    end.

%% The first time an endpoint shows up, read its label while it may still
%% be alive; remember which pid a registered name stood for.
learn(E, St = #st{labels = L}) when is_map_key(E, L) ->
    St;
learn(E, St = #st{labels = L, names = Names, meta = Meta}) ->
    Label = msgflow_fmt:label(E),
    Meta1 = case is_pid(E) andalso node(E) =:= node() of
                true ->
                    App = case application:get_application(E) of
                              {ok, A} -> A;
                              undefined -> undefined
                          end,
                    Meta#{E => {msgflow_fmt:module_of(E), App}};
                false ->
                    Meta
            end,
    Names1 = case name_of(E) of
                 {ok, Name} ->
                     case whereis(Name) of
                         Pid when is_pid(Pid) -> Names#{Name => Pid};
                         undefined -> Names
                     end;
                 false when is_pid(E), node(E) =:= node() ->
                     case process_info(E, registered_name) of
                         {registered_name, Name} -> Names#{Name => E};
                         _ -> Names
                     end;
                 false ->
                     Names
             end,
    St#st{labels = L#{E => Label}, names = Names1, meta = Meta1}.

name_of(A) when is_atom(A) -> {ok, A};
name_of({A, Node}) when is_atom(A), Node =:= node() -> {ok, A};
name_of(_) -> false.

close_window(St = #st{cur = Cur, win_start = Start, windows = Q,
                      opts = #{windows := Keep}}) ->
    Now = now_ms(),
    Q1 = queue:in({Now, Now - Start, Cur}, Q),
    Q2 = case queue:len(Q1) > Keep of
             true -> queue:drop(Q1);
             false -> Q1
         end,
    St#st{cur = #{}, win_start = Now, windows = Q2}.

now_ms() ->
    erlang:monotonic_time(millisecond).

%%% Views

sort_desc(KVs) ->
    [{S, R, N} || {{S, R}, N} <- lists:reverse(lists:keysort(2, KVs))].

%% A send to a registered name and a send to the pid holding it are one
%% receiver whenever the name resolved.
canon(A, Names) when is_atom(A) -> maps:get(A, Names, A);
canon({A, Node}, Names) when is_atom(A), Node =:= node() -> canon(A, Names);
canon(E, _) -> E.

label(E, #st{labels = L}) ->
    case L of
        #{E := Label} -> Label;
        _ -> msgflow_fmt:endpoint(E)
    end.

top_rows(N, St = #st{totals = T, names = Names}) ->
    {WinMs, Win} = last_window(St),
    Group = fun(M) ->
                    maps:fold(fun({S, R}, C, Acc) ->
                                      bump({canon(S, Names), canon(R, Names)}, C, Acc)
                              end, #{}, M)
            end,
    Totals = Group(T),
    Recent = Group(Win),
    Top = lists:sublist(sort_desc(maps:to_list(Totals)), N),
    Scale = case St#st.opts of
                #{sample := {Traced, Period}} -> Period / Traced;
                _ -> 1
            end,
    Rows = [#{sender => S, receiver => R,
              sender_label => label(S, St), receiver_label => label(R, St),
              count => C, rate => Scale * rate(maps:get({S, R}, Recent, 0), WinMs)}
            || {S, R, C} <- Top],
    #{rows => Rows, window_ms => WinMs, events => St#st.events,
      pairs => map_size(Totals), running => St#st.running,
      sample => maps:get(sample, St#st.opts)}.

%% The communication matrix: totals and last-window rates grouped by By.
matrix(By, St = #st{totals = T, names = Names}) ->
    {WinMs, Win} = last_window(St),
    Key = fun(E) -> group_key(By, canon(E, Names), St) end,
    Group = fun(M) -> maps:fold(fun({S, R}, C, Acc) -> bump({Key(S), Key(R)}, C, Acc) end,
                                #{}, M) end,
    Counts = Group(T),
    Recent = Group(Win),
    Scale = case St#st.opts of
                #{sample := {Traced, Period}} -> Period / Traced;
                _ -> 1
            end,
    Cells = maps:map(fun(K, C) -> #{count => C,
                                    rate => Scale * rate(maps:get(K, Recent, 0), WinMs)}
                     end, Counts),
    #{by => By,
      rows => lists:usort([S || {S, _} <- maps:keys(Counts)]),
      cols => lists:usort([R || {_, R} <- maps:keys(Counts)]),
      cells => Cells,
      window_ms => WinMs,
      estimated => Scale =/= 1}.

group_key(process, E, _St) -> E;
group_key(name, E, St) -> label(E, St);
group_key(module, E, #st{meta = M}) -> element(1, maps:get(E, M, {undefined, undefined}));
group_key(application, E, #st{meta = M}) -> element(2, maps:get(E, M, {undefined, undefined}));
group_key(node, {_, Node}, _St) when is_atom(Node) -> Node;
group_key(node, A, _St) when is_atom(A) -> node();
group_key(node, E, _St) -> node(E).

last_window(St) ->
    case queue:peek_r(St#st.windows) of
        {value, {_, Dur, W}} -> {Dur, W};
        empty -> {now_ms() - St#st.win_start, St#st.cur}
    end.

rate(_, 0) -> 0.0;
rate(C, Ms) -> C * 1000 / Ms.

info(St = #st{opts = Opts}) ->
    Tables = case St#st.session of
                 undefined -> St#st.last_info;
                 S -> try msgflow_tracer:session_info(S) catch error:_ -> #{} end
             end,
    Alloc = try msgflow_tracer:allocator_info()
            catch error:_ -> #{allocator => unavailable, jemalloc_error => <<"NIF not loaded">>}
            end,
    #{running => St#st.running,
      pairs => map_size(St#st.totals),
      events => St#st.events,
      dead_letters => St#st.dead_letters,
      overflow => St#st.overflow,
      allocator => maps:get(allocator, Alloc),
      jemalloc_error => maps:get(jemalloc_error, Alloc),
      memory => maps:get(memory, Tables, 0),
      table_entries => maps:get(entries, Tables, 0),
      shards => maps:get(shards, Tables, 0),
      windows => queue:len(St#st.windows),
      sample => maps:get(sample, Opts),
      started_at => St#st.started_at,
      stopped_at => St#st.stopped_at,
      opts => Opts}.
