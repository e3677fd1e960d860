%%% @doc The scope of a call of the facade (msgflow): this node, or every
%%% node of the cluster msgflow counts on (msgflow_cluster), or the one a
%%% `node' option names.  Here a run starts on its nodes, and views,
%%% pairs, hotspots and histories are built where they must be (exports:
%%% msgflow_export; what the web page serves: msgflow_web_source).
%%% msgflow's functions check their arguments and call these; what the
%%% shell prints of the views is msgflow_shell's.
-module(msgflow_scope).
-export([start_nodes/2, start_on/2, check_node/1, with_view/3, with_build/2, view/2, calls_view/1,
         pairs/0, pairs/1, history/2]).

%% @doc Starts a run with validated options: this node first; then, for
%% a cluster (`nodes' all or a list), the others (see msgflow_cluster).
-spec start_nodes(msgflow_opts:opts(), msgflow_opts:nodes()) -> ok | {error, term()}.
start_nodes(Opts, local) ->
    case msgflow_collector:start(Opts) of
        ok -> msgflow_cluster:forget();
        {error, _} = E -> E
    end;
start_nodes(Opts, Nodes) ->
    Running = case msgflow_collector:store(false) of
                  #{running := R} -> R;
                  undefined -> false
              end,
    %% the coordinator before this node's tracing: it is msgflow's own
    case Running orelse msgflow_cluster:prepare(Opts, Nodes) of
        true ->
            {error, already_started};
        ok ->
            case msgflow_collector:start(Opts#{nodes => local}) of
                ok ->
                    case msgflow_cluster:start_members() of
                        ok -> ok;
                        {error, _} = E -> _ = msgflow_collector:stop(), E
                    end;
                {error, _} = E ->
                    msgflow_cluster:forget(),
                    E
            end;
        {error, _} = E ->
            E
    end.


%% @doc msgflow:start_on/2: Node and Opts checked, msgflow's application
%% started here (its supervisor is the run's owner), then
%% msgflow_cluster:start_on/3.
-spec start_on(term(), term()) -> ok | {error, term()}.
start_on(Node, Opts) ->
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
                    msgflow_cluster:start_on(Node, Valid, whereis(msgflow_sup));
                _ ->
                    {error, {badarg, {node, Node}, Reach}}
            end;
        {ok, _} ->
            {error, {badarg, {node, Node}, Reach}};
        {error, _} = E ->
            E
    end.

%% @doc `ok' for `all', this node, or a node of the cluster msgflow counts
%% on; else `{error, {badopt, {node, Node}, [all | Nodes]}}'.
-spec check_node(term()) -> ok | msgflow_opts:error().
check_node(Node) ->
    Known = [node() | msgflow_cluster:members()],
    case Node =:= all orelse lists:member(Node, Known) of
        true -> ok;
        false -> {error, {badopt, {node, Node}, [all | Known]}}
    end.

%% @doc Render(View) for the view Spec asks: of this node, or, while msgflow
%% counts across a cluster, of every node (or the one Only names; see
%% msgflow_cluster:view/2).  `undefined' when msgflow never ran.
-spec with_view(msgflow_view:spec(), atom(), fun((msgflow_view:view()) -> R)) -> R | undefined.
with_view(Spec, Only, Render) ->
    case Only =:= node() orelse (Only =:= all andalso msgflow_cluster:members() =:= []) of
        true ->
            case msgflow_collector:store(true) of
                undefined -> undefined;
                Store -> msgflow_view:run(Store, fun() -> Render(msgflow_view:build(Store, Spec))
                                                 end)
            end;
        false ->
            case msgflow_cluster:view(Spec, Only) of
                undefined -> undefined;
                View -> Render(View)
            end
    end.

%% The view Spec asks for (`limit' rows), or `{error, not_started}'.
top_view(Spec, Node) ->
    case with_view(Spec, Node, fun(V) -> V end) of
        undefined -> {error, not_started};
        View -> View
    end.

%% @doc msgflow:view/2: the typed value behind a printed view, Opts
%% checked (a map or a keyword list):
%% <ul>
%% <li>`top': `limit' (10), `by', `sort', `node' as top/2's: a
%%     msgflow_view:view() of the `limit' busiest rows;</li>
%% <li>`matrix': `by' (name), `kind' as matrix/2's: a
%%     msgflow_view:matrix() of every node;</li>
%% <li>`hotspots': hotspots/1's options: the findings
%%     (msgflow_hotspots:finding());</li>
%% <li>`flows': no options: `#{entries => [msgflow_flow_view:summary()],
%%     last => msgflow_flow_view:flow() | undefined}' (follow_calls/2's
%%     entries, the last follow/2);</li>
%% <li>`nodes': no options: msgflow_cluster:nodes();</li>
%% <li>`process': `pid => Pid' (a local pid, or its text `"<0.80.0>"'):
%%     what the process says of itself now (`label', `alive',
%%     `message_queue_len' (messages), `memory' (bytes), `reductions',
%%     `current_function', `status'; `undefined' once it exited) and its
%%     busiest partners both ways since start, `sends_to' and
%%     `receives_from', `[{Endpoint, Label, Messages}]' (at most 5 each);</li>
%% <li>`calls': `by' (process), `limit' (all): the call edges with their
%%     round trips (msgflow_calls_view:view()), of every node of a
%%     cluster added up: `calls' (exact), `sampled', `unanswered', `p50',
%%     `p90', `p99', `max', `mean' (µs), busiest total wait first;</li>
%% <li>`kinds': `pair => {Sender, Receiver}' (pids, ports or names as
%%     top/1 shows them, or labels as binaries or strings, as `by =>
%%     name' shows them): a view with that row, its kinds by tag.</li>
%% </ul>
%% Errors: `{error, {badarg, {view, Name}, Names}}', `{error, {badopt,
%% {Key, Value}, Allowed}}', `{error, not_started}' for a view of the
%% counts before the first start; kinds: `{error, {badarg, {pair, Pair},
%% Allowed}}' for a pair with no messages.
-spec view(atom(), term()) -> term() | msgflow_opts:error() | {error, not_started}.
view(Name, Opts0) ->
    Names = [top, matrix, hotspots, flows, nodes, kinds, process, calls],
    case msgflow_opts:arg(view, Name, {one_of, Names}) of
        ok when Name =:= hotspots -> hotspots(Opts0);
        ok -> case msgflow_opts:check(case Name of top -> view_top; _ -> Name end, Opts0) of
                  {ok, Opts} -> view1(Name, Opts);
                  {error, _} = E -> E
              end;
        {error, _} = E -> E
    end.

view1(top, #{limit := N, by := By, sort := Sort, node := Node}) ->
    case check_node(Node) of
        ok -> top_view(#{by => By, sort => Sort, limit => N}, Node);
        {error, _} = E -> E
    end;
view1(matrix, Opts = #{by := By}) ->
    %% the matrix shows no kinds: a view without them costs less
    Spec = case Opts of
               #{kind := K} when K =/= none -> #{by => By, kind => K};
               _ -> #{by => By, kinds => false}
           end,
    case with_view(Spec, all, fun msgflow_view:matrix/1) of
        undefined -> {error, not_started};
        M -> M
    end;
view1(process, Opts) when not is_map_key(pid, Opts) ->
    {error, {badopt, {pid, none}, msgflow_opts:allowed(pid_text)}};
view1(process, #{pid := P0}) ->
    P = if is_pid(P0) -> P0;
           true -> try list_to_pid(unicode:characters_to_list(P0)) catch error:badarg -> P0 end
        end,
    case is_pid(P) andalso node(P) =:= node() of
        false ->
            {error, {badopt, {pid, P0}, msgflow_opts:allowed(pid_text)}};
        true ->
            Info = case erlang:process_info(P, [message_queue_len, memory, reductions,
                                                current_function, status]) of
                       undefined -> #{alive => false, message_queue_len => undefined,
                                      memory => undefined, reductions => undefined,
                                      current_function => undefined, status => undefined};
                       L -> maps:put(alive, true, maps:from_list(L))
                   end,
            %% its rows only: only they are labelled
            Partners = fun(V = #{rows := Rows}) ->
                               Lab = fun(K) -> msgflow_view:display(V, K) end,
                               {[{R, Lab(R), C} || #{sender := S, receiver := R, count := C} <- Rows, S =:= P],
                                [{S, Lab(S), C} || #{sender := S, receiver := R, count := C} <- Rows, R =:= P]}
                       end,
            {Out, In} = case with_view(#{by => process, kinds => false, endpoint => P}, node(),
                                       Partners) of
                            undefined -> {[], []};
                            Both -> Both
                        end,
            Info#{pid => P, label => msgflow_describe:label(P),
                  sends_to => lists:sublist(Out, 5), receives_from => lists:sublist(In, 5)}
    end;
view1(calls, Opts0) ->
    Sample = case maps:get(opts, msgflow_collector:info_as_is(), #{}) of
                 #{kinds := false} -> off;
                 #{call_sample := S} -> S;
                 _ -> off
             end,
    Opts = Opts0#{sample => Sample},
    %% each node its own calls (a call is measured where both its halves
    %% are seen), added up here
    case [node() | msgflow_cluster:members()] of
        [_] ->
            msgflow_cluster_node:local_calls(Opts);
        Nodes ->
            case [V || {_, {ok, V = #{entries := _}}} <- msgflow_cluster:call_all(Nodes, local_calls,
                                                                                   [Opts])] of
                [] -> {error, not_started};
                Views -> msgflow_calls_view:merge(Views, maps:get(limit, Opts, all))
            end
    end;
view1(flows, _) ->
    #{entries => msgflow_flow:flows(), last => msgflow_flow:last()};
view1(nodes, _) ->
    msgflow_cluster:nodes();
view1(kinds, Opts) when not is_map_key(pair, Opts) ->
    {error, {badopt, {pair, none}, msgflow_opts:allowed(pair)}};
view1(kinds, #{pair := {Sender, Receiver}}) ->
    ByName = not (is_endpoint(Sender) andalso is_endpoint(Receiver)),
    Key = fun(E) when ByName, is_atom(E) -> msgflow_fmt:name(E);
             (E) when ByName -> unicode:characters_to_binary(E);
             (E) -> E
          end,
    Spec = #{by => case ByName of true -> name; false -> process end,
             pair => {Key(Sender), Key(Receiver)}},
    case with_view(Spec, all, fun(V) -> V end) of
        undefined ->
            {error, not_started};
        #{rows := []} ->
            {error, {badarg, {pair, {Sender, Receiver}},
                     [<<"a pair top/1 shows (pids, ports, names)">>,
                      <<"a pair of labels top(N, #{by => name}) shows">>]}};
        View ->
            View
    end.

is_endpoint(E) -> is_pid(E) orelse is_port(E) orelse is_atom(E).

%% @doc The calls view by By (by process for a grouping calls have not),
%% or none.
-spec calls_view(atom()) -> msgflow_calls_view:view() | none.
calls_view(By) ->
    Group = case lists:member(By, [process, name, module, application, node]) of
                true -> By;
                false -> process
            end,
    case view1(calls, #{by => Group, limit => all}) of
        #{entries := _} = V -> V;
        _ -> none
    end.

%% @doc Fun(Build) where Build(Spec) gives a view of this node's store (Fun
%% runs in the worker msgflow_view:run/2 gives it) or of the cluster's
%% (`node' Only, or all); `{error, not_started}' when there are no counts.
-spec with_build(atom(), fun((fun((msgflow_view:spec()) -> msgflow_view:view())) -> R)) ->
          R | {error, not_started}.
with_build(Only, Fun) ->
    case Only =:= node() orelse (Only =:= all andalso msgflow_cluster:members() =:= []) of
        true ->
            case msgflow_collector:store(true) of
                undefined ->
                    {error, not_started};
                Store ->
                    msgflow_view:run(Store, fun() -> Fun(fun(Spec) -> msgflow_view:build(Store, Spec) end) end)
            end;
        false ->
            case msgflow_cluster:view(#{by => process, limit => 1}, Only) of
                undefined -> {error, not_started};
                _ -> Fun(fun(Spec) -> msgflow_cluster:view(Spec, Only) end)
            end
    end.

%% @doc msgflow:pairs/0: this node's pairs, or every node's (a node that
%% does not answer with the busiest pairs it last reported).
-spec pairs() -> [msgflow:pair_count()] | {error, not_started}.
pairs() ->
    pairs(total).

%% @doc msgflow:pairs/1: `total' as pairs/0, or `kinds': every
%% (pair, kind, tag) of every node (no fallback for a node that did not
%% answer).
-spec pairs(total | kinds) -> list() | {error, not_started}.
pairs(With) ->
    case {msgflow_cluster:members(), msgflow_collector:store(false)} of
        {[], undefined} ->
            {error, not_started};
        {[], _} ->
            msgflow_cluster_node:local_pairs(With);
        {Nodes, _} when With =:= kinds ->
            Parts = msgflow_cluster:call_all([node() | Nodes], local_pairs, [kinds]),
            lists:reverse(lists:keysort(5, lists:append([Ps || {_, {ok, Ps}} <- Parts])));
        {Nodes, _} ->
            Parts = msgflow_cluster:call_all([node() | Nodes], local_pairs, []),
            Got = lists:append([Ps || {_, {ok, Ps}} <- Parts]),
            Old = msgflow_cluster:last_pairs([N || {N, {error, _}} <- Parts]),
            msgflow_row:sorted_pairs(Got ++ Old)
    end.

%% msgflow:view(hotspots, _): options checked, each node's findings from
%% its own windows.
-spec hotspots(term()) -> [msgflow_hotspots:finding()] | {error, term()}.
hotspots(Opts0) ->
    %% options are checked before a view is built
    case msgflow_opts:check(hotspots, Opts0) of
        {error, _} = E ->
            E;
        {ok, Opts1 = #{node := Only}} ->
            Opts = maps:without([node], Opts1),
            case check_node(Only) of
                {error, _} = E ->
                    E;
                ok ->
                    Nodes = [N || N <- [node() | msgflow_cluster:members()],
                                  Only =:= all orelse N =:= Only],
                    case Nodes of
                        [Here] when Here =:= node() ->
                            msgflow_cluster_node:local_hotspots(Opts);
                        _ ->
                            %% each node finds its own: the rules read its windows
                            Parts = msgflow_cluster:call_all(Nodes, local_hotspots, [Opts]),
                            case [Fs || {_, {ok, Fs}} <- Parts, is_list(Fs)] of
                                [] -> {error, not_started};
                                Found -> lists:append(Found)
                            end
                    end
            end
    end.

%% @doc msgflow:history/2, asked of the sender's node.
-spec history(term(), term()) -> list() | {error, term()}.
history(Sender, Receiver) ->
    %% a pair is counted on its sender's node
    Where = case Sender of
                {exited, _, N} -> N;
                _ -> msgflow_labels:node_of(Sender)
            end,
    case lists:member(Where, msgflow_cluster:members()) of
        true ->
            case msgflow_cluster:call_all([Where], local_history, [Sender, Receiver]) of
                [{_, {ok, H}}] -> H;
                [{_, {error, Why}}] -> {error, {Where, Why}}
            end;
        false ->
            msgflow_cluster_node:local_history(Sender, Receiver)
    end.