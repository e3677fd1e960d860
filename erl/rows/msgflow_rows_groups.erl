%%% @doc How a view (msgflow_rows) chooses and groups its rows: the N
%%% busiest pairs by process (from the store's busiest index,
%%% msgflow_store_index, when it knows them; else a threshold from a sample,
%%% then a select in ETS of the rows above it), the rows of given pairs
%%% (the hotspot rules' candidates), or every pair read and grouped by a key
%%% (key_fun/2: process, name, module, application, node) or apportioned
%%% to its kinds; the groups ranked by the view's sort.  A group is an
%%% `acc()' summed as its pairs are read; msgflow_rows makes its row.
%%% Reads the store's ETS tables only, in the calling process.
-module(msgflow_rows_groups).
-export([top_by_process/3, all_groups/5, key_fun/2, group_key_fun/2, heat_by_process/3, from_index/3]).
-export_type([acc/0]).

%% One group: {Total, Counts, Pairs, PeakMhz, FirstRow, KindLists}
%% (see acc/2).
-type acc() :: {non_neg_integer(), [non_neg_integer()], pos_integer(), non_neg_integer(),
                msgflow_row:row(), list()}.
%% The groups chosen, each with its acc and its member rows (those of a
%% limited view's groups of several pairs; else undefined), and how many
%% groups there were (undefined when not counted).
-type chosen() :: {[{{term(), term()}, acc(), [msgflow_row:row()] | undefined}],
                   non_neg_integer() | undefined}.

-define(SAMPLE, 4096).       %% rows read to set the top-N threshold
-define(SUM_MAP_KEYS, 4096). %% keys a heatmap's sums keep in a map (sums/1)

%% The N busiest pairs by process, by messages or by the last window's.
%% Rows whose receiver is a local registered name, and the rolled-up
%% rows, are few and merged into their pid's row first; the others are
%% read from the store's busiest index (msgflow_store_index) when it knows
%% the N busiest, else from ETS: of them only those above the N-th
%% largest total of a sample can be among the N busiest, and ETS selects
%% just those, and at most N of those equal to it (ties are broken by
%% table order).  By the last window's messages, a store whose index does
%% not know them is read whole (all_groups/5).
-spec top_by_process(msgflow_store:store(), map(), pos_integer()) -> chosen().
top_by_process(Store, Ctx = #{sort := rate}, N) ->
    case from_index(Store, Ctx, N) of
        {ok, Rows} -> top_by_process(Store, Ctx, N, Rows, indexed);
        unknown -> all_groups(Store, Ctx, process, N, false)
    end;
top_by_process(Store = #{pairs := T, rolled_up := F}, Ctx, N) ->
    case from_index(Store, Ctx, N) of
        {ok, Rows} -> top_by_process(Store, Ctx, N, Rows, indexed);
        unknown -> top_by_process(Store, Ctx, N, scan_top(T, N), msgflow_row_table:to_list(F))
    end.

%% Plain: the rows of the busiest keys, both tables' (Rolled `indexed':
%% the index ranks a key by both), or of the busiest pairs with Rolled
%% every rolled-up row.  A key that other rows join (a name's pid; with
%% Rolled read whole, a rolled-up row's pair) but that Plain does not
%% hold has its rows fetched: they may be below the index's floor or the
%% scan's threshold.
top_by_process(Store = #{pairs := T, rolled_up := F}, Ctx = #{labels := Tables}, N, Plain, Rolled) ->
    {Extra, Fetch} = case Rolled of
                         indexed -> {[], fun(K) -> msgflow_row_table:lookup(T, K) ++ msgflow_row_table:lookup(F, K) end};
                         _ -> {Rolled, fun(K) -> msgflow_row_table:lookup(T, K) end}
                     end,
    Side = lists:foldl(fun(Row, Acc) ->
                               {S, R} = msgflow_row:key(Row),
                               add_member({S, msgflow_labels:canon(Tables, R)}, Row, Acc)
                       end, #{}, named_rows(T, maps:get(named, Store, none)) ++ Extra),
    Held = maps:from_list([{msgflow_row:key(Row), true} || Row <- Plain]),
    Groups0 = lists:foldl(fun(Row, Acc) -> add_member(msgflow_row:key(Row), Row, Acc) end,
                          Side, Plain),
    Groups = maps:fold(fun(Key, Members, Acc) ->
                               case is_map_key(Key, Held) of
                                   true -> Acc;
                                   false -> Acc#{Key := Fetch(Key) ++ Members}
                               end
                       end, Groups0, Side),
    Accs = [{Key, sum_rows(Members, Ctx)} || {Key, Members} <- maps:to_list(Groups)],
    {[{Key, Acc, maps:get(Key, Groups)} || {Key, Acc} <- busiest(Accs, N, Ctx)], undefined}.

%% @doc By process, a heatmap of L (msgflow_rows' `heatmap') without a
%% row made of every pair: each end's messages since start, summed from
%% the rows' totals alone (a send to a local name counted for its pid, as
%% by_process/5 groups them); the heatmap of those
%% (msgflow_rows_ends:heatmap_of/3); and the pairs (not sent to a name)
%% of its L senders, to every receiver: the rows the view then reads
%% (`keys').  A send is counted on its sender's node, so a cluster's L
%% busiest senders are among its nodes' own L busiest, and their rows
%% are all in these; `received' holds every receiver, for the nodes'
%% parts to be added up (msgflow_rows_merge).
-spec heat_by_process(msgflow_store:store(), map(), pos_integer()) ->
          {#{rows := [msgflow_rows:key()], cols := [msgflow_rows:key()]},
           [{msgflow_rows:key(), msgflow_rows:key()}], msgflow_rows_ends:totals()}.
heat_by_process(#{pairs := T, rolled_up := F}, Ctx = #{labels := Tables}, L) ->
    KeyOf = key_fun(process, Tables),
    Named = named_rows(T, maps:get(named, Ctx, none)) ++ msgflow_row_table:to_list(F),
    Side = [{S, KeyOf(R), msgflow_row:total(Row)} || Row <- Named, {S, R} <- [msgflow_row:key(Row)]],
    Plain = msgflow_row:pattern(#{key => {'$3', '$1'}, total => '$2'}),
    Pairs = msgflow_row_table:fold_select(T, [{Plain, [{'not', named_guard()}], [{{'$3', '$1', '$2'}}]}],
                                    fun(E, Acc) -> [E | Acc] end, []),
    Sent = sums([{S, N} || {S, _, N} <- Side ++ Pairs]),
    Received = sums([{R, N} || {_, R, N} <- Side ++ Pairs]),
    Heat = #{rows := HR} = msgflow_rows_ends:heatmap_of(Sent, Received, L),
    Senders = maps:from_list([{S, []} || S <- HR]),
    %% (their rolled-up rows too: the view reads those of these keys only)
    {Heat, lists:usort([{S, R} || {S, R, _} <- Pairs ++ Side, is_map_key(S, Senders)]),
     #{sent => [E || E = {S, _} <- Sent, is_map_key(S, Senders)], received => Received}}.

%% [{Key, N}]: each key once, its Ns added.  In a map while the keys are
%% few (a million pairs of a thousand senders); past ?SUM_MAP_KEYS the
%% rest sorted and added up a run at a time (a map of 100,000 keys copies
%% a path of its tree on every add: twice the time).
sums(KNs) ->
    sums(KNs, #{}).

sums([{K, N} | T], M) when map_size(M) < ?SUM_MAP_KEYS ->
    sums(T, case M of
                #{K := X} -> M#{K := X + N};
                _ -> M#{K => N}
            end);
sums([], M) ->
    maps:to_list(M);
sums(Rest, M) ->
    sum_runs(lists:sort(maps:to_list(M) ++ Rest)).

%% [{Key, N}] sorted by key, not empty: each key once, its Ns added.
sum_runs([{K, N} | T]) -> sum_runs(T, K, N, []).

sum_runs([{K, N} | T], K, Acc, Out) -> sum_runs(T, K, Acc + N, Out);
sum_runs([{K1, N} | T], K, Acc, Out) -> sum_runs(T, K1, N, [{K, Acc} | Out]);
sum_runs([], K, Acc, Out) -> [{K, Acc} | Out].

%% @doc The rows of the N busiest keys (sends to names aside: a key's row in
%% the pairs table and its rolled-up row, which the index ranks together)
%% from the store's index for the view's sort: messages since start, or
%% the last window's messages (`last': the open window before one
%% closed), when it knows them all; `unknown' when it does not (it let go
%% of some, a key of it left the tables since, or by messages a key's
%% rows no longer add up to what the index holds).
%% Ctx: the view's `sort' and window numbers (`last', `open').
-spec from_index(msgflow_store:store(), #{sort := msgflow_rows:sort(), last := integer(),
                                          open := integer(), _ => _}, pos_integer()) ->
          {ok, [msgflow_row:row()]} | unknown.
from_index(#{busiest := Idx, pairs := T, rolled_up := F}, #{sort := Sort, last := Last, open := Open}, N) ->
    Reader = case Sort of
                 messages -> maps:get(total, Idx);
                 rate when Last =:= Open -> maps:get(open, Idx);
                 rate -> maps:get(last, Idx);
                 peak -> none
             end,
    Entries = case Reader of
                  none -> unknown;
                  _ -> msgflow_store_index:top(Reader, N)
              end,
    case Entries of
        unknown ->
            unknown;
        {ok, KVs} when Sort =:= rate, length(KVs) < N ->
            %% fewer pairs had messages in the window than asked for: the
            %% rest are ranked by their totals, which a read of all gives
            unknown;
        {ok, KVs} ->
            Found = [{V, msgflow_row_table:lookup(T, K) ++ msgflow_row_table:lookup(F, K)} || {K, V} <- KVs],
            %% a key's rows hold at least what the index said (the
            %% collector folds on between the two reads, and counts only
            %% grow); fewer, or none, and a row of it was rolled up since
            Whole = fun({_, []}) -> false;
                       ({V, Rows}) when Sort =:= messages ->
                            lists:sum([msgflow_row:total(R) || R <- Rows]) >= V;
                       (_) -> true
                    end,
            case lists:all(Whole, Found) of
                true -> {ok, lists:append([Rows || {_, Rows} <- Found])};
                false -> unknown
            end
    end;
from_index(_, _, _) ->
    unknown.

%% The N busiest pairs by messages from a read of the table (sends to
%% names aside): those above the N-th largest total of a sample, and at
%% most N equal to it.
scan_top(T, N) ->
    Thr = threshold(T, N),
    Above = msgflow_row_table:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}, total => '$2'}),
                            [{'>', '$2', Thr}, {'not', named_guard()}], ['$_']}]),
    Equal = case msgflow_row_table:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}, total => '$2'}),
                                 [{'==', '$2', Thr}, {'not', named_guard()}], ['$_']}], N) of
                '$end_of_table' -> [];
                {Eq, _} -> Eq
            end,
    Above ++ Equal.

sum_rows([Row | Rows], Ctx) ->
    lists:foldl(fun(R, Acc) -> add_acc(acc(R, Ctx), Acc) end, acc(Row, Ctx), Rows).

%% The rows of the sends to local registered names: those of the keys
%% the store keeps apart (NT, msgflow_store_kept), or where a handle has
%% no such table (`none') a select of the pairs table T.
named_rows(T, none) ->
    msgflow_row_table:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}}), [named_guard()], ['$_']}]);
named_rows(T, NT) ->
    [Row || {K} <- msgflow_row_table:to_list(NT), Row <- msgflow_row_table:lookup(T, K)].

%% Local registered names (atom, or {Name, node()}) as receivers.
named_guard() ->
    {'orelse', {is_atom, '$1'},
     {'andalso', {is_tuple, '$1'}, {'==', {element, 2, '$1'}, node()}}}.

%% The N-th largest total of the first ?SAMPLE rows that are not sends to
%% a name (0 when there are fewer): a bound below the N-th largest of all.
threshold(T, N) ->
    case msgflow_row_table:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}, total => '$2'}), [{'not', named_guard()}],
                         ['$2']}], ?SAMPLE) of
        '$end_of_table' -> 0;
        {Totals, _} when length(Totals) < N -> 0;
        {Totals, _} -> lists:nth(N, lists:sort(fun erlang:'>='/2, Totals))
    end.

add_member(Key, Row, Acc) ->
    case Acc of
        #{Key := Ms} -> Acc#{Key := [Row | Ms]};
        _ -> Acc#{Key => [Row]}
    end.

%% Every pair read, grouped; the busiest Limit of the groups.  A group is
%% summed as its pairs are read (acc/2); for a limited view the pairs of
%% the chosen groups of several pairs are read again, for their peak.
-spec all_groups(msgflow_store:store(), map(), msgflow_rows:grouping(), pos_integer() | all,
                 boolean()) -> chosen().
all_groups(Store = #{pairs := T, rolled_up := F, labels := Tables}, Ctx = #{k := K, last := Last},
           By, Limit, Active) ->
    %% by labels or nodes, the store's groups are read: one row per pair
    %% of label ids, summed as deltas were merged (msgflow_store)
    Labelled = lists:member(By, [name, module, application, node]) andalso is_map_key(groups, Store),
    KeyOf = case Labelled of
                true -> group_key_fun(By, Tables);
                false -> key_fun(By, Tables)
            end,
    Guard = case Active andalso K > 0 of
                true -> [{'>', '$2', Last - K}];
                false -> []
            end,
    %% a view that shows no kinds reads rows without them
    Match = msgflow_row:select_spec(#{key => {'_', '$1'}, window => '$2'}, Guard,
                                    By =:= kind orelse maps:get(with_kinds, Ctx, true)),
    Accs = case By of
               process -> by_process(T, F, Guard, KeyOf, Ctx);
               kind -> by_kind(T, F, Match, Ctx);
               _ ->
                   Add = fun(Row, Acc) ->
                                 {S, R} = msgflow_row:key(Row),
                                 add_acc_to({KeyOf(S), KeyOf(R)}, acc(Row, Ctx), Acc)
                         end,
                   case Labelled of
                       true ->
                           maps:to_list(msgflow_row_table:fold_select(maps:get(groups, Store), Match, Add, #{}));
                       false ->
                           maps:to_list(msgflow_row_table:fold_select(F, Match, Add,
                                                                msgflow_row_table:fold_select(T, Match, Add, #{})))
                   end
           end,
    Kept = case Ctx of
               #{filter := Want} -> [A || A = {Key, _} <- Accs, Want(Key)];
               _ -> Accs
           end,
    Chosen = busiest(Kept, Limit, Ctx),
    Members = case {Limit, By} of
                  {all, _} -> #{};
                  {_, kind} -> #{};       %% apportioned: no peak of their own
                  _ -> members([Key || {Key, {_, _, M, _, _, _}} <- Chosen, M > 1],
                               case Labelled of
                                   true -> [maps:get(groups, Store)];
                                   false -> [T, F]
                               end, KeyOf, Match)
              end,
    {[{Key, Acc, maps:get(Key, Members, undefined)} || {Key, Acc} <- Chosen], length(Kept)}.

%% By process a pair is its own group but for sends to a local registered
%% name, which join the pid's, and the rolled-up rows: those few
%% are grouped in a map, the rest read as a list.
%% With `endpoint => E' in Ctx only the rows E is an end of are read (and
%% every send to a name, whose pid is known once it is read).
by_process(T, F, Guard, KeyOf, Ctx) ->
    Ends = case Ctx of
               #{endpoint := E} -> [{'orelse', {'=:=', '$3', {const, E}}, {'=:=', '$1', {const, E}}}];
               _ -> []
           end,
    Min = case Guard of [{'>', _, M}] -> M; [] -> 0 end,
    NamedRows = [Row || Row <- named_rows(T, maps:get(named, Ctx, none)),
                        msgflow_row:last_window(Row) > Min],
    Rolled = case Ctx of
                 #{keys := Keys0} when not is_map_key(endpoint, Ctx) ->
                     %% the rolled-up rows of these keys only (the busiest
                     %% indexes rank a key by both its rows) and of the
                     %% pids the sends to names join
                     Joined0 = [{S, KeyOf(R)} || Row <- NamedRows, {S, R} <- [msgflow_row:key(Row)]],
                     [Row || K <- lists:usort(Keys0 ++ Joined0), Row <- msgflow_row_table:lookup(F, K),
                             msgflow_row:last_window(Row) > Min];
                 _ ->
                     msgflow_row_table:select(F, [{msgflow_row:pattern(#{key => {'$3', '$1'}, window => '$2'}),
                                     Ends ++ Guard, ['$_']}])
             end,
    Named = NamedRows ++ Rolled,
    Side = lists:foldl(fun(Row, Acc) ->
                               {S, R} = msgflow_row:key(Row),
                               add_acc_to({S, KeyOf(R)}, acc(Row, Ctx), Acc)
                       end, #{}, Named),
    Plain = case Ctx of
                #{keys := Keys} ->
                    %% only these pairs (the hotspot rules' candidates),
                    %% and the pid rows the sends to names join
                    Joined = [{S, KeyOf(R)} || Row <- Named, {S, R} <- [msgflow_row:key(Row)],
                                               msgflow_row:named(R)],
                    [{K, acc(Row, Ctx)} || K <- lists:usort(Keys ++ Joined), Row <- msgflow_row_table:lookup(T, K),
                                           not msgflow_row:named(element(2, K)),
                                           msgflow_row:last_window(Row) > Min];
                _ ->
                    msgflow_row_table:fold_select(
                      T, [{msgflow_row:pattern(#{key => {'$3', '$1'}, window => '$2'}),
                           [{'not', named_guard()} | Ends ++ Guard], ['$_']}],
                      fun(Row, Acc) -> [{msgflow_row:key(Row), acc(Row, Ctx)} | Acc] end, [])
            end,
    case map_size(Side) of
        0 -> Plain;
        _ ->
            {Merged, Left} = lists:mapfoldl(fun({Key, A}, Sd) ->
                                                    case maps:take(Key, Sd) of
                                                        {B, Sd1} -> {{Key, add_acc(B, A)}, Sd1};
                                                        error -> {{Key, A}, Sd}
                                                    end
                                            end, Side, Plain),
            maps:to_list(Left) ++ Merged
    end.

add_acc_to(Key, A, Acc) ->
    case Acc of
        #{Key := B} -> Acc#{Key := add_acc(A, B)};
        _ -> Acc#{Key => A}
    end.

members([], _, _, _) ->
    #{};
members(Keys, Tables, KeyOf, Match) ->
    Want = maps:from_list([{K, []} || K <- Keys]),
    Add = fun(Row, Acc) ->
                  {S, R} = msgflow_row:key(Row),
                  Key = {KeyOf(S), KeyOf(R)},
                  case Want of
                      #{Key := _} -> add_member(Key, Row, Acc);
                      _ -> Acc
                  end
          end,
    lists:foldl(fun(T, Acc) -> msgflow_row_table:fold_select(T, Match, Add, Acc) end, #{}, Tables).

%% One pair's part of a group: {Total, Counts, Pairs, Peak, Row, Kinds}:
%% Counts its messages per window from `first' to `last' (see context/2),
%% Peak its own (messages/s), Row itself (for a group of one), Kinds a
%% list of its pairs' kinds lists (summed once the rows are chosen, so
%% that grouping costs a cons a pair).
acc(Row, #{first := First, last := Last, zeros := Zeros, k := K} = Ctx) ->
    W = msgflow_row:last_window(Row),
    Counts = if
                 W < First -> Zeros;
                 K =< 2 -> msgflow_row:last_two(Last, Row);
                 true -> msgflow_row:counts_in(First, Last, Row)
             end,
    Kinds = case Ctx of
                #{with_kinds := false} -> [];
                _ -> [Row]
            end,
    {msgflow_row:total(Row), Counts, 1, msgflow_row:peak_mhz(Row), Row, Kinds}.

%% Peak: a single pair's is read from its row when the row is made; for
%% several, this is the highest peak kept in their rows (messages per
%% 1000 s).
add_acc({T1, C1, N1, P1, _, K1}, {T2, C2, N2, P2, R2, K2}) ->
    {T1 + T2, add_counts(C1, C2), N1 + N2, max(P1, P2), R2, add_kind_lists(K1, K2)}.

add_kind_lists([], K2) -> K2;
add_kind_lists(K1, K2) -> [K1 | K2].

%% By kind: each row's part apportioned to its kinds and tags by their
%% share of its messages since start (a row without kinds goes to
%% `{none, none}').
by_kind(T, F, Match, Ctx) ->
    Add = fun(Row, Acc) ->
                  A = {Total, Counts, _, Peak, _, _} = acc(Row, Ctx),
                  case msgflow_row:kinds(Row) of
                      [] -> add_acc_to({none, none}, A, Acc);
                      Ks ->
                          lists:foldl(
                            fun({Kd, Tg, N}, Acc1) ->
                                    Sh = N / Total,
                                    Part = {N, [round(C * Sh) || C <- Counts], 1,
                                            round(Peak * Sh), Row, [[{Kd, Tg, N}]]},
                                    add_acc_to({Kd, Tg}, Part, Acc1)
                            end, Acc, Ks)
                  end
          end,
    maps:to_list(msgflow_row_table:fold_select(F, Match, Add, msgflow_row_table:fold_select(T, Match, Add, #{}))).

add_counts([A, B], [C, D]) -> [A + C, B + D];
add_counts(L1, L2) -> lists:zipwith(fun erlang:'+'/2, L1, L2).

%% fun(Endpoint) -> the key of its group.  Labels, modules and
%% applications are read once per view from the endpoints table (and the
%% label ids, for groups of exited endpoints).
-spec key_fun(msgflow_rows:grouping(), msgflow_labels:tables()) -> fun((term()) -> term()).
key_fun(process, Tables) ->
    fun(E) -> msgflow_labels:canon(Tables, E) end;
key_fun(kind, _) ->
    fun(E) -> E end;          %% by kind, rows are not grouped by their ends
key_fun(node, Tables) ->
    fun(E) -> msgflow_labels:node_of(msgflow_labels:canon(Tables, E)) end;
key_fun(By, Tables) ->
    Field = case By of name -> label; _ -> By end,
    Cache = msgflow_labels:field_map(Tables, Field),
    Ids = msgflow_labels:id_map(Tables, Field),
    fun({exited, Id, _}) ->
            case Ids of
                #{Id := V} -> V;
                %% a group made after the map was read
                _ -> msgflow_labels:id_field(Tables, Id, Field)
            end;
       (E0) ->
            E = case is_pid(E0) orelse is_port(E0) of
                    false -> msgflow_labels:canon(Tables, E0);
                    true -> E0
                end,
            case Cache of
                #{E := V} -> V;
                %% labelled after the cache was read
                _ -> maps:get(Field, msgflow_labels:meta(Tables, E))
            end
    end.

%% @doc fun({LabelId, Node}) -> the key of its group, for a row of the
%% store's groups or call groups (msgflow_labels:group_end/2): the label
%% id's label, module or application, or the node.  The ids are read once
%% per view.
-spec group_key_fun(name | module | application | node, msgflow_labels:tables()) ->
          fun(({term(), node()}) -> term()).
group_key_fun(node, _) ->
    fun({_, Node}) -> Node end;
group_key_fun(By, Tables) ->
    Field = case By of name -> label; _ -> By end,
    Ids = msgflow_labels:id_map(Tables, Field),
    fun({K, _}) ->
            case Ids of
                #{K := V} -> V;
                _ -> msgflow_labels:id_field(Tables, K, Field)
            end
    end.

%% Groups busiest first by the view's sort, all or the first Limit:
%% [{Key, Acc}] from a list of them.  The rate ranks by the last window's
%% messages (the same window for every row), the peak by the highest peak
%% kept in the group's rows.
busiest(Accs, Limit, #{sort := Sort}) ->
    Rank = fun({Total, _, _, _, _, _}) when Sort =:= messages -> Total;
              ({_, Counts, _, _, _, _}) when Sort =:= rate -> lists:last(Counts);
              ({_, _, _, Peak, _, _}) -> Peak
           end,
    Sorted = [{Key, Acc} || {_, _, Key, Acc} <- lists:sort([{-Rank(Acc), -element(1, Acc), Key, Acc}
                                                            || {Key, Acc} <- Accs])],
    case Limit of
        all -> Sorted;
        N -> lists:sublist(Sorted, N)
    end.
