%%% @doc What the shell prints of the views (msgflow_scope:view/2): each
%%% printed in the terminal's width and height (msgflow_text,
%%% msgflow_tables), the live top, and the text msgflow_remote sends to
%%% msgflow-top.  Renders views; builds none.
-module(msgflow_shell).
-export([print/2, render_text/3, live_top/3, top/2, matrix/2]).

%% the most rows top/2 may ask for: more than any node holds pairs, less
%% than what ETS limits take
-define(MAX_ROWS, 100000000).

%% @doc msgflow:top/2: N and Opts checked, then the table printed once, or
%% redrawn live when `refresh' or `for' is given (live_top/3).
-spec top(term(), term()) -> ok | msgflow_opts:error() | {error, not_started}.
top(N, Opts0) ->
    case {msgflow_opts:arg(n, N, {int, 1, ?MAX_ROWS, "rows"}), msgflow_opts:check(top, Opts0)} of
        {{error, _} = E, _} ->
            E;
        {ok, {error, _} = E} ->
            E;
        {ok, {ok, #{by := By, sort := Sort, refresh := Refresh, for := For, node := Node}}} ->
            {ok, Given} = msgflow_opts:to_map(Opts0),
            Top = #{limit => N, by => By, sort => Sort, node => Node},
            case is_map_key(refresh, Given) orelse is_map_key(for, Given) of
                true -> live_top(Top, Refresh, erlang:monotonic_time(millisecond) + For);
                false -> print(top, Top)
            end
    end.

%% @doc msgflow:matrix/2: By checked, then the matrix printed.
-spec matrix(term(), term()) -> ok | msgflow_opts:error() | {error, not_started}.
matrix(By, Opts0) ->
    case {msgflow_opts:arg(by, By, {one_of, msgflow_view:groupings()}), msgflow_opts:to_map(Opts0)} of
        {{error, _} = E, _} -> E;
        {ok, {ok, Opts}} -> print(matrix, Opts#{by => By});
        {ok, error} -> msgflow_opts:check(matrix, Opts0)
    end.

%% @doc Prints view Name (top, matrix, hotspots, flows, nodes, kinds,
%% process) in the terminal's width and height and returns `ok', or the
%% error view/2 gives.
-spec print(atom(), term()) -> ok | msgflow_opts:error() | {error, term()}.
print(Name, Opts) ->
    case msgflow_scope:view(Name, Opts) of
        {error, _} = E -> E;
        Value -> io:put_chars(render(Name, Value, Opts, msgflow_fmt:columns(), msgflow_fmt:rows()))
    end.

%% @doc The text print/2 prints, in Width columns (and 50 lines for the
%% matrix), as a binary; or the error view/2 gives.  For a tool that
%% shows it elsewhere (msgflow_remote).
-spec render_text(atom(), term(), pos_integer()) -> binary() | {error, term()}.
render_text(Name, Opts, Width) ->
    case msgflow_scope:view(Name, Opts) of
        {error, _} = E -> E;
        Value -> unicode:characters_to_binary(render(Name, Value, Opts, Width, 50))
    end.

render(top, View, _, W, _) ->
    msgflow_text:top(View, W);
render(calls, View, _, W, _) ->
    msgflow_tables:calls(View, W);
render(matrix, M, _, W, H) ->
    msgflow_tables:matrix(M, W, H);
render(hotspots, Fs, Opts, W, _) ->
    {ok, #{windows := Ws}} = msgflow_opts:check(hotspots, Opts),
    msgflow_tables:hotspots(Fs, Ws, W);
render(flows, Flows, _, W, _) ->
    msgflow_tables:flows(Flows, W);
render(nodes, Ns, _, W, _) ->
    msgflow_tables:nodes(Ns, W);
render(process, P, _, W, _) ->
    msgflow_tables:process(P, W);
render(kinds, View, _, _, _) ->
    msgflow_text:kinds(View).

%% @doc The top table redrawn every Refresh ms until Until (monotonic
%% ms), until a line is entered on the caller's terminal (`q' + Enter, or
%% Enter), or until the collector is gone.  Each redraw goes back over
%% the last table only (cursor up, erase below), never over what was
%% printed before.
-spec live_top(map(), pos_integer(), integer()) -> ok | msgflow_opts:error() | {error, not_started}.
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
    case msgflow_scope:view(top, Top) of
        {error, _} = E when Drawn =:= 0 ->
            E;
        {error, _} ->
            ok;
        View ->
            Left = Until - erlang:monotonic_time(millisecond),
            Text = [msgflow_text:top(View, msgflow_fmt:columns()),
                    io_lib:format("live, every ~s ms for ~s ms more: q + Enter ends it~n",
                                  [msgflow_fmt:int(Refresh), msgflow_fmt:int(max(0, Left))])],
            Back = case Drawn of
                       0 -> "";
                       _ -> io_lib:format("\e[~bF\e[J", [Drawn])
                   end,
            io:put_chars([Back, Text]),
            Lines = length(string:split(unicode:characters_to_binary(Text), "\n", all)) - 1,
            case Left > 0 andalso whereis(msgflow_collector) =/= undefined of
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
