%%% @doc The collector, which is msgflow's store: it owns the tracing
%%% session, pulls a snapshot from the NIF every `interval' ms, and keeps
%%% what the views read, in ETS tables it owns (protected: any process may
%%% read them, only the collector writes):
%%% <ul>
%%% <li>pairs: `{{Sender, Receiver}, Total, LastWindow, LastCount, History,
%%%     PeakMilli}', one per distinct pair as the VM reported it.  Total is
%%%     messages since start; LastCount the messages in window LastWindow,
%%%     the latest window the pair had traffic in; History the pair's
%%%     earlier windows with traffic, `<<Window:32, Count:32>>' each, oldest
%%%     first, no older than the kept windows (`[]' when none); PeakMilli
%%%     the highest rate of a closed window, in messages per 1000 s;</li>
%%% <li>folded: rows of the same shape for the pairs that left `pairs':
%%%     a pair is folded once it had no messages for two windows and one of
%%%     its endpoints has exited (it goes to its group, `{exited, Kind,
%%%     Node}', see msgflow_labels:fold_key/2) or is an alias.  The NIF
%%%     counts the replies to the aliases of a process (a gen:call's, one
%%%     per call) for the process: they are added here at once, to the row
%%%     (sender, owner).  Rows that fold to one key are summed.  So `pairs' holds the pairs of live endpoints as the VM
%%%     reported them, and memory grows with live processes and kinds, not
%%%     with the run's length; `events = sum of pairs + folded + overflow'
%%%     at all times;</li>
%%% <li>dead: `{{Sender, Receiver}, Messages}', sends to processes that did
%%%     not exist (folded the same way);</li>
%%% <li>the labels (msgflow_labels).</li>
%%% </ul>
%%% Windows are numbered from 1; the open one is `closed + 1'.  The
%%% collector's one product is a store handle (store/0), from which
%%% msgflow_view builds every view in the caller's process, so a view of a
%%% million pairs never holds up the snapshots.
%%%
%%% The counting itself happens in the NIF, in the tracees' own scheduler
%%% threads; this process only merges deltas, so its load grows with the
%%% number of distinct pairs per window, never with the number of messages.
%%% Use the API in module msgflow; the calls here are its back end.
-module(msgflow_collector).
-behaviour(gen_server).

-export([start_link/0, store/1, balance/0, counts_in/3, last_two/2, peak_rate/4,
         reset_for/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
-export_type([store/0, window/0, row/0]).

%% A row of the pairs table (see above).
-type row() :: {{msgflow_tracer:endpoint(), msgflow_tracer:endpoint()}, pos_integer(),
                pos_integer(), non_neg_integer(), binary() | [], non_neg_integer()}.

-define(SERVER, ?MODULE).
%% the NIF session of a legacy run while it lasts (see init/1)
-define(RUNNING, {?MODULE, running}).
%% Receivers with at least this many senders in a window get their
%% message queue length read when the window closes (for hotspots).
-define(QLEN_MIN_SENDERS, 2).
-define(QLEN_MAX_SAMPLED, 50).
%% the NIF's table entries allowed per distinct pair (a pair counted on k
%% scheduler threads holds k entries; see max_pairs in the README)
-define(ENTRIES_PER_PAIR, 2).
%% reductions one merged delta is worth (see add_pair/2)
-define(MERGE_REDUCTIONS, 50).
%% Folding (see sweep/1): keys read per select; rows the slow pass reads a
%% window at least; windows between rotations of the NIF's tables (sooner
%% when they are half full); windows an alias waits for its reply.
-define(SWEEP_CHUNK, 1000).
-define(SWEEP_MIN, 20000).
-define(ROTATE_EVERY, 30).
-define(ALIAS_WINDOWS, 60).
%% how long the tables a reset or a new run replaced are kept for the
%% views still reading them, in ms
-define(RETIRE_MS, 60000).

%% A closed window: its number, end (system time, ms), length (ms) and the
%% message_queue_len, read as it closed, of the local receivers with the
%% most senders in it.
-type window() :: #{n := pos_integer(), at := integer(), window_ms := non_neg_integer(),
                    queue_lens := #{pid() => non_neg_integer()}}.

%% What views read (msgflow_view:build/2): the tables and the figures of
%% the run, as of the call that returned it.
-type store() :: #{pairs := ets:tid(), folded := ets:tid(), dead := ets:tid(),
                   labels := msgflow_labels:tables(),
                   node := node(), running := boolean(),
                   started_at := integer() | undefined, stopped_at := integer() | undefined,
                   taken_at := integer(), snapshot_at := integer() | undefined,
                   closed := non_neg_integer(), open_ms := non_neg_integer(),
                   windows := [window()],
                   interval := pos_integer(), sample := off | {pos_integer(), pos_integer()},
                   events := non_neg_integer(), dead_letters := non_neg_integer(),
                   overflow := non_neg_integer(), folded_messages := non_neg_integer(),
                   skipped := non_neg_integer(), births_dropped := non_neg_integer(),
                   new_tracer := msgflow | term()}.

-record(st, {
    running = false :: boolean(),
    session :: msgflow_tracer:session() | undefined,
    %% how the flags are set (msgflow_flags); the trace session's handle is
    %% in it, and only here, so that the session dies with this process
    tracing :: msgflow_flags:tracing() | undefined,
    mode :: msgflow_flags:mode() | undefined,
    skipped = {0, []} :: msgflow_flags:skipped(),
    opts = msgflow_opts:defaults() :: msgflow_opts:opts(),
    traced = [] :: [pid()],                 %% procs given as a list
    excluded = [] :: [pid() | port()],      %% untrace/1 while procs is a spec
    run :: reference() | undefined,         %% tags this run's timers
    started_at :: integer() | undefined,    %% erlang:system_time(millisecond)
    stopped_at :: integer() | undefined,
    win_start = 0 :: integer(),             %% monotonic ms of the open window
    closed = 0 :: non_neg_integer(),        %% windows closed since start
    windows = [] :: [window()],             %% kept closed windows, newest first
    %% the kept windows' lengths by number (as in `windows'), for the
    %% lookup each merged delta makes
    durations = #{} :: #{pos_integer() => non_neg_integer()},
    pairs :: ets:tid(),
    folded_t :: ets:tid(),                  %% the folded rows
    dead :: ets:tid(),
    folded = 0 :: non_neg_integer(),        %% messages of pairs folded
    %% where the slow pass of the sweep is, per table
    sweeps = #{} :: #{atom() => term()},
    labels :: msgflow_labels:labels(),
    %% receivers of the open window and how many pairs into each had their
    %% first messages of the window (distinct senders, for fan-in): ETS,
    %% {Receiver, Senders}, so that this heap stays small
    wsenders :: ets:tid(),
    events = 0 :: non_neg_integer(),
    dead_letters = 0 :: non_neg_integer(),
    overflow = 0 :: non_neg_integer(),
    births_dropped = 0 :: non_neg_integer(),
    last_info = #{} :: map(),               %% session_info at stop
    waiters = [] :: [gen_server:from()],
    %% monitors of the run's coordinator (on a node a cluster's
    %% coordinator started) and its owner (`owner', as msgflow-top sets):
    %% counting stops `grace' ms after either goes, so a partition or a
    %% killed tool cannot leave it on
    watched = [] :: [{reference(), pid()}],
    snapshot_at :: integer() | undefined,   %% system time of the last snapshot
    window_waiters = [] :: [{non_neg_integer(), gen_server:from()}],
    %% in legacy mode with procs all or new: who traces new processes, as
    %% of the last window (msgflow_flags:new_tracer/1)
    new_tracer = msgflow :: msgflow | term()
}).

%% @private
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, [], []).

%% @doc The store handle, taken after a snapshot when Refresh is true and
%% counting is on: every send traced before the call is in its tables.
%% `undefined' when the collector is not running (msgflow never started).
-spec store(boolean()) -> store() | undefined.
store(Refresh) ->
    case whereis(?SERVER) of
        undefined -> undefined;
        _ -> gen_server:call(?SERVER, {store, Refresh}, infinity)
    end.

%% @doc Where every message counted is, read in one call after a snapshot
%% (so the figures agree with each other): `events' (messages counted),
%% `held' (the sum of the pairs' totals), `folded' (messages in folded
%% rows), `overflow'; `events = held + folded + overflow' always.  Reads
%% every pair in the collector (about 10 ms for 100,000): for tests and
%% benchmarks.  `undefined' when the collector is not running.
-spec balance() -> #{events := non_neg_integer(), held := non_neg_integer(),
                     folded := non_neg_integer(), overflow := non_neg_integer()} | undefined.
balance() ->
    case whereis(?SERVER) of
        undefined -> undefined;
        _ -> gen_server:call(?SERVER, balance, infinity)
    end.

%% @doc Forgets the counts as reset does, only when this node's run was
%% started by the cluster coordinator Coordinator (what a coordinator's
%% reset/0 asks of its members); `{error, {not_coordinator, Coordinator}}'
%% for any other run, so that one coordinator never erases the counts of
%% a run another started.  `ok' when the collector is not running.
-spec reset_for(pid() | undefined) -> ok | {error, {not_coordinator, term()}}.
reset_for(Coordinator) ->
    case whereis(?SERVER) of
        undefined -> ok;
        _ -> gen_server:call(?SERVER, {reset_for, Coordinator}, infinity)
    end.

%% @private
-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    %% loaded now rather than by the first snapshot, which would wait on
    %% the code server in the middle of its work
    _ = [code:ensure_loaded(M) || M <- [msgflow_labels, msgflow_flags, msgflow_fmt,
                                        msgflow_tracer]],
    clear_orphaned_flags(),
    {ok, #st{pairs = new_pairs(), folded_t = new_pairs(), dead = new_dead(),
             wsenders = new_wsenders(undefined),
             labels = msgflow_labels:new()}}.

%% A collector that died while running in legacy mode left processes
%% flagged for its session (it keeps the session in a persistent term,
%% ?RUNNING, while such a run lasts: not in the application environment,
%% whose controller a collector stopping with the application would wait
%% on; a trace session dies with the
%% collector that held it).  Asking the VM for their tracer makes it ask the session's
%% trace_status, which answers `remove' once the session is no longer
%% active: that clears them.  The session's monitor on the dead collector
%% marks it too, but a dying process leaves the process table before its
%% monitors fire, and the supervisor may restart us in between: so stop the
%% session here first.
clear_orphaned_flags() ->
    case persistent_term:get(?RUNNING, undefined) of
        undefined ->
            ok;
        Session ->
            _ = (catch msgflow_tracer:session_stop(Session)),
            _ = [erlang:trace_info(P, tracer) || P <- [new | processes() ++ erlang:ports()]],
            _ = persistent_term:erase(?RUNNING),
            ok
    end.

%% @private
-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}} | {noreply, #st{}}.
%% The coordinator that started this run is back (its node reconnected
%% before the grace ended): the run goes on for it.
handle_call({start, #{coordinator := C, resume := true}}, _From,
            St = #st{running = true, opts = #{coordinator := C}, watched = W}) ->
    {reply, ok, St#st{watched = [{erlang:monitor(process, C), C} | W]}};
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
    {reply, ok, clear(St1#st{win_start = now_ms()}, keep_labels)};
handle_call({reset_for, Coord}, From, St = #st{opts = #{coordinator := Coord}})
  when is_pid(Coord) ->
    handle_call(reset, From, St);
handle_call({reset_for, Coord}, _From, St) ->
    {reply, {error, {not_coordinator, Coord}}, St};
handle_call({store, Refresh}, _From, St) ->
    St1 = case Refresh of
              true -> refresh(St);
              false -> St
          end,
    {reply, handle(St1), St1};
handle_call({trace, Who}, _From, St) ->
    {Reply, St1} = trace_more(Who, St),
    {reply, Reply, St1};
handle_call({untrace, Who}, _From, St) ->
    {Reply, St1} = trace_less(Who, St),
    {reply, Reply, St1};
handle_call(balance, _From, St) ->
    St1 = refresh(St),
    Held = ets:foldl(fun(Row, A) -> A + element(2, Row) end, 0, St1#st.pairs),
    {reply, #{events => St1#st.events, held => Held, folded => St1#st.folded,
              overflow => St1#st.overflow}, St1};
%% A cluster's coordinator pulls this node's figures (and busiest pairs)
%% from here: this process is never traced, so a pull adds no edge.
handle_call({cluster_report, Top}, _From, St) ->
    %% the busiest pairs as of now: what the coordinator keeps if this
    %% node goes
    St1 = case Top of
              true -> refresh(St);
              false -> St
          end,
    {reply, msgflow_cluster:report(handle(St1), Top), St1};
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
    St1 = maybe_rotate(close_window(take(St))),
    {noreply, schedule_tick(check_new(St1))};
handle_info({duration_over, Run}, St = #st{run = Run, running = true}) ->
    {noreply, stop_tracing(St)};
%% The coordinator of the cluster this node counts for, or the run's
%% owner, went away (it stopped, its node went down, or the link to it
%% broke): counting stops after the grace period unless a new run started
%% meanwhile.
handle_info({'DOWN', Ref, process, Pid, _}, St = #st{watched = W, run = Run,
                                                      opts = #{grace := Grace}}) ->
    case lists:keymember(Ref, 1, W) of
        true ->
            erlang:send_after(Grace, self(), {watched_gone, Run, Pid}),
            {noreply, St#st{watched = lists:keydelete(Ref, 1, W)}};
        false ->
            {noreply, St}
    end;
%% ... unless it came back meanwhile (a coordinator whose node reconnected
%% within the grace: see the resuming start)
handle_info({watched_gone, Run, Pid}, St = #st{run = Run, running = true, watched = W}) ->
    case lists:keymember(Pid, 2, W) of
        true -> {noreply, St};
        false -> {noreply, stop_tracing(St)}
    end;
%% Sampling: outside a traced slice the flags are really off (not discarded
%% by the tracer), so the traced processes pay nothing there.
handle_info({slice_off, Run}, St = #st{run = Run, running = true,
                                       opts = #{sample := {Traced, Period}}}) ->
    msgflow_flags:off(St#st.tracing, targets(St)),
    erlang:send_after(Period - Traced, self(), {slice_on, Run}),
    {noreply, St};
handle_info({slice_on, Run}, St = #st{run = Run, running = true, tracing = T,
                                      opts = #{sample := {Traced, _}}}) ->
    msgflow_flags:slice_on(T, targets(St), St#st.excluded),
    erlang:send_after(Traced, self(), {slice_off, Run}),
    {noreply, St};
handle_info({retire, Tables}, St) ->
    _ = [ets:delete(T) || T <- Tables],
    {noreply, St};
handle_info(_Msg, St) ->
    {noreply, St}.

%% @private
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, St) ->
    _ = stop_tracing(St),
    ok.

%%% Starting and stopping

start_tracing(Opts = #{procs := Procs, max_pairs := Max, trace_mode := Want}, St) ->
    case {msgflow_flags:mode(Want), msgflow_flags:resolve(Procs)} of
        {{ok, Mode}, {ok, Targets}} ->
            try msgflow_tracer:session_new(self(), Max * ?ENTRIES_PER_PAIR) of
                Session -> set_flags(Targets, Mode, Session, Opts, St)
            catch
                error:undef -> {error, {nif_not_loaded, code:which(msgflow_tracer)}};
                error:{not_loaded, _} = E -> {error, E}
            end;
        {{error, _} = E, _} ->
            E;
        {_, {error, _} = E} ->
            E
    end.

%% A trace session that cannot be made (say, the VM's limit on sessions)
%% is an error for the caller, not a crash of the collector.
set_flags(Targets, Mode, Session, Opts, St) ->
    try msgflow_flags:begin_tracing(Mode, Session) of
        T -> set_flags(T, Targets, Mode, Session, Opts, St)
    catch
        error:Reason ->
            msgflow_tracer:session_stop(Session),
            {error, {trace_failed, Reason}}
    end.

set_flags(T, Targets, Mode, Session, Opts, St) ->
    try msgflow_flags:on(T, Targets) of
        {ok, Skipped} ->
            %% legacy flags outlive a crash of this process: say where they
            %% are for the collector that is started next
            _ = Mode =:= legacy andalso persistent_term:put(?RUNNING, Session),
            Run = make_ref(),
            St0 = St#st{running = true, session = Session, tracing = T, mode = Mode,
                        skipped = Skipped, opts = Opts,
                        traced = case Targets of L when is_list(L) -> L; _ -> [] end,
                        run = Run, started_at = erlang:system_time(millisecond),
                        stopped_at = undefined, win_start = now_ms(),
                        new_tracer = msgflow,
                        last_info = #{}, births_dropped = 0, excluded = []},
            %% a coordinator restarting the node it had started (it
            %% reconnected after the grace) keeps what was counted
            St1 = case resumes(Opts, St) of
                      true -> St0;
                      false -> clear(St0, new_run)
                  end,
            case Opts of
                #{duration := infinity} -> ok;
                #{duration := D} -> erlang:send_after(D, self(), {duration_over, Run})
            end,
            case Opts of
                #{sample := {Traced, _}} -> erlang:send_after(Traced, self(), {slice_off, Run});
                #{sample := off} -> ok
            end,
            Watched = [{erlang:monitor(process, P), P} || K <- [coordinator, owner],
                                                           P <- [maps:get(K, Opts, none)],
                                                           is_pid(P)],
            {ok, schedule_tick(St1#st{watched = Watched})}
    catch
        error:Reason ->
            msgflow_tracer:session_stop(Session),
            msgflow_flags:off(T, Targets),
            msgflow_flags:end_tracing(T),
            {error, {trace_failed, Reason}}
    end.

resumes(#{resume := true, coordinator := C}, #st{opts = #{coordinator := C}}) -> true;
resumes(_, _) -> false.

%% Forgets the counts and windows: a new run forgets the labels too, a
%% reset keeps the kinds, names and births (the endpoints still are what
%% they were) and forgets which endpoint has which, since no row holds
%% them any more.
clear(St = #st{pairs = P, folded_t = F, dead = D}, What) ->
    %% made anew, not emptied object by object (which would hold this
    %% process for a million pairs); the old tables are deleted whole (in
    %% the background) ?RETIRE_MS later, so that a view that began before
    %% reads the store as it was
    {Labels, OldLabels} = case What of
                              keep_labels -> msgflow_labels:forget_endpoints(St#st.labels);
                              new_run -> msgflow_labels:clear(St#st.labels)
                          end,
    erlang:send_after(?RETIRE_MS, self(), {retire, [P, F, D | OldLabels]}),
    St#st{closed = 0, windows = [], durations = #{}, events = 0,
          pairs = new_pairs(), folded_t = new_pairs(), dead = new_dead(),
          wsenders = new_wsenders(St#st.wsenders),
          dead_letters = 0, overflow = 0, folded = 0, sweeps = #{}, labels = Labels}.

%% What the flags were set on: a spec (all, new, existing) or the pids.
targets(#st{opts = #{procs := P}}) when is_atom(P) -> P;
targets(#st{traced = Pids}) -> Pids.

%% msgflow:trace/1 while running: flags on one more process or port.
trace_more(_Who, St = #st{running = false}) ->
    {{error, not_started}, St};
trace_more(Who, St = #st{tracing = T, traced = Traced, excluded = Ex}) ->
    case msgflow_flags:resolve_one(Who) of
        {ok, P} ->
            case lists:member(P, msgflow_flags:own_pids()) of
                true ->
                    {{error, {msgflow_process, Who}}, St};
                false ->
                    {ok, {N, Ps}} = msgflow_flags:on(T, [P]),
                    {N0, Ps0} = St#st.skipped,
                    St1 = case St#st.opts of
                              #{procs := L} when is_list(L) ->
                                  St#st{traced = lists:usort([P | Traced])};
                              _ -> St
                          end,
                    Reply = case N of
                                0 -> ok;
                                _ -> {error, {traced_by_another_tool, P}}
                            end,
                    {Reply, St1#st{excluded = lists:delete(P, Ex),
                                   skipped = {N0 + N, lists:sublist(Ps ++ Ps0, 5)}}}
            end;
        {error, _} = E ->
            {E, St}
    end.

%% msgflow:untrace/1: flags off one process; what it sent so far stays.
trace_less(_Who, St = #st{running = false}) ->
    {{error, not_started}, St};
trace_less(Who, St = #st{traced = Traced, excluded = Ex}) ->
    case msgflow_flags:resolve_one(Who) of
        {ok, P} ->
            msgflow_flags:off(St#st.tracing, [P]),
            St1 = case St#st.opts of
                      #{procs := L} when is_list(L) -> St#st{traced = lists:delete(P, Traced)};
                      _ -> St#st{excluded = lists:usort([P | Ex])}
                  end,
            {ok, St1};
        {error, _} = E ->
            {E, St}
    end.

%% Flags off (a trace session destroyed), barrier, final snapshot: the
%% store then holds every send traced before stop was called.
stop_tracing(St = #st{running = false}) ->
    St;
stop_tracing(St = #st{session = Session, tracing = T}) ->
    case St#st.mode of
        legacy -> msgflow_flags:off(T, targets(St));
        session -> ok
    end,
    msgflow_flags:end_tracing(T),
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} -> ok end,
    St1 = close_window(take(St)),
    Info = try msgflow_tracer:session_info(Session) catch error:_ -> #{} end,
    catch msgflow_tracer:session_stop(Session),
    _ = persistent_term:erase(?RUNNING),
    [gen_server:reply(W, ok) || W <- St1#st.waiters],
    [gen_server:reply(W, not_running) || {_, W} <- St1#st.window_waiters],
    _ = [erlang:demonitor(R, [flush]) || {R, _} <- St1#st.watched],
    St1#st{running = false, session = undefined, tracing = undefined, run = undefined,
           waiters = [], watched = [],
           window_waiters = [],
           stopped_at = erlang:system_time(millisecond), last_info = Info}.

%%% Snapshots and windows

%% Whether new processes still come to msgflow (legacy mode, procs all or
%% new): another tool may have set its tracer on `new' since.
check_new(St = #st{opts = #{procs := P}, tracing = T}) when P =:= all; P =:= new ->
    St#st{new_tracer = msgflow_flags:new_tracer(T)};
check_new(St) ->
    St.

schedule_tick(St = #st{run = Run, opts = #{interval := I}}) ->
    erlang:send_after(I, self(), {tick, Run}),
    St.

refresh(St = #st{running = true}) -> take(St);
refresh(St) -> St.

%% The totals taken so far must survive whatever happens to the tracer
%% module: while it is being loaded its NIFs are missing (undef); after it
%% was deleted and purged, the code loaded next has a new session resource
%% type and cannot read this session (badarg; the VM has by then removed
%% the module's trace flags); another caller of snapshot/1 on this session
%% makes it raise `busy'.  Each way, skip the turn: nothing is lost, the
%% next snapshot takes it.
take(St = #st{session = Session}) ->
    try msgflow_tracer:snapshot_start(Session) of
        Take -> take_chunks(Take, St#st{snapshot_at = erlang:system_time(millisecond)})
    catch
        error:undef -> St;
        error:{not_loaded, _} -> St;
        error:badarg -> St;
        error:busy -> St
    end.

%% The snapshot in chunks of about 1,024 deltas, each merged before the
%% next is read, so this heap never holds a whole snapshot.
%% A chunk that cannot be read (the tracer module deleted or reloaded
%% between two chunks: see take/1) ends the turn with the chunks merged so
%% far; the rest stays in the NIF's tables or goes with the old module.
take_chunks(Take, St) ->
    case next_chunk(Take) of
        {more, Pairs, Dead, Replies} ->
            take_chunks(Take, merge({Pairs, Dead, Replies, 0, 0}, take_births(St)));
        {done, Pairs, Dead, Replies, Overflow, OverflowDead} ->
            merge({Pairs, Dead, Replies, Overflow, OverflowDead}, take_births(St));
        gone ->
            St
    end.

next_chunk(Take) ->
    try
        msgflow_tracer:snapshot_next(Take)
    catch
        error:undef -> gone;
        error:{not_loaded, _} -> gone;
        error:badarg -> gone
    end.

%% Births are taken after each chunk is read and before it is merged: a
%% process's spawn was recorded before it could send, so every sender in
%% the chunk that was spawned while tracing has its birth here.
take_births(St = #st{session = Session}) ->
    try msgflow_tracer:births_take(Session) of
        {Chunk, Dropped} ->
            St1 = St#st{labels = msgflow_labels:births(St#st.labels, Chunk, St#st.closed),
                        births_dropped = St#st.births_dropped + Dropped},
            %% until the NIF has none left
            case Chunk of
                [] -> St1;
                _ -> take_births(St1)
            end
    catch
        error:_ -> St
    end.

merge({Pairs, Dead, Replies, Overflow, OverflowDead}, St) ->
    St0 = lists:foldl(fun add_reply/2, St, Replies),
    St1 = lists:foldl(fun(D, Acc) -> add_row(pairs, D, Acc) end, St0, Pairs),
    {DeadN, L} = lists:foldl(fun({S, R, N}, {A, L0}) ->
                                     {A + N, add_dead({S, R}, N, St1#st.dead, L0)}
                             end, {OverflowDead, St1#st.labels}, Dead),
    St1#st{overflow = St1#st.overflow + Overflow,
           events = St1#st.events + Overflow, labels = L,
           dead_letters = St1#st.dead_letters + DeadN}.

%% N dead letters of a pair (a new row holds its endpoints' labels).
add_dead(K = {S, R}, N, D, L) ->
    case ets:insert_new(D, {K, N}) of
        true -> msgflow_labels:hold(msgflow_labels:hold(L, S), R);
        false -> _ = ets:update_counter(D, K, N), L
    end.

%% Replies to the aliases of a process, which the NIF counts for the
%% process: added at once to the folded row (sender, owner), since each
%% alias of a gen:call is used once.
add_reply(D, St) ->
    St1 = add_row(folded, D, St),
    St1#st{folded = St1#st.folded + element(3, D)}.

%% N messages of (S, R) in the open window, in the pairs or the folded
%% rows (a pair counted on several threads comes once per thread).  A
%% pair past max_pairs distinct pairs goes to overflow.
add_row(Which, {S, R, N}, St = #st{closed = C, events = E}) ->
    %% a few ETS calls (more for a new pair, below): count them as the
    %% work they are, so that a slice of merging stays well under 1 ms
    erlang:bump_reductions(?MERGE_REDUCTIONS),
    T = table(Which, St),
    K = {S, R},
    Open = C + 1,
    case ets:lookup(T, K) of
        [{_, _, Open, _, _, _}] ->
            _ = ets:update_counter(T, K, [{2, N}, {4, N}]),
            St#st{events = E + N};
        [{_, Total, W, Count, Hist, Peak}] ->
            #st{opts = #{windows := Keep}, durations = Durs} = St,
            Peak1 = max(Peak, milli_rate(Count, maps:get(W, Durs, 0))),
            Hist1 = hist_push(Hist, W, Count, Open - Keep),
            ets:insert(T, {K, Total + N, Open, N, Hist1, Peak1}),
            first_in_window(R, St#st{events = E + N});
        [] ->
            case Which =:= pairs andalso ets:info(T, size) >= maps:get(max_pairs, St#st.opts) of
                true ->
                    St#st{events = E + N, overflow = St#st.overflow + N};
                false ->
                    %% labelling reads the new endpoints from the VM
                    erlang:bump_reductions(10 * ?MERGE_REDUCTIONS),
                    ets:insert(T, {K, N, Open, N, [], 0}),
                    L = msgflow_labels:hold(msgflow_labels:hold(St#st.labels, S), R),
                    first_in_window(R, St#st{events = E + N, labels = L})
            end
    end.

%% A pair's history: its earlier windows with traffic, <<Window:32,
%% Count:32>> each, oldest first, none before window Oldest; [] when none.
%% (A count past 2^32 - 1 messages in one window of one pair is kept as
%% that.)
hist_push(Hist, W, Count, Oldest) ->
    H = case Hist of [] -> <<>>; _ -> Hist end,
    case hist_from(<<H/binary, W:32, (min(Count, 16#FFFFFFFF)):32>>, Oldest) of
        <<>> -> [];
        H1 -> H1
    end.

hist_from(<<W:32, _:32, Rest/binary>>, Oldest) when W < Oldest -> hist_from(Rest, Oldest);
hist_from(H, _) -> H.

%% @doc The messages of one pair's row in each window from First to Last
%% (closed or open windows), oldest first.  Any process; reads the row
%% only, and finds First in the history by bisection.
-spec counts_in(pos_integer(), pos_integer(), row()) -> [non_neg_integer()].
counts_in(First, Last, _) when First > Last ->
    [];
counts_in(First, Last, {_, _, W, C, Hist, _}) ->
    Known = hist_list(hist_from_bisect(Hist, First), Last) ++ [{W, C} || W >= First, W =< Last],
    fill(First, Last, Known).

fill(W, Last, _) when W > Last -> [];
fill(W, Last, [{W, C} | Rest]) -> [C | fill(W + 1, Last, Rest)];
fill(W, Last, Known) -> [0 | fill(W + 1, Last, Known)].

hist_list(<<W:32, C:32, Rest/binary>>, Last) when W =< Last -> [{W, C} | hist_list(Rest, Last)];
hist_list(_, _) -> [].

%% The entries of a history from the first with a window >= First.
hist_from_bisect([], _) ->
    <<>>;
hist_from_bisect(H, First) ->
    N = byte_size(H) div 8,
    Lo = bisect(H, First, 0, N),
    binary:part(H, Lo * 8, (N - Lo) * 8).

bisect(_, _, Lo, Hi) when Lo >= Hi -> Lo;
bisect(H, First, Lo, Hi) ->
    Mid = (Lo + Hi) div 2,
    <<_:Mid/binary-unit:64, W:32, _/binary>> = H,
    case W < First of
        true -> bisect(H, First, Mid + 1, Hi);
        false -> bisect(H, First, Lo, Mid)
    end.

%% @doc `[Previous, Last]': counts_in(Last - 1, Last, Row), read from the
%% row's newest entries only (what every view needs for rates and trends,
%% so the cheap way).  Any process.
-spec last_two(pos_integer(), row()) -> [non_neg_integer()].
last_two(Last, {_, _, Last, C, Hist, _}) -> [hist_at(Hist, 1, Last - 1), C];
last_two(Last, {_, _, W, C, _, _}) when W =:= Last - 1 -> [C, 0];
last_two(Last, {_, _, _, _, Hist, _}) -> [hist_at(Hist, 2, Last - 1), hist_at(Hist, 1, Last)].

%% The count of window W if it is in the I-th entry from the end of a
%% history (windows ascending), else 0.
hist_at([], _, _) ->
    0;
hist_at(Hist, I, W) ->
    Skip = byte_size(Hist) - 8 * I,
    case Skip >= 0 of
        true ->
            case Hist of
                <<_:Skip/binary, W:32, C:32, _/binary>> -> C;
                _ when I =:= 2 -> hist_at(Hist, 1, W);
                _ -> 0
            end;
        false ->
            0
    end.

%% @doc The highest rate (messages/s) of a pair's row over its closed
%% windows: the peak kept in the row, and its last window when that has
%% closed.  Durations of the kept windows by number; the others count as
%% Interval ms.
-spec peak_rate(row(), pos_integer(), #{pos_integer() => non_neg_integer()}, pos_integer()) ->
          float().
peak_rate({_, _, W, C, _, Peak}, Open, Durs, Interval) when W < Open ->
    max(Peak, milli_rate(C, maps:get(W, Durs, Interval))) / 1000;
peak_rate({_, _, _, _, _, Peak}, _, _, _) ->
    Peak / 1000.

first_in_window(R, St = #st{wsenders = WS}) ->
    _ = ets:update_counter(WS, R, 1, {R, 0}),
    St.

new_pairs() ->
    ets:new(msgflow_pairs, [set, protected]).

new_dead() -> ets:new(msgflow_dead, [set, protected]).

%% A new, empty table of window senders; the old one is deleted whole
%% (which the VM does in the background), not emptied object by object.
new_wsenders(Old) ->
    _ = Old =/= undefined andalso ets:delete(Old),
    ets:new(msgflow_window_senders, [set, private]).

%% Messages per 1000 s: an integer, so a pair's row holds no float.
milli_rate(_, 0) -> 0;
milli_rate(C, Ms) -> (C * 1000000) div Ms.

close_window(St = #st{win_start = Start, closed = Closed, windows = Ws, durations = Durs,
                      opts = #{windows := Keep}, labels = L}) ->
    Now = now_ms(),
    N = Closed + 1,
    W = #{n => N, at => erlang:system_time(millisecond), window_ms => Now - Start,
          queue_lens => queue_lens(St)},
    Ws1 = lists:sublist([W | Ws], Keep),
    Durs1 = maps:remove(N - Keep, Durs#{N => Now - Start}),
    {Due, Later} = lists:partition(fun({At, _}) -> At =< N end, St#st.window_waiters),
    [gen_server:reply(From, ok) || {_, From} <- Due],
    sweep(St#st{win_start = Now, closed = N, windows = Ws1, durations = Durs1,
                wsenders = new_wsenders(St#st.wsenders),
                window_waiters = Later,
                labels = msgflow_labels:purge(msgflow_labels:prune_births(L, N))}).

%% message_queue_len of the local receivers that had the most senders in
%% the window (fan-in candidates), read now.  Only the ?QLEN_MAX_SAMPLED
%% with the most senders are read: a threshold from a sample, then those
%% above it and up to that many equal to it, from ETS (so that a window
%% with 100,000 receivers costs no sort of them all); names join their
%% pid's count.
queue_lens(#st{wsenders = WS, labels = L}) ->
    Tables = msgflow_labels:tables(L),
    Thr = case ets:select(WS, [{{'_', '$1'}, [], ['$1']}], 1000) of
              {Ns, _} when length(Ns) > ?QLEN_MAX_SAMPLED ->
                  max(?QLEN_MIN_SENDERS,
                      lists:nth(?QLEN_MAX_SAMPLED, lists:sort(fun erlang:'>='/2, Ns)));
              _ -> ?QLEN_MIN_SENDERS
          end,
    Above = ets:select(WS, [{{'$1', '$2'}, [{'orelse', {'>', '$2', Thr}, {'not', {is_pid, '$1'}}}],
                             ['$_']}]),
    Equal = case ets:select(WS, [{{'$1', '$2'}, [{'==', '$2', Thr}, {is_pid, '$1'}], ['$_']}],
                            ?QLEN_MAX_SAMPLED) of
                '$end_of_table' -> [];
                {Eq, _} -> Eq
            end,
    Merged = lists:foldl(fun({R, N}, Acc) ->
                                 case msgflow_labels:canon(Tables, R) of
                                     P when is_pid(P), node(P) =:= node() ->
                                         Acc#{P => N + maps:get(P, Acc, 0)};
                                     _ -> Acc
                                 end
                         end, #{}, Above ++ Equal),
    Cands = [{N, P} || {P, N} <- maps:to_list(Merged), N >= ?QLEN_MIN_SENDERS],
    Top = lists:sublist(lists:reverse(lists:sort(Cands)), ?QLEN_MAX_SAMPLED),
    maps:from_list([{P, Len} || {_, P} <- Top,
                                {message_queue_len, Len} <- [process_info(P, message_queue_len)]]).

now_ms() ->
    erlang:monotonic_time(millisecond).

%%% Folding

%% Folds the rows that are done with (see the module doc), when window N
%% has closed: the rows whose last messages were in window N - 2 (so a
%% process that exited then has had its last sends taken by two
%% snapshots since), up to ?SWEEP_MIN of them; and a slice of the rows
%% idle for longer, whose endpoints may have exited since (a pass over
%% all of them takes at most ~32 windows).  Dead letters are folded in
%% slices too.  So a window's sweep reads a bounded number of keys into
%% this heap, however many pairs go idle at once.
sweep(St = #st{closed = N}) when N < 3 ->
    St;
sweep(St = #st{closed = N}) ->
    Idle = N - 2,
    St1 = sweep_slice(dead, [{{'$1', '_'}, [], ['$1']}], St),
    St2 = lists:foldl(
            fun(Which, S) ->
                    T = table(Which, S),
                    %% at most ?SWEEP_MIN of them: the rest are the slow
                    %% pass's from the next window on, so that a million
                    %% pairs going idle at once never sit in this heap
                    Just = case ets:select(T, [{{'$1', '_', Idle, '_', '_', '_'}, [], ['$1']}],
                                           ?SWEEP_MIN) of
                               {Keys, _} -> Keys;
                               '$end_of_table' -> []
                           end,
                    S1 = lists:foldl(fun(K, Acc) -> fold(Which, K, Acc) end, S, Just),
                    sweep_slice(Which, [{{'$1', '_', '$2', '_', '_', '_'}, [{'<', '$2', Idle}],
                                         ['$1']}], S1)
            end, St1, [pairs, folded]),
    St2.

table(pairs, #st{pairs = T}) -> T;
table(folded, #st{folded_t = T}) -> T;
table(dead, #st{dead = T}) -> T.

%% The next keys of a pass over a table, at least ?SWEEP_MIN or 1/32 of
%% the table, folded; the pass goes on in the next window where it
%% stopped.  (A continuation over a table that changed in between may
%% return a key twice or miss one: fold/3 skips a key that is gone, and
%% the next pass sees what this one missed.)
sweep_slice(Which, MS, St = #st{sweeps = Sw}) ->
    T = table(Which, St),
    Budget = max(?SWEEP_MIN, ets:info(T, size) div 32),
    First = case Sw of
                #{Which := Cont} -> catch ets:select(Cont);
                _ -> ets:select(T, MS, ?SWEEP_CHUNK)
            end,
    slice(Which, First, Budget, St).

slice(Which, {Keys, Cont}, Budget, St) ->
    St1 = lists:foldl(fun(K, Acc) -> fold(Which, K, Acc) end, St, Keys),
    case Budget - length(Keys) of
        B when B > 0 -> slice(Which, catch ets:select(Cont), B, St1);
        _ -> St1#st{sweeps = (St1#st.sweeps)#{Which => Cont}}
    end;
slice(Which, _End, _, St) ->
    St#st{sweeps = maps:remove(Which, St#st.sweeps)}.

%% One row: where its endpoints fold to; when that is another key, the
%% row leaves its table and is added to that key's row (folded rows, or
%% dead letters).
fold(Which, K = {S, R}, St = #st{labels = L0}) ->
    T = table(Which, St),
    case ets:lookup(T, K) of
        [] ->
            St;
        [Row] ->
            {S1, L1} = msgflow_labels:fold_key(L0, S),
            {R1, L2} = msgflow_labels:fold_key(L1, R),
            case {S1, R1} of
                K ->
                    St#st{labels = L2};
                K1 ->
                    ets:delete(T, K),
                    L3 = add_folded(Which, K1, Row, St#st{labels = L2}),
                    L5 = msgflow_labels:release(msgflow_labels:release(L3, S), R),
                    Moved = case Which of
                                pairs -> element(2, Row);
                                _ -> 0
                            end,
                    St#st{labels = L5, folded = St#st.folded + Moved}
            end
    end.

add_folded(dead, K1 = {S1, R1}, {_, N}, #st{dead = D, labels = L}) ->
    case ets:insert_new(D, {K1, N}) of
        true -> msgflow_labels:hold(msgflow_labels:hold(L, S1), R1);
        false -> _ = ets:update_counter(D, K1, N), L
    end;
add_folded(_, K1 = {S1, R1}, Row, St = #st{folded_t = F, labels = L}) ->
    case ets:lookup(F, K1) of
        [] ->
            ets:insert(F, setelement(1, Row, K1)),
            msgflow_labels:hold(msgflow_labels:hold(L, S1), R1);
        [Old] ->
            ets:insert(F, add_rows(K1, Old, Row, St)),
            L
    end.

%% Two rows as one: totals and counts per window added, the peak the
%% highest of theirs and of the windows they now share.
add_rows(K, {_, T1, W1, C1, H1, P1}, {_, T2, W2, C2, H2, P2},
         #st{closed = Closed, durations = Durs, opts = #{windows := Keep}}) ->
    Ws = add_windows(hist_list(hist_or_empty(H1), W1 - 1) ++ [{W1, C1}],
                     hist_list(hist_or_empty(H2), W2 - 1) ++ [{W2, C2}]),
    {Earlier, [{W, C}]} = lists:split(length(Ws) - 1, Ws),
    Peak = lists:max([P1, P2 | [milli_rate(Cw, D) || {Wn, Cw} <- Ws, {ok, D} <- [maps:find(Wn, Durs)]]]),
    Oldest = Closed + 1 - Keep,
    Hist = case hist_from(<< <<Wn:32, (min(Cw, 16#FFFFFFFF)):32>> || {Wn, Cw} <- Earlier >>, Oldest) of
               <<>> -> [];
               H -> H
           end,
    {K, T1 + T2, W, C, Hist, Peak}.

hist_or_empty([]) -> <<>>;
hist_or_empty(H) -> H.

add_windows([{W, A} | R1], [{W, B} | R2]) -> [{W, A + B} | add_windows(R1, R2)];
add_windows([{W1, A} | R1], L2 = [{W2, _} | _]) when W1 < W2 -> [{W1, A} | add_windows(R1, L2)];
add_windows(L1, [X | R2]) when L1 =/= [] -> [X | add_windows(L1, R2)];
add_windows([], L2) -> L2;
add_windows(L1, []) -> L1.

%% The NIF's tables start a new generation every ?ROTATE_EVERY windows, or
%% as soon as they hold half the entries they may: pairs that had no
%% messages since then leave them (msgflow_tracer:session_rotate/1).
maybe_rotate(St = #st{session = Session, closed = N, opts = #{max_pairs := Max}}) ->
    Full = try msgflow_tracer:session_info(Session) of
               #{entries := E} -> E * 2 >= Max * ?ENTRIES_PER_PAIR
           catch error:_ -> false
           end,
    case Full orelse N rem ?ROTATE_EVERY =:= 0 of
        true ->
            _ = (catch msgflow_tracer:session_rotate(Session)),
            St;
        false ->
            St
    end.

handle(St = #st{opts = Opts}) ->
    #{pairs => St#st.pairs, folded => St#st.folded_t, dead => St#st.dead, labels => msgflow_labels:tables(St#st.labels),
      node => node(), running => St#st.running,
      started_at => St#st.started_at, stopped_at => St#st.stopped_at,
      taken_at => erlang:system_time(millisecond), snapshot_at => St#st.snapshot_at,
      closed => St#st.closed, open_ms => now_ms() - St#st.win_start,
      windows => lists:reverse(St#st.windows),
      interval => maps:get(interval, Opts), sample => maps:get(sample, Opts),
      events => St#st.events, dead_letters => St#st.dead_letters,
      overflow => St#st.overflow, folded_messages => St#st.folded,
      skipped => element(1, St#st.skipped),
      new_tracer => St#st.new_tracer,
      births_dropped => St#st.births_dropped}.

info(St = #st{opts = Opts}) ->
    Tables = case St#st.session of
                 undefined -> St#st.last_info;
                 S -> try msgflow_tracer:session_info(S) catch error:_ -> #{} end
             end,
    Lib = try msgflow_tracer:lib_info()
          catch error:_ -> #{allocator => unavailable, jemalloc_error => <<"NIF not loaded">>,
                             fast_extra => false}
          end,
    Words = lists:sum([ets:info(T, memory) || T <- [St#st.pairs, St#st.folded_t, St#st.dead]
                                                  ++ maps:values(msgflow_labels:tables(St#st.labels))]),
    #{running => St#st.running,
      pairs => ets:info(St#st.pairs, size),
      events => St#st.events,
      dead_letters => St#st.dead_letters,
      overflow => St#st.overflow,
      folded => St#st.folded,
      folded_rows => ets:info(St#st.folded_t, size),
      rotations => maps:get(rotations, Tables, 0),
      births_dropped => St#st.births_dropped,
      allocator => maps:get(allocator, Lib),
      jemalloc_error => maps:get(jemalloc_error, Lib),
      jemalloc_build => maps:get(jemalloc_build, Lib, undefined),
      jemalloc_allocated => maps:get(jemalloc_allocated, Lib, undefined),
      jemalloc_resident => maps:get(jemalloc_resident, Lib, undefined),
      trace_mode => St#st.mode,
      skipped => element(1, St#st.skipped),
      skipped_examples => element(2, St#st.skipped),
      new_tracer => St#st.new_tracer,
      fast_extra => maps:get(fast_extra, Lib),
      alias_owner => maps:get(alias_owner, Lib, false),
      memory => maps:get(memory, Tables, 0),
      store_memory => Words * erlang:system_info(wordsize),
      table_entries => maps:get(entries, Tables, 0),
      shards => maps:get(shards, Tables, 0),
      windows => length(St#st.windows),
      sample => maps:get(sample, Opts),
      started_at => St#st.started_at,
      stopped_at => St#st.stopped_at,
      opts => Opts}.
