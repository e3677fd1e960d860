%%% @doc The store's sizes of sampled messages by edge (the `sizes'
%%% table): what the tracer measured (msgflow_tracer:sizes_take_some/2, one in
%%% `size_sample' sends per scheduler thread) added up since start, and
%%% the rows of pairs that left the pairs table (rolled up) dropped.  The
%%% collector's process calls these with the table msgflow_store gives it
%%% (it owns it).  A row: `{{Sender, Receiver}, Sampled, Words, WordsMax,
%%% BinaryBytes, Large}', Words (heap words) and BinaryBytes (bytes of
%%% off-heap binaries) summed over the Sampled messages, Large how many
%%% ran out the walk's budget (their figures a lower bound).
-module(msgflow_store_sizes).
-export([new/0, take_some/3, sweep/3, of_pair/2, figures/1, bytes/3, bytes_by/3]).
-export_type([figures/0]).

%% reductions one merged edge is worth (as msgflow_store counts a delta)
-define(MERGE_REDUCTIONS, 50).
%% rows looked at as a window closes, for pairs that left
-define(SLICE, 2000).
-define(SWEEP_REDUCTIONS, 10).

%% What a view shows of an edge's sizes: messages measured, their mean and
%% largest heap words, mean bytes of off-heap binaries, how many were
%% larger than the walk's budget, and the bytes a send copies on average
%% (mean words times the word size).
-type figures() :: #{size_sampled := pos_integer(), words_mean := float(),
                     words_max := non_neg_integer(), binary_bytes_mean := float(),
                     large := non_neg_integer(), bytes_mean := float()}.

%% @doc An empty table, the calling process's.
-spec new() -> ets:tid().
new() -> ets:new(msgflow_sizes, [set, protected]).

%% edges merged a call (a few ms of work, as a chunk of the snapshot)
-define(TAKE_EDGES, 1024).

%% @doc Up to 1,024 of the messages measured since the last take, added to
%% their edges' rows in T: those of the pairs the pairs table P holds (not
%% of pairs past max_pairs or max_memory, counted in overflow, so that
%% the table stays within the bounds the pairs keep).  `more' while edges
%% of this take are left (call again: between two calls the owner may
%% answer others), `done' once none are, or when the session cannot be
%% read.
-spec take_some(msgflow_tracer:session(), ets:tid(), msgflow_row_table:table()) -> more | done.
take_some(Session, T, P) ->
    try msgflow_tracer:sizes_take_some(Session, ?TAKE_EDGES) of
        {More, Edges} ->
            lists:foreach(
              fun({S, R, N, W, WMax, B, L}) ->
                      erlang:bump_reductions(?MERGE_REDUCTIONS),
                      K = {S, R},
                      msgflow_row_table:member(P, K) andalso
                      ets:insert(T, case ets:lookup(T, K) of
                                        [{_, N0, W0, WMax0, B0, L0}] ->
                                            {K, N0 + N, W0 + W, max(WMax0, WMax), B0 + B, L0 + L};
                                        [] ->
                                            {K, N, W, WMax, B, L}
                                    end)
              end, Edges),
            More
    catch
        error:_ -> done
    end.

%% @doc Rows of T whose pair is no longer in the pairs table P (rolled up
%% with its exited ends) dropped, ?SLICE rows a window or an eighth of
%% them when that is more (a pass takes 8 windows at most), from where
%% the last slice ended (Cont: `start' or what the last call returned).
%% Returns where the next slice starts.
-spec sweep(ets:tid(), msgflow_row_table:table(), start | term()) -> start | term().
sweep(T, P, Cont) ->
    %% at least an eighth of the table a window, so that a node whose
    %% pairs come and go faster than ?SLICE a window is swept in 8
    sweep(T, P, Cont, max(?SLICE, ets:info(T, size) div 8)).

sweep(T, P, Cont, Budget) ->
    case case Cont of
             start -> ets:select(T, [{{'$1', '_', '_', '_', '_', '_'}, [], ['$1']}], ?SLICE);
             _ -> msgflow_rollup:continue(Cont)
         end of
        '$end_of_table' ->
            start;
        {Keys, Next} ->
            %% each key's lookups counted, so that the slice yields
            _ = [ets:delete(T, K) || K <- Keys, erlang:bump_reductions(?SWEEP_REDUCTIONS),
                                     not msgflow_row_table:member(P, K)],
            case Budget - length(Keys) of
                More when More > 0 -> sweep(T, P, Next, More);
                _ -> Next
            end
    end.

%% @doc The sizes of the messages from S to R, the sends to R's
%% registered names added (Names), or none when none was measured.
-spec of_pair(ets:tid(), [{term(), term()}]) -> figures() | none.
of_pair(T, Keys) ->
    case lists:append([ets:lookup(T, K) || K <- Keys]) of
        [] -> none;
        Rows -> figures(lists:foldl(fun add/2, {0, 0, 0, 0, 0}, Rows))
    end.

add({_, N, W, WMax, B, L}, {N0, W0, WMax0, B0, L0}) ->
    {N0 + N, W0 + W, max(WMax0, WMax), B0 + B, L0 + L}.

%% @doc The figures of a row's sums `{Sampled, Words, WordsMax,
%% BinaryBytes, Large}'.
-spec figures({pos_integer(), non_neg_integer(), non_neg_integer(), non_neg_integer(),
               non_neg_integer()}) -> figures().
figures({N, W, WMax, B, L}) ->
    #{size_sampled => N, words_mean => W / N, words_max => WMax, binary_bytes_mean => B / N,
      large => L, bytes_mean => bytes(1, W, N)}.

%% @doc The bytes the messages of every pair with sampled sizes copied
%% since start (its messages in the pairs table P x its mean), summed by
%% Key({Sender, Receiver}).  One read of the sizes table T (the pairs
%% measured, not every pair).
-spec bytes_by(ets:tid(), msgflow_row_table:table(), fun(({term(), term()}) -> term())) -> #{term() => float()}.
bytes_by(T, P, Key) ->
    ets:foldl(fun({K, N, Words, _, _, _}, Acc) ->
                      case msgflow_row_table:lookup(P, K) of
                          [Row] ->
                              B = bytes(msgflow_row:total(Row), Words, N),
                              maps:update_with(Key(K), fun(X) -> X + B end, B, Acc);
                          [] -> Acc
                      end
              end, #{}, T).

%% @doc The bytes Messages messages copied, estimated from Sampled of them
%% that had Words heap words in all: Messages x their mean size (the one
%% place that estimate is made).
-spec bytes(non_neg_integer(), non_neg_integer(), pos_integer()) -> float().
bytes(Messages, Words, Sampled) ->
    Messages * Words * erlang:system_info(wordsize) / Sampled.
