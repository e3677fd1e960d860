%%% @doc Dropping the collector's ETS tables without holding a scheduler.
%%%
%%% `ets:delete/1' frees a table's objects in the owner's time, 10,000
%%% of a hash table's (12,000 of an ordered set's) before it traps: 2 to
%%% 4 ms on the machine of BENCHMARKS.md, where a table of a million rows
%%% took the collector a hundred such slices in a row.  So a table is
%%% deleted whole only when it holds at most ?WHOLE_ROWS objects (well
%%% under 1 ms of freeing), with its objects counted as reductions, so
%%% that the next table is freed in another slice; a bigger one first
%%% loses objects one at a time (about 1 µs each, each counted) down to
%%% that size.
%%%
%%% The owner only (the collector): for tables it owns, which no view is
%%% still reading.
-module(msgflow_tables).

-export([drop/1, drop/2]).

-define(WHOLE_ROWS, 2000).
%% an object freed or deleted one at a time, in reductions (a slice is
%% 4,000: about 2,000 objects, under 1 ms)
-define(ROW_REDUCTIONS, 2).

%% @doc Every table of Tables deleted (those already gone skipped).
-spec drop([ets:tid()]) -> ok.
drop(Tables) ->
    [] = drop(Tables, infinity),
    ok.

%% @doc Tables deleted in turn until about Budget objects were deleted
%% one at a time: the tables left (the first of them may have lost some
%% of its objects), for a later call.  A table gone already is skipped.
-spec drop([ets:tid()], pos_integer() | infinity) -> [ets:tid()].
drop([], _) ->
    [];
drop([T | Rest], Budget) ->
    case ets:info(T, size) of
        undefined ->
            drop(Rest, Budget);
        N when N =< ?WHOLE_ROWS ->
            ets:delete(T),
            erlang:bump_reductions(?ROW_REDUCTIONS * N),
            drop(Rest, Budget);
        N when Budget =:= infinity ->
            thin(T, ets:first(T), N - ?WHOLE_ROWS),
            drop([T | Rest], Budget);
        N when Budget > 0 ->
            Out = min(Budget, N - ?WHOLE_ROWS),
            thin(T, ets:first(T), Out),
            drop([T | Rest], Budget - Out);
        _ ->
            [T | Rest]
    end.

%% N objects of T deleted, from key K on (the next key read before each
%% is deleted: safe in a set and an ordered set).
thin(_, _, 0) ->
    ok;
thin(_, '$end_of_table', _) ->
    ok;
thin(T, K, N) ->
    Next = ets:next(T, K),
    ets:delete(T, K),
    erlang:bump_reductions(?ROW_REDUCTIONS),
    thin(T, Next, N - 1).
