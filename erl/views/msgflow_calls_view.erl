%%% @doc The calls view: how long calls wait, per call edge (caller,
%%% server, the request's kind and tag), from the store's round trips of
%%% sampled calls (msgflow_call_row) and the exact call counts of the
%%% pairs' kinds.  A round trip is the time from the request's send to the
%%% reply's send (queueing at the server and its handling; not the
%%% caller's receive, nor a network's).  Built in the calling process from
%%% the store's tables; reads nothing else.
-module(msgflow_calls_view).
-export([build/2, merge/2]).
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
-type view() :: #{by := msgflow_view:grouping(), node := node(), running := boolean(),
                  entries := [entry()], sample := pos_integer() | off,
                  busy := non_neg_integer(), displaced := non_neg_integer()}.

%% @doc The call edges of Store, grouped by `by' (process: a call to a
%% registered name is its pid's; name, module, application or node: the
%% labels'), busiest total wait first, at most `limit' (all).
-spec build(msgflow_store:store(), #{by => msgflow_view:grouping(), limit => pos_integer() | all,
                                     sample => pos_integer() | off}) -> view().
build(Store = #{calls := T, labels := Tables, closed := Last}, Opts) ->
    By = case maps:get(by, Opts, process) of kind -> process; B -> B end,
    Canon = msgflow_view_groups:key_fun(process, Tables),
    KeyOf = msgflow_view_groups:key_fun(By, Tables),
    Groups = lists:foldl(
               fun(Row, Acc) ->
                       {C0, S0, Kind, Tag} = msgflow_call_row:key(Row),
                       Calls = calls(Store, C0, S0, Kind, Tag),
                       K = {KeyOf(Canon(C0)), KeyOf(Canon(S0)), Kind, Tag},
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
                                  msgflow_call_row:add_hists(P1, PH)}}
               end, #{}, ets:tab2list(T)),
    Label = fun(K) -> label(By, K, Tables) end,
    Sorted = sort([entry(K, V, Label) || {K, V} <- maps:to_list(Groups)]),
    #{by => By, node => maps:get(node, Store), running => maps:get(running, Store),
      sample => maps:get(sample, Opts, off),
      busy => maps:get(busy, maps:get(call_figures, Store)),
      displaced => maps:get(displaced, maps:get(call_figures, Store)),
      entries => limit(Sorted, maps:get(limit, Opts, all))}.

%% @doc Several nodes' views as one (a cluster's): the edges of one key
%% added (calls, round trips, unanswered, histograms: a call is measured
%% on the node that sees both its halves), the quantiles taken again from
%% the sums; busiest total wait first, at most Limit.
-spec merge([view()], pos_integer() | all) -> view().
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

%% The exact count of Kind-Tag messages from Caller to Server: their
%% pair's kinds, in the pairs or the folded rows (a call to a name counted
%% under the name and under its pid alike).
calls(#{pairs := P, folded := F}, Caller, Server, Kind, Tag) ->
    Rows = lists:append([ets:lookup(T, {Caller, Server}) || T <- [P, F]]),
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
