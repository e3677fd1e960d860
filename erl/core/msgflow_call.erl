%%% @doc Calls to msgflow's registered servers (the collector, the
%%% cluster coordinator), in one place: a server that is not there, or
%%% that ends before it answers (the application stopping, a concurrent
%%% stop of the cluster), gives the caller's fallback instead of an exit.
%%% Any process.
-module(msgflow_call).
-export([call/3, call/4]).

%% @doc call/4 without a timeout.
-spec call(atom(), term(), term()) -> term().
call(Server, Request, IfGone) ->
    call(Server, Request, IfGone, infinity).

%% @doc The answer of the server registered as Server to Request, or
%% IfGone when there is none or it ends first; `exit({timeout, _})' after
%% Timeout ms as gen_server:call/3.
-spec call(atom(), term(), term(), timeout()) -> term().
call(Server, Request, IfGone, Timeout) ->
    case whereis(Server) of
        undefined ->
            IfGone;
        _ ->
            try gen_server:call(Server, Request, Timeout)
            catch
                exit:{Why, _} when Why =:= noproc; Why =:= normal; Why =:= shutdown;
                                   Why =:= killed ->
                    IfGone;
                exit:{{shutdown, _}, _} ->
                    IfGone
            end
    end.
