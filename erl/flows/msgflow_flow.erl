%%% @doc Request flows: who sends to whom for one request, from sequential
%%% tracing (seq_trace), counted in the NIF.
%%%
%%% The flow keeper, a gen_server registered as `msgflow_flow', owns a
%%% flow session (msgflow_tracer:flow_session_new/2) and makes it the
%%% node's system tracer, `{msgflow_tracer, FlowSession}', while a flow is
%%% followed; it puts `false' back when none is, and never replaces a
%%% system tracer another tool set.  Every message that carries a trace
%%% token with `send' set is counted in the NIF by (label, sender,
%%% receiver) on the sender's scheduler thread; the keeper takes snapshots
%%% of those counts and keeps, per label:
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
%%% Views (flow/1's Flow and summary/1's Summary) are built here and
%%% nowhere else; msgflow_flow_render prints and draws them.
%%%
%%% What the token goes with (seq_trace's rules): a message sent by a
%%% process whose token is set carries it; a process that receives a
%%% message takes that message's token, or clears its own when the message
%%% has none.  So a server that took part in a flow keeps counting under
%%% its label until it receives a message without a token, and the caller
%%% of follow_calls/2's function gets the token back with the reply and
%%% counts until it does.  Ports do not pass tokens on: a send to a port is
%%% counted, what the port sends back is no message of the flow, and it
%%% leaves its receiver's token as it was (a port's message has no token
%%% information, which ERTS tells apart from no token).
-module(msgflow_flow).
-behaviour(gen_server).

-export([follow/2, follow_calls/2, unfollow/0, flows/0, last/0, keeper/0]).
-export([depths/2]).
-export([part_watch/2, part_messages/1, part_finish/1, part_track/2, part_unfollow/0,
         part_flows/0]).
-export([start/0, init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-export_type([flow/0, summary/0, event/0]).

%% seq_trace:get_system_tracer/0 and erlang:trace_info/2 return
%% `{Module, State}' for a tracer module; OTP 25's specs do not say so.
-dialyzer({no_match, [system_tracer/1, release_tracer/1, terminate/2, stop_entry/1]}).

-define(KEEPER, ?MODULE).
%% the longest a follow may run or wait, in ms (a year: timers take more,
%% nobody means more)
-define(MAX_MS, 365 * 24 * 3600 * 1000).
-define(TICK_MS, 1000).          %% snapshots while an entry is followed
-define(MAX_PAIRS, 200000).      %% the flow session's cap on table entries
-define(ROTATE_TICKS, 10).       %% a new generation of its tables every 10 ticks,
                                 %% and whenever they are half full

%% A send in a flow, in causal order: `serial' as seq_trace gives it,
%% `depth' the length of the causal chain it ends (1 for the first
%% message), `at_us' microseconds since the flow's first event.
-type event() :: #{serial := {non_neg_integer(), non_neg_integer()},
                   from := msgflow:endpoint(), to := msgflow:endpoint(),
                   depth := pos_integer(), at_us := non_neg_integer()}.
%% One followed request: `messages' the token went with (exact),
%% `pairs' by process, busiest first, `processes' (senders and receivers),
%% `depth' the longest causal chain (of the events kept), `duration_us'
%% from the first event to the last, `events' in causal order (at most
%% `max_events'; `dropped' the ones past it), `labels' each endpoint's
%% label, read while the flow ran; `quiet' false when the flow still went
%% on at follow/2's `timeout'; `nodes' the nodes whose counts are in it
%% (across a cluster, each counts the sends of its own processes; `at_us'
%% of another node's event is counted from that node's first event: clocks
%% are not compared).
-type flow() :: #{label := term(), messages := non_neg_integer(), quiet => boolean(),
                  nodes => [node()],
                  pairs := [{msgflow:endpoint(), msgflow:endpoint(), pos_integer()}],
                  processes := [msgflow:endpoint()], depth := non_neg_integer(),
                  duration_us := non_neg_integer(), events := [event()],
                  dropped := non_neg_integer(), labels := #{msgflow:endpoint() => binary()}}.
%% Every request at an entry point: `requests' followed (one call in
%% `sample'), `calls' counted, `messages' of all followed requests,
%% `per_request' their mean, `pairs' by endpoint label, busiest first,
%% `depth' the deepest chain seen on one node (a chain that goes on on
%% another node is counted there from 1; `depth_exact => false' when events past
%% `max_events' in an interval were not looked at), `running'.
-type summary() :: #{entry := mfa(), requests := non_neg_integer(),
                     calls := non_neg_integer(), messages := non_neg_integer(),
                     per_request := float(),
                     pairs := [{binary() | pid(), binary() | pid(), pos_integer()}],
                     depth := non_neg_integer(), depth_exact := boolean(),
                     sample := pos_integer(), running := boolean(),
                     overflow := non_neg_integer()}.

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
    final :: summary() | undefined
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
    last :: flow() | undefined,
    next = 1 :: pos_integer(),
    tick :: reference() | undefined,
    ticks = 0 :: non_neg_integer()
}).

%%% API (called through msgflow)

%% @doc See msgflow:follow/2.
-spec follow(fun(() -> term()), map()) -> {term(), flow()} | {error, term()}.
follow(Fun, Opts) when is_function(Fun, 0), is_map(Opts) ->
    case check(Opts, #{settle => 50, max_events => 10000, print => false, timeout => 10000}) of
        {error, _} = E ->
            E;
        {ok, #{settle := Settle, max_events := Max, print := Print, timeout := Timeout}} ->
            case keeper_call({watch, Max}) of
                {ok, Label} ->
                    %% across a cluster, every node counts the label too
                    _ = msgflow_cluster:call_all(msgflow_cluster:members(), ?MODULE, part_watch,
                                                 [Label, Max]),
                    run_followed(Fun, Label, Settle, Timeout, Print);
                {error, _} = E ->
                    E
            end
    end;
follow(Fun, Opts) when is_function(Fun, 0) ->
    {error, {badarg, Opts}};
follow(Fun, _Opts) ->
    {error, {badarg, Fun}}.

run_followed(Fun, Label, Settle, Timeout, Print) ->
    Old = seq_trace:set_token([]),
    _ = seq_trace:set_token(label, Label),
    _ = seq_trace:set_token(serial, {0, 0}),
    _ = seq_trace:set_token(send, true),
    Result = try Fun()
             catch Class:Reason:Stack ->
                     _ = seq_trace:set_token(Old),
                     _ = msgflow_cluster:call_all(msgflow_cluster:members(), ?MODULE,
                                                  part_finish, [Label]),
                     _ = keeper_call({finish, Label, false, []}),
                     erlang:raise(Class, Reason, Stack)
             end,
    _ = seq_trace:set_token([]),
    Quiet = wait_quiet(Label, Settle, -1, erlang:monotonic_time(millisecond) + Timeout),
    Parts = [P || {_, {ok, P = #{}}} <- msgflow_cluster:call_all(msgflow_cluster:members(),
                                                                  ?MODULE, part_finish, [Label])],
    Finished = keeper_call({finish, Label, Quiet, Parts}),
    _ = seq_trace:set_token(Old),
    case Finished of
        #{} = Flow ->
            Print andalso io:put_chars(msgflow_flow_render:text(Flow)),
            {Result, Flow};
        {error, _} = E ->
            E
    end.

%% Quiet: no message of the flow counted during one settle period, after
%% the barrier (a message in flight to a traced process is delivered).
%% false when the flow still went on at the deadline (a process that keeps
%% the token and keeps sending, such as a loop sending to itself).
wait_quiet(Label, Settle, Before, Deadline) ->
    receive after Settle -> ok end,
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} -> ok end,
    Remote = [M || {_, {ok, M}} <- msgflow_cluster:call_all(msgflow_cluster:members(), ?MODULE,
                                                            part_messages, [Label]),
                   is_integer(M)],
    case keeper_call({messages, Label}) + lists:sum(Remote) of
        Before -> true;
        Now ->
            erlang:monotonic_time(millisecond) < Deadline andalso
                wait_quiet(Label, Settle, Now, Deadline)
    end.

%% @doc See msgflow:follow_calls/2.
-spec follow_calls(mfa(), map()) -> ok | {error, term()}.
follow_calls({M, F, A} = MFA, Opts) when is_atom(M), is_atom(F), is_integer(A), A >= 0,
                                         is_map(Opts) ->
    case check(Opts, #{sample => 1, for => 60000, max_events => 1000}) of
        {error, _} = E -> E;
        {ok, Valid = #{max_events := Max}} ->
            case keeper_call({follow_calls, MFA, Valid}) of
                ok ->
                    %% across a cluster, the other nodes count its requests'
                    %% sends too (the calls are counted where the pattern is)
                    _ = msgflow_cluster:call_all(msgflow_cluster:members(), ?MODULE, part_track,
                                                 [MFA, Max]),
                    ok;
                {error, _} = E ->
                    E
            end
    end;
follow_calls({_, _, _} = MFA, Opts) when is_map(Opts) ->
    {error, {badarg, MFA}};
follow_calls(MFA, Opts) when is_map(Opts) ->
    {error, {badarg, MFA}};
follow_calls(_MFA, Opts) ->
    {error, {badarg, Opts}}.

%% @doc See msgflow:unfollow/0.
-spec unfollow() -> ok.
unfollow() ->
    _ = msgflow_cluster:call_all(msgflow_cluster:members(), ?MODULE, part_unfollow, []),
    part_unfollow().

%% @doc See msgflow:flows/0.
-spec flows() -> [summary()].
flows() ->
    case msgflow_cluster:members() of
        [] ->
            [name_summary(S) || S <- part_flows()];
        Nodes ->
            Parts = lists:append([S || {_, {ok, S}} <- msgflow_cluster:call_all(
                                                          Nodes, ?MODULE, part_flows, []),
                                       is_list(S)]),
            [name_summary(merge_summary(S, [P || P = #{entry := E} <- Parts, E =:= Entry]))
             || S = #{entry := Entry} <- part_flows()]
    end.

%% @private This node's summaries, other nodes' processes in them as pids.
-spec part_flows() -> [summary()].
part_flows() ->
    case whereis(?KEEPER) of
        undefined -> [];
        _ -> keeper_call(flows)
    end.

%% @private Stops this node's entries.
-spec part_unfollow() -> ok.
part_unfollow() ->
    case whereis(?KEEPER) of
        undefined -> ok;
        _ -> keeper_call(unfollow)
    end.

%% @private On a node of a cluster: counts the sends of MFA's followed
%% requests here (the coordinator sets the pattern and counts the calls).
-spec part_track(mfa(), non_neg_integer()) -> ok | {error, term()}.
part_track(MFA, Max) ->
    keeper_call({track, MFA, Max}).

%% A summary with the other nodes' parts of the same entry: their pairs by
%% label summed in, their messages added, the deepest chain of all; the
%% calls and requests are where the pattern is.
merge_summary(S, []) ->
    S;
merge_summary(S = #{pairs := P0, messages := M0, depth := D0, depth_exact := X0,
                    overflow := O0, requests := Rq}, Parts) ->
    Sum = lists:foldl(fun({A, B, N}, Acc) -> maps:update_with({A, B}, fun(X) -> X + N end,
                                                               N, Acc) end,
                      #{}, P0 ++ lists:append([P || #{pairs := P} <- Parts])),
    M = M0 + lists:sum([X || #{messages := X} <- Parts]),
    S#{pairs := lists:sort(fun({_, _, A}, {_, _, B}) -> A >= B end,
                           [{A, B, N} || {{A, B}, N} <- maps:to_list(Sum)]),
       messages := M,
       per_request := case Rq of 0 -> 0.0; _ -> M / Rq end,
       depth := lists:max([D0 | [D || #{depth := D} <- Parts]]),
       depth_exact := X0 andalso lists:all(fun(#{depth_exact := X}) -> X end, Parts),
       overflow := O0 + lists:sum([O || #{overflow := O} <- Parts])}.

%% @private On a node of a cluster: counts Label's flow here too (the
%% coordinator's follow/2 started it).
-spec part_watch(term(), non_neg_integer()) -> ok | {error, term()}.
part_watch(Label, Max) ->
    keeper_call({watch_label, Label, Max}).

%% @private The messages of Label's flow counted here so far.
-spec part_messages(term()) -> non_neg_integer() | {error, term()}.
part_messages(Label) ->
    keeper_call({messages, Label}).

%% @private What this node counted of Label's flow (its pairs, labels and
%% events, their times counted from this node's first event: clocks of
%% different nodes are never compared); the watch here ends.
-spec part_finish(term()) -> map() | {error, term()}.
part_finish(Label) ->
    keeper_call({part_finish, Label}).

%% @doc The last flow follow/2 returned, or `undefined'.
-spec last() -> flow() | undefined.
last() ->
    case whereis(?KEEPER) of
        undefined -> undefined;
        _ -> keeper_call(last)
    end.

%% @doc The keeper's pid, or `undefined' (msgflow never traces it).
-spec keeper() -> pid() | undefined.
keeper() ->
    whereis(?KEEPER).

check(Opts, Defaults) ->
    Bad = [{K, V} || {K, V} <- maps:to_list(Opts), not valid(K, V, Defaults)],
    case Bad of
        [] -> {ok, maps:merge(Defaults, Opts)};
        [KV | _] -> {error, {badopt, KV}}
    end.

valid(K, _, Defaults) when not is_map_key(K, Defaults) -> false;
valid(print, V, _) -> is_boolean(V);
valid(settle, V, _) -> is_integer(V) andalso V >= 0 andalso V =< 60000;
valid(timeout, V, _) -> is_integer(V) andalso V >= 0 andalso V =< ?MAX_MS;
valid(max_events, V, _) -> is_integer(V) andalso V >= 0 andalso V =< 10000000;
valid(sample, V, _) -> is_integer(V) andalso V > 0 andalso V =< 1 bsl 32;
valid(for, V, _) -> is_integer(V) andalso V > 0 andalso V =< ?MAX_MS.

%% The keeper is called with no trace token, so that nothing it does
%% belongs to a flow.
keeper_call(Request) ->
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
    case whereis(?KEEPER) of
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

%% @private Starts the keeper, linked to nothing: it outlives the shell
%% command that started it, and holds the last flow and the summaries.
-spec start() -> {ok, pid()} | {error, term()}.
start() ->
    gen_server:start({local, ?KEEPER}, ?MODULE, [], []).

%%% The keeper

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
            %% the other nodes' parts, if any: pairs summed (a send is
            %% counted on its sender's node only), labels and events added
            F = lists:foldl(fun(#{node := PN, pairs := P, labels := Ls},
                                Acc = #{pairs := AP, labels := AL}) ->
                                    %% a process is named as its own node names it
                                    Own = maps:filter(fun(K, _) ->
                                                              msgflow_labels:node_of(K) =:= PN
                                                      end, Ls),
                                    Acc#{pairs := maps:fold(fun(K, V, M) ->
                                                                    maps:update_with(
                                                                      K, fun(X) -> X + V end,
                                                                      V, M)
                                                            end, AP, P),
                                         labels := maps:merge(maps:merge(Ls, AL), Own)}
                            end, F0, Parts),
            Events = relative(take_events(St1#st.fs, Label))
                ++ lists:append([Es || #{events := Es} <- Parts]),
            Flow = (flow(Label, F, Events))#{quiet => Quiet,
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
                            labels := name(R, name(S, Ls))}};
        _ ->
            Fs
    end;
add_follow(_, Fs) ->
    Fs.

%% An endpoint's label, read the first time the flow shows it (while it
%% is most likely alive).
name(E, Ls) when is_map_key(E, Ls) -> Ls;
name(E, Ls) -> Ls#{E => msgflow_labels:label(E)}.

%% The same for an entry's summary, where a local process that exited is
%% `(exited)': a pid would make one label per request.
group_name(E, Ls) when is_map_key(E, Ls) -> Ls;
group_name(E, Ls) when is_pid(E), node(E) =:= node() ->
    Ls#{E => case is_process_alive(E) of
                 true -> msgflow_labels:label(E);
                 false -> <<"(exited)">>
             end};
group_name(E, Ls) when is_pid(E) ->
    %% another node's process: named where the summaries meet (flows/0),
    %% by the node it runs on when that is the one asking
    Ls#{E => E};
group_name(E, Ls) -> name(E, Ls).

%% A summary's remaining pids (processes of other nodes) by their labels,
%% named here: this node's by group_name/2, others' as they print.
name_summary(S = #{pairs := P}) ->
    Name = fun(K) when is_pid(K), node(K) =:= node() ->
                   maps:get(K, group_name(K, #{}));
              (K) when is_pid(K) -> msgflow_labels:label(K);
              (K) -> K
           end,
    Sum = lists:foldl(fun({A, B, N}, Acc) ->
                              maps:update_with({Name(A), Name(B)}, fun(X) -> X + N end, N, Acc)
                      end, #{}, P),
    S#{pairs := lists:sort(fun({_, _, A}, {_, _, B}) -> A >= B end,
                           [{A, B, N} || {{A, B}, N} <- maps:to_list(Sum)])}.

add_entry(E = #entry{running = false}, _Deltas, _FS, _Over, Ns) ->
    {E, Ns};
add_entry(E = #entry{label = Label, pairs = P0, messages = M0, known = K0, depth = D0,
                     max_events = Max, overflow = Over0}, Deltas, FS, Over, Ns0) ->
    {P, M, Ns} = lists:foldl(fun({S, R, N}, {P1, M1, Ns1}) ->
                                     Ns2 = group_name(R, group_name(S, Ns1)),
                                     Key = {maps:get(S, Ns2), maps:get(R, Ns2)},
                                     {maps:update_with(Key, fun(C) -> C + N end, N, P1),
                                      M1 + N, Ns2}
                             end, {P0, M0, Ns0}, Deltas),
    Events = take_events(FS, Label),
    ok = msgflow_tracer:flow_watch(FS, Label, Max),
    {Depths, Known} = depths(Events, K0),
    D = lists:max([D0 | [D1 || {_, D1} <- Depths]]),
    %% the chains of this interval's events only link to the last one's;
    %% a full watch let some events of the interval go unseen
    {E#entry{pairs = P, messages = M, known = Known, depth = D, overflow = Over0 + Over,
             depth_exact = E#entry.depth_exact andalso length(Events) < Max}, Ns}.

%% @doc The depth of each event: 1 + that of the message its sender last
%% received in the flow (seq_trace sets a send's Prev to the serial of
%% that message; one sent to a name is found by its serial alone), else 1.  Events are taken in serial order, in which a
%% message always comes after the one that caused it (a process's serial
%% counter never falls behind a serial it received).  Known maps
%% `{Receiver, Serial}' to the depth of messages seen before; the result
%% has the events' own entries in place of the older ones.
-spec depths([msgflow_tracer:event()], #{{term(), non_neg_integer()} => pos_integer()}) ->
          {[{msgflow_tracer:event(), pos_integer()}],
           #{{term(), non_neg_integer()} => pos_integer()}}.
depths(Events, Known0) ->
    Sorted = lists:sort(fun({_, C1, _, _, T1}, {_, C2, _, _, T2}) -> {C1, T1} =< {C2, T2} end,
                        Events),
    {Out, _} = lists:mapfoldl(fun(Ev = {Prev, Cur, From, To, _}, K) ->
                                      D = parent_depth(From, Prev, K) + 1,
                                      {{Ev, D}, known(To, Cur, D, K)}
                              end, Known0, Sorted),
    New = lists:foldl(fun({{_, Cur, _, To, _}, D}, M) -> known(To, Cur, D, M) end, #{}, Out),
    {Out, case Events of [] -> Known0; _ -> New end}.

%% A message sent to a name ({Name, Node} on another node, an atom) is
%% known by its serial alone: its receiver's pid is not in the event.
known(To, Cur, D, K) when is_pid(To) -> K#{{To, Cur} => D};
known(To, Cur, D, K) when is_port(To) -> K#{{To, Cur} => D};
known(_Name, Cur, D, K) -> K#{{name, Cur} => D}.

parent_depth(From, Prev, K) ->
    case K of
        #{{From, Prev} := D} -> D;
        #{{name, Prev} := D} -> D;
        _ -> 0
    end.

%% The Flow of a follow/2 label.
flow(Label, #{pairs := P, labels := Ls0}, Events) ->
    Pairs = lists:sort(fun({_, _, A}, {_, _, B}) -> A >= B end,
                       [{S, R, N} || {{S, R}, N} <- maps:to_list(P)]),
    {Depths, _} = depths(Events, #{}),
    T0 = case Events of
             [] -> 0;
             _ -> lists:min([T || {_, _, _, _, T} <- Events])
         end,
    Evs = [#{serial => {Prev, Cur}, from => From, to => To, depth => D, at_us => T - T0}
           || {{Prev, Cur, From, To, T}, D} <- Depths],
    Procs = lists:usort(lists:append([[S, R] || {S, R, _} <- Pairs])),
    Ls = lists:foldl(fun name/2, Ls0, Procs),
    Messages = lists:sum([N || {_, _, N} <- Pairs]),
    #{label => Label,
      messages => Messages,
      pairs => Pairs,
      processes => Procs,
      depth => lists:max([0 | [D || {_, D} <- Depths]]),
      duration_us => lists:max([0 | [T - T0 || {_, _, _, _, T} <- Events]]),
      events => Evs,
      %% every message is counted; the events past the cap were not kept
      dropped => max(0, Messages - length(Events)),
      labels => maps:with(Procs, Ls)}.

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
