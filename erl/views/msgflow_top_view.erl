%%% @doc The `top' view: the busiest pairs (or groups), with their rates.
%%% msgflow:top/1,2 prints it, msgflow-top shows it, the web page's table
%%% and the exports read it.
%%%
%%% Options (msgflow_query adds `node' and `timeout'):
%%% <ul>
%%% <li>`limit' (10): rows, 1 to 100,000,000 (`all' for every row);</li>
%%% <li>`by' (process): process, name, module, application, node or kind
%%%     (a row per kind and tag of message);</li>
%%% <li>`sort' (messages): messages since start, `rate' of the last
%%%     closed window (a burst that ended drops out), or `peak' (the
%%%     busiest window's rate);</li>
%%% <li>`windows' (0): each row's messages in the K latest closed windows,
%%%     oldest first (`windows' in its row);</li>
%%% <li>`filter': only rows one of whose ends has this text in its label
%%%     or in the way the VM writes it (`"<0.80"'), upper and lower case
%%%     alike.</li>
%%% </ul>
%%% The value is a msgflow_rows:view() of the chosen rows, busiest first
%%% by `sort', with `missing' (msgflow_query).
-module(msgflow_top_view).
-behaviour(msgflow_view).

-export([options/0, build/2, merge/3, wait/1, fallback/2, text/3, json/2]).

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{limit => {10, {either, [{one_of, [all]}, {int, 1, msgflow_rows:max_rows(), "rows"}]}},
      by => {process, {one_of, msgflow_rows:groupings()}},
      sort => {messages, {one_of, msgflow_rows:sorts()}},
      windows => {0, {int, 0, 10000, "windows"}},
      filter => {none, text},
      %% grouped rows with the bytes their pairs copied (a read of every
      %% pair with a size measured: about 1 s at a million); rows by
      %% process, and rows sorted by bytes, have them anyway
      bytes => {false, boolean}}.

%% @doc Every pair (by process, `limit => all': the dump, the exports by
%% process) is worth waiting for; a page of rows, or groups, is not.
-spec wait(map()) -> interactive | full.
wait(#{by := process, limit := all}) -> full;
wait(_) -> interactive.

%% The rows spec of checked options (msgflow_rows:build/2).
-spec spec(map()) -> msgflow_rows:spec().
spec(Opts = #{limit := Limit, by := By, sort := Sort, windows := K}) ->
    Spec = #{by => By, sort => Sort, limit => Limit, windows => K,
             group_bytes => maps:get(bytes, Opts, false)},
    case Opts of
        #{filter := F} -> Spec#{filter => unicode:characters_to_binary(F)};
        _ -> Spec
    end.

%% @doc This node's busiest rows.
-spec build(msgflow_store:store(), map()) -> msgflow_rows:view().
build(Store, Opts) ->
    msgflow_rows:build(Store, spec(Opts)).

%% @doc The nodes' rows as one (msgflow_rows_merge:merge/3).
-spec merge([msgflow_rows:view()], map(), msgflow_view:context()) -> msgflow_rows:view().
merge(Parts, Opts, Ctx) ->
    msgflow_rows_merge:merge(Parts, spec(Opts), Ctx).

%% @doc The busiest pairs a node that did not answer last reported: a
%% part of a view by process without a filter.
-spec fallback(msgflow_rows:view(), map()) -> msgflow_rows:view() | none.
fallback(Top, #{by := process} = Opts) when not is_map_key(filter, Opts) ->
    Top;
fallback(_, _) ->
    none.

%% @doc The table msgflow:top/1,2 prints, in the area's width: a header
%% (run state, messages, pairs or groups, the window the rates are over,
%% sampling, what is not counted, the nodes that did not answer) and one
%% line per row.  Labels share what the numbers leave, cut in their
%% middle; MEAN/S and PEAK/S show from 120 columns on (PEAK/S always when
%% sorted by peak), and so does CALL P99 when a row has round trips of
%% sampled calls (msgflow:calls/0).
-spec text(msgflow_rows:view(), map(), msgflow_view:area()) -> unicode:chardata().
text(View, _Opts, Area = #{width := Width}) ->
    E = msgflow_fmt:ellipsis(Area),
    [head(View), table(View, Width, E), overflow_table(View, Width, E)].

%% Below the rows, past the bound: the busiest pairs among the messages in
%% overflow, their counts estimates (msgflow_store_topk) with the most
%% each may be over.
overflow_table(View = #{overflow_top := #{pairs := [_ | _] = Pairs, min := Min}}, Width, E) ->
    EndW = max(8, (Width - 1 - (3 + 1 + 1 + 1 + 9 + 1 + 9)) div 2),
    [io_lib:format("~nbusiest in overflow (estimates: each has MESSAGES - ERROR to MESSAGES;~n"
                   "a pair not listed, at most ~s):~n", [msgflow_fmt:int(Min)]),
     msgflow_fmt:rcell("#", 3), " ", msgflow_fmt:cell("SENDER", EndW, E), " ",
     msgflow_fmt:cell("RECEIVER", EndW, E), " ", msgflow_fmt:rcell("MESSAGES", 9), " ",
     msgflow_fmt:rcell("ERROR", 9), "\n",
     [[msgflow_fmt:rcell(integer_to_list(I), 3), " ", end_cell(View, S, EndW, E), " ",
       end_cell(View, R, EndW, E), " ", msgflow_fmt:rcell(msgflow_fmt:int(C), 9), " ",
       msgflow_fmt:rcell(msgflow_fmt:int(Err), 9), "\n"]
      || {I, #{sender := S, receiver := R, count := C, error := Err}} <- lists:enumerate(Pairs)]];
overflow_table(_, _, _) ->
    [].


%% The header: run state, messages, pairs or groups, the window the rates
%% are over, sampling, what is not counted.
head(View = #{by := By, window_ms := WinMs, events := Events, pairs := Pairs,
              groups := Groups, running := Running, sample := Sample}) ->
    %% by process: the pairs held; grouped: the groups of the whole run
    Count = case By of
                process -> [msgflow_fmt:int(Pairs), " pairs"];
                _ -> [msgflow_fmt:int(Groups), " groups by ", atom_to_list(By)]
            end,
    [io_lib:format("msgflow ~s~s: ~s messages, ~s; MSG/S over the last ~s ms~n",
                   [msgflow_fmt:run_state(Running, View), msgflow_fmt:on_nodes(maps:get(nodes, View, [])),
                    msgflow_fmt:int(Events), Count, msgflow_fmt:int(WinMs)]),
     msgflow_fmt:missing(maps:get(missing, View, [])),
     msgflow_fmt:behind(View),
     case Sample of
         off -> [];
         {T, P} -> io_lib:format("sampled: traced ~b ms of every ~b; messages are "
                                 "those measured, rates are estimates (x~.1f)~n",
                                 [T, P, P / T])
     end,
     case maps:get(memory_full, View, false) of
         false -> [];
         true -> io_lib:format("max_memory reached: new pairs are counted in overflow (~s "
                               "messages so far; ~s)~n",
                               [msgflow_fmt:int(maps:get(overflow, View)),
                                case View of
                                    #{overflow_top := #{pairs := [_ | _]}} -> "the busiest below";
                                    _ -> "info()"
                                end])
     end,
     case maps:get(new_tracer, View, msgflow) of
         msgflow -> [];
         Other -> io_lib:format("not counted: processes spawned since another tool "
                                "took over new processes (tracer ~0p; info())~n", [Other])
     end,
     case maps:get(skipped, View, 0) of
         0 -> [];
         N -> io_lib:format("not counted: ~s processes or ports another "
                            "tracer traces (info())~n", [msgflow_fmt:int(N)])
     end].

%% The column heads and a line per row: #, the two ends (by kind: the
%% kind and the tag), the numbers, and the row's main kind with its share
%% (KIND, but by kind).  Below 120 columns MEAN/S is left out, and PEAK/S
%% too unless the rows are sorted by it, so that the labels get the room.
table(View = #{rows := Rows, by := By}, Width, E) ->
    Wide = Width >= 120,
    Mean = Wide,
    Peak = Wide orelse maps:get(sort, View, messages) =:= peak,
    P99 = Wide andalso lists:any(fun(Row) -> is_map_key(call_p99, Row) end, Rows),
    %% BYTES (copied since start) and, wide, SIZE (mean bytes a message),
    %% from sampled sizes: wide, or sorted by bytes
    Bytes = (Wide orelse maps:get(sort, View, messages) =:= bytes)
        andalso lists:any(fun(Row) -> is_map_key(bytes, Row) end, Rows),
    %% WAIT: the receiver's mailbox wait, sorted by it
    Wait = maps:get(sort, View, messages) =:= wait,
    KindW = case By of kind -> 0; _ when Wide -> 18; _ -> 16 end,
    Fixed = 3 + 1 + 1 + 1 + 9 + 1 + 8 + case Mean of true -> 8; false -> 0 end
        + case Peak of true -> 8; false -> 0 end
        + case P99 of true -> 9; false -> 0 end
        + case {Bytes, Wide} of {true, true} -> 14; {true, false} -> 7; _ -> 0 end
        + case Wait of true -> 8; false -> 0 end
        + case KindW of 0 -> 0; _ -> KindW + 2 end,
    EndW = case By of
               kind -> 24;
               _ -> max(8, (Width - 1 - Fixed) div 2)
           end,
    {SHead, RHead} = case By of kind -> {"KIND", "TAG"}; _ -> {"SENDER", "RECEIVER"} end,
    Cols = [msgflow_fmt:rcell("#", 3), " ", msgflow_fmt:cell(SHead, EndW, E), " ",
            msgflow_fmt:cell(RHead, EndW, E), " ", msgflow_fmt:rcell("MESSAGES", 9), " ",
            msgflow_fmt:rcell("MSG/S", 7), " ",
            [[" ", msgflow_fmt:rcell("MEAN/S", 7)] || Mean],
            [[" ", msgflow_fmt:rcell("PEAK/S", 7)] || Peak],
            [[" ", msgflow_fmt:rcell("CALL P99", 8)] || P99],
            [[" ", msgflow_fmt:rcell("BYTES", 6)] || Bytes],
            [[" ", msgflow_fmt:rcell("SIZE", 6)] || Bytes, Wide],
            [[" ", msgflow_fmt:rcell("WAIT MS", 7)] || Wait],
            [["  ", msgflow_fmt:cell("KIND", KindW, E)] || KindW > 0],
            "\n"],
    Lines = [[msgflow_fmt:rcell(integer_to_list(I), 3), " ",
              end_cell(View, S, EndW, E), " ", end_cell(View, R, EndW, E), " ",
              msgflow_fmt:rcell(msgflow_fmt:int(C), 9), " ",
              msgflow_fmt:rcell(msgflow_fmt:short_rate(Rate), 7), trend(Rate, Prev),
              [[" ", msgflow_fmt:rcell(msgflow_fmt:short_rate(MeanR), 7)] || Mean],
              [[" ", msgflow_fmt:rcell(msgflow_fmt:short_rate(PeakR), 7)] || Peak],
              [[" ", msgflow_fmt:rcell(case Row of
                                           #{call_p99 := P} -> msgflow_fmt:micros(P);
                                           _ -> ""
                                       end, 8)] || P99],
              [[" ", msgflow_fmt:rcell(sized(bytes, Row), 6)] || Bytes],
              [[" ", msgflow_fmt:rcell(sized(bytes_mean, Row), 6)] || Bytes, Wide],
              [[" ", msgflow_fmt:rcell(case Row of
                                           #{receiver_growing := true} -> "grew";
                                           #{receiver_wait_ms := W} -> io_lib:format("~.1f", [W]);
                                           _ -> "-"
                                       end, 7)] || Wait],
              [["  ", msgflow_fmt:main_kind(Ks, C, KindW, E)] || KindW > 0],
              "\n"]
             || {I, Row = #{sender := S, receiver := R, count := C, rate := Rate, prev_rate := Prev,
                            mean_rate := MeanR, peak_rate := PeakR, kinds := Ks}} <- lists:enumerate(Rows)],
    [Cols | Lines].

%% A row's bytes figure, `-' with no sampled size.
sized(K, Row) ->
    case Row of
        #{K := B} -> msgflow_fmt:bytes(round(B));
        _ -> "-"
    end.

end_cell(#{by := kind}, K, Width, E) ->
    msgflow_fmt:cell(msgflow_fmt:name(K), Width, E);
end_cell(#{endpoints := Ends}, K, Width, E) ->
    msgflow_fmt:endpoint_cell(maps:get(K, Ends, undefined), K, Width, E).

trend(_, undefined) -> " ";
trend(Rate, Prev) when Rate > Prev * 1.1 -> "^";
trend(Rate, Prev) when Rate < Prev * 0.9 -> "v";
trend(_, _) -> " ".

%% @doc The rows as JSON: the run's figures, and each row with its ends
%% (`sender', `receiver': the endpoint as the VM writes it or the group's
%% key; `sender_label', `receiver_label': as the table shows them),
%% messages since start, in the last window, its rates (messages/s), its
%% kinds, its window counts, the p99 of its sampled calls (µs) and the
%% sizes of its sampled messages (`size': words, bytes; null when none
%% was measured).
-spec json(msgflow_rows:view(), map()) -> msgflow_view:json().
json(View = #{rows := Rows, by := By}, _Opts) ->
    maps:merge(msgflow_rows:json_head(View),
               #{<<"rows">> => [row_json(View, Row) || Row <- Rows],
                 <<"by">> => atom_to_binary(By)}).

row_json(View, Row = #{sender := S, receiver := R, count := C, last_count := L, rate := Rate,
                       prev_rate := Prev, mean_rate := Mean, peak_rate := Peak, kinds := Ks}) ->
    #{<<"sender">> => msgflow_rows:text(View, S), <<"receiver">> => msgflow_rows:text(View, R),
      <<"sender_label">> => msgflow_rows:display(View, S),
      <<"receiver_label">> => msgflow_rows:display(View, R),
      <<"messages">> => C, <<"window_messages">> => L, <<"rate">> => float(Rate),
      <<"prev_rate">> => case Prev of undefined -> null; _ -> float(Prev) end,
      <<"mean_rate">> => float(Mean), <<"peak_rate">> => float(Peak),
      <<"kinds">> => msgflow_rows:kinds_json(Ks),
      <<"windows">> => maps:get(windows, Row, []),
      <<"call_p99_us">> => case Row of #{call_p99 := P} -> P; _ -> null end,
      <<"size">> => case Row of
                        #{size_sampled := N} ->
                            #{<<"sampled">> => N, <<"words_mean">> => float(maps:get(words_mean, Row)),
                              <<"words_max">> => maps:get(words_max, Row),
                              <<"binary_bytes_mean">> => float(maps:get(binary_bytes_mean, Row)),
                              <<"large">> => maps:get(large, Row),
                              <<"bytes_mean">> => float(maps:get(bytes_mean, Row)),
                              <<"bytes">> => float(maps:get(bytes, Row))};
                        _ -> null
                    end}.
