%%% @doc Rolling up: rows that are done with leave the store's pairs table
%%% for a group row.  A pair is rolled up once it had no messages for two
%%% windows and one of its endpoints has exited (it goes to its group,
%%% `{exited, LabelId, Node}', msgflow_labels:rollup_key/2) or is an alias;
%%% rows that roll up to one key are summed (msgflow_row:merge/3).  Dead
%%% letters roll up the same way.  Runs in the collector process, on the
%%% store's state, when a window closes (msgflow_store:close_window/1).
-module(msgflow_rollup).
-include("msgflow_store.hrl").

-export([sweep/1, follow/1, continue/1]).

%% Keys read per select; rows the slow pass reads a window at least.
-define(SWEEP_CHUNK, 1000).
-define(SWEEP_MIN, 20000).
-define(ROW_REDUCTIONS, 50).
%% windows after the last with an endpoint gone during which the call
%% edges' and the sizes' sweeps still run (their passes take 8 at most)
-define(FOLLOW_WINDOWS, 10).

%% @doc Rolls up the rows that are done with, once window N has closed: the
%% rows whose last messages were in window N - 2 (so a process that
%% exited then has had its last sends taken by two snapshots since), up
%% to ?SWEEP_MIN of them; and a slice of the rows idle for longer, whose
%% endpoints may have exited since (a pass over all of them takes at most
%% ~32 windows).  Dead letters are rolled up in slices too.  So a window's
%% sweep reads a bounded number of keys into this heap, however many
%% pairs go idle at once.
-spec sweep(msgflow_store:state()) -> msgflow_store:state().
sweep(S = #store{closed = N}) when N < 3 ->
    S;
sweep(S = #store{closed = N}) ->
    Idle = N - 2,
    S1 = sweep_slice(dead, [{{'$1', '_'}, [], ['$1']}], S),
    %% no endpoint a row names has gone: no row can roll up, and the rows
    %% are left unread (on a node whose processes live on, this was most
    %% of a window's close: a scan of the rows for the idle ones, then a
    %% check of each one's ends)
    {Gone, L1} = msgflow_labels:any_gone(S1#store.labels, N),
    {Rollable, GoneAt} = case Gone of
                             true -> {[pairs, rolled_up], N};
                             false -> {[], S#store.gone_at}
                         end,
    lists:foldl(
      fun(Which, Acc) ->
              T = table(Which, Acc),
              %% at most ?SWEEP_MIN of them: the rest are the slow pass's
              %% from the next window on, so that a million pairs going
              %% idle at once never sit in this heap
              Just = case ets:select(T, [{msgflow_row:pattern(#{key => '$1', window => Idle}),
                                          [], ['$1']}], ?SWEEP_MIN) of
                         {Keys, _} -> Keys;
                         '$end_of_table' -> []
                     end,
              Acc1 = lists:foldl(fun(K, A) -> rollup_row(Which, K, A) end, Acc, Just),
              sweep_slice(Which, [{msgflow_row:pattern(#{key => '$1', window => '$2'}),
                                   [{'<', '$2', Idle}], ['$1']}], Acc1)
      end, S1#store{gone_at = GoneAt, labels = L1}, Rollable).

%% @doc Whether the sweeps of what follows the rows (a pair's call edges
%% and sizes, which go once its row has rolled up) have work: while an
%% endpoint was gone within the last ?FOLLOW_WINDOWS windows (a pass of
%% either takes 8 at most, msgflow_store_calls), so that on a node whose
%% processes live on they read nothing either.
-spec follow(#store{}) -> boolean().
follow(#store{closed = N, gone_at = GoneAt}) ->
    N - GoneAt =< ?FOLLOW_WINDOWS.

table(pairs, #store{pairs = T}) -> T;
table(rolled_up, #store{rolled_up_rows = T}) -> T;
table(dead, #store{dead = T}) -> T.

%% The next keys of a pass over a table, at least ?SWEEP_MIN or 1/32 of
%% the table, rolled up; the pass goes on in the next window where it
%% stopped.  (A continuation over a table that changed in between may
%% return a key twice or miss one: rollup_row/3 skips a key that is gone, and
%% the next pass sees what this one missed.)
sweep_slice(Which, MS, S = #store{sweeps = Sw}) ->
    T = table(Which, S),
    Budget = max(?SWEEP_MIN, ets:info(T, size) div 32),
    First = case Sw of
                #{Which := Cont} -> continue(Cont);
                _ -> ets:select(T, MS, ?SWEEP_CHUNK)
            end,
    slice(Which, First, Budget, S).

slice(Which, {Keys, Cont}, Budget, S) ->
    S1 = lists:foldl(fun(K, Acc) -> rollup_row(Which, K, Acc) end, S, Keys),
    case Budget - length(Keys) of
        B when B > 0 -> slice(Which, continue(Cont), B, S1);
        _ -> S1#store{sweeps = (S1#store.sweeps)#{Which => Cont}}
    end;
slice(Which, _End, _, S) ->
    S#store{sweeps = maps:remove(Which, S#store.sweeps)}.

%% @doc The next part of a pass over a table begun in an earlier window
%% (ets:select/1 of its continuation), or `'$end_of_table'' (the next
%% pass starts anew) when the continuation is no longer valid: the table
%% is gone (a reset made it anew meanwhile) or, a hash table, shrank since
%% (rows rolled up or dropped), which makes ets:select/1 raise badarg (a
%% collector ended so under `make soak').  Every sweep that goes on from
%% window to window reads on with this.
-spec continue(term()) -> {[term()], term()} | '$end_of_table'.
continue(Cont) ->
    try ets:select(Cont) catch error:badarg -> '$end_of_table' end.

%% One row: where its endpoints roll up to; when that is another key, the
%% row leaves its table and is added to that key's row (rolled-up rows, or
%% dead letters).
rollup_row(Which, K = {Sn, R}, S = #store{labels = L0}) ->
    T = table(Which, S),
    %% most rows checked have both ends alive (a pair of live processes
    %% idle for a while): those are left without a read of the row
    case msgflow_labels:stays(Sn) andalso msgflow_labels:stays(R) orelse ets:lookup(T, K) of
        true ->
            S;
        [] ->
            S;
        [Row] ->
            %% a few ETS calls and two label lookups: counted as the work
            %% they are, so that a slice of the sweep stays under 1 ms
            erlang:bump_reductions(?ROW_REDUCTIONS),
            {S1, L1} = msgflow_labels:rollup_key(L0, Sn),
            {R1, L2} = msgflow_labels:rollup_key(L1, R),
            case {S1, R1} of
                K ->
                    S#store{labels = L2};
                K1 ->
                    ets:delete(T, K),
                    L3 = add_rolled_up(Which, K1, Row, S#store{labels = L2}),
                    L5 = msgflow_labels:release(msgflow_labels:release(L3, Sn), R),
                    Moved = case Which of
                                pairs -> msgflow_row:total(Row);
                                _ -> 0
                            end,
                    S2 = S#store{labels = L5, rolled_up_messages = S#store.rolled_up_messages + Moved},
                    %% (dead letters are in no busiest index)
                    case Which of
                        dead -> S2;
                        _ -> msgflow_store:moved(S2, K, K1)
                    end
            end
    end.

add_rolled_up(dead, K1 = {S1, R1}, {_, N}, #store{dead = D, labels = L}) ->
    case ets:insert_new(D, {K1, N}) of
        true -> msgflow_labels:hold_pair(L, S1, R1);
        false -> _ = ets:update_counter(D, K1, N), L
    end;
add_rolled_up(_, K1 = {S1, R1}, Row, #store{rolled_up_rows = F, labels = L, closed = Closed,
                                         keep = Keep, durations = Durs}) ->
    case ets:lookup(F, K1) of
        [] ->
            ets:insert(F, msgflow_row:rekey(Row, K1)),
            msgflow_labels:hold_pair(L, S1, R1);
        [Old] ->
            ets:insert(F, msgflow_row:merge(Old, Row, {K1, Closed + 1 - Keep, Durs})),
            L
    end.
