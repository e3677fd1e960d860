%%% EUnit: msgflow_tables, the collector's tables dropped without holding
%%% a scheduler.
-module(msgflow_tables_tests).
-include_lib("eunit/include/eunit.hrl").

table(Type, N) ->
    T = ets:new(msgflow_tables_tests, [Type]),
    true = ets:insert(T, [{I, I} || I <- lists:seq(1, N)]),
    T.

%% A big table loses exactly Budget objects a call, one at a time, down
%% to 2,000; then it is deleted whole.  The tables after it wait.
budget_test_() ->
    [fun() ->
             T = table(Type, 5000),
             Small = table(set, 10),
             ?assertEqual([T, Small], msgflow_tables:drop([T, Small], 1000)),
             ?assertEqual(4000, ets:info(T, size)),
             ?assertEqual([T, Small], msgflow_tables:drop([T, Small], 1999)),
             ?assertEqual(2001, ets:info(T, size)),
             ?assertEqual([], msgflow_tables:drop([T, Small], 1)),
             ?assertEqual(undefined, ets:info(T, size)),
             ?assertEqual(undefined, ets:info(Small, size))
     end || Type <- [set, ordered_set]].

%% drop/1 deletes every table, whatever its size; a table gone already
%% is skipped.
drop_all_test() ->
    Gone = table(set, 3),
    ets:delete(Gone),
    Ts = [table(set, 2000), Gone, table(ordered_set, 2001), table(set, 25000)],
    ?assertEqual(ok, msgflow_tables:drop(Ts)),
    ?assertEqual([undefined], lists:usort([ets:info(T, size) || T <- Ts])).
