%%% @doc msgflow's reports: export/3 (csv, dot, json, etf, svg, html, and
%%% mermaid for the last followed request) and the ETF dump, built from the
%%% views of this node or the cluster (msgflow_scope) and rendered by
%%% msgflow_report, msgflow_web_page (html) and msgflow_flow_render.
-module(msgflow_export).
-export([export/3, dump/0]).

%% `ok' for a format msgflow writes; a path where the format goes
%% (the arguments swapped) is named as such.
check_format(Path, Format) ->
    Formats = [mermaid | msgflow_report:formats()],
    case lists:member(Format, Formats) of
        true -> ok;
        false when is_atom(Path), (is_binary(Format) orelse (is_list(Format) andalso Format =/= [])) ->
            {error, {badarg, {format, Format},
                     [iolist_to_binary(io_lib:format("export(~0p, ~0p): the path comes first",
                                                     [Format, Path]))]}};
        false -> msgflow_opts:arg(format, Format, {one_of, Formats})
    end.

%% The last followed request as a Mermaid file; `{error, no_flow}'.
export_flow(Path) ->
    case msgflow_flow:last() of
        undefined -> {error, no_flow};
        Flow -> msgflow_file:write(Path, msgflow_flow_render:mermaid(Flow))
    end.

%% @doc msgflow:export/3: Opts checked, then the flow (mermaid) or a
%% report of the counts (export_view/3); the web page (html) is grouped
%% by name unless `by' says otherwise.
-spec export(file:filename_all(), atom(), term()) -> ok | {error, term()}.
export(Path, Format, Opts0) ->
    case {check_format(Path, Format), msgflow_opts:check(export, Opts0)} of
        {{error, _} = E, _} -> E;
        {ok, {error, _} = E} -> E;
        {ok, {ok, Opts = #{node := Only}}} ->
            case msgflow_scope:check_node(Only) of
                ok when Format =:= mermaid -> export_flow(Path);
                ok when Format =:= html ->
                    {ok, Given} = msgflow_opts:to_map(Opts0),
                    export_view(Path, Format, Opts#{by := maps:get(by, Given, name)});
                ok -> export_view(Path, Format, Opts);
                {error, _} = E -> E
            end
    end.

%% @doc msgflow:dump/0: the ETF dump of this node or the cluster, with
%% the call edges' round trips; `{error, not_started}'.
-spec dump() -> binary() | {error, not_started}.
dump() ->
    Calls = msgflow_scope:calls_view(process),
    case msgflow_scope:with_view(#{by => process}, all,
                   fun(V) -> term_to_binary(msgflow_report:dump(V, Calls)) end) of
        undefined -> {error, not_started};
        Bin -> Bin
    end.

%% A report of the counts in Format written to Path, from this
%% node's store or the cluster's views (`node' in Opts).  `html' is the
%% web page (msgflow_web_page) with its state inlined.
export_view(Path, html, #{node := Only, by := By}) ->
    case msgflow_scope:with_build(Only, fun(Build) -> msgflow_web_source:state(Build, By, true) end) of
        {error, _} = E -> E;
        State ->
            case msgflow_web_page:page({static, msgflow_report:json_encode(State)},
                                       maps:get(<<"node">>, State)) of
                {error, _} = E -> E;
                Html -> msgflow_file:write(Path, Html)
            end
    end;
export_view(Path, Format, Opts = #{node := Only}) ->
    msgflow_scope:with_build(Only, fun(Build) -> write(Build, Path, Format, Opts) end).

%% Build(Spec) gives a view: of this node's store, in the worker
%% msgflow_view:run/2 gives it, or of the cluster.
write(Build, Path, Format, Opts) ->
    Views = maps:map(fun(_, Spec) -> Build(Spec) end,
                     msgflow_report:views(Format, maps:without([node], Opts))),
    %% csv, json and the ETF dump carry the call edges' round trips (the
    %% dump by process)
    Opts1 = case Format of
                etf -> Opts#{calls => msgflow_scope:calls_view(process)};
                _ when Format =:= json; Format =:= csv ->
                    Opts#{calls => msgflow_scope:calls_view(maps:get(by, Opts, process))};
                _ -> Opts
            end,
    case msgflow_report:render(Format, Views, Opts1) of
        {error, _} = E -> E;
        Data -> msgflow_file:write(Path, Data)
    end.

