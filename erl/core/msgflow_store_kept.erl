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
-module(msgflow_store_kept).

-export([new/1, new_pair/2, add/8, forget/2, open_receivers/1, close_window/1, clear/1, tables/1,
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

-record(kept, {
    caps :: {pos_integer(), pos_integer()},         %% busiest sizes: total, window
    total :: msgflow_busiest:index(),
    open :: msgflow_busiest:index(),
    last = none :: msgflow_busiest:index() | none,
    named :: ets:tid(),
    ends :: {ets:tid(), ets:tid()},                 %% the open window's: in, out
    last_ends = none :: {ets:tid(), ets:tid()} | none,
    %% the window before the last's index and ends, deleted as the next
    %% window closes: a view that began before has a whole interval to
    %% read them (a later read finds them gone: msgflow_busiest, the
    %% hotspot rules then read the store whole)
    before = [] :: [ets:tid()]
}).

-opaque kept() :: #kept{}.
%% The busiest indexes' sizes (tests make them small).
-type caps() :: #{total => pos_integer(), window => pos_integer()}.

%% @doc Empty, its tables the calling process's.
-spec new(caps()) -> kept().
new(Caps) ->
    C = {maps:get(total, Caps, ?BUSIEST_TOTAL), maps:get(window, Caps, ?BUSIEST_WINDOW)},
    #kept{caps = C, total = msgflow_busiest:new(element(1, C)),
          open = msgflow_busiest:new(element(2, C)),
          named = ets:new(msgflow_named, [set, protected]), ends = new_ends()}.

%% @doc A new row K of the pairs table (a send to a local name is kept
%% apart).
-spec new_pair(kept(), {term(), term()}) -> kept().
new_pair(Kp = #kept{named = Nm}, K = {_, R}) ->
    _ = msgflow_row:named(R) andalso ets:insert(Nm, {K}),
    Kp.

%% @doc N messages of pair K (of table Which, kind and tag KT or none),
%% now at Total since start and Count in the open window; First: `first'
%% for its first messages of the window.  A pair of the pairs table not
%% sent to a local name goes in the busiest indexes.
-spec add(kept(), pairs | rolled_up, {term(), term()}, pos_integer(), {atom(), atom()} | none,
          first | open, pos_integer(), pos_integer()) -> kept().
add(Kp = #kept{ends = {In, Out}}, Which, K = {Sn, R}, N, KT, First, Total, Count) ->
    New = case First of first -> 1; open -> 0 end,
    _ = ets:update_counter(In, R, [{2, New}, {3, N}], {R, 0, 0}),
    _ = case KT of
            {reply, _} -> ok;
            _ -> ets:update_counter(Out, Sn, [{2, New}, {3, N}], {Sn, 0, 0})
        end,
    case Which =:= pairs andalso not msgflow_row:named(R) of
        true -> Kp#kept{total = msgflow_busiest:bump(Kp#kept.total, K, Total),
                        open = msgflow_busiest:bump(Kp#kept.open, K, Count)};
        false -> Kp
    end.

%% @doc Pair K left the pairs table (rolled up).
-spec forget(kept(), {term(), term()}) -> kept().
forget(Kp = #kept{named = Nm, last = L}, K) ->
    ets:delete(Nm, K),
    Kp#kept{total = msgflow_busiest:remove(Kp#kept.total, K),
            open = msgflow_busiest:remove(Kp#kept.open, K),
            last = case L of none -> none; _ -> msgflow_busiest:remove(L, K) end}.

%% @doc The open window's receivers, `{Receiver, Senders, Messages}'.
-spec open_receivers(kept()) -> ets:tid().
open_receivers(#kept{ends = {In, _}}) -> In.

%% @doc The open window closed: its busiest index and its ends (those
%% with ?KEEP_PARTNERS partners or more and the registered names, copied:
%% the select traps, so the collector yields while it runs) become the
%% last window's; those of the window before the last are deleted.  The
%% tables to retire later: none (the shape clear/1 shares).
-spec close_window(kept()) -> {kept(), [ets:tid()]}.
close_window(Kp = #kept{ends = {In, Out}, caps = {_, W}}) ->
    _ = [ets:delete(T) || T <- Kp#kept.before],
    Before = ends_tables(Kp#kept.last_ends) ++ index_tables(Kp#kept.last),
    Last = {kept_ends(In, msgflow_window_receivers), kept_ends(Out, msgflow_window_senders)},
    ets:delete(In),
    ets:delete(Out),
    {Kp#kept{last = Kp#kept.open, open = msgflow_busiest:new(W), ends = new_ends(),
             last_ends = Last, before = Before}, []}.

%% @doc All of it new and empty, and the tables it had, to be retired.
-spec clear(kept()) -> {kept(), [ets:tid()]}.
clear(Kp = #kept{caps = {T, W}}) ->
    {new(#{total => T, window => W}), tables(Kp)}.

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

kept_ends(T, Name) ->
    Kept = ets:new(Name, [set, protected]),
    Named = {'orelse', {is_atom, '$2'},
             {'andalso', {is_tuple, '$2'}, {'==', {element, 2, '$2'}, node()}}},
    ets:insert(Kept, ets:select(T, [{{'$2', '$1', '_'},
                                     [{'orelse', {'>=', '$1', ?KEEP_PARTNERS}, Named}], ['$_']}])),
    Kept.

new_ends() ->
    {ets:new(msgflow_window_receivers, [set, protected]),
     ets:new(msgflow_window_senders, [set, protected])}.

index_tables(none) -> [];
index_tables(I) -> msgflow_busiest:tables(I).

ends_tables(none) -> [];
ends_tables({I, O}) -> [I, O].
