%%% The kept history (issue 39): windows written to disk as they close,
%%% read back as a time range by every view and by msgflow:diff/2.
%%% <ul>
%%% <li>range_diff: the diff suite's workload (two edges added, one
%%%     removed, one doubled, ten the same with Poisson noise) recorded as
%%%     two ranges of one run; the diff of the ranges lists exactly the
%%%     four changes, as data and printed, and msgflow-report --diff on
%%%     the ranges' exports prints the same table;</li>
%%% <li>range_views: a view over a range counts exactly the range's
%%%     messages, by process and by name; errors;</li>
%%% <li>restart: a node stopped and started again under its name; its
%%%     history reads across the restart, the two runs' processes matched
%%%     by their labels;</li>
%%% <li>budget_churn: 600 windows of churn (a 10-minute run's windows at
%%%     the default 1 s, here 50 ms each) under a 64 KiB budget: the
%%%     files never take more, segments are downsampled to both coarser
%%%     levels and the oldest deleted;</li>
%%% <li>full_disk: a 64 KiB tmpfs fills: the history stops and info()
%%%     says why, while counting goes on exactly;</li>
%%% <li>bad_history: a directory that cannot be written is start/1's
%%%     error, with nothing traced;</li>
%%% <li>foreign_names: a peer's history and dump, whose names and tag
%%%     this node has no atoms for, read here: the views and the diff show
%%%     the names (a range's tag as `other'), and no atom was made;</li>
%%% <li>kill_during_downsampling: a node killed (kill -9) while a downsampling
%%%     holds its merged file unrenamed (a test hook): the segment it
%%%     downsampled still reads whole; started again, the temporary file
%%%     counts in the budget while young, and goes once old;</li>
%%% <li>two_nohost_writers: two VMs named nonode@nohost write one
%%%     directory at once, each downsampling: every window of both reads.</li>
%%% <li>atom_attacks: in a node of 32,768 atoms, 40,000 file names like
%%%     segments, a segment naming 40,000 atoms and a dump naming 40,000
%%%     given to diff/2 make no atom (the node would die if they did).</li>
%%% </ul>
%%% Only the senders are traced: the sinks tell the test when they got
%%% their messages (untraced, so never counted), then
%%% erlang:trace_delivered/1 is the barrier; a range's ends are the ends
%%% of windows (the collector's), so no window straddles two ranges.
-module(msgflow_history_SUITE).
-include_lib("stdlib/include/assert.hrl").
-include_lib("common_test/include/ct.hrl").
-include_lib("kernel/include/file.hrl").
-export([all/0, init_per_suite/1, end_per_suite/1, end_per_testcase/2]).
-export([range_diff/1, range_views/1, restart/1, budget_churn/1, full_disk/1, bad_history/1,
         writer_not_counted/1, private_files/1, foreign_names/1, atom_attacks/1,
         kill_during_downsampling/1, two_nohost_writers/1]).
-export([peer_run/3, record_ranges/1, peer_foreign/3, peer_attack/3, chatter/0, peer_nohost/3]).

%% each recording's length, at least: long beside how late a busy
%% machine closes a window, so that the two ranges' lengths differ by a
%% few percent, not by half (then ten edges of 300 messages in each
%% would read as changed rates: msgflow_web_SUITE:browser_history, once)
-define(MS, 3000).
-define(INTERVAL, 200).     %% windows of the recordings

all() ->
    [range_diff, range_views, restart, budget_churn, full_disk, bad_history, writer_not_counted,
     private_files, foreign_names, atom_attacks, kill_during_downsampling, two_nohost_writers].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Config.

end_per_suite(_Config) ->
    _ = msgflow:stop(),
    ok.

end_per_testcase(_Case, _Config) ->
    _ = msgflow:stop(),
    ok.

%%% The workload

%% Edge I's sender (registered `hs_sI', traced) and sink (`hs_sinkI',
%% untraced), spawned once for both recordings.
edges(Is) ->
    maps:from_list([{I, {spawn_registered(sender_name(I), fun sender/0),
                         spawn_registered(sink_name(I), fun() -> sink(0, none) end)}}
                    || I <- Is]).

sender() ->
    receive {go, Sink, N} -> [Sink ! {m, K} || K <- lists:seq(1, N)] end,
    sender().

%% counts what it got; tells the test once it has N (untraced: not counted)
sink(Got, Want) ->
    receive
        {expect, N, From} -> check_sink(Got, {N, From});
        {m, _} -> check_sink(Got + 1, Want)
    end.

check_sink(Got, {N, From}) when Got >= N -> From ! {got, self()}, sink(Got, none);
check_sink(Got, Want) -> sink(Got, Want).

%% Plan played: edge I's sender sends N more to its sink; returns once
%% every message was received and its trace delivered.
play(Plan, Edges) ->
    Waits = [begin
                 {S, Sink} = maps:get(I, Edges),
                 Sink ! {expect, sent(I) + N, self()},
                 S ! {go, Sink, N},
                 Sink
             end || {I, N} <- Plan],
    [receive {got, Sink} -> ok end || Sink <- Waits],
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} -> ok end,
    [put({sent, I}, sent(I) + N) || {I, N} <- Plan],
    ok.

%% messages edge I's sender sent so far (this process asked for them)
sent(I) -> case get({sent, I}) of undefined -> 0; T -> T end.

%% Waits at least until Until (monotonic ms, or `now'), then until the next window
%% closes: the end of that window (system ms), a range's end.
boundary(Until) ->
    _ = Until =:= now orelse timer:sleep(max(0, Until - erlang:monotonic_time(millisecond))),
    ok = msgflow_collector:await_windows(1, 30000),
    last_at().

last_at() ->
    #{windows := Ws} = msgflow_collector:store(false),
    #{at := At} = lists:last(Ws),
    At.

spawn_registered(Name, Fun) ->
    Self = self(),
    P = spawn(fun() -> register(Name, self()), Self ! {registered, self()}, Fun() end),
    receive {registered, P} -> P end.

sender_name(I) -> list_to_atom("hs_s" ++ integer_to_list(I)).
sink_name(I) -> list_to_atom("hs_sink" ++ integer_to_list(I)).

stop_all(Edges) ->
    [begin M = monitor(process, P), exit(P, kill), receive {'DOWN', M, _, _, _} -> ok end end
     || {S, K} <- maps:values(Edges), P <- [S, K]],
    ok.

%% The diff suite's plans, its edges named as here.
renamed(D) ->
    Rn = fun(B) -> re:replace(B, "^hs_", "df_", [{return, binary}]) end,
    maps:map(fun(K, Es) when K =:= appeared; K =:= vanished; K =:= changed ->
                     [E#{sender := Rn(S), receiver := Rn(R)} || E = #{sender := S, receiver := R} <- Es];
                (_, V) -> V
             end, D).

%% Both recordings in one run with a history: the ranges [T0, T1] and
%% [T1, T2].
record_ranges(Dir) ->
    Edges = edges(lists:seq(1, 14)),
    Senders = [S || {S, _} <- maps:values(Edges)],
    ok = msgflow:start(#{procs => Senders, history => Dir, interval => ?INTERVAL}),
    ok = msgflow_collector:await_census(10000),
    T0 = boundary(now),
    M0 = erlang:monotonic_time(millisecond),
    ok = play(msgflow_diff_SUITE:before_plan(), Edges),
    T1 = boundary(M0 + ?MS),
    M1 = erlang:monotonic_time(millisecond),
    ok = play(msgflow_diff_SUITE:after_plan(), Edges),
    T2 = boundary(M1 + ?MS),
    ok = msgflow:stop(),
    ok = stop_all(Edges),
    {T0, T1, T2}.

%%% The cases

%% A history directory msgflow makes is 0700 and every segment in it
%% 0600; in one that exists, the temporary files and directories a
%% writer that died left are deleted as a run starts (those of a live
%% process stay), and the segments are 0600 too.
private_files(Config) ->
    Priv = ?config(priv_dir, Config),
    Made = filename:join([Priv, "private", "made"]),
    Given = filename:join(Priv, "given"),
    ok = file:make_dir(Given),
    ok = file:change_mode(Given, 8#755),
    Dead = "999999999",
    false = filelib:is_dir("/proc/" ++ Dead),
    ok = file:make_dir(filename:join(Given, ".msgflow-" ++ Dead ++ "-1.d")),
    ok = file:write_file(filename:join([Given, ".msgflow-" ++ Dead ++ "-1.d", "file"]), <<"x">>),
    ok = file:write_file(filename:join(Given, ".msgflow-" ++ Dead ++ "-2.tmp"), <<"x">>),
    Live = filename:join(Given, ".msgflow-" ++ os:getpid() ++ "-3.tmp"),
    ok = file:write_file(Live, <<"x">>),
    %% (the dead writer's left an hour ago: a temporary of a moment ago is
    %% a live writer's, whoever it is)
    HourAgo = erlang:system_time(second) - 3600,
    [ok = file:write_file_info(filename:join(Given, N), #file_info{mtime = HourAgo}, [{time, posix}])
     || N <- [".msgflow-" ++ Dead ++ "-1.d", ".msgflow-" ++ Dead ++ "-2.tmp"]],
    Sink = spawn(fun() -> receive stop -> ok end end),
    Self = self(),
    [begin
         S = spawn(fun() -> receive go -> ok end, [Sink ! {m, I} || I <- lists:seq(1, 20)],
                            Self ! {sent, self()}, receive stop -> ok end end),
         ok = msgflow:start(#{procs => [S], history => Dir, interval => 100}),
         S ! go,
         receive {sent, S} -> ok end,
         ok = msgflow:stop(),
         S ! stop
     end || Dir <- [Made, Given]],
    Mode = fun(F) -> {ok, #file_info{mode = M}} = file:read_file_info(F), M band 8#777 end,
    ?assertEqual(8#700, Mode(Made)),
    ?assertEqual(8#755, Mode(Given)),
    Segments = filelib:wildcard(filename:join(Made, "*.mfh")) ++ filelib:wildcard(filename:join(Given, "*.mfh")),
    ?assertMatch([_, _ | _], Segments),
    ?assertEqual([8#600], lists:usort([Mode(F) || F <- Segments])),
    ?assertEqual([".msgflow-" ++ os:getpid() ++ "-3.tmp"],
                 [N || {ok, Ns} <- [file:list_dir(Given)], N <- Ns, lists:prefix(".msgflow-", N)]),
    Sink ! stop.

range_diff(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "range_diff"),
    {T0, T1, T2} = record_ranges(Dir),
    Before = #{from => T0, to => T1},
    After = #{from => T1, to => T2},
    D = msgflow:diff(Before, After),
    ct:log("~p", [D]),
    msgflow_diff_SUITE:check(renamed(D)),
    Text = msgflow_test_io:capture(fun() -> ok = msgflow:diff(Before, After, #{print => true}) end),
    ct:log("~ts", [Text]),
    ?assertMatch({match, _}, re:run(Text, "^2 appeared, 1 vanished, 1 changed, 10 the same",
                                    [multiline])),
    %% twice the messages (check/1); the rates' ratio is theirs over each
    %% range's length, which the windows' closing sets (on a busy machine
    %% the two ranges differ: 1.021 s and 1.189 s were seen, 1.7x)
    #{before := #{seconds := SecB}, 'after' := #{seconds := SecA}} = D,
    Ratio = msgflow_diff_SUITE:changed_ratio(Text, "hs_s12 +hs_sink12"),
    ?assert(abs(Ratio - 2 * SecB / SecA) =< 0.051),
    %% the ranges exported, msgflow-report --diff on them: the same table
    B = filename:join(?config(priv_dir, Config), "range_before.etf"),
    A = filename:join(?config(priv_dir, Config), "range_after.etf"),
    ok = msgflow:export(B, etf, Before),
    ok = msgflow:export(A, etf, After),
    ?assertEqual(D, msgflow:diff(B, A)),
    {0, C} = msgflow_test_lib:run(msgflow_test_lib:tool("msgflow-report"), ["--diff", B, A]),
    ct:log("~ts", [C]),
    Lines = fun(T) -> string:split(string:trim(unicode:characters_to_binary(T), trailing), "\n", all) end,
    ?assertEqual(Lines(Text), Lines(C)).

%% A view over a range counts exactly its windows' messages.
range_views(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "range_views"),
    {T0, T1, T2} = record_ranges(Dir),
    Count = fun(Range, Edge) ->
                    #{rows := Rows, endpoints := Ends} =
                        msgflow:view(top, Range#{by => process, limit => all}),
                    Label = fun(E) -> maps:get(label, maps:get(E, Ends)) end,
                    lists:sum([C || #{sender := S, receiver := R, count := C} <- Rows,
                                    {Label(S), Label(R)} =:= Edge])
            end,
    E = fun(I) -> {atom_to_binary(sender_name(I)), atom_to_binary(sink_name(I))} end,
    %% before: 11 and 12 300 each; after: 12 600, 13 300, 14 200
    ?assertEqual([300, 300, 0, 0], [Count(#{from => T0, to => T1}, E(I)) || I <- [11, 12, 13, 14]]),
    ?assertEqual([0, 600, 300, 200], [Count(#{from => T1, to => T2}, E(I)) || I <- [11, 12, 13, 14]]),
    ?assertEqual([300, 900, 300, 200], [Count(#{from => T0, to => T2}, E(I)) || I <- [11, 12, 13, 14]]),
    %% by name, printed, with the range in its head
    Text = msgflow_test_io:capture(
             fun() -> ok = msgflow:print(top, #{from => T1, to => T2, by => name, limit => 3}) end),
    ct:log("~ts", [Text]),
    ?assertMatch({match, _}, re:run(Text, "^msgflow history [0-9-]+ [0-9:]+ to ", [multiline])),
    ?assertMatch({match, _}, re:run(Text, "^ +1 hs_s12 +hs_sink12 +600 ", [multiline])),
    %% every view that reads the counts takes a range
    [?assertNotMatch({error, _}, msgflow:view(V, #{from => T0, to => T2}))
     || V <- [top, matrix, receivers, hotspots, pairs, calls]],
    %% nothing there, a bad time, no history
    ?assertMatch({error, {no_history, _, _}}, msgflow:view(top, #{from => T2 + 3600000})),
    ?assertMatch({error, {badopt, {from, yesterday}, _}}, msgflow:view(top, #{from => yesterday})),
    ?assertMatch({error, {no_history, _, _}},
                 msgflow:view(top, #{from => T0, history => filename:join(Dir, "none")})).

%% Run on the peer: a sender and a sink, N messages, msgflow with the
%% history in Dir; the peer's history figures.
peer_run(Dir, N, Parent) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Edges = edges([1]),
    #{1 := {S, _}} = Edges,
    ok = msgflow:start(#{procs => [S], history => Dir, interval => 100}),
    ok = msgflow_collector:await_census(10000),
    ok = play([{1, N}], Edges),
    ok = msgflow_collector:await_windows(1, 30000),
    ok = msgflow:stop(),
    Parent ! {pids, S},
    maps:get(history, msgflow:info()).

restart(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "restart"),
    _ = msgflow_test_lib:start_distribution(),
    Name = "mfh" ++ os:getpid(),
    Args = lists:append([["-pa", filename:dirname(code:which(M))]
                         || M <- [msgflow, ?MODULE, msgflow_diff_SUITE, msgflow_test_lib]]),
    Run = fun(N) ->
                  {ok, Peer, Node} = peer:start_link(#{name => Name, args => Args}),
                  H = erpc:call(Node, ?MODULE, peer_run, [Dir, N, self()]),
                  P = receive {pids, Pid} -> Pid end,
                  ok = peer:stop(Peer),
                  {Node, P, H}
          end,
    T0 = erlang:system_time(millisecond),
    {Node, P1, H1} = Run(500),
    T1 = erlang:system_time(millisecond),
    {Node, P2, H2} = Run(700),
    T2 = erlang:system_time(millisecond),
    ct:log("~p~n~p", [H1, H2]),
    %% the second run found the first's segment (one of each run)
    ?assertMatch(#{status := closed, segments := 1}, H1),
    ?assertMatch(#{status := closed, segments := 2}, H2),
    ?assertNotEqual(P1, P2),
    %% read here, the peer gone: by name one edge of both runs' messages
    #{rows := ByName, endpoints := Ends} = msgflow:view(top, #{from => T0, to => T2, history => Dir,
                                                               by => name, limit => all}),
    ?assertEqual([{<<"hs_s1">>, <<"hs_sink1">>, 1200}],
                 [{maps:get(label, maps:get(S, Ends)), maps:get(label, maps:get(R, Ends)), C}
                  || #{sender := S, receiver := R, count := C} <- ByName]),
    %% by process the two runs' senders, each with its label and messages
    #{rows := ByPid, endpoints := PEnds} = msgflow:view(top, #{from => T0, to => T2, history => Dir,
                                                               limit => all}),
    ?assertEqual(lists:sort([{P1, <<"hs_s1">>, 500}, {P2, <<"hs_s1">>, 700}]),
                 lists:sort([{S, maps:get(label, maps:get(S, PEnds)), C}
                             || #{sender := S, count := C} <- ByPid])),
    %% the diff of the two runs matches the edge by its labels
    D = msgflow:diff(#{from => T0, to => T1, history => Dir}, #{from => T1, to => T2, history => Dir}),
    ct:log("~p", [D]),
    ?assertMatch(#{appeared := [], vanished := []}, D),
    ?assertEqual(1, maps:get(unchanged, D) + length(maps:get(changed, D))),
    _ = Node.

%% The size of the history's files now.
dir_bytes(Dir) ->
    lists:sum([B || #{bytes := B} <- msgflow_history_file:list(Dir, all)]).

churn(Stop) ->
    receive Stop -> ok
    after 0 ->
        Sinks = [spawn(fun() -> receive _ -> ok end end) || _ <- lists:seq(1, 5)],
        _ = [spawn(fun() -> [K ! x || K <- Sinks] end) || _ <- lists:seq(1, 2)],
        timer:sleep(10),
        [exit(K, kill) || K <- Sinks],
        churn(Stop)
    end.

budget_churn(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "churn"),
    Budget = 65536,
    ok = msgflow:start(#{procs => new, interval => 50,
                         history => #{dir => Dir, max_bytes => Budget,
                                      tiers => #{segment => 10, tier0 => 3, tier1 => 3}}}),
    Churn = spawn(fun() -> churn(stop) end),
    Seen = lists:foldl(fun(_, {Max, Levels, Files}) ->
                               ok = msgflow_collector:await_windows(1, 30000),
                               Segs = msgflow_history_file:list(Dir, all),
                               {max(Max, dir_bytes(Dir)),
                                lists:usort(Levels ++ [L || #{level := L} <- Segs]),
                                lists:usort(Files ++ [F || #{file := F} <- Segs])}
                       end, {0, [], []}, lists:seq(1, 600)),
    Churn ! stop,
    ok = msgflow:stop(),
    {Max, Levels, Files} = Seen,
    #{history := H} = msgflow:info(),
    Left = [F || #{file := F} <- msgflow_history_file:list(Dir, all)],
    ct:log("largest ~b bytes; levels ~p; ~b files seen, ~b left; ~p", [Max, Levels, length(Files),
                                                                       length(Left), H]),
    ?assert(Max =< Budget),
    ?assert(dir_bytes(Dir) =< Budget),
    ?assertEqual([0, 1, 2], Levels),
    %% the oldest were deleted to keep to the budget
    ?assert(length(Files) > length(Left)),
    ?assertMatch(#{status := closed}, H),
    %% what is left reads, whole
    ?assertMatch(#{rows := _}, msgflow:view(top, #{from => 0, history => Dir})).

full_disk(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "full"),
    ok = filelib:ensure_path(Dir),
    case os:cmd("mount -t tmpfs -o size=64k tmpfs " ++ Dir ++ " 2>&1 && echo mounted") of
        "mounted\n" ->
            try full_disk_run(Dir)
            after os:cmd("umount " ++ Dir)
            end;
        Why ->
            msgflow_test_lib:skip("a 64 KiB tmpfs cannot be mounted here (needs root): " ++ Why)
    end.

full_disk_run(Dir) ->
    Edges = edges([1]),
    #{1 := {S, _}} = Edges,
    ok = msgflow:start(#{procs => new, history => Dir, interval => 50}),
    ok = msgflow:trace(S),
    Churn = spawn(fun() -> churn(stop) end),
    Stopped = until_stopped(2000),
    Churn ! stop,
    ct:log("~p", [Stopped]),
    ?assertMatch(#{status := stopped, reason := enospc}, Stopped),
    ?assertMatch({match, _}, re:run(maps:get(message, Stopped), "no space left on device")),
    %% counting goes on, exactly
    #{running := true} = msgflow:info(),
    ok = play([{1, 1000}], Edges),
    #{rows := Rows} = msgflow:view(top, #{limit => all}),
    ?assertEqual([1000], [C || #{sender := Sn, count := C} <- Rows, Sn =:= S]),
    ok = msgflow:stop(),
    stop_all(Edges).

until_stopped(0) ->
    ct:fail(history_never_stopped);
until_stopped(N) ->
    ok = msgflow_collector:await_windows(1, 30000),
    case msgflow:info() of
        #{history := H = #{status := stopped}} -> H;
        _ -> until_stopped(N - 1)
    end.

bad_history(Config) ->
    File = filename:join(?config(priv_dir, Config), "a_file"),
    ok = file:write_file(File, <<>>),
    ?assertMatch({error, {history, _, _}}, msgflow:start(#{history => filename:join(File, "h")})),
    ?assertEqual([], msgflow_test_lib:flagged()),
    ?assertMatch({error, {badopt, {history, 42}, _}}, msgflow:start(#{history => 42})),
    ?assertMatch({error, {badopt, {max_bytes, 1}, _}},
                 msgflow:start(#{history => #{dir => File, max_bytes => 1}})),
    %% the form before 0.2 still checked alike
    ?assertMatch({error, {badopt, {history_bytes, 1}, _}},
                 msgflow:start(#{history => File, history_bytes => 1})).

%% The writer is msgflow's own: with every process traced and a segment
%% downsampled every window (its reads and deletes are requests to the file
%% server), none of its messages is counted.
writer_not_counted(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "own"),
    Edges = edges([1]),
    ok = msgflow:start(#{history => #{dir => Dir, tiers => #{segment => 1, tier0 => 1, tier1 => 1}},
                         interval => 50}),
    [begin ok = play([{1, 10}], Edges), ok = msgflow_collector:await_windows(1, 30000) end
     || _ <- lists:seq(1, 8)],
    #{rows := Rows, endpoints := Ends} = msgflow:view(top, #{limit => all}),
    ok = msgflow:stop(),
    ok = stop_all(Edges),
    Labels = [maps:get(label, maps:get(E, Ends)) || #{sender := S, receiver := R} <- Rows, E <- [S, R]],
    ct:log("~p", [lists:usort(Labels)]),
    %% the workload is there, the writer is not
    ?assert(lists:member(<<"hs_s1">>, Labels)),
    ?assertEqual([], [L || L <- Labels, binary:match(L, <<"msgflow_history">>) =/= nomatch]).

%% A peer with this suite's code path, and Extra in its command line.
code_peer(Extra) ->
    _ = msgflow_test_lib:start_distribution(),
    Args = lists:append([["-pa", filename:dirname(code:which(M))]
                         || M <- [msgflow, ?MODULE, msgflow_diff_SUITE, msgflow_test_lib]]),
    {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(), args => Extra ++ Args}),
    {Peer, Node}.

%% Run on a peer: a sender and a sink registered under the first two of
%% Names, 500 messages `{Tag, I}' (Tag the third) from the one to the
%% other, with the history in Dir; the run exported to Dump.  The range
%% that holds it.
peer_foreign(Dir, Dump, [SName, KName, TagName]) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Tag = list_to_atom(TagName),
    Self = self(),
    K = spawn(fun() -> register(list_to_atom(KName), self()),
                       [receive {Tag, _} -> ok end || _ <- lists:seq(1, 500)],
                       Self ! got, receive stop -> ok end end),
    S = spawn(fun() -> register(list_to_atom(SName), self()),
                       receive go -> [K ! {Tag, I} || I <- lists:seq(1, 500)] end,
                       receive stop -> ok end end),
    T0 = erlang:system_time(millisecond),
    ok = msgflow:start(#{procs => [S], history => Dir, interval => 100}),
    ok = msgflow_collector:await_census(10000),
    S ! go,
    receive got -> ok end,
    Ref = erlang:trace_delivered(all),
    receive {trace_delivered, all, Ref} -> ok end,
    ok = msgflow:export(Dump, etf),
    ok = msgflow:stop(),
    {T0, erlang:system_time(millisecond)}.

%% The peer's names, label and tag are read here as text: the views, the
%% printed top and diff/2 show them, and this node has no atom for any.
foreign_names(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "foreign"),
    Dump = filename:join(?config(priv_dir, Config), "foreign.etf"),
    U = integer_to_list(erlang:unique_integer([positive])) ++ "_" ++ os:getpid(),
    Names = [P ++ U || P <- ["hs_foreign_sender_", "hs_foreign_sink_", "hs_foreign_tag_"]],
    Made = fun() -> [N || N <- Names, lists:member(N, [atom_to_list(A) || A <- existing(N)])] end,
    ?assertEqual([], Made()),
    {Peer, Node} = code_peer([]),
    {T0, T1} = erpc:call(Node, ?MODULE, peer_foreign, [Dir, Dump, Names]),
    ok = peer:stop(Peer),
    [SB, KB, TB] = [list_to_binary(N) || N <- Names],
    #{rows := Rows, endpoints := Ends} = msgflow:view(top, #{from => T0, to => T1, history => Dir,
                                                            by => name, limit => all}),
    ct:log("~p~n~p", [Rows, Ends]),
    %% (the store counts tags by atom: one this node lacks is `other')
    ?assertEqual([{SB, KB, 500, [{info, other, 500}]}],
                 [{maps:get(label, maps:get(S, Ends)), maps:get(label, maps:get(R, Ends)), C, Ks}
                  || #{sender := S, receiver := R, count := C, kinds := Ks} <- Rows]),
    Text = msgflow_test_io:capture(
             fun() -> ok = msgflow:print(top, #{from => T0, to => T1, history => Dir, by => name}) end),
    ct:log("~ts", [Text]),
    ?assertMatch({match, _}, re:run(Text, "^ +1 hs_foreign_sender.* hs_foreign_sink.* +500 .* info other",
                                    [multiline])),
    %% the dump keeps the tag as text
    {ok, #{rows := [#{kinds := [#{tag := TB}]}]}} = msgflow_diff:side(Dump),
    D = msgflow:diff(Dump, Dump),
    ct:log("~p", [D]),
    ?assertMatch(#{appeared := [], vanished := [], changed := [], unchanged := 1}, D),
    ?assertEqual([], Made()).

%% The atom of Name if this node has one ([] else), made by nothing here.
existing(Name) ->
    try [list_to_existing_atom(Name)] catch error:badarg -> [] end.

%% In a node of at most 32,768 atoms: a directory of 40,000 names like
%% segments listed and asked for a range, a segment (format 1, atoms)
%% whose ends name 40,000 atoms read as a range, and a dump naming 40,000
%% given to diff/2.  Had any made its atoms, the node would have died; it
%% made far fewer than the names tried.
atom_attacks(Config) ->
    Priv = ?config(priv_dir, Config),
    Names = filename:join(Priv, "attack_names"),
    Seg = filename:join(Priv, "attack_segment"),
    Dump = filename:join(Priv, "attack.etf"),
    ok = filelib:ensure_path(Names),
    ok = filelib:ensure_path(Seg),
    N = 40000,
    Atom = fun(What, I) -> {atom, iolist_to_binary(["attack_", What, "_", integer_to_list(I)])} end,
    [ok = file:write_file(filename:join(Names, io_lib:format("~13..0b-0-attack_node_~b@h+1@h.mfh", [1000 + I, I])), <<>>)
     || I <- lists:seq(1, N)],
    At = erlang:system_time(millisecond) - 5000,
    Frame = etf(#{v => 1, node => {atom, <<"attack_node@h">>}, run => 1, n => 1, at => At, ms => 1000,
                  scale => 1,
                  ends => [{I, Atom("name", I), <<"label">>, Atom("module", I), Atom("app", I)}
                           || I <- lists:seq(0, N)],
                  rows => [{0, I, Atom("kind", I), Atom("tag", I), 1} || I <- lists:seq(1, N)]}),
    ok = file:write_file(filename:join(Seg, io_lib:format("~13..0b-0-attack_node@h+1@h.mfh", [At])),
                         <<(byte_size(Frame)):32, (erlang:crc32(Frame)):32, Frame/binary>>),
    ok = file:write_file(Dump, etf(#{format => {atom, <<"msgflow_dump">>}, version => 6,
                                     node => {atom, <<"attack_node@h">>}, taken_at => At,
                                     endpoints => [#{endpoint => Atom("dump", I), label => <<"x">>}
                                                   || I <- lists:seq(1, N)],
                                     rows => []})),
    {Peer, Node} = code_peer(["+t", "32768"]),
    %% (minutes on a busy machine: 40,000 files listed and read back)
    R = erpc:call(Node, ?MODULE, peer_attack, [Names, Seg, Dump], 600000),
    ct:log("~p", [R]),
    #{limit := 32768, made := Made, listed := N, range := {ok, Rows}, diff := D,
      json_nodes := [<<"attack_node@h">>, true, true]} = R,
    ?assert(Made < 100),
    ?assertEqual(N, Rows),
    ?assertMatch(#{unchanged := 0}, D),
    ok = peer:stop(Peer).

%% Run on the attacked peer: every module loaded, then what each file
%% gives and the atoms made meanwhile.
peer_attack(Names, Seg, Dump) ->
    {ok, _} = application:ensure_all_started(msgflow),
    {ok, Ms} = application:get_key(msgflow, modules),
    [{module, _} = code:ensure_loaded(M) || M <- Ms],
    _ = msgflow:view(top, #{from => 0, history => filename:join(Seg, "none")}),
    _ = msgflow:diff(#{format => msgflow_dump, version => 6, node => node(), taken_at => 0,
                       endpoints => [], rows => []}, now),
    Before = erlang:system_info(atom_count),
    Listed = length(msgflow_history_file:list(Names, all)),
    _ = msgflow:view(top, #{from => 0, history => Names}),
    Range = case msgflow:view(top, #{from => 0, history => Seg, limit => all}) of
                #{rows := Rows} -> {ok, lists:sum([C || #{count := C} <- Rows])};
                E -> E
            end,
    D = msgflow:diff(Dump, Dump),
    %% the range's JSON (the web API's), its export, and the diff's JSON
    %% name the node this VM has no atom for
    {ok, Json} = msgflow_query:json(top, #{from => 0, history => Seg}),
    Export = filename:join(Seg, "range.json"),
    ok = msgflow:export(Export, json, #{from => 0, history => Seg}),
    {ok, Exported} = file:read_file(Export),
    DiffJson = iolist_to_binary(msgflow_report:json_encode(msgflow_diff:json(D))),
    Named = fun(Text) -> binary:match(Text, <<"\"node\":\"attack_node@h\"">>) =/= nomatch end,
    #{limit => erlang:system_info(atom_limit), made => erlang:system_info(atom_count) - Before,
      listed => Listed, range => Range, diff => D,
      json_nodes => [maps:get(<<"node">>, Json), Named(Exported), Named(DiffJson)]}.

%% T in the external term format, `{atom, Name}' as the atom Name
%% without making it here.
etf(T) -> <<131, (etf_term(T))/binary>>.

etf_term({atom, B}) when byte_size(B) < 256 -> <<119, (byte_size(B)), B/binary>>;
etf_term(I) when is_integer(I), I >= 0, I < 256 -> <<97, I>>;
etf_term(I) when is_integer(I) -> <<110, 8, (case I < 0 of true -> 1; false -> 0 end), (abs(I)):64/little>>;
etf_term(A) when is_atom(A) -> etf_term({atom, atom_to_binary(A)});
etf_term(B) when is_binary(B) -> <<109, (byte_size(B)):32, B/binary>>;
etf_term(L) when is_list(L) -> <<108, (length(L)):32, (<< <<(etf_term(E))/binary>> || E <- L >>)/binary, 106>>;
etf_term(T) when is_tuple(T), tuple_size(T) < 256 ->
    <<104, (tuple_size(T)), (<< <<(etf_term(E))/binary>> || E <- tuple_to_list(T) >>)/binary>>;
etf_term(M) when is_map(M) ->
    <<116, (map_size(M)):32, (<< <<(etf_term(K))/binary, (etf_term(V))/binary>> || {K, V} <- maps:to_list(M) >>)/binary>>.

%% Run on a peer: two processes that send to each other until killed.
chatter() ->
    Self = self(),
    Echo = spawn(fun Loop() -> receive {P, X} -> P ! X, Loop() end end),
    spawn(fun Loop() -> Echo ! {self(), x}, receive x -> ok end, Loop() end),
    Self.

%% A run's options with a history in Dir whose every second segment is
%% downsampled.
killed_opts(Procs, Dir) ->
    #{procs => Procs, interval => 20,
      history => #{dir => Dir, max_bytes => 1 bsl 22, tiers => #{segment => 2, tier0 => 1, tier1 => 1}}}.

%% A peer named Name (not linked: it is killed) with msgflow started.
killed_peer(Name) ->
    _ = msgflow_test_lib:start_distribution(),
    Args = lists:append([["-pa", filename:dirname(code:which(M))]
                         || M <- [msgflow, ?MODULE, msgflow_test_lib]]),
    {ok, Peer, Node} = peer:start(#{name => Name, args => Args}),
    {ok, _} = erpc:call(Node, application, ensure_all_started, [msgflow]),
    {Peer, Node}.

kill_during_downsampling(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "killed"),
    Name = "mfk" ++ os:getpid(),
    {_, Node} = killed_peer(Name),
    Self = self(),
    ok = erpc:call(Node, persistent_term, put,
                   [{msgflow_history, downsampling_hook},
                    fun(Tmp) -> Self ! {held, Tmp}, receive after infinity -> ok end end]),
    _ = erpc:call(Node, ?MODULE, chatter, []),
    ok = erpc:call(Node, msgflow, start, [killed_opts(all, Dir)]),
    Tmp = receive {held, T} -> T after 60000 -> ct:fail(no_downsampling) end,
    OsPid = erpc:call(Node, os, getpid, []),
    true = monitor_node(Node, true),
    _ = os:cmd("kill -9 " ++ OsPid),
    receive {nodedown, Node} -> ok end,
    %% the merged file, never renamed: its temporary, 0600 in a 0700
    %% directory; the segment it merged is whole
    Mode = fun(F) -> {ok, #file_info{mode = M}} = file:read_file_info(F), M band 8#777 end,
    ?assertEqual({8#600, 8#700}, {Mode(Tmp), Mode(filename:dirname(Tmp))}),
    Segs = msgflow_history_file:list(Dir, all),
    ct:log("~p", [Segs]),
    ?assertMatch([#{level := 0} | _], Segs),
    ?assert(lists:all(fun(#{file := F}) ->
                              case msgflow_history_file:read(F) of
                                  {ok, _, ok} -> true;
                                  {ok, _, {cut, _}} -> true;     %% (the one being appended to)
                                  _ -> false
                              end
                      end, Segs)),
    %% started again at once: the temporary stays (it may be a live
    %% writer's), counted in the budget
    Again = fun() ->
                    {Peer, N} = killed_peer(Name),
                    ok = erpc:call(N, msgflow, start, [killed_opts(new, Dir)]),
                    ok = erpc:call(N, msgflow_collector, await_windows, [1, 30000]),
                    ok = erpc:call(N, msgflow, stop, []),
                    #{history := H} = erpc:call(N, msgflow, info, []),
                    ok = peer:stop(Peer),
                    H
            end,
    H1 = Again(),
    ct:log("~p~n~p~n~p", [H1, msgflow_history_file:list(Dir, all), file:list_dir(Dir)]),
    ?assert(filelib:is_regular(Tmp)),
    ?assertEqual(dir_bytes(Dir) + filelib:file_size(Tmp), maps:get(bytes, H1)),
    %% ten minutes later it goes
    HourAgo = erlang:system_time(second) - 3600,
    ok = file:write_file_info(filename:dirname(Tmp), #file_info{mtime = HourAgo}, [{time, posix}]),
    H2 = Again(),
    ct:log("~p", [H2]),
    ?assertNot(filelib:is_regular(Tmp)),
    ?assertEqual([], [F || {ok, Fs} <- [file:list_dir(Dir)], F <- Fs, lists:prefix(".msgflow-", F)]),
    ?assertEqual(dir_bytes(Dir), maps:get(bytes, H2)),
    %% no window twice: no segment listed at two levels
    Firsts = [A || #{first_at := A} <- msgflow_history_file:list(Dir, all)],
    ?assertEqual(lists:usort(Firsts), lists:sort(Firsts)).

%% Run on a nonode@nohost peer: a sender registered Name sends N
%% messages to a sink, a tenth at a time, each in windows of its own,
%% the history in Dir downsampled as it goes; its history figures.
peer_nohost(Dir, Name, N) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Self = self(),
    K = spawn(fun Sink() -> receive stop -> ok; _ -> Sink() end end),
    S = spawn(fun() -> register(Name, self()), Self ! registered,
                       fun Loop() -> receive {go, M, From} -> [K ! I || I <- lists:seq(1, M)],
                                                              From ! sent, Loop() end end() end),
    receive registered -> ok end,
    ok = msgflow:start(#{procs => [S], interval => 20,
                         history => #{dir => Dir, tiers => #{segment => 2, tier0 => 1, tier1 => 1}}}),
    ok = msgflow_collector:await_census(10000),
    [begin
         S ! {go, N div 10, self()},
         receive sent -> ok end,
         Ref = erlang:trace_delivered(S),
         receive {trace_delivered, S, Ref} -> ok end,
         ok = msgflow_collector:await_windows(2, 30000)
     end || _ <- lists:seq(1, 10)],
    ok = msgflow:stop(),
    maps:get(history, msgflow:info()).

%% Two VMs of the one name nonode@nohost write one directory at once,
%% each downsampling: each kept its own segments and the other's, and every
%% window of both reads (their messages exactly).
two_nohost_writers(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "nohost"),
    Args = lists:append([["-pa", filename:dirname(code:which(M))] || M <- [msgflow, ?MODULE]]),
    Peers = [begin
                 {ok, P, nonode@nohost} = peer:start_link(#{connection => standard_io, args => Args}),
                 P
             end || _ <- [1, 2]],
    T0 = erlang:system_time(millisecond),
    Self = self(),
    [spawn_link(fun() -> Self ! {done, P, peer:call(P, ?MODULE, peer_nohost, [Dir, Name, N], 120000)} end)
     || {P, Name, N} <- lists:zip3(Peers, [hs_nohost_a, hs_nohost_b], [3000, 5000])],
    Hs = [receive {done, P, H} -> H end || P <- Peers],
    T1 = erlang:system_time(millisecond),
    ct:log("~p", [Hs]),
    [ok = peer:stop(P) || P <- Peers],
    %% both closed their history whole, and the files hold segments at
    %% two levels at least: downsampled while both wrote
    ?assertMatch([#{status := closed, segments_damaged := 0, windows_dropped := 0},
                  #{status := closed, segments_damaged := 0, windows_dropped := 0}], Hs),
    Levels = lists:usort([L || #{level := L} <- msgflow_history_file:list(Dir, all)]),
    ?assertMatch([_, _ | _], Levels),
    %% every window of both, read from the files: each sender's messages
    %% (a range's store would take the two VMs' like pids for one)
    Sums = lists:foldl(fun({{_, L, _, _}, _, _, _, N}, Acc) -> maps:update_with(L, fun(X) -> X + N end, N, Acc) end,
                       #{}, [Row || #{file := F} <- msgflow_history_file:list(Dir, all),
                                    {ok, Ws, ok} <- [msgflow_history_file:read(F)],
                                    #{at := At, rows := Rows} <- Ws, At >= T0, At =< T1, Row <- Rows]),
    %% (and the ten `sent' each told its caller)
    ?assertEqual(#{<<"hs_nohost_a">> => 3010, <<"hs_nohost_b">> => 5010},
                 maps:with([<<"hs_nohost_a">>, <<"hs_nohost_b">>], Sums)).
