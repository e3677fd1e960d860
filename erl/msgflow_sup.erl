%%% @private Supervises the collector (permanent: a collector that dies is
%%% restarted idle; the session it owned answers `remove', so its tracing
%%% ends) and, while msgflow counts across a cluster, the coordinator
%%% (msgflow_cluster, a temporary child started by msgflow:start/1), and
%%% the flow keeper (msgflow_flow_keeper, a transient child started by the
%%% first follow, so that it outlives the shell command that asked: one
%%% that dies is started again and clears the follow_calls patterns the
%%% dead one left, which this process's table lists).  The remote end
%%% (msgflow_remote) answers msgflow-top.
-module(msgflow_sup).
-behaviour(supervisor).
-export([start_link/0, init/1]).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

-spec init([]) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init([]) ->
    %% where a legacy run's session is kept while it lasts: here, so that
    %% a collector restarted after a crash finds it (msgflow_run)
    ok = msgflow_run:legacy_table(),
    %% the functions a follow_calls entry has a legacy meta pattern on,
    %% while it is set: here, so that a keeper that was killed leaves none
    %% (msgflow_flow_entry)
    ok = msgflow_flow_entry:patterns_table(),
    %% msgflow's workers and what they hold, counted in own_memory
    ok = msgflow_workers:table(),
    Collector = #{id => msgflow_collector,
                  start => {msgflow_collector, start_link, []},
                  restart => permanent,
                  shutdown => 5000,
                  type => worker},
    %% msgflow-top's end on the node (its requests are not counted)
    Remote = #{id => msgflow_remote,
               start => {msgflow_remote, start_link, []},
               restart => permanent,
               shutdown => brutal_kill,
               type => worker},
    %% the always-on bottleneck detector: logs and /metrics series
    Alerts = #{id => msgflow_alerts,
               start => {msgflow_alerts, start_link, []},
               restart => permanent,
               shutdown => brutal_kill,
               type => worker},
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10}, [Collector, Remote, Alerts]}}.
