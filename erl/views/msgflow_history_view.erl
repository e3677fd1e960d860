%%% @doc The `history' view: one pair's messages per window, oldest first:
%%% the kept closed windows, then (while running) the open one with `open
%%% => true' (msgflow:history/2).  `at' is the window's end in system time
%%% (ms), `window_ms' its length.  A registered name and the pid holding it
%%% are one receiver; replies to the receiver's aliases and the pair's
%%% counts from before its rows were rolled up are in it.  Either end may
%%% be a group of exited endpoints, `{exited, LabelId, Node}', as views
%%% show them.
%%%
%%% Option `pair => {Sender, Receiver}' (needed).  The pair is counted on
%%% its sender's node: that node alone is asked.
-module(msgflow_history_view).
-behaviour(msgflow_view).

-compile({no_auto_import, [nodes/2]}).
-export([options/0, check/1, nodes/2, build/2, merge/3, text/3, json/2]).
-export_type([window_count/0]).

-type window_count() :: #{at := integer(), window_ms := non_neg_integer(),
                          count := non_neg_integer(), open => true}.

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{pair => {none, pair}}.

%% @doc The pair is needed.
-spec check(map()) -> {ok, map()} | msgflow_opts:error().
check(#{pair := _} = Opts) -> {ok, Opts};
check(_) -> {error, {badopt, {pair, none}, msgflow_opts:allowed(pair)}}.

%% @doc The sender's node (where the pair is counted), when msgflow counts
%% there; else this one.
-spec nodes(map(), [node()]) -> [node()].
nodes(#{pair := {Sender, _}}, All) ->
    Where = case Sender of
                {exited, _, N} -> N;
                _ -> msgflow_labels:node_of(Sender)
            end,
    case lists:member(Where, All) of
        true -> [Where];
        false -> [node()]
    end.

%% @doc The pair's messages per window, from this node's rows.
-spec build(msgflow_store:store(), map()) -> [window_count()].
build(Store = #{pairs := T, rolled_up := Fo, labels := Tables = #{names := Names}, windows := Ws,
                closed := Closed}, #{pair := {S0, R0}}) ->
    S = msgflow_labels:canon(Tables, S0),
    R = msgflow_labels:canon(Tables, R0),
    NamesOfR = case is_pid(R) of
                   true -> ets:select(Names, [{{'$1', R}, [], ['$1']}]);
                   false -> []
               end,
    Keys = lists:usort([{S, R} | [{S, N} || N <- NamesOfR] ++ [{S, {N, node()}} || N <- NamesOfR]]),
    Members = lists:append([msgflow_row_table:lookup(T, Key) || Key <- Keys]) ++ msgflow_row_table:lookup(Fo, {S, R}),
    Open = Closed + 1,
    First = case Ws of [] -> Open; [#{n := F} | _] -> F end,
    Counts = case Members of
                 [] -> lists:duplicate(Open - First + 1, 0);
                 _ -> msgflow_row:sum_counts([msgflow_row:counts_in(First, Open, M) || M <- Members])
             end,
    {ClosedCounts, [OpenCount]} = lists:split(length(Counts) - 1, Counts),
    [#{at => At, window_ms => D, count => C}
     || {#{at := At, window_ms := D}, C} <- lists:zip(Ws, ClosedCounts)]
        ++ [#{at => maps:get(taken_at, Store), window_ms => maps:get(open_ms, Store),
              count => OpenCount, open => true} || maps:get(running, Store)].

%% @doc The one node's windows.
-spec merge([[window_count()]], map(), msgflow_view:context()) -> [window_count()].
merge([One], _Opts, _Ctx) ->
    One.

%% @doc A line per window: its end, length and messages.
-spec text([window_count()], map(), msgflow_view:area()) -> unicode:chardata().
text(Windows, #{pair := {S, R}}, _Area) ->
    [io_lib:format("msgflow history of ~ts -> ~ts: ~b windows~n",
                   [msgflow_fmt:endpoint(S), msgflow_fmt:endpoint(R), length(Windows)]),
     [io_lib:format("  ~s  ~8s ms ~12s~s~n",
                    [calendar:system_time_to_rfc3339(At, [{unit, millisecond}]),
                     msgflow_fmt:int(D), msgflow_fmt:int(C),
                     case W of #{open := true} -> "  (open)"; _ -> "" end])
      || W = #{at := At, window_ms := D, count := C} <- Windows]].

%% @doc The windows as JSON.
-spec json([window_count()], map()) -> msgflow_view:json().
json(Windows, _Opts) ->
    [#{<<"at_ms">> => At, <<"window_ms">> => D, <<"messages">> => C,
       <<"open">> => maps:get(open, W, false)}
     || W = #{at := At, window_ms := D, count := C} <- Windows].
