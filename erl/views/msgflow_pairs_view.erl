%%% @doc The `pairs' view: every pair held, exactly as the VM reported its
%%% ends, busiest first (msgflow:pairs/0,1).  Pairs of exited ends and
%%% replies to local aliases are rolled up into groups: in the other views
%%% and `info()''s `rolled_up', never here.
%%%
%%% Option `with' (total): `total' gives `[{Sender, Receiver, Messages}]'
%%% (messages since start); `kinds' gives each pair's messages by kind and
%%% tag, `[{Sender, Receiver, Kind, Tag, Messages}]' (a pair's kinds add up
%%% to its total; a pair counted with kinds off has none).  Across a
%%% cluster, every node's pairs (each send is counted on its sender's
%%% node); when a node did not answer in time the value says so: `{partial,
%%% Pairs, Missing}', the pairs of the nodes that answered and `[{Node,
%%% Reason}]' (never a node's last reported busiest pairs standing in for
%%% all of them).
-module(msgflow_pairs_view).
-behaviour(msgflow_view).

-export([options/0, build/2, merge/3, wait/1, text/3, json/2, encode/2, decode/2]).
-export_type([pair_count/0, pair_kind_count/0, pairs/0]).

%% {Sender, Receiver, Messages}
%% the heap words of a pair in a list: its cell and its tuple
-define(PAIR_WORDS, 6).

-type pair_count() :: {msgflow_tracer:endpoint(), msgflow_tracer:endpoint(), pos_integer()}.
%% {Sender, Receiver, Kind, Tag, Messages}
-type pair_kind_count() :: {msgflow_tracer:endpoint(), msgflow_tracer:endpoint(),
                            msgflow_tracer:kind(), atom(), pos_integer()}.

%% The value: every pair, or (across a cluster) the pairs of the nodes
%% that answered and those that did not, with why.
-type pairs() :: [pair_count()] | [pair_kind_count()]
               | {partial, [pair_count()] | [pair_kind_count()], [{node(), term()}]}.

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{with => {total, {one_of, [total, kinds]}}}.

%% @doc Every pair is worth waiting for (30 s, not 1).
-spec wait(map()) -> full.
wait(_) -> full.

%% @doc This node's pairs (read in chunks from its pairs table).
-spec build(msgflow_store:store(), map()) -> [pair_count()] | [pair_kind_count()].
build(#{pairs := T}, #{with := total}) ->
    %% sorted by the count alone (a stable sort: pairs of equal counts in
    %% the table's order, reversed): a million pairs in about 0.5 s, where
    %% sorting the whole tuples took twice that
    All = msgflow_row_table:fold_select(T, [{msgflow_row:pattern(#{key => {'$1', '$2'}, total => '$3'}), [],
                                       [{{'$1', '$2', '$3'}}]}],
                                  fun(X, Acc) -> [X | Acc] end, []),
    lists:reverse(lists:keysort(3, All));
build(#{pairs := T}, #{with := kinds}) ->
    All = msgflow_row_table:fold_select(T, [{msgflow_row:pattern(#{key => {'$1', '$2'}, total => '$3',
                                                             kinds => '$4'}),
                                       [], [{{'$1', '$2', '$3', '$4'}}]}],
                                  fun({S, R, Total, Ks}, Acc) ->
                                          [{S, R, K, Tg, N} || {K, Tg, N} <- msgflow_row:kinds_of(Total, Ks)]
                                              ++ Acc
                                  end, []),
    sort_kinds(All).

%% most messages first (equal counts in term order, the same every time)
sort_kinds(L) ->
    [{S, R, K, Tg, N} || {N, S, R, K, Tg} <- lists:reverse(lists:sort([{N, S, R, K, Tg}
                                                                     || {S, R, K, Tg, N} <- L]))].

%% @doc Every node's pairs, busiest first; `{partial, Pairs, Missing}'
%% when some did not answer.  Parts are this node's pairs and the other
%% nodes' as decode/2 left them.
-spec merge([[pair_count()] | {ascending, tuple(), binary()}] | [[pair_kind_count()]], map(),
            msgflow_view:context()) -> pairs().
merge(Parts, Opts, #{missing := [_ | _] = Missing} = Ctx) ->
    {partial, merge(Parts, Opts, Ctx#{missing := []}), Missing};
merge([One], _Opts, _Ctx) when is_list(One) -> One;
merge(Parts, #{with := total}, _Ctx) -> merge_sorted(Parts);
merge(Parts, #{with := kinds}, _Ctx) -> sort_kinds(lists:append(Parts)).

%% Parts merged run by run, least busy first: each part is least busy
%% first (a node's binary as it came, decode/2; this node's list
%% reversed); the part whose next pair is the least busy gives its run of
%% pairs of that count, in front of those given before, then goes back
%% among the others by its next count (a list of as many as nodes), so
%% the value comes out busiest first.  A pair read from a binary is made
%% once, as it joins the value, and reading a run makes nothing else: at
%% 2,000,000 pairs of few distinct counts the value is all the merge
%% leaves on the heap (a run costs a few words and the parts' list, so
%% pairs whose counts all differ leave about that much per pair).
%%
%% So the asking process's heap is first made as large as the value
%% (min_heap_size for the merge, then as it was): the value is built
%% without a garbage collection, where each collection of a growing value
%% copied all of it into a heap half as large again.
merge_sorted(Parts) ->
    Asc = [ascending(P) || P <- Parts],
    Words = lists:sum([pair_words(P) || P <- Asc]),
    Old = erlang:process_flag(min_heap_size, Words + Words div 8),
    true = erlang:garbage_collect(),
    try runs(lists:keysort(1, [{first_count(P), P} || P <- Asc, not empty(P)]), [])
    after erlang:process_flag(min_heap_size, Old)
    end.

%% The heap words the merge makes for a part's pairs: a list cell and a
%% tuple for a pair read from a binary, a cell for one already a term.
pair_words({_, Bin}) -> ?PAIR_WORDS * (byte_size(Bin) div 16);
pair_words(L) -> 2 * length(L).

ascending({ascending, Ends, Bin}) -> {Ends, Bin};
ascending(L) -> lists:reverse(L).

runs([], Acc) ->
    Acc;
runs([{C, P} | Heads], Acc) ->
    {Rest, Acc1} = run(P, C, Acc),
    case empty(Rest) of
        true -> runs(Heads, Acc1);
        false -> runs(insert({first_count(Rest), Rest}, Heads), Acc1)
    end.

insert(H = {C, _}, [H1 = {C1, _} | T]) when C > C1 -> [H1 | insert(H, T)];
insert(H, Heads) -> [H | Heads].

empty({_, <<>>}) -> true;
empty([]) -> true;
empty(_) -> false.

first_count({_, <<_:64, N:64, _/binary>>}) -> N;
first_count([{_, _, N} | _]) -> N.

%% The part's pairs of count C at its front onto Acc, and the rest of it.
run({Ends, Bin}, C, Acc) ->
    {Rest, Acc1} = run_bin(Bin, C, Ends, Acc),
    {{Ends, Rest}, Acc1};
run(L, C, Acc) ->
    run_list(L, C, Acc).

run_bin(<<I:32, J:32, N:64, Rest/binary>>, C, Ends, Acc) when N =:= C ->
    run_bin(Rest, C, Ends, [{element(I, Ends), element(J, Ends), N} | Acc]);
run_bin(Bin, _, _, Acc) ->
    {Bin, Acc}.

run_list([X = {_, _, C} | Rest], C, Acc) -> run_list(Rest, C, [X | Acc]);
run_list(L, _, Acc) -> {L, Acc}.

%% @doc A node's pairs as they cross to the asking node: its ends once,
%% in a tuple, and each pair as the ends' places in it, so that a
%% remote pid is decoded once, not each time a pair names it; with
%% `total', the pairs are a binary of 16 bytes each (their ends' places
%% and their count), off the asking process's heap until decoded
%% (200,000 pairs of 2,100 processes: 3 MB instead of 25).
-spec encode([pair_count()] | [pair_kind_count()], map()) -> {tuple(), binary() | [tuple()]}.
encode(Pairs, Opts) ->
    {Ends, Index, _} = lists:foldl(fun(P, Acc) -> index(element(2, P), index(element(1, P), Acc)) end,
                                   {[], #{}, 0}, Pairs),
    Places = fun(P) -> {maps:get(element(1, P), Index), maps:get(element(2, P), Index)} end,
    {list_to_tuple(lists:reverse(Ends)),
     case Opts of
         #{with := kinds} ->
             [begin {I, J} = Places(P), setelement(2, setelement(1, P, I), J) end || P <- Pairs];
         _ ->
             %% least busy first: the asking node merges them so
             << <<I:32, J:32, N:64>> || P = {_, _, N} <- lists:reverse(Pairs), {I, J} <- [Places(P)] >>
     end}.

places_in(<<I:32, J:32, N:64, Rest/binary>>, Size, Before)
  when I >= 1, I =< Size, J >= 1, J =< Size, N >= Before ->
    places_in(Rest, Size, N);
places_in(<<>>, _, _) -> true.

index(E, Acc = {Ends, Index, N}) ->
    case Index of
        #{E := _} -> Acc;
        _ -> {[E | Ends], Index#{E => N + 1}, N + 1}
    end.

%% @doc encode/2's value as pairs again, each end one term shared by its
%% pairs; with `total', `{ascending, Ends, Binary}': the pairs least busy
%% first, left in the binary they came in (off the heap) for merge/3 to
%% read, checked first (a place not in Ends, a count lower than the one
%% before, or a binary cut short, is an error here, where the query path
%% makes it the node's `bad_answer').
-spec decode({tuple(), binary() | [tuple()]}, map()) ->
          [pair_kind_count()] | {ascending, tuple(), binary()}.
decode({Ends, Bin}, _Opts) when is_tuple(Ends), is_binary(Bin) ->
    true = places_in(Bin, tuple_size(Ends), 0),
    {ascending, Ends, Bin};
decode({Ends, Pairs}, _Opts) ->
    [setelement(2, setelement(1, P, element(element(1, P), Ends)), element(element(2, P), Ends))
     || P <- Pairs].

%% @doc The pairs, a line each (as many as the area has lines).
-spec text(pairs(), map(), msgflow_view:area()) -> unicode:chardata().
text({partial, Pairs, Missing}, Opts, Area) ->
    [text(Pairs, Opts, Area),
     [io_lib:format("not here: the pairs of ~s, which did not answer in time (~0tp)~n", [N, Why])
      || {N, Why} <- Missing]];
text(Pairs, _Opts, Area = #{width := W, height := H}) ->
    E = msgflow_fmt:ellipsis(Area),
    EndW = max(12, (W - 30) div 2),
    Shown = lists:sublist(Pairs, max(1, H - 3)),
    [io_lib:format("msgflow pairs: ~s~n", [msgflow_fmt:int(length(Pairs))]),
     [[msgflow_fmt:label_cell(msgflow_fmt:endpoint(S), EndW, E), " ",
       msgflow_fmt:label_cell(msgflow_fmt:endpoint(R), EndW, E), " ",
       case P of
           {_, _, K, T, N} -> [msgflow_fmt:cell(msgflow_fmt:kind(K, T), 16, E), " ",
                               msgflow_fmt:rcell(msgflow_fmt:int(N), 10)];
           {_, _, N} -> msgflow_fmt:rcell(msgflow_fmt:int(N), 10)
       end, "\n"] || P <- Shown, {S, R} <- [{element(1, P), element(2, P)}]],
     case length(Pairs) - length(Shown) of
         0 -> [];
         More -> io_lib:format("... ~s more: msgflow:pairs()~n", [msgflow_fmt:int(More)])
     end].

%% @doc The pairs as JSON.
-spec json(pairs(), map()) -> msgflow_view:json().
json({partial, Pairs, Missing}, Opts) ->
    #{<<"pairs">> => json(Pairs, Opts), <<"partial">> => true,
      <<"missing">> => [#{<<"node">> => atom_to_binary(N),
                          <<"reason">> => iolist_to_binary(io_lib:format("~0tp", [Why]))}
                        || {N, Why} <- Missing]};
json(Pairs, _Opts) ->
    [case P of
         {S, R, K, T, N} -> #{<<"sender">> => msgflow_fmt:endpoint(S),
                              <<"receiver">> => msgflow_fmt:endpoint(R),
                              <<"kind">> => atom_to_binary(K), <<"tag">> => msgflow_fmt:name(T),
                              <<"messages">> => N};
         {S, R, N} -> #{<<"sender">> => msgflow_fmt:endpoint(S),
                        <<"receiver">> => msgflow_fmt:endpoint(R), <<"messages">> => N}
     end || P <- Pairs].
