%%% @doc The rows of the counts, grouped: what the views of pairs (top,
%%% matrix, kinds, process, receivers, hotspots) are made of, built in one
%%% place: build/2, from a store handle (msgflow_collector:store/1), in the
%%% calling process, as a spec asks (which grouping, how many rows, which
%%% window counts).  It reads the collector's ETS tables and never calls
%%% the collector.  A node's rows are merged with other nodes' by
%%% msgflow_rows_merge.
%%%
%%% The rows read the pairs and the rolled-up rows (msgflow_collector) alike:
%%% every message counted and not in overflow is in one row of it.  It
%%% groups them by `process' (a send to a registered name and a send to
%%% the pid holding it are one receiver, and the NIF counts a reply to a
%%% gen:call's alias for its caller; exited processes are their group,
%%% `{exited, LabelId, Node}'), `name' (labels),
%%% `module', `application' or `node', or by the kind and tag of the
%%% messages (`kind': a row per `{Kind, Tag}', its sender the kind and its
%%% receiver the tag).  Which rows, and how they are grouped, is
%%% msgflow_rows_groups'; this module makes the view and its rows.  For
%%% the top N by process only the N busiest pairs are read and labelled;
%%% the other groupings read every pair.
-module(msgflow_rows).

-export([overflow_top_json/1, overflow_top_limit/1, build/2, groupings/0, sorts/0, max_rows/0, display/2, text/2, key_text/1, json_head/1, kinds_json/1,
         rate_window/1]).
-export_type([view/0, spec/0, row/0, key/0, grouping/0, sort/0, endpoint_info/0]).

-type grouping() :: process | name | module | application | node | kind.
%% What rows are ranked by: messages since start, the rate of the last
%% window, or the peak rate.
-type sort() :: messages | rate | peak | bytes | wait.
%% A row's sender or receiver: an endpoint (by process), a label (by
%% name), a module, application or node name; by kind, the kind and the
%% tag.
-type key() :: msgflow_tracer:endpoint() | msgflow_labels:group() | binary() | atom().
%% One row: messages since start, and in the last window; rates in messages/s: `rate' over the
%% last closed window, `prev_rate' over the one before (undefined when
%% there is none), `mean_rate' over the whole run, `peak_rate' the busiest
%% closed window (for a row of one pair, since start; of several, over the
%% kept windows); with `windows => K' in the spec, the messages in each of
%% the K latest closed windows, oldest first; `kinds' the messages since
%% start by kind and tag, most first (empty with kinds off).  By kind, a
%% row's windows and rates are its pairs' apportioned by the kind's share
%% of each pair's messages since start (kinds keep no windows of their
%% own), and its peak the busier of the last two windows.
%% (`call_p99', in a limited view by process: the p99 of the round trips
%% of the pair's sampled calls, µs, where it has any.)
-type row() :: #{sender := key(), receiver := key(), count := pos_integer(),
                 last_count := non_neg_integer(), rate := float(), prev_rate := float() | undefined,
                 mean_rate := float(), peak_rate := float(),
                 kinds := [msgflow_row:kind_count()],
                 windows => [non_neg_integer()], call_p99 => float(),
                 %% by process, the pair's sampled messages' sizes
                 %% (msgflow_store_sizes:figures()) and `bytes', the bytes
                 %% its messages copied since start (count x bytes_mean)
                 size_sampled => pos_integer(), words_mean => float(),
                 words_max => non_neg_integer(), binary_bytes_mean => float(),
                 large => non_neg_integer(), bytes_mean => float(), bytes => float(),
                 %% sorted by wait, by process: the receiver's mailbox
                 %% wait in the last window (ms), and whether it grew
                 receiver_wait_ms => float(), receiver_growing => boolean()}.
%% What a view says of a key of its rows: `label' (name or initial call;
%% for a group key its text), `text' (the endpoint as the VM shows it),
%% `display' (the label, with the text beside it when another key of the
%% view has the same label), `module', `application', `node'.
-type endpoint_info() :: #{label := binary(), text := binary(), display := binary(),
                           module := module() | undefined, application := atom() | undefined,
                           node := node() | undefined}.
-type view() :: #{by := grouping(), sort := sort(), node := node(), running := boolean(),
                  started_at := integer() | undefined, stopped_at := integer() | undefined,
                  taken_at := integer(), window_ms := non_neg_integer(), scale := number(),
                  %% the counts as they stood while the collector was
                  %% behind: every send before snapshot_at (system ms)
                  behind => boolean(), snapshot_at => integer() | undefined,
                  estimated := boolean(), sample := off | {pos_integer(), pos_integer()},
                  events := non_neg_integer(), dead_letters := non_neg_integer(),
                  overflow := non_neg_integer(), proc_events_dropped := non_neg_integer(),
                  memory_full => boolean(),
                  %% by process, with messages in overflow: its busiest pairs
                  %% (msgflow_store_topk:busiest/2) and what one not listed had
                  %% at most
                  overflow_top => #{pairs => [msgflow_store_topk:entry()], min => non_neg_integer()},
                  rolled_up := non_neg_integer(), skipped := non_neg_integer(),
                  new_tracer => msgflow | term(),
                  pairs := non_neg_integer(), groups := non_neg_integer() | undefined,
                  rows := [row()], endpoints := #{key() => endpoint_info()},
                  windows := [msgflow_store:window()],
                  dead := [{key(), key(), pos_integer()}],
                  heatmap => #{rows := [key()], cols := [key()]},
                  heat_totals => #{sent := [{key(), non_neg_integer()}],
                                   received := [{key(), non_neg_integer()}]},
                  nodes => [node()], node_status => [msgflow_cluster:node_status()]}.
%% `by' (process), `limit' (all; else the N busiest rows), `windows'
%% (0: per-window counts of the K latest closed windows in each row),
%% `active' (false; true: only rows with messages in those windows),
%% `dead' (false; true: dead letters by pair, grouped like the rows),
%% `keys' (none; by process: the rows of these pairs only, with those of
%% sends to names and the rolled-up rows: what the hotspot rules read),
%% `ends' (none; more keys to give endpoint info for, rows or not),
%% `heatmap' (none; L: the L senders and the L receivers with the most
%% messages, as `heatmap => #{rows, cols}', busiest first; by process
%% over every pair and not narrowed (heat_read/3), from the rows' totals,
%% with only the L senders' rows made, and `heat_totals': those senders'
%% messages and every receiver's, which a cluster's parts add up),
%% `labelled' (all; N: only the keys of the first N rows, and those of the
%% heatmap, get endpoint info: for reports that show a few rows of many),
%% `with_kinds' (true; false: rows' `kinds' left empty, for views that show
%% none, which then do not sum them: the matrix),
%% `endpoint' (none; a key: only the rows it is an end of, so that only
%% they are labelled: one process's partners),
%% `pair' (none; `{Sender, Receiver}': that row only, its ends as the
%% grouping keys them, a registered name as its pid by process),
%% `kind' (none; a kind, `call', or a kind and tag, `{call, get}': rows
%% of those messages only, rates apportioned by their share; needs
%% kinds),
%% `group_bytes' (false; true: grouped rows get `bytes', a read of every
%% pair with a size measured, as they do sorted by bytes; rows by process
%% have their sizes anyway),
%% `sort' (messages; rate: by the last window's rate; peak: by the peak
%% rate, which for a group is its busiest pair's until the rows are
%% chosen; bytes: by the bytes the pair's messages copied, from its
%% sampled sizes; wait: by process, by the receiver's mailbox wait in the
%% last window (msgflow_store_waits), rows with `receiver_wait_ms' and
%% `receiver_growing'; for both every row is built, then ranked, those
%% without the figure last by messages).
-type spec() :: #{by => grouping(), limit => pos_integer() | all, sort => sort(),
                  pair => {key(), key()}, endpoint => key(), with_kinds => boolean(),
                  kind => msgflow_tracer:kind() | {msgflow_tracer:kind(), atom()},
                  windows => non_neg_integer(), active => boolean(), dead => boolean(),
                  heatmap => pos_integer(), labelled => non_neg_integer() | all,
                  keys => [{key(), key()}], ends => [key()], group_bytes => boolean(),
                  filter => binary() | string()}.

%% @doc The most rows a view may ask for: more than any node holds
%% pairs, less than what ETS limits take.
-spec max_rows() -> pos_integer().
max_rows() -> 100000000.

%% @doc The groupings.
-spec groupings() -> [grouping()].
groupings() -> [process, name, module, application, node, kind].

%% @doc What rows may be ranked by.
-spec sorts() -> [sort()].
sorts() -> [messages, rate, peak, bytes, wait].

%% @doc The view of Store as Spec asks.  Rows busiest first.  In named
%% stages: what to read (reading/3), which groups (groups/5), their rows
%% narrowed to the pair, endpoint or kind asked (narrowed/4), with their
%% sizes (sized/4), ranked by bytes or wait when asked (ranked/4), with
%% their call p99 (with_p99/3), then the view's head around them
%% (view/6).
-spec build(msgflow_store:store(), spec()) -> view().
build(Store, Spec) ->
    By = maps:get(by, Spec, process),
    K = min(maps:get(windows, Spec, 0), length(maps:get(windows, Store))),
    {Ctx, HeatRead} = reading(Store, Spec, (context(Store, K))#{by => By}),
    {Groups, NGroups} = groups(Store, Spec, Ctx, By, limit_sort(Spec)),
    Rows = with_p99(Store, Spec,
                    ranked(Store, Spec, By, sized(Store, Spec, By, narrowed(Store, Spec, Groups, Ctx)))),
    view(Store, Spec, Ctx, K, {Rows, NGroups}, heat(Spec, HeatRead, Rows)).

%% The limit and ranking the groups are chosen by: by bytes or wait every
%% row, ranked once their figures are on them (ranked/4).
limit_sort(Spec) ->
    case maps:get(sort, Spec, messages) of
        bytes -> {all, messages};
        wait -> {all, messages};
        Sort -> {maps:get(limit, Spec, all), Sort}
    end.

%% What the groups are read with: the ranking, kinds or not, one
%% endpoint's rows only, a filter, only some pairs; for a heatmap of
%% every pair by process its keys from the rows' totals alone (and only
%% its senders' rows made): the heatmap read then, else none.
reading(Store, Spec, Ctx0) ->
    By = maps:get(by, Ctx0),
    {_, Sort} = limit_sort(Spec),
    Labels = maps:get(labels, Store),
    Ctx1 = Ctx0#{sort => Sort, with_kinds => maps:get(with_kinds, Spec, true)},
    Ctx2 = case Spec of
               #{endpoint := Only} when By =:= process ->
                   Ctx1#{endpoint => (msgflow_rows_groups:key_fun(process, Labels))(Only)};
               _ -> Ctx1
           end,
    Ctx3 = case Spec of
               #{filter := Text} -> Ctx2#{filter => filter(Text, By, Labels)};
               _ -> Ctx2
           end,
    %% by process, only these pairs (and the sends to names and rolled-up
    %% rows, which are few)
    Ctx = case Spec of
              #{keys := Keys} when By =:= process -> Ctx3#{keys => Keys};
              _ -> Ctx3
          end,
    case heat_read(Spec, By, Ctx) of
        {yes, L} ->
            {Heat, HeatPairs, Totals} = msgflow_rows_groups:heat_by_process(Store, Ctx, L),
            {Ctx#{keys => HeatPairs}, #{heatmap => Heat, heat_totals => Totals}};
        no ->
            {Ctx, none}
    end.

%% The groups to make rows of, and how many there are: by process the
%% top ones read from the indexes where the ranking allows, else every
%% group.
groups(Store, Spec, Ctx, By, {Limit, Sort}) ->
    case {By, Limit, Sort} of
        {process, N, messages} when is_integer(N), not is_map_key(filter, Ctx) ->
            msgflow_rows_groups:top_by_process(Store, Ctx, N);
        {process, N, rate} when is_integer(N), not is_map_key(filter, Ctx),
                                not is_map_key(endpoint, Ctx), not is_map_key(active, Spec),
                                not is_map_key(pair, Spec), not is_map_key(kind, Spec) ->
            msgflow_rows_groups:top_by_process(Store, Ctx, N);
        _ ->
            msgflow_rows_groups:all_groups(Store, Ctx, By, Limit, maps:get(active, Spec, false))
    end.

%% The groups' rows, only the pair or the endpoint's asked, only the kind
%% asked.
narrowed(Store, Spec, Groups, Ctx = #{by := By}) ->
    Canon = fun(E) -> case By of
                          process -> (msgflow_rows_groups:key_fun(process, maps:get(labels, Store)))(E);
                          _ -> E
                      end
            end,
    Rows = case Spec of
               #{pair := {S0, R0}} ->
                   Want = {Canon(S0), Canon(R0)},
                   [row(G, Acc, Members, Ctx) || {G, Acc, Members} <- Groups, G =:= Want];
               #{endpoint := E0} ->
                   E = Canon(E0),
                   [row(G, Acc, Members, Ctx) || {G = {S, R}, Acc, Members} <- Groups,
                                                 S =:= E orelse R =:= E];
               _ ->
                   [row(G, Acc, Members, Ctx) || {G, Acc, Members} <- Groups]
           end,
    case Spec of
        #{kind := Kind} -> only_kind(Rows, Kind);
        _ -> Rows
    end.

%% The rows with the sizes of their messages (the pair's, all kinds
%% together: none on rows of one kind); grouped, a read of every pair
%% with a size measured (about 1 s at a million), only when asked or
%% ranked by them.
sized(Store, Spec, By, Rows) ->
    GroupBytes = maps:get(sort, Spec, messages) =:= bytes orelse maps:get(group_bytes, Spec, false),
    case {By, Store} of
        _ when is_map_key(kind, Spec) -> Rows;
        {process, #{sizes := SizesT, labels := LabelsT}} ->
            with_sizes(Rows, SizesT, LabelsT, maps:get(named, Store, none));
        {kind, _} -> Rows;
        {_, #{sizes := SizesT, pairs := PairsT, labels := LabelsT}} when GroupBytes ->
            with_group_bytes(Rows, SizesT, PairsT, msgflow_rows_groups:key_fun(By, LabelsT));
        _ -> Rows
    end.

%% The rows ranked by bytes or by the receiver's wait when asked (then
%% cut to the limit), else as they are.
ranked(Store, Spec, By, Rows) ->
    case maps:get(sort, Spec, messages) of
        bytes -> limited(by_bytes(Rows), Spec);
        wait -> limited(by_wait(with_wait(Rows, By, maps:get(windows, Store))), Spec);
        _ -> Rows
    end.

%% By process with a limit, the rows with their call p99.
with_p99(Store, Spec, Rows) ->
    case {maps:get(by, Spec, process), maps:get(limit, Spec, all), Store} of
        {process, Top, #{calls := CallsT}} when is_integer(Top) -> with_p99(Rows, CallsT);
        _ -> Rows
    end.

%% The heatmap: read with the groups (reading/3), or of the rows made.
heat(_, HeatRead = #{}, _) -> HeatRead;
heat(#{heatmap := HL}, none, Rows) -> #{heatmap => msgflow_rows_ends:heatmap(Rows, HL)};
heat(_, _, _) -> #{}.

%% The view: the rows and the heatmap with the store's figures, the
%% endpoints they name (labelled: the first `labelled' rows, the
%% heatmap's, the ends asked, those of the busiest in overflow), the last
%% K windows, the dead letters when asked.
view(Store, Spec, Ctx = #{by := By}, K, {Rows, NGroups}, Heat) ->
    Kept = maps:get(windows, Store),
    Labelled = case maps:get(labelled, Spec, all) of
                   all -> Rows;
                   NL -> lists:sublist(Rows, NL)
               end,
    OverflowTop = overflow_top(Store, By, maps:get(limit, Spec, all)),
    HeatKeys = case Heat of
                   #{heatmap := #{rows := HR, cols := HC}} -> HR ++ HC;
                   _ -> []
               end ++ maps:get(ends, Spec, [])
        ++ lists:append([[S, R] || #{sender := S, receiver := R} <- maps:get(pairs, OverflowTop, [])]),
    Heat#{by => By, sort => maps:get(sort, Spec, messages), node => maps:get(node, Store),
      running => maps:get(running, Store),
      started_at => maps:get(started_at, Store), stopped_at => maps:get(stopped_at, Store),
      taken_at => maps:get(taken_at, Store),
      behind => maps:get(behind, Store, false), snapshot_at => maps:get(snapshot_at, Store, undefined),
      window_ms => maps:get(window_ms, Ctx), scale => maps:get(scale, Ctx),
      estimated => maps:get(scale, Ctx) =/= 1, sample => maps:get(sample, Store),
      events => maps:get(events, Store), dead_letters => maps:get(dead_letters, Store),
      overflow => maps:get(overflow, Store), proc_events_dropped => maps:get(proc_events_dropped, Store),
      memory_full => maps:get(memory_full, Store, false),
      overflow_top => OverflowTop,
      rolled_up => maps:get(rolled_up_messages, Store), skipped => maps:get(skipped, Store),
      new_tracer => maps:get(new_tracer, Store, msgflow),
      pairs => msgflow_row_table:size(maps:get(pairs, Store)), groups => NGroups,
      rows => Rows, endpoints => msgflow_rows_ends:endpoints(Labelled, HeatKeys, By,
                                                       maps:get(labels, Store)),
      windows => lists:nthtail(length(Kept) - K, Kept),
      dead => case maps:get(dead, Spec, false) of
                  true -> dead(Store, By);
                  false -> []
              end}.

%% By process with messages in overflow: the busiest pairs among them
%% (msgflow_store_topk), as many as the rows asked for (10 for all), and
%% what a pair not listed had at most; else nothing.
overflow_top(#{overflow := O, overflow_top := T}, process, Limit) when O > 0 ->
    {Pairs, Min} = msgflow_store_topk:busiest(T, overflow_top_limit(Limit)),
    #{pairs => Pairs, min => Min};
overflow_top(_, _, _) ->
    #{}.

%% @doc How many of the busiest pairs in overflow a view of Limit rows
%% shows: as many as its rows, 10 for all, 100 at most.
-spec overflow_top_limit(pos_integer() | all) -> pos_integer().
overflow_top_limit(all) -> 10;
overflow_top_limit(N) -> min(N, 100).

%% {yes, L} when the heatmap of L is read from the rows' totals
%% (msgflow_rows_groups:heat_by_process/3): by process, every pair's
%% messages since start, all rows ranked by messages, not narrowed (to
%% pairs, an endpoint, a kind, a text, the active ones); else no.
heat_read(#{heatmap := L} = Spec, process, Ctx) ->
    Narrowed = [K || K <- [pair, endpoint, kind, keys], is_map_key(K, Spec)]
        ++ [active || maps:get(active, Spec, false)] ++ [filter || is_map_key(filter, Ctx)]
        ++ [limit || maps:get(limit, Spec, all) =/= all]
        ++ [sort || maps:get(sort, Spec, messages) =/= messages],
    case Narrowed of
        [] -> {yes, L};
        _ -> no
    end;
heat_read(_, _, _) ->
    no.

%% fun({S, R}) -> true when one end of the group has Text in its label or
%% text, upper and lower case alike.
filter(Text, By, Tables) ->
    Want = string:casefold(Text),
    Has = fun(T) -> string:find(string:casefold(T), Want) =/= nomatch end,
    End = case By of
              process ->
                  fun(E) -> Has(msgflow_fmt:endpoint(E))
                                orelse Has(maps:get(label, msgflow_labels:meta(Tables, E))) end;
              kind -> fun(K) -> Has(msgflow_fmt:name(K)) end;
              _ -> fun(K) -> Has(key_text(K)) end
          end,
    fun({S, R}) -> End(S) orelse End(R) end.

%% @doc A key as text: an endpoint as the VM writes it (`<0.80.0>'), a
%% group's key as it reads (a label, a module, a node, a kind or tag).
-spec key_text(key()) -> binary().
key_text(K) when is_binary(K) -> K;
key_text(K) when is_atom(K) -> msgflow_fmt:name(K);
key_text(K) -> msgflow_fmt:endpoint(K).

%% The rows of a limited view by process with the p99 of their sampled
%% calls' round trips (`call_p99', µs), where they have any.
with_p99(Rows, CallsT) ->
    [case msgflow_call_row:of_pair(CallsT, S, R) of
         [] -> Row;
         Edges ->
             Hist = lists:foldl(fun(E, H) -> msgflow_call_row:add_hists(H, msgflow_call_row:hist(E)) end,
                                [], Edges),
             case msgflow_call_row:percentiles(Hist, [0.99]) of
                 [undefined] -> Row;
                 [P99] -> Row#{call_p99 => P99}
             end
     end || Row = #{sender := S, receiver := R} <- Rows].

%% Rows by process with their pair's sampled sizes
%% (msgflow_store_sizes), a pid's row with those of the sends to its
%% registered names, and the bytes its messages copied (count x mean).
with_sizes(Rows, T, Labels, NamedT) ->
    case ets:info(T, size) of
        0 -> Rows;
        _ ->
            %% the pairs sent to local names (the store keeps them apart:
            %% few), by {Sender, Pid}, the name's pid as the rows by process
            %% have it; none in a handle without them
            Sends = case NamedT of
                        none -> [];
                        _ -> [K || {K = {_, Name}} <- msgflow_row_table:to_list(NamedT), is_atom(Name)]
                    end,
            Named = lists:foldl(fun({S, Name}, Acc) ->
                                        case msgflow_labels:canon(Labels, Name) of
                                            P when is_pid(P) ->
                                                maps:update_with({S, P}, fun(L) -> [{S, Name} | L] end,
                                                                 [{S, Name}], Acc);
                                            _ -> Acc
                                        end
                                end, #{}, Sends),
            [case msgflow_store_sizes:of_pair(T, [{S, R} | maps:get({S, R}, Named, [])]) of
                 none -> Row;
                 F = #{bytes_mean := B} -> maps:merge(Row, F#{bytes => C * B})
             end || Row = #{sender := S, receiver := R, count := C} <- Rows]
    end.

%% Grouped rows with `bytes': the bytes the messages of their pairs with
%% sampled sizes copied since start (each pair's messages x its mean),
%% summed by group (Key: an end's group).  Reads the sizes and the pairs
%% measured, not every pair.
with_group_bytes(Rows, T, P, Key) ->
    case ets:info(T, size) of
        0 -> Rows;
        _ ->
            Sums = msgflow_store_sizes:bytes_by(T, P, fun({S, R}) -> {Key(S), Key(R)} end),
            [case Sums of
                 #{{S, R} := B} -> Row#{bytes => B};
                 _ -> Row
             end || Row = #{sender := S, receiver := R} <- Rows]
    end.

%% The first `limit' rows, or all.
limited(Rows, Spec) ->
    case maps:get(limit, Spec, all) of
        all -> Rows;
        N -> lists:sublist(Rows, N)
    end.

%% Rows by process with their receiver's wait in the last closed window
%% (Windows: the store's), where it had one.
with_wait(Rows, process, [_ | _] = Windows) ->
    Waits = maps:get(waits, lists:last(Windows), #{}),
    [case Waits of
         #{R := #{wait_ms := W, growing := G}} when is_number(W) ->
             Row#{receiver_wait_ms => float(W), receiver_growing => G};
         _ -> Row
     end || Row = #{receiver := R} <- Rows];
with_wait(Rows, _, _) ->
    Rows.

%% Rows whose receiver waited longest first (a mailbox that grew ahead),
%% those without a wait last, by messages.
by_wait(Rows) ->
    Key = fun(Row) -> {maps:get(receiver_growing, Row, false), maps:get(receiver_wait_ms, Row, -1.0),
                       maps:get(count, Row)} end,
    lists:sort(fun(A, B) -> Key(A) >= Key(B) end, Rows).

%% Rows with the most bytes first (those with no size measured last, by
%% messages).
by_bytes(Rows) ->
    lists:sort(fun(A, B) -> {maps:get(bytes, A, -1), maps:get(count, A)}
                                >= {maps:get(bytes, B, -1), maps:get(count, B)} end, Rows).

%% Rows restricted to one kind (`call') or kind and tag (`{call, get}'):
%% a row's messages of it, its kinds those, its window counts and rates
%% apportioned by their share of the row's messages (kinds keep no
%% windows of their own); rows without any are left out.
only_kind(Rows, Want) ->
    Match = case Want of
                {K, T} -> fun({K1, T1, _}) -> K1 =:= K andalso T1 =:= T end;
                K -> fun({K1, _, _}) -> K1 =:= K end
            end,
    [begin
         Share = N / C,
         Scale = fun(undefined) -> undefined; (X) -> X * Share end,
         R1 = Row#{count := N, kinds := Sel, last_count := round(LC * Share),
                   rate := Scale(Rate), prev_rate := Scale(Prev), mean_rate := Scale(Mean),
                   peak_rate := Scale(Peak)},
         case Row of
             #{windows := Ws} -> R1#{windows := [round(W * Share) || W <- Ws]};
             _ -> R1
         end
     end || Row = #{count := C, kinds := Ks, last_count := LC, rate := Rate, prev_rate := Prev,
                    mean_rate := Mean, peak_rate := Peak} <- Rows,
            Sel <- [lists:filter(Match, Ks)],
            N <- [lists:sum([X || {_, _, X} <- Sel])], N > 0].

%% @doc The window a rate is read in, for every view: the last closed
%% one, or before any closed the open one (`window_ms' its ms so far);
%% `scale' what sampling leaves out (1 when off).
-spec rate_window(msgflow_store:store()) ->
          #{last := non_neg_integer(), window_ms := non_neg_integer(), scale := number()}.
rate_window(Store = #{closed := Closed, windows := Ws, sample := Sample}) ->
    {Last, WinMs} = case Ws of
                        [] -> {Closed + 1, maps:get(open_ms, Store)};   %% the open window
                        _ -> {Closed, maps:get(window_ms, lists:last(Ws))}
                    end,
    #{last => Last, window_ms => WinMs, scale => case Sample of {T, P} -> P / T; off -> 1 end}.

%% Everything a row needs that is the same for all rows.
context(Store = #{closed := Closed, windows := Ws, interval := I}, K) ->
    #{last := Last, window_ms := WinMs, scale := Scale} = rate_window(Store),
    PrevMs = case lists:reverse(Ws) of
                 [_, #{window_ms := P} | _] -> P;
                 _ -> undefined
             end,
    RunMs = case Store of
                #{started_at := undefined} -> 0;
                #{stopped_at := undefined, taken_at := Now, started_at := S} -> Now - S;
                #{stopped_at := Stop, started_at := S} -> Stop - S
            end,
    %% rows carry the counts of windows First..Last: at least the last
    %% two (rate and trend), the last K when asked
    First = min(Last - 1, Last - K + 1),
    #{last => Last, first => First, zeros => lists:duplicate(Last - First + 1, 0),
      window_ms => WinMs, prev_ms => PrevMs, run_ms => RunMs, scale => Scale,
      k => K, open => Closed + 1, interval => I,
      durations => maps:from_list([{N, D} || #{n := N, window_ms := D} <- Ws]),
      labels => maps:get(labels, Store),
      %% the sends to local names, where the store keeps them apart
      named => maps:get(named, Store, none)}.

%%% Rows

row({S, R}, {Count, PerWin, NPairs, BestPeak, First, KindLists}, Members,
    Ctx = #{window_ms := WinMs, prev_ms := PrevMs, run_ms := RunMs, scale := Scale, k := K,
            open := Open, durations := Durs, interval := I}) ->
    [LastC, PrevC | _] = lists:reverse(PerWin),
    Peak = case {NPairs, Members} of
               _ when map_get(by, Ctx) =:= kind ->
                   %% apportioned: the busiest of the windows the row has
                   lists:max([msgflow_row:per_s(LastC, WinMs, 1)
                              | [msgflow_row:per_s(PrevC, PrevMs, 1) || PrevMs =/= undefined]]);
               {1, _} -> msgflow_row:peak_rate(First, Open, Durs, I);
               {_, undefined} -> msgflow_row:mhz_to_per_s(BestPeak);  %% a view of every row: its busiest pair's
               _ -> peak(Members, Ctx)
           end,
    Row = #{sender => S, receiver => R, count => Count, last_count => LastC,
            rate => msgflow_row:per_s(LastC, WinMs, Scale),
            prev_rate => case PrevMs of
                             undefined -> undefined;
                             _ -> msgflow_row:per_s(PrevC, PrevMs, Scale)
                         end,
            mean_rate => msgflow_row:per_s(Count, RunMs, Scale),
            peak_rate => Scale * Peak,
            kinds => case Ctx of
                         #{with_kinds := true} -> msgflow_row:sum_kinds(KindLists);
                         _ -> []
                     end},
    case K of
        0 -> Row;
        _ -> Row#{windows => lists:nthtail(length(PerWin) - K, PerWin)}
    end.


%% The busiest closed window of a group of several pairs: the sum of
%% their counts in each kept window.  A window the store closed after it
%% listed its durations (the collector runs on while a view is built) has
%% no duration yet, and is left out.
peak(Members, #{open := Open, durations := Durs}) when map_size(Durs) > 0 ->
    First = lists:min(maps:keys(Durs)),
    Sums = msgflow_row:sum_counts([msgflow_row:counts_in(First, Open - 1, M) || M <- Members]),
    lists:max([0.0 | [msgflow_row:per_s(C, D, 1)
                      || {W, C} <- lists:zip(lists:seq(First, Open - 1), Sums),
                         {ok, D} <- [maps:find(W, Durs)]]]);
peak(_, _) ->
    0.0.

%%% Dead letters

%% Dead letters by pair, grouped like the rows.
dead(#{dead := D, labels := Tables}, By) ->
    KeyOf = msgflow_rows_groups:key_fun(By, Tables),
    M = lists:foldl(fun({{S, R}, N}, Acc) ->
                            K = {KeyOf(S), KeyOf(R)},
                            Acc#{K => N + maps:get(K, Acc, 0)}
                    end, #{}, msgflow_row_table:to_list(D)),
    [{S, R, N} || {{S, R}, N} <- maps:to_list(M)].

%% @doc A key as the VM writes it (an endpoint: `<0.80.0>'), or a group's
%% key as its text (a label, a module); what the exports call `sender'
%% and `receiver'.
-spec text(view(), key()) -> binary().
text(#{endpoints := Ends}, K) ->
    case Ends of
        #{K := #{text := T}} -> T;
        _ -> key_text(K)
    end.

%% @doc A row's kinds as JSON: `[{"kind", "tag", "messages"}]'.
-spec kinds_json([msgflow_row:kind_count()]) -> [msgflow_view:json()].
kinds_json(Ks) ->
    [#{<<"kind">> => atom_to_binary(K), <<"tag">> => msgflow_fmt:name(T), <<"messages">> => N}
     || {K, T, N} <- Ks].

%% @doc A view's figures as JSON: the node, whether it runs, messages
%% counted (`events'), dead letters, overflow, distinct pairs held,
%% groups, the window rates are over (ms), whether they are estimates
%% (sampling), the nodes whose counts are in it and those that did not
%% answer.
-spec json_head(view()) -> #{binary() => msgflow_view:json()}.
json_head(V = #{node := N, running := Run, events := E, dead_letters := D, overflow := O,
                pairs := P, groups := G, window_ms := W, estimated := Est}) ->
    #{<<"node">> => msgflow_fmt:text(N), <<"running">> => Run, <<"events">> => E,
      <<"dead_letters">> => D, <<"overflow">> => O, <<"pairs">> => P,
      <<"memory_full">> => maps:get(memory_full, V, false),
      <<"groups">> => case G of undefined -> null; _ -> G end,
      <<"window_ms">> => W, <<"estimated">> => Est, <<"taken_at_ms">> => maps:get(taken_at, V),
      <<"behind">> => maps:get(behind, V, false),
      <<"snapshot_at_ms">> => case maps:get(snapshot_at, V, undefined) of undefined -> null; At -> At end,
      <<"overflow_top">> => overflow_top_json(V),
      <<"nodes">> => [msgflow_fmt:text(X) || X <- maps:get(nodes, V, [N])],
      <<"missing">> => [#{<<"node">> => atom_to_binary(X),
                          <<"reason">> => iolist_to_binary(io_lib:format("~0tp", [Why]))}
                        || {X, Why} <- maps:get(missing, V, [])]}.

%% @doc A view's busiest pairs in overflow as JSON: `{"min", "pairs":
%% [{"sender", "receiver", "messages", "error"}]}' (each pair's messages
%% between messages - error and messages, one not listed at most min), or
%% null when the view has none (no overflow; not by process).
-spec overflow_top_json(view()) -> msgflow_view:json().
overflow_top_json(V) ->
    case maps:get(overflow_top, V, #{}) of
        #{pairs := Pairs, min := Min} ->
            #{<<"min">> => Min,
              <<"pairs">> => [#{<<"sender">> => text(V, S), <<"receiver">> => text(V, R),
                                <<"messages">> => C, <<"error">> => Err}
                              || #{sender := S, receiver := R, count := C, error := Err} <- Pairs]};
        _ -> null
    end.

%% @doc The text a view shows for one of its keys: its `display' (the
%% label, with the pid or port beside it when another key shares the
%% label); for a key the view did not label, the endpoint as the VM
%% shows it (by kind: the kind or tag).
-spec display(view(), key()) -> binary().
display(View, K) ->
    case View of
        #{endpoints := #{K := #{display := D}}} -> D;
        #{by := kind} -> msgflow_fmt:name(K);
        _ -> msgflow_fmt:endpoint(K)
    end.
