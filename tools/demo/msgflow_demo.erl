%%% @doc `make demo': msgflow on real OTP traffic.  Starts inets' httpd on
%%% 127.0.0.1 (an ephemeral port), drives HTTP requests at it with httpc
%%% from several client processes, counts every send on the node with
%%% msgflow, then prints the busiest pairs, info(), the hotspots, the
%%% bottlenecks and why/1 of the busiest server, the
%%% receivers with their mailbox waits and the pairs by bytes; then
%%% follows one httpc:request/1 with msgflow:follow/2 (a sequence diagram)
%%% and every httpc:request/4 of a second load with follow_calls/2
%%% (flows/0), and writes the reports in all six formats (csv, dot, json,
%%% etf, svg, html) and the last flow as Mermaid.  The messages are OTP's
%%% own (httpd acceptors and request handlers, httpc manager and handlers,
%%% sockets' ports), not a loop of ours.
%%%
%%% Then the same across three nodes: this one serves HTTP, two peer nodes
%%% (one started without msgflow's code, which msgflow loads into it) make
%%% the requests with httpc; msgflow counts on all three from here, and
%%% the demo prints the node-by-node matrix, msgflow:nodes() and a
%%% cluster-wide top.
-module(msgflow_demo).
-export([main/0, run/1]).

%% @doc Runs the demo with 8 clients x 300 requests, writing under
%% `_build/demo/', and halts the node with 0 (or 1 on failure).
-spec main() -> no_return().
main() ->
    %% a client that fails is an error here, not a silent death of this
    %% process (which would leave the node up and `make demo' waiting)
    process_flag(trap_exit, true),
    Code = try run(#{clients => 8, requests => 300, out => "_build/demo"}) of
               ok -> 0
           catch
               C:R:St ->
                   io:format(standard_error, "demo failed: ~p:~p~n~p~n", [C, R, St]),
                   1
           end,
    erlang:halt(Code).

%% @doc Runs the demo.  `clients' processes each make `requests' GET
%% requests, one after another; reports go to directory `out'.
-spec run(#{clients := pos_integer(), requests := pos_integer(), out := file:filename()}) -> ok.
run(#{clients := Clients, requests := Requests, out := Out}) ->
    {ok, _} = application:ensure_all_started(inets),
    Root = filename:absname(filename:join(Out, "www")),
    ok = filelib:ensure_path(Root),
    ok = file:write_file(filename:join(Root, "index.html"),
                         ["<html><body>", lists:duplicate(2000, $x), "</body></html>"]),
    {ok, Httpd} = inets:start(httpd, [{port, 0}, {bind_address, {127, 0, 0, 1}},
                                      {server_name, "msgflow-demo"},
                                      {server_root, Root}, {document_root, Root}]),
    Port = proplists:get_value(port, httpd:info(Httpd)),
    Url = "http://127.0.0.1:" ++ integer_to_list(Port) ++ "/index.html",
    io:format("httpd on ~s; ~b clients x ~b requests with httpc~n",
              [Url, Clients, Requests]),

    Page = web_page(),
    io:format("msgflow's live page: ~s (open it while the demo runs)~n", [Page]),
    ok = msgflow:start(#{interval => 200}),
    T0 = erlang:monotonic_time(millisecond),
    Parent = self(),
    Pids = [spawn_link(fun() -> client(Url, Requests), Parent ! {done, self()} end)
            || _ <- lists:seq(1, Clients)],
    ok = wait_clients(Pids),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ok = msgflow:stop(),
    io:format("~b requests answered in ~b ms~n~n", [Clients * Requests, Ms]),

    io:format("1> msgflow:top(20).~n"),
    ok = msgflow:top(20),
    io:format("~n2> msgflow:matrix(name).~n"),
    ok = msgflow:matrix(name),
    io:format("~n3> msgflow:hotspots().~n"),
    ok = msgflow:hotspots(),
    io:format("~n4> msgflow:print(receivers, #{limit => 5, sort => wait}).~n"),
    ok = msgflow:print(receivers, #{limit => 5, sort => wait}),
    io:format("~n5> msgflow:top(5, #{sort => bytes}).~n"),
    ok = msgflow:top(5, #{sort => bytes}),
    io:format("~n6> msgflow:bottlenecks().~n"),
    ok = msgflow:bottlenecks(),
    %% the busiest server: the local receiver of the most messages
    #{receivers := Busiest} = msgflow:view(receivers, #{limit => 5}),
    case [R || #{receiver := R} <- Busiest, is_pid(R), node(R) =:= node()] of
        [Server | _] ->
            io:format("~n7> msgflow:why(list_to_pid(\"~s\")).~n", [pid_to_list(Server)]),
            ok = msgflow:why(Server);
        [] -> ok
    end,
    io:format("~ninfo: ~p~n", [maps:without([opts, jemalloc_error], msgflow:info())]),
    io:format("~nmsgflow:follow(fun() -> httpc:request(Url) end, #{print => true}):~n"),
    {{ok, {{_, 200, _}, _, _}}, #{messages := FlowMsgs}} =
        msgflow:follow(fun() -> httpc:request(Url) end, #{print => true}),
    true = FlowMsgs > 0,
    io:format("~nmsgflow:follow_calls({httpc, request, 4}, #{}), then ~b clients x ~b "
              "requests:~n", [2, 25]),
    ok = msgflow:follow_calls({httpc, request, 4}, #{}),
    Followers = [spawn_link(fun() -> client(Url, 25), Parent ! {done, self()} end)
                 || _ <- lists:seq(1, 2)],
    ok = wait_clients(Followers),
    #{entries := [#{requests := 50}]} = msgflow:view(flows, #{}),
    ok = msgflow:unfollow(),
    io:format("~nmsgflow:flows().~n"),
    ok = msgflow:flows(),
    io:format("~nreports:~n"),
    [begin
         Ext = case F of mermaid -> "mmd"; _ -> atom_to_list(F) end,
         Path = filename:absname(filename:join(Out, "msgflow-demo." ++ Ext)),
         ok = msgflow:export(Path, F, #{by => case F of svg -> name; html -> name; _ -> process end}),
         io:format("  ~-7s ~s~n", [F, Path])
     end || F <- [csv, dot, json, etf, svg, html, mermaid]],
    ok = cluster(Url),
    case lists:member("wait", init:get_plain_arguments()) of
        true -> live(Url, Page);
        false -> ok
    end,
    ok = msgflow:web_stop(),
    ok = inets:stop(httpd, Httpd).

%% msgflow:web/1 on its usual port, or any free one when that is taken.
web_page() ->
    case msgflow:web(#{}) of
        {ok, Page} -> Page;
        {error, {eaddrinuse, _}} -> {ok, Page} = msgflow:web(#{port => 0}), Page
    end.

%% From a terminal (make demo): a new run with two clients requesting
%% every 20 ms, shown live on the page until Enter.
live(Url, Page) ->
    ok = msgflow:start(#{interval => 500}),
    Clients = [spawn(fun Loop() -> _ = httpc:request(Url), timer:sleep(20), Loop() end)
               || _ <- lists:seq(1, 2)],
    io:format("~n~nmsgflow counts again, 2 clients requesting every 20 ms: the page at ~s shows "
              "them live.~nPress Enter to end the demo.~n", [Page]),
    _ = io:get_line(""),
    [exit(C, kill) || C <- Clients],
    ok = msgflow:stop().

%% httpc clients on two peer nodes, httpd here; msgflow on all three.
cluster(Url) ->
    _ = os:cmd("epmd -daemon"),
    {ok, _} = net_kernel:start([list_to_atom("msgflow_demo_" ++ os:getpid()), shortnames]),
    Ebin = filename:dirname(code:which(msgflow)),
    %% no global mesh between the peers: its checks for overlapping
    %% partitions can cut a connection while the peers come up
    Args = ["-connect_all", "false"],
    {ok, P1, N1} = peer:start_link(#{name => peer:random_name(), args => Args ++ ["-pa", Ebin]}),
    {ok, P2, N2} = peer:start_link(#{name => peer:random_name(), args => Args}),  %% no msgflow
    try
        [{ok, _} = erpc:call(N, application, ensure_all_started, [inets]) || N <- [N1, N2]],
        io:format("~n~ncluster: httpd here (~s), httpc on ~s and ~s (~s without msgflow's "
                  "code)~nmsgflow:start(#{nodes => all, interval => 200})~n",
                  [node(), N1, N2, N2]),
        ok = msgflow:start(#{nodes => all, interval => 200}),
        Parent = self(),
        Clients = [spawn_link(fun() ->
                                      %% each request from a process of its own on N
                                      [{ok, {{_, 200, _}, _, _}} =
                                           erpc:call(N, httpc, request, [Url])
                                       || _ <- lists:seq(1, 100)],
                                      Parent ! {done, self()}
                              end) || N <- [N1, N2]],
        ok = wait_clients(Clients),
        ok = msgflow:stop(),
        io:format("~nmsgflow:nodes().~n"),
        ok = msgflow:nodes(),
        io:format("~nmsgflow:matrix(node).~n"),
        ok = msgflow:matrix(node),
        io:format("~nmsgflow:top(10), every node:~n"),
        ok = msgflow:top(10)
    after
        peer:stop(P1),
        peer:stop(P2)
    end,
    ok.

%% Each client's `done', or an error for the first that failed; at most
%% two minutes.
wait_clients(Pids) ->
    lists:foreach(fun(P) ->
                          receive
                              {done, P} -> ok;
                              {'EXIT', P, Why} when Why =/= normal -> error({client_failed, Why})
                          after 120000 ->
                                  error({client_timeout, P})
                          end
                  end, Pids).

client(_Url, 0) ->
    ok;
client(Url, N) ->
    {ok, {{_, 200, _}, _, _}} = httpc:request(get, {Url, []}, [], [{body_format, binary}]),
    client(Url, N - 1).
