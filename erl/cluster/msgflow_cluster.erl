%%% @doc msgflow across a cluster: the coordinator.
%%%
%%% Every send is counted once, on its sender's node: the receiving node
%%% sees no send event.  So the cluster's communication matrix is the sum
%%% of the nodes' tables, and each node keeps its own: `msgflow:start(#{nodes
%%% => all | [node()]})' starts msgflow on this node and, over
%%% distribution, on each node named, with this process (registered as
%%% `msgflow_cluster') as their coordinator.  A node's collector monitors
%%% the coordinator and stops counting `grace' ms after it goes (a
%%% coordinator stopped, its node down, a partition), so tracing is never
%%% left on.
%%%
%%% Code: a node without msgflow gets this node's modules with
%%% code:load_binary/3 (embedded nodes included) and the NIF written to
%%% its user cache directory (where msgflow-top writes it), after its OTP
%%% release and NIF version were found to be this node's; a node that
%%% differs is `incompatible', not a crash.
%%%
%%% Each interval the coordinator pulls every node's figures (events,
%%% pairs, how long ago its last snapshot was taken, by its own clock) and,
%%% every ?TOP_EVERY pulls, its busiest pairs, from the node's collector
%%% (never traced: a pull adds no edge): one request outstanding per
%%% node; a node that has not answered within two intervals is `stale' and
%%% the others go on.  net_kernel:monitor_nodes/2 tells it when a node goes
%%% down (it keeps the node's last figures and busiest pairs, `down' with
%%% the reason) and, with `nodes => all', when one joins (it is started).
%%%
%%% Views (top, matrix, hotspots, pairs, exports) are built on each node
%%% from its own store, at the same time, and merged here
%%% (msgflow_view_merge:merge/2): rates come from each node's own windows, no
%%% clocks are compared, and the coordinator holds no node's tables.  A
%%% node that is down or does not answer within ?VIEW_TIMEOUT ms is in a
%%% view with the busiest pairs it last reported, and `nodes/0' says so.
%%%
%%% Slightly over ~400 lines: the coordinator's API and its server share
%%% the member record.
-module(msgflow_cluster).
-behaviour(gen_server).
-compile({no_auto_import, [nodes/0]}).  %% nodes/0 is ours: each node and its status

-export([start_on/3, prepare/2, start_members/0, stop/0, forget/0, members/0, nodes/0, view/2,
         call_all/3, call_all/4, refresh/0, last_pairs/1]).
-export([start_link/2, init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
-export_type([node_status/0]).

-define(SERVER, ?MODULE).
-define(VIEW_TIMEOUT, 5000).   %% ms a node has to build its part of a view
-define(START_TIMEOUT, 30000). %% ms a node has to load msgflow and start
-define(TOP_EVERY, 10).        %% pulls between two pulls of the busiest pairs
%% what a node's collector runs for its coordinator's pull
-define(REPORT, {msgflow_cluster_node, report}).

%% What nodes/0 says of a node: `up' (answering), `down' (left the
%% cluster; `reason'), `stale' (has not answered a pull within two
%% intervals), `incompatible' (cannot run this msgflow; `reason');
%% `pairs' and `events' as of its last answer, `last_snapshot_ms' how long
%% before that answer its last snapshot was taken (by its clock).
-type node_status() :: #{node := node(), status := up | down | stale | incompatible,
                         pairs := non_neg_integer(), events := non_neg_integer(),
                         last_snapshot_ms := non_neg_integer() | undefined,
                         reason := term()}.

-record(member, {
    status = up :: up | down | stale | incompatible,
    reason :: term(),
    report = #{} :: map(),
    top :: msgflow_view:view() | undefined,     %% busiest pairs it last reported
    request :: {gen_server:request_id(), integer()} | undefined,
    pulls = 0 :: non_neg_integer()
}).

-record(st, {
    opts :: msgflow_opts:opts(),
    nodes :: all | [node()],
    members = #{} :: #{node() => #member{}},
    running = true :: boolean(),
    tick :: reference() | undefined
}).

%%% API

%% @doc The coordinator of the nodes Opts names (`nodes'), idle: started
%% before this node's tracing, so that it is among msgflow's own
%% processes, which are never traced.  start_members/0 then starts them.
-spec prepare(msgflow_opts:opts(), all | [node()]) -> ok | {error, term()}.
prepare(Opts, Nodes) ->
    _ = stop(),
    forget(),
    Spec = #{id => ?SERVER, start => {?MODULE, start_link, [Opts, Nodes]},
             restart => temporary, shutdown => 30000, type => worker},
    case supervisor:start_child(msgflow_sup, Spec) of
        {ok, _} -> ok;
        {error, _} = E -> E
    end.

%% @doc Starts msgflow on the nodes the prepared coordinator names, this
%% node's being started already.  `ok', or `{error, {nodes, [{Node,
%% Reason}]}}' when a node could not be started and `on_node_error' is
%% `abort' (then none counts and the coordinator is gone); with `skip'
%% the others go on and nodes/0 says why.
-spec start_members() -> ok | {error, term()}.
start_members() ->
    case server_call(start_members, {error, cluster_stopped}) of
        ok -> ok;
        {error, _} = E -> forget(), E
    end.

%% @doc Stops counting on every node.  The coordinator stays, with each
%% node's final figures, so that the views still cover them until the
%% next start (or forget/0).  `ok' also when no cluster runs.
-spec stop() -> ok.
stop() ->
    server_call(stop, ok).

%% @doc Forgets the cluster (a run on this node only starts).
-spec forget() -> ok.
forget() ->
    _ = whereis(msgflow_sup) =/= undefined andalso
        supervisor:terminate_child(msgflow_sup, ?SERVER) =:= ok,
    ok.

%% @doc The other nodes of the cluster msgflow counts on, whatever their
%% status; `[]' when it counts on this node only.
-spec members() -> [node()].
members() ->
    server_call(members, []).

%% @doc Pulls every node's figures and busiest pairs now and waits for the
%% answers (at most ?VIEW_TIMEOUT ms): what a node that goes down after it
%% keeps.  `ok' also when no cluster runs.
-spec refresh() -> ok.
refresh() ->
    server_call(refresh, ok).

%% @doc Each node's status, this one first.
-spec nodes() -> [node_status()].
nodes() ->
    [local_status() | server_call(statuses, [])].

%% @doc A view of every node (or of the one `Only' names) as Spec asks:
%% each node builds its own, the views are merged (msgflow_view_merge:merge/2),
%% and remote endpoints get the label their own node gives them.
%% `undefined' when msgflow never ran here.
-spec view(msgflow_view:spec(), all | node()) -> msgflow_view:view() | undefined.
view(Spec, Only) ->
    Nodes = [N || N <- [node() | members()], Only =:= all orelse N =:= Only],
    Parts = call_all(Nodes, local_view, [Spec]),
    Views = [V || {_, {ok, V = #{}}} <- Parts] ++ fallbacks(Parts, Spec),
    case Views of
        [] -> undefined;
        _ -> (with_remote_labels(msgflow_view_merge:merge(local_first(Views), Spec)))#{
               node_status => [S || S = #{node := N} <- nodes(), lists:member(N, Nodes)]}
    end.

%% A node that could not answer is in the view with the busiest pairs it
%% last reported (by process; a grouped view leaves it out).
fallbacks(Parts, Spec) ->
    Failed = [N || {N, R} <- Parts, not (is_tuple(R) andalso element(1, R) =:= ok
                                         andalso is_map(element(2, R)))],
    case {Failed, maps:get(by, Spec, process)} of
        {[], _} -> [];
        {_, process} -> server_call({tops, Failed}, []);
        _ -> []
    end.

local_first(Views) ->
    {Here, There} = lists:partition(fun(#{node := N}) -> N =:= node() end, Views),
    Here ++ There.

%% @doc `{Node, Result}' for each node, in that order: Result is
%% `{ok, msgflow_cluster_node:F(Args...)}' run there, or `{error, Reason}'
%% (the node did not answer within ?VIEW_TIMEOUT ms, or failed).  All the
%% nodes are asked at once; this node runs it in a process of its own.
-spec call_all([node()], atom(), list()) -> [{node(), {ok, term()} | {error, term()}}].
call_all(Nodes, F, Args) ->
    call_all(Nodes, msgflow_cluster_node, F, Args).

%% @doc call_all/3 of M:F(Args...).
-spec call_all([node()], module(), atom(), list()) -> [{node(), {ok, term()} | {error, term()}}].
call_all(Nodes, M, F, Args) ->
    Reqs = [{N, erpc:send_request(N, M, F, Args)} || N <- Nodes],
    Deadline = erlang:monotonic_time(millisecond) + ?VIEW_TIMEOUT,
    [{N, try erpc:receive_response(R, {abs, Deadline}) of
             {error, _} = E -> E;
             V -> {ok, V}
         catch
             error:{erpc, timeout} -> {error, timeout};
             error:{erpc, Why} -> {error, Why};
             C:Why -> {error, {C, Why}}
         end} || {N, R} <- Reqs].

%% The labels of remote processes in the view's endpoints, asked of their
%% own nodes (a process is named where it runs).
with_remote_labels(View = #{endpoints := Ends}) ->
    ByNode = maps:groups_from_list(fun node/1,
                                   [P || P <- maps:keys(Ends), is_pid(P), node(P) =/= node()]),
    Members = members(),
    Asked = [{N, Ps} || {N, Ps} <- maps:to_list(ByNode), lists:member(N, Members)],
    Found = lists:foldl(fun({ok, L}, Acc) when is_map(L) -> maps:merge(Acc, L);
                           (_, Acc) -> Acc
                        end, #{},
                        [R || {N, Ps} <- Asked, {_, R} <- call_all([N], labels, [Ps])]),
    msgflow_view_merge:relabel(View, Found).

%% @doc The busiest pairs the nodes named last reported (for nodes that do
%% not answer now).
-spec last_pairs([node()]) -> [msgflow:pair_count()].
last_pairs([]) ->
    [];
last_pairs(Nodes) ->
    [{S, R, C} || #{rows := Rows} <- server_call({tops, Nodes}, []),
                  #{sender := S, receiver := R, count := C} <- Rows].

%% A call to the coordinator, or IfGone when there is none or it ends
%% before it answers (a concurrent stop of the cluster, forget/0).
server_call(Request, IfGone) ->
    msgflow_call:call(?SERVER, Request, IfGone).

local_status() ->
    R = case msgflow_collector:store(false) of
            undefined -> #{events => 0, pairs => 0, last_snapshot_ms => undefined};
            Store -> msgflow_cluster_node:report(Store, false)
        end,
    #{node => node(), status => up, pairs => maps:get(pairs, R), events => maps:get(events, R),
      last_snapshot_ms => maps:get(last_snapshot_ms, R), reason => undefined}.

%%% The coordinator

%% @private
-spec start_link(msgflow_opts:opts(), all | [node()]) -> {ok, pid()} | {error, term()}.
start_link(Opts, Nodes) ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, {Opts, Nodes}, []).

%% @private
-spec init({msgflow_opts:opts(), all | [node()]}) -> {ok, #st{}}.
init({Opts, Nodes}) ->
    process_flag(trap_exit, true),
    ok = net_kernel:monitor_nodes(true, [nodedown_reason]),
    {ok, #st{opts = Opts, nodes = Nodes, running = false}}.

%% Each node named is started (all at once); with `abort', one that could
%% not be makes the start fail and stops the others.
start_members(St = #st{opts = Opts, nodes = Nodes}) ->
    Targets = case Nodes of
                  all -> erlang:nodes(visible);
                  L -> [N || N <- L, N =/= node()]
              end,
    Self = self(),
    Started = [{N, receive {started, Ref, R} -> R end}
               || {N, Ref} <- [{N, spawn_start(Self, N, Opts)} || N <- Targets]],
    Failed = [{N, R} || {N, {error, R}} <- Started],
    case {Failed, maps:get(on_node_error, Opts)} of
        {[_ | _], abort} ->
            _ = [stop_member(N) || {N, ok} <- Started],
            {{error, {nodes, Failed}}, St};
        _ ->
            Members = maps:from_list([{N, member(R)} || {N, R} <- Started]),
            {ok, schedule(St#st{members = Members, running = true})}
    end.

spawn_start(Self, N, Opts) ->
    Ref = make_ref(),
    _ = spawn_link(fun() -> Self ! {started, Ref, start_member(N, Opts, Self)} end),
    Ref.

member(ok) -> #member{};
member({error, {incompatible, Why}}) -> #member{status = incompatible, reason = Why};
member({error, Why}) -> #member{status = down, reason = Why}.

%% @private
-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call(start_members, _From, St) ->
    {Reply, St1} = start_members(St),
    {reply, Reply, St1};
handle_call(refresh, _From, St) ->
    {reply, ok, pull_now(St)};
handle_call(members, _From, St) ->
    {reply, maps:keys(St#st.members), St};
handle_call(statuses, _From, St) ->
    {reply, [status(N, M) || {N, M} <- lists:sort(maps:to_list(St#st.members))], St};
handle_call({tops, Nodes}, _From, St) ->
    {reply, [T || N <- Nodes, #member{top = T} <- [maps:get(N, St#st.members, #member{})],
                  is_map(T)], St};
handle_call(stop, _From, St) ->
    _ = [stop_member(N) || {N, #member{status = S}} <- maps:to_list(St#st.members),
                           S =/= down, S =/= incompatible],
    %% their final figures, for nodes/0
    {reply, ok, pull_now(St#st{running = false})};
handle_call(Other, _From, St) ->
    {reply, {error, {unknown_call, Other}}, St}.

%% @private
-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

%% @private
-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(tick, St = #st{running = true}) ->
    {noreply, schedule(pull(St#st{tick = undefined}))};
handle_info(tick, St) ->
    {noreply, St#st{tick = undefined}};
handle_info({nodedown, N, Info}, St = #st{members = Ms}) when is_map_key(N, Ms) ->
    M = maps:get(N, Ms),
    {noreply, St#st{members = Ms#{N := M#member{status = down, request = undefined,
                                                reason = proplists:get_value(
                                                           nodedown_reason, Info, nodedown)}}}};
handle_info({nodeup, N, _}, St = #st{nodes = Nodes, running = true, members = Ms, opts = Opts})
  when Nodes =:= all; is_map_key(N, Ms) ->
    %% a node that joins is started; one that comes back goes on with this
    %% run (resume): if it still counts (back within its grace) it keeps
    %% counting for this coordinator, if it stopped it starts again
    %% keeping what it had counted
    {noreply, St#st{members = Ms#{N => member(start_member(N, Opts#{resume => true}, self()))}}};
handle_info(Msg, St = #st{members = Ms}) ->
    %% a pull's answer
    case [{N, M, R} || {N, M = #member{request = {Id, _}}} <- maps:to_list(Ms),
                       (R = check(Msg, Id)) =/= no_response] of
        [{N, M, Result} | _] -> {noreply, St#st{members = Ms#{N := answered(M, Result)}}};
        [] -> {noreply, St}
    end.

check(Msg, Id) ->
    case gen_server:check_response(Msg, Id) of
        no_reply -> no_response;
        {reply, R} -> {ok, R};
        {error, {Why, _}} -> {error, Why}
    end.

answered(M, {ok, R = #{}}) ->
    M#member{status = up, reason = undefined, request = undefined,
             report = maps:remove(top, R),
             top = case R of
                       #{top := T = #{}} -> T;
                       _ -> M#member.top
                   end};
answered(M, {error, Why}) ->
    M#member{status = stale, reason = Why, request = undefined}.

%% Every node's figures and busiest pairs, pulled and waited for.
pull_now(St = #st{members = Ms}) ->
    Asked = [N || {N, #member{status = S}} <- maps:to_list(Ms), S =/= down, S =/= incompatible],
    Reqs = [{N, msgflow_collector:send_store_request(N, true, ?REPORT)}
            || N <- Asked],
    Deadline = erlang:monotonic_time(millisecond) + ?VIEW_TIMEOUT,
    Answers = maps:from_list(
                [{N, case gen_server:receive_response(R, {abs, Deadline}) of
                         {reply, Rep} -> {ok, Rep};
                         timeout -> {error, timeout};
                         {error, {Why, _}} -> {error, Why}
                     end} || {N, R} <- Reqs]),
    St#st{members = maps:map(fun(N, M) ->
                                     case Answers of
                                         #{N := A} -> answered(M#member{request = undefined}, A);
                                         _ -> M
                                     end
                             end, Ms)}.

%% @private
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, _St) ->
    ok.

schedule(St = #st{opts = #{interval := I}}) ->
    St#st{tick = erlang:send_after(I, self(), tick)}.

%% One request outstanding per node: one that was not answered within two
%% intervals makes its node stale until it is.
pull(St = #st{members = Ms, opts = #{interval := I}}) ->
    Now = erlang:monotonic_time(millisecond),
    Ms1 = maps:map(fun(_, M = #member{status = S}) when S =:= down; S =:= incompatible -> M;
                      (_, M = #member{request = {_, At}}) when Now - At > 2 * I ->
                           M#member{status = stale, reason = no_answer};
                      (_, M = #member{request = {_, _}}) -> M;
                      (N, M = #member{pulls = P}) ->
                           Top = P rem ?TOP_EVERY =:= 0,
                           M#member{request = {msgflow_collector:send_store_request(
                                                 N, Top, ?REPORT), Now},
                                    pulls = P + 1}
                   end, Ms),
    St#st{members = Ms1}.

status(N, #member{status = S, reason = Why, report = R}) ->
    #{node => N, status => S, pairs => maps:get(pairs, R, 0), events => maps:get(events, R, 0),
      last_snapshot_ms => maps:get(last_snapshot_ms, R, undefined), reason => Why}.

%%% Starting and stopping a node

%% @doc msgflow started on node N alone (msgflow:start_on/2), with
%% validated options: this build's code and NIF loaded there when it has
%% none (into the node's `filename:basedir(user_cache, "msgflow")';
%% refused before anything is written on another OTP release or NIF
%% version, as for a cluster's member), then its msgflow:start/1 with
%% `owner => Owner' (msgflow_sup of the calling node), so that the run
%% stops `grace' ms (default 10,000) after Owner exits or this node
%% disconnects.  Views are asked there (`erpc:call(N, msgflow, top, [])'
%% prints on the caller's terminal).  Errors: `{error, {incompatible,
%% _}}', `{error, Why}' of the load, the RPC or msgflow:start/1 there;
%% msgflow:start_on/2 adds `{error, {badarg, {node, N}, _}}' for this node
%% or one it cannot connect to.
-spec start_on(node(), msgflow_opts:opts(), pid()) -> ok | {error, term()}.
start_on(N, Opts, Owner) ->
    start_member(N, maps:remove(coordinator, Opts#{owner => Owner}), none).

start_member(N, Opts0, Coordinator) ->
    Opts = case Coordinator of
               none -> Opts0#{nodes => local};
               _ -> Opts0#{nodes => local, coordinator => Coordinator}
           end,
    try
        ok = msgflow_cluster_code:compatible(N, ?START_TIMEOUT),
        ok = msgflow_cluster_code:ensure(N, ?START_TIMEOUT),
        case erpc:call(N, msgflow, start, [Opts], ?START_TIMEOUT) of
            ok -> ok;
            {error, _} = E -> E
        end
    catch
        throw:{incompatible, _} = I -> {error, I};
        throw:Why -> {error, Why};
        error:{erpc, Why} -> {error, Why};
        C:Why -> {error, {C, Why}}
    end.

stop_member(N) ->
    catch erpc:call(N, msgflow, stop, [], ?START_TIMEOUT).
