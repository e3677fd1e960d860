%%% @doc Rolling up: rows that are done with leave the store's pairs for a
%%% group's row.  A pair is rolled up once it had no messages for two
%%% windows and one of its endpoints has exited (it goes to its group,
%%% `{exited, LabelId, Node}', msgflow_labels:rollup_key/2) or is an alias;
%%% rows that roll up to one key are summed (msgflow_row:merge/3's rule).
%%% Dead letters roll up the same way.  The rows are the aggregate's in C
%%% (msgflow_tracer:agg_sweep/4), which moves them; this module finds the
%%% endpoints gone and tells the aggregate what each becomes.  Runs in the
%%% collector process, on the store's state, when a window closes
%%% (msgflow_store:close_window/1).
-module(msgflow_rollup).
-include("msgflow_store.hrl").

-export([sweep/1, follow/1, continue/1]).

%% Row slots the sweep of a table reads a window, at least, or an eighth
%% of them; in calls of ?SWEEP_SLICE slots each, so that no call holds a
%% scheduler for long (20,000 take about 0.2 ms in C).
-define(SWEEP_MIN, 100000).
-define(SWEEP_SLICE, 20000).
%% windows after the last with an endpoint gone during which the call
%% edges' and the sizes' sweeps still run (their passes take 8 at most)
-define(FOLLOW_WINDOWS, 10).
%% ends of the rows just gone idle checked a window, at most
-define(IDLE_ENDS, 200000).

%% @doc Rolls up the rows that are done with, once window N has closed: the
%% rows whose last messages were in window N - 2 or before (so a process
%% that exited then has had its last sends taken by two snapshots since)
%% and one of whose ends is found gone, a slice of the rows a window (a
%% pass over all of them takes at most 8 windows).  While no endpoint a
%% row names is gone, no row is read.  The endpoints no row names any more
%% are let go by the labels.
-spec sweep(msgflow_store:state()) -> msgflow_store:state().
sweep(S = #store{closed = N}) when N < 3 ->
    released(S);
sweep(S = #store{closed = N, agg = A}) ->
    Idle = N - 2,
    %% no endpoint a row names has gone: no row can roll up, and the rows
    %% are left unread
    {Gone, L1} = msgflow_labels:any_gone(S#store.labels, N),
    {Rollups, L2} = msgflow_labels:gone_in(L1, N),
    %% and the ends of the rows that just went idle, checked now: on a
    %% node of short-lived clients, those are the rows to roll up, and a
    %% pass of any_gone/2 over every endpoint takes up to 32 windows
    {Idle2, L3} = lists:foldl(fun(E, {Acc, Lx}) ->
                                      case msgflow_labels:stays(E) of
                                          true -> {Acc, Lx};
                                          false ->
                                              {K, Ly} = msgflow_labels:rollup_key(Lx, E),
                                              {[{E, K} | Acc], Ly}
                                      end
                              end, {[], L2}, idle_ends(A, Idle, 0, ?IDLE_ENDS)),
    ok = msgflow_tracer:agg_set_rollups(A, Rollups ++ Idle2),
    S1 = case Gone orelse Idle2 =/= [] of
             true ->
                 #{pairs := P, rolled_up := R, dead := D} = msgflow_tracer:agg_info(A),
                 Budget = max(?SWEEP_MIN, (P + R + D) div 8),
                 Moved = lists:sum([sweep_table(A, T, Idle, Budget, 0) || T <- [pairs, rolled_up, dead]]),
                 S#store{gone_at = N, labels = L3,
                         rolled_up_messages = S#store.rolled_up_messages + Moved};
             false ->
                 S#store{labels = L3}
         end,
    released(S1).

%% The ends of the rows gone idle in window Idle, at most Max, in calls
%% of 20,000 rows.
idle_ends(_A, _Idle, done, _Max) -> [];
idle_ends(_A, _Idle, _Cursor, Max) when Max =< 0 -> [];
idle_ends(A, Idle, Cursor, Max) ->
    {Ends, Next} = msgflow_tracer:agg_idle_ends(A, Idle, Cursor),
    Ends ++ idle_ends(A, Idle, Next, Max - length(Ends)).

%% Up to Budget row slots of table T swept, in slices; the messages of the
%% pairs rows rolled up.
sweep_table(_A, _T, _Idle, Budget, Moved) when Budget =< 0 ->
    Moved;
sweep_table(A, T, Idle, Budget, Moved) ->
    case msgflow_tracer:agg_sweep(A, T, Idle, min(Budget, ?SWEEP_SLICE)) of
        {M, done} -> Moved + M;
        {M, more} -> sweep_table(A, T, Idle, Budget - ?SWEEP_SLICE, Moved + M)
    end.

%% The endpoints the aggregate let go (no row names them any more) let go
%% by the labels too.
released(S = #store{agg = A, labels = L}) ->
    S#store{labels = lists:foldl(fun(E, Acc) -> msgflow_labels:release(Acc, E) end, L,
                                 msgflow_tracer:agg_take_released(A, 100000))}.

%% @doc Whether the sweeps of what follows the rows (a pair's call edges
%% and sizes, which go once its row has rolled up) have work: while an
%% endpoint was gone within the last ?FOLLOW_WINDOWS windows (a pass of
%% either takes 8 at most, msgflow_store_calls), so that on a node whose
%% processes live on they read nothing either.
-spec follow(#store{}) -> boolean().
follow(#store{closed = N, gone_at = GoneAt}) ->
    N - GoneAt =< ?FOLLOW_WINDOWS.

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
