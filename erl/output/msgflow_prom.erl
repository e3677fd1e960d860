%%% @doc `/metrics' of msgflow's web server (msgflow_web) in the
%%% Prometheus text format (version 0.0.4), rendered from a view grouped
%%% by name (or another grouping) and msgflow:info/0's figures:
%%% <ul>
%%% <li>`msgflow_messages_total{sender, receiver, kind}' (counter): the
%%%     messages of the `Edges' busiest grouped edges since the run
%%%     started, by kind (`none' for messages counted without one); the
%%%     other edges summed in one series, `sender="other",
%%%     receiver="other", kind="other"' (which edges it holds changes as
%%%     their ranks change);</li>
%%% <li>`msgflow_copied_bytes{sender, receiver}' (gauge): the bytes the
%%%     messages of those edges copied since the run started, estimated
%%%     from the sizes of sampled messages (messages x their mean size, so
%%%     a gauge: the mean moves); the edges with one measured;</li>
%%% <li>`msgflow_call_duration_seconds{caller, server, tag}' (histogram):
%%%     the round trips of sampled calls (request sent to reply sent) of
%%%     the `Edges' call edges with the most total wait, by name, with a
%%%     bucket per power of two from 256 ns; `_sum' is estimated from the
%%%     buckets' middles;</li>
%%% <li>msgflow's own: `msgflow_events_total', `msgflow_overflow_total',
%%%     `msgflow_dead_letters_total', `msgflow_proc_events_dropped_total'
%%%     (counters, messages or process events), `msgflow_pairs' (distinct pairs
%%%     held), `msgflow_memory_bytes' (the NIF's tables and the store),
%%%     `msgflow_running' (1 while counting);</li>
%%% <li>the families of the views that give some (msgflow_view's
%%%     metrics/1: `msgflow_receiver_messages_total', ...).</li>
%%% </ul>
%%% Counters go back to 0 when a run starts or is reset, which
%%% Prometheus reads as a counter reset.  Label values are escaped as the
%%% format says (`\\', `"', newline): any label text is safe.
-module(msgflow_prom).
-export([metrics/5]).

%% @doc The exposition text of View (a `top' view's rows, busiest first,
%% with kinds), Calls (a msgflow_calls_view:view() by name, or none), Info
%% (msgflow:info/0) and the views' own families, with at most Edges edge
%% series and call edges.
-spec metrics(msgflow_rows:view(), msgflow_calls_view:view() | none, map(), pos_integer(),
              [msgflow_view:family()]) -> iodata().
metrics(View = #{rows := Rows}, Calls, Info, Edges, Families) ->
    {Shown, Rest} = lists:split(min(Edges, length(Rows)), Rows),
    Series = lists:append([edge_series(View, Row) || Row <- Shown])
        ++ case Rest of
               [] -> [];
               _ -> [{[{sender, <<"other">>}, {receiver, <<"other">>}, {kind, <<"other">>}],
                      lists:sum([C || #{count := C} <- Rest])}]
           end,
    [family(<<"msgflow_messages_total">>, counter,
            io_lib:format("Messages sent between groups by ~s since the run started, by kind; "
                          "the busiest ~b edges, the rest in sender=\"other\".",
                          [maps:get(by, View), Edges]),
            Series),
     family(<<"msgflow_copied_bytes">>, gauge,
            io_lib:format("Bytes the messages between groups by ~s copied since the run started, "
                          "estimated from sampled sizes (messages x their mean size: it may go "
                          "down as the mean moves): the same edges as msgflow_messages_total, "
                          "those with a size measured.", [maps:get(by, View)]),
            [{[{sender, msgflow_rows:display(View, S)}, {receiver, msgflow_rows:display(View, R)}],
              round(B)} || #{sender := S, receiver := R, bytes := B} <- Shown]),
     call_histograms(Calls, Edges),
     own(<<"msgflow_events_total">>, counter, "Messages counted since the run started.",
         maps:get(events, Info, 0)),
     own(<<"msgflow_overflow_total">>, counter,
         "Messages counted past max_pairs distinct pairs or max_memory (not in any pair).",
         maps:get(overflow, Info, 0)),
     own(<<"msgflow_memory_full">>, gauge,
         "1 once the tracer's tables and the store reached max_memory (new pairs go to overflow).",
         case maps:get(memory_full, Info, false) of true -> 1; false -> 0 end),
     own(<<"msgflow_collector_seconds_per_second">>, gauge,
         "Share of a scheduler msgflow's collector spent taking snapshots and closing windows "
         "over the last window.",
         maps:get(collector_ms_per_s, Info, 0.0) / 1000),
     own(<<"msgflow_dead_letters_total">>, counter, "Messages sent to processes that did not exist.",
         maps:get(dead_letters, Info, 0)),
     own(<<"msgflow_proc_events_dropped_total">>, counter,
         "Process proc_events the tracer could not keep (their processes are labelled later).",
         maps:get(proc_events_dropped, Info, 0)),
     own(<<"msgflow_pairs">>, gauge, "Distinct sender-receiver pairs held.", maps:get(pairs, Info, 0)),
     own(<<"msgflow_memory_bytes">>, gauge,
         "Memory of the tracer's tables, the store and the collector process, in bytes.",
         maps:get(own_memory, Info, maps:get(memory, Info, 0) + maps:get(store_memory, Info, 0))),
     own(<<"msgflow_running">>, gauge, "1 while msgflow counts, else 0.",
         case maps:get(running, Info, false) of true -> 1; false -> 0 end),
     [family(Name, Type, Help, Fs) || {Name, Type, Help, Fs} <- Families]].

%% An edge's series: one per kind of its messages, and `none' for those
%% counted without a kind.
edge_series(View, Row = #{sender := S, receiver := R, count := C}) ->
    ByKind = lists:foldl(fun({K, _Tag, N}, Acc) -> Acc#{K => N + maps:get(K, Acc, 0)} end,
                         #{}, maps:get(kinds, Row, [])),
    None = C - lists:sum(maps:values(ByKind)),
    Labels = [{sender, msgflow_rows:display(View, S)}, {receiver, msgflow_rows:display(View, R)}],
    [{Labels ++ [{kind, atom_to_binary(K)}], N} || {K, N} <- lists:sort(maps:to_list(ByKind))]
        ++ [{Labels ++ [{kind, <<"none">>}], None} || None > 0].

%% The call edges' histograms: cumulative buckets at each power of two
%% (the tracer's buckets two by two), +Inf, the sum and the count.
call_histograms(none, _) ->
    [];
call_histograms(#{entries := Es0}, Edges) ->
    Es = lists:sublist([E || E = #{sampled := S} <- Es0, S > 0], Edges),
    Bounds = msgflow_call_row:buckets(),
    %% the upper bounds that are powers of two (every second bucket's), in s
    Les = [{B, Hi} || B <- lists:seq(0, tuple_size(Bounds) - 1),
                      {_, Hi} <- [element(B + 1, Bounds)], is_integer(Hi), Hi band (Hi - 1) =:= 0],
    Name = <<"msgflow_call_duration_seconds">>,
    ["# HELP ", Name, " Round trips of sampled calls (request sent to reply sent), by call edge "
     "and request tag.\n# TYPE ", Name, " histogram\n",
     [begin
          Ls = [{caller, CL}, {server, SL}, {tag, msgflow_fmt:name(T)}],
          Labels = fun(Extra) -> lists:join(",", [[atom_to_list(K), "=\"", escape(V), "\""]
                                                 || {K, V} <- Ls ++ Extra]) end,
          [[[Name, "_bucket{", Labels([{le, le(Hi)}]), "} ",
             integer_to_list(lists:sum([N || {B1, N} <- H, B1 =< B])), "\n"] || {B, Hi} <- Les],
           Name, "_bucket{", Labels([{le, <<"+Inf">>}]), "} ", integer_to_list(S), "\n",
           Name, "_sum{", Labels([]), "} ", float_to_list(Mean * S / 1.0e6, [{decimals, 9}]), "\n",
           Name, "_count{", Labels([]), "} ", integer_to_list(S), "\n"]
      end || #{caller_label := CL, server_label := SL, tag := T, hist := H, sampled := S,
               mean := Mean} <- Es]].

le(Ns) ->
    list_to_binary(float_to_list(Ns / 1.0e9, [short])).

family(Name, Type, Help, Series) ->
    ["# HELP ", Name, " ", Help, "\n# TYPE ", Name, " ", atom_to_list(Type), "\n",
     [[Name, "{", lists:join(",", [[atom_to_list(K), "=\"", escape(V), "\""] || {K, V} <- Ls]), "} ",
       number(N), "\n"] || {Ls, N} <- Series]].

number(N) when is_integer(N) -> integer_to_list(N);
number(N) -> float_to_list(float(N), [short]).

own(Name, Type, Help, Value) ->
    ["# HELP ", Name, " ", Help, "\n# TYPE ", Name, " ", atom_to_list(Type), "\n",
     Name, " ", case Value of
                    V when is_integer(V) -> integer_to_list(V);
                    V -> number(V)
                end, "\n"].

%% A label value as the text format wants it, its control characters
%% made visible text first (msgflow_fmt:visible/1: the format allows no
%% escape but \\\\, \\" and \\n).
escape(V) ->
    unicode:characters_to_binary(lists:map(fun($\\) -> "\\\\";
                 ($") -> "\\\"";
                 ($\n) -> "\\n";
                 (C) -> C
              end, unicode:characters_to_list(msgflow_fmt:visible(V)))).
