%%% @doc The shell's renderer: what msgflow's printing functions print.
%%% A view is asked for through the query path (msgflow_query:text/3) and
%%% printed in the terminal's width and height; the live top redraws it;
%%% help/0 is msgflow:help/0's text.  Computes nothing of its own: the
%%% shell prints what a view returns.
-module(msgflow_shell).
-export([print/2, top/2, matrix/2, help/0]).

%% @doc Prints view Name (any of msgflow_view:names()) in the terminal's
%% width and height and returns `ok', or the error msgflow_query:run/2
%% gives.
-spec print(term(), term()) -> ok | {error, term()}.
print(Name, Opts) ->
    case msgflow_query:text(Name, Opts, area()) of
        {ok, Text} -> io:put_chars(Text);
        {error, _} = E -> E
    end.

area() ->
    #{width => msgflow_fmt:columns(), height => msgflow_fmt:rows(),
      ellipsis => msgflow_fmt:ellipsis()}.

%% The options of the printed top beside the view's: `refresh' and `for'
%% make it live.
live_options() ->
    #{refresh => {1000, {int, 1, 365 * 24 * 3600 * 1000, "ms"}},
      for => {10000, {int, 0, 365 * 24 * 3600 * 1000, "ms"}}}.

%% @doc msgflow:top/2: N rows of the `top' view (N is its `limit'),
%% printed once, or redrawn live when `refresh' or `for' is given
%% (live_top/3).  Errors: `{error, {badarg, {n, N}, Allowed}}', the
%% options' and the view's.
-spec top(term(), term()) -> ok | {error, term()}.
top(N, Opts0) ->
    %% (only the options of its own are checked here: the view's are the
    %% query path's to check, once)
    case {msgflow_opts:arg(n, N, {int, 1, msgflow_rows:max_rows(), "rows"}), msgflow_opts:to_map(Opts0)} of
        {{error, _} = E, _} ->
            E;
        {ok, error} ->
            {error, {badopt, Opts0, [<<"a map">>, <<"a keyword list">>]}};
        {ok, {ok, #{limit := L}}} ->
            %% (N is the limit)
            {ok, View} = msgflow_query:options(top),
            top_keys({error, {badopt, {limit, L}, maps:keys(View)}});
        {ok, {ok, Given}} ->
            Live = maps:with([refresh, for], Given),
            case msgflow_opts:check(live_options(), Live) of
                {error, _} = E ->
                    E;
                {ok, #{refresh := Refresh, for := For}} ->
                    Top = (maps:without([refresh, for], Given))#{limit => N},
                    top_keys(case map_size(Live) > 0 of
                                 true -> live_top(Top, Refresh, erlang:monotonic_time(millisecond) + For);
                                 false -> print(top, Top)
                             end)
            end
    end.

%% The view's error for a key it does not know, with the keys top/2
%% takes (`limit' is its N; `refresh' and `for' are its own).  (The
%% keys are the view's, not checked again here.)
top_keys({error, {badopt, KV, Keys}}) when is_list(Keys) ->
    case lists:member(limit, Keys) andalso lists:all(fun is_atom/1, Keys) of
        true -> {error, {badopt, KV, lists:usort((Keys -- [limit]) ++ maps:keys(live_options()))}};
        false -> {error, {badopt, KV, Keys}}
    end;
top_keys(Other) ->
    Other.

%% @doc msgflow:matrix/2: By checked, then the `matrix' view printed.
-spec matrix(term(), term()) -> ok | {error, term()}.
matrix(By, Opts0) ->
    case {msgflow_opts:arg(by, By, {one_of, msgflow_rows:groupings()}), msgflow_opts:to_map(Opts0)} of
        {{error, _} = E, _} -> E;
        {ok, {ok, Opts}} -> print(matrix, Opts#{by => By});
        {ok, error} -> {error, {badopt, Opts0, [<<"a map">>, <<"a keyword list">>]}}
    end.

%% The `top' view (options Top) redrawn every Refresh ms until Until
%% (monotonic ms), until a line is entered on the caller's terminal (`q'
%% + Enter, or Enter), or until the collector is gone.  Each redraw goes
%% back over the last table only (cursor up, erase below), never over
%% what was printed before.
-spec live_top(map(), pos_integer(), integer()) -> ok | {error, term()}.
live_top(Top, Refresh, Until) ->
    Self = self(),
    Reader = spawn_link(fun() -> Self ! {?MODULE, self(), io:get_line("")} end),
    try
        live_top(Top, Refresh, Until, Reader, 0)
    after
        unlink(Reader),
        exit(Reader, kill),
        receive {?MODULE, Reader, _} -> ok after 0 -> ok end
    end.

live_top(Top, Refresh, Until, Reader, Drawn) ->
    case msgflow_query:text(top, Top, area()) of
        {error, _} = E when Drawn =:= 0 ->
            E;
        {error, _} ->
            ok;
        {ok, Table} ->
            Left = Until - erlang:monotonic_time(millisecond),
            Text = [Table, io_lib:format("live, every ~s ms for ~s ms more: q + Enter ends it~n",
                                         [msgflow_fmt:int(Refresh), msgflow_fmt:int(max(0, Left))])],
            Back = case Drawn of
                       0 -> "";
                       _ -> io_lib:format("\e[~bF\e[J", [Drawn])
                   end,
            io:put_chars([Back, Text]),
            Lines = length(string:split(unicode:characters_to_binary(Text), "\n", all)) - 1,
            %% the collector gone: the next query says so, and it ends
            case Left > 0 of
                true ->
                    receive
                        %% a line typed; eof or an error (no terminal) is no key
                        {?MODULE, Reader, Line} when is_list(Line); is_binary(Line) -> ok
                    after min(Refresh, Left) ->
                        live_top(Top, Refresh, Until, Reader, Lines)
                    end;
                false ->
                    ok
            end
    end.

%% @doc msgflow:help/0's text: the commands with one-line examples, the
%% views (from their registry) and the error shape.
-spec help() -> iodata().
help() ->
    ["msgflow: who sends messages to whom, how often.  h(msgflow) for the\n"
     "reference, h(msgflow, top) for one function; guides/ in the repository.\n"
     "  msgflow:start(#{duration => 60000})  count every process's sends\n"
     "  msgflow:trace(Pid)  msgflow:untrace(name)  msgflow:stop()  msgflow:reset()\n"
     "Printed (each returns ok):\n"
     "  msgflow:top(20)  msgflow:top(10, #{by => name, refresh => 1000})\n"
     "  msgflow:kinds(Sender, Receiver)  msgflow:matrix(name)  msgflow:calls()\n"
     "  msgflow:hotspots()  msgflow:flows()  msgflow:nodes()  msgflow:print(receivers)\n"
     "  msgflow:bottlenecks()  msgflow:why(Pid)  who is saturated, who waits on whom\n"
     "Data: msgflow:view(top, #{limit => 20}), any of\n    ",
     msgflow_fmt:wrap(lists:flatten(lists:join(" ", [atom_to_list(N) || N <- msgflow_view:names()])),
                      72, 4),
     "  msgflow:pairs()  msgflow:history(S, R)  msgflow:info()  msgflow:dump()\n"
     "Elsewhere: msgflow:web()  msgflow:export(\"r.html\", html)\n"
     "  msgflow:follow(fun() -> gen_server:call(cart, get) end, #{print => true})\n"
     "  msgflow:follow_calls({cart, add, 2}, #{sample => 10})  msgflow:unfollow()\n"
     "  msgflow:start(#{nodes => all})  msgflow:start_on(Node, #{duration => 60000})\n"
     "Errors: {error, {badopt, {Key, Value}, Allowed}}, {error, {badarg, {Name,\n"
     "Value}, Allowed}}, {error, not_started}.\n"].
