%%% @doc Endpoint labels: what a sender or receiver is called in every view.
%%%
%%% The collector owns the tables (protected ETS, so views read them from
%%% the caller's process); this module is the only one that writes them and
%%% the only one that reads a live process to name it:
%%% <ul>
%%% <li>`endpoints': `{Endpoint, LabelId, Rows}' for every endpoint of a row
%%%     the collector holds, written the first time the endpoint shows up
%%%     (while it may still be alive); Rows counts the collector's rows that
%%%     name it (hold/2, release/2), and the endpoint of a process, port or
%%%     alias is forgotten when none does any more;</li>
%%% <li>`label_ids': `{LabelId, Label, Module, Application}', one per
%%%     distinct triple (a node's 100,000 request handlers are one label id), so that
%%%     an endpoint costs a small integer, not a copy of its label;</li>
%%% <li>`names': `{Name, Pid}', the pid a registered name stood for when a
%%%     send to the name was first seen, so that views count a send to a
%%%     name and a send to its pid as one receiver;</li>
%%% <li>`proc_events': `{Pid, Name, InitialCall, Tick}' from the `procs' trace
%%%     events (spawn, register), so that a process that exits before the
%%%     collector sees it keeps its name and initial call.</li>
%%% </ul>
%%% The tables and every read of them stay in this one module.
%%% An endpoint that exited is rolled up into a group (rollup_key/2):
%%% `{exited, LabelId, Node}', which has the label, module and application
%%% of the endpoint it stands for, and stands for every exited endpoint of
%%% that label id.
%%% A label is (OTP 27+) the proc_lib label, else the registered name, else
%%% proc_lib's initial call, else where a fun-spawned process's fun was
%%% written, else the initial call, else the pid; ports show their driver
%%% and owner (msgflow_describe:label/1); remote endpoints their node.
-module(msgflow_labels).

-export([new/0, clear/1, tables/1, all_tables/1, proc_events/3, prune_proc_events/2, census_start/1, census/2, census_left/1,
         hold/2, hold_port/3, seed/5, release/2, purge/1, rollup_key/2, stays/1, forget_endpoints/1, group_end/2,
         canon/2, meta/2, all_meta/1, field_map/2, id_field/3, id_map/2, node_of/1, any_gone/2,
         gone_in/2]).
-export_type([label_id/0]).
-export_type([labels/0, tables/0, meta/0, group/0]).


%% group leaders whose application is kept (see application_of/3)
-define(MAX_GROUP_LEADERS, 1000).
%% label texts kept by call or name (see label_text/3)
-define(MAX_TEXTS, 10000).
%% processes the census of a run's start reads in one step (census/2)
-define(CENSUS_STEP, 500).
%% windows an endpoint found gone keeps the rollup's sweeps going (a whole
%% pass of their slow part takes 32 at most: msgflow_rollup); past them it
%% is let be (a name's pid, which the name holds for good)
-define(GONE_WINDOWS, 40).
%% held endpoints any_gone/2 reads a window, at least
-define(GONE_SLICE, 2000).

-record(labels, {
    endpoints :: ets:tid(),
    label_ids :: ets:tid(),
    ids_of :: ets:tid(),                            %% {{Label, Mod, App}, LabelId}
    names :: ets:tid(),
    proc_events :: ets:tid(),
    %% what the census of the run's start read: `{Pid, Name, Call}',
    %% taken when the process is labelled; never pruned (at most the
    %% processes alive at the start), so that no window scans it
    census_rows :: ets:tid(),
    %% endpoints no row names any more, deleted a window later (views
    %% built meanwhile may still read them): this window's, the last's
    expiring = [] :: [msgflow_tracer:endpoint()],
    expiring_before = [] :: [msgflow_tracer:endpoint()],
    apps = #{} :: #{pid() => atom() | undefined},  %% application by group leader
    texts = #{} :: #{term() => binary()},          %% label text by call or {name, Name}
    stacks = #{} :: map(),                         %% deep stacks' bottoms (msgflow_describe:facts/3)
    census = [] :: [pid()],                        %% processes the census has yet to read
    %% held endpoints found gone (any_gone/2), by the window they were
    %% first found so
    gone = #{} :: #{msgflow_tracer:endpoint() => non_neg_integer()},
    %% where any_gone/2's pass over the held endpoints is
    gone_pass = start :: start | term()
}).

-opaque labels() :: #labels{}.
%% What views need to read labels, readable by any process.
-type tables() :: #{endpoints := ets:tid(), label_ids := ets:tid(), names := ets:tid()}.
%% The number of a distinct (label, module, application).
-type label_id() :: pos_integer().
%% The exited endpoints of one label id on one node (see rollup_key/2).
-type group() :: {exited, label_id(), node()}.
%% An endpoint's label (binary), module and application (`undefined' when
%% not known) and node.
-type meta() :: #{label := binary(), module := module() | undefined,
                  application := atom() | undefined, node := node()}.

%% @doc New, empty tables owned by the calling process (the collector).
-spec new() -> labels().
new() ->
    new_tables().

new_tables() ->
    Opts = [set, protected, {read_concurrency, true}],
    #labels{endpoints = ets:new(msgflow_endpoints, Opts),
            label_ids = ets:new(msgflow_label_ids, Opts),
            ids_of = ets:new(msgflow_ids_of, [set, private]),
            names = ets:new(msgflow_names, Opts),
            proc_events = ets:new(msgflow_proc_events, [set, private]),
            census_rows = ets:new(msgflow_census, [set, private])}.

%% @doc Forgets every label, name and process event (a new run): the tables are
%% made anew; the old ones the views read are returned for the owner to
%% delete once no view can still be reading them (the private ones are
%% deleted now).  Owner only.
-spec clear(labels()) -> {labels(), [ets:tid()]}.
clear(#labels{endpoints = E, label_ids = K, ids_of = KI, names = N, proc_events = B,
              census_rows = C}) ->
    _ = [ets:delete(T) || T <- [KI, B, C]],
    {new_tables(), [E, K, N]}.

%% @doc Forgets the endpoints (not their label ids, names or process
%% events): a reset
%% dropped every row that held them; the live ones are read again when
%% they show up.  Owner only.
%% The old endpoints table is returned, as clear/1 returns its tables.
-spec forget_endpoints(labels()) -> {labels(), [ets:tid()]}.
forget_endpoints(L = #labels{endpoints = Ends}) ->
    {L#labels{endpoints = ets:new(msgflow_endpoints, [set, protected, {read_concurrency, true}]),
              expiring = [], expiring_before = [], gone = #{}, gone_pass = start}, [Ends]}.

%% @doc The tables views read.
-spec tables(labels()) -> tables().
tables(#labels{endpoints = E, label_ids = K, names = N}) ->
    #{endpoints => E, label_ids => K, names => N}.

%% @doc Every table of the labels, the owner's own too (for the memory
%% max_memory bounds).
-spec all_tables(labels()) -> [ets:tid()].
all_tables(L = #labels{ids_of = KI, proc_events = B, census_rows = C}) ->
    maps:values(tables(L)) ++ [KI, B, C].

%% @doc Records proc_events (msgflow_tracer:proc_events_take/1) taken at Tick.  A
%% register and a spawn of one process may come in any order.  Owner only.
-spec proc_events(labels(), [msgflow_tracer:proc_event()], non_neg_integer()) -> labels().
proc_events(L = #labels{proc_events = B}, List, Tick) ->
    lists:foreach(
      fun(ProcEvent) -> erlang:bump_reductions(20), proc_event(B, ProcEvent, Tick) end, List),
    L.

proc_event(B, ProcEvent, Tick) ->
    case ProcEvent of
        {P, Name} when is_atom(Name), Name =/= undefined ->
            Call = case ets:lookup(B, P) of
                       [{_, _, C, _}] -> C;
                       [] -> undefined
                   end,
            ets:insert(B, {P, Name, Call, Tick});
        {P, What} ->
            Name = case ets:lookup(B, P) of
                       [{_, N, _, _}] -> N;
                       [] -> undefined
                   end,
            ets:insert(B, {P, Name, msgflow_describe:proc_event_call(What), Tick})
    end.

%% @doc Forgets the process events of processes that are gone and whose last pairs
%% have had a whole tick to arrive (process events older than Tick - 1).  Process events
%% of endpoints already labelled were dropped when they were labelled.
%% Owner only.
-spec prune_proc_events(labels(), non_neg_integer()) -> labels().
prune_proc_events(L = #labels{proc_events = B}, Tick) ->
    Old = ets:select(B, [{{'$1', '_', '_', '$2'}, [{'<', '$2', Tick - 1}], ['$1']}]),
    _ = [ets:delete(B, P) || P <- Old, not alive(P)],
    L.

%% @doc The census of a run's start begins: every process alive now will
%% be read once (census/2), so that one that exits before any row names
%% it still has its name and call.  Owner only.
-spec census_start(labels()) -> labels().
census_start(L) ->
    L#labels{census = processes()}.

%% @doc One step of the census: up to ?CENSUS_STEP processes read
%% (msgflow_describe:facts/3: one process_info/2 call, a second for a
%% proc_lib process's dictionary or a fun's stack) and kept as a process
%% event would be (in a table of their own, which no window prunes); a
%% process already labelled, or with a process event, is skipped.  `more' until none is left.  Owner only;
%% a step takes about a millisecond.
-spec census(labels(), non_neg_integer()) -> {more | done, labels()}.
census(L = #labels{census = []}, _Tick) ->
    {done, L};
census(L = #labels{census = Ps, endpoints = Ends, proc_events = B, census_rows = C}, _Tick) ->
    {Step, Rest} = take(?CENSUS_STEP, Ps, []),
    L1 = lists:foldl(fun(P, LA) ->
                             %% a few process_info calls: counted as the
                             %% work they are, so that the collector is
                             %% scheduled out every twenty or so (a step
                             %% of 500 would hold its scheduler ~2 ms)
                             erlang:bump_reductions(200),
                             case facts(P, undefined, LA) of
                                 {#{name := Name, call := Call}, LB} ->
                                     ets:insert(C, {P, Name, Call}),
                                     LB;
                                 {undefined, LB} ->
                                     LB
                             end
                     end, L, [P || P <- Step, not ets:member(Ends, P), not ets:member(B, P)]),
    {case Rest of [] -> done; _ -> more end, L1#labels{census = Rest}}.

%% The first N of a list and the rest (the rest as it is: no length/1).
take(0, Rest, Acc) -> {lists:reverse(Acc), Rest};
take(_, [], Acc) -> {lists:reverse(Acc), []};
take(N, [X | Rest], Acc) -> take(N - 1, Rest, [X | Acc]).

%% msgflow_describe:facts/3 with the memo of deep stacks this holds
%% (dropped past ?MAX_TEXTS).
facts(P, ProcEvent, L = #labels{stacks = Memo}) ->
    {Facts, Memo1} = msgflow_describe:facts(P, ProcEvent, Memo),
    {Facts, L#labels{stacks = case map_size(Memo1) > ?MAX_TEXTS of
                                  true -> #{};
                                  false -> Memo1
                              end}}.

%% @doc Processes the census has yet to read.
-spec census_left(labels()) -> non_neg_integer().
census_left(#labels{census = Ps}) ->
    length(Ps).

alive(P) when is_pid(P) -> is_process_alive(P);
alive(P) when is_port(P) -> erlang:port_info(P, id) =/= undefined.

%% Labels an endpoint the first time it shows up, while it may still
%% be alive: a local process is read with one describe/1; what its spawn
%% or register event said stands in for what can no longer be read once it
%% exited (and `(unknown)' when there was none).  A registered name also gets the pid it stands for (whereis/1
%% now), and that pid its label.  Owner only.  A process, port or alias
%% learnt is expiring until a row holds it (hold/2), as if released: one
%% labelled for a delta whose row is a group's, or for its group when it
%% rolled up, is deleted by purge/1 two windows later, as no row names it
%% (such endpoints were kept for good: under churn, 1,000 a second).
learn(L, E) ->
    learn(L, E, true).

%% (Expire false: the caller holds E at once, hold/2)
learn(L = #labels{endpoints = Ends}, E, Expire) ->
    case ets:member(Ends, E) of
        true ->
            L;
        false ->
            L1 = #labels{expiring = Expiring} = learn_new(L, E, none),
            case Expire andalso mortal(E) of
                true -> L1#labels{expiring = [E | Expiring]};
                false -> L1
            end
    end.

learn_new(L = #labels{endpoints = Ends, names = Names}, E, _Hint)
  when is_pid(E), node(E) =:= node() ->
    {BName, BCall} = take_proc_event(L, E),
    BMod = case BCall of {M0, _, _} -> M0; _ -> undefined end,
    {Facts0, L0} = facts(E, BCall, L),
    {Label, Name, Mod, App, L1} =
        case Facts0 of
            undefined ->
                {dead_label(BName, BCall), BName, BMod, undefined, L0};
            Facts = #{name := LiveName, call := Call, group_leader := GL} ->
                {A, LA} = application_of(E, GL, L0),
                {Live, LT} = label_text(Facts, E, LA),
                LiveMod = case Call of {M1, _, _} when is_atom(M1) -> M1; _ -> undefined end,
                {Live, first_defined(LiveName, BName), first_defined(LiveMod, BMod), A, LT}
        end,
    _ = Name =/= undefined andalso ets:insert(Names, {Name, E}),
    ets:insert(Ends, {E, label_id(L1, Label, Mod, App), 0}),
    L1;
%% A local port closed before it was read: `port <- Owner' when a row
%% says whom it sent to (a port's messages go to the process connected to
%% it, its owner: Hint), else `port (closed)', one label for all such.
learn_new(L = #labels{endpoints = Ends}, E, Hint) when is_port(E), node(E) =:= node() ->
    {Label, Mod} = case msgflow_describe:describe_port(E) of
                       undefined -> closed_port(L, Hint);
                       #{label := L0, module := M0} -> {L0, M0}
                   end,
    ets:insert(Ends, {E, label_id(L, Label, Mod, undefined), 0}),
    L;
learn_new(L = #labels{endpoints = Ends, names = Names}, E, _Hint) ->
    Pid = case name_of(E) of
              {ok, Name} ->
                  case whereis(Name) of
                      P when is_pid(P) -> ets:insert(Names, {Name, P}), P;
                      _ -> undefined
                  end;
              false ->
                  undefined
          end,
    %% aliases share one label id: there is one per call
    Label = case is_reference(E) of
                true -> <<"alias">>;
                false -> msgflow_describe:label(E)
            end,
    ets:insert(Ends, {E, label_id(L, Label, undefined, undefined), 0}),
    %% the pid a name stood for gets its label now too (held by the name:
    %% views show the name's sends under that pid)
    case Pid of
        undefined -> L;
        _ -> hold(L, Pid)
    end.

closed_port(L = #labels{endpoints = Ends, label_ids = Ids}, Owner) when is_pid(Owner) ->
    case ets:lookup(Ends, Owner) of
        [{_, K, _}] ->
            [{_, OwnerLabel, Mod, _}] = ets:lookup(Ids, K),
            {unicode:characters_to_binary(["port <- ", OwnerLabel]), Mod};
        [] ->
            closed_port(L, none)
    end;
closed_port(_L, _) ->
    {<<"port (closed)">>, undefined}.

%% A live process's label from its facts (msgflow_describe:facts/2),
%% made once per distinct call or name: 100,000 handlers of one module
%% share one text (the cache is dropped past ?MAX_TEXTS).
label_text(#{proc_label := PL}, _E, L) when is_binary(PL) ->
    {PL, L};
label_text(Facts = #{name := Name, call := Call}, E, L = #labels{texts = Texts}) ->
    Key = case Name of undefined -> Call; _ -> {name, Name} end,
    case Texts of
        #{Key := T} ->
            {T, L};
        _ when is_tuple(Call); Name =/= undefined ->
            T = msgflow_describe:label_of(Facts, E),
            Texts1 = case map_size(Texts) >= ?MAX_TEXTS of
                         true -> #{};
                         false -> Texts
                     end,
            {T, L#labels{texts = Texts1#{Key => T}}};
        _ ->
            {msgflow_describe:label_of(Facts, E), L}
    end.

%% The name and initial call a process event (or else the census)
%% recorded for local pid E (taken: it is needed once), or undefined.
take_proc_event(#labels{proc_events = B, census_rows = C}, E) ->
    case ets:lookup(B, E) of
        [{_, N0, C0, _}] ->
            ets:delete(B, E),
            ets:delete(C, E),
            {N0, C0};
        [] ->
            case ets:lookup(C, E) of
                [{_, N0, C0}] -> ets:delete(C, E), {N0, C0};
                [] -> {undefined, undefined}
            end
    end.

%% The label of a process that exited before it was read: its registered
%% name or initial call from its process event, or, spawned by a process not traced
%% (no process event), one label for all such, so that they roll up into one group
%% (views show the pid beside it).
dead_label(undefined, {M, F, A}) -> msgflow_fmt:mfa(M, F, A);
dead_label(undefined, undefined) -> <<"(unknown)">>;
dead_label(Name, _) -> msgflow_fmt:name(Name).


%% @doc hold/2 of a local port P whose busiest row went to Owner (the
%% process it sent to, or `undefined'): a port closed before it was read
%% is labelled by its owner (`port <- httpd_request_handler:init/1'),
%% Owner labelled first (not held: its own rows hold it).  Owner only.
-spec hold_port(labels(), port(), msgflow_tracer:endpoint() | undefined) -> labels().
hold_port(L0 = #labels{endpoints = Ends}, P, Owner) when is_pid(Owner) ->
    case ets:member(Ends, P) of
        true ->
            hold(L0, P);
        false ->
            L1 = learn_new(learn(L0, Owner, false), P, Owner),
            _ = ets:update_counter(Ends, P, {3, 1}),
            L1
    end;
hold_port(L, P, _) ->
    hold(L, P).

%% @doc Endpoint E labelled Label (of module M, application A) without
%% reading the VM: an endpoint a store replayed from the history names
%% (msgflow_store:seed/2).  One already known keeps its label.  Owner only.
-spec seed(labels(), msgflow_tracer:endpoint(), binary(), atom(), atom()) -> labels().
seed(L = #labels{endpoints = Ends}, E, Label, M, A) ->
    _ = ets:member(Ends, E) orelse ets:insert(Ends, {E, label_id(L, Label, M, A), 0}),
    L.

%% @doc learn/2, and one more row of the collector's names E.  Owner only.
-spec hold(labels(), msgflow_tracer:endpoint() | group()) -> labels().
hold(L, {exited, _, _}) ->
    L;
hold(L = #labels{endpoints = Ends}, E) ->
    L1 = learn(L, E, false),
    _ = ets:update_counter(Ends, E, {3, 1}),
    L1.

%% @doc One row fewer names E: a process, port or alias no row names is
%% forgotten (names and remote endpoints stay: they are few, and cannot
%% be seen to exit).  Owner only.
-spec release(labels(), msgflow_tracer:endpoint() | group()) -> labels().
release(L = #labels{endpoints = Ends, expiring = Expiring}, E) ->
    case mortal(E) andalso ets:member(Ends, E) of
        true ->
            case ets:update_counter(Ends, E, {3, -1}) of
                0 -> L#labels{expiring = [E | Expiring]};
                _ -> L
            end;
        false ->
            L
    end.

%% @doc Called as each window closes: deletes the endpoints released two
%% windows ago that no row has named since (so that a view built from
%% the tables meanwhile still finds their labels).  Owner only.
-spec purge(labels()) -> labels().
purge(L = #labels{endpoints = Ends, expiring = Expiring, expiring_before = Before, gone = Gone}) ->
    _ = [ets:delete(Ends, E) || E <- Before, [{_, _, Rows}] <- [ets:lookup(Ends, E)], Rows =< 0],
    L#labels{expiring = [], expiring_before = Expiring, gone = maps:without(Before, Gone)}.

mortal(E) when is_pid(E); is_port(E) -> node(E) =:= node();
mortal(E) -> is_reference(E).

%% @doc What a row's endpoint becomes when the row is rolled up: a local
%% process or port that has exited becomes its group, `{exited, LabelId,
%% Node}', and an alias the group of aliases (the NIF counts the replies
%% to local aliases for their owners; these are the others); any other
%% endpoint stays as it is.  Owner only (it may label an endpoint it has
%% not seen).
-spec rollup_key(labels(), msgflow_tracer:endpoint() | group()) ->
          {msgflow_tracer:endpoint() | group(), labels()}.
rollup_key(L, E) ->
    case stays(E) of
        true -> {E, L};
        false -> group(L, E)
    end.

%% @doc Whether, as window N closes, some endpoint that a row names
%% (held: hold/2) would not stay as it is were its rows rolled up
%% (stays/1): a local process or port that has exited, or an alias,
%% found so within the last ?GONE_WINDOWS windows.  When none would, no
%% row can roll up, and the sweeps need not read the rows
%% (msgflow_rollup); past those windows an endpoint still held is let be
%% (its rows have had a whole pass of the sweeps: what still holds it is
%% a name whose pid it was, or a row of a dead letter not yet rolled up).
%% Reads a slice of the held endpoints a window, not the rows: at least
%% ?GONE_SLICE or a 32nd of them, from where the last slice ended, so a
%% pass over them takes 32 windows at most (100,000 endpoints read at
%% once took 46-80 ms).  Owner only.
-spec any_gone(labels(), non_neg_integer()) -> {boolean(), labels()}.
any_gone(L = #labels{endpoints = Ends, gone_pass = Pass}, N) ->
    Budget = max(?GONE_SLICE, ets:info(Ends, size) div 32),
    {Gone, Next} = gone_slice(first(Ends, Pass), N, Budget, L#labels.gone),
    {lists:any(fun(N0) -> N - N0 =< ?GONE_WINDOWS end, maps:values(Gone)),
     L#labels{gone = Gone, gone_pass = Next}}.

%% @doc The endpoints any_gone/2 found gone as window N closed, with what
%% each becomes when its rows are rolled up (rollup_key/2).  Owner only.
-spec gone_in(labels(), non_neg_integer()) -> {[{msgflow_tracer:endpoint(), group()}], labels()}.
gone_in(L = #labels{gone = Gone}, N) ->
    lists:foldl(fun(E, {Acc, L1}) ->
                        {K, L2} = rollup_key(L1, E),
                        {[{E, K} | Acc], L2}
                end, {[], L}, [E || {E, W} <- maps:to_list(Gone), W =:= N]).

%% The held endpoints' first chunk of a slice: the pass's next, or a new
%% pass's (a continuation into a table that shrank since is refused).
first(Ends, start) ->
    ets:select(Ends, [{{'$1', '_', '$2'}, [{'>', '$2', 0}, {'orelse', {is_pid, '$1'}, {is_port, '$1'},
                                                            {is_reference, '$1'}}], ['$1']}], 500);
first(Ends, Cont) ->
    try ets:select(Cont) catch error:badarg -> first(Ends, start) end.

%% Each gone endpoint of the chunks, not noted before, noted with window
%% N, until Budget are read; where the next slice starts.
gone_slice('$end_of_table', _, _, Gone) ->
    {Gone, start};
gone_slice({Es, Cont}, N, Budget, Gone0) ->
    Gone = lists:foldl(fun(E, G) ->
                               case is_map_key(E, G) orelse stays(E) of
                                   true -> G;
                                   false -> G#{E => N}
                               end
                       end, Gone0, Es),
    case Budget - length(Es) of
        More when More > 0 -> gone_slice(ets:select(Cont), N, More, Gone);
        _ -> {Gone, Cont}
    end.

%% @doc Whether endpoint E stays as it is when its rows are rolled up
%% (rollup_key/2 returns it): any but an alias and a local process or
%% port that has exited.  Reads no table: a sweep asks it of a row's ends
%% before it reads the row (msgflow_rollup).  Any process.
-spec stays(msgflow_tracer:endpoint() | group()) -> boolean().
stays(R) when is_reference(R) -> false;
stays(P) when is_pid(P), node(P) =:= node() -> is_process_alive(P);
stays(P) when is_port(P), node(P) =:= node() -> erlang:port_info(P, id) =/= undefined;
stays(_) -> true.

group(L = #labels{endpoints = Ends}, E) ->
    L1 = learn(L, E),
    [{_, Id, _}] = ets:lookup(Ends, E),
    {{exited, Id, node_of(E)}, L1}.

%% @doc The group an endpoint's messages are merged into (the store's
%% groups): `{LabelId, Node}', its label id and node; a registered name's
%% is its pid's (as views count them), an exited group's its own.  An
%% endpoint not seen yet is labelled (a name's pid, read now).  Owner only.
-spec group_end(labels(), msgflow_tracer:endpoint() | group()) ->
          {{label_id(), node()}, labels()}.
group_end(L, {exited, K, Node}) ->
    {{K, Node}, L};
group_end(L = #labels{endpoints = Ends}, E0) ->
    E = canon(tables(L), E0),
    case ets:lookup(Ends, E) of
        [{_, K, _}] ->
            {{K, node_of(E)}, L};
        [] ->
            %% a name learnt now is its pid's from here on (canon/2), as
            %% every later group of it will be
            L1 = learn(L, E),
            E1 = canon(tables(L1), E0),
            L2 = learn(L1, E1),
            [{_, K, _}] = ets:lookup(Ends, E1),
            {{K, node_of(E1)}, L2}
    end.

%% The label id of a (label, module, application) triple, made when new.
label_id(#labels{label_ids = K, ids_of = KI}, Label, Mod, App) ->
    Triple = {Label, Mod, App},
    case ets:lookup(KI, Triple) of
        [{_, Id}] ->
            Id;
        [] ->
            Id = ets:info(KI, size) + 1,
            ets:insert(KI, {Triple, Id}),
            ets:insert(K, {Id, Label, Mod, App}),
            Id
    end.

first_defined(undefined, B) -> B;
first_defined(A, _) -> A.

%% application:get_application/1 of a live process, which depends only on
%% its group leader: asked once per group leader (a few in most systems;
%% the cache is dropped past ?MAX_GROUP_LEADERS).
application_of(E, GL, L = #labels{apps = Apps}) ->
    case Apps of
        #{GL := A} ->
            {A, L};
        _ ->
            A = case application:get_application(E) of
                    {ok, A1} -> A1;
                    undefined -> undefined
                end,
            Apps1 = case map_size(Apps) >= ?MAX_GROUP_LEADERS of
                        true -> #{};
                        false -> Apps
                    end,
            {A, L#labels{apps = Apps1#{GL => A}}}
    end.

name_of(A) when is_atom(A) -> {ok, A};
name_of({A, Node}) when is_atom(A), Node =:= node() -> {ok, A};
name_of(_) -> false.

%% @doc The endpoint views show for E: the pid a local registered name
%% stood for (when it resolved), else E itself.  Any process.
-spec canon(tables(), msgflow_tracer:endpoint() | group()) -> msgflow_tracer:endpoint() | group().
canon(#{names := Names}, A) when is_atom(A) ->
    case ets:lookup(Names, A) of
        [{_, P}] -> P;
        [] -> A
    end;
canon(T, {A, Node}) when is_atom(A), Node =:= node() ->
    case canon(T, A) of
        P when is_pid(P) -> P;
        _ -> {A, Node}
    end;
canon(_, E) ->
    E.

%% @doc What is known of an endpoint: label, module, application, node.
%% An endpoint never seen gets its text and `undefined's.  Any process.
-spec meta(tables(), msgflow_tracer:endpoint() | group()) -> meta().
meta(#{label_ids := Ids}, {exited, K, Node}) ->
    [{_, L, M, A}] = ets:lookup(Ids, K),
    #{label => L, module => M, application => A, node => Node};
meta(#{endpoints := Ends, label_ids := Ids}, E) ->
    {Label, Mod, App} = case ets:lookup(Ends, E) of
                            [{_, K, _}] ->
                                [{_, L, M, A}] = ets:lookup(Ids, K),
                                {L, M, A};
                            [] ->
                                {msgflow_fmt:endpoint(E), undefined, undefined}
                        end,
    #{label => Label, module => Mod, application => App, node => node_of(E)}.

%% @doc One field of every endpoint known: `#{Endpoint => Value}', read
%% in one pass.  Any process.
-spec field_map(tables(), label | module | application) -> #{msgflow_tracer:endpoint() => term()}.
field_map(T = #{endpoints := Ends}, Field) ->
    %% the endpoints first: the collector writes a label id before the
    %% endpoints of it, so an id read after them is there, unless it was
    %% purged in between (then id_field/3 says so)
    EL = ets:tab2list(Ends),
    KM = id_map(T, Field),
    maps:from_list([{E, case KM of
                            #{K := V} -> V;
                            _ -> id_field(T, K, Field)
                        end} || {E, K, _} <- EL]).

%% @doc One field of one label id, read from the table: for an id a map
%% of them (id_map/2) read earlier does not have; `undefined' (a label
%% `<<"?">>') for an id no longer there.  Any process.
-spec id_field(tables(), label_id(), label | module | application) -> term().
id_field(#{label_ids := Ids}, K, Field) ->
    Pos = case Field of label -> 2; module -> 3; application -> 4 end,
    case ets:lookup(Ids, K) of
        [Row] -> element(Pos, Row);
        [] when Field =:= label -> <<"?">>;
        [] -> undefined
    end.

%% @doc One field of every label id: `#{LabelId => Value}' (for groups of exited
%% endpoints).  Any process.
-spec id_map(tables(), label | module | application) -> #{label_id() => term()}.
id_map(#{label_ids := Ids}, Field) ->
    Pos = case Field of label -> 2; module -> 3; application -> 4 end,
    maps:from_list([{element(1, K), element(Pos, K)} || K <- ets:tab2list(Ids)]).

%% @doc Every endpoint known: `#{Endpoint => {Label, Module, Application}}',
%% read in one pass (for views of many endpoints).  Any process.
-spec all_meta(tables()) -> #{msgflow_tracer:endpoint() => {binary(), atom(), atom()}}.
all_meta(T = #{endpoints := Ends, label_ids := Ids}) ->
    EL = ets:tab2list(Ends),                    %% first: see field_map/2
    KM = maps:from_list([{K, {L, M, A}} || {K, L, M, A} <- ets:tab2list(Ids)]),
    maps:from_list([{E, case KM of
                            #{K := V} -> V;
                            _ -> list_to_tuple([id_field(T, K, F)
                                                || F <- [label, module, application]])
                        end} || {E, K, _} <- EL]).

%% @doc The node of an endpoint: a pid's, port's or reference's own, the
%% node of `{Name, Node}', this node for a registered name; a node this VM
%% has no atom for (a history or dump read from another node's files) is
%% its name as a binary.
-spec node_of(msgflow_tracer:endpoint() | term()) -> node() | binary().
node_of({_, Node}) when is_atom(Node); is_binary(Node) -> Node;
node_of({exited, _, Node}) -> Node;
node_of(A) when is_atom(A) -> node();
node_of(E) when is_pid(E); is_port(E); is_reference(E) -> node(E);
node_of(Text) when is_binary(Text) ->
    %% a pid, port or reference of a node this VM has no atom for, read
    %% from a file as its text (`<0.42.0>@prod@host', msgflow_etf)
    case binary:split(Text, <<">@">>) of
        [_, Node] -> Node;
        _ -> node()
    end;
node_of(_) -> node().
