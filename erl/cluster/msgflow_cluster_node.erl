%%% @doc The parts of cluster views that run on every node (over erpc,
%%% msgflow_cluster:call_all/3, or in its collector for the coordinator's
%%% pull): each builds from its own store, in a process of its own, and
%%% never calls the coordinator.
-module(msgflow_cluster_node).
-export([local_view/1, local_pairs/0, local_pairs/1, local_hotspots/1, local_history/2, report/2, labels/1,
         local_calls/1]).

-define(TOP_KEPT, 100).        %% busiest pairs kept per node for when it is gone


%% @doc This node's part of a view: built from its store in a process
%% of its own.  `{error, not_started}' when msgflow never ran here.
-spec local_view(msgflow_view:spec()) -> msgflow_view:view() | {error, not_started}.
local_view(Spec) ->
    ok = msgflow_flags:untrace_self(),
    case msgflow_collector:store(true) of
        undefined -> {error, not_started};
        Store -> msgflow_view:run(Store, fun() -> msgflow_view:build(Store, Spec) end)
    end.

%% @doc This node's call edges (msgflow_calls_view:build/2 with Opts:
%% `by', `limit', `sample'), built from its store in a process of its own.
%% `{error, not_started}' when msgflow never ran here.
-spec local_calls(map()) -> msgflow_calls_view:view() | {error, not_started}.
local_calls(Opts) ->
    ok = msgflow_flags:untrace_self(),
    case msgflow_collector:store(true) of
        undefined -> {error, not_started};
        Store -> msgflow_view:run(Store, fun() -> msgflow_calls_view:build(Store, Opts) end)
    end.

%% @doc This node's pairs (msgflow:pairs/0 of a node that counts on
%% its own).
-spec local_pairs() -> [msgflow:pair_count()].
local_pairs() ->
    local_pairs(total).

%% @doc This node's pairs, or with `kinds' its (pair, kind, tag) counts
%% (msgflow_view_pairs:pairs/2).
-spec local_pairs(total | kinds) -> list().
local_pairs(With) ->
    ok = msgflow_flags:untrace_self(),
    case msgflow_collector:store(true) of
        undefined -> [];
        Store -> msgflow_view:run(Store, fun() -> msgflow_view_pairs:pairs(Store, With) end)
    end.

%% @doc This node's hotspots, each with `node' added.
-spec local_hotspots(map()) -> [#{node := node(), atom() => term()}] | {error, not_started}.
local_hotspots(Opts) ->
    ok = msgflow_flags:untrace_self(),
    case msgflow_collector:store(true) of
        undefined ->
            {error, not_started};
        Store ->
            [F#{node => node()}
             || F <- msgflow_view:run(Store, fun() ->
                                                     msgflow_hotspots:find(
                                                       msgflow_view:build(
                                                         Store, msgflow_hotspots:spec(Opts)), Opts)
                                                     ++ msgflow_hotspots:slow_calls(
                                                          msgflow_calls_view:build(Store, #{}), Opts)
                                             end)]
    end.

%% @doc The history of a pair counted on this node.
-spec local_history(term(), term()) -> list() | {error, not_started}.
local_history(Sender, Receiver) ->
    ok = msgflow_flags:untrace_self(),
    case msgflow_collector:store(true) of
        undefined -> {error, not_started};
        Store -> msgflow_view_pairs:history(Store, Sender, Receiver)
    end.

%% @doc What this node says to its coordinator's pull (its collector
%% calls it with its store: msgflow_collector:send_store_request/3): its figures and, when Top, its busiest pairs.
%% `last_snapshot_ms' is how long ago its last snapshot was taken, by its
%% own clock.
-spec report(msgflow_store:store(), boolean()) -> map().
report(Store = #{pairs := T}, Top) ->
    R = #{running => maps:get(running, Store), events => maps:get(events, Store),
          pairs => ets:info(T, size),
          last_snapshot_ms => case maps:get(snapshot_at, Store) of
                                  undefined -> undefined;
                                  At -> max(0, erlang:system_time(millisecond) - At)
                              end},
    case Top of
        true -> R#{top => msgflow_view:run(Store, fun() ->
                                                         msgflow_view:build(
                                                           Store, #{by => process,
                                                                    limit => ?TOP_KEPT})
                                                 end)};
        false -> R
    end.

%% @doc The labels of these local processes, as this node gives them.
-spec labels([pid()]) -> #{pid() => binary()}.
labels(Pids) ->
    ok = msgflow_flags:untrace_self(),
    maps:from_list([{P, msgflow_describe:label(P)} || P <- Pids, node(P) =:= node()]).

