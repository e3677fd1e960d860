%%% @doc What a view says of its keys (msgflow_rows's `endpoints'): each
%%% key's label, text and display, read from the labels tables; and the
%%% heatmap's keys.  Any process; reads ETS only.
-module(msgflow_rows_ends).
-export([endpoints/4, displays/1, heatmap/2]).


%% @doc The L senders and the L receivers of the most messages, busiest
%% first.
-spec heatmap([msgflow_rows:row()], pos_integer()) ->
          #{rows := [msgflow_rows:key()], cols := [msgflow_rows:key()]}.
heatmap(Rows, L) ->
    Sum = fun(F) -> lists:foldl(fun(Row = #{count := C}, Acc) ->
                                        K = F(Row),
                                        Acc#{K => C + maps:get(K, Acc, 0)}
                                end, #{}, Rows) end,
    Top = fun(M) -> [K || {_, K} <- lists:sublist(lists:reverse(lists:sort(
                                                                   [{C, K} || {K, C} <- maps:to_list(M)])),
                                                   L)] end,
    #{rows => Top(Sum(fun(#{sender := S}) -> S end)),
      cols => Top(Sum(fun(#{receiver := R}) -> R end))}.

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

