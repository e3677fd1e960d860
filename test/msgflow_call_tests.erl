%%% Calls to msgflow's servers (msgflow_call): a server that is not
%%% there gives the fallback, one that crashes before it answers
%%% `{error, {crashed, Name}}', one that does not answer in time
%%% `{error, {timeout, Name}}'; the caller never raises.
-module(msgflow_call_tests).
-include_lib("eunit/include/eunit.hrl").

%% A process registered as Name that answers a gen_server call as Fun
%% says.
server(Name, Fun) ->
    Self = self(),
    P = spawn(fun() -> register(Name, self()), Self ! up,
                       receive {'$gen_call', From, Req} -> Fun(From, Req) end end),
    receive up -> P end.

calls_test() ->
    ?assertEqual(gone, msgflow_call:call(msgflow_call_tests_none, ping, gone)),
    _ = server(msgflow_call_tests_pong, fun(From, Req) -> gen_server:reply(From, {pong, Req}) end),
    ?assertEqual({pong, ping}, msgflow_call:call(msgflow_call_tests_pong, ping, gone)),
    _ = server(msgflow_call_tests_crash, fun(_, _) -> exit(boom) end),
    ?assertEqual({error, {crashed, msgflow_call_tests_crash}},
                 msgflow_call:call(msgflow_call_tests_crash, ping, gone)),
    P = server(msgflow_call_tests_mute, fun(_, _) -> receive stop -> ok end end),
    ?assertEqual({error, {timeout, msgflow_call_tests_mute}},
                 msgflow_call:call(msgflow_call_tests_mute, ping, gone, 10)),
    P ! stop.
