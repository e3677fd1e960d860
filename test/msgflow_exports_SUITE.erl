%%% Exports and printed output of a live run: CSV, every report format, bad
%%% arguments refused, the shell's printed views.
%%% Cases run one at a time (tracing is node-global), each on its own;
%%% barriers are msgflow:stop/0 and messages from the workload, never
%%% sleeps.  Helpers shared with other suites are in msgflow_test_lib and
%%% msgflow_workloads.
-module(msgflow_exports_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([export_csv/1, reports_all_formats/1, export_bad_args/1, shell_output/1]).

all() ->
    [export_csv, reports_all_formats, export_bad_args, shell_output].

%% set-up and clean-up around the suite and each case: msgflow_test_hook
suite() ->
    [{ct_hooks, [msgflow_test_hook]}].

%% The CSV holds every pair of pairs/0, with the same counts, and labels.
export_csv(Config) ->
    Sink = spawn_link(fun msgflow_test_lib:sink/0),
    register(msgflow_csv_sink, Sink),
    Self = self(),
    S = spawn_link(fun() -> receive go -> ok end,
                            [msgflow_csv_sink ! m || _ <- lists:seq(1, 12)],
                            [Sink ! m || _ <- lists:seq(1, 30)],
                            Self ! {done, self()},
                            receive stop -> ok end   %% alive when labelled
                     end),
    ok = msgflow:start(#{procs => [S]}),
    S ! go,
    receive {done, S} -> ok end,
    ok = msgflow:stop(),
    Path = filename:join(?config(priv_dir, Config), "pairs.csv"),
    ok = msgflow:export(Path, csv),
    {ok, Bin} = file:read_file(Path),
    [Header | Rows0] = msgflow_test_lib:csv_rows(Bin),
    ?assertEqual([<<"sender">>, <<"receiver">>, <<"sender_label">>, <<"receiver_label">>,
                  <<"messages">>, <<"msg_per_s">>, <<"kinds">>, <<"call_rtt_us">>, <<"bytes">>], Header),
    Rows = [list_to_tuple(lists:sublist(R, 5)) || R <- Rows0],
    ?assertEqual([[<<"info:m=42">>, <<>>], [<<"info:done=1">>, <<>>]],
                 lists:sort(fun(A, B) -> A >= B end, [lists:sublist(R, 7, 2) || R <- Rows0])),
    Endpoint = fun msgflow_fmt:endpoint/1,
    %% the sends to the name and to the pid holding it are one row; S,
    %% spawned from a fun, is named by where the fun was written
    SLabel = <<"msgflow_exports_SUITE:export_csv/1 fun">>,
    SelfLabel = msgflow_describe:label(self()),
    ?assertEqual(lists:sort([{Endpoint(S), Endpoint(Sink), SLabel, <<"msgflow_csv_sink">>,
                              <<"42">>},
                             {Endpoint(S), Endpoint(self()), SLabel, SelfLabel, <<"1">>}]),
                 lists:sort(Rows)),
    ?assertEqual(43, lists:sum([N || {_, _, N} <- msgflow:pairs()])),
    S ! stop,
    unlink(Sink),
    exit(Sink, kill).

%% Every format of the same known workload: CSV round-trips to pairs(),
%% dot -Tsvg accepts the DOT, jq parses the JSON to the same pairs, the ETF
%% dump binary_to_terms to the documented shape with the same pairs, and
%% headless Chromium renders the HTML with one heatmap cell per pair.
reports_all_formats(Config) ->
    Dir = ?config(priv_dir, Config),
    {S1, S2, Sink} = msgflow_workloads:mx_workload(),
    Self = self(),
    %% reports merge a registered name with its pid, as top/1 does
    Pairs = lists:sort([{S1, Sink, 8}, {S2, Sink, 7}, {S1, Self, 1}, {S2, Self, 1}]),
    ?assertEqual(17, lists:sum([N || {_, _, N} <- msgflow:pairs()])),
    Path = fun(F) -> filename:join(Dir, "flow." ++ atom_to_list(F)) end,
    [?assertEqual({F, ok}, {F, msgflow:export(Path(F), F)}) || F <- [csv, dot, json, etf, svg, html]],
    Text = fun msgflow_fmt:endpoint/1,
    Want = lists:sort([{Text(S), Text(R), N} || {S, R, N} <- Pairs]),
    %% csv
    {ok, Csv} = file:read_file(Path(csv)),
    [_ | Rows] = msgflow_test_lib:csv_rows(Csv),
    ?assertEqual(Want, lists:sort([{S, R, binary_to_integer(N)} || [S, R, _, _, N, _, _, _, _] <- Rows])),
    %% dot
    {0, Svg} = msgflow_test_lib:run(os:find_executable("dot"), ["-Tsvg", Path(dot)]),
    ?assertMatch({_, _}, binary:match(Svg, <<"</svg>">>)),
    %% json, parsed by jq
    {0, Json} = msgflow_test_lib:run(os:find_executable("jq"),
                    ["-r", ".pairs[] | [.sender, .receiver, .messages] | @tsv", Path(json)]),
    ?assertEqual(Want, lists:sort([{S, R, binary_to_integer(N)}
                                   || L <- string:split(string:trim(Json), "\n", all),
                                      [S, R, N] <- [string:split(L, "\t", all)]])),
    %% etf dump
    {ok, Etf} = file:read_file(Path(etf)),
    Dump = binary_to_term(Etf),
    ?assertMatch(#{format := msgflow_dump, version := 6, by := process, node := _, taken_at := _,
                   calls := [], window_ms := _, scale := 1, events := _, dead_letters := 0,
                   overflow := 0, endpoints := [_ | _], rows := [_ | _]}, Dump),
    #{endpoints := Ends, rows := DRows} = Dump,
    EndT = list_to_tuple([E || #{endpoint := E} <- Ends]),
    ?assertEqual(Pairs, lists:sort([{element(Si + 1, EndT), element(Ri + 1, EndT), N}
                                    || #{sender := Si, receiver := Ri, messages := N,
                                         window_messages := W} <- DRows, is_integer(W)])),
    ?assert(lists:member(#{endpoint => Sink, label => <<"msgflow_mx_sink">>, module => timer,
                           application => undefined, node => node()},
                         [maps:with([endpoint, label, module, application, node], E) || E <- Ends])),
    %% svg heatmap: one cell per pair
    {ok, Heat} = file:read_file(Path(svg)),
    ?assertEqual(4, msgflow_test_lib:count(Heat, <<"class=\"cell\"">>)),
    %% html (the web page with its state inlined: msgflow_web_SUITE clicks
    %% through it) in headless Chromium, offline: a screenshot, and the
    %% page's script ran: by name, the two senders are one group, so two
    %% edges, and the top table has the four pairs
    {Dom, Png} = chromium(Path(html), Dir),
    ?assertEqual(<<137, "PNG">>, binary:part(Png, 0, 4)),
    ?assertMatch({_, _}, binary:match(Dom, <<"by name: 3 of 3 groups, 2 of 2 edges">>)),
    [_, Top] = binary:split(Dom, <<"<table id=\"top\">">>),
    [_, TopRows] = binary:split(Top, <<"<tbody>">>),
    [TopBody | _] = binary:split(TopRows, <<"</tbody>">>),
    ?assertEqual(4, msgflow_test_lib:count(TopBody, <<"<tr>">>)),
    [exit(P, kill) || P <- [S1, S2, Sink]].

%% Bad arguments name the problem and leave no file behind.
export_bad_args(Config) ->
    Dir = ?config(priv_dir, Config),
    {S1, S2, Sink} = msgflow_workloads:mx_workload(),
    [begin
         Missing = "/nonexistent/dir/x." ++ atom_to_list(F),
         ?assertEqual({error, {enoent, Missing}}, msgflow:export(Missing, F))
     end || F <- [csv, dot, json, etf, svg, html]],
    P = filename:join(Dir, "bad.out"),
    ?assertMatch({error, {badarg, {format, pdf}, [mermaid, csv | _]}}, msgflow:export(P, pdf)),
    ?assertMatch({error, {badopt, {by, bogus}, [_ | _]}}, msgflow:export(P, csv, #{by => bogus})),
    ?assertMatch({error, {badopt, {limit, 0}, [_ | _]}}, msgflow:export(P, svg, #{limit => 0})),
    ?assertMatch({error, {badopt, {colour, red}, [_ | _]}}, msgflow:export(P, svg, #{colour => red})),
    ?assertMatch({error, {badarg, {by, bogus}, [process | _]}}, msgflow:matrix(bogus)),
    ?assertMatch({error, {badopt, {hot_rate, -1}, [_ | _]}}, msgflow:hotspots(#{rules => #{hot_rate => -1}})),
    ?assertMatch({error, {badopt, {hot_rate, -1}, [_ | _]}}, msgflow:hotspots(#{hot_rate => -1})),
    ?assertMatch({error, {badopt, {nope, 1}, [_ | _]}}, msgflow:hotspots(#{nope => 1})),
    ?assertMatch({error, {badopt, {refresh, 0}, [_ | _]}}, msgflow:top(3, #{refresh => 0})),
    ?assertMatch({error, {badopt, {colour, red}, [_ | _]}}, msgflow:top(3, #{colour => red})),
    {error, {badopt, {limit, 5}, TopKeys}} = msgflow:top(3, #{limit => 5}),
    ?assert(lists:member(refresh, TopKeys) andalso not lists:member(limit, TopKeys)),
    ?assertEqual({error, enoent}, file:read_file_info(P)),
    ?assertEqual([], filelib:wildcard(filename:join(Dir, "*.tmp"))),
    [exit(Pid, kill) || Pid <- [S1, S2, Sink]].

%% help/0, top/1 and the live top/2 print lines of at most 80 columns;
%% the live top redraws over its own last table (cursor up, erase below:
%% never a screen clear) each refresh and returns.
shell_output(_Config) ->
    Help = msgflow_test_io:capture(fun() -> msgflow:help() end),
    [?assertEqual({L, true}, {L, string:length(L) =< 80}) || L <- msgflow_test_lib:lines(Help)],
    [?assertMatch({_, _}, binary:match(Help, <<"msgflow:", C/binary>>))
     || C <- [<<"start(">>, <<"stop()">>, <<"top(">>, <<"trace(">>, <<"untrace(">>,
              <<"history(">>, <<"hotspots()">>, <<"matrix(">>, <<"export(">>, <<"view(">>,
              <<"flows()">>, <<"nodes()">>, <<"kinds(">>, <<"start_on(">>, <<"calls()">>,
              <<"web()">>]],
    Sink = spawn(fun msgflow_test_lib:sink/0),
    S = spawn(fun() -> msgflow_workloads:paced_casts(Sink, 1) end),
    ok = msgflow:start(#{procs => [S], interval => 50}),
    %% a second: 16 refreshes when idle, two at least on a busy machine
    Live = msgflow_test_io:capture(fun() -> ok = msgflow:top(5, #{refresh => 60, for => 1000}) end),
    exit(S, kill),
    ok = msgflow:stop(),
    ?assertEqual(0, msgflow_test_lib:count(Live, <<"\e[2J">>)),
    %% one pair: the head, the column heads, its row and the live line
    ?assert(msgflow_test_lib:count(Live, <<"\e[4F\e[J">>) >= 2),
    [?assertEqual({L, true}, {L, string:length(L) =< 80}) || L <- msgflow_test_lib:lines(Live)],
    ?assertMatch({_, _}, binary:match(Live, <<"MSG/S">>)),
    exit(Sink, kill).

%% The page rendered by headless Chromium with no network: its DOM after
%% load, and a PNG screenshot.
chromium(Html, Dir) ->
    Exe = os:find_executable("chromium"),
    Url = "file://" ++ filename:absname(Html),
    Common = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--user-data-dir=" ++ filename:join(Dir, "chromium"),
              "--proxy-server=127.0.0.1:9", "--window-size=1280,2000"],
    Shot = filename:join(Dir, "report.png"),
    {0, _} = msgflow_test_lib:run(Exe, Common ++ ["--screenshot=" ++ Shot, Url]),
    {0, Out} = msgflow_test_lib:run(os:find_executable("sh"),
                   ["-c", string:join([Exe | Common] ++ ["--dump-dom", Url], " ")
                    ++ " 2>/dev/null"]),
    {ok, Png} = file:read_file(Shot),
    {Out, Png}.
