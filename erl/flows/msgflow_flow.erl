%%% @doc Request flows: who sends to whom for one request, from sequential
%%% tracing (seq_trace), counted in the NIF.
%%%
%%% The API: follow/2 (one request from the shell) and follow_calls/2
%%% (every request at a function), across a cluster's nodes when msgflow
%%% counts on several (the part_* functions run on each node).  The
%%% keeper (msgflow_flow_keeper) counts; the values are msgflow_flow_value's,
%%% the `flows' view (msgflow_flows_view) shows them.
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

-export([follow/2, follow_calls/2, unfollow/0, last/0, keeper/0, options/1]).
-export([part_watch/2, part_messages/1, part_finish/1, part_track/2, part_unfollow/0,
         part_flows/0]).

%%% API (called through msgflow)

%% @doc The options of follow/2 and of follow_calls/2, with their defaults
%% and rules.
-spec options(follow | follow_calls) -> msgflow_opts:schema().
options(follow) ->
    #{settle => {50, {int, 0, 60000, "ms"}},
      max_events => {10000, {int, 0, 10000000, "events"}},
      print => {false, boolean},
      timeout => {10000, {int, 0, 365 * 24 * 3600 * 1000, "ms"}}};
options(follow_calls) ->
    #{sample => {1, {int, 1, 1 bsl 32, "calls"}},
      for => {60000, {int, 1, 365 * 24 * 3600 * 1000, "ms"}},
      max_events => {1000, {int, 0, 10000000, "events"}}}.

%% @doc msgflow:follow/2: runs Fun() as one followed request and returns `{Result, Flow}':
%% the calling process gets a trace token (seq_trace) with a fresh label
%% and `send' set, runs Fun, gets its previous token back, then waits
%% until the flow is quiet (no message of it counted for `settle' ms after
%% an erlang:trace_delivered/1 barrier).  Every message the token went
%% with, in any process of this node, is counted in the NIF.  Flow is
%% `#{label, messages, pairs => [{Sender, Receiver, Messages}], processes,
%% depth, duration_us, events, dropped, labels}' (see msgflow_flow_value:flow()):
%% `depth' is the longest causal chain of messages, `events' the sends in
%% causal order (at most `max_events'; `dropped' counts the rest), labels
%% read while the flow ran.  Opts: `settle => Ms' (default 50),
%% `max_events => N' (default 10,000), `print => true' prints a text
%% sequence diagram, `timeout => Ms' (default 10,000): a flow still going
%% on then (a process that keeps the token and keeps sending) is returned
%% as it is, with `quiet => false'.  Works with or without start/1.  Errors: `{error,
%% {system_tracer_busy, Current}}' when another tool set the node's
%% seq_trace system tracer (it is never replaced), `{error, {badopt,
%% {K, V}, Allowed}}', `{error, {badarg, {'fun', Fun}, Allowed}}'.  An exception in Fun is raised
%% again after the token is put back.  Ports do not pass the token on: a
%% send to a port is in the flow, the port's reply is not (and leaves the
%% receiver's token as it was, so what that process sends next still is).
-spec follow(fun(() -> term()), map() | [{atom(), term()}]) ->
          {term(), msgflow_flow_value:flow()} | {error, term()}.
follow(Fun, _Opts) when not is_function(Fun, 0) ->
    {error, {badarg, {'fun', Fun}, [<<"a fun of arity 0">>]}};
follow(Fun, Opts0) ->
    case msgflow_opts:check(options(follow), Opts0) of
        {error, _} = E ->
            E;
        {ok, #{settle := Settle, max_events := Max, print := Print, timeout := Timeout}} ->
            case msgflow_flow_keeper:call({watch, Max}) of
                {ok, Label} ->
                    %% across a cluster, every node counts the label too
                    _ = msgflow_cluster:call_all(msgflow_cluster:members(), ?MODULE, part_watch,
                                                 [Label, Max]),
                    run_followed(Fun, Label, Settle, Timeout, Print);
                {error, _} = E ->
                    E
            end
    end.

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
                     _ = msgflow_flow_keeper:call({finish, Label, false, []}),
                     erlang:raise(Class, Reason, Stack)
             end,
    _ = seq_trace:set_token([]),
    Quiet = wait_quiet(Label, Settle, -1, erlang:monotonic_time(millisecond) + Timeout),
    Parts = [P || {_, {ok, P = #{}}} <- msgflow_cluster:call_all(msgflow_cluster:members(),
                                                                  ?MODULE, part_finish, [Label])],
    Finished = msgflow_flow_keeper:call({finish, Label, Quiet, Parts}),
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
    case msgflow_flow_keeper:call({messages, Label}) + lists:sum(Remote) of
        Before -> true;
        Now ->
            erlang:monotonic_time(millisecond) < Deadline andalso
                wait_quiet(Label, Settle, Now, Deadline)
    end.

%% @doc msgflow:follow_calls/2: follows every request at a function, with no code change: a meta
%% call trace pattern on `{M, F, Arity}' (in a trace session of its own on
%% OTP 27+) whose match spec gives the caller a trace token (label the
%% atom `'msgflow_calls M:F/A'', `send' set) on one call in `sample';
%% every call is counted.  The summary is in flows/0.  The reply carries the token
%% back to the caller, which then counts under the label until it
%% receives a message without a token (a server likewise).  Opts:
%% `sample => N' (default 1: every call), `for => Ms' (default 60,000;
%% stops by itself), `max_events => N' sends a second looked at for depth
%% (default 1,000; once they are seen, sends take no lock for it).  Errors: `{error, {system_tracer_busy, Current}}',
%% `{error, {no_such_function, MFA}}', `{error, {already_following,
%% MFA}}', `{error, {meta_traced_by_another_tool, MFA}}' (before OTP 27),
%% `{error, {badopt, {K, V}, Allowed}}', `{error, {badarg, {mfa, MFA},
%% Allowed}}'.
-spec follow_calls(mfa(), map() | [{atom(), term()}]) -> ok | {error, term()}.
follow_calls(MFA, Opts0) ->
    case {check_mfa(MFA), msgflow_opts:check(options(follow_calls), Opts0)} of
        {{error, _} = E, _} -> E;
        {ok, {error, _} = E} -> E;
        {ok, {ok, Valid = #{max_events := Max}}} ->
            case msgflow_flow_keeper:call({follow_calls, MFA, Valid}) of
                ok ->
                    %% across a cluster, the other nodes count its requests'
                    %% sends too (the calls are counted where the pattern is)
                    _ = msgflow_cluster:call_all(msgflow_cluster:members(), ?MODULE, part_track,
                                                 [MFA, Max]),
                    ok;
                {error, _} = E ->
                    E
            end
    end.

check_mfa({M, F, A}) when is_atom(M), is_atom(F), is_integer(A), A >= 0, A =< 255 -> ok;
check_mfa(MFA) -> {error, {badarg, {mfa, MFA}, [<<"{Module, Function, Arity}">>]}}.

%% @doc See msgflow:unfollow/0.
-spec unfollow() -> ok.
unfollow() ->
    _ = msgflow_cluster:call_all(msgflow_cluster:members(), ?MODULE, part_unfollow, []),
    part_unfollow().

%% @doc This node's summaries, other nodes' processes in them as pids
%% (msgflow_flows_view, on each node).
-spec part_flows() -> [msgflow_flow_value:summary()].
part_flows() ->
    msgflow_flow_keeper:query(flows, []).

%% @private Stops this node's entries.
-spec part_unfollow() -> ok.
part_unfollow() ->
    msgflow_flow_keeper:query(unfollow, ok).

%% @private On a node of a cluster: counts the sends of MFA's followed
%% requests here (the coordinator sets the pattern and counts the calls).
-spec part_track(mfa(), non_neg_integer()) -> ok | {error, term()}.
part_track(MFA, Max) ->
    msgflow_flow_keeper:call({track, MFA, Max}).

%% @private On a node of a cluster: counts Label's flow here too (the
%% coordinator's follow/2 started it).
-spec part_watch(term(), non_neg_integer()) -> ok | {error, term()}.
part_watch(Label, Max) ->
    msgflow_flow_keeper:call({watch_label, Label, Max}).

%% @private The messages of Label's flow counted here so far.
-spec part_messages(term()) -> non_neg_integer() | {error, term()}.
part_messages(Label) ->
    msgflow_flow_keeper:call({messages, Label}).

%% @private What this node counted of Label's flow (its pairs, labels and
%% events, their times counted from this node's first event: clocks of
%% different nodes are never compared); the watch here ends.
-spec part_finish(term()) -> map() | {error, term()}.
part_finish(Label) ->
    msgflow_flow_keeper:call({part_finish, Label}).

%% @doc The last flow follow/2 returned, or `undefined'.
-spec last() -> msgflow_flow_value:flow() | undefined.
last() ->
    msgflow_flow_keeper:query(last, undefined).

%% @doc The keeper's pid, or `undefined' (msgflow never traces it).
-spec keeper() -> pid() | undefined.
keeper() ->
    msgflow_flow_keeper:whereis().
