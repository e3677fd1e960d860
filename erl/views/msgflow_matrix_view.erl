%%% @doc The `matrix' view: the communication matrix, every pair's
%%% messages since start with senders down and receivers across, grouped
%%% by process, name (labels), module, application, node or kind (kind
%%% down, tag across).  msgflow:matrix/1,2 prints it; the web page and the
%%% SVG heatmap draw it.
%%%
%%% Options (msgflow_query adds `node' and `timeout'):
%%% <ul>
%%% <li>`by' (name): the grouping;</li>
%%% <li>`kind': only messages of one kind (`call') or kind and tag
%%%     (`{call, get}'); their rates apportioned by their share of each
%%%     row's messages;</li>
%%% <li>`limit' (all): only the L senders and the L receivers with the most
%%%     messages, and the cells between them (only they are labelled: for a
%%%     heatmap of a big node).  By process (no `kind') the L of each are chosen from
%%%     every pair's total alone, and only the L senders' rows are made
%%%     (msgflow_rows_groups:heat_by_process/3): at 200,000 pairs a fifth
%%%     of the time a row of every pair takes (BENCHMARKS.md);</li>
%%% <li>`weigh' (messages): `bytes' puts in each cell, and ranks by, the
%%%     bytes its messages copied since start (from sampled sizes:
%%%     guides/sizes-and-wait.md; pairs with none measured left out), and
%%%     `weigh => bytes' in the value; `messages' is then the bytes'
%%%     total.</li>
%%% </ul>
-module(msgflow_matrix_view).
-behaviour(msgflow_view).

-export([options/0, build/2, merge/3, fallback/2, text/3, json/2, of_rows/2]).
-export_type([matrix/0]).

-define(NUM_W, 9).    %% a cell of the printed matrix: up to 99,999,999
-define(TOTAL_W, 11). %% its SENT column

%% The communication matrix: `rows' the senders and `cols' the receivers,
%% busiest first (messages sent, received); `cells' each pair's messages
%% since start and rate (messages/s over the last window, extrapolated
%% when sampling: `estimated'); `sent' and `received' each key's messages;
%% `labels' each key's text as the views show it; `messages' the matrix's
%% total; `nodes' the nodes whose counts are in it, `missing' those that
%% did not answer (msgflow_query).
-type matrix() :: #{by := msgflow_rows:grouping(), rows := [msgflow_rows:key()],
                    cols := [msgflow_rows:key()],
                    cells := #{{msgflow_rows:key(), msgflow_rows:key()} =>
                                   #{count := pos_integer(), rate := float()}},
                    sent := #{msgflow_rows:key() => non_neg_integer()},
                    received := #{msgflow_rows:key() => non_neg_integer()},
                    labels := #{msgflow_rows:key() => binary()}, messages := non_neg_integer(),
                    running := boolean(), window_ms := non_neg_integer(),
                    estimated := boolean(), weigh => messages | bytes,
                    nodes => [node()], missing => [{node(), term()}]}.

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{by => {name, {one_of, msgflow_rows:groupings()}},
      kind => {none, kind},
      limit => {all, {either, [{one_of, [all]}, {int, 1, msgflow_rows:max_rows(), "keys"}]}},
      weigh => {messages, {one_of, [messages, bytes]}}}.

%% The rows the matrix is made of: every row (the matrix shows no kinds:
%% rows without them cost less), the heatmap's keys when limited.
spec(Opts = #{by := By, limit := Limit}) ->
    Spec0 = case Opts of
                #{kind := K} -> #{by => By, kind => K};
                _ -> #{by => By, with_kinds => false}
            end,
    %% grouped rows' bytes only when the cells are weighed by them
    Spec = Spec0#{group_bytes => maps:get(weigh, Opts, messages) =:= bytes},
    case Limit of
        all -> Spec;
        L -> Spec#{heatmap => L, labelled => 0}
    end.

%% @doc This node's rows.
-spec build(msgflow_store:store(), map()) -> msgflow_rows:view().
build(Store, Opts) ->
    msgflow_rows:build(Store, spec(Opts)).

%% @doc The nodes' rows as one matrix.
-spec merge([msgflow_rows:view()], map(), msgflow_view:context()) -> matrix().
merge(Parts, Opts, Ctx) ->
    of_rows(msgflow_rows_merge:merge(Parts, spec(Opts), Ctx), maps:get(limit, Opts, all),
            maps:get(weigh, Opts, messages)).

%% @doc A node that did not answer is in a matrix by process with the
%% busiest pairs it last reported.
-spec fallback(msgflow_rows:view(), map()) -> msgflow_rows:view() | none.
fallback(Top, #{by := process} = Opts) when not is_map_key(kind, Opts) -> Top;
fallback(_, _) -> none.

%% @doc The matrix of rows (all of them, or the heatmap's L senders and L
%% receivers).
-spec of_rows(msgflow_rows:view(), all | pos_integer()) -> matrix().
of_rows(View, Limit) ->
    of_rows(View, Limit, messages).

%% of_rows/2, each cell weighed by its messages or the bytes they copied.
of_rows(View = #{by := By, rows := Rows00, window_ms := WinMs, estimated := Est, running := Run},
        Limit, Weigh) ->
    Rows0 = case Weigh of
                messages -> Rows00;
                bytes -> [R#{count := round(B)} || R = #{bytes := B} <- Rows00, round(B) > 0]
            end,
    Rows = case {Limit, View} of
               {all, _} -> Rows0;
               {_, #{heatmap := #{rows := HR, cols := HC}}} ->
                   RS = maps:from_list([{K, []} || K <- HR]),
                   CS = maps:from_list([{K, []} || K <- HC]),
                   [R || R = #{sender := S, receiver := Rc} <- Rows0, is_map_key(S, RS),
                         is_map_key(Rc, CS)]
           end,
    Add = fun(K, N, M) -> maps:update_with(K, fun(X) -> X + N end, N, M) end,
    {Sent, Recv} = lists:foldl(fun(#{sender := S, receiver := R, count := C}, {SA, RA}) ->
                                       {Add(S, C, SA), Add(R, C, RA)}
                               end, {#{}, #{}}, Rows),
    Busiest = fun(M) -> [K || {_, K} <- lists:sort([{-N, K} || {K, N} <- maps:to_list(M)])] end,
    Keys = lists:usort(maps:keys(Sent) ++ maps:keys(Recv)),
    M = #{by => By, rows => Busiest(Sent), cols => Busiest(Recv),
          cells => maps:from_list([{{S, R}, #{count => C, rate => Rate}}
                                   || #{sender := S, receiver := R, count := C, rate := Rate} <- Rows]),
          sent => Sent, received => Recv,
          labels => maps:from_list([{K, msgflow_rows:display(View, K)} || K <- Keys]),
          messages => lists:sum(maps:values(Sent)), running => Run,
          window_ms => WinMs, estimated => Est, weigh => Weigh},
    case View of
        #{nodes := Ns} -> M#{nodes => Ns};
        _ -> M
    end.

%% @doc The matrix in the area's columns and about its lines: senders down
%% (busiest first, numbered), receivers across (headed by their numbers; a
%% receiver that sends too has its sender number), the messages of each
%% pair since start (`.' for none), each sender's SENT and each receiver's
%% RECEIVED; the receivers that are not senders are named under the
%% table.  What does not fit is left out, and a line says how much and
%% where to find it.
-spec text(matrix(), map(), msgflow_view:area()) -> unicode:chardata().
text(M = #{by := By, rows := Rows0, cols := Cols0, messages := Total, running := Run}, _Opts,
     Area = #{width := Width, height := Height}) ->
    E = msgflow_fmt:ellipsis(Area),
    #{cells := Cells, sent := Sent, received := Recv, labels := Labels} = M,
    %% cells of bytes in their short form (9.8K)
    {Fmt, Unit} = case maps:get(weigh, M, messages) of
                      bytes -> {fun msgflow_fmt:bytes/1, "bytes copied"};
                      messages -> {fun msgflow_fmt:int/1, "messages"}
                  end,
    Head = io_lib:format("msgflow ~s~s: matrix by ~s, ~s ~s, ~s senders x ~s receivers~n",
                         [msgflow_fmt:run_state(Run, M), msgflow_fmt:on_nodes(maps:get(nodes, M, [])),
                          By, Fmt(Total), Unit,
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
                                     #{{R, C} := #{count := N}} -> Fmt(N);
                                     _ -> "."
                                 end, ?NUM_W) || C <- Cols],
              msgflow_fmt:rcell(Fmt(maps:get(R, Sent)), ?TOTAL_W), "\n"]
             || R <- Rows],
    Received = [msgflow_fmt:cell("    RECEIVED", LabelW, E),
                [msgflow_fmt:rcell(Fmt(maps:get(C, Recv)), ?NUM_W) || C <- Cols],
                msgflow_fmt:rcell(Fmt(Total), ?TOTAL_W), "\n"],
    LegendLines = [[msgflow_fmt:rcell(integer_to_list(I), 3), " ",
                    string:trim(msgflow_fmt:label_cell(maps:get(C, Labels), Width - 22, E), trailing),
                    " (receives only)\n"]
                   || {I, C} <- Legend],
    [Head, msgflow_fmt:missing(maps:get(missing, M, [])), msgflow_fmt:behind(M), ColHeads, Lines, Received, LegendLines,
     left_out(Rows0, Rows, Sent, "senders", Fmt, Unit), left_out(Cols0, Cols, Recv, "receivers", Fmt, Unit)].

%% Each key's label in Width columns, cut in its middle; labels that
%% would read the same cut so (two `tcp_inet <- ht...andler:init/1') are
%% cut at their end instead, where they differ sooner.
fit_labels(Keys, Labels, Width, E) ->
    Mid = [{K, msgflow_fmt:label_cell(maps:get(K, Labels), Width, E)} || K <- Keys],
    Seen = lists:foldl(fun({_, T}, Acc) -> maps:update_with(T, fun(N) -> N + 1 end, 1, Acc) end,
                       #{}, Mid),
    maps:from_list([case maps:get(T, Seen) of
                        1 -> {K, T};
                        _ -> {K, msgflow_fmt:cell(maps:get(K, Labels), Width, E)}
                    end || {K, T} <- Mid]).

left_out(All, Shown, Counts, What, Fmt, Unit) ->
    case lists:nthtail(length(Shown), All) of
        [] ->
            [];
        Out ->
            io_lib:format("not shown: ~s more ~s (~s ~s): msgflow:view(matrix, Opts)~n",
                          [msgflow_fmt:int(length(Out)), What,
                           Fmt(lists:sum([maps:get(K, Counts) || K <- Out])), Unit])
    end.

%% @doc The matrix as JSON: `keys' (senders and receivers in one order,
%% busiest first), `labels', `cells' (`[SenderIndex, ReceiverIndex,
%% Messages, Rate]'; with `weigh' `bytes': bytes copied instead of
%% messages), `sent' and `received' in the keys' order.
-spec json(matrix(), map()) -> msgflow_view:json().
json(M = #{by := By, rows := Rows, cols := Cols, cells := Cells, sent := Sent, received := Recv,
       labels := Labels, messages := Total, running := Run}, _Opts) ->
    Keys = lists:usort(Rows ++ Cols),
    Index = maps:from_list(lists:zip(Keys, lists:seq(0, length(Keys) - 1))),
    #{<<"by">> => atom_to_binary(By), <<"running">> => Run, <<"messages">> => Total,
      <<"weigh">> => atom_to_binary(maps:get(weigh, M, messages)),
      <<"keys">> => [msgflow_rows:key_text(K) || K <- Keys],
      <<"labels">> => [maps:get(K, Labels) || K <- Keys],
      <<"sent">> => [maps:get(K, Sent, 0) || K <- Keys],
      <<"received">> => [maps:get(K, Recv, 0) || K <- Keys],
      <<"cells">> => [[maps:get(S, Index), maps:get(R, Index), C, float(Rate)]
                      || {{S, R}, #{count := C, rate := Rate}} <- lists:sort(maps:to_list(Cells))]}.
