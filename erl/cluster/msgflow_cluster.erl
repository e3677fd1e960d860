%%% @doc msgflow across a cluster: starting a run on its nodes, and the
%%% coordinator that watches them.
%%%
%%% Every send is counted once, on its sender's node: the receiving node
%%% sees no send event.  So the cluster's communication matrix is the sum
%%% of the nodes' tables, and each node keeps its own: `msgflow:start(#{nodes
%%% => all | [node()]})' starts msgflow on this node and, over
%%% distribution, on each node named, with the coordinator (a process of
%%% this node, registered as `msgflow_cluster') as their coordinator.  A
%%% node's collector monitors the coordinator and stops counting `grace'
%%% ms after it goes (a coordinator stopped, its node down, a partition),
%%% so tracing is never left on.
%%%
%%% Code: a node without msgflow gets this node's modules with
%%% code:load_binary/3 (embedded nodes included) and the NIF written to
%%% its user cache directory (where msgflow-top writes it), after its OTP
%%% release and NIF version were found to be this node's; a node that
%%% differs is `incompatible', not a crash (msgflow_cluster_code).
%%%
%%% The coordinator does only its own work and never waits: a node is
%%% started (loaded, checked, its msgflow started: up to three steps of
%%% 30 s) by a process of its own, `starting' meanwhile; each interval it
%%% asks every node for its figures (events, pairs, how long ago its last
%%% snapshot was taken, by its own clock) and, every ?TOP_EVERY asks, its
%%% busiest pairs, with erpc: the node answers from a process of its own
%%% (report/1), one request outstanding per node, and a node that has not
%%% answered within two intervals is `stale' while the others go on.
%%% net_kernel:monitor_nodes/2 tells it when a node goes down (its last
%%% figures and busiest pairs are kept, `down' with the reason) and, with
%%% `nodes => all', when one joins (it is started).  What it knows is in
%%% an ETS table it owns, which members/0, nodes/0 and last_top/1 read
%%% without a call: no view ever waits on the coordinator.
%%%
%%% Views of a cluster are asked of each node by msgflow_query (never
%%% through the coordinator), with a deadline.
-module(msgflow_cluster).
-behaviour(gen_server).
-compile({no_auto_import, [nodes/0]}).  %% nodes/0 is ours: each node and its status

-export([start/1, start_on/2, stop/0, reset/0, members/0, nodes/0, last_top/1,
         refresh/0, call_all/4]).
%% what a node runs for its coordinator (over erpc, in a process of its own)
-export([report/1, member_start/3]).
-export([start_link/2, init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
-export_type([node_status/0]).

-define(SERVER, ?MODULE).
-define(TABLE, msgflow_cluster_nodes). %% what the coordinator knows, read without a call
-define(CALL_TIMEOUT, 5000).   %% ms a node has to answer call_all/3
-define(START_TIMEOUT, 30000). %% ms each step of starting a node may take
-define(TOP_EVERY, 10).        %% asks between two asks for the busiest pairs
-define(TOP_KEPT, 100).        %% busiest pairs kept per node for when it is gone

%% What nodes/0 says of a node: `up' (answering), `starting' (being
%% started), `down' (left the cluster; `reason'), `stale' (has not
%% answered within two intervals), `incompatible' (cannot run this
%% msgflow; `reason'); `pairs' and `events' as of its last answer,
%% `last_snapshot_ms' how long before that answer its last snapshot was
%% taken (by its clock).
-type node_status() :: #{node := node(), status := up | starting | down | stale | incompatible,
                         pairs := non_neg_integer(), events := non_neg_integer(),
                         last_snapshot_ms := non_neg_integer() | undefined,
                         reason := term()}.

-record(member, {
    status = starting :: up | starting | down | stale | incompatible,
    reason :: term(),
    report = #{} :: map(),
    request :: {erpc:request_id(), integer()} | undefined,
    asks = 0 :: non_neg_integer()
}).

-record(st, {
    opts :: msgflow_opts:opts(),
    nodes :: all | [node()],
    members = #{} :: #{node() => #member{}},
    running = false :: boolean(),
    %% the start/1 waiting for its nodes to be started, those left, and
    %% why those that could not be were not
    starting :: {gen_server:from(), [node()], [{node(), term()}]} | undefined,
    %% refresh/0 and stop/0 callers waiting for every node's answer, and
    %% the deadline's timer of the latest ask of all
    waiting = [] :: [gen_server:from()],
    asked_all :: reference() | undefined,
    tick :: reference() | undefined
}).

%%% API

%% @doc msgflow:start/1: Opts checked (msgflow_opts:validate/1),
%% msgflow's application started, then a run on this node only (`nodes
%% => local'), or across a cluster: the coordinator first (msgflow's own
%% processes are never traced), this node's collector, then every node
%% named, each loaded and started by a process of its own.  `ok', `{error,
%% already_started}', `{error, {badopt, ...}}', or `{error, {nodes,
%% [{Node, Reason}]}}' when a node could not be started and
%% `on_node_error' is `abort' (then none counts and the coordinator is
%% gone); with `skip' the others go on and nodes/0 says why.  Waits at
%% most for the three steps of a node's start (95 s).
-spec start(term()) -> ok | {error, term()}.
start(Opts0) ->
    case msgflow_opts:validate(Opts0) of
        {ok, Valid} ->
            ok = warn_deprecated(Opts0),
            case application:ensure_all_started(msgflow) of
                {ok, _} -> start_valid(owned(Valid));
                {error, _} = E -> E
            end;
        {error, _} = E ->
            E
    end.

%% A run with no end of its own (no `duration', no `owner') started by a
%% caller whose group leader is on another node (a remote shell) is owned
%% by that group leader, unless `detach => true': it ends `grace' after
%% that node disconnects or the shell goes, so that a remote shell that
%% went away leaves no tracing on.  (Not the caller itself: a shell's
%% evaluator is started again after every error.)
owned(Opts = #{duration := infinity, detach := false}) when not is_map_key(owner, Opts) ->
    GL = group_leader(),
    case node(GL) =:= node() of
        true -> Opts;
        false -> Opts#{owner => GL}
    end;
owned(Opts) ->
    Opts.

start_valid(Opts = #{nodes := local}) ->
    case msgflow_collector:start(Opts) of
        ok -> forget();
        {error, _} = E -> E
    end;
start_valid(Opts = #{nodes := Nodes}) ->
    Running = case msgflow_collector:store(false) of
                  #{running := R} -> R;
                  _ -> false
              end,
    %% the coordinator before this node's tracing: it is msgflow's own
    case Running orelse prepare(Opts, Nodes) of
        true ->
            {error, already_started};
        ok ->
            case msgflow_collector:start(Opts#{nodes => local}) of
                ok ->
                    case msgflow_call:call(?SERVER, start_members, {error, cluster_stopped},
                                           3 * ?START_TIMEOUT + 5000) of
                        ok -> ok;
                        {error, _} = E -> forget(), _ = msgflow_collector:stop(), E
                    end;
                {error, _} = E ->
                    forget(),
                    E
            end;
        {error, _} = E ->
            E
    end.

%% The coordinator of the nodes Opts names, idle.
prepare(Opts, Nodes) ->
    _ = stop(),
    forget(),
    Spec = #{id => ?SERVER, start => {?MODULE, start_link, [Opts, Nodes]},
             restart => temporary, shutdown => 30000, type => worker},
    case supervisor:start_child(msgflow_sup, Spec) of
        {ok, _} -> ok;
        {error, _} = E -> E
    end.

%% @doc Starts counting on node Node only (msgflow:start_on/2), shipping
%% this build there when it has no msgflow: its code and NIF are loaded
%% there (into the node's `filename:basedir(user_cache, "msgflow")'; refused
%% before anything is written on another OTP release or NIF version, as
%% for a cluster's member), then its run started with `owner =>
%% msgflow_sup' of this node, so that the run stops `grace' ms (default
%% 10,000) after this node's msgflow goes or this node disconnects.
%% Views are asked there (`erpc:call(N, msgflow, top, [])' prints on the
%% caller's terminal).  Opts are start/1's, `procs' all, new or existing,
%% no `nodes'.  Errors: `{error, {badarg, {node, Node}, _}}' for this node
%% or one it cannot connect to, `{error, {badopt, ...}}',
%% `{error, {incompatible, _}}', `{error, Why}' of the load, the RPC or
%% the start there.
-spec start_on(term(), term()) -> ok | {error, term()}.
start_on(Node, Opts) ->
    _ = element(1, msgflow_opts:validate(Opts)) =:= ok andalso warn_deprecated(Opts),
    Reach = [<<"a node this one can connect to, not this one">>],
    case msgflow_opts:validate(Opts) of
        {ok, #{procs := P}} when is_list(P) ->
            {error, {badopt, {procs, P}, [all, new, existing]}};
        {ok, #{nodes := N}} when N =/= local ->
            {error, {badopt, {nodes, N}, [<<"none: start_on/2 names its node">>]}};
        {ok, Valid} when is_atom(Node), Node =/= node() ->
            case net_kernel:connect_node(Node) of
                true ->
                    {ok, _} = application:ensure_all_started(msgflow),
                    start_member(Node, Valid#{owner => whereis(msgflow_sup)}, none);
                _ ->
                    {error, {badarg, {node, Node}, Reach}}
            end;
        {ok, _} ->
            {error, {badarg, {node, Node}, Reach}};
        {error, _} = E ->
            E
    end.

%% @doc Stops counting on every node, this one last.  The coordinator
%% stays, with each node's final figures, so that the views still cover
%% them until the next start.  `ok' also when no cluster runs; `{error,
%% {timeout, msgflow_collector}}' when this node's collector did not
%% answer.
-spec stop() -> ok | {error, {timeout, msgflow_collector}}.
stop() ->
    _ = msgflow_call:call(?SERVER, stop, ok, ?START_TIMEOUT + 5000),
    msgflow_collector:stop().

%% @doc Forgets the counts (tracing, if on, goes on) on this node and on
%% every node of the cluster this node's coordinator started (a node
%% counting for another coordinator, or for itself, keeps its counts).
%% `{error, {timeout, msgflow_collector}}' when this node's collector did
%% not answer.
-spec reset() -> ok | {error, {timeout, msgflow_collector}}.
reset() ->
    Coordinator = whereis(?SERVER),
    _ = call_all(members(), msgflow_collector, reset_for, [Coordinator]),
    msgflow_collector:reset().

%% Forgets the cluster (a run on this node only starts).
forget() ->
    _ = whereis(msgflow_sup) =/= undefined andalso
        supervisor:terminate_child(msgflow_sup, ?SERVER) =:= ok,
    ok.

%% @doc The other nodes of the cluster msgflow counts on, whatever their
%% status; `[]' when it counts on this node only.  Read without a call.
-spec members() -> [node()].
members() ->
    [N || {N, _} <- read(member)].

%% @doc Each node's status, this one first: the others' read without a
%% call to the coordinator, this one's figures asked of its collector.
-spec nodes() -> [node_status()].
nodes() ->
    [local_status() | [S || {_, S} <- lists:keysort(1, read(member))]].

%% @doc The busiest pairs Node last reported (a view by process), or
%% `none': what stands for a node that does not answer.
-spec last_top(node()) -> msgflow_rows:view() | none.
last_top(Node) ->
    case read({top, Node}) of
        [{_, Top}] -> Top;
        [] -> none
    end.

%% @doc Asks every node for its figures and busiest pairs now and waits
%% for the answers (at most 5 s): what a node that goes down after it
%% keeps.  `ok' also when no cluster runs.
-spec refresh() -> ok.
refresh() ->
    _ = msgflow_call:call(?SERVER, refresh, ok, ?CALL_TIMEOUT + 1000),
    ok.

%% @doc `{Node, Result}' for each node, in that order: Result is `{ok,
%% M:F(Args...)}' run there (over erpc, in a process of its own), or
%% `{error, Reason}' (the node did not answer within 5 s, or failed).
%% All the nodes are asked at once.
-spec call_all([node()], module(), atom(), list()) -> [{node(), {ok, term()} | {error, term()}}].
call_all(Nodes, M, F, Args) ->
    Reqs = [{N, erpc:send_request(N, M, F, Args)} || N <- Nodes],
    Deadline = erlang:monotonic_time(millisecond) + ?CALL_TIMEOUT,
    [{N, try erpc:receive_response(R, {abs, Deadline}) of
             {error, _} = E -> E;
             V -> {ok, V}
         catch
             error:{erpc, timeout} -> {error, timeout};
             error:{erpc, Why} -> {error, Why};
             C:Why -> {error, {C, Why}}
         end} || {N, R} <- Reqs].

%% What the coordinator's table holds of Key, or [] when there is no
%% coordinator.
read(member) ->
    try ets:match_object(?TABLE, {{member, '_'}, '_'}) of
        Objs -> [{N, S} || {{member, N}, S} <- Objs]
    catch error:badarg -> []
    end;
read(Key) ->
    try ets:lookup(?TABLE, Key)
    catch error:badarg -> []
    end.

local_status() ->
    R = case msgflow_collector:store(false) of
            Store = #{pairs := _} -> figures(Store);
            _ -> #{events => 0, pairs => 0, last_snapshot_ms => undefined}
        end,
    #{node => node(), status => up, pairs => maps:get(pairs, R), events => maps:get(events, R),
      last_snapshot_ms => maps:get(last_snapshot_ms, R), reason => undefined}.

%%% What a node runs for its coordinator

%% @doc This node's figures for its coordinator (run over erpc, in a
%% process of its own): `running', `events', `pairs',
%% `last_snapshot_ms' (how long ago its last snapshot was taken, by its
%% own clock) and, when Top, its busiest pairs (a view by process, from a
%% snapshot taken now); `{error, not_started}'.
-spec report(boolean()) -> map() | {error, not_started | {timeout, atom()}}.
report(Top) ->
    ok = msgflow_flags:untrace_self(),
    case msgflow_collector:store(Top) of
        Store = #{pairs := _} when Top ->
            (figures(Store))#{top => msgflow_workers:run(Store, fun() ->
                                                               msgflow_rows:build(
                                                                 Store, #{by => process,
                                                                          limit => ?TOP_KEPT})
                                                       end)};
        Store = #{pairs := _} ->
            figures(Store);
        undefined ->
            {error, not_started};
        {error, _} = E ->
            E
    end.

figures(Store = #{pairs := T}) ->
    #{running => maps:get(running, Store), events => maps:get(events, Store),
      pairs => case msgflow_row_table:size(T) of undefined -> 0; N -> N end,
      last_snapshot_ms => case maps:get(snapshot_at, Store) of
                              undefined -> undefined;
                              At -> max(0, erlang:system_time(millisecond) - At)
                          end}.

%% @doc msgflow started on this node for a coordinator (run over erpc by
%% the process starting it): Opts as msgflow:start/1 takes them, checked
%% here, with the coordinator's pid (the run stops `grace' ms after it
%% goes) and whether it goes on with a run that stopped or still runs
%% for it (Resume: the node came back).
%% Each option given in a form that goes in a later release said once
%% in the log.
warn_deprecated(Opts) ->
    msgflow_opts:warn_deprecated(start, msgflow_opts:deprecated(Opts)).

-spec member_start(map(), pid() | none, boolean()) -> ok | {error, term()}.
member_start(Opts, Coordinator, Resume) ->
    case msgflow_opts:validate(Opts) of
        {ok, Valid} ->
            case application:ensure_all_started(msgflow) of
                {ok, _} ->
                    Run = case Coordinator of
                              none -> Valid#{nodes => local};
                              _ -> Valid#{nodes => local, coordinator => Coordinator, resume => Resume}
                          end,
                    msgflow_collector:start(Run);
                {error, _} = E ->
                    E
            end;
        {error, _} = E ->
            E
    end.

%%% The coordinator

%% @private
-spec start_link(msgflow_opts:opts(), all | [node()]) -> {ok, pid()} | {error, term()}.
start_link(Opts, Nodes) ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, {Opts, Nodes}, []).

%% @private
-spec init({msgflow_opts:opts(), all | [node()]}) -> {ok, #st{}}.
init({Opts, Nodes}) ->
    process_flag(trap_exit, true),
    ?TABLE = ets:new(?TABLE, [named_table, protected, {read_concurrency, true}]),
    ok = net_kernel:monitor_nodes(true, [nodedown_reason]),
    {ok, #st{opts = Opts, nodes = Nodes}}.

%% @private
-spec handle_call(term(), gen_server:from(), #st{}) ->
          {reply, term(), #st{}} | {noreply, #st{}}.
handle_call(start_members, From, St = #st{opts = Opts, nodes = Nodes}) ->
    Targets = case Nodes of
                  all -> erlang:nodes(visible);
                  L -> [N || N <- L, N =/= node()]
              end,
    St1 = lists:foldl(fun(N, Acc) -> start_node(N, Opts, Acc) end, St#st{running = true}, Targets),
    case Targets of
        [] -> {reply, ok, schedule(St1)};
        _ -> {noreply, St1#st{starting = {From, Targets, []}}}
    end;
handle_call(refresh, From, St) ->
    {noreply, ask_all(St#st{waiting = [From | St#st.waiting]})};
handle_call(stop, From, St = #st{members = Ms}) ->
    %% stopped by a process of their own; their final figures asked after
    Self = self(),
    Counting = [N || {N, #member{status = S}} <- maps:to_list(Ms), S =/= down,
                     S =/= incompatible],
    _ = spawn_link(fun() -> _ = call_all(Counting, msgflow, stop, []), Self ! stopped end),
    {noreply, St#st{running = false, waiting = [From | St#st.waiting]}};
handle_call(Other, _From, St) ->
    {reply, {error, {unknown_call, Other}}, St}.

%% @private
-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

%% @private
-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(tick, St = #st{running = true}) ->
    {noreply, schedule(ask(St#st{tick = undefined}, false))};
handle_info(tick, St) ->
    {noreply, St#st{tick = undefined}};
handle_info(stopped, St) ->
    %% the nodes stopped: their final figures
    {noreply, ask_all(St)};
handle_info({asked_all, Ref}, St = #st{waiting = W, asked_all = Ref}) ->
    %% the deadline of refresh/0 or stop/0: answered with what came
    [gen_server:reply(From, ok) || From <- W],
    {noreply, St#st{waiting = [], asked_all = undefined}};
handle_info({started, N, Result}, St = #st{members = Ms}) ->
    M = (maps:get(N, Ms, #member{}))#member{request = undefined},
    M1 = case Result of
             ok -> M#member{status = up, reason = undefined};
             {error, {incompatible, Why}} -> M#member{status = incompatible, reason = Why};
             {error, Why} -> M#member{status = down, reason = Why}
         end,
    {noreply, started(N, Result, put_member(N, M1, St))};
handle_info({nodedown, N, Info}, St = #st{members = Ms}) when is_map_key(N, Ms) ->
    M = maps:get(N, Ms),
    Why = proplists:get_value(nodedown_reason, Info, nodedown),
    {noreply, put_member(N, M#member{status = down, request = undefined, reason = Why}, St)};
handle_info({nodeup, N, _}, St = #st{nodes = Nodes, running = true, members = Ms, opts = Opts})
  when Nodes =:= all; is_map_key(N, Ms) ->
    %% a node that joins is started; one that comes back goes on with this
    %% run (resume): if it still counts (back within its grace) it keeps
    %% counting for this coordinator, if it stopped it starts again
    %% keeping what it had counted
    {noreply, start_node(N, Opts#{resume => true}, St)};
handle_info({'EXIT', _, normal}, St) ->
    {noreply, St};
handle_info(Msg, St = #st{members = Ms}) ->
    %% an answer to an ask
    case [{N, M, R} || {N, M = #member{request = {Id, _}}} <- maps:to_list(Ms),
                       R <- [check(Msg, Id)], R =/= no_response] of
        [{N, M, Result} | _] ->
            _ = case Result of
                    {ok, #{top := Top = #{}}} -> ets:insert(?TABLE, {{top, N}, Top});
                    _ -> true
                end,
            {noreply, reply_if_answered(put_member(N, answered(M, Result), St))};
        [] -> {noreply, St}
    end.

check(Msg, Id) ->
    try erpc:check_response(Msg, Id) of
        no_response -> no_response;
        {response, R = #{}} -> {ok, R};
        {response, Other} -> {error, Other}
    catch
        error:{erpc, Why} -> {error, Why};
        C:Why -> {error, {C, Why}}
    end.

answered(M, {ok, R}) ->
    M#member{status = up, reason = undefined, request = undefined, report = maps:remove(top, R)};
answered(M, {error, Why}) ->
    M#member{status = stale, reason = Why, request = undefined}.

%% refresh/0 and stop/0 callers answered once every node has.
reply_if_answered(St = #st{members = Ms, waiting = W}) ->
    case W =/= [] andalso lists:all(fun(#member{request = R}) -> R =:= undefined end,
                                    maps:values(Ms)) of
        true ->
            [gen_server:reply(From, ok) || From <- W],
            St#st{waiting = []};
        false ->
            St
    end.

%% @private
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, _St) ->
    ok.

%% A member's record, with its status in the table.
put_member(N, M = #member{status = S, reason = Why, report = R}, St = #st{members = Ms}) ->
    true = ets:insert(?TABLE, {{member, N},
                               #{node => N, status => S, pairs => maps:get(pairs, R, 0),
                                 events => maps:get(events, R, 0),
                                 last_snapshot_ms => maps:get(last_snapshot_ms, R, undefined),
                                 reason => Why}}),
    St#st{members = Ms#{N => M}}.

%% Node N started by a process of its own; `starting' until it says.
start_node(N, Opts, St) ->
    Self = self(),
    _ = spawn_link(fun() -> Self ! {started, N, start_member(N, Opts, Self)} end),
    M = maps:get(N, St#st.members, #member{}),
    put_member(N, M#member{status = starting, request = undefined}, St).

%% One node of those start_members was asked for has said: when all have,
%% the caller is answered (with `abort', one that could not be started
%% makes the start fail and the others are stopped).
started(N, Result, St = #st{starting = {From, Left, Failed0}, opts = Opts, members = Ms}) ->
    Failed = case Result of
                 ok -> Failed0;
                 {error, Why} -> [{N, Why} | Failed0]
             end,
    case lists:delete(N, Left) of
        [] ->
            case {Failed, maps:get(on_node_error, Opts)} of
                {[_ | _], abort} ->
                    %% those started stop, by a process of their own
                    Up = [X || {X, #member{status = up}} <- maps:to_list(Ms)],
                    _ = spawn_link(fun() -> call_all(Up, msgflow, stop, []) end),
                    gen_server:reply(From, {error, {nodes, lists:sort(Failed)}}),
                    St#st{starting = undefined, running = false};
                _ ->
                    gen_server:reply(From, ok),
                    schedule(St#st{starting = undefined})
            end;
        Rest ->
            St#st{starting = {From, Rest, Failed}}
    end;
started(_, _, St) ->
    St.

schedule(St = #st{tick = undefined, opts = #{interval := I}}) ->
    St#st{tick = erlang:send_after(I, self(), tick)};
schedule(St) ->
    St.

%% Every node asked now (figures and busiest pairs); refresh/0 and stop/0
%% are answered once all have answered, or after 5 s.
ask_all(St) ->
    Ref = make_ref(),
    _ = erlang:send_after(?CALL_TIMEOUT, self(), {asked_all, Ref}),
    reply_if_answered(ask(St#st{asked_all = Ref}, true)).

%% One ask outstanding per node: one not answered within two intervals
%% makes its node stale until it answers.  Now: every node is asked for
%% its busiest pairs too, whatever it was asked before.
ask(St = #st{members = Ms, opts = #{interval := I}}, Now) ->
    T = erlang:monotonic_time(millisecond),
    maps:fold(fun(_, #member{status = S}, Acc) when S =:= down; S =:= incompatible;
                                                    S =:= starting -> Acc;
                 (N, M = #member{request = {_, At}}, Acc) when not Now, T - At > 2 * I ->
                      put_member(N, M#member{status = stale, reason = no_answer}, Acc);
                 (_, #member{request = {_, _}}, Acc) when not Now -> Acc;
                 (N, M = #member{asks = A}, Acc) ->
                      Top = Now orelse A rem ?TOP_EVERY =:= 0,
                      Req = erpc:send_request(N, ?MODULE, report, [Top]),
                      Acc1 = Acc#st{members = (Acc#st.members)#{N => M#member{request = {Req, T},
                                                                            asks = A + 1}}},
                      Acc1
              end, St, Ms).

%%% Starting and stopping a node

start_member(N, Opts0, Coordinator) ->
    {Resume, Opts} = case maps:take(resume, Opts0) of
                         {R, O} -> {R, O};
                         error -> {false, Opts0}
                     end,
    Public = maps:without([coordinator], Opts#{nodes => local}),
    try
        ok = msgflow_cluster_code:compatible(N, ?START_TIMEOUT),
        ok = msgflow_cluster_code:ensure(N, ?START_TIMEOUT),
        case erpc:call(N, ?MODULE, member_start, [Public, Coordinator, Resume], ?START_TIMEOUT) of
            ok -> ok;
            {error, _} = E -> E
        end
    catch
        throw:{incompatible, _} = I -> {error, I};
        throw:Why -> {error, Why};
        error:{erpc, Why} -> {error, Why};
        C:Why -> {error, {C, Why}}
    end.
