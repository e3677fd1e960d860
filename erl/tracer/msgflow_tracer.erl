%%% @doc The erl_tracer callback module msgflow traces with, and the NIFs
%%% the collector drives.  Everything here is implemented in C
%%% (c_src/msgflow_tracer_nif.c, loaded from priv/msgflow_tracer.so); the
%%% Erlang bodies only run when the NIF library is not loaded.
%%%
%%% A session is an opaque NIF resource.  It is the tracer state:
%%% `erlang:trace(Who, true, [send, {tracer, msgflow_tracer, Session}])'.
%%% Its counts live in the NIF, per scheduler thread; `snapshot/1' takes
%%% what was counted since the previous snapshot.  Each thread's tables are
%%% a generation: `session_rotate/1' makes every thread start a new one,
%%% and the next snapshot takes the last counts of the old ones and frees
%%% them, so pairs that no longer get messages leave the NIF.
-module(msgflow_tracer).
%% An erl_tracer callback module (OTP 25 has no behaviour_info for it).

-export([enabled/3, enabled_send/3, trace_send/5, trace/5, enabled_procs/3, trace_procs/5,
         enabled_call/3]).
-export([calls_config/3, calls_take/1, call_buckets/0]).
-export([sizes_config/3, sizes_take_some/2, size_words/0]).
-export([session_new/3, session_stop/1, session_rotate/1, session_limit/2, snapshot/1, snapshot_start/1, snapshot_next/1,
         proc_events_take/1, session_info/1, own/3,
         lib_info/0, kinds/0]).
-export([flow_session_new/2, flow_watch/3, flow_take/2, entry_new/1, entry_info/1, entry_stop/1]).
-export([snapshot_fold_start/2, snapshot_fold/1]).
-export([agg_new/1, agg_add/3, agg_new_ends/2, agg_set_groups/2, agg_close/3, agg_full/3, agg_lookup/3,
         agg_rows/5, agg_busiest/3, agg_last_ends/1, agg_info/1, agg_set_rollups/2, agg_sweep/4,
         agg_take_released/2, agg_open_receivers/4, agg_sum/2, agg_named/1, agg_partner/2, agg_take_top/1,
         agg_idle_ends/3]).
-export_type([agg/0, agg_table/0]).

-on_load(init/0).

-export_type([session/0, take/0, endpoint/0, snapshot/0, delta/0, kind/0, proc_event/0, entry/0,
              event/0]).

-opaque session() :: reference().
%% A call entry (entry_new/1): the tracer state of a meta call trace
%% pattern that starts request flows.
-opaque entry() :: reference().
%% A seq_trace send kept for a watched label: {Prev, Cur, From, To,
%% MonotonicUs, Kind, Tag}, Prev and Cur its serial (see seq_trace),
%% MonotonicUs erlang:monotonic_time(microsecond) when it was counted, Kind
%% and Tag the message's (as the counts name them: `call', `get').
-type event() :: {non_neg_integer(), non_neg_integer(), pid() | atom(), endpoint(), integer(),
                  kind(), atom()}.
%% A snapshot being taken in chunks (snapshot_start/1).
-opaque take() :: reference().
%% A sender (the tracee: pid or port) or a receiver as the VM reported it.
-type endpoint() :: pid() | port() | atom() | {atom(), node()} | reference().
%% {Pairs, DeadLetters, Replies, Overflow, OverflowDead}: see snapshot/1.
-type snapshot() :: {[delta()], [delta()], [delta()], non_neg_integer(), non_neg_integer()}.
%% {Sender, Receiver, Messages}, and with kinds on {Sender, Receiver,
%% Messages, Kind, Tag}: the kind read from the message (`call' for
%% `{'$gen_call', From, Request}', `cast', `event' for `'$gen_event''
%% and its all-state and sync variants, `system', `reply' for a reply to
%% an alias, `exit' for `{'EXIT', _, _}', `down', `io', else `info') and
%% its tag (the atom the request or message starts with, else the name of
%% its type: `binary', `list', `map', `integer', `tuple', ...; `other' past
%% MaxKinds).  Dead letters never carry a kind.
-type delta() :: {endpoint(), endpoint(), pos_integer()}
               | {endpoint(), endpoint(), pos_integer(), kind(), atom()}.
-type kind() :: call | cast | event | system | reply | exit | down | io | info.

%% @doc The kinds of message the tracer tells apart (kind()), in one list.
-spec kinds() -> [kind()].
kinds() -> [call, cast, event, system, reply, exit, down, io, info].

%% What a spawn or register event said about a process: a registered name;
%% the spawn's `{M, F, Arity}'; or for a proc_lib start `{proc_lib, {M, F,
%% ArgsSummary}}', where ArgsSummary keeps atoms, pids and `{_, Atom, _}' of
%% the first 8 arguments and writes `'_'' for any other argument.
-type proc_event() :: {pid() | port(), atom() | {module(), atom(), arity()}
                                 | {proc_lib, {module(), atom(), [term()]}}
                                 | {'fun', function()} | undefined}.

-spec init() -> ok | {error, term()}.
init() ->
    case erlang:load_nif(filename:join(priv_dir(), "msgflow_tracer"), layout_samples()) of
        ok ->
            %% the resource read is checked once load has returned (a type
            %% opened in load takes no resources before); a library
            %% without the check (an older one at the same path) loads
            %% with the read off
            _ = try layout_probe(not_resources()) catch error:_ -> false end,
            ok;
        Error ->
            Error
    end.

%% References that are no NIF resource, for layout_probe/1: plain ones
%% and aliases (layout_samples/0's), an ETS table's and an atomics
%% array's (magic references of other kinds).
not_resources() ->
    {Aliases, Refs} = ref_samples(),
    Table = ets:new(?MODULE, []),
    ets:delete(Table),
    [Table, atomics:new(1, []) | [A || {A, _} <- Aliases] ++ Refs].

%% Terms the library checks its reads of the VM's term layout against when
%% it loads: aliases with their owners (made by alias/0 and by monitor/3,
%% here and in another process), references that are no aliases, and the
%% VM's types: `classic' before OTP 29; on 29 `{records, Samples}', native
%% records made by records:create/4 (the tracer must never ask
%% enif_term_type about one: it aborts the VM); after 29 `{unknown,
%% Samples}'.
layout_samples() ->
    {Aliases, Refs} = ref_samples(),
    {Aliases, Refs, types(erlang:system_info(otp_release))}.

types(Rel) ->
    case string:to_integer(Rel) of
        {N, _} when is_integer(N), N =< 28 -> classic;
        {29, _} -> {records, record_samples()};
        _ -> {unknown, record_samples()}
    end.

%% Native records made by the VM's own records:create/4 (a BIF: never a
%% user's module of that name); none where it cannot make them.
record_samples() ->
    try erlang:is_builtin(records, create, 4) of
        true ->
            [apply(records, create, [?MODULE, sample, Fields, #{is_exported => Exported}])
             || {Fields, Exported} <- [{[{a, 1}], true}, {[], false},
                                       {[{a, 1}, {b, 2}, {c, 3}], true}]];
        false ->
            []
    catch
        _:_ -> []
    end.

ref_samples() ->
    Self = self(),
    A1 = alias(),
    M = erlang:monitor(process, Self, [{alias, demonitor}]),
    {Other, Ref} = spawn_monitor(fun() -> Self ! {alias, self(), alias()} end),
    Theirs = receive {alias, Other, A2} -> [{A2, Other}] after 5000 -> [] end,
    receive {'DOWN', Ref, process, Other, _} -> ok after 5000 -> ok end,
    unalias(A1),
    erlang:demonitor(M, [flush]),
    %% plain references: a monitor's (gen:call's tag without an alias) and
    %% make_ref/0's
    M2 = erlang:monitor(process, Self),
    erlang:demonitor(M2, [flush]),
    {[{A1, Self}, {M, Self} | Theirs], [make_ref(), Ref, M2, make_ref()]}.

%% Where msgflow_tracer.so is: the application's `priv_dir' environment
%% (set by msgflow_cluster on a node it loaded msgflow into with
%% code:load_binary/3, where no code path leads to it), else the
%% application's priv directory, else `priv' beside this module's ebin.
priv_dir() ->
    case application:get_env(msgflow, priv_dir) of
        {ok, Dir} ->
            Dir;
        undefined ->
            case code:priv_dir(msgflow) of
                {error, bad_name} ->
                    filename:join(filename:dirname(filename:dirname(code:which(?MODULE))),
                                  "priv");
                Dir ->
                    Dir
            end
    end.

-define(NOT_LOADED, erlang:nif_error({not_loaded, [{module, ?MODULE}, {line, ?LINE}]})).

%% @doc erl_tracer callback.  For `trace_status': `trace' while the
%% session is active, `remove' once it was stopped, its collector died or
%% it cannot be read (a session of a deleted instance of this module).
%% For send tags: `trace' while active, else `discard'; `discard' for the
%% other tags.
-spec enabled(atom(), session(), pid() | port() | undefined) -> trace | discard | remove.
enabled(_TraceTag, _Session, _Tracee) -> ?NOT_LOADED.

%% @doc erl_tracer callback for `send' and `send_to_non_existing_process':
%% always `trace', reading nothing.  Whether the session still counts is
%% answered by enabled/3 for `trace_status', which the VM asks when it
%% schedules a traced process in.
-spec enabled_send(send | send_to_non_existing_process, session(), pid() | port()) -> trace.
enabled_send(_TraceTag, _Session, _Tracee) -> ?NOT_LOADED.

%% @doc erl_tracer callback: counts one message for (Tracee, maps:get(extra, Opts)).
-spec trace_send(send | send_to_non_existing_process, session(), pid() | port(), term(),
                 #{extra => term()}) -> ok.
trace_send(_TraceTag, _Session, _Tracee, _Msg, _Opts) -> ?NOT_LOADED.

%% @doc erl_tracer callback for the other tags: send tags are counted;
%% `seq_trace' with a flow session as the state (the system tracer that
%% msgflow_flow sets): a `{send, {Prev, Cur}, From, To, _}' event is
%% counted for `({Label, From}, To)' (Tracee is the label, any term) and
%% kept as an event() when the label is watched; the rest is ignored,
%% whatever its shape.
-spec trace(atom(), session(), term(), term(), map()) -> ok.
trace(_TraceTag, _Session, _Tracee, _TraceTerm, _Opts) -> ?NOT_LOADED.

%% @doc erl_tracer callback for calls: with an entry as the state (a meta
%% pattern of msgflow:follow_calls/2), counts the call and answers `trace'
%% for one call in the entry's `every' (so that the pattern's match spec,
%% which sets the trace token, runs for it), `discard' for the others and
%% for any other state.  A meta pattern is answered by enabled/3 with tag
%% `call' the same way: ERTS asks a meta tracer module there when the module
%% has no trace_call/5 (and through trace_call/5's slot with three arguments
%% when it has one), which is why this module has none; call events then
%% go to trace/5, which ignores them.
-spec enabled_call(atom(), entry() | session(), pid() | port()) -> trace | discard.
enabled_call(_TraceTag, _State, _Tracee) -> ?NOT_LOADED.

%% @doc erl_tracer callback for the `procs' flag: `trace' for spawn and
%% register (recorded as process events) while the session is active, `discard'
%% otherwise (`remove' is only ever the answer to trace_status, enabled/3).
-spec enabled_procs(atom(), session(), pid() | port()) -> trace | discard.
enabled_procs(_TraceTag, _Session, _Tracee) -> ?NOT_LOADED.

%% @doc erl_tracer callback: records a spawn (child and initial call) or a
%% register (process and name) for proc_events_take/1.
-spec trace_procs(atom(), session(), pid() | port(), term(), map()) -> ok.
trace_procs(_TraceTag, _Session, _Tracee, _TraceTerm, _Opts) -> ?NOT_LOADED.

%% @doc A chunk of the process events recorded and not yet taken (a few thousand
%% at most), and how many were dropped because more than 1,000,000 were
%% waiting.  Call again until it returns none; the order of process events is not
%% kept.  badarg
%% for a non-session.
-spec proc_events_take(session()) -> {[proc_event()], non_neg_integer()}.
proc_events_take(_Session) -> ?NOT_LOADED.

%% @doc msgflow's own processes in a session: a send from or to one of
%% them (a local pid, or a registered name's atom) is not counted, only
%% added to session_info/1's `own_left_out'; a process spawned by one of
%% them while it has the `procs' flag is one of them too, before it runs.
%% `add' one (`full' past 512), `remove' one, or `list' them (the third
%% argument is then ignored).  badarg for anything else.
-spec own(session(), add | remove, pid() | atom()) -> ok | full;
         (session(), list, term()) -> [pid() | atom()].
own(_Session, _Op, _Who) -> ?NOT_LOADED.

%% @doc A new session counting for at most MaxEntries table entries (a
%% pair seen on N scheduler threads holds N entries, one per kind of
%% message; the collector passes four times the `max_pairs' it caps
%% distinct pairs at).  MaxKinds (0 to 1000) is how many (kind, tag) a
%% pair may have in one thread's table, past which its sends of a kind
%% are counted as `{Kind, other}'; 0 counts by pair alone (kinds off: the
%% message is never read).  Collector is monitored: when it dies the
%% session answers `remove' to the VM.  badarg on bad types.
%% @doc The session notes the round trip of 1 in Sample gen:calls per
%% scheduler thread (their request, and the reply to its alias), and gives
%% up as unanswered those with no reply after TimeoutMs.  Once per
%% session, before its tracing starts (the collector).  Needs kinds on.
-spec calls_config(session(), pos_integer(), non_neg_integer()) -> ok.
calls_config(_Session, _Sample, _TimeoutMs) -> ?NOT_LOADED.

%% @doc The round trips noted since the last take, by call edge:
%% `{[{Caller, Server, Kind, Tag, Sampled, Unanswered, [{Bucket,
%% Count}]}], #{busy, displaced}}', Server a local pid or a registered
%% name, Bucket numbered as call_buckets/0 numbers them; `busy' (samples
%% given up: their slot was being read) and `displaced' (calls given up as
%% unanswered: their slot was needed) since the session began.  The
%% collector only.
-spec calls_take(session()) ->
          {[{pid(), pid() | atom(), kind(), atom(), non_neg_integer(), non_neg_integer(),
             [{non_neg_integer(), pos_integer()}]}],
           #{busy := non_neg_integer(), displaced := non_neg_integer()}}.
calls_take(_Session) -> ?NOT_LOADED.

%% @doc The session measures the message of 1 in Sample sends per
%% scheduler thread from a local process to a local process or a
%% registered name (a send to an alias: to its owner):
%% its heap words (what the send copies) and the bytes of the off-heap
%% binaries it references, walking at most 1,024 terms (past that the
%% figures are a lower bound and the message is counted as large).  Words
%% is size_words/0.  Once per session, before its tracing starts (the
%% collector).  badarg on bad types.
-spec sizes_config(session(), pos_integer(), tuple()) -> ok.
sizes_config(_Session, _Sample, _Words) -> ?NOT_LOADED.

%% @doc The messages measured since the last take, by edge: `[{Sender,
%% Receiver, Sampled, Words, WordsMax, BinaryBytes, Large}]', Words (heap
%% words) and BinaryBytes (bytes of off-heap binaries) summed over the
%% Sampled messages, WordsMax the biggest, Large how many ran out the
%% walk's budget; a reply to an alias is the edge to its owner.  At most
%% Max edges (1 to 65,536) a call: `{more, Edges}' while edges or chains of this take are left (the next call
%% goes on with them; a message measured meanwhile comes in this take or
%% the next, once), `{done, Edges}' with the last.  Raises `busy' while
%% another process takes them; badarg for a bad argument.  The collector
%% (tests and benches too).
-spec sizes_take_some(session(), 1..65536) ->
          {more | done, [{pid(), pid() | atom(), pos_integer(), non_neg_integer(),
                          non_neg_integer(), non_neg_integer(), non_neg_integer()}]}.
sizes_take_some(_Session, _Max) -> ?NOT_LOADED.

%% @doc The heap words of the terms the size walk does not go inside, as
%% erts_debug:flat_size/1 gives them on this VM (a lower bound where a
%% term of the type may be bigger: a fun's free variables, a remote
%% reference): `{Float, Ref, Fun, ExternalPid, HeapBinary, RefcBinary,
%% Map, MapKey, Big, EmptyMap, EmptyTuple}', HeapBinary that of an empty
%% binary (a word more per 8 bytes), Map and MapKey a map of N keys as
%% Map + N x MapKey words (keys and values aside; exact up to 32 keys, a
%% lower bound for the hash maps past that), EmptyMap and EmptyTuple
%% `#{}' and `{}' (literals on some releases: 0 words).
-spec size_words() -> tuple().
size_words() ->
    F = fun erts_debug:flat_size/1,
    X = 1,
    %% a pid of node a@host, from the external term format
    Remote = binary_to_term(<<131, 88, 119, 6, "a@host", 0:32, 0:32, 1:32>>),
    %% (keys and values that are small integers: 0 words each)
    One = F(#{X => X}),
    Key = F(#{X => X, X + 1 => X}) - One,
    {F(1.5), F(make_ref()), F(fun() -> ok end), F(Remote), F(<<>>),
     F(binary:copy(<<0>>, 100)), One - Key, Key, F(1 bsl 62 + X), F(#{}),
     F(erlang:make_tuple(X - 1, x))}.

%% @doc The round-trip histogram's buckets, by number from 0: `{Low,
%% High}' in ns (Low included, High excluded).  Any process.
-spec call_buckets() -> [{non_neg_integer(), pos_integer() | infinity}].
call_buckets() -> ?NOT_LOADED.

-spec session_new(pid(), pos_integer(), non_neg_integer()) -> session().
session_new(_Collector, _MaxEntries, _MaxKinds) -> ?NOT_LOADED.

%% @doc Marks the session stopped: every later callback answers `remove'.
-spec session_stop(session()) -> ok.
session_stop(_Session) -> ?NOT_LOADED.

%% @doc Every thread starts a new generation of its tables the next time it
%% counts; the next snapshot takes what is left in the old ones and frees
%% them (a jemalloc arena each, dropped in one call).  Counts are never
%% lost; the entries of the old generations stop counting against the cap.
%% badarg for a non-session.
-spec session_rotate(session()) -> ok.
session_rotate(_Session) -> ?NOT_LOADED.

%% @doc The session's cap set to Max entries: past it a new entry's
%% messages are overflow, as past the cap it was made with.  The collector
%% lowers it once its share of max_memory is used (msgflow_store), so that
%% the tracer's tables grow no more, and sets it back on a reset
%% (msgflow_run:renew/2).
%% badarg for a non-session or a Max of 0.
-spec session_limit(session(), pos_integer()) -> ok.
session_limit(_Session, _Max) -> ?NOT_LOADED.

%% @doc What was counted since the previous snapshot of this session (on
%% the caller's normal scheduler, in steps of at most ~0.5 ms with yields
%% between them; tracing goes on meanwhile and nothing is lost or counted
%% twice).  Raises `busy' while another snapshot of the session runs.
%% Pairs and DeadLetters are `[{Sender, Receiver, Messages}]'; a pair
%% counted on several scheduler threads appears once per thread.
%% Replies are `[{Sender, Owner, Messages}]', the sends to aliases of the
%% local process Owner (a gen:call's reply goes to an alias of its caller,
%% one per call, OTP 24+), counted per owner, when lib_info() says
%% `alias_owner' (else they are in Pairs, to each alias).  DeadLetters
%% (sends to non-existing processes and inactive aliases, whose owner is
%% then the receiver) are also in Pairs or Replies.  Overflow counts
%% messages that found no entry because the cap was reached; OverflowDead
%% the dead letters in no DeadLetters tuple.
-spec snapshot(session()) -> snapshot().
snapshot(_Session) -> ?NOT_LOADED.

%% @doc snapshot/1 in chunks: a take of the session, from which
%% snapshot_next/1 returns about 1,024 deltas (or ~0.25 ms of work) a call,
%% so that the caller never holds a whole snapshot.  Raises `busy' while
%% another snapshot of the session runs, badarg for a non-session.
-spec snapshot_start(session()) -> take().
snapshot_start(_Session) -> ?NOT_LOADED.

%% @doc The next chunk of a take: `{more, Pairs, DeadLetters, Replies}', or
%% at the end `{done, Pairs, DeadLetters, Replies, Overflow, OverflowDead,
%% Top}' (as in snapshot/1; the overflow figures cover the whole take).
%% Top is the busiest pairs among the take's overflowed sends of a local
%% process to a local process (or its aliases: the owner is the receiver,
%% so a pair may come twice), a Space-Saving summary of 1,024 pairs from
%% each thread's tables: `[{Min, [{Sender, Receiver, Count, Err}]}]', a
%% pair's messages between Count - Err and Count, and one left out of a
%% summary had at most Min there (msgflow_store_topk merges them).
%% badarg for a take that is done.
-spec snapshot_next(take()) ->
          {more, [delta()], [delta()], [delta()]}
        | {done, [delta()], [delta()], [delta()], non_neg_integer(), non_neg_integer(),
           [{non_neg_integer(), [{pid(), pid(), pos_integer(), non_neg_integer()}]}]}.
snapshot_next(_Take) -> ?NOT_LOADED.

%% @doc The session's tables: `state' (active | stopped | collector_down),
%% `shards' (threads that counted), `memory' (bytes held), `entries' (pair,
%% dead-letter and call entries), `max_pairs' (the entry cap), `rotations'
%% (session_rotate/1 calls), `retired' (old generations not yet freed: a
%% thread retires its old one at its next send after a rotation, the next
%% snapshot frees it), `freed' (old generations freed), `max_kinds', `own'
%% (msgflow's own processes and names, own/3) and `own_left_out' (sends
%% from or to them, not counted).  memory and entries include the retired
%% generations.
-spec session_info(session()) -> #{state := active | stopped | collector_down,
                                   shards := non_neg_integer(),
                                   memory := non_neg_integer(),
                                   entries := non_neg_integer(),
                                   max_pairs := pos_integer(),
                                   rotations := non_neg_integer(),
                                   retired := non_neg_integer(),
                                   freed := non_neg_integer(),
                                   max_kinds := non_neg_integer(),
                                   own := non_neg_integer(),
                                   own_left_out := non_neg_integer()}.
session_info(_Session) -> ?NOT_LOADED.

%% @doc A flow session: the tracer state of `seq_trace:set_system_tracer(
%% {msgflow_tracer, FlowSession})'.  It counts seq_trace send events by
%% ({Label, Sender}, Receiver) in at most MaxPairs table entries, taken with
%% snapshot/1 like a session's; Keeper is monitored: once it died, every
%% event is discarded.  badarg on bad types.
-spec flow_session_new(pid(), pos_integer()) -> session().
flow_session_new(_Keeper, _MaxPairs) -> ?NOT_LOADED.

%% @doc Keeps the events of Label (at most MaxEvents; every event is
%% counted in the pairs all the same) until flow_take/2.  While no watch
%% has room left, an event takes no lock.  `full' when 64 labels are
%% watched already.
-spec flow_watch(session(), term(), non_neg_integer()) -> ok | full.
flow_watch(_FlowSession, _Label, _MaxEvents) -> ?NOT_LOADED.

%% @doc A chunk of the events kept for Label (at most 500 a call, so
%% that a call stays well under a millisecond), newest first: `more' while
%% some are left, `done' with the last chunk, when the watch ends.  The
%% first call closes the watch to new events.  `{[], done}' for a label not
%% watched.
-spec flow_take(session(), term()) -> {[event()], more | done}.
flow_take(_FlowSession, _Label) -> ?NOT_LOADED.

%% @doc A call entry sampling one call in Every (the first, then every
%% Every-th), for `{meta, msgflow_tracer, Entry}'.
-spec entry_new(pos_integer()) -> entry().
entry_new(_Every) -> ?NOT_LOADED.

%% @doc `{Calls, Sampled}': calls counted, and of those the ones sampled.
-spec entry_info(entry()) -> {non_neg_integer(), non_neg_integer()}.
entry_info(_Entry) -> ?NOT_LOADED.

%% @doc Ends the entry: its pattern is removed by the VM at the next
%% trace_status, and no call is counted after.
-spec entry_stop(entry()) -> ok.
entry_stop(_Entry) -> ?NOT_LOADED.

%%% The aggregate (c_src/mf_agg.h): a run's rows folded in C.  Tables
%%% are `pairs', `rolled_up', `dead' and `groups'; a row is msgflow_row's
%%% `{{From, To}, Total, LastWindow, LastCount, History, PeakMhz, Kinds}'
%%% (a dead letter's `{{From, To}, Messages}').  One process writes
%%% (agg_add, agg_new_ends, agg_set_groups, agg_close, agg_full); any
%%% process reads.  Not yet the collector's store (issue 53).

%% {Resource, Number}: the number finds the aggregate when this module was
%% deleted and loaded again since it was made (c_src/mf_agg_nif.c).
-opaque agg() :: {reference(), pos_integer()}.
-type agg_table() :: pairs | rolled_up | dead | groups.

%% @doc An empty aggregate, window 1 open: rows keep Keep windows of
%% history and MaxKinds kinds and tags of their own; the busiest indexes
%% hold TopTotal keys by messages since start and TopWindow by the open
%% window; Node is node().  Raises `memory'.
-spec agg_new({pos_integer(), pos_integer(), pos_integer(), pos_integer(), node()}) -> agg().
agg_new(_Opts) -> ?NOT_LOADED.

%% @doc The deltas added to Table (pairs, rolled_up or dead) in the open
%% window; returns the messages of keys that found no row (agg_full/2).
-spec agg_add(agg(), pairs | rolled_up | dead, [delta()]) -> non_neg_integer().
agg_add(_Agg, _Table, _Deltas) -> ?NOT_LOADED.

%% @doc At most Max endpoints new since the last call, by number.
-spec agg_new_ends(agg(), pos_integer()) -> [{pos_integer(), endpoint()}].
agg_new_ends(_Agg, _Max) -> ?NOT_LOADED.

%% @doc The group ends of endpoints (by number); then the deltas that
%% waited for them go to their groups' rows.
-spec agg_set_groups(agg(), [{pos_integer(), term()}]) -> ok.
agg_set_groups(_Agg, _Groups) -> ?NOT_LOADED.

%% @doc The open window closed after Ms ms; its ends with MinPartners
%% partners or more (or a registered name) are kept (agg_last_ends/1).
-spec agg_close(agg(), non_neg_integer(), non_neg_integer()) -> ok.
agg_close(_Agg, _Ms, _MinPartners) -> ?NOT_LOADED.

%% @doc Whether new rows may not be made (true) or may (false), and the
%% most pairs rows there may be (0: no bound).
-spec agg_full(agg(), boolean(), non_neg_integer()) -> ok.
agg_full(_Agg, _Full, _MaxPairs) -> ?NOT_LOADED.

%% @doc The row of a key, or [].
-spec agg_lookup(agg(), agg_table(), {term(), term()}) -> [tuple()].
agg_lookup(_Agg, _Table, _Key) -> ?NOT_LOADED.

%% @doc At most Max rows after Cursor (0 to start), and the cursor to go on
%% from (`done' at the end); with Kinds false each row's kinds are [].
-spec agg_rows(agg(), agg_table(), non_neg_integer(), pos_integer(), boolean()) ->
          {[tuple()], non_neg_integer() | done}.
agg_rows(_Agg, _Table, _Cursor, _Max, _Kinds) -> ?NOT_LOADED.

%% @doc The N busiest keys by messages since start (`total'), in the open
%% window or in the last closed one, highest first, with the index's
%% floor (a key not in it has at most that many).
-spec agg_busiest(agg(), total | open | last, non_neg_integer()) ->
          {[{{term(), term()}, non_neg_integer()}], non_neg_integer()}.
agg_busiest(_Agg, _Which, _N) -> ?NOT_LOADED.

%% @doc The last closed window's ends kept: `{End, InPartners,
%% InMessages, OutPartners, OutMessages}'.
-spec agg_last_ends(agg()) -> [{term(), non_neg_integer(), non_neg_integer(), non_neg_integer(),
                                non_neg_integer()}].
agg_last_ends(_Agg) -> ?NOT_LOADED.

%% @doc A snapshot of Session that folds into Agg instead of making terms
%% (snapshot_fold/1): replies to a process's aliases go to its rolled-up
%% rows, dead letters to the dead letters, the rest to the pairs.  Raises
%% `busy' while another snapshot of the session runs.
-spec snapshot_fold_start(session(), agg()) -> take().
snapshot_fold_start(_Session, _Agg) -> ?NOT_LOADED.

%% @doc The next step of it (about 0.25 ms under the aggregate's write
%% lock): the deltas folded in it, its messages of pairs, of replies to
%% aliases and of dead letters, and the same of keys that found no row
%% (past agg_full/3); when done, also the tracer's overflow, its
%% overflowed dead letters and its busiest overflowed pairs (as
%% snapshot_next/1's `done'), and the aggregate's busiest keys that found
%% no row (the same shape).
-spec snapshot_fold(take()) ->
          {more, non_neg_integer(), {non_neg_integer(), non_neg_integer(), non_neg_integer()},
           {non_neg_integer(), non_neg_integer(), non_neg_integer()}} |
          {done, non_neg_integer(), {non_neg_integer(), non_neg_integer(), non_neg_integer()},
           {non_neg_integer(), non_neg_integer(), non_neg_integer()}, non_neg_integer(), non_neg_integer(),
           [{non_neg_integer(), [{endpoint(), endpoint(), pos_integer(), non_neg_integer()}]}],
           [{non_neg_integer(), [{endpoint(), endpoint(), pos_integer(), non_neg_integer()}]}]}.
snapshot_fold(_Take) -> ?NOT_LOADED.

%% @doc What each endpoint (one not held is passed over) becomes in a row
%% rolled up: an exited process's group, or itself.
-spec agg_set_rollups(agg(), [{endpoint(), term()}]) -> ok.
agg_set_rollups(_Agg, _Rollups) -> ?NOT_LOADED.

%% @doc The next Budget rows of Table swept: those idle since window Idle
%% or before (dead letters: any) with an end that rolls up go to their
%% rolled-up row (dead letters: dead letters); the messages of pairs rows
%% moved, and whether the sweep reached the end of the table.
-spec agg_sweep(agg(), pairs | rolled_up | dead, non_neg_integer(), non_neg_integer()) ->
          {non_neg_integer(), done | more}.
agg_sweep(_Agg, _Table, _Idle, _Budget) -> ?NOT_LOADED.

%% @doc At most Max endpoints no row names any more, since the last call.
-spec agg_take_released(agg(), pos_integer()) -> [term()].
agg_take_released(_Agg, _Max) -> ?NOT_LOADED.

%% @doc The open window's receivers with at least MinSenders senders and
%% MinMessages messages, `{Receiver, Senders, Messages}': the Max with the
%% most senders, and the registered names among them (`all': every one).
-spec agg_open_receivers(agg(), non_neg_integer(), non_neg_integer(), pos_integer() | all) ->
          [{term(), non_neg_integer(), non_neg_integer()}].
agg_open_receivers(_Agg, _MinSenders, _MinMessages, _Max) -> ?NOT_LOADED.

%% @doc The receiver of the busiest pairs row that endpoint Number (a
%% number agg_new_ends/2 gave) sent, or `undefined' when it sent none with
%% a row (or that receiver is gone): the owner of a port closed before it
%% was labelled.
-spec agg_partner(agg(), non_neg_integer()) -> term() | undefined.
agg_partner(_Agg, _Number) -> ?NOT_LOADED.

%% @doc The messages of a table's rows, added up (kept as rows change:
%% reads no row).
-spec agg_sum(agg(), agg_table()) -> non_neg_integer().
agg_sum(_Agg, _Table) -> ?NOT_LOADED.

%% @doc The keys of the pairs rows sent to a local registered name, each
%% as `{Key}'.
-spec agg_named(agg()) -> [{{term(), term()}}].
agg_named(_Agg) -> ?NOT_LOADED.

%% @doc The summary of the busiest keys that found no row since the last
%% take of it (snapshot_fold/1's last element's shape), emptied.
-spec agg_take_top(agg()) ->
          [{non_neg_integer(), [{endpoint(), endpoint(), pos_integer(), non_neg_integer()}]}].
agg_take_top(_Agg) -> ?NOT_LOADED.

%% @doc The endpoints of up to 20,000 of the rows whose last window is
%% Idle, from Cursor on (0 first, then what the last call gave), that roll
%% up to nothing yet, each once for that window: the ones to check for
%% having exited (agg_set_rollups/2); `done' when no row is left.  Reads
%% the rows with traffic in Idle (kept for the open window and the three
%% before), never every row.  `badarg' for a cursor that is no integer.
-spec agg_idle_ends(agg(), non_neg_integer(), non_neg_integer()) ->
          {[term()], non_neg_integer() | done}.
agg_idle_ends(_Agg, _Idle, _Cursor) -> ?NOT_LOADED.

%% @doc Its figures: bytes held, rows by table, endpoints, the open window.
-spec agg_info(agg()) -> #{atom() => non_neg_integer()}.
agg_info(_Agg) -> ?NOT_LOADED.

%% @doc What the library chose when it loaded: `allocator', the one the
%% tables use, and `jemalloc_error', why jemalloc is not it (empty binary
%% when it is); `jemalloc_build', `static' (built from Debian's source and
%% linked in) or `system' (the system's library through dlopen);
%% `jemalloc_allocated' and `jemalloc_resident', bytes of msgflow's arenas as
%% jemalloc counts them (`undefined' on enif_alloc); `fast_extra', whether
%% trace_send reads the receiver from the words of the options map (the
%% VM's layout was checked at load) or through enif_get_map_value;
%% `alias_owner', whether a send to a local alias is counted for the
%% alias's owner, read from the alias's words (checked at load against
%% aliases made for it), or to the alias as a receiver of its own;
%% `plain_refs', whether the round trip of a local call made with timeout
%% infinity (tagged with a plain monitor reference, replied to the
%% caller's pid) is timed, the reference read from its words (checked at
%% load against references made for it); `native_records', `none' before
%% OTP 29, `read' where a native record is told by its words (checked at
%% load against records made for it: tag `record'), `unread' where it
%% cannot be (a native record or a bitstring is then tagged `other');
%% `fast_resources', whether the callbacks read the session behind their
%% tracer state from the words of its resource term (checked right after
%% load against resources made for it: layout_probe/1) or through
%% enif_get_resource; `pinned', whether the library stays mapped once its
%% code is purged (so that the sessions it made outlive an upgrade from
%% another priv_dir; false only where the C library has no RTLD_NODELETE).
-spec lib_info() -> #{allocator := jemalloc | enif, jemalloc_error := binary(),
                      jemalloc_build := static | system, fast_extra := boolean(),
                      alias_owner := boolean(), fast_terms := boolean(),
                      plain_refs := boolean(), native_records := none | read | unread,
                      fast_resources := boolean(), pinned := boolean(),
                      jemalloc_allocated := non_neg_integer() | undefined,
                      jemalloc_resident := non_neg_integer() | undefined}.
lib_info() -> ?NOT_LOADED.

%% Checks the tracer's read of a resource's term (info/0's
%% `fast_resources') against this VM, with Others references that are no
%% NIF resource; true when the read is on.  Once per VM; from init/0.
-spec layout_probe([reference()]) -> boolean().
layout_probe(_Others) -> ?NOT_LOADED.
