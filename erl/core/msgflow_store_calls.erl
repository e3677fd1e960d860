%%% @doc The store's call edges (the `calls' table, rows of
%%% msgflow_call_row): the round trips the tracer took merged in, and the
%%% edges of exited processes rolled up.  The collector's process calls these
%%% with the tables msgflow_store gives it (it owns them).
-module(msgflow_store_calls).
-export([take/5, rollup/4]).

%% reductions one merged edge is worth (as msgflow_store counts a delta)
-define(MERGE_REDUCTIONS, 50).
%% call edges looked at for rolling up as a window closes
-define(SLICE, 2000).

%% @doc The sampled calls' round trips since the last take
%% (msgflow_tracer:calls_take/1), added to their edges' rows in table T and
%% to their groups' in G (the label ids and nodes of their ends,
%% msgflow_labels:group_end/2) in window Open, a new edge only when
%% Admit(Caller, Server) (the store's bound on its memory); the tracer's
%% figures (`busy', `displaced'), the sampled calls left out and the
%% labels, or none when the session cannot be read (sessions that sample
%% none give no edges).
-spec take(msgflow_tracer:session(), {ets:tid(), ets:tid()}, pos_integer(),
           fun((term(), term()) -> boolean()), msgflow_labels:labels()) ->
          {map(), non_neg_integer(), msgflow_labels:labels()} | none.
take(Session, {T, G}, Open, Admit, L0) ->
    try msgflow_tracer:calls_take(Session) of
        {Edges, Figures} ->
            {Left, L} = lists:foldl(
                          fun({Caller, Server, Kind, Tag, Sampled, Unanswered, Hist}, {N, L1}) ->
                                  erlang:bump_reductions(?MERGE_REDUCTIONS),
                                  K = {Caller, Server, Kind, Tag},
                                  D = {Sampled, Unanswered, Hist},
                                  case ets:lookup(T, K) == [] andalso not Admit(Caller, Server) of
                                      true ->
                                          {N + Sampled, L1};
                                      false ->
                                          add(T, K, D, Open),
                                          {GC, L2} = msgflow_labels:group_end(L1, Caller),
                                          {GS, L3} = msgflow_labels:group_end(L2, Server),
                                          add(G, {GC, GS, Kind, Tag}, D, Open),
                                          {N, L3}
                                  end
                          end, {0, L0}, Edges),
            {Figures, Left, L}
    catch
        error:_ -> none
    end.

%% D added to the row of K in T in window Open (made when new).
add(T, K, D, Open) ->
    ets:insert(T, case ets:lookup(T, K) of
                      [Row] -> msgflow_call_row:add(Row, D, Open);
                      [] -> msgflow_call_row:new(K, D, Open)
                  end).

%% @doc Call edges in T whose caller or server exited, rolled up into their
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
-spec rollup(ets:tid(), ets:tid(), msgflow_labels:labels(), start | term()) ->
          {msgflow_labels:labels(), start | term()}.
rollup(T, P, L0, Cont) ->
    %% at least an eighth of the table a window, so that a node whose
    %% callers come and go faster than ?SLICE a window is swept in 8
    rollup(T, P, L0, Cont, max(?SLICE, ets:info(T, size) div 8)).

rollup(T, P, L0, Cont, Budget) ->
    {Rows, Next} = case slice(T, Cont) of
                       '$end_of_table' -> {[], start};
                       {Rs, C} -> {Rs, C}
                   end,
    Dead = fun(E) -> is_pid(E) andalso node(E) =:= node() andalso not is_process_alive(E) end,
    Gone = [Row || Row <- Rows,
                   {Caller, Server, _, _} <- [msgflow_call_row:key(Row)],
                   Dead(Caller) orelse Dead(Server),
                   not ets:member(P, {Caller, Server})],
    L = lists:foldl(
          fun(Row, L1) ->
                  {Caller, Server, Kind, Tag} = msgflow_call_row:key(Row),
                  {C1, L2} = msgflow_labels:rollup_key(L1, Caller),
                  {S1, L3} = msgflow_labels:rollup_key(L2, Server),
                  K = {C1, S1, Kind, Tag},
                  ets:delete(T, msgflow_call_row:key(Row)),
                  Row1 = msgflow_call_row:rekey(Row, K),
                  ets:insert(T, case ets:lookup(T, K) of
                                    [Old] -> msgflow_call_row:merge(Old, Row1);
                                    [] -> Row1
                                end),
                  L3
          end, L0, Gone),
    case {Next, Budget - length(Rows)} of
        {start, _} -> {L, start};
        {_, More} when More > 0 -> rollup(T, P, L, Next, More);
        _ -> {L, Next}
    end.

slice(T, start) -> ets:select(T, [{'_', [], ['$_']}], ?SLICE);
slice(_, Cont) -> msgflow_rollup:continue(Cont).
