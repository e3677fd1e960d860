%%% @doc Text renderers for the shell: the top table (top/1 of a view,
%%% msgflow_view) and the help.  Pure: returns iodata, prints nothing.
-module(msgflow_text).
-export([top/1, top/2, kinds/1, help/0]).

%% @doc top/2 in 80 columns.
-spec top(msgflow_view:view()) -> iodata().
top(View) ->
    top(View, 80).

%% @doc The table msgflow:top/1,2 prints, from a view with a `limit', in
%% Width columns: a header (run state, messages, pairs or groups, the
%% window the rates are over, sampling, what is not counted) and one line
%% per row.  Labels share what the numbers leave, cut in their middle;
%% MEAN/S and PEAK/S show from 120 columns on (PEAK/S always when sorted
%% by peak), and so does CALL P99 when a row has round trips of sampled
%% calls (msgflow:calls/0).
-spec top(msgflow_view:view(), pos_integer()) -> iodata().
top(View, Width) ->
    [top_head(View) | top_table(View, Width)].

%% The header: run state, messages, pairs or groups, the window the rates
%% are over, sampling, what is not counted.
top_head(View = #{by := By, window_ms := WinMs, events := Events, pairs := Pairs,
                  groups := Groups, running := Running, sample := Sample}) ->
    %% by process: the pairs held; grouped: the groups of the whole run
    Count = case By of
                process -> [msgflow_fmt:int(Pairs), " pairs"];
                _ -> [msgflow_fmt:int(Groups), " groups by ", atom_to_list(By)]
            end,
    Where = case maps:get(nodes, View, [node()]) of
                [_] -> "";
                Ns -> io_lib:format(" on ~b nodes", [length(Ns)])
            end,
    [io_lib:format("msgflow ~s~s: ~s messages, ~s; MSG/S over the last ~s ms~n",
                   [case Running of true -> "running"; false -> "stopped" end, Where,
                    msgflow_fmt:int(Events), Count, msgflow_fmt:int(WinMs)]),
     case Sample of
         off -> [];
         {T, P} -> io_lib:format("sampled: traced ~b ms of every ~b; messages are "
                                 "those measured, rates are estimates (x~.1f)~n",
                                 [T, P, P / T])
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
top_table(View = #{rows := Rows, by := By}, Width) ->
    E = msgflow_fmt:ellipsis(),
    Wide = Width >= 120,
    Mean = Wide,
    Peak = Wide orelse maps:get(sort, View, messages) =:= peak,
    P99 = Wide andalso lists:any(fun(Row) -> is_map_key(call_p99, Row) end, Rows),
    KindW = case By of kind -> 0; _ when Wide -> 18; _ -> 16 end,
    Fixed = 3 + 1 + 1 + 1 + 9 + 1 + 8 + case Mean of true -> 8; false -> 0 end
        + case Peak of true -> 8; false -> 0 end
        + case P99 of true -> 9; false -> 0 end
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
              [["  ", msgflow_fmt:main_kind(Ks, C, KindW, E)] || KindW > 0],
              "\n"]
             || {I, Row = #{sender := S, receiver := R, count := C, rate := Rate, prev_rate := Prev,
                            mean_rate := MeanR, peak_rate := PeakR, kinds := Ks}} <- lists:enumerate(Rows)],
    [Cols | Lines].

end_cell(#{by := kind}, K, Width, E) ->
    msgflow_fmt:cell(msgflow_fmt:name(K), Width, E);
end_cell(#{endpoints := Ends}, K, Width, E) ->
    msgflow_fmt:endpoint_cell(maps:get(K, Ends, undefined), K, Width, E).

trend(_, undefined) -> " ";
trend(Rate, Prev) when Rate > Prev * 1.1 -> "^";
trend(Rate, Prev) when Rate < Prev * 0.9 -> "v";
trend(_, _) -> " ".

%% @doc What msgflow:kinds/2 prints, from a view with a `pair': the pair
%% and its messages, then a line per kind and tag with its messages and
%% share; `none' when the view has no row.
-spec kinds(msgflow_view:view()) -> iodata() | none.
kinds(#{rows := []}) ->
    none;
kinds(View = #{rows := [#{sender := S, receiver := R, count := C, kinds := Ks}]}) ->
    E = msgflow_fmt:ellipsis(),
    [io_lib:format("~ts -> ~ts: ~s messages~n",
                   [string:trim(end_cell(View, S, 60, E)), string:trim(end_cell(View, R, 60, E)),
                    msgflow_fmt:int(C)]),
     "  KIND    TAG                        MESSAGES  SHARE\n",
     case Ks of
         [] -> "  (kinds off: start(#{kinds => true}))\n";
         _ -> [io_lib:format("  ~s ~s ~s ~s~n",
                             [msgflow_fmt:cell(atom_to_list(K), 7, E),
                              msgflow_fmt:mid_cell(msgflow_fmt:name(T), 24, E),
                              msgflow_fmt:rcell(msgflow_fmt:int(N), 10),
                              msgflow_fmt:rcell(io_lib:format("~.1f%", [100 * N / max(1, C)]), 6)])
               || {K, T, N} <- Ks]
     end].

%% @doc msgflow:help/0's text.
-spec help() -> iodata().
help() ->
      "msgflow: who sends messages to whom, how often\n"
      "  msgflow:start()                     count the sends of all processes\n"
      "  msgflow:start(#{procs => [Pid, name], interval => 500, duration => 60000})\n"
      "  msgflow:start(#{sample => {100, 1000}})   trace 100 ms of every second\n"
      "  msgflow:trace(Pid)  msgflow:untrace(name) add or drop one while running\n"
      "Printed (tables in the terminal's width; each returns ok):\n"
      "  msgflow:top()  msgflow:top(20)      busiest pairs, rate in the last window\n"
      "  msgflow:top(10, #{refresh => 1000, for => 10000})  live; q + Enter ends it\n"
      "  msgflow:top(10, #{by => kind})      call get, cast ...; or sort => rate | peak\n"
      "  msgflow:kinds(Sender, Receiver)     one pair's messages by kind and tag\n"
      "  msgflow:matrix(name)                or process | module | application | node\n"
      "  msgflow:matrix(name, #{kind => call})  one kind of message (or {call, get})\n"
      "  msgflow:hotspots()                  fan_in, hot_pair, spike, fan_out, ...\n"
      "  msgflow:flows()                     follow_calls/2 entries, the last follow/1\n"
      "  msgflow:calls()                     how long calls wait, p50 and p99 per edge\n"
      "  msgflow:nodes()                     each node's status, pairs, messages\n"
      "Data (for programs; the same options):\n"
      "  msgflow:view(top, #{limit => 20})   or matrix, hotspots, flows, nodes, kinds\n"
      "  msgflow:view(matrix, #{by => name}) msgflow:view(kinds, #{pair => {S, R}})\n"
      "  msgflow:pairs()                     [{Sender, Receiver, Messages}] held, exact\n"
      "  msgflow:history(Sender, Receiver)   messages per window of one pair\n"
      "  msgflow:info()  msgflow:dump()      what msgflow holds; the ETF dump\n"
      "Reports and requests:\n"
      "  msgflow:web()                       the live page: http://127.0.0.1:7780/\n"
      "  msgflow:export(\"flow.html\", html)   or csv | dot | json | etf | svg\n"
      "  msgflow:export(\"m.svg\", svg, #{by => module, limit => 20})\n"
      "  msgflow:follow(fun() -> gen_server:call(cart, get) end, #{print => true})\n"
      "                                      one request: its messages, causal order\n"
      "  msgflow:follow_calls({cart, add, 2}, #{sample => 10})  every 10th call\n"
      "  msgflow:unfollow()                  stop following (flows() keeps them)\n"
      "  msgflow:export(\"flow.mmd\", mermaid) the last followed request\n"
      "Nodes:\n"
      "  msgflow:start(#{nodes => all})      this node and every connected one\n"
      "  msgflow:start_on(Node, #{duration => 60000})  count on Node only\n"
      "  msgflow:top(10, #{node => N})       one node of the cluster; matrix(node)\n"
      "  msgflow:reset()                     forget the counts, keep tracing\n"
      "  msgflow:stop()                      flags off; counts stay until start\n"
      "Options are a map or a keyword list (Elixir: :msgflow.top(10, by: :name)).\n"
      "Errors: {error, {badopt, {Key, Value}, Allowed}} for an option,\n"
      "        {error, {badarg, {Name, Value}, Allowed}} for an argument,\n"
      "        {error, not_started} from a view before the first start.\n".
