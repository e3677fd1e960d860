%%% @doc What changed in who talks to whom between two recordings: each
%%% side a dump (`export(Path, etf)', msgflow:dump/0, or the counts now),
%%% its edges grouped by label (sender label, receiver label: the pids
%%% of a label summed, so that two runs of one system compare), each with
%%% its messages, rate over its recording (messages/s: messages over what
%%% was traced of the run, start to stop or to when the dump was taken,
%%% over the dump's scale when tracing was sampled), main kind
%%% and share, call p99 (µs, the largest of its call edges') and bytes
%%% copied (sampled sizes, when measured).
%%%
%%% An edge with messages on one side only `appeared' or `vanished'; an
%%% edge on both `changed' when its rate differs beyond what chance
%%% explains: given the N messages of both sides, under an unchanged rate
%%% the after side's count is binomial with p = after's length / both
%%% lengths; the edge changed when |z| = |after - N p| / sqrt(N p (1 - p))
%%% is ?Z_MIN (5) or more: a chance of about 6 in 10 million for one edge
%%% of unchanged rate, so that a diff of thousands of edges lists none by
%%% chance (a change of rate is then 2x at 100 messages a side, 1.5x at
%%% 500).  Each list is sorted by how much the edge's rate moved (msg/s,
%%% largest first).  A changed edge also says when its main kind changed
%%% or its share moved 20 points, and when its call p99 doubled or
%%% halved.
-module(msgflow_diff).
-export([diff/2, diff/3, text/2, json/1, side/1]).
-export_type([diff/0, edge/0]).

%% |z| at least this: an edge's rate changed
-define(Z_MIN, 5).
%% a dump's term, inflated, at most (bytes): a larger one is refused,
%% never inflated
-define(MAX_DUMP_BYTES, 1024 * 1024 * 1024).

-type figures() :: #{messages := non_neg_integer(), rate := float(),
                     kind := {atom(), atom(), 0..100} | none, p99_us := float() | undefined,
                     bytes := float() | undefined}.
-type edge() :: #{sender := binary(), receiver := binary(), before := figures(),
                  'after' := figures(), change := float(), z => float(),
                  notes := [binary()]}.
-type side_info() :: #{node := node(), seconds := float(), messages := non_neg_integer(),
                       taken_at := integer()}.
-type diff() :: #{appeared := [edge()], vanished := [edge()], changed := [edge()],
                  unchanged := non_neg_integer(), before := side_info(), 'after' := side_info()}.

%% @doc The diff of Before and After, each a dump (side/1), and with
%% `print => true' in Opts its table printed (`width' columns, 80: the
%% width msgflow-report --diff prints) and `ok' returned.  The first
%% side's error when it has one; `{error, {bad_dump, dump, malformed}}'
%% for a dump whose rows do not read.
-spec diff(term(), term(), map()) -> diff() | ok | {error, term()}.
diff(Before0, After0, Opts) ->
    case {side(Before0), side(After0)} of
        {{ok, Before}, {ok, After}} ->
            D = try diff(Before, After)
                catch error:_ -> {error, {bad_dump, dump, malformed}}
                end,
            case {D, Opts} of
                {{error, _}, _} -> D;
                {_, #{print := true}} -> io:put_chars(text(D, maps:get(width, Opts, 80)));
                _ -> D
            end;
        {{error, _} = E, _} -> E;
        {_, {error, _} = E} -> E
    end.

%% @doc A side of a diff as a dump: `now' (the counts so far, as
%% msgflow:dump/0 gives them), a range of the history (`#{from => T1, to
%% => T2}', and `history => Dir' for another directory than the run's:
%% msgflow_history_range), a dump map, the ETF of one (a binary that
%% starts as ETF does), or the path of a file `export(Path, etf)' wrote
%% (a string or any other binary).  `{error, {bad_dump, What, Why}}' for
%% a file that cannot be read or is no dump: Why a file error, `not_etf',
%% `{damaged, Offset}' (its term stops reading at byte Offset),
%% `{too_big, Bytes, Max}' (it would inflate past 1 GB), `not_a_dump' or
%% `{version, V}'.  Nothing read makes an atom (msgflow_etf).
-spec side(now | #{from := term(), to => term(), history => term()} | map() | binary() | file:filename()) -> {ok, map()} | {error, term()}.
side(now) ->
    case msgflow_export:dump() of
        Bin when is_binary(Bin) -> side(Bin);
        {error, _} = E -> E
    end;
side(#{from := _} = Range) ->
    case msgflow_export:dump(maps:with([from, to, history], Range)) of
        Bin when is_binary(Bin) -> side(Bin);
        {error, _} = E -> E
    end;
side(D = #{format := msgflow_dump}) ->
    case version(D) of
        {ok, _} = Ok -> Ok;
        {error, Why} -> {error, {bad_dump, dump, Why}}
    end;
side(<<131, _/binary>> = Bin) ->
    etf(Bin);
side(Path) ->
    case file:read_file(Path) of
        {ok, Bin} ->
            case etf(Bin) of
                {ok, _} = Ok -> Ok;
                {error, Why} -> {error, {bad_dump, Path, Why}}
            end;
        {error, Why} ->
            {error, {bad_dump, Path, Why}}
    end.

%% The dump in Bin, or why it is none.  Read without new atoms
%% (msgflow_etf): a name this VM has no atom for is its binary.
etf(Bin) ->
    case msgflow_etf:decode(Bin, ?MAX_DUMP_BYTES) of
        {ok, D = #{format := msgflow_dump}} -> version(D);
        {ok, _} -> {error, not_a_dump};
        {error, {too_big, _, _} = Why} -> {error, Why};
        {error, {bad_term, 0}} -> {error, not_etf};
        {error, {bad_term, Offset}} -> {error, {damaged, Offset}}
    end.

%% A dump of version 6 (rows; msgflow 0.1's versions 1 to 5 are refused).
version(D = #{version := 6, rows := Rows, endpoints := Ends, taken_at := T, node := N})
  when is_list(Rows), is_list(Ends), is_integer(T), (is_atom(N) orelse is_binary(N)) ->
    {ok, D};
version(#{version := V}) ->
    {error, {version, V}};
version(_) ->
    {error, not_a_dump}.

%% @doc The diff of two dumps (side/1's, of version 6: their rows).
-spec diff(map(), map()) -> diff().
diff(Before, After) ->
    {B, TB} = edges(Before),
    {A, TA} = edges(After),
    Keys = lists:usort(maps:keys(B) ++ maps:keys(A)),
    None = #{messages => 0, rate => 0.0, kind => none, p99_us => undefined, bytes => undefined},
    Edges = [edge(K, maps:get(K, B, None), maps:get(K, A, None), TB, TA) || K <- Keys],
    By = fun(What) -> sorted([E || {W, E} <- Edges, W =:= What]) end,
    #{appeared => By(appeared), vanished => By(vanished), changed => By(changed),
      unchanged => length([x || {same, _} <- Edges]),
      before => info(Before, TB), 'after' => info(After, TA)}.

info(D, T) ->
    #{node => maps:get(node, D), seconds => T, taken_at => maps:get(taken_at, D),
      messages => lists:sum([M || #{messages := M} <- maps:get(rows, D)])}.

sorted(Es) ->
    lists:sort(fun(#{change := X}, #{change := Y}) -> X >= Y end, Es).

%% An edge's place in the diff and its figures.
edge({S, R}, FB = #{messages := CB}, FA = #{messages := CA}, TB, TA) ->
    E = #{sender => S, receiver => R, before => FB, 'after' => FA,
          change => abs(maps:get(rate, FA) - maps:get(rate, FB)), notes => notes(FB, FA)},
    if CB =:= 0 -> {appeared, E};
       CA =:= 0 -> {vanished, E};
       true ->
           Z = z(CB, CA, TB, TA),
           case abs(Z) >= ?Z_MIN of
               true -> {changed, E#{z => Z}};
               false -> {same, E}
           end
    end.

%% The after side's count's distance from what an unchanged rate gives,
%% in standard deviations (the binomial test above).
z(CB, CA, TB, TA) ->
    N = CB + CA,
    P = TA / (TB + TA),
    (CA - N * P) / math:sqrt(N * P * (1 - P)).

%% What else moved: the main kind (another one, or its share by 20
%% points), the call p99 (doubled or halved).
notes(#{kind := KB, p99_us := PB}, #{kind := KA, p99_us := PA}) ->
    Kind = case {KB, KA} of
               {{K1, T1, S1}, {K2, T2, S2}} when {K1, T1} =/= {K2, T2}; abs(S1 - S2) >= 20 ->
                   [iolist_to_binary([kind_text(KB), " -> ", kind_text(KA)])];
               _ -> []
           end,
    P99 = case {PB, PA} of
              {X, Y} when is_number(X), is_number(Y), X > 0, (Y >= 2 * X orelse Y =< X / 2) ->
                  [iolist_to_binary(["call p99 ", msgflow_fmt:micros(X), " -> ", msgflow_fmt:micros(Y)])];
              _ -> []
          end,
    Kind ++ P99.

kind_text({K, T, S}) -> [msgflow_fmt:kind(K, T), io_lib:format(" ~b%", [S])].

%% A dump's edges by label, `#{{SenderLabel, ReceiverLabel} =>
%% figures()}', and its recording's length in seconds.
edges(D = #{rows := Rows, endpoints := Ends}) ->
    Label = list_to_tuple([maps:get(label, E, maps:get(text, E, <<"?">>)) || E <- Ends]),
    T = traced_seconds(D),
    Sums = lists:foldl(
             fun(Row = #{sender := SI, receiver := RI, messages := M}, Acc) ->
                     K = {element(SI + 1, Label), element(RI + 1, Label)},
                     {M0, Ks0, B0} = maps:get(K, Acc, {0, #{}, undefined}),
                     Ks = lists:foldl(fun(#{kind := Kd, tag := Tg, messages := N}, KA) ->
                                              maps:update_with({Kd, Tg}, fun(X) -> X + N end, N, KA)
                                      end, Ks0, maps:get(kinds, Row, [])),
                     B = case {B0, Row} of
                             {undefined, #{bytes := RB}} -> RB;
                             {_, #{bytes := RB}} -> B0 + RB;
                             _ -> B0
                         end,
                     Acc#{K => {M0 + M, Ks, B}}
             end, #{}, Rows),
    P99 = p99s(D),
    {maps:map(fun(K, {M, Ks, B}) ->
                      #{messages => M, rate => M / T, kind => main_kind(Ks, M),
                        p99_us => maps:get(K, P99, undefined), bytes => B}
              end, maps:filter(fun(_, {M, _, _}) -> M > 0 end, Sums)), T}.

%% The run's length in seconds: start to stop, or to when the dump was
%% taken (a run still counting, or a dump from before `stopped_at' was
%% in it); a millisecond at least.
seconds(D = #{taken_at := Taken}) ->
    End = case maps:get(stopped_at, D, undefined) of
              undefined -> Taken;
              Stop -> Stop
          end,
    case maps:get(started_at, D, undefined) of
        undefined -> 1.0;
        Start -> max(1, End - Start) / 1000
    end.

%% What was traced of it: with `sample => {T, P}' (scale P / T) only T
%% of every P ms were, and the counts are of those.
traced_seconds(D) ->
    seconds(D) / max(1, maps:get(scale, D, 1)).

main_kind(Ks, M) when map_size(Ks) > 0, M > 0 ->
    %% most messages; on a tie the first kind and tag (as every view)
    [{Neg, K, T} | _] = lists:sort([{-N, K, T} || {{K, T}, N} <- maps:to_list(Ks)]),
    {K, T, round(-100 * Neg / M)};
main_kind(_, _) ->
    none.

%% The largest call p99 (µs) of each (caller label, server label).
p99s(D) ->
    lists:foldl(fun(#{caller_label := C, server_label := S, p99_ns := P}, Acc) when is_integer(P) ->
                        maps:update_with({C, S}, fun(X) -> max(X, P / 1000) end, P / 1000, Acc);
                   (_, Acc) -> Acc
                end, #{}, maps:get(calls, D, [])).

%% @doc The diff as a table in Width columns: a line for each side (its
%% node, length and messages), then a line per edge that appeared,
%% vanished or changed: the change, sender and receiver labels, the rate
%% before and after (msg/s), after/before, and what else moved.
-spec text(diff(), pos_integer()) -> unicode:chardata().
text(#{appeared := Ap, vanished := Va, changed := Ch, unchanged := Same,
       before := B, 'after' := A}, Width) ->
    Side = fun(#{node := N, seconds := T, messages := M}) ->
                   io_lib:format("~s, ~s s, ~s messages", [N, tenths(T), msgflow_fmt:int(M)])
           end,
    EndW = max(12, (Width - 9 - 1 - 1 - 9 - 9 - 7 - 4) div 3),
    Line = fun(C, S, R, Rb, Ra, F, Notes) ->
                   [msgflow_fmt:cell(C, 9, "~"), " ", msgflow_fmt:label_cell(S, EndW, "~"), " ",
                    msgflow_fmt:label_cell(R, EndW, "~"), " ", msgflow_fmt:rcell(Rb, 8), " ",
                    msgflow_fmt:rcell(Ra, 8), " ", msgflow_fmt:rcell(F, 6), "  ", Notes, "\n"]
           end,
    Rate = fun(X) when X == 0 -> "-"; (X) -> msgflow_fmt:short_rate(X) end,
    Row = fun(What, #{sender := S, receiver := R, before := #{rate := Rb, kind := KB},
                      'after' := #{rate := Ra, kind := KA}, notes := Notes}) ->
                  F = case Rb > 0 andalso Ra > 0 of
                          true -> [tenths(Ra / Rb), "x"];
                          false -> "-"
                      end,
                  Kind = case What of
                             "vanished" -> kind_note(KB);
                             _ -> kind_note(KA)
                         end,
                  Line(What, S, R, Rate(Rb), Rate(Ra), F,
                       lists:join("; ", [K || K <- [Kind], K =/= <<>>] ++ Notes))
          end,
    [io_lib:format("msgflow diff: before ~s; after ~s~n", [Side(B), Side(A)]),
     io_lib:format("~b appeared, ~b vanished, ~b changed, ~b the same (a changed rate: |z| >= ~b, "
                   "a binomial test on the counts)~n",
                   [length(Ap), length(Va), length(Ch), Same, ?Z_MIN]),
     Line("CHANGE", "SENDER", "RECEIVER", "BEFORE/S", "AFTER/S", "AFTER", "NOTES"),
     [Row("appeared", E) || E <- Ap], [Row("vanished", E) || E <- Va],
     [Row("changed", E) || E <- Ch]].

%% @doc The diff as JSON terms (the web page's "compare with"): each
%% side's figures, and each edge that appeared, vanished or changed with
%% its `change' (appeared, vanished, changed), labels, rates before and
%% after (msg/s), messages, main kind (text) and notes.
-spec json(diff()) -> msgflow_view:json().
json(#{appeared := Ap, vanished := Va, changed := Ch, unchanged := Same,
       before := B, 'after' := A}) ->
    Side = fun(#{node := N, seconds := T, messages := M, taken_at := At}) ->
                   #{<<"node">> => msgflow_fmt:text(N), <<"seconds">> => float(T),
                     <<"messages">> => M, <<"taken_at">> => At}
           end,
    Fig = fun(#{messages := M, rate := R, kind := K}) ->
                  #{<<"messages">> => M, <<"rate">> => float(R), <<"kind">> => kind_note(K)}
          end,
    Edge = fun(What, E = #{sender := S, receiver := R, before := FB, 'after' := FA, notes := Ns}) ->
                   #{<<"change">> => What, <<"sender">> => S, <<"receiver">> => R,
                     <<"before">> => Fig(FB), <<"after">> => Fig(FA), <<"notes">> => Ns,
                     <<"z">> => case E of #{z := Z} -> float(Z); _ -> null end}
           end,
    #{<<"before">> => Side(B), <<"after">> => Side(A), <<"unchanged">> => Same,
      <<"edges">> => [Edge(<<"appeared">>, E) || E <- Ap] ++ [Edge(<<"vanished">>, E) || E <- Va]
                     ++ [Edge(<<"changed">>, E) || E <- Ch]}.

%% X to one decimal, from its tenths rounded (as msgflow-report writes
%% it: the two print the same rows).
tenths(X) ->
    T = round(X * 10),
    [integer_to_list(T div 10), $., integer_to_list(T rem 10)].

kind_note(none) -> <<>>;
kind_note(K) -> iolist_to_binary(kind_text(K)).
