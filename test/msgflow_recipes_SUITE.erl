%%% The production guide's recipes (guides/production.md, "On a running node"), each run the way it is
%%% written (issue 23): msgflow:start_on/2 from a node of one's own onto a
%%% node without msgflow; msgflow as a rebar3 dependency of a throwaway
%%% release (built, started, profiled from its remote console in tmux);
%%% msgflow as a mix dependency of a throwaway Elixir project (skipped
%%% where Elixir is not installed).  The dependency is this working tree,
%%% copied (its committed and new files) with this build's jemalloc
%%% linked in, so that the test builds what is here.  Cases run in
%%% sequence; each counts a workload of known size exactly.
-module(msgflow_recipes_SUITE).
-include_lib("stdlib/include/assert.hrl").
-include_lib("common_test/include/ct.hrl").
-include_lib("kernel/include/file.hrl").
-export([all/0, groups/0, init_per_suite/1, end_per_suite/1]).
-export([start_on_node/1, rebar3_release/1, mix_project/1]).

all() ->
    [{group, recipes}].

groups() ->
    [{recipes, [], [start_on_node, rebar3_release, mix_project]}].

init_per_suite(Config) ->
    {ok, _} = application:ensure_all_started(msgflow),
    Tmp = filename:join(root(), "_build/recipes"),
    _ = file:del_dir_r(Tmp),
    ok = filelib:ensure_path(Tmp),
    [{tmp, Tmp} | Config].

end_per_suite(Config) ->
    ok = msgflow:stop(),
    _ = file:del_dir_r(?config(tmp, Config)),
    ok.

%% start_on/2: this build's code shipped to a node that has none, counting
%% there only (this node counts nothing), bounded by duration and
%% max_pairs; the run stops by itself once this node's msgflow is gone.
start_on_node(_Config) ->
    _ = os:cmd("epmd -daemon"),
    _ = net_kernel:start([list_to_atom("recipes_" ++ os:getpid()), shortnames]),
    %% a node with no msgflow on its path
    {ok, P, N} = peer:start_link(#{name => peer:random_name()}),
    ok = msgflow:stop(),
    Here = maps:with([running, events], msgflow:info()),
    try
        non_existing = erpc:call(N, code, which, [msgflow]),
        ok = msgflow:start_on(N, #{duration => 60000, max_pairs => 100000, grace => 500}),
        ?assertMatch({error, {badarg, {node, _}, _}}, msgflow:start_on(node(), #{})),
        ?assertMatch({error, {badopt, {procs, [_]}, _}}, msgflow:start_on(N, #{procs => [self()]})),
        ?assertMatch(#{running := true, opts := #{max_pairs := 100000, duration := 60000}},
                     erpc:call(N, msgflow, info, [])),
        %% here: nothing started, nothing counted
        ?assertEqual(#{running => false}, maps:with([running], Here)),
        ?assertEqual(Here, maps:with([running, events], msgflow:info())),
        Sink = erpc:call(N, erlang, spawn, [timer, sleep, [infinity]]),
        %% an erl_eval fun: the node has erl_eval, not this suite
        Send = eval_fun("fun() -> [Sink ! m || _ <- lists:seq(1, 321)], "
                        "receive stop -> ok end end", [{'Sink', Sink}]),
        Sender = erpc:call(N, erlang, spawn, [Send]),
        ok = until(fun() -> erpc:call(N, erlang, process_info, [Sink, message_queue_len])
                                =:= {message_queue_len, 321} end, 100),
        ok = erpc:call(N, msgflow, stop, []),
        ?assertEqual([{Sender, Sink, 321}],
                     [X || X = {S, R, _} <- erpc:call(N, msgflow, pairs, []), S =:= Sender, R =:= Sink]),
        %% a printed view, asked there, prints here
        Out = msgflow_test_io:capture(fun() -> ok = erpc:call(N, msgflow, top, [3]) end),
        ?assertMatch({match, _}, re:run(Out, " 321 ")),
        %% started again, the run stops once this node's msgflow is gone
        ok = msgflow:start_on(N, #{grace => 300}),
        ok = application:stop(msgflow),
        ok = until(fun() -> #{running := R} = erpc:call(N, msgflow, info, []), not R end, 100),
        {ok, _} = application:ensure_all_started(msgflow)
    after
        peer:stop(P)
    end.

eval_fun(Text, Bindings) ->
    {ok, Tokens, _} = erl_scan:string(Text ++ "."),
    {ok, [Expr]} = erl_parse:parse_exprs(Tokens),
    {value, F, _} = erl_eval:expr(Expr, Bindings),
    F.

%% msgflow as a rebar3 dependency (by path: _checkouts) of a release made
%% with `rebar3 new release': `rebar3 release' and `rebar3 as prod tar'
%% with no warning, the NIF in the release's priv/; the release started,
%% and profiled from `bin/shop remote_console' in tmux, as the guide
%% says.
rebar3_release(Config) ->
    Tmp = ?config(tmp, Config),
    Dep = dep_copy(Tmp),
    Rebar3 = os:find_executable("rebar3"),
    {0, _} = run(Rebar3, ["new", "release", "shop"], Tmp),
    Proj = filename:join(Tmp, "shop"),
    ok = file:make_dir(filename:join(Proj, "_checkouts")),
    ok = file:make_symlink(Dep, filename:join([Proj, "_checkouts", "msgflow"])),
    {ok, Conf} = file:read_file(filename:join(Proj, "rebar.config")),
    %% the release's applications: `[shop,' (rebar3 3.19's template) or
    %% `[\n        shop,' (3.28's)
    Conf1 = re:replace(binary:replace(Conf, <<"{deps, []}.">>, <<"{deps, [msgflow]}.">>),
                       "\\[(\\s*)shop,", "[\\1shop, msgflow,", [{return, binary}]),
    ok = file:write_file(filename:join(Proj, "rebar.config"), Conf1),
    Name = "shop" ++ os:getpid(),
    ok = file:write_file(filename:join([Proj, "config", "vm.args"]),
                         ["-sname ", Name, "\n-setcookie shop_cookie\n"]),
    {0, Dev} = run(Rebar3, ["release"], Proj),
    no_warning(Dev),
    {0, Prod} = run(Rebar3, ["as", "prod", "tar"], Proj),
    no_warning(Prod),
    Rel = filename:join(Proj, "_build/prod/rel/shop"),
    [Lib] = filelib:wildcard(filename:join(Rel, "lib/msgflow-*")),
    true = filelib:is_regular(filename:join([Lib, "priv", "msgflow_tracer.so"])),
    Bin = filename:join([Rel, "bin", "shop"]),
    {0, _} = run(Bin, ["daemon"], Proj),
    %% a tmux server of the test's own (-L): a person's is never touched
    Tmux = os:find_executable("tmux"),
    Sock = "msgflow_test_" ++ os:getpid(),
    Session = "recipes" ++ os:getpid(),
    try
        {0, _} = run(Bin, ["ping"], Proj),
        {0, _} = run(Tmux, ["-L", Sock, "new-session", "-d", "-s", Session, "-x", "120", "-y", "40",
                            Bin ++ " remote_console"], Proj),
        Screen = fun() -> {0, S} = run(Tmux, ["-L", Sock, "capture-pane", "-p", "-t", Session], Proj), S end,
        until_screen(Screen, "^\\(shop[0-9]+@[^)]*\\)1>", 100),
        {0, _} = run(Tmux, ["-L", Sock, "send-keys", "-t", Session,
                            "register(shop_sink, spawn(fun() -> receive stop -> ok end end)), "
                            "msgflow:start(#{procs => [self()], duration => 60000, max_pairs => 100000}), "
                            "[shop_sink ! m || _ <- lists:seq(1, 250)], msgflow:stop(), msgflow:top(3).",
                            "Enter"], Proj),
        S = until_screen(Screen, "^ +1 .* shop_sink +250 ", 100),
        %% besides: the shell's call that stopped msgflow
        ?assertMatch({match, _}, re:run(S, "^msgflow stopped: [0-9,]+ messages, [0-9] pairs", [multiline])),
        %% (info() has more keys than the shell prints of a map)
        {0, _} = run(Tmux, ["-L", Sock, "send-keys", "-t", Session,
                            "maps:with([running], msgflow:info()).", "Enter"], Proj),
        until_screen(Screen, "running => false", 100)
    after
        _ = run(Tmux, ["-L", Sock, "kill-session", "-t", Session], Proj),
        run(Bin, ["stop"], Proj)
    end.

%% msgflow as a mix dependency, `manager: :rebar3', with Debian's Elixir
%% and MIX_REBAR3; used from `mix run' as from iex.
mix_project(Config) ->
    case {os:find_executable("mix"), os:find_executable("elixir")} of
        {Mix, Elixir} when is_list(Mix), is_list(Elixir) ->
            case run(Elixir, ["-e", "IO.puts(:ok)"], ?config(tmp, Config)) of
                {0, _} ->
                    mix_project(Config, Mix);
                _ ->
                    msgflow_test_lib:skip("Debian's Elixir does not run on OTP " ++
                                              erlang:system_info(otp_release))
            end;
        _ ->
            msgflow_test_lib:skip("Elixir (mix) is not installed: make installs it on Debian")
    end.

mix_project(Config, Mix) ->
        begin
            Tmp = ?config(tmp, Config),
            Dep = dep_copy(Tmp),
            {0, _} = run(Mix, ["new", "shop_ex"], Tmp),
            Proj = filename:join(Tmp, "shop_ex"),
            {ok, Exs} = file:read_file(filename:join(Proj, "mix.exs")),
            Exs1 = binary:replace(Exs, <<"# {:dep_from_hexpm, \"~> 0.3.0\"},">>,
                                  iolist_to_binary(["{:msgflow, path: \"", Dep,
                                                    "\", manager: :rebar3},"])),
            ok = file:write_file(filename:join(Proj, "mix.exs"), Exs1),
            Env = [{"MIX_REBAR3", os:find_executable("rebar3")}],
            {0, _} = run(Mix, ["deps.compile"], Proj, Env),
            {0, Out} = run(Mix, ["run", "-e",
                                 "sink = spawn(fn -> receive do :stop -> :ok end end); "
                                 "Process.register(sink, :shop_sink); "
                                 ":ok = :msgflow.start(procs: [self()]); "
                                 "for _ <- 1..120, do: send(:shop_sink, :m); "
                                 ":ok = :msgflow.stop(); :ok = :msgflow.top(3)"],
                           Proj, Env),
            case re:run(Out, "^ +1 .* shop_sink +120 ", [multiline]) of
                {match, _} -> ok;
                nomatch -> ct:fail({mix_run, Out})
            end
    end.

%% This working tree (committed and new files, as git lists them) copied
%% to Tmp/msgflow once, with this build's jemalloc linked in (built once
%% per checkout, 2 minutes).
dep_copy(Tmp) ->
    Dep = filename:join(Tmp, "msgflow"),
    case filelib:is_dir(Dep) of
        true ->
            Dep;
        false ->
            Root = root(),
            {0, Files} = run(os:find_executable("git"),
                             ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], Root),
            [begin
                 Src = filename:join(Root, F),
                 Dst = filename:join(Dep, F),
                 ok = filelib:ensure_dir(Dst),
                 case file:read_link(Src) of
                     {ok, Link} -> ok = file:make_symlink(Link, Dst);
                     {error, _} -> {ok, _} = file:copy(Src, Dst), ok = copy_mode(Src, Dst)
                 end
             end || F <- string:split(Files, <<0>>, all), F =/= <<>>,
                    filelib:is_file(filename:join(Root, F))],
            ok = filelib:ensure_path(filename:join(Dep, "_build")),
            ok = file:make_symlink(filename:join(Root, "_build/jemalloc"),
                                   filename:join(Dep, "_build/jemalloc")),
            Dep
    end.

copy_mode(Src, Dst) ->
    {ok, #file_info{mode = Mode}} = file:read_file_info(Src),
    file:change_mode(Dst, Mode).

no_warning(Out) ->
    case re:run(Out, "WARNING|not found") of
        nomatch -> ok;
        _ -> ct:fail({warnings, Out})
    end.

%% {ExitStatus, Output} of Exe Args run in Dir.
run(Exe, Args, Dir) ->
    run(Exe, Args, Dir, []).

%% Run with the environment a user's project has: not this build's
%% REBAR_BASE_DIR or CMake directory (make test OTP=27 sets them), which
%% would send the throwaway project's build into this one's.
run(Exe, Args, Dir, Env) ->
    msgflow_test_io:run_in(Exe, Args, Dir,
                           [{"REBAR_BASE_DIR", false}, {"MSGFLOW_CMAKE_DIR", false} | Env]).

until_screen(Screen, Re, N) ->
    msgflow_test_io:screen_until(Screen, Re, N).

%% Fun() until true, every 50 ms at most N times.
until(Fun, N) ->
    case Fun() of
        true -> ok;
        false when N > 0 -> receive after 50 -> until(Fun, N - 1) end;
        false -> ct:fail(until)
    end.

root() ->
    Parts = filename:split(filename:dirname(code:which(msgflow))),
    {Root, _} = lists:splitwith(fun(P) -> P =/= "_build" end, Parts),
    filename:join(Root).
