%%% EUnit: msgflow_tables, the collector's private tables dropped without
%%% holding a scheduler.
-module(msgflow_tables_tests).
-include_lib("eunit/include/eunit.hrl").

table(Type, N) ->
    T = ets:new(msgflow_tables_tests, [Type, private]),
    true = ets:insert(T, [{I, I} || I <- lists:seq(1, N)]),
    T.

%% Every table deleted, whatever its kind and size (at the bound of
%% 2,000 objects deleted whole, past it thinned first); a table gone
%% already is skipped.
drop_test() ->
    Gone = table(set, 3),
    ets:delete(Gone),
    Ts = [table(set, 2000), Gone, table(ordered_set, 2001), table(set, 25000),
          table(ordered_set, 30000), table(set, 0)],
    ?assertEqual(ok, msgflow_tables:drop(Ts)),
    ?assertEqual([undefined], lists:usort([ets:info(T, size) || T <- Ts])).

%% A big table is freed in slices: drop/1 counts 20 reductions an object
%% it deletes alone, 2 an object of a table it deletes whole, and
%% delete/1 2 an object (a slice is 4,000).  A count past what is left of
%% the slice shows as what was left: a whole table of 1,000 is deleted
%% at the start of a slice (after a yield), its table made before.
counted_test() ->
    Counted = fun(F, T) ->
                      erlang:yield(),
                      {reductions, R0} = process_info(self(), reductions),
                      ok = F([T]),
                      {reductions, R1} = process_info(self(), reductions),
                      R1 - R0
              end,
    ?assert(Counted(fun msgflow_tables:drop/1, table(set, 20000)) >= 20 * 18000),
    ?assert(Counted(fun msgflow_tables:drop/1, table(set, 1000)) >= 2 * 1000),
    ?assert(Counted(fun msgflow_tables:delete/1, table(set, 1000)) >= 2 * 1000).

%% delete/1 deletes whole, whatever the size; a table gone is skipped.
delete_test() ->
    Gone = table(set, 1),
    ets:delete(Gone),
    Ts = [table(ordered_set, 5), Gone, table(set, 30000)],
    ?assertEqual(ok, msgflow_tables:delete(Ts)),
    ?assertEqual([undefined], lists:usort([ets:info(T, size) || T <- Ts])).
