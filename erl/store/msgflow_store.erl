%%% @doc msgflow's store: the counts of a run and its windows.  The rows
%%% are in the aggregate in C (msgflow_tracer:agg_*, c_src/mf_agg.h),
%%% which the snapshot folds the tracer's deltas into without making a
%%% term of them (issue 53): this module is handed only what is new to it,
%%% the endpoints the aggregate has not seen, which it labels once and
%%% whose groups it writes back.  The rest (call edges, sizes, labels) is
%%% in ETS tables the collector process owns (protected: any process may
%%% read them, only the collector writes).  The collector calls these
%%% functions with the state it holds (`#store{}', msgflow_store.hrl);
%%% what views read is handle/2's map, the aggregate's tables through
%%% msgflow_row_table.
%%% <ul>
%%% <li>pairs: one row per distinct pair as the VM reported it
%%%     (msgflow_row's shape);</li>
%%% <li>rolled-up rows: rows of the same shape for the pairs that left
%%%     `pairs' (msgflow_rollup), and the replies to the aliases of a process
%%%     (a gen:call's, one per call), which the NIF counts for the process
%%%     and which are added at once to the row (sender, owner).  So `pairs'
%%%     holds the pairs of live endpoints, memory grows with live processes
%%%     and kinds, not with the run's length, and `events = sum of pairs +
%%%     rolled up + overflow' at all times;</li>
%%% <li>dead: `{{Sender, Receiver}, Messages}', sends to processes that did
%%%     not exist (rolled up the same way);</li>
%%% <li>groups: the same messages by the label ids and nodes of their
%%%     ends (msgflow_labels:group_end/2), rows of the same shape keyed
%%%     `{{LabelIdS, NodeS}, {LabelIdR, NodeR}}', so that views by name,
%%%     module, application or node read one row per pair of label ids
%%%     instead of every pair; an endpoint's group is the one it had when
%%%     it was first seen;</li>
%%% <li>calls: the round trips of sampled calls by call edge
%%%     (msgflow_call_row), merged from msgflow_tracer:calls_take/1 with
%%%     each snapshot; an edge whose caller or server exited is rolled up into
%%%     their groups as a window closes; and `call_groups', the same by the
%%%     label ids and nodes of their ends, as `groups' for the pairs;</li>
%%% <li>the labels (msgflow_labels);</li>
%%% <li>what the views ask most, which the aggregate keeps as it folds so
%%%     that a view costs what it shows, not the pairs held: the busiest
%%%     pairs, the sends to names, the last window's ends
%%%     (msgflow_store_kept).</li>
%%% </ul>
%%% `max_memory' bounds the aggregate, these tables and the tracer's
%%% together: once they reach it, new pairs go to overflow (check_memory/2).
%%% Windows are numbered from 1; the open one is `closed + 1'.  The
%%% collector's work grows with the endpoints new to the run and with what
%%% views ask, not with the deltas (the NIF counts the messages in the
%%% tracees' own scheduler threads, and the snapshot folds them in C); with
%%% the history on, the deltas come as terms, which its log needs.
-module(msgflow_store).
-include("msgflow_store.hrl").

-export([new/1, merge_deltas/2, merge_deltas/3, memory/1]).
-export([new/0, start_run/2, restart_window/1, clear/2, retire/1, drain/2, drain_begin/2, drain_step/2,
         close_window/1, sample_waits/1,
         closed/1, handle/2, balance/1, figures/1, census_start/1, census/1, census_left/1]).
-export([take_log/1, log_off/1, seed/2, open_for/2, snapshot_at/1, merged/1, copies/2, tracer_room/1]).
-export_type([store/0, window/0, state/0, drain/0]).

%% Receivers with at least this many senders in a window get their
%% message queue length read when the window closes (for hotspots).
-define(QLEN_MIN_SENDERS, 2).
-define(QLEN_MAX_SAMPLED, 50).
%% reductions the labelling of a new endpoint is worth, a tenth of it
%% (label_new/1), and endpoints labelled a call of agg_new_ends
-define(MERGE_REDUCTIONS, 50).
-define(LABEL_STEP, 500).
%% how long the tables a reset or a new run replaced are kept for the
%% views still reading them, in ms
-define(RETIRE_MS, 60000).

%% The state the collector holds (opaque to it: the record is msgflow_store.hrl's).
-type state() :: #store{}.
%% A snapshot being merged a chunk at a time (drain_begin/1): its session,
%% the NIF's take, and when it began (system ms: the store's snapshot_at
%% once it is merged).
-opaque drain() :: {msgflow_tracer:session(), {fold | terms, msgflow_tracer:take()}, integer()}.

%% A closed window: its number, end (system time, ms), length (ms) and the
%% message_queue_len, read as it closed, of the local receivers with the
%% most senders in it; the waits and shares busy and blocked of the
%% busiest receivers of the window before and of their callers, and the
%% node's run queues (msgflow_store_waits; `node_load' absent in windows
%% kept by 0.2.0).
-type window() :: #{n := pos_integer(), at := integer(), window_ms := non_neg_integer(),
                    queue_lens := #{pid() => non_neg_integer()},
                    waits := #{pid() => msgflow_store_waits:wait()},
                    node_load => msgflow_store_waits:node_load()}.

%% What views read (msgflow_rows:build/2): the tables and the figures of
%% the run, as of the call that returned it; what the store keeps as
%% deltas merge: `busiest' (msgflow_store_index: by messages since start, in
%% the open window, in the last closed one), `named' (the pairs sent to
%% local names, `{Key}'), `window_ends' (the last closed window's
%% receivers `{R, Senders, Messages}' and senders `{S, Receivers,
%% Messages}' of no replies, those with `min_partners' or more).
-type store() :: #{pairs := msgflow_row_table:table(), rolled_up := msgflow_row_table:table(),
                   dead := msgflow_row_table:table(),
                   groups := msgflow_row_table:table(), calls := ets:tid(), call_groups := ets:tid(),
                   call_slowest := ets:tid(), sizes := ets:tid(),
                   call_figures := #{busy := non_neg_integer(), displaced := non_neg_integer()},
                   labels := msgflow_labels:tables(),
                   node := node(), running := boolean(),
                   started_at := integer() | undefined, stopped_at := integer() | undefined,
                   taken_at := integer(), snapshot_at := integer() | undefined,
                   closed := non_neg_integer(), open_ms := non_neg_integer(),
                   windows := [window()],
                   busiest := #{total := msgflow_store_index:reader(), open := msgflow_store_index:reader(),
                                last := msgflow_store_index:reader() | none},
                   named := msgflow_row_table:table(),
                   window_ends := #{last := {ets:tid(), ets:tid()} | none,
                                    min_partners := pos_integer()},
                   memory_full := boolean(),
                   interval := pos_integer(), sample := off | {pos_integer(), pos_integer()},
                   call_sample := off | pos_integer(),
                   events := non_neg_integer(), dead_letters := non_neg_integer(),
                   overflow := non_neg_integer(), rolled_up_messages := non_neg_integer(),
                   overflow_top := msgflow_store_topk:handle(),
                   skipped := non_neg_integer(), proc_events_dropped := non_neg_integer(),
                   new_tracer := msgflow | term(),
                   %% the collector was behind (msgflow_collector:store/1):
                   %% the tables as they stood, not after a snapshot taken
                   %% for the caller
                   behind => boolean(),
                   %% a store replayed from a range of the history
                   %% (msgflow_history_range)
                   range => #{from := integer(), to := integer(), windows := pos_integer(),
                              traced_ms := non_neg_integer()}}.

%% @doc An empty store; its tables belong to the calling process.
-spec new() -> state().
new() ->
    new(#{}).

%% @doc new/0 with busiest indexes of other sizes: `total' and `window'
%% pairs (tests make them small, to see them let go of pairs).
-spec new(msgflow_store_kept:caps()) -> state().
new(Caps) ->
    Opts = {60, 8, Caps},
    #store{agg = new_agg(Opts), agg_opts = Opts,
           calls = new_calls(), call_groups = new_call_groups(), call_slowest = new_call_slowest(),
           sizes = msgflow_store_sizes:new(),
           waits = msgflow_store_waits:new(), labels = msgflow_labels:new(), kept = msgflow_store_kept:new(),
           topk = msgflow_store_topk:new()}.

%% @doc One chunk of deltas merged, as a snapshot's are (take/2): pairs
%% `{Sender, Receiver, Messages}' or `{Sender, Receiver, Messages, Kind,
%% Tag}'.  The owner only; tests feed a store with it.
-spec merge_deltas([msgflow_tracer:delta()], state()) -> state().
merge_deltas(Deltas, S) ->
    merge({Deltas, [], [], 0, 0}, S).

%% @doc merge_deltas/2 with Replies too: deltas of replies to the aliases
%% of their receiver, counted for it (rolled-up rows), as a snapshot's
%% chunk gives them.
-spec merge_deltas([msgflow_tracer:delta()], [msgflow_tracer:delta()], state()) -> state().
merge_deltas(Deltas, Replies, S) ->
    merge({Deltas, [], Replies, 0, 0}, S).

%% @doc The store set for a run with these options (`windows',
%% `max_pairs', `max_kinds'); its window opens now.
-spec start_run(state(), msgflow_opts:run_opts()) -> state().
start_run(S, #{windows := Keep, max_pairs := Max} = Opts) ->
    MaxKinds = maps:get(max_kinds, Opts, 8),
    {_, _, Caps} = S#store.agg_opts,
    AggOpts = {Keep, MaxKinds, Caps},
    %% (an aggregate of other settings is made anew: a store that starts
    %% a run is empty, or resumes one of the same settings)
    Agg = case AggOpts =:= S#store.agg_opts of
              true -> S#store.agg;
              false -> new_agg(AggOpts)
          end,
    ok = msgflow_tracer:agg_full(Agg, false, Max),
    restart_window(S#store{keep = Keep, max_pairs = Max, proc_events_dropped = 0,
                           agg = Agg, agg_opts = AggOpts,
                           max_kinds = MaxKinds,
                           max_memory = maps:get(max_memory, Opts, infinity), full = false,
                           count_scale = case maps:get(sample, Opts, off) of
                                             {T, P} -> P / T;
                                             off -> 1
                                         end,
                           log = new_log(S#store.log, maps:get(history, Opts, off)),
                           log_start = now_ms()}).

%% The open window's log of messages for the history (none without it).
new_log(Old, History) ->
    _ = Old =/= none andalso ets:delete(Old),
    case History of
        off -> none;
        _ -> ets:new(msgflow_window_log, [set, protected])
    end.

%% @doc The history stopped: the window's log deleted, and no more kept.
%% The owner only.
-spec log_off(state()) -> state().
log_off(S = #store{log = none}) -> S;
log_off(S = #store{log = Log}) -> ets:delete(Log), S#store{log = none}.

%% @doc With `history' on, the log of the window that closed last: its
%% messages by pair, kind and tag (`{{Sender, Receiver, {LabelIdS, NodeS},
%% {LabelIdR, NodeR}, Kind, Tag}, Messages}', Kind and Tag `none' with
%% kinds off), in a table the caller now owns (its to give away or
%% delete), with the window's number, end (`at', system ms), length
%% (`ms'), the run's `scale' and the labels' `label_ids' table; the store
%% logs the next window in a new table.  `none' with history off.  The
%% owner only, after close_window/1.
-spec take_log(state()) -> {none, state()} | {ets:tid(), map(), state()}.
take_log(S = #store{log = none}) ->
    {none, S};
take_log(S = #store{log = Log, windows = [#{n := N, at := At} | _], labels = L}) ->
    %% the log's own length: since the last was taken (a reset restarts
    %% the window, not the log)
    Now = now_ms(),
    {Log, #{n => N, at => At, ms => Now - S#store.log_start, scale => S#store.count_scale,
            label_ids => maps:get(label_ids, msgflow_labels:tables(L))},
     S#store{log = ets:new(msgflow_window_log, [set, protected]), log_start = Now}}.

%% @doc Endpoints labelled as given, `[{Endpoint, Label, Module,
%% Application}]', before any row names them (a store replayed from the
%% history: its endpoints' labels are those it recorded, not read from
%% the VM).  The owner only.
-spec seed(state(), [{msgflow_tracer:endpoint(), binary(), atom(), atom()}]) -> state().
seed(S = #store{labels = L}, Ends) ->
    S#store{labels = lists:foldl(fun({E, Label, M, A}, Acc) ->
                                         msgflow_labels:seed(Acc, E, Label, M, A)
                                 end, L, Ends)}.

%% @doc The open window made Ms long (a replayed store: its one window is
%% the range it was replayed from).
-spec open_for(state(), non_neg_integer()) -> state().
open_for(S, Ms) -> S#store{win_start = now_ms() - Ms}.

%% @doc The open window starts now.
-spec restart_window(state()) -> state().
restart_window(S) -> S#store{win_start = now_ms()}.

%% @doc The counts and windows forgotten: a new run (`new_run') forgets
%% the labels too, a reset (`keep_labels') keeps the kinds, names and
%% process events (the endpoints still are what they were) and forgets which
%% endpoint has which, since no row holds them any more.  The tables are
%% made anew, not emptied object by object (which would hold the collector
%% for a million pairs); the old ones are sent to the calling process as
%% `{retire, Tables}' ?RETIRE_MS later (then retire/1), so that a view
%% that began before reads the store as it was.
-spec clear(state(), keep_labels | new_run) -> state().
clear(S = #store{calls = Calls, call_groups = CG, call_slowest = CS, sizes = Sz}, What) ->
    {Labels, OldLabels} = case What of
                              keep_labels -> msgflow_labels:forget_endpoints(S#store.labels);
                              new_run -> msgflow_labels:clear(S#store.labels)
                          end,
    {Kept, OldKept} = msgflow_store_kept:clear(S#store.kept),
    {TopK, OldTopK} = msgflow_store_topk:clear(S#store.topk),
    erlang:send_after(?RETIRE_MS, self(), {retire, [Calls, CG, CS, Sz | OldLabels] ++ OldKept ++ OldTopK}),
    %% (the old aggregate goes once no view holds its handle)
    Agg = new_agg(S#store.agg_opts),
    ok = msgflow_tracer:agg_full(Agg, false, S#store.max_pairs),
    S#store{closed = 0, gone_at = 0, windows = [], durations = #{}, events = 0,
            agg = Agg,
            calls = new_calls(), call_groups = new_call_groups(), call_slowest = new_call_slowest(),
            call_figures = #{busy => 0, displaced => 0},
            sizes = msgflow_store_sizes:new(), waits = msgflow_store_waits:new(),
            kept = Kept, topk = TopK, full = false,
            dead_letters = 0, overflow = 0, rolled_up_messages = 0, calls_left_out = 0, sweeps = #{},
            labels = Labels}.

%% @doc The census of the processes alive as a run starts begins
%% (msgflow_labels:census_start/1); census/1 reads them a step at a time.
-spec census_start(state()) -> state().
census_start(S = #store{labels = L}) ->
    S#store{labels = msgflow_labels:census_start(L)}.

%% @doc One step of the census (msgflow_labels:census/2): `more' while
%% processes are left.
-spec census(state()) -> {more | done, state()}.
census(S = #store{labels = L, closed = C}) ->
    {More, L1} = msgflow_labels:census(L, C),
    {More, S#store{labels = L1}}.

%% @doc Processes the census has yet to read.
-spec census_left(state()) -> non_neg_integer().
census_left(#store{labels = L}) ->
    msgflow_labels:census_left(L).

%% @doc Deletes tables clear/2 replaced (deleted whole: a view that
%% still reads one finds it there or gone, never in part; a table of a
%% million rows holds the owner for slices of 2-4 ms: msgflow_tables).
%% The owner only.
-spec retire([ets:tid()]) -> ok.
retire(Tables) ->
    msgflow_tables:delete(Tables).

%% @doc Windows closed since the run started.
-spec closed(state()) -> non_neg_integer().
closed(#store{closed = C}) -> C.

%%% Taking a snapshot

%% @doc Session's snapshot merged in.  The totals taken so far must survive
%% whatever happens to the tracer module: while it is being loaded its
%% NIFs are missing (undef); after it was deleted and purged, the code
%% loaded next has a new session resource type and cannot read this
%% session (badarg; the VM has by then removed the module's trace flags);
%% another caller of snapshot/1 on this session makes it raise `busy'.
%% Each way the turn is skipped: nothing is lost, the next snapshot takes
%% it.
-spec drain(msgflow_tracer:session(), state()) -> state().
drain(Session, S) ->
    case drain_begin(Session, S) of
        none -> S;
        Take -> drain_rest(Take, S)
    end.

drain_rest(Take, S) ->
    case drain_step(Take, S) of
        {more, S1} -> drain_rest(Take, S1);
        {done, S1} -> S1
    end.

%% @doc A snapshot begun, to be merged a chunk at a time (drain_step/2):
%% what take/2 does, in steps between which the owner may do other work
%% (answer calls).  The snapshot folds into the aggregate in C; with the
%% history on, it comes as terms instead, which the window's log needs
%% (a delta's kind in that window), merged here.  `none' when none can
%% begin now (see take/2: the turn is skipped, nothing is lost).  The
%% owner only, one take at a time.
-spec drain_begin(msgflow_tracer:session(), state()) -> drain() | none.
drain_begin(Session, #store{agg = Agg, log = Log}) ->
    try
        case Log of
            none -> {fold, msgflow_tracer:snapshot_fold_start(Session, Agg)};
            _ -> {terms, msgflow_tracer:snapshot_start(Session)}
        end
    of
        Take ->
            {Session, Take, erlang:system_time(millisecond)}
    catch
        error:undef -> none;
        error:{not_loaded, _} -> none;
        error:badarg -> none;
        error:busy -> none
    end.

%% @doc The next chunk of Take (about 1,024 deltas: a few ms of work)
%% merged, then its sampled round trips, then its sampled sizes 1,024
%% edges a step: `{more, S}', or `{done, S}' once the last was.  The
%% owner only.
-spec drain_step(drain(), state()) -> {more | done, state()}.
drain_step({Session, Handle, _}, S = #store{sizes_of = Handle}) ->
    drain_sizes(Session, Handle, S);
drain_step(Take = {Session, Handle, At}, S) ->
    case drain_chunk(Take, S) of
        {more, S1} ->
            {more, S1};
        {done, S1} ->
            %% the snapshot's time, once its pairs are merged; then the
            %% round trips, and the sizes 1,024 edges a step
            S2 = drain_calls(Session, S1#store{snapshot_at = At}),
            drain_sizes(Session, Handle, S2)
    end.

drain_sizes(Session, Handle, S = #store{sizes = Z}) ->
    case msgflow_store_sizes:take_some(Session, Z, table(S, pairs)) of
        more -> {more, S#store{sizes_of = Handle}};
        done -> {done, S#store{sizes_of = none}}
    end.

%% One chunk of the snapshot merged, so that this heap never holds a
%% whole snapshot.  A chunk that cannot be read (the tracer module
%% deleted or reloaded between two chunks: see take/2) ends the turn with
%% the chunks merged so far; the rest stays in the NIF's tables or goes
%% with the old module.
drain_chunk({Session, Take, _}, S0) ->
    S = limit_tracer(Session, S0, check_memory(Session, S0)),
    case next_chunk(Take) of
        {more, Pairs, Dead, Replies} ->
            {more, merge({Pairs, Dead, Replies, 0, 0}, drain_proc_events(Session, S))};
        {done, Pairs, Dead, Replies, Overflow, OverflowDead, Top} ->
            %% and once more after the last chunk, so that what info()
            %% and the views say of the bound is true of the store now
            S1 = merge({Pairs, Dead, Replies, Overflow, OverflowDead}, drain_proc_events(Session, S)),
            S2 = S1#store{topk = msgflow_store_topk:merge(S1#store.topk, Top)},
            {done, limit_tracer(Session, S2, check_memory(Session, S2))};
        {fold, {more, N, Msgs, NoRow}} ->
            %% (counted as it is folded: a drain the module's reload cuts
            %% short has counted what is in the aggregate; the spawns
            %% before the new endpoints are labelled, a step's share of
            %% them, so that the owner answers calls in between)
            S1 = counted(Msgs, NoRow, 0, 0, S#store{merged = S#store.merged + N}),
            {more, stepped(label_step(drain_proc_events(Session, S1)))};
        {fold, {done, N, Msgs, NoRow, Overflow, OverflowDead, Top, AggTop}} ->
            S1 = counted(Msgs, NoRow, Overflow, OverflowDead,
                         label_new(drain_proc_events(Session, S#store{merged = S#store.merged + N}))),
            S2 = S1#store{topk = msgflow_store_topk:merge(msgflow_store_topk:merge(S1#store.topk, Top), AggTop)},
            {done, limit_tracer(Session, S2, check_memory(Session, S2))};
        gone ->
            {done, S}
    end.

%% The counters of a drain's or a merge's messages: of pairs, replies to
%% aliases and dead letters ({P, R, D}), of those the ones that found no
%% row, and the tracer's overflow.
counted({P, R, D}, {NoP, NoR, _}, Overflow, OverflowDead, S) ->
    S#store{events = S#store.events + P + R + Overflow,
            overflow = S#store.overflow + NoP + NoR + Overflow,
            rolled_up_messages = S#store.rolled_up_messages + R - NoR,
            dead_letters = S#store.dead_letters + D + OverflowDead}.

%% The endpoints the aggregate made since it was last asked (the first
%% rows that name them), all of them: labelled (read from the VM now,
%% while they may still be alive), their group ends written back, so that
%% the deltas that waited for them are in their groups' rows.
label_new(S) ->
    case label_step(S) of
        {S1, done} -> S1;
        S1 -> label_new(S1)
    end.

stepped({S, done}) -> S;
stepped(S) -> S.

%% ?LABEL_STEP of them, between two steps of a drain: on a node's first
%% take every process is new (12,000 labelled at once held the collector
%% for 2.4 s, and calls to it waited that long).
label_step(S = #store{agg = A, labels = L0}) ->
    case msgflow_tracer:agg_new_ends(A, ?LABEL_STEP) of
        [] ->
            {S, done};
        New ->
            {Groups, L} = lists:foldl(fun({Num, E}, {Acc, L1}) ->
                                              %% labelling reads the VM
                                              erlang:bump_reductions(10 * ?MERGE_REDUCTIONS),
                                              L2a = case is_port(E) andalso node(E) =:= node() of
                                                        true -> msgflow_labels:hold_port(L1, E, msgflow_tracer:agg_partner(A, Num));
                                                        false -> msgflow_labels:hold(L1, E)
                                                    end,
                                              {G, L2} = msgflow_labels:group_end(L2a, E),
                                              {[{Num, G} | Acc], L2}
                                      end, {[], L0}, New),
            ok = msgflow_tracer:agg_set_groups(A, Groups),
            S#store{labels = L}
    end.

%% The bytes the tracer's tables hold now (0 when it cannot say): read
%% before each chunk, not once as the drain begins, since the tables go on
%% growing while a drain runs.  With the figure of the drain's start, a
%% take begun during a burst of 1,000,000 new pairs once let the store
%% and the tracer reach 276 MB under the default bound of 256 MiB.
nif_bytes(Session) ->
    try msgflow_tracer:session_info(Session) of
        #{memory := B} -> B
    catch error:_ -> 0
    end.

%% `full' once the store's tables and Session's (nif_bytes/1) reach
%% max_memory: read before each chunk of about 1,024 deltas, so the bound
%% is passed by one chunk's new pairs at most.  It is not undone while the
%% run goes on (rows are only rolled up, never freed one by one, and a
%% bound that came and went would count a pair now and not the next
%% moment); reset/0 and a new run start empty.
%% The collector's own heap counts too (the process that calls this: the
%% store's owner), and so do the copies it holds of the store's handle
%% and figures (copies/2) and the room the summary of the busiest pairs
%% in overflow may still take (msgflow_store_topk:to_come/1), so that
%% `own_memory' stays within the bound.
check_memory(_, S = #store{max_memory = infinity}) -> S;
check_memory(_, S = #store{full = true}) -> S;
check_memory(Session, S) ->
    case nif_bytes(Session) >= tracer_room(S) of
        true ->
            ok = msgflow_tracer:agg_full(S#store.agg, true, S#store.max_pairs),
            S#store{full = true};
        false ->
            S
    end.

%% @doc The bytes max_memory leaves the tracer's tables: what the store's
%% tables, the collector's heap, its copies of the handle and the room
%% the summary of the busiest pairs in overflow may still take leave of
%% it; `infinity' without a bound.  The owner only.
-spec tracer_room(state()) -> integer() | infinity.
tracer_room(#store{max_memory = infinity}) ->
    infinity;
tracer_room(S = #store{max_memory = Max}) ->
    Max - memory(S) - heap(Max) - S#store.copies - msgflow_store_topk:to_come(S#store.topk).

%% The collector's heap as the bound counts it: what it is now, or what
%% it grows to while it merges (a chunk's terms, the labels' state: 1-5 MB
%% measured), a sixth of the bound at most 16 MB, whichever is more.
heap(Max) ->
    {memory, Heap} = process_info(self(), memory),
    max(Heap, min(Max div 6, 16 * 1024 * 1024)).

%% The store just reached max_memory (S0 was not full, S1 is): the
%% tracer's tables may hold no more than what is left of the bound, as
%% many entries as those bytes make at the bytes an entry takes there now
%% (their number as they stand, when nothing is left), so that what
%% msgflow holds stays within it.
limit_tracer(Session, #store{full = false}, S1 = #store{full = true}) ->
    try msgflow_tracer:session_info(Session) of
        #{memory := Bytes, entries := Entries} ->
            Left = tracer_room(S1),
            Per = max(1, Bytes div max(1, Entries)),
            ok = msgflow_tracer:session_limit(Session, max(1, max(Entries, Left div Per))),
            S1
    catch
        error:_ -> S1
    end;
limit_tracer(_, _, S1) ->
    S1.

%% @doc The bytes its owner now holds in copies of the store's handle and
%% figures (what the collector publishes for the views while it is
%% behind): counted in max_memory.  The owner only.
-spec copies(state(), non_neg_integer()) -> state().
copies(S, Bytes) ->
    S#store{copies = Bytes}.

%% @doc The store's bytes: its aggregate's and its tables', the labels'
%% own ones too (a table gone counts nothing: under `make soak' an open
%% window's ends table was once found gone, cause not found yet).
-spec memory(state()) -> non_neg_integer().
memory(S) ->
    #{bytes := AggBytes} = msgflow_tracer:agg_info(S#store.agg),
    AggBytes + ets_memory(S).

ets_memory(S) ->
    Words = lists:sum([W || T <- [S#store.calls, S#store.call_groups,
                                  S#store.call_slowest, S#store.sizes]
                                  ++ msgflow_store_kept:tables(S#store.kept)
                                  ++ msgflow_store_topk:tables(S#store.topk)
                                  ++ msgflow_labels:all_tables(S#store.labels)
                                  ++ [L || L <- [S#store.log], L =/= none],
                            W <- [ets:info(T, memory)], is_integer(W)]),
    Words * erlang:system_info(wordsize).

%% The sampled calls' round trips since the last take (msgflow_store_calls).
drain_calls(Session, S = #store{calls = T, call_groups = G, call_slowest = Ix, labels = L, closed = C}) ->
    P = table(S, pairs),
    %% past max_memory or max_pairs (new pairs go to overflow) a new edge
    %% only for a pair held (its pair's messages are counted in a row):
    %% the rest are left out, counted
    Admit = case S#store.full orelse at_max_pairs(S) of
                false -> fun(_, _) -> true end;
                true -> fun(Caller, Server) -> msgflow_row_table:member(P, {Caller, Server}) end
            end,
    case msgflow_store_calls:take(Session, {T, G, Ix, P}, C + 1, Admit, L) of
        none -> S;
        {Figures, Left, Rowless, L1} ->
            %% an edge of a pair with no row: the calls' sweep has work
            %% (msgflow_rollup:follow/1)
            GoneAt = case Rowless of true -> C; false -> S#store.gone_at end,
            S#store{call_figures = Figures, calls_left_out = S#store.calls_left_out + Left, labels = L1,
                    gone_at = GoneAt}
    end.

%% The call edges of the pairs rolled up, a slice a window (msgflow_store_calls).
rollup_calls(S = #store{calls = T, call_slowest = Ix, labels = L, sweeps = Sw}) ->
    {L1, Next} = msgflow_store_calls:rollup({T, Ix}, table(S, pairs), L, maps:get(calls, Sw, start)),
    S#store{labels = L1, sweeps = Sw#{calls => Next}}.

next_chunk({Mode, Take}) ->
    try
        case Mode of
            fold -> {fold, msgflow_tracer:snapshot_fold(Take)};
            terms -> msgflow_tracer:snapshot_next(Take)
        end
    catch
        error:undef -> gone;
        error:{not_loaded, _} -> gone;
        error:badarg -> gone
    end.

%% Process events are taken after each chunk is read and before it is merged: a
%% process's spawn was recorded before it could send, so every sender in
%% the chunk that was spawned while tracing has its process event here.
%% Past max_memory they are taken and dropped (counted in
%% proc_events_dropped): they only label the ends of new pairs, which then
%% go to overflow, and kept they grow with the node's live processes (a
%% soak whose clients lived longer under load held 245,000-311,000 of
%% them, 27-33 MB).
drain_proc_events(Session, S) ->
    try msgflow_tracer:proc_events_take(Session) of
        {Chunk, Dropped} ->
            S1 = case S#store.full of
                     false ->
                         S#store{labels = msgflow_labels:proc_events(S#store.labels, Chunk, S#store.closed),
                                 proc_events_dropped = S#store.proc_events_dropped + Dropped};
                     true ->
                         S#store{proc_events_dropped = S#store.proc_events_dropped + Dropped + length(Chunk)}
                 end,
            %% until the NIF has none left
            case Chunk of
                [] -> S1;
                _ -> drain_proc_events(Session, S1)
            end
    catch
        error:_ -> S
    end.

%% A chunk of deltas as terms (a snapshot's with the history on, a
%% replayed store's, the tests') added to the aggregate, counted, its new
%% endpoints labelled and, with the history on, logged.
merge({Pairs, Dead, Replies, Overflow, OverflowDead}, S0) ->
    A = S0#store.agg,
    Sum = fun(Ds) -> lists:sum([element(3, D) || D <- Ds]) end,
    NoP = msgflow_tracer:agg_add(A, pairs, Pairs),
    NoR = msgflow_tracer:agg_add(A, rolled_up, Replies),
    NoD = msgflow_tracer:agg_add(A, dead, Dead),
    S1 = counted({Sum(Pairs), Sum(Replies), Sum(Dead)}, {NoP, NoR, NoD}, Overflow, OverflowDead,
                 S0#store{merged = S0#store.merged + length(Pairs) + length(Dead) + length(Replies)}),
    S2 = label_new(S1),
    S3 = S2#store{topk = msgflow_store_topk:merge(S2#store.topk, msgflow_tracer:agg_take_top(A))},
    case S3#store.log of
        none -> S3;
        Log -> lists:foldl(fun(D, Acc) -> log(Log, D, Acc) end, S3, Pairs ++ Replies)
    end.

%% A delta in the window's log for the history, by its ends' groups (as
%% the aggregate's group rows have them), kind and tag; one that found no
%% row too (the history has what was sent, as the totals do).
log(Log, D, S = #store{labels = L0}) ->
    {Sn, R, N, K, T} = case D of
                           {Sn0, R0, N0} -> {Sn0, R0, N0, none, none};
                           {_, _, _, _, _} -> D
                       end,
    {GS, L1} = msgflow_labels:group_end(L0, Sn),
    {GR, L2} = msgflow_labels:group_end(L1, R),
    Key = {Sn, R, GS, GR, K, T},
    _ = ets:update_counter(Log, Key, N, {Key, 0}),
    S#store{labels = L2}.

%% The pairs hold max_pairs rows: a new pair goes to overflow (and its
%% call edge is not kept) until some roll up.
at_max_pairs(S = #store{max_pairs = Max}) ->
    msgflow_row_table:size(table(S, pairs)) >= Max.

%% A table of the aggregate as views read it (msgflow_row_table).
table(#store{agg = A}, Which) -> {msgflow_agg, A, Which}.

new_agg({Keep, MaxKinds, Caps}) ->
    msgflow_store_kept:new_agg(Keep, MaxKinds, Caps).

%%% Windows

%% @doc The open window closed now (the next opens): its length and queue
%% lengths kept, then the rows done with are rolled up (msgflow_rollup), and
%% the call edges of the pairs rolled up.
-spec close_window(state()) -> state().
close_window(S = #store{win_start = Start, closed = Closed, windows = Ws, durations = Durs,
                        keep = Keep, labels = L, agg = A}) ->
    Now = now_ms(),
    N = Closed + 1,
    Tables = msgflow_labels:tables(L),
    %% the open window's receivers with the messages the waits need
    In = fun(MS) ->
                 ets:match_spec_run(msgflow_tracer:agg_open_receivers(A, 0, msgflow_store_waits:min_messages(), all),
                                    ets:match_spec_compile(MS))
         end,
    Busiest = fun(Max) -> element(1, msgflow_tracer:agg_busiest(A, open, Max)) end,
    {Waits, NodeLoad, WaitsNext} = msgflow_store_waits:close(S#store.waits, In,
                                                             fun(R) -> msgflow_labels:canon(Tables, R) end,
                                                             Now - Start, S#store.count_scale, Busiest),
    W = #{n => N, at => erlang:system_time(millisecond), window_ms => Now - Start,
          queue_lens => queue_lens(S), waits => Waits, node_load => NodeLoad},
    %% the aggregate's window closed: its busiest index and its ends
    %% become the last window's, kept for the views
    ok = msgflow_tracer:agg_close(A, Now - Start, msgflow_store_kept:min_partners()),
    Kept = msgflow_store_kept:close_window(S#store.kept, A),
    S1 = msgflow_rollup:sweep(S#store{win_start = Now, closed = N, windows = lists:sublist([W | Ws], Keep),
                                      durations = maps:remove(N - Keep, Durs#{N => Now - Start}),
                                      kept = Kept, waits = WaitsNext,
                                      labels = msgflow_labels:purge(msgflow_labels:prune_proc_events(L, N))}),
    %% what follows the rows rolled up, while some were lately
    case msgflow_rollup:follow(S1) of
        true -> sweep_sizes(rollup_calls(S1));
        false -> S1
    end.

%% @doc The busiest receivers' queue lengths read now, for their wait in
%% the open window (msgflow_store_waits); the collector, between ticks.
-spec sample_waits(state()) -> state().
sample_waits(S = #store{waits = W}) ->
    S#store{waits = msgflow_store_waits:sample(W)}.

%% The sizes of pairs rolled up dropped, a slice a window (msgflow_store_sizes).
sweep_sizes(S = #store{sizes = T, sweeps = Sw}) ->
    S#store{sweeps = Sw#{sizes => msgflow_store_sizes:sweep(T, table(S, pairs), maps:get(sizes, Sw, start))}}.

%% message_queue_len of the local receivers that had the most senders in
%% the window (fan-in candidates), read now.  Only the ?QLEN_MAX_SAMPLED
%% with the most senders are read; names join their pid's count.  The
%% aggregate gives the receivers with ?QLEN_MIN_SENDERS senders or more.
queue_lens(#store{agg = A, labels = L}) ->
    Tables = msgflow_labels:tables(L),
    Merged = lists:foldl(fun({R, N, _}, Acc) ->
                                 case msgflow_labels:canon(Tables, R) of
                                     P when is_pid(P), node(P) =:= node() ->
                                         Acc#{P => N + maps:get(P, Acc, 0)};
                                     _ -> Acc
                                 end
                         end, #{}, msgflow_tracer:agg_open_receivers(A, ?QLEN_MIN_SENDERS, 1, ?QLEN_MAX_SAMPLED)),
    Cands = [{N, P} || {P, N} <- maps:to_list(Merged), N >= ?QLEN_MIN_SENDERS],
    Top = lists:sublist(lists:reverse(lists:sort(Cands)), ?QLEN_MAX_SAMPLED),
    maps:from_list([{P, Len} || {_, P} <- Top,
                                {message_queue_len, Len} <- [process_info(P, message_queue_len)]]).

%%% What others read

%% @doc The handle views read: the tables and figures of the store, with
%% the run's own figures (Run: `node', `running', `started_at',
%% `stopped_at', `interval', `sample', `call_sample', `skipped',
%% `new_tracer').
-spec handle(state(), map()) -> store().
handle(S, Run) ->
    (maps:merge(Run, msgflow_store_kept:handle(S#store.kept, S#store.agg, S#store.closed)))#{
         pairs => table(S, pairs), rolled_up => table(S, rolled_up), dead => table(S, dead),
         groups => table(S, groups), calls => S#store.calls, call_groups => S#store.call_groups,
         call_slowest => S#store.call_slowest,
         call_figures => S#store.call_figures,
         sizes => S#store.sizes,
         labels => msgflow_labels:tables(S#store.labels),
         taken_at => erlang:system_time(millisecond), snapshot_at => S#store.snapshot_at,
         closed => S#store.closed, open_ms => now_ms() - S#store.win_start,
         windows => lists:reverse(S#store.windows),
         memory_full => S#store.full,
         events => S#store.events, dead_letters => S#store.dead_letters,
         overflow => S#store.overflow, rolled_up_messages => S#store.rolled_up_messages,
         overflow_top => msgflow_store_topk:handle(S#store.topk),
         proc_events_dropped => S#store.proc_events_dropped}.

%% @doc When the last snapshot merged was taken (system ms): every send
%% traced before it is counted; `undefined' before the first.
-spec snapshot_at(state()) -> integer() | undefined.
snapshot_at(S) -> S#store.snapshot_at.

%% @doc The deltas merged into this store since it was made.
-spec merged(state()) -> non_neg_integer().
merged(S) -> S#store.merged.

%% @doc Where every message counted is: `events' (messages counted),
%% `held' (the sum of the pairs' totals: reads every pair, about 10 ms
%% for 100,000), `rolled up' (messages in rolled-up rows), `overflow';
%% `events = held + rolled up + overflow' always.
-spec balance(state()) -> #{events := non_neg_integer(), held := non_neg_integer(),
                            rolled_up := non_neg_integer(), overflow := non_neg_integer()}.
balance(S) ->
    Held = msgflow_tracer:agg_sum(S#store.agg, pairs),
    #{events => S#store.events, held => Held, rolled_up => S#store.rolled_up_messages,
      overflow => S#store.overflow}.

%% @doc The store's part of msgflow:info/0: figures, table sizes and the
%% memory of its tables (bytes).
-spec figures(state()) -> map().
figures(S) ->
    #{pairs := Pairs, rolled_up := RolledUp, groups := Groups} = msgflow_tracer:agg_info(S#store.agg),
    #{pairs => Pairs,
      events => S#store.events,
      dead_letters => S#store.dead_letters,
      overflow => S#store.overflow,
      rolled_up => S#store.rolled_up_messages,
      rolled_up_rows => RolledUp,
      group_rows => Groups,
      call_edges => ets:info(S#store.calls, size),
      calls_busy => maps:get(busy, S#store.call_figures),
      calls_displaced => maps:get(displaced, S#store.call_figures),
      calls_left_out => S#store.calls_left_out,
      proc_events_dropped => S#store.proc_events_dropped,
      store_memory => memory(S),
      memory_full => S#store.full,
      max_memory => S#store.max_memory,
      windows => length(S#store.windows)}.

%% ordered: a pair's call edges are one range of keys (msgflow_call_row:of_pair/3)
new_calls() -> ets:new(msgflow_calls, [ordered_set, protected]).

new_call_groups() -> ets:new(msgflow_call_groups, [set, protected]).

new_call_slowest() -> ets:new(msgflow_call_slowest, [ordered_set, protected]).

now_ms() ->
    erlang:monotonic_time(millisecond).
