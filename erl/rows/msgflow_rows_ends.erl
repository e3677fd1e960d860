%%% @doc What a view says of its keys (msgflow_rows's `endpoints'): each
%%% key's label, text and display, read from the labels tables; and the
%%% heatmap's keys.  Any process; reads ETS only.
-module(msgflow_rows_ends).
-export([endpoints/4, displays/1, heatmap/2, heatmap_of/3, totals/1, add_totals/1]).
-export_type([totals/0]).

%% Messages sent and received by key, each key once.
-type totals() :: #{sent := [{msgflow_rows:key(), non_neg_integer()}],
                    received := [{msgflow_rows:key(), non_neg_integer()}]}.


%% @doc The L senders and the L receivers of the most messages, busiest
%% first.
-spec heatmap([msgflow_rows:row()], pos_integer()) ->
          #{rows := [msgflow_rows:key()], cols := [msgflow_rows:key()]}.
heatmap(Rows, L) ->
    #{sent := Sent, received := Received} = totals(Rows),
    heatmap_of(Sent, Received, L).

%% @doc Each sender's and each receiver's messages in Rows, `{Key,
%% Messages}' once a key.
-spec totals([msgflow_rows:row()]) -> totals().
totals(Rows) ->
    {Sent, Received} = lists:foldl(fun(#{sender := S, receiver := R, count := C}, {SA, RA}) ->
                                           {SA#{S => C + maps:get(S, SA, 0)},
                                            RA#{R => C + maps:get(R, RA, 0)}}
                                   end, {#{}, #{}}, Rows),
    #{sent => maps:to_list(Sent), received => maps:to_list(Received)}.

%% @doc Several parts' totals (totals/1, or a node's heat_totals)
%% added up key by key.
-spec add_totals([totals()]) -> totals().
add_totals(Parts) ->
    Add = fun(Which) ->
                  maps:to_list(lists:foldl(fun({K, C}, A) -> A#{K => C + maps:get(K, A, 0)} end, #{},
                                           lists:append([M || #{Which := M} <- Parts])))
          end,
    #{sent => Add(sent), received => Add(received)}.

%% @doc The heatmap of each key's messages sent and received, `{Key,
%% Messages}' once a key: the L keys of the most of each, busiest first,
%% of two as many the greater key first.  Reads each list once, keeping
%% the L best (a set of L).
-spec heatmap_of([{msgflow_rows:key(), non_neg_integer()}],
                 [{msgflow_rows:key(), non_neg_integer()}], pos_integer()) ->
          #{rows := [msgflow_rows:key()], cols := [msgflow_rows:key()]}.
heatmap_of(Sent, Received, L) ->
    #{rows => top(Sent, L), cols => top(Received, L)}.

%% The L keys of the most messages, as a sort of {Messages, Key} from the
%% greatest would give them.
top(KCs, L) ->
    {Set, _} = lists:foldl(fun({K, C}, {S, Min}) ->
                                   E = {C, K},
                                   case gb_sets:size(S) < L of
                                       true ->
                                           S1 = gb_sets:add(E, S),
                                           {S1, gb_sets:smallest(S1)};
                                       false when E > Min ->
                                           S1 = gb_sets:add(E, gb_sets:delete(Min, S)),
                                           {S1, gb_sets:smallest(S1)};
                                       false ->
                                           {S, Min}
                                   end
                           end, {gb_sets:new(), none}, KCs),
    [K || {_, K} <- lists:reverse(gb_sets:to_list(Set))].

%% @doc The endpoint info of the keys of Rows and of Extra, grouped By,
%% from the labels tables: `label', `text', `display', `module',
%% `application', `node'.
-spec endpoints([msgflow_rows:row()], [msgflow_rows:key()], msgflow_rows:grouping(),
                msgflow_labels:tables()) -> #{msgflow_rows:key() => msgflow_rows:endpoint_info()}.
endpoints(Rows, Extra, By, Tables) ->
    Keys0 = lists:foldl(fun(#{sender := S, receiver := R}, Acc) -> Acc#{S => [], R => []} end,
                        #{}, Rows),
    Keys = lists:foldl(fun(K, Acc) -> Acc#{K => []} end, Keys0, Extra),
    Meta = meta_fun(By, Tables, map_size(Keys)),
    displays(maps:map(fun(Key, _) -> Meta(Key) end, Keys)).

%% @doc Endpoint infos with `display' set: a label shared by several keys
%% gets their text beside it.
-spec displays(#{msgflow_rows:key() => map()}) ->
          #{msgflow_rows:key() => msgflow_rows:endpoint_info()}.
displays(Infos) ->
    Seen = maps:fold(fun(_, #{label := L}, Acc) -> Acc#{L => maps:get(L, Acc, 0) + 1} end,
                     #{}, Infos),
    maps:map(fun(_, I = #{label := L, text := T}) ->
                     I#{display => case maps:get(L, Seen) of
                                       1 -> L;
                                       _ -> <<L/binary, " ", T/binary>>
                                   end}
             end, Infos).

%% fun(Key) -> endpoint_info() less `display': for a few keys one lookup
%% each, for many one read of the whole endpoints table.
meta_fun(process, Tables, N) when N > 1000 ->
    All = msgflow_labels:all_meta(Tables),
    fun(E = {exited, _, _}) ->
            info(process, E, Tables);
       (E) ->
            Text = msgflow_fmt:endpoint(E),
            case All of
                #{E := {L, M, A}} ->
                    #{label => L, text => Text, module => M, application => A,
                      node => msgflow_labels:node_of(E)};
                _ ->
                    (msgflow_labels:meta(Tables, E))#{text => Text}
            end
    end;
meta_fun(By, Tables, _) ->
    fun(Key) -> info(By, Key, Tables) end.

info(process, E = {exited, _, _}, Tables) ->
    M = #{label := L} = msgflow_labels:meta(Tables, E),
    M#{label => <<L/binary, " (exited)">>, text => msgflow_fmt:endpoint(E)};
info(process, E, Tables) ->
    (msgflow_labels:meta(Tables, E))#{text => msgflow_fmt:endpoint(E)};
info(By, Key, _) ->
    Text = case Key of
               B when is_binary(B) -> B;
               M when By =:= module, is_atom(M) -> msgflow_fmt:name(M);
               _ -> msgflow_fmt:endpoint(Key)
           end,
    #{label => Text, text => Text, module => undefined, application => undefined,
      node => undefined}.

