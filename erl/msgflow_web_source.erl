%%% @doc What msgflow's web server serves (msgflow_web's source: the
%%% page's state for a grouping, its hotspots, /metrics), built from the
%%% views of this node or of the cluster (msgflow_scope:with_build/2) and
%%% rendered by msgflow_web_page and msgflow_prom.  The facade's: the web
%%% layer gets its documents through the fun source/1 makes, and calls
%%% nothing above it.
-module(msgflow_web_source).
-export([start/1, source/1, state/3]).

%% @doc msgflow:web/1: serves msgflow's live page from this node with
%% OTP's inets httpd (msgflow_web), msgflow's application started if it
%% is not, until msgflow:web_stop/0 or the application stops: the graph of
%% the message flow (by name, or another grouping chosen on the page), the
%% top table, the matrix, hotspots, request flows, the nodes of a cluster,
%% msgflow's own figures, updated every second; `/metrics' in Prometheus'
%% text format on the same server.  Read-only: nothing served starts,
%% stops or changes tracing.  Opts: `port' (7780; 0 for any free port),
%% `ip' (loopback, `{127,0,0,1}'; `{0,0,0,0}' listens on every interface:
%% the README shows an SSH tunnel instead), `metrics_edges' (100: edge
%% series of /metrics, the busiest by name, the rest summed as `other').
%% `{ok, Url}'; errors: `{error, {badopt, {Key, Value}, Allowed}}',
%% `{error, {already_started, Url}}', `{error, {Reason, {port, Port}}}'
%% when the port cannot be listened on (eaddrinuse).  The page says "not
%% started" until msgflow:start/1 has run.
-spec start(term()) -> {ok, string()} | {error, term()}.
start(Opts0) ->
    case msgflow_opts:check(web, Opts0) of
        {ok, Opts} ->
            case application:ensure_all_started(msgflow) of
                {ok, _} -> msgflow_web:start(Opts, source(Opts));
                {error, _} = E -> E
            end;
        {error, _} = E -> E
    end.

%% @doc What msgflow_web serves (msgflow:web/1's checked Opts:
%% `metrics_edges'): the page's state as JSON for a grouping, the
%% hotspots as JSON, and `/metrics', each from one snapshot of this node
%% or the cluster.
-spec source(map()) -> msgflow_web:source().
source(#{metrics_edges := Edges}) ->
    fun({state, By}) ->
            case msgflow_scope:with_build(all, fun(Build) -> state(Build, By, false) end) of
                {error, _} = E -> E;
                State -> {ok, msgflow_report:json_encode(State)}
            end;
       (hotspots) ->
            Find = fun(Build) -> msgflow_hotspots:find(Build(msgflow_hotspots:spec(#{})), #{}) end,
            case msgflow_scope:with_build(all, Find) of
                {error, _} = E -> E;
                Found -> {ok, msgflow_report:json_encode(msgflow_web_page:hotspots(Found))}
            end;
       (metrics) ->
            case msgflow_scope:with_build(all, fun(Build) -> Build(#{by => name}) end) of
                {error, _} = E -> E;
                View ->
                    {ok, msgflow_prom:metrics(View, msgflow_scope:calls_view(name),
                                              msgflow_collector:info_as_is(), Edges)}
            end
    end.

%% @doc The page's state from views Build gives (msgflow_scope:with_build/2),
%% with the request flows, the nodes, the call edges and msgflow's own
%% figures; a static page (an export) has the hotspots in it too, a live
%% one fetches them apart.
-spec state(fun((msgflow_view:spec()) -> msgflow_view:view()), msgflow_view:grouping(), boolean()) ->
          map().
state(Build, By, Static) ->
    Cluster = msgflow_cluster:members() =/= [],
    %% a spec asked for twice (the graph and the pairs, by process) is built once
    Specs = msgflow_web_page:views(By, Cluster),
    Built = maps:from_list([{Spec, Build(Spec)} || Spec <- lists:usort(maps:values(Specs))]),
    Views = maps:map(fun(_, Spec) -> maps:get(Spec, Built) end, Specs),
    Hot = case Static of
              true -> msgflow_hotspots:find(Build(msgflow_hotspots:spec(#{})), #{});
              false -> []
          end,
    Calls = case By of
                kind -> none;
                _ -> msgflow_scope:calls_view(By)
            end,
    msgflow_web_page:state(Views, #{hotspots => Hot, calls => Calls,
                                    flows => {msgflow_flow:flows(), msgflow_flow:last()},
                                    node_status => msgflow_cluster:nodes(),
                                    info => msgflow_collector:info_as_is(), static => Static}).

