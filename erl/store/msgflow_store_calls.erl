%%% @doc The store's call edges (the `calls' table, rows of
%%% msgflow_call_row): the round trips the tracer took merged in, and the
%%% edges of exited processes rolled up; their index by the highest
%%% bucket of their round trips (`call_slowest', an ordered set of
%%% `{{TopBucket, EdgeKey}}'), so that the edges whose slowest round trip
%%% reached a time are found at a cost that grows with them, not with
%%% every edge.  The collector's process calls these
%%% with the tables msgflow_store gives it (it owns them).
-module(msgflow_store_calls).
-export([take/5, rollup/4, slowest/2]).

%% reductions one merged edge is worth (as msgflow_store counts a delta)
-define(MERGE_REDUCTIONS, 50).
%% call edges looked at for rolling up as a window closes
-define(SLICE, 2000).

%% @doc The sampled calls' round trips since the last take
%% (msgflow_tracer:calls_take/1), added to their edges' rows in table T and
%% to their groups' in G (the label ids and nodes of their ends,
%% msgflow_labels:group_end/2) in window Open, a new edge only when
%% Admit(Caller, Server) (the store's bound on its memory); the tracer's
%% figures (`busy', `displaced'), the sampled calls left out, whether an
%% edge was written whose pair has no row in P (the pair rolled up before
%% an unanswered call was given up, or went to the tracer's overflow:
%% rollup/4 then has work without a row's end gone) and the labels, or
%% none when the session cannot be read (sessions that sample none give
%% no edges).
-spec take(msgflow_tracer:session(), {ets:tid(), ets:tid(), ets:tid(), msgflow_row_table:table()}, pos_integer(),
           fun((term(), term()) -> boolean()), msgflow_labels:labels()) ->
          {map(), non_neg_integer(), boolean(), msgflow_labels:labels()} | none.
take(Session, Tables = {T, _, _, _}, Open, Admit, L0) ->
    try msgflow_tracer:calls_take(Session) of
        {Edges, Figures} ->
            {Left, Rowless, L} =
                lists:foldl(
                  fun({Caller, Server, Kind, Tag, Sampled, Unanswered, Hist}, {N, R, L1}) ->
                          erlang:bump_reductions(?MERGE_REDUCTIONS),
                          K = {Caller, Server, Kind, Tag},
                          D = {Sampled, Unanswered, Hist},
                          case ets:lookup(T, K) of
                              [] ->
                                  case Admit(Caller, Server) of
                                      false -> {N + Sampled, R, L1};
                                      true -> add_edge(Tables, K, none, D, Open, {N, R, L1})
                                  end;
                              [Row] ->
                                  add_edge(Tables, K, Row, D, Open, {N, R, L1})
                          end
                  end, {0, false, L0}, Edges),
            {Figures, Left, Rowless, L}
    catch
        error:_ -> none
    end.

%% D added to edge K's row Old (none: made) in T in window Open, to its
%% group's in G and to the index Ix; whether its pair has no row in P
%% noted.
add_edge({T, G, Ix, P}, K = {Caller, Server, Kind, Tag}, Old, D, Open, {N, R, L1}) ->
    New = case Old of
              none -> msgflow_call_row:new(K, D, Open);
              _ -> msgflow_call_row:add(Old, D, Open)
          end,
    ets:insert(T, New),
    index(Ix, K, Old, New),
    {GC, L2} = msgflow_labels:group_end(L1, Caller),
    {GS, L3} = msgflow_labels:group_end(L2, Server),
    GK = {GC, GS, Kind, Tag},
    ets:insert(G, case ets:lookup(G, GK) of
                      [GRow] -> msgflow_call_row:add(GRow, D, Open);
                      [] -> msgflow_call_row:new(GK, D, Open)
                  end),
    {N, R orelse not msgflow_row_table:member(P, {Caller, Server}), L3}.

%% Edge K's entry in the index Ix moved from its row Old's top bucket to
%% New's (either row none: no entry).
index(Ix, K, Old, New) ->
    case {top(Old), top(New)} of
        {Same, Same} -> ok;
        {Was, Now} ->
            _ = Was =:= none orelse ets:delete(Ix, {Was, K}),
            _ = Now =:= none orelse ets:insert(Ix, {{Now, K}}),
            ok
    end.

top(none) -> none;
top(Row) -> msgflow_call_row:top_bucket(Row).

%% @doc The keys of the edges in index Ix whose slowest sampled round trip
%% (the upper bound of their highest bucket) took Us µs or more, read from
%% the slowest down: a cost that grows with them.
-spec slowest(ets:tid(), number()) -> [msgflow_call_row:key()].
slowest(Ix, Us) ->
    slowest(Ix, Us, ets:last(Ix), []).

slowest(_, _, '$end_of_table', Acc) ->
    Acc;
slowest(Ix, Us, Ik = {B, K}, Acc) ->
    case msgflow_call_row:bucket_max_us(B) >= Us of
        true -> slowest(Ix, Us, ets:prev(Ix, Ik), [K | Acc]);
        false -> Acc
    end.

%% @doc Call edges in T (indexed in Ix) whose caller or server exited, rolled up into their
%% groups (msgflow_labels:rollup_key/2) once their pair left the pairs
%% table P (msgflow_rollup rolled up it): T holds the edges of live processes
%% and one per group of exited ones, keyed as their pairs are, so that a
%% view finds each edge's exact count in its pair's kinds.  ?SLICE edges,
%% or an eighth of them when that is more, are looked at a window, from
%% where the last slice ended (Cont: `start' or what the last call
%% returned), so that a window's close grows with the edges by an eighth
%% at most and a pass over them takes 8 windows at most (callers that come
%% and go faster than ?SLICE a window are rolled up as fast).  Returns the
%% labels as fold_key left them and where the next slice starts.
-spec rollup({ets:tid(), ets:tid()}, msgflow_row_table:table(), msgflow_labels:labels(), start | term()) ->
          {msgflow_labels:labels(), start | term()}.
rollup(Tables = {T, _}, P, L0, Cont) ->
    %% at least an eighth of the table a window, so that a node whose
    %% callers come and go faster than ?SLICE a window is swept in 8
    rollup(Tables, P, L0, Cont, max(?SLICE, ets:info(T, size) div 8)).

rollup({T, Ix}, P, L0, Cont, Budget) ->
    {Rows, Next} = case slice(T, Cont) of
                       '$end_of_table' -> {[], start};
                       {Rs, C} -> {Rs, C}
                   end,
    Dead = fun(E) -> is_pid(E) andalso node(E) =:= node() andalso not is_process_alive(E) end,
    Gone = [Row || Row <- Rows,
                   {Caller, Server, _, _} <- [msgflow_call_row:key(Row)],
                   Dead(Caller) orelse Dead(Server),
                   not msgflow_row_table:member(P, {Caller, Server})],
    L = lists:foldl(
          fun(Row, L1) ->
                  {Caller, Server, Kind, Tag} = msgflow_call_row:key(Row),
                  {C1, L2} = msgflow_labels:rollup_key(L1, Caller),
                  {S1, L3} = msgflow_labels:rollup_key(L2, Server),
                  K = {C1, S1, Kind, Tag},
                  ets:delete(T, msgflow_call_row:key(Row)),
                  index(Ix, msgflow_call_row:key(Row), Row, none),
                  Row1 = msgflow_call_row:rekey(Row, K),
                  {Old, New} = case ets:lookup(T, K) of
                                   [O] -> {O, msgflow_call_row:merge(O, Row1)};
                                   [] -> {none, Row1}
                               end,
                  ets:insert(T, New),
                  index(Ix, K, Old, New),
                  L3
          end, L0, Gone),
    case {Next, Budget - length(Rows)} of
        {start, _} -> {L, start};
        {_, More} when More > 0 -> rollup({T, Ix}, P, L, Next, More);
        _ -> {L, Next}
    end.

slice(T, start) -> ets:select(T, [{'_', [], ['$_']}], ?SLICE);
slice(_, Cont) -> msgflow_rollup:continue(Cont).
