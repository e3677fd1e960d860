%%% The `receivers' view (msgflow_receivers_view), reached through the
%%% query path alone: its module and its line in msgflow_view:registry/0
%%% are all it took, and it is in every interface: view/2 and print/2,
%%% the query's JSON, the web server (/api/views, /api/view, /api/text,
%%% /metrics), msgflow-top's requests (msgflow_remote), the exports, and a
%%% cluster.  Exact counts of a known workload; barriers are the
%%% workload's messages and msgflow:stop/0.
-module(msgflow_receivers_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_suite/1, end_per_suite/1, init_per_testcase/2, end_per_testcase/2]).
-export([every_interface/1, cluster/1, sender/3]).

all() ->
    [every_interface, cluster].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    {ok, _} = application:ensure_all_started(inets),
    Config.

end_per_suite(_Config) ->
    msgflow_test_lib:clean().

init_per_testcase(_Case, Config) ->
    ok = msgflow_test_lib:clean(),
    Config.

end_per_testcase(_Case, _Config) ->
    msgflow_test_lib:clean().

%% Three senders send 10 (by name), 20 and 30 messages to rcv_sink, which
%% reads none of them (its queue: 60); a fourth sends 5 to a sink that
%% reads them; each sender tells this process it is done (4 messages from
%% 4 senders).  Only the senders are traced.
workload() ->
    Self = self(),
    Sink = spawn_link(fun() -> receive stop -> ok end end),
    register(rcv_sink, Sink),
    Other = spawn_link(fun msgflow_test_lib:sink/0),
    Senders = [spawn_link(?MODULE, sender, [Self, To, N])
               || {To, N} <- [{rcv_sink, 10}, {Sink, 20}, {Sink, 30}, {Other, 5}]],
    ok = msgflow:start(#{procs => Senders}),
    [S ! go || S <- Senders],
    [receive {done, S} -> ok end || S <- Senders],
    {Sink, Other, Senders}.

%% Returns once Pid's queue is empty (it reads what it gets).
emptied(Pid) ->
    case process_info(Pid, message_queue_len) of
        {message_queue_len, 0} -> ok;
        _ -> erlang:yield(), emptied(Pid)
    end.

%% @private N messages to To, then `done' to Parent; alive until stopped.
sender(Parent, To, N) ->
    receive go -> ok end,
    [To ! {m, I} || I <- lists:seq(1, N)],
    Parent ! {done, self()},
    receive stop -> ok end.

every_interface(Config) ->
    Self = self(),
    {Sink, Other, Senders} = workload(),
    ok = msgflow:stop(),
    %% the sink that reads has read its 5 (its queue is read now)
    emptied(Other),
    %% the value
    #{receivers := [First, Second, Third]} = V = msgflow:view(receivers, #{}),
    ?assertMatch(#{receiver := Sink, label := <<"rcv_sink">>, messages := 60, senders := 3,
                   queue := 60}, First),
    ?assertMatch(#{receiver := Other, messages := 5, senders := 1, queue := 0}, Second),
    ?assertMatch(#{receiver := Self, messages := 4, senders := 4}, Third),
    ?assertMatch(#{missing := [], running := false}, V),
    #{receivers := [#{receiver := Self}]} = msgflow:view(receivers, #{sort => senders, limit => 1}),
    ?assertMatch({error, {badopt, {sort, queue}, [messages, rate, senders, wait, bytes]}},
                 msgflow:view(receivers, #{sort => queue})),
    %% printed
    Text = msgflow_test_io:capture(fun() -> ok = msgflow:print(receivers) end),
    ?assertMatch({match, _}, re:run(Text, "^ +1 rcv_sink <[0-9.]+> +60 +[0-9.,]+ +3 +60 +[-0-9.]+ +[0-9.]+K?$",
                                    [multiline])),
    %% the query's JSON, and the web server's
    {ok, #{<<"receivers">> := [#{<<"label">> := <<"rcv_sink">>, <<"messages">> := 60,
                                 <<"senders">> := 3, <<"queue">> := 60} | _]}} =
        msgflow_query:json(receivers, #{}),
    ?assertEqual({error, {badopt, {metrics_views, [top]}, [<<"a list of: receivers">>]}},
                 msgflow:web(#{port => 0, metrics_views => [top]})),
    {ok, Url} = msgflow:web(#{port => 0, metrics_views => [receivers]}),
    Get = fun(Path) ->
                  {ok, {{_, Code, _}, _, Body}} = httpc:request(Url ++ Path),
                  {Code, list_to_binary(Body)}
          end,
    %% every view that needs no option, receivers among them
    {200, Names} = Get("api/views"),
    Ready = msgflow_query:ready(),
    ?assert(lists:member(receivers, Ready)),
    ?assertEqual(iolist_to_binary(msgflow_report:json_encode([atom_to_binary(N) || N <- Ready])),
                 Names),
    %% one receiver, the busiest
    {200, One} = Get("api/view?name=receivers&limit=1"),
    ?assertEqual(1, length(binary:matches(One, <<"\"label\":">>))),
    ?assertMatch({_, _}, binary:match(One, <<"\"label\":\"rcv_sink\"">>)),
    {200, PageText} = Get("api/text?name=receivers"),
    ?assertMatch({match, _}, re:run(PageText, "rcv_sink <[0-9.]+> +60 ")),
    {400, _} = Get("api/view?name=receivers&limit=0"),
    {400, _} = Get("api/view?name=receivers&bogus=1"),
    {200, Metrics} = Get("metrics"),
    ?assertMatch({_, _}, binary:match(Metrics, <<"msgflow_receiver_messages_total{receiver=\"rcv_sink\"} 60\n">>)),
    ?assertMatch({_, _}, binary:match(Metrics, <<"msgflow_receiver_queue_messages{receiver=\"rcv_sink\"} 60\n">>)),
    %% msgflow-top's requests (what its v key shows)
    Ask = fun msgflow_test_lib:remote_call/1,
    ?assert(lists:member(receivers, Ask(views))),
    TopText = Ask({text, receivers, #{}, 100}),
    ?assertMatch({match, _}, re:run(TopText, "rcv_sink <[0-9.]+> +60 ")),
    %% the exports
    Dir = ?config(priv_dir, Config),
    JsonFile = filename:join(Dir, "receivers.json"),
    ok = msgflow:export(JsonFile, json, #{view => receivers, limit => 2}),
    {0, Jq} = msgflow_test_lib:run(os:find_executable("jq"),
                                   ["-r", ".receivers[] | [.label, .messages, .senders] | @tsv",
                                    JsonFile]),
    [<<"rcv_sink\t60\t3">>, <<"msgflow_test_lib:sink/0\t5\t1">>] =
        binary:split(string:trim(Jq), <<"\n">>, [global]),
    TextFile = filename:join(Dir, "receivers.txt"),
    ok = msgflow:export(TextFile, text, #{view => receivers}),
    {ok, Written} = file:read_file(TextFile),
    ?assertMatch({match, _}, re:run(Written, "rcv_sink <[0-9.]+> +60 ")),
    ?assertMatch({error, {badarg, {format, csv}, [json, text]}},
                 msgflow:export(TextFile, csv, #{view => receivers})),
    [S ! stop || S <- Senders],
    Sink ! stop.

%% Across a cluster: a sender on a peer sends 7 messages to this node's
%% rcv_sink; each node counts its senders' messages, and the receiver's
%% figures are added up (its queue read here, where it runs).
cluster(_Config) ->
    {Peer, N1} = msgflow_test_lib:cluster_peer(true),
    try
        Self = self(),
        Sink = spawn_link(fun() -> receive stop -> ok end end),
        register(rcv_sink, Sink),
        Here = spawn_link(?MODULE, sender, [Self, Sink, 11]),
        ok = msgflow:start(#{nodes => [N1], procs => all}),
        Here ! go,
        receive {done, Here} -> ok end,
        P = erpc:call(N1, msgflow_test_lib, peer_send, [Self, Sink, 7]),
        receive {sent, P} -> ok end,
        ok = msgflow:stop(),
        #{receivers := Rs, nodes := Nodes} =
            msgflow:view(receivers, #{limit => msgflow_rows:max_rows()}),
        ?assertEqual(lists:sort([node(), N1]), lists:sort(Nodes)),
        ?assertMatch([#{messages := 18, senders := 2, queue := 18, label := <<"rcv_sink">>}],
                     [R || R = #{receiver := X} <- Rs, X =:= Sink]),
        Here ! stop,
        Sink ! stop
    after
        peer:stop(Peer)
    end.
