%%% @doc The wait-for graph of a node's processes: who calls whom, from
%%% the exact counts of calls and replies by pair (calls/2), who waits on
%%% whom and for how long, from the sampled calls' round trips and the
%%% watched processes' readings (graph/4), the chain of waiters of a
%%% process and what they lose (waiters/3, cost/1), and the cycles of
%%% calls between processes or labels (cycles/2).  The bottlenecks view
%%% (msgflow_bottlenecks_view) builds its verdicts on it.  Pure functions
%%% of a store's tables (msgflow_store); any process.
-module(msgflow_wait_graph).

-export([calls/2, remote_edges/4, graph/4, waiters/3, by_label/1, sorted/1, cost/1, cycles/2]).
-export_type([calls/0, graph/0, waiter/0]).

%% a waiter's own sampled round trips it takes for its mean, at least
%% (fewer: the mean of every caller's calls to that server)
-define(OWN_SAMPLES, 10).
%% pairs a store has, at most, for the calls and replies of every pair
%% to be read; past it those of the last window's ?READ_BUSIEST busiest
-define(READ_WHOLE, 100000).
-define(READ_BUSIEST, 20000).

%% The calls between processes (calls/2): by {Caller, Server}.
-type calls() :: #{calls := #{{term(), term()} => {non_neg_integer(), number(), term()}},
                   replies := #{{term(), term()} => non_neg_integer()},
                   recent := #{{term(), term()} => true}}.
%% Who waits on whom (graph/4).
-type graph() :: #{pid() => [{pid(), map()}]}.
%% One waiter, or a label's group of them, with those who wait on it.
-type waiter() :: #{waiter := pid() | binary(), label := binary(), members := pos_integer(),
                    seconds_per_s := float(), calls_per_s := float() | undefined,
                    rtt_ms := float() | undefined, tag := term(), blocked := float() | undefined,
                    waiters := [waiter()]}.

%% @doc The calls and replies of each pair with any, by process (keys as
%% the rows by process give them), from the exact counts of the store's
%% rows: `{Calls since start, calls in the last K
%% closed windows, the tag most called}' for calls, replies since start;
%% and which pairs had calls in those K windows.  On a store of up to
%% ?READ_WHOLE pairs every row is read (in chunks); past that, the rows of
%% the last window's ?READ_BUSIEST busiest pairs (a one-shot call among
%% quieter pairs is then missed), and none before a window closed.
-spec calls(msgflow_store:store(), pos_integer()) -> calls().
calls(Store = #{pairs := T, labels := Tables}, K) ->
    Canon = msgflow_rows_groups:key_fun(process, Tables),
    #{last := Last} = msgflow_rows:rate_window(Store),
    Match = msgflow_row:select_spec(#{}, [], true),
    Add = fun(Row, Acc = #{calls := C, replies := R, recent := Rc}) ->
                  Kinds = msgflow_row:kinds(Row),
                  case {[{Tg, N} || {call, Tg, N} <- Kinds], [N || {reply, _, N} <- Kinds]} of
                      {[], []} -> Acc;
                      {Cs, Rs} ->
                          {S0, R0} = msgflow_row:key(Row),
                          Key = {Canon(S0), Canon(R0)},
                          Total = msgflow_row:total(Row),
                          NC = lists:sum([N || {_, N} <- Cs]),
                          Counts = msgflow_row:counts_in(max(1, Last - K + 1), Last, Row),
                          LastWin = lists:sum(Counts),
                          Share = NC / max(1, Total),
                          Tag = case lists:reverse(lists:keysort(2, Cs)) of
                                    [{Tg, _} | _] -> Tg;
                                    [] -> undefined
                                end,
                          Acc#{calls := case NC of
                                            0 -> C;
                                            _ -> {OC, OW, _} = maps:get(Key, C, {0, 0, Tag}),
                                                 C#{Key => {OC + NC, OW + LastWin * Share, Tag}}
                                        end,
                               replies := case lists:sum(Rs) of
                                              0 -> R;
                                              NR -> R#{Key => NR + maps:get(Key, R, 0)}
                                          end,
                               recent := case NC > 0 andalso lists:sum(Counts) > 0 of
                                             true -> Rc#{Key => true};
                                             false -> Rc
                                         end}
                  end
          end,
    Acc0 = #{calls => #{}, replies => #{}, recent => #{}},
    case {msgflow_row_table:size(T), Store} of
        {Size, #{busiest := #{last := none}}} when is_integer(Size), Size > ?READ_WHOLE ->
            %% a big store before its first window closed: no readings
            %% either, nothing is judged yet
            Acc0;
        {Size, #{busiest := #{last := Busiest}}} when is_integer(Size), Size > ?READ_WHOLE ->
            %% a big store: the rows of the last window's busiest pairs
            lists:foldl(fun({Key, _}, Acc) ->
                                lists:foldl(Add, Acc, msgflow_row_table:lookup(T, Key))
                        end, Acc0, msgflow_store_index:held(Busiest, ?READ_BUSIEST));
        _ ->
            msgflow_row_table:fold_select(T, Match, Add, Acc0)
    end.

%% @doc This node's callers of processes on other nodes: `{Server,
%% Waiter, Figures}', calls per second over SpanMs from the exact counts,
%% and the waiter's share of readings blocked on the server where it was
%% read (Loads: the watched processes' figures, with `blocked_on').
-spec remote_edges(calls(), [map()], non_neg_integer(), fun((pid()) -> binary())) -> [{pid(), pid(), map()}].
remote_edges(#{calls := C}, Loads, SpanMs, Label) ->
    Read = maps:from_list([{P, On} || #{process := P, blocked_on := On} <- Loads]),
    [{S, W, #{calls_per_s => case SpanMs of 0 -> 0.0; _ -> N * 1000 / SpanMs end, tag => Tag,
              blocked => case Read of
                             #{W := On} -> proplists:get_value(S, On, 0.0);
                             _ -> undefined
                         end,
              label => Label(W)}}
     || {{W, S}, {_, N, Tag}} <- maps:to_list(C), is_pid(W), is_pid(S), node(W) =:= node(),
        node(S) =/= node(), N > 0].

%% @doc Who waits on whom, `#{Server => [{Waiter, Figures}]}': each local
%% call edge into a watched process of Loads (or one a watched process is
%% blocked on), at its calls per second over SpanMs times its mean
%% sampled round trip in the calls table CallsT (msgflow_store_calls),
%% else at the waiter's share of readings blocked on it.
-spec graph([map()], calls(), ets:tid(), non_neg_integer()) -> graph().
graph(Loads, #{calls := C}, CallsT, SpanMs) ->
    Watched = maps:from_list([{P, L} || L = #{process := P} <- Loads]),
    OnTargets = maps:from_list([{Q, true} || #{blocked_on := On} <- Loads, {Q, _} <- On]),
    Target = fun(S) -> is_map_key(S, Watched) orelse is_map_key(S, OnTargets) end,
    %% the sampled round trips into each target, by caller and pooled
    %% (a caller with none sampled: 63 in 64 of those that call seldom)
    %% (the rows into the targets selected in the table, not copied out
    %% whole: a store may hold a million call edges)
    Into = ets:select(CallsT, [{{{'$1', '$2', '_', '_'}, '_', '_', '_', '_', '_', '_'},
                                [{is_pid, '$1'}, msgflow_row_table:any_of('$2', maps:keys(Watched) ++ maps:keys(OnTargets))],
                                ['$_']}]),
    {ByEdge, Pooled} =
        lists:foldl(fun(Row, {E, P}) ->
                            {W, S, _, _} = msgflow_call_row:key(Row),
                            H = msgflow_call_row:hist(Row),
                            {E#{{W, S} => msgflow_call_row:add_hists(maps:get({W, S}, E, []), H)},
                             P#{S => msgflow_call_row:add_hists(maps:get(S, P, []), H)}}
                    end, {#{}, #{}}, Into),
    Edge = fun({W, S}, {_, LastWin, Tag}, Acc) when is_pid(W), is_pid(S) ->
                   case Target(S) of
                       false -> Acc;
                       true ->
                           PerS = case SpanMs of 0 -> 0.0; _ -> LastWin * 1000 / SpanMs end,
                           Own = maps:get({W, S}, ByEdge, []),
                           Hist = case lists:sum([N || {_, N} <- Own]) >= ?OWN_SAMPLES of
                                      true -> Own;
                                      false -> maps:get(S, Pooled, [])
                                  end,
                           Read = case Watched of
                                      #{W := #{blocked_on := On}} -> proplists:get_value(S, On, 0.0);
                                      _ -> undefined
                                  end,
                           Mean = msgflow_call_row:mean_us(Hist),
                           [P50] = msgflow_call_row:percentiles(Hist, [0.5]),
                           %% a waiter read: its share of readings
                           %% blocked on S, as measured; else its calls
                           %% times their round trip
                           Secs = case {Read, Mean} of
                                      {undefined, undefined} -> 0.0;
                                      {undefined, _} -> min(1.0, PerS * Mean / 1.0e6);
                                      _ -> Read
                                  end,
                           F = #{seconds_per_s => Secs, calls_per_s => PerS, tag => Tag,
                                 rtt_ms => case P50 of undefined -> undefined; _ -> P50 / 1000 end,
                                 blocked => Read},
                           case Secs > 0 of
                               true -> Acc#{S => [{W, F} | maps:get(S, Acc, [])]};
                               false -> Acc
                           end
                   end;
              (_, _, Acc) -> Acc
           end,
    G0 = maps:fold(Edge, #{}, C),
    %% a watched process blocked on one it has no call edge to (a call by
    %% a name, or one not counted): its readings alone
    lists:foldl(fun(#{process := W, blocked_on := On}, G) ->
                        lists:foldl(fun({S, Sh}, G1) ->
                                            Ws = maps:get(S, G1, []),
                                            case lists:keymember(W, 1, Ws) of
                                                true -> G1;
                                                false -> G1#{S => [{W, #{seconds_per_s => Sh, calls_per_s => undefined,
                                                                         tag => undefined, rtt_ms => undefined,
                                                                         blocked => Sh}} | Ws]}
                                            end
                                    end, G, On)
                end, G0, Loads).

%% @doc The waiters of S in Graph (graph/4), grouped by label where they
%% are waited on by no one (callers of one kind), each with those who
%% wait on it, the one who loses most first.
-spec waiters(pid(), graph(), fun((pid()) -> binary())) -> [waiter()].
waiters(S, Graph, Label) ->
    waiters(S, Graph, Label, #{S => true}).

%% (Seen guards a cycle)
waiters(S, Graph, Label, Seen) ->
    Direct = maps:get(S, Graph, []),
    {Inner, Leaves} = lists:partition(fun({W, _}) -> is_map_key(W, Graph) andalso not is_map_key(W, Seen) end,
                                      Direct),
    Seen1 = maps:merge(Seen, maps:from_list([{W, true} || {W, _} <- Direct])),
    InnerWs = [F#{waiter => W, label => Label(W), members => 1,
                  waiters => waiters(W, Graph, Label, Seen1)} || {W, F} <- Inner],
    sorted(InnerWs ++ by_label([{W, F#{label => Label(W)}} || {W, F} <- Leaves])).

%% @doc Waiters that no one waits on, `{Waiter, Figures}' (each with its
%% `label'), as waiter() entries: one per label, those of a label of
%% several added up (`members' how many; their seconds and calls per
%% second summed, the medians of their round trips and blocked shares).
-spec by_label([{pid(), map()}]) -> [waiter()].
by_label(Leaves) ->
    ByLabel = lists:foldl(fun({W, F = #{label := Lb}}, Acc) ->
                                  maps:update_with(Lb, fun(Fs) -> [{W, F} | Fs] end, [{W, F}], Acc)
                          end, #{}, Leaves),
    [case Fs of
         [{W, F}] -> F#{waiter => W, label => Lb, members => 1, waiters => []};
         _ -> #{waiter => Lb, label => Lb, members => length(Fs),
                seconds_per_s => lists:sum([maps:get(seconds_per_s, F) || {_, F} <- Fs]),
                calls_per_s => sum_defined([maps:get(calls_per_s, F) || {_, F} <- Fs]),
                rtt_ms => median_defined([maps:get(rtt_ms, F) || {_, F} <- Fs]),
                tag => maps:get(tag, element(2, hd(Fs))),
                blocked => median_defined([maps:get(blocked, F) || {_, F} <- Fs]),
                waiters => []}
     end || {Lb, Fs} <- maps:to_list(ByLabel)].

%% @doc Waiters, the one who loses most first.
-spec sorted([waiter()]) -> [waiter()].
sorted(Ws) ->
    lists:sort(fun(#{seconds_per_s := A}, #{seconds_per_s := B}) -> A >= B end, Ws).

sum_defined(Xs) ->
    case [X || X <- Xs, X =/= undefined] of
        [] -> undefined;
        D -> lists:sum(D)
    end.

median_defined(Xs) ->
    case lists:sort([X || X <- Xs, X =/= undefined]) of
        [] -> undefined;
        D -> lists:nth((length(D) + 1) div 2, D)
    end.

%% @doc The seconds per second a chain's waiters lose: those waited on
%% themselves count through their own waiters.
-spec cost([waiter()]) -> float().
cost(Waiters) ->
    float(lists:sum([case Ws of
                   [] -> S;
                   _ -> cost(Ws)
               end || #{seconds_per_s := S, waiters := Ws} <- Waiters])).

%% @doc Cycles of calls in the windows calls/2 looked at, as causes:
%% between local processes (`deadlock' when each edge of the cycle has
%% calls not answered, else `call_cycle'), then between labels where no
%% cycle of processes names them (`call_cycle', `by => name').
-spec cycles(calls(), fun((pid()) -> binary())) -> [map()].
cycles(Calls, Label) ->
    ByProcess = process_cycles(Calls, Label),
    ByProcess ++ name_cycles(Calls, Label, ByProcess).

process_cycles(#{calls := C, replies := R, recent := Recent}, Label) ->
    G = digraph:new(),
    try
        _ = [begin
                 digraph:add_vertex(G, A), digraph:add_vertex(G, B), digraph:add_edge(G, A, B)
             end || {A, B} <- on_cycles([E || E = {A, B} <- maps:keys(Recent), is_pid(A), is_pid(B), A =/= B])],
        [begin
             Cycle = cycle_order(G, Comp),
             Edges = lists:zip(Cycle, tl(Cycle) ++ [hd(Cycle)]),
             Open = [{A, B, Calls - maps:get({B, A}, R, 0)}
                     || {A, B} <- Edges, {Calls, _, _} <- [maps:get({A, B}, C)]],
             Dead = lists:all(fun({_, _, U}) -> U > 0 end, Open),
             #{verdict => case Dead of true -> deadlock; false -> call_cycle end,
               subject => Cycle,
               label => iolist_to_binary(lists:join(<<" -> ">>, [Label(P) || P <- Cycle ++ [hd(Cycle)]])),
               evidence => #{unanswered => [{A, B, U} || {A, B, U} <- Open]},
               cost => float(length(Cycle)), waiters => []}
         end || Comp <- digraph_utils:cyclic_strong_components(G), length(Comp) > 1]
    after
        digraph:delete(G)
    end.

%% Cycles of calls between labels: processes of one label call those of
%% another, and processes of that one call back some of the first (a
%% pool calling a pool that calls it), though no process is in a cycle:
%% a deadlock hazard once each is in such a call at once (`call_cycle',
%% with `by => name').  A cycle whose labels a cycle of processes names
%% is that one.  Processes of one label calling each other are not one:
%% two servers of one module, one calling the other, are a chain.  Its
%% evidence: each edge's calls in the windows looked at, from how many
%% processes to how many.
name_cycles(#{calls := C, recent := Recent}, Label, ByProcess) ->
    Covered = [lists:usort([Label(P) || P <- S]) || #{subject := S} <- ByProcess],
    %% (each process's label looked up once, not once an edge)
    Labels = maps:from_list([{P, Label(P)} || P <- lists:usort([P || {A, B} <- maps:keys(Recent), P <- [A, B],
                                                                    is_pid(P)])]),
    Edges = maps:fold(fun({A, B}, _, Acc) when is_pid(A), is_pid(B), A =/= B ->
                              {_, N, _} = maps:get({A, B}, C),
                              K = {map_get(A, Labels), map_get(B, Labels)},
                              {Sum, Ss, Rs} = maps:get(K, Acc, {0, #{}, #{}}),
                              Acc#{K => {Sum + N, Ss#{A => true}, Rs#{B => true}}};
                         (_, _, Acc) ->
                              Acc
                      end, #{}, Recent),
    G = digraph:new(),
    Cycles = try
                 _ = [begin
                          digraph:add_vertex(G, A), digraph:add_vertex(G, B), digraph:add_edge(G, A, B)
                      end || {A, B} <- on_cycles([E || E = {A, B} <- maps:keys(Edges), A =/= B])],
                 [cycle_order(G, Comp) || Comp <- digraph_utils:cyclic_strong_components(G),
                                          length(Comp) > 1]
             after
                 digraph:delete(G)
             end,
    [#{verdict => call_cycle, subject => Cycle,
       label => iolist_to_binary(lists:join(<<" -> ">>, Cycle ++ [hd(Cycle)])),
       evidence => #{by => name,
                     calls => [{A, B, round(N), map_size(Ss), map_size(Rs)}
                               || {A, B} <- lists:zip(Cycle, tl(Cycle) ++ [hd(Cycle)]),
                                  {N, Ss, Rs} <- [maps:get({A, B}, Edges)]]},
       cost => float(length(Cycle)), waiters => []}
     || Cycle <- Cycles, not lists:member(lists:usort(Cycle), Covered)].

%% The edges that may lie on a cycle: those from a process called by
%% one and to a process that calls one, until none is left out.  Most
%% callers are called by no one and most servers call no one back: the
%% digraph gets the few that may be on a cycle (its edges from one
%% process are a bag, each added in time of those already there: a
%% server called by 300 others took 2.4 s for 96,000 edges).
on_cycles(Edges) ->
    Callers = maps:from_keys([A || {A, _} <- Edges], true),
    Called = maps:from_keys([B || {_, B} <- Edges], true),
    case [E || E = {A, B} <- Edges, is_map_key(A, Called), is_map_key(B, Callers)] of
        Edges -> Edges;
        Fewer -> on_cycles(Fewer)
    end.

%% The processes of a strongly connected component in the order of one
%% cycle through them (the shortest from its lowest process back to it).
cycle_order(G, Comp) ->
    [First | _] = lists:sort(Comp),
    case digraph:get_short_cycle(G, First) of
        false -> lists:sort(Comp);
        Path -> lists:droplast(Path)
    end.

