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
%%% <li>dead: `{{Sender, Receiver}, Messages}', sends to processes that did
%%%     not exist;</li>
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

-export([start_link/0, store/1, counts_in/3, last_two/2, peak_rate/4]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
-export_type([store/0, window/0, row/0]).

%% A row of the pairs table (see above).
-type row() :: {{msgflow_tracer:endpoint(), msgflow_tracer:endpoint()}, pos_integer(),
                pos_integer(), non_neg_integer(), binary() | [], non_neg_integer()}.

-define(SERVER, ?MODULE).
%% Receivers with at least this many senders in a window get their
%% message queue length read when the window closes (for hotspots).
-define(QLEN_MIN_SENDERS, 2).
-define(QLEN_MAX_SAMPLED, 50).
%% the NIF's table entries allowed per distinct pair (a pair counted on k
%% scheduler threads holds k entries; see max_pairs in the README)
-define(ENTRIES_PER_PAIR, 2).
%% reductions one merged delta is worth (see add_pair/2)
-define(MERGE_REDUCTIONS, 50).

%% A closed window: its number, end (system time, ms), length (ms) and the
%% message_queue_len, read as it closed, of the local receivers with the
%% most senders in it.
-type window() :: #{n := pos_integer(), at := integer(), window_ms := non_neg_integer(),
                    queue_lens := #{pid() => non_neg_integer()}}.

%% What views read (msgflow_view:build/2): the tables and the figures of
%% the run, as of the call that returned it.
-type store() :: #{pairs := ets:tid(), dead := ets:tid(),
                   labels := msgflow_labels:tables(),
                   node := node(), running := boolean(),
                   started_at := integer() | undefined, stopped_at := integer() | undefined,
                   taken_at := integer(),
                   closed := non_neg_integer(), open_ms := non_neg_integer(),
                   windows := [window()],
                   interval := pos_integer(), sample := off | {pos_integer(), pos_integer()},
                   events := non_neg_integer(), dead_letters := non_neg_integer(),
                   overflow := non_neg_integer(), births_dropped := non_neg_integer()}.

-record(st, {
    running = false :: boolean(),
    session :: msgflow_tracer:session() | undefined,
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
    dead :: ets:tid(),
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
    window_waiters = [] :: [{non_neg_integer(), gen_server:from()}]
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

%% @private
-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    %% loaded now rather than by the first snapshot, which would wait on
    %% the code server in the middle of its work
    _ = [code:ensure_loaded(M) || M <- [msgflow_labels, msgflow_flags, msgflow_fmt,
                                        msgflow_tracer]],
    clear_orphaned_flags(),
    {ok, #st{pairs = new_pairs(), dead = new_dead(),
             wsenders = new_wsenders(undefined),
             labels = msgflow_labels:new()}}.

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
    {reply, ok, clear(St1#st{win_start = now_ms()}, keep_labels)};
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
    msgflow_flags:off(targets(St)),
    erlang:send_after(Period - Traced, self(), {slice_on, Run}),
    {noreply, St};
handle_info({slice_on, Run}, St = #st{run = Run, running = true, session = Session,
                                      opts = #{sample := {Traced, _}}}) ->
    msgflow_flags:slice_on(targets(St), St#st.excluded, Session),
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
    case msgflow_flags:resolve(Procs) of
        {ok, Targets} ->
            try msgflow_tracer:session_new(self(), Max * ?ENTRIES_PER_PAIR) of
                Session -> set_flags(Targets, Session, Opts, St)
            catch
                error:undef -> {error, {nif_not_loaded, code:which(msgflow_tracer)}};
                error:{not_loaded, _} = E -> {error, E}
            end;
        {error, _} = E ->
            E
    end.

set_flags(Targets, Session, Opts, St) ->
    try msgflow_flags:on(Targets, Session) of
        ok ->
            application:set_env(msgflow, running, Session),
            Run = make_ref(),
            St1 = clear(St#st{running = true, session = Session, opts = Opts,
                              traced = case Targets of L when is_list(L) -> L; _ -> [] end,
                              run = Run, started_at = erlang:system_time(millisecond),
                              stopped_at = undefined, win_start = now_ms(),
                              last_info = #{}, births_dropped = 0, excluded = []},
                        new_run),
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
            msgflow_flags:off(Targets),
            {error, {trace_failed, Reason}}
    end.

%% Forgets the counts and windows: a new run forgets the labels too, a
%% reset keeps them (the endpoints are still what they were).
clear(St = #st{pairs = P, dead = D}, What) ->
    %% deleted whole (in the background) and made anew, not emptied object
    %% by object, which would hold this process for a million pairs
    ets:delete(P),
    ets:delete(D),
    Labels = case What of
                 keep_labels -> St#st.labels;
                 new_run -> msgflow_labels:clear(St#st.labels)
             end,
    St#st{closed = 0, windows = [], durations = #{}, events = 0,
          pairs = new_pairs(), dead = new_dead(), wsenders = new_wsenders(St#st.wsenders),
          dead_letters = 0, overflow = 0, labels = Labels}.

%% What the flags were set on: a spec (all, new, existing) or the pids.
targets(#st{opts = #{procs := P}}) when is_atom(P) -> P;
targets(#st{traced = Pids}) -> Pids.

%% msgflow:trace/1 while running: flags on one more process or port.
trace_more(_Who, St = #st{running = false}) ->
    {{error, not_started}, St};
trace_more(Who, St = #st{session = Session, traced = Traced, excluded = Ex}) ->
    case msgflow_flags:resolve_one(Who) of
        {ok, P} ->
            case lists:member(P, msgflow_flags:own_pids()) of
                true ->
                    {{error, {msgflow_process, Who}}, St};
                false ->
                    ok = msgflow_flags:on([P], Session),
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
    case msgflow_flags:resolve_one(Who) of
        {ok, P} ->
            msgflow_flags:off([P]),
            St1 = case St#st.opts of
                      #{procs := L} when is_list(L) -> St#st{traced = lists:delete(P, Traced)};
                      _ -> St#st{excluded = lists:usort([P | Ex])}
                  end,
            {ok, St1};
        {error, _} = E ->
            {E, St}
    end.

%% Flags off, barrier, final snapshot: the store then holds every send
%% traced before stop was called.
stop_tracing(St = #st{running = false}) ->
    St;
stop_tracing(St = #st{session = Session}) ->
    msgflow_flags:off(targets(St)),
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
%% the module's trace flags); another caller of snapshot/1 on this session
%% makes it raise `busy'.  Each way, skip the turn: nothing is lost, the
%% next snapshot takes it.
take(St = #st{session = Session}) ->
    try msgflow_tracer:snapshot_start(Session) of
        Take -> take_chunks(Take, St)
    catch
        error:undef -> St;
        error:{not_loaded, _} -> St;
        error:badarg -> St;
        error:busy -> St
    end.

%% The snapshot in chunks of about 1,024 deltas, each merged before the
%% next is read, so this heap never holds a whole snapshot.
take_chunks(Take, St) ->
    case msgflow_tracer:snapshot_next(Take) of
        {more, Pairs, Dead} ->
            take_chunks(Take, merge({Pairs, Dead, 0, 0}, take_births(St)));
        {done, Pairs, Dead, Overflow, OverflowDead} ->
            merge({Pairs, Dead, Overflow, OverflowDead}, take_births(St))
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

merge({Pairs, Dead, Overflow, OverflowDead}, St) ->
    St1 = lists:foldl(fun add_pair/2, St, Pairs),
    DeadN = lists:foldl(fun({S, R, N}, A) ->
                                _ = ets:update_counter(St1#st.dead, {S, R}, N, {{S, R}, 0}),
                                A + N
                        end, OverflowDead, Dead),
    St1#st{overflow = St1#st.overflow + Overflow,
           events = St1#st.events + Overflow,
           dead_letters = St1#st.dead_letters + DeadN}.

%% One delta of one pair (a pair counted on several threads comes once per
%% thread).  A pair past max_pairs distinct pairs goes to overflow.
add_pair({S, R, N}, St = #st{pairs = T, closed = C, events = E}) ->
    %% a few ETS calls (more for a new pair, below): count them as the
    %% work they are, so that a slice of merging stays well under 1 ms
    erlang:bump_reductions(?MERGE_REDUCTIONS),
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
            case ets:info(T, size) >= maps:get(max_pairs, St#st.opts) of
                true ->
                    St#st{events = E + N, overflow = St#st.overflow + N};
                false ->
                    %% labelling reads the new endpoints from the VM
                    erlang:bump_reductions(10 * ?MERGE_REDUCTIONS),
                    ets:insert(T, {K, N, Open, N, [], 0}),
                    L = msgflow_labels:learn(msgflow_labels:learn(St#st.labels, S), R),
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
    St#st{win_start = Now, closed = N, windows = Ws1, durations = Durs1,
          wsenders = new_wsenders(St#st.wsenders),
          window_waiters = Later, labels = msgflow_labels:prune_births(L, N)}.

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

handle(St = #st{opts = Opts}) ->
    #{pairs => St#st.pairs, dead => St#st.dead, labels => msgflow_labels:tables(St#st.labels),
      node => node(), running => St#st.running,
      started_at => St#st.started_at, stopped_at => St#st.stopped_at,
      taken_at => erlang:system_time(millisecond),
      closed => St#st.closed, open_ms => now_ms() - St#st.win_start,
      windows => lists:reverse(St#st.windows),
      interval => maps:get(interval, Opts), sample => maps:get(sample, Opts),
      events => St#st.events, dead_letters => St#st.dead_letters,
      overflow => St#st.overflow, births_dropped => St#st.births_dropped}.

info(St = #st{opts = Opts}) ->
    Tables = case St#st.session of
                 undefined -> St#st.last_info;
                 S -> try msgflow_tracer:session_info(S) catch error:_ -> #{} end
             end,
    Lib = try msgflow_tracer:lib_info()
          catch error:_ -> #{allocator => unavailable, jemalloc_error => <<"NIF not loaded">>,
                             fast_extra => false}
          end,
    Words = lists:sum([ets:info(T, memory) || T <- [St#st.pairs, St#st.dead]
                                                  ++ maps:values(msgflow_labels:tables(St#st.labels))]),
    #{running => St#st.running,
      pairs => ets:info(St#st.pairs, size),
      events => St#st.events,
      dead_letters => St#st.dead_letters,
      overflow => St#st.overflow,
      births_dropped => St#st.births_dropped,
      allocator => maps:get(allocator, Lib),
      jemalloc_error => maps:get(jemalloc_error, Lib),
      jemalloc_build => maps:get(jemalloc_build, Lib, undefined),
      jemalloc_allocated => maps:get(jemalloc_allocated, Lib, undefined),
      jemalloc_resident => maps:get(jemalloc_resident, Lib, undefined),
      fast_extra => maps:get(fast_extra, Lib),
      memory => maps:get(memory, Tables, 0),
      store_memory => Words * erlang:system_info(wordsize),
      table_entries => maps:get(entries, Tables, 0),
      shards => maps:get(shards, Tables, 0),
      windows => length(St#st.windows),
      sample => maps:get(sample, Opts),
      started_at => St#st.started_at,
      stopped_at => St#st.stopped_at,
      opts => Opts}.
