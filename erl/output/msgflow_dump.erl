%%% @doc The ETF dump: rows of a `top' view (msgflow_top_view) with the
%%% run's figures, the nodes' statuses and the call edges, as one term
%%% that describes itself (maps with named fields), for programs and for
%%% the C tools: `export(Path, etf)' writes it, msgflow:dump/0 returns
%%% it, msgflow-top asks for the rows it shows in this form, and
%%% msgflow-report and msgflow-top read it (tools/c/mf_dump.c, which
%%% refuses msgflow 0.1's versions 1 to 5).  Version 6, term_to_binary of:
%%% ```
%%% #{format => msgflow_dump, version => 6,
%%%   node => node(), by => Grouping, sort => messages | rate | peak | bytes | wait,
%%%   taken_at => SystemMs, started_at => SystemMs | undefined,
%%%   stopped_at => SystemMs | undefined,
%%%   running => boolean(), window_ms => Ms, scale => number(),
%%%   events => Messages, dead_letters => Messages, overflow => Messages,
%%%   pair_count => Pairs, group_count => Groups | undefined,
%%%   endpoints => [#{endpoint => Key, text => binary(), label => binary(),
%%%                   display => binary(), module => atom(),
%%%                   application => atom(), node => atom()}],
%%%   rows => [#{sender => Index, receiver => Index, messages => Messages,
%%%              window_messages => Messages, rate => float(),
%%%              peak_rate => float(),
%%%              kinds => [#{kind => atom(), tag => atom(), messages => Messages}],
%%%              %% when the pair's messages had their size sampled:
%%%              bytes => float(), bytes_mean => float(), words_mean => float(),
%%%              words_max => Words, binary_bytes_mean => float(),
%%%              size_sampled => N, large => N,
%%%              %% sorted by wait: the receiver's mailbox wait (ms)
%%%              receiver_wait_ms => float(), receiver_growing => boolean()}],
%%%   nodes => [#{node => node(), status => atom(), pairs => Pairs,
%%%               events => Messages}],
%%%   missing => [#{node => node(), reason => binary()}],
%%%   calls => [#{caller => binary(), caller_label => binary(),
%%%               server => binary(), server_label => binary(),
%%%               kind => atom(), tag => atom(), calls => N | undefined,
%%%               sampled => N, unanswered => N, p50_ns => Ns | undefined,
%%%               p90_ns => Ns | undefined, p99_ns => Ns | undefined,
%%%               max_ns => Ns | undefined}],
%%%   %% a range of the history: its ends (system ms)
%%%   range_from => SystemMs, range_to => SystemMs,
%%%   %% by process, once max_memory was reached
%%%   memory_full => boolean(),
%%%   %% by process, past the bound: the busiest pairs in overflow
%%%   overflow_top => [#{sender => binary(), receiver => binary(),
%%%                      messages => Messages, error => Messages}],
%%%   overflow_top_min => Messages}
%%% '''
%%% `rows' are the view's, in its order (busiest first by `sort'),
%%% grouped by `by': by process each end is an endpoint as the VM
%%% reported it (a pid, port, name, `{Name, Node}', alias, or `{exited,
%%% LabelId, Node}' for the exited endpoints of one label), with its
%%% label, module, application and node; grouped, each end is the group's
%%% key (a label, module, application, node, kind or tag) and `module' and
%%% `application' are `undefined'.  Indexes count from 0 into
%%% `endpoints'.  `display' is the label as the views show it (with the
%%% endpoint's text beside a label that several ends share).  Messages are
%%% since start; `window_messages' those of the last window (`window_ms'
%%% long), `rate' and `peak_rate' in messages/s (scale > 1 means sampling:
%%% rates are estimates).  A row's kinds add up to its messages (none with
%%% kinds off).  `nodes' are the nodes whose counts are in it, `missing'
%%% those that did not answer in time.  `overflow_top' are the busiest
%%% pairs among the messages in overflow (msgflow_store_topk), ends as the
%%% views show them, each pair's messages between `messages - error' and
%%% `messages', one not listed at most `overflow_top_min'.  `calls' are the call edges' round
%%% trips (msgflow_calls_view), quantiles in ns.  A row's sizes (msgflow_rows
%%% by process: bytes its messages copied since start, bytes and heap
%%% words a message, ...) are there when some of its messages were
%%% measured.  Readers take the fields
%%% they know and leave the others: a later version adds fields.
-module(msgflow_dump).
-export([of_top/3]).
-export_type([dump/0]).

-define(VERSION, 6).

-type dump() :: #{format := msgflow_dump, version := pos_integer(), atom() => term()}.


%% @doc The dump of a `top' view's rows, with the call edges (a calls view
%% of the same grouping, or none) and the nodes' statuses
%% (msgflow_cluster:node_status(), or [] for this node alone).
-spec of_top(msgflow_rows:view(), msgflow_calls_view:view() | none,
             [msgflow_cluster:node_status()]) -> dump().
of_top(View = #{rows := Rows, endpoints := Ends, by := By}, Calls, Statuses) ->
    Keys = lists:usort(lists:append([[S, R] || #{sender := S, receiver := R} <- Rows])),
    Idx = maps:from_list(lists:zip(Keys, lists:seq(0, length(Keys) - 1))),
    Info = fun(K) ->
                   case Ends of
                       #{K := I = #{label := L, text := T}} ->
                           #{endpoint => K, text => T, label => L,
                             display => maps:get(display, I, L),
                             module => maps:get(module, I, undefined),
                             application => maps:get(application, I, undefined),
                             node => case maps:get(node, I, undefined) of
                                         undefined -> maps:get(node, View);
                                         N -> N
                                     end};
                       _ ->
                           T = msgflow_rows:key_text(K),
                           #{endpoint => K, text => T, label => T, display => T,
                             module => undefined, application => undefined,
                             node => node_of(K, View)}
                   end
           end,
    maps:merge(#{format => msgflow_dump, version => ?VERSION,
      node => maps:get(node, View), by => By, sort => maps:get(sort, View, messages),
      taken_at => maps:get(taken_at, View), started_at => maps:get(started_at, View),
      stopped_at => maps:get(stopped_at, View, undefined),
      running => maps:get(running, View), window_ms => maps:get(window_ms, View),
      scale => maps:get(scale, View), events => maps:get(events, View),
      dead_letters => maps:get(dead_letters, View), overflow => maps:get(overflow, View),
      pair_count => maps:get(pairs, View), group_count => maps:get(groups, View),
      endpoints => [Info(K) || K <- Keys],
      rows => [maps:merge(#{sender => maps:get(S, Idx), receiver => maps:get(R, Idx), messages => C,
                            window_messages => W, rate => float(Rate), peak_rate => float(Peak),
                            kinds => [#{kind => K, tag => T, messages => N} || {K, T, N} <- Ks]},
                          sizes(Row))
               || Row = #{sender := S, receiver := R, count := C, last_count := W, rate := Rate,
                          peak_rate := Peak, kinds := Ks} <- Rows],
      nodes => case Statuses of
                   [_ | _] -> [#{node => N, status => St, pairs => P, events => E}
                               || #{node := N, status := St, pairs := P, events := E} <- Statuses];
                   [] -> [#{node => maps:get(node, View), status => up,
                            pairs => maps:get(pairs, View), events => maps:get(events, View)}]
               end,
      missing => [#{node => N, reason => iolist_to_binary(io_lib:format("~0tp", [Why]))}
                  || {N, Why} <- maps:get(missing, View, [])],
      calls => calls(Calls)}, maps:merge(range(View), overflow(View))).

%% Past the bound (by process): memory_full and the busiest in overflow.
overflow(View = #{overflow_top := #{pairs := Pairs, min := Min}}) ->
    #{memory_full => maps:get(memory_full, View, false),
      overflow_top => [#{sender => msgflow_rows:display(View, S), receiver => msgflow_rows:display(View, R),
                         messages => C, error => E}
                       || #{sender := S, receiver := R, count := C, error := E} <- Pairs],
      overflow_top_min => Min};
overflow(View) ->
    #{memory_full => maps:get(memory_full, View, false)}.

%% A range of the history (msgflow_history_range): its ends (system ms).
range(#{range := #{from := F, to := T}}) -> #{range_from => F, range_to => T};
range(_) -> #{}.

node_of(K, _) when is_pid(K); is_port(K); is_reference(K) -> node(K);
node_of({_, N}, _) when is_atom(N) -> N;
node_of({exited, _, N}, _) -> N;
node_of(_, #{node := N}) -> N.

calls(none) ->
    [];
calls(#{entries := Es}) ->
    Ns = fun(undefined) -> undefined; (Us) -> round(Us * 1000) end,
    [#{caller => msgflow_rows:key_text(C), caller_label => CL,
       server => msgflow_rows:key_text(S), server_label => SL,
       kind => K, tag => T, calls => N, sampled => Sa, unanswered => U,
       p50_ns => Ns(P50), p90_ns => Ns(P90), p99_ns => Ns(P99), max_ns => Ns(Max)}
     || #{caller := C, server := S, caller_label := CL, server_label := SL, kind := K, tag := T,
          calls := N, sampled := Sa, unanswered := U, p50 := P50, p90 := P90, p99 := P99,
          max := Max} <- Es].

%% A row's sizes, as the dump gives them (none when none was measured).
sizes(Row) ->
    maps:with([bytes, bytes_mean, words_mean, words_max, binary_bytes_mean, size_sampled, large,
               receiver_wait_ms, receiver_growing], Row).
