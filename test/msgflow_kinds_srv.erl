%%% A gen_server for msgflow_kinds_SUITE: replies `{ok, Key}' to
%%% `{get, Key}', `ok' to `put' and any other request itself; each `{tick, N}' it gets makes it send
%%% itself `{'$gen_event', {xmlstreamelement, N}}' (as p1_fsm's XML parser
%%% does); everything else is dropped.
-module(msgflow_kinds_srv).
-behaviour(gen_server).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

init([]) ->
    {ok, []}.

handle_call({get, K}, _From, S) -> {reply, {ok, K}, S};
handle_call(put, _From, S) -> {reply, ok, S};
handle_call(Other, _From, S) -> {reply, Other, S}.

handle_cast(_, S) ->
    {noreply, S}.

handle_info({tick, N}, S) ->
    self() ! {'$gen_event', {xmlstreamelement, N}},
    {noreply, S};
handle_info(_, S) ->
    {noreply, S}.
