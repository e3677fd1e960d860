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
    {ok, View} = msgflow_query:options(top),
    Schema = maps:merge(maps:remove(limit, View), live_options()),
    case {msgflow_opts:arg(n, N, {int, 1, msgflow_rows:max_rows(), "rows"}),
          msgflow_opts:check(Schema, Opts0)} of
        {{error, _} = E, _} ->
            E;
        {ok, {error, _} = E} ->
            E;
        {ok, {ok, #{refresh := Refresh, for := For}}} ->
            {ok, Given} = msgflow_opts:to_map(Opts0),
            Top = (maps:without([refresh, for], Given))#{limit => N},
            case is_map_key(refresh, Given) orelse is_map_key(for, Given) of
                true -> live_top(Top, Refresh, erlang:monotonic_time(millisecond) + For);
                false -> print(top, Top)
            end
    end.

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
    ["msgflow: who sends messages to whom, how often\n"
     "  msgflow:start()                     count the sends of all processes\n"
     "  msgflow:start(#{procs => [Pid, name], interval => 500, duration => 60000})\n"
     "  msgflow:start(#{sample => {100, 1000}})   trace 100 ms of every second\n"
     "  msgflow:trace(Pid)  msgflow:untrace(name) add or drop one while running\n"
     "Printed (tables in the terminal's width; each returns ok):\n"
     "  msgflow:top()  msgflow:top(20)      busiest pairs, rate in the last window\n"
     "  msgflow:top(10, #{refresh => 1000, for => 10000})  live; q + Enter ends it\n"
     "  msgflow:top(10, #{by => kind})      call get, cast ...; or sort => rate | peak\n"
     "  msgflow:kinds(Sender, Receiver)     one pair's messages by kind and tag\n"
     "  msgflow:matrix(name)                or process | module | application | node\n"
     "  msgflow:matrix(name, #{kind => call})  one kind of message (or {call, get})\n"
     "  msgflow:hotspots()                  fan_in, hot_pair, spike, fan_out, ...\n"
     "  msgflow:flows()                     follow_calls/2 entries, the last follow/1\n"
     "  msgflow:calls()                     how long calls wait, p50 and p99 per edge\n"
     "  msgflow:nodes()                     each node's status, pairs, messages\n"
     "  msgflow:print(receivers)            any view, printed; the views:\n    ",
     msgflow_fmt:wrap(lists:flatten(lists:join(" ", [atom_to_list(N) || N <- msgflow_view:names()])),
                      72, 4),
     "Data (for programs; the same options):\n"
     "  msgflow:view(top, #{limit => 20})   any view by name, as a value\n"
     "  msgflow:view(matrix, #{by => name}) msgflow:view(kinds, #{pair => {S, R}})\n"
     "  msgflow:pairs()                     [{Sender, Receiver, Messages}] held, exact\n"
     "  msgflow:history(Sender, Receiver)   messages per window of one pair\n"
     "  msgflow:info()  msgflow:dump()      what msgflow holds; the ETF dump\n"
     "Reports and requests:\n"
     "  msgflow:web()                       the live page: http://127.0.0.1:7780/\n"
     "  msgflow:export(\"flow.html\", html)   or csv | dot | json | etf | svg\n"
     "  msgflow:export(\"m.svg\", svg, #{by => module, limit => 20})\n"
     "  msgflow:export(\"r.json\", json, #{view => receivers})  a view as JSON\n"
     "  msgflow:follow(fun() -> gen_server:call(cart, get) end, #{print => true})\n"
     "                                      one request: its messages, causal order\n"
     "  msgflow:follow_calls({cart, add, 2}, #{sample => 10})  every 10th call\n"
     "  msgflow:unfollow()                  stop following (flows() keeps them)\n"
     "  msgflow:export(\"flow.mmd\", mermaid) the last followed request\n"
     "Nodes:\n"
     "  msgflow:start(#{nodes => all})      this node and every connected one\n"
     "  msgflow:start_on(Node, #{duration => 60000})  count on Node only\n"
     "  msgflow:top(10, #{node => N})       one node of the cluster; matrix(node)\n"
     "  msgflow:reset()                     forget the counts, keep tracing\n"
     "  msgflow:stop()                      flags off; counts stay until start\n"
     "Options are a map or a keyword list (Elixir: :msgflow.top(10, by: :name)).\n"
     "Errors: {error, {badopt, {Key, Value}, Allowed}} for an option,\n"
     "        {error, {badarg, {Name, Value}, Allowed}} for an argument,\n"
     "        {error, not_started} from a view before the first start.\n"].
