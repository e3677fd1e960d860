%%% @doc Renderers of request flows (msgflow_flow's views): a text
%%% sequence diagram for the shell, a Mermaid `sequenceDiagram', an inline
%%% SVG sequence diagram and an HTML section for the report.  Pure
%%% functions of a Flow or Summaries; they read nothing else.
-module(msgflow_flow_render).

-export([text/1, mermaid/1, html/2]).

-define(COL, 12).          %% text: columns between two lifelines
-define(TEXT_LANES, 8).    %% text: lifelines at most, else a list
-define(SVG_EVENTS, 300).  %% svg: events drawn at most
-define(SVG_LANES, 16).    %% svg: lifelines at most
-define(SVG_LANE_W, 150). %% svg: width of a lane (px)
-define(SVG_X0, 75).      %% svg: the first lifeline's x (px)
-define(SVG_TOP, 50).     %% svg: the first arrow's y (px)
-define(SVG_STEP, 22).    %% svg: px between arrows

%% @doc A Flow as text: a header (messages, processes, depth, duration),
%% a legend of the processes with their labels, then one row per event in
%% causal order, microseconds since the first, depth, and an arrow between
%% lifelines (a list when more than 8 processes took part), and the pairs.
-spec text(msgflow_flow_view:flow()) -> iodata().
text(Flow = #{label := Label, messages := M, processes := Procs, depth := D,
              duration_us := Us, events := Evs, dropped := Dropped, pairs := Pairs}) ->
    Lanes = lanes(Flow),
    Letters = maps:from_list(lists:zip(Lanes, letters(length(Lanes)))),
    Head = io_lib:format("flow ~0tp: ~s messages between ~b processes, depth ~b, ~s ms~n",
                         [Label, msgflow_fmt:int(M), length(Procs), D,
                          float_to_list(Us / 1000, [{decimals, 3}])]),
    Legend = [io_lib:format("  ~-3s ~-16s ~ts~n", [maps:get(P, Letters), msgflow_fmt:endpoint(P),
                                                   label(Flow, P)]) || P <- Lanes],
    Rows = case length(Lanes) =< ?TEXT_LANES of
               true -> [lanes_header(Lanes, Letters) | [lane_row(E, Lanes) || E <- Evs]];
               false -> [io_lib:format("~10s ~5s  ~s~n", ["us", "depth", "send"]) |
                         [io_lib:format("~10b ~5b  ~s -> ~s  ~ts~n",
                                        [At, Dp, maps:get(F, Letters), maps:get(T, Letters),
                                         ev_kind(E)])
                          || E = #{at_us := At, depth := Dp, from := F, to := T} <- Evs]]
           end,
    More = case {Evs, Dropped} of
               {_, 0} -> [];
               _ -> io_lib:format("  ... ~s more sends not kept (max_events)~n",
                                  [msgflow_fmt:int(Dropped)])
           end,
    PairLines = [io_lib:format("  ~-3s -> ~-3s ~s~n", [maps:get(S, Letters), maps:get(R, Letters),
                                                      msgflow_fmt:int(N)])
                 || {S, R, N} <- Pairs],
    [Head, Legend, Rows, More, "pairs (messages):\n", PairLines].

%% Every endpoint of the flow, in the order the events first show them.
lanes(#{events := Evs, processes := Procs}) ->
    Seen = lists:foldl(fun(#{from := F, to := T}, Acc) -> add_new(T, add_new(F, Acc)) end,
                       [], Evs),
    lists:foldl(fun add_new/2, Seen, Procs).

add_new(X, L) ->
    case lists:member(X, L) of
        true -> L;
        false -> L ++ [X]
    end.

letters(N) ->
    [if I < 26 -> [$A + I]; true -> [$A + I div 26 - 1, $A + I rem 26] end
     || I <- lists:seq(0, N - 1)].

label(#{labels := Ls}, P) ->
    maps:get(P, Ls, msgflow_fmt:endpoint(P)).

lanes_header(Lanes, Letters) ->
    Line = lists:foldl(fun({I, P}, Acc) -> put_at(Acc, I * ?COL, maps:get(P, Letters)) end,
                       blank(length(Lanes)), lists:zip(lists:seq(0, length(Lanes) - 1), Lanes)),
    [io_lib:format("~10s ~5s  ", ["us", "depth"]), string:trim(Line, trailing), "\n"].

%% An event's kind and tag as its arrow's label: `call get', `reply ok'.
ev_kind(E) ->
    msgflow_fmt:kind(maps:get(kind, E, none), maps:get(tag, E, none)).

lane_row(E = #{at_us := At, depth := D, from := F, to := T, serial := {P, C}}, Lanes) ->
    I = index(F, Lanes),
    J = index(T, Lanes),
    Base = lists:foldl(fun(K, Acc) -> put_at(Acc, K * ?COL, "|") end, blank(length(Lanes)),
                       lists:seq(0, length(Lanes) - 1)),
    Arrow = if
                I < J -> put_at(put_at(Base, I * ?COL + 1, lists:duplicate((J - I) * ?COL - 2, $-)),
                                J * ?COL - 1, ">");
                I > J -> put_at(put_at(Base, J * ?COL + 1, "<"), J * ?COL + 2,
                                lists:duplicate((I - J) * ?COL - 2, $-));
                true -> put_at(Base, I * ?COL + 1, "<-'")
            end,
    [io_lib:format("~10b ~5b  ", [At, D]), string:trim(Arrow, trailing),
     io_lib:format("  ~ts {~b,~b}~n", [ev_kind(E), P, C])].

index(X, L) -> index(X, L, 0).
index(X, [X | _], I) -> I;
index(X, [_ | T], I) -> index(X, T, I + 1).

blank(N) -> lists:duplicate((N - 1) * ?COL + 4, $\s).

put_at(Line, Pos, Text) ->
    {A, B} = lists:split(Pos, Line),
    A ++ Text ++ lists:nthtail(min(length(Text), length(B)), B).

%% @doc A Flow as a Mermaid `sequenceDiagram': one participant per
%% process (its label and pid), one message per event in causal order,
%% labelled with its kind and tag, depth and serial: `call get (d1 s0-1)'.
-spec mermaid(msgflow_flow_view:flow()) -> iodata().
mermaid(Flow = #{label := Label, events := Evs, messages := M, dropped := Dropped}) ->
    Lanes = lanes(Flow),
    Ids = maps:from_list(lists:zip(Lanes, ["P" ++ integer_to_list(I)
                                           || I <- lists:seq(1, length(Lanes))])),
    utf8(["sequenceDiagram\n",
     io_lib:format("    %% msgflow flow ~s: ~b messages~n",
                   [mermaid_text(io_lib:format("~0tp", [Label])), M]),
     [["    participant ", maps:get(P, Ids), " as ",
       mermaid_text([label(Flow, P), " ", msgflow_fmt:endpoint(P)]), "\n"] || P <- Lanes],
     [io_lib:format("    ~s->>~s: ~ts (d~b s~b-~b)~n",
                    [maps:get(F, Ids), maps:get(T, Ids), mermaid_text(ev_kind(E)), D, P, C])
      || E = #{from := F, to := T, depth := D, serial := {P, C}} <- Evs],
     case Dropped of
         0 -> [];
         _ -> io_lib:format("    Note over ~s: ~b more sends not kept~n",
                            [maps:get(hd(Lanes), Ids), Dropped])
     end]).

%% Labels are Unicode: io_lib:format's ~ts gives code points, which only
%% a UTF-8 binary carries into a file.
utf8(Chars) ->
    unicode:characters_to_binary(Chars).

%% Mermaid's entity codes for what its parser reads as markup.
mermaid_text(T) ->
    lists:flatmap(fun($<) -> "#lt;";
                     ($>) -> "#gt;";
                     ($#) -> "#35;";
                     ($;) -> "#59;";
                     ($:) -> "#58;";
                     ($\n) -> " ";
                     (C) -> [C]
                  end, unicode:characters_to_list(iolist_to_binary(T))).

%% @doc A Flow as an inline SVG sequence diagram: a lifeline per process
%% (16 at most; the rest share the last), an arrow per event in causal
%% order (the first 300).
-spec svg(msgflow_flow_view:flow()) -> iodata().
svg(Flow = #{events := Evs0}) ->
    {Lanes, Lane} = svg_lanes(lanes(Flow)),
    Evs = lists:sublist(Evs0, ?SVG_EVENTS),
    X = fun(P) -> ?SVG_X0 + ?SVG_LANE_W * index(Lane(P), Lanes) end,
    H = ?SVG_TOP + ?SVG_STEP * (length(Evs) + 1),
    utf8([io_lib:format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"~b\" height=\"~b\" "
                   "font-family=\"Helvetica,Arial,sans-serif\" font-size=\"11\">\n"
                   "<defs><marker id=\"mfa\" markerWidth=\"8\" markerHeight=\"8\" refX=\"7\" "
                   "refY=\"4\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#b03a2e\"/>"
                   "</marker></defs>\n", [?SVG_LANE_W * length(Lanes), H]),
          [svg_lifeline(Flow, I, P, H) || {I, P} <- lists:enumerate(0, Lanes)],
          [svg_arrow(?SVG_TOP + ?SVG_STEP * K, X(F), X(T), Ev)
           || {K, Ev = #{from := F, to := T}} <- lists:enumerate(Evs)],
          "</svg>\n"]).

%% The lanes drawn, ?SVG_LANES at most (the rest share the last, `others'),
%% and the lane of a process.
svg_lanes(Lanes) when length(Lanes) > ?SVG_LANES ->
    Kept = lists:sublist(Lanes, ?SVG_LANES - 1),
    {Kept ++ [others], fun(P) -> case lists:member(P, Kept) of
                                     true -> P;
                                     false -> others
                                 end end};
svg_lanes(Lanes) ->
    {Lanes, fun(P) -> P end}.

%% Lane I's box (label, endpoint) and dashed lifeline down to H.
svg_lifeline(Flow, I, P, H) ->
    Cx = ?SVG_X0 + ?SVG_LANE_W * I,
    Name = case P of others -> <<"others">>; _ -> label(Flow, P) end,
    io_lib:format("<rect x=\"~b\" y=\"5\" width=\"~b\" height=\"30\" rx=\"4\" fill=\"#eef\" "
                  "stroke=\"#669\"/><text x=\"~b\" y=\"18\" text-anchor=\"middle\">~ts</text>"
                  "<text x=\"~b\" y=\"31\" text-anchor=\"middle\" fill=\"#666\">~ts</text>\n"
                  "<line x1=\"~b\" y1=\"35\" x2=\"~b\" y2=\"~b\" stroke=\"#999\" "
                  "stroke-dasharray=\"4,3\"/>\n",
                  [Cx - 70, 140, Cx, msgflow_fmt:xml(shorten(Name, 22)), Cx,
                   msgflow_fmt:xml(case P of others -> <<>>; _ -> msgflow_fmt:endpoint(P) end),
                   Cx, Cx, H]).

%% One event's arrow at height Y from X1 to X2 (a loop when both are one
%% lane), labelled with its kind and tag, depth and serial.
svg_arrow(Y, X, X, _Ev) ->
    io_lib:format("<path d=\"M~b,~b h25 v8 h-22\" fill=\"none\" stroke=\"#b03a2e\" "
                  "marker-end=\"url(#mfa)\"/>\n", [X, Y - 4]);
svg_arrow(Y, X1, X2, E = #{depth := D, serial := {P, C}}) ->
    io_lib:format("<line x1=\"~b\" y1=\"~b\" x2=\"~b\" y2=\"~b\" stroke=\"#b03a2e\" "
                  "marker-end=\"url(#mfa)\"/><text x=\"~b\" y=\"~b\" "
                  "text-anchor=\"middle\" fill=\"#444\">~ts <tspan fill=\"#999\">d~b {~b,~b}"
                  "</tspan></text>\n",
                  [X1, Y, X2 - sign(X2 - X1) * 2, Y, (X1 + X2) div 2, Y - 3,
                   msgflow_fmt:xml(ev_kind(E)), D, P, C]).

sign(N) when N > 0 -> 1;
sign(_) -> -1.

shorten(B, N) ->
    S = unicode:characters_to_list(B),
    case length(S) > N of
        true -> lists:sublist(S, N - 1) ++ "…";
        false -> S
    end.

%% @doc The report's flows section: a table of the follow_calls/2
%% summaries and the last follow/2 flow, with that flow as a sequence
%% diagram.  Empty when there are none.
-spec html([msgflow_flow_view:summary()], msgflow_flow_view:flow() | undefined) -> iodata().
html([], undefined) ->
    [];
html(Summaries, Last) ->
    utf8(["<section id=\"flows\"><h2>Request flows</h2>\n",
     "<table><tr><th>entry</th><th>requests</th><th>calls</th><th>messages</th>"
     "<th>per request</th><th>depth</th><th>busiest pair</th></tr>\n",
     [io_lib:format("<tr><td>~ts</td><td class=\"n\">~s</td><td class=\"n\">~s</td>"
                    "<td class=\"n\">~s</td><td class=\"n\">~.1f</td><td class=\"n\">~b~s</td>"
                    "<td>~ts</td></tr>\n",
                    [msgflow_fmt:xml(msgflow_fmt:mfa(M, F, A)), msgflow_fmt:int(Rq), msgflow_fmt:int(Calls),
                     msgflow_fmt:int(Msgs), float(Per), D, case X of true -> ""; false -> "+" end,
                     case Pairs of
                         [{S, R, N} | _] -> msgflow_fmt:xml([S, " → ", R, " (", msgflow_fmt:int(N), ")"]);
                         [] -> ""
                     end])
      || #{entry := {M, F, A}, requests := Rq, calls := Calls, messages := Msgs,
           per_request := Per, depth := D, depth_exact := X, pairs := Pairs} <- Summaries],
     case Last of
         undefined ->
             [];
         #{label := L, messages := Msgs, processes := Ps, depth := D} ->
             io_lib:format("<tr><td>follow ~ts</td><td class=\"n\">1</td><td></td>"
                           "<td class=\"n\">~s</td><td class=\"n\">~s</td><td class=\"n\">~b</td>"
                           "<td>~b processes</td></tr>\n",
                           [msgflow_fmt:xml(io_lib:format("~0tp", [L])), msgflow_fmt:int(Msgs),
                            msgflow_fmt:int(Msgs), D, length(Ps)])
     end,
     "</table>\n",
     case Last of
         undefined -> [];
         _ -> ["<h3>Last followed request</h3>\n<div class=\"graph\">", svg(Last), "</div>\n"]
     end,
     "</section>\n"]).
