%%% @doc Deleting the collector's ETS tables in slices a scheduler can
%%% afford: its own ones under 1 ms a slice (drop/1), those views may
%%% read whole, in the VM's slices (delete/1).
%%%
%%% `ets:delete/1' frees a table's objects in the owner's time, 10,000
%%% of a hash table's (12,000 of an ordered set's) before it traps: 2 to
%%% 4 ms on the machine of BENCHMARKS.md, where a table of a million rows
%%% took a process a hundred such slices in a row.  So a table is deleted
%%% whole only when it holds at most ?WHOLE_ROWS objects (well under 1 ms
%%% of freeing), its objects counted as reductions so that the next table
%%% is freed in another slice; a bigger one first loses objects one at a
%%% time (1-5 µs each, each counted) down to that size.
%%%
%%% drop/1 is for the owner's set and ordered set tables that no other
%%% process reads: a read while the objects go would find some of them
%%% gone.  delete/1 deletes whole (a reader finds the table there or
%%% gone, never in part) and counts the objects freed, so that the owner
%%% yields before the next one; a table of a million rows still holds it
%%% for slices of 2-4 ms.
-module(msgflow_tables).

-export([drop/1, delete/1]).

-define(WHOLE_ROWS, 2000).
%% an object a table deleted whole frees, in reductions (a slice is
%% 4,000: 2,000 objects, about 0.5 ms)
-define(ROW_REDUCTIONS, 2).
%% an object deleted alone (ets:next/2 and ets:delete/2 in a big table,
%% 1-5 µs: `make bench-scale' met 5 ms slices at 2): 200 a slice
-define(THIN_REDUCTIONS, 20).

%% @doc Every table of Tables deleted (one gone already is skipped).
-spec drop([ets:tid()]) -> ok.
drop([]) ->
    ok;
drop([T | Rest]) ->
    case ets:info(T, size) of
        undefined ->
            drop(Rest);
        N when N =< ?WHOLE_ROWS ->
            ets:delete(T),
            erlang:bump_reductions(?ROW_REDUCTIONS * N),
            drop(Rest);
        N ->
            thin(T, ets:first(T), N - ?WHOLE_ROWS),
            drop([T | Rest])
    end.

%% @doc Each table deleted whole, its objects counted as reductions (one
%% gone already is skipped): for tables other processes may be reading.
-spec delete([ets:tid()]) -> ok.
delete(Tables) ->
    lists:foreach(fun(T) ->
                          case ets:info(T, size) of
                              undefined -> ok;
                              N -> ets:delete(T), erlang:bump_reductions(?ROW_REDUCTIONS * N)
                          end
                  end, Tables).

%% N objects of T deleted, from key K on (the next key read before each
%% is deleted: safe in a set and an ordered set; one skipped as a hash
%% table shrinks is left for the next pass of drop/1).
thin(_, _, 0) ->
    ok;
thin(_, '$end_of_table', _) ->
    ok;
thin(T, K, N) ->
    Next = ets:next(T, K),
    ets:delete(T, K),
    erlang:bump_reductions(?THIN_REDUCTIONS),
    thin(T, Next, N - 1).
