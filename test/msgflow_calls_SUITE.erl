%%% Round trips of calls (issue 25): a server whose handle_call sleeps a
%%% known time per request tag, called by one client with every call
%%% sampled (`call_sample => 1'): exact call counts, as many round trips as
%%% calls, p50 in the histogram's bucket of the known time, `unanswered'
%%% exact for calls that time out on purpose; with 1 in 4 sampled, a
%%% quarter of the calls; with `call_sample => off', none.  Barriers:
%%% msgflow_collector:await_windows/2 (the sweep of unanswered calls runs
%%% with each snapshot) and msgflow:stop/0; cases run in sequence.
-module(msgflow_calls_SUITE).
-behaviour(gen_server).
-include_lib("stdlib/include/assert.hrl").
-include_lib("common_test/include/ct.hrl").
-export([all/0, groups/0, init_per_suite/1, end_per_suite/1]).
-export([round_trips/1, sampled_one_in_four/1, off/1, printed/1, exports/1, cluster/1,
         peer_client/3]).
-export([init/1, handle_call/3, handle_cast/2]).

-define(SLOW, 10).      %% calls of {slow, 20}
-define(FAST, 200).     %% calls of fast
-define(NEVER, 3).      %% calls the server never answers (timeout 50 ms)

all() ->
    [{group, calls}].

groups() ->
    [{calls, [sequence], [round_trips, sampled_one_in_four, off, printed, exports, cluster]}].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Config.

end_per_suite(_Config) ->
    _ = msgflow:stop(),
    ok.

init([]) -> {ok, 0}.
handle_call({slow, Ms}, _From, N) -> timer:sleep(Ms), {reply, ok, N + 1};
handle_call(fast, _From, N) -> {reply, ok, N + 1};
handle_call(never, _From, N) -> {noreply, N}.
handle_cast(_, N) -> {noreply, N}.

%% The server (registered `calls_srv') and a client making the calls when
%% told; only they are traced.  Returns the view once the unanswered calls
%% are past call_timeout (200 ms) and swept.
run(Sample) ->
    {ok, Srv} = gen_server:start({local, calls_srv}, ?MODULE, [], []),
    Self = self(),
    Client = spawn(fun() ->
                           receive go -> ok end,
                           [ok = gen_server:call(calls_srv, {slow, 20}) || _ <- lists:seq(1, ?SLOW)],
                           [ok = gen_server:call(Srv, fast) || _ <- lists:seq(1, ?FAST)],
                           [{'EXIT', {timeout, _}} = catch gen_server:call(Srv, never, 50)
                            || _ <- lists:seq(1, ?NEVER)],
                           Self ! {done, self()},
                           receive stop -> ok end
                   end),
    ok = msgflow:start(#{procs => [Client, Srv], call_sample => Sample, call_timeout => 200,
                         interval => 100}),
    Client ! go,
    receive {done, Client} -> ok end,
    %% past call_timeout: three windows of 100 ms, each with its snapshot
    ok = msgflow_collector:await_windows(3, 10000),
    ok = msgflow:stop(),
    View = msgflow:view(calls, #{}),
    Client ! stop,
    gen_server:stop(Srv),
    {Client, Srv, View}.

by_tag(#{entries := Es}) ->
    maps:from_list([{T, E} || E = #{tag := T} <- Es]).

%% Every call sampled: as many round trips as calls, the slow ones' p50 in
%% the bucket of 20 ms, the unanswered ones exact.
round_trips(_Config) ->
    {Client, Srv, View} = run(1),
    #{slow := Slow, fast := Fast, never := Never} = Tags = by_tag(View),
    ?assertEqual(3, map_size(Tags)),
    ?assertMatch(#{caller := Client, server := Srv, kind := call, server_label := <<"calls_srv">>},
                 Slow),
    ?assertMatch(#{calls := ?SLOW, sampled := ?SLOW, unanswered := 0}, Slow),
    ?assertMatch(#{calls := ?FAST, sampled := ?FAST, unanswered := 0}, Fast),
    ?assertMatch(#{calls := ?NEVER, sampled := 0, unanswered := ?NEVER, p50 := undefined}, Never),
    %% 20 ms of sleep take 20 to 22 ms: one bucket, [16.8, 25.2) ms
    Buckets = msgflow_tracer:call_buckets(),
    [{Lo, Hi}] = [B || B = {L, H} <- Buckets, L =< 20000000, H =/= infinity, 22000000 < H],
    ?assertEqual((Lo + Hi) / 2000, maps:get(p50, Slow)),
    ?assert(maps:get(p99, Slow) >= maps:get(p50, Slow)),
    ?assert(maps:get(max, Slow) >= maps:get(p99, Slow)),
    %% the fast ones return at once: well under the slow ones
    ?assert(maps:get(p50, Fast) < 1000),
    %% total wait orders them: the slow ones first
    #{entries := [#{tag := slow} | _]} = View,
    %% hotspots: with p99 of 10 ms or more called slow, the slow edge only
    Found = [F || F = #{kind := slow_calls} <- msgflow:view(hotspots, #{slow_call_ms => 10})],
    ?assertMatch([#{subject := {Client, Srv, call, slow}, label := <<_/binary>>,
                    evidence := #{p99_us := _, calls := ?SLOW}}], Found),
    ?assertEqual([], [F || F = #{kind := slow_calls} <- msgflow:view(hotspots, #{})]),
    ok.

%% 1 in 4 calls sampled on this one client's thread(s): a quarter of each
%% tag's calls (within the one that may straddle), exact call counts.
sampled_one_in_four(_Config) ->
    {_, _, View} = run(4),
    #{slow := Slow, fast := Fast} = by_tag(View),
    ?assertMatch(#{calls := ?SLOW}, Slow),
    ?assertMatch(#{calls := ?FAST}, Fast),
    Sampled = maps:get(sampled, Slow) + maps:get(sampled, Fast)
        + maps:get(unanswered, maps:get(never, by_tag(View), #{unanswered => 0})),
    %% a thread counts down its own calls: with the client on one or two
    %% schedulers, (213 - 1) div 4 to 213 div 4 + 2 of them
    ?assert(Sampled >= (?SLOW + ?FAST + ?NEVER) div 4 - 1),
    ?assert(Sampled =< (?SLOW + ?FAST + ?NEVER) div 4 + 2),
    ok.

%% Off: no round trips, and the counts as ever.
off(_Config) ->
    {_, _, View} = run(off),
    ?assertMatch(#{entries := [], sample := off}, View),
    ok.

%% The JSON export (read by jq) and the ETF dump (version 5, read by
%% msgflow-report) carry the call edges.
exports(Config) ->
    _ = run(1),
    Dir = ?config(priv_dir, Config),
    Json = filename:join(Dir, "calls.json"),
    Etf = filename:join(Dir, "calls.etf"),
    ok = msgflow:export(Json, json),
    ok = msgflow:export(Etf, etf),
    {0, Rows} = msgflow_test_io:run(os:find_executable("jq"),
                                    ["-r", ".calls[] | [.server_label, .tag, .calls, .sampled, "
                                     ".unanswered] | @tsv", Json], []),
    ?assertEqual(["calls_srv\tfast\t200\t200\t0", "calls_srv\tnever\t3\t0\t3",
                  "calls_srv\tslow\t10\t10\t0"],
                 lists:sort(string:split(string:trim(binary_to_list(Rows)), "\n", all))),
    #{version := 5, calls := Calls} = binary_to_term(element(2, file:read_file(Etf))),
    ?assertEqual(3, length(Calls)),
    {0, Out} = msgflow_test_io:run(msgflow_test_io:tool("msgflow-report"), [Etf, "--top", "5"], []),
    ct:log("~s", [Out]),
    ?assertMatch({match, _}, re:run(Out, "call edges: 3, round trips of sampled calls")),
    ?assertMatch({match, _}, re:run(Out, "calls_srv +call slow +10 +10 +21\\.0ms")),
    ?assertMatch({match, _}, re:run(Out, "calls_srv +call never +3 +0 +- +- +- +3")),
    %% the CSV's call_rtt_us, from msgflow and from msgflow-report alike
    Csv = filename:join(Dir, "calls.csv"),
    CCsv = filename:join(Dir, "calls_c.csv"),
    ok = msgflow:export(Csv, csv),
    {0, _} = msgflow_test_io:run(msgflow_test_io:tool("msgflow-report"), [Etf, "--csv", CCsv], []),
    Rtt = fun(F) ->
                  {ok, B} = file:read_file(F),
                  [H | Ls] = string:split(string:trim(B), "\n", all),
                  ?assertMatch({_, _}, binary:match(H, <<",kinds,call_rtt_us">>)),
                  %% the rows to the server (its label the fourth field)
                  [lists:last(Fs) || L <- Ls, Fs <- [string:split(L, ",", all)],
                                     lists:nth(4, Fs) =:= <<"calls_srv">>]
          end,
    [Line] = Rtt(Csv),
    ?assertMatch({match, _}, re:run(Line, "^fast:[0-9]+:[0-9]+ slow:20972:20972$")),
    ?assertEqual([Line], Rtt(CCsv)),
    ok.

%% Across a cluster: calls on a peer node (client and server there) and
%% here are each measured where they run, and view(calls) adds them up.
cluster(_Config) ->
    {Peer, Node} = msgflow_SUITE:cluster_peer(true),
    try
        _ = msgflow:stop(),
        {ok, Here} = gen_server:start(?MODULE, [], []),
        {ok, There} = erpc:call(Node, gen_server, start, [?MODULE, [], []]),
        ok = msgflow:start(#{nodes => all, call_sample => 1, interval => 200}),
        Self = self(),
        C1 = erpc:call(Node, ?MODULE, peer_client, [There, 30, Self]),
        C2 = peer_client(Here, 20, Self),
        [receive {called, C} -> ok end || C <- [C1, C2]],
        ok = msgflow:stop(),
        #{entries := Es} = msgflow:view(calls, #{}),
        %% the clients exited: their edges are their groups', on their nodes
        NodeOf = fun({exited, _, N}) -> N; (P) -> node(P) end,
        Fast = lists:sort([{NodeOf(C), NodeOf(S), N, Sa} || #{caller := C, server := S, tag := fast,
                                                           calls := N, sampled := Sa} <- Es]),
        ?assertEqual(lists:sort([{Node, Node, 30, 30}, {node(), node(), 20, 20}]), Fast)
    after
        _ = msgflow:stop(),
        peer:stop(Peer)
    end.

%% Run on a node: N fast calls to Server from a process of its own, then
%% {called, Pid} to Parent.
peer_client(Server, N, Parent) ->
    spawn(fun() -> [ok = gen_server:call(Server, fast) || _ <- lists:seq(1, N)],
                   Parent ! {called, self()} end).

%% calls/0 prints the edges, busiest total wait first.
printed(_Config) ->
    _ = run(1),
    Out = msgflow_test_io:capture(fun() -> ok = msgflow:calls() end),
    ct:log("~ts", [Out]),
    [Head, Cols, First, Second, Third] = string:split(string:trim(Out, trailing), "\n", all),
    ?assertMatch({match, _}, re:run(Head, "^msgflow stopped: 3 call edges by process, round trips of every call")),
    ?assertMatch({match, _}, re:run(Cols, "^CALLER +SERVER +CALL +CALLS +SAMPLED +P50 +P99 +MAX +UNANS$")),
    ?assertMatch({match, _}, re:run(First, "calls_srv +call slow +10 +10 +21\\.0ms")),
    ?assertMatch({match, _}, re:run(Second, "calls_srv +call fast +200 +200 ")),
    ?assertMatch({match, _}, re:run(Third, "calls_srv +call never +3 +0 +- +- +- +3$")),
    %% top's rows of calls show their round trips' p99 from 120 columns on
    Top = iolist_to_binary(msgflow_text:top(msgflow:view(top, #{limit => 5}), 120)),
    ct:log("~ts", [Top]),
    ?assertMatch({match, _}, re:run(Top, "PEAK/S CALL P99  KIND")),
    ?assertMatch({match, _}, re:run(Top, "calls_srv .* 21\\.0ms  call fast")),
    Narrow = iolist_to_binary(msgflow_text:top(msgflow:view(top, #{limit => 5}), 80)),
    ?assertEqual(nomatch, re:run(Narrow, "P99")),
    ok.
