%%% @doc msgflow's files: export/3 and the ETF dump.  Each report asks the
%%% query path for the views it reads (msgflow_query:run_all/1: one
%%% snapshot on each node), renders them (msgflow_report, msgflow_dump,
%%% msgflow_web_page, msgflow_flow_render) and writes the file whole
%%% (msgflow_file), in a process of its own (msgflow_query:run_sized/1), so that
%%% the caller's heap never holds a million rows.
-module(msgflow_export).
-export([export/3, dump/0, dump/1, options/0]).

%% @doc export/3's options, with their defaults and rules: `by'
%% (process; html: name), `sort', `limit' (rows of csv and json, edges of
%% dot (200), senders and receivers of the svg heatmap (30)), `node' (one
%% node of a cluster), and `view' (any view, written as `json' or `text'
%% with the view's own options beside it).
-spec options() -> msgflow_opts:schema().
options() ->
    maps:merge(#{by => {process, {one_of, msgflow_rows:groupings()}},
                 sort => {messages, {one_of, msgflow_rows:sorts()}},
                 limit => {none, {int, 1, msgflow_rows:max_rows(), "rows"}},
                 node => {all, atom}},
               %% a range of the history instead of the counts now
               msgflow_query:range_options()).

%% `ok' for a format msgflow writes; a path where the format goes
%% (the arguments swapped) is named as such.
check_format(Path, Format, Formats) ->
    case lists:member(Format, Formats) of
        true -> ok;
        false when is_atom(Path), (is_binary(Format) orelse (is_list(Format) andalso Format =/= [])) ->
            {error, {badarg, {format, Format},
                     [iolist_to_binary(io_lib:format("export(~0p, ~0p): the path comes first",
                                                     [Format, Path]))]}};
        false -> msgflow_opts:arg(format, Format, {one_of, Formats})
    end.

%% @doc msgflow:export/3: Opts checked, then the flow (mermaid), a view
%% (`view' in Opts: json or text), or a report of the counts.  Errors:
%% `{error, {badarg, {format, F}, Formats}}' (with a hint when Path and
%% Format are swapped), `{error, {badopt, {K, V}, Allowed}}', `{error,
%% not_started}', `{error, no_flow}' (mermaid before a followed request),
%% `{error, {Reason, Path}}' when the file cannot be written; nothing
%% partial is left behind.
-spec export(file:filename_all(), atom(), term()) -> ok | {error, term()}.
export(Path, Format, Opts0) ->
    msgflow_query:run_sized(fun() -> export_here(Path, Format, Opts0) end).

%% The file's own options (msgflow_file:write/3's) taken out of Opts0.
export_here(Path, Format, Opts0) ->
    case msgflow_opts:to_map(Opts0) of
        {ok, M} ->
            case msgflow_opts:check(#{follow_symlinks => {false, boolean},
                                      mode => {8#600, {int, 0, 8#777, "the new file's mode bits: 8#600"}}},
                                    maps:with([follow_symlinks, mode], M)) of
                {ok, FO} -> export_here(Path, Format, maps:without([follow_symlinks, mode], M), FO);
                {error, _} = E -> E
            end;
        error ->
            export_here(Path, Format, Opts0, #{})
    end.

export_here(Path, Format, Opts0, FO) ->
    case msgflow_opts:to_map(Opts0) of
        {ok, #{view := Name} = Given} ->
            case check_format(Path, Format, [json, text]) of
                ok -> export_view(Path, Format, Name, maps:remove(view, Given), FO);
                {error, _} = E -> E
            end;
        _ ->
            case {check_format(Path, Format, [mermaid | msgflow_report:formats()]),
                  msgflow_opts:check((options())#{view => {none, {one_of, msgflow_view:names()}}},
                                     Opts0)} of
                {{error, _} = E, _} -> E;
                {ok, {error, _} = E} -> E;
                {ok, {ok, _}} when Format =:= mermaid -> export_flow(Path, FO);
                {ok, {ok, Opts}} ->
                    {ok, Given} = msgflow_opts:to_map(Opts0),
                    report(Path, Format, Opts, Given, FO)
            end
    end.

%% The last followed request as a Mermaid file; `{error, no_flow}'.
export_flow(Path, FO) ->
    case msgflow_query:run(flows, #{}) of
        #{last := undefined} -> {error, no_flow};
        #{last := Flow} -> msgflow_file:write(Path, msgflow_flow_render:mermaid(Flow), FO);
        {error, _} = E -> E
    end.

%% A view as JSON or as the text the shell prints (120 columns).
export_view(Path, json, Name, Opts, FO) ->
    case msgflow_query:json(Name, Opts) of
        {ok, Json} -> msgflow_file:write(Path, msgflow_report:json_encode(Json), FO);
        {error, _} = E -> E
    end;
export_view(Path, text, Name, Opts, FO) ->
    case msgflow_query:text(Name, Opts, #{width => 120, height => 10000}) of
        {ok, Text} -> msgflow_file:write(Path, unicode:characters_to_binary(Text), FO);
        {error, _} = E -> E
    end.

%% A report of the counts: the views Format reads, rendered.
report(Path, html, Opts = #{node := Node}, Given, FO) ->
    case msgflow_web_page:state(maps:get(by, Given, name), Node, true, range(Opts)) of
        {error, _} = E -> E;
        State ->
            case msgflow_web_page:page({static, msgflow_report:json_encode(State)},
                                       maps:get(<<"node">>, State)) of
                {error, _} = E -> E;
                Html -> msgflow_file:write(Path, Html, FO)
            end
    end;
report(Path, Format, Opts = #{by := By, sort := Sort, node := Node}, _Given, FO) ->
    Scope = (range(Opts))#{node => Node},
    %% (grouped rows with their bytes: an export is asked once)
    Top = Scope#{by => By, sort => Sort, limit => maps:get(limit, Opts, all), bytes => true},
    %% the call edges of the rows' grouping (round trips by kind have none:
    %% the JSON gives them by process)
    Calls = Scope#{by => case By of kind -> process; _ -> By end},
    Queries = case Format of
                  csv when By =:= kind -> [{top, Top}];
                  csv -> [{top, Top}, {calls, Calls}];
                  json -> [{top, Top}, {calls, Calls}];
                  dot -> [{top, Top#{limit => maps:get(limit, Opts, 200)}}];
                  svg -> [{matrix, Scope#{by => By, limit => maps:get(limit, Opts, 30)}}];
                  etf -> dump_queries(Scope)
              end,
    case msgflow_query:run_all(Queries) of
        [{error, _} = E | _] -> E;
        Values -> msgflow_file:write(Path, render(Format, Values), FO)
    end.

render(csv, [Top]) -> msgflow_report:csv(Top, none);
render(csv, [Top, Calls]) -> msgflow_report:csv(Top, calls(Calls));
render(json, [Top, Calls]) -> msgflow_report:json(Top, calls(Calls));
render(dot, [Top]) -> msgflow_report:dot(Top, length(maps:get(rows, Top)));
render(svg, [Matrix]) -> msgflow_report:heatmap(Matrix);
render(etf, Values) -> dump_of(Values).

%% The calls view when there is one.
calls(#{entries := _} = V) -> V;
calls(_) -> none.

%% The nodes' statuses for the dump: every node's across a cluster, none
%% (this node alone) else.
statuses([_, _ | _] = Ns) -> Ns;
statuses(_) -> [].

%% The range of the history Opts ask for (none: #{}).
range(#{from := none}) -> #{};
range(Opts) -> maps:with([from, to, history], Opts).

%% @doc msgflow:dump/0: the ETF dump (msgflow_dump) of this node or the
%% cluster, every pair by process with the call edges' round trips, as a
%% binary; `{error, not_started}'.
-spec dump() -> binary() | {error, term()}.
dump() ->
    dump(#{}).

%% @doc dump/0 of a range of the history: `from', `to' and `history' as
%% the views take them (msgflow_query); dump/0's errors, and `{error,
%% {no_history, Dir, {From, To}}}'.
-spec dump(map()) -> binary() | {error, term()}.
dump(Range) ->
    msgflow_query:run_sized(fun() -> dump_here(Range) end).

dump_here(Range) ->
    case msgflow_query:run_all(dump_queries(Range)) of
        [{error, _} = E | _] -> E;
        Values -> dump_of(Values)
    end.

%% What the dump is made of (Scope: a `node', or every node), and the
%% dump made of it.
dump_queries(Scope) ->
    [{top, Scope#{by => process, limit => all}}, {calls, Scope#{by => process}}, {nodes, #{}}].

dump_of([Top, Calls, Nodes]) ->
    term_to_binary(msgflow_dump:of_top(Top, calls(Calls), statuses(Nodes))).
