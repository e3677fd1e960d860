%%% Planted causes whose answer is known (issue 56): gen_servers that
%%% sleep, forward their calls, or call a peer, and the loops that call
%%% or cast to them.  Every process started here is linked to the caller
%%% of start/1 or stopped by stop/1.
-module(msgflow_planted).
-behaviour(gen_server).

-export([server/1, server/2, callers/3, casters/4, stop/1, cycle/2]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

%% @doc A gen_server (linked), Mode: `{sleep, Ms}' (each call and cast
%% sleeps Ms ms), `{forward, To}' (each call is a gen_server:call to To),
%% `idle' (answers at once), `{peer, Timeout}' (a call `{call, Peer}'
%% calls Peer with Timeout, and answers what it got), `{relay, To,
%% Every}' (passes one cast in Every on to To, keeps the others in its
%% state), `copy' (copies the binary a cast `{big, Bin}' carries),
%% `selective' (each cast looks through its whole mailbox for a message
%% that never comes).
server(Mode) ->
    {ok, P} = gen_server:start_link(?MODULE, Mode, []),
    P.

%% @doc The same, registered as Name.
server(Name, Mode) ->
    {ok, P} = gen_server:start_link({local, Name}, ?MODULE, Mode, []),
    P.

%% @doc N processes that call Server in a loop (with no timeout) until
%% stop/1.
callers(N, Server, Req) ->
    [spawn_link(fun() -> call_loop(Server, Req) end) || _ <- lists:seq(1, N)].

call_loop(Server, Req) ->
    receive
        stop -> ok
    after 0 ->
        _ = gen_server:call(Server, Req, infinity),
        call_loop(Server, Req)
    end.

%% @doc N processes that each cast to one of Servers (round robin) every
%% Ms ms until stop/1.
casters(N, Servers, Ms, Req) ->
    S = list_to_tuple(Servers),
    [spawn_link(fun() -> cast_loop(S, I, Ms, Req) end) || I <- lists:seq(1, N)].

cast_loop(S, I, Ms, Req) ->
    gen_server:cast(element(1 + I rem tuple_size(S), S), Req),
    receive
        stop -> ok
    after Ms ->
        cast_loop(S, I + 1, Ms, Req)
    end.

%% @doc Processes stopped: loops told to, servers stopped.
stop(Ps) ->
    _ = [begin
             unlink(P),
             Ref = monitor(process, P),
             exit(P, kill),
             receive {'DOWN', Ref, _, _, _} -> ok end
         end || P <- Ps],
    ok.

%% @doc A call cycle over Servers (each `{peer, Timeout}'): server I calls
%% server I+1 (the last the first), all at once; returns what each got
%% (`{'EXIT', {timeout, _}}' in a deadlock).
cycle(Servers, Timeout) ->
    Self = self(),
    Peers = tl(Servers) ++ [hd(Servers)],
    Rs = [spawn_link(fun() ->
                             Self ! {self(), call(S, {call, Peer}, Timeout * 4)}
                     end) || {S, Peer} <- lists:zip(Servers, Peers)],
    [receive {R, Got} -> Got end || R <- Rs].

init(Mode) -> {ok, Mode}.

%% A call's answer, or `{'EXIT', Reason}' when it exits (a timeout).
call(S, Req, Timeout) ->
    try gen_server:call(S, Req, Timeout)
    catch exit:Reason -> {'EXIT', Reason}
    end.

handle_call({call, Peer}, _From, M = {peer, T}) ->
    {reply, call(Peer, ping, T), M};
handle_call(ping, _From, M) ->
    {reply, pong, M};
handle_call(_Req, _From, M = {sleep, Ms}) ->
    timer:sleep(Ms),
    {reply, ok, M};
handle_call(Req, _From, M = {forward, To}) ->
    {reply, gen_server:call(To, Req, infinity), M};
handle_call(_Req, _From, M) ->
    {reply, ok, M}.

handle_cast(_Req, M = {sleep, Ms}) ->
    timer:sleep(Ms),
    {noreply, M};
handle_cast(Req, {relay, To, Every}) ->
    handle_cast(Req, {relay, To, Every, 0, []});
handle_cast(Req, {relay, To, Every, N, Kept}) ->
    case N rem Every of
        0 -> gen_server:cast(To, Req), {noreply, {relay, To, Every, N + 1, Kept}};
        _ -> {noreply, {relay, To, Every, N + 1, [Req | Kept]}}
    end;
handle_cast({big, Bin}, copy) ->
    _ = binary:copy(Bin),
    {noreply, copy};
handle_cast(_Req, selective) ->
    receive never_sent -> ok after 1 -> ok end,
    {noreply, selective};
handle_cast(_Req, M) ->
    {noreply, M}.

handle_info(_, M) -> {noreply, M}.
