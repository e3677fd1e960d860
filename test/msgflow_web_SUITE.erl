%%% msgflow's web page and /metrics (issue 24), on a workload of known
%%% counts (only its processes traced, msgflow:stop/0 or
%%% erlang:trace_delivered/1 and a snapshot as the barriers):
%%% <ul>
%%% <li>browser: Debian's Chromium, driven headless by playwright-core
%%%     (test/web/browser.js, installed by the build into _build/npm),
%%%     loads the live page: the graph has the workload's groups and edges
%%%     with their counts, the top table is top/2's, an update arrives after
%%%     new traffic, clicking a group opens its members, a process named
%%%     `<img src=x onerror=alert(1)>' shows as those characters (no image,
%%%     no dialog), and the static export shows the same graph with the
%%%     server stopped.  Screenshots under _build/web/;</li>
%%% <li>requests: bad paths and parameters get 400/404, other methods 405,
%%%     and the server and msgflow go on;</li>
%%% <li>prometheus: /metrics passes `promtool check metrics', and a real
%%%     Prometheus server (Debian's) scrapes it and returns the series
%%%     through its query API.</li>
%%% </ul>
-module(msgflow_web_SUITE).
-include_lib("stdlib/include/assert.hrl").
-include_lib("common_test/include/ct.hrl").
-export([all/0, groups/0, init_per_suite/1, end_per_suite/1, init_per_testcase/2,
         end_per_testcase/2]).
-export([browser/1, browser_history/1, browser_bottlenecks/1, requests/1, prometheus/1, options/1, cluster/1, own_traffic/1,
         hosts_and_origins/1, tokens/1, computations/1, slow_clients/1]).
-export([sink/0, sender/3, store_loop/1]).

-define(EVIL, '<img src=x onerror=alert(1)>').
-define(SRC_SENDS, 120).
-define(EVIL_SENDS, 7).
-define(CALLS, 40).
-define(MORE, 30).

all() ->
    [{group, web}].

groups() ->
    [{web, [], [options, requests, browser, browser_history, browser_bottlenecks, prometheus, cluster,
                own_traffic, hosts_and_origins, tokens, computations, slow_clients]}].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    {ok, _} = application:ensure_all_started(inets),
    Config.

end_per_suite(_Config) ->
    _ = msgflow:stop(),
    ok.

init_per_testcase(_, Config) ->
    _ = msgflow:web_stop(),
    Config.

end_per_testcase(_, _Config) ->
    _ = msgflow:web_stop(),
    [msgflow_test_lib:quietly(fun() -> exit(whereis(N), kill) end)
     || N <- [web_sink, web_src, web_store, web_client, ?EVIL]],
    ok.

%% The workload: `web_src' sends ?SRC_SENDS messages to `web_sink',
%% ?EVIL sends ?EVIL_SENDS, `web_client' makes ?CALLS gen_server-style
%% calls to `web_store' (a call and a reply each).  Only those are traced;
%% returns when all is counted (stop/0 takes the last snapshot).
workload() ->
    Self = self(),
    Sink = spawn(?MODULE, sink, []),
    register(web_sink, Sink),
    Store = spawn(?MODULE, store_loop, [0]),
    register(web_store, Store),
    Src = spawn(?MODULE, sender, [web_src, Sink, Self]),
    Evil = spawn(?MODULE, sender, [?EVIL, Sink, Self]),
    Client = spawn(fun() ->
                           register(web_client, self()),
                           receive go -> ok end,
                           [pong = gen_server:call(web_store, ping) || _ <- lists:seq(1, ?CALLS)],
                           Self ! {done, self()},
                           receive stop -> ok end
                   end),
    [receive {named, P} -> ok end || P <- [Src, Evil]],
    wait_registered(web_client),
    ok = msgflow:start(#{procs => [Src, Evil, Client, Store], interval => 300}),
    Src ! {go, ?SRC_SENDS},
    Evil ! {go, ?EVIL_SENDS},
    Client ! go,
    [receive {done, P} -> ok end || P <- [Src, Evil, Client]],
    {Src, Evil, Client, Store}.

wait_registered(Name) ->
    case whereis(Name) of
        undefined -> timer:sleep(5), wait_registered(Name);
        _ -> ok
    end.

sink() ->
    receive _ -> sink() end.

sender(Name, Sink, Tester) ->
    register(Name, self()),
    Tester ! {named, self()},
    sender_loop(Sink, Tester).

sender_loop(Sink, Tester) ->
    receive
        {go, N} ->
            [Sink ! {hello, I} || I <- lists:seq(1, N)],
            Tester ! {done, self()},
            sender_loop(Sink, Tester)
    end.

store_loop(N) ->
    receive
        {'$gen_call', From, ping} -> gen_server:reply(From, pong), store_loop(N + 1)
    end.

%% A snapshot with everything sent so far in it.
barrier(Pids) ->
    [begin Ref = erlang:trace_delivered(P), receive {trace_delivered, P, Ref} -> ok end end
     || P <- Pids],
    _ = msgflow:info(),
    ok.

%% Bad options name the offending value; a port in use is an error, not
%% a crash; a second start says where the first is.
options(_Config) ->
    %% before msgflow's application is started: web/1 starts it
    ok = application:stop(msgflow),
    {ok, _} = msgflow:web(#{port => 0}),
    ok = msgflow:web_stop(),
    ?assertMatch({error, {badopt, {port, -1}, [_]}}, msgflow:web(#{port => -1})),
    ?assertMatch({error, {badopt, {ip, "0.0.0.0"}, [_]}}, msgflow:web(#{ip => "0.0.0.0"})),
    ?assertMatch({error, {badopt, {colour, red}, [_ | _]}}, msgflow:web(#{colour => red})),
    {ok, Url} = msgflow:web(#{port => 0}),
    ?assertMatch("http://127.0.0.1:" ++ _, Url),
    ?assertEqual({error, {already_started, Url}}, msgflow:web(#{port => 0})),
    ok = msgflow:web_stop(),
    ?assertEqual({error, not_started}, msgflow:web_stop()),
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Port} = inet:port(L),
    try
        ?assertMatch({error, {eaddrinuse, {port, Port}}}, msgflow:web(#{port => Port}))
    after
        gen_tcp:close(L)
    end,
    ?assertEqual(undefined, whereis(msgflow_web)).

%% What a request may not do: no crash of the server or of msgflow, and
%% the page still answers.
requests(_Config) ->
    {ok, Url} = msgflow:web(#{port => 0}),
    %% before any run: the page loads, its state says why there is none
    {200, _, Page} = http_get(Url),
    ?assertNotEqual(nomatch, binary:match(Page, <<"vendor/cytoscape.min.js">>)),
    _ = msgflow:stop(),
    {Src, Evil, Client, Store} = workload(),
    barrier([Src, Evil, Client, Store]),
    {200, _, _} = http_get(Url ++ "api/state"),
    {200, _, <<"[", _/binary>>} = http_get(Url ++ "api/hotspots"),
    %% sent as they are (httpc would refuse or normalise some)
    [?assertEqual({Q, 400}, {Q, raw_status(Url, Q)})
     || Q <- ["/api/state?by=bogus", "/api/state?by=%ZZ", "/api/state?by=%C3%28",
              "/api/state?by=" ++ lists:duplicate(300, $a), "/api/state?by=name&by"]],
    [?assertEqual({P, 404}, {P, raw_status(Url, P)})
     || P <- ["/nope", "/www/../../etc/passwd", "/www/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/vendor/../../rebar.config",
              "/www/.hidden", "/api/statex", "/vendor/", "/www/msgflow.js%00.png"]],
    {ok, {{_, 405, _}, _, _}} = httpc:request(post, {Url ++ "api/state", [], "text/plain", "x"},
                                              [], [{body_format, binary}]),
    {200, Headers, Js} = http_get(Url ++ "www/msgflow.js"),
    ?assertEqual("text/javascript; charset=utf-8", proplists:get_value("content-type", Headers)),
    ?assert(byte_size(Js) > 1000),
    {200, _, _} = http_get(Url ++ "vendor/cytoscape.min.js"),
    %% the server and the run are still there, counts intact
    {200, _, State} = http_get(Url ++ "api/state?by=process"),
    ?assertNotEqual(nomatch, binary:match(State, <<"\"by\":\"process\"">>)),
    ok = msgflow:stop(),
    %% views by name read the store's groups, summed as deltas were merged:
    %% they hold what the pairs hold, grouped by their ends' labels
    #{rows := ByProcess, endpoints := Ends} = msgflow:view(top, #{limit => 1000}),
    Label = fun(K) -> maps:get(label, maps:get(K, Ends)) end,
    Regrouped = lists:foldl(fun(#{sender := S, receiver := R, count := C}, Acc) ->
                                    maps:update_with({Label(S), Label(R)}, fun(X) -> X + C end, C, Acc)
                            end, #{}, ByProcess),
    #{cells := Cells} = msgflow:view(matrix, #{by => name}),
    ?assertEqual(Regrouped, maps:map(fun(_, #{count := C}) -> C end, Cells)),
    %% and three `done' messages to this process
    ?assertEqual(?SRC_SENDS + ?EVIL_SENDS + 2 * ?CALLS + 3, maps:get(events, msgflow:info())),
    [P ! stop || P <- [Src, Evil, Client]].

%% msgflow never counts itself: with every new process traced, ten page
%% loads (each on a connection of its own, so each has a handler process
%% of httpd's, new, spawned by its acceptor) leave the counts exactly the
%% workload's; info() says how many of msgflow's own messages it left
%% out.  The client here is this process, not traced; its sockets are left
%% aside (legacy tracing's `new' takes new ports too).
own_traffic(_Config) ->
    {ok, Url} = msgflow:web(#{port => 0}),
    ok = msgflow:start(#{procs => new, interval => 100}),
    Self = self(),
    Sink = spawn(fun sink/0),
    Sender = spawn(fun() -> [Sink ! {hello, I} || I <- lists:seq(1, 50)], Self ! {done, self()} end),
    receive {done, Sender} -> ok end,
    %% who traced the sink while the run went on (see the log below)
    ct:log("new ~p~nsink ~p", [[erlang:trace_info(new, I) || I <- [tracer, flags]],
                               [erlang:trace_info(Sink, I) || I <- [tracer, flags]]]),
    Paths = ["/", "/api/state?by=process", "/api/state?by=name", "/api/hotspots", "/metrics"],
    Sockets = [page_load(Url, lists:nth(1 + I rem length(Paths), Paths)) || I <- lists:seq(1, 10)],
    ok = msgflow:stop(),
    %% msgflow's own processes kept the procs flag while it ran: none left
    ?assertEqual([], msgflow_test_lib:flagged()),
    Mine = fun(E) -> lists:member(E, Sockets) end,
    %% what to look at should the counts be wrong (seen once in a whole
    %% make test, after the cluster case)
    ct:log("pairs ~p~ninfo ~p~nnew ~p", [msgflow:pairs(), msgflow:info(),
                                        erlang:trace_info(new, tracer)]),
    ?assertEqual(lists:sort([{Sender, Sink, 50}, {Sender, Self, 1}]),
                 lists:sort([P || P = {S, R, _} <- msgflow:pairs(), not Mine(S), not Mine(R)])),
    #{own_left_out := Left} = msgflow:info(),
    ct:log("left out: ~p messages", [Left]),
    %% each load: at least the request's data from its socket to its handler
    ?assert(Left >= 10),
    %% a run of a list of processes, with a page load in it: no flag left
    ok = msgflow:start(#{procs => [Sink], interval => 100}),
    _ = page_load(Url, "/api/state?by=process"),
    ok = msgflow:stop(),
    ?assertEqual([], msgflow_test_lib:flagged()),
    %% the server started while a run traces every new process: none of
    %% httpd's processes is counted, from the first message of its start
    ok = msgflow:web_stop(),
    ok = msgflow:start(#{procs => new, interval => 100}),
    {ok, Url2} = msgflow:web(#{port => 0}),
    _ = page_load(Url2, "/"),
    ok = msgflow:stop(),
    #{rows := Rows, endpoints := Ends} = msgflow:view(top, #{by => process, limit => all}),
    Labels = lists:usort([maps:get(label, maps:get(E, Ends)) || #{sender := S, receiver := R} <- Rows,
                                                                 E <- [S, R]]),
    ?assertEqual([], [L || L <- Labels, binary:match(L, [<<"httpd">>, <<"inets">>, <<"msgflow">>]) =/= nomatch]),
    exit(Sink, kill).

%% A GET of Path on a connection of its own, read to its end; its socket.
%% The address as a tuple: a name would ask inet_gethost_native, whose
%% traffic is this process's, not msgflow's.
page_load(Url, Path) ->
    {ok, S} = gen_tcp:connect({127, 0, 0, 1}, port_of(Url), [binary, {active, false}]),
    ok = gen_tcp:send(S, ["GET ", Path, " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"]),
    {ok, <<"HTTP/1.1 200", _/binary>>} = gen_tcp:recv(S, 0, 30000),
    _ = read_to_end(S),
    gen_tcp:close(S),
    S.

read_to_end(S) ->
    case gen_tcp:recv(S, 0, 30000) of
        {ok, _} -> read_to_end(S);
        {error, closed} -> ok
    end.

%% The live page in Chromium: groups and edges with their counts, the top
%% table, an update, a click, the hostile name as text, the static export.
browser(Config) ->
    with_browser(fun(Node) -> browser(Config, Node) end).

%% Fun(NodeExecutable) when the browser test's tools are here, else a skip.
with_browser(Fun) ->
    Node = os:find_executable("node"),
    Driver = filename:join([root(), "_build", "npm", "node_modules", "playwright-core"]),
    case {Node, filelib:is_dir(Driver), os:find_executable("chromium")} of
        {false, _, _} -> msgflow_test_lib:skip("no node (make deps installs nodejs)");
        {_, false, _} -> msgflow_test_lib:skip("no playwright-core in _build/npm (tools/web/vendor.sh)");
        {_, _, false} -> msgflow_test_lib:skip("no chromium (make deps installs it)");
        {_, true, _} -> Fun(Node)
    end.

browser(Config, Node) ->
    Shots = filename:join([root(), "_build", "web"]),
    ok = filelib:ensure_path(Shots),
    _ = msgflow:stop(),
    {Src, Evil, Client, Store} = workload(),
    barrier([Src, Evil, Client, Store]),
    {ok, Url} = msgflow:web(#{port => 0}),
    B = browser_open(Node, Url, Shots),
    try
        #{<<"graph">> := G, <<"top">> := Top, <<"dialogs">> := 0, <<"images">> := 0,
          <<"error">> := null, <<"external">> := 0, <<"pageErrors">> := []} = step(B, "open"),
        Me = label(self()),
        Edges = edges(G),
        %% each worker also told this process once that it was done
        ?assertEqual(#{{<<"web_src">>, <<"web_sink">>} => ?SRC_SENDS,
                       {atom_to_binary(?EVIL), <<"web_sink">>} => ?EVIL_SENDS,
                       {<<"web_client">>, <<"web_store">>} => ?CALLS,
                       {<<"web_store">>, <<"web_client">>} => ?CALLS,
                       {<<"web_src">>, Me} => 1, {atom_to_binary(?EVIL), Me} => 1,
                       {<<"web_client">>, Me} => 1}, Edges),
        ?assertEqual(lists:sort([<<"web_src">>, <<"web_sink">>, atom_to_binary(?EVIL),
                                 <<"web_client">>, <<"web_store">>, Me]),
                     lists:sort([Id || #{<<"id">> := Id} <- maps:get(<<"groups">>, G)])),
        %% the top table is top/2's, row by row: labels and messages
        #{rows := Rows} = View = msgflow:view(top, #{limit => 10}),
        ?assertEqual([{msgflow_rows:display(View, S), msgflow_rows:display(View, R),
                       list_to_binary(msgflow_fmt:int(C))}
                      || #{sender := S, receiver := R, count := C} <- Rows],
                     [{S, R, C} || [_, S, R, C | _] <- Top]),
        %% the hostile name is there as its characters
        ?assert(lists:member([atom_to_binary(?EVIL), <<"web_sink">>, <<"7">>],
                             [[S, R, C] || [_, S, R, C | _] <- Top])),
        %% more traffic: the page updates by itself
        #{<<"updates">> := U0} = step(B, "wait " ++ json([<<"web_src", 0, "web_sink">>, ?SRC_SENDS])),
        Src ! {go, ?MORE},
        receive {done, Src} -> ok end,
        barrier([Src]),
        #{<<"updates">> := U1} = step(B, "wait " ++ json([<<"web_src", 0, "web_sink">>,
                                                           ?SRC_SENDS + ?MORE])),
        ?assert(U1 > U0),
        %% a click on a group opens its members
        #{<<"title">> := <<"web_sink">>, <<"members">> := [[SinkPid, <<"web_sink">>, <<"0">>, Got]]}
            = step(B, "click " ++ json(<<"web_sink">>)),
        ?assertEqual(list_to_binary(pid_to_list(whereis(web_sink))), SinkPid),
        ?assertEqual(list_to_binary(msgflow_fmt:int(?SRC_SENDS + ?MORE + ?EVIL_SENDS)), Got),
        #{<<"file">> := _} = step(B, "shot web-live"),
        %% a click on an edge: its kinds, its rate chart, its busiest pairs
        #{<<"title">> := <<"web_client \x{2192} web_store"/utf8>>, <<"kinds">> := [[<<"call">>, <<"ping">>, <<"40">>]],
          <<"chart">> := true, <<"pairs">> := [[ClientText, StoreText, <<"40">>]],
          <<"calls">> := [[<<"call ping">>, <<"40">>, Sampled, _P50, _P99, _Max, <<"0">>]]}
            = step(B, "clickedge " ++ json([<<"web_client">>, <<"web_store">>])),
        %% its round trips: 1 in 64 calls per scheduler thread, the first
        %% on each sampled: of 40 calls on one or two threads, 1 to 2
        ?assert(lists:member(Sampled, [<<"1">>, <<"2">>])),
        ?assertEqual(<<"web_client ", (list_to_binary(pid_to_list(Client)))/binary>>, ClientText),
        ?assertEqual(<<"web_store ", (list_to_binary(pid_to_list(Store)))/binary>>, StoreText),
        #{<<"file">> := _} = step(B, "shot web-edge"),
        %% the export, opened with the server gone, draws the same graph
        Html = filename:join(?config(priv_dir, Config), "msgflow.html"),
        ok = msgflow:export(Html, html),
        ok = msgflow:web_stop(),
        #{<<"graph">> := G2, <<"dialogs">> := 0, <<"images">> := 0, <<"external">> := 0,
          <<"pageErrors">> := []} = step(B, "static " ++ Html),
        ?assertEqual(Edges#{{<<"web_src">>, <<"web_sink">>} := ?SRC_SENDS + ?MORE,
                            {<<"web_src">>, Me} := 2}, edges(G2)),
        #{<<"file">> := _} = step(B, "shot web-static"),
        ct:log("screenshots: ~s/web-live.png, web-edge.png, web-static.png", [Shots])
    after
        _ = msgflow_test_lib:quietly(fun() -> port_command(B, "quit\n") end),
        msgflow_test_lib:quietly(fun() -> port_close(B) end)
    end,
    ok = msgflow:stop(),
    [P ! stop || P <- [Src, Evil, Client]].

%% The page colours the root red and the blocked orange (100 callers ->
%% front -> back, 2 ms a call), a click on a group draws its chain, and
%% the run's history marks where the root began on the time slider.
browser_bottlenecks(Config) ->
    with_browser(fun(Node) ->
                         Shots = filename:join([root(), "_build", "web"]),
                         ok = filelib:ensure_path(Shots),
                         _ = msgflow:stop(),
                         Dir = filename:join(?config(priv_dir, Config), "bottlenecks_history"),
                         ok = msgflow:start(#{interval => 300, history => #{dir => Dir}}),
                         Back = msgflow_planted:server(web_back, {sleep, 2}),
                         Front = msgflow_planted:server(web_front, {forward, web_back}),
                         Callers = msgflow_planted:callers(30, web_front, req),
                         {ok, Url} = msgflow:web(#{port => 0}),
                         B = browser_open(Node, Url, Shots),
                         try
                             #{<<"error">> := null} = step(B, "open"),
                             #{<<"roots">> := [<<"web_back">>], <<"blocked">> := Blocked, <<"chain">> := Chain}
                                 = step(B, "bottlenecks " ++ json(<<"web_front">>)),
                             ?assert(lists:member(<<"web_front">>, Blocked)),
                             ?assert(lists:member([<<"web_front">>, <<"web_back">>], Chain)),
                             #{<<"file">> := _} = step(B, "shot web-bottlenecks"),
                             %% the history marks where it began: a tick on the
                             %% time slider, and the list beside it shows the
                             %% range up to a minute after
                             #{<<"ticks">> := Ticks, <<"jump">> := [<<"1 bottleneck began">>, Entry],
                               <<"status">> := <<"history">>} = step(B, "marks " ++ json(<<"web_back">>)),
                             ?assertMatch([[_, <<"web_back">>]], Ticks),
                             ?assertMatch({match, _}, re:run(Entry, <<" web_back saturated$">>)),
                             #{<<"file">> := _} = step(B, "shot web-bottleneck-marks")
                         after
                             _ = msgflow_test_lib:quietly(fun() -> port_command(B, "quit\n") end),
                             msgflow_test_lib:quietly(fun() -> port_close(B) end),
                             ok = msgflow:web_stop(),
                             msgflow_planted:stop(Callers ++ [Front, Back])
                         end
                 end).

%% The page over the kept history: a range shows that range's edges, and
%% "compare with" lists what changed (msgflow_history_SUITE's workload:
%% two edges added, one removed, one doubled, ten the same).
browser_history(Config) ->
    with_browser(fun(Node) -> browser_history(Config, Node) end).

browser_history(Config, Node) ->
    Shots = filename:join([root(), "_build", "web"]),
    _ = msgflow:stop(),
    {T0, T1, T2} = msgflow_history_SUITE:record_ranges(filename:join(?config(priv_dir, Config), "h")),
    {ok, Url} = msgflow:web(#{port => 0}),
    B = browser_open(Node, Url, Shots),
    Edge = fun(I) -> {iolist_to_binary(["hs_s", integer_to_list(I)]),
                      iolist_to_binary(["hs_sink", integer_to_list(I)])} end,
    try
        #{<<"error">> := null} = step(B, "open"),
        %% the first range: edges 1..12, edge 11 and 12 300 messages
        #{<<"graph">> := G1, <<"status">> := <<"history">>, <<"history">> := true} =
            step(B, "range " ++ json([T0, T1])),
        E1 = edges(G1),
        ?assertEqual(lists:sort([Edge(I) || I <- lists:seq(1, 12)]), lists:sort(maps:keys(E1))),
        ?assertEqual([300, 300], [maps:get(Edge(I), E1) || I <- [11, 12]]),
        %% the second, compared with the first
        #{<<"graph">> := G2} = step(B, "range " ++ json([T1, T2])),
        ?assertEqual([600, 300, 200], [maps:get(Edge(I), edges(G2)) || I <- [12, 13, 14]]),
        #{<<"changes">> := Changes} = step(B, "compare before " ++ json([T0, T1])),
        ?assertEqual([[<<"appeared">>, <<"hs_s13">>, <<"hs_sink13">>],
                      [<<"appeared">>, <<"hs_s14">>, <<"hs_sink14">>],
                      [<<"vanished">>, <<"hs_s11">>, <<"hs_sink11">>],
                      [<<"changed">>, <<"hs_s12">>, <<"hs_sink12">>]],
                     [[C, S, R] || [C, S, R | _] <- Changes]),
        [Ratio] = [F || [<<"changed">>, _, _, _, _, F | _] <- Changes],
        %% twice the messages, over each range's own length (which a busy
        %% machine makes differ: msgflow_history_SUITE:range_diff), as
        %% the page writes it (one decimal)
        #{before := #{seconds := SecB}, 'after' := #{seconds := SecA}} =
            msgflow:diff(#{from => T0, to => T1}, #{from => T1, to => T2}),
        ?assert(abs(binary_to_float(string:trim(Ratio, trailing, "x")) - 2 * SecB / SecA) =< 0.051),
        #{<<"file">> := _} = step(B, "shot web-history")
    after
        _ = msgflow_test_lib:quietly(fun() -> port_command(B, "quit\n") end),
        msgflow_test_lib:quietly(fun() -> port_close(B) end),
        ok = msgflow:web_stop()
    end.

label(Pid) ->
    msgflow_rows:display(msgflow:view(top, #{limit => 10}), Pid).

edges(#{<<"edges">> := Es}) ->
    maps:from_list([{{S, R}, C} || #{<<"s">> := S, <<"r">> := R, <<"count">> := C} <- Es]).

browser_open(Node, Url, Shots) ->
    open_port({spawn_executable, Node},
              [{args, [filename:join([root(), "test", "web", "browser.js"]), Url, Shots]},
               {env, [{"NODE_PATH", filename:join([root(), "_build", "npm", "node_modules"])}]},
               {line, 1 bsl 20}, use_stdio, binary, exit_status]).

%% One step of browser.js: its JSON answer.
step(B, Line) ->
    port_command(B, [Line, "\n"]),
    Answer = read_line(B, []),
    ct:log("~s -> ~ts", [Line, Answer]),
    case decode(Answer) of
        #{<<"error">> := E} = M when is_binary(E), not is_map_key(<<"graph">>, M) ->
            ct:fail({browser, Line, E});
        M -> M
    end.

read_line(B, Acc) ->
    receive
        {B, {data, {noeol, D}}} -> read_line(B, [Acc, D]);
        {B, {data, {eol, D}}} -> iolist_to_binary([Acc, D]);
        {B, {exit_status, S}} -> ct:fail({browser_exited, S})
    after 60000 -> ct:fail(browser_timeout)
    end.

%% /metrics: promtool accepts it, and Prometheus scrapes it.
prometheus(Config) ->
    case {os:find_executable("promtool"), os:find_executable("prometheus")} of
        {false, _} -> msgflow_test_lib:skip("no promtool (make deps installs prometheus)");
        {_, false} -> msgflow_test_lib:skip("no prometheus (make deps installs it)");
        {Promtool, Prom} -> prometheus(Config, Promtool, Prom)
    end.

prometheus(Config, Promtool, Prom) ->
    Dir = ?config(priv_dir, Config),
    _ = msgflow:stop(),
    {Src, Evil, Client, Store} = workload(),
    ok = msgflow:stop(),
    {ok, Url} = msgflow:web(#{port => 0, metrics_edges => 2}),
    {200, Headers, Text} = http_get(Url ++ "metrics"),
    ?assertEqual("text/plain; version=0.0.4; charset=utf-8",
                 proplists:get_value("content-type", Headers)),
    Lines = binary:split(Text, <<"\n">>, [global, trim]),
    %% the two busiest edges, one kind each, the rest in `other'
    [First, Second, Other] = [L || <<"msgflow_messages_total{", _/binary>> = L <- Lines],
    ?assertEqual(<<"msgflow_messages_total{sender=\"web_src\",receiver=\"web_sink\",kind=\"info\"} 120">>,
                 First),
    ?assert(lists:member(Second,
                         [<<"msgflow_messages_total{sender=\"web_client\",receiver=\"web_store\",kind=\"call\"} 40">>,
                          <<"msgflow_messages_total{sender=\"web_store\",receiver=\"web_client\",kind=\"reply\"} 40">>])),
    ?assertEqual(<<"msgflow_messages_total{sender=\"other\",receiver=\"other\",kind=\"other\"} ",
                   (integer_to_binary(?CALLS + ?EVIL_SENDS + 3))/binary>>, Other),
    Events = ?SRC_SENDS + ?EVIL_SENDS + 2 * ?CALLS + 3,
    ?assert(lists:member(<<"msgflow_events_total ", (integer_to_binary(Events))/binary>>, Lines)),
    File = filename:join(Dir, "metrics.txt"),
    ok = file:write_file(File, Text),
    {0, Check} = msgflow_test_io:run(os:find_executable("sh"), ["-c", Promtool ++ " check metrics < " ++ File], []),
    ct:log("promtool: ~s", [Check]),
    %% a real Prometheus scrapes it every second
    PromPort = free_port(),
    Conf = filename:join(Dir, "prometheus.yml"),
    ok = file:write_file(Conf, io_lib:format(
        "global:~n  scrape_interval: 1s~nscrape_configs:~n  - job_name: msgflow~n"
        "    static_configs:~n      - targets: ['127.0.0.1:~b']~n", [port_of(Url)])),
    P = open_port({spawn_executable, Prom},
                  [{args, ["--config.file=" ++ Conf, "--storage.tsdb.path=" ++ filename:join(Dir, "tsdb"),
                           "--web.listen-address=127.0.0.1:" ++ integer_to_list(PromPort)]},
                   exit_status, stderr_to_stdout, binary]),
    {os_pid, OsPid} = erlang:port_info(P, os_pid),
    try
        Q = "http://127.0.0.1:" ++ integer_to_list(PromPort) ++ "/api/v1/query?query="
            ++ uri_string:quote("msgflow_messages_total{sender=\"web_src\"}"),
        Result = poll(fun() ->
                              case httpc:request(get, {Q, []}, [], [{body_format, binary}]) of
                                  {ok, {{_, 200, _}, _, Body}} ->
                                      case binary:match(Body, <<"\"web_sink\"">>) of
                                          nomatch -> false;
                                          _ -> {true, Body}
                                      end;
                                  _ -> false
                              end
                      end, 300),
        ct:log("prometheus answered: ~s", [Result]),
        ?assertNotEqual(nomatch, binary:match(Result, <<"\"120\"]">>))
    after
        os:cmd("kill " ++ integer_to_list(OsPid)),
        msgflow_test_lib:quietly(fun() -> port_close(P) end)
    end,
    [Pid ! stop || Pid <- [Src, Evil, Client]],
    _ = Store,
    ok.

%% On a coordinator the page's state has every node with its status, and
%% the node-to-node traffic the matrix by node has.
cluster(_Config) ->
    {Peer, Node} = msgflow_test_lib:cluster_peer(true),
    try
        _ = msgflow:stop(),
        Sink = spawn(?MODULE, sink, []),
        ok = msgflow:start(#{nodes => all, interval => 300}),
        {ok, Url} = msgflow:web(#{port => 0}),
        Self = self(),
        P = erpc:call(Node, msgflow_test_lib, peer_send, [Self, Sink, 25]),
        receive {sent, P} -> ok end,
        ok = msgflow:stop(),
        {200, _, Body} = http_get(Url ++ "api/state"),
        #{<<"nodes">> := #{<<"status">> := Status, <<"traffic">> := Traffic}} = decode(Body),
        ?assertEqual(lists:sort([{atom_to_binary(N), <<"up">>} || N <- [node(), Node]]),
                     lists:sort([{N, St} || #{<<"node">> := N, <<"status">> := St} <- Status])),
        #{cells := Cells} = msgflow:view(matrix, #{by => node}),
        ?assertEqual(maps:from_list([{{atom_to_binary(S), atom_to_binary(R)}, C}
                                     || {{S, R}, #{count := C}} <- maps:to_list(Cells)]),
                     maps:from_list([{{S, R}, C} || #{<<"sender">> := S, <<"receiver">> := R,
                                                       <<"messages">> := C} <- Traffic])),
        %% the peer's 25 sends and its `sent' to this node are in it
        Me = node(),
        #{{Node, Me} := #{count := FromPeer}} = Cells,
        ?assert(FromPeer >= 26)
    after
        _ = msgflow:stop(),
        peer:stop(Peer)
    end.

poll(_, 0) -> ct:fail(prometheus_never_answered);
poll(F, N) ->
    case F() of
        {true, V} -> V;
        false -> timer:sleep(100), poll(F, N - 1)
    end.

%% A request naming another host (DNS rebinding), or coming from a page of
%% another origin, gets 403 on every path; the loopback names, any port,
%% and the names web/1's `hosts' adds are answered.
hosts_and_origins(_Config) ->
    {ok, Url} = msgflow:web(#{port => 0, hosts => ["Msgflow.Example"]}),
    Port = port_of(Url),
    Get = fun(Path, Headers) ->
                  {ok, {{_, Code, _}, _, _}} =
                      httpc:request(get, {"http://127.0.0.1:" ++ integer_to_list(Port) ++ Path, Headers},
                                    [], [{body_format, binary}]),
                  Code
          end,
    [?assertEqual({Path, Host, 403}, {Path, Host, Get(Path, [{"host", Host}])})
     || Path <- ["/", "/api/view?name=top", "/metrics", "/www/msgflow.js"],
        Host <- ["evil.test", "evil.test:" ++ integer_to_list(Port), "127.0.0.1.evil.test", ""]],
    [?assertEqual({Host, 200}, {Host, Get("/api/views", [{"host", Host}])})
     || Host <- ["localhost", "LOCALHOST:1", "127.0.0.1:" ++ integer_to_list(Port), "[::1]:8080",
                 "msgflow.example", "msgflow.example:443"]],
    ?assertEqual(403, Get("/api/views", [{"host", "localhost"}, {"origin", "http://evil.test"}])),
    ?assertEqual(403, Get("/api/views", [{"host", "localhost"}, {"origin", "null"}])),
    ?assertEqual(200, Get("/api/views", [{"host", "localhost"},
                                         {"origin", "http://127.0.0.1:" ++ integer_to_list(Port)}])).

%% Beyond loopback a token is required (an error says how to give one,
%% or to opt out); with one, every API path and /metrics need it as a
%% Bearer token, and the page and its files do not; a generated one comes
%% in the URL's fragment only; one from a file is its first line.
tokens(Config) ->
    {error, {badopt, {token, default}, [Why]}} = msgflow:web(#{port => 0, ip => {0, 0, 0, 0}}),
    ?assertNotEqual(nomatch, binary:match(Why, <<"token => generate">>)),
    ?assertEqual(undefined, whereis(msgflow_web)),
    {ok, Url} = msgflow:web(#{port => 0, token => generate}),
    [Base, "token=" ++ Token] = string:split(Url, "#"),
    ?assertEqual(32, length(Token)),
    Get = fun(Path, Headers) ->
                  {ok, {{_, Code, _}, Hs, _}} =
                      httpc:request(get, {Base ++ tl(Path), Headers}, [], [{body_format, binary}]),
                  {Code, proplists:get_value("www-authenticate", Hs)}
          end,
    [?assertEqual({Path, {401, "Bearer realm=\"msgflow\""}}, {Path, Get(Path, H)})
     || Path <- ["/api/views", "/api/view?name=top", "/metrics", "/api/state?by=name"],
        H <- [[], [{"authorization", "Bearer wrong"}], [{"authorization", "Basic " ++ Token}],
              [{"authorization", "Bearer " ++ Token ++ "x"}]]],
    %% (/metrics: 503 while msgflow was never started here, but no 401)
    [?assertMatch({Path, {C, _}} when C =:= 200; C =:= 503,
                  {Path, Get(Path, [{"authorization", "Bearer " ++ Token}])})
     || Path <- ["/api/views", "/metrics"]],
    ?assertMatch({200, _}, Get("/api/views", [{"authorization", "bearer " ++ Token}])),
    %% a request URI whose path is an API path by another spelling needs
    %% the token too
    [?assertEqual({Path, 401}, {Path, raw_status(Base, Path)})
     || Path <- ["http:/api/views", "//x/api/views", "https://x/metrics", "/metrics#x", "/api/../metrics"]],
    [?assertMatch({Path, {200, _}}, {Path, Get(Path, [])}) || Path <- ["/", "/www/msgflow.js"]],
    ok = msgflow:web_stop(),
    File = filename:join(?config(priv_dir, Config), "token"),
    ok = file:write_file(File, "s3cret-token\nignored\n"),
    {ok, Url2} = msgflow:web(#{port => 0, token => {file, File}}),
    ?assertEqual(nomatch, string:find(Url2, "#")),
    {ok, {{_, 200, _}, _, _}} = httpc:request(get, {Url2 ++ "api/views", [{"authorization", "Bearer s3cret-token"}]},
                                              [], []),
    {ok, {{_, 401, _}, _, _}} = httpc:request(get, {Url2 ++ "api/views", []}, [], []),
    ok = msgflow:web_stop(),
    {error, {badopt, {token, {file, "/nonexistent"}}, [_]}} = msgflow:web(#{port => 0, token => {file, "/nonexistent"}}),
    ok = file:write_file(File, "\n"),
    {error, {badopt, {token, {file, File}}, [_]}} = msgflow:web(#{port => 0, token => {file, File}}),
    %% beyond loopback without a token, when asked for
    {ok, _} = msgflow:web(#{port => 0, ip => {0, 0, 0, 0}, token => none}),
    ok.

%% Documents computed at once are capped: past 4, a request for another
%% gets 503 with Retry-After at once; a computation that dies (here
%% killed) gives its waiters an error, and the next request for it
%% computes anew.  (A source that waits to be told stands in for slow
%% views.)
computations(_Config) ->
    {ok, Url} = msgflow:web(#{port => 0}),
    Self = self(),
    Real = sys:get_state(msgflow_web),
    sys:replace_state(msgflow_web, fun(S) ->
                                           S#{source := fun(Request) ->
                                                                 Self ! {computing, self(), Request},
                                                                 receive go -> {ok, <<"{}">>} end
                                                         end}
                                   end),
    Ask = fun(Path) ->
                  spawn(fun() ->
                                {ok, {{_, Code, _}, Hs, Body}} =
                                    httpc:request(get, {Url ++ Path, []}, [], [{body_format, binary}]),
                                Self ! {answer, Path, Code, proplists:get_value("retry-after", Hs), Body}
                        end)
          end,
    Paths = ["api/view?name=top&limit=" ++ integer_to_list(I) || I <- lists:seq(1, 4)],
    _ = [Ask(P) || P <- Paths],
    %% each computation's worker by the limit its request asked for
    Workers = maps:from_list([receive {computing, W, {view, top, #{limit := L}}} -> {L, W} end || _ <- Paths]),
    %% (raw: httpc itself retries a 503 that has Retry-After)
    ?assertEqual({503, <<"1">>}, raw_status_retry(Url, "/api/view?name=top&limit=5")),
    %% one dies: its request gets an error; the others are answered
    exit(map_get(1, Workers), kill),
    receive {answer, P1, 500, _, Body1} when P1 =:= hd(Paths) ->
            ?assertNotEqual(nomatch, binary:match(Body1, <<"computation">>))
    after 60000 -> ct:fail(no_error)
    end,
    %% the computations alive count in own_memory
    Alive = [W || {L, W} <- maps:to_list(Workers), L =/= 1],
    #{workers_memory := WM} = msgflow:info(),
    ?assert(WM >= lists:sum([M || W <- Alive, {memory, M} <- [process_info(W, memory)]])),
    [W ! go || W <- Alive],
    [receive {answer, P, 200, _, _} -> ok after 60000 -> ct:fail({no_answer, P}) end || P <- tl(Paths)],
    %% and the next request for it computes anew
    _ = Ask(hd(Paths)),
    receive {computing, W2, _} -> W2 ! go after 60000 -> ct:fail(not_again) end,
    receive {answer, P2, 200, _, _} when P2 =:= hd(Paths) -> ok after 60000 -> ct:fail(no_answer) end,
    sys:replace_state(msgflow_web, fun(S) -> S#{source := maps:get(source, Real)} end),
    ok.

%% 50 clients that connect and send nothing, and one with a request line
%% longer than the server reads: the page still answers (httpd's limits
%% close the slow connections), and the long request gets 414.
slow_clients(_Config) ->
    {ok, Url} = msgflow:web(#{port => 0}),
    Port = port_of(Url),
    Slow = [begin {ok, S} = gen_tcp:connect("127.0.0.1", Port, [binary, {active, false}]), S end
            || _ <- lists:seq(1, 50)],
    ok = gen_tcp:send(hd(Slow), "GET /"),
    ?assertEqual(414, raw_status(Url, "/api/view?name=top&x=" ++ lists:duplicate(10000, $a))),
    Deadline = erlang:monotonic_time(millisecond) + 60000,
    ?assertEqual(200, until_answered(Url, Deadline)),
    [gen_tcp:close(S) || S <- Slow],
    ok.

%% 200 once the page is served, else the last answer at Deadline (503
%% while every connection httpd takes is held)
until_answered(Url, Deadline) ->
    R = case httpc:request(get, {Url, []}, [{timeout, 5000}], []) of
            {ok, {{_, Code, _}, _, _}} -> Code;
            {error, _} = E -> E
        end,
    case R =:= 200 orelse erlang:monotonic_time(millisecond) > Deadline of
        true -> R;
        false -> receive after 100 -> until_answered(Url, Deadline) end
    end.

free_port() ->
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, P} = inet:port(L),
    gen_tcp:close(L),
    P.

http_get(Url) ->
    {ok, {{_, Code, _}, Headers, Body}} = httpc:request(get, {Url, []}, [], [{body_format, binary}]),
    {Code, Headers, Body}.

%% The status of a GET of Path sent byte for byte.
raw_status(Url, Path) ->
    {ok, S} = gen_tcp:connect("127.0.0.1", port_of(Url), [binary, {active, false}]),
    ok = gen_tcp:send(S, ["GET ", Path, " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"]),
    {ok, <<"HTTP/1.1 ", Code:3/binary, _/binary>>} = gen_tcp:recv(S, 0, 10000),
    gen_tcp:close(S),
    binary_to_integer(Code).

%% The status and Retry-After of a GET of Path sent byte for byte.
raw_status_retry(Url, Path) ->
    {ok, S} = gen_tcp:connect("127.0.0.1", port_of(Url), [binary, {active, false}, {packet, http_bin}]),
    ok = gen_tcp:send(S, ["GET ", Path, " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"]),
    {ok, {http_response, _, Code, _}} = gen_tcp:recv(S, 0, 60000),
    Headers = raw_headers(S, []),
    gen_tcp:close(S),
    {Code, proplists:get_value('Retry-After', Headers)}.

raw_headers(S, Acc) ->
    case gen_tcp:recv(S, 0, 60000) of
        {ok, {http_header, _, Name, _, Value}} -> raw_headers(S, [{Name, Value} | Acc]);
        {ok, http_eoh} -> Acc
    end.

port_of(Url) ->
    #{port := P} = uri_string:parse(Url),
    P.

root() ->
    %% the suite runs from _build/.../logs; the repository is where rebar3 ran
    {ok, Cwd} = file:get_cwd(),
    find_root(Cwd).

find_root("/") -> error(no_repository_root);
find_root(Dir) ->
    case filelib:is_regular(filename:join(Dir, "rebar.config")) andalso
         filelib:is_dir(filename:join(Dir, "erl")) of
        true -> Dir;
        false -> find_root(filename:dirname(Dir))
    end.

json(T) ->
    binary_to_list(iolist_to_binary(msgflow_report:json_encode(T))).

decode(Bin) ->
    case code:ensure_loaded(json) of
        {module, json} -> apply(json, decode, [Bin]);
        _ -> mini_decode(Bin)
    end.

%% OTP 25 has no json module: the answers are read with a small decoder
%% (objects, arrays, strings, numbers, true/false/null).
mini_decode(Bin) ->
    {V, Rest} = value(skip(Bin)),
    <<>> = skip(Rest),
    V.

value(<<"{", R/binary>>) -> object(skip(R), #{});
value(<<"[", R/binary>>) -> array(skip(R), []);
value(<<"\"", R/binary>>) -> string(R, []);
value(<<"true", R/binary>>) -> {true, R};
value(<<"false", R/binary>>) -> {false, R};
value(<<"null", R/binary>>) -> {null, R};
value(B) -> number(B).

object(<<"}", R/binary>>, M) -> {M, R};
object(B, M) ->
    {K, R1} = value(B),
    <<":", R2/binary>> = skip(R1),
    {V, R3} = value(skip(R2)),
    case skip(R3) of
        <<",", R4/binary>> -> object(skip(R4), M#{K => V});
        <<"}", R4/binary>> -> {M#{K => V}, R4}
    end.

array(<<"]", R/binary>>, L) -> {lists:reverse(L), R};
array(B, L) ->
    {V, R1} = value(B),
    case skip(R1) of
        <<",", R2/binary>> -> array(skip(R2), [V | L]);
        <<"]", R2/binary>> -> {lists:reverse([V | L]), R2}
    end.

string(<<"\"", R/binary>>, Acc) -> {unicode:characters_to_binary(lists:reverse(Acc)), R};
string(<<"\\u", H:4/binary, R/binary>>, Acc) -> string(R, [binary_to_integer(H, 16) | Acc]);
string(<<"\\", C, R/binary>>, Acc) ->
    string(R, [case C of $n -> $\n; $t -> $\t; $r -> $\r; $b -> $\b; $f -> $\f; _ -> C end | Acc]);
string(<<C/utf8, R/binary>>, Acc) -> string(R, [C | Acc]).

number(B) ->
    {match, [N]} = re:run(B, "^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?", [{capture, first, binary}]),
    R = binary:part(B, byte_size(N), byte_size(B) - byte_size(N)),
    V = try binary_to_integer(N) catch error:badarg -> binary_to_float(normalize(N)) end,
    {V, R}.

normalize(N) ->
    case binary:match(N, <<".">>) of
        nomatch -> re:replace(N, "([eE])", ".0\\1", [{return, binary}]);
        _ -> N
    end.

skip(<<C, R/binary>>) when C =:= $\s; C =:= $\n; C =:= $\t; C =:= $\r -> skip(R);
skip(B) -> B.
