%%% @doc The node's end of msgflow-top (the C node): a registered
%%% process, `msgflow_remote', one of msgflow's own (never traced), that
%%% takes requests sent to it by name, so that what a tool asks of the
%%% node is not counted in what it shows (an RPC would run in a process of
%%% rex's, traced like any other, and its messages to the collector and
%%% its answer would be in the table).  Requests are served one at a
%%% time, in this process: a process spawned to serve one would be traced
%%% in a trace session (OTP 27+), and its messages counted; only the tool
%%% that sent them waits for them.
%%%
%%% A request is `{msgflow_call, From, Ref, Call}' with From a pid (the C
%%% node's) and Ref any term; the answer is `{msgflow_reply, Ref, Reply}'.
%%% Calls:
%%% <ul>
%%% <li>`{start, Opts}', `stop': msgflow's start/1 and stop/0;</li>
%%% <li>`info': msgflow's own figures as they stand (the `info' view,
%%%     msgflow_info_view);</li>
%%% <li>`{rows, Opts}': the rows the screen shows, the `top' view with
%%%     Opts (`by', `sort', `limit', `filter'), grouped, sorted, filtered
%%%     and limited here, as an ETF dump (msgflow_dump, a binary);</li>
%%% <li>`{text, View, Opts, Width}': the text the shell prints for any
%%%     view in Width columns, as a binary;</li>
%%% <li>`views': the names of the views that need no option;</li>
%%% <li>`dump': the whole ETF dump (msgflow:dump/0), a binary.</li>
%%% </ul>
%%% Anything else is answered `{error, {badarg, {call, Call}, Calls}}'; a
%%% request that raises is answered `{error, {Class, Reason}}'.
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

call({start, Opts}) -> msgflow_cluster:start(Opts);
call(stop) -> msgflow_cluster:stop();
call(info) -> msgflow_query:run(info, #{});
call(dump) -> msgflow_export:dump();
call(views) -> msgflow_query:ready();
call({rows, Opts}) ->
    case msgflow_query:run(top, Opts) of
        {error, _} = E -> E;
        Top -> term_to_binary(msgflow_dump:of_top(Top, none, []))
    end;
call({text, View, Opts, Width}) when is_integer(Width), Width >= 40 ->
    case msgflow_query:text(View, Opts, #{width => Width, height => 50}) of
        {ok, Text} -> unicode:characters_to_binary(Text);
        {error, _} = E -> E
    end;
call(Call) ->
    {error, {badarg, {call, Call}, [<<"{start, Opts}">>, stop, info, dump, views,
                                     <<"{rows, Opts}">>, <<"{text, View, Opts, Width}">>]}}.
