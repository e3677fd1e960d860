%%% @doc msgflow: who sends messages to whom, how often.
%%%
%%% Counting happens inside an erl_tracer NIF on the tracees' own
%%% scheduler threads, so no trace message is ever sent and memory grows
%%% with the number of distinct (sender, receiver) pairs, not with the
%%% number of messages.  A collector process pulls a snapshot of the counts
%%% every `interval' ms and keeps totals and per-window counts for rates
%%% (messages per second).
%%%
%%% ```
%%% 1> msgflow:start().
%%% ok
%%% 2> msgflow:top().
%%% 3> msgflow:stop().
%%% '''
%%%
%%% This module is msgflow's whole API; every other module is internal.
%%% The views printed here (top/2, matrix/2, kinds/2, calls/1, hotspots/1,
%%% flows/0, nodes/0, print/2) return `ok'; view/2 returns the value behind
%%% each.  Options are a map or a keyword list.  Errors have one shape,
%%% naming the offending value and what is allowed: `{error, {badopt,
%%% {Key, Value}, Allowed}}', `{error, {badarg, {Name, Value}, Allowed}}'.
%%% Guides (in the repository's guides/): production.md, shell.md,
%%% kinds-and-labels.md, calls.md, flows.md, cluster.md, web.md,
%%% hotspots.md, reports.md, limits.md.
-module(msgflow).

-export([start/0, start/1, start_on/2, stop/0, reset/0, wait/1, help/0,
         trace/1, untrace/1,
         pairs/0, pairs/1, top/0, top/1, top/2, kinds/2, history/2, matrix/1, matrix/2, view/2,
         print/1, print/2, hotspots/0, hotspots/1, bottlenecks/0, why/1,
         info/0, sync/0, export/2, export/3, dump/0,
         follow/1, follow/2, follow_calls/2, flows/0, unfollow/0, nodes/0,
         web/0, web/1, web_stop/0, calls/0, calls/1, diff/2, diff/3]).

-export_type([endpoint/0, pair_count/0, error/0, pair_kind_count/0, grouping/0, group/0,
              window_count/0, flow/0]).

-type endpoint() :: msgflow_tracer:endpoint().
%% A sender or receiver as the VM reported it: a pid or port for senders;
%% for receivers also a registered name, `{Name, Node}', a remote pid or an
%% alias reference.

-type pair_count() :: msgflow_pairs_view:pair_count().
%% `{Sender, Receiver, Messages}'.

-type error() :: msgflow_opts:error() | {error, not_started} | {error, term()}.
%% What a call refuses: a bad option or argument (naming it and what is
%% allowed), msgflow never started, or another reason the doc names.

-type pair_kind_count() :: msgflow_pairs_view:pair_kind_count().
%% `{Sender, Receiver, Kind, Tag, Messages}'.

-type grouping() :: msgflow_rows:grouping().
%% How rows are grouped: `process', `name', `module', `application',
%% `node', or `kind' (and tag).

-type group() :: msgflow_labels:group().
%% A group of endpoints as views show it: a label (binary or string).

-type window_count() :: msgflow_history_view:window_count().
%% One window of a pair: `#{at => SystemMs, window_ms, count}' (`open'
%% for the window not closed yet).

-type flow() :: msgflow_flow_value:flow().
%% A followed request: `#{label, messages, pairs, processes, depth,
%% duration_us, events, dropped, labels}' (follow/2).

%% @doc Same as `start(#{})': trace sends of all processes.
-spec start() -> ok | error().
start() ->
    start(#{}).

%% @doc Starts counting.  Options (a map or a keyword list; all optional):
%% <ul>
%% <li>`procs => all | new | existing | [pid() | atom()]' whose sends are
%%     counted (default `all'; names are resolved now);</li>
%% <li>`interval => Ms', 10..3600000, between snapshots, which is also the
%%     window for rates (default 1000);</li>
%% <li>`max_pairs => N', cap on distinct pairs held; past it messages go
%%     to the `overflow' tally, so totals stay exact (default 2000000:
%%     `max_memory' is reached first, at about 1,000,000 pairs);</li>
%% <li>`max_memory => Bytes | infinity', cap on the bytes the tracer's
%%     tables and the store take together (the tracer gets half); once
%%     reached, new pairs go to `overflow' as past max_pairs (pairs held
%%     go on counting while the tracer's half has room for them; totals
%%     stay exact either way), and info(), top's header, the web page and
%%     `/metrics' say so (default 268435456, 256 MiB: 1,000,000 pairs of
%%     one kind at 240 MB; guides/production.md);</li>
%% <li>`kinds => boolean()': tell messages apart by kind and tag (`call
%%     get', `cast', `reply', `info', ...; default true);</li>
%% <li>`max_kinds => N', 1..1000: kinds and tags kept per pair, the rest
%%     counted as `{Kind, other}' (default 8);</li>
%% <li>`call_sample => N | off': the round trip of 1 in N gen:calls per
%%     scheduler thread is measured (default 64; needs kinds);</li>
%% <li>`call_timeout => Ms': a sampled call with no reply after Ms is
%%     unanswered (default 5000);</li>
%% <li>`size_sample => N | off': the message of 1 in N sends per scheduler
%%     thread is measured, its heap words and off-heap binary bytes (default
%%     64; guides/sizes-and-wait.md);</li>
%% <li>`duration => Ms | infinity', stop by itself after Ms (default
%%     infinity);</li>
%% <li>`windows => N', windows kept for rates and hotspots (default 60);</li>
%% <li>`sample => {TracedMs, PeriodMs} | off': trace only TracedMs of every
%%     PeriodMs (`1 =< TracedMs < PeriodMs'); between slices the trace flags
%%     are off, so traced processes pay nothing.  Counts are what was
%%     measured; rates are extrapolated to the whole period and marked as
%%     estimates.  Not with `procs => new' (default off);</li>
%% <li>`trace_mode => auto | session | legacy': a trace session of its own
%%     (OTP 27+, beside other tools) or the node's legacy tracing (default
%%     auto: a session where the VM has them);</li>
%% <li>`nodes => local | all | [node()]': this node only (default), or
%%     this one and the nodes named (all: every connected one, and those
%%     that join): the views cover them all (guides/cluster.md);
%%     `on_node_error => abort | skip' (abort); `grace => Ms' (10000): a
%%     node whose coordinator went stops counting that much later;</li>
%% <li>`owner => Pid': the run stops `grace' ms after Pid exits or its
%%     node disconnects, so that a tool that started it cannot leave it on
%%     by dying (msgflow-top passes its own C node's pid).  A run with no
%%     `duration' asked from a remote shell (the caller's group leader on
%%     another node) is owned by that group leader: it stops `grace' ms
%%     after that shell or its node goes, unless `detach => true'.</li>
%% <li>`history => Dir | #{dir => Dir, max_bytes => Bytes, tiers =>
%%     #{segment => Windows, tier0 => Segments, tier1 => Segments}} | off':
%%     every window's messages by pair, kind and tag written to segment
%%     files in Dir as it closes (by a process of its own, never the
%%     collector), kept across reset/0, stop/0 and restarts, read back by
%%     every view's `from' and `to' and by diff/2; `max_bytes' (64 MiB)
%%     bounds the files; a segment holds `segment' windows (60), the newest
%%     `tier0' segments (10) keep the windows as they closed, the next
%%     `tier1' (60) ten windows merged into one, older ones one window
%%     each (the downsampling tiers: guides/history.md; default off).  The
%%     flat keys of 0.1 (`history_bytes', `history_segment',
%%     `history_whole', `history_tenths') still work and log once that
%%     they go in 0.3.  A Dir that cannot be written is `{error,
%%     {history, Dir, Reason}}'.</li>
%% </ul>
%% Errors: `{error, {badopt, {Key, Value}, Allowed}}' for a bad value or
%% an unknown key (Allowed: the values or the keys), `{error, {noproc,
%% PidOrName}}' for a procs entry that is not alive, `{error,
%% already_started}' while running, `{error, {nif_not_loaded, _}}' when
%% priv/msgflow_tracer.so could not be loaded, `{error, {unsupported,
%% {otp_release, Rel}, [<<"25 or newer">>]}}' on a release before 25,
%% `{error, {nodes, [{Node, Why}]}}' for nodes that could not be started.
%% Where the tracer's load checks refused this VM's term layout, counting
%% goes on through the API and a warning at start says what that costs
%% (see info/0's `fast_extra', `alias_owner', `plain_refs', `fast_terms',
%% `fast_resources', `native_records').
%% Starting clears the data of the previous run.
-spec start(map() | [{atom(), term()}]) -> ok | error().
start(Opts) ->
    msgflow_cluster:start(Opts).

%% @doc Starts counting on node Node only (not here), shipping this build
%% there when it has no msgflow; for a node without msgflow in its
%% release.  Opts are start/1's (`procs' all, new or existing; no
%% `nodes').  The beams and the NIF of this build are written to the
%% node's `filename:basedir(user_cache, "msgflow")' and loaded; a node of
%% another OTP release or NIF version is refused before anything is
%% written, `{error, {incompatible, {otp_release, Rel, nif_version,
%% Nif}}}'.  The run there stops by itself `grace' ms (10,000) after this
%% node's msgflow stops or disconnects.  See guides/production.md.
-spec start_on(node(), map() | [{atom(), term()}]) -> ok | error().
start_on(Node, Opts) ->
    msgflow_cluster:start_on(Node, Opts).

%% @doc Stops counting, on every node of a cluster too.  When it returns,
%% msgflow's trace flags are off and every send traced before the call is
%% in pairs/0.  The data stays until reset/0 or the next start.  `ok' also
%% when not running.
-spec stop() -> ok | {error, {timeout, msgflow_collector}}.
stop() ->
    msgflow_cluster:stop().

%% @doc Forgets the counts (tracing, if on, goes on), on every node of a
%% cluster that this node's coordinator started (a node counting for
%% another coordinator, or for itself, keeps its counts).
-spec reset() -> ok | {error, {timeout, msgflow_collector}}.
reset() ->
    msgflow_cluster:reset().

%% @doc Waits until counting stops (by `duration' or stop/0), at most
%% Timeout ms.  `ok', or `timeout'.
-spec wait(timeout()) -> ok | timeout.
wait(Timeout) ->
    msgflow_collector:wait(Timeout).

%% @doc The pairs held, `[{Sender, Receiver, Messages}]' (messages since
%% start), busiest first, receivers exactly as the VM reported them,
%% exact (a snapshot taken now while running), of every node of a
%% cluster (each has 30 s to answer).  When a node did not answer in time
%% the value says so: `{partial, Pairs, [{Node, Reason}]}', the pairs of
%% the nodes that did.  Replies to local aliases and the pairs of exited
%% processes are in the views instead (rolled up).
-spec pairs() -> [pair_count()] | {partial, [pair_count()], [{node(), term()}]} | error().
pairs() ->
    msgflow_query:run(pairs, #{}).

%% @doc pairs/0 (`total'), or each pair's messages by kind and tag
%% (`kinds'): `[{Sender, Receiver, Kind, Tag, Messages}]', busiest first;
%% Kind is `call', `reply', `cast', `info', `event', `exit', `down', `io'
%% or `system' (guides/kinds-and-labels.md).  `{error, {badarg, {with, W},
%% [total, kinds]}}' for anything else; `{partial, ...}' as pairs/0.
-spec pairs(total | kinds) -> [pair_count()] | [pair_kind_count()]
                             | {partial, [pair_count()] | [pair_kind_count()], [{node(), term()}]}
                             | error().
pairs(With) ->
    case msgflow_opts:arg(with, With, {one_of, [total, kinds]}) of
        ok -> msgflow_query:run(pairs, #{with => With});
        {error, _} = E -> E
    end.

%% @doc Prints the 10 busiest pairs.
-spec top() -> ok | error().
top() ->
    top(10).

%% @doc Prints the N busiest pairs by total messages, with labels (name,
%% else initial call; a label that two rows share gets the pid beside it)
%% and rates in messages/s: MSG/S over the last closed window, with a
%% trend arrow against the window before (^ rose, v fell by more than
%% 10%), MEAN/S over the whole run, PEAK/S of the busiest window.  A send
%% to a registered name and one to the pid holding it are one row.
-spec top(pos_integer()) -> ok | error().
top(N) ->
    top(N, #{}).

%% @doc top/1 with options: `by' groups the rows (`process', the default,
%% `name', `module', `application', `node', or `kind' and tag), `sort =>
%% messages | rate | peak' (messages), `filter => Text' keeps the rows
%% with Text in an end's label or pid, `windows => N' the windows rates
%% are read from; across a cluster `node' (one node's rows) and `timeout'
%% (ms the other nodes have to answer, 1000).  To redraw it live:
%% `refresh => Ms' (1000) and `for => Ms' (10000), redrawn every
%% `refresh' ms for `for' ms, or until q + Enter.
%% `{error, {badarg, {n, N}, Allowed}}' for a bad N, `{error, {badopt,
%% {Key, Value}, Allowed}}' for a bad option, `{error, not_started}'
%% before the first start.
-spec top(pos_integer(), map() | [{atom(), term()}]) -> ok | error().
top(N, Opts) ->
    msgflow_shell:top(N, Opts).

%% @doc Prints the communication matrix grouped by By (`process', `name',
%% `module', `application', `node', or `kind': kind down, tag across):
%% the busiest senders and receivers that fit the terminal, each one's
%% total, and a line saying what was left out; across a cluster of every
%% node.  Counts are messages since start, rates messages/s over the last
%% window.  `{error, {badarg, {by, By}, Groupings}}' for any other By;
%% `{error, not_started}' before the first start.
-spec matrix(grouping()) -> ok | error().
matrix(By) ->
    matrix(By, #{}).

%% @doc matrix/1 with the `matrix' view's options: `kind => call' (a
%% kind) or `kind => {call, get}' (a kind and its tag), `limit'.
-spec matrix(grouping(), map() | [{atom(), term()}]) -> ok | error().
matrix(By, Opts) ->
    msgflow_shell:matrix(By, Opts).

%% @doc The value of a view, for programs; Opts its options (a map or a
%% keyword list):
%% <ul>
%% <li>`top' (`limit', `by', `sort', `filter', `windows'): `#{rows =>
%%     [#{sender, receiver, count, rate, mean_rate, peak_rate, kinds}],
%%     by, pairs, events, window_ms, endpoints, ...}', counts in messages,
%%     rates in messages/s;</li>
%% <li>`matrix' (`by', `kind', `limit'): `#{rows, cols, cells =>
%%     #{{Row, Col} => #{count, rate}}, sent, received, labels, ...}';</li>
%% <li>`hotspots' (the rules' thresholds, `windows'): `[#{rule, subject,
%%     label, evidence, explanation}]' (guides/hotspots.md);</li>
%% <li>`calls' (`by', `limit'): per call edge and tag `calls', `sampled',
%%     `p50_us', `p90_us', `p99_us', `max_us', `unanswered'
%%     (guides/calls.md);</li>
%% <li>`receivers' (`limit', `sort'): who receives most, from how many
%%     senders, its queue now;</li>
%% <li>`kinds' (`pair => {S, R}'), `process' (`pid => P': label, queue,
%%     memory, reductions, busiest partners), `pairs' (`with'),
%%     `history' (`pair'), `flows', `nodes', `info' (info/0's map as it
%%     stands, with no snapshot).</li>
%% </ul>
%% Every view of the counts also takes `from' and `to' (system ms, an RFC
%% 3339 text, a local datetime, `{ago, Seconds}' or `now'): the value is
%% then built from that range of the kept history (start/1's `history',
%% or `history => Dir'), with `range => #{from, to}' in it; `{error,
%% {no_history, Dir, {From, To}}}' when no window of it is there, `{error,
%% {badopt, {history, run}, _}}' when the run keeps no history
%% (guides/history.md).
%% A view whose value is a map has `missing': the nodes of a cluster that
%% did not answer within `timeout' ms (1000; 30,000 for every pair), with
%% why.  Errors: `{error, {badarg, {view, Name}, Names}}', `{error,
%% {badopt, {Key, Value}, Allowed}}', `{error, not_started}' for a view of
%% the counts before the first start.
-spec view(atom(), map() | [{atom(), term()}]) -> term() | error().
view(Name, Opts) ->
    msgflow_query:run(Name, Opts).

%% @doc Same as `print(Name, #{})'.
-spec print(atom()) -> ok | error().
print(Name) ->
    print(Name, #{}).

%% @doc Prints any view (view/2's Name and Opts) as a table in the
%% terminal's width and height: `msgflow:print(receivers, #{limit => 5})'.
-spec print(atom(), map() | [{atom(), term()}]) -> ok | error().
print(Name, Opts) ->
    msgflow_shell:print(Name, Opts).

%% @doc What msgflow is doing and holding, from a snapshot taken now (or,
%% while the collector is behind, merging tens of thousands of new pairs,
%% at once as the figures stand: `behind' true, every send before
%% `snapshot_at', system ms, counted; sync/0 first to wait):
%% `running', `pairs' (held), `events' (messages counted: the sum of
%% pairs() + `rolled_up' + `overflow'), `dead_letters', `own_left_out'
%% (msgflow's own messages, never counted), `memory' and `store_memory'
%% (bytes of the tracer's and the collector's tables), `workers_memory'
%% (of the view workers and web computations running now, and the
%% history ranges they hold), `own_memory' (all msgflow holds, bytes:
%% within `max_memory', but for what workers hold while they run), `calls_left_out' (sampled
%% calls of new call edges left out past `max_memory'), `allocator',
%% `trace_mode', `started_at' and `stopped_at' (ms, system time), what
%% other tools hold (`skipped', `new_tracer'), and the term reads checked
%% at load (`fast_extra', `alias_owner', `plain_refs', `fast_terms',
%% `fast_resources', `native_records'; guides/production.md, Compatibility), and with
%% start/1's `history' the history kept: `#{dir, status => on | closed |
%% stopped, bytes, budget, segments, oldest (ms), windows_written,
%% windows_dropped, writer_ms}', and when it stopped `reason' and
%% `message' (guides/history.md).
-spec info() -> map() | {error, {timeout, msgflow_collector}}.
info() ->
    msgflow_collector:info().

%% @doc Returns once every send traced on this node before the call is
%% counted, however long the collector's merge takes: a view, info/0 or
%% pairs/0 asked after it includes them, even from a collector that is
%% behind (which answers those at once, from the counts as they stand:
%% `behind' in info/0).  `ok' (also when not running), or `{error,
%% {timeout, msgflow_collector}}' after 30 s.  A view's own form is
%% `sync => true'.
-spec sync() -> ok | {error, {timeout, msgflow_collector}}.
sync() ->
    case msgflow_collector:store(sync) of
        {error, _} = E -> E;
        _ -> ok
    end.

%% @doc Same as `export(Path, Format, #{})'.
-spec export(file:filename_all(), atom()) -> ok | error().
export(Path, Format) ->
    export(Path, Format, #{}).

%% @doc Writes a report of the counts so far to Path, from one snapshot
%% (taken now while running): `csv', `dot', `json', `etf' (the dump
%% msgflow-report reads), `svg' (a heatmap), `html' (the
%% web page with its state, one self-contained file), or `mermaid' (the
%% last follow/2 flow); or, with `view => Name', any view as `json' or
%% `text'.  Opts: `by' (a grouping, default `process'; html `name'),
%% `sort', `limit', across a cluster `node', `from' and `to' (a range of
%% the kept history, as view/2 takes them); with `view', the view's
%% options; and for the file, `mode' (a new file's mode bits, 8#600: only
%% its owner reads it) and `follow_symlinks' (false: a symbolic link at
%% Path is refused).  The file is written whole in a private directory
%% beside Path, synced and renamed over Path (msgflow_file).  Errors:
%% `{error, {enoent, Path}}', `{error, {not_a_regular_file, Path}}' (a
%% device, directory or FIFO is left as it is), `{error, {symlink,
%% Path}}', `{error, {symlink_in_sticky_dir, Path}}', `{error, {badarg,
%% {format, F}, Allowed}}', `{error, not_started}'; nothing partial is
%% left behind.  Formats: guides/reports.md.
-spec export(file:filename_all(), atom(), map() | [{atom(), term()}]) -> ok | error().
export(Path, Format, Opts) ->
    msgflow_export:export(Path, Format, Opts).

%% @doc The ETF dump of the counts so far (what `export(Path, etf)'
%% writes; its format: guides/reports.md) as a binary, from a snapshot
%% taken now while running.  `{error, not_started}' when msgflow never ran.
-spec dump() -> binary() | error().
dump() ->
    msgflow_export:dump().

%% @doc Same as `hotspots(#{})'.
-spec hotspots() -> ok | error().
hotspots() ->
    hotspots(#{}).

%% @doc Prints the trouble found in the windows kept so far, a line per
%% finding with its figures: the rules `fan_in', `hot_pair', `spike',
%% `fan_out', `dead_letters' and `slow_calls', one finding per label
%% group, each naming the main kind of its traffic.  Opts are the rules'
%% thresholds and `windows'; the rules and their defaults are in
%% guides/hotspots.md; the findings as data: `view(hotspots, Opts)'.
-spec hotspots(map() | [{atom(), term()}]) -> ok | error().
hotspots(Opts) ->
    msgflow_shell:print(hotspots, Opts).

%% @doc Prints the root causes of the last closed window: the processes
%% that are saturated (busy at least 90 % of their readings, or a mailbox
%% that grew all window), the node when its schedulers are, and the call
%% cycles (`deadlock' when their calls went unanswered), each ranked by
%% the caller-seconds per second it costs, with the chain of who waits on
%% it (guides/bottlenecks.md).  The value: `view(bottlenecks, #{})'.
-spec bottlenecks() -> ok | error().
bottlenecks() ->
    msgflow_shell:print(bottlenecks, #{}).

%% @doc Prints the chain through one process (a pid, or a registered
%% name of this node): its arrivals (msg/s), mailbox wait, busy and
%% blocked shares and service time (ms) in the last closed window, what
%% it waits on up to the root, and who waits on it.  `{error, {badopt,
%% {process, Who}, Allowed}}' for a name nobody holds.
-spec why(pid() | atom()) -> ok | error().
why(PidOrName) ->
    msgflow_shell:print(bottlenecks, #{process => PidOrName}).

%% @doc Adds a process or port (or registered name) to the running
%% session, like `dbg:p(PidOrName, [send])'.  `{error, not_started}',
%% `{error, {noproc, Who}}'.
-spec trace(pid() | port() | atom()) -> ok | error().
trace(Who) ->
    msgflow_collector:trace(Who).

%% @doc Stops counting the sends of a process or port; what it sent so far
%% stays in the counts.  `{error, not_started}', `{error, {noproc, Who}}'.
-spec untrace(pid() | port() | atom()) -> ok | error().
untrace(Who) ->
    msgflow_collector:untrace(Who).

%% @doc The messages of one pair per window, oldest first: `[#{at =>
%% SystemMs, window_ms, count}]', the open window last with `open =>
%% true'; asked of the sender's node.
-spec history(endpoint() | group(), endpoint() | group()) -> [window_count()] | error().
history(Sender, Receiver) ->
    msgflow_query:run(history, #{pair => {Sender, Receiver}}).

%% @doc Prints what one sender sent one receiver, by kind and tag of
%% message, most first, with each one's share (messages since start):
%% `call get 4,980 91%'.  Sender and Receiver are pids, ports or
%% registered names (the pair as top/1 shows it), or labels as binaries or
%% strings (the group as `top(N, #{by => name})' shows it).
-spec kinds(endpoint() | unicode:chardata(), endpoint() | unicode:chardata()) -> ok | error().
kinds(Sender, Receiver) ->
    msgflow_shell:print(kinds, #{pair => {Sender, Receiver}}).

%% @doc Prints the nodes msgflow counts on, this one first, a line each:
%% `up', `starting', `down', `stale' or `incompatible', with why
%% (guides/cluster.md).
-spec nodes() -> ok | error().
nodes() ->
    msgflow_shell:print(nodes, #{}).

%% @doc Same as `follow(Fun, #{})'.
-spec follow(fun(() -> term())) -> {term(), flow()} | error().
follow(Fun) ->
    follow(Fun, #{}).

%% @doc Runs Fun() as one followed request and returns `{Result, Flow}':
%% every message Fun's work sets off, in any process of this node (and of
%% the cluster's nodes), counted by (sender, receiver) with its causal
%% depth, kind and tag.  Opts: `settle', `max_events', `print', `timeout'.
%% Works with or without start/1.  `settle' (ms of quiet that ends the
%% flow, 50), `max_events' (10,000), `print' (the sequence diagram),
%% `timeout' (ms, 10,000).  Flow: `#{label, messages, pairs, processes,
%% depth, duration_us, events, dropped, labels}' (guides/flows.md).
%% `{error, {system_tracer_busy, Current}}' when another tool holds the
%% system tracer.
-spec follow(fun(() -> term()), map() | [{atom(), term()}]) ->
          {term(), flow()} | error().
follow(Fun, Opts) ->
    msgflow_flow:follow(Fun, Opts).

%% @doc What changed in who talks to whom between two recordings, each a
%% dump file (`export(Path, etf)'), a dump (dump/0's binary), `now' (the
%% counts so far) or a range of the kept history (`#{from => T1, to =>
%% T2}', and `history => Dir' for another directory than the run's;
%% guides/history.md): `#{appeared, vanished, changed := [Edge], unchanged,
%% before, after}', edges by label with their messages, rate (msg/s over
%% the recording), main kind, call p99 (µs) and bytes on each side; a rate
%% changed beyond chance by a binomial test on the counts (|z| >= 5;
%% msgflow_diff).  `{error, {bad_dump, Path, Why}}' for a file that is no
%% dump.
-spec diff(term(), term()) -> msgflow_diff:diff() | error().
diff(Before, After) ->
    msgflow_diff:diff(Before, After, #{}).

%% @doc diff/2, and with `print => true' its table printed (then `ok').
-spec diff(term(), term(), map()) -> msgflow_diff:diff() | ok | error().
diff(Before, After, Opts) ->
    msgflow_diff:diff(Before, After, Opts).

%% @doc Follows every request at a function, with no code change (a meta
%% call trace pattern on `{M, F, Arity}'): one call in `sample' gets a
%% trace token, every call is counted; the summaries are in flows/0.
%% Opts: `sample' (1 in N calls followed, 1), `for' (ms, 60,000),
%% `max_events' (sends a second looked at for the depth, 1,000);
%% guides/flows.md.
-spec follow_calls(mfa(), map() | [{atom(), term()}]) -> ok | error().
follow_calls(MFA, Opts) ->
    msgflow_flow:follow_calls(MFA, Opts).

%% @doc Prints a table per follow_calls/2 entry (running or stopped
%% since) and the sequence diagram of the last follow/2.
-spec flows() -> ok | error().
flows() ->
    msgflow_shell:print(flows, #{}).

%% @doc Stops every follow_calls/2 entry (their summaries stay in flows/0)
%% and puts back the system tracer msgflow set.
-spec unfollow() -> ok.
unfollow() ->
    msgflow_flow:unfollow().

%% @doc Prints the commands with one-line examples and the error shape.
-spec help() -> ok.
help() ->
    io:put_chars(msgflow_shell:help()).

%% @doc Same as `web(#{})'.
-spec web() -> {ok, string()} | error().
web() ->
    web(#{}).

%% @doc Serves the live web page and `/metrics' from this node (OTP's
%% inets httpd) until web_stop/0 or the application stops: `{ok, Url}'.
%% Read-only.  Options: `port' (0: a free one), `ip' (127.0.0.1),
%% `metrics_edges' (100: edges in /metrics), `metrics_views'; see
%% guides/web.md.  `{error, {already_started, Url}}', `{error, {Reason,
%% {port, Port}}}' when it cannot listen there (eaddrinuse, eacces), and
%% bad options as everywhere.
-spec web(map() | [{atom(), term()}]) -> {ok, string()} | error().
web(Opts) ->
    msgflow_web_source:start(Opts).

%% @doc Stops the web server web/1 started: `ok', or `{error,
%% not_started}'.  Counting goes on.
-spec web_stop() -> ok | {error, not_started}.
web_stop() ->
    msgflow_web:stop().

%% @doc Same as `calls(#{})'.
-spec calls() -> ok | error().
calls() ->
    calls(#{}).

%% @doc Prints how long calls wait per call edge and request tag: calls
%% (exact), round trips sampled (start/1's `call_sample'), p50, p99, max,
%% unanswered; options `by', `limit' (guides/calls.md).
-spec calls(map() | [{atom(), term()}]) -> ok | error().
calls(Opts) ->
    msgflow_shell:print(calls, Opts).
