%%% @doc The `flows' view: a summary per follow_calls/2 entry (running or
%%% stopped since) and the last request follow/2 followed
%%% (msgflow:flows/0 prints it).  No options but `node' and `timeout'
%%% (msgflow_query); no counts needed: it is there before the first
%%% start.  The value: `#{entries => [msgflow_flow_value:summary()], last
%%% => msgflow_flow_value:flow() | undefined}', from a look at each node's
%%% flow keeper now.  Labels, not pids: each request has processes of its
%%% own; a local process that exited is `(exited)'.  Across a cluster an
%%% entry's calls are counted where its pattern is (this node), and the
%%% messages of its requests on every node: each node's part of an entry
%%% is added to this node's (msgflow_flow_value:merge_summary/2).
-module(msgflow_flows_view).
-behaviour(msgflow_view).

-export([options/0, store/0, build/2, merge/3, text/3, json/2]).
-export_type([flows/0]).

-type flows() :: #{entries := [msgflow_flow_value:summary()],
                   last := msgflow_flow_value:flow() | undefined,
                   missing => [{node(), term()}]}.

%% @doc No options of its own.
-spec options() -> msgflow_opts:schema().
options() -> #{}.

%% @doc Reads the flow keeper, not the counts.
-spec store() -> false.
store() -> false.

%% @doc This node's entries (other nodes' processes in them as pids) and
%% its last followed request.
-spec build(none, map()) -> flows().
build(none, _Opts) ->
    #{entries => msgflow_flow:part_flows(), last => msgflow_flow:last()}.

%% @doc The entries of this node with the other nodes' parts of each
%% added, named here; this node's last request.
-spec merge([flows()], map(), msgflow_view:context()) -> flows().
merge([#{entries := Here, last := Last} | Others], _Opts, _Ctx) ->
    There = lists:append([Es || #{entries := Es} <- Others]),
    #{entries => [msgflow_flow_value:name_summary(
                    msgflow_flow_value:merge_summary(S, [P || P = #{entry := E} <- There, E =:= Entry]))
                  || S = #{entry := Entry} <- Here],
      last => Last}.

%% @doc For each entry its requests followed and calls counted, messages
%% per request, the deepest chain, and a table of its pairs by label (the
%% busiest that fit in 10 lines); then the last request follow/2
%% followed, as a sequence diagram (msgflow_flow_render:text/1).
-spec text(flows(), map(), msgflow_view:area()) -> unicode:chardata().
text(#{entries := [], last := undefined}, _Opts, _Area) ->
    "msgflow flows: none yet: msgflow:follow_calls({M, F, A}, #{sample => 10}) follows the "
    "requests at a function,\n    msgflow:follow(Fun) one request\n";
text(V = #{entries := Entries, last := Last}, _Opts, Area = #{width := Width}) ->
    E = msgflow_fmt:ellipsis(Area),
    EndW = max(10, (Width - 2 - 1 - 1 - 10) div 2),
    [msgflow_fmt:missing(maps:get(missing, V, [])),
     [[io_lib:format("~ts (~s): ~s requests followed of ~s calls (1 in ~s), ~s messages "
                     "per request, depth ~s~ts~n",
                     [msgflow_fmt:mfa(M, F, A), case Running of true -> "running"; false -> "stopped" end,
                      msgflow_fmt:int(Reqs), msgflow_fmt:int(Calls), msgflow_fmt:int(Sample),
                      msgflow_fmt:rate(Per), msgflow_fmt:int(Depth),
                      case Exact of true -> ""; false -> " or more (max_events)" end]),
       "  ", msgflow_fmt:cell("SENDER", EndW, E), " ", msgflow_fmt:cell("RECEIVER", EndW, E), " ",
       msgflow_fmt:rcell("MESSAGES", 10), "\n",
       [["  ", msgflow_fmt:label_cell(label(S), EndW, E), " ", msgflow_fmt:label_cell(label(R), EndW, E),
         " ", msgflow_fmt:rcell(msgflow_fmt:int(N), 10), "\n"] || {S, R, N} <- lists:sublist(Pairs, 10)],
       case length(Pairs) > 10 of
           true -> io_lib:format("  ... ~s more pairs: msgflow:view(flows, #{})~n",
                                 [msgflow_fmt:int(length(Pairs) - 10)]);
           false -> []
       end, "\n"]
      || #{entry := {M, F, A}, requests := Reqs, calls := Calls, per_request := Per, pairs := Pairs,
           depth := Depth, depth_exact := Exact, sample := Sample, running := Running} <- Entries],
     case Last of
         undefined -> [];
         _ -> ["the last request msgflow:follow/1 followed:\n", msgflow_flow_render:text(Last)]
     end].

label(L) when is_binary(L) -> L;
label(P) -> msgflow_fmt:endpoint(P).

%% @doc Entry points with their per-request figures, and the last
%% followed request as Mermaid's sequenceDiagram text.
-spec json(flows(), map()) -> msgflow_view:json().
json(#{entries := Summaries, last := Last}, _Opts) ->
    #{<<"entries">> => [#{<<"entry">> => msgflow_fmt:mfa(M, F, A), <<"requests">> => Rq,
                          <<"calls">> => Calls, <<"messages">> => Ms,
                          <<"per_request">> => float(Per), <<"depth">> => D,
                          <<"pairs">> => [#{<<"sender">> => label(S), <<"receiver">> => label(R),
                                            <<"messages">> => N} || {S, R, N} <- lists:sublist(Ps, 5)]}
                        || #{entry := {M, F, A}, requests := Rq, calls := Calls, messages := Ms,
                             per_request := Per, depth := D, pairs := Ps} <- Summaries],
      <<"last">> => case Last of
                        undefined -> null;
                        #{messages := M} ->
                            #{<<"label">> => iolist_to_binary(io_lib:format("~0tp", [maps:get(label, Last)])),
                              <<"messages">> => M,
                              <<"mermaid">> => iolist_to_binary(msgflow_flow_render:mermaid(Last))}
                    end}.
