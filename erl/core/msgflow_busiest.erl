%%% @doc The busiest pairs, kept as snapshots merge: a bounded index of
%%% the pairs with the highest value of one figure (messages since
%%% start, or messages in one window), so that a view of the N busiest
%%% reads N entries instead of every pair.
%%%
%%% The figure of a pair only grows while the index is kept (a total, a
%%% count in a window), which makes a bounded index exact: it holds at
%%% most `Cap' pairs and a `floor', the highest value it ever let go of;
%%% a pair whose value reaches above the floor is in it, and every pair
%%% not in it has a value of at most the floor.  So the index's entries
%%% are the busiest pairs of all (pairs equal to the floor aside), and a
%%% view of N of them is exact while the index holds N (top/3).  A pair
%%% removed (rolled up) leaves the index; the rest stays exact, with
%%% fewer entries.
%%%
%%% Two ETS tables the collector owns (protected: views read them, only
%%% the collector writes): `{{Value, Key}}' ordered, read from the end,
%%% and `{Key, Value}'.  bump/3 costs a compare for a pair at or below
%%% the floor (most deltas of a big node), two or three ETS calls else.
-module(msgflow_busiest).

-export([new/1, bump/3, remove/2, top/2, above/2, floor/1, tables/1, reader/1]).
-export_type([index/0, reader/0]).

-record(busiest, {
    order :: ets:tid(),         %% {{Value, Key}}, ordered_set
    values :: ets:tid(),        %% {Key, Value}
    floor = 0 :: non_neg_integer(),
    cap :: pos_integer()
}).

-opaque index() :: #busiest{}.
%% What a view reads: the ordered table and the floor as of the handle
%% (the collector goes on meanwhile: a reader may see a few newer values;
%% a window's index is deleted a window after it was the last, and a
%% reader that finds it gone gets `unknown').
%% Or the aggregate's (msgflow_tracer:agg_busiest/3): `{msgflow_agg, Agg,
%% total | open | last}'.
-type reader() :: #{order := ets:tid(), floor := non_neg_integer()}
                | {msgflow_agg, msgflow_tracer:agg(), total | open | last}.

%% @doc An empty index of at most Cap pairs; its tables belong to the
%% calling process.
-spec new(pos_integer()) -> index().
new(Cap) ->
    #busiest{order = ets:new(msgflow_busiest, [ordered_set, protected]),
             values = ets:new(msgflow_busiest_values, [set, protected]), cap = Cap}.

%% @doc The pair Key's value is now V (never less than it was).  The
%% owner only.
-spec bump(index(), term(), non_neg_integer()) -> index().
bump(I = #busiest{floor = F}, _, V) when V =< F ->
    I;
bump(I = #busiest{order = O, values = Vs, cap = Cap, floor = F}, Key, V) ->
    case ets:lookup(Vs, Key) of
        [{_, Old}] ->
            ets:delete(O, {Old, Key}),
            ets:insert(O, {{V, Key}}),
            ets:insert(Vs, {Key, V}),
            I;
        [] ->
            ets:insert(O, {{V, Key}}),
            ets:insert(Vs, {Key, V}),
            case ets:info(Vs, size) > Cap of
                false ->
                    I;
                true ->
                    {Low, LowKey} = Min = ets:first(O),
                    ets:delete(O, Min),
                    ets:delete(Vs, LowKey),
                    I#busiest{floor = max(F, Low)}
            end
    end.

%% @doc The pair Key left the store.  The owner only.
-spec remove(index(), term()) -> index().
remove(I = #busiest{order = O, values = Vs}, Key) ->
    case ets:take(Vs, Key) of
        [{_, V}] -> ets:delete(O, {V, Key});
        [] -> ok
    end,
    I.

%% @doc The N pairs of the highest values, highest first, as `{Key,
%% Value}', when the index knows them: `{ok, Entries}' while it holds N
%% pairs or never let one go (then every pair with a value is in it);
%% else `unknown' (the caller scans).  Pairs tied with the N-th come in
%% key order.  Any process.
-spec top(reader(), pos_integer()) -> {ok, [{term(), non_neg_integer()}]} | unknown.
top({msgflow_agg, A, Which}, N) ->
    case msgflow_tracer:agg_busiest(A, Which, N) of
        {Got, F} when length(Got) =:= N; F =:= 0 -> {ok, Got};
        _ -> unknown
    end;
top(#{order := O, floor := F}, N) ->
    try walk(O, ets:last(O), N, []) of
        {Got, 0} -> {ok, lists:reverse(Got)};
        {Got, _} when F =:= 0 -> {ok, lists:reverse(Got)};
        _ -> unknown
    catch
        error:badarg -> unknown         %% a window's index, deleted since
    end.

walk(_, '$end_of_table', Left, Acc) -> {Acc, Left};
walk(_, _, 0, Acc) -> {Acc, 0};
walk(O, K = {V, Key}, Left, Acc) -> walk(O, ets:prev(O, K), Left - 1, [{Key, V} | Acc]).

%% @doc Every pair whose value is at least Min, highest first, when the
%% index holds them all (Min above its floor); else `unknown'.  Any
%% process.
-spec above(reader(), pos_integer()) -> {ok, [{term(), non_neg_integer()}]} | unknown.
above({msgflow_agg, A, Which}, Min) ->
    case msgflow_tracer:agg_busiest(A, Which, 0) of
        {_, F} when Min > F ->
            {Got, _} = msgflow_tracer:agg_busiest(A, Which, 1000000),
            {ok, [E || E = {_, V} <- Got, V >= Min]};
        _ ->
            unknown
    end;
above(#{order := O, floor := F}, Min) when Min > F ->
    try ets:select(O, [{{{'$1', '_'}}, [{'>=', '$1', Min}], ['$_']}]) of
        Got -> {ok, lists:reverse([{Key, V} || {{V, Key}} <- Got])}
    catch
        error:badarg -> unknown         %% a window's index, deleted since
    end;
above(_, _) ->
    unknown.

%% @doc The highest value the index let go of (0: none).
-spec floor(index()) -> non_neg_integer().
floor(#busiest{floor = F}) -> F.

%% @doc Its tables (to delete when it is replaced).
-spec tables(index()) -> [ets:tid()].
tables(#busiest{order = O, values = Vs}) -> [O, Vs].

%% @doc What views read of it.
-spec reader(index()) -> reader().
reader(#busiest{order = O, floor = F}) -> #{order => O, floor => F}.
