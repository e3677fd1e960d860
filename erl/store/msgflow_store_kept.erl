%%% @doc What the store keeps for the views so that a view costs what it
%%% shows, not the pairs held (issue 37), read from the aggregate in C
%%% (msgflow_tracer:agg_*, which keeps them as it folds the deltas; issue
%%% 53):
%%% <ul>
%%% <li>the busiest pairs (msgflow_store_index) by messages since start, in
%%%     the open window and in the last closed one;</li>
%%% <li>the pairs sent to local registered names, `{Key}' (few; the views
%%%     merge them into their pid's row);</li>
%%% <li>the last closed window's ends: `{Receiver, Senders, Messages}'
%%%     (distinct senders whose pair had its first messages of the window,
%%%     messages in) and `{Sender, Receivers, Messages}' (the same out, of
%%%     messages that are no replies), those with ?KEEP_PARTNERS partners or
%%%     more and every registered name (a process sent to by name and by pid
%%%     is two ends here: the hotspot rules add them up), copied at the
%%%     window's close into two ETS tables the collector owns (protected),
%%%     deleted one window after they stopped being the last.</li>
%%% </ul>
-module(msgflow_store_kept).

-export([new/0, new_agg/3, min_partners/0, close_window/2, clear/1, tables/1, handle/3]).
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
    last_ends = none :: {ets:tid(), ets:tid()} | none,
    %% the window before the last's ends, deleted as the next window
    %% closes: a view that began before has a whole interval to read them
    before = [] :: [ets:tid()]
}).

-opaque kept() :: #kept{}.
%% The busiest indexes' sizes (tests make them small).
-type caps() :: #{total => pos_integer(), window => pos_integer()}.

%% @doc None kept yet.
-spec new() -> kept().
new() ->
    #kept{}.

%% @doc An empty aggregate whose rows keep Keep windows of history and
%% MaxKinds kinds and tags, with busiest indexes of the sizes Caps asks for.
-spec new_agg(pos_integer(), pos_integer(), caps()) -> msgflow_tracer:agg().
new_agg(Keep, MaxKinds, Caps) ->
    msgflow_tracer:agg_new({Keep, MaxKinds, maps:get(total, Caps, ?BUSIEST_TOTAL),
                            maps:get(window, Caps, ?BUSIEST_WINDOW), node()}).

%% @doc The minimum partners of the ends a closed window keeps.
-spec min_partners() -> pos_integer().
min_partners() -> ?KEEP_PARTNERS.

%% @doc Agg's window closed (msgflow_tracer:agg_close/3, with
%% min_partners/0): its kept ends copied into new tables; those of the
%% window before the last deleted.
-spec close_window(kept(), msgflow_tracer:agg()) -> kept().
close_window(Kp = #kept{last_ends = LE}, Agg) ->
    ok = msgflow_tables:delete(Kp#kept.before),
    Ends = msgflow_tracer:agg_last_ends(Agg),
    Named = fun(E) -> msgflow_row:named(E) end,
    Kept = fun(P, E) -> P >= ?KEEP_PARTNERS orelse Named(E) end,
    In = ets:new(msgflow_window_receivers, [set, protected]),
    Out = ets:new(msgflow_window_senders, [set, protected]),
    true = ets:insert(In, [{E, P, M} || {E, P, M, _, _} <- Ends, M > 0, Kept(P, E)]),
    true = ets:insert(Out, [{E, P, M} || {E, _, _, P, M} <- Ends, M > 0, Kept(P, E)]),
    Kp#kept{last_ends = {In, Out}, before = ends_tables(LE)}.

%% @doc All of it new and empty, and the tables views may be reading, to
%% be retired.
-spec clear(kept()) -> {kept(), [ets:tid()]}.
clear(Kp) ->
    {new(), tables(Kp)}.

%% @doc Its tables (for their memory, or to retire them).
-spec tables(kept()) -> [ets:tid()].
tables(#kept{last_ends = LE, before = B}) ->
    ends_tables(LE) ++ B.

%% @doc What views read (msgflow_store:handle/2) of Agg after Closed
%% windows: `busiest' (readers of the indexes: `total', `open', `last' or
%% none), `named', `window_ends' (`last': the last closed window's
%% {Receivers, Senders} tables or none, `min_partners' the fewest partners
%% an end has there).
-spec handle(kept(), msgflow_tracer:agg(), non_neg_integer()) ->
          #{busiest := map(), named := msgflow_row_table:table(), window_ends := map()}.
handle(#kept{last_ends = LE}, Agg, Closed) ->
    #{busiest => #{total => {msgflow_agg, Agg, total}, open => {msgflow_agg, Agg, open},
                   last => case Closed of 0 -> none; _ -> {msgflow_agg, Agg, last} end},
      named => {msgflow_agg, Agg, named},
      window_ends => #{last => LE, min_partners => min_partners()}}.

ends_tables(none) -> [];
ends_tables({I, O}) -> [I, O].
