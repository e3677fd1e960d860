%%% Labels a person recognises and hotspots per label group (issue 22):
%%% an Elixir module as Elixir writes it, processes spawned from funs
%%% named by where the fun was written (read live, or from the spawn
%%% event once gone), a port by its driver and owner, proc_lib labels
%%% first (OTP 27+), and 21 identical fan-out senders found once.
%%% Barriers are msgflow:stop/0 (flags off, erlang:trace_delivered/1,
%%% final snapshot); cases run one at a time, each on its own.
-module(msgflow_labels_SUITE).
-include_lib("stdlib/include/assert.hrl").
-export([all/0, groups/0, init_per_suite/1, end_per_suite/1]).
-export([labels_recognised/1, fan_out_grouped/1, gone_before_seen/1, fire/1, remote_spawned/1,
         fire_now/1, closed_port_owner/1]).

all() ->
    [{group, labels}].

groups() ->
    [{labels, [], [labels_recognised, fan_out_grouped, gone_before_seen, remote_spawned,
                   closed_port_owner]}].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    ok = compile_elixir_style(),
    Config.

end_per_suite(_Config) ->
    ok = msgflow:stop(),
    ok.

%% Processes alive when the run starts that send and exit before any
%% snapshot (none until stop/0) keep their labels: the census of the
%% start read them (a proc_lib process by its initial call, a registered
%% process by its name, one spawned from a fun by where the fun was
%% written), where they used to be `(unknown)'.
gone_before_seen(_Config) ->
    Sink = spawn(fun Loop() -> receive _ -> Loop() end end),
    Self = self(),
    Named = spawn(fun() -> register(labels_gone, self()), Self ! named, fire(Sink) end),
    receive named -> ok end,
    FromFun = spawn(fun() -> ok = fire(Sink), done end),
    ProcLib = proc_lib:spawn(?MODULE, fire, [Sink]),
    ok = msgflow:start(#{procs => all, interval => 3600000}),
    ok = msgflow_collector:await_census(60000),
    [begin Ref = monitor(process, P), P ! go, receive {'DOWN', Ref, _, _, _} -> ok end end
     || P <- [Named, FromFun, ProcLib]],
    ok = msgflow:stop(),
    #{rows := Rows, endpoints := Ends} = msgflow:view(top, #{by => process, limit => all}),
    Got = [{maps:get(label, maps:get(S, Ends)), C}
           || #{sender := S, receiver := R, count := C} <- Rows, R =:= Sink],
    ?assertEqual(lists:sort([{<<"labels_gone">>, 3},
                             {<<"msgflow_labels_SUITE:gone_before_seen/1 fun">>, 3},
                             {<<"msgflow_labels_SUITE:fire/1">>, 3}]),
                 lists:sort(Got)),
    exit(Sink, kill).

%% A process another node spawns here (erpc:call/4 from a peer: a
%% spawn_request, no local parent to tell of it) sends and exits before
%% any snapshot: its `spawned' event names it, `erpc:execute_call/4'.
remote_spawned(_Config) ->
    {Peer, Node} = msgflow_test_lib:cluster_peer(true),
    Sink = spawn(fun Loop() -> receive _ -> Loop() end end),
    try
        ok = msgflow:start(#{procs => all, interval => 3600000}),
        ok = erpc:call(Node, erpc, call, [node(), ?MODULE, fire_now, [Sink]]),
        ok = msgflow:stop(),
        #{rows := Rows, endpoints := Ends} = msgflow:view(top, #{by => process, limit => all}),
        ?assertEqual([{<<"erpc:execute_call/4">>, 3}],
                     [{maps:get(label, maps:get(S, Ends)), C}
                      || #{sender := S, receiver := R, count := C} <- Rows, R =:= Sink])
    after
        exit(Sink, kill),
        peer:stop(Peer)
    end.

%% A port opened during the run that sends its owner two messages and
%% closes before any snapshot (none until stop/0) is counted (with a
%% trace session too: its `new' ports are traced as legacy tracing's
%% are) and labelled by that owner, the receiver of its busiest row:
%% `port <- Owner'.
closed_port_owner(_Config) ->
    closed_port_owner().

closed_port_owner() ->
    Self = self(),
    ok = msgflow:start(#{procs => all, interval => 3600000}),
    Owner = spawn(fun() ->
                          P = open_port({spawn, "printf hi"}, [binary, exit_status]),
                          receive {P, {data, <<"hi">>}} -> ok end,
                          receive {P, {exit_status, 0}} -> ok end,
                          Self ! {closed, self(), P},
                          receive stop -> ok end
                  end),
    Port = receive {closed, Owner, P} -> P end,
    ?assertEqual(undefined, erlang:port_info(Port)),
    ok = msgflow:stop(),
    #{rows := Rows, endpoints := Ends} = msgflow:view(top, #{by => process, limit => all}),
    OwnerLabel = maps:get(label, maps:get(Owner, Ends)),
    ?assertEqual(<<"msgflow_labels_SUITE:closed_port_owner/0 fun">>, OwnerLabel),
    ?assertEqual([{<<"port <- ", OwnerLabel/binary>>, Owner, 2}],
                 [{maps:get(label, maps:get(S, Ends)), R, C}
                  || #{sender := S, receiver := R, count := C} <- Rows, S =:= Port, R =:= Owner]),
    Owner ! stop.

%% Three messages to Sink now.
fire_now(Sink) ->
    [Sink ! {hello, I} || I <- lists:seq(1, 3)],
    ok.

%% Three messages to Sink when told to go.
fire(Sink) ->
    receive go -> [Sink ! {hello, I} || I <- lists:seq(1, 3)], ok end.

%% 'Elixir.My.Worker', compiled from Erlang forms: a gen_server that, when
%% asked, spawns a fun sending N messages to a process; `Elixir.' modules
%% are what Elixir compiles `defmodule My.Worker' to.
compile_elixir_style() ->
    Src = "-module('Elixir.My.Worker').\n"
          "-export([init/1, handle_call/3, handle_cast/2, fire/3]).\n"
          "init([]) -> {ok, nil}.\n"
          "handle_call({fire, To, N, Wait}, _From, S) -> {reply, fire(To, N, Wait), S}.\n"
          "handle_cast(_, S) -> {noreply, S}.\n"
          "fire(To, N, Wait) ->\n"
          "    spawn(fun() -> [To ! {hello, I} || I <- lists:seq(1, N)],\n"
          "                   case Wait of true -> receive stop -> ok end; false -> ok end\n"
          "          end).\n",
    Forms = scan_forms(Src),
    {ok, Mod, Bin} = compile:forms(Forms, [return_errors]),
    {module, Mod} = code:load_binary(Mod, "My.Worker.erl", Bin),
    ok.

scan_forms(Src) ->
    {ok, Tokens, _} = erl_scan:string(Src),
    split_forms(Tokens, []).

split_forms([], Acc) ->
    lists:reverse(Acc);
split_forms(Tokens, Acc) ->
    {Form, [Dot | Rest]} = lists:splitwith(fun({dot, _}) -> false; (_) -> true end, Tokens),
    {ok, F} = erl_parse:parse_form(Form ++ [Dot]),
    split_forms(Rest, [F | Acc]).

%% Every label and its count, exact, by name and by module:
%% - a gen_server in 'Elixir.My.Worker' is `My.Worker.init/1';
%% - a process it spawned from a fun is `My.Worker.fire/3 fun', whether
%%   it was alive when labelled (read from its stack) or gone (from its
%%   spawn event);
%% - a port is `cat <- Owner', and counts for its owner's module;
%% - on OTP 27+, a proc_lib label wins over a registered name.
labels_recognised(_Config) ->
    Self = self(),
    Sink = spawn(fun sink/0),
    register(msgflow_labels_sink, Sink),
    {ok, W} = gen_server:start('Elixir.My.Worker', [], []),
    PortOwner = spawn(fun() -> port_owner(Self) end),
    Port = receive {port, P} -> P end,
    ok = msgflow:start(#{procs => all, interval => 3600000}),
    Alive = gen_server:call(W, {fire, Sink, 3, true}),
    Gone = gen_server:call(W, {fire, Sink, 4, false}),
    GoneRef = monitor(process, Gone),
    receive {'DOWN', GoneRef, _, _, _} -> ok end,
    PortOwner ! go,
    receive port_done -> ok end,
    Labelled = label_me(Sink),
    ok = msgflow:stop(),
    Cells = maps:get(cells, msgflow:view(matrix, #{by => name})),
    Count = fun(From, To) -> maps:get(count, maps:get({From, To}, Cells, #{count => 0}), 0) end,
    ct:log("~p", [maps:keys(Cells)]),
    %% the two fun-spawned senders share their label: 3 + 4 hellos
    ?assertEqual(7, Count(<<"My.Worker.fire/3 fun">>, <<"msgflow_labels_sink">>)),
    %% the worker's replies to this process; its label for Elixir users
    MyLabel = msgflow_describe:label(Self),
    ?assertEqual(2, Count(<<"My.Worker.init/1">>, MyLabel)),
    %% spawned before tracing, the owner is read live: its stack's bottom
    %% is what the fun tail-called
    OwnerLabel = <<"msgflow_labels_SUITE:port_owner/1">>,
    PortLabel = <<"cat <- ", OwnerLabel/binary>>,
    ?assertEqual(2, Count(OwnerLabel, PortLabel)),
    ?assertEqual(2, Count(PortLabel, OwnerLabel)),
    {Extra, Others} = case Labelled of
                          {true, Label, LP} ->
                              ?assertEqual(5, Count(Label, <<"msgflow_labels_sink">>)),
                              {5, [LP]};
                          false ->
                              {0, []}
                      end,
    %% by module: the port counts for its owner's module, an Elixir module
    %% as its atom (the key), labelled as Elixir writes it
    MCells = maps:get(cells, msgflow:view(matrix, #{by => module})),
    %% the port's 2 + 2, and on OTP 27 the labelled process's 5
    ?assertMatch(#{count := N} when N =:= 4 + Extra,
                 maps:get({msgflow_labels_SUITE, msgflow_labels_SUITE}, MCells)),
    ?assertMatch(#{count := 7}, maps:get({'Elixir.My.Worker', msgflow_labels_SUITE}, MCells)),
    Top = msgflow_test_io:capture(fun() -> ok = msgflow:top(20, [{by, module}]) end),
    ct:log("~ts", [Top]),
    ?assertMatch({match, _}, re:run(Top, "My\\.Worker +msgflow_\\S+ +7 ", [unicode])),
    ?assertEqual(nomatch, re:run(Top, "Elixir\\.")),
    [exit(X, kill) || X <- [Sink, Alive, PortOwner | Others]],
    _ = msgflow_test_lib:quietly(fun() -> port_close(Port) end),
    gen_server:stop(W).

%% A process with a proc_lib label (OTP 27+) and a registered name sends
%% 5 messages to To: {true, Label, Pid} when the label is there to win,
%% false (and nothing sent) before OTP 27.
label_me(To) ->
    case erlang:function_exported(proc_lib, set_label, 1) of
        true ->
            Self = self(),
            P = spawn(fun() ->
                              register(msgflow_labels_named, self()),
                              apply(proc_lib, set_label, [{worker, 7}]),
                              [To ! m || _ <- lists:seq(1, 5)],
                              Self ! sent,
                              receive stop -> ok end
                      end),
            receive sent -> ok end,
            %% alive when the collector labels it, at stop
            {true, <<"{worker,7}">>, P};
        false ->
            false
    end.

port_owner(Parent) ->
    P = open_port({spawn, "cat"}, [binary, {packet, 4}]),
    Parent ! {port, P},
    receive go -> ok end,
    [begin P ! {self(), {command, <<I>>}}, receive {P, {data, _}} -> ok end end
     || I <- [1, 2]],
    Parent ! port_done,
    receive stop -> ok end.

%% 21 processes spawned from one fun, each casting to the same 24 sinks
%% every 5 ms: hotspots() gives one fan_out finding for the 21, with the
%% spread, not 21 findings.
fan_out_grouped(_Config) ->
    Sinks = [spawn(fun sink/0) || _ <- lists:seq(1, 24)],
    ok = msgflow:start(#{procs => all, interval => 100}),
    Senders = [spawn(fun() -> spread(Sinks) end) || _ <- lists:seq(1, 21)],
    ok = msgflow_collector:await_windows(4, 10000),
    Found = msgflow:view(hotspots, #{}),
    [exit(P, kill) || P <- Senders ++ Sinks],
    ok = msgflow:stop(),
    ct:log("~p", [Found]),
    Label = <<"msgflow_labels_SUITE:fan_out_grouped/1 fun">>,
    ?assertMatch([#{subject := [_ | _], members := 21, label := Label,
                    evidence := #{members := 21, min := #{receivers := 24},
                                  max := #{receivers := 24}, kind := {cast, m, 100}}}],
                 [F || F = #{rule := fan_out} <- Found]),
    [#{subject := Subjects, explanation := Text}] = [F || F = #{rule := fan_out} <- Found],
    ?assertEqual(lists:sort(Senders), lists:sort(Subjects)),
    ?assertMatch({match, _}, re:run(Text, "^21 x msgflow_labels_SUITE:fan_out_grouped/1 fun: "
                                          "each sends to 24 receivers, [0-9,-]+ messages in the "
                                          "last window, cast m 100%$")).

%%% Helpers

spread(Sinks) ->
    [gen_server:cast(S, m) || S <- Sinks],
    receive after 5 -> spread(Sinks) end.

sink() ->
    receive _ -> sink() end.
