%%% The row rules the aggregate in C keeps (c_src/mf_agg.c: a new row,
%%% a delta in its open window or a later one, its kinds past max_kinds),
%%% written as the Erlang store kept them before issue 53: the model the
%%% tests check the aggregate against.  Rows are msgflow_row's.
-module(msgflow_row_model).
-export([new/4, add_kind/4, add_in_open/2, add/5]).

-type row() :: msgflow_row:row().

%% @doc A new pair's row: N messages in window Open, of kind and tag KT
%% (`none' with kinds off).
-spec new(term(), pos_integer(), pos_integer(), {atom(), atom()} | none) -> row().
new(Key, N, Open, none) -> {Key, N, Open, N, [], 0, []};
new(Key, N, Open, {K, T}) -> {Key, N, Open, N, [], 0, {K, T}}.

%% @doc The row with N more messages of kind and tag KT in its kinds: N
%% are in its total already (add/5 and add_in_open/2 put them there
%% first).  A row that has Max kinds and tags already counts a new one as
%% `{Kind, other}'.
-spec add_kind(row(), pos_integer(), {atom(), atom()} | none, pos_integer()) -> row().
add_kind(Row, _, KT, _) when element(7, Row) =:= KT ->
    Row;
add_kind(Row, N, KT, Max) when is_tuple(element(7, Row)) ->
    {K0, T0} = element(7, Row),
    add_kind(setelement(7, Row, [{K0, T0, element(2, Row) - N}]), N, KT, Max);
add_kind(Row, _, none, _) ->
    Row;
add_kind(Row, N, {K, T}, Max) ->
    setelement(7, Row, kind_add(element(7, Row), K, T, N, Max)).


%% (`{Kind, other}' entries do not count towards Max: the NIF sends them
%% in any order with the others.)
kind_add(Ks, K, T, N, Max) ->
    case take_kind(K, T, Ks, []) of
        {M, Rest} -> [{K, T, M + N} | Rest];
        none when T =:= other -> [{K, T, N} | Ks];
        none ->
            case own(Ks, 0) < Max of
                true -> [{K, T, N} | Ks];
                false -> kind_add(Ks, K, other, N, Max)
            end
    end.

own([], A) -> A;
own([{_, other, _} | R], A) -> own(R, A);
own([_ | R], A) -> own(R, A + 1).

take_kind(_, _, [], _) -> none;
take_kind(K, T, [{K, T, M} | Rest], Seen) -> {M, lists:reverse(Seen, Rest)};
take_kind(K, T, [E | Rest], Seen) -> take_kind(K, T, Rest, [E | Seen]).

%% @doc Row with N more messages in its last window, the open one (as
%% count_in_open/1 does in ETS).
-spec add_in_open(row(), pos_integer()) -> row().
add_in_open({K, Total, W, Count, Hist, Peak, Ks}, N) -> {K, Total + N, W, Count + N, Hist, Peak, Ks}.

%% @doc Row with N messages of window Open added, its last window (older
%% than Open) moved to its history (none before window Oldest) and its
%% peak updated from that window's length in Durs (ms by window; a window
%% not in it counts as 0 ms: no rate).
-spec add(row(), pos_integer(), pos_integer(), integer(), #{pos_integer() => non_neg_integer()}) ->
          row().
add({K, Total, W, Count, Hist, Peak, Ks}, N, Open, Oldest, Durs) ->
    Peak1 = max(Peak, msgflow_row:mhz(Count, maps:get(W, Durs, 0))),
    {K, Total + N, Open, N, msgflow_hist:push(Hist, W, Count, Oldest), Peak1, Ks}.

