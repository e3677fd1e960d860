%%% A gen_server for the request-flow tests: answers {get, X} itself, or
%%% by calling the next server in its chain, so that one request costs a
%%% known number of messages (two per server).
-module(msgflow_flow_srv).
-behaviour(gen_server).
-export([start/2, stop/1, init/1, handle_call/3, handle_cast/2]).

start(Name, Next) ->
    gen_server:start({local, Name}, ?MODULE, Next, []).

stop(Name) ->
    gen_server:stop(Name).

init(Next) ->
    {ok, Next}.

handle_call({get, X}, _From, undefined) ->
    {reply, X, undefined};
handle_call({get, X}, _From, Next) ->
    {reply, gen_server:call(Next, {get, X}), Next}.

handle_cast(_, St) ->
    {noreply, St}.
