%%% @doc The one view of the counts that every renderer reads (top,
%%% matrix, hotspots, history, the exports and the ETF dump), built in one
%%% place: build/2, from a store handle (msgflow_collector:store/1), in the
%%% calling process.  It reads the collector's ETS tables and never calls
%%% the collector.
%%%
%%% A view reads the pairs and the folded rows (msgflow_collector) alike:
%%% every message counted and not in overflow is in one row of it.  It
%%% groups them by `process' (a send to a registered name and a send to
%%% the pid holding it are one receiver, and the NIF counts a reply to a
%%% gen:call's alias for its caller; exited processes are their group,
%%% `{exited, Kind, Node}'), `name' (labels),
%%% `module', `application' or `node', or by the kind and tag of the
%%% messages (`kind': a row per `{Kind, Tag}', its sender the kind and its
%%% receiver the tag).  For the top N by process it picks
%%% the N busiest pairs first (a threshold from a sample, then a select in
%%% ETS of the rows above it) and labels those only; the other groupings
%%% read every pair.
-module(msgflow_view).

-export([build/2, run/2, groupings/0, sorts/0]).
-export_type([view/0, spec/0, row/0, key/0, grouping/0, endpoint_info/0]).

-type grouping() :: process | name | module | application | node | kind.
%% What rows are ranked by: messages since start, the rate of the last
%% window, or the peak rate.
-type sort() :: messages | rate | peak.
%% A row's sender or receiver: an endpoint (by process), a label (by
%% name), a module, application or node name; by kind, the kind and the
%% tag.
-type key() :: msgflow_tracer:endpoint() | binary() | atom().
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
-type row() :: #{sender := key(), receiver := key(), count := pos_integer(),
                 last_count := non_neg_integer(), rate := float(), prev_rate := float() | undefined,
                 mean_rate := float(), peak_rate := float(),
                 kinds := [msgflow_row:kind_count()],
                 windows => [non_neg_integer()]}.
%% What a view says of a key of its rows: `label' (name or initial call;
%% for a group key its text), `text' (the endpoint as the VM shows it),
%% `display' (the label, with the text beside it when another key of the
%% view has the same label), `module', `application', `node'.
-type endpoint_info() :: #{label := binary(), text := binary(), display := binary(),
                           module := module() | undefined, application := atom() | undefined,
                           node := node() | undefined}.
-type view() :: #{by := grouping(), node := node(), running := boolean(),
                  started_at := integer() | undefined, stopped_at := integer() | undefined,
                  taken_at := integer(), window_ms := non_neg_integer(), scale := number(),
                  estimated := boolean(), sample := off | {pos_integer(), pos_integer()},
                  events := non_neg_integer(), dead_letters := non_neg_integer(),
                  overflow := non_neg_integer(), births_dropped := non_neg_integer(),
                  folded := non_neg_integer(), skipped := non_neg_integer(),
                  new_tracer => msgflow | term(),
                  pairs := non_neg_integer(), groups := non_neg_integer() | undefined,
                  rows := [row()], endpoints := #{key() => endpoint_info()},
                  windows := [msgflow_store:window()],
                  dead := [{key(), key(), pos_integer()}],
                  heatmap => #{rows := [key()], cols := [key()]},
                  nodes => [node()], node_status => [msgflow_cluster:node_status()]}.
%% `by' (process), `limit' (all; else the N busiest rows), `windows'
%% (0: per-window counts of the K latest closed windows in each row),
%% `active' (false; true: only rows with messages in those windows),
%% `dead' (false; true: dead letters by pair, grouped like the rows),
%% `heatmap' (none; L: the L senders and the L receivers with the most
%% messages, as `heatmap => #{rows, cols}', busiest first),
%% `labelled' (all; N: only the keys of the first N rows, and those of the
%% heatmap, get endpoint info: for reports that show a few rows of many),
%% `kinds' (true; false: rows' `kinds' left empty, for views that show
%% none, which then do not sum them: the matrix),
%% `pair' (none; `{Sender, Receiver}': that row only, its ends as the
%% grouping keys them, a registered name as its pid by process),
%% `sort' (messages; rate: by the last window's rate; peak: by the peak
%% rate, which for a group is its busiest pair's until the rows are
%% chosen).
-type spec() :: #{by => grouping(), limit => pos_integer() | all, sort => sort(),
                  pair => {key(), key()}, kinds => boolean(),
                  windows => non_neg_integer(), active => boolean(), dead => boolean(),
                  heatmap => pos_integer(), labelled => non_neg_integer() | all}.

-define(SAMPLE, 4096).       %% rows read to set the top-N threshold

%% @doc The groupings.
-spec groupings() -> [grouping()].
groupings() -> [process, name, module, application, node, kind].

%% @doc What rows may be ranked by.
-spec sorts() -> [sort()].
sorts() -> [messages, rate, peak].

%% @doc Fun() run in a process of its own whose first heap is sized for
%% the store (about 40 words a pair, at most 8M words: 64 MB), so that building
%% a view of every pair does not run the garbage collector over and over,
%% nor leave the caller's heap grown; its value is returned (copied), and
%% what it raises is raised again here.
-spec run(msgflow_store:store(), fun(() -> Result)) -> Result.
run(#{pairs := T}, Fun) ->
    Size = case ets:info(T, size) of
               undefined -> 0;      %% the collector is gone: the view says so
               N -> N
           end,
    Words = min(8 * 1024 * 1024, max(233, 40 * Size)),
    {Pid, Ref} = spawn_opt(fun() ->
                                   %% msgflow's own: its reads are not
                                   %% traffic of the node's
                                   ok = msgflow_flags:untrace_self(),
                                   exit({done, try {ok, Fun()} catch C:R:St -> {C, R, St} end})
                           end, [monitor, {min_heap_size, Words}]),
    receive
        {'DOWN', Ref, process, Pid, {done, {ok, Value}}} -> Value;
        {'DOWN', Ref, process, Pid, {done, {C, R, St}}} -> erlang:raise(C, R, St);
        {'DOWN', Ref, process, Pid, Other} -> exit(Other)
    end.

%% @doc The view of Store as Spec asks.  Rows busiest first.
-spec build(msgflow_store:store(), spec()) -> view().
build(Store, Spec) ->
    By = maps:get(by, Spec, process),
    Limit = maps:get(limit, Spec, all),
    Sort = maps:get(sort, Spec, messages),
    K = min(maps:get(windows, Spec, 0), length(maps:get(windows, Store))),
    Ctx = (context(Store, K))#{sort => Sort, by => By, kinds => maps:get(kinds, Spec, true)},
    {Groups, NGroups} = case {By, Limit, Sort} of
                            {process, N, messages} when is_integer(N) ->
                                top_by_process(Store, Ctx, N);
                            _ ->
                                all_groups(Store, Ctx, By, Limit, maps:get(active, Spec, false))
                        end,
    Rows = case Spec of
               #{pair := {S0, R0}} ->
                   Canon = key_fun(process, maps:get(labels, Store)),
                   Want = case By of process -> {Canon(S0), Canon(R0)}; _ -> {S0, R0} end,
                   [row(G, Acc, Members, Ctx) || {G, Acc, Members} <- Groups, G =:= Want];
               _ ->
                   [row(G, Acc, Members, Ctx) || {G, Acc, Members} <- Groups]
           end,
    Kept = maps:get(windows, Store),
    Heat = case Spec of
               #{heatmap := L} -> #{heatmap => msgflow_view_ends:heatmap(Rows, L)};
               _ -> #{}
           end,
    Labelled = case maps:get(labelled, Spec, all) of
                   all -> Rows;
                   NL -> lists:sublist(Rows, NL)
               end,
    HeatKeys = case Heat of
                   #{heatmap := #{rows := HR, cols := HC}} -> HR ++ HC;
                   _ -> []
               end,
    Heat#{by => By, node => maps:get(node, Store), running => maps:get(running, Store),
      started_at => maps:get(started_at, Store), stopped_at => maps:get(stopped_at, Store),
      taken_at => maps:get(taken_at, Store),
      window_ms => maps:get(window_ms, Ctx), scale => maps:get(scale, Ctx),
      estimated => maps:get(scale, Ctx) =/= 1, sample => maps:get(sample, Store),
      events => maps:get(events, Store), dead_letters => maps:get(dead_letters, Store),
      overflow => maps:get(overflow, Store), births_dropped => maps:get(births_dropped, Store),
      folded => maps:get(folded_messages, Store), skipped => maps:get(skipped, Store),
      new_tracer => maps:get(new_tracer, Store, msgflow),
      pairs => ets:info(maps:get(pairs, Store), size), groups => NGroups,
      rows => Rows, endpoints => msgflow_view_ends:endpoints(Labelled, HeatKeys, By,
                                                       maps:get(labels, Store)),
      windows => lists:nthtail(length(Kept) - K, Kept),
      dead => case maps:get(dead, Spec, false) of
                  true -> dead(Store, By);
                  false -> []
              end}.

%% Everything a row needs that is the same for all rows.
context(Store = #{closed := Closed, windows := Ws, sample := Sample, interval := I}, K) ->
    {Last, WinMs} = case Ws of
                        [] -> {Closed + 1, maps:get(open_ms, Store)};   %% the open window
                        _ -> {Closed, maps:get(window_ms, lists:last(Ws))}
                    end,
    PrevMs = case lists:reverse(Ws) of
                 [_, #{window_ms := P} | _] -> P;
                 _ -> undefined
             end,
    RunMs = case Store of
                #{started_at := undefined} -> 0;
                #{stopped_at := undefined, taken_at := Now, started_at := S} -> Now - S;
                #{stopped_at := Stop, started_at := S} -> Stop - S
            end,
    Scale = case Sample of {T, P2} -> P2 / T; off -> 1 end,
    %% rows carry the counts of windows First..Last: at least the last
    %% two (rate and trend), the last K when asked
    First = min(Last - 1, Last - K + 1),
    #{last => Last, first => First, zeros => lists:duplicate(Last - First + 1, 0),
      window_ms => WinMs, prev_ms => PrevMs, run_ms => RunMs, scale => Scale,
      k => K, open => Closed + 1, interval => I,
      durations => maps:from_list([{N, D} || #{n := N, window_ms := D} <- Ws]),
      labels => maps:get(labels, Store)}.

%%% Choosing the rows

%% The N busiest pairs by process.  Rows whose receiver is a local
%% registered name, and the folded rows, are few and merged
%% into their pid's row first; of the others only those above the N-th
%% largest total of a sample can be among the N busiest, and ETS selects
%% just those, and at most N of those equal to it (ties are broken by
%% table order).
top_by_process(#{pairs := T, folded := F}, Ctx = #{labels := Tables}, N) ->
    Named = ets:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}}), [named_guard()], ['$_']}]),
    Side = lists:foldl(fun(Row, Acc) ->
                               {S, R} = msgflow_row:key(Row),
                               add_member({S, msgflow_labels:canon(Tables, R)}, Row, Acc)
                       end, #{}, Named ++ ets:tab2list(F)),
    Thr = threshold(T, N),
    Above = ets:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}, total => '$2'}),
                            [{'>', '$2', Thr}, {'not', named_guard()}], ['$_']}]),
    Equal = case ets:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}, total => '$2'}),
                                 [{'==', '$2', Thr}, {'not', named_guard()}], ['$_']}], N) of
                '$end_of_table' -> [];
                {Eq, _} -> Eq
            end,
    Groups0 = lists:foldl(fun(Row, Acc) -> add_member(msgflow_row:key(Row), Row, Acc) end,
                          Side, Above ++ Equal),
    %% a merged name's pid row may be below the threshold: fetch it
    Groups = maps:fold(fun(Key, Members, Acc) ->
                               case lists:any(fun(M) -> msgflow_row:key(M) =:= Key end, Members) of
                                   true -> Acc;
                                   false -> Acc#{Key := ets:lookup(T, Key) ++ Members}
                               end
                       end, Groups0, Side),
    Accs = [{Key, sum_rows(Members, Ctx)} || {Key, Members} <- maps:to_list(Groups)],
    {[{Key, Acc, maps:get(Key, Groups)} || {Key, Acc} <- busiest(Accs, N, Ctx)], undefined}.

sum_rows([Row | Rows], Ctx) ->
    lists:foldl(fun(R, Acc) -> add_acc(acc(R, Ctx), Acc) end, acc(Row, Ctx), Rows).

%% Local registered names (atom, or {Name, node()}) as receivers.
named_guard() ->
    {'orelse', {is_atom, '$1'},
     {'andalso', {is_tuple, '$1'}, {'==', {element, 2, '$1'}, node()}}}.

%% The N-th largest total of the first ?SAMPLE rows that are not sends to
%% a name (0 when there are fewer): a bound below the N-th largest of all.
threshold(T, N) ->
    case ets:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}, total => '$2'}), [{'not', named_guard()}],
                         ['$2']}], ?SAMPLE) of
        '$end_of_table' -> 0;
        {Totals, _} when length(Totals) < N -> 0;
        {Totals, _} -> lists:nth(N, lists:sort(fun erlang:'>='/2, Totals))
    end.

add_member(Key, Row, Acc) ->
    case Acc of
        #{Key := Ms} -> Acc#{Key := [Row | Ms]};
        _ -> Acc#{Key => [Row]}
    end.

%% Every pair read, grouped; the busiest Limit of the groups.  A group is
%% summed as its pairs are read (acc/2); for a limited view the pairs of
%% the chosen groups of several pairs are read again, for their peak.
all_groups(Store = #{pairs := T, folded := F, labels := Tables}, Ctx = #{k := K, last := Last},
           By, Limit, Active) ->
    KeyOf = key_fun(By, Tables),
    Guard = case Active andalso K > 0 of
                true -> [{'>', '$2', Last - K}];
                false -> []
            end,
    Match = [{msgflow_row:pattern(#{key => {'_', '$1'}, window => '$2'}), Guard, ['$_']}],
    Accs = case By of
               process -> by_process(T, F, Guard, KeyOf, Ctx);
               kind -> by_kind(T, F, Match, Ctx);
               _ ->
                   Add = fun(Row, Acc) ->
                                 {S, R} = msgflow_row:key(Row),
                                 add_acc_to({KeyOf(S), KeyOf(R)}, acc(Row, Ctx), Acc)
                         end,
                   maps:to_list(msgflow_row:fold_select(F, Match, Add, msgflow_row:fold_select(T, Match, Add, #{})))
           end,
    Chosen = busiest(Accs, Limit, Ctx),
    Members = case {Limit, By} of
                  {all, _} -> #{};
                  {_, kind} -> #{};       %% apportioned: no peak of their own
                  _ -> members([Key || {Key, {_, _, M, _, _, _}} <- Chosen, M > 1], Store, KeyOf,
                               Match)
              end,
    {[{Key, Acc, maps:get(Key, Members, undefined)} || {Key, Acc} <- Chosen], length(Accs)}.

%% By process a pair is its own group but for sends to a local registered
%% name, which join the pid's, and the folded rows: those few
%% are grouped in a map, the rest read as a list.
by_process(T, F, Guard, KeyOf, Ctx) ->
    Named = ets:select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}, window => '$2'}), [named_guard() | Guard],
                            ['$_']}])
        ++ ets:select(F, [{msgflow_row:pattern(#{window => '$2'}), Guard, ['$_']}]),
    Side = lists:foldl(fun(Row, Acc) ->
                               {S, R} = msgflow_row:key(Row),
                               add_acc_to({S, KeyOf(R)}, acc(Row, Ctx), Acc)
                       end, #{}, Named),
    Plain = msgflow_row:fold_select(T, [{msgflow_row:pattern(#{key => {'_', '$1'}, window => '$2'}),
                             [{'not', named_guard()} | Guard], ['$_']}],
                        fun(Row, Acc) -> [{msgflow_row:key(Row), acc(Row, Ctx)} | Acc] end,
                        []),
    case map_size(Side) of
        0 -> Plain;
        _ ->
            {Merged, Left} = lists:mapfoldl(fun({Key, A}, Sd) ->
                                                    case maps:take(Key, Sd) of
                                                        {B, Sd1} -> {{Key, add_acc(B, A)}, Sd1};
                                                        error -> {{Key, A}, Sd}
                                                    end
                                            end, Side, Plain),
            maps:to_list(Left) ++ Merged
    end.

add_acc_to(Key, A, Acc) ->
    case Acc of
        #{Key := B} -> Acc#{Key := add_acc(A, B)};
        _ -> Acc#{Key => A}
    end.

members([], _, _, _) ->
    #{};
members(Keys, #{pairs := T, folded := F}, KeyOf, Match) ->
    Want = maps:from_list([{K, []} || K <- Keys]),
    Add = fun(Row, Acc) ->
                  {S, R} = msgflow_row:key(Row),
                  Key = {KeyOf(S), KeyOf(R)},
                  case Want of
                      #{Key := _} -> add_member(Key, Row, Acc);
                      _ -> Acc
                  end
          end,
    msgflow_row:fold_select(F, Match, Add, msgflow_row:fold_select(T, Match, Add, #{})).

%% One pair's part of a group: {Total, Counts, Pairs, Peak, Row, Kinds}:
%% Counts its messages per window from `first' to `last' (see context/2),
%% Peak its own (messages/s), Row itself (for a group of one), Kinds a
%% list of its pairs' kinds lists (summed once the rows are chosen, so
%% that grouping costs a cons a pair).
acc(Row, #{first := First, last := Last, zeros := Zeros, k := K} = Ctx) ->
    W = msgflow_row:last_window(Row),
    Counts = if
                 W < First -> Zeros;
                 K =< 2 -> msgflow_row:last_two(Last, Row);
                 true -> msgflow_row:counts_in(First, Last, Row)
             end,
    Kinds = case Ctx of
                #{kinds := false} -> [];
                _ -> [Row]
            end,
    {msgflow_row:total(Row), Counts, 1, msgflow_row:peak_milli(Row), Row, Kinds}.

%% Peak: a single pair's is read from its row when the row is made; for
%% several, this is the highest peak kept in their rows (messages per
%% 1000 s).
add_acc({T1, C1, N1, P1, _, K1}, {T2, C2, N2, P2, R2, K2}) ->
    {T1 + T2, add_counts(C1, C2), N1 + N2, max(P1, P2), R2, add_kind_lists(K1, K2)}.

add_kind_lists([], K2) -> K2;
add_kind_lists(K1, K2) -> [K1 | K2].

%% By kind: each row's part apportioned to its kinds and tags by their
%% share of its messages since start (a row without kinds goes to
%% `{none, none}').
by_kind(T, F, Match, Ctx) ->
    Add = fun(Row, Acc) ->
                  A = {Total, Counts, _, Peak, _, _} = acc(Row, Ctx),
                  case msgflow_row:kinds(Row) of
                      [] -> add_acc_to({none, none}, A, Acc);
                      Ks ->
                          lists:foldl(
                            fun({Kd, Tg, N}, Acc1) ->
                                    Sh = N / Total,
                                    Part = {N, [round(C * Sh) || C <- Counts], 1,
                                            round(Peak * Sh), Row, [[{Kd, Tg, N}]]},
                                    add_acc_to({Kd, Tg}, Part, Acc1)
                            end, Acc, Ks)
                  end
          end,
    maps:to_list(msgflow_row:fold_select(F, Match, Add, msgflow_row:fold_select(T, Match, Add, #{}))).

add_counts([A, B], [C, D]) -> [A + C, B + D];
add_counts(L1, L2) -> lists:zipwith(fun erlang:'+'/2, L1, L2).

%% fun(Endpoint) -> the key of its group.  Labels, modules and
%% applications are read once per view from the endpoints table (and the
%% kinds, for groups of exited endpoints).
key_fun(process, Tables) ->
    fun(E) -> msgflow_labels:canon(Tables, E) end;
key_fun(kind, _) ->
    fun(E) -> E end;          %% by kind, rows are not grouped by their ends
key_fun(node, Tables) ->
    fun(E) -> msgflow_labels:node_of(msgflow_labels:canon(Tables, E)) end;
key_fun(By, Tables) ->
    Field = case By of name -> label; _ -> By end,
    Cache = msgflow_labels:field_map(Tables, Field),
    Kinds = msgflow_labels:kind_map(Tables, Field),
    fun({exited, Kind, _}) ->
            maps:get(Kind, Kinds);
       (E0) ->
            E = case is_pid(E0) orelse is_port(E0) of
                    false -> msgflow_labels:canon(Tables, E0);
                    true -> E0
                end,
            case Cache of
                #{E := V} -> V;
                %% labelled after the cache was read
                _ -> maps:get(Field, msgflow_labels:meta(Tables, E))
            end
    end.

%% Groups busiest first by the view's sort, all or the first Limit:
%% [{Key, Acc}] from a list of them.  The rate ranks by the last window's
%% messages (the same window for every row), the peak by the highest peak
%% kept in the group's rows.
busiest(Accs, Limit, #{sort := Sort}) ->
    Rank = fun({Total, _, _, _, _, _}) when Sort =:= messages -> Total;
              ({_, Counts, _, _, _, _}) when Sort =:= rate -> lists:last(Counts);
              ({_, _, _, Peak, _, _}) -> Peak
           end,
    Sorted = [{Key, Acc} || {_, _, Key, Acc} <- lists:sort([{-Rank(Acc), -element(1, Acc), Key, Acc}
                                                            || {Key, Acc} <- Accs])],
    case Limit of
        all -> Sorted;
        N -> lists:sublist(Sorted, N)
    end.

%%% Rows

row({S, R}, {Count, PerWin, NPairs, BestPeak, First, KindLists}, Members,
    Ctx = #{window_ms := WinMs, prev_ms := PrevMs, run_ms := RunMs, scale := Scale, k := K,
            open := Open, durations := Durs, interval := I}) ->
    [LastC, PrevC | _] = lists:reverse(PerWin),
    Peak = case {NPairs, Members} of
               _ when map_get(by, Ctx) =:= kind ->
                   %% apportioned: the busiest of the windows the row has
                   lists:max([msgflow_rate:per_s(LastC, WinMs, 1)
                              | [msgflow_rate:per_s(PrevC, PrevMs, 1) || PrevMs =/= undefined]]);
               {1, _} -> msgflow_row:peak_rate(First, Open, Durs, I);
               {_, undefined} -> msgflow_rate:milli_to_per_s(BestPeak);  %% a view of every row: its busiest pair's
               _ -> peak(Members, Ctx)
           end,
    Row = #{sender => S, receiver => R, count => Count, last_count => LastC,
            rate => msgflow_rate:per_s(LastC, WinMs, Scale),
            prev_rate => case PrevMs of
                             undefined -> undefined;
                             _ -> msgflow_rate:per_s(PrevC, PrevMs, Scale)
                         end,
            mean_rate => msgflow_rate:per_s(Count, RunMs, Scale),
            peak_rate => Scale * Peak,
            kinds => case Ctx of
                         #{kinds := true} -> msgflow_row:sum_kinds(KindLists);
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
    lists:max([0.0 | [msgflow_rate:per_s(C, D, 1)
                      || {W, C} <- lists:zip(lists:seq(First, Open - 1), Sums),
                         {ok, D} <- [maps:find(W, Durs)]]]);
peak(_, _) ->
    0.0.

%%% Dead letters

%% Dead letters by pair, grouped like the rows.
dead(#{dead := D, labels := Tables}, By) ->
    KeyOf = key_fun(By, Tables),
    M = lists:foldl(fun({{S, R}, N}, Acc) ->
                            K = {KeyOf(S), KeyOf(R)},
                            Acc#{K => N + maps:get(K, Acc, 0)}
                    end, #{}, ets:tab2list(D)),
    [{S, R, N} || {{S, R}, N} <- maps:to_list(M)].
