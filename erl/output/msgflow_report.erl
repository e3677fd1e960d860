%%% @doc The report formats of the counts, rendered from view values:
%%% CSV, JSON and Graphviz DOT from a `top' view's rows (every row, by
%%% any grouping; msgflow_top_view), the SVG heatmap from a `matrix' view
%%% (msgflow_matrix_view), and the JSON encoder every JSON document of
%%% msgflow's goes through.  The ETF dump is msgflow_dump's, the HTML page
%%% msgflow_web_page's.  Pure functions.
-module(msgflow_report).
-export([formats/0, csv/2, dot/2, json/2, heatmap/1, json_encode/1, json_fallback/1]).

%% @doc The export formats of the counts.
-spec formats() -> [atom()].
formats() -> [csv, dot, json, etf, svg, html].

%% {Text, Display} of a row's key: for processes the endpoint as the VM
%% gave it and its label (with the text beside a repeated label); for a
%% group key its text, twice.
texts(View, K) ->
    {msgflow_rows:text(View, K), msgflow_rows:display(View, K)}.

%%% csv

%% @doc The CSV of a `top' view's rows: sender, receiver (as the VM
%% writes them, or the group's key), their labels, messages since start,
%% messages/s over the last window, kinds (`call:get=41 cast:add=30') and,
%% with a calls view of the same grouping (process or name), each row's
%% round trips by tag (`get:38:2100': p50 and p99 in µs).
-spec csv(msgflow_rows:view(), msgflow_calls_view:view() | none) -> iodata().
csv(View = #{rows := Rows}, Calls) ->
    Rtt = call_rtt(View, Calls),
    [<<"sender,receiver,sender_label,receiver_label,messages,msg_per_s,kinds,call_rtt_us,bytes\n">>
     | [begin
            {SE, SL} = texts(View, S),
            {RE, RL} = texts(View, R),
            [lists:join(",", [csv_field(F) || F <- [SE, RE, SL, RL, integer_to_binary(C),
                                                    float_text(Rate),
                                                    kinds_text(maps:get(kinds, Row, [])),
                                                    maps:get({S, R}, Rtt, <<>>),
                                                    case Row of
                                                        #{bytes := B} -> integer_to_binary(floor(B + 0.5));
                                                        _ -> <<>>
                                                    end]]),
             "\n"]
        end || Row = #{sender := S, receiver := R, count := C, rate := Rate} <- Rows]].

%% Each row's call round trips in one CSV field (Calls: a calls view of
%% the same grouping, process or name): `Tag:P50:P99' in µs, rounded, for
%% each tag of its call edges with any, by tag: `get:38:2100 put:90:4200'.
call_rtt(_, none) ->
    #{};
call_rtt(#{by := By}, #{by := By, entries := Es}) when By =:= process; By =:= name ->
    ByPair = lists:foldl(fun(#{caller := C, server := S, tag := T, p50 := P50, p99 := P99}, Acc)
                               when P50 =/= undefined ->
                                 maps:update_with({C, S}, fun(L) -> [{T, P50, P99} | L] end,
                                                  [{T, P50, P99}], Acc);
                            (_, Acc) -> Acc
                         end, #{}, Es),
    maps:map(fun(_, L) ->
                     iolist_to_binary(lists:join(" ", [[msgflow_fmt:name(T), ":", us(P50), ":", us(P99)]
                                                       || {T, P50, P99} <- lists:sort(L)]))
             end, ByPair);
call_rtt(_, _) ->
    #{}.

%% µs as the dump's ns rounded to µs: round(ns) then (ns + 500) div 1000
us(Us) -> integer_to_list((round(Us * 1000) + 500) div 1000).

%% A row's kinds in one CSV field, most first: `call:get=41 cast:add=30'
%% (empty with kinds off).
kinds_text(Ks) ->
    iolist_to_binary(lists:join(" ", [[msgflow_fmt:name(K), ":", msgflow_fmt:name(T), "=",
                                       integer_to_binary(N)] || {K, T, N} <- Ks])).

%% A field quoted when it must be; a text a spreadsheet would read as a
%% formula (it starts with =, +, -, @, a tab or a carriage return, and is
%% no number) gets a leading ' first, which quoting alone does not stop.
csv_field(F0) ->
    F = case F0 of
            <<C, _/binary>> when C =:= $=; C =:= $+; C =:= $-; C =:= $@; C =:= $\t; C =:= $\r ->
                case re:run(F0, "\\A[+-]?[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?\\z") of
                    nomatch -> <<$', F0/binary>>;
                    _ -> F0
                end;
            _ -> F0
        end,
    case binary:match(F, [<<",">>, <<"\"">>, <<"\n">>, <<"\r">>]) of
        nomatch -> F;
        _ -> [$", binary:replace(F, <<"\"">>, <<"\"\"">>, [global]), $"]
    end.

float_text(F) -> float_to_binary(float(F), [{decimals, 1}]).

%%% dot

%% @doc The Graphviz digraph of a `top' view's first Limit rows.
-spec dot(msgflow_rows:view(), pos_integer()) -> iodata().
dot(View = #{rows := Rows0, by := By}, Limit) ->
    Rows = lists:sublist(Rows0, Limit),
    Max = lists:max([1 | [C || #{count := C} <- Rows]]),
    %% numbered as they first appear, busiest rows first (msgflow-report's
    %% DOT numbers them so too)
    Nodes = lists:uniq(lists:append([[S, R] || #{sender := S, receiver := R} <- Rows])),
    Ids = maps:from_list(lists:zip(Nodes, lists:seq(1, length(Nodes)))),
    ["digraph msgflow {\n",
     "  graph [rankdir=LR, fontname=\"Helvetica\", label=",
     dot_string(io_lib:format("msgflow on ~s, by ~s: ~s messages (top ~b edges)",
                              [maps:get(node, View), By,
                               msgflow_fmt:int(maps:get(events, View)), length(Rows)])),
     "];\n  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n"
     "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#b03a2e\"];\n",
     [["  n", integer_to_list(maps:get(N, Ids)), " [label=",
       dot_string(element(2, texts(View, N))), "];\n"] || N <- Nodes],
     [["  n", integer_to_list(maps:get(S, Ids)), " -> n", integer_to_list(maps:get(R, Ids)),
       io_lib:format(" [weight=~b, penwidth=~b.~2..0b, label=",
                     [1 + (99 * C) div Max, width(C, Max) div 100, width(C, Max) rem 100]),
       dot_string(msgflow_fmt:int(C)), "];\n"] || #{sender := S, receiver := R, count := C} <- Rows],
     "}\n"].

%% An edge's pen width in hundredths: 1 + 7 ln(1 + C) / ln(1 + Max),
%% rounded half away from zero (msgflow-report's DOT computes it alike).
width(C, Max) -> round(100 * (1 + 7 * math:log(1 + C) / math:log(1 + Max))).

dot_string(T) ->
    B = msgflow_fmt:visible(T),
    [$", binary:replace(binary:replace(B, <<"\\">>, <<"\\\\">>, [global]),
                        <<"\"">>, <<"\\\"">>, [global]), $"].

%%% json

%% @doc The JSON report of a `top' view's rows (`pairs') with the run's
%% figures and, with a calls view, the call edges' round trips (`calls').
-spec json(msgflow_rows:view(), msgflow_calls_view:view() | none) -> iodata().
json(View, Calls) ->
    json_encode((json_doc(View))#{<<"calls">> => json_calls(Calls)}).

json_doc(View = #{rows := Rows}) ->
    #{<<"format">> => <<"msgflow_report">>, <<"version">> => 1,
      <<"by">> => atom_to_binary(maps:get(by, View)),
      <<"node">> => msgflow_fmt:text(maps:get(node, View)),
      <<"taken_at_ms">> => maps:get(taken_at, View),
      <<"window_ms">> => maps:get(window_ms, View),
      <<"estimated">> => maps:get(estimated, View),
      <<"messages">> => maps:get(events, View),
      <<"dead_letters">> => maps:get(dead_letters, View),
      <<"overflow">> => maps:get(overflow, View),
      <<"overflow_top">> => msgflow_rows:overflow_top_json(View),
      <<"pairs">> => [begin
                          {SE, SL} = texts(View, S),
                          {RE, RL} = texts(View, R),
                          #{<<"sender">> => SE, <<"receiver">> => RE,
                            <<"sender_label">> => SL, <<"receiver_label">> => RL,
                            <<"messages">> => C, <<"msg_per_s">> => float(Rate),
                            <<"kinds">> => msgflow_rows:kinds_json(maps:get(kinds, Row, []))}
                      end || Row = #{sender := S, receiver := R, count := C, rate := Rate} <- Rows]}.

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

%% @doc The encoder json_encode/1 uses where OTP has no `json' module
%% (before OTP 27), exported so that tests hold both to one output.
-spec json_fallback(term()) -> iodata().
json_fallback(Doc) ->
    json(Doc).

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

%% As OTP's json:encode/1 writes strings (one output on every release):
%% the short escapes for ", \\, \\b, \\f, \\n, \\r, \\t, `\\u00XX' (upper-case hex)
%% for the other control characters, anything else as it is (UTF-8).
json_escape(B) ->
    [case C of
         $" -> "\\\"";
         $\\ -> "\\\\";
         $\b -> "\\b";
         $\f -> "\\f";
         $\n -> "\\n";
         $\r -> "\\r";
         $\t -> "\\t";
         _ when C < 16#20 -> io_lib:format("\\u~4.16.0B", [C]);
         _ -> <<C/utf8>>
     end || <<C/utf8>> <= B].

%% The call edges' round trips as the calls view gives them in JSON
%% (quantiles in µs, null without a round trip).
json_calls(none) -> [];
json_calls(Calls) -> maps:get(<<"entries">>, msgflow_calls_view:json(Calls, #{})).

%%% svg heatmap

-define(CELL, 16).

%% @doc The SVG heatmap of a `matrix' view (senders down, receivers
%% across, a cell per pair coloured by its messages on a log scale).
-spec heatmap(msgflow_matrix_view:matrix()) -> iodata().
heatmap(M = #{by := By, rows := Rows, cols := Cols, cells := Cells0, labels := Labels}) ->
    Cells = maps:map(fun(_, #{count := C}) -> C end, Cells0),
    Max = lists:max([1 | maps:values(Cells)]),
    Name = fun(K) -> maps:get(K, Labels) end,
    Lab = fun(K) -> string:trim(msgflow_fmt:label_cell(Name(K), 30, "..."), trailing) end,
    Left = 200,
    Topm = 190,
    W = Left + ?CELL * max(1, length(Cols)) + 120,
    H = Topm + ?CELL * max(1, length(Rows)) + 60,
    Ix = lists:zip(lists:seq(0, length(Rows) - 1), Rows),
    Jx = lists:zip(lists:seq(0, length(Cols) - 1), Cols),
    Title = io_lib:format("msgflow on ~s: messages by ~s (sender rows, receiver columns; "
                          "top ~b x ~b)", [node_name(M), By, length(Rows), length(Cols)]),
    [io_lib:format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"~b\" height=\"~b\" "
                   "viewBox=\"0 0 ~b ~b\" font-family=\"Helvetica,Arial,sans-serif\" "
                   "font-size=\"10\" class=\"msgflow-heatmap\">\n", [W, H, W, H]),
     "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
     "<text x=\"4\" y=\"14\" font-size=\"12\">", msgflow_fmt:xml(Title), "</text>\n",
     [io_lib:format("<text x=\"~b\" y=\"~b\" text-anchor=\"end\" class=\"row-label\">~s</text>\n",
                    [Left - 4, Topm + I * ?CELL + 12, msgflow_fmt:xml(Lab(S))]) || {I, S} <- Ix],
     [io_lib:format("<text transform=\"translate(~b,~b) rotate(-60)\" class=\"col-label\">~s"
                    "</text>\n", [Left + J * ?CELL + 11, Topm - 4, msgflow_fmt:xml(Lab(R))])
      || {J, R} <- Jx],
     [case maps:get({S, R}, Cells, undefined) of
          undefined -> [];
          C ->
              io_lib:format("<rect class=\"cell\" x=\"~b\" y=\"~b\" width=\"~b\" height=\"~b\" "
                            "fill=\"~s\" data-count=\"~b\"><title>~s -> ~s: ~s messages</title>"
                            "</rect>\n",
                            [Left + J * ?CELL, Topm + I * ?CELL, ?CELL - 1, ?CELL - 1,
                             colour(C, Max), C, msgflow_fmt:xml(Name(S)), msgflow_fmt:xml(Name(R)),
                             msgflow_fmt:int(C)])
      end || {I, S} <- Ix, {J, R} <- Jx],
     legend(Left + ?CELL * max(1, length(Cols)) + 20, Topm, Max),
     "</svg>\n"].

node_name(#{nodes := [N | _]}) -> N;
node_name(_) -> node().

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
