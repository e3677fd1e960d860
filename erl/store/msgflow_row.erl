%%% @doc The row format of the store's pairs and rolled up tables, in one
%%% place: every reader and writer of a row goes through these functions
%%% (match specs through pattern/1).  A row is
%%% `{{Sender, Receiver}, Total, LastWindow, LastCount, History, PeakMhz,
%%% Kinds}':
%%% Total is messages since start; LastCount the messages in window
%%% LastWindow, the latest window the pair had traffic in; History its
%%% earlier windows with traffic (msgflow_hist); PeakMhz the highest
%%% rate of a closed window in mHz (messages per 1000 s: an integer, so
%%% that a row never holds a float; per_s/3 and mhz_to_per_s/1 turn counts
%%% and mHz into the messages/s views show); Kinds
%%% the messages since start by kind and tag, `[{Kind, Tag, Messages}]'
%%% (empty with kinds off; their sum is Total when every delta carried a
%%% kind), or `{Kind, Tag}' while all Total messages are of that one kind
%%% and tag: most pairs have one, and so a row takes 24 bytes less
%%% (kinds/1 and kinds_of/2 read either).  Pure; any process.
-module(msgflow_row).
-export([select_spec/3, kinds_of/2, kinds/1, sum_kinds/1, key/1, named/1, total/1, count/1, last_window/1,
         peak_mhz/1, mhz/2, per_s/3, mhz_to_per_s/1, pattern/1, counts_in/3, last_two/2, peak_rate/4,
         sum_counts/1, sorted_pairs/1]).
-export_type([row/0, pattern_fields/0, kind_count/0]).


-type row() :: {{msgflow_tracer:endpoint(), msgflow_tracer:endpoint()}, pos_integer(),
                pos_integer(), non_neg_integer(), msgflow_hist:hist(), non_neg_integer(),
                kinds_field()}.
%% A row's kinds as it holds them: a list, or `{Kind, Tag}' when every
%% message of the row is of that kind and tag.
-type kinds_field() :: [kind_count()] | {msgflow_tracer:kind(), atom()}.
%% Messages of one kind and tag (msgflow_tracer:delta/0).
-type kind_count() :: {msgflow_tracer:kind(), atom(), pos_integer()}.
-type deep_kinds() :: [row() | kind_count() | deep_kinds()].
%% The fields a match pattern names (others are '_').
-type pattern_fields() :: #{key => term(), total => term(), window => term(), kinds => term()}.

%% @doc A row's kinds field as a list, Total the row's messages.
-spec kinds_of(non_neg_integer(), kinds_field()) -> [kind_count()].
kinds_of(Total, {K, T}) -> [{K, T, Total}];
kinds_of(_, Ks) -> Ks.

%% @doc Messages since start by kind and tag, most first.
-spec kinds(row()) -> [kind_count()].
kinds(Row) -> lists:sort(fun most_first/2, kinds_of(element(2, Row), element(7, Row))).

%% Most messages first; equal counts by kind, then tag (one order for
%% every view and export, and the C tools).
most_first({K1, T1, A}, {K2, T2, B}) -> {-A, K1, T1} =< {-B, K2, T2}.

%% @doc Kinds summed, most first, from a deep list whose leaves are rows
%% and kind counts (a group's rows, several views' kinds lists).
-spec sum_kinds(deep_kinds()) -> [kind_count()].
sum_kinds([Row]) when tuple_size(Row) =:= 7 ->
    kinds(Row);
sum_kinds(Deep) ->
    M = sum_kinds(Deep, #{}),
    lists:sort(fun most_first/2, [{Kd, Tg, N} || {{Kd, Tg}, N} <- maps:to_list(M)]).

sum_kinds([], M) -> M;
sum_kinds([H | T], M) -> sum_kinds(T, sum_kinds(H, M));
sum_kinds({Kd, Tg, N}, M) -> add_kind_count(Kd, Tg, N, M);
sum_kinds(Row, M) -> sum_kinds(kinds_of(element(2, Row), element(7, Row)), M).

add_kind_count(Kd, Tg, N, M) ->
    case M of
        #{{Kd, Tg} := X} -> M#{{Kd, Tg} := X + N};
        _ -> M#{{Kd, Tg} => N}
    end.

%% @doc The pair, `{Sender, Receiver}'.
-spec key(row()) -> term().
key(Row) -> element(1, Row).

%% @doc Whether a receiver is a local registered name (`Name' or `{Name,
%% node()}'): the views merge a send to it into its pid's row, and the
%% store keeps such pairs apart.
-spec named(term()) -> boolean().
named(R) when is_atom(R) -> true;
named({_, N}) when N =:= node() -> true;
named(_) -> false.

%% @doc The highest rate of a closed window before the last, in messages
%% per 1000 s.
-spec peak_mhz(row()) -> non_neg_integer().
peak_mhz(Row) -> element(6, Row).

%% @doc The rate of Count messages in Ms ms in mHz (messages per 1000 s),
%% rounded down; 0 over 0 ms.  Rows keep rates so; views give messages/s.
-spec mhz(non_neg_integer(), non_neg_integer()) -> non_neg_integer().
mhz(_, 0) -> 0;
mhz(Count, Ms) -> (Count * 1000000) div Ms.

%% @doc Messages/s of Count messages in Ms ms, times Scale (the sampling
%% scale: the period over the traced slice, 1 when not sampling); 0.0
%% over 0 ms.  The one rule that turns counts into rates.
-spec per_s(non_neg_integer(), non_neg_integer(), number()) -> float().
per_s(_, 0, _) -> 0.0;
per_s(Count, Ms, Scale) -> Scale * Count * 1000 / Ms.

%% @doc Messages/s of a rate in mHz.
-spec mhz_to_per_s(non_neg_integer()) -> float().
mhz_to_per_s(Mhz) -> Mhz / 1000.

%% @doc Messages since start.
-spec total(row()) -> non_neg_integer().
total(Row) -> element(2, Row).

%% @doc Messages in the latest window the pair had traffic in.
-spec count(row()) -> non_neg_integer().
count(Row) -> element(4, Row).

%% @doc The latest window the pair had traffic in.
-spec last_window(row()) -> pos_integer().
last_window(Row) -> element(3, Row).

%% @doc An ETS match pattern of a row with the named fields set (match
%% variables or values) and the others '_'.
-spec pattern(pattern_fields()) -> tuple().
pattern(F) ->
    {maps:get(key, F, '_'), maps:get(total, F, '_'), maps:get(window, F, '_'), '_', '_', '_',
     maps:get(kinds, F, '_')}.

%% @doc A match spec for the rows pattern(F) and Guard match: each
%% returned whole, or with Kinds false with an empty kinds list, so that
%% a view that shows no kinds copies none out of the table.
-spec select_spec(pattern_fields(), list(), boolean()) -> ets:match_spec().
select_spec(F, Guard, true) ->
    [{pattern(F), Guard, ['$_']}];
select_spec(F, Guard, false) ->
    %% every field bound ('$21'.. for those F leaves out), the kinds not
    {Pat, _} = lists:mapfoldl(fun bind/2, 21, tuple_to_list(pattern(F#{kinds => '_'}))),
    [Key | Rest] = lists:droplast(Pat),
    [{list_to_tuple(Pat ++ []), Guard,
      [{list_to_tuple([body(Key) | Rest] ++ [[]])}]}].

bind('_', N) -> {var(N), N + 1};
bind(T, N) when is_tuple(T) ->
    {L, N1} = lists:mapfoldl(fun bind/2, N, tuple_to_list(T)),
    {list_to_tuple(L), N1};
bind(V, N) -> {V, N}.

var(N) -> list_to_atom([$$ | integer_to_list(N)]).

%% A pattern's term as a match spec body builds it (a tuple is {{...}}).
body(T) when is_tuple(T) -> {list_to_tuple([body(X) || X <- tuple_to_list(T)])};
body(X) -> X.

%% @doc The messages of the row in each window from First to Last (closed
%% or open windows), oldest first; First found in the history by
%% bisection.
-spec counts_in(pos_integer(), pos_integer(), row()) -> [non_neg_integer()].
counts_in(First, Last, _) when First > Last ->
    [];
counts_in(First, Last, {_, _, W, C, Hist, _, _}) ->
    Known = msgflow_hist:entries(msgflow_hist:from(Hist, First), Last)
        ++ [{W, C} || W >= First, W =< Last],
    fill(First, Last, Known).

fill(W, Last, _) when W > Last -> [];
fill(W, Last, [{W, C} | Rest]) -> [C | fill(W + 1, Last, Rest)];
fill(W, Last, Known) -> [0 | fill(W + 1, Last, Known)].

%% @doc `[Previous, Last]': counts_in(Last - 1, Last, Row), read from the
%% row's newest entries only (what every view needs for rates and trends).
-spec last_two(pos_integer(), row()) -> [non_neg_integer()].
last_two(Last, {_, _, Last, C, Hist, _, _}) -> [msgflow_hist:at(Hist, 1, Last - 1), C];
last_two(Last, {_, _, W, C, _, _, _}) when W =:= Last - 1 -> [C, 0];
last_two(Last, {_, _, _, _, Hist, _, _}) ->
    [msgflow_hist:at(Hist, 2, Last - 1), msgflow_hist:at(Hist, 1, Last)].

%% @doc The highest rate (messages/s) of the row over its closed windows:
%% the peak kept in it, and its last window when that has closed (Open is
%% the open window).  Durations of the kept windows by number; the others
%% count as Interval ms.
-spec peak_rate(row(), pos_integer(), #{pos_integer() => non_neg_integer()}, pos_integer()) ->
          float().
peak_rate({_, _, W, C, _, Peak, _}, Open, Durs, Interval) when W < Open ->
    msgflow_row:mhz_to_per_s(max(Peak, msgflow_row:mhz(C, maps:get(W, Durs, Interval))));
peak_rate({_, _, _, _, _, Peak, _}, _, _, _) ->
    msgflow_row:mhz_to_per_s(Peak).

%% @doc Per-window counts of several rows (counts_in/3 of each, same
%% windows) added window by window.
-spec sum_counts([[non_neg_integer()], ...]) -> [non_neg_integer()].
sum_counts([L]) -> L;
sum_counts([L | Ls]) -> lists:zipwith(fun erlang:'+'/2, L, sum_counts(Ls)).

%% @doc Pairs with their counts, most messages first: from a map
%% `#{{Sender, Receiver} => Messages}' or a list of `{Sender, Receiver,
%% Messages}'. Pairs of equal counts keep no particular order.
-spec sorted_pairs(#{{term(), term()} => non_neg_integer()} |
                   [{term(), term(), non_neg_integer()}]) ->
          [{term(), term(), non_neg_integer()}].
sorted_pairs(M) when is_map(M) ->
    sorted_pairs([{S, R, N} || {{S, R}, N} <- maps:to_list(M)]);
sorted_pairs(L) when is_list(L) ->
    lists:sort(fun({_, _, A}, {_, _, B}) -> A >= B end, L).
