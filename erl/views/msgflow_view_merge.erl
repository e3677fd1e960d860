%%% @doc Views of several nodes as one: merge/2 puts together the views
%%% each node of a cluster built with the same spec (msgflow_cluster),
%%% relabel/2 gives remote endpoints the labels their own nodes gave them.
%%% Pure; any process.
-module(msgflow_view_merge).
-export([merge/2, relabel/2]).

%% @doc One view of the views several nodes built with the same Spec (see
%% msgflow_cluster), the first being this node's.  Each send is counted on
%% its sender's node only, so by process the rows of different nodes are
%% different pairs and are put together as they are; grouped, rows with
%% the same key are summed (counts, and rates, each taken over its own
%% node's windows).  Totals are summed; the windows, the window length and
%% sampling are the first view's, and each row's per-window counts are
%% aligned to its windows from the latest back.  `nodes' lists the nodes
%% whose views are in it.
-spec merge([msgflow_view:view()], msgflow_view:spec()) -> msgflow_view:view().
merge([Local | _] = Views, Spec) ->
    By = maps:get(by, Spec, process),
    K = length(maps:get(windows, Local)),
    Rows0 = lists:append([[align(R, K) || R <- Rs] || #{rows := Rs} <- Views]),
    Rows1 = case By of
                process -> Rows0;
                _ -> sum_rows(Rows0)
            end,
    Sorted = lists:sort(fun(#{count := A}, #{count := B}) -> A >= B end, Rows1),
    Rows = case maps:get(limit, Spec, all) of
               all -> Sorted;
               N -> lists:sublist(Sorted, N)
           end,
    Sum = fun(Key) -> lists:sum([maps:get(Key, V) || V <- Views]) end,
    Heat = case Spec of
               #{heatmap := L} -> #{heatmap => msgflow_view_ends:heatmap(Rows, L)};
               _ -> #{}
           end,
    Dead = maps:to_list(lists:foldl(fun({S, R, C}, Acc) ->
                                            maps:update_with({S, R}, fun(X) -> X + C end, C, Acc)
                                    end, #{}, lists:append([D || #{dead := D} <- Views]))),
    maps:merge(Local, Heat#{
                 rows => Rows,
                 events => Sum(events), dead_letters => Sum(dead_letters),
                 overflow => Sum(overflow), births_dropped => Sum(births_dropped),
                 folded => Sum(folded), skipped => Sum(skipped), pairs => Sum(pairs),
                 groups => case By of
                               process -> maps:get(groups, Local);
                               _ -> length(Rows1)
                           end,
                 running => lists:any(fun(#{running := R}) -> R end, Views),
                 endpoints => merge_endpoints(Views),
                 dead => [{S, R, C} || {{S, R}, C} <- Dead],
                 nodes => [N || #{node := N} <- Views]}).

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
    msgflow_view_ends:displays(All).

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
    maps:map(fun(K, V) when K =:= count; K =:= last_count; K =:= rate; K =:= prev_rate;
                                K =:= mean_rate; K =:= peak_rate ->
                         Plus(V, maps:get(K, B));
                    (windows, V) ->
                         lists:zipwith(fun erlang:'+'/2, V, maps:get(windows, B, V));
                    (kinds, V) ->
                         msgflow_row:sum_kinds([V, maps:get(kinds, B, [])]);
                    (_, V) ->
                         V
                 end, A).

%% @doc The view with the labels of some endpoints replaced: Labels maps an
%% endpoint to the label its own node gave it (a remote process is named
%% by its node, not by the one that sent to it).  Display texts are made
%% again for the keys that changed.
-spec relabel(msgflow_view:view(), #{msgflow_view:key() => binary()}) -> msgflow_view:view().
relabel(View = #{endpoints := Ends}, Labels) ->
    Ends1 = maps:map(fun(K, I) ->
                             case Labels of
                                 #{K := L} -> I#{label => L};
                                 _ -> I
                             end
                     end, Ends),
    View#{endpoints => msgflow_view_ends:displays(Ends1)}.

