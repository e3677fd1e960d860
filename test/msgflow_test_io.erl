%%% What a test prints, captured: capture(Fun) runs Fun in a process whose
%%% group leader keeps what it is sent (a unicode device), and returns it;
%%% and what a program prints: run/3 runs one (the C tools: tool/1) and
%%% returns its exit status and output.
-module(msgflow_test_io).
-export([capture/1, tool/1, run/3, run_in/4, screen_until/3]).

%% @doc The path of a C tool of this build: the rebar3 build directory's
%% bin/ (_build/bin, _build/otp27/bin), where the build puts them, found
%% from this build's ebin (BuildDir/Profile/lib/msgflow/ebin); fails when
%% it is not there.
-spec tool(string()) -> file:filename().
tool(Name) ->
    Ebin = filename:dirname(code:which(msgflow)),
    Base = filename:dirname(filename:dirname(filename:dirname(filename:dirname(Ebin)))),
    Path = filename:join([Base, "bin", Name]),
    true = filelib:is_regular(Path),
    Path.

%% @doc {ExitStatus, Output} of Exe run with Args and environment Env,
%% stderr with stdout.
-spec run(file:filename(), [string()], [{string(), string() | false}]) ->
          {non_neg_integer(), binary()}.
run(Exe, Args, Env) ->
    Port = open_port({spawn_executable, Exe}, [{args, Args}, {env, Env}, binary, exit_status,
                                                use_stdio, stderr_to_stdout]),
    collect(Port, []).

%% @doc run/3 in directory Dir.
-spec run_in(file:filename(), [string()], file:filename(), [{string(), string() | false}]) ->
          {non_neg_integer(), binary()}.
run_in(Exe, Args, Dir, Env) ->
    Port = open_port({spawn_executable, Exe}, [{args, Args}, {cd, Dir}, {env, Env}, binary,
                                                exit_status, use_stdio, stderr_to_stdout]),
    collect(Port, []).

%% @doc Screen() once it matches Re (multiline), tried every 100 ms at
%% most N times (a terminal shows what a program drew some time after);
%% the test fails with the last screen otherwise.
-spec screen_until(fun(() -> binary()), iodata(), non_neg_integer()) -> binary().
screen_until(Screen, Re, N) ->
    Out = Screen(),
    case re:run(Out, Re, [multiline]) of
        {match, _} -> Out;
        nomatch when N > 0 -> receive after 100 -> screen_until(Screen, Re, N - 1) end;
        nomatch -> ct:fail({screen, Re, Out})
    end.

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [D | Acc]);
        {Port, {exit_status, S}} -> {S, iolist_to_binary(lists:reverse(Acc))}
    end.

-spec capture(fun(() -> term())) -> binary().
capture(F) ->
    Self = self(),
    GL = spawn(fun() -> gl_loop([]) end),
    {P, M} = spawn_monitor(fun() -> group_leader(GL, self()), F(), Self ! {captured, self()} end),
    %% (a fun that fails fails the caller, with its reason)
    receive
        {captured, P} -> demonitor(M, [flush]);
        {'DOWN', M, process, P, Why} -> exit(GL, kill), error({capture, Why})
    end,
    GL ! {get, Self},
    receive {gl_out, Out} -> Out end.

gl_loop(Acc) ->
    receive
        {io_request, From, Ref, Req} ->
            {Reply, Acc1} = gl_request(Req, Acc),
            From ! {io_reply, Ref, Reply},
            gl_loop(Acc1);
        {get, From} ->
            From ! {gl_out, unicode:characters_to_binary(lists:reverse(Acc))}
    end.

gl_request({put_chars, Enc, Chars}, Acc) ->
    {ok, [unicode:characters_to_list(Chars, Enc) | Acc]};
gl_request({put_chars, Enc, M, F, A}, Acc) ->
    gl_request({put_chars, Enc, apply(M, F, A)}, Acc);
gl_request(getopts, Acc) ->
    {[{encoding, unicode}], Acc};
gl_request(_, Acc) ->
    {{error, enotsup}, Acc}.

