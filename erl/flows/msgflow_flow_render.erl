%%% @doc Renderers of request flows (msgflow_flow's views): a text
%%% sequence diagram for the shell and a Mermaid `sequenceDiagram' (which
%%% the web page draws with Mermaid).  Pure functions of a Flow; they read
%%% nothing else.
-module(msgflow_flow_render).

-export([text/1, mermaid/1]).

-define(COL, 12).          %% text: columns between two lifelines
-define(TEXT_LANES, 8).    %% text: lifelines at most, else a list

%% @doc A Flow as text: a header (messages, processes, depth, duration),
%% a legend of the processes with their labels, then one row per event in
%% causal order, microseconds since the first, depth, and an arrow between
%% lifelines (a list when more than 8 processes took part), and the pairs.
-spec text(msgflow_flow_value:flow()) -> iodata().
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
-spec mermaid(msgflow_flow_value:flow()) -> iodata().
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
                  end, unicode:characters_to_list(msgflow_fmt:visible(T))).

