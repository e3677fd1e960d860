%%% A gen_server that takes 1 ms per cast: the planted bottleneck of
%%% msgflow_views_SUITE:hotspot_bottleneck/1.
-module(msgflow_slow_server).
-behaviour(gen_server).
-export([init/1, handle_call/3, handle_cast/2]).

init([]) ->
    {ok, 0}.

handle_call(count, _From, N) ->
    {reply, N, N}.

handle_cast(_Msg, N) ->
    receive after 1 -> ok end,   %% the work this server is too slow at
    {noreply, N + 1}.
