%%% @doc The flow keeper: a gen_server registered as
%%% `msgflow_flow_keeper', started by the first follow (msgflow_flow) and
%%% linked to nothing, so that it outlives the shell command that started
%%% it and holds the last flow and the summaries.  It owns a flow session
%%% (msgflow_tracer:flow_session_new/2) and makes it the node's system
%%% tracer, `{msgflow_tracer, FlowSession}', while a flow is followed; it
%%% puts `false' back when none is, and never replaces a system tracer
%%% another tool set.  Every message that carries a trace token with
%%% `send' set is counted in the NIF by (label, sender, receiver) on the
%%% sender's scheduler thread; the keeper takes snapshots of those counts
%%% and keeps, per label:
%%% <ul>
%%% <li>for a follow/2 flow (one request from the shell): the pairs by
%%%     process, and the events with their serials, which the NIF keeps for
%%%     that label only, up to `max_events';</li>
%%% <li>for a follow_calls/2 entry (every request at a function): the pairs
%%%     by endpoint label (registered name, initial call), since each
%%%     request has processes of its own, so memory grows with the labels,
%%%     never with requests; and the deepest causal chain, from the events
%%%     of up to `max_events' sends per snapshot interval (1 s).</li>
%%% </ul>
%%% Its messages are written here only: call/1 is the way in.
%%%
%%% Longer than ~400 lines: one gen_server whose state is two kinds of
%%% watches (follows and entries) and the system tracer they share.
-module(msgflow_flow_keeper).
-behaviour(gen_server).

-export([call/1, whereis/0]).
-export([start/0, init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

%% seq_trace:get_system_tracer/0 and erlang:trace_info/2 return
%% `{Module, State}' for a tracer module; OTP 25's specs do not say so.
-dialyzer({no_match, [system_tracer/1, release_tracer/1, terminate/2, stop_entry/1]}).

-define(KEEPER, ?MODULE).
-define(TICK_MS, 1000).          %% snapshots while an entry is followed
-define(MAX_PAIRS, 200000).      %% the flow session's cap on table entries
-define(ROTATE_TICKS, 10).       %% a new generation of its tables every 10 ticks,
                                 %% and whenever they are half full

-record(entry, {
    mfa :: mfa(),
    label :: term(),
    res :: msgflow_tracer:entry() | none,      %% none: tracking another node's entry
    trace :: {session, term()} | legacy | none,
    sample :: pos_integer(),
    max_events :: non_neg_integer(),
    timer :: reference() | undefined,
    pairs = #{} :: #{{binary(), binary()} => pos_integer()},
    messages = 0 :: non_neg_integer(),
    known = #{} :: #{{term(), non_neg_integer()} => pos_integer()},
    depth = 0 :: non_neg_integer(),
    depth_exact = true :: boolean(),
    overflow = 0 :: non_neg_integer(),
    running = true :: boolean(),
    final :: msgflow_flow_view:summary() | undefined
}).

-record(st, {
    fs :: msgflow_tracer:session(),
    %% follow/2 labels: their pairs by process and endpoint labels
    follows = #{} :: #{term() => #{pairs := #{{term(), term()} => pos_integer()},
                                   labels := #{term() => binary()}}},
    entries = [] :: [#entry{}],
    %% the monitor of each follow/2 caller: a caller killed mid-flow ends
    %% its watch (and the system tracer, if it was the last)
    callers = #{} :: #{reference() => term()},
    last :: msgflow_flow_view:flow() | undefined,
    next = 1 :: pos_integer(),
    tick :: reference() | undefined,
    ticks = 0 :: non_neg_integer()
}).

%% The keeper is called with no trace token, so that nothing it does
%% belongs to a flow.
%% @doc The keeper's answer to Request, the keeper started first when it
%% is not running; `{error, {flow_keeper, Reason}}' when it cannot be.
-spec call(term()) -> term().
call(Request) ->
    case ensure() of
        ok ->
            Token = seq_trace:set_token([]),
            try gen_server:call(?KEEPER, Request, infinity)
            after _ = seq_trace:set_token(Token)
            end;
        {error, _} = E ->
            E
    end.

ensure() ->
    case erlang:whereis(?KEEPER) of
        undefined ->
            case start() of
                {ok, Pid} ->
                    %% msgflow's own: not counted when msgflow:start/1 runs
                    _ = msgflow_collector:untrace(Pid),
                    ok;
                {error, {already_started, _}} -> ok;
                {error, R} -> {error, {flow_keeper, R}}
            end;
        _ ->
            ok
    end.

%% @private Starts the keeper, linked to nothing (see the module doc).
-spec start() -> {ok, pid()} | {error, term()}.
start() ->
    gen_server:start({local, ?KEEPER}, ?MODULE, [], []).

%% @doc The keeper's pid, or `undefined' (msgflow never traces it).
-spec whereis() -> pid() | undefined.
whereis() ->
    erlang:whereis(?KEEPER).

%%% The server

%% @private
-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    {ok, #st{fs = msgflow_tracer:flow_session_new(self(), ?MAX_PAIRS)}}.

%% @private
-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call({watch, Max}, {Caller, _}, St = #st{next = N}) ->
    %% the node in it: a cluster's nodes count it under the same label
    Label = {msgflow_follow, node(), N},
    case watch(Label, Max, St) of
        {ok, St1} ->
            Ref = monitor(process, Caller),
            {reply, {ok, Label}, St1#st{next = N + 1, callers = (St1#st.callers)#{Ref => Label}}};
        {error, _} = E ->
            {reply, E, St}
    end;
handle_call({watch_label, Label, Max}, _From, St) ->
    case watch(Label, Max, St) of
        {ok, St1} -> {reply, ok, St1};
        {error, _} = E -> {reply, E, St}
    end;
handle_call({part_finish, Label}, _From, St0) ->
    St1 = take(St0),
    case St1#st.follows of
        #{Label := #{pairs := P, labels := Ls}} ->
            Events = relative(take_events(St1#st.fs, Label)),
            St = release_tracer(St1#st{follows = maps:remove(Label, St1#st.follows)}),
            {reply, #{node => node(), pairs => P, labels => Ls, events => Events}, St};
        _ ->
            {reply, {error, {unknown_flow, Label}}, St1}
    end;
handle_call({messages, Label}, _From, St0) ->
    St = take(St0),
    case St#st.follows of
        #{Label := #{pairs := Pairs}} -> {reply, lists:sum(maps:values(Pairs)), St};
        _ -> {reply, 0, St}
    end;
handle_call({finish, Label, Quiet, Parts}, _From, St0) ->
    St1 = take(St0),
    case St1#st.follows of
        #{Label := F0} ->
            F = msgflow_flow_view:merge_parts(F0, Parts),
            Events = relative(take_events(St1#st.fs, Label))
                ++ lists:append([Es || #{events := Es} <- Parts]),
            Flow = (msgflow_flow_view:flow(Label, F, Events))#{quiet => Quiet,
                                             nodes => [node() | [PN || #{node := PN} <- Parts]]},
            St2 = St1#st{follows = maps:remove(Label, St1#st.follows), last = Flow},
            St = release_tracer(forget_caller(Label, St2)),
            {reply, Flow, St};
        _ ->
            %% a keeper restarted meanwhile: the flow's counts are gone
            {reply, {error, {unknown_flow, Label}}, St1}
    end;
handle_call({follow_calls, MFA, Opts}, _From, St) ->
    case lists:keymember(MFA, #entry.mfa, [E || E <- St#st.entries, E#entry.running]) of
        true -> {reply, {error, {already_following, MFA}}, St};
        false -> start_entry(MFA, Opts, St)
    end;
handle_call({track, MFA, Max}, _From, St) ->
    case system_tracer(St) of
        {error, _} = E ->
            {reply, E, St};
        ok ->
            Label = entry_label(MFA),
            ok = msgflow_tracer:flow_watch(St#st.fs, Label, Max),
            E = #entry{mfa = MFA, label = Label, res = none, trace = none, sample = 1,
                       max_events = Max},
            Others = [X || X <- St#st.entries, X#entry.mfa =/= MFA],
            {reply, ok, schedule(St#st{entries = Others ++ [E]})}
    end;
handle_call(unfollow, _From, St0) ->
    St = take(St0),
    {reply, ok, release_tracer(St#st{entries = [stop_entry(E) || E <- St#st.entries]})};
handle_call(flows, _From, St0) ->
    St = take(St0),
    {reply, [summary(E) || E <- St#st.entries], St};
handle_call(last, _From, St) ->
    {reply, St#st.last, St};
handle_call(Other, _From, St) ->
    {reply, {error, {badarg, Other}}, St}.

%% @private
-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

%% @private
-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(tick, St0 = #st{ticks = T, fs = FS}) ->
    St = take(St0#st{tick = undefined, ticks = T + 1}),
    %% pairs of requests long done leave the NIF's tables
    _ = T rem ?ROTATE_TICKS =:= ?ROTATE_TICKS - 1 andalso rotate(FS),
    {noreply, schedule(St)};
handle_info({expire, MFA}, St0) ->
    St = take(St0),
    Entries = [case E of
                   #entry{mfa = MFA, running = true} -> stop_entry(E);
                   _ -> E
               end || E <- St#st.entries],
    {noreply, release_tracer(St#st{entries = Entries})};
%% A follow/2 caller died before its flow finished (killed, say): the
%% flow is dropped and its watch ends.
handle_info({'DOWN', Ref, process, _, _}, St0 = #st{callers = Cs}) when is_map_key(Ref, Cs) ->
    Label = maps:get(Ref, Cs),
    St = take(St0#st{callers = maps:remove(Ref, Cs)}),
    _ = take_events(St#st.fs, Label),
    {noreply, release_tracer(St#st{follows = maps:remove(Label, St#st.follows)})};
handle_info(_Msg, St) ->
    {noreply, St}.

%% The caller of the follow of Label no longer watched.
forget_caller(Label, St = #st{callers = Cs}) ->
    Refs = [R || {R, L} <- maps:to_list(Cs), L =:= Label],
    _ = [demonitor(R, [flush]) || R <- Refs],
    St#st{callers = maps:without(Refs, Cs)}.

%% @private
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, St) ->
    _ = [stop_entry(E) || E <- St#st.entries],
    case current_system_tracer() of
        {msgflow_tracer, FS} when FS =:= St#st.fs -> _ = seq_trace:set_system_tracer(false);
        _ -> ok
    end,
    ok.

%% The system tracer is ours, or made ours when no one has one.  One that
%% a dead keeper left (a flow session whose keeper died discards
%% everything) is replaced.
system_tracer(#st{fs = FS}) ->
    case current_system_tracer() of
        {msgflow_tracer, FS} ->
            ok;
        Current ->
            Stale = case Current of
                        {msgflow_tracer, Other} ->
                            try msgflow_tracer:session_info(Other) of
                                #{state := active} -> false;
                                _ -> true
                            catch error:badarg -> true
                            end;
                        _ ->
                            false
                    end,
            case Current =:= false orelse Stale of
                true -> _ = seq_trace:set_system_tracer({msgflow_tracer, FS}), ok;
                false -> {error, {system_tracer_busy, Current}}
            end
    end.

%% Starts keeping Label's flow on this node.
watch(Label, Max, St = #st{fs = FS}) ->
    case system_tracer(St) of
        {error, _} = E ->
            E;
        ok ->
            case msgflow_tracer:flow_watch(FS, Label, Max) of
                ok ->
                    F = #{pairs => #{}, labels => #{}},
                    {ok, St#st{follows = (St#st.follows)#{Label => F}}};
                full ->
                    {error, too_many_flows}
            end
    end.

%% Every event kept for Label, in the order they were counted, taken in
%% chunks (each NIF call short); the watch ends.
take_events(FS, Label) ->
    take_events(FS, Label, []).

take_events(FS, Label, Acc) ->
    case msgflow_tracer:flow_take(FS, Label) of
        {Newest, more} -> take_events(FS, Label, [Newest | Acc]);
        {Newest, done} -> lists:reverse(lists:append(lists:reverse([Newest | Acc])))
    end.

%% Event times from this node's first event of the flow.
relative([]) ->
    [];
relative(Events) ->
    T0 = lists:min([T || {_, _, _, _, T} <- Events]),
    [{P, C, F, To, T - T0} || {P, C, F, To, T} <- Events].

%% false again once nothing is followed, if it is still ours.
release_tracer(St = #st{fs = FS, follows = Fs, entries = Es}) ->
    case map_size(Fs) =:= 0 andalso not lists:keymember(true, #entry.running, Es) of
        true ->
            case current_system_tracer() of
                {msgflow_tracer, FS} -> _ = seq_trace:set_system_tracer(false);
                _ -> ok
            end;
        false ->
            ok
    end,
    St.

start_entry({M, _, _} = MFA, #{sample := Sample, for := For, max_events := Max}, St) ->
    _ = code:ensure_loaded(M),
    case system_tracer(St) of
        {error, _} = E ->
            {reply, E, St};
        ok ->
            Label = entry_label(MFA),
            Res = msgflow_tracer:entry_new(Sample),
            %% serial {0, 0}: a request's first message starts a chain of
            %% its own, not one after the caller's last followed request
            MS = [{'_', [], [{set_seq_token, label, Label}, {set_seq_token, serial, {{0, 0}}},
                             {set_seq_token, send, true}]}],
            case set_pattern(MFA, MS, Res) of
                {ok, Trace} ->
                    ok = msgflow_tracer:flow_watch(St#st.fs, Label, Max),
                    Timer = erlang:send_after(For, self(), {expire, MFA}),
                    E = #entry{mfa = MFA, label = Label, res = Res, trace = Trace,
                               sample = Sample, max_events = Max, timer = Timer},
                    Others = [X || X <- St#st.entries, X#entry.mfa =/= MFA],
                    {reply, ok, schedule(St#st{entries = Others ++ [E]})};
                {error, _} = Err ->
                    msgflow_tracer:entry_stop(Res),
                    {reply, Err, release_tracer(St)}
            end
    end.

%% An entry's label: an atom.  A label a match spec sets must be an
%% immediate term: ERTS (25-27) stores the label's term in the token as it
%% is, and a tuple would point into the match spec's memory, not the
%% process's heap (a node crashed on it).
entry_label({M, F, A}) ->
    list_to_atom(lists:flatten(io_lib:format("msgflow_calls ~s:~s/~b", [M, F, A]))).

%% A meta pattern with the entry as tracer state: in a trace session of its
%% own on OTP 27+, else the node's (refused when another tool has a meta
%% pattern on the function, which it would replace).
set_pattern(MFA, MS, Res) ->
    case msgflow_flags:mode(auto) of
        {ok, session} ->
            Trace = trace,
            S = Trace:session_create(msgflow_calls, {msgflow_tracer, Res}, []),
            case Trace:function(S, MFA, MS, [meta]) of
                0 -> _ = Trace:session_destroy(S), {error, {no_such_function, MFA}};
                _ -> {ok, {session, S}}
            end;
        {ok, legacy} ->
            case meta_tracer(MFA) of
                {meta, Other} when Other =/= false, Other =/= undefined ->
                    {error, {meta_traced_by_another_tool, MFA}};
                _ ->
                    case erlang:trace_pattern(MFA, MS, [{meta, msgflow_tracer, Res}]) of
                        0 -> {error, {no_such_function, MFA}};
                        _ -> {ok, legacy}
                    end
            end
    end.

stop_entry(E = #entry{running = false}) ->
    E;
stop_entry(E = #entry{mfa = MFA, res = Res, trace = Trace, timer = Timer}) ->
    _ = Res =/= none andalso msgflow_tracer:entry_stop(Res) =:= ok,
    case Trace of
        none ->
            ok;
        {session, S} ->
            Mod = trace,
            _ = Mod:session_destroy(S);
        legacy ->
            case meta_tracer(MFA) of
                {meta, {msgflow_tracer, Res}} -> _ = erlang:trace_pattern(MFA, false, [meta]);
                _ -> ok
            end
    end,
    _ = is_reference(Timer) andalso erlang:cancel_timer(Timer),
    E1 = E#entry{running = false, timer = undefined},
    E1#entry{final = summary(E1)}.

schedule(St = #st{tick = undefined, entries = Es}) ->
    case lists:keymember(true, #entry.running, Es) of
        true -> St#st{tick = erlang:send_after(?TICK_MS, self(), tick)};
        false -> St
    end;
schedule(St) ->
    St.

%% One snapshot of the flow session into the follows and the entries;
%% each running entry's events of the interval deepen its depth.  While
%% the tracer module is being loaded, the turn is skipped; once it was
%% deleted and purged, the session cannot be read by the code loaded next
%% (badarg): what it held is gone with the old code, the flows it counted
%% keep what was taken, and a new session counts from here on.
take(St = #st{fs = FS}) ->
    try msgflow_tracer:snapshot(FS) of
        Snap -> take(Snap, St)
    catch
        error:undef -> St;
        error:{not_loaded, _} -> St;
        error:badarg -> St#st{fs = msgflow_tracer:flow_session_new(self(), ?MAX_PAIRS)}
    end.

take({Pairs, _Dead, Replies, Over, _OverDead}, St = #st{fs = FS, follows = Fs0, entries = Es0}) ->
    %% the pairs of requests long done leave the tables before they fill
    #{entries := InTables} = msgflow_tracer:session_info(FS),
    _ = InTables >= ?MAX_PAIRS div 2 andalso rotate(FS),
    Deltas = Pairs ++ Replies,
    Fs = lists:foldl(fun add_follow/2, Fs0, Deltas),
    ByLabel = lists:foldl(fun({{L, S}, R, N}, Acc) ->
                                  maps:update_with(L, fun(Xs) -> [{S, R, N} | Xs] end,
                                                   [{S, R, N}], Acc);
                             (_, Acc) -> Acc
                          end, #{}, Deltas),
    Names = #{},
    {Es, _} = lists:mapfoldl(fun(E, Ns) -> add_entry(E, maps:get(E#entry.label, ByLabel, []),
                                                     FS, Over, Ns) end,
                             Names, Es0),
    St#st{follows = Fs, entries = Es}.

%% The node's system tracer and a function's meta tracer.  OTP's specs
%% leave out what a tracer module gives (`{Module, State}', which the VM
%% returns; see the -dialyzer attribute).
current_system_tracer() ->
    seq_trace:get_system_tracer().

meta_tracer(MFA) ->
    erlang:trace_info(MFA, meta).

rotate(FS) ->
    ok = msgflow_tracer:session_rotate(FS),
    true.

add_follow({{Label, S}, R, N}, Fs) ->
    case Fs of
        #{Label := F = #{pairs := P, labels := Ls}} ->
            Fs#{Label := F#{pairs := maps:update_with({S, R}, fun(C) -> C + N end, N, P),
                            labels := msgflow_flow_view:name(R, msgflow_flow_view:name(S, Ls))}};
        _ ->
            Fs
    end;
add_follow(_, Fs) ->
    Fs.

add_entry(E = #entry{running = false}, _Deltas, _FS, _Over, Ns) ->
    {E, Ns};
add_entry(E = #entry{label = Label, pairs = P0, messages = M0, known = K0, depth = D0,
                     max_events = Max, overflow = Over0}, Deltas, FS, Over, Ns0) ->
    {P, M, Ns} = lists:foldl(fun({S, R, N}, {P1, M1, Ns1}) ->
                                     Ns2 = msgflow_flow_view:group_name(R, msgflow_flow_view:group_name(S, Ns1)),
                                     Key = {maps:get(S, Ns2), maps:get(R, Ns2)},
                                     {maps:update_with(Key, fun(C) -> C + N end, N, P1),
                                      M1 + N, Ns2}
                             end, {P0, M0, Ns0}, Deltas),
    Events = take_events(FS, Label),
    ok = msgflow_tracer:flow_watch(FS, Label, Max),
    {Depths, Known} = msgflow_flow_view:depths(Events, K0),
    D = lists:max([D0 | [D1 || {_, D1} <- Depths]]),
    %% the chains of this interval's events only link to the last one's;
    %% a full watch let some events of the interval go unseen
    {E#entry{pairs = P, messages = M, known = Known, depth = D, overflow = Over0 + Over,
             depth_exact = E#entry.depth_exact andalso length(Events) < Max}, Ns}.

%% An entry's summary: its final one once stopped.
summary(#entry{final = Final}) when Final =/= undefined ->
    Final;
summary(#entry{mfa = MFA, res = Res, pairs = P, messages = M, depth = D, depth_exact = X,
               sample = Sample, running = Running, overflow = Over}) ->
    %% a node that only counts the sends of another node's entry has no calls
    {Calls, Requests} = case Res of
                            none -> {0, 0};
                            _ -> msgflow_tracer:entry_info(Res)
                        end,
    #{entry => MFA, requests => Requests, calls => Calls, messages => M,
      per_request => case Requests of 0 -> 0.0; _ -> M / Requests end,
      pairs => lists:sort(fun({_, _, A}, {_, _, B}) -> A >= B end,
                          [{S, R, N} || {{S, R}, N} <- maps:to_list(P)]),
      depth => D, depth_exact => X, sample => Sample, running => Running, overflow => Over}.
