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
-module(msgflow_flow_keeper).
-behaviour(gen_server).

-export([call/1, query/2, whereis/0]).
-export([start_link/0, init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

%% seq_trace:get_system_tracer/0 and erlang:trace_info/2 return
%% `{Module, State}' for a tracer module; OTP 25's specs do not say so.
-dialyzer({no_match, [system_tracer/1, release_tracer/1, terminate/2, init/1]}).

-define(KEEPER, ?MODULE).
-define(TICK_MS, 1000).          %% snapshots while an entry is followed
-define(MAX_PAIRS, 200000).      %% the flow session's cap on table entries
-define(ROTATE_TICKS, 10).       %% a new generation of its tables every 10 ticks,
                                 %% and whenever they are half full

-record(st, {
    fs :: msgflow_tracer:session(),
    %% follow/2 labels: their pairs by process and endpoint labels
    follows = #{} :: #{term() => #{pairs := #{{term(), term()} => pos_integer()},
                                   labels := #{term() => binary()}}},
    entries = [] :: [msgflow_flow_entry:entry()],
    %% the monitor of each follow/2 caller: a caller killed mid-flow ends
    %% its watch (and the system tracer, if it was the last)
    callers = #{} :: #{reference() => term()},
    last :: msgflow_flow_value:flow() | undefined,
    next = 1 :: pos_integer(),
    tick :: reference() | undefined,
    ticks = 0 :: non_neg_integer()
}).

%% The keeper is called with no trace token, so that nothing it does
%% belongs to a flow.
%% @doc The keeper's answer to Request, the keeper started first when it
%% is not running; `{error, {flow_keeper, Reason}}' when it cannot be,
%% `{error, {timeout, msgflow_flow_keeper}}' when it does not answer within
%% 30 s.
-spec call(term()) -> term().
call(Request) ->
    case ensure() of
        ok -> without_token(fun() -> msgflow_call:call(?KEEPER, Request,
                                                       {error, {flow_keeper, noproc}}) end);
        {error, _} = E -> E
    end.

%% @doc The keeper's answer to Request when it is running, else IfGone
%% (also when it ends before it answers); never starts it.
-spec query(term(), term()) -> term().
query(Request, IfGone) ->
    without_token(fun() -> msgflow_call:call(?KEEPER, Request, IfGone) end).

without_token(F) ->
    Token = seq_trace:set_token([]),
    try F()
    after _ = seq_trace:set_token(Token)
    end.

ensure() ->
    case erlang:whereis(?KEEPER) of
        undefined ->
            Spec = #{id => ?KEEPER, start => {?MODULE, start_link, []}, restart => transient,
                     shutdown => 5000, type => worker},
            case application:ensure_all_started(msgflow) of
                {ok, _} ->
                    case supervisor:start_child(msgflow_sup, Spec) of
                        {ok, _} -> ok;
                        {error, {already_started, _}} -> ok;
                        {error, already_present} ->
                            %% (its spec stays once it stopped)
                            case supervisor:restart_child(msgflow_sup, ?KEEPER) of
                                {ok, _} -> ok;
                                {error, running} -> ok;
                                {error, R} -> {error, {flow_keeper, R}}
                            end;
                        {error, R} -> {error, {flow_keeper, R}}
                    end;
                {error, R} -> {error, {flow_keeper, R}}
            end;
        _ ->
            ok
    end.

%% @private Starts the keeper under msgflow_sup (a transient child: see
%% msgflow_sup).
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?KEEPER}, ?MODULE, [], []).

%% @doc The keeper's pid, or `undefined' (msgflow never traces it).
-spec whereis() -> pid() | undefined.
whereis() ->
    erlang:whereis(?KEEPER).

%%% The server

%% @private
-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    %% msgflow's own: not counted when msgflow:start/1 runs
    _ = msgflow_collector:untrace(self()),
    %% what a keeper killed before left: its legacy meta patterns, and the
    %% system tracer it had made its flow session (another tool's stays)
    ok = msgflow_flow_entry:clear_left(),
    _ = case current_system_tracer() of
            {msgflow_tracer, _} -> seq_trace:set_system_tracer(false);
            _ -> ok
        end,
    {ok, #st{fs = msgflow_tracer:flow_session_new(self(), ?MAX_PAIRS)}}.

%% @private
-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
%% Over 40 lines: one short clause per request (the longer ones call a
%% function of their own below).
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
handle_call({part_finish, Label}, _From, St) ->
    part_finish(Label, take(St));
handle_call({messages, Label}, _From, St0) ->
    St = take(St0),
    case St#st.follows of
        #{Label := #{pairs := Pairs}} -> {reply, lists:sum(maps:values(Pairs)), St};
        _ -> {reply, 0, St}
    end;
handle_call({finish, Label, Quiet, Parts}, _From, St) ->
    finish(Label, Quiet, Parts, take(St));
handle_call({follow_calls, MFA, Opts}, _From, St) ->
    case [E || E <- St#st.entries, msgflow_flow_entry:running(E),
               msgflow_flow_entry:mfa(E) =:= MFA] of
        [_ | _] -> {reply, {error, {already_following, MFA}}, St};
        [] -> start_entry(MFA, Opts, St)
    end;
handle_call({track, MFA, Max}, _From, St) ->
    track(MFA, Max, St);
handle_call(unfollow, _From, St0) ->
    St = take(St0),
    {reply, ok, release_tracer(St#st{entries = [msgflow_flow_entry:stop(E) || E <- St#st.entries]})};
handle_call(flows, _From, St0) ->
    St = take(St0),
    {reply, [msgflow_flow_entry:summary(E) || E <- St#st.entries], St};
handle_call(last, _From, St) ->
    {reply, St#st.last, St};
handle_call(Other, _From, St) ->
    {reply, {error, {unknown_call, Other}}, St}.

%% A node of a cluster hands over what it counted of Label's flow; its
%% watch ends.
part_finish(Label, St1) ->
    case St1#st.follows of
        #{Label := #{pairs := P, labels := Ls}} ->
            Events = relative(take_events(St1#st.fs, Label)),
            St = release_tracer(St1#st{follows = maps:remove(Label, St1#st.follows)}),
            {reply, #{node => node(), pairs => P, labels => Ls, events => Events}, St};
        _ ->
            {reply, {error, {unknown_flow, Label}}, St1}
    end.

%% follow/2's end: this node's part of Label's flow merged with the other
%% nodes' Parts into the flow view, kept as the last one.
finish(Label, Quiet, Parts, St1) ->
    case St1#st.follows of
        #{Label := F0} ->
            F = msgflow_flow_value:merge_parts(F0, Parts),
            Events = relative(take_events(St1#st.fs, Label))
                ++ lists:append([Es || #{events := Es} <- Parts]),
            Flow = (msgflow_flow_value:flow(Label, F, Events))#{quiet => Quiet,
                                             nodes => [node() | [PN || #{node := PN} <- Parts]]},
            St2 = St1#st{follows = maps:remove(Label, St1#st.follows), last = Flow},
            St = release_tracer(forget_caller(Label, St2)),
            {reply, Flow, St};
        _ ->
            %% a keeper restarted meanwhile: the flow's counts are gone
            {reply, {error, {unknown_flow, Label}}, St1}
    end.

%% A node of a cluster counts the followed requests of MFA here too.
track(MFA, Max, St) ->
    case system_tracer(St) of
        {error, _} = E ->
            {reply, E, St};
        ok ->
            E = msgflow_flow_entry:track(MFA, Max),
            ok = msgflow_tracer:flow_watch(St#st.fs, msgflow_flow_entry:watch_label(E), Max),
            {reply, ok, schedule(add_entry(E, St))}
    end.

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
    Entries = [case msgflow_flow_entry:mfa(E) of
                   MFA -> msgflow_flow_entry:stop(E);
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
    _ = [msgflow_flow_entry:stop(E) || E <- St#st.entries],
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
    T0 = lists:min([element(5, E) || E <- Events]),
    [setelement(5, E, element(5, E) - T0) || E <- Events].

%% false again once nothing is followed, if it is still ours.
release_tracer(St = #st{fs = FS, follows = Fs, entries = Es}) ->
    case map_size(Fs) =:= 0 andalso not lists:any(fun msgflow_flow_entry:running/1, Es) of
        true ->
            case current_system_tracer() of
                {msgflow_tracer, FS} -> _ = seq_trace:set_system_tracer(false);
                _ -> ok
            end;
        false ->
            ok
    end,
    St.

start_entry(MFA, Opts, St) ->
    case system_tracer(St) of
        {error, _} = E ->
            {reply, E, St};
        ok ->
            case msgflow_flow_entry:start(MFA, Opts, St#st.fs) of
                {ok, E} -> {reply, ok, schedule(add_entry(E, St))};
                {error, _} = Err -> {reply, Err, release_tracer(St)}
            end
    end.

%% E in place of any earlier entry at its function.
add_entry(E, St) ->
    MFA = msgflow_flow_entry:mfa(E),
    St#st{entries = [X || X <- St#st.entries, msgflow_flow_entry:mfa(X) =/= MFA] ++ [E]}.

schedule(St = #st{tick = undefined, entries = Es}) ->
    case lists:any(fun msgflow_flow_entry:running/1, Es) of
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
    {Es, _} = lists:mapfoldl(fun(E, Ns) -> entry_interval(E, ByLabel, FS, Over, Ns) end,
                             Names, Es0),
    St#st{follows = Fs, entries = Es}.

%% The node's system tracer and a function's meta tracer.  OTP's specs
%% leave out what a tracer module gives (`{Module, State}', which the VM
%% returns; see the -dialyzer attribute).
current_system_tracer() ->
    seq_trace:get_system_tracer().

rotate(FS) ->
    ok = msgflow_tracer:session_rotate(FS),
    true.

add_follow({{Label, S}, R, N}, Fs) ->
    case Fs of
        #{Label := F = #{pairs := P, labels := Ls}} ->
            Fs#{Label := F#{pairs := maps:update_with({S, R}, fun(C) -> C + N end, N, P),
                            labels := msgflow_flow_value:name(R, msgflow_flow_value:name(S, Ls))}};
        _ ->
            Fs
    end;
add_follow(_, Fs) ->
    Fs.

%% A running entry's interval: its deltas and the events kept for its
%% label, whose watch starts again.
entry_interval(E, ByLabel, FS, Over, Ns) ->
    case msgflow_flow_entry:running(E) of
        false ->
            {E, Ns};
        true ->
            Label = msgflow_flow_entry:watch_label(E),
            Events = take_events(FS, Label),
            ok = msgflow_tracer:flow_watch(FS, Label, msgflow_flow_entry:max_events(E)),
            msgflow_flow_entry:add(E, maps:get(Label, ByLabel, []), Events, Over, Ns)
    end.
