%%% The aggregate in C (msgflow_tracer:agg_*, c_src/mf_agg.c) against a
%%% model of its rows made with msgflow_row's rules (new/4, add/5,
%%% add_in_open/2, add_kind/4): the same deltas, window after window, make
%%% the same rows.
-module(msgflow_agg_tests).
-include_lib("proper/include/proper.hrl").  %% before eunit.hrl: both define LET
-include_lib("eunit/include/eunit.hrl").

-define(RUNS, 200).
-define(KEEP, 4).
-define(MAX_KINDS, 2).

proper_test_() ->
    {timeout, 300,
     [?_assert(proper:quickcheck(P, [{numtests, ?RUNS}, {to_file, user}]))
      || P <- [prop_rows_equal_model()]]}.

%% Windows of deltas between a few endpoints (pids, a registered name, a
%% remote-looking pair), of a few kinds and tags or none, pairs and
%% replies, with max_kinds 2 and history kept 4 windows (windows of
%% random lengths): after each window closes, every row of the pairs and
%% the rolled-up rows is the model's (kinds as a set).
prop_rows_equal_model() ->
    Ends = [self(), whereis(init), whereis(erl_prim_loader), a_name, {a_name, node()}, {x, 'n@h'}],
    KT = oneof([none, {info, m}, {call, get}, {cast, put}, {call, other}]),
    Delta = {oneof(Ends), oneof(Ends), range(1, 20), KT, boolean()},
    ?FORALL(Windows, non_empty(list({range(0, 3000), list(Delta)})),
            begin
                A = msgflow_tracer:agg_new({?KEEP, ?MAX_KINDS, 8, 8, node()}),
                {_, Ok} = lists:foldl(fun({Ms, W}, {M, Okx}) ->
                                              M1 = window(W, Ms, M, A),
                                              {M1, Okx andalso same(M1, A)}
                                      end, {#{open => 1, durs => #{}, rows => #{}}, true}, Windows),
                Ok
            end).

%% One window's deltas into both, then the window closed after Ms ms.
window(Deltas, Ms, M = #{open := Open, durs := Durs}, A) ->
    Tuple = fun({F, T, N, none, _}) -> {F, T, N};
               ({F, T, N, {K, Tg}, _}) -> {F, T, N, K, Tg}
            end,
    0 = msgflow_tracer:agg_add(A, pairs, [Tuple(D) || D = {_, _, _, _, false} <- Deltas]),
    0 = msgflow_tracer:agg_add(A, rolled_up, [Tuple(D) || D = {_, _, _, _, true} <- Deltas]),
    ok = msgflow_tracer:agg_close(A, Ms, 5),
    Rows = lists:foldl(fun({F, T, N, KT, Reply}, Acc) ->
                               Table = case Reply of true -> rolled_up; false -> pairs end,
                               K = {F, T},
                               Row = case Acc of
                                         #{{Table, K} := R0} ->
                                             R1 = case msgflow_row:last_window(R0) of
                                                      Open -> msgflow_row_model:add_in_open(R0, N);
                                                      _ -> msgflow_row_model:add(R0, N, Open, Open - ?KEEP, Durs)
                                                  end,
                                             msgflow_row_model:add_kind(R1, N, KT, ?MAX_KINDS);
                                         _ ->
                                             msgflow_row_model:new(K, N, Open, KT)
                                     end,
                               Acc#{{Table, K} => Row}
                       end, maps:get(rows, M), Deltas),
    M#{open := Open + 1, durs := maps:remove(Open - ?KEEP, Durs#{Open => Ms}), rows := Rows}.

same(#{rows := Rows}, A) ->
    lists:all(fun(Table) ->
                      Want = rows([R || {{T, _}, R} <- maps:to_list(Rows), T =:= Table]),
                      Got = rows(all(A, Table)),
                      Want =:= Got orelse io:format("~p:~n model ~p~n agg   ~p~n", [Table, Want, Got]) =:= x
              end, [pairs, rolled_up]).

%% Rows with their kinds as a sorted list.
rows(Rows) ->
    lists:sort([setelement(7, R, lists:sort(msgflow_row:kinds_of(element(2, R), element(7, R)))) || R <- Rows]).

all(A, Table) -> all(A, Table, 0, []).
all(_, _, done, Acc) -> Acc;
all(A, Table, Cursor, Acc) ->
    {Rows, Next} = msgflow_tracer:agg_rows(A, Table, Cursor, 7, true),
    all(A, Table, Next, Rows ++ Acc).

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
    ?assertEqual([], msgflow_tracer:agg_lookup(A, pairs, {a, b})),
    %% a cursor past the end, on an empty table and on one with rows
    ?assertEqual({[], done}, msgflow_tracer:agg_rows(A, pairs, 4294967295, 10, true)),
    0 = msgflow_tracer:agg_add(A, pairs, [{a, b, 1}]),
    ?assertEqual({[], done}, msgflow_tracer:agg_rows(A, pairs, 4294967295, 10, true)),
    %% a handle made of another reference and a number finds nothing
    {_, Id} = A,
    ?assertError(badarg, msgflow_tracer:agg_info({make_ref(), Id + 1})).

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
    fold_all(Take, Acc, {0, 0, 0}, {0, 0, 0}).

fold_all(Take, Acc, M0, N0) ->
    Add = fun({A, B, C}, {D, E, F}) -> {A + D, B + E, C + F} end,
    case msgflow_tracer:snapshot_fold(Take) of
        {more, N, Msgs, NoRow} -> fold_all(Take, Acc + N, Add(M0, Msgs), Add(N0, NoRow));
        {done, N, Msgs, NoRow, 0, 0, _, AggTop} -> {Acc + N, Add(M0, Msgs), Add(N0, NoRow), AggTop}
    end.
