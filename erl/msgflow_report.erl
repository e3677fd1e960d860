%%% @doc Reports built from one view of the collector (msgflow_collector
%%% view/1): the communication matrix and the six export formats.  Pure
%%% functions but for render(html, ...), which runs Graphviz's `dot' to lay
%%% out the graph when it is installed.
-module(msgflow_report).
-export([matrix/2, render/3, dump/1, formats/0, groupings/0, json_encode/1, rate/3]).

-define(DUMP_VERSION, 1).

%% @doc The export formats.
-spec formats() -> [atom()].
formats() -> [csv, dot, json, etf, svg, html].

%% @doc The matrix groupings.
-spec groupings() -> [atom()].
groupings() -> [process, name, module, application, node].

%% @doc The communication matrix of View grouped by By (see msgflow:matrix/1).
-spec matrix(map(), atom()) -> map().
matrix(View = #{totals := Totals, recent := Recent, window_ms := WinMs, scale := Scale}, By) ->
    Key = fun(E) -> key(By, E, View) end,
    Group = fun(M) -> maps:fold(fun({S, R}, C, Acc) -> bump({Key(S), Key(R)}, C, Acc) end,
                                #{}, M) end,
    Counts = Group(Totals),
    Rec = Group(Recent),
    Cells = maps:map(fun(K, C) -> #{count => C, rate => rate(maps:get(K, Rec, 0), WinMs, Scale)}
                     end, Counts),
    #{by => By,
      rows => lists:usort([S || {S, _} <- maps:keys(Counts)]),
      cols => lists:usort([R || {_, R} <- maps:keys(Counts)]),
      cells => Cells, window_ms => WinMs, estimated => Scale =/= 1}.

key(process, E, _) -> E;
key(By, E, #{endpoints := Ends}) ->
    Meta = maps:get(E, Ends, #{label => msgflow_fmt:endpoint(E), module => undefined,
                              application => undefined, node => undefined}),
    maps:get(case By of name -> label; _ -> By end, Meta).

%% @doc The report in Format as iodata, or `{error, Reason}'.  Opts:
%% `by' (a grouping, default process; etf always holds processes),
%% `limit' (rows and columns of the heatmap, edges of the graph; default
%% 30 and 200), `hotspots' (findings shown in html).
-spec render(atom(), map(), map()) -> iodata() | {error, term()}.
render(csv, View, Opts) -> csv(ranked(View, Opts), labeller(View, Opts));
render(dot, View, Opts) -> dot(ranked(View, Opts), View, Opts);
render(json, View, Opts) -> json_encode(json_doc(ranked(View, Opts), View, Opts));
render(etf, View, _Opts) -> term_to_binary(dump(View));
render(svg, View, Opts) -> heatmap(View, Opts);
render(html, View, Opts) -> html(View, Opts);
render(Format, _View, _Opts) -> {error, {unknown_format, Format}}.

%% Grouped pairs, busiest first: [{SenderKey, ReceiverKey, Count, Rate}].
ranked(View, Opts) ->
    #{cells := Cells} = matrix(View, maps:get(by, Opts, process)),
    Rows = [{S, R, C, Rate} || {{S, R}, #{count := C, rate := Rate}} <- maps:to_list(Cells)],
    lists:sort(fun({_, _, A, _}, {_, _, B, _}) -> A >= B end, Rows).

%% fun(Key) -> {Text, Label}: for processes the endpoint as the VM gave it
%% and its label; for a group key its text, twice.
labeller(#{endpoints := Ends}, Opts) ->
    case maps:get(by, Opts, process) of
        process ->
            fun(E) ->
                    T = msgflow_fmt:endpoint(E),
                    {T, maps:get(label, maps:get(E, Ends, #{}), T)}
            end;
        _ ->
            fun(K) when is_binary(K) -> {K, K};
               (K) -> T = msgflow_fmt:endpoint(K), {T, T}
            end
    end.

%%% csv

csv(Rows, Text) ->
    [<<"sender,receiver,sender_label,receiver_label,messages,msg_per_s\n">>
     | [begin
            {SE, SL} = Text(S),
            {RE, RL} = Text(R),
            [lists:join(",", [csv_field(F) || F <- [SE, RE, SL, RL, integer_to_binary(C),
                                                    float_text(Rate)]]), "\n"]
        end || {S, R, C, Rate} <- Rows]].

csv_field(F) ->
    case binary:match(F, [<<",">>, <<"\"">>, <<"\n">>, <<"\r">>]) of
        nomatch -> F;
        _ -> [$", binary:replace(F, <<"\"">>, <<"\"\"">>, [global]), $"]
    end.

float_text(F) -> float_to_binary(float(F), [{decimals, 1}]).

%%% dot

dot(Rows0, View, Opts) ->
    Rows = lists:sublist(Rows0, maps:get(limit, Opts, 200)),
    By = maps:get(by, Opts, process),
    Text = labeller(View, Opts),
    Max = lists:max([1 | [C || {_, _, C, _} <- Rows]]),
    Nodes = lists:usort(lists:append([[S, R] || {S, R, _, _} <- Rows])),
    Ids = maps:from_list(lists:zip(Nodes, lists:seq(1, length(Nodes)))),
    ["digraph msgflow {\n",
     "  graph [rankdir=LR, fontname=\"Helvetica\", label=",
     dot_string(io_lib:format("msgflow on ~s, by ~s: ~s messages (top ~b edges)",
                              [maps:get(node, View), By,
                               msgflow_fmt:int(maps:get(events, View)), length(Rows)])),
     "];\n  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n"
     "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#b03a2e\"];\n",
     [["  n", integer_to_list(maps:get(N, Ids)), " [label=", dot_string(element(2, Text(N))),
       "];\n"] || N <- Nodes],
     [["  n", integer_to_list(maps:get(S, Ids)), " -> n", integer_to_list(maps:get(R, Ids)),
       io_lib:format(" [weight=~b, penwidth=~.2f, label=", [1 + (99 * C) div Max, width(C, Max)]),
       dot_string(msgflow_fmt:int(C)), "];\n"] || {S, R, C, _} <- Rows],
     "}\n"].

width(C, Max) -> 1 + 7 * math:log(1 + C) / math:log(1 + Max).

dot_string(T) ->
    B = unicode:characters_to_binary(T),
    [$", binary:replace(binary:replace(B, <<"\\">>, <<"\\\\">>, [global]),
                        <<"\"">>, <<"\\\"">>, [global]), $"].

%%% json

json_doc(Rows, View, Opts) ->
    Text = labeller(View, Opts),
    #{<<"format">> => <<"msgflow_report">>, <<"version">> => 1,
      <<"by">> => atom_to_binary(maps:get(by, Opts, process)),
      <<"node">> => atom_to_binary(maps:get(node, View)),
      <<"taken_at_ms">> => maps:get(taken_at, View),
      <<"window_ms">> => maps:get(window_ms, View),
      <<"estimated">> => maps:get(estimated, View),
      <<"messages">> => maps:get(events, View),
      <<"dead_letters">> => maps:get(dead_letters, View),
      <<"overflow">> => maps:get(overflow, View),
      <<"pairs">> => [begin
                          {SE, SL} = Text(S),
                          {RE, RL} = Text(R),
                          #{<<"sender">> => SE, <<"receiver">> => RE,
                            <<"sender_label">> => SL, <<"receiver_label">> => RL,
                            <<"messages">> => C, <<"msg_per_s">> => float(Rate)}
                      end || {S, R, C, Rate} <- Rows]}.

%% @doc JSON text of a term made of maps with binary keys, lists, binaries,
%% integers, floats and booleans: OTP's `json' module where present (OTP
%% 27+), else a small encoder for exactly those shapes here.
-spec json_encode(term()) -> iodata().
json_encode(Doc) ->
    case erlang:function_exported(json, encode, 1) orelse
         (code:ensure_loaded(json) =:= {module, json}) of
        true -> apply(json, encode, [Doc]);
        false -> json(Doc)
    end.

json(M) when is_map(M) ->
    ["{", lists:join(",", [[json(K), ":", json(V)] || {K, V} <- lists:sort(maps:to_list(M))]),
     "}"];
json(L) when is_list(L) -> ["[", lists:join(",", [json(X) || X <- L]), "]"];
json(true) -> "true";
json(false) -> "false";
json(null) -> "null";
json(I) when is_integer(I) -> integer_to_binary(I);
json(F) when is_float(F) -> float_to_binary(F, [short]);
json(A) when is_atom(A) -> json(atom_to_binary(A));
json(B) when is_binary(B) -> [$", json_escape(B), $"].

json_escape(B) ->
    [case C of
         $" -> "\\\"";
         $\\ -> "\\\\";
         $\n -> "\\n";
         $\r -> "\\r";
         $\t -> "\\t";
         _ when C < 16#20 -> io_lib:format("\\u~4.16.0b", [C]);
         _ -> <<C/utf8>>
     end || <<C/utf8>> <= B].

%%% etf

%% @doc The dump `export(Path, etf)' writes (term_to_binary of this map);
%% msgflow-report reads it.  Version 1:
%% ```
%% #{format => msgflow_dump, version => 1,
%%   node => node(), taken_at => SystemMs, started_at => SystemMs | undefined,
%%   running => boolean(), window_ms => Ms, scale => number(),
%%   events => N, dead_letters => N, overflow => N,
%%   endpoints => [{Endpoint, Label :: binary(), Module :: atom(),
%%                  Application :: atom(), Node :: atom()}],
%%   pairs => [{SenderIndex, ReceiverIndex, Messages, WindowMessages}]}
%% '''
%% Endpoint is a pid, port, atom, `{Name, Node}' or reference; Module and
%% Application are `undefined' when unknown.  Indexes count from 0 into
%% `endpoints'.  Messages are totals since start; WindowMessages those of
%% the last window (`window_ms' long): the rate is WindowMessages * 1000 /
%% window_ms * scale, where scale > 1 means sampling (an estimate).
-spec dump(map()) -> map().
dump(View = #{totals := Totals, recent := Recent, endpoints := Ends}) ->
    Order = maps:keys(Ends),
    Idx = maps:from_list(lists:zip(Order, lists:seq(0, length(Order) - 1))),
    #{format => msgflow_dump, version => ?DUMP_VERSION,
      node => maps:get(node, View), taken_at => maps:get(taken_at, View),
      started_at => maps:get(started_at, View), running => maps:get(running, View),
      window_ms => maps:get(window_ms, View), scale => maps:get(scale, View),
      events => maps:get(events, View), dead_letters => maps:get(dead_letters, View),
      overflow => maps:get(overflow, View),
      endpoints => [begin
                        #{label := L, module := M, application := A, node := N} =
                            maps:get(E, Ends),
                        {E, L, M, A, N}
                    end || E <- Order],
      pairs => [{maps:get(S, Idx), maps:get(R, Idx), C, maps:get({S, R}, Recent, 0)}
                || {{S, R}, C} <- lists:sort(maps:to_list(Totals))]}.

%%% svg heatmap

-define(CELL, 16).

heatmap(View, Opts) ->
    By = maps:get(by, Opts, process),
    Limit = maps:get(limit, Opts, 30),
    #{cells := Cells} = matrix(View, By),
    Sum = fun(Pos) -> maps:fold(fun(K, #{count := C}, Acc) -> bump(element(Pos, K), C, Acc) end,
                                #{}, Cells) end,
    Top = fun(M) -> [K || {K, _} <- lists:sublist(
                                       lists:sort(fun({_, A}, {_, B}) -> A >= B end,
                                                  maps:to_list(M)), Limit)] end,
    Rows = Top(Sum(1)),
    Cols = Top(Sum(2)),
    Max = lists:max([1 | [C || {{S, R}, #{count := C}} <- maps:to_list(Cells),
                               lists:member(S, Rows), lists:member(R, Cols)]]),
    Text = labeller(View, Opts),
    Name = fun(K) -> element(2, Text(K)) end,
    Lab = fun(K) -> string:trim(msgflow_fmt:cell(Name(K), 30, "..."), trailing) end,
    Left = 200,
    Topm = 190,
    W = Left + ?CELL * max(1, length(Cols)) + 120,
    H = Topm + ?CELL * max(1, length(Rows)) + 60,
    Ix = lists:zip(lists:seq(0, length(Rows) - 1), Rows),
    Jx = lists:zip(lists:seq(0, length(Cols) - 1), Cols),
    Title = io_lib:format("msgflow on ~s: messages by ~s (sender rows, receiver columns; "
                          "top ~b x ~b)", [maps:get(node, View), By, length(Rows), length(Cols)]),
    [io_lib:format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"~b\" height=\"~b\" "
                   "viewBox=\"0 0 ~b ~b\" font-family=\"Helvetica,Arial,sans-serif\" "
                   "font-size=\"10\" class=\"msgflow-heatmap\">\n", [W, H, W, H]),
     "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
     "<text x=\"4\" y=\"14\" font-size=\"12\">", xml(Title), "</text>\n",
     [io_lib:format("<text x=\"~b\" y=\"~b\" text-anchor=\"end\" class=\"row-label\">~s</text>\n",
                    [Left - 4, Topm + I * ?CELL + 12, xml(Lab(S))]) || {I, S} <- Ix],
     [io_lib:format("<text transform=\"translate(~b,~b) rotate(-60)\" class=\"col-label\">~s"
                    "</text>\n", [Left + J * ?CELL + 11, Topm - 4, xml(Lab(R))])
      || {J, R} <- Jx],
     [case maps:get({S, R}, Cells, undefined) of
          undefined -> [];
          #{count := C} ->
              io_lib:format("<rect class=\"cell\" x=\"~b\" y=\"~b\" width=\"~b\" height=\"~b\" "
                            "fill=\"~s\" data-count=\"~b\"><title>~s -> ~s: ~s messages</title>"
                            "</rect>\n",
                            [Left + J * ?CELL, Topm + I * ?CELL, ?CELL - 1, ?CELL - 1,
                             colour(C, Max), C, xml(Name(S)), xml(Name(R)),
                             msgflow_fmt:int(C)])
      end || {I, S} <- Ix, {J, R} <- Jx],
     legend(Left + ?CELL * max(1, length(Cols)) + 20, Topm, Max),
     "</svg>\n"].

%% White (few) to dark red (most), on a log scale.
colour(C, Max) ->
    T = math:log(1 + C) / math:log(1 + Max),
    {R, G, B} = if T < 0.5 -> mix({255, 247, 188}, {254, 153, 41}, T * 2);
                   true -> mix({254, 153, 41}, {153, 0, 13}, (T - 0.5) * 2)
                end,
    io_lib:format("#~2.16.0b~2.16.0b~2.16.0b", [R, G, B]).

mix({R1, G1, B1}, {R2, G2, B2}, T) ->
    {round(R1 + (R2 - R1) * T), round(G1 + (G2 - G1) * T), round(B1 + (B2 - B1) * T)}.

legend(X, Y, Max) ->
    Steps = 10,
    ["<g class=\"legend\">",
     io_lib:format("<text x=\"~b\" y=\"~b\">messages</text>", [X, Y - 6]),
     [io_lib:format("<rect x=\"~b\" y=\"~b\" width=\"14\" height=\"12\" fill=\"~s\"/>",
                    [X, Y + (Steps - I) * 12, colour(V, Max)])
      || I <- lists:seq(0, Steps), V <- [round(math:pow(1 + Max, I / Steps)) - 1]],
     io_lib:format("<text x=\"~b\" y=\"~b\">~s</text>", [X + 18, Y + 10, msgflow_fmt:int(Max)]),
     io_lib:format("<text x=\"~b\" y=\"~b\">0</text>", [X + 18, Y + Steps * 12 + 10]),
     "</g>\n"].

xml(T) ->
    B = unicode:characters_to_binary(T),
    lists:foldl(fun({F, R}, Acc) -> binary:replace(Acc, F, R, [global]) end, B,
                [{<<"&">>, <<"&amp;">>}, {<<"<">>, <<"&lt;">>}, {<<">">>, <<"&gt;">>},
                 {<<"\"">>, <<"&quot;">>}]).

%%% html

html(View, Opts) ->
    Hot = maps:get(hotspots, Opts, []),
    Rows = lists:sublist(ranked(View, Opts#{by => process}), 20),
    Text = labeller(View, #{by => process}),
    By = maps:get(by, Opts, process),
    ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n",
     "<title>msgflow report: ", xml(atom_to_list(maps:get(node, View))), "</title>\n",
     "<style>body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;color:#222}"
     "table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
     "td.n{text-align:right;font-variant-numeric:tabular-nums}"
     "section{margin-bottom:2em}.graph svg{max-width:100%;height:auto}</style>\n",
     "</head><body>\n<h1>msgflow report</h1>\n",
     io_lib:format("<p>Node <b>~s</b>: ~s messages between ~s pairs, ~s dead letters; "
                   "rates over the last ~s ms window~s.</p>\n",
                   [xml(atom_to_list(maps:get(node, View))),
                    msgflow_fmt:int(maps:get(events, View)),
                    msgflow_fmt:int(map_size(maps:get(totals, View))),
                    msgflow_fmt:int(maps:get(dead_letters, View)),
                    msgflow_fmt:int(maps:get(window_ms, View)),
                    case maps:get(estimated, View) of
                        true -> " (sampled: rates are estimates)";
                        false -> ""
                    end]),
     "<section id=\"heatmap\"><h2>Communication matrix by ", atom_to_list(By), "</h2>\n",
     heatmap(View, Opts), "</section>\n",
     "<section id=\"top\"><h2>Top pairs</h2>\n<table><tr><th>#</th><th>sender</th>"
     "<th>receiver</th><th>messages</th><th>msg/s</th></tr>\n",
     [io_lib:format("<tr><td class=\"n\">~b</td><td>~s</td><td>~s</td><td class=\"n\">~s</td>"
                    "<td class=\"n\">~s</td></tr>\n",
                    [I, xml(element(2, Text(S))), xml(element(2, Text(R))),
                     msgflow_fmt:int(C), msgflow_fmt:rate(Rate)])
      || {I, {S, R, C, Rate}} <- lists:zip(lists:seq(1, length(Rows)), Rows)],
     "</table></section>\n",
     "<section id=\"hotspots\"><h2>Hotspots</h2>\n",
     case Hot of
         [] -> "<p>No findings.</p>\n";
         _ -> ["<ul>\n", [["<li><b>", atom_to_list(K), "</b> ", xml(E), "</li>\n"]
                          || #{kind := K, explanation := E} <- Hot], "</ul>\n"]
     end,
     "</section>\n<section id=\"graph\" class=\"graph\"><h2>Graph</h2>\n",
     graph_svg(View, Opts), "</section>\n</body></html>\n"].

%% The graph laid out by Graphviz, inline; a note when dot is missing.
graph_svg(View, Opts) ->
    case os:find_executable("dot") of
        false ->
            "<p>Graphviz (dot) is not installed: no graph.</p>\n";
        Dot ->
            Tmp = filename:join(tmp_dir(), "msgflow-" ++ integer_to_list(erlang:unique_integer(
                                                                          [positive])) ++ ".dot"),
            ok = file:write_file(Tmp, dot(ranked(View, Opts), View,
                                          Opts#{limit => maps:get(graph_limit, Opts, 60)})),
            Port = open_port({spawn_executable, Dot},
                             [{args, ["-Tsvg", Tmp]}, binary, exit_status, use_stdio,
                              stderr_to_stdout]),
            Out = collect(Port, []),
            _ = file:delete(Tmp),
            case Out of
                {0, Svg} ->
                    case binary:match(Svg, <<"<svg">>) of
                        {Pos, _} -> binary:part(Svg, Pos, byte_size(Svg) - Pos);
                        nomatch -> "<p>dot gave no SVG.</p>\n"
                    end;
                {Status, Msg} ->
                    ["<p>dot failed (", integer_to_list(Status), "): ", xml(Msg), "</p>\n"]
            end
    end.

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [D | Acc]);
        {Port, {exit_status, S}} -> {S, iolist_to_binary(lists:reverse(Acc))}
    end.

tmp_dir() ->
    case os:getenv("TMPDIR") of
        false -> "/tmp";
        "" -> "/tmp";
        D -> D
    end.

%%% helpers

bump(K, N, M) ->
    case M of
        #{K := V} -> M#{K := V + N};
        _ -> M#{K => N}
    end.

%% @doc Messages/s of C messages in a window of Ms ms, times Scale (the
%% sampling factor, 1 when not sampling); 0.0 for an empty window.
-spec rate(non_neg_integer(), non_neg_integer(), number()) -> float().
rate(_, 0, _) -> 0.0;
rate(C, Ms, Scale) -> Scale * C * 1000 / Ms.
