%% The store's state, shared by msgflow_store (tables, merging, windows)
%% and msgflow_rollup (rolling up): no other module sees it.  The collector
%% process holds it and is the only one to call either module with it.
-record(store, {
    %% the rows, in C (msgflow_tracer:agg_*, c_src/mf_agg.h): the pairs
    %% (msgflow_row), the rolled-up rows, the dead letters ({{S, R},
    %% Messages}) and the groups (the pairs' and rolled-up rows' messages
    %% by the labels of their ends, keyed {{LabelIdS, NodeS}, {LabelIdR,
    %% NodeR}}, that views by name, module, application or node read
    %% instead of every pair); the busiest indexes and each window's ends
    agg :: msgflow_tracer:agg(),
    %% its settings: windows of history, kinds a row keeps, busiest sizes
    agg_opts :: {pos_integer(), pos_integer(), msgflow_store_kept:caps()},
    %% sampled calls' round trips by call edge (msgflow_call_row)
    calls :: ets:tid(),
    %% the same by the label ids and nodes of their ends: rows of
    %% msgflow_call_row keyed {{LabelIdC, NodeC}, {LabelIdS, NodeS}, Kind,
    %% Tag}, kept as edges are taken, that views by name, module,
    %% application or node read instead of every edge (as `groups' for
    %% the pairs)
    call_groups :: ets:tid(),
    %% the call edges by the highest bucket of their round trips
    %% (msgflow_store_calls), for the views that ask for the slowest
    call_slowest :: ets:tid(),
    %% the tracer's figures of them (msgflow_tracer:calls_take/1)
    call_figures = #{busy => 0, displaced => 0} :: #{busy := non_neg_integer(),
                                                    displaced := non_neg_integer()},
    %% sampled messages' sizes by edge (msgflow_store_sizes)
    sizes :: ets:tid(),
    %% the busiest receivers' queue readings (msgflow_store_waits)
    waits :: msgflow_store_waits:waits(),
    %% messages sent for each one counted: P / T with `sample => {T, P}'
    %% (the queues are read all the time, messages counted in T of P)
    count_scale = 1 :: number(),
    labels :: msgflow_labels:labels(),
    %% the last window's ends the views read (msgflow_store_kept)
    kept :: msgflow_store_kept:kept(),
    %% the busiest pairs among the messages in overflow
    topk :: msgflow_store_topk:topk(),
    %% max_memory: bytes the store's tables and the tracer's may take
    %% together; `full' once they do (new pairs go to overflow, as past
    %% max_pairs), read at each chunk of a snapshot
    max_memory = infinity :: pos_integer() | infinity,
    full = false :: boolean(),
    %% where the slow pass of the sweep is, per table
    sweeps = #{} :: #{pairs | rolled_up | dead | calls | sizes => term()},
    %% the last window that closed with an endpoint a row names gone
    %% (msgflow_labels:any_gone/2), or in which a call edge was taken for
    %% a pair with no row: the sweeps of what follows the rows (call
    %% edges, sizes) run while that is recent (msgflow_rollup:follow/1)
    gone_at = 0 :: non_neg_integer(),
    keep = 60 :: pos_integer(),             %% windows kept (the `windows' option)
    max_pairs = 1 :: pos_integer(),
    max_kinds = 8 :: pos_integer(),         %% kinds and tags a row keeps
    win_start = 0 :: integer(),             %% monotonic ms of the open window
    closed = 0 :: non_neg_integer(),        %% windows closed since start
    windows = [] :: [msgflow_store:window()],  %% kept closed windows, newest first
    %% the kept windows' lengths by number, for the lookup each merged
    %% delta makes
    durations = #{} :: #{pos_integer() => non_neg_integer()},
    events = 0 :: non_neg_integer(),
    dead_letters = 0 :: non_neg_integer(),
    overflow = 0 :: non_neg_integer(),
    rolled_up_messages = 0 :: non_neg_integer(),
    proc_events_dropped = 0 :: non_neg_integer(),
    merged = 0 :: non_neg_integer(),   %% deltas merged since the store was made
    calls_left_out = 0 :: non_neg_integer(),  %% sampled calls of new edges past max_memory
    copies = 0 :: non_neg_integer(),  %% bytes of the owner's copies of the handle (copies/2)
    snapshot_at :: integer() | undefined,   %% system time of the last snapshot
    %% the take (its NIF handle) whose pairs are merged and whose sampled
    %% sizes are being added, a chunk a step; none between takes
    sizes_of = none :: term(),
    %% with `history' on: the open window's messages by pair, kind and
    %% tag, `{{Sender, Receiver, GroupS, GroupR, Kind, Tag}, Messages}'
    %% (group ends as msgflow_labels:group_end/2 gives them), handed to
    %% the history's writer as the window closes (take_log/1)
    log = none :: ets:tid() | none,
    log_start = 0 :: integer()              %% monotonic ms the log began
}).
