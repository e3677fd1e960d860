%%% msgflow-report and msgflow-top (tools/c) against dumps and a live node;
%%% write_dumps leaves the dumps ctest's dump_decoder reads (make test runs
%%% it after the suites).
%%% Cases run one at a time (tracing is node-global), each on its own;
%%% barriers are msgflow:stop/0 and messages from the workload, never
%%% sleeps.  Helpers shared with other suites are in msgflow_test_lib and
%%% msgflow_workloads.
-module(msgflow_c_tools_SUITE).

-include_lib("proper/include/proper.hrl").
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([write_dumps/1, report_cli/1, report_equals_erlang/1, top_live/1, remote_untraced/1,
         top_failures/1, top_keys/1]).
%% run by spawn, peers or behaviours
-export([remote_workload/0]).

all() ->
    [write_dumps, report_cli, report_equals_erlang, top_live, remote_untraced, top_failures,
     top_keys].

%% set-up and clean-up around the suite and each case: msgflow_test_hook
suite() ->
    [{ct_hooks, [msgflow_test_hook]}].

%% The rules msgflow-report repeats for offline reports, held to the
%% Erlang side's output byte for byte: on stores fed with random windows
%% of messages between live processes, some registered (msgflow_store_feed:
%% the real row builder, no tracer), the dump msgflow:dump/0 would write
%% (every row by process) read by msgflow-report, whose CSV by each
%% grouping and DOT must equal what msgflow_report writes of the top view
%% of the same store (msgflow:export/3's CSV and DOT).
report_equals_erlang(Config) ->
    Dir = ?config(priv_dir, Config),
    Report = msgflow_test_lib:tool("msgflow-report"),
    %% a window closed at least (before, the rates are of a window still
    %% open, which the views by kind do not read)
    Window = list({range(1, 8), range(0, 9), range(1, 40)}),
    Prop = ?FORALL(Windows, ?LET({W1, W2, Ws}, {Window, Window, list(Window)}, [W1, W2 | Ws]),
                   msgflow_store_feed:with_ends(
                     fun(Ends, Name) ->
                             {S, H, _} = msgflow_store_feed:fed([[{Sn, R, N, none} || {Sn, R, N} <- W]
                                                                 || W <- Windows],
                                                                Ends, Name, #{}),
                             try same_reports(Dir, Report, H)
                             after msgflow_store_feed:retire(S)
                             end
                     end)),
    true = proper:quickcheck(Prop, [{numtests, 100}, {to_file, user}]).

%% [] when every report of H msgflow-report writes equals the Erlang side's.
same_reports(Dir, Report, H) ->
    Etf = filename:join(Dir, "gen.etf"),
    ok = file:write_file(Etf, term_to_binary(msgflow_dump:of_top(top(H, process, all), none, []))),
    Diffs = [{What, C, E}
             || {What, Args, Erl} <- [{{csv, By}, ["--by", atom_to_list(By), "--csv"],
                                        fun() -> msgflow_report:csv(top(H, By, all), none) end}
                                       || By <- [process, name, module, application, node, kind]]
                                      ++ [{dot, ["--by", "process", "--dot"],
                                           fun() -> Top = top(H, process, 200),
                                                    msgflow_report:dot(Top, length(maps:get(rows, Top)))
                                           end}],
                C <- [written(Report, [Etf | Args], filename:join(Dir, "gen.out"))],
                E <- [iolist_to_binary(Erl())],
                C =/= E],
    ?WHENFAIL(io:format(user, "differ (msgflow-report, Erlang):~n~p~n", [Diffs]), Diffs =:= []).

%% What msgflow-report Args writes into Out (made anew), or `{exit,
%% Status, Output}' when it does not end with status 0.
written(Report, Args, Out) ->
    _ = file:delete(Out),
    case msgflow_test_lib:run(Report, Args ++ [Out]) of
        {0, _} -> {ok, C} = file:read_file(Out), C;
        {Status, Msg} -> {exit, Status, Msg}
    end.

%% The top view of store H (one node's, as msgflow_query merges it).
top(H, By, Limit) ->
    {ok, O} = msgflow_opts:check(msgflow_top_view:options(), #{by => By, limit => Limit, bytes => true}),
    msgflow_top_view:merge([msgflow_top_view:build(H, O)], O,
                           #{missing => [], labels => fun(_) -> #{} end}).

%% Dumps for ctest's dump_decoder, each with NAME.expect (see
%% test/c/test_dump.c): no pairs; big counts; one million pairs.  The
%% dump of every endpoint kind is written by receiver_kinds.
write_dumps(_Config) ->
    Dir = msgflow_test_lib:dump_dir(),
    Idle = spawn_link(fun msgflow_test_lib:sink/0),
    ok = msgflow:start(#{procs => [Idle]}),
    ok = msgflow:stop(),
    msgflow_test_lib:write_dump("empty"),
    ?assertMatch(#{rows := [], endpoints := []}, msgflow_test_lib:read_dump("empty")),
    unlink(Idle),
    exit(Idle, kill),
    Pid = fun(N) -> list_to_pid("<0." ++ integer_to_list(N) ++ ".0>") end,
    %% (past the bound: the busiest in overflow, optional fields the
    %% decoder reads, and its fuzzing mangles, under the sanitizers)
    Big = (synthetic_view(#{{Pid(1), Pid(2)} => 1 bsl 40, {Pid(2), Pid(1)} => 1 bsl 63,
                            {Pid(3), some_name} => 1 bsl 32}))#{
              memory_full => true,
              overflow_top => #{pairs => [#{sender => Pid(4), receiver => Pid(5), count => 1 bsl 40, error => 7},
                                          #{sender => Pid(5), receiver => other_name, count => 9, error => 0}],
                                min => 3}},
    ok = file:write_file(filename:join(Dir, "big.etf"), term_to_binary(msgflow_dump:of_top(Big, none, []))),
    msgflow_test_lib:write_expect("big", msgflow_test_lib:read_dump("big"), true),
    Pairs = maps:from_list([{{Pid(1000 + S), Pid(3000 + R)}, 1 + (S * R) rem 97}
                            || S <- lists:seq(1, 1000), R <- lists:seq(1, 1000)]),
    Million = synthetic_view(Pairs),
    ok = file:write_file(filename:join(Dir, "million.etf"),
                         term_to_binary(msgflow_dump:of_top(Million, none, []))),
    Dump = msgflow_test_lib:read_dump("million"),
    ?assertEqual(1000000, length(maps:get(rows, Dump))),
    msgflow_test_lib:write_expect("million", Dump, false).

%% msgflow-report on a dump of a known workload prints the rows top/1
%% prints and writes the CSV export/3 writes, for two groupings; bad input
%% is refused with a message and exit status 1.
report_cli(Config) ->
    Dir = ?config(priv_dir, Config),
    {S1, S2, Sink} = msgflow_workloads:mx_workload(),
    Etf = filename:join(Dir, "mx.etf"),
    ok = msgflow:export(Etf, etf),
    Report = msgflow_test_lib:tool("msgflow-report"),
    {0, Out} = msgflow_test_lib:run(Report, [Etf, "--top", "10"]),
    %% #, sender, receiver, messages and the main kind in 80 columns
    %% (both lay the table out alike; the rates are of different windows)
    Rows = fun(Text, Cols) ->
                   [{string:slice(L, 0, Cols), string:slice(L, 62)}
                    || L <- msgflow_test_lib:lines(Text), re:run(L, "^ +[0-9]+ ") =/= nomatch]
           end,
    ErlTop = msgflow_test_io:capture(fun() -> msgflow:top(10) end),
    ?assertEqual(Rows(ErlTop, 51), Rows(Out, 51)),
    ?assertEqual(4, length(Rows(Out, 51))),
    ?assertMatch([{_, <<"info m 100%", _/binary>>} | _], Rows(Out, 51)),
    %% ranked by bytes (sampled sizes: each thread's first send at least),
    %% as top/2 ranks them, with a BYTES column
    {0, ByBytes} = msgflow_test_lib:run(Report, [Etf, "--top", "10", "--sort", "bytes"]),
    ErlBytes = msgflow_test_io:capture(fun() -> msgflow:top(10, #{sort => bytes}) end),
    ?assertMatch({match, _}, re:run(ByBytes, "MSG/S +BYTES +KIND")),
    ?assertEqual([S || {S, _} <- Rows(ErlBytes, 51)], [S || {S, _} <- Rows(ByBytes, 51)]),
    {2, _} = msgflow_test_lib:run(Report, [Etf, "--sort", "rate"]),
    %% by kind: kind, tag and messages
    {0, ByKind} = msgflow_test_lib:run(Report, [Etf, "--by", "kind", "--top", "20"]),
    ErlByKind = msgflow_test_io:capture(fun() -> msgflow:top(20, #{by => kind}) end),
    ?assertEqual([K || {K, _} <- Rows(ErlByKind, 63)], [K || {K, _} <- Rows(ByKind, 63)]),
    [begin
         CCsv = filename:join(Dir, "c-" ++ atom_to_list(By) ++ ".csv"),
         ECsv = filename:join(Dir, "e-" ++ atom_to_list(By) ++ ".csv"),
         {0, _} = msgflow_test_lib:run(Report, [Etf, "--by", atom_to_list(By), "--csv", CCsv]),
         ok = msgflow:export(ECsv, csv, #{by => By}),
         {ok, C} = file:read_file(CCsv),
         {ok, E} = file:read_file(ECsv),
         %% every column but msg_per_s (the rates are of different windows)
         NoRate = fun(Bin) -> lists:sort([lists:sublist(R, 5) ++ lists:nthtail(6, R)
                                          || R <- msgflow_test_lib:csv_rows(Bin)]) end,
         ?assertEqual({By, NoRate(E)}, {By, NoRate(C)})
     end || By <- [process, module]],
    Dot = filename:join(Dir, "c.dot"),
    {0, _} = msgflow_test_lib:run(Report, [Etf, "--by", "name", "--dot", Dot]),
    {0, _} = msgflow_test_lib:run(os:find_executable("dot"), ["-Tsvg", Dot]),
    %% bad input: message and status 1, no crash
    {ok, Bin} = file:read_file(Etf),
    Bad = [{"truncated", binary:part(Bin, 0, byte_size(Bin) div 2), "truncated"},
           {"not ETF", <<"sender,receiver
">>, "not an Erlang external term"},
           {"other term", term_to_binary({hello, world}), "not a map"},
           {"version 7", term_to_binary((binary_to_term(Bin))#{version := 7}),
            "version 7 is not known"},
           {"version 6 without calls", term_to_binary(maps:remove(calls, binary_to_term(Bin))),
            "without `calls'"},
           {"version 6 with a row that is no map",
            term_to_binary((binary_to_term(Bin))#{rows := [{0, 1, 2, 3, []}]}), "rows: entry 0 is not a map"}],
    [begin
         F = filename:join(Dir, "bad.etf"),
         ok = file:write_file(F, Data),
         {Status, Msg} = msgflow_test_lib:run(Report, [F]),
         ?assertEqual({What, 1}, {What, Status}),
         ?assertMatch({What, {_, _}}, {What, binary:match(Msg, list_to_binary(Want))})
     end || {What, Data, Want} <- Bad],
    ?assertMatch({2, _}, msgflow_test_lib:run(Report, [Etf, "--by", "bogus"])),
    ?assertMatch({1, _}, msgflow_test_lib:run(Report, [filename:join(Dir, "missing.etf")])),
    [exit(P, kill) || P <- [S1, S2, Sink]].

%% msgflow-top against a real node started with erl -sname, which has no
%% msgflow: it loads the code there, starts msgflow, and its table after a
%% known workload matches msgflow:pairs() on that node.
top_live(_Config) ->
    {Node, Cookie} = msgflow_test_lib:start_node(),
    Top = msgflow_test_lib:tool("msgflow-top"),
    try
        Args = ["--node", atom_to_list(Node), "--cookie-file", msgflow_test_lib:cookie_file(Cookie), "--once",
                "--interval", "100"],
        {0, First} = msgflow_test_lib:run(Top, Args ++ ["--keep"]),
        ?assertMatch({_, _}, binary:match(First, <<"is not loaded on">>)),
        ?assertMatch({_, _}, binary:match(First, <<"MESSAGES">>)),
        ok = erpc:call(Node, ?MODULE, remote_workload, []),
        {0, Out} = msgflow_test_lib:run(Top, Args ++ ["--top", "50"]),
        Printed = lists:sort([{S, R, binary_to_integer(binary:replace(N, <<",">>, <<>>, [global]))}
                              || L <- msgflow_test_lib:lines(Out),
                                 {match, [S, R, N]} <- [re:run(L, "^ +[0-9]+ (wl_s[0-9]) +(wl_sink) +([0-9,]+) ",
                                                               [{capture, all_but_first, binary}])]]),
        Names = erpc:call(Node, erlang, registered, []),
        Pid = fun(Name) -> erpc:call(Node, erlang, whereis, [Name]) end,
        Wanted = [{atom_to_binary(S), <<"wl_sink">>, N}
                  || S <- [wl_s1, wl_s2, wl_s3], lists:member(S, Names),
                     N <- [lists:sum([C || {From, To, C} <- erpc:call(Node, msgflow, pairs, []),
                                           From =:= Pid(S), To =:= wl_sink orelse
                                                                To =:= Pid(wl_sink)])]],
        ?assertEqual([{<<"wl_s1">>, <<"wl_sink">>, 100}, {<<"wl_s2">>, <<"wl_sink">>, 200},
                      {<<"wl_s3">>, <<"wl_sink">>, 300}], Wanted),
        ?assertEqual(Wanted, Printed),
        %% it did not stop the msgflow it found running
        ?assertMatch(#{running := true}, erpc:call(Node, msgflow, info, [])),
        ok = erpc:call(Node, msgflow, stop, [])
    after
        msgflow_test_lib:stop_node(Node)
    end.

%% What msgflow-top asks of a node leaves nothing in its counts: every
%% request msgflow_remote takes (rows, each view's text, the views, info,
%% the dump), asked while every process is traced, from a process that is
%% not (as the C node's messages are not), adds no pair with
%% msgflow_remote at either end (a view's text once asked the group
%% leader for its encoding, and the reply was counted).
remote_untraced(_Config) ->
    Self = self(),
    ok = msgflow:start(#{procs => all}),
    Asker = spawn_link(fun() ->
                               receive go -> ok end,
                               Ask = fun msgflow_test_lib:remote_call/1,
                               Views = Ask(views),
                               Texts = [Ask({text, V, #{}, 100}) || V <- Views],
                               Other = [Ask(C) || C <- [{rows, #{limit => 5}}, info, dump]],
                               Self ! {asked, self(), Views, Texts ++ Other}
                       end),
    ok = msgflow:untrace(Asker),
    Asker ! go,
    {Views, Answers} = receive {asked, Asker, Vs, As} -> {Vs, As} end,
    ?assertEqual(msgflow_query:ready(), Views),
    ?assertEqual([], [A || A = {error, _} <- Answers]),
    ok = msgflow:stop(),
    Remote = whereis(msgflow_remote),
    ?assertEqual([], [P || P = {S, R, _} <- msgflow:pairs(), S =:= Remote orelse R =:= Remote
                                                              orelse R =:= msgflow_remote]).

%% msgflow-top as a person uses it: in a tmux terminal of 150 x 40,
%% against a node with a known workload (wl_s1, wl_s2, wl_s3 send 100,
%% 200, 300 messages `m' to wl_sink), the screen read after each key.  It
%% shows the node's counts and none of its own requests, sorts, groups,
%% filters, opens a row, shows its help and pause, quits on `q' with the
%% terminal restored and the counting it started stopped; Ctrl-C does
%% the same.
top_keys(_Config) ->
    case os:find_executable("tmux") of
        false -> msgflow_test_lib:skip("tmux is not installed (make installs it)");
        Tmux -> top_keys_in(Tmux)
    end.

top_keys_in(Tmux) ->
    {Node, Cookie} = msgflow_test_lib:start_node(),
    Session = "mftop" ++ os:getpid(),
    %% a tmux server of the test's own: a person's tmux is never touched,
    %% and never kills this one
    Sock = "msgflow_test_" ++ os:getpid(),
    T = fun(Args) -> {0, Out} = msgflow_test_lib:run(Tmux, ["-L", Sock | Args]), Out end,
    Screen = fun() -> T(["capture-pane", "-p", "-t", Session]) end,
    %% the screen once it shows Re (it is redrawn every 200 ms)
    Until = fun(Re) -> msgflow_test_io:screen_until(Screen, Re, 100) end,
    Keys = fun(Ks) -> T(["send-keys", "-t", Session | Ks]) end,
    %% the terminal's mode after msgflow-top: icanon and echo back on
    Cmd = lists:flatten(io_lib:format("~s --node ~s --cookie-file ~s --interval 200; echo EXITED $?; "
                                      "stty -a | grep -o -- '-\\?icanon'; stty -a | grep -ow -- '-\\?echo'; sleep 60",
                                      [msgflow_test_lib:tool("msgflow-top"), Node,
                                       msgflow_test_lib:cookie_file(Cookie)])),
    try
        %% a session that outlives the others: killing the one session
        %% the server has ends the server, and a new session made then
        %% may meet it exiting ("server exited unexpectedly")
        T(["new-session", "-d", "-s", Session ++ "_keep", "sleep 600"]),
        T(["new-session", "-d", "-s", Session, "-x", "150", "-y", "40", Cmd]),
        Until("MESSAGES"),
        ok = erpc:call(Node, ?MODULE, remote_workload, []),
        S1 = Until("wl_s3 +wl_sink +300 "),
        Rows = [L || L <- msgflow_test_lib:lines(S1), re:run(L, "^ +[0-9]+ ") =/= nomatch],
        ?assertMatch([_, _, _ | _], Rows),
        Ours = [{S, N} || L <- Rows, {match, [S, N]} <- [re:run(L, "^ +[0-9]+ (wl_s[0-9]) +wl_sink +([0-9,]+) ",
                                                              [{capture, all_but_first, binary}])]],
        ?assertEqual([{<<"wl_s3">>, <<"300">>}, {<<"wl_s2">>, <<"200">>}, {<<"wl_s1">>, <<"100">>}], Ours),
        %% none of msgflow-top's own requests (rex, msgflow_remote) is counted
        ?assertEqual(nomatch, re:run(S1, "msgflow_remote|erlang:apply|msgflow_collector")),
        ?assertMatch({match, _}, re:run(S1, "sort messages \\| by process \\| filter - \\| every 200 ms")),
        %% 150 columns: the ends are not cut at 20, PEAK/S is shown (and
        %% BYTES, where a row had a size measured)
        ?assertMatch({match, _}, re:run(S1, "MSG/S +PEAK/S +(BYTES +)?KIND")),
        Keys(["s"]),
        Until("sort rate \\| by process"),
        Keys(["s"]),
        Until("sort peak \\| by process"),
        Keys(["s"]),
        %% by bytes: the pairs with a size measured first, in a BYTES
        %% column (each thread measures its first send)
        SB = Until("sort bytes \\| by process"),
        ?assertMatch({match, _}, re:run(SB, "PEAK/S +BYTES +KIND")),
        Keys(["s"]),
        %% by the receiver's mailbox wait (none is watched yet: `-')
        SW = Until("sort wait \\| by process"),
        ?assertMatch({match, _}, re:run(SW, "PEAK/S +(BYTES +)?WAIT MS +KIND")),
        Keys(["s", "g"]),
        Until("sort messages \\| by name"),
        Keys(["g", "g", "g", "g"]),
        %% by kind: the 600 `m' messages are one row
        Until("by kind"),
        Until("^ +[0-9]+ info +m +600 "),
        Keys(["g", "/", "w", "l", "_", "s", "2", "Enter"]),
        S2 = Until("filter wl_s2"),
        %% every row has wl_s2 at one end, the busiest first
        Shown = [L || L <- msgflow_test_lib:lines(S2), re:run(L, "^ +[0-9]+ ") =/= nomatch],
        ?assertEqual([], [L || L <- Shown, binary:match(L, <<"wl_s2">>) =:= nomatch]),
        ?assertMatch({match, _}, re:run(hd(Shown), "^ +1 wl_s2 +wl_sink +200 ")),
        Keys(["Enter"]),
        S3 = Until("sends to"),
        ?assertMatch({match, _}, re:run(S3, "^wl_s2 <[0-9.]+>$", [multiline])),
        ?assertMatch({match, _}, re:run(S3, "queue 0 messages, memory [0-9,]+ bytes, reductions [0-9,]+", [])),
        ?assertMatch({match, _}, re:run(S3, "^  wl_sink +200$", [multiline])),
        Keys(["Escape"]),
        Until("filter wl_s2 \\| every 200 ms \\| h: help"),
        Keys(["h"]),
        Until("msgflow-top keys"),
        Keys(["x", "space"]),
        Until("PAUSED"),
        Keys(["q"]),
        %% exit status 0, then stty's: canonical mode and echo back
        Until("^EXITED 0\n^icanon\n^echo$"),
        ?assertMatch(#{running := false}, erpc:call(Node, msgflow, info, [])),
        T(["kill-session", "-t", Session]),
        %% Ctrl-C: the same end
        T(["new-session", "-d", "-s", Session, "-x", "100", "-y", "30",
           re:replace(Cmd, "--interval 200", "--interval 200 --start", [{return, list}])]),
        Until("running on"),
        Keys(["C-c"]),
        Until("^EXITED 0\n^icanon\n^echo$"),
        ?assertMatch(#{running := false}, erpc:call(Node, msgflow, info, []))
    after
        _ = msgflow_test_lib:run(Tmux, ["-L", Sock, "kill-server"]),
        msgflow_test_lib:stop_node(Node)
    end.

%% Clear messages and status 1: wrong cookie, unknown node, no epmd.
top_failures(Config) ->
    {Node, Cookie} = msgflow_test_lib:start_node(),
    Top = msgflow_test_lib:tool("msgflow-top"),
    try
        {1, Wrong} = msgflow_test_lib:run(Top, ["--node", atom_to_list(Node), "--cookie", "not-the-cookie",
                               "--once"]),
        ?assertMatch({_, _}, binary:match(Wrong, <<"wrong cookie">>)),
        %% a cookie on the command line is said to be visible, once; one
        %% from a file is not
        Visible = <<"--cookie is visible to other users">>,
        ?assertEqual(1, length(binary:matches(Wrong, Visible))),
        CookieFile = filename:join(?config(priv_dir, Config), "cookie"),
        ok = file:write_file(CookieFile, "not-the-cookie"),
        ok = file:change_mode(CookieFile, 8#600),
        {1, FromFile} = msgflow_test_lib:run(Top, ["--node", atom_to_list(Node), "--cookie-file", CookieFile,
                                                   "--once"]),
        ?assertMatch({_, _}, binary:match(FromFile, <<"wrong cookie">>)),
        ?assertEqual(nomatch, binary:match(FromFile, Visible)),
        [_, Host] = string:split(atom_to_list(Node), "@"),
        {1, Unknown} = msgflow_test_lib:run(Top, ["--node", "no_such_node@" ++ Host, "--cookie", "x", "--once"]),
        ?assertMatch({_, _}, binary:match(Unknown, <<"unknown node">>)),
        {1, NoEpmd} = msgflow_test_lib:run(Top, ["--node", atom_to_list(Node), "--cookie", "x", "--once"],
                          [{"ERL_EPMD_PORT", "1"}]),
        ?assertMatch({_, _}, binary:match(NoEpmd, <<"epmd is not running">>)),
        {1, NoCookie} = msgflow_test_lib:run(Top, ["--node", atom_to_list(Node), "--cookie-file",
                                  "/nonexistent/cookie", "--once"]),
        ?assertMatch({_, _}, binary:match(NoCookie, <<"no cookie">>)),
        %% --code names a directory without msgflow's build: said, nothing
        %% shipped to the node
        {1, NoCode} = msgflow_test_lib:run(Top, ["--node", atom_to_list(Node), "--cookie",
                                                 Cookie, "--once", "--code", "/nonexistent/mf"]),
        ?assertMatch({_, _}, binary:match(NoCode, <<"/nonexistent/mf/ebin">>)),
        ?assertMatch({_, _}, binary:match(NoCode, <<"--code">>)),
        ?assertEqual(non_existing, erpc:call(Node, code, which, [msgflow])),
        ?assertMatch({2, _}, msgflow_test_lib:run(Top, ["--once"]))
    after
        msgflow_test_lib:stop_node(Node)
    end.

%% Run on the node top_live starts: three registered senders send 100, 200
%% and 300 messages to a registered sink, by name; all stay alive.
remote_workload() ->
    Sink = spawn(fun msgflow_test_lib:sink/0),
    register(wl_sink, Sink),
    Self = self(),
    [begin
         P = spawn(fun() -> receive go -> ok end,
                            [wl_sink ! m || _ <- lists:seq(1, 100 * I)],
                            Self ! {done, self()},
                            receive stop -> ok end
                   end),
         register(list_to_atom("wl_s" ++ integer_to_list(I)), P),
         P ! go,
         receive {done, P} -> ok end
     end || I <- [1, 2, 3]],
    ok.

%% A view by process as msgflow_rows:build/2 makes it, over the given
%% totals.
synthetic_view(Totals) ->
    Ends = lists:usort(lists:append([[S, R] || {S, R} <- maps:keys(Totals)])),
    #{by => process, node => node(), taken_at => 1, started_at => 0, stopped_at => 1,
      running => false, window_ms => 1000, scale => 1, estimated => false, sample => off,
      events => lists:sum(maps:values(Totals)), dead_letters => 0, overflow => 0,
      proc_events_dropped => 0, pairs => map_size(Totals), groups => map_size(Totals),
      windows => [], dead => [],
      %% one or two kinds a pair: calls, and a third of infos
      rows => [#{sender => S, receiver => R, count => N, last_count => 0, rate => 0.0,
                 prev_rate => undefined, mean_rate => 0.0, peak_rate => 0.0,
                 kinds => [{call, get, N - N div 3} | [{info, tick, N div 3} || N div 3 > 0]]}
               || {{S, R}, N} <- maps:to_list(Totals)],
      endpoints => maps:from_list([{E, #{label => T, text => T, display => T,
                                         module => undefined, application => undefined,
                                         node => node()}}
                                   || E <- Ends, T <- [msgflow_fmt:endpoint(E)]])}.

%%% Helpers
