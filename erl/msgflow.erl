%%% @doc msgflow: who sends messages to whom, how often.
%%%
%%% Counting happens inside an erl_tracer NIF (msgflow_tracer) on the
%%% tracees' own scheduler threads, so no trace message is ever sent and
%%% memory grows with the number of distinct (sender, receiver) pairs, not
%%% with the number of messages.  A collector process (msgflow_collector)
%%% pulls a snapshot of the counts every `interval' ms and keeps totals and
%%% per-window counts for rates.
%%%
%%% ```
%%% 1> msgflow:start().
%%% ok
%%% 2> msgflow:top().
%%% 3> msgflow:stop().
%%% '''
%%%
%%% Every public function checks its arguments and hands over
%%% (msgflow_scope, a layer below); each doc says where the details are
%%% (options, shapes, errors), beside the code they describe.
-module(msgflow).

-export([start/0, start/1, start_on/2, stop/0, reset/0, wait/1, help/0,
         trace/1, untrace/1,
         pairs/0, pairs/1, top/0, top/1, top/2, kinds/2, history/2, matrix/1, matrix/2, view/2,
         hotspots/0, hotspots/1,
         info/0, export/2, export/3, dump/0,
         follow/1, follow/2, follow_calls/2, flows/0, unfollow/0, nodes/0,
         web/0, web/1, web_stop/0, calls/0, calls/1]).

-export_type([endpoint/0, pair_count/0]).

%% A sender or receiver as the VM reported it: a pid or port for senders;
%% for receivers also a registered name, `{Name, Node}', a remote pid or an
%% alias reference.
-type endpoint() :: msgflow_tracer:endpoint().
%% {Sender, Receiver, Messages}
-type pair_count() :: {endpoint(), endpoint(), pos_integer()}.

%% @doc Same as `start(#{})': trace sends of all processes.
-spec start() -> ok | {error, term()}.
start() ->
    start(#{}).

%% @doc Starts counting.  Options (all optional):
%% <ul>
%% <li>`procs => all | new | existing | [pid() | atom()]' whose sends are
%%     counted (default `all'; names are resolved now);</li>
%% <li>`interval => Ms', 10..3600000, between snapshots, which is also the
%%     window for rates (default 1000);</li>
%% <li>`max_pairs => N', cap on table entries; past it messages go to the
%%     `overflow' tally, so totals stay exact (default 1000000);</li>
%% <li>`duration => Ms | infinity', stop by itself after Ms (default infinity);</li>
%% <li>`windows => N', windows kept for rates (default 60);</li>
%% <li>`sample => {TracedMs, PeriodMs} | off': trace only TracedMs of every
%%     PeriodMs (1 =< TracedMs < PeriodMs); between slices the trace flags
%%     are off, so traced processes pay nothing.  Counts are what was
%%     measured; top/1's rates are extrapolated to the whole period and
%%     marked as estimates.  Not with `procs => new' (default off).</li>
%% </ul>
%% Errors (one shape everywhere, msgflow_opts): `{error, {badopt, {Key,
%% Value}, Allowed}}' for a bad value or an unknown key (Allowed: the
%% values or the keys), options as a map or a keyword list; `{error, {noproc, PidOrName}}' for a procs entry that is not alive,
%% `{error, already_started}' while running, `{error, {nif_not_loaded, _}}'
%% when priv/msgflow_tracer.so could not be loaded.
%% Starting clears the data of the previous run.
%%
%% Across a cluster: `nodes => all | [node()]' starts msgflow on those
%% nodes too (`on_node_error', `grace'); the views cover them all (see
%% msgflow_cluster and nodes/0).
%%
%% `owner => Pid': the run stops `grace' ms after Pid exits or its node
%% disconnects, so that a tool that started it cannot leave it on by
%% dying (msgflow-top passes its own C node's pid).
-spec start(map()) -> ok | {error, term()}.
start(Opts) ->
    case msgflow_opts:validate(Opts) of
        {ok, Valid = #{nodes := Nodes}} ->
            case application:ensure_all_started(msgflow) of
                {ok, _} -> msgflow_scope:start_nodes(Valid, Nodes);
                {error, _} = E -> E
            end;
        {error, _} = E ->
            E
    end.

%% @doc Starts counting on node Node only (not here), shipping this build
%% there when it has no msgflow; for a node without msgflow in its
%% release.  Opts are start/1's (`procs' all, new or existing; no
%% `nodes').  What is shipped, where, what is refused, when the run stops
%% by itself and the errors: msgflow_cluster:start_on/3; the recipe: the
%% README's "On a running node".
-spec start_on(node(), map() | [{atom(), term()}]) -> ok | {error, term()}.
start_on(Node, Opts) ->
    msgflow_scope:start_on(Node, Opts).

%% @doc Stops counting.  When it returns, msgflow's trace flags are off and
%% every send traced before the call is in pairs/0.  The data stays until
%% reset/0 or the next start.  `ok' also when not running.
-spec stop() -> ok.
stop() ->
    ok = msgflow_cluster:stop(),
    msgflow_collector:stop().

%% @doc Forgets the counts (tracing, if on, goes on), on every node of a
%% cluster that this node's coordinator started (a node counting for
%% another coordinator, or for itself, keeps its counts).
-spec reset() -> ok.
reset() ->
    %% each member resets only for the coordinator that started it
    _ = msgflow_cluster:call_all(msgflow_cluster:members(), msgflow_collector, reset_for,
                                 [whereis(msgflow_cluster)]),
    msgflow_collector:reset().

%% @doc Waits until counting stops (by `duration' or stop/0), at most
%% Timeout ms.  `ok', or `timeout'.
-spec wait(timeout()) -> ok | timeout.
wait(Timeout) ->
    msgflow_collector:wait(Timeout).

%% @doc The pairs held, `[{Sender, Receiver, Messages}]' (messages since
%% start), busiest first, receivers exactly as the VM reported them,
%% exact (a snapshot taken now while running).  Pairs of exited ends and
%% replies to local aliases are folded: in the views and `info()''s
%% `folded', never here.  Across a cluster: every node's (see
%% msgflow_scope:pairs/0).
-spec pairs() -> [pair_count()] | {error, not_started}.
pairs() ->
    msgflow_scope:pairs().

%% @doc pairs/0 (`total'), or each pair's messages by kind and tag
%% (`kinds'): `[{Sender, Receiver, Kind, Tag, Messages}]', busiest first,
%% exact as pairs/0 is (a pair's kinds add up to its total; see
%% msgflow_tracer:delta/0 for the kinds and tags).  `{error, {badarg,
%% {with, W}, [total, kinds]}}' for anything else.
-spec pairs(total | kinds) -> list() | msgflow_opts:error() | {error, not_started}.
pairs(With) ->
    case msgflow_opts:arg(with, With, {one_of, [total, kinds]}) of
        ok -> msgflow_scope:pairs(With);
        {error, _} = E -> E
    end.

%% @doc Prints the 10 busiest pairs.
-spec top() -> ok.
top() ->
    top(10).

%% @doc Prints the N busiest pairs by total messages, with labels (name,
%% else initial call; a label that two rows share gets the pid beside it)
%% and rates in messages/s: MSG/S over the last closed window, with a
%% trend arrow against the window before (^ rose, v fell by more than
%% 10%), MEAN/S over the whole run, PEAK/S of the busiest window.  A send
%% to a registered name and one to the pid holding it are one row.
-spec top(pos_integer()) -> ok | {error, term()}.
top(N) ->
    top(N, #{}).

%% @doc top/1 grouped, sorted and, with `refresh' or `for', live.  Opts:
%% `by => process | name | module | application | node | kind' (default
%% process) groups the rows as matrix/1 does (`kind': a row per kind and
%% tag of message, e.g. `call get'); `sort => messages | rate | peak'
%% (default messages since start; `rate' the last window's, so that a
%% burst that ended drops out; `peak' the busiest window's); `refresh => Ms' and
%% `for => Ms' redraw the table every `refresh' ms (default 1000) for
%% `for' ms (default 10000), then return; across a cluster, `node => N'
%% shows one node's.  `{error, {badarg, {n, N}, Allowed}}' for a bad N,
%% `{error, {badopt, {Key, Value}, Allowed}}' for a bad option,
%% `{error, not_started}' before the first start.
-spec top(pos_integer(), map() | [{atom(), term()}]) -> ok | msgflow_opts:error() | {error, not_started}.
top(N, Opts) ->
    msgflow_shell:top(N, Opts).

%% @doc Prints the communication matrix: every pair's messages since
%% start, senders down, receivers across (numbered), grouped by
%% `process', `name' (labels), `module' (of the initial call), `application',
%% `node' or `kind' (kind down, tag across), the busiest that fit the
%% terminal, each sender's and receiver's total, and a line saying what
%% was left out; across a cluster of every node.  The data and how keys
%% are read: `view(matrix, #{by => By})' (msgflow_view:matrix/1).
%% `{error, {badarg, {by, By}, Groupings}}' for any other By; `{error,
%% not_started}' before the first start.
-spec matrix(msgflow_view:grouping()) -> ok | msgflow_opts:error() | {error, not_started}.
matrix(By) ->
    matrix(By, #{}).

%% @doc matrix/1 of one kind of message: `kind => call' (a kind) or `kind
%% => {call, get}' (a kind and its tag); the counts are those messages,
%% the rates apportioned by their share of each row's.  Opts is a map or
%% a keyword list; `{error, {badopt, {kind, K}, Allowed}}' for an unknown
%% kind.
-spec matrix(msgflow_view:grouping(), map() | [{atom(), term()}]) ->
          ok | msgflow_opts:error() | {error, not_started}.
matrix(By, Opts) ->
    msgflow_shell:matrix(By, Opts).

%% @doc The data behind a printed view, for programs: `Name' is `top',
%% `matrix', `hotspots', `flows', `nodes', `kinds', `calls' or `process', Opts the options of
%% the function that prints it (a map or a keyword list; top's N is
%% `limit', default 10; matrix's By is `by', default `name'; kinds' two
%% ends are `pair => {Sender, Receiver}').  The values, busiest first:
%% top a msgflow_view:view() (its `rows'), matrix a
%% msgflow_view:matrix(), hotspots a list of msgflow_hotspots:finding(),
%% flows `#{entries, last}', nodes a list of
%% msgflow_cluster:node_status(), kinds a view of the pair's one row,
%% calls a msgflow_calls_view:view(), process what a process says of
%% itself and its busiest partners.
%% Every option and error: msgflow_scope:view/2.
-spec view(top | matrix | hotspots | flows | nodes | kinds | calls | process,
           map() | [{atom(), term()}]) ->
          term() | msgflow_opts:error() | {error, not_started}.
view(Name, Opts) ->
    msgflow_scope:view(Name, Opts).

%% @doc What msgflow is doing and holding, from a snapshot taken now:
%% `running', `pairs', `events' (= sum of pairs() + `folded' +
%% `overflow'), memory, allocator, trace mode and the checks made at load.
%% Every key: msgflow_collector:info/0.
-spec info() -> map().
info() ->
    msgflow_collector:info().

%% @doc Same as `export(Path, Format, #{})'.
-spec export(file:filename_all(), atom()) -> ok | {error, term()}.
export(Path, Format) ->
    export(Path, Format, #{}).

%% @doc Writes a report of the counts so far to Path, from one snapshot
%% (taken now while running): `csv', `dot', `json', `etf' (the dump
%% msgflow-report reads, documented in msgflow_report:dump/1), `svg' (a
%% heatmap), `html' (one self-contained page), or `mermaid' (the last
%% follow/2 flow; `{error, no_flow}' before one).  What each holds, kinds
%% included, is in the README's table of reports and in msgflow_report.
%% Opts: `by' (a matrix/1 grouping, default `process'), `limit', across a
%% cluster `node' (one node's report).  Errors:
%% `{error, {badarg, {format, F}, Formats}}' (with a hint when Path and
%% Format are swapped), `{error, {badopt, {K, V}, Allowed}}',
%% `{error, not_started}' when msgflow never ran, `{error, {Reason, Path}}'
%% when the file cannot be written; nothing partial is left behind.
-spec export(file:filename_all(), atom(), map() | [{atom(), term()}]) -> ok | {error, term()}.
export(Path, Format, Opts) ->
    msgflow_export:export(Path, Format, Opts).

%% @doc The ETF dump of the counts so far (what `export(Path, etf)'
%% writes, documented in msgflow_report:dump/1) as a binary, from a
%% snapshot taken now while running.  msgflow-top fetches it over RPC.
%% `{error, not_started}' when msgflow never ran.
-spec dump() -> binary() | {error, not_started}.
dump() ->
    msgflow_export:dump().

%% @doc Same as `hotspots(#{})'.
-spec hotspots() -> ok | {error, term()}.
hotspots() ->
    hotspots(#{}).

%% @doc Prints the trouble found in the windows kept so far, a line per
%% finding with its figures: the rules `fan_in', `hot_pair', `spike',
%% `fan_out' and `dead_letters', one finding per label group, each naming
%% the main kind of its traffic.  Opts are the rules' thresholds and
%% `windows'; the rules, their defaults and the findings' shape:
%% msgflow_hotspots; the findings as data: `view(hotspots, Opts)'.
%% `{error, {badopt, {K, V}, Allowed}}' for an unknown key or a
%% non-positive value; `{error, not_started}' when msgflow never ran.
-spec hotspots(map() | [{atom(), term()}]) -> ok | {error, term()}.
hotspots(Opts) ->
    msgflow_shell:print(hotspots, Opts).

%% @doc Adds a process or port (or registered name) to the running
%% session, like `dbg:p(PidOrName, [send])'.  `{error, not_started}',
%% `{error, {noproc, Who}}'.
-spec trace(pid() | port() | atom()) -> ok | {error, term()}.
trace(Who) ->
    msgflow_collector:trace(Who).

%% @doc Stops counting the sends of a process or port; what it sent so far
%% stays in the counts.  `{error, not_started}', `{error, {noproc, Who}}'.
-spec untrace(pid() | port() | atom()) -> ok | {error, term()}.
untrace(Who) ->
    msgflow_collector:untrace(Who).

%% @doc The messages of one pair per window, oldest first: closed windows,
%% then (while running) the open one with `open => true'.  `at' is the
%% window's end in system time (ms).  A registered name and the pid holding
%% it are the same endpoint; replies to the receiver's aliases and the
%% pair's counts from before it was folded are in it.  Either end may be a
%% group of exited endpoints, `{exited, Kind, Node}', as views show them.
%% `{error, not_started}' when msgflow never ran.
-spec history(endpoint() | msgflow_labels:group(), endpoint() | msgflow_labels:group()) ->
          [#{at := integer(), window_ms := non_neg_integer(), count := non_neg_integer(),
             open => true}] | {error, not_started}.
history(Sender, Receiver) ->
    msgflow_scope:history(Sender, Receiver).

%% @doc Prints what one sender sent one receiver, by kind and tag of
%% message, most first, with each one's share (messages since start):
%% `call get 4,980 91%'.  Sender and Receiver are pids, ports or
%% registered names (the pair as top/1 shows it), or labels as binaries or
%% strings (the group as `top(N, #{by => name})' shows it:
%% `kinds("erlang:apply/2", ux_kv)' mixes the two: the names are then
%% read as labels).  `{error, {badarg, {pair, {Sender, Receiver}},
%% Allowed}}' when there is no such pair or group; `{error, not_started}'
%% before the first start.
-spec kinds(endpoint() | unicode:chardata(), endpoint() | unicode:chardata()) ->
          ok | msgflow_opts:error() | {error, not_started}.
kinds(Sender, Receiver) ->
    msgflow_shell:print(kinds, #{pair => {Sender, Receiver}}).

%% @doc Prints the nodes msgflow counts on, this one first, a line
%% each; the data (`view(nodes, #{})'): `#{node, status =>
%% up | down | stale | incompatible, pairs, events, last_snapshot_ms,
%% reason}'.  `down': the node left the cluster (its last figures and
%% busiest pairs are kept; `reason' is net_kernel's); `stale': it has not
%% answered a pull within two intervals; `incompatible': it cannot run
%% this msgflow (another OTP release or NIF version).  `last_snapshot_ms'
%% is how long before its last answer it took its last snapshot, by its
%% own clock.  One entry (this node) when msgflow counts here only.
-spec nodes() -> ok.
nodes() ->
    msgflow_shell:print(nodes, #{}).

%% @doc Same as `follow(Fun, #{})'.
-spec follow(fun(() -> term())) -> {term(), msgflow_flow_view:flow()} | {error, term()}.
follow(Fun) ->
    follow(Fun, #{}).

%% @doc Runs Fun() as one followed request and returns `{Result, Flow}':
%% every message Fun's work sets off, in any process of this node (and of
%% the cluster's nodes), counted by (sender, receiver) with its causal
%% depth, kind and tag.  Opts: `settle', `max_events', `print', `timeout'.
%% Works with or without start/1.  The options, Flow's shape and the
%% errors: msgflow_flow:follow/2.
-spec follow(fun(() -> term()), #{settle => non_neg_integer(), max_events => non_neg_integer(),
                                  print => boolean(), timeout => non_neg_integer()}) ->
          {term(), msgflow_flow_view:flow()} | {error, term()}.
follow(Fun, Opts) ->
    msgflow_flow:follow(Fun, Opts).

%% @doc Follows every request at a function, with no code change (a meta
%% call trace pattern on `{M, F, Arity}'): one call in `sample' gets a
%% trace token, every call is counted; the summaries are in flows/0.
%% Opts: `sample', `for', `max_events'.  The options and the errors:
%% msgflow_flow:follow_calls/2.
-spec follow_calls(mfa(), #{sample => pos_integer(), for => pos_integer(),
                            max_events => non_neg_integer()}) -> ok | {error, term()}.
follow_calls(MFA, Opts) ->
    msgflow_flow:follow_calls(MFA, Opts).

%% @doc Prints a table per follow_calls/2 entry (running or stopped
%% since) and the sequence diagram of the last follow/2.  The data
%% (`view(flows, #{})'): `#{entries, last}', one summary per entry:
%% `#{entry, requests (followed), calls (counted), messages (of the
%% followed requests), per_request (their mean), pairs => [{SenderLabel,
%% ReceiverLabel, Messages}], depth (deepest chain), depth_exact, sample,
%% running}', from a snapshot taken now.  Labels, not pids: each request
%% has processes of its own; a local process that exited is `(exited)'.
-spec flows() -> ok.
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
    io:put_chars(msgflow_text:help()).

%% @doc Same as `web(#{})'.
-spec web() -> {ok, string()} | {error, term()}.
web() ->
    web(#{}).

%% @doc Serves the live web page and `/metrics' from this node (OTP's
%% inets httpd) until web_stop/0 or the application stops: `{ok, Url}'.
%% Read-only.  Options (`port', `ip', `metrics_edges'), errors and what
%% is served: msgflow_web_source:start/1; the page: README, "In the
%% browser".
-spec web(map() | [{atom(), term()}]) -> {ok, string()} | {error, term()}.
web(Opts) ->
    msgflow_web_source:start(Opts).

%% @doc Stops the web server web/1 started: `ok', or `{error,
%% not_started}'.  Counting goes on.
-spec web_stop() -> ok | {error, not_started}.
web_stop() ->
    msgflow_web:stop().

%% @doc Same as `calls(#{})'.
-spec calls() -> ok | {error, term()}.
calls() ->
    calls(#{}).

%% @doc Prints how long calls wait per call edge and request tag: calls
%% (exact), round trips sampled (start/1's `call_sample'), p50, p99, max,
%% unanswered.  Opts `by', `limit'; the data, view(calls, Opts), and what
%% a round trip is: msgflow_calls_view.
-spec calls(map() | [{atom(), term()}]) -> ok | {error, term()}.
calls(Opts) ->
    msgflow_shell:print(calls, Opts).
