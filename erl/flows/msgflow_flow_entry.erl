%%% @doc A follow_calls/2 entry: a function whose calls start requests
%%% (a meta pattern that sets a trace token, in a trace session of its own
%%% on OTP 27+), and what the keeper counted of them: pairs by endpoint
%%% label, messages, the deepest causal chain.  The keeper
%%% (msgflow_flow_keeper) holds the `entry()' values and is the only
%%% process to call these functions with them.
-module(msgflow_flow_entry).
-export([start/3, track/2, mfa/1, running/1, watch_label/1, max_events/1,
         stop/1, add/5, summary/1, patterns_table/0, clear_left/0]).
-export_type([entry/0]).

%% the functions with a legacy meta pattern of an entry's (msgflow_sup's)
-define(PATTERNS, msgflow_flow_patterns).

%% seq_trace:get_system_tracer/0 and erlang:trace_info/2 return
%% `{Module, State}' for a tracer module; OTP 25's specs do not say so.
-dialyzer({no_match, [stop/1, clear_left/0]}).

-record(entry, {
    mfa :: mfa(),
    label :: atom(),
    res :: msgflow_tracer:entry() | none,      %% none: tracking another node's entry
    trace :: {session, term()} | legacy | none,
    sample :: pos_integer(),
    max_events :: non_neg_integer(),
    timer :: reference() | undefined,
    pairs = #{} :: #{{binary() | pid(), binary() | pid()} => pos_integer()},
    messages = 0 :: non_neg_integer(),
    known = #{} :: #{{term(), non_neg_integer()} => pos_integer()},
    depth = 0 :: non_neg_integer(),
    depth_exact = true :: boolean(),
    overflow = 0 :: non_neg_integer(),
    running = true :: boolean(),
    final :: msgflow_flow_value:summary() | undefined
}).
-opaque entry() :: #entry{}.

%% @doc An entry at MFA with validated follow_calls options (`sample',
%% `for' ms, `max_events'): its pattern set, its calls counted by a NIF
%% entry resource, `{expire, MFA}' sent to the caller after `for' ms.
%% `{error, {no_such_function, MFA}}', `{error,
%% {meta_traced_by_another_tool, MFA}}'.
-spec start(mfa(), map(), msgflow_tracer:session()) -> {ok, entry()} | {error, term()}.
start({M, _, _} = MFA, #{sample := Sample, for := For, max_events := Max}, FS) ->
    _ = code:ensure_loaded(M),
    Label = label(MFA),
    Res = msgflow_tracer:entry_new(Sample),
    %% serial {0, 0}: a request's first message starts a chain of its own,
    %% not one after the caller's last followed request
    MS = [{'_', [], [{set_seq_token, label, Label}, {set_seq_token, serial, {{0, 0}}},
                     {set_seq_token, send, true}]}],
    case set_pattern(MFA, MS, Res) of
        {ok, Trace} ->
            ok = msgflow_tracer:flow_watch(FS, Label, Max),
            Timer = erlang:send_after(For, self(), {expire, MFA}),
            {ok, #entry{mfa = MFA, label = Label, res = Res, trace = Trace, sample = Sample,
                        max_events = Max, timer = Timer}};
        {error, _} = Err ->
            msgflow_tracer:entry_stop(Res),
            Err
    end.

%% @doc An entry that only counts, on this node, the sends of the requests
%% another node's entry at MFA starts (no pattern, no calls here).
-spec track(mfa(), non_neg_integer()) -> entry().
track(MFA, Max) ->
    #entry{mfa = MFA, label = label(MFA), res = none, trace = none, sample = 1,
           max_events = Max}.

%% An entry's label: an atom.  A label a match spec sets must be an
%% immediate term: ERTS (25-27) stores the label's term in the token as it
%% is, and a tuple would point into the match spec's memory, not the
%% process's heap (a node crashed on it).
-spec label(mfa()) -> atom().
label({M, F, A}) ->
    list_to_atom(lists:flatten(io_lib:format("msgflow_calls ~s:~s/~b", [M, F, A]))).

%% @doc The function.
-spec mfa(entry()) -> mfa().
mfa(#entry{mfa = MFA}) -> MFA.

%% @doc Whether it still counts.
-spec running(entry()) -> boolean().
running(#entry{running = R}) -> R.

%% @doc The label its requests carry.
-spec watch_label(entry()) -> atom().
watch_label(#entry{label = L}) -> L.

%% @doc Events looked at per snapshot interval.
-spec max_events(entry()) -> non_neg_integer().
max_events(#entry{max_events = M}) -> M.

%% @doc Makes the table of the functions with a legacy meta pattern of
%% msgflow's (msgflow_sup's, made as it starts).
-spec patterns_table() -> ok.
patterns_table() ->
    _ = ets:new(?PATTERNS, [named_table, public, set]),
    ok.

%% @doc The legacy meta patterns a dead keeper's entries left removed
%% (only those that are still msgflow's): what a keeper does as it starts.
-spec clear_left() -> ok.
clear_left() ->
    _ = noted(fun() ->
                      [begin
                           case erlang:trace_info(MFA, meta) of
                               {meta, {msgflow_tracer, _}} -> _ = erlang:trace_pattern(MFA, false, [meta]);
                               _ -> ok
                           end,
                           ets:delete(?PATTERNS, MFA)
                       end || {MFA} <- ets:tab2list(?PATTERNS)]
              end),
    ok.

%% F() on the table; nothing when there is none (msgflow_sup not running)
noted(F) ->
    try F() catch error:badarg -> false end.

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
            case erlang:trace_info(MFA, meta) of
                {meta, Other} when Other =/= false, Other =/= undefined ->
                    {error, {meta_traced_by_another_tool, MFA}};
                _ ->
                    case erlang:trace_pattern(MFA, MS, [{meta, msgflow_tracer, Res}]) of
                        0 -> {error, {no_such_function, MFA}};
                        _ -> _ = noted(fun() -> ets:insert(?PATTERNS, {MFA}) end), {ok, legacy}
                    end
            end
    end.

%% @doc The entry stopped: its pattern removed (only msgflow's own), its
%% timer cancelled, its summary kept as it is now.
-spec stop(entry()) -> entry().
stop(E = #entry{running = false}) ->
    E;
stop(E = #entry{mfa = MFA, res = Res, trace = Trace, timer = Timer}) ->
    _ = Res =/= none andalso msgflow_tracer:entry_stop(Res) =:= ok,
    case Trace of
        none ->
            ok;
        {session, S} ->
            Mod = trace,
            _ = Mod:session_destroy(S);
        legacy ->
            case erlang:trace_info(MFA, meta) of
                {meta, {msgflow_tracer, Res}} -> _ = erlang:trace_pattern(MFA, false, [meta]);
                _ -> ok
            end,
            _ = noted(fun() -> ets:delete(?PATTERNS, MFA) end)
    end,
    _ = is_reference(Timer) andalso erlang:cancel_timer(Timer),
    E1 = E#entry{running = false, timer = undefined},
    E1#entry{final = summary(E1)}.

%% @doc One snapshot interval added: the entry's label's deltas `{Sender,
%% Receiver, Messages}', the events kept in it (their causal depths deepen
%% the entry's), the session's overflow; Ns the endpoint names read so
%% far this snapshot (msgflow_flow_value:group_name/2), returned updated.
-spec add(entry(), [{term(), term(), pos_integer()}], [msgflow_tracer:event()],
          non_neg_integer(), map()) -> {entry(), map()}.
add(E = #entry{running = false}, _Deltas, _Events, _Over, Ns) ->
    {E, Ns};
add(E = #entry{pairs = P0, messages = M0, known = K0, depth = D0, max_events = Max,
               overflow = Over0}, Deltas, Events, Over, Ns0) ->
    {P, M, Ns} = lists:foldl(fun({S, R, N}, {P1, M1, Ns1}) ->
                                     Ns2 = msgflow_flow_value:group_name(
                                             R, msgflow_flow_value:group_name(S, Ns1)),
                                     Key = {maps:get(S, Ns2), maps:get(R, Ns2)},
                                     {maps:update_with(Key, fun(C) -> C + N end, N, P1),
                                      M1 + N, Ns2}
                             end, {P0, M0, Ns0}, Deltas),
    {Depths, Known} = msgflow_flow_value:depths(Events, K0),
    D = lists:max([D0 | [D1 || {_, D1} <- Depths]]),
    %% the chains of this interval's events only link to the last one's;
    %% a full watch let some events of the interval go unseen
    {E#entry{pairs = P, messages = M, known = Known, depth = D, overflow = Over0 + Over,
             depth_exact = E#entry.depth_exact andalso length(Events) < Max}, Ns}.

%% @doc The entry's summary (msgflow_flow_value:summary()): its final one
%% once stopped.
-spec summary(entry()) -> msgflow_flow_value:summary().
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
      pairs => msgflow_row:sorted_pairs(P),
      depth => D, depth_exact => X, sample => Sample, running => Running, overflow => Over}.
