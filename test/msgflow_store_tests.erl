%%% PropEr properties of what the store keeps as snapshots merge (issue
%%% 37): the busiest index (the aggregate's, msgflow_store_index) against a model, and the
%%% views that read the store's kept aggregates against the scans they
%%% replace, on random stores fed through msgflow_store:merge_deltas/2
%%% (no tracer: the deltas are what a snapshot would bring).
-module(msgflow_store_tests).
-include_lib("proper/include/proper.hrl").  %% before eunit.hrl: both define LET
-include_lib("eunit/include/eunit.hrl").

-define(RUNS, 300).

proper_test_() ->
    {timeout, 300,
     [?_assert(proper:quickcheck(P, [{numtests, ?RUNS}, {to_file, user}]))
      || P <- [prop_busiest_model(), prop_top_equals_scan(), prop_top_with_replies_equals_scan(), prop_index_ranks_replies(),
               prop_hotspots_equal_full(),
               prop_hot_pairs_with_names(), prop_row_kinds_model(), prop_cluster_pairs_merge(),
               prop_heatmap_equals_scan(), prop_cluster_heatmap_equals_scan()]]}.

%%% pairs() of a cluster: the nodes' parts as they cross and merge

%% This node's pairs (a list, busiest first) and the other nodes' (each
%% encoded, then decoded as the asking node does): the merge is every
%% pair of every part, busiest first.
prop_cluster_pairs_merge() ->
    Part = ?LET(L, list({range(1, 30), range(1, 30), range(1, 50)}),
                lists:reverse(lists:keysort(3, L))),
    ?FORALL({Here, Others}, {Part, list(Part)},
            begin
                Opts = #{with => total},
                Parts = [Here | [msgflow_pairs_view:decode(msgflow_pairs_view:encode(P, Opts), Opts)
                                 || P <- Others]],
                Got = msgflow_pairs_view:merge(Parts, Opts, #{missing => []}),
                Counts = [N || {_, _, N} <- Got],
                lists:sort(Got) =:= lists:sort(lists:append([Here | Others]))
                    andalso Counts =:= lists:reverse(lists:sort(Counts))
            end).

%% A part whose pairs name ends it does not hold, are cut short or are
%% not least busy first is refused as it comes (the query path makes that
%% the node's `bad_answer'), never in the merge.
cluster_pairs_bad_part_test() ->
    Opts = #{with => total},
    ?assertError(_, msgflow_pairs_view:decode({{a, b}, <<1:32, 3:32, 5:64>>}, Opts)),
    ?assertError(_, msgflow_pairs_view:decode({{a, b}, <<1:32, 2:32>>}, Opts)),
    ?assertError(_, msgflow_pairs_view:decode({{a, b}, <<1:32, 2:32, 5:64, 2:32, 1:32, 4:64>>}, Opts)),
    ?assertEqual([{a, b, 5}], msgflow_pairs_view:merge([msgflow_pairs_view:decode({{a, b}, <<1:32, 2:32, 5:64>>}, Opts)],
                                                       Opts, #{missing => []})).

%%% A row's kinds, kept as `{Kind, Tag}' while it has one

%% Deltas of a few kinds and tags, some without one (`none'), in one
%% window or across windows, added as the store adds them (the messages
%% first, then the kind): the row's total is every delta's messages, and
%% its kinds are the model's sums of each kind and tag (past max_kinds 2,
%% `{Kind, other}'), whatever form the row holds them in.
prop_row_kinds_model() ->
    KT = oneof([none, {info, m}, {call, get}, {cast, put}]),
    ?FORALL({First, Deltas}, {{range(1, 9), KT}, list({range(1, 9), KT, boolean()})},
            begin
                {N0, KT0} = First,
                Row0 = msgflow_row_model:new(k, N0, 1, KT0),
                {Row, _} = lists:foldl(
                             fun({N, K, Next}, {R, W}) ->
                                     W1 = case Next of true -> W + 1; false -> W end,
                                     R1 = case msgflow_row:last_window(R) of
                                              W1 -> msgflow_row_model:add_in_open(R, N);
                                              _ -> msgflow_row_model:add(R, N, W1, 0, #{})
                                          end,
                                     {msgflow_row_model:add_kind(R1, N, K, 2), W1}
                             end, {Row0, 1}, Deltas),
                Model = lists:foldl(fun({_, none}, M) -> M;
                                       ({N, {K, T}}, M) -> model_kind(M, K, T, N)
                                    end, [], [First | [{N, K} || {N, K, _} <- Deltas]]),
                Total = N0 + lists:sum([N || {N, _, _} <- Deltas]),
                msgflow_row:total(Row) =:= Total
                    andalso lists:sort(msgflow_row:kinds(Row)) =:= lists:sort(Model)
            end).

%% kinds and tags as the row keeps them: at most 2 of its own, then the
%% kind's `other'
model_kind(M, K, T, N) ->
    Own = [X || X = {_, Tg, _} <- M, Tg =/= other],
    case lists:keyfind({K, T}, 1, [{{Kd, Tg}, C} || {Kd, Tg, C} <- M]) of
        {_, C} -> lists:delete({K, T, C}, M) ++ [{K, T, C + N}];
        false when length(Own) < 2; T =:= other -> M ++ [{K, T, N}];
        false -> model_kind(M, K, other, N)
    end.

%%% The index against a map of every pair's value

%% Values only grow (messages added to a pair): the aggregate's index by
%% messages since start (msgflow_store_index:top/2, above/2 of its reader),
%% when it knows its top N, has the model's N highest values, and every
%% entry it gives has its pair's true value.
prop_busiest_model() ->
    ?FORALL({Cap, Ops, N}, {range(1, 8), list({range(1, 10), range(1, 4)}), range(1, 12)},
            begin
                A = msgflow_tracer:agg_new({10, 8, Cap, Cap, node()}),
                Model = lists:foldl(fun({K, D}, M) ->
                                            0 = msgflow_tracer:agg_add(A, pairs, [{self(), {k, K}, D}]),
                                            M#{{self(), {k, K}} => maps:get({self(), {k, K}}, M, 0) + D}
                                    end, #{}, Ops),
                R = {msgflow_agg, A, total},
                {Held, Floor} = msgflow_tracer:agg_busiest(A, total, 100),
                Ok = case msgflow_store_index:top(R, N) of
                         unknown ->
                             %% only after letting a pair go, and holding
                             %% fewer than N
                             Floor > 0 andalso length(Held) < N;
                         {ok, Got} ->
                             Want = lists:sublist(lists:reverse(lists:sort(maps:values(Model))), N),
                             [V || {_, V} <- Got] =:= Want
                                 andalso lists:all(fun({K, V}) -> maps:get(K, Model) =:= V end, Got)
                     end,
                Above = case msgflow_store_index:above(R, 3) of
                            unknown -> Floor >= 3;
                            {ok, Ab} -> lists:sort(Ab) =:= lists:sort([{K, V} || {K, V} <- maps:to_list(Model),
                                                                               V >= 3])
                        end,
                Ok andalso Above
            end).

%%% Views from kept aggregates against the scans

%% A random store: windows of deltas between 8 senders and 8 receivers
%% (pids, and a registered name), closed one after the other.
store_windows() ->
    non_empty(list(list(delta(8)))).

%% Receivers 1..R, and 0: the name of process 9 (a receiver too with R 9).
delta(R) ->
    {range(1, 8), range(0, R), range(1, 40), elements([none, info, call, cast])}.

%% top by process (messages, and the last window's), limited: the rows
%% the index gives rank as the scan's do, and a row both give is the same.
prop_top_equals_scan() ->
    top_equals_scan(fun(_) -> false end).

%% The same with some deltas replies to the aliases of their receiver
%% (not to a name): a key's pair and its replies are one row of the
%% view by process, which the index ranks by both.
prop_top_with_replies_equals_scan() ->
    %% (by N: a key has rows in both tables)
    top_equals_scan(fun({_, R, N, _}) -> R =/= 0 andalso N rem 2 =:= 0 end).

%% Top by process from the busiest indexes equals a scan of every row,
%% the deltas for which Reply is true fed as replies.
top_equals_scan(Reply) ->
    ?FORALL({Windows, Limit, Sort, Cap}, {store_windows(), range(1, 10), elements([messages, rate]),
                                         range(1, 6)},
            msgflow_store_feed:with_ends(
              fun(Ends, Name) ->
                      {S, Kept, Scan} = msgflow_store_feed:fed(Windows, Ends, Name, #{total => Cap, window => Cap}, Reply),
                      Spec = #{by => process, limit => Limit, sort => Sort},
                      #{rows := A} = msgflow_rows:build(Kept, Spec),
                      #{rows := B} = msgflow_rows:build(Scan, Spec),
                      Rank = fun(#{count := C}) when Sort =:= messages -> C;
                                (#{last_count := C}) -> C
                             end,
                      ByKey = maps:from_list([{{Sn, R}, Row} || Row = #{sender := Sn, receiver := R} <- B]),
                      Same = [Rank(X) || X <- A] =:= [Rank(X) || X <- B]
                          andalso lists:all(fun(Row = #{sender := Sn, receiver := R}) ->
                                                    case ByKey of
                                                        #{{Sn, R} := Row2} -> Row2 =:= Row;
                                                        _ -> true
                                                    end
                                            end, A),
                      msgflow_store_feed:retire(S),
                      ?WHENFAIL(io:format("index: ~p~nscan: ~p~n", [A, B]), Same)
              end)).

%% An index that let no key go answers top by messages itself, replies
%% and all (the view reads no rolled-up row but its keys'): a key's value
%% there is what its rows in both tables add up to.
prop_index_ranks_replies() ->
    ?FORALL({Windows, Limit}, {store_windows(), range(1, 10)},
            msgflow_store_feed:with_ends(
              fun(Ends, Name) ->
                      %% (by N: a key has rows in both tables)
                      Reply = fun({_, R, N, _}) -> R =/= 0 andalso N rem 2 =:= 0 end,
                      {S, Kept, _} = msgflow_store_feed:fed(Windows, Ends, Name, #{total => 1000, window => 1000}, Reply),
                      #{closed := Closed} = Kept,
                      Ctx = #{sort => messages, last => Closed, open => Closed + 1},
                      Got = msgflow_rows_groups:from_index(Kept, Ctx, Limit),
                      msgflow_store_feed:retire(S),
                      ?WHENFAIL(io:format("~p~n", [Got]), element(1, Got) =:= ok)
              end)).

%% The hotspot rules over what the store keeps find what they find over
%% every pair, with the same evidence (thresholds low enough that they
%% find things; kinds with no replies, whose share the store's fan-out
%% counts differently).
prop_hotspots_equal_full() ->
    ?FORALL(Windows, store_windows(),
            msgflow_store_feed:with_ends(
              fun(Ends, Name) ->
                      {S, Kept, Scan} = msgflow_store_feed:fed(Windows, Ends, Name, #{}),
                      Opts = #{hot_rate => 1.0e-9, spike_min => 10, spike_factor => 2,
                               fan_out_receivers => 5, fan_in_senders => 5},
                      %% (labels aside: a label shared by several keys the
                      %% view shows gets their pids beside it, and a view
                      %% of the candidates shows fewer keys)
                      Strip = fun(Fs) -> lists:sort([maps:with([rule, subject, evidence, members], F)
                                                     || F <- Fs]) end,
                      A = Strip(msgflow_hotspots:build(Kept, Opts)),
                      B = Strip(msgflow_hotspots:build(Scan, Opts)),
                      msgflow_store_feed:retire(S),
                      ?WHENFAIL(io:format("kept: ~p~nscan: ~p~n", [A, B]), A =:= B)
              end)).

%% The hot pair and spike rules over what the store keeps, with sends to
%% a process by its name and by its pid (one receiver by process: a pair
%% below the rules' threshold joins its name's row), find what they find
%% over every pair.  (The fan rules count a process sent to both ways as
%% two ends: not compared here.)
prop_hot_pairs_with_names() ->
    ?FORALL(Windows, non_empty(list(list(delta(9)))),
            msgflow_store_feed:with_ends(
              fun(Ends, Name) ->
                      {S, Kept, Scan} = msgflow_store_feed:fed(Windows, Ends, Name, #{}),
                      Opts = #{hot_rate => 40.0e3, spike_min => 30, spike_factor => 2},
                      Pairs = fun(Fs) -> lists:sort([maps:with([rule, subject, evidence, members], F)
                                                     || F = #{rule := R} <- Fs,
                                                        R =:= hot_pair orelse R =:= spike]) end,
                      A = Pairs(msgflow_hotspots:build(Kept, Opts)),
                      B = Pairs(msgflow_hotspots:build(Scan, Opts)),
                      msgflow_store_feed:retire(S),
                      ?WHENFAIL(io:format("kept: ~p~nscan: ~p~n", [A, B]), A =:= B)
              end)).

%% The matrix by process limited to L senders and L receivers (the
%% heatmap: read from the rows' totals, only its senders' rows made) is
%% the one of every row, chosen the way it was before (labels aside: a
%% label shared by several keys the view shows gets their pids beside
%% it, and the heatmap's view labels fewer keys).
prop_heatmap_equals_scan() ->
    ?FORALL({Windows, L}, {non_empty(list(list(delta(9)))), range(1, 10)},
            msgflow_store_feed:with_ends(
              fun(Ends, Name) ->
                      {S, H, _} = msgflow_store_feed:fed(Windows, Ends, Name, #{}),
                      Opts = #{by => process, limit => L, weigh => messages},
                      Part = msgflow_matrix_view:build(H, Opts),
                      A = msgflow_matrix_view:merge([Part], Opts, #{}),
                      B = heatmap_of_every_row([H], L),
                      msgflow_store_feed:retire(S),
                      ?WHENFAIL(io:format("heatmap: ~p~nscan: ~p~n", [A, B]),
                                is_map_key(heat_totals, Part) andalso not is_map_key(heat_totals, A)
                                andalso same_matrix(A, B))
              end)).

%% The same over two nodes' parts, each with its own senders (a send is
%% counted on its sender's node) and the same receivers: the merged
%% heatmap is the one of both nodes' every row.
prop_cluster_heatmap_equals_scan() ->
    ?FORALL({Windows, L}, {non_empty(list(list(delta(9)))), range(1, 10)},
            msgflow_store_feed:with_ends(
              fun(Ends, Name) ->
                      Part = fun(Senders) -> [[D || D = {Sn, _, _, _} <- W, lists:member(Sn, Senders)]
                                              || W <- Windows] end,
                      {S1, H1, _} = msgflow_store_feed:fed(Part([1, 2, 3, 4]), Ends, Name, #{}),
                      {S2, H2, _} = msgflow_store_feed:fed(Part([5, 6, 7, 8]), Ends, Name, #{}),
                      Opts = #{by => process, limit => L, weigh => messages},
                      Ctx = #{labels => fun(_) -> #{} end},
                      A = msgflow_matrix_view:merge([msgflow_matrix_view:build(H, Opts) || H <- [H1, H2]],
                                                    Opts, Ctx),
                      B = heatmap_of_every_row([H1, H2], L),
                      %% the second node did not answer: its last busiest
                      %% pairs stand in for it (msgflow_query's fallbacks)
                      Top = msgflow_rows:build(H2, #{by => process, limit => 3, with_kinds => false}),
                      Stand = msgflow_matrix_view:fallback(Top, Opts),
                      C = msgflow_matrix_view:merge([msgflow_matrix_view:build(H1, Opts), Stand], Opts, Ctx),
                      D = heatmap_of_rows([msgflow_rows:build(H1, #{by => process, with_kinds => false}), Top],
                                          L),
                      msgflow_store_feed:retire(S1),
                      msgflow_store_feed:retire(S2),
                      ?WHENFAIL(io:format("heatmap: ~p~nscan: ~p~nstand-in: ~p~nscan: ~p~n", [A, B, C, D]),
                                same_matrix(A, B) andalso same_matrix(C, D))
              end)).

%% More receivers than a heatmap's sums keep in a map (their sums then
%% sorted), the last spawned the busiest, 200 of them tied next:
%% the heatmap is still the one of every row.
heatmap_many_receivers_test() ->
    msgflow_store_feed:with_ends(5009, fun(Ends, Name) ->
                            W = [{R rem 8 + 1, R, R div 200 + 1, none} || R <- lists:seq(0, 5009)],
                            {S, H, _} = msgflow_store_feed:fed([W, W], Ends, Name, #{}),
                            Opts = #{by => process, limit => 30, weigh => messages},
                            A = msgflow_matrix_view:merge([msgflow_matrix_view:build(H, Opts)], Opts, #{}),
                            B = heatmap_of_every_row([H], 30),
                            msgflow_store_feed:retire(S),
                            ?assertMatch(#{cols := [_ | _]}, A),
                            ?assertEqual(30, length(maps:get(cols, A))),
                            ?assert(same_matrix(A, B))
                    end).

%% The matrix of every row of the stores' handles, its heatmap chosen
%% from all of them.
heatmap_of_every_row(Handles, L) ->
    heatmap_of_rows([msgflow_rows:build(H, #{by => process, with_kinds => false}) || H <- Handles], L).

%% The matrix of the views' rows merged, its L senders and receivers
%% those of the most messages in them (a sort of every sum, the greater
%% key first among equals).
heatmap_of_rows(Views, L) ->
    Spec = #{by => process, with_kinds => false},
    View = #{rows := Rows} = msgflow_rows_merge:merge(Views, Spec, #{labels => fun(_) -> #{} end}),
    Top = fun(F) ->
                  Sums = lists:foldl(fun(Row = #{count := C}, Acc) ->
                                             K = F(Row),
                                             Acc#{K => C + maps:get(K, Acc, 0)}
                                     end, #{}, Rows),
                  [K || {_, K} <- lists:sublist(lists:reverse(lists:sort([{C, K} || {K, C} <- maps:to_list(Sums)])), L)]
          end,
    Heat = #{rows => Top(fun(#{sender := S}) -> S end), cols => Top(fun(#{receiver := R}) -> R end)},
    msgflow_matrix_view:of_rows(View#{heatmap => Heat}, L).

same_matrix(A, B) ->
    Fields = [rows, cols, cells, sent, received, messages],
    maps:with(Fields, A) =:= maps:with(Fields, B)
        andalso lists:sort(maps:keys(maps:get(labels, A))) =:= lists:sort(maps:keys(maps:get(labels, B))).

%% Forty senders casting to the same six receivers in each of two
%% windows are forty fan-out subjects, more than one read of the pairs
%% names (?KIND_ENDS in msgflow_hotspots): the one grouped finding over
%% what the store keeps has their kind, as the one over every pair has.
many_fan_out_subjects_test() ->
    msgflow_store_feed:with_ends(47, fun(Ends, Name) ->
                          W = [{Sn, R, 3, cast} || Sn <- lists:seq(1, 40), R <- lists:seq(41, 46)],
                          {A, B} = fan_outs([W, W], Ends, Name, 5),
                          ?assertMatch([#{members := 40, evidence := #{kind := {cast, x, 100}}}], A),
                          ?assertEqual(B, A)
                  end).

%% The fan-out findings (members and evidence) over what the store fed
%% with Windows keeps, and over every pair.
fan_outs(Windows, Ends, Name, Min) ->
    {S, Kept, Scan} = msgflow_store_feed:fed(Windows, Ends, Name, #{}),
    Found = fun(Store) ->
                    [maps:with([members, evidence], F)
                     || F = #{rule := fan_out} <- msgflow_hotspots:build(Store, #{fan_out_receivers => Min})]
            end,
    A = Found(Kept),
    B = Found(Scan),
    msgflow_store_feed:retire(S),
    {A, B}.

%% 2,500 senders casting to the same six receivers in each of two
%% windows: the second window's ends are split over two tables (about
%% 2,000 ends a table, as many as the first window's ends asked for),
%% and the fan-out rule over what the store kept of that window finds
%% every sender, as it does over every pair.
fan_out_over_split_ends_test() ->
    msgflow_store_feed:with_ends(2506, fun(Ends, Name) ->
                            W = [{Sn, R, 1, cast} || Sn <- lists:seq(1, 2500), R <- lists:seq(2501, 2506)],
                            {A, B} = fan_outs([W, W, []], Ends, Name, 6),
                            ?assertMatch([#{members := 2500}], A),
                            ?assertEqual(B, A)
                    end).

%% The store's tables deleted (the test's process owns them).
%% A pass of the sizes sweep begun in one window goes on in the next from
%% its ets:select continuation; the table may have shrunk meanwhile (rows
%% dropped), which makes that continuation raise badarg: the pass then
%% starts anew instead (a crash of the collector under `make soak').
sizes_sweep_after_shrink_test() ->
    T = msgflow_store_sizes:new(),
    P = ets:new(p, [set]),
    Keys = [{I, I} || I <- lists:seq(1, 100000)],
    true = ets:insert(T, [{K, 1, 1, 1, 0, 0} || K <- Keys]),
    true = ets:insert(P, [{K} || K <- Keys]),
    Cont = msgflow_store_sizes:sweep(T, P, start),
    ?assertNotEqual(start, Cont),
    [ets:delete(T, K) || K <- lists:sublist(Keys, 99000)],
    ?assertEqual(start, msgflow_store_sizes:sweep(T, P, Cont)),
    %% the next pass finds the rows of pairs gone
    [ets:delete(P, K) || K <- lists:nthtail(99500, Keys)],
    start = msgflow_store_sizes:sweep(T, P, start),
    ?assertEqual(500, ets:info(T, size)).

%% A view's fold over a table in chunks reads every row there all along
%% once, while the table's owner deletes others: a hash table that shrank
%% between two chunks made the next raise badarg.
fold_select_while_rows_go_test() ->
    T = ets:new(t, [set]),
    true = ets:insert(T, [{I} || I <- lists:seq(1, 100000)]),
    Kept = fun(I) -> I rem 100 =:= 0 end,
    %% after the first chunk every row but the kept ones goes
    Got = msgflow_row_table:fold_select(T, [{{'$1'}, [], ['$1']}],
                                  fun(I, Acc) ->
                                          _ = map_size(Acc) =:= 0 andalso
                                              [ets:delete(T, J) || J <- lists:seq(1, 100000), not Kept(J)],
                                          Acc#{I => true}
                                  end, #{}),
    ?assertEqual([], [I || I <- lists:seq(1, 100000), Kept(I), not is_map_key(I, Got)]).

%% The window's sweep leaves the rows unread while no endpoint a row names
%% has gone (msgflow_labels:any_gone/1), and rolls them up once one has:
%% two pairs of live processes stay rows through windows; once one
%% sender exits, its pair (idle two windows) is rolled up into its group,
%% and the other stays.
rollup_once_an_end_is_gone_test() ->
    Procs = [A, B, C, D] = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 4)],
    S0 = msgflow_store:start_run(msgflow_store:new(), #{windows => 60, max_pairs => 1000}),
    S1 = msgflow_store:merge_deltas([{A, B, 3}, {C, D, 5}], S0),
    Close = fun(S, N) -> lists:foldl(fun(_, Acc) -> msgflow_store:close_window(Acc) end, S, lists:seq(1, N)) end,
    S2 = Close(S1, 4),
    Rows = fun(S) ->
                   #{pairs := P, rolled_up := F} = msgflow_store:handle(S, #{}),
                   {lists:sort([{K, msgflow_row:total(R)} || R <- msgflow_row_table:to_list(P), K <- [msgflow_row:key(R)]]),
                    [{K, msgflow_row:total(R)} || R <- msgflow_row_table:to_list(F), K <- [msgflow_row:key(R)]]}
           end,
    ?assertEqual({lists:sort([{{A, B}, 3}, {{C, D}, 5}]), []}, Rows(S2)),
    MRef = monitor(process, C),
    C ! stop,
    receive {'DOWN', MRef, _, _, _} -> ok end,
    S3 = Close(S2, 2),
    ?assertMatch({[{{A, B}, 3}], [{{{exited, _, _}, D}, 5}]}, Rows(S3)),
    [P ! stop || P <- Procs],
    msgflow_store_feed:retire(S3).

%% An endpoint found gone keeps the sweeps going for 40 windows, a whole
%% pass of them, and then no more while it stays held (a name holds its
%% pid for good): held and alive, none; once it exited, from the window
%% it was found so to 40 later; past that, none.
any_gone_test() ->
    P = spawn(fun() -> receive stop -> ok end end),
    L0 = msgflow_labels:hold(msgflow_labels:new(), P),
    {false, L1} = msgflow_labels:any_gone(L0, 5),
    MRef = monitor(process, P),
    P ! stop,
    receive {'DOWN', MRef, _, _, _} -> ok end,
    {true, L2} = msgflow_labels:any_gone(L1, 6),
    {true, L3} = msgflow_labels:any_gone(L2, 46),
    ?assertMatch({false, _}, msgflow_labels:any_gone(L3, 47)),
    {L4, Old} = msgflow_labels:clear(L3),
    [ets:delete(T) || T <- Old ++ msgflow_labels:all_tables(L4)],
    ok.

%% any_gone/2 reads the held endpoints a slice a window (2,000 here), so
%% one that exited is found within a pass: 5,000 held, the last one held
%% exits; a pass of 3 windows finds it, and from then it counts.
any_gone_sliced_test() ->
    Ps = [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 5000)],
    L0 = lists:foldl(fun(P, A) -> msgflow_labels:hold(A, P) end, msgflow_labels:new(), Ps),
    Last = lists:last(Ps),
    MRef = monitor(process, Last),
    Last ! stop,
    receive {'DOWN', MRef, _, _, _} -> ok end,
    {Found, L} = lists:foldl(fun(N, {F, A}) ->
                                     {G, A1} = msgflow_labels:any_gone(A, N),
                                     {F ++ [G], A1}
                             end, {[], L0}, lists:seq(1, 4)),
    %% false until the slice that holds it, true from then on
    {Before, From} = lists:splitwith(fun(G) -> not G end, Found),
    ?assert(length(Before) < 3, Found),
    ?assertEqual(lists:duplicate(length(From), true), From),
    [P ! stop || P <- Ps],
    {L1, Old} = msgflow_labels:clear(L),
    [ets:delete(T) || T <- Old ++ msgflow_labels:all_tables(L1)],
    ok.
