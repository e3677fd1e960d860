%%% @doc The always-on bottleneck detector: while msgflow counts, it asks
%%% for the `bottlenecks' view (msgflow_query, the one path) as windows
%%% close, and
%%% <ul>
%%% <li>logs a root cause once through `logger' as it appears (`warning')
%%% and once as it clears (`notice', after ?CLEAR_AFTER evaluations
%%% without it, so that a root that comes and goes logs once): a
%%% structured report `#{msgflow => bottleneck, event => appeared |
%%% cleared, verdict, subject, label, node, cost, summary}', which the
%%% default handler prints as `msgflow bottleneck: ...' (no logger
%%% domain: the default handler prints only those of none or OTP's), and
%%% marks it in the run's history (msgflow_collector:mark/1), where the
%%% web page's time slider shows it;</li>
%%% <li>keeps for `/metrics' (families/0) `msgflow_bottleneck{process,
%%% verdict}' (gauge, 1 while the root stands; by label, at most
%%% ?MAX_ROOT_SERIES series) and `msgflow_blocked_seconds_total{caller,
%%% server}' (counter: the seconds the waiters of each label lost on each
%%% server's label, from the roots' chains; at most ?MAX_WAIT_SERIES
%%% series, the rest in `caller="other"'), which go back to 0 when a run
%%% starts.</li>
%%% </ul>
%%% Its cost is bounded: it evaluates at most once a window, and after an
%%% evaluation that took T ms waits 9 T before the next.
%%% It is one of msgflow's own processes (msgflow_flags:own_names/0).
-module(msgflow_alerts).
-behaviour(gen_server).

-export([start_link/0, families/0, roots/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(SERVER, ?MODULE).
%% how often it looks for a closed window, ms
-define(POLL_MS, 1000).
%% evaluations without a root before it is said to clear
-define(CLEAR_AFTER, 3).
-define(MAX_ROOT_SERIES, 50).
-define(MAX_WAIT_SERIES, 100).

-record(st, {run :: integer() | undefined,         %% the run's started_at
             window = 0 :: non_neg_integer(),       %% the last window evaluated
             at :: integer() | undefined,           %% when (monotonic ms)
             %% the next evaluation, at the earliest (monotonic ms)
             not_before :: integer() | undefined,
             %% the roots standing: key => {cause, evaluations missed}
             roots = #{} :: #{term() => {map(), non_neg_integer()}},
             %% seconds lost, by {caller label, server label}
             blocked = #{} :: #{{binary(), binary()} => float()}}).

%% @doc Starts the detector (msgflow_sup's child).
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, [], []).

%% @doc The `/metrics' families of the roots standing and the seconds
%% waiters lost ([] when the detector is not running).
-spec families() -> [msgflow_view:family()].
families() ->
    case msgflow_call:call(?SERVER, families, [], 5000) of
        Fs when is_list(Fs) -> Fs;
        _ -> []
    end.

%% @doc The root causes standing, as the last evaluation found them.
-spec roots() -> [map()].
roots() ->
    case msgflow_call:call(?SERVER, roots, [], 5000) of
        Rs when is_list(Rs) -> Rs;
        _ -> []
    end.

-spec init([]) -> {ok, #st{}}.
init([]) ->
    %% what an evaluation runs, loaded now (loading makes atoms: not
    %% later, while someone counts them)
    _ = [code:ensure_loaded(M) || M <- [msgflow_query, msgflow_view, msgflow_bottlenecks_view, msgflow_workers,
                                       msgflow_rows, msgflow_rows_groups, msgflow_call_row, msgflow_store_index]],
    erlang:send_after(?POLL_MS, self(), poll),
    {ok, #st{}}.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call(families, _From, St) ->
    {reply, metric_families(St), St};
handle_call(roots, _From, St = #st{roots = Rs}) ->
    {reply, [C || {C, _} <- maps:values(Rs)], St};
handle_call(_, _From, St) ->
    {reply, {error, unknown_call}, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(poll, St) ->
    erlang:send_after(?POLL_MS, self(), poll),
    Now = erlang:monotonic_time(millisecond),
    case St#st.not_before =:= undefined orelse Now >= St#st.not_before of
        true -> {noreply, evaluate(Now, St)};
        false -> {noreply, St}
    end;
handle_info(_, St) ->
    {noreply, St}.

%% The view asked for; a new window's roots compared with those standing.
evaluate(Now, St) ->
    %% this node's own (each node's detector names its own roots); a
    %% glance unless a window closed since the last one evaluated
    V = try msgflow_query:run(bottlenecks, #{node => node(), after_window => St#st.window})
        catch _:_ -> {error, failed}
        end,
    Took = erlang:monotonic_time(millisecond) - Now,
    St1 = St#st{not_before = Now + 9 * Took},
    case V of
        #{running := true, started_at := Run} when Run =/= St#st.run ->
            %% a new run: what stood is forgotten, and its first window looked at
            evaluate(Now, St1#st{run = Run, window = 0, at = undefined, roots = #{}, blocked = #{}});
        #{running := true, window := N, causes := Cs} when N > St#st.window ->
            seen(Cs, Now, St1#st{window = N});
        _ ->
            St1
    end.

seen(Causes, Now, St = #st{roots = Old, at = At}) ->
    New = maps:from_list([{key(C), C} || C <- Causes]),
    [log(appeared, C) || {K, C} <- maps:to_list(New), not is_map_key(K, Old)],
    Kept = maps:fold(fun(K, {C, Missed}, Acc) ->
                             case is_map_key(K, New) of
                                 true -> Acc;
                                 false when Missed + 1 >= ?CLEAR_AFTER -> log(cleared, C), Acc;
                                 false -> Acc#{K => {C, Missed + 1}}
                             end
                     end, #{}, Old),
    Roots = maps:merge(Kept, maps:map(fun(_, C) -> {C, 0} end, New)),
    Secs = case At of
               undefined -> 0.0;
               _ -> (Now - At) / 1000
           end,
    St#st{roots = Roots, at = Now, blocked = lost(Causes, Secs, St#st.blocked)}.

key(#{verdict := V, subject := S, node := N}) -> {V, S, N}.

log(Event, C = #{verdict := V, subject := S, label := L, cost := Cost}) ->
    Report = #{msgflow => bottleneck, event => Event, verdict => V, subject => S, label => L,
               node => maps:get(node, C, node()), cost => Cost,
               summary => msgflow_bottlenecks_view:summary(C)},
    %% (no logger domain: the default handler logs only events of none or
    %% of OTP's)
    Meta = #{report_cb => fun report/1},
    case Event of
        appeared -> logger:warning(Report, Meta);
        cleared -> logger:notice(Report, Meta)
    end,
    %% and in the run's history, where the web page's time slider marks it
    msgflow_collector:mark(#{at => erlang:system_time(millisecond), event => Event, verdict => V,
                             label => L, subject => S}).

report(#{event := appeared, summary := S}) -> {"msgflow bottleneck: ~ts", [S]};
report(#{event := cleared, label := L, verdict := V}) ->
    {"msgflow bottleneck cleared: ~ts (~s)", [msgflow_fmt:visible(L), V]}.

%% The seconds each waiter label lost on each server label over Secs s,
%% added to Acc (series past ?MAX_WAIT_SERIES go to caller "other").
lost(Causes, Secs, Acc) ->
    Edges = lists:append([chain_edges(L, Ws) || #{label := L, waiters := Ws} <- Causes]),
    lists:foldl(fun({Caller, Server, S}, A) ->
                        K0 = {Caller, Server},
                        K = case is_map_key(K0, A) orelse map_size(A) < ?MAX_WAIT_SERIES of
                                true -> K0;
                                false -> {<<"other">>, Server}
                            end,
                        A#{K => maps:get(K, A, 0.0) + S * Secs}
                end, Acc, Edges).

chain_edges(Server, Waiters) ->
    lists:append([[{L, Server, S} | chain_edges(L, Inner)]
                  || #{label := L, seconds_per_s := S, waiters := Inner} <- Waiters]).

metric_families(#st{roots = Roots, blocked = B}) ->
    Standing = lists:sublist(lists:usort([{msgflow_fmt:visible(L), atom_to_binary(V)}
                                          || {#{label := L, verdict := V}, Missed} <- maps:values(Roots),
                                             Missed =:= 0]), ?MAX_ROOT_SERIES),
    [{<<"msgflow_bottleneck">>, gauge,
      <<"1 for each root cause msgflow names in the last window evaluated (bottlenecks view), by the label "
        "of its process and its verdict.">>,
      [{[{process, L}, {verdict, V}], 1} || {L, V} <- Standing]},
     {<<"msgflow_blocked_seconds_total">>, counter,
      <<"Seconds the processes of a label spent waiting on a server's label, from the root causes' chains "
        "since the run started (caller-seconds).">>,
      [{[{caller, msgflow_fmt:visible(C)}, {server, msgflow_fmt:visible(S)}], round(Secs * 1000) / 1000}
       || {{C, S}, Secs} <- lists:sort(maps:to_list(B))]}].
