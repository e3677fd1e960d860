%%% @doc The busiest pairs among the messages in overflow: a Space-Saving
%%% summary (Metwally, Agrawal and El Abbadi, 2005) of ?SLOTS pairs, so
%%% that past `max_pairs' or `max_memory' the heaviest pairs are still
%%% found, each with a bound on its error.
%%%
%%% Two sources feed it, in the collector (the store's owner) as a take
%%% merges:
%%% <ul>
%%% <li>the deltas the store put in overflow (a new pair past the bound):
%%%     exact counts, added as they come (add/3);</li>
%%% <li>the tracer's own summaries of the sends that found no entry at all
%%%     (the tracer's entry cap), one a shard (c_src/mf_topk.h), merged
%%%     once a take (merge/2).</li>
%%% </ul>
%%% For each pair in it, its messages in overflow since the run started
%%% (or the last reset) are between `count - error' and `count'; a pair
%%% not in it has at most `min' of them (the least count once all slots
%%% are taken, else 0).  Merging follows the rule for mergeable summaries
%%% (Agarwal et al., 2012): a pair that a shard's summary left out may
%%% have had that summary's least count there, so it is added to the count
%%% and error of every pair held that the shard's summary does not name.
%%%
%%% Only sends of a local process to a local process (or its aliases, as
%%% its replies) are in the tracer's summaries; an overflowed send to a
%%% name or to a remote process is in the overflow tally only.
%%%
%%% Its two tables are protected: views read them in any process
%%% (busiest/2); only the owner writes.  Their memory is bounded (about
%%% 220 KB) and counted in `max_memory' from the start (to_come/1), as
%%% the tracer's summaries are (36 KB a thread, part of its tables).
-module(msgflow_store_topk).

-export([new/0, add/3, merge/2, tables/1, to_come/1, handle/1, busiest/2, clear/1]).
-export_type([topk/0, entry/0, handle/0]).

%% pairs the summary holds
-define(SLOTS, 1024).
%% bytes a pair takes in its two tables, about (214 measured, OTP 25)
-define(SLOT_BYTES, 220).

-record(topk, {
    %% {Key, Count, Err}
    counts :: ets:tid(),
    %% {{Count, Key}}: the least count first
    order :: ets:tid()
}).
-opaque topk() :: #topk{}.
%% What views read: the counts table.
-opaque handle() :: ets:tid().
%% One pair of the summary: messages in overflow between `count - error'
%% and `count'.
-type entry() :: #{sender := term(), receiver := term(), count := pos_integer(),
                   error := non_neg_integer()}.

%% @doc An empty summary; its tables belong to the calling process.
-spec new() -> topk().
new() ->
    #topk{counts = ets:new(msgflow_overflow_top, [set, protected, {read_concurrency, true}]),
          order = ets:new(msgflow_overflow_order, [ordered_set, protected])}.

%% @doc N messages of pair Key put in overflow (exact).  The owner only.
-spec add(topk(), {term(), term()}, pos_integer()) -> topk().
add(T, Key, N) ->
    add(T, Key, N, 0).

%% Count messages of Key, Err of which may not be its own.
add(T = #topk{counts = C, order = O}, Key, Count, Err) ->
    case ets:lookup(C, Key) of
        [{_, C0, E0}] ->
            set(T, Key, C0, C0 + Count, E0 + Err);
        [] ->
            case ets:info(C, size) < ?SLOTS of
                true ->
                    set(T, Key, none, Count, Err);
                false ->
                    %% the pair takes a least one's slot, and its count as
                    %% its error
                    {Min, Least} = ets:first(O),
                    ets:delete(O, {Min, Least}),
                    ets:delete(C, Least),
                    set(T, Key, none, Min + Count, Min + Err)
            end
    end.

set(T = #topk{counts = C, order = O}, Key, Old, Count, Err) ->
    _ = Old =:= none orelse ets:delete(O, {Old, Key}),
    ets:insert(C, {Key, Count, Err}),
    ets:insert(O, {{Count, Key}}),
    T.

%% @doc The tracer's summaries of a take merged in: each `{Min, Slots}'
%% one shard's (msgflow_tracer:snapshot_next/1), Slots
%% `[{Sender, Receiver, Count, Err}]' (a pair may come twice: its sends to
%% a process and to its aliases).  The owner only.
-spec merge(topk(), [{non_neg_integer(), [{term(), term(), pos_integer(), non_neg_integer()}]}]) -> topk().
merge(T, Parts) ->
    lists:foldl(fun merge_part/2, T, Parts).

merge_part({Min, Slots}, T = #topk{counts = C}) ->
    Part = lists:foldl(fun({S, R, N, E}, Acc) ->
                               maps:update_with({S, R}, fun({N0, E0}) -> {N0 + N, E0 + E} end,
                                                {N, E}, Acc)
                       end, #{}, Slots),
    %% (a shard's summary that left none out hid nothing)
    T1 = case Min of
             0 -> T;
             _ -> lists:foldl(fun({Key, _, _}, Acc) when not is_map_key(Key, Part) ->
                                      add(Acc, Key, Min, Min);
                                 (_, Acc) ->
                                      Acc
                              end, T, ets:tab2list(C))
         end,
    maps:fold(fun(Key, {N, E}, Acc) -> add(Acc, Key, N, E) end, T1, Part).

%% @doc The tables, for the store's memory and its retiring.
-spec tables(topk()) -> [ets:tid()].
tables(#topk{counts = C, order = O}) -> [C, O].

%% @doc The bytes the summary may still grow by (its tables when every
%% slot is taken, less what they hold now): max_memory keeps them free from
%% the start, so that what overflows past the bound is summarised within
%% it.
-spec to_come(topk()) -> non_neg_integer().
to_come(T) ->
    Words = lists:sum([ets:info(X, memory) || X <- tables(T)]),
    max(0, ?SLOTS * ?SLOT_BYTES - Words * erlang:system_info(wordsize)).

%% @doc What views read (busiest/2).
-spec handle(topk()) -> handle().
handle(#topk{counts = C}) -> C.

%% @doc The N busiest pairs of the summary, by count, and the least count
%% (what a pair not there had at most: 0 while slots are free).  Any
%% process; `{[], 0}' for a table that is gone (a reset).
-spec busiest(handle(), pos_integer() | all) -> {[entry()], non_neg_integer()}.
busiest(C, N) ->
    try ets:tab2list(C) of
        All ->
            Sorted = lists:sort(fun({K1, A, _}, {K2, B, _}) -> {A, K2} >= {B, K1} end, All),
            Min = case length(All) < ?SLOTS of
                      true -> 0;
                      false -> lists:min([X || {_, X, _} <- All])
                  end,
            Top = case N of all -> Sorted; _ -> lists:sublist(Sorted, N) end,
            {[#{sender => S, receiver => R, count => X, error => E} || {{S, R}, X, E} <- Top], Min}
    catch error:badarg -> {[], 0}
    end.

%% @doc A new summary in place of T; T's tables to retire.
-spec clear(topk()) -> {topk(), [ets:tid()]}.
clear(T) ->
    {new(), tables(T)}.
