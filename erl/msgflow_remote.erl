%%% @doc The node's end of msgflow-top (the C node): a registered
%%% process, `msgflow_remote', one of msgflow's own (never traced), that
%%% answers requests sent to it by name, so that what a tool asks of the
%%% node is not counted in what it shows (an RPC would run in a process of
%%% rex's, traced like any other, and its messages to the collector and
%%% its answer would be in the table).
%%%
%%% A request is `{msgflow_call, From, Ref, Call}' with From a pid (the C
%%% node's) and Ref any term; the answer is `{msgflow_reply, Ref, Reply}'.
%%% Calls, each the facade's function of that name:
%%% <ul>
%%% <li>`{start, Opts}', `stop', `info', `dump' (the ETF dump, a binary);</li>
%%% <li>`{print, View, Opts, Width}': the text msgflow prints for
%%%     `view(View, Opts)' in Width columns, as a binary (views top,
%%%     matrix, hotspots, nodes, kinds, process).</li>
%%% </ul>
%%% Anything else is answered `{error, {badarg, {call, Call}, Calls}}'.
%%% Requests are served one at a time, each within the process; a request
%%% that raises is answered `{error, {Class, Reason}}'.
-module(msgflow_remote).
-export([start_link/0, init/1]).

%% @doc Starts the process (msgflow_sup's child) and registers it.
-spec start_link() -> {ok, pid()}.
start_link() ->
    proc_lib:start_link(?MODULE, init, [self()]).

%% @private
-spec init(pid()) -> no_return().
init(Parent) ->
    true = register(?MODULE, self()),
    proc_lib:init_ack(Parent, {ok, self()}),
    loop().

loop() ->
    receive
        {msgflow_call, From, Ref, Call} when is_pid(From) ->
            Reply = try call(Call)
                    catch C:R -> {error, {C, R}}
                    end,
            From ! {msgflow_reply, Ref, Reply};
        _ ->
            ok
    end,
    loop().

call({start, Opts}) -> msgflow:start(Opts);
call(stop) -> msgflow:stop();
call(info) -> msgflow:info();
call(dump) -> msgflow:dump();
call({print, View, Opts, Width}) when is_integer(Width), Width >= 40 ->
    msgflow_shell:render_text(View, Opts, Width);
call(Call) ->
    {error, {badarg, {call, Call}, [<<"{start, Opts}">>, stop, info, dump,
                                     <<"{print, View, Opts, Width}">>]}}.
