%%% @doc Text renderers of the views the shell prints besides top
%%% (msgflow_text): the communication matrix, the hotspots, the nodes and
%%% the flows, each from the typed value msgflow:view/2 returns, in the
%%% columns (and, for the matrix, lines) it is given.  Numbers have
%%% thousands separators, rates are messages/s, as top's.  Pure: returns
%%% iodata, prints nothing, reads nothing of the live system.
-module(msgflow_tables).
-export([matrix/3, hotspots/3, nodes/2, flows/2, process/2, calls/2]).

-define(NUM_W, 9).    %% a cell of the matrix: up to 99,999,999
-define(TOTAL_W, 11). %% the SENT column

%% @doc The matrix (msgflow_view:matrix()) in Width columns and about
%% Height lines: senders down (busiest first, numbered), receivers across
%% (headed by their numbers; a receiver that sends too has its sender
%% number), the messages of each pair since start (`.' for none), each
%% sender's SENT and each receiver's RECEIVED; the receivers that are not
%% senders are named under the table.  What does not fit is left out, and
%% a line says how much and where to find it.
-spec matrix(msgflow_view:matrix(), pos_integer(), pos_integer()) -> iodata().
matrix(M = #{by := By, rows := Rows0, cols := Cols0, messages := Total, running := Run}, Width, Height) ->
    E = msgflow_fmt:ellipsis(),
    #{cells := Cells, sent := Sent, received := Recv, labels := Labels} = M,
    Where = case maps:get(nodes, M, [node()]) of
                [_] -> "";
                Ns -> io_lib:format(" on ~b nodes", [length(Ns)])
            end,
    Head = io_lib:format("msgflow ~s~s: matrix by ~s, ~s messages, ~s senders x ~s receivers~n",
                         [state(Run), Where, By, msgflow_fmt:int(Total),
                          msgflow_fmt:int(length(Rows0)), msgflow_fmt:int(length(Cols0))]),
    %% the lines the table may take: the head, column heads, totals,
    %% legend and the line of what was left out stay
    RowsFit = max(1, Height - 8),
    Rows = lists:sublist(Rows0, RowsFit),
    Num = maps:from_list(lists:zip(Rows, lists:seq(1, length(Rows)))),
    LabelW = max(12, min(32, lists:max([0 | [string:length(maps:get(K, Labels)) + 4 || K <- Rows]]))),
    ColsFit = max(1, (Width - LabelW - ?TOTAL_W) div ?NUM_W),
    Cols = lists:sublist(Cols0, ColsFit),
    %% receivers that send are headed by their sender number, the others
    %% numbered after the senders
    {ColNum, Legend, _} =
        lists:foldl(fun(C, {Acc, L, Next}) ->
                            case Num of
                                #{C := I} -> {Acc#{C => I}, L, Next};
                                _ -> {Acc#{C => Next}, L ++ [{Next, C}], Next + 1}
                            end
                    end, {#{}, [], length(Rows) + 1}, Cols),
    RowText = fit_labels(Rows, Labels, LabelW - 4, E),
    ColHeads = [msgflow_fmt:cell("FROM \\ TO", LabelW, E),
                [msgflow_fmt:rcell(integer_to_list(maps:get(C, ColNum)), ?NUM_W) || C <- Cols],
                msgflow_fmt:rcell("SENT", ?TOTAL_W), "\n"],
    Lines = [[msgflow_fmt:rcell(integer_to_list(maps:get(R, Num)), 3), " ",
              maps:get(R, RowText),
              [msgflow_fmt:rcell(case Cells of
                                     #{{R, C} := #{count := N}} -> msgflow_fmt:int(N);
                                     _ -> "."
                                 end, ?NUM_W) || C <- Cols],
              msgflow_fmt:rcell(msgflow_fmt:int(maps:get(R, Sent)), ?TOTAL_W), "\n"]
             || R <- Rows],
    Received = [msgflow_fmt:cell("    RECEIVED", LabelW, E),
                [msgflow_fmt:rcell(msgflow_fmt:int(maps:get(C, Recv)), ?NUM_W) || C <- Cols],
                msgflow_fmt:rcell(msgflow_fmt:int(Total), ?TOTAL_W), "\n"],
    LegendLines = [[msgflow_fmt:rcell(integer_to_list(I), 3), " ",
                    string:trim(msgflow_fmt:mid_cell(maps:get(C, Labels), Width - 22, E), trailing),
                    " (receives only)\n"]
                   || {I, C} <- Legend],
    [Head, ColHeads, Lines, Received, LegendLines,
     left_out(Rows0, Rows, Sent, "senders"), left_out(Cols0, Cols, Recv, "receivers")].

%% Each key's label in Width columns, cut in its middle; labels that
%% would read the same cut so (two `tcp_inet <- ht...andler:init/1') are
%% cut at their end instead, where they differ sooner.
fit_labels(Keys, Labels, Width, E) ->
    Mid = [{K, msgflow_fmt:mid_cell(maps:get(K, Labels), Width, E)} || K <- Keys],
    Seen = lists:foldl(fun({_, T}, Acc) -> maps:update_with(T, fun(N) -> N + 1 end, 1, Acc) end,
                       #{}, Mid),
    maps:from_list([case maps:get(T, Seen) of
                        1 -> {K, T};
                        _ -> {K, msgflow_fmt:cell(maps:get(K, Labels), Width, E)}
                    end || {K, T} <- Mid]).

%% @doc The calls view (msgflow_calls_view:view()) in Width columns: one
%% line per call edge and tag, busiest total wait first: its calls (exact),
%% the round trips sampled, their p50, p99 and max, the unanswered.
-spec calls(msgflow_calls_view:view(), pos_integer()) -> iodata().
calls(#{entries := Es, running := Run, by := By, sample := Sample}, Width) ->
    E = msgflow_fmt:ellipsis(),
    Head = io_lib:format("msgflow ~s: ~s call edges by ~s, round trips of ~s (request sent to "
                         "reply sent)~n",
                         [state(Run), msgflow_fmt:int(length(Es)), By,
                          case Sample of
                              off -> "none: call_sample => off";
                              1 -> "every call";
                              N -> io_lib:format("1 in ~b calls per scheduler", [N])
                          end]),
    %% the numbers take 49 columns, the call 14, the two ends the rest
    EndW = max(12, (Width - 49 - 14 - 3) div 2),
    Line = fun(C, S, K, Calls, Sampled, P50, P99, Max, U) ->
                   [msgflow_fmt:mid_cell(C, EndW, E), " ", msgflow_fmt:mid_cell(S, EndW, E), " ",
                    msgflow_fmt:cell(K, 14, E),
                    io_lib:format("~9s ~7s ~7s ~7s ~7s ~6s~n", [Calls, Sampled, P50, P99, Max, U])]
           end,
    [Head,
     Line("CALLER", "SERVER", "CALL", "CALLS", "SAMPLED", "P50", "P99", "MAX", "UNANS"),
     case Es of
         [] -> "  no call sampled yet
";
         _ -> [Line(CL, SL, msgflow_fmt:kind(K, T),
                    case Calls of undefined -> "?"; _ -> msgflow_fmt:int(Calls) end,
                    msgflow_fmt:int(Sa), msgflow_fmt:micros(P50), msgflow_fmt:micros(P99),
                    msgflow_fmt:micros(Max), msgflow_fmt:int(U))
               || #{caller_label := CL, server_label := SL, kind := K, tag := T, calls := Calls,
                    sampled := Sa, p50 := P50, p99 := P99, max := Max, unanswered := U} <- Es]
     end].

state(true) -> "running";
state(false) -> "stopped".

left_out(All, Shown, Counts, What) ->
    case lists:nthtail(length(Shown), All) of
        [] ->
            [];
        Out ->
            io_lib:format("not shown: ~s more ~s (~s messages): msgflow:view(matrix, Opts)~n",
                          [msgflow_fmt:int(length(Out)), What,
                           msgflow_fmt:int(lists:sum([maps:get(K, Counts) || K <- Out]))])
    end.

%% @doc The findings (msgflow_hotspots:finding()) of the rules over the
%% last Windows closed windows, a line each in Width columns (longer
%% explanations go on, indented, on the next lines): the rule, the node
%% of a finding of another node (across a cluster), and the finding's explanation
%% with its figures.
-spec hotspots([msgflow_hotspots:finding()], pos_integer(), pos_integer()) -> iodata().
hotspots([], Windows, _Width) ->
    io_lib:format("msgflow hotspots: none in the last ~b windows (the rules and their "
                  "thresholds: msgflow_hotspots)~n", [Windows]);
hotspots(Findings, Windows, Width) ->
    [io_lib:format("msgflow hotspots: ~b in the last ~b windows~n", [length(Findings), Windows]),
     [begin
          %% a finding of another node names it
          Node = case F of
                     #{node := N} when N =/= node() -> [atom_to_list(N), " "];
                     _ -> ""
                 end,
          Text = unicode:characters_to_list([Node, Why]),
          [msgflow_fmt:cell(atom_to_list(Rule), 13, "~"), wrap(Text, max(20, Width - 13), 13)]
      end || F = #{kind := Rule, explanation := Why} <- Findings]].

%% Text in lines of Width columns, broken at spaces; lines after the
%% first indented by Indent.
wrap(Text, Width, Indent) ->
    Words = string:lexemes(Text, " "),
    {Lines, Last} = lists:foldl(fun(W, {Done, []}) -> {Done, W};
                                   (W, {Done, Cur}) ->
                                        case string:length(Cur) + 1 + string:length(W) > Width of
                                            true -> {[Cur | Done], W};
                                            false -> {Done, Cur ++ " " ++ W}
                                        end
                                end, {[], []}, Words),
    lists:join([$\n | lists:duplicate(Indent, $\s)], lists:reverse([Last | Lines])) ++ "\n".

%% @doc The nodes msgflow counts on (msgflow_cluster:node_status()), a
%% line each: its status, the pairs and messages of its last answer, how
%% long before that answer it took its last snapshot (ms), and why it is
%% down or incompatible.
-spec nodes([msgflow_cluster:node_status()], pos_integer()) -> iodata().
nodes(Statuses, Width) ->
    E = msgflow_fmt:ellipsis(),
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

%% @doc The flows (msgflow:view(flows, _)): for each follow_calls/2 entry
%% its requests followed and calls counted, messages per request, the
%% deepest chain, and a table of its pairs by label (the busiest that fit
%% in 10 lines); then the last request follow/2 followed, as a sequence
%% diagram (msgflow_flow_render:text/1).
-spec flows(#{entries := [msgflow_flow_view:summary()],
              last := msgflow_flow_view:flow() | undefined}, pos_integer()) -> iodata().
flows(#{entries := [], last := undefined}, _Width) ->
    "msgflow flows: none yet: msgflow:follow_calls({M, F, A}, #{sample => 10}) follows the "
    "requests at a function,\n    msgflow:follow(Fun) one request\n";
flows(#{entries := Entries, last := Last}, Width) ->
    E = msgflow_fmt:ellipsis(),
    EndW = max(10, (Width - 2 - 1 - 1 - 10) div 2),
    [[[io_lib:format("~ts (~s): ~s requests followed of ~s calls (1 in ~s), ~s messages "
                     "per request, depth ~s~ts~n",
                     [msgflow_fmt:mfa(M, F, A), case Running of true -> "running"; false -> "stopped" end,
                      msgflow_fmt:int(Reqs), msgflow_fmt:int(Calls), msgflow_fmt:int(Sample),
                      msgflow_fmt:rate(Per), msgflow_fmt:int(Depth),
                      case Exact of true -> ""; false -> " or more (max_events)" end]),
       "  ", msgflow_fmt:cell("SENDER", EndW, E), " ", msgflow_fmt:cell("RECEIVER", EndW, E), " ",
       msgflow_fmt:rcell("MESSAGES", 10), "\n",
       [["  ", msgflow_fmt:mid_cell(label(S), EndW, E), " ", msgflow_fmt:mid_cell(label(R), EndW, E),
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

%% @doc One process (msgflow:view(process, _)): its label and pid, what
%% it says of itself (queue in messages, memory in bytes, reductions,
%% current function, status), and its busiest partners since start, to
%% and from, with their messages.
-spec process(map(), pos_integer()) -> iodata().
process(P = #{pid := Pid, label := Label, alive := Alive}, Width) ->
    E = msgflow_fmt:ellipsis(),
    Num = fun(undefined) -> "-"; (N) -> msgflow_fmt:int(N) end,
    Partners = fun(Title, Ps) ->
                       [Title, "\n",
                        case Ps of
                            [] -> "  (none)\n";
                            _ -> [["  ", msgflow_fmt:mid_cell(L, max(20, min(40, Width - 14)), E), " ",
                                   msgflow_fmt:rcell(msgflow_fmt:int(C), 10), "\n"] || {_, L, C} <- Ps]
                        end]
               end,
    [io_lib:format("~ts ~s~s~n", [Label, msgflow_fmt:endpoint(Pid),
                                  case Alive of true -> ""; false -> " (exited)" end]),
     case Alive of
         true ->
             #{current_function := {M, F, A}} = P,
             io_lib:format("  queue ~s messages, memory ~s bytes, reductions ~s, ~s~n"
                           "  in ~ts~n",
                           [Num(maps:get(message_queue_len, P)), Num(maps:get(memory, P)),
                            Num(maps:get(reductions, P)), maps:get(status, P),
                            msgflow_fmt:mfa(M, F, A)]);
         false ->
             []
     end,
     Partners("sends to (messages since start):", maps:get(sends_to, P)),
     Partners("receives from:", maps:get(receives_from, P))].
