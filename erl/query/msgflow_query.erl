%%% @doc The one query path: every view (msgflow_view), whoever asks for
%%% it (the shell, msgflow:view/2, the web page and `/metrics',
%%% msgflow-top's requests, the exports), is asked for here, and here
%%% only is it decided:
%%% <ul>
%%% <li>which options are allowed: the view's options/0, and for a view
%%%     built on every node (scope/0) `node' (`all', the default, or one
%%%     node msgflow counts on) and `timeout' (ms the other nodes have to
%%%     answer: by default 1000, or 30,000 for a value that holds every
%%%     pair, the view's wait/1), checked with msgflow_opts (one error
%%%     shape);</li>
%%% <li>where it is built: on this node alone while msgflow counts here
%%%     only; across a cluster on each node (each builds its part from its
%%%     own store, at the same time, in a process of its own: no server of
%%%     msgflow's runs a view), or on the one `node' names;</li>
%%% <li>what a node that does not answer means: its part is left out once
%%%     `timeout' ms have passed (or this node's part is done, when that is
%%%     later), the value says so (`missing', a list of `{Node, Reason}',
%%%     in a view whose value is a map), and a view that can stands in the
%%%     busiest pairs the node last reported (fallback/2);</li>
%%% <li>"not started": `{error, not_started}' when a view that reads the
%%%     counts is asked of nodes where msgflow never ran.</li>
%%% </ul>
%%% The parts are merged by the view (merge/3) into its typed value.
%%% text/3 and json/2 give the value as the view shows it.
-module(msgflow_query).

-export([run/2, run_all/1, text/3, json/2, options/1, range_options/0, ready/0, run_sized/1]).
%% what each node runs for a query (over erpc, in a process of its own)
-export([parts/1, labels/1]).

-define(TIMEOUT_MS, 1000).          %% default `timeout': ms other nodes have to answer
-define(FULL_TIMEOUT_MS, 30000).    %% ... for a value that holds every pair (wait/1: full)
-define(MAX_TIMEOUT_MS, 600000).

%% A query ready to run: its view's module, its checked options, the
%% nodes to ask.
-type prepared() :: #{name := msgflow_view:name(), mod := module(), opts := map(),
                      nodes := [node()], timeout := non_neg_integer()}.

%% @doc The value of view Name for options Opts (a map or a keyword
%% list), or `{error, Reason}': `{badarg, {view, Name}, Names}',
%% `{badopt, {Key, Value}, Allowed}', `not_started', or the view's own
%% (kinds: a pair without messages).
-spec run(term(), term()) -> term() | {error, term()}.
run(Name, Opts) ->
    [Result] = run_all([{Name, Opts}]),
    Result.

%% @doc Several queries at once (the web page's state): each node is
%% asked once, for all of them, from one snapshot; the values (or errors)
%% in the order asked.
-spec run_all([{term(), term()}]) -> [term() | {error, term()}].
run_all(Queries) ->
    [case R of
         {ok, _Prepared, Value} -> Value;
         {error, _} = E -> E
     end || R <- run_prepared([prepare(Name, Opts) || {Name, Opts} <- Queries])].

%% @doc The text of view Name in Area (columns and lines), as the shell
%% prints it; errors as run/2's.
-spec text(term(), term(), msgflow_view:area()) -> {ok, unicode:chardata()} | {error, term()}.
text(Name, Opts, Area) ->
    case run_prepared([prepare(Name, Opts)]) of
        [{ok, #{mod := Mod, opts := Valid}, Value}] -> {ok, Mod:text(Value, Valid, Area)};
        [{error, _} = E] -> E
    end.

%% @doc The value of view Name as JSON terms (msgflow_view:json()), as the
%% web server serves it; errors as run/2's.
-spec json(term(), term()) -> {ok, msgflow_view:json()} | {error, term()}.
json(Name, Opts) ->
    case run_prepared([prepare(Name, Opts)]) of
        [{ok, #{mod := Mod, opts := Valid}, Value}] -> {ok, Mod:json(Value, Valid)};
        [{error, _} = E] -> E
    end.

%% @doc The options view Name takes (its options/0 and, for a view built
%% on every node, `node' and `timeout'), each with its default and rule.
-spec options(msgflow_view:name()) -> {ok, msgflow_opts:schema()} | msgflow_opts:error().
options(Name) ->
    case msgflow_view:module(Name) of
        {ok, Mod} -> {ok, schema(Mod)};
        {error, _} = E -> E
    end.

%% @doc Fun() run in a process of its own sized for a value that holds
%% every pair of the store as it is now, and a view of every pair beside
%% it (msgflow_workers:run/3's `export'): where an export or a dump is
%% rendered.  Its value, or what it raises.
-spec run_sized(fun(() -> Result)) -> Result.
run_sized(Fun) ->
    Store = case msgflow_collector:store(false) of
                #{pairs := _} = S -> S;
                _ -> none
            end,
    msgflow_workers:run(Store, export, Fun).

%% @doc The views that can be asked for with no options (those that need
%% one, a pid or a pair, are left out): what a tool may show in turn.
-spec ready() -> [msgflow_view:name()].
ready() ->
    [N || N <- msgflow_view:names(), element(1, prepare(N, #{})) =:= ok].

%% @doc The options of a range of the kept history, which every view of
%% the counts takes (and the exports): `from' (none: the counts now), `to'
%% (now), `history' (`run': the run's directory, this node's windows; a
%% directory: every node's windows in it, read on this node); and `sync'
%% for the counts now (false: after a snapshot taken for the call while
%% the collector's merge is small, at once as the counts stand while it
%% is behind; true: after a snapshot taken for the call, however long).
-spec range_options() -> msgflow_opts:schema().
range_options() ->
    #{from => {none, time}, to => {now, time},
      history => {run, {either, [{one_of, [run]}, text]}},
      %% true: every send traced before the call is counted, however long
      %% the collector's merge takes (msgflow_collector:store/1)
      sync => {false, boolean}}.

schema(Mod) ->
    Own = case needs_store(Mod) of
              %% a time range of the history instead of the counts now
              %% (msgflow_history_range), of the run's `history' directory
              %% or another
              true -> maps:merge(Mod:options(), range_options());
              false -> Mod:options()
          end,
    case scope(Mod) of
        here -> Own;
        nodes -> Own#{node => {all, atom},
                      %% auto: as long as the view's value needs (timeout/2)
                      timeout => {auto, {either, [{one_of, [auto]},
                                                  {int, 1, ?MAX_TIMEOUT_MS, "ms"}]}}}
    end.

scope(Mod) ->
    case erlang:function_exported(Mod, scope, 0) of
        true -> Mod:scope();
        false -> nodes
    end.

%%% Preparing: the options checked, the nodes chosen

-spec prepare(term(), term()) -> {ok, prepared()} | msgflow_opts:error().
prepare(Name, Opts0) ->
    maybe_all([fun() -> msgflow_view:module(Name) end,
               fun(Mod) -> case msgflow_opts:check(schema(Mod), Opts0) of
                               {ok, O} -> {ok, {Mod, O}};
                               {error, _} = E -> E
                           end
               end,
               fun({Mod, O}) -> case erlang:function_exported(Mod, check, 1) of
                                    true -> case Mod:check(O) of
                                                {ok, O1} -> {ok, {Mod, O1}};
                                                {error, _} = E -> E
                                            end;
                                    false -> {ok, {Mod, O}}
                                end
               end,
               fun({Mod, O}) -> case where(Mod, O) of
                                    {ok, Nodes} ->
                                        {ok, #{name => Name, mod => Mod,
                                               opts => times(maps:without([node, timeout], O)),
                                               nodes => Nodes,
                                               timeout => timeout(Mod, O)}};
                                    {error, _} = E -> E
                                end
               end]).

%% A range's ends as system ms, read once (every node reads the same).
times(O = #{from := F}) when F =/= none ->
    O#{from := msgflow_opts:system_ms(F), to => msgflow_opts:system_ms(maps:get(to, O, now))};
times(O) ->
    O.

%% The ms the other nodes have: `timeout' when given, else (`auto') as
%% long as the view says its value needs (wait/1); a view built here
%% waits for no other node.
timeout(Mod, O) ->
    case maps:get(timeout, O, 0) of
        auto -> case wait(Mod, O) of
                    full -> ?FULL_TIMEOUT_MS;
                    interactive -> ?TIMEOUT_MS
                end;
        T -> T
    end.

%% What the view says its value is (its wait/1): `full' (every pair) or
%% `interactive' (the default).
wait(Mod, O) ->
    case erlang:function_exported(Mod, wait, 1) andalso Mod:wait(O) of
        full -> full;
        _ -> interactive
    end.

maybe_all([First | Steps]) ->
    lists:foldl(fun(_, {error, _} = E) -> E;
                   (Step, {ok, V}) -> Step(V)
                end, First(), Steps).

%% The nodes a query asks: this one for a view built here; else every
%% node msgflow counts on, or the one `node' names (an error names the
%% ones it may), or the ones the view knows its data is on.
where(Mod, Opts) ->
    All = [node() | msgflow_cluster:members()],
    case {scope(Mod), maps:get(node, Opts, all)} of
        {here, _} ->
            {ok, [node()]};
        {nodes, all} when is_map_key(from, Opts), map_get(from, Opts) =/= none,
                          map_get(history, Opts) =/= run ->
            %% a directory named: read here, every node's windows in it
            {ok, [node()]};
        {nodes, all} ->
            case erlang:function_exported(Mod, nodes, 2) of
                true -> {ok, Mod:nodes(Opts, All)};
                false -> {ok, All}
            end;
        {nodes, N} ->
            case lists:member(N, All) of
                true -> {ok, [N]};
                false -> {error, {badopt, {node, N}, [all | All]}}
            end
    end.

%%% Running: each node asked once, its parts awaited, merged

run_prepared(Prepared) ->
    Ready = [P || {ok, P} <- Prepared],
    Nodes = lists:usort(lists:append([Ns || #{nodes := Ns} <- Ready])),
    T0 = erlang:monotonic_time(millisecond),
    %% each node gets its queries in one request (one snapshot there)
    Asked = [{N, [{Name, Opts} || #{name := Name, opts := Opts, nodes := Ns} <- Ready,
                                  lists:member(N, Ns)]} || N <- Nodes],
    Remote = lists:foldl(fun({N, Qs}, Coll) -> erpc:send_request(N, ?MODULE, parts, [Qs], {N, Qs}, Coll) end,
                         erpc:reqids_new(), [A || A = {N, _} <- Asked, N =/= node()]),
    %% this node's parts are built meanwhile (the collector asked from this
    %% process, as msgflow's own processes ask it, untraced; each build in
    %% a process of its own); the others' are awaited until the deadline,
    %% or until this node's are done when that is later
    HereParts = [{node(), {ok, local_parts(Qs)}} || {N, Qs} <- Asked, N =:= node()],
    Deadline = T0 + lists:max([0 | [T || #{timeout := T} <- Ready]]),
    Answers = remote_responses(Remote, Deadline, maps:from_list(HereParts)),
    finish(Prepared, Answers, T0).

%% Each node's answer as it comes (in any order), its parts decoded at
%% once (decode/2: so that a big part, every pair of a node, is held
%% once on this node, not twice); a node that has not answered by the
%% deadline is `{error, timeout}'.
remote_responses(Coll, Deadline, Acc) ->
    case erpc:reqids_size(Coll) of
        0 ->
            Acc;
        _ ->
            try erpc:receive_response(Coll, {abs, Deadline}, true) of
                {Parts, {N, Qs}, Coll1} when is_list(Parts), length(Parts) =:= length(Qs) ->
                    remote_responses(Coll1, Deadline, Acc#{N => {ok, decoded(Qs, Parts)}});
                {Other, {N, _}, Coll1} ->
                    remote_responses(Coll1, Deadline, Acc#{N => {error, {bad_answer, Other}}})
            catch
                %% the deadline: every request left is abandoned
                error:{erpc, timeout} ->
                    timed_out(Coll, Acc);
                %% one node's failure: {Reason, Label, the requests left}
                error:{{erpc, Why}, {N, _}, Coll1} ->
                    remote_responses(Coll1, Deadline, Acc#{N => {error, Why}});
                C:{Why, {N, _}, Coll1} ->
                    remote_responses(Coll1, Deadline, Acc#{N => {error, {C, Why}}})
            end
    end.

timed_out(Coll, Acc) ->
    lists:foldl(fun({_, {N, _}}, A) -> A#{N => {error, timeout}} end, Acc,
                erpc:reqids_to_list(Coll)).

decoded(Qs, Parts) ->
    [case {P, msgflow_view:module(Name)} of
         {{ok, {encoded, E}}, {ok, Mod}} ->
             try {ok, Mod:decode(E, Opts)}
             catch C:Why -> {error, {bad_answer, {C, Why}}}
             end;
         _ -> P
     end || {{Name, Opts}, P} <- lists:zip(Qs, Parts)].

%% Each query's value from the parts of the nodes it asked, each node's
%% parts being in the order of the queries that node was asked.
finish(Prepared, Answers, T0) ->
    {Results, _} =
        lists:mapfoldl(
          fun({error, _} = E, Taken) ->
                  {E, Taken};
             ({ok, P = #{nodes := Ns}}, Taken) ->
                  {Got, Taken1} = take_parts(Ns, Answers, Taken),
                  {merge(P, Got, T0), Taken1}
          end, #{}, Prepared),
    Results.

%% The next part of each node of Ns (its answer's parts are used up in
%% the order its queries were asked): [{Node, {ok, Part} | {error, Why}}].
take_parts(Ns, Answers, Taken) ->
    lists:mapfoldl(fun(N, Acc) ->
                           I = maps:get(N, Acc, 1),
                           R = case maps:get(N, Answers) of
                                   {ok, Parts} -> lists:nth(I, Parts);
                                   {error, _} = E -> E
                               end,
                           {{N, R}, Acc#{N => I + 1}}
                   end, Taken, Ns).

merge(P = #{mod := Mod, opts := Opts, timeout := Timeout}, Got, T0) ->
    Answered = [Part || {_, {ok, Part}} <- Got],
    Missing = [{N, Why} || {N, {error, Why}} <- Got],
    case {Answered, [Why || {_, Why} <- Missing]} of
        {[], Whys} when Whys =/= [] ->
            case lists:usort(Whys) of
                %% every node's own answer: not started, or no history
                [not_started] -> {error, not_started};
                [Why = {no_history, _, _}] -> {error, Why};
                [Why = {badopt, {history, _}, _}] -> {error, Why};
                _ -> {error, {no_answer, Missing}}
            end;
        _ ->
            Stand = case Opts of
                        %% a range: never the counts now in its place
                        #{from := F} when F =/= none -> [];
                        _ -> fallbacks(Mod, Opts, Missing)
                    end,
            Deadline = T0 + Timeout,
            Ctx = #{missing => Missing,
                    labels => fun(Pids) -> remote_labels(Pids, [N || {N, _} <- Missing],
                                                          Deadline) end},
            %% a value of the nodes (a map) says which did not answer
            case {Mod:merge(Answered ++ Stand, Opts, Ctx), scope(Mod)} of
                {{error, _} = E, _} -> E;
                {Value, nodes} when is_map(Value) -> {ok, P, ranged(Opts, Value#{missing => Missing})};
                {Value, _} -> {ok, P, ranged(Opts, Value)}
            end
    end.

%% A value of a range of the history says which (the views' heads).
ranged(#{from := F, to := T}, Value) when is_map(Value), F =/= none ->
    Value#{range => #{from => F, to => T}};
ranged(_, Value) ->
    Value.

%% Parts made of the busiest pairs the nodes that did not answer last
%% reported (msgflow_cluster:last_top/1), for a view that can use them.
fallbacks(_, _, []) ->
    [];
fallbacks(Mod, Opts, Missing) ->
    case erlang:function_exported(Mod, fallback, 2) of
        true -> [Part || {N, _} <- Missing, Top <- [msgflow_cluster:last_top(N)], Top =/= none,
                         Part <- [Mod:fallback(Top, Opts)], Part =/= none];
        false -> []
    end.

%% The labels of remote processes, asked of their own nodes (a process
%% is named where it runs; not of the nodes that did not answer), by the
%% query's deadline (at least 500 ms).
remote_labels(Pids, Missing, Deadline) ->
    Members = msgflow_cluster:members() -- Missing,
    ByNode = maps:groups_from_list(fun node/1, [P || P <- Pids, is_pid(P),
                                                     lists:member(node(P), Members)]),
    Reqs = [erpc:send_request(N, ?MODULE, labels, [Ps]) || {N, Ps} <- maps:to_list(ByNode)],
    Until = max(Deadline, erlang:monotonic_time(millisecond) + 500),
    lists:foldl(fun(R, Acc) ->
                        try erpc:receive_response(R, {abs, Until}) of
                            L when is_map(L) -> maps:merge(Acc, L);
                            _ -> Acc
                        catch _:_ -> Acc
                        end
                end, #{}, Reqs).

%%% What each node runs

%% @doc This node's parts of several queries (what msgflow_query on the
%% asking node sends it, over erpc, in a process of its own): each query's
%% `{ok, Part}', or `{error, not_started}' when it reads the counts and
%% msgflow never ran here, or `{error, Reason}' (an unknown view, the
%% collector not answering).  The counts are read from one snapshot,
%% taken now.
-spec parts([{msgflow_view:name(), map()}]) -> [{ok, term()} | {error, term()}].
parts(Queries) ->
    ok = msgflow_flags:untrace_self(),
    [case {R, msgflow_view:module(Name)} of
         {{ok, Part}, {ok, Mod}} ->
             case erlang:function_exported(Mod, encode, 2) of
                 true -> {ok, {encoded, Mod:encode(Part, Opts)}};
                 false -> R
             end;
         _ -> R
     end || {{Name, Opts}, R} <- lists:zip(Queries, local_parts(Queries))].

local_parts(Queries) ->
    Mods = [{msgflow_view:module(Name), Opts} || {Name, Opts} <- Queries],
    Live = [M || {{ok, M}, O} <- Mods, needs_store(M), range(O) =:= none],
    Store = case Live of
                [] -> none;
                %% a snapshot first unless every view reads closed windows
                %% only; waited for however long only when one asks `sync'
                _ -> case lists:any(fun({_, O}) -> maps:get(sync, O, false) end, Mods) of
                         true -> msgflow_collector:store(sync);
                         false -> msgflow_collector:store(lists:any(fun needs_snapshot/1, Live))
                     end
            end,
    %% sized for the store unless every view says it keeps few terms
    Heap = case Store of
               #{pairs := _} -> case lists:all(fun small_heap/1, Mods) of
                                    true -> none;
                                    false -> Store
                                end;
               _ -> none
           end,
    %% every part in one process (its heap sized for the store once); a
    %% query asked twice (the web page's graph and pairs by process) is
    %% built once
    Unique = lists:usort(Mods),
    Wait = case lists:any(fun({{ok, M}, O}) -> wait(M, O) =:= full; (_) -> false end, Mods) of
               true -> full;
               false -> interactive
           end,
    Built = msgflow_workers:run(Heap, Wait, fun() ->
                                           %% a range read once for the queries that ask it
                                           {Parts, _} = lists:mapfoldl(
                                                          fun(Q = {M, Opts}, Ranges) ->
                                                                  {St, R1} = store_for(Opts, Store, Ranges),
                                                                  {{Q, part(M, Opts, St)}, R1}
                                                          end, #{}, Unique),
                                           Parts
                                   end),
    [proplists:get_value(Q, Built) || Q <- Mods].

%% The range of the history a query's options ask for, `{Dir, Nodes,
%% From, To}' (system ms; this node's windows in the run's history
%% directory, or every node's in the one `history' names), or `none' for
%% the counts now.
range(#{from := From, to := To} = Opts) when From =/= none ->
    {Dir, Nodes} = case maps:get(history, Opts, run) of
                       run -> case msgflow_collector:info_as_is() of
                                  #{opts := #{history := D}} when D =/= off -> {D, [node()]};
                                  _ -> {none, all}
                              end;
                       D -> {D, all}
                   end,
    {Dir, Nodes, From, To};
range(_) ->
    none.

%% The store a query reads: the counts now, or its range of the history
%% (read once per range; its tables this process's).
store_for(Opts, Live, Ranges) ->
    case range(Opts) of
        none -> {Live, Ranges};
        {none, _, _, _} ->
            {{error, {badopt, {history, run},
                      [<<"a directory: this node's run keeps no history (start/1's history option)">>]}},
             Ranges};
        Key = {Dir, Nodes, From, To} ->
            case Ranges of
                #{Key := St} -> {St, Ranges};
                _ ->
                    St = case msgflow_history_range:store(Dir, Nodes, From, To) of
                             {ok, H} -> H;
                             {error, _} = E -> E
                         end,
                    {St, Ranges#{Key => St}}
            end
    end.

%% Called in the process msgflow_workers:run/3 gives.
part({error, _} = E, _, _) ->
    E;
part({ok, Mod}, Opts, Store) ->
    case {needs_store(Mod), Store} of
        {true, undefined} -> {error, not_started};
        {true, {error, _} = E} -> E;
        {true, _} -> {ok, Mod:build(Store, Opts)};
        {false, _} -> {ok, Mod:build(none, Opts)}
    end.

%% Whether a view's build keeps few terms (its heap/1): its process
%% starts on the default heap.
small_heap({{ok, Mod}, O}) ->
    erlang:function_exported(Mod, heap, 1) andalso Mod:heap(O) =:= small;
small_heap(_) ->
    true.

needs_store(Mod) ->
    not erlang:function_exported(Mod, store, 0) orelse Mod:store().

needs_snapshot(Mod) ->
    not erlang:function_exported(Mod, fresh, 0) orelse Mod:fresh().

%% @doc The labels of these local processes, as this node gives them
%% (for another node's view: a process is named where it runs).
-spec labels([pid()]) -> #{pid() => binary()}.
labels(Pids) ->
    ok = msgflow_flags:untrace_self(),
    maps:from_list([{P, msgflow_describe:label(P)} || P <- Pids, is_pid(P), node(P) =:= node()]).
