%%% @doc The row of one call edge in the store's `calls' table: the round
%%% trips the tracer sampled for (Caller, Server, Kind, Tag) (a gen:call's
%%% request and the reply to its alias; msgflow_tracer:calls_take/1), as a
%%% histogram of log-scale buckets (msgflow_tracer:call_buckets/0), since
%%% the run started and in the last two windows that had any:
%%% ```
%%% {{Caller, Server, Kind, Tag}, Sampled, Unanswered, Hist, Window, WinHist, PrevHist}
%%% '''
%%% Hist, WinHist and PrevHist are `[{Bucket, Count}]' sorted by bucket;
%%% Window is the window WinHist is of, PrevHist the one before it (empty
%%% when that window had none).  Histograms add: rows of several threads,
%%% windows, edges or nodes merge by adding their counts.  Pure functions
%%% (the store writes the rows, views read them).
-module(msgflow_call_row).
-export([new/3, add/3, key/1, rekey/2, merge/2, sampled/1, unanswered/1, hist/1, recent/2,
         add_hists/2, percentiles/2, mean_us/1, buckets/0, of_pair/3, top_bucket/1, bucket_max_us/1]).
-export_type([row/0, hist/0, key/0]).

%% An edge's key: its caller's and server's endpoints or groups, or (the
%% store's call groups) their label ids and nodes.
-type key() :: {end_key(), end_key(), msgflow_tracer:kind(), atom()}.
-type end_key() :: msgflow_tracer:endpoint() | msgflow_labels:group()
                 | {msgflow_labels:label_id(), node()}.
-type hist() :: [{non_neg_integer(), pos_integer()}].
-type row() :: {key(), non_neg_integer(), non_neg_integer(), hist(), non_neg_integer(), hist(), hist()}.

%% @doc A row for a taken edge's round trips in window Open.
-spec new(key(), {non_neg_integer(), non_neg_integer(), hist()}, pos_integer()) -> row().
new(Key, {S, U, H}, Open) ->
    {Key, S, U, H, Open, H, []}.

%% @doc A taken edge's round trips added to Row in window Open.
-spec add(row(), {non_neg_integer(), non_neg_integer(), hist()}, pos_integer()) -> row().
add({K, S0, U0, H0, W, WH, PH}, {S, U, H}, Open) ->
    {WH1, PH1} = if
                     W =:= Open -> {add_hists(WH, H), PH};
                     W =:= Open - 1 -> {H, WH};
                     true -> {H, []}
                 end,
    {K, S0 + S, U0 + U, add_hists(H0, H), Open, WH1, PH1}.

-spec key(row()) -> key().
key(Row) -> element(1, Row).

%% @doc Row under another key (its ends rolled up into their groups).
-spec rekey(row(), key()) -> row().
rekey(Row, K) -> setelement(1, Row, K).

%% @doc Two rows of one key as one (the later's windows win where they
%% differ).
-spec merge(row(), row()) -> row().
merge({K, S1, U1, H1, W1, WH1, PH1}, {_, S2, U2, H2, W2, WH2, PH2}) ->
    {W, WH, PH} = if
                      W1 =:= W2 -> {W1, add_hists(WH1, WH2), add_hists(PH1, PH2)};
                      W1 > W2 -> {W1, WH1, PH1};
                      true -> {W2, WH2, PH2}
                  end,
    {K, S1 + S2, U1 + U2, add_hists(H1, H2), W, WH, PH}.

-spec sampled(row()) -> non_neg_integer().
sampled(Row) -> element(2, Row).

-spec unanswered(row()) -> non_neg_integer().
unanswered(Row) -> element(3, Row).

-spec hist(row()) -> hist().
hist(Row) -> element(4, Row).

%% @doc The highest bucket a round trip of Row fell in, none before any.
-spec top_bucket(row()) -> non_neg_integer() | none.
top_bucket(Row) ->
    case hist(Row) of
        [] -> none;
        H -> element(1, lists:last(H))
    end.

%% @doc The upper bound of bucket B, µs (a float), as percentiles/2 gives
%% it for the highest bucket (the `max').
-spec bucket_max_us(non_neg_integer()) -> float().
bucket_max_us(B) ->
    upper({B, 1}, buckets()).

%% @doc The histograms of the last closed window Last and the one before:
%% `{LastHist, PrevHist}' (empty where a window had none).
-spec recent(row(), non_neg_integer()) -> {hist(), hist()}.
recent({_, _, _, _, W, WH, PH}, Last) ->
    if
        W =:= Last -> {WH, PH};
        W =:= Last + 1 -> {PH, []};      %% the open window has the newest
        W =:= Last - 1 -> {[], WH};
        true -> {[], []}
    end.

%% @doc The rows of table T whose caller and server are Caller and Server
%% (a pair's call edges, one per tag).
-spec of_pair(ets:tid(), term(), term()) -> [row()].
of_pair(T, Caller, Server) ->
    ets:select(T, [{{{Caller, Server, '_', '_'}, '_', '_', '_', '_', '_', '_'}, [], ['$_']}]).

%% @doc Two histograms added.
-spec add_hists(hist(), hist()) -> hist().
add_hists([], B) -> B;
add_hists(A, []) -> A;
add_hists([{K, X} | A], [{K, Y} | B]) -> [{K, X + Y} | add_hists(A, B)];
add_hists([{K1, _} = P | A], [{K2, _} | _] = B) when K1 < K2 -> [P | add_hists(A, B)];
add_hists(A, [P | B]) -> [P | add_hists(A, B)].

%% @doc The round trip at each quantile Qs (0 < Q =< 1) of a histogram, in
%% µs (floats): the middle of the bucket the quantile falls in (a bucket's
%% upper bound is at most 1.5 times its lower one, so the value is within
%% 25 % of the true one), and for 1 the upper bound of the highest bucket
%% with any (`max'); `undefined' for each of an empty histogram.
-spec percentiles(hist(), [number()]) -> [float() | undefined].
percentiles([], Qs) ->
    [undefined || _ <- Qs];
percentiles(Hist, Qs) ->
    Bounds = buckets(),
    Total = lists:sum([N || {_, N} <- Hist]),
    [case Q >= 1 of
         true -> upper(lists:last(Hist), Bounds);
         false -> middle(nth_bucket(Hist, max(1, ceil(Q * Total))), Bounds)
     end || Q <- Qs].

nth_bucket([{B, N} | Rest], Rank) ->
    case Rank =< N orelse Rest =:= [] of
        true -> B;
        false -> nth_bucket(Rest, Rank - N)
    end.

middle(B, Bounds) ->
    case element(B + 1, Bounds) of
        {Lo, infinity} -> Lo / 1000;
        {0, Hi} -> Hi / 2000;
        {Lo, Hi} -> (Lo + Hi) / 2000
    end.

upper({B, _}, Bounds) ->
    case element(B + 1, Bounds) of
        {Lo, infinity} -> Lo / 1000;
        {_, Hi} -> Hi / 1000
    end.

%% @doc The mean round trip of a histogram, µs, each round trip taken
%% at the middle of its bucket (as percentiles/2); `undefined' when empty.
-spec mean_us(hist()) -> float() | undefined.
mean_us([]) ->
    undefined;
mean_us(Hist) ->
    Bounds = buckets(),
    lists:sum([middle(B, Bounds) * N || {B, N} <- Hist]) / lists:sum([N || {_, N} <- Hist]).

%% @doc The buckets' bounds in ns, `{Low, High}' by bucket number + 1 (the
%% tracer's: msgflow_tracer:call_buckets/0), read once.
-spec buckets() -> tuple().
buckets() ->
    case persistent_term:get({?MODULE, buckets}, undefined) of
        undefined ->
            B = list_to_tuple(msgflow_tracer:call_buckets()),
            persistent_term:put({?MODULE, buckets}, B),
            B;
        B -> B
    end.
