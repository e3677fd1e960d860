%%% The aggregate in C (msgflow_tracer:agg_*, c_src/mf_agg.c) against the
%%% store it is to replace (msgflow_store, issue 53): the same deltas,
%%% window after window, make the same rows, the same busiest keys and
%%% the same window ends.
-module(msgflow_agg_tests).
-include_lib("proper/include/proper.hrl").  %% before eunit.hrl: both define LET
-include_lib("eunit/include/eunit.hrl").

-define(RUNS, 200).
-define(KEEP, 4).

proper_test_() ->
    {timeout, 300,
     [?_assert(proper:quickcheck(P, [{numtests, ?RUNS}, {to_file, user}]))
      || P <- [prop_rows_equal_store()]]}.

%% Windows of deltas between a few endpoints (pids, a registered name and a
%% remote-looking pair), of a few kinds and tags or none, pairs and
%% replies, with max_kinds 2 and history kept 4 windows: after each window
%% closes, and at the end, every row of the pairs and the rolled-up rows
%% is the store's (kinds as a set), and so are the busiest keys by total
%% and the last window's ends the store keeps.
prop_rows_equal_store() ->
    Ends = [self(), whereis(init), whereis(erl_prim_loader), a_name, {a_name, node()}, {x, 'n@h'}],
    KT = oneof([none, {info, m}, {call, get}, {cast, put}, {call, other}]),
    Delta = {oneof(Ends), oneof(Ends), range(1, 20), KT, boolean()},
    ?FORALL(Windows, non_empty(list(list(Delta))),
            begin
                S0 = msgflow_store:start_run(msgflow_store:new(#{total => 8, window => 8}),
                                             maps:merge(msgflow_opts:defaults(),
                                                        #{windows => ?KEEP, max_kinds => 2})),
                S1 = msgflow_store:clear(S0, new_run),
                A = msgflow_tracer:agg_new({?KEEP, 2, 8, 8, node()}),
                {S, Ok} = lists:foldl(fun(W, {Sx, Okx}) ->
                                              Sy = window(W, Sx, A),
                                              {Sy, Okx andalso same(Sy, A)}
                                      end, {S1, true}, Windows),
                retire(S),
                Ok
            end).

%% One window's deltas into both, then closed in both with the store's
%% length of it.
window(Deltas, S, A) ->
    Tuple = fun({F, T, N, none, _}) -> {F, T, N};
               ({F, T, N, {K, Tg}, _}) -> {F, T, N, K, Tg}
            end,
    Pairs = [Tuple(D) || D = {_, _, _, _, false} <- Deltas],
    Replies = [Tuple(D) || D = {_, _, _, _, true} <- Deltas],
    S1 = msgflow_store:merge_deltas(Pairs, Replies, S),
    0 = msgflow_tracer:agg_add(A, rolled_up, Replies),
    0 = msgflow_tracer:agg_add(A, pairs, Pairs),
    S2 = msgflow_store:close_window(S1),
    [#{window_ms := Ms} | _] = lists:reverse(maps:get(windows, msgflow_store:handle(S2, #{}))),
    ok = msgflow_tracer:agg_close(A, Ms, 5),
    S2.

same(S, A) ->
    H = msgflow_store:handle(S, #{}),
    Rows = [{Table, rows(ets:tab2list(maps:get(Table, H))), rows(all(A, Table))} || Table <- [pairs, rolled_up]],
    %% the busiest keys by total, when the store's index knows them
    #{busiest := #{total := Total}, window_ends := #{last := Last}} = H,
    {AggTop, _} = msgflow_tracer:agg_busiest(A, total, 8),
    Top = case msgflow_busiest:top(Total, 8) of
              %% (keys tied with the least may differ: each index keeps
              %% some of those it had to choose between)
              {ok, L} -> [{busiest, above_least(L), above_least(AggTop)}];
              unknown -> []
          end,
    %% the last window's ends: receivers and senders with five partners
    %% or more, or a registered name
    AggEnds = msgflow_tracer:agg_last_ends(A),
    Named = fun(E) -> msgflow_row:named(E) end,
    Ends = case Last of
               none -> [];
               {In, Out} ->
                   [{ends_in, lists:sort(ets:tab2list(In)),
                     lists:sort([{E, P, M} || {E, P, M, _, _} <- AggEnds, M > 0, P >= 5 orelse Named(E)])},
                    {ends_out, lists:sort(ets:tab2list(Out)),
                     lists:sort([{E, P, M} || {E, _, _, P, M} <- AggEnds, M > 0, P >= 5 orelse Named(E)])}]
           end,
    lists:all(fun({What, Want, Got}) ->
                      Want =:= Got orelse io:format("~p:~n store ~p~n agg   ~p~n", [What, Want, Got]) =:= x
              end, Rows ++ Top ++ Ends).

%% The values of a busiest list, and its keys above the least value.
above_least([]) -> [];
above_least(L) ->
    Least = lists:min([V || {_, V} <- L]),
    {lists:sort([V || {_, V} <- L]), lists:sort([E || E = {_, V} <- L, V > Least])}.

%% Rows with their kinds as a sorted list.
rows(Rows) ->
    lists:sort([setelement(7, R, lists:sort(msgflow_row:kinds_of(element(2, R), element(7, R)))) || R <- Rows]).

all(A, Table) -> all(A, Table, 0, []).
all(_, _, done, Acc) -> Acc;
all(A, Table, Cursor, Acc) ->
    {Rows, Next} = msgflow_tracer:agg_rows(A, Table, Cursor, 7, true),
    all(A, Table, Next, Rows ++ Acc).

retire(_S) ->
    [ets:delete(T) || T <- ets:all(), ets:info(T, owner) =:= self(),
                      lists:prefix("msgflow_", atom_to_list(ets:info(T, name)))],
    ok.

%% A cursor walks every row once, in chunks of any size.
rows_in_chunks_test() ->
    A = msgflow_tracer:agg_new({10, 8, 16, 16, node()}),
    Keys = [{{n, I}, {n, J}} || I <- lists:seq(1, 30), J <- lists:seq(1, 30)],
    0 = msgflow_tracer:agg_add(A, pairs, [{F, T, 1} || {F, T} <- Keys]),
    [?assertEqual(lists:sort(Keys), lists:sort([element(1, R) || R <- chunks(A, C, 0)])) || C <- [1, 7, 900, 1000]],
    ?assertMatch(#{pairs := 900, ends := 30}, msgflow_tracer:agg_info(A)).

chunks(_, _, done) -> [];
chunks(A, C, Cursor) ->
    {Rows, Next} = msgflow_tracer:agg_rows(A, pairs, Cursor, C, false),
    Rows ++ chunks(A, C, Next).

%% Bad arguments are badarg, never a crash of the VM.
badarg_test() ->
    A = msgflow_tracer:agg_new({10, 8, 16, 16, node()}),
    ?assertError(badarg, msgflow_tracer:agg_new({0, 8, 16, 16, node()})),
    ?assertError(badarg, msgflow_tracer:agg_add(A, groups, [])),
    ?assertError(badarg, msgflow_tracer:agg_add(A, pairs, [{a, b, -1}])),
    ?assertError(badarg, msgflow_tracer:agg_add(A, pairs, [{a, b, 1, nokind, x}])),
    ?assertError(badarg, msgflow_tracer:agg_rows(A, pairs, 0, 0, true)),
    ?assertError(badarg, msgflow_tracer:agg_set_groups(A, [{99, x}])),
    ?assertError(badarg, msgflow_tracer:agg_busiest(A, nope, 3)),
    ?assertEqual([], msgflow_tracer:agg_lookup(A, pairs, {a, b})).

%% The snapshot folded into an aggregate (snapshot_fold_start/2,
%% snapshot_fold/1) against the snapshot as terms (snapshot/1) of a
%% session fed the same sends: pids to pids, to a registered name and to
%% {Name, node()}, of a few kinds, and sends to a process gone (dead
%% letters, also counted in their pairs); the rows are what the deltas
%% make (agg_add/3), exactly, and
%% a full aggregate's messages are reported as having no row.
fold_equals_terms_test() ->
    Ps = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 30)],
    Gone = spawn(fun() -> ok end),
    Ref = monitor(process, Gone),
    receive {'DOWN', Ref, _, _, _} -> ok end,
    Tos = Ps ++ [a_name, {a_name, node()}],
    Msgs = [m, {'$gen_call', {self(), make_ref()}, get}, {'$gen_cast', put}],
    Sends = [{lists:nth(1 + (I rem 30), Ps), lists:nth(1 + (I * 7 rem 32), Tos), lists:nth(1 + (I rem 3), Msgs)}
             || I <- lists:seq(1, 3000)],
    Feed = fun(Session) ->
                   [ok = msgflow_tracer:trace_send(send, Session, F, M, #{extra => T}) || {F, T, M} <- Sends],
                   [ok = msgflow_tracer:trace_send(send_to_non_existing_process, Session, F, m, #{extra => Gone})
                    || F <- lists:sublist(Ps, 5)],
                   ok
           end,
    S1 = msgflow_tracer:session_new(self(), 100000, 8),
    S2 = msgflow_tracer:session_new(self(), 100000, 8),
    ok = Feed(S1),
    ok = Feed(S2),
    {Pairs, Dead, Replies, 0, 0} = msgflow_tracer:snapshot(S1),
    Want = msgflow_tracer:agg_new({10, 8, 16, 16, node()}),
    0 = msgflow_tracer:agg_add(Want, pairs, Pairs),
    0 = msgflow_tracer:agg_add(Want, rolled_up, Replies),
    0 = msgflow_tracer:agg_add(Want, dead, Dead),
    Got = msgflow_tracer:agg_new({10, 8, 16, 16, node()}),
    {Folded, {3005, 0, 5}, {0, 0, 0}, []} = fold_all(msgflow_tracer:snapshot_fold_start(S2, Got), 0),
    ?assertEqual(length(Pairs) + length(Dead) + length(Replies), Folded),
    [?assertEqual(rows(all(Want, T)), rows(all(Got, T))) || T <- [pairs, rolled_up]],
    ?assertEqual(lists:sort(all(Want, dead)), lists:sort(all(Got, dead))),
    ?assertEqual({3005, 5}, {lists:sum([element(2, R) || R <- all(Got, pairs)]), lists:sum([element(2, R) || R <- all(Got, dead)])}),
    %% full: the same sends again find their rows; new keys find none
    ok = msgflow_tracer:agg_full(Got, true, 0),
    ok = Feed(S2),
    [ok = msgflow_tracer:trace_send(send, S2, P, m, #{extra => self()}) || P <- Ps],
    {_, {3035, 0, 5}, {30, 0, 0}, [{0, Top}]} = fold_all(msgflow_tracer:snapshot_fold_start(S2, Got), 0),
    ?assertEqual(lists:sort([{P, self(), 1, 0} || P <- Ps]), lists:sort(Top)),
    ?assertEqual(2 * 3005, lists:sum([element(2, R) || R <- all(Got, pairs)])),
    [msgflow_tracer:session_stop(S) || S <- [S1, S2]],
    [P ! stop || P <- Ps].

fold_all(Take, Acc) ->
    case msgflow_tracer:snapshot_fold(Take) of
        {more, N} -> fold_all(Take, Acc + N);
        {done, N, Msgs, NoRow, 0, 0, _, AggTop} -> {Acc + N, Msgs, NoRow, AggTop}
    end.
