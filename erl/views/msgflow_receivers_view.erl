%%% @doc The `receivers' view: who receives most, from how many senders,
%%% and how many messages wait in its mailbox now.
%%%
%%% Options (msgflow_query adds `node' and `timeout'): `limit' (10
%%% receivers), `sort' (`messages' since start, `rate' over the last
%%% closed window, or `senders': distinct senders since start; senders
%%% that exited count once per label when their pairs are rolled up, a
%%% window or two after they exit).  A send to
%%% a registered name counts for the pid holding it; replies to a
%%% process's aliases count for the process.  The value, busiest first:
%%% `#{receivers => [#{receiver, label, messages, window_messages, rate,
%%% senders, queue, wait_ms, queue_len, growing, bytes_in}], window_ms,
%%% running, nodes, missing}', `rate' in messages/s, `queue' the
%%% receiver's message_queue_len read now (a local process that is alive;
%%% else `undefined'); `wait_ms' how long a message waited in its mailbox
%%% in the last closed window (ms, Little's law over 40 readings of its
%%% queue: msgflow_store_waits; the 50 busiest receivers of the window
%%% before have one, others `undefined'), `queue_len' the mean of those
%%% readings (messages), `growing' whether the queue grew at each reading
%%% (the wait is then no steady figure); `bytes_in' the bytes its
%%% messages copied since start, from the sizes of sampled messages
%%% (`size_sample'; 0 when none was measured).  `sort' also `wait' and
%%% `bytes' (bytes_in).  It reads every pair: at a
%%% million pairs about a second.  Across a cluster each node gives its
%%% busiest `limit' and they are added up by receiver.
-module(msgflow_receivers_view).
-behaviour(msgflow_view).

-export([options/0, build/2, merge/3, text/3, json/2, metrics/1]).
-export_type([receivers/0]).

-type receiver() :: #{receiver := msgflow_rows:key(), label := binary(),
                      messages := non_neg_integer(), window_messages := non_neg_integer(),
                      rate := float(), senders := non_neg_integer(),
                      queue := non_neg_integer() | undefined,
                      wait_ms := float() | undefined, queue_len := float() | undefined,
                      growing := boolean(), bytes_in := float()}.
-type receivers() :: #{receivers := [receiver()], window_ms := non_neg_integer(),
                       running := boolean(), node := node(), nodes => [node()],
                       missing => [{node(), term()}]}.

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{limit => {10, {int, 1, msgflow_rows:max_rows(), "receivers"}},
      sort => {messages, {one_of, [messages, rate, senders, wait, bytes]}}}.

%% @doc This node's busiest receivers: every pair and rolled-up row read
%% once, summed by receiver.
-spec build(msgflow_store:store(), map()) -> receivers().
build(Store = #{pairs := T, rolled_up := F, labels := Tables}, #{limit := Limit, sort := Sort}) ->
    Canon = msgflow_rows_groups:key_fun(process, Tables),
    #{last := Window, window_ms := WinMs, scale := Scale} = msgflow_rows:rate_window(Store),
    Add = fun(Row, Acc) ->
                  {_, R0} = msgflow_row:key(Row),
                  R = Canon(R0),
                  [_, Last] = msgflow_row:last_two(Window, Row),
                  {M, W, N} = maps:get(R, Acc, {0, 0, 0}),
                  Acc#{R => {M + msgflow_row:total(Row), W + Last, N + 1}}
          end,
    Match = msgflow_row:select_spec(#{}, [], false),
    Sums = msgflow_row_table:fold_select(F, Match, Add, msgflow_row_table:fold_select(T, Match, Add, #{})),
    Bytes = bytes_in(Store, Canon),
    Waits = case maps:get(windows, Store) of
                [] -> #{};
                Ws -> maps:get(waits, lists:last(Ws), #{})
            end,
    All = [maps:merge(#{receiver => R, messages => M, window_messages => W, senders => N,
                        rate => msgflow_row:per_s(W, WinMs, Scale), bytes_in => maps:get(R, Bytes, 0.0),
                        wait_ms => undefined, queue_len => undefined, growing => false},
                      maps:with([wait_ms, queue_len, growing], maps:get(R, Waits, #{})))
           || {R, {M, W, N}} <- maps:to_list(Sums)],
    Chosen = lists:sublist(sorted(All, Sort), Limit),
    #{receivers => [E#{label => maps:get(label, msgflow_labels:meta(Tables, R)), queue => queue(R)}
                    || E = #{receiver := R} <- Chosen],
      window_ms => WinMs, running => maps:get(running, Store), node => maps:get(node, Store)}.

%% The bytes each receiver's messages copied since start: for each pair
%% with sampled sizes, its messages times their mean bytes.
bytes_in(#{sizes := SizesT, pairs := T}, Canon) ->
    msgflow_store_sizes:bytes_by(SizesT, T, fun({_, R}) -> Canon(R) end).

sorted(Es, Sort) ->
    Key = case Sort of
              messages -> fun(#{messages := M}) -> M end;
              wait -> fun(#{wait_ms := undefined}) -> -1; (#{wait_ms := Wt}) -> Wt end;
              bytes -> fun(#{bytes_in := B}) -> B end;
              rate -> fun(#{rate := R}) -> R end;
              senders -> fun(#{senders := N}) -> N end
          end,
    lists:sort(fun(A, B) -> {Key(A), maps:get(messages, A)} >= {Key(B), maps:get(messages, B)} end,
               Es).

queue(P) when is_pid(P), node(P) =:= node() ->
    case erlang:process_info(P, message_queue_len) of
        {message_queue_len, N} -> N;
        undefined -> undefined
    end;
queue(_) ->
    undefined.

%% @doc The nodes' receivers added up by receiver (a receiver's label and
%% queue as its own node gives them), the busiest `limit' of them.
-spec merge([receivers()], map(), msgflow_view:context()) -> receivers().
merge([One], _Opts, _Ctx) ->
    One#{nodes => [maps:get(node, One)]};
merge(Parts = [First | _], #{limit := Limit, sort := Sort}, _Ctx) ->
    Add = fun(E = #{receiver := R}, Acc) ->
                  case Acc of
                      #{R := Old} ->
                          Own = case R of
                                    P when is_pid(P); is_port(P) -> node(P) =:= maps:get(node, E, node());
                                    _ -> false
                                end,
                          Acc#{R := Old#{messages := maps:get(messages, Old) + maps:get(messages, E),
                                         window_messages := maps:get(window_messages, Old)
                                             + maps:get(window_messages, E),
                                         rate := maps:get(rate, Old) + maps:get(rate, E),
                                         senders := maps:get(senders, Old) + maps:get(senders, E),
                                         bytes_in := maps:get(bytes_in, Old, 0.0) + maps:get(bytes_in, E, 0.0),
                                         queue := case maps:get(queue, E) of
                                                      undefined -> maps:get(queue, Old);
                                                      Q -> Q
                                                  end,
                                         %% the wait as the receiver's own node read it
                                         wait_ms := own(Own, wait_ms, E, Old),
                                         queue_len := own(Own, queue_len, E, Old),
                                         growing := own(Own, growing, E, Old) =:= true,
                                         label := case Own of
                                                      true -> maps:get(label, E);
                                                      false -> maps:get(label, Old)
                                                  end}};
                      _ -> Acc#{R => E}
                  end
          end,
    Sum = lists:foldl(fun(#{receivers := Es, node := N}, Acc) ->
                              lists:foldl(fun(E, A) -> Add(E#{node => N}, A) end, Acc, Es)
                      end, #{}, Parts),
    First#{receivers => [maps:remove(node, E) || E <- lists:sublist(sorted(maps:values(Sum), Sort),
                                                                     Limit)],
           running => lists:any(fun(#{running := R}) -> R end, Parts),
           nodes => [N || #{node := N} <- Parts]}.

%% (a node of an earlier release gives no waits: `undefined')
own(true, K, E, _) -> maps:get(K, E, undefined);
own(false, K, _, Old) -> maps:get(K, Old, undefined).

%% @doc A line per receiver: its label, messages, rate, senders, queue,
%% wait (`grew' for a mailbox that grew all window) and bytes in.
-spec text(receivers(), map(), msgflow_view:area()) -> unicode:chardata().
text(V = #{receivers := Es, running := Run, window_ms := WinMs}, _Opts, Area = #{width := Width}) ->
    E = msgflow_fmt:ellipsis(Area),
    LabelW = max(20, Width - 3 - 1 - 12 - 8 - 8 - 8 - 8 - 9 - 5),
    Line = fun(I, L, M, R, S, Q, Wt, B) ->
                   [msgflow_fmt:rcell(I, 3), " ", msgflow_fmt:label_cell(L, LabelW, E), " ",
                    msgflow_fmt:rcell(M, 12), " ", msgflow_fmt:rcell(R, 7), " ",
                    msgflow_fmt:rcell(S, 7), " ", msgflow_fmt:rcell(Q, 7), " ",
                    msgflow_fmt:rcell(Wt, 7), " ", msgflow_fmt:rcell(B, 8), "\n"]
           end,
    [io_lib:format("msgflow ~s~s: the busiest receivers, MSG/S over the last ~s ms~n",
                   [msgflow_fmt:run_state(Run, V), msgflow_fmt:on_nodes(maps:get(nodes, V, [])),
                    msgflow_fmt:int(WinMs)]),
     msgflow_fmt:missing(maps:get(missing, V, [])),
     Line("#", "RECEIVER", "MESSAGES", "MSG/S", "SENDERS", "QUEUE", "WAIT MS", "BYTES IN"),
     [Line(integer_to_list(I), [L, " ", msgflow_fmt:endpoint(R)], msgflow_fmt:int(M),
           msgflow_fmt:short_rate(Rate), msgflow_fmt:int(S),
           case Q of undefined -> "-"; _ -> msgflow_fmt:int(Q) end,
           wait_text(En), msgflow_fmt:bytes(round(maps:get(bytes_in, En, 0))))
      || {I, En = #{receiver := R, label := L, messages := M, rate := Rate, senders := S, queue := Q}}
             <- lists:enumerate(Es)]].

%% A receiver's wait: ms, `grew' when its mailbox grew all window, `-'
%% when it was not watched.
wait_text(#{growing := true}) -> "grew";
wait_text(#{wait_ms := W}) when is_number(W) -> io_lib:format("~.1f", [W]);
wait_text(_) -> "-".

%% @doc The receivers as JSON.
-spec json(receivers(), map()) -> msgflow_view:json().
json(#{receivers := Es, running := Run, window_ms := WinMs}, _Opts) ->
    #{<<"running">> => Run, <<"window_ms">> => WinMs,
      <<"receivers">> => [#{<<"receiver">> => msgflow_rows:key_text(R), <<"label">> => L,
                            <<"messages">> => M, <<"window_messages">> => W,
                            <<"rate">> => float(Rate), <<"senders">> => S,
                            <<"queue">> => null_or(Q),
                            <<"wait_ms">> => null_or(maps:get(wait_ms, En, undefined)),
                            <<"queue_len">> => null_or(maps:get(queue_len, En, undefined)),
                            <<"growing">> => maps:get(growing, En, false),
                            <<"bytes_in">> => maps:get(bytes_in, En, 0.0)}
                          || En = #{receiver := R, label := L, messages := M, window_messages := W,
                                    rate := Rate, senders := S, queue := Q} <- Es]}.

null_or(undefined) -> null;
null_or(X) -> X.

%% @doc For `/metrics': each busiest receiver's messages (a counter) and
%% its queue (a gauge), labelled by its label.
-spec metrics(receivers()) -> [msgflow_view:family()].
metrics(#{receivers := Es}) ->
    [{<<"msgflow_receiver_messages_total">>, counter,
      <<"Messages received by the busiest receivers since the run started.">>,
      [{[{receiver, L}], M} || #{label := L, messages := M} <- Es]},
     {<<"msgflow_receiver_queue_messages">>, gauge,
      <<"Messages waiting in the busiest receivers' mailboxes, read now.">>,
      [{[{receiver, L}], Q} || #{label := L, queue := Q} <- Es, is_integer(Q)]},
     {<<"msgflow_receiver_wait_seconds">>, gauge,
      <<"How long a message waited in the busiest receivers' mailboxes in the last closed window "
        "(mean queue length / arrival rate).">>,
      [{[{receiver, L}], W / 1000} || #{label := L, wait_ms := W} <- Es, is_number(W)]},
     {<<"msgflow_receiver_copied_bytes">>, gauge,
      <<"Bytes the busiest receivers' messages copied since the run started, estimated from "
        "sampled sizes (messages x their mean size).">>,
      [{[{receiver, L}], round(B)} || #{label := L, bytes_in := B} <- Es]}].
