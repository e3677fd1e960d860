%%% @doc The collector: the process that owns a run.  It holds the trace
%%% session and the flags (msgflow_flags), pulls a snapshot from the NIF
%%% every `interval' ms into the store it owns (msgflow_store), closes the
%%% windows, and stops counting when asked, when `duration' is over, or
%%% `grace' ms after the run's coordinator or owner went.  Its one product
%%% is a store handle (store/1), from which msgflow_rows builds every view
%%% in the caller's process, so a view of a million pairs never holds up
%%% the snapshots.
%%%
%%% Every message this process takes is written here: the client API at
%%% the top is the only way in (msgflow, msgflow_cluster and msgflow_flow
%%% call it).  It runs no code but its own: views are built by their
%%% callers from the handle, never in here.  A call to a collector that is
%%% not there, or that ends before it answers, returns the caller's
%%% fallback (see each function); one that does not answer within 30 s
%%% returns `{error, {timeout, msgflow_collector}}' (msgflow_call).
-module(msgflow_collector).
-behaviour(gen_server).

-export([start/1, stop/0, reset/0, reset_for/1, trace/1, untrace/1, own/1, await_census/1, info/0, info_as_is/0, wait/1,
         await_windows/2, store/1, balance/0, published/0, mark/1]).
-export([start_link/0, init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(SERVER, ?MODULE).
%% ms stop/0 waits for the history's writer to write the last windows
-define(HISTORY_CLOSE_MS, 5000).
%% The merge a view waits for, in deltas (each a few µs of the
%% collector's work): past it, a view is answered at once from the counts
%% as they stand (`behind'), unless it asked for `sync'.  Counted in
%% deltas, not time, so that a busy machine never makes a small merge
%% look long.
-define(VIEW_WAIT_DELTAS, 8192).
%% where the store handle and info/0's figures are published for the
%% views while the collector is behind (a protected table of its own)
-define(PUBLISHED, msgflow_published).

-record(st, {
    running = false :: boolean(),
    run :: msgflow_run:run() | undefined,   %% the session and flags (msgflow_run)
    opts = msgflow_opts:defaults() :: msgflow_opts:run_opts(),
    tag :: reference() | undefined,         %% tags this run's timers
    started_at :: integer() | undefined,    %% erlang:system_time(millisecond)
    stopped_at :: integer() | undefined,
    store :: msgflow_store:state(),         %% the counts (msgflow_store)
    last_info = #{} :: map(),               %% session_info at stop
    last_run :: msgflow_run:run() | undefined,  %% the run that stopped last
    waiters = [] :: [gen_server:from()],
    %% monitors of the run's coordinator (on a node a cluster's
    %% coordinator started) and its owner (`owner', as msgflow-top sets):
    %% counting stops `grace' ms after either goes, so a partition or a
    %% killed tool cannot leave it on
    watched = [] :: [{reference(), pid()}],
    window_waiters = [] :: [{non_neg_integer(), gen_server:from()}],
    census_waiters = [] :: [gen_server:from()],     %% await_census/1 callers
    %% in legacy mode with procs all or new: who traces new processes, as
    %% of the last window (msgflow_run:new_tracer/1)
    new_tracer = msgflow :: msgflow | term(),
    %% msgflow's own cost on the node: µs this process spent draining
    %% snapshots and closing windows since start, and as of the window
    %% before (monotonic µs, work µs), for the rate info/0 gives
    work_us = 0 :: non_neg_integer(),
    work_mark = {0, 0} :: {integer(), non_neg_integer()},
    work_rate = 0.0 :: float(),
    %% when the next window closes (monotonic ms): every `interval' ms from
    %% the start, however long closing one took
    next_tick :: integer() | undefined,
    %% with `history': the run's writer (msgflow_history) and monitor,
    %% and what info/0 says of the history (its last report, the windows
    %% dropped while it was behind, why it stopped)
    writer = none :: none | {pid(), reference()},
    history = #{} :: map(),
    %% a snapshot merged a chunk a message (msgflow_store:drain_begin/1),
    %% so that calls are answered between chunks however many new pairs
    %% it holds: `none', or the drain (`ref' tags its steps) with the calls
    %% it answers when done and whether the window closes then (a tick
    %% came); and the calls that came while it ran, answered after the
    %% next drain (this one may have passed their sends)
    draining = none :: none | #{ref := reference(), drain := msgflow_store:drain(),
                              waiters := [waiter()], close := boolean()},
    next_waiters = [] :: [waiter()],
    %% a tick came while a drain it did not begin ran: the next drain,
    %% begun after it, closes the window (so that a window holds the
    %% sends up to its tick, not up to an earlier drain's start)
    tick_due = false :: boolean(),
    %% the store's count of deltas merged as the drain under way began,
    %% and the deltas of the last drain done (behind/1)
    take_from = 0 :: non_neg_integer(),
    last_deltas = 0 :: non_neg_integer()
}).

%% A call that wants a snapshot taken after it came: the store handle
%% (store(true), or store(sync) which never takes the counts as they
%% stand), info/0 or balance/0 (always a whole drain).
-type waiter() :: {gen_server:from(), store | sync | info | balance}.

%%% Client API

%% @doc Starts a run on this node with validated options
%% (msgflow_opts:validate/1; `nodes' is ignored here), and on a node a
%% cluster's coordinator starts, its `coordinator' and `resume'
%% (msgflow_opts:run_opts()).  `{error, already_started}', `{error,
%% collector_down}' (the application is not running), or an error of
%% msgflow_flags or the NIF.
-spec start(msgflow_opts:run_opts()) -> ok | {error, term()}.
start(Opts) -> call({start, Opts}, {error, collector_down}).

%% @doc Stops counting: when it returns, the flags are off and every send
%% traced before the call is in the store.  `ok' also when not running.
-spec stop() -> ok | {error, {timeout, msgflow_collector}}.
stop() -> call(stop, ok).

%% @doc Forgets the counts (tracing, if on, goes on).
-spec reset() -> ok | {error, {timeout, msgflow_collector}}.
reset() -> call(reset, ok).

%% @doc Forgets the counts as reset/0 does, only when this node's run was
%% started by the cluster coordinator Coordinator (what a coordinator's
%% reset asks of its members); `{error, {not_coordinator, Coordinator}}'
%% for any other run, so that one coordinator never erases the counts of
%% a run another started.  `ok' when the collector is not running.
-spec reset_for(pid() | undefined) -> ok | {error, {not_coordinator, term()}}.
reset_for(Coordinator) -> call({reset_for, Coordinator}, ok).

%% @doc Flags on one more process or port (or registered name) of the
%% running run.  `{error, not_started}', `{error, {noproc, Who}}',
%% `{error, {msgflow_process, Who}}', `{error, {traced_by_another_tool, P}}'.
-spec trace(pid() | port() | atom()) -> ok | {error, term()}.
trace(Who) -> call({trace, Who}, {error, not_started}).

%% @doc Flags off one process or port; what it sent so far stays.
%% `{error, not_started}', `{error, {noproc, Who}}'.
-spec untrace(pid() | port() | atom()) -> ok | {error, term()}.
untrace(Who) -> call({untrace, Who}, {error, not_started}).

%% @doc Processes of msgflow's own (its web server's): none of their
%% messages are counted from now on (msgflow_run:own/2), nor those of
%% the processes they spawn.  `ok' also when not running (a run that
%% starts later leaves out msgflow_flags:own_pids/0).
-spec own([pid()]) -> ok | {error, {timeout, msgflow_collector}}.
own(Pids) -> call({own, Pids}, ok).

%% @doc Waits until the census of the processes alive when the run
%% started has read them all (msgflow_labels:census/2): from then on one
%% of them that exits keeps its label.  `ok' (also when not running), or
%% `{error, timeout}' after Ms.
-spec await_census(timeout()) -> ok | {error, timeout}.
await_census(Ms) ->
    try gen_server:call(?MODULE, await_census, Ms)
    catch
        exit:{timeout, _} -> {error, timeout};
        exit:{noproc, _} -> ok
    end.

%% @doc msgflow:info/0, after a snapshot taken now, or, while the collector
%% is behind (a merge of more than about 8,000 deltas under way or just
%% done), at once as the figures stand, with `behind => true' and
%% `snapshot_at' saying from when (`#{running => false}' when the
%% collector is not there): `running'; counts, in
%% messages (`events' = sum of pairs() + `rolled up' + `overflow';
%% `dead_letters', `proc_events_dropped' spawn and register events lost past
%% 1,000,000 between snapshots) and in rows (`pairs', `rolled_up_rows',
%% `table_entries', `windows', `shards'); memory in bytes (`memory' of the
%% NIF's tables, `store_memory' of the ETS tables, `collector_memory' of
%% its process, `workers_memory' of the view workers and web computations
%% alive and the history ranges they hold (msgflow_workers), `own_memory'
%% the four together, `max_memory' the bound
%% on the first two and `memory_full' whether they reached it: new pairs
%% then go to `overflow'; `jemalloc_allocated', `jemalloc_resident');
%% msgflow's own work: `collector_ms_per_s', ms a second the collector
%% spent draining snapshots and closing windows over the last window (wall
%% time in its process), and `collector_work_ms' since it started;
%% `allocator', `jemalloc_build', `rotations'; the
%% checks made at load (`fast_extra', `alias_owner', `plain_refs',
%% `fast_terms', `fast_resources', `native_records');
%% `own_left_out', messages from or to msgflow's own processes (its
%% collector, view workers, web server) left out of the counts; `started_at' and
%% `stopped_at' (system time, ms), `opts', `trace_mode'; and what other
%% tools hold (`skipped', `skipped_examples', `new_tracer').
-spec info() -> map() | {error, {timeout, msgflow_collector}}.
info() ->
    case published() of
        {_, Info} -> Info;
        _ -> call(info, #{running => false})
    end.

%% @doc info/0 without the snapshot (the figures as of the last one), for
%% a caller that has just taken one (store(true)): the web page.  While
%% the collector is behind, the figures published at its last drain's end,
%% without a call.
-spec info_as_is() -> map() | {error, {timeout, msgflow_collector}}.
info_as_is() ->
    case published() of
        {_, Info} -> Info;
        _ -> call(info_as_is, #{running => false})
    end.

%% @doc Waits until counting stops, at most Timeout ms: `ok' (also when
%% not running), or `timeout'.
-spec wait(timeout()) -> ok | timeout.
wait(Timeout) ->
    case msgflow_call:call(?SERVER, wait, ok, Timeout) of
        {error, {timeout, _}} -> timeout;
        ok -> ok
    end.

%% @doc A bottleneck appeared or cleared (msgflow_alerts): marked in the
%% run's history when it keeps one (msgflow_history:mark/2), else
%% nothing.  Never waits.
-spec mark(#{at := integer(), event := atom(), verdict := atom(), label := binary(), subject := term()}) -> ok.
mark(Mark = #{at := At, event := E, verdict := V, label := L, subject := _})
  when is_integer(At), is_atom(E), is_atom(V), is_binary(L) ->
    gen_server:cast(?SERVER, {mark, Mark}).

%% @doc Returns once N more windows have closed (a barrier for tests and
%% tools instead of sleeping): `ok', `not_running' when that cannot
%% happen, `timeout' after Timeout ms.
-spec await_windows(pos_integer(), timeout()) -> ok | not_running | timeout.
await_windows(N, Timeout) ->
    case msgflow_call:call(?SERVER, {await_windows, N}, not_running, Timeout) of
        {error, {timeout, _}} -> timeout;
        R -> R
    end.

%% @doc The store handle.  `sync': taken after a snapshot when counting
%% is on, so every send traced before the call is in its tables, however
%% long the merge.  `true': the same while the merge is small; while the
%% collector is behind (a merge of more than about 8,000 deltas under way
%% or just done: a node with many new pairs a second) at once, as the
%% tables stand, with `behind => true' (every send before its
%% `snapshot_at' is in them, and part of those after), read from what the
%% collector published without a call to it.  `false': as the tables
%% stand (while the collector is behind, what it published: a view that
%% reads closed windows only, such as hotspots, then waits for no window
%% close or merge step under way).  `undefined' when the collector is not there or never ran
%% (msgflow never started, or no start succeeded); `{error, {timeout,
%% msgflow_collector}}' when it did not answer within 30 s.
-spec store(boolean() | sync) -> msgflow_store:store() | undefined | {error, {timeout, msgflow_collector}}.
store(sync) ->
    call({store, sync}, undefined);
store(Refresh) ->
    case published() of
        {Handle, _} -> Handle;
        _ -> call({store, Refresh}, undefined)
    end.

%% @doc While the collector is behind, the store handle and info/0's
%% figures it published when it fell behind and at the end of each take
%% since; `undefined' when it is not behind, or not there (a call to it
%% then answers).  Any process; no call to the collector.
-spec published() -> {msgflow_store:store(), map()} | undefined.
published() ->
    try ets:lookup(?PUBLISHED, store) of
        [{store, Handle, Info}] -> {Handle, Info};
        [] -> undefined
    catch error:badarg -> undefined
    end.

%% @doc Where every message counted is, read in one call after a snapshot
%% (msgflow_store:balance/1): for tests and benchmarks.  `undefined' when
%% the collector is not there.
-spec balance() -> #{events := non_neg_integer(), held := non_neg_integer(),
                     rolled_up := non_neg_integer(), overflow := non_neg_integer()} | undefined.
balance() -> call(balance, undefined).

%% A call, or IfGone when there is no collector or it ends before it
%% answers (the application stopping).
call(Request, IfGone) ->
    msgflow_call:call(?SERVER, Request, IfGone).

%%% The server

%% @private
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, [], []).

%% @private
-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    %% loaded now rather than by the first snapshot, which would wait on
    %% the code server in the middle of its work
    _ = [code:ensure_loaded(M) || M <- [msgflow_labels, msgflow_flags, msgflow_fmt,
                                        msgflow_tracer, msgflow_store, msgflow_rollup,
                                        msgflow_row, msgflow_hist]],
    ok = msgflow_run:clear_orphaned(),
    ?PUBLISHED = ets:new(?PUBLISHED, [named_table, protected, {read_concurrency, true}]),
    {ok, #st{store = msgflow_store:new()}}.

%% @private
-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}} | {noreply, #st{}}.
%% Over 40 lines: one short clause per request of the client API above,
%% none over eight lines; splitting them would only move the dispatch.
%% The coordinator that started this run is back (its node reconnected
%% before the grace ended): the run goes on for it.
handle_call({start, #{coordinator := C, resume := true}}, _From,
            St = #st{running = true, opts = #{coordinator := C}, watched = W}) ->
    {reply, ok, St#st{watched = [{erlang:monitor(process, C), C} | W]}};
handle_call({start, _}, _From, St = #st{running = true}) ->
    {reply, {error, already_started}, St};
handle_call({start, Opts}, _From, St) ->
    case start_tracing(Opts, St) of
        %% (a run starts not behind, whatever the last one's last take was)
        {ok, St1} -> {reply, ok, publish(St1#st{last_deltas = 0})};
        {error, _} = E -> {reply, E, St}
    end;
handle_call(stop, _From, St) ->
    {reply, ok, publish(stop_tracing(St))};
handle_call(reset, _From, St0) ->
    St = settle(St0, true),
    %% the NIF's tables to start anew, their cap as at the start (once the
    %% old generations' last counts are taken, here, they are freed)
    _ = St#st.running andalso msgflow_run:renew(St#st.run, St#st.opts),
    S = refresh(St),       %% drop what the NIF holds so far
    {reply, ok, publish(St#st{store = msgflow_store:clear(msgflow_store:restart_window(S), keep_labels),
                              last_deltas = 0})};
handle_call({reset_for, Coord}, From, St = #st{opts = #{coordinator := Coord}})
  when is_pid(Coord) ->
    handle_call(reset, From, St);
handle_call({reset_for, Coord}, _From, St) ->
    {reply, {error, {not_coordinator, Coord}}, St};
handle_call({store, _}, _From, St = #st{started_at = undefined}) ->
    %% no run yet (a start that failed, say with the NIF not loaded):
    %% nothing to view
    {reply, undefined, St};
handle_call({store, true}, From, St = #st{running = true}) ->
    case behind(St) of
        true -> {reply, handle(St, true), St};
        false -> {noreply, after_drain({From, store}, St)}
    end;
handle_call({store, sync}, From, St = #st{running = true}) ->
    {noreply, after_drain({From, sync}, St)};
handle_call({store, _}, _From, St) ->
    {reply, handle(St), St};
handle_call(await_census, From, St = #st{running = true, census_waiters = W}) ->
    case msgflow_store:census_left(St#st.store) of
        0 -> {reply, ok, St};
        _ -> {noreply, St#st{census_waiters = [From | W]}}
    end;
handle_call(await_census, _From, St) ->
    {reply, ok, St};
handle_call({own, _}, _From, St = #st{running = false}) ->
    {reply, ok, St};
handle_call({own, Pids}, _From, St = #st{run = Run}) ->
    {reply, msgflow_run:own(Run, Pids), St};
handle_call({Op, _}, _From, St = #st{running = false}) when Op =:= trace; Op =:= untrace ->
    {reply, {error, not_started}, St};
handle_call({Op, Who}, _From, St = #st{run = Run}) when Op =:= trace; Op =:= untrace ->
    {Reply, Run1} = case Op of
                        trace -> msgflow_run:trace(Run, Who);
                        untrace -> msgflow_run:untrace(Run, Who)
                    end,
    {reply, Reply, St#st{run = Run1}};
handle_call(info, From, St = #st{running = true}) ->
    case behind(St) of
        true -> {reply, info(St, true), St};
        false -> {noreply, after_drain({From, info}, St)}
    end;
handle_call(balance, From, St = #st{running = true}) ->
    {noreply, after_drain({From, balance}, St)};
handle_call(balance, _From, St) ->
    {reply, msgflow_store:balance(St#st.store), St};
handle_call(info, _From, St) ->
    {reply, info(St), St};
handle_call(info_as_is, _From, St) ->
    {reply, info(St), St};
handle_call({await_windows, _}, _From, St = #st{running = false}) ->
    {reply, not_running, St};
handle_call({await_windows, N}, From, St = #st{store = S, window_waiters = W}) ->
    {noreply, St#st{window_waiters = [{msgflow_store:closed(S) + N, From} | W]}};
handle_call(wait, From, St = #st{running = true, waiters = W}) ->
    {noreply, St#st{waiters = [From | W]}};
handle_call(wait, _From, St) ->
    {reply, ok, St};
handle_call(Other, _From, St) ->
    {reply, {error, {unknown_call, Other}}, St}.

%% @private
-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast({mark, Mark}, St = #st{writer = {Pid, _}}) ->
    ok = msgflow_history:mark(Pid, Mark),
    {noreply, St};
handle_cast(_Msg, St) ->
    {noreply, St}.

%% @private
-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
%% Over 40 lines: one short clause per message (tick, monitors, the
%% owner's and coordinator's ends), each a few lines.
handle_info({tick, Tag}, St = #st{tag = Tag, running = true, draining = none}) ->
    {noreply, begin_take([], true, St)};
handle_info({tick, Tag}, St = #st{tag = Tag, running = true}) ->
    {noreply, St#st{tick_due = true}};
handle_info({drain_step, Ref}, St = #st{draining = T = #{ref := Ref, drain := Take}}) ->
    case step(Take, St) of
        {more, St1} ->
            self() ! {drain_step, Ref},
            case not behind(St) andalso behind(St1) of
                true ->
                    %% behind from now on: those waiting are answered as
                    %% the counts stand, and views read what is published
                    St2 = answer_behind(St1),
                    ok = held(),
                    {noreply, St2};
                false ->
                    {noreply, St1}
            end;
        {done, St1} ->
            {noreply, drained(T, St1)}
    end;
handle_info({wait_sample, Tag}, St = #st{tag = Tag, running = true}) ->
    {noreply, St#st{store = msgflow_store:sample_waits(St#st.store)}};
handle_info({census, Tag}, St = #st{tag = Tag, running = true}) ->
    case msgflow_store:census(St#st.store) of
        {more, S} ->
            self() ! {census, Tag},
            {noreply, St#st{store = S}};
        {done, S} ->
            _ = [gen_server:reply(W, ok) || W <- St#st.census_waiters],
            {noreply, St#st{store = S, census_waiters = []}}
    end;
handle_info({duration_over, Tag}, St = #st{tag = Tag, running = true}) ->
    {noreply, stop_tracing(St)};
%% The history's writer died (before the monitors of the watched
%% processes, which would take its 'DOWN' for theirs).
handle_info({'DOWN', Ref, process, Pid, Why}, St = #st{writer = {Pid, Ref}}) ->
    {noreply, St#st{writer = none, store = msgflow_store:log_off(St#st.store),
                    history = history_stopped(Why, none, St#st.history)}};
%% The coordinator of the cluster this node counts for, or the run's
%% owner, went away (it stopped, its node went down, or the link to it
%% broke): counting stops after the grace period unless a new run started
%% meanwhile.
handle_info({'DOWN', Ref, process, Pid, _}, St = #st{watched = W, tag = Tag,
                                                      opts = #{grace := Grace}}) ->
    case lists:keymember(Ref, 1, W) of
        true ->
            erlang:send_after(Grace, self(), {watched_gone, Tag, Pid}),
            {noreply, St#st{watched = lists:keydelete(Ref, 1, W)}};
        false ->
            {noreply, St}
    end;
%% ... unless it came back meanwhile (a coordinator whose node reconnected
%% within the grace: see the resuming start)
handle_info({watched_gone, Tag, Pid}, St = #st{tag = Tag, running = true, watched = W}) ->
    case lists:keymember(Pid, 2, W) of
        true -> {noreply, St};
        false -> {noreply, stop_tracing(St)}
    end;
%% Sampling: outside a traced slice the flags are really off (not discarded
%% by the tracer), so the traced processes pay nothing there.
handle_info({slice_off, Tag}, St = #st{tag = Tag, running = true,
                                       opts = #{sample := {Traced, Period}}}) ->
    ok = msgflow_run:slice_off(St#st.run),
    erlang:send_after(Period - Traced, self(), {slice_on, Tag}),
    {noreply, St};
handle_info({slice_on, Tag}, St = #st{tag = Tag, running = true,
                                      opts = #{sample := {Traced, _}}}) ->
    ok = msgflow_run:slice_on(St#st.run),
    erlang:send_after(Traced, self(), {slice_off, Tag}),
    {noreply, St};
%% The history's writer: its report after each window, why it stopped
%% (counting goes on), or that it died.
handle_info({msgflow_history, Pid, {stopped, Why, File}}, St = #st{writer = {Pid, Ref}}) ->
    erlang:demonitor(Ref, [flush]),
    {noreply, St#st{writer = none, store = msgflow_store:log_off(St#st.store),
                    history = history_stopped(Why, File, St#st.history)}};
handle_info({msgflow_history, Pid, Report}, St = #st{writer = {Pid, _}, history = H})
  when is_map(Report) ->
    {noreply, St#st{history = maps:merge(H, Report)}};
handle_info({retire, Tables}, St) ->
    ok = msgflow_store:retire(Tables),
    {noreply, St};
handle_info(_Msg, St) ->
    {noreply, St}.

%% @private
-spec terminate(term(), #st{}) -> ok.
terminate(Reason, St) ->
    _ = case Reason of
            normal -> stop_tracing(St#st{writer = none});
            shutdown -> stop_tracing(St#st{writer = none});
            {shutdown, _} -> stop_tracing(St#st{writer = none});
            _ -> abandon(St)
        end,
    %% the writer not awaited: the supervisor's shutdown time is the run's
    _ = case St#st.writer of
            {Pid, _} -> msgflow_history:close(Pid);
            none -> ok
        end,
    ok.

%%% Starting and stopping

history_stopped(Why, File, H) ->
    Where = case File of none -> ""; _ -> [" writing ", File] end,
    H#{status => stopped, reason => Why,
       message => iolist_to_binary(io_lib:format("the history stopped~s: ~s; counting goes on",
                                                 [Where, reason_text(Why)]))}.

reason_text(Why) when is_atom(Why) ->
    case file:format_error(Why) of
        "unknown POSIX error" ++ _ -> io_lib:format("~p", [Why]);
        T -> [atom_to_list(Why), " (", T, ")"]
    end;
reason_text(Why) ->
    io_lib:format("~0p", [Why]).

start_tracing(Opts, St) ->
    case start_history(Opts) of
        {ok, Writer} -> begin_run(Opts, St#st{writer = Writer, history = history_status(Opts)});
        {error, _} = E -> E
    end.

%% The history's writer (msgflow_history), started before tracing is:
%% a directory it cannot write is start/1's error, with nothing traced.
start_history(#{history := off}) ->
    {ok, none};
start_history(Opts = #{history := _}) ->
    case msgflow_history:start(Opts) of
        {ok, Pid, Ref} -> {ok, {Pid, Ref}};
        {error, _} = E -> E
    end;
start_history(_) ->
    {ok, none}.

history_status(#{history := off}) -> #{};
history_status(Opts = #{history := Dir}) ->
    #{dir => Dir, status => on, bytes => 0, budget => maps:get(history_bytes, Opts),
      windows_written => 0, windows_dropped => 0};
history_status(_) -> #{}.

begin_run(Opts, St) ->
    case msgflow_run:begin_run(Opts) of
        {ok, Run} ->
            %% the writer is msgflow's own: its file requests never counted
            _ = [msgflow_run:own(Run, [W]) || {W, _} <- [St#st.writer]],
            Tag = make_ref(),
            S0 = msgflow_store:start_run(St#st.store, Opts),
            %% a coordinator restarting the node it had started (it
            %% reconnected after the grace) keeps what was counted
            S1 = case resumes(Opts, St) of
                     true -> S0;
                     false -> msgflow_store:clear(S0, new_run)
                 end,
            %% the processes alive now, read a step at a time (so that
            %% one that exits before its first row keeps its label)
            self() ! {census, Tag},
            _ = [erlang:send_after(D, self(), {duration_over, Tag})
                 || #{duration := D} <- [Opts], D =/= infinity],
            _ = [erlang:send_after(Traced, self(), {slice_off, Tag})
                 || #{sample := {Traced, _}} <- [Opts]],
            Watched = [{erlang:monitor(process, P), P} || K <- [coordinator, owner],
                                                           P <- [maps:get(K, Opts, none)],
                                                           is_pid(P)],
            {ok, schedule_tick(St#st{running = true, run = Run, opts = Opts, tag = Tag,
                                     next_tick = undefined, work_mark = {0, St#st.work_us},
                                     started_at = erlang:system_time(millisecond),
                                     stopped_at = undefined, new_tracer = msgflow,
                                     store = msgflow_store:census_start(S1),
                                     last_info = #{}, watched = Watched})};
        {error, _} = E ->
            _ = close_history(St),
            E
    end.

%% The writer told to end once it wrote what it was given, and awaited
%% (Ms at most; then killed, so that a next run never has two writers on
%% one directory): when stop/0 returns, the history of the run is on
%% disk.
close_history(St) ->
    close_history(St, ?HISTORY_CLOSE_MS).

close_history(St = #st{writer = {Pid, Ref}, history = H}, Ms) ->
    ok = msgflow_history:close(Pid),
    H1 = await_writer(Pid, Ref, erlang:monotonic_time(millisecond) + Ms, H),
    _ = is_process_alive(Pid) andalso exit(Pid, kill),
    erlang:demonitor(Ref, [flush]),
    St#st{writer = none, store = msgflow_store:log_off(St#st.store),
          history = case H1 of
                        #{status := on} -> H1#{status => closed};
                        _ -> H1
                    end};
close_history(St, _) ->
    St.

%% The writer's reports until it ends (or the deadline).
await_writer(Pid, Ref, Until, H) ->
    receive
        {msgflow_history, Pid, {stopped, Why, File}} ->
            await_writer(Pid, Ref, Until, history_stopped(Why, File, H));
        {msgflow_history, Pid, Report} when is_map(Report) ->
            await_writer(Pid, Ref, Until, maps:merge(H, Report));
        {'DOWN', Ref, process, Pid, _} ->
            H
    after max(0, Until - erlang:monotonic_time(millisecond)) ->
        H
    end.

%% The window that closed last handed to the history's writer, or
%% dropped (and counted) while it is behind.
hand_log(St = #st{writer = none}) ->
    St;
hand_log(St = #st{writer = {Pid, _}, store = S, history = H}) ->
    case msgflow_store:take_log(S) of
        {none, S1} ->
            St#st{store = S1};
        {Log, Meta, S1} ->
            Given = not msgflow_history:behind(Pid) andalso
                msgflow_history:window(Pid, Log, Meta#{node => node(), run => St#st.started_at}),
            case Given of
                ok ->
                    St#st{store = S1};
                _ ->
                    %% behind (or just gone: its 'DOWN' says why)
                    ets:delete(Log),
                    St#st{store = S1, history = H#{windows_dropped => maps:get(windows_dropped, H, 0) + 1}}
            end
    end.

resumes(#{resume := true, coordinator := C}, #st{opts = #{coordinator := C}}) -> true;
resumes(_, _) -> false.

%% Flags off (a trace session destroyed), barrier, final snapshot: the
%% store then holds every send traced before stop was called.
stop_tracing(St = #st{running = false}) ->
    St;
stop_tracing(St0 = #st{run = Run}) ->
    ok = msgflow_run:flags_off(Run),
    %% a drain under way ends here, its window closed below with the rest
    St = settle(St0, false),
    St1 = close_history(close_window(refreshed(St))),
    Info = msgflow_run:close(Run),
    [gen_server:reply(W, ok) || W <- St1#st.waiters],
    [gen_server:reply(W, not_running) || {_, W} <- St1#st.window_waiters],
    [gen_server:reply(W, ok) || W <- St1#st.census_waiters],
    _ = [erlang:demonitor(R, [flush]) || {R, _} <- St1#st.watched],
    St1#st{running = false, run = undefined, tag = undefined,
           waiters = [], watched = [], window_waiters = [], census_waiters = [],
           stopped_at = erlang:system_time(millisecond), last_info = Info, last_run = Run}.

%% After a crash: tracing off and the run's session stopped, nothing
%% merged.  The state a crashed callback leaves is the one it was given,
%% but ETS tables it made or dropped are not given back (a window it
%% closed has its ends tables gone), so a stop_tracing/1 here would crash
%% too and its error be reported in place of the first.
abandon(#st{running = true, run = Run}) ->
    ok = msgflow_run:flags_off(Run),
    _ = msgflow_run:close(Run),
    ok;
abandon(_) ->
    ok.

%%% Snapshots and windows

%% The store with the NIF's counts so far merged in, while running.
refresh(#st{running = true, run = Run, store = S}) ->
    msgflow_store:drain(msgflow_run:session(Run), S);
refresh(#st{store = S}) -> S.

%% St with the NIF's counts so far merged in (refresh/1), timed.
refreshed(St) -> timed(St, fun() -> refresh(St) end).

%% W answered once a drain begun after it is merged: the drain begun now,
%% or after the one under way.
after_drain(W, St = #st{draining = none}) ->
    begin_take([W], false, St);
after_drain(W, St = #st{next_waiters = Next}) ->
    St#st{next_waiters = [W | Next]}.

%% A drain begun, its chunks merged one a message (drain_step), Waiters
%% answered and the window closed (Close) when it is done; when none can
%% begin (see msgflow_store:drain/2) that is now.
begin_take(Waiters, Close, St0 = #st{run = Run, store = S}) ->
    St = St0#st{take_from = msgflow_store:merged(S)},
    case worked(St, fun() -> {msgflow_store:drain_begin(msgflow_run:session(Run), S), S} end) of
        {none, St1} ->
            drained(#{waiters => Waiters, close => Close}, St1);
        {Take, St1} ->
            Ref = make_ref(),
            self() ! {drain_step, Ref},
            St1#st{draining = #{ref => Ref, drain => Take, waiters => Waiters, close => Close}}
    end.

%% One chunk of Take merged, as this process's work.
step(Take, St = #st{store = S}) ->
    worked(St, fun() -> msgflow_store:drain_step(Take, S) end).

%% A drain done: the window closed when a tick began it, its waiters
%% answered (the first to ask first), and the next drain begun for those
%% who came while it ran and for a tick that did.
drained(#{waiters := Waiters, close := Close}, St0) ->
    St1 = St0#st{draining = none, last_deltas = taken(St0)},
    St = publish(case Close of
                     true -> tick_done(St1);
                     false -> St1
                 end),
    _ = [gen_server:reply(From, answer(What, St)) || {From, What} <- lists:reverse(Waiters)],
    case St of
        #st{next_waiters = [], tick_due = false} -> St;
        #st{next_waiters = Next, tick_due = Tick} ->
            begin_take(Next, Tick, St#st{next_waiters = [], tick_due = false})
    end.

answer(store, St) -> handle(St, false);
answer(sync, St) -> handle(St, false);
answer(info, St) -> info(St, false);
answer(balance, St) -> msgflow_store:balance(St#st.store).

%% The collector fell behind during a drain: the calls waiting on it or on
%% the next that may take the counts as they stand are answered now (a
%% sync store, balance/0 wait on), and that is published.
answer_behind(St = #st{draining = T = #{waiters := W}, next_waiters = Next}) ->
    Now = fun({_, What}) -> What =:= store orelse What =:= info end,
    {Answer, Keep} = lists:partition(Now, W),
    {AnswerNext, KeepNext} = lists:partition(Now, Next),
    St1 = publish(St#st{draining = T#{waiters := Keep}, next_waiters = KeepNext}),
    _ = [gen_server:reply(From, answer_now(What, St1)) || {From, What} <- lists:reverse(Answer ++ AnswerNext)],
    St1.

%% A test's hold on a drain half-way (msgflow_live_SUITE): with the
%% persistent term `{msgflow_collector, hold_take}' set to a pid, a drain
%% that has just fallen behind tells it `{take_held, Collector}' and waits
%% for `take_release', so that what views do meanwhile can be seen.
%% Nothing is held when the term is not set (one lookup a drain).
held() ->
    case persistent_term:get({?MODULE, hold_take}, none) of
        Pid when is_pid(Pid) ->
            Pid ! {take_held, self()},
            receive take_release -> ok end;
        _ ->
            ok
    end.

%% Behind: the run's take under way has merged ?VIEW_WAIT_DELTAS deltas,
%% or the last one done had (the next will likely be as long).
behind(#st{running = false}) ->
    false;
behind(St = #st{draining = Taking, last_deltas = Last}) ->
    Last >= ?VIEW_WAIT_DELTAS orelse (Taking =/= none andalso taken(St) >= ?VIEW_WAIT_DELTAS).

%% The deltas merged since the drain under way (or the last) began.
taken(#st{store = S, take_from = From}) ->
    max(0, msgflow_store:merged(S) - From).

%% What views read without a call (published/0): while behind, the store
%% handle and info/0's figures as they stand (their bytes told to the
%% store, which counts them in max_memory); nothing otherwise.
publish(St = #st{store = S}) ->
    Bytes = case behind(St) of
                true ->
                    true = ets:insert(?PUBLISHED, {store, handle(St, true), info(St, true)}),
                    ets:info(?PUBLISHED, memory) * erlang:system_info(wordsize);
                false ->
                    true = ets:delete(?PUBLISHED, store),
                    0
            end,
    St#st{store = msgflow_store:copies(S, Bytes)}.

%% A waiter's answer from the counts as they stand, the drain it waits on
%% not done.
answer_now(store, St) -> handle(St, true);
answer_now(info, St) -> info(St, true).

%% A tick's work once its snapshot is merged: the window closed, the
%% tracer's tables rotated, msgflow's own set swept, the next tick set.
tick_done(St = #st{run = Run}) ->
    St1 = work_rate(close_window(St)),
    ok = msgflow_run:rotate(Run, maps:get(max_pairs, St#st.opts),
                            msgflow_store:closed(St1#st.store), msgflow_store:tracer_room(St1#st.store)),
    ok = msgflow_run:own_sweep(Run),
    %% the heap a window's merges and close grew (a chunk's terms, the
    %% roll-up's keys) given back: what this process holds between
    %% windows is its state, which max_memory counts (a collection of a
    %% heap of a few MB: well under 1 ms)
    true = erlang:garbage_collect(),
    schedule_tick(St1#st{new_tracer = msgflow_run:new_tracer(Run)}).

%% The drain under way (and those its waiters' calls and a tick began)
%% merged to the end, here, before a reset or a stop: with the window
%% closed where a tick asked for it when Close is true (a reset; a stop
%% closes it itself).
settle(St, false) ->
    settle_drains(St#st{tick_due = false}, false);
settle(St, true) ->
    settle_drains(St, true).

%% (no take under way: none is asked for either, took/2 begins those)
settle_drains(St = #st{draining = none}, _) ->
    St;
settle_drains(St = #st{draining = T = #{drain := Take, close := C}}, Close) ->
    case step(Take, St) of
        {more, St1} -> settle_drains(St1, Close);
        {done, St1} -> settle_drains(drained(T#{close := C andalso Close}, St1), Close)
    end.

%% St with the store Fun returns, and the µs it took in its work.
timed(St, Fun) ->
    {ok, St1} = worked(St, fun() -> {ok, Fun()} end),
    St1.

%% Fun's `{Result, Store}': Result, and St with that store and the µs Fun
%% took added to its work.
worked(St = #st{work_us = W}, Fun) ->
    T0 = erlang:monotonic_time(microsecond),
    {Result, S} = Fun(),
    {Result, St#st{store = S, work_us = W + erlang:monotonic_time(microsecond) - T0}}.

%% The share of its time this process spent working since the last
%% window closed, as ms a second.
work_rate(St = #st{work_us = W, work_mark = {T0, W0}}) ->
    Now = erlang:monotonic_time(microsecond),
    Rate = case Now - T0 of
               D when D > 0, T0 =/= 0 -> (W - W0) * 1000 / D;
               _ -> 0.0
           end,
    St#st{work_mark = {Now, W}, work_rate = Rate}.

%% The open window closed; those waiting for it answered.
close_window(St0) ->
    St = timed(St0, fun() -> msgflow_store:close_window(St0#st.store) end),
    S1 = St#st.store,
    N = msgflow_store:closed(S1),
    {Due, Later} = lists:partition(fun({At, _}) -> At =< N end, St#st.window_waiters),
    [gen_server:reply(From, ok) || {_, From} <- Due],
    hand_log(St#st{store = S1, window_waiters = Later}).

%% The next tick `interval' ms after the last was due, not after it was
%% done: closing a window of a million pairs, and the snapshots views ask
%% for meanwhile, would otherwise make every window that much longer.  A
%% collector that fell behind waits half an interval at least (it never
%% ticks back to back; a window's length is measured: rates stay right).
schedule_tick(St = #st{tag = Tag, opts = #{interval := I}, next_tick = Prev}) ->
    Now = erlang:monotonic_time(millisecond),
    Next = case Prev of
               undefined -> Now + I;
               _ -> max(Prev + I, Now + I div 2)
           end,
    erlang:send_after(Next, self(), {tick, Tag}, [{abs, true}]),
    %% the busiest receivers' queues read at random times in the window
    %% (msgflow_store_waits: random, so that a workload with a period
    %% is not read at one phase of it), once more as it closes
    _ = [erlang:send_after(Now + rand:uniform(Next - Now) - 1, self(), {wait_sample, Tag},
                           [{abs, true}])
         || Next > Now, _ <- lists:seq(2, msgflow_store_waits:readings())],
    St#st{next_tick = Next}.

%% The store handle; Behind: its tables as they stand, not after a
%% snapshot taken for the caller.
handle(St) ->
    handle(St, false).

handle(St = #st{opts = Opts}, Behind) ->
    msgflow_store:handle(St#st.store,
                         #{node => node(), running => St#st.running,
                           started_at => St#st.started_at, stopped_at => St#st.stopped_at,
                           interval => maps:get(interval, Opts), sample => maps:get(sample, Opts),
                           call_sample => case Opts of
                                              #{kinds := false} -> off;
                                              _ -> maps:get(call_sample, Opts, off)
                                          end,
                           skipped => element(1, skipped(St)),
                           new_tracer => St#st.new_tracer, behind => Behind}).

info(St) ->
    info(St, false).

info(St = #st{opts = Opts}, Behind) ->
    Tables = case St#st.run of
                 undefined -> St#st.last_info;
                 Run -> msgflow_run:session_info(Run)
             end,
    Lib = try msgflow_tracer:lib_info()
          catch error:_ -> #{allocator => unavailable, jemalloc_error => <<"NIF not loaded">>,
                             fast_extra => false}
          end,
    Figures = msgflow_store:figures(St#st.store),
    {memory, Heap} = process_info(self(), memory),
    Workers = msgflow_workers:memory(),
    maps:merge(Figures,
               #{running => St#st.running,
                 behind => Behind, snapshot_at => msgflow_store:snapshot_at(St#st.store),
                 collector_ms_per_s => St#st.work_rate,
                 collector_work_ms => St#st.work_us div 1000,
                 collector_memory => Heap,
                 workers_memory => Workers,
                 own_memory => Heap + maps:get(store_memory, Figures) + maps:get(memory, Tables, 0) + Workers,
                 rotations => maps:get(rotations, Tables, 0),
                 allocator => maps:get(allocator, Lib),
                 jemalloc_error => maps:get(jemalloc_error, Lib),
                 jemalloc_build => maps:get(jemalloc_build, Lib, undefined),
                 jemalloc_allocated => maps:get(jemalloc_allocated, Lib, undefined),
                 jemalloc_resident => maps:get(jemalloc_resident, Lib, undefined),
                 trace_mode => case latest(St) of
                                   undefined -> undefined;
                                   R -> msgflow_run:mode(R)
                               end,
                 skipped => element(1, skipped(St)),
                 skipped_examples => element(2, skipped(St)),
                 new_tracer => St#st.new_tracer,
                 fast_extra => maps:get(fast_extra, Lib),
                 alias_owner => maps:get(alias_owner, Lib, false),
                 plain_refs => maps:get(plain_refs, Lib, false),
                 fast_terms => maps:get(fast_terms, Lib, false),
                 fast_resources => maps:get(fast_resources, Lib, false),
                 native_records => maps:get(native_records, Lib, unread),
                 own_left_out => maps:get(own_left_out, Tables, 0),
                 memory => maps:get(memory, Tables, 0),
                 table_entries => maps:get(entries, Tables, 0),
                 shards => maps:get(shards, Tables, 0),
                 sample => maps:get(sample, Opts),
                 started_at => St#st.started_at,
                 stopped_at => St#st.stopped_at,
                 history => St#st.history,
                 opts => Opts}).

%% The run going on, else the one that stopped last.
latest(#st{run = undefined, last_run = R}) -> R;
latest(#st{run = R}) -> R.

skipped(St) ->
    case latest(St) of
        undefined -> {0, []};
        Run -> msgflow_run:skipped(Run)
    end.
