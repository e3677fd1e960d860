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
%% dumps, CSV and printed output, flows' summaries
-export([lines/1, count/2, csv_rows/1, csv_rows/4, csv_quoted/4, field/1,
         dump_dir/0, write_dump/1, read_dump/1, write_expect/3, flows_of/2]).

%% A request to msgflow_remote, as msgflow-top sends it, and its answer.
remote_call(Call) ->
    Ref = make_ref(),
    msgflow_remote ! {msgflow_call, self(), Ref, Call},
    receive {msgflow_reply, Ref, Reply} -> Reply end.

%% Whatever a case did, msgflow leaves nothing behind: its web server,
%% its run, the requests it follows (msgflow_test_hook's after each case;
%% a suite's own end_per_testcase and end_per_suite).
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
                                     || M <- [msgflow, ?MODULE, msgflow_workloads]]);
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

lines(Bin) ->
    [L || L <- string:split(binary:replace(Bin, <<"\e[4F\e[J">>, <<>>, [global]), "\n", all)].

count(Bin, Pat) ->
    length(binary:matches(Bin, Pat)).

%% RFC 4180 rows: quoted fields may hold commas, quotes and newlines.
csv_rows(Bin) ->
    csv_rows(Bin, [], [], []).

csv_rows(<<>>, [], [], Rows) -> lists:reverse(Rows);
csv_rows(<<>>, F, Fs, Rows) -> lists:reverse([lists:reverse([field(F) | Fs]) | Rows]);
csv_rows(<<$\n, R/binary>>, F, Fs, Rows) -> csv_rows(R, [], [], [lists:reverse([field(F) | Fs]) | Rows]);
csv_rows(<<$,, R/binary>>, F, Fs, Rows) -> csv_rows(R, [], [field(F) | Fs], Rows);
csv_rows(<<$", R/binary>>, [], Fs, Rows) -> csv_quoted(R, [], Fs, Rows);
csv_rows(<<C, R/binary>>, F, Fs, Rows) -> csv_rows(R, [C | F], Fs, Rows).

csv_quoted(<<$", $", R/binary>>, F, Fs, Rows) -> csv_quoted(R, [$" | F], Fs, Rows);
csv_quoted(<<$", R/binary>>, F, Fs, Rows) -> csv_rows(R, F, Fs, Rows);
csv_quoted(<<C, R/binary>>, F, Fs, Rows) -> csv_quoted(R, [C | F], Fs, Rows).

field(F) -> list_to_binary(lists:reverse(F)).

dump_dir() ->
    Dir = filename:join([msgflow_test_lib:root(), "_build", "test", "dumps"]),
    ok = filelib:ensure_path(Dir),
    Dir.

%% Exports an ETF dump of the data msgflow holds and its expect file.
write_dump(Name) ->
    ok = msgflow:export(filename:join(dump_dir(), Name ++ ".etf"), etf),
    write_expect(Name, read_dump(Name), true).

read_dump(Name) ->
    {ok, Bin} = file:read_file(filename:join(dump_dir(), Name ++ ".etf")),
    binary_to_term(Bin).

%% The expect file test/c/test_dump.c checks the decoder against: a
%% summary line, then (when PerPair) each row as the decoder must render it
%% (a version 6 dump names its ends' texts).
write_expect(Name, #{node := Node, events := Events, endpoints := Ends, rows := Rows},
             PerPair) ->
    EndT = list_to_tuple(Ends),
    Head = io_lib:format("~s ~b ~b ~b ~b ~b~n",
                         [Node, length(Ends), length(Rows), Events,
                          lists:sum([C || #{messages := C} <- Rows]),
                          lists:sum([N || #{kinds := Ks} <- Rows, #{messages := N} <- Ks])]),
    %% each row, and its kinds as `kind:tag=N' in the dump's order
    Lines = [begin
                 #{text := S, label := SL} = element(Si + 1, EndT),
                 #{text := R, label := RL} = element(Ri + 1, EndT),
                 [S, $\t, R, $\t, SL, $\t, RL, $\t,
                  integer_to_list(C), $\t, integer_to_list(W), $\t,
                  lists:join(" ", [io_lib:format("~s:~s=~b", [K, T, N])
                                   || #{kind := K, tag := T, messages := N} <- Ks]),
                  $\n]
             end || PerPair, #{sender := Si, receiver := Ri, messages := C, window_messages := W,
                               kinds := Ks} <- Rows],
    ok = file:write_file(filename:join(dump_dir(), Name ++ ".expect"), [Head | Lines]).

%% The summaries of the follow_calls entries of module Mod's function F
%% (flows() keeps those of the entries stopped before).
flows_of(Mod, F) ->
    [S || S = #{entry := {M, F1, _}} <- maps:get(entries, msgflow:view(flows, #{})),
          M =:= Mod, F1 =:= F].
