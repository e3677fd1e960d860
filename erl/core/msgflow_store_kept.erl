%%% @doc What the store keeps for the views as each delta is merged, so
%%% that a view costs what it shows, not the pairs held (issue 37):
%%% <ul>
%%% <li>the busiest pairs (msgflow_busiest) by messages since start, in
%%%     the open window and in the last closed one;</li>
%%% <li>the pairs sent to local registered names, `{Key}' (few; the views
%%%     merge them into their pid's row);</li>
%%% <li>each window's ends: `{Receiver, Senders, Messages}' (distinct
%%%     senders whose pair had its first messages of the window, messages
%%%     in) and `{Sender, Receivers, Messages}' (the same out, of messages
%%%     that are no replies: a receiver counts when the pair's first
%%%     messages of the window were no reply); of the last closed window,
%%%     those with ?KEEP_PARTNERS partners or more, and every registered
%%%     name (a process sent to by name and by pid is two ends here: the
%%%     hotspot rules add them up).</li>
%%% </ul>
%%% ETS tables the collector owns (protected: views read them, only the
%%% collector writes), fed by msgflow_store from the figures each row
%%% update returns.  A window's tables are deleted one window after they
%%% stopped being the last (close_window/1); those of a run or a reset are
%%% handed back to be retired later (msgflow_store's `{retire, Tables}').
%%% The open window's ends are the collector's own (private: only
%%% msgflow_store reads them, through open_receivers/2,3), split over
%%% tables of about ?PART_ROWS ends each by the hash of the end (as many
%%% as the last window's ends, or a run's processes, ask for; clear/1),
%%% so that each is freed in a short slice as the window closes
%%% (msgflow_tables): a node of 100,000 processes has 200,000 ends every
%%% window.
-module(msgflow_store_kept).

-export([new/1, new_pair/2, add/7, ranked/3, forget/2, open_receivers/2, open_receivers/3, close_window/1, clear/1, tables/1,
         handle/1]).
-export_type([kept/0, caps/0]).

%% pairs the busiest indexes hold: by messages since start, enough for
%% any page of msgflow-top (500) and the web page (200); by window,
%% enough that the hotspot rules' pairs (100 messages in a window or more)
%% are all in it on a busy node
-define(BUSIEST_TOTAL, 2048).
-define(BUSIEST_WINDOW, 5000).
%% a closed window's ends are kept for the views with at least this many
%% partners (the hotspot rules ask for 10 senders and 20 receivers by
%% default): on a node of 100,000 processes each talking to a few, all of
%% them would take 18 MB a window
-define(KEEP_PARTNERS, 5).
%% the open window's ends a table holds, about (new_ends/1)
-define(PART_ROWS, 2000).
-define(MAX_PARTS, 512).

-record(kept, {
    caps :: {pos_integer(), pos_integer()},         %% busiest sizes: total, window
    total :: msgflow_busiest:index(),
    open :: msgflow_busiest:index(),
    last = none :: msgflow_busiest:index() | none,
    named :: ets:tid(),
    ends :: {parts(), parts()},                     %% the open window's: in, out
    last_ends = none :: {ets:tid(), ets:tid()} | none,
    %% the window before the last's index and ends, deleted as the next
    %% window closes: a view that began before has a whole interval to
    %% read them (a later read finds them gone: msgflow_busiest, the
    %% hotspot rules then read the store whole)
    before = [] :: [ets:tid()]
}).

-opaque kept() :: #kept{}.
%% One kind of ends of the open window, split by the hash of the end
%% (part/2): a tuple of one table or more, private.
-type parts() :: tuple().
%% The busiest indexes' sizes (tests make them small).
-type caps() :: #{total => pos_integer(), window => pos_integer()}.

%% @doc Empty, its tables the calling process's.
-spec new(caps()) -> kept().
new(Caps) ->
    new(Caps, 0).

%% (the open window's ends in as many tables as Ends ends ask for)
new(Caps, Ends) ->
    C = {maps:get(total, Caps, ?BUSIEST_TOTAL), maps:get(window, Caps, ?BUSIEST_WINDOW)},
    #kept{caps = C, total = msgflow_busiest:new(element(1, C)),
          open = msgflow_busiest:new(element(2, C)),
          named = ets:new(msgflow_named, [set, protected]), ends = new_ends(Ends)}.

%% @doc A new row K of the pairs table (a send to a local name is kept
%% apart).
-spec new_pair(kept(), {term(), term()}) -> kept().
new_pair(Kp = #kept{named = Nm}, K = {_, R}) ->
    _ = msgflow_row:named(R) andalso ets:insert(Nm, {K}),
    Kp.

%% @doc N messages of pair K (of kind and tag KT or none), now at Total
%% since start and Count in the open window, in both tables (its row in
%% the pairs and the rolled-up rows, as the views by process add them
%% up); First: `first' for its first messages of the window.  A key not
%% sent to a local name goes in the busiest indexes.
-spec add(kept(), {term(), term()}, pos_integer(), {atom(), atom()} | none,
          first | open, pos_integer(), pos_integer()) -> kept().
add(Kp = #kept{ends = {In, Out}}, K = {Sn, R}, N, KT, First, Total, Count) ->
    New = case First of first -> 1; open -> 0 end,
    _ = ets:update_counter(part(In, R), R, [{2, New}, {3, N}], {R, 0, 0}),
    _ = case KT of
            {reply, _} -> ok;
            _ -> ets:update_counter(part(Out, Sn), Sn, [{2, New}, {3, N}], {Sn, 0, 0})
        end,
    case msgflow_row:named(R) of
        false -> Kp#kept{total = msgflow_busiest:bump(Kp#kept.total, K, Total),
                         open = msgflow_busiest:bump(Kp#kept.open, K, Count)};
        true -> Kp
    end.

%% @doc Key K's messages since start, in both tables, are now Total (a
%% roll-up moved a row to K, or away from it: msgflow_store:moved/3).
-spec ranked(kept(), {term(), term()}, non_neg_integer()) -> kept().
ranked(Kp, {_, R} = K, Total) ->
    case msgflow_row:named(R) of
        false -> Kp#kept{total = msgflow_busiest:bump(Kp#kept.total, K, Total)};
        true -> Kp
    end.

%% @doc Key K left the busiest indexes and the sends to names (a row of
%% it rolled up).
-spec forget(kept(), {term(), term()}) -> kept().
forget(Kp = #kept{named = Nm, last = L}, K) ->
    ets:delete(Nm, K),
    Kp#kept{total = msgflow_busiest:remove(Kp#kept.total, K),
            open = msgflow_busiest:remove(Kp#kept.open, K),
            last = case L of none -> none; _ -> msgflow_busiest:remove(L, K) end}.

%% @doc What MatchSpec selects of the open window's receivers,
%% `{Receiver, Senders, Messages}' (each select traps: the collector
%% yields while it runs).
-spec open_receivers(kept(), ets:match_spec()) -> [term()].
open_receivers(#kept{ends = {In, _}}, MS) ->
    lists:append([ets:select(T, MS) || T <- tuple_to_list(In)]).

%% @doc The same, about Limit of them (all when there are fewer; the
%% first tables' first).
-spec open_receivers(kept(), ets:match_spec(), pos_integer()) -> [term()].
open_receivers(#kept{ends = {In, _}}, MS, Limit) ->
    lists:foldl(fun(T, Acc) when length(Acc) < Limit ->
                        case ets:select(T, MS, Limit - length(Acc)) of
                            {Got, _} -> Acc ++ Got;
                            '$end_of_table' -> Acc
                        end;
                   (_, Acc) -> Acc
                end, [], tuple_to_list(In)).

%% @doc The open window closed: its busiest index and its ends (those
%% with ?KEEP_PARTNERS partners or more and the registered names, copied:
%% the select traps, so the collector yields while it runs) become the
%% last window's; those of the window before the last are deleted, and
%% the open window's ends are dropped (msgflow_tables).  The tables to
%% retire later: none (the shape clear/1 shares).
-spec close_window(kept()) -> {kept(), [ets:tid()]}.
close_window(Kp = #kept{ends = {In, Out}, caps = {_, W}}) ->
    %% (views may be reading these: deleted whole, there or not)
    ok = msgflow_tables:delete(Kp#kept.before),
    Before = ends_tables(Kp#kept.last_ends) ++ index_tables(Kp#kept.last),
    Last = {kept_ends(In, msgflow_window_receivers), kept_ends(Out, msgflow_window_senders)},
    Ends = [ets:info(T, size) || T <- tuple_to_list(In) ++ tuple_to_list(Out)],
    ok = msgflow_tables:drop(ends_tables({In, Out})),
    {Kp#kept{last = Kp#kept.open, open = msgflow_busiest:new(W),
             ends = new_ends(lists:max(Ends) * tuple_size(In)),
             last_ends = Last, before = Before}, []}.

%% @doc All of it new and empty, and the tables it had that views may be
%% reading, to be retired (the open window's ends, its own, are dropped
%% now).
-spec clear(kept()) -> {kept(), [ets:tid()]}.
clear(Kp = #kept{caps = {T, W}, ends = {In, _} = Ends}) ->
    Open = ends_tables(Ends),
    ok = msgflow_tables:drop(Open),
    %% as many tables of ends as the open window's, or as the processes
    %% ask for (a reset or a new run on a big node)
    {new(#{total => T, window => W},
         max(tuple_size(In) * ?PART_ROWS, erlang:system_info(process_count))),
     tables(Kp) -- Open}.

%% @doc Its tables (for their memory, or to retire them).
-spec tables(kept()) -> [ets:tid()].
tables(#kept{total = T, open = O, last = L, named = Nm, ends = E, last_ends = LE, before = B}) ->
    [Nm | index_tables(T) ++ index_tables(O) ++ index_tables(L) ++ ends_tables(E) ++ ends_tables(LE)
     ++ B].

%% @doc What views read (msgflow_store:handle/2): `busiest' (readers of
%% the indexes: `total', `open', `last' or none), `named', `window_ends'
%% (`last': the last closed window's {Receivers, Senders} tables or none,
%% `min_partners' the fewest partners an end has there).
-spec handle(kept()) -> #{busiest := map(), named := ets:tid(), window_ends := map()}.
handle(#kept{total = T, open = O, last = L, named = Nm, last_ends = LE}) ->
    #{busiest => #{total => msgflow_busiest:reader(T), open => msgflow_busiest:reader(O),
                   last => case L of none -> none; _ -> msgflow_busiest:reader(L) end},
      named => Nm,
      window_ends => #{last => LE, min_partners => ?KEEP_PARTNERS}}.

kept_ends(Parts, Name) ->
    Kept = ets:new(Name, [set, protected]),
    Named = {'orelse', {is_atom, '$2'},
             {'andalso', {is_tuple, '$2'}, {'==', {element, 2, '$2'}, node()}}},
    MS = [{{'$2', '$1', '_'}, [{'orelse', {'>=', '$1', ?KEEP_PARTNERS}, Named}], ['$_']}],
    _ = [ets:insert(Kept, ets:select(T, MS)) || T <- tuple_to_list(Parts)],
    Kept.

%% The open window's ends, in as many tables (a power of 2, up to
%% ?MAX_PARTS) as Ends ends of one kind (the last window's: its fullest
%% table's times their number) fill ?PART_ROWS at a time.
new_ends(Ends) ->
    N = parts_for(Ends, 1),
    {list_to_tuple([ets:new(msgflow_window_receivers, [set, private]) || _ <- lists:seq(1, N)]),
     list_to_tuple([ets:new(msgflow_window_senders, [set, private]) || _ <- lists:seq(1, N)])}.

parts_for(Ends, N) when Ends > N * ?PART_ROWS, N < ?MAX_PARTS -> parts_for(Ends, 2 * N);
parts_for(_, N) -> N.

%% The table of Parts that holds End.
part({T}, _) -> T;
part(Parts, End) -> element(1 + erlang:phash2(End, tuple_size(Parts)), Parts).

index_tables(none) -> [];
index_tables(I) -> msgflow_busiest:tables(I).

ends_tables(none) -> [];
ends_tables({I, O}) when is_tuple(I) -> tuple_to_list(I) ++ tuple_to_list(O);
ends_tables({I, O}) -> [I, O].
