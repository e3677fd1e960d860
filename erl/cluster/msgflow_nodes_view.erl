%%% @doc The `nodes' view: the nodes msgflow counts on, this one first
%%% (msgflow:nodes/0 prints it): each one's status, `up', `starting' (the
%%% coordinator is loading msgflow there), `down' (it left the cluster: its
%%% last figures and busiest pairs are kept; `reason' is net_kernel's),
%%% `stale' (it has not answered a pull within two intervals) or
%%% `incompatible' (it cannot run this msgflow: another OTP release or NIF
%%% version), with its pairs and messages as of its last answer and how
%%% long before that answer it took its last snapshot (ms, by its own
%%% clock).  One entry, this node, when msgflow counts here only.  Built
%%% here, from what the coordinator knows (msgflow_cluster:nodes/0); no
%%% options; there before the first start.
-module(msgflow_nodes_view).
-behaviour(msgflow_view).

-export([options/0, scope/0, store/0, build/2, merge/3, text/3, json/2]).

%% @doc No options.
-spec options() -> msgflow_opts:schema().
options() -> #{}.

%% @doc Built on the asking node (the coordinator's knowledge).
-spec scope() -> here.
scope() -> here.

%% @doc Reads no store.
-spec store() -> false.
store() -> false.

%% @doc Each node's status.
-spec build(none, map()) -> [msgflow_cluster:node_status()].
build(none, _Opts) ->
    msgflow_cluster:nodes().

%% @doc The one part.
-spec merge([[msgflow_cluster:node_status()]], map(), msgflow_view:context()) ->
          [msgflow_cluster:node_status()].
merge([Statuses], _Opts, _Ctx) ->
    Statuses.

%% @doc A line per node: its status, the pairs and messages of its last
%% answer, how long before that answer it took its last snapshot (ms), and
%% why it is down or incompatible.
-spec text([msgflow_cluster:node_status()], map(), msgflow_view:area()) -> unicode:chardata().
text(Statuses, _Opts, Area = #{width := Width}) ->
    E = msgflow_fmt:ellipsis(Area),
    NodeW = max(12, min(40, lists:max([string:length(atom_to_list(N)) || #{node := N} <- Statuses]))),
    Fixed = NodeW + 1 + 12 + 1 + 9 + 1 + 12 + 1 + 10 + 2,
    [msgflow_fmt:cell("NODE", NodeW, E), " ", msgflow_fmt:cell("STATUS", 12, E), " ",
     msgflow_fmt:rcell("PAIRS", 9), " ", msgflow_fmt:rcell("MESSAGES", 12), " ",
     msgflow_fmt:rcell("SNAPSHOT", 10), "  REASON\n",
     [[msgflow_fmt:cell(atom_to_list(N), NodeW, E), " ", msgflow_fmt:cell(atom_to_list(S), 12, E),
       " ", msgflow_fmt:rcell(msgflow_fmt:int(P), 9), " ", msgflow_fmt:rcell(msgflow_fmt:int(Ev), 12),
       " ", msgflow_fmt:rcell(case Ago of
                                  undefined -> "-";
                                  _ -> [msgflow_fmt:int(Ago), " ms"]
                              end, 10),
       "  ", case Why of
                 undefined -> "";
                 _ -> msgflow_fmt:cell(io_lib:format("~0tp", [Why]), max(10, Width - Fixed), E)
             end, "\n"]
      || #{node := N, status := S, pairs := P, events := Ev, last_snapshot_ms := Ago,
           reason := Why} <- Statuses]].

%% @doc The statuses as JSON.
-spec json([msgflow_cluster:node_status()], map()) -> msgflow_view:json().
json(Statuses, _Opts) ->
    [#{<<"node">> => atom_to_binary(N), <<"status">> => atom_to_binary(St), <<"pairs">> => P,
       <<"events">> => E, <<"last_snapshot_ms">> => case L of undefined -> null; _ -> L end,
       <<"reason">> => case Why of
                           undefined -> null;
                           _ -> iolist_to_binary(io_lib:format("~0tp", [Why]))
                       end}
     || #{node := N, status := St, pairs := P, events := E, last_snapshot_ms := L,
          reason := Why} <- Statuses].
