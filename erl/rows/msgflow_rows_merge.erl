%%% @doc Rows of several nodes as one: merge/3 puts together the rows
%%% each node of a cluster built with the same spec (msgflow_query asks
%%% them), and gives remote processes the labels their own nodes give
%%% them.  Pure but for the labels it asks for through the query's
%%% context; any process.
-module(msgflow_rows_merge).
-export([merge/3]).

%% @doc The rows of the nodes that answered (this node's first) as one
%% (merge/2), remote processes labelled by their own nodes (the query's
%% `labels'); one node's rows as they are (without the totals its
%% heatmap was read from).
-spec merge([msgflow_rows:view()], msgflow_rows:spec(), msgflow_view:context()) ->
          msgflow_rows:view().
merge([View = #{node := N}], _Spec, _Ctx) ->
    (maps:remove(heat_totals, View))#{nodes => [N]};
merge(Views, Spec, #{labels := Ask}) ->
    View = #{endpoints := Ends} = merge(Views, Spec),
    Here = node(),
    Remote = [P || P <- maps:keys(Ends), is_pid(P), node(P) =/= Here],
    case Remote of
        [] -> View;
        _ -> relabel(View, Ask(Remote))
    end.

%% One view of the views several nodes built with the same Spec, the
%% first being this node's.  Each send is counted on
%% its sender's node only, so by process the rows of different nodes are
%% different pairs and are put together as they are; grouped, rows with
%% the same key are summed (counts, and rates, each taken over its own
%% node's windows).  Totals are summed; the windows, the window length and
%% sampling are the first view's, and each row's per-window counts are
%% aligned to its windows from the latest back.  `nodes' lists the nodes
%% whose views are in it.
merge([Local | _] = Views, Spec) ->
    By = maps:get(by, Spec, process),
    K = length(maps:get(windows, Local)),
    Rows0 = lists:append([[align(R, K) || R <- Rs] || #{rows := Rs} <- Views]),
    Rows1 = case By of
                process -> Rows0;
                _ -> sum_rows(Rows0)
            end,
    Rank = case maps:get(sort, Spec, messages) of
               messages -> fun(#{count := C}) -> C end;
               rate -> fun(#{rate := R}) -> R end;
               peak -> fun(#{peak_rate := P}) -> P end;
               %% rows with no size measured last
               bytes -> fun(Row) -> maps:get(bytes, Row, -1) end;
               wait -> fun(Row) -> {maps:get(receiver_growing, Row, false),
                                    maps:get(receiver_wait_ms, Row, -1.0)} end
           end,
    Sorted = lists:sort(fun(A, B) -> {Rank(A), maps:get(count, A)} >= {Rank(B), maps:get(count, B)} end,
                        Rows1),
    Rows = case maps:get(limit, Spec, all) of
               all -> Sorted;
               N -> lists:sublist(Sorted, N)
           end,
    Sum = fun(Key) -> lists:sum([maps:get(Key, V) || V <- Views]) end,
    Heat = case Spec of
               %% every node's senders and receivers added up: by process
               %% a node sent the rows of its own L busiest senders (among
               %% them the cluster's) and every receiver's total
               %% (msgflow_rows_groups:heat_by_process/3); a part without
               %% them (a stand-in for a node that did not answer) its rows'
               #{heatmap := L} ->
                   #{sent := Sent, received := Received} =
                       msgflow_rows_ends:add_totals(
                         [case V of
                              #{heat_totals := T} -> T;
                              #{rows := Rs} -> msgflow_rows_ends:totals(Rs)
                          end || V <- Views]),
                   #{heatmap => msgflow_rows_ends:heatmap_of(Sent, Received, L)};
               _ -> #{}
           end,
    Dead = maps:to_list(lists:foldl(fun({S, R, C}, Acc) ->
                                            maps:update_with({S, R}, fun(X) -> X + C end, C, Acc)
                                    end, #{}, lists:append([D || #{dead := D} <- Views]))),
    maps:merge(maps:remove(heat_totals, Local), Heat#{
                 rows => Rows,
                 events => Sum(events), dead_letters => Sum(dead_letters),
                 overflow => Sum(overflow), proc_events_dropped => Sum(proc_events_dropped),
                 rolled_up => Sum(rolled_up), skipped => Sum(skipped), pairs => Sum(pairs),
                 groups => case By of
                               process -> maps:get(groups, Local);
                               _ -> length(Rows1)
                           end,
                 running => lists:any(fun(#{running := R}) -> R end, Views),
                 memory_full => lists:any(fun(V) -> maps:get(memory_full, V, false) end, Views),
                 overflow_top => overflow_top(Views, maps:get(limit, Spec, all)),
                 endpoints => merge_endpoints(Views),
                 dead => [{S, R, C} || {{S, R}, C} <- Dead],
                 nodes => [N || #{node := N} <- Views]}).

%% The nodes' busiest pairs in overflow together (each node's are pairs
%% of its own senders): a pair not listed had at most the largest of the
%% nodes' `min'.
overflow_top(Views, Limit) ->
    case [T || #{overflow_top := T = #{pairs := _}} <- Views] of
        [] ->
            #{};
        Tops ->
            All = lists:sort(fun(#{count := A}, #{count := B}) -> A >= B end,
                             lists:append([P || #{pairs := P} <- Tops])),
            #{pairs => lists:sublist(All, msgflow_rows:overflow_top_limit(Limit)),
              min => lists:max([M || #{min := M} <- Tops])}
    end.

%% Every view's endpoint info; the text of an endpoint a node showed as
%% one of its own is written again as this node prints it (`<0.115.0>'
%% there is `<12345.115.0>' here; its node is in its info).
merge_endpoints(Views) ->
    Here = node(),
    All = lists:foldl(fun(#{endpoints := E, node := N}, Acc) ->
                              E1 = case N of
                                       Here -> E;
                                       _ -> maps:map(fun(K, I) -> I#{text => here_text(K)} end,
                                                     E)
                                   end,
                              maps:merge(E1, Acc)
                      end, #{}, Views),
    msgflow_rows_ends:displays(All).

here_text(P) when is_pid(P) -> list_to_binary(pid_to_list(P));
here_text(P) when is_port(P) -> list_to_binary(erlang:port_to_list(P));
here_text(K) -> msgflow_fmt:endpoint(K).

%% A row's per-window counts as many as the merged view's windows: the
%% latest ones, zeros before a node's first.
align(Row = #{windows := W}, K) ->
    L = length(W),
    Row#{windows => case L >= K of
                        true -> lists:nthtail(L - K, W);
                        false -> lists:duplicate(K - L, 0) ++ W
                    end};
align(Row, _K) ->
    Row.

sum_rows(Rows) ->
    maps:values(lists:foldl(fun(Row = #{sender := S, receiver := R}, Acc) ->
                                    case Acc of
                                        #{{S, R} := Old} -> Acc#{{S, R} := add_rows(Old, Row)};
                                        _ -> Acc#{{S, R} => Row}
                                    end
                            end, #{}, Rows)).

add_rows(A, B) ->
    Plus = fun(undefined, undefined) -> undefined;
              (undefined, Y) -> Y;
              (X, undefined) -> X;
              (X, Y) -> X + Y
           end,
    %% bytes: summed where both have them, else the one that has
    A1 = case B of
             #{bytes := BB} -> A#{bytes => maps:get(bytes, A, 0) + BB};
             _ -> A
         end,
    maps:map(fun(K, V) when K =:= count; K =:= last_count; K =:= rate; K =:= prev_rate;
                                K =:= mean_rate; K =:= peak_rate ->
                         Plus(V, maps:get(K, B));
                    (windows, V) ->
                         lists:zipwith(fun erlang:'+'/2, V, maps:get(windows, B, V));
                    (kinds, V) ->
                         msgflow_row:sum_kinds([V, maps:get(kinds, B, [])]);
                    (_, V) ->
                         V
                 end, A1).

%% The view with the labels of some endpoints replaced: Labels maps an
%% endpoint to the label its own node gave it (a remote process is named
%% by its node, not by the one that sent to it).  Display texts are made
%% again for the keys that changed.
-spec relabel(msgflow_rows:view(), #{msgflow_rows:key() => binary()}) -> msgflow_rows:view().
relabel(View = #{endpoints := Ends}, Labels) ->
    Ends1 = maps:map(fun(K, I) ->
                             case Labels of
                                 #{K := L} -> I#{label => L};
                                 _ -> I
                             end
                     end, Ends),
    View#{endpoints => msgflow_rows_ends:displays(Ends1)}.

