%%% Helpers the Common Test suites share: this node's distribution, peer
%%% nodes (with msgflow and the tests' code, or without msgflow), a node
%%% started as a user starts one, what is still traced, which trace modes
%%% this VM has, a sink, the C tools run, and a case's clean slate.  Functions a peer runs
%%% (peer_send/3, peer_call/3, peer_echo/0) are here too: peers get this
%%% directory in their code path.
-module(msgflow_test_lib).

-export([skip/1, quietly/1, start_distribution/0, cluster_peer/1, start_as_shell/2, peer_send/3, peer_call/3, peer_echo/0,
         start_node/0, stop_node/1, cookie_file/1, flagged/0, modes/0, sink/0, root/0, run/2, run/3, tool/1,
         clean/0, remote_call/1]).

%% A request to msgflow_remote, as msgflow-top sends it, and its answer.
remote_call(Call) ->
    Ref = make_ref(),
    msgflow_remote ! {msgflow_call, self(), Ref, Call},
    receive {msgflow_reply, Ref, Reply} -> Reply end.

%% Whatever a case did, msgflow leaves nothing behind: its web server,
%% its run, the requests it follows (for a suite's init_per_testcase and
%% end_per_testcase, and its end_per_suite).
clean() ->
    _ = msgflow:web_stop(),
    ok = msgflow:stop(),
    ok = msgflow:unfollow().

%% The path of a C tool of this build.
tool(Name) ->
    msgflow_test_io:tool(Name).

start_distribution() ->
    case node() of
        nonode@nohost ->
            os:cmd("epmd -daemon"),
            {ok, _} = net_kernel:start([list_to_atom("msgflow_ct_" ++ os:getpid()), shortnames]),
            node();
        Node ->
            Node
    end.

%% A peer with msgflow and this suite in its code path, or (Code = false)
%% with neither: the coordinator loads msgflow into it.
cluster_peer(Code) ->
    _ = start_distribution(),
    %% no global mesh among the peers: its partition checks would cut
    %% connections as peers come and go
    Args = ["-connect_all", "false"]
        ++ case Code of
               true -> lists:append([["-pa", filename:dirname(code:which(M))]
                                     || M <- [msgflow, ?MODULE, msgflow_SUITE]]);
               false -> []
           end,
    {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(), args => Args}),
    {Peer, Node}.

%% Run on a peer: msgflow:start(Opts) on node Target, asked as a remote
%% shell there asks it, from a process whose group leader is this node's
%% `user'.
start_as_shell(Target, Opts) ->
    group_leader(whereis(user), self()),
    erpc:call(Target, msgflow, start, [Opts]).

%% Run on a peer: N sends to Dest from a process of its own there.
peer_send(Parent, Dest, N) ->
    spawn(fun() -> [Dest ! {m, I} || I <- lists:seq(1, N)], Parent ! {sent, self()} end).

%% Run on a peer: N gen_server:calls to Server from a process there.
peer_call(Parent, Server, N) ->
    spawn(fun() -> [X = gen_server:call(Server, {get, X}) || X <- lists:seq(1, N)],
                   Parent ! {called, self()} end).

peer_echo() ->
    receive {From, Ref, X} -> From ! {Ref, X} end,
    peer_echo().

%% A node started the way a user starts one: erl -sname, with this suite's
%% code path only (no msgflow).  Waits for its nodeup, no polling.
start_node() ->
    _ = start_distribution(),
    Cookie = atom_to_list(erlang:get_cookie()),
    Name = "mftop" ++ os:getpid() ++ integer_to_list(erlang:unique_integer([positive])),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Node = list_to_atom(Name ++ "@" ++ Host),
    ok = net_kernel:monitor_nodes(true),
    Erl = os:find_executable("erl"),
    _ = open_port({spawn_executable, Erl},
                  [{args, ["-sname", Name, "-setcookie", Cookie, "-noinput", "-pa",
                           filename:dirname(code:which(?MODULE)),
                           "-eval", "pong = net_adm:ping('" ++ atom_to_list(node()) ++ "')"]},
                   exit_status]),
    receive {nodeup, Node} -> ok after 30000 -> ct:fail({no_nodeup, Node}) end,
    ok = net_kernel:monitor_nodes(false),
    {Node, Cookie}.

%% A file only this user reads holding Cookie, for msgflow-top's
%% --cookie-file (the form the docs show: --cookie puts it in argv).
cookie_file(Cookie) ->
    F = filename:join("/tmp", "msgflow-cookie-" ++ os:getpid() ++ "-"
                      ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = file:write_file(F, Cookie),
    ok = file:change_mode(F, 8#600),
    F.

stop_node(Node) ->
    Cache = erpc:call(Node, filename, basedir, [user_cache, "msgflow"]),
    erpc:cast(Node, erlang, halt, []),
    %% the code msgflow-top copied there (this host's user cache)
    _ = file:del_dir_r(Cache),
    ok.

%% Processes and ports with trace flags in the legacy session, or (OTP
%% 27+) in a trace session named msgflow; `new' too.
flagged() ->
    InSession = case lists:member(session, modes()) of
                    true ->
                        fun(P) ->
                                Trace = trace,
                                %% `undefined' for one that exited since processes()
                                case Trace:session_info(P) of
                                    L when is_list(L) -> lists:keymember(msgflow, 1, L);
                                    undefined -> false
                                end
                        end;
                    false -> fun(_) -> false end
                end,
    Flagged = [P || P <- [new | processes() ++ erlang:ports()],
                    erlang:trace_info(P, flags) =/= {flags, []} orelse InSession(P)],
    %% one that was exiting as it was looked at carries nothing now
    [P || P <- Flagged, P =:= new orelse (is_pid(P) andalso is_process_alive(P))
                            orelse (is_port(P) andalso erlang:port_info(P) =/= undefined)].

%% The trace modes this VM has: legacy always, session on OTP 27+.
modes() ->
    case msgflow_flags:mode(session) of
        {ok, session} -> [session, legacy];
        {error, _} -> [legacy]
    end.

sink() ->
    receive _ -> sink() end.

root() ->
    Parts = filename:split(filename:dirname(code:which(msgflow))),
    {Root, _} = lists:splitwith(fun(P) -> P =/= "_build" end, Parts),
    filename:join(Root).

%% Runs Exe with Args; {ExitStatus, Output}.
run(false, _Args) ->
    ct:fail("program not installed (make deps installs it)");
run(Exe, Args) ->
    run(Exe, Args, []).

run(Exe, Args, Env) ->
    msgflow_test_io:run(Exe, Args, Env).

%% F(), or what `catch F()' gave before OTP 29 deprecated it: `{'EXIT',
%% Reason}' for an error or exit, the thrown term for a throw.
quietly(F) ->
    try F()
    catch
        throw:T -> T;
        error:R:St -> {'EXIT', {R, St}};
        exit:R -> {'EXIT', R}
    end.

%% The skips a release cannot help: a case that needs a later OTP than
%% the one running.  Under CI (CI=true) every other skip is a failure:
%% a tool missing there (tmux, Chromium, Prometheus, Elixir, root) is
%% CI's fault, not the case's.
-define(RELEASE_SKIPS, ["no trace sessions before OTP 27", "proc_lib:set_label/1 is OTP 27+",
                        "native records are OTP 29's", "priority messages are OTP 28's",
                        "Debian's Elixir does not run on OTP "]).

%% What a case returns to skip itself: `{skip, Reason}', or under CI a
%% failure unless Reason starts as one of ?RELEASE_SKIPS.
-spec skip(iodata()) -> {skip, string()}.
skip(Reason0) ->
    Reason = unicode:characters_to_list(Reason0),
    Release = lists:any(fun(R) -> lists:prefix(R, Reason) end, ?RELEASE_SKIPS),
    case os:getenv("CI") =:= "true" andalso not Release of
        true -> ct:fail({skipped_in_ci, Reason});
        false -> {skip, Reason}
    end.
