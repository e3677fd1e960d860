%%% @doc A view: one question asked of what msgflow counted ("the
%%% busiest pairs", "the communication matrix", "how long calls wait"),
%%% answered as one typed value.  Each view is a module of this behaviour
%%% and one line of registry/0; msgflow_query is the one path that asks
%%% for it (it checks the options, builds the view on this node or on each
%%% node of a cluster, merges the parts, and returns the value), and the
%%% shell, the web page, `/metrics', msgflow-top and the exports show that
%%% value through the view's own text/3 and json/2.  Adding a view is its
%%% module, its line in registry/0 and its test.
%%%
%%% The callbacks:
%%% <ul>
%%% <li>`options()': the options a user may give, each with its default
%%%     and rule (msgflow_opts:schema()); msgflow_query adds `node' and
%%%     `timeout' to those of a view built on every node (scope/0);</li>
%%% <li>`build(Store, Opts)': this node's part, from its store
%%%     (msgflow_store:store(); `none' for a view that reads no store:
%%%     store/0), in a process of its own (run/2);</li>
%%% <li>`merge(Parts, Opts, Context)': the value, from the parts of the
%%%     nodes that answered, this node's first (one part when msgflow
%%%     counts here only); `{error, Reason}' for a value that cannot be
%%%     made (kinds of a pair that has no messages);</li>
%%% <li>`text(Value, Opts, Area)': the value as the shell prints it, in
%%%     `#{width := Columns, height := Lines}';</li>
%%% <li>`json(Value, Opts)': the value as JSON terms (maps with binary
%%%     keys, lists, binaries, numbers, booleans, `null'), as the web
%%%     server serves it.</li>
%%% </ul>
%%% And where a view needs them (optional):
%%% <ul>
%%% <li>`check(Opts)': checks across options and puts them in their
%%%     canonical form, after each was checked against options/0;</li>
%%% <li>`scope()': `nodes' (the default: built on every node of a
%%%     cluster, or the one `node' names) or `here' (built on the asking
%%%     node only: a process of this node, the cluster's statuses);</li>
%%% <li>`nodes(Opts, Members)': the nodes to ask, for a view that knows
%%%     where its data is (a pair's history: its sender's node);</li>
%%% <li>`store()': false for a view that reads no store (it is then
%%%     given `none', and is there before the first start);</li>
%%% <li>`fresh()': false for a view built from closed windows only (the
%%%     default true: every send traced before the query is in the store
%%%     it is given): it is given the store as it is, with no snapshot
%%%     taken first, so it never waits for the collector to merge one;</li>
%%% <li>`wait(Opts)': how long the query waits for the other nodes when
%%%     its `timeout' is not given: `interactive' (1000 ms, a view a
%%%     person waits for; the default) or `full' (30,000 ms, a value that
%%%     holds every pair: pairs(), the exports);</li>
%%% <li>`heap(Opts)': `sized' (the default: its build holds terms for
%%%     about every pair, and its process's first heap is sized for the
%%%     store, msgflow_workers:run/3) or `small' (it reads rows in chunks
%%%     and keeps few: its process starts on the default heap, which
%%%     `own_memory' does not see grow with the store);</li>
%%% <li>`fallback(Top, Opts)': a part made of the busiest pairs a node
%%%     last reported (msgflow_cluster:last_top/1, a view of rows by
%%%     process), for a node that did not answer in time (`none' when
%%%     they do not make one);</li>
%%% <li>`metrics(Value)': families of series for `/metrics'
%%%     (msgflow_prom), from the value of the view with its default
%%%     options;</li>
%%% <li>`encode(Part, Opts)' and `decode(Encoded, Opts)': a node's part
%%%     as it crosses to the asking node and back, for a part too big to
%%%     send as it is (every pair: a remote pid decoded is a term of its
%%%     own each time it occurs).</li>
%%% </ul>
%%% run/2 is where builds run: a process of their own with a heap sized
%%% for the store, whose value is copied back and whose errors are raised
%%% again in the caller, so that no server dies of a view.
-module(msgflow_view).

-export([registry/0, names/0, module/1, with_metrics/0]).
-export_type([name/0, area/0, context/0, json/0, family/0]).

%% A view's name, as msgflow:view/2 takes it.
-type name() :: atom().
%% The room text has: columns and lines, and the ellipsis a cut cell ends
%% with (`\x{2026}' when not given: msgflow_fmt:ellipsis/1).
-type area() :: #{width := pos_integer(), height := pos_integer(), ellipsis => string()}.
%% What merge/3 may use beyond the parts: `missing' the nodes that did not
%% answer and why, `labels' a fun that asks each remote process's own
%% node for its label (a process is named where it runs).
-type context() :: #{missing := [{node(), term()}],
                     labels := fun(([pid()]) -> #{pid() => binary()})}.
%% What json/2 returns, for an encoder (msgflow_report:json_encode/1).
-type json() :: #{binary() => json()} | [json()] | binary() | number() | boolean() | null.

%% A family of series for `/metrics': its name, type, help text, and each
%% series' labels and value.
-type family() :: {binary(), counter | gauge, binary(), [{[{atom(), binary()}], number()}]}.

-callback options() -> msgflow_opts:schema().
-callback build(msgflow_store:store() | none, map()) -> term().
-callback merge([term()], map(), context()) -> term() | {error, term()}.
-callback text(term(), map(), area()) -> unicode:chardata().
-callback json(term(), map()) -> json().
-callback check(map()) -> {ok, map()} | msgflow_opts:error().
-callback scope() -> nodes | here.
-callback nodes(map(), [node()]) -> [node()].
-callback store() -> boolean().
-callback fresh() -> boolean().
-callback wait(map()) -> interactive | full.
-callback heap(map()) -> sized | small.
-callback fallback(msgflow_rows:view(), map()) -> term() | none.
-callback metrics(term()) -> [family()].
-callback encode(term(), map()) -> term().
-callback decode(term(), map()) -> term().
-optional_callbacks([check/1, scope/0, nodes/2, store/0, fresh/0, wait/1, heap/1, fallback/2, metrics/1,
                     encode/2, decode/2]).

%% @doc Every view, by name, in the order help and menus list them: the
%% one list of them.
-spec registry() -> [{name(), module()}].
registry() ->
    [{top, msgflow_top_view},
     {matrix, msgflow_matrix_view},
     {hotspots, msgflow_hotspots},
     {bottlenecks, msgflow_bottlenecks_view},
     {calls, msgflow_calls_view},
     {receivers, msgflow_receivers_view},
     {kinds, msgflow_kinds_view},
     {process, msgflow_process_view},
     {pairs, msgflow_pairs_view},
     {history, msgflow_history_view},
     {flows, msgflow_flows_view},
     {nodes, msgflow_nodes_view},
     {info, msgflow_info_view}].

%% @doc The names of the views.
-spec names() -> [name()].
names() ->
    [N || {N, _} <- registry()].

%% @doc The module of view Name, or `{error, {badarg, {view, Name},
%% Names}}'.
-spec module(term()) -> {ok, module()} | msgflow_opts:error().
module(Name) ->
    case lists:keyfind(Name, 1, registry()) of
        {_, Mod} ->
            %% loaded, so that its optional callbacks are seen
            {module, Mod} = code:ensure_loaded(Mod),
            {ok, Mod};
        false -> {error, {badarg, {view, Name}, names()}}
    end.

%% @doc The views that give `/metrics' families (metrics/1), with their
%% modules.
-spec with_metrics() -> [{name(), module()}].
with_metrics() ->
    [{N, M} || {N, _} <- registry(), {ok, M} <- [module(N)], erlang:function_exported(M, metrics, 1)].
