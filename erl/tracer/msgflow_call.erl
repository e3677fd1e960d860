%%% @doc Calls to msgflow's registered servers (the collector, the flow
%%% keeper), in one place, each with a deadline: a server that is not
%%% there, or that ends before it answers (the application stopping),
%%% gives the caller's fallback; one that does not answer in time gives
%%% `{error, {timeout, Server}}' (a suspended or overloaded server never
%%% holds its caller for ever); one that crashes before it answers
%%% `{error, {crashed, Server}}'.  Any process.
-module(msgflow_call).
-export([call/3, call/4]).

%% ms a server has to answer when the caller names no deadline: a
%% snapshot merged at a million new pairs takes a few seconds
-define(DEADLINE_MS, 30000).

%% @doc call/4 with a deadline of 30 s.
-spec call(atom(), term(), term()) -> term() | {error, {timeout, atom()}}.
call(Server, Request, IfGone) ->
    call(Server, Request, IfGone, ?DEADLINE_MS).

%% @doc The answer of the server registered as Server to Request, IfGone
%% when there is none or it ends first, `{error, {timeout, Server}}' after
%% Timeout ms (msgflow's own calls always give one; `infinity' is for a
%% user's wait/1 that asks for it).
-spec call(atom(), term(), term(), timeout()) -> term() | {error, {timeout | crashed, atom()}}.
call(Server, Request, IfGone, Timeout) ->
    case whereis(Server) of
        undefined ->
            IfGone;
        _ ->
            try gen_server:call(Server, Request, Timeout)
            catch
                exit:{timeout, _} ->
                    {error, {timeout, Server}};
                exit:{Why, _} when Why =:= noproc; Why =:= normal; Why =:= shutdown;
                                   Why =:= killed ->
                    IfGone;
                exit:{{shutdown, _}, _} ->
                    IfGone;
                exit:{_Crash, {gen_server, call, _}} ->
                    %% (it crashed: its supervisor logged why and starts
                    %% it again)
                    {error, {crashed, Server}}
            end
    end.
