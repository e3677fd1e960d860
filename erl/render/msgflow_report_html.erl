%%% @doc The HTML report: one self-contained page with the heatmap, the
%%% busiest pairs and their rates, the hotspots, the request flows and the
%%% graph, laid out by Graphviz's `dot' when it is installed (run as a
%%% port, with a time limit).  Rendered from views (msgflow_view);
%%% msgflow_report:render/3 calls it.
-module(msgflow_report_html).
-export([views/2, html/2]).

-define(GRAPH_EDGES, 60).   %% edges of the graph

%% @doc The views the report reads, for export options Opts (`by',
%% `limit'): `rows' (grouped by By, with a heatmap of `limit' keys),
%% `top' (the 20 busiest pairs with their kept windows) and `hotspots'
%% (what msgflow_hotspots reads).
-spec views(msgflow_view:grouping(), map()) -> #{atom() => msgflow_view:spec()}.
views(By, Opts) ->
    #{rows => #{by => By, heatmap => maps:get(limit, Opts, 30), labelled => ?GRAPH_EDGES},
      top => #{by => process, limit => 20, windows => 1000000},
      hotspots => msgflow_hotspots:spec(#{})}.

%% @doc The HTML report from the views views/2 named (`rows', `top',
%% `hotspots') and render options (`hotspots' findings, `flows'); `{error,
%% {Reason, TmpFile}}' when Graphviz's input cannot be written.
-spec html(#{atom() => msgflow_view:view()}, map()) -> iodata() | {error, term()}.
html(Views = #{rows := View = #{by := By}, top := TopView}, Opts) ->
    case graph_svg(View, Opts) of
        {error, _} = E -> E;
        Graph -> html(Views, View, By, TopView, Graph, Opts)
    end.

html(_Views, View, By, TopView, Graph, Opts) ->
    Hot = maps:get(hotspots, Opts, []),
    {Summaries, LastFlow} = maps:get(flows, Opts, {[], undefined}),
    Node = msgflow_fmt:xml(atom_to_list(maps:get(node, View))),
    ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n",
     "<title>msgflow report: ", Node, "</title>\n",
     "<style>body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;color:#222}"
     "table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
     "td.n{text-align:right;font-variant-numeric:tabular-nums}"
     "section{margin-bottom:2em}.graph svg{max-width:100%;height:auto}</style>\n",
     "</head><body>\n<h1>msgflow report</h1>\n",
     summary(Node, View),
     "<section id=\"heatmap\"><h2>Communication matrix by ", atom_to_list(By), "</h2>\n",
     msgflow_report:heatmap(View, Opts), "</section>\n",
     top_table(TopView),
     "<section id=\"rates\"><h2>Messages/s of the busiest pairs</h2>\n",
     chart(TopView), "</section>\n",
     hotspots(Hot),
     msgflow_flow_render:html(Summaries, LastFlow),
     "<section id=\"graph\" class=\"graph\"><h2>Graph</h2>\n",
     Graph, "</section>\n</body></html>\n"].

%% The sentence under the title: totals and the window.
summary(Node, View) ->
    io_lib:format("<p>Node <b>~s</b>: ~s messages between ~s pairs, ~s dead letters; "
                  "rates over the last ~s ms window~s.</p>\n",
                  [Node, msgflow_fmt:int(maps:get(events, View)),
                   msgflow_fmt:int(maps:get(pairs, View)),
                   msgflow_fmt:int(maps:get(dead_letters, View)),
                   msgflow_fmt:int(maps:get(window_ms, View)),
                   case maps:get(estimated, View) of
                       true -> " (sampled: rates are estimates)";
                       false -> ""
                   end]).

%% The top view's rows as a table; `kinds' the row's three main kinds and
%% tags with their shares (all of them in its title).
top_table(TopView = #{rows := Top}) ->
    ["<section id=\"top\"><h2>Top pairs</h2>\n<table><tr><th>#</th><th>sender</th>"
     "<th>receiver</th><th>messages</th><th>msg/s</th><th>mean msg/s</th>"
     "<th>peak msg/s</th><th>kinds</th></tr>\n",
     [io_lib:format("<tr><td class=\"n\">~b</td><td>~s</td><td>~s</td><td class=\"n\">~s</td>"
                    "<td class=\"n\">~s</td><td class=\"n\">~s</td><td class=\"n\">~s</td>"
                    "<td class=\"kinds\" title=\"~s\">~s</td></tr>\n",
                    [I, msgflow_fmt:xml(element(2, msgflow_report:texts(TopView, S))),
                     msgflow_fmt:xml(element(2, msgflow_report:texts(TopView, R))),
                     msgflow_fmt:int(C), msgflow_fmt:rate(Rate), msgflow_fmt:rate(Mean),
                     msgflow_fmt:rate(Peak), msgflow_fmt:xml(kind_shares(Ks, C)),
                     msgflow_fmt:xml(kind_shares(lists:sublist(Ks, 3), C))])
      || {I, Row = #{sender := S, receiver := R, count := C, rate := Rate, mean_rate := Mean,
                     peak_rate := Peak}} <- lists:enumerate(Top),
         Ks <- [maps:get(kinds, Row, [])]],
     "</table></section>\n"].

%% `call get 92%, cast add 8%'; `-' with kinds off.
kind_shares([], _) ->
    "-";
kind_shares(Ks, Total) ->
    lists:join(", ", [[msgflow_fmt:kind(K, T), io_lib:format(" ~b%", [round(100 * N / max(1, Total))])]
                      || {K, T, N} <- Ks]).

hotspots(Hot) ->
    ["<section id=\"hotspots\"><h2>Hotspots</h2>\n",
     case Hot of
         [] -> "<p>No findings.</p>\n";
         _ -> ["<ul>\n", [["<li><b>", atom_to_list(K), "</b> ", msgflow_fmt:xml(E), "</li>\n"]
                          || #{kind := K, explanation := E} <- Hot], "</ul>\n"]
     end,
     "</section>\n"].

-define(CHART_PAIRS, 5).
-define(CHART_COLOURS, ["#b03a2e", "#1f618d", "#239b56", "#b7950b", "#6c3483"]).

%% A line chart (inline SVG) of messages/s per kept window for the
%% busiest pairs of a view built with per-window counts.
chart(View = #{rows := Rows0, windows := Ws, scale := Scale}) ->
    Rows = lists:sublist([R || R = #{windows := _} <- Rows0], ?CHART_PAIRS),
    case {Rows, length(Ws)} of
        {[], _} -> "<p>No closed window yet.</p>\n";
        {_, 0} -> "<p>No closed window yet.</p>\n";
        {_, NW} ->
            Rates = [[msgflow_rate:per_s(C, D, Scale) || {C, #{window_ms := D}} <- lists:zip(Cs, Ws)]
                     || #{windows := Cs} <- Rows],
            Max = lists:max([1.0 | lists:append(Rates)]),
            {Wd, Ht, L, T} = {640, 200, 60, 10},
            X = fun(I) -> L + case NW of 1 -> 0; _ -> (I - 1) * (Wd - L - 10) / (NW - 1) end end,
            Y = fun(V) -> T + (Ht - T - 30) * (1 - V / Max) end,
            [io_lib:format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"~b\" "
                           "height=\"~b\" class=\"msgflow-rates\" font-size=\"10\" "
                           "font-family=\"Helvetica,Arial,sans-serif\">\n", [Wd, Ht + 18 * length(Rows)]),
             io_lib:format("<line x1=\"~b\" y1=\"~b\" x2=\"~b\" y2=\"~b\" stroke=\"#888\"/>"
                           "<text x=\"~b\" y=\"~b\" text-anchor=\"end\">~s</text>"
                           "<text x=\"~b\" y=\"~b\" text-anchor=\"end\">0</text>"
                           "<text x=\"~b\" y=\"~b\">~b windows, oldest left</text>\n",
                           [L, Ht - 30, Wd - 10, Ht - 30, L - 4, T + 8, msgflow_fmt:rate(Max),
                            L - 4, Ht - 30, L, Ht - 14, NW]),
             [[io_lib:format("<polyline class=\"series\" fill=\"none\" stroke=\"~s\" "
                             "stroke-width=\"1.5\" points=\"~s\"/>\n",
                             [Colour, lists:join(" ", [io_lib:format("~.1f,~.1f", [float(X(I)), float(Y(V))])
                                                       || {I, V} <- lists:zip(lists:seq(1, NW), Rs)])]),
               io_lib:format("<text x=\"~b\" y=\"~b\" fill=\"~s\">~s</text>\n",
                             [L, Ht + 18 * J - 4, Colour,
                              msgflow_fmt:xml([element(2, msgflow_report:texts(View, S)), " -> ", element(2, msgflow_report:texts(View, R))])])]
              || {{J, Colour}, Rs, #{sender := S, receiver := R}}
                     <- lists:zip3(lists:zip(lists:seq(1, length(Rows)),
                                             lists:sublist(?CHART_COLOURS, length(Rows))),
                                   Rates, Rows)],
             "</svg>\n"]
    end.

-define(DOT_TIMEOUT, 30000).

%% The graph laid out by Graphviz, inline, of the busiest ?GRAPH_EDGES
%% rows; a note when dot is missing, fails or takes longer than
%% ?DOT_TIMEOUT ms; `{error, {Reason, TmpFile}}' when its input cannot be
%% written.
graph_svg(View = #{rows := Rows}, _Opts) ->
    case os:find_executable("dot") of
        false ->
            "<p>Graphviz (dot) is not installed: no graph.</p>\n";
        Dot ->
            Tmp = filename:join(tmp_dir(), "msgflow-" ++ integer_to_list(erlang:unique_integer(
                                                                          [positive])) ++ ".dot"),
            Limited = View#{rows := lists:sublist(Rows, ?GRAPH_EDGES)},
            case file:write_file(Tmp, msgflow_report:dot(Limited, #{limit => length(Rows)})) of
                ok -> run_dot(Dot, Tmp);
                {error, R} -> {error, {R, Tmp}}
            end
    end.

run_dot(Dot, Tmp) ->
    Port = open_port({spawn_executable, Dot},
                     [{args, ["-Tsvg", Tmp]}, binary, exit_status, use_stdio, stderr_to_stdout]),
    Out = collect(Port, [], erlang:monotonic_time(millisecond) + ?DOT_TIMEOUT),
    _ = file:delete(Tmp),
    case Out of
        {0, Svg} ->
            case binary:match(Svg, <<"<svg">>) of
                {Pos, _} -> binary:part(Svg, Pos, byte_size(Svg) - Pos);
                nomatch -> "<p>dot gave no SVG.</p>\n"
            end;
        timeout ->
            io_lib:format("<p>dot took longer than ~b ms: no graph.</p>\n", [?DOT_TIMEOUT]);
        {Status, Msg} ->
            ["<p>dot failed (", integer_to_list(Status), "): ", msgflow_fmt:xml(Msg), "</p>\n"]
    end.

collect(Port, Acc, Until) ->
    receive
        {Port, {data, D}} -> collect(Port, [D | Acc], Until);
        {Port, {exit_status, S}} -> {S, iolist_to_binary(lists:reverse(Acc))}
    after max(0, Until - erlang:monotonic_time(millisecond)) ->
        {os_pid, OsPid} = erlang:port_info(Port, os_pid),
        _ = os:cmd("kill -9 " ++ integer_to_list(OsPid)),
        catch port_close(Port),
        timeout
    end.

tmp_dir() ->
    case os:getenv("TMPDIR") of
        false -> "/tmp";
        "" -> "/tmp";
        D -> D
    end.
