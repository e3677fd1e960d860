%%% A hop of the bench's gen_server chain (msgflow_bench flows): answers
%%% {get, X} itself, or by calling the next hop.
-module(msgflow_bench_hop).
-behaviour(gen_server).
-export([start/1, init/1, handle_call/3, handle_cast/2]).

-spec start(pid() | undefined) -> pid().
start(Next) ->
    {ok, P} = gen_server:start(?MODULE, Next, []),
    P.

-spec init(pid() | undefined) -> {ok, pid() | undefined}.
init(Next) -> {ok, Next}.

-spec handle_call({get, term()}, term(), pid() | undefined) -> {reply, term(), pid() | undefined}.
handle_call({get, X}, _From, undefined) -> {reply, X, undefined};
handle_call({get, X}, _From, Next) -> {reply, gen_server:call(Next, {get, X}), Next}.

-spec handle_cast(term(), term()) -> {noreply, term()}.
handle_cast(_, S) -> {noreply, S}.
