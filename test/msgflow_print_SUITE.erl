%%% The views as the shell prints them (issue 23): top, matrix, hotspots,
%%% nodes, flows and kinds of a workload of known counts, asserted line by
%%% line in 80 columns and 24 lines (what msgflow_test_io:capture/1's
%%% device, which has no geometry, gets, as a pipe does), the data behind
%%% them from msgflow:view/2, and the shell's live top ended by a typed
%%% line without clearing what was printed before it.  Barriers are
%%% msgflow:stop/0; cases run one at a time, each on its own.
-module(msgflow_print_SUITE).
-include_lib("stdlib/include/assert.hrl").
-include_lib("common_test/include/ct.hrl").
-export([all/0, groups/0, init_per_suite/1, end_per_suite/1]).
-export([printed_views/1, view_data/1, printed_flows/1, live_top_keys/1, hostile_names/1]).
-export([ps_call/2]).

-define(A_GETS, 30).
-define(B_GETS, 12).
-define(B_CASTS, 5).
-define(DEAD_SENDS, 4).

all() ->
    [{group, print}].

groups() ->
    [{print, [], [printed_views, view_data, printed_flows, live_top_keys, hostile_names]}].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Config.

end_per_suite(_Config) ->
    ok = msgflow:stop(),
    ok.

%% The store `ps_store' called by `ps_client_a' (30 gets) and
%% `ps_client_b' (12 gets, 5 casts, 4 messages to 2 processes that had
%% exited, and a last get); each tells the case process, registered as
%% `ps_tester', when it is done.  Only those three are traced.  The
%% clients stay alive (their labels are their names) until Fun has run.
with_workload(Fun) ->
    register(ps_tester, self()),
    {ok, Store} = gen_server:start({local, ps_store}, msgflow_kinds_srv, [], []),
    Dead = [spawn(fun() -> ok end) || _ <- [1, 2]],
    [begin M = monitor(process, D), receive {'DOWN', M, _, _, _} -> ok end end || D <- Dead],
    Client = fun named/2,
    A = Client(ps_client_a, fun() -> [{ok, K} = gen_server:call(ps_store, {get, K})
                                      || K <- lists:seq(1, ?A_GETS)] end),
    B = Client(ps_client_b, fun() ->
                                    [{ok, K} = gen_server:call(ps_store, {get, K})
                                     || K <- lists:seq(1, ?B_GETS)],
                                    [gen_server:cast(ps_store, {add, K}) || K <- lists:seq(1, ?B_CASTS)],
                                    [lists:nth(1 + I rem 2, Dead) ! gone || I <- lists:seq(1, ?DEAD_SENDS)],
                                    %% the casts are in when a call comes back
                                    {ok, 0} = gen_server:call(ps_store, {get, 0})
                            end),
    [receive {ready, P} -> ok end || P <- [A, B]],
    ok = msgflow:start(#{procs => [A, B, Store]}),
    [P ! go || P <- [A, B]],
    [receive {done, P} -> ok end || P <- [A, B]],
    ok = msgflow:stop(),
    try Fun(A, B, Store)
    after
        [exit(P, kill) || P <- [A, B]],
        gen_server:stop(Store),
        unregister(ps_tester)
    end.

%% Each printed view, line by line: a: 30 calls, 30 replies, 1 done;
%% b: 13 calls, 5 casts, 4 dead letters, 1 done, 13 replies; 97 in all.
printed_views(_Config) ->
    with_workload(
      fun(_A, _B, _Store) ->
              ?assertEqual(
                 [<<"msgflow stopped: matrix by name, 97 messages, 3 senders x 5 receivers">>,
                  <<"FROM \\ TO              1        2        3        4        5       SENT">>,
                  <<"  1 ps_store           .       30       13        .        .         43">>,
                  <<"  2 ps_client_a       30        .        .        .        1         31">>,
                  <<"  3 ps_client_b       18        .        .        4        1         23">>,
                  <<"    RECEIVED          48       30       13        4        2         97">>,
                  <<"  4 (unknown) (receives only)">>,
                  <<"  5 ps_tester (receives only)">>],
                 lines(fun() -> ok = msgflow:matrix(name) end)),
              %% in 50 columns and 10 lines, what is left out is named
              Matrix = msgflow:view(matrix, #{by => name}),
              ?assertEqual(
                 [<<"msgflow stopped: matrix by name, 97 messages, 3 senders x 5 receivers">>,
                  <<"FROM \\ TO              1        2       SENT">>,
                  <<"  1 ps_store           .       30         43">>,
                  <<"  2 ps_client_a       30        .         31">>,
                  <<"    RECEIVED          48       30         97">>,
                  <<"not shown: 1 more senders (23 messages): msgflow:view(matrix, Opts)">>,
                  <<"not shown: 3 more receivers (19 messages): msgflow:view(matrix, Opts)">>],
                 [string:trim(L, trailing)
                  || L <- string:split(string:trim(unicode:characters_to_binary(msgflow_matrix_view:text(Matrix, #{}, #{width => 50, height => 10})), trailing),
                                       "\n", all)]),
              ?assertEqual(
                 [<<"msgflow stopped: 97 messages, 7 pairs; MSG/S over t">>,
                  <<"  # SENDER             RECEIVER            MESSAGES">>,
                  <<"  1 ps_store           ps_client_a               30">>,
                  <<"  2 ps_client_a        ps_store                  30">>,
                  <<"  3 ps_client_b        ps_store                  18">>,
                  <<"  4 ps_store           ps_client_b               13">>],
                 %% the rates vary: the lines up to MSG/S
                 [string:trim(string:slice(L, 0, 51), trailing)
                  || L <- lines(fun() -> ok = msgflow:top(4) end)]),
              ?assertEqual(
                 [<<"msgflow hotspots: 1 in the last 5 windows">>,
                  <<"dead_letters   ps_client_b sent 4 messages to 2 processes that did not exist">>],
                 %% the rate rules off: the last window (closed by stop) is short
                 lines(fun() -> ok = msgflow:hotspots(#{rules => #{hot_rate => 1.0e12, spike_min => 1.0e12}}) end)),
              [Head, Here] = lines(fun() -> ok = msgflow:nodes() end),
              %% the node's column is as wide as its name (12 at least)
              Pad = lists:duplicate(max(12, length(atom_to_list(node()))) - 4, $\s),
              ?assertEqual(iolist_to_binary(["NODE", Pad, " STATUS           PAIRS     MESSAGES   SNAPSHOT  REASON"]),
                           Head),
              ?assertMatch({match, _}, re:run(Here, ["^", atom_to_list(node()), " +up +7 +97 +[0-9,]+ ms *$"])),
              ?assertEqual(
                 [<<"ps_client_b -> ps_store: 18 messages">>,
                  <<"  KIND    TAG                        MESSAGES  SHARE">>,
                  <<"  call    get                              13  72.2%">>,
                  <<"  cast    add                               5  27.8%">>],
                 lines(fun() -> ok = msgflow:kinds(ps_client_b, ps_store) end))
      end).
%% The data behind the printed views, exact, and the errors.
view_data(_Config) ->
    with_workload(
      fun(A, B, Store) ->
              #{rows := Top, by := process, events := 97} = msgflow:view(top, #{limit => 2}),
              ?assertEqual([{Store, A, 30}, {A, Store, 30}],
                           [{S, R, C} || #{sender := S, receiver := R, count := C} <- Top]),
              #{cells := Cells, rows := Rows, cols := Cols, sent := Sent, messages := 97,
                labels := Labels} = msgflow:view(matrix, [{by, name}]),
              ?assertEqual([<<"ps_store">>, <<"ps_client_a">>, <<"ps_client_b">>], Rows),
              ?assertEqual([<<"ps_store">>, <<"ps_client_a">>, <<"ps_client_b">>, <<"(unknown)">>,
                            <<"ps_tester">>], Cols),
              ?assertEqual(#{count => 18}, maps:with([count], maps:get({<<"ps_client_b">>, <<"ps_store">>}, Cells))),
              ?assertEqual(23, maps:get(<<"ps_client_b">>, Sent)),
              ?assertEqual(<<"ps_store">>, maps:get(<<"ps_store">>, Labels)),
              #{cells := Calls} = msgflow:view(matrix, #{by => process, kind => {call, get}}),
              ?assertEqual([{{A, Store}, 30}, {{B, Store}, 13}],
                           lists:sort([{K, C} || {K, #{count := C}} <- maps:to_list(Calls)])),
              ?assertMatch([#{rule := dead_letters, subject := B, evidence := #{count := 4, receivers := 2}}],
                           msgflow:view(hotspots, #{rules => #{hot_rate => 1.0e12, spike_min => 1.0e12}})),
              Here = node(),
              ?assertMatch([#{node := Here, status := up, pairs := 7, events := 97}],
                           msgflow:view(nodes, #{})),
              #{rows := [#{sender := B, receiver := Store, count := 18, kinds := Kinds}]} =
                  msgflow:view(kinds, #{pair => {ps_client_b, ps_store}}),
              ?assertEqual([{call, get, 13}, {cast, add, 5}], Kinds),
              #{rows := [#{count := 18}]} = msgflow:view(kinds, #{pair => {"ps_client_b", <<"ps_store">>}}),
              %% one process: what it says of itself, its partners both ways
              #{label := <<"ps_client_b">>, alive := true, message_queue_len := 0,
                sends_to := To, receives_from := From} = msgflow:view(process, #{pid => B}),
              %% to the store (by name: one row), the two dead pids, ps_tester
              ?assertEqual([{Store, <<"ps_store">>, 18}], [T || T = {_, _, 18} <- To]),
              ?assertEqual([1, 2, 2, 18], lists:sort([C || {_, _, C} <- To])),
              ?assertEqual([{Store, <<"ps_store">>, 13}], From),
              #{label := <<"ps_client_b">>} = msgflow:view(process, #{pid => pid_to_list(B)}),
              ?assertMatch({error, {badopt, {pid, "<0.x>"}, _}}, msgflow:view(process, #{pid => "<0.x>"})),
              ?assertMatch({error, {badarg, {view, bogus}, [top, matrix, hotspots, bottlenecks, calls, receivers,
                                                            kinds, process, pairs, history, flows,
                                                            nodes, info]}},
                           msgflow:view(bogus, #{})),
              ?assertMatch({error, {badopt, {limit, 0}, _}}, msgflow:view(top, #{limit => 0})),
              ?assertMatch({error, {badopt, {pair, none}, _}}, msgflow:view(kinds, #{})),
              ?assertMatch({error, {badarg, {pair, {ps_store, ps_store}}, _}},
                           msgflow:view(kinds, #{pair => {ps_store, ps_store}})),
              ?assertMatch({error, {badopt, {nope, 1}, [by, from, history, kind, limit, node, sync, timeout, to, weigh]}},
                           msgflow:view(matrix, #{nope => 1})),
              ?assertMatch({error, {badopt, {x, 1}, []}}, msgflow:view(nodes, #{x => 1})),
              ?assertMatch({error, {badarg, {by, bogus}, _}}, msgflow:matrix(bogus)),
              ?assertMatch({error, {badopt, {kind, chat}, _}}, msgflow:matrix(name, #{kind => chat})),
              ?assertMatch({error, {badopt, [x], _}}, msgflow:matrix(name, [x]))
      end).

%% flows/0 prints a table per follow_calls/2 entry and the last followed
%% request's diagram.
printed_flows(_Config) ->
    ok = msgflow:unfollow(),
    {ok, Store} = gen_server:start({local, ps_store}, msgflow_kinds_srv, [], []),
    Self = self(),
    Caller = spawn(fun() ->
                           register(ps_caller, self()),
                           receive go -> ok end,
                           [{ok, K} = ?MODULE:ps_call(ps_store, K) || K <- lists:seq(1, 5)],
                           %% the last call's trace token stays on the caller
                           %% (follow_calls/2 sets it at the call, nothing at
                           %% the return): what it does next is not the request
                           _ = seq_trace:set_token([]),
                           Self ! {done, self()},
                           receive stop -> ok end
                   end),
    try
        ok = msgflow:follow_calls({?MODULE, ps_call, 2}, #{sample => 1}),
        Caller ! go,
        receive {done, Caller} -> ok end,
        {{ok, 7}, _} = msgflow:follow(fun() -> gen_server:call(Store, {get, 7}) end),
        %% this entry's table (other suites' stopped entries are kept too)
        Printed = lists:dropwhile(fun(<<"msgflow_print_SUITE:", _/binary>>) -> false; (_) -> true end,
                                  lines(fun() -> ok = msgflow:flows() end)),
        ?assertMatch(
           [<<"msgflow_print_SUITE:ps_call/2 (running): 5 requests followed of 5 calls (1 in 1), 2.0 messages per request, depth 2">>,
            <<"  SENDER                            RECEIVER                            MESSAGES">>,
            <<"  ps_caller                         ps_store                                   5">>,
            <<"  ps_store                          ps_caller                                  5">>,
            <<>>,
            <<"the last request msgflow:follow/1 followed:">>,
            <<"flow {msgflow_follow,", _/binary>>,
            <<"  A   <", _/binary>>, <<"  B   <", _/binary>>,
            <<"        us depth  A           B">>,
            <<"         0     1  |---------->|  call get {0,1}">>,
            <<_:10/binary, "     2  |<----------|  reply ok {1,", _/binary>>,
            <<"pairs (messages):">>, <<"  A   -> B   1">>, <<"  B   -> A   1">>],
           Printed),
        ?assertMatch({match, _}, re:run(lists:nth(9, Printed), " ps_store$")),
        ok = msgflow:unfollow(),
        #{entries := Entries, last := #{messages := 2}} = msgflow:view(flows, #{}),
        ?assertMatch([#{requests := 5, calls := 5, running := false}],
                     [E || E = #{entry := {?MODULE, ps_call, 2}} <- Entries])
    after
        exit(Caller, kill),
        gen_server:stop(Store)
    end.

%% The shell's live top: redrawn in place (cursor up over its own last
%% table, never a screen clear), ended at once by a typed line.
live_top_keys(_Config) ->
    ok = msgflow:start(#{interval => 20}),
    Loop = spawn(fun Spin() -> self() ! tick, receive tick -> Spin() end end),
    Self = self(),
    %% a terminal that types `q' and Enter once three tables are drawn
    Term = spawn(fun() -> term_loop(Self, [], none) end),
    Runner = spawn(fun() ->
                           group_leader(Term, self()),
                           io:put_chars("before\n"),
                           T0 = erlang:monotonic_time(millisecond),
                           R = msgflow:top(3, #{refresh => 30, for => 60000}),
                           Self ! {returned, R, erlang:monotonic_time(millisecond) - T0}
                   end),
    try
        {ok, Ms} = receive {returned, R, T} -> {R, T} after 20000 -> {timeout, 20000} end,
        ?assert(Ms < 10000),
        Term ! {get, self()},
        Out = receive {term_out, O} -> O end,
        ?assertMatch(<<"before\n", _/binary>>, Out),
        ?assertEqual(nomatch, binary:match(Out, [<<"\e[2J">>, <<"\e[H">>])),
        Tables = length(binary:matches(Out, <<"msgflow running">>)),
        ?assert(Tables >= 3),
        %% each redraw goes back over the table before it: 6 lines
        ?assertEqual(Tables - 1, length(binary:matches(Out, <<"\e[6F\e[J">>))),
        ?assertMatch({match, _}, re:run(Out, "q \\+ Enter ends it"))
    after
        exit(Loop, kill),
        exit(Runner, kill),
        ok = msgflow:stop()
    end.

term_loop(Tester, Acc, Pending) ->
    Out = unicode:characters_to_binary(lists:reverse(Acc)),
    Pending1 = case Pending of
                   {From, Ref} when Pending =/= none ->
                       case length(binary:matches(Out, <<"msgflow running">>)) >= 3 of
                           true -> From ! {io_reply, Ref, "q\n"}, none;
                           false -> Pending
                       end;
                   none -> none
               end,
    receive
        {io_request, From1, Ref1, {get_line, _, _}} ->
            term_loop(Tester, Acc, {From1, Ref1});
        {io_request, From1, Ref1, {put_chars, Enc, Chars}} ->
            From1 ! {io_reply, Ref1, ok},
            term_loop(Tester, [unicode:characters_to_list(Chars, Enc) | Acc], Pending1);
        {io_request, From1, Ref1, {put_chars, Enc, M, F, A}} ->
            From1 ! {io_reply, Ref1, ok},
            term_loop(Tester, [unicode:characters_to_list(apply(M, F, A), Enc) | Acc], Pending1);
        {io_request, From1, Ref1, getopts} ->
            From1 ! {io_reply, Ref1, [{encoding, unicode}]},
            term_loop(Tester, Acc, Pending1);
        {io_request, From1, Ref1, _} ->
            From1 ! {io_reply, Ref1, {error, enotsup}},
            term_loop(Tester, Acc, Pending1);
        {get, From1} ->
            From1 ! {term_out, Out}
    end.

ps_call(Store, K) ->
    gen_server:call(Store, {get, K}).

%% What Fun prints, a binary per line, trailing blanks cut.
%% A process registered as '\e[31mEVIL\e[0m' sends 5 messages
%% {'\e[1mTAG', I} to one registered with a bidi override, and one named
%% like a spreadsheet formula 3 to it: no printed view or /metrics text
%% holds a control character, no export the names' own; every line of the tables
%% fits its 80 columns; the CSV cell of the formula name starts with '.
hostile_names(Config) ->
    Dir = ?config(priv_dir, Config),
    Evil = '\e[31mEVIL\e[0m',
    Bidi = '\x{202E}gnp.exe',
    Formula = '=HYPERLINK("http://x")',
    Proc = fun named/2,
    R = Proc(Bidi, fun() -> ok end),
    S = Proc(Evil, fun() -> [Bidi ! {'\e[1mTAG', I} || I <- lists:seq(1, 5)] end),
    F = Proc(Formula, fun() -> [Bidi ! {'=1+2', I} || I <- lists:seq(1, 3)] end),
    [receive {ready, P} -> ok end || P <- [R, S, F]],
    ok = msgflow:start(#{procs => [R, S, F]}),
    [P ! go || P <- [S, F]],
    [receive {done, P} -> ok end || P <- [S, F]],
    ok = msgflow:stop(),
    Printed = [lines(fun() -> ok = msgflow:top(10) end),
               lines(fun() -> ok = msgflow:top(10, #{by => kind}) end),
               lines(fun() -> ok = msgflow:matrix(name) end),
               lines(fun() -> ok = msgflow:kinds(Evil, Bidi) end),
               lines(fun() -> ok = msgflow:hotspots() end)],
    [?assertEqual([], [C || C <- unicode:characters_to_list(L), control(C)], L) || Ls <- Printed, L <- Ls],
    %% the tables' rows in their columns
    [?assert(string:length(L) =< 80, L) || Ls <- lists:sublist(Printed, 3), L <- Ls],
    %% the names are there, escaped
    Top = iolist_to_binary(lists:join("\n", hd(Printed))),
    [?assertNotEqual(nomatch, binary:match(Top, T), T)
     || T <- [<<"\\e[31mEVIL\\e[0m">>, <<"\\x{202E}gnp.exe">>]],
    Exports = [begin
                   Path = filename:join(Dir, "hostile." ++ atom_to_list(Fmt)),
                   ok = msgflow:export(Path, Fmt, #{by => name}),
                   {ok, B} = file:read_file(Path),
                   {Fmt, B}
               end || Fmt <- [csv, dot, json, html]],
    %% (a format's own tabs and line ends, and the HTML page's vendored
    %% scripts, are no names: what the names held is not there raw)
    [?assertEqual([], [C || C <- unicode:characters_to_list(B), C =:= $\e orelse C =:= 16#202E], Fmt)
     || {Fmt, B} <- Exports],
    %% every view and export ran in a worker of its own, each out of
    %% msgflow_workers' count once gone (before any info/0 reads it)
    ?assertEqual(0, ets:info(msgflow_workers, size)),
    {csv, Csv} = lists:keyfind(csv, 1, Exports),
    ?assertNotEqual(nomatch, binary:match(Csv, <<"\n\"'=HYPERLINK(\"\"http://x\"\")\",">>)),
    Metrics = iolist_to_binary(msgflow_prom:metrics(msgflow:view(top, #{by => name, limit => all}),
                                                    none, msgflow:info(), 10, [])),
    ?assertEqual([], [C || C <- unicode:characters_to_list(Metrics), control(C), C =/= $\n]),
    ?assertNotEqual(nomatch, binary:match(Metrics, <<"sender=\"\\\\e[31mEVIL\\\\e[0m\"">>)),
    case os:find_executable("promtool") of
        false -> ok;
        Promtool ->
            File = filename:join(Dir, "hostile.prom"),
            ok = file:write_file(File, Metrics),
            {0, _} = msgflow_test_io:run(os:find_executable("sh"),
                                         ["-c", Promtool ++ " check metrics < " ++ File], [])
    end,
    [P ! stop || P <- [R, S, F]],
    ok.

%% A process registered as Name that tells the caller `{ready, Pid}',
%% runs Work when told `go', tells `{done, Pid}', and stays until `stop'.
named(Name, Work) ->
    Self = self(),
    spawn(fun() ->
                  register(Name, self()),
                  Self ! {ready, self()},
                  receive go -> ok end,
                  Work(),
                  Self ! {done, self()},
                  receive stop -> ok end
          end).

control(C) ->
    C < 16#20 orelse C =:= 16#7F orelse (C >= 16#80 andalso C =< 16#9F) orelse C =:= 16#61C
        orelse C =:= 16#200E orelse C =:= 16#200F orelse (C >= 16#202A andalso C =< 16#202E)
        orelse (C >= 16#2066 andalso C =< 16#2069).

lines(Fun) ->
    [string:trim(L, trailing)
     || L <- string:split(string:trim(msgflow_test_io:capture(Fun), trailing), "\n", all)].

