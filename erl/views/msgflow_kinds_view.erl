%%% @doc The `kinds' view: what one sender sent one receiver, by kind and
%%% tag of message (`call get 4,980 91%').  msgflow:kinds/2 prints it.
%%%
%%% Option `pair => {Sender, Receiver}' (needed): pids, ports or
%%% registered names as top/1 shows them, or labels as binaries or strings
%%% as `top(N, #{by => name})' shows them (`{"erlang:apply/2", ux_kv}'
%%% mixes the two: the name is then read as a label).  The value is a
%%% msgflow_rows:view() with that one row; `{error, {badarg, {pair,
%%% Pair}, Allowed}}' when there is no such pair or group.
-module(msgflow_kinds_view).
-behaviour(msgflow_view).

-export([options/0, check/1, build/2, merge/3, text/3, json/2]).

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{pair => {none, pair}}.

%% @doc The pair is needed; its ends become the keys of the grouping they
%% name (`by' in the options after this: process, or name for labels).
-spec check(map()) -> {ok, map()} | msgflow_opts:error().
check(#{pair := {Sender, Receiver}} = Opts) ->
    ByName = not (is_endpoint(Sender) andalso is_endpoint(Receiver)),
    Key = fun(E) when ByName, is_atom(E) -> msgflow_fmt:name(E);
             (E) when ByName -> unicode:characters_to_binary(E);
             (E) -> E
          end,
    case ByName andalso not (is_text(Sender) andalso is_text(Receiver)) of
        true -> {error, {badopt, {pair, {Sender, Receiver}}, msgflow_opts:allowed(pair)}};
        false -> {ok, Opts#{by => case ByName of true -> name; false -> process end,
                            asked => {Sender, Receiver}, pair := {Key(Sender), Key(Receiver)}}}
    end;
check(_) ->
    {error, {badopt, {pair, none}, msgflow_opts:allowed(pair)}}.

is_endpoint(E) -> is_pid(E) orelse is_port(E) orelse is_atom(E).

is_text(E) when is_atom(E); is_binary(E) -> true;
is_text(E) when is_list(E) -> io_lib:printable_unicode_list(E);
is_text(_) -> false.

spec(#{by := By, pair := Pair}) ->
    #{by => By, pair => Pair}.

%% @doc This node's row of the pair.
-spec build(msgflow_store:store(), map()) -> msgflow_rows:view().
build(Store, Opts) ->
    msgflow_rows:build(Store, spec(Opts)).

%% @doc The pair's row on every node, as one; an error when none has it.
-spec merge([msgflow_rows:view()], map(), msgflow_view:context()) ->
          msgflow_rows:view() | msgflow_opts:error().
merge(Parts, Opts = #{asked := Asked}, Ctx) ->
    case msgflow_rows_merge:merge(Parts, spec(Opts), Ctx) of
        #{rows := []} ->
            {error, {badarg, {pair, Asked},
                     [<<"a pair top/1 shows (pids, ports, names)">>,
                      <<"a pair of labels top(N, #{by => name}) shows">>]}};
        View ->
            View
    end.

%% @doc What msgflow:kinds/2 prints: the pair and its messages, then a
%% line per kind and tag with its messages and share.
-spec text(msgflow_rows:view(), map(), msgflow_view:area()) -> unicode:chardata().
text(View = #{rows := [#{sender := S, receiver := R, count := C, kinds := Ks}]}, _Opts, Area) ->
    E = msgflow_fmt:ellipsis(Area),
    Ends = maps:get(endpoints, View),
    End = fun(K) -> string:trim(msgflow_fmt:endpoint_cell(maps:get(K, Ends, undefined), K, 60, E)) end,
    [io_lib:format("~ts -> ~ts: ~s messages~n", [End(S), End(R), msgflow_fmt:int(C)]),
     "  KIND    TAG                        MESSAGES  SHARE\n",
     case Ks of
         [] -> "  (kinds off: start(#{kinds => true}))\n";
         _ -> [io_lib:format("  ~s ~s ~s ~s~n",
                             [msgflow_fmt:cell(atom_to_list(K), 7, E),
                              msgflow_fmt:label_cell(msgflow_fmt:name(T), 24, E),
                              msgflow_fmt:rcell(msgflow_fmt:int(N), 10),
                              msgflow_fmt:rcell(io_lib:format("~.1f%", [100 * N / max(1, C)]), 6)])
               || {K, T, N} <- Ks]
     end].

%% @doc The pair and its kinds as JSON.
-spec json(msgflow_rows:view(), map()) -> msgflow_view:json().
json(View = #{rows := [#{sender := S, receiver := R, count := C, kinds := Ks}]}, _Opts) ->
    #{<<"sender">> => msgflow_rows:text(View, S), <<"receiver">> => msgflow_rows:text(View, R),
      <<"sender_label">> => msgflow_rows:display(View, S),
      <<"receiver_label">> => msgflow_rows:display(View, R),
      <<"messages">> => C, <<"kinds">> => msgflow_rows:kinds_json(Ks)}.
