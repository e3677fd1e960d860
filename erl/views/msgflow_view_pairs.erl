%%% @doc Reads of the store that are not a view of rows: every pair as
%%% the VM reported it (msgflow:pairs/0) and one pair's messages per
%%% window (msgflow:history/2).  Any process; reads the store's ETS
%%% tables only.
-module(msgflow_view_pairs).
-export([pairs/1, pairs/2, history/3]).

%% @doc Every pair as the VM reported it, `[{Sender, Receiver, Messages}]',
%% busiest first.
-spec pairs(msgflow_store:store()) -> [{msgflow_tracer:endpoint(), msgflow_tracer:endpoint(),
                                           pos_integer()}].
pairs(#{pairs := T}) ->
    All = lists:append(lists:reverse(
                         msgflow_row:fold_select(T, [{msgflow_row:pattern(#{key => {'$1', '$2'}, total => '$3'}), [],
                                          [{{'$3', '$1', '$2'}}]}],
                                     fun(X, Acc) -> [[X] | Acc] end, []))),
    [{S, R, N} || {N, S, R} <- lists:reverse(lists:sort(All))].

%% @doc pairs/1, or with `kinds' every (pair, kind, tag) as the VM
%% reported the pair, `[{Sender, Receiver, Kind, Tag, Messages}]', busiest
%% first (a pair counted with kinds off has none).
-spec pairs(msgflow_store:store(), total | kinds) -> list().
pairs(Store, total) ->
    pairs(Store);
pairs(#{pairs := T}, kinds) ->
    All = msgflow_row:fold_select(T, [{msgflow_row:pattern(#{key => {'$1', '$2'}, kinds => '$3'}),
                                       [], [{{'$1', '$2', '$3'}}]}],
                                  fun({S, R, Ks}, Acc) -> [{N, S, R, K, Tg} || {K, Tg, N} <- Ks] ++ Acc
                                  end, []),
    [{S, R, K, Tg, N} || {N, S, R, K, Tg} <- lists:reverse(lists:sort(All))].

%% @doc One pair's messages per window, oldest first: the kept closed
%% windows, then (while running) the open one with `open => true'.  A
%% registered name and the pid holding it are one receiver; the pair's
%% folded row (replies to the receiver's aliases, the pair's messages
%% before it was folded) is in it too.  Endpoints may be groups of exited
%% ones.
-spec history(msgflow_store:store(), msgflow_tracer:endpoint() | msgflow_labels:group(),
              msgflow_tracer:endpoint() | msgflow_labels:group()) ->
          [#{at := integer(), window_ms := non_neg_integer(), count := non_neg_integer(),
             open => true}].
history(Store = #{pairs := T, folded := Fo, labels := Tables = #{names := Names}, windows := Ws,
                  closed := Closed}, S0, R0) ->
    S = msgflow_labels:canon(Tables, S0),
    R = msgflow_labels:canon(Tables, R0),
    NamesOfR = case is_pid(R) of
                   true -> ets:select(Names, [{{'$1', R}, [], ['$1']}]);
                   false -> []
               end,
    Keys = lists:usort([{S, R} | [{S, N} || N <- NamesOfR] ++ [{S, {N, node()}} || N <- NamesOfR]]),
    Members = lists:append([ets:lookup(T, Key) || Key <- Keys]) ++ ets:lookup(Fo, {S, R}),
    Open = Closed + 1,
    First = case Ws of [] -> Open; [#{n := F} | _] -> F end,
    Counts = case Members of
                 [] -> lists:duplicate(Open - First + 1, 0);
                 _ -> msgflow_row:sum_counts([msgflow_row:counts_in(First, Open, M) || M <- Members])
             end,
    {ClosedCounts, [OpenCount]} = lists:split(length(Counts) - 1, Counts),
    [#{at => At, window_ms => D, count => C}
     || {#{at := At, window_ms := D}, C} <- lists:zip(Ws, ClosedCounts)]
        ++ [#{at => maps:get(taken_at, Store), window_ms => maps:get(open_ms, Store),
              count => OpenCount, open => true} || maps:get(running, Store)].
