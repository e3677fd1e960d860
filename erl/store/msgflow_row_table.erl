%%% @doc The store's tables of rows (pairs, rolled-up rows, dead letters,
%%% groups) as every reader outside the store reads them: one row by key,
%%% whether a key has one, how many, and scans with ETS match specs.  A
%%% table is an ETS table (a history range's store, the tests') or a table
%%% of the collector's aggregate in C, `{msgflow_agg, Agg, Table}'
%%% (msgflow_tracer:agg_*; issue 53), read in chunks of ?CHUNK rows, each
%%% run through the match spec here (ets:match_spec_run/2), so that a
%%% guard on any term works as it does in ETS.  Rows are msgflow_row's
%%% (a dead letter's `{{Sender, Receiver}, Messages}').  Any process; a
%%% table retired meanwhile reads as empty.
-module(msgflow_row_table).

-export([lookup/2, member/2, size/1, to_list/1, select/2, select/3, select/1, fold_select/4,
         foldl/3, any_of/2]).
-export_type([table/0, cont/0]).

-define(CHUNK, 500).         %% rows a read returns (and ETS holds its lock for)

-type table() :: ets:tid() | {msgflow_agg, msgflow_tracer:agg(), msgflow_tracer:agg_table() | named}.
%% Where a select/3 goes on (select/1).
-opaque cont() :: {agg, table(), ets:comp_match_spec(), non_neg_integer(), pos_integer(), [term()]}
                | {ets, term()}.

%% @doc The rows of key K ([] or one).
-spec lookup(table(), term()) -> [tuple()].
lookup({msgflow_agg, A, T}, K) -> msgflow_tracer:agg_lookup(A, T, K);
lookup(T, K) -> ets:lookup(T, K).

%% @doc Whether key K has a row.
-spec member(table(), term()) -> boolean().
member({msgflow_agg, A, T}, K) -> msgflow_tracer:agg_lookup(A, T, K) =/= [];
member(T, K) -> ets:member(T, K).

%% @doc Its rows; `undefined' for an ETS table that is gone.
-spec size(table()) -> non_neg_integer() | undefined.
size({msgflow_agg, A, T}) -> maps:get(T, msgflow_tracer:agg_info(A));
size(T) -> ets:info(T, size).

%% @doc Every row.
-spec to_list(table()) -> [tuple()].
to_list({msgflow_agg, A, named}) -> msgflow_tracer:agg_named(A);
to_list(T = {msgflow_agg, _, _}) -> fold_select(T, [{'_', [], ['$_']}], fun(R, A) -> [R | A] end, []);
to_list(T) -> ets:tab2list(T).

%% @doc What MatchSpec selects of every row.
-spec select(table(), ets:match_spec()) -> [term()].
select(T = {msgflow_agg, _, _}, MS) -> lists:reverse(fold_select(T, MS, fun(R, A) -> [R | A] end, []));
select(T, MS) -> ets:select(T, MS).

%% @doc What MatchSpec selects, Limit results or so at a time: ets:select/3.
-spec select(table(), ets:match_spec(), pos_integer()) -> {[term()], cont()} | '$end_of_table'.
select(T = {msgflow_agg, _, _}, MS, Limit) ->
    agg_select({agg, T, ets:match_spec_compile(MS), 0, Limit, []});
select(T, MS, Limit) ->
    case ets:select(T, MS, Limit) of
        '$end_of_table' -> '$end_of_table';
        {Got, Cont} -> {Got, {ets, Cont}}
    end.

%% @doc The next results of a select/3 (ets:select/1); a table that changed
%% meanwhile may give a row twice or miss one.
-spec select(cont()) -> {[term()], cont()} | '$end_of_table'.
select({ets, Cont}) ->
    case ets:select(Cont) of
        '$end_of_table' -> '$end_of_table';
        {Got, Cont1} -> {Got, {ets, Cont1}}
    end;
select(Cont = {agg, _, _, _, _, _}) ->
    agg_select(Cont).

agg_select({agg, _, _, done, _, []}) ->
    '$end_of_table';
agg_select({agg, T, CMS, done, Limit, Acc}) ->
    {lists:reverse(Acc), {agg, T, CMS, done, Limit, []}};
agg_select({agg, T = {msgflow_agg, A, Table}, CMS, Cursor, Limit, Acc}) ->
    {Rows, Next} = msgflow_tracer:agg_rows(A, Table, Cursor, ?CHUNK, true),
    Acc1 = lists:reverse(ets:match_spec_run(Rows, CMS), Acc),
    case length(Acc1) >= Limit of
        true -> {lists:reverse(Acc1), {agg, T, CMS, Next, Limit, []}};
        false -> agg_select({agg, T, CMS, Next, Limit, Acc1})
    end.

%% @doc A match specification's guard: Var (`'$1'', ...) is one of Terms
%% (`false' for none), for a select of the rows of a few keys of many.
-spec any_of(atom(), [term()]) -> false | tuple().
any_of(_, []) -> false;
any_of(Var, [X]) -> {'=:=', Var, {const, X}};
any_of(Var, Terms) -> list_to_tuple(['orelse' | [{'=:=', Var, {const, X}} || X <- Terms]]).

%% @doc Fun folded over what MatchSpec selects of table T, read in chunks
%% of ?CHUNK (an ETS table's read lock is held that long at most, and this
%% heap never holds the whole result of a big select unfolded).  An ETS
%% table is fixed meanwhile (ets:safe_fixtable/2): its owner goes on
%% deleting rows, and a hash table that shrinks between two chunks makes
%% the next one raise badarg; fixed, every row there all along is read
%% once.
-spec fold_select(table(), ets:match_spec(), fun((term(), Acc) -> Acc), Acc) -> Acc.
fold_select({msgflow_agg, A, Table}, Match, Fun, Acc0) ->
    CMS = ets:match_spec_compile(Match),
    agg_fold(A, Table, CMS, 0, Fun, Acc0);
fold_select(T, Match, Fun, Acc0) ->
    true = ets:safe_fixtable(T, true),
    try
        fold_chunks(ets:select(T, Match, ?CHUNK), Fun, Acc0)
    after
        %% (a table retired meanwhile is gone, fixed or not)
        try ets:safe_fixtable(T, false) catch error:badarg -> true end
    end.

fold_chunks('$end_of_table', _, Acc) -> Acc;
fold_chunks({Rows, Cont}, Fun, Acc) ->
    fold_chunks(ets:select(Cont), Fun, lists:foldl(Fun, Acc, Rows)).

agg_fold(_, _, _, done, _, Acc) ->
    Acc;
agg_fold(A, Table, CMS, Cursor, Fun, Acc) ->
    {Rows, Next} = msgflow_tracer:agg_rows(A, Table, Cursor, ?CHUNK, true),
    agg_fold(A, Table, CMS, Next, Fun, lists:foldl(Fun, Acc, ets:match_spec_run(Rows, CMS))).

%% @doc Fun folded over every row (ets:foldl/3).
-spec foldl(fun((tuple(), Acc) -> Acc), Acc, table()) -> Acc.
foldl(Fun, Acc, T = {msgflow_agg, _, _}) -> fold_select(T, [{'_', [], ['$_']}], Fun, Acc);
foldl(Fun, Acc, T) -> ets:foldl(Fun, Acc, T).
