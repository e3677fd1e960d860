%%% @doc msgflow's store: the counts of a run, in ETS tables the collector
%%% process owns (protected: any process may read them, only the
%%% collector writes), and the windows.  The collector calls these
%%% functions with the state it holds (`#store{}', msgflow_store.hrl);
%%% what views read is handle/2's map.
%%% <ul>
%%% <li>pairs: one row per distinct pair as the VM reported it
%%%     (msgflow_row);</li>
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
%%%     `{{LabelIdS, NodeS}, {LabelIdR, NodeR}}', added to as each delta is
%%%     merged, so that views by name, module, application or node read
%%%     one row per pair of label ids instead of every pair; an
%%%     endpoint's kind is the one it had when its messages were merged;</li>
%%% <li>calls: the round trips of sampled calls by call edge
%%%     (msgflow_call_row), merged from msgflow_tracer:calls_take/1 with
%%%     each snapshot; an edge whose caller or server exited is rolled up into
%%%     their groups as a window closes; and `call_groups', the same by the
%%%     label ids and nodes of their ends, as `groups' for the pairs;</li>
%%% <li>the labels (msgflow_labels);</li>
%%% <li>what the views ask most, kept up to date as each delta is merged
%%%     so that a view costs what it shows, not the pairs held
%%%     (msgflow_store_kept: the busiest pairs, the sends to names, each
%%%     window's ends).</li>
%%% </ul>
%%% `max_memory' bounds its tables and the tracer's together: once they
%%% reach it, new pairs go to overflow (check_memory/2).
%%% (About 500 lines: the pairs, the rolled-up rows and the groups share
%%% one row update, add_to_row/6, which keeps them here together.)
%%% Windows are numbered from 1; the open one is `closed + 1'.  Merging
%%% is the collector's only load: it grows with the distinct pairs per
%%% window, never with the messages (the NIF counts them in the tracees'
%%% own scheduler threads).
-module(msgflow_store).
-include("msgflow_store.hrl").

-export([new/1, merge_deltas/2, merge_deltas/3]).
-export([new/0, start_run/2, restart_window/1, clear/2, retire/1, take/2, take_begin/1, take_step/2,
         close_window/1, sample_waits/1,
         closed/1, handle/2, balance/1, figures/1, census_start/1, census/1, census_left/1]).
-export([take_log/1, log_off/1, seed/2, open_for/2, snapshot_at/1, merged/1, moved/3, copies/2, tracer_room/1]).
-export_type([store/0, window/0, state/0, take/0]).

%% Receivers with at least this many senders in a window get their
%% message queue length read when the window closes (for hotspots).
-define(QLEN_MIN_SENDERS, 2).
-define(QLEN_MAX_SAMPLED, 50).
%% reductions one merged delta is worth (see add_row/3)
-define(MERGE_REDUCTIONS, 50).
%% how long the tables a reset or a new run replaced are kept for the
%% views still reading them, in ms
-define(RETIRE_MS, 60000).

%% The state the collector holds (opaque to it: the record is msgflow_store.hrl's).
-type state() :: #store{}.
%% A snapshot being merged a chunk at a time (take_begin/1): its session,
%% the NIF's take, and when it began (system ms: the store's snapshot_at
%% once it is merged).
-opaque take() :: {msgflow_tracer:session(), msgflow_tracer:take(), integer()}.

%% A closed window: its number, end (system time, ms), length (ms) and the
%% message_queue_len, read as it closed, of the local receivers with the
%% most senders in it; the waits of the busiest receivers of the window
%% before (msgflow_store_waits).
-type window() :: #{n := pos_integer(), at := integer(), window_ms := non_neg_integer(),
                    queue_lens := #{pid() => non_neg_integer()},
                    waits := #{pid() => msgflow_store_waits:wait()}}.

%% What views read (msgflow_rows:build/2): the tables and the figures of
%% the run, as of the call that returned it; what the store keeps as
%% deltas merge: `busiest' (msgflow_busiest: by messages since start, in
%% the open window, in the last closed one), `named' (the pairs sent to
%% local names, `{Key}'), `window_ends' (the last closed window's
%% receivers `{R, Senders, Messages}' and senders `{S, Receivers,
%% Messages}' of no replies, those with `min_partners' or more).
-type store() :: #{pairs := ets:tid(), rolled_up := ets:tid(), dead := ets:tid(),
                   groups := ets:tid(), calls := ets:tid(), call_groups := ets:tid(),
                   call_slowest := ets:tid(), sizes := ets:tid(),
                   call_figures := #{busy := non_neg_integer(), displaced := non_neg_integer()},
                   labels := msgflow_labels:tables(),
                   node := node(), running := boolean(),
                   started_at := integer() | undefined, stopped_at := integer() | undefined,
                   taken_at := integer(), snapshot_at := integer() | undefined,
                   closed := non_neg_integer(), open_ms := non_neg_integer(),
                   windows := [window()],
                   busiest := #{total := msgflow_busiest:reader(), open := msgflow_busiest:reader(),
                                last := msgflow_busiest:reader() | none},
                   named := ets:tid(),
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
    #store{pairs = new_rows(), rolled_up_rows = new_rows(), dead = new_dead(), groups = new_rows(),
           calls = new_calls(), call_groups = new_call_groups(), call_slowest = new_call_slowest(),
           sizes = msgflow_store_sizes:new(),
           waits = msgflow_store_waits:new(), labels = msgflow_labels:new(), kept = msgflow_store_kept:new(Caps),
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
    restart_window(S#store{keep = Keep, max_pairs = Max, proc_events_dropped = 0,
                           max_kinds = maps:get(max_kinds, Opts, 8),
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
clear(S = #store{pairs = P, rolled_up_rows = F, dead = D, groups = G, calls = Calls, call_groups = CG,
                 call_slowest = CS, sizes = Sz}, What) ->
    {Labels, OldLabels} = case What of
                              keep_labels -> msgflow_labels:forget_endpoints(S#store.labels);
                              new_run -> msgflow_labels:clear(S#store.labels)
                          end,
    {Kept, OldKept} = msgflow_store_kept:clear(S#store.kept),
    {TopK, OldTopK} = msgflow_store_topk:clear(S#store.topk),
    erlang:send_after(?RETIRE_MS, self(), {retire, [P, F, D, G, Calls, CG, CS, Sz | OldLabels] ++ OldKept ++ OldTopK}),
    S#store{closed = 0, gone_at = 0, windows = [], durations = #{}, events = 0,
            pairs = new_rows(), rolled_up_rows = new_rows(), dead = new_dead(), groups = new_rows(),
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
-spec take(msgflow_tracer:session(), state()) -> state().
take(Session, S) ->
    case take_begin(Session) of
        none -> S;
        Take -> take_rest(Take, S)
    end.

take_rest(Take, S) ->
    case take_step(Take, S) of
        {more, S1} -> take_rest(Take, S1);
        {done, S1} -> S1
    end.

%% @doc A snapshot begun, to be merged a chunk at a time (take_step/2):
%% what take/2 does, in steps between which the owner may do other work
%% (answer calls).  `none' when none can begin now (see take/2: the turn
%% is skipped, nothing is lost).  The owner only, one take at a time.
-spec take_begin(msgflow_tracer:session()) -> take() | none.
take_begin(Session) ->
    try msgflow_tracer:snapshot_start(Session) of
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
-spec take_step(take(), state()) -> {more | done, state()}.
take_step({Session, Handle, _}, S = #store{sizes_of = Handle}) ->
    take_sizes(Session, Handle, S);
take_step(Take = {Session, Handle, At}, S) ->
    case take_chunk(Take, S) of
        {more, S1} ->
            {more, S1};
        {done, S1} ->
            %% the snapshot's time, once its pairs are merged; then the
            %% round trips, and the sizes 1,024 edges a step
            S2 = take_calls(Session, S1#store{snapshot_at = At}),
            take_sizes(Session, Handle, S2)
    end.

take_sizes(Session, Handle, S = #store{sizes = Z, pairs = P}) ->
    case msgflow_store_sizes:take_some(Session, Z, P) of
        more -> {more, S#store{sizes_of = Handle}};
        done -> {done, S#store{sizes_of = none}}
    end.

%% One chunk of the snapshot merged, so that this heap never holds a
%% whole snapshot.  A chunk that cannot be read (the tracer module
%% deleted or reloaded between two chunks: see take/2) ends the turn with
%% the chunks merged so far; the rest stays in the NIF's tables or goes
%% with the old module.
take_chunk({Session, Take, _}, S0) ->
    S = limit_tracer(Session, S0, check_memory(Session, S0)),
    case next_chunk(Take) of
        {more, Pairs, Dead, Replies} ->
            {more, merge({Pairs, Dead, Replies, 0, 0}, take_proc_events(Session, S))};
        {done, Pairs, Dead, Replies, Overflow, OverflowDead, Top} ->
            %% and once more after the last chunk, so that what info()
            %% and the views say of the bound is true of the store now
            S1 = merge({Pairs, Dead, Replies, Overflow, OverflowDead}, take_proc_events(Session, S)),
            S2 = S1#store{topk = msgflow_store_topk:merge(S1#store.topk, Top)},
            {done, limit_tracer(Session, S2, check_memory(Session, S2))};
        gone ->
            {done, S}
    end.

%% The bytes the tracer's tables hold now (0 when it cannot say): read
%% before each chunk, not once as the take begins, since the tables go on
%% growing while a take runs.  With the figure of the take's start, a
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
    S#store{full = nif_bytes(Session) >= tracer_room(S)}.

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

%% The store's tables' bytes, the labels' own ones too (a table gone
%% counts nothing: under `make soak' an open window's ends table was once
%% found gone, cause not found yet).
memory(S) ->
    Words = lists:sum([W || T <- [S#store.pairs, S#store.rolled_up_rows, S#store.dead,
                                  S#store.groups, S#store.calls, S#store.call_groups,
                                  S#store.call_slowest, S#store.sizes]
                                  ++ msgflow_store_kept:tables(S#store.kept)
                                  ++ msgflow_store_topk:tables(S#store.topk)
                                  ++ msgflow_labels:all_tables(S#store.labels)
                                  ++ [L || L <- [S#store.log], L =/= none],
                            W <- [ets:info(T, memory)], is_integer(W)]),
    Words * erlang:system_info(wordsize).

%% The sampled calls' round trips since the last take (msgflow_store_calls).
take_calls(Session, S = #store{calls = T, call_groups = G, call_slowest = Ix, labels = L, closed = C,
                               pairs = P}) ->
    %% past max_memory or max_pairs (new pairs go to overflow) a new edge
    %% only for a pair held (its pair's messages are counted in a row):
    %% the rest are left out, counted
    Admit = case S#store.full orelse at_max_pairs(S) of
                false -> fun(_, _) -> true end;
                true -> fun(Caller, Server) -> ets:member(P, {Caller, Server}) end
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
rollup_calls(S = #store{calls = T, call_slowest = Ix, pairs = P, labels = L, sweeps = Sw}) ->
    {L1, Next} = msgflow_store_calls:rollup({T, Ix}, P, L, maps:get(calls, Sw, start)),
    S#store{labels = L1, sweeps = Sw#{calls => Next}}.

next_chunk(Take) ->
    try
        msgflow_tracer:snapshot_next(Take)
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
take_proc_events(Session, S) ->
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
                _ -> take_proc_events(Session, S1)
            end
    catch
        error:_ -> S
    end.

merge({Pairs, Dead, Replies, Overflow, OverflowDead}, S) ->
    S0 = lists:foldl(fun add_reply/2,
                     S#store{merged = S#store.merged + length(Pairs) + length(Dead) + length(Replies)},
                     Replies),
    S1 = lists:foldl(fun(D, Acc) -> add_row(pairs, D, Acc) end, S0, Pairs),
    {DeadN, L} = lists:foldl(fun({Sn, R, N}, {A, L0}) ->
                                     {A + N, add_dead({Sn, R}, N, S1#store.dead, L0)}
                             end, {OverflowDead, S1#store.labels}, Dead),
    S1#store{overflow = S1#store.overflow + Overflow,
             events = S1#store.events + Overflow, labels = L,
             dead_letters = S1#store.dead_letters + DeadN}.

%% N dead letters of a pair (a new row holds its endpoints' labels).
add_dead(K = {Sn, R}, N, D, L) ->
    case ets:insert_new(D, {K, N}) of
        true -> msgflow_labels:hold_pair(L, Sn, R);
        false -> _ = ets:update_counter(D, K, N), L
    end.

%% Replies to the aliases of a process, which the NIF counts for the
%% process: added at once to the rolled-up row (sender, owner), since each
%% alias of a gen:call is used once.
add_reply(D, S) ->
    S1 = add_row(rolled_up, D, S),
    case S1#store.overflow =:= S#store.overflow of
        true -> S1#store{rolled_up_messages = S1#store.rolled_up_messages + element(3, D)};
        false -> S1             %% past max_memory: in overflow
    end.

%% N messages of (Sn, R) in the open window, in the pairs or the rolled up
%% rows (a pair counted on several threads comes once per thread), of
%% kind and tag KT when the delta has them.  A pair past max_pairs
%% distinct pairs goes to overflow.
add_row(Which, {Sn, R, N}, S) ->
    add_row(Which, Sn, R, N, none, S);
add_row(Which, {Sn, R, N, Kind, Tag}, S) ->
    add_row(Which, Sn, R, N, {Kind, Tag}, S).

add_row(Which, Sn, R, N, KT, S0) ->
    S = add_pair_row(Which, Sn, R, N, KT, S0),
    case S#store.overflow =:= S0#store.overflow of
        true -> add_group(Sn, R, N, KT, S);
        false -> S              %% in no pair: in no group either
    end.

%% The delta's messages added to the row of its ends' label ids (made
%% when new; never rolled up: there are as many as pairs of kinds).
add_group(Sn, R, N, KT, S = #store{groups = G, closed = C}) ->
    erlang:bump_reductions(?MERGE_REDUCTIONS),
    {GS, L1} = msgflow_labels:group_end(S#store.labels, Sn),
    {GR, L2} = msgflow_labels:group_end(L1, R),
    K = {GS, GR},
    case ets:lookup(G, K) of
        [Row] -> _ = add_to_row(G, K, Row, N, KT, S);
        [] -> ets:insert(G, msgflow_row:new(K, N, C + 1, KT))
    end,
    log(S#store.log, Sn, R, GS, GR, KT, N),
    S#store{labels = L2}.

log(none, _, _, _, _, _, _) ->
    ok;
log(Log, Sn, R, GS, GR, KT, N) ->
    {K, T} = case KT of none -> {none, none}; _ -> KT end,
    Key = {Sn, R, GS, GR, K, T},
    _ = ets:update_counter(Log, Key, N, {Key, 0}),
    ok.

%% N messages (of kind and tag KT, or none) added to Row, the row of key K
%% in table T, in the open window: `{open, Total, Count}' when Row had
%% messages in it already, `{first, ...}' when these are its first of the
%% window; Total its messages since start and Count in the open window,
%% now.
add_to_row(T, K, Row, N, KT, S = #store{closed = C}) ->
    Open = C + 1,
    case msgflow_row:last_window(Row) =:= Open andalso msgflow_row:same_kinds(Row, KT) of
        true ->
            [Total, Count] = ets:update_counter(T, K, msgflow_row:count_in_open(N)),
            {open, Total, Count};
        false ->
            add_kinds_to_row(T, Row, N, KT, S)
    end.

%% (the row's kinds change, or this is its first delta of the window)
add_kinds_to_row(T, Row, N, KT, #store{closed = C, max_kinds = MaxK, keep = Keep, durations = Durs}) ->
    Open = C + 1,
    case msgflow_row:last_window(Row) of
        Open ->
            Row1 = msgflow_row:add_in_open(Row, N),
            ets:insert(T, msgflow_row:add_kind(Row1, N, KT, MaxK)),
            {open, msgflow_row:total(Row1), msgflow_row:count(Row1)};
        _ ->
            Row1 = msgflow_row:add(Row, N, Open, Open - Keep, Durs),
            ets:insert(T, msgflow_row:add_kind(Row1, N, KT, MaxK)),
            {first, msgflow_row:total(Row1), N}
    end.

add_pair_row(Which, Sn, R, N, KT, S = #store{closed = C, events = E}) ->
    %% a few ETS calls (more for a new pair, below): count them as the
    %% work they are, so that a slice of merging stays well under 1 ms
    erlang:bump_reductions(?MERGE_REDUCTIONS),
    T = case Which of pairs -> S#store.pairs; rolled_up -> S#store.rolled_up_rows end,
    K = {Sn, R},
    Open = C + 1,
    case ets:lookup(T, K) of
        [Row] ->
            {First, Total, Count} = add_to_row(T, K, Row, N, KT, S),
            kept(First, Which, K, N, KT, Total, Count, S#store{events = E + N});
        [] ->
            %% a new pair past max_pairs or max_memory, or a new row of
            %% replies past max_memory (one per call pair on a node of
            %% gen_server calls): its messages in overflow
            case S#store.full orelse (Which =:= pairs andalso at_max_pairs(S)) of
                true ->
                    S#store{events = E + N, overflow = S#store.overflow + N,
                            topk = msgflow_store_topk:add(S#store.topk, K, N)};
                false ->
                    %% labelling reads the new endpoints from the VM
                    erlang:bump_reductions(10 * ?MERGE_REDUCTIONS),
                    ets:insert(T, msgflow_row:new(K, N, Open, KT)),
                    Kept = case Which of
                               pairs -> msgflow_store_kept:new_pair(S#store.kept, K);
                               rolled_up -> S#store.kept
                           end,
                    L = msgflow_labels:hold_pair(S#store.labels, Sn, R),
                    kept(first, Which, K, N, KT, N, N, S#store{events = E + N, labels = L, kept = Kept})
            end
    end.

%% The pairs table holds max_pairs rows: a new pair goes to overflow
%% (and its call edge is not kept) until some roll up.
at_max_pairs(#store{pairs = P, max_pairs = Max}) ->
    ets:info(P, size) >= Max.

%% What the store keeps for the views of N messages of pair K, now at
%% Total since start and Count in the open window (msgflow_store_kept),
%% with what K's row in the other table (pairs, rolled-up rows: a pair's
%% replies to its receiver's aliases) holds: the busiest indexes rank a
%% key by both, as the views by process show it.
kept(First, Which, K, N, KT, Total, Count, S = #store{kept = Kp}) ->
    {OtherTotal, OtherCount} = other_row(Which, K, S),
    S#store{kept = msgflow_store_kept:add(Kp, K, N, KT, First, Total + OtherTotal, Count + OtherCount)}.

%% K's messages since start and in the open window in the table other
%% than Which ({0, 0} when it has no row there).
other_row(Which, K, S = #store{closed = C}) ->
    T = case Which of
            pairs -> S#store.rolled_up_rows;
            rolled_up -> S#store.pairs
        end,
    Open = C + 1,
    case ets:lookup(T, K) of
        [] -> {0, 0};
        [Row] -> {msgflow_row:total(Row), case msgflow_row:last_window(Row) of
                                              Open -> msgflow_row:count(Row);
                                              _ -> 0
                                          end}
    end.

%% @doc A row of key K was rolled up into key K1's rolled-up row
%% (msgflow_rollup): K leaves the busiest indexes and the sends to names,
%% and is ranked again by the row it has left in the other table, if any
%% (a row rolled up was idle for two windows: in no window index); K1 is
%% ranked by all its rows hold now.  The owner only.
-spec moved(state(), {term(), term()}, {term(), term()}) -> state().
moved(S = #store{kept = Kp}, K, K1) ->
    ranked(ranked(S#store{kept = msgflow_store_kept:forget(Kp, K)}, K), K1).

%% K ranked in the index by messages since start by its rows in both
%% tables.
ranked(S = #store{kept = Kp}, K) ->
    Total = lists:sum([msgflow_row:total(Row) || T <- [S#store.pairs, S#store.rolled_up_rows],
                                                 Row <- ets:lookup(T, K)]),
    S#store{kept = msgflow_store_kept:ranked(Kp, K, Total)}.

%%% Windows

%% @doc The open window closed now (the next opens): its length and queue
%% lengths kept, then the rows done with are rolled up (msgflow_rollup), and
%% the call edges of the pairs rolled up.
-spec close_window(state()) -> state().
close_window(S = #store{win_start = Start, closed = Closed, windows = Ws, durations = Durs,
                        keep = Keep, labels = L}) ->
    Now = now_ms(),
    N = Closed + 1,
    Tables = msgflow_labels:tables(L),
    Kept0 = S#store.kept,
    {Waits, WaitsNext} = msgflow_store_waits:close(S#store.waits,
                                                   fun(MS) -> msgflow_store_kept:open_receivers(Kept0, MS) end,
                                                   fun(R) -> msgflow_labels:canon(Tables, R) end,
                                                   Now - Start, S#store.count_scale),
    W = #{n => N, at => erlang:system_time(millisecond), window_ms => Now - Start,
          queue_lens => queue_lens(S), waits => Waits},
    %% the last window's aggregates are kept for the views; those of the
    %% window before go once no view can be reading them
    {Kept, Old} = msgflow_store_kept:close_window(S#store.kept),
    _ = Old =/= [] andalso erlang:send_after(?RETIRE_MS, self(), {retire, Old}),
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
sweep_sizes(S = #store{sizes = T, pairs = P, sweeps = Sw}) ->
    S#store{sweeps = Sw#{sizes => msgflow_store_sizes:sweep(T, P, maps:get(sizes, Sw, start))}}.

%% message_queue_len of the local receivers that had the most senders in
%% the window (fan-in candidates), read now.  Only the ?QLEN_MAX_SAMPLED
%% with the most senders are read: a threshold from a sample, then those
%% above it and up to that many equal to it, from ETS (so that a window
%% with 100,000 receivers costs no sort of them all); names join their
%% pid's count.
queue_lens(#store{kept = Kept, labels = L}) ->
    Tables = msgflow_labels:tables(L),
    Thr = case msgflow_store_kept:open_receivers(Kept, [{{'_', '$1', '_'}, [], ['$1']}], 1000) of
              Ns when length(Ns) > ?QLEN_MAX_SAMPLED ->
                  max(?QLEN_MIN_SENDERS,
                      lists:nth(?QLEN_MAX_SAMPLED, lists:sort(fun erlang:'>='/2, Ns)));
              _ -> ?QLEN_MIN_SENDERS
          end,
    Above = msgflow_store_kept:open_receivers(
              Kept, [{{'$1', '$2', '_'}, [{'orelse', {'>', '$2', Thr}, {'not', {is_pid, '$1'}}}],
                      [{{'$1', '$2'}}]}]),
    Equal = lists:sublist(msgflow_store_kept:open_receivers(
                            Kept, [{{'$1', '$2', '_'}, [{'==', '$2', Thr}, {is_pid, '$1'}],
                                    [{{'$1', '$2'}}]}], ?QLEN_MAX_SAMPLED), ?QLEN_MAX_SAMPLED),
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

%%% What others read

%% @doc The handle views read: the tables and figures of the store, with
%% the run's own figures (Run: `node', `running', `started_at',
%% `stopped_at', `interval', `sample', `call_sample', `skipped',
%% `new_tracer').
-spec handle(state(), map()) -> store().
handle(S, Run) ->
    (maps:merge(Run, msgflow_store_kept:handle(S#store.kept)))#{pairs => S#store.pairs, rolled_up => S#store.rolled_up_rows, dead => S#store.dead,
         groups => S#store.groups, calls => S#store.calls, call_groups => S#store.call_groups,
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
    Held = ets:foldl(fun(Row, A) -> A + msgflow_row:total(Row) end, 0, S#store.pairs),
    #{events => S#store.events, held => Held, rolled_up => S#store.rolled_up_messages,
      overflow => S#store.overflow}.

%% @doc The store's part of msgflow:info/0: figures, table sizes and the
%% memory of its tables (bytes).
-spec figures(state()) -> map().
figures(S) ->
    #{pairs => ets:info(S#store.pairs, size),
      events => S#store.events,
      dead_letters => S#store.dead_letters,
      overflow => S#store.overflow,
      rolled_up => S#store.rolled_up_messages,
      rolled_up_rows => ets:info(S#store.rolled_up_rows, size),
      group_rows => ets:info(S#store.groups, size),
      call_edges => ets:info(S#store.calls, size),
      calls_busy => maps:get(busy, S#store.call_figures),
      calls_displaced => maps:get(displaced, S#store.call_figures),
      calls_left_out => S#store.calls_left_out,
      proc_events_dropped => S#store.proc_events_dropped,
      store_memory => memory(S),
      memory_full => S#store.full,
      max_memory => S#store.max_memory,
      windows => length(S#store.windows)}.

%% The rows tables (pairs, rolled up, groups): the ones views scan whole
%% (a top of every pair, pairs(), an export) while the collector writes
%% them, so their locks are per bucket (`write_concurrency'): a scan holds
%% one part at a time, and the collector's next write waits for that part
%% at most.  With one lock for the table, a process reading every pair
%% over and over while the collector merged a million new pairs kept the
%% collector blocked in its writes (its scheduler with it): 70 s of work
%% and 497 slices over 1 ms, for a merge of 2.0 s alone; with these, 5.8-5.9
%% s and 5-9 slices, alone 2.3 s (`make bench-scale', its last lines).
%% The other tables keep one lock: views read them a few rows at a time,
%% and with fine locks on all of them the merge alone was a fifth slower.
new_rows() ->
    ets:new(msgflow_pairs, [set, protected, {write_concurrency, true}]).

new_dead() -> ets:new(msgflow_dead, [set, protected]).

%% ordered: a pair's call edges are one range of keys (msgflow_call_row:of_pair/3)
new_calls() -> ets:new(msgflow_calls, [ordered_set, protected]).

new_call_groups() -> ets:new(msgflow_call_groups, [set, protected]).

new_call_slowest() -> ets:new(msgflow_call_slowest, [ordered_set, protected]).

now_ms() ->
    erlang:monotonic_time(millisecond).
