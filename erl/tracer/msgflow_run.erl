%%% @doc A run's tracing: the NIF session that counts, the trace flags
%%% (msgflow_flags) and what they were set on.  The collector holds the
%%% `run()' value and is the only process to call these functions with
%%% it: the trace session's handle is in it, and only there, so that the
%%% session dies with the collector.
-module(msgflow_run).

-export([begin_run/1, trace/2, untrace/2, slice_off/1, slice_on/1, flags_off/1, close/1,
         session/1, mode/1, skipped/1, new_tracer/1, session_info/1, rotate/4, renew/2,
         clear_orphaned/0, legacy_table/0, legacy_session/0, own/2, own_sweep/1, nif_session/0,
         supported/1, reads_off/1]).
-export_type([run/0]).

%% the NIF session of a legacy run while it lasts (see clear_orphaned/0):
%% a table msgflow's supervisor owns (legacy_table/0), so that it outlives
%% the collector.  Not a persistent term: erasing one that holds a boxed
%% term (the session's resource) makes every process on the node scan its
%% heap for it (a literal area collection, a copy_literals request to each
%% of 100,000 processes), at every stop.
-define(RUNNING, msgflow_run_legacy).
%% the NIF session of the run now, for msgflow's own processes to join
%% it (nif_session/0): a named table of the collector's
-define(CURRENT, msgflow_run_current).
%% the NIF's table entries allowed per distinct pair (a pair counted on k
%% scheduler threads holds k entries, one per kind of message it has with
%% kinds on; see max_pairs in CONTRIBUTING.md, Memory)
-define(ENTRIES_PER_PAIR, 4).
%% the tracer's share of max_memory (half), in entries of about this many
%% bytes (an entry, its slot in the shard's index and its share of the
%% table of kind words per pair: 85 bytes measured at 958,698 entries of
%% one kind, BENCHMARKS.md)
-define(ENTRY_BYTES, 90).
%% windows between rotations of the NIF's tables (sooner when they are
%% half full)
-define(ROTATE_EVERY, 30).
-define(SKIPPED_EXAMPLES, 5).

-record(run, {
    session :: msgflow_tracer:session(),
    tracing :: msgflow_flags:tracing(),
    mode :: msgflow_flags:mode(),
    skipped = {0, []} :: msgflow_flags:skipped(),
    procs :: msgflow_opts:procs(),
    traced = [] :: [pid()],                 %% procs given as a list
    excluded = [] :: [pid() | port()]       %% untrace/2 while procs is a spec
}).
-opaque run() :: #run{}.

%% @doc A NIF session for the calling process and the flags set as the
%% validated options say (`procs', `max_pairs', `kinds', `max_kinds',
%% `call_sample', `call_timeout', `trace_mode').  A trace
%% session that cannot be made (say, the VM's limit on sessions) is an
%% error for the caller: `{error, {trace_failed, Reason}}',
%% `{error, {nif_not_loaded, Path}}', `{error, {unsupported, {otp_release,
%% Rel}, Allowed}}' (see supported/1), or an error of msgflow_flags.  A
%% VM whose term layout the tracer refused is logged as a warning.
-spec begin_run(msgflow_opts:run_opts()) -> {ok, run()} | {error, term()}.
begin_run(Opts) ->
    case supported(erlang:system_info(otp_release)) of
        ok ->
            case begin_run1(Opts) of
                {ok, _} = Ok ->
                    note_reads(msgflow_tracer:lib_info()),
                    Ok;
                E ->
                    E
            end;
        E ->
            E
    end.

%% What msgflow runs on, in one place: OTP 25 or newer (tested: 25, 27
%% and 29); before 25, `{error, {unsupported, {otp_release, Rel},
%% [<<"25 or newer">>]}}' (no trace session, no flags).
-spec supported(string()) -> ok | {error, {unsupported, {otp_release, string()}, [binary()]}}.
supported(Rel) ->
    case string:to_integer(Rel) of
        {N, _} when is_integer(N), N >= 25 -> ok;
        _ -> {error, {unsupported, {otp_release, Rel}, [<<"25 or newer">>]}}
    end.

%% A VM whose term layout the tracer's load checks refused (lib_info/0)
%% counts through the API, exactly, but with less to tell: said once per
%% run as a warning naming each read left off and what it costs.
note_reads(Lib) ->
    case reads_off(Lib) of
        [] ->
            ok;
        Off ->
            logger:warning("msgflow: the tracer's load checks refused this VM's term layout "
                           "for ~ts; it reads those terms through the API: counts stay exact, "
                           "but ~ts (msgflow:info() has these flags)",
                           [lists:join(", ", [atom_to_list(R) || {R, _} <- Off]),
                            lists:join("; ", [What || {_, What} <- Off])])
    end.

%% The reads lib_info/0 says are off, each with what that costs.
-spec reads_off(map()) -> [{atom(), string()}].
reads_off(Lib) ->
    Costs = [{fast_extra, "each send costs a map lookup more"},
             {fast_terms, "each send costs a few API calls more"},
             {fast_resources, "each send, and each time a traced process is scheduled in, "
                              "costs a call into the VM more"},
             {alias_owner, "a reply to an alias is a pair to the alias, not to its caller, "
                           "and the call is not timed"},
             {plain_refs, "calls made with timeout infinity are not timed"},
             {native_records, "a native record or a bitstring sent is tagged `other'"}],
    [C || {R, _} = C <- Costs, not read(R, maps:get(R, Lib, undefined))].

read(native_records, V) -> V =:= none orelse V =:= read;
read(_, V) -> V =:= true.

begin_run1(#{procs := Procs, max_pairs := Max, trace_mode := Want} = Opts) ->
    MaxKinds = case Opts of
                   #{kinds := false} -> 0;
                   _ -> maps:get(max_kinds, Opts, 8)
               end,
    case {msgflow_flags:mode(Want), msgflow_flags:resolve(Procs)} of
        {{ok, Mode}, {ok, Targets}} ->
            try msgflow_tracer:session_new(self(), max_entries(Max, Opts), MaxKinds) of
                Session ->
                    %% round trips of sampled calls: their requests are
                    %% told by their kind, so with kinds only
                    _ = MaxKinds > 0 andalso maps:get(call_sample, Opts, off) =/= off andalso
                        msgflow_tracer:calls_config(Session, maps:get(call_sample, Opts),
                                                    maps:get(call_timeout, Opts, 5000)),
                    %% sizes of sampled messages
                    _ = maps:get(size_sample, Opts, off) =/= off andalso
                        msgflow_tracer:sizes_config(Session, maps:get(size_sample, Opts),
                                                    msgflow_tracer:size_words()),
                    begin_tracing(Targets, Mode, Session, Procs)
            catch
                error:undef -> {error, {nif_not_loaded, code:which(msgflow_tracer)}};
                error:{not_loaded, _} = E -> {error, E}
            end;
        {{error, _} = E, _} ->
            E;
        {_, {error, _} = E} ->
            E
    end.

begin_tracing(Targets, Mode, Session, Procs) ->
    %% a send to msgflow's processes by name is msgflow's own too
    _ = [quietly(fun() -> msgflow_tracer:own(Session, add, N) end)
         || N <- msgflow_flags:own_names()],
    try msgflow_flags:begin_tracing(Mode, Session) of
        T -> set_flags(T, Targets, Mode, Session, Procs)
    catch
        error:Reason ->
            msgflow_tracer:session_stop(Session),
            {error, {trace_failed, Reason}}
    end.

set_flags(T, Targets, Mode, Session, Procs) ->
    %% legacy flags outlive a crash of the collector: say where they are
    %% for the collector that is started next, before the first is set (a
    %% crash while they are set on 100,000 processes leaves some)
    _ = Mode =:= legacy andalso quietly(fun() -> ets:insert(?RUNNING, {session, Session}) end),
    try msgflow_flags:on(T, Targets) of
        {ok, Skipped} ->
            publish(Session),
            {ok, #run{session = Session, tracing = T, mode = Mode, skipped = Skipped,
                      procs = Procs,
                      traced = case Targets of L when is_list(L) -> L; _ -> [] end}}
    catch
        error:Reason ->
            msgflow_tracer:session_stop(Session),
            msgflow_flags:off(T, Targets),
            msgflow_flags:end_tracing(T),
            _ = quietly(fun() -> ets:delete(?RUNNING, session) end),
            {error, {trace_failed, Reason}}
    end.

%% What the flags were set on: a spec (all, new, existing) or the pids.
targets(#run{procs = P}) when is_atom(P) -> P;
targets(#run{traced = Pids}) -> Pids.

%% @doc Flags on one more process or port (or registered name).
-spec trace(run(), term()) -> {ok | {error, term()}, run()}.
trace(Run = #run{tracing = T, traced = Traced, excluded = Ex}, Who) ->
    case msgflow_flags:resolve_one(Who) of
        {ok, P} ->
            case lists:member(P, msgflow_flags:own_pids()) of
                true ->
                    {{error, {msgflow_process, Who}}, Run};
                false ->
                    {ok, {N, Ps}} = msgflow_flags:on(T, [P]),
                    {N0, Ps0} = Run#run.skipped,
                    Reply = case N of
                                0 -> ok;
                                _ -> {error, {traced_by_another_tool, P}}
                            end,
                    {Reply, Run#run{traced = case Run#run.procs of
                                                 L when is_list(L) -> lists:usort([P | Traced]);
                                                 _ -> Traced
                                             end,
                                    excluded = lists:delete(P, Ex),
                                    skipped = {N0 + N, lists:sublist(Ps ++ Ps0,
                                                                     ?SKIPPED_EXAMPLES)}}}
            end;
        {error, _} = E ->
            {E, Run}
    end.

%% @doc Flags off one process or port; what it sent so far stays counted.
-spec untrace(run(), term()) -> {ok | {error, term()}, run()}.
untrace(Run = #run{traced = Traced, excluded = Ex}, Who) ->
    case msgflow_flags:resolve_one(Who) of
        {ok, P} ->
            msgflow_flags:off(Run#run.tracing, [P]),
            {ok, case Run#run.procs of
                     L when is_list(L) -> Run#run{traced = lists:delete(P, Traced)};
                     _ -> Run#run{excluded = lists:usort([P | Ex])}
                 end};
        {error, _} = E ->
            {E, Run}
    end.

%% @doc Sampling: the flags really off outside a traced slice (not
%% discarded by the tracer), so the traced processes pay nothing there.
-spec slice_off(run()) -> ok.
slice_off(Run) ->
    msgflow_flags:off(Run#run.tracing, targets(Run)),
    ok.

%% @doc The flags on again for a traced slice (but on those untraced).
-spec slice_on(run()) -> ok.
slice_on(Run = #run{session = S}) ->
    msgflow_flags:slice_on(Run#run.tracing, targets(Run), Run#run.excluded),
    %% msgflow's own processes of the run (httpd's handlers, workers) get
    %% their procs flag back, which slice_off took
    Own = try msgflow_tracer:own(S, list, []) catch error:_ -> [] end,
    msgflow_flags:own(Run#run.tracing, [P || P <- Own, is_pid(P)]),
    ok.

%% @doc The flags off (a trace session destroyed), then a barrier: every
%% send traced before is in the NIF's tables when it returns.
-spec flags_off(run()) -> ok.
flags_off(Run = #run{tracing = T, session = S}) ->
    case Run#run.mode of
        legacy ->
            msgflow_flags:off(T, targets(Run)),
            %% msgflow's own processes keep the procs flag (own/2)
            Own = try msgflow_tracer:own(S, list, []) catch error:_ -> [] end,
            msgflow_flags:off(T, [P || P <- Own, is_pid(P)] ++ msgflow_flags:own_pids());
        session ->
            ok
    end,
    msgflow_flags:end_tracing(T),
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} -> ok end.

%% @doc The NIF session stopped (after flags_off/1 and the last snapshot):
%% its last session_info/1.
-spec close(run()) -> map().
close(#run{session = Session}) ->
    Info = try msgflow_tracer:session_info(Session) catch error:_ -> #{} end,
    _ = quietly(fun() -> msgflow_tracer:session_stop(Session) end),
    _ = quietly(fun() -> ets:delete(?RUNNING, session) end),
    _ = quietly(fun() -> ets:delete(?CURRENT, nif) end),
    Info.

%% The run's NIF session published for nif_session/0, in a table the
%% collector (the caller) owns: it goes with the collector.
publish(Session) ->
    _ = ets:info(?CURRENT, id) =:= undefined andalso
        ets:new(?CURRENT, [named_table, protected, {read_concurrency, true}]),
    true = ets:insert(?CURRENT, {nif, Session}),
    ok.

%% @doc The NIF session of the run now, `undefined' when none: for a
%% process of msgflow's to make itself one of its own
%% (msgflow_flags:untrace_self/0).  Any process.
-spec nif_session() -> msgflow_tracer:session() | undefined.
nif_session() ->
    session_in(?CURRENT, nif).

%% The session under Key in named table Tab, `undefined' when there is
%% none or no such table.
session_in(Tab, Key) ->
    try ets:lookup(Tab, Key) of
        [{_, S}] -> S;
        [] -> undefined
    catch
        error:badarg -> undefined
    end.

%% @doc Pids are msgflow's own from now on (msgflow_flags:own/2): none of
%% their messages are counted.
-spec own(run(), [pid()]) -> ok.
own(#run{tracing = T}, Pids) ->
    msgflow_flags:own(T, Pids).

%% @doc Forgets the own processes that exited (the NIF's set holds 512 at
%% most; a view worker or a web connection's handler is one while it
%% lives).  Each window.
-spec own_sweep(run()) -> ok.
own_sweep(#run{session = S}) ->
    %% the NIF may be gone for a moment (its module deleted and purged)
    try
        [msgflow_tracer:own(S, remove, P)
         || P <- msgflow_tracer:own(S, list, []), is_pid(P), not is_process_alive(P)]
    catch
        error:_ -> ok
    end,
    ok.

%% @doc The NIF session.
-spec session(run()) -> msgflow_tracer:session().
session(#run{session = S}) -> S.

%% @doc `legacy' (trace flags of erlang:trace/3) or `session' (OTP 27's
%% trace sessions).
-spec mode(run()) -> msgflow_flags:mode().
mode(#run{mode = M}) -> M.

%% @doc Processes and ports another tool traced, and a few of them.
-spec skipped(run()) -> msgflow_flags:skipped().
skipped(#run{skipped = S}) -> S.

%% @doc Who traces new processes now (legacy mode, procs all or new: dbg
%% may have taken them over), else `msgflow'.
-spec new_tracer(run()) -> msgflow | term().
new_tracer(#run{procs = P, tracing = T}) when P =:= all; P =:= new -> msgflow_flags:new_tracer(T);
new_tracer(_) -> msgflow.

%% @doc The NIF session's figures (msgflow_tracer:session_info/1), `#{}'
%% when it cannot be read.
-spec session_info(run()) -> map().
session_info(#run{session = S}) ->
    try msgflow_tracer:session_info(S) catch error:_ -> #{} end.

%% @doc The NIF's tables start a new generation every ?ROTATE_EVERY
%% windows (Closed is the windows closed), or as soon as they hold half
%% the entries MaxPairs allows: pairs that had no messages since then
%% leave them (msgflow_tracer:session_rotate/1).  Only while Room, the
%% bytes max_memory leaves the tracer's tables (infinity without a bound;
%% msgflow_store:tracer_room/1), holds them twice: the old generation is
%% freed by the next snapshot, and until then the live pairs' new entries
%% come on top of it.  Past that the tables keep their entries (new pairs
%% go to overflow, as the store's do past the bound).
-spec rotate(run(), pos_integer(), non_neg_integer(), non_neg_integer() | infinity) -> ok.
rotate(Run, MaxPairs, Closed, Room) ->
    {Due, Fits} = case session_info(Run) of
                      #{entries := E, max_pairs := Cap, memory := Bytes} ->
                          {E * 2 >= min(Cap, MaxPairs * ?ENTRIES_PER_PAIR), Room =:= infinity orelse 2 * Bytes =< Room};
                      _ ->
                          {false, true}
                  end,
    _ = (Due orelse Closed rem ?ROTATE_EVERY =:= 0) andalso Fits
        andalso quietly(fun() -> msgflow_tracer:session_rotate(Run#run.session) end),
    ok.

%% @doc The NIF's tables emptied of the pairs they hold, for a store
%% emptied (a reset): every thread starts a new generation (the next
%% snapshot takes the old ones' last counts and frees them), and the cap
%% on entries is what the run began with again (the store lowers it once
%% max_memory is reached: msgflow_store).  The collector only.
-spec renew(run(), map()) -> ok.
renew(#run{session = S}, #{max_pairs := MaxPairs} = Opts) ->
    _ = quietly(fun() -> msgflow_tracer:session_limit(S, max_entries(MaxPairs, Opts)) end),
    _ = quietly(fun() -> msgflow_tracer:session_rotate(S) end),
    ok.

%% The tracer's entries, at most: four a pair (kinds and threads), and
%% within half of max_memory.
max_entries(MaxPairs, Opts) ->
    case maps:get(max_memory, Opts, infinity) of
        infinity -> MaxPairs * ?ENTRIES_PER_PAIR;
        Bytes -> max(1, min(MaxPairs * ?ENTRIES_PER_PAIR, Bytes div (2 * ?ENTRY_BYTES)))
    end.

%% @doc For a collector that starts: a collector that died while running
%% in legacy mode left processes flagged for its session (the session is
%% kept in the supervisor's table, ?RUNNING, while such a run lasts: not
%% in the application environment, whose controller a collector stopping
%% with the application would wait on; a trace session dies with the
%% collector that held it).  Asking the VM for their tracer makes it ask
%% the session's trace_status, which answers `remove' once the session
%% is no longer active: that clears them.  The session's monitor on the
%% dead collector marks it too, but a dying process leaves the process
%% table before its monitors fire, and the supervisor may restart the
%% collector in between: so the session is stopped here first.
-spec clear_orphaned() -> ok.
clear_orphaned() ->
    case legacy_session() of
        undefined ->
            ok;
        Session ->
            _ = quietly(fun() -> msgflow_tracer:session_stop(Session) end),
            _ = [erlang:trace_info(P, tracer) || P <- [new | processes() ++ erlang:ports()]],
            _ = quietly(fun() -> ets:delete(?RUNNING, session) end),
            ok
    end.

%% @doc Makes the table that holds a legacy run's NIF session while it
%% lasts (clear_orphaned/0), owned by the caller: msgflow's supervisor, in
%% its init, so that the table outlives a collector that dies.  Public:
%% the collector writes it (nothing else does).  It goes with the
%% supervisor: when the supervisor gives up (more than 10 collector
%% restarts in 10 s) and the application is started again, the flags a
%% dead collector left answer the session's `remove' alone, the next time
%% the VM asks (trace_status), as they do without the table (a collector
%% started by some other process).
-spec legacy_table() -> ok.
legacy_table() ->
    _ = ets:new(?RUNNING, [named_table, public, set]),
    ok.

%% @doc The NIF session of the legacy run under way (kept in the table
%% legacy_table/0 made), or `undefined'.
-spec legacy_session() -> msgflow_tracer:session() | undefined.
legacy_session() ->
    session_in(?RUNNING, session).

%% F(), or `error' when it raises (the NIF's module deleted, a session gone).
quietly(F) ->
    try F() catch _:_ -> error end.
