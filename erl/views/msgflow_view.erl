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
%%% receiver the tag).  Which rows, and how they are grouped, is
%%% msgflow_view_groups'; this module makes the view and its rows.  For
%%% the top N by process only the N busiest pairs are read and labelled;
%%% the other groupings read every pair.
-module(msgflow_view).

-export([build/2, run/2, groupings/0, sorts/0, matrix/1, display/2]).
-export_type([view/0, spec/0, row/0, key/0, grouping/0, endpoint_info/0, matrix/0]).

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
%% (`call_p99', in a limited view by process: the p99 of the round trips
%% of the pair's sampled calls, µs, where it has any.)
-type row() :: #{sender := key(), receiver := key(), count := pos_integer(),
                 last_count := non_neg_integer(), rate := float(), prev_rate := float() | undefined,
                 mean_rate := float(), peak_rate := float(),
                 kinds := [msgflow_row:kind_count()],
                 windows => [non_neg_integer()], call_p99 => float()}.
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
%% The communication matrix (matrix/1): `rows' the senders and `cols' the
%% receivers, busiest first (messages sent, received); `cells' each
%% pair's messages since start and rate (messages/s over the last window,
%% extrapolated when sampling: `estimated'); `sent' and `received' each
%% key's messages; `labels' each key's text as the views show it;
%% `messages' the matrix's total.
-type matrix() :: #{by := grouping(), rows := [key()], cols := [key()],
                    cells := #{{key(), key()} => #{count := pos_integer(), rate := float()}},
                    sent := #{key() => non_neg_integer()},
                    received := #{key() => non_neg_integer()},
                    labels := #{key() => binary()}, messages := non_neg_integer(),
                    running := boolean(), window_ms := non_neg_integer(),
                    estimated := boolean(), nodes => [node()]}.
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
%% `endpoint' (none; a key: only the rows it is an end of, so that only
%% they are labelled: one process's partners),
%% `pair' (none; `{Sender, Receiver}': that row only, its ends as the
%% grouping keys them, a registered name as its pid by process),
%% `kind' (none; a kind, `call', or a kind and tag, `{call, get}': rows
%% of those messages only, rates apportioned by their share; needs
%% kinds),
%% `sort' (messages; rate: by the last window's rate; peak: by the peak
%% rate, which for a group is its busiest pair's until the rows are
%% chosen).
-type spec() :: #{by => grouping(), limit => pos_integer() | all, sort => sort(),
                  pair => {key(), key()}, endpoint => key(), kinds => boolean(),
                  kind => msgflow_tracer:kind() | {msgflow_tracer:kind(), atom()},
                  windows => non_neg_integer(), active => boolean(), dead => boolean(),
                  heatmap => pos_integer(), labelled => non_neg_integer() | all}.

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
    Ctx0 = (context(Store, K))#{sort => Sort, by => By, kinds => maps:get(kinds, Spec, true)},
    %% one endpoint's rows by process: only those are read
    Ctx = case Spec of
              #{endpoint := Only} when By =:= process ->
                  Ctx0#{endpoint => (msgflow_view_groups:key_fun(process, maps:get(labels, Store)))(Only)};
              _ -> Ctx0
          end,
    {Groups, NGroups} = case {By, Limit, Sort} of
                            {process, N, messages} when is_integer(N) ->
                                msgflow_view_groups:top_by_process(Store, Ctx, N);
                            _ ->
                                msgflow_view_groups:all_groups(Store, Ctx, By, Limit,
                                                                 maps:get(active, Spec, false))
                        end,
    Rows0 = case Spec of
               #{pair := {S0, R0}} ->
                   Canon = msgflow_view_groups:key_fun(process, maps:get(labels, Store)),
                   Want = case By of process -> {Canon(S0), Canon(R0)}; _ -> {S0, R0} end,
                   [row(G, Acc, Members, Ctx) || {G, Acc, Members} <- Groups, G =:= Want];
               #{endpoint := E0} ->
                   Canon = msgflow_view_groups:key_fun(process, maps:get(labels, Store)),
                   E = case By of process -> Canon(E0); _ -> E0 end,
                   [row(G, Acc, Members, Ctx) || {G = {S, R}, Acc, Members} <- Groups,
                                                 S =:= E orelse R =:= E];
               _ ->
                   [row(G, Acc, Members, Ctx) || {G, Acc, Members} <- Groups]
           end,
    Rows1 = case Spec of
               #{kind := Kind} -> only_kind(Rows0, Kind);
               _ -> Rows0
           end,
    Rows = case {By, Limit, Store} of
               {process, Top, #{calls := CallsT}} when is_integer(Top) -> with_p99(Rows1, CallsT);
               _ -> Rows1
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
    Heat#{by => By, sort => Sort, node => maps:get(node, Store),
      running => maps:get(running, Store),
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
            (N = lists:sum([X || {_, _, X} <- Sel])) > 0].

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
    KeyOf = msgflow_view_groups:key_fun(By, Tables),
    M = lists:foldl(fun({{S, R}, N}, Acc) ->
                            K = {KeyOf(S), KeyOf(R)},
                            Acc#{K => N + maps:get(K, Acc, 0)}
                    end, #{}, ets:tab2list(D)),
    [{S, R, N} || {{S, R}, N} <- maps:to_list(M)].

%% @doc The communication matrix of a view of every row (msgflow:view(matrix, _)).
-spec matrix(view()) -> matrix().
matrix(View = #{by := By, rows := Rows, window_ms := WinMs, estimated := Est, running := Run}) ->
    Add = fun(K, N, M) -> maps:update_with(K, fun(X) -> X + N end, N, M) end,
    {Sent, Recv} = lists:foldl(fun(#{sender := S, receiver := R, count := C}, {SA, RA}) ->
                                       {Add(S, C, SA), Add(R, C, RA)}
                               end, {#{}, #{}}, Rows),
    Busiest = fun(M) -> [K || {_, K} <- lists:sort([{-N, K} || {K, N} <- maps:to_list(M)])] end,
    Keys = lists:usort(maps:keys(Sent) ++ maps:keys(Recv)),
    M = #{by => By, rows => Busiest(Sent), cols => Busiest(Recv),
          cells => maps:from_list([{{S, R}, #{count => C, rate => Rate}}
                                   || #{sender := S, receiver := R, count := C, rate := Rate} <- Rows]),
          sent => Sent, received => Recv, labels => maps:from_list([{K, display(View, K)} || K <- Keys]),
          messages => lists:sum(maps:values(Sent)), running => Run,
          window_ms => WinMs, estimated => Est},
    case View of
        #{nodes := Ns} -> M#{nodes => Ns};
        _ -> M
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
