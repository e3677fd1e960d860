%%% @doc The top-k pairs by one figure as the views read them: the aggregate's bounded
%%% indexes of the pairs with the highest value of one figure (messages
%%% since start, messages in the open window, in the last closed one),
%%% which it keeps as it folds the deltas (c_src/mf_agg.c), so that a
%%% view of the N busiest reads N entries instead of every pair.
%%%
%%% The figure of a pair only grows while an index is kept (a total, a
%%% count in a window), which makes a bounded index exact: it holds at most
%%% its cap of pairs and a `floor', the highest value it ever let go of; a
%%% pair whose value reaches above the floor is in it, and every pair not
%%% in it has a value of at most the floor.  So the index's entries are the
%%% busiest pairs of all (pairs equal to the floor aside), and a view of N
%%% of them is exact while the index holds N (top/2).  A pair rolled up
%%% leaves the index; the rest stays exact, with fewer entries.  Any
%%% process.
-module(msgflow_store_index).

-export([top/2, above/2, held/2]).
-export_type([reader/0]).

%% An index of the aggregate: by messages since start (`total'), in the
%% open window (`open') or in the last closed one (`last').
-type reader() :: {msgflow_agg, msgflow_tracer:agg(), total | open | last}.

%% @doc The N pairs of the highest values, highest first, as `{Key,
%% Value}', when the index knows them: `{ok, Entries}' while it holds N
%% pairs or never let one go (then every pair with a value is in it);
%% else `unknown' (the caller scans).
-spec top(reader(), non_neg_integer()) -> {ok, [{term(), non_neg_integer()}]} | unknown.
top({msgflow_agg, A, Which}, N) ->
    case msgflow_tracer:agg_busiest(A, Which, N) of
        {Got, F} when length(Got) =:= N; F =:= 0 -> {ok, Got};
        _ -> unknown
    end.

%% @doc Every pair whose value is at least Min, highest first, when the
%% index holds them all (Min above its floor); else `unknown'.
-spec above(reader(), pos_integer()) -> {ok, [{term(), non_neg_integer()}]} | unknown.
above({msgflow_agg, A, Which}, Min) ->
    case msgflow_tracer:agg_busiest(A, Which, 0) of
        {_, F} when Min > F ->
            {Got, _} = msgflow_tracer:agg_busiest(A, Which, 1000000),
            {ok, [E || E = {_, V} <- Got, V >= Min]};
        _ ->
            unknown
    end.

%% @doc At most N of the pairs the index holds, highest first, exact or
%% not (a pair not among them has at most the floor): for a view that
%% reads the busiest pairs of a store too big to read whole.
-spec held(reader(), non_neg_integer()) -> [{term(), non_neg_integer()}].
held({msgflow_agg, A, Which}, N) ->
    element(1, msgflow_tracer:agg_busiest(A, Which, N)).
