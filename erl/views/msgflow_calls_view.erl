%%% @doc The calls view: how long calls wait, per call edge (caller,
%%% server, the request's kind and tag), from the store's round trips of
%%% sampled calls (msgflow_call_row) and the exact call counts of the
%%% pairs' kinds.  A round trip is the time from the request's send to the
%%% reply's send (queueing at the server and its handling; not the
%%% caller's receive, nor a network's).  Built in the calling process from
%%% the store's tables; reads nothing else.  msgflow:calls/0,1 prints it.
%%%
%%% Options (msgflow_query adds `node' and `timeout'): `by' (process;
%%% name, module, application or node group the edges by their ends'
%%% labels), `limit' (all; else the N edges of the most total wait).
%%% Across a cluster each node measures the calls whose two halves it sees
%%% (a call between nodes is measured on neither), and the histograms are
%%% added up.
-module(msgflow_calls_view).
-behaviour(msgflow_view).
-export([options/0, build/2, merge/3, text/3, json/2]).
-export_type([entry/0, view/0]).

%% One call edge: `calls' the requests counted (exact, every call, from
%% the pair's kinds; undefined when the tag was past the pair's
%% max_kinds), `sampled' the round trips measured, `unanswered' the
%% sampled calls with no reply within call_timeout, the round trip's
%% quantiles and mean in µs (undefined with no round trip), `p99_last' and
%% `p99_prev' those of the last closed window and the one before it,
%% `wait_ms' the calls' estimated total wait (calls × mean, ms), and the
%% ends' labels.
-type entry() :: #{caller := term(), server := term(), kind := atom(), tag := atom(),
                   caller_label := binary(), server_label := binary(),
                   calls := non_neg_integer() | undefined, sampled := non_neg_integer(),
                   unanswered := non_neg_integer(),
                   p50 := float() | undefined, p90 := float() | undefined,
                   p99 := float() | undefined, max := float() | undefined,
                   mean := float() | undefined, wait_ms := float(),
                   p99_last := float() | undefined, p99_prev := float() | undefined,
                   hist := msgflow_call_row:hist()}.
-type view() :: #{by := msgflow_rows:grouping(), node := node(), running := boolean(),
                  entries := [entry()], sample := pos_integer() | off,
                  busy := non_neg_integer(), displaced := non_neg_integer()}.

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{by => {process, {one_of, msgflow_rows:groupings() -- [kind]}},
      limit => {all, {either, [{one_of, [all]}, {int, 1, msgflow_rows:max_rows(), "rows"}]}},
      %% only the edges (of `by') whose slowest sampled round trip took
      %% at least this long, µs (0: every edge)
      slowest_us => {0, {int, 0, 1 bsl 40, "µs"}},
      %% only the edges between these {Caller, Server} (keys of `by')
      edges => {all, {either, [{one_of, [all]}, pairs]}}}.

%% @doc The call edges of Store, grouped by `by' (process: a call to a
%% registered name is its pid's; name, module, application or node: the
%% labels'), busiest total wait first, at most `limit' (all); with
%% `slowest_us', only the edges whose slowest sampled round trip (the
%% upper bound of their histogram's highest bucket) took that many µs or
%% more; with `edges', only those between these `{Caller, Server}' (keys
%% of `by', as the rows views give them).  By process, asking for a few
%% edges (the slow ones for the hotspot rules) costs a pass over the
%% edges' rows and the work of the few asked for; by name, module,
%% application or node the store's call groups are read (one row per pair
%% of label ids and call: msgflow_store), and a group's calls are its
%% pairs' group's, every call counted, not only those of sampled edges
%% (but for a call tag past the group's max_kinds kinds and tags: then
%% the edges are read, as by process).
-spec build(msgflow_store:store(), #{by => msgflow_rows:grouping(), limit => pos_integer() | all,
                                     slowest_us => non_neg_integer(),
                                     edges => all | [{term(), term()}]}) ->
          view().
build(Store = #{labels := Tables}, Opts) ->
    By = case maps:get(by, Opts, process) of kind -> process; B -> B end,
    Groups = case lists:member(By, [name, module, application, node]) of
                 true ->
                     G = groups(Store, Opts, by_labels(Store, By)),
                     %% a group row keeps max_kinds kinds and tags, the
                     %% rest as `{Kind, other}': a call tag past them has
                     %% no exact count there, and the edges' pairs have
                     %% it (each pair has few)
                     case lists:any(fun({N, _, _, _, _, _}) -> N =:= undefined end, maps:values(G)) of
                         true -> groups(Store, Opts, by_edges(Store, By));
                         false -> G
                     end;
                 false ->
                     groups(Store, Opts, by_edges(Store, By))
             end,
    Label = fun(K) -> label(By, K, Tables) end,
    Sorted = sort([entry(K, V, Label) || {K, V} <- maps:to_list(Groups)]),
    #{by => By, node => maps:get(node, Store), running => maps:get(running, Store),
      sample => maps:get(call_sample, Store, off),
      busy => maps:get(busy, maps:get(call_figures, Store)),
      displaced => maps:get(displaced, maps:get(call_figures, Store)),
      entries => limit(Sorted, maps:get(limit, Opts, all))}.

%% How the call groups are read: their table, the key of a row's group
%% (of `by') and the calls its ends made (its key's four elements).
by_labels(Store = #{labels := Tables, groups := GroupRows}, By) ->
    GroupKey = msgflow_rows_groups:group_key_fun(By, Tables),
    {maps:get(call_groups, Store),
     fun(Row) ->
             {GC, GS, Kind, Tag} = msgflow_call_row:key(Row),
             {GroupKey(GC), GroupKey(GS), Kind, Tag}
     end,
     fun(GC, GS, Kind, Tag) -> calls(msgflow_row_table:lookup(GroupRows, {GC, GS}), Kind, Tag) end}.

%% The same of the edges.
by_edges(#{calls := T, pairs := P, rolled_up := F, labels := Tables}, By) ->
    Canon = msgflow_rows_groups:key_fun(process, Tables),
    KeyOf = msgflow_rows_groups:key_fun(By, Tables),
    {T,
     fun(Row) ->
             {C0, S0, Kind, Tag} = msgflow_call_row:key(Row),
             {KeyOf(Canon(C0)), KeyOf(Canon(S0)), Kind, Tag}
     end,
     %% a call to a name counted under the name and under its pid alike:
     %% in the pairs or the rolled-up rows
     fun(C, S, Kind, Tag) ->
             calls(lists:append([msgflow_row_table:lookup(Tab, {C, S}) || Tab <- [P, F]]), Kind, Tag)
     end}.

%% The wanted rows of T summed by their key's group: `#{Key => {Calls,
%% Sampled, Unanswered, Hist, LastHist, PrevHist}}'.
groups(Store = #{closed := Last}, Opts, {T, Key, CallsOf}) ->
    Slow = case maps:get(slowest_us, Opts, 0) of
               0 -> fun(_) -> true end;
               Us -> SlowKeys = slow_keys(Store, T, Key, Us), fun(K) -> maps:is_key(K, SlowKeys) end
           end,
    Wanted = case maps:get(edges, Opts, all) of
                 all -> Slow;
                 Edges ->
                     Asked = maps:from_list([{E, true} || E <- Edges]),
                     fun(K) -> maps:is_key({element(1, K), element(2, K)}, Asked) andalso Slow(K) end
             end,
    ets:foldl(fun(Row, Acc) ->
                      K = Key(Row),
                      case Wanted(K) of
                          true -> add_row(CallsOf, K, Row, Last, Acc);
                          false -> Acc
                      end
              end, #{}, T).

%% The keys (of `by', Key) of the edges in T one of whose rows had a
%% sampled round trip of Us µs or more: of the store's edges from their
%% index by the slowest (msgflow_store_calls:slowest/2), of its call
%% groups (few) from every row.
slow_keys(#{calls := T, call_slowest := Ix}, T, Key, Us) ->
    maps:from_list([{Key(Row), true} || K <- msgflow_store_calls:slowest(Ix, Us),
                                        Row <- ets:lookup(T, K)]);
slow_keys(_, T, Key, Us) ->
    ets:foldl(fun(Row, Acc) ->
                      case msgflow_call_row:percentiles(msgflow_call_row:hist(Row), [1]) of
                          [Max] when is_number(Max), Max >= Us -> Acc#{Key(Row) => true};
                          _ -> Acc
                      end
              end, #{}, T).

%% Row (of an edge of key K) added to its group in Acc; CallsOf gives
%% the calls its ends made (its key's four elements).
add_row(CallsOf, K, Row, Last, Acc) ->
    {C0, S0, Kind, Tag} = msgflow_call_row:key(Row),
    Calls = CallsOf(C0, S0, Kind, Tag),
    {N0, S1, U1, H1, L1, P1} = maps:get(K, Acc, {0, 0, 0, [], [], []}),
    {LH, PH} = msgflow_call_row:recent(Row, Last),
    N = case {N0, Calls} of
            {undefined, _} -> undefined;
            {_, undefined} -> undefined;
            _ -> N0 + Calls
        end,
    Acc#{K => {N, S1 + msgflow_call_row:sampled(Row),
               U1 + msgflow_call_row:unanswered(Row),
               msgflow_call_row:add_hists(H1, msgflow_call_row:hist(Row)),
               msgflow_call_row:add_hists(L1, LH),
               msgflow_call_row:add_hists(P1, PH)}}.

%% @doc Several nodes' views as one (a cluster's): the edges of one key
%% added (calls, round trips, unanswered, histograms: a call is measured
%% on the node that sees both its halves), the quantiles taken again from
%% the sums; busiest total wait first, at most `limit'.  One node's as it
%% is.
-spec merge([view()], map(), msgflow_view:context()) -> view().
merge([One], _Opts, _Ctx) ->
    One;
merge(Views, Opts, _Ctx) ->
    merge(Views, maps:get(limit, Opts, all)).

merge([First | _] = Views, Limit) ->
    Add = fun(undefined, _) -> undefined; (_, undefined) -> undefined; (A, B) -> A + B end,
    Sum = lists:foldl(
            fun(#{entries := Es}, Acc) ->
                    lists:foldl(
                      fun(E = #{caller := C, server := S, kind := K, tag := T}, Acc1) ->
                              Key = {C, S, K, T},
                              Next = case Acc1 of
                                         #{Key := {N, Sa, U, H, L, P, Labels}} ->
                                             {Add(N, maps:get(calls, E)), Sa + maps:get(sampled, E),
                                              U + maps:get(unanswered, E),
                                              msgflow_call_row:add_hists(H, maps:get(hist, E)),
                                              L, P, Labels};
                                         _ ->
                                             {maps:get(calls, E), maps:get(sampled, E),
                                              maps:get(unanswered, E), maps:get(hist, E), [], [],
                                              {maps:get(caller_label, E), maps:get(server_label, E)}}
                                     end,
                              Acc1#{Key => Next}
                      end, Acc, Es)
            end, #{}, Views),
    Entries = [(entry(K, {N, Sa, U, H, L, P}, fun(_) -> <<>> end))#{caller_label => CL,
                                                                   server_label => SL}
               || {K, {N, Sa, U, H, L, P, {CL, SL}}} <- maps:to_list(Sum)],
    First#{running => lists:any(fun(#{running := R}) -> R end, Views),
           busy => lists:sum([B || #{busy := B} <- Views]),
           displaced => lists:sum([D || #{displaced := D} <- Views]),
           entries => limit(sort(Entries), Limit)}.

sort(Entries) ->
    lists:sort(fun(A, B) -> {maps:get(wait_ms, A), maps:get(sampled, A)}
                                >= {maps:get(wait_ms, B), maps:get(sampled, B)} end, Entries).

limit(Es, all) -> Es;
limit(Es, L) -> lists:sublist(Es, L).

entry({C, S, Kind, Tag}, {Calls, Sampled, Unanswered, Hist, LastHist, PrevHist}, Label) ->
    [P50, P90, P99, Max] = msgflow_call_row:percentiles(Hist, [0.5, 0.9, 0.99, 1]),
    [P99Last] = msgflow_call_row:percentiles(LastHist, [0.99]),
    [P99Prev] = msgflow_call_row:percentiles(PrevHist, [0.99]),
    Mean = mean(Hist),
    Wait = case {Calls, Mean} of
               {undefined, undefined} -> 0.0;
               {undefined, _} -> Sampled * Mean / 1000;
               {_, undefined} -> 0.0;
               _ -> Calls * Mean / 1000
           end,
    #{caller => C, server => S, kind => Kind, tag => Tag,
      caller_label => Label(C), server_label => Label(S),
      calls => Calls, sampled => Sampled, unanswered => Unanswered,
      p50 => P50, p90 => P90, p99 => P99, max => Max, mean => Mean, wait_ms => Wait,
      p99_last => P99Last, p99_prev => P99Prev,
      hist => Hist}.

%% The mean round trip of a histogram, µs, from its buckets' middles.
mean([]) ->
    undefined;
mean(Hist) ->
    Mids = [{M, N} || {B, N} <- Hist, [M] <- [msgflow_call_row:percentiles([{B, 1}], [0.5])]],
    lists:sum([M * N || {M, N} <- Mids]) / lists:sum([N || {_, N} <- Mids]).

%% The exact count of Kind-Tag messages in Rows (msgflow_row), undefined
%% when none holds any.
calls(Rows, Kind, Tag) ->
    case Rows of
        [] -> undefined;
        _ ->
            Ks = lists:append([msgflow_row:kinds(R) || R <- Rows]),
            case [N || {K, T, N} <- Ks, K =:= Kind, T =:= Tag] of
                [] -> undefined;
                Ns -> lists:sum(Ns)
            end
    end.

label(process, K, Tables) ->
    maps:get(label, msgflow_labels:meta(Tables, K));
label(_, K, _) when is_binary(K) -> K;
label(_, K, _) -> msgflow_fmt:endpoint(K).

%% @doc The edges in the area's width: one line per call edge and tag,
%% busiest total wait first: its calls (exact), the round trips sampled,
%% their p50, p99 and max, the unanswered.
-spec text(view(), map(), msgflow_view:area()) -> unicode:chardata().
text(V = #{entries := Es, running := Run, by := By, sample := Sample}, _Opts, Area = #{width := Width}) ->
    E = msgflow_fmt:ellipsis(Area),
    Head = io_lib:format("msgflow ~s: ~s call edges by ~s, round trips of ~s (request sent to "
                         "reply sent)~n",
                         [msgflow_fmt:run_state(Run, V), msgflow_fmt:int(length(Es)), By,
                          case Sample of
                              off -> "none: call_sample => off";
                              1 -> "every call";
                              N -> io_lib:format("1 in ~b calls per scheduler", [N])
                          end]),
    %% the numbers take 49 columns, the call 14, the two ends the rest
    EndW = max(12, (Width - 49 - 14 - 3) div 2),
    Line = fun(C, S, K, Calls, Sampled, P50, P99, Max, U) ->
                   [msgflow_fmt:label_cell(C, EndW, E), " ", msgflow_fmt:label_cell(S, EndW, E), " ",
                    msgflow_fmt:cell(K, 14, E),
                    io_lib:format("~9s ~7s ~7s ~7s ~7s ~6s~n", [Calls, Sampled, P50, P99, Max, U])]
           end,
    [Head, msgflow_fmt:missing(maps:get(missing, V, [])),
     Line("CALLER", "SERVER", "CALL", "CALLS", "SAMPLED", "P50", "P99", "MAX", "UNANS"),
     case Es of
         [] -> "  no call sampled yet\n";
         _ -> [Line(CL, SL, msgflow_fmt:kind(K, T),
                    case Calls of undefined -> "?"; _ -> msgflow_fmt:int(Calls) end,
                    msgflow_fmt:int(Sa), msgflow_fmt:micros(P50), msgflow_fmt:micros(P99),
                    msgflow_fmt:micros(Max), msgflow_fmt:int(U))
               || #{caller_label := CL, server_label := SL, kind := K, tag := T, calls := Calls,
                    sampled := Sa, p50 := P50, p99 := P99, max := Max, unanswered := U} <- Es]
     end].

%% @doc The edges as JSON: each edge's ends (as the VM writes them, and
%% their labels), the request's kind and tag, calls, round trips sampled,
%% unanswered, and the quantiles in µs (null without a round trip).
-spec json(view(), map()) -> msgflow_view:json().
json(#{by := By, running := Run, sample := Sample, entries := Es}, _Opts) ->
    Num = fun(undefined) -> null; (X) -> X end,
    #{<<"by">> => atom_to_binary(By), <<"running">> => Run,
      <<"sample">> => case Sample of off -> <<"off">>; N -> N end,
      <<"entries">> =>
          [#{<<"caller">> => msgflow_rows:key_text(C), <<"server">> => msgflow_rows:key_text(S),
             <<"caller_label">> => CL, <<"server_label">> => SL,
             <<"kind">> => atom_to_binary(K), <<"tag">> => msgflow_fmt:name(T),
             <<"calls">> => Num(N), <<"sampled">> => Sa, <<"unanswered">> => U,
             <<"p50_us">> => Num(P50), <<"p90_us">> => Num(P90), <<"p99_us">> => Num(P99),
             <<"max_us">> => Num(Max)}
           || #{caller := C, server := S, caller_label := CL, server_label := SL, kind := K,
                tag := T, calls := N, sampled := Sa, unanswered := U, p50 := P50, p90 := P90,
                p99 := P99, max := Max} <- Es]}.
