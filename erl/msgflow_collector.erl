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
%% send: what is counted; procs: spawn and register events (births), so a
%% process keeps its name and initial call after it exits.
-define(FLAGS, [send, procs]).
%% Receivers with at least this many senders in a window get their
%% message queue length sampled when the window closes (for hotspots).
-define(QLEN_MIN_SENDERS, 2).
-define(QLEN_MAX_SAMPLED, 50).
%% group leaders whose application is kept (see application_of/3)
-define(MAX_GROUP_LEADERS, 1000).

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
    dead = #{} :: #{pair() => pos_integer()},          %% dead letters by pair
    overflow = 0 :: non_neg_integer(),
    labels = #{} :: #{msgflow_tracer:endpoint() => binary()},
    %% spawn/register events: name and initial call, with the tick they
    %% came in; kept while the process lives, and one tick after
    births = #{} :: #{pid() | port() => {atom() | undefined, mfa() | undefined, integer()}},
    tick = 0 :: non_neg_integer(),
    births_dropped = 0 :: non_neg_integer(),
    excluded = [] :: [pid() | port()],       %% untrace/1 while procs is a spec
    %% module and application of local processes, read while alive
    meta = #{} :: #{pid() => {module() | undefined, atom() | undefined}},
    names = #{} :: #{atom() => pid()},      %% registered names seen
    apps = #{} :: #{pid() => atom() | undefined}, %% application by group leader
    last_info = #{} :: map(),               %% session_info at stop
    waiters = [] :: [gen_server:from()],
    closed = 0 :: non_neg_integer(),        %% windows closed since start
    window_waiters = [] :: [{non_neg_integer(), gen_server:from()}]
}).

%% {EndMonotonicMs, DurationMs, Counts, QueueLens}: QueueLens holds the
%% message_queue_len, read as the window closed, of receivers with several
%% senders in it.
-type window() :: {integer(), non_neg_integer(), #{pair() => pos_integer()},
                   #{pid() => non_neg_integer()}}.

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
%% session (it keeps the session in the application environment while a
%% run lasts).  Asking the VM for their tracer makes it ask the session's
%% trace_status, which answers `remove' once the session is no longer
%% active: that clears them.  The session's monitor on the dead collector
%% marks it too, but a dying process leaves the process table before its
%% monitors fire, and the supervisor may restart us in between: so stop the
%% session here first.
clear_orphaned_flags() ->
    case application:get_env(msgflow, running) of
        {ok, Session} ->
            _ = (catch msgflow_tracer:session_stop(Session)),
            _ = [erlang:trace_info(P, tracer) || P <- [new | processes() ++ erlang:ports()]],
            application:unset_env(msgflow, running);
        undefined ->
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
    {reply, ok, St1#st{totals = #{}, cur = #{}, windows = queue:new(), dead = #{},
                       events = 0, dead_letters = 0, overflow = 0,
                       win_start = now_ms()}};
handle_call(pairs, _From, St) ->
    St1 = refresh(St),
    {reply, sort_desc(maps:to_list(St1#st.totals)), St1};
handle_call({top, N}, _From, St) ->
    St1 = refresh(St),
    {reply, top_rows(N, St1), St1};
handle_call({matrix, By}, _From, St) ->
    St1 = refresh(St),
    {reply, msgflow_report:matrix(view(St1), By), St1};
handle_call({trace, Who}, _From, St) ->
    {Reply, St1} = trace_more(Who, St),
    {reply, Reply, St1};
handle_call({untrace, Who}, _From, St) ->
    {Reply, St1} = trace_less(Who, St),
    {reply, Reply, St1};
handle_call({history, S, R}, _From, St) ->
    St1 = refresh(St),
    {reply, history(S, R, St1), St1};
handle_call({hotspots, Opts}, _From, St) ->
    St1 = refresh(St),
    {reply, msgflow_hotspots:find(view(St1), Opts), St1};
handle_call(view, _From, St) ->
    St1 = refresh(St),
    {reply, view(St1), St1};
handle_call(info, _From, St) ->
    St1 = refresh(St),
    {reply, info(St1), St1};
%% Replies once N more windows have closed (tests and tools use it as a
%% barrier instead of sleeping); `not_running' when that cannot happen.
handle_call({await_windows, _}, _From, St = #st{running = false}) ->
    {reply, not_running, St};
handle_call({await_windows, N}, From, St = #st{closed = C, window_waiters = W}) ->
    {noreply, St#st{window_waiters = [{C + N, From} | W]}};
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
        Spec when is_atom(Spec) ->
            catch flags_on(Spec, Session),
            clear_flags(St#st.excluded);
        Pids ->
            [catch flags_on([P], Session) || P <- Pids]   %% some may have died
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
            application:set_env(msgflow, running, Session),
            Run = make_ref(),
            St1 = St#st{running = true, session = Session, opts = Opts,
                        traced = case Targets of L when is_list(L) -> L; _ -> [] end,
                        run = Run, started_at = erlang:system_time(millisecond),
                        stopped_at = undefined, win_start = now_ms(),
                        totals = #{}, cur = #{}, windows = queue:new(), dead = #{},
                        events = 0, dead_letters = 0, overflow = 0, last_info = #{},
                        births = #{}, tick = 0, births_dropped = 0, excluded = []},
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
    _ = erlang:trace(Spec, true, [{tracer, msgflow_tracer, Session} | ?FLAGS]),
    _ = [catch erlang:trace(P, false, ?FLAGS) || Spec =/= new, P <- own_pids()],
    ok;
flags_on(Pids, Session) ->
    _ = [erlang:trace(P, true, [{tracer, msgflow_tracer, Session} | ?FLAGS]) || P <- Pids],
    ok.

%% What the flags were set on: a spec (all, new, existing) or the pids.
targets(#st{opts = #{procs := P}}) when is_atom(P) -> P;
targets(#st{traced = Pids}) -> Pids.

%% Processes msgflow never traces: this collector, its supervisor, the
%% application master pair when msgflow runs as an application, and the
%% VM's dirty signal handlers.
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
    %% They are among the first processes the VM starts.
    Handlers = [P || P <- lists:sublist(processes(), 16),
                     process_info(P, initial_call) =:=
                         {initial_call, {erts_dirty_process_signal_handler, start, 0}}],
    [P || P <- [self(), whereis(msgflow_sup) | Masters ++ Handlers], is_pid(P)].

clear_flags(Spec) when is_atom(Spec) ->
    catch erlang:trace(all, false, ?FLAGS);
clear_flags(Pids) ->
    [catch erlang:trace(P, false, ?FLAGS) || P <- Pids].

%% msgflow:trace/1 while running: flags on one more process or port.
trace_more(_Who, St = #st{running = false}) ->
    {{error, not_started}, St};
trace_more(Who, St = #st{session = Session, traced = Traced, excluded = Ex}) ->
    case resolve_one(Who) of
        {ok, P} ->
            case lists:member(P, own_pids()) of
                true ->
                    {{error, {msgflow_process, Who}}, St};
                false ->
                    _ = erlang:trace(P, true, [{tracer, msgflow_tracer, Session} | ?FLAGS]),
                    St1 = case St#st.opts of
                              #{procs := L} when is_list(L) ->
                                  St#st{traced = lists:usort([P | Traced])};
                              _ -> St
                          end,
                    {ok, St1#st{excluded = lists:delete(P, Ex)}}
            end;
        {error, _} = E ->
            {E, St}
    end.

%% msgflow:untrace/1: flags off one process; what it sent so far stays.
trace_less(_Who, St = #st{running = false}) ->
    {{error, not_started}, St};
trace_less(Who, St = #st{traced = Traced, excluded = Ex}) ->
    case resolve_one(Who) of
        {ok, P} ->
            _ = clear_flags([P]),
            St1 = case St#st.opts of
                      #{procs := L} when is_list(L) -> St#st{traced = lists:delete(P, Traced)};
                      _ -> St#st{excluded = lists:usort([P | Ex])}
                  end,
            {ok, St1};
        {error, _} = E ->
            {E, St}
    end.

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
    [gen_server:reply(W, not_running) || {_, W} <- St1#st.window_waiters],
    St1#st{running = false, session = undefined, run = undefined, waiters = [],
           window_waiters = [],
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
        Snap -> merge(Snap, take_births(St))
    catch
        error:undef -> St;
        error:{not_loaded, _} -> St;
        error:badarg -> St
    end.

%% Births are taken after the snapshot: a process's spawn was recorded
%% before it could send, so every sender in the snapshot that was spawned
%% while tracing has its birth here.
take_births(St = #st{session = Session, births = B, tick = Tick}) ->
    try all_births(Session, [], 0) of
        {List, Dropped} ->
            %% a register and a spawn of one process may come in any order
            B1 = lists:foldl(fun({P, Name}, Acc) when is_atom(Name), Name =/= undefined ->
                                     {_, Call, _} = maps:get(P, Acc, {undefined, undefined, 0}),
                                     Acc#{P => {Name, Call, Tick}};
                                ({P, What}, Acc) ->
                                     {Name, _, _} = maps:get(P, Acc, {undefined, undefined, 0}),
                                     Acc#{P => {Name, msgflow_fmt:birth_call(What), Tick}}
                             end, B, List),
            St#st{births = B1, births_dropped = St#st.births_dropped + Dropped}
    catch
        error:_ -> St
    end.

all_births(Session, Acc, Dropped) ->
    {Chunk, D} = msgflow_tracer:births_take(Session),
    case length(Chunk) < 4096 of
        true -> {lists:append([Chunk | Acc]), Dropped + D};
        false -> all_births(Session, [Chunk | Acc], Dropped + D)
    end.

%% After a window closed: forget the births of processes that are gone and
%% whose last pairs have had a whole tick to arrive.
prune_births(St = #st{births = B, tick = Tick}) ->
    St#st{births = maps:filter(fun(P, {_, _, T}) ->
                                       T >= Tick - 1 orelse alive(P)
                               end, B),
          tick = Tick + 1}.

alive(P) when is_pid(P) -> is_process_alive(P);
alive(P) when is_port(P) -> erlang:port_info(P, id) =/= undefined.

merge({Pairs, Dead, Overflow, OverflowDead}, St) ->
    St1 = lists:foldl(fun add_pair/2, St, Pairs),
    {DeadN, DeadMap} = lists:foldl(fun({S, R, N}, {A, M}) -> {A + N, bump({S, R}, N, M)} end,
                                   {OverflowDead, St1#st.dead}, Dead),
    St1#st{overflow = St1#st.overflow + Overflow,
           events = St1#st.events + Overflow,
           dead_letters = St1#st.dead_letters + DeadN, dead = DeadMap}.

add_pair({S, R, N}, St = #st{totals = T, cur = C, events = E}) ->
    K = {S, R},
    learn(R, learn(S, St#st{totals = bump(K, N, T), cur = bump(K, N, C), events = E + N})).

bump(K, N, M) ->
    case M of
        #{K := V} -> M#{K := V + N};
        _ -> M#{K => N}
    end.

%% The first time an endpoint shows up, read its label while it may still
%% be alive; remember which pid a registered name stood for.  A local
%% process is read with one describe/1; what its spawn or register event
%% said stands in for what can no longer be read once it exited.
learn(E, St = #st{labels = L}) when is_map_key(E, L) ->
    St;
learn(E, St = #st{births = B}) when is_pid(E), node(E) =:= node() ->
    {BName, BCall} = case maps:get(E, B, undefined) of
                         {N0, C0, _} -> {N0, C0};
                         undefined -> {undefined, undefined}
                     end,
    BMod = case BCall of {M0, _, _} -> M0; _ -> undefined end,
    {Label, Name, Mod, App, St1} =
        case msgflow_fmt:describe(E) of
            undefined ->
                Dead = case {BName, BCall} of
                           {undefined, {M, F, A}} -> msgflow_fmt:mfa(M, F, A);
                           {undefined, undefined} -> msgflow_fmt:endpoint(E);
                           _ -> atom_to_binary(BName)
                       end,
                {Dead, BName, BMod, undefined, St};
            #{label := Live, name := LiveName, module := LiveMod, group_leader := GL} ->
                {A, StA} = application_of(E, GL, St),
                {Live, first_defined(LiveName, BName), first_defined(LiveMod, BMod), A, StA}
        end,
    Names = case Name of
                undefined -> St1#st.names;
                _ -> (St1#st.names)#{Name => E}
            end,
    St1#st{labels = (St1#st.labels)#{E => Label}, names = Names,
           meta = (St1#st.meta)#{E => {Mod, App}}};
learn(E, St = #st{labels = L, names = Names}) ->
    Names1 = case name_of(E) of
                 {ok, Name} ->
                     case whereis(Name) of
                         Pid when is_pid(Pid) -> Names#{Name => Pid};
                         undefined -> Names
                     end;
                 false ->
                     Names
             end,
    St1 = St#st{labels = L#{E => msgflow_fmt:label(E)}, names = Names1},
    %% the pid a name stood for gets its label now too: reports show the
    %% name's sends under that pid
    case name_of(E) of
        {ok, N} when is_map_key(N, Names1) -> learn(maps:get(N, Names1), St1);
        _ -> St1
    end.

first_defined(undefined, B) -> B;
first_defined(A, _) -> A.

%% application:get_application/1 of a live process, which depends only on
%% its group leader: asked once per group leader (a few in most systems;
%% the cache is dropped past ?MAX_GROUP_LEADERS).
application_of(E, GL, St = #st{apps = Apps}) ->
    case Apps of
        #{GL := A} ->
            {A, St};
        _ ->
            A = case application:get_application(E) of
                    {ok, A1} -> A1;
                    undefined -> undefined
                end,
            Apps1 = case map_size(Apps) >= ?MAX_GROUP_LEADERS of
                        true -> #{};
                        false -> Apps
                    end,
            {A, St#st{apps = Apps1#{GL => A}}}
    end.

name_of(A) when is_atom(A) -> {ok, A};
name_of({A, Node}) when is_atom(A), Node =:= node() -> {ok, A};
name_of(_) -> false.

close_window(St = #st{cur = Cur, win_start = Start, windows = Q,
                      opts = #{windows := Keep}}) ->
    Now = now_ms(),
    Q1 = queue:in({Now, Now - Start, Cur, queue_lens(Cur, St)}, Q),
    Q2 = case queue:len(Q1) > Keep of
             true -> queue:drop(Q1);
             false -> Q1
         end,
    Closed = St#st.closed + 1,
    {Due, Later} = lists:partition(fun({At, _}) -> At =< Closed end, St#st.window_waiters),
    [gen_server:reply(From, ok) || {_, From} <- Due],
    prune_births(St#st{cur = #{}, win_start = Now, windows = Q2, closed = Closed,
                       window_waiters = Later}).

%% message_queue_len of the local receivers that had the most senders in
%% the window (fan-in candidates), read now.
queue_lens(Cur, #st{names = Names}) ->
    Senders = maps:fold(fun({S, R}, _, Acc) ->
                                case canon(R, Names) of
                                    P when is_pid(P), node(P) =:= node() ->
                                        Acc#{P => [S | maps:get(P, Acc, [])]};
                                    _ -> Acc
                                end
                        end, #{}, Cur),
    Cands = [{length(lists:usort(Ss)), P} || {P, Ss} <- maps:to_list(Senders),
                                            length(Ss) >= ?QLEN_MIN_SENDERS],
    Top = lists:sublist(lists:reverse(lists:sort(Cands)), ?QLEN_MAX_SAMPLED),
    maps:from_list([{P, L} || {_, P} <- Top,
                              {message_queue_len, L} <- [process_info(P, message_queue_len)]]).

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

top_rows(N, St) ->
    V = #{totals := Totals, recent := Recent, window_ms := WinMs, scale := Scale,
          windows := Ws, endpoints := Ends} = view(St),
    {Prev, PrevMs} = case {queue:is_empty(St#st.windows), lists:reverse(Ws)} of
                         {false, [_, {_, D, W, _} | _]} -> {W, D};
                         _ -> {#{}, 0}
                     end,
    Top = lists:sublist(sort_desc(maps:to_list(Totals)), N),
    Label = fun(E) -> maps:get(label, maps:get(E, Ends)) end,
    Rows = [#{sender => S, receiver => R,
              sender_label => Label(S), receiver_label => Label(R),
              count => C, rate => msgflow_report:rate(maps:get({S, R}, Recent, 0), WinMs, Scale),
              prev_rate => case PrevMs of
                               0 -> undefined;
                               _ -> msgflow_report:rate(maps:get({S, R}, Prev, 0), PrevMs, Scale)
                           end}
            || {S, R, C} <- Top],
    #{rows => Rows, window_ms => WinMs, events => maps:get(events, V),
      pairs => map_size(Totals), running => St#st.running,
      sample => maps:get(sample, St#st.opts)}.

%% Everything the reports and hotspot rules read, in one map (see
%% msgflow:export/3 for the dump built from it).  Pairs are merged by
%% canon/2; windows are oldest first, their end in system time (ms).
view(St = #st{names = Names}) ->
    Group = fun(M) -> maps:fold(fun({S, R}, C, Acc) ->
                                        bump({canon(S, Names), canon(R, Names)}, C, Acc)
                                end, #{}, M) end,
    Totals = Group(St#st.totals),
    Offset = erlang:time_offset(millisecond),
    Windows = [{End + Offset, Dur, Group(W), Q} || {End, Dur, W, Q} <- queue:to_list(St#st.windows)],
    Ends = lists:usort(lists:append([[S, R] || {S, R} <- maps:keys(Totals)])),
    Endpoints = maps:from_list([{E, endpoint_meta(E, St)} || E <- Ends]),
    {WinMs, Recent} = last_window(St),
    Scale = scale(St),
    #{node => node(), recent => Group(Recent), taken_at => erlang:system_time(millisecond),
      started_at => St#st.started_at, stopped_at => St#st.stopped_at,
      running => St#st.running, window_ms => WinMs, scale => Scale,
      estimated => Scale =/= 1, sample => maps:get(sample, St#st.opts),
      events => St#st.events, dead_letters => St#st.dead_letters,
      overflow => St#st.overflow, totals => Totals, dead => Group(St#st.dead),
      windows => Windows, endpoints => Endpoints}.

endpoint_meta(E, St = #st{meta = M}) ->
    {Mod, App} = maps:get(E, M, {undefined, undefined}),
    #{label => label(E, St), module => Mod, application => App,
      node => node_of(E)}.

scale(#st{opts = #{sample := {Traced, Period}}}) -> Period / Traced;
scale(_) -> 1.

%% Per-window counts of one pair (names resolved as in top/1), oldest
%% first, then the open window.
history(S0, R0, St = #st{names = Names}) ->
    S = canon(S0, Names),
    R = canon(R0, Names),
    Offset = erlang:time_offset(millisecond),
    Count = fun(W) -> maps:fold(fun({S1, R1}, C, A) ->
                                        case {canon(S1, Names), canon(R1, Names)} of
                                            {S, R} -> A + C;
                                            _ -> A
                                        end
                                end, 0, W) end,
    Closed = [#{at => End + Offset, window_ms => Dur, count => Count(W)}
              || {End, Dur, W, _} <- queue:to_list(St#st.windows)],
    Now = now_ms(),
    Open = [#{at => Now + Offset, window_ms => Now - St#st.win_start, count => Count(St#st.cur),
              open => true} || St#st.running],
    Closed ++ Open.

node_of({_, Node}) when is_atom(Node) -> Node;
node_of(A) when is_atom(A) -> node();
node_of(E) -> node(E).

last_window(St) ->
    case queue:peek_r(St#st.windows) of
        {value, {_, Dur, W, _}} -> {Dur, W};
        empty -> {now_ms() - St#st.win_start, St#st.cur}
    end.


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
