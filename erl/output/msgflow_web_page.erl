%%% @doc The web page's data and the page itself: state/3 asks the query
%%% path for the views the page shows (one snapshot on each node) and
%%% turns them into the one JSON document the page draws (the graph, the
%%% top table, the matrix, hotspots, request flows, nodes and msgflow's
%%% own figures); page/2 is the page, served by msgflow_web with the state
%%% fetched from `/api/state', or written by `export(Path, html)' with the
%%% state and every script inlined, so that the file shows the same views
%%% with no node behind it.  Reads priv/www for the page.
%%%
%%% Every label goes to the page as a JSON string, and the page sets
%%% text, never markup, from it (priv/www/msgflow.js).
-module(msgflow_web_page).
-export([state/3, state/4, page/2, www_dir/0, file/1]).

%% edges the graph draws (the busiest; the rest summed in the state)
-define(GRAPH_EDGES, 80).
%% busiest pairs by process the page gets (top table, members, an edge's pairs)
-define(PAIRS, 200).
%% keys on each axis of the matrix (the rest summed in `other')
-define(MATRIX_KEYS, 16).
%% kept windows each edge's rates are given for (each costs a sum per
%% pair read: at a million pairs, 60 of them tripled a refresh)
-define(WINDOWS, 10).

%% The libraries the page loads, in order, from priv/www/vendor
%% (tools/web/vendor.sh puts them there from npm).
-define(VENDOR, ["cytoscape.min.js", "layout-base.js", "cose-base.js", "cytoscape-fcose.js",
                 "chart.umd.min.js", "mermaid.min.js"]).

%% @doc The page's state for grouping By, from the views of Node (`all':
%% every node msgflow counts on): the graph (every group of By with the
%% kept windows' counts and kinds; by process the ?PAIRS busiest pairs),
%% the busiest pairs by process, the traffic between nodes, the call
%% edges, the request flows, the nodes' statuses and msgflow's own
%% figures; a static page (an export) has the hotspots and the busiest
%% receivers' mailbox waits in it too, a live one fetches them apart
%% (they read every active pair).  A map with
%% binary keys, for msgflow_report:json_encode/1; counts in messages,
%% rates in messages/s, times in ms since 1970.  `{error, Reason}' as
%% msgflow_query:run/2 gives it.
-spec state(msgflow_rows:grouping(), all | node(), boolean()) -> map() | {error, term()}.
state(By, Node, Static) ->
    state(By, Node, Static, #{}).

%% @doc state/3 of a range of the history (`#{from => Ms, to => Ms}',
%% msgflow_query), or of the counts now (`#{}').
-spec state(msgflow_rows:grouping(), all | node(), boolean(), map()) -> map() | {error, term()}.
state(By, Node, Static, Range) ->
    Scope = Range#{node => Node},
    Pairs = Scope#{by => process, limit => ?PAIRS, windows => ?WINDOWS},
    Graph = case By of
                process -> Pairs;
                _ -> Scope#{by => By, limit => all, windows => ?WINDOWS}
            end,
    %% each named, asked at once (round trips by kind have no edges)
    Named = [{graph, {top, Graph}}, {pairs, {top, Pairs}},
             {by_node, {top, Scope#{by => node, limit => all}}}, {statuses, {nodes, #{}}},
             {flows, {flows, #{}}}, {info, {info, #{}}}]
        ++ [{hotspots, {hotspots, Scope}} || Static]
        %% the mailbox waits of the busiest receivers (the receivers view
        %% reads every pair: a live page fetches it apart, as hotspots)
        ++ [{receivers, {receivers, Scope#{limit => 50, sort => wait}}} || Static],
    case msgflow_query:run_all([Q || {_, Q} <- Named]) of
        [{error, _} = E | _] ->
            E;
        Values ->
            V0 = maps:from_list(lists:zip([K || {K, _} <- Named], Values)),
            #{graph := G, pairs := P, statuses := Statuses} = V0,
            %% the round trips of the edges the graph shows (a click on
            %% one shows them), asked once those are known; when a node
            %% did not answer the graph in time, not waited for again (the
            %% page answers within one view's timeout)
            Wait = case G of
                       #{missing := [_ | _]} -> #{timeout => 0};
                       _ -> #{}
                   end,
            V = case By of
                    kind -> V0;
                    _ -> V0#{calls => msgflow_query:run(calls, maps:merge(Scope#{by => By, edges => shown_edges(G)},
                                                                          Wait))}
                end,
            page_state(G, P, #{hotspots => case V of #{hotspots := H} when is_list(H) -> H; _ -> [] end,
                               calls => case V of #{calls := C = #{entries := _}} -> C; _ -> none end,
                               flows => maps:get(flows, V), node_status => Statuses,
                               nodes => case length(Statuses) > 1 andalso By =/= node of
                                            true -> maps:get(by_node, V);
                                            false -> undefined
                                        end,
                               info => case V of #{info := I = #{}} -> I; _ -> #{} end,
                               receivers => case V of
                                                #{receivers := #{receivers := Rs}} -> Rs;
                                                _ -> []
                                            end,
                               static => Static})
    end.

page_state(G = #{by := By}, P, Extra) ->
    Info = maps:get(info, Extra, #{}),
    #{<<"node">> => msgflow_fmt:text(maps:get(node, G)),
      <<"running">> => maps:get(running, G),
      %% the range of the history shown (null: the counts now), and the
      %% history kept (null without one): its oldest window's end
      <<"range">> => case G of
                         #{range := #{from := F, to := T}} -> #{<<"from">> => F, <<"to">> => T};
                         _ -> null
                     end,
      <<"history">> => case maps:get(history, Info, #{}) of
                           #{oldest := O, status := St, bytes := HB} when is_integer(O) ->
                               #{<<"oldest">> => O, <<"status">> => St, <<"bytes">> => HB,
                                 <<"message">> => maps:get(message, maps:get(history, Info), null),
                                 %% the bottlenecks that appeared or cleared
                                 %% in it (msgflow_history:mark/2), oldest first
                                 <<"marks">> => [#{<<"at">> => At, <<"event">> => E, <<"verdict">> => V,
                                                   <<"label">> => msgflow_fmt:visible(L),
                                                   <<"subject">> => msgflow_fmt:visible(Sub)}
                                                 || {At, E, V, L, Sub} <- lists:reverse(
                                                                               maps:get(marks, maps:get(history, Info), []))]};
                           _ -> null
                       end,
      <<"static">> => maps:get(static, Extra, false),
      <<"taken_at">> => maps:get(taken_at, G),
      <<"window_ms">> => maps:get(window_ms, G),
      <<"estimated">> => maps:get(estimated, G),
      <<"by">> => atom_to_binary(By),
      %% the nodes that did not answer in time (a cluster's)
      <<"missing">> => maps:get(<<"missing">>, msgflow_rows:json_head(G)),
      <<"groupings">> => [atom_to_binary(B) || B <- msgflow_rows:groupings()],
      <<"windows">> => [#{<<"n">> => N, <<"at">> => At, <<"ms">> => Ms}
                        || #{n := N, at := At, window_ms := Ms} <- last(?WINDOWS, maps:get(windows, G))],
      <<"graph">> => graph(G),
      <<"matrix">> => matrix(msgflow_matrix_view:of_rows(G, all)),
      <<"pairs">> => pairs(P, By),
      %% past max_memory: the busiest pairs in overflow (null: none)
      <<"overflow_top">> => msgflow_rows:overflow_top_json(P),
      <<"hotspots">> => msgflow_hotspots:json(maps:get(hotspots, Extra, []), #{}),
      %% by process id: the wait in the last window of the busiest
      %% receivers that had one (ms), their mean queue and whether it grew
      <<"waits">> => maps:from_list([{id(R), #{<<"wait_ms">> => W, <<"queue_len">> => Q,
                                               <<"growing">> => Grew}}
                                     || #{receiver := R, wait_ms := W, queue_len := Q, growing := Grew}
                                            <- maps:get(receivers, Extra, []), is_number(W)]),
      <<"calls">> => calls(maps:get(calls, Extra, none)),
      <<"flows">> => msgflow_flows_view:json(maps:get(flows, Extra), #{}),
      <<"nodes">> => node_traffic(maps:get(node_status, Extra, []), maps:get(nodes, Extra, undefined)),
      <<"figures">> => #{<<"events">> => maps:get(events, G),
                         <<"overflow">> => maps:get(overflow, G),
                         %% the collector was behind: counts as of snapshot_at
                         <<"behind">> => maps:get(behind, G, false),
                         <<"snapshot_at">> => case maps:get(snapshot_at, G, undefined) of
                                                  undefined -> null;
                                                  At -> At
                                              end,
                         <<"memory_full">> => maps:get(memory_full, Info, false),
                         <<"collector_ms_per_s">> => maps:get(collector_ms_per_s, Info, 0.0),
                         <<"dead_letters">> => maps:get(dead_letters, G),
                         <<"pairs">> => maps:get(pairs, G),
                         <<"windows">> => length(maps:get(windows, G)),
                         <<"dropped">> => maps:get(proc_events_dropped, G),
                         <<"memory_bytes">> => maps:get(own_memory, Info,
                                                        maps:get(memory, Info, 0)
                                                        + maps:get(store_memory, Info, 0)),
                         <<"interval_ms">> => maps:get(interval, maps:get(opts, Info, #{}), 1000)}}.

last(N, L) -> lists:nthtail(max(0, length(L) - N), L).

%% The ends of the edges graph/1 shows: `[{Sender, Receiver}]'.
shown_edges(#{rows := Rows}) ->
    [{S, R} || #{sender := S, receiver := R} <- lists:sublist(Rows, ?GRAPH_EDGES)];
shown_edges(_) ->
    [].

%% The groups and the busiest ?GRAPH_EDGES edges between them; each
%% group's messages sent and received over all its edges.
graph(V = #{rows := Rows}) ->
    Edges = lists:sublist(Rows, ?GRAPH_EDGES),
    Left = lists:nthtail(length(Edges), Rows),
    Sums = lists:foldl(fun(#{sender := S, receiver := R, count := C}, Acc) ->
                               add(R, {0, C}, add(S, {C, 0}, Acc))
                       end, #{}, Rows),
    Shown = lists:usort(lists:append([[S, R] || #{sender := S, receiver := R} <- Edges])),
    #{<<"groups">> => [begin
                           {Sent, Recv} = maps:get(K, Sums),
                           #{<<"id">> => id(K), <<"label">> => msgflow_rows:display(V, K),
                             <<"sent">> => Sent, <<"received">> => Recv}
                       end || K <- Shown],
      <<"edges">> => [edge(Row) || Row <- Edges],
      <<"groups_total">> => map_size(Sums),
      <<"edges_total">> => case maps:get(groups, V) of undefined -> length(Rows); N -> N end,
      <<"left_out">> => lists:sum([C || #{count := C} <- Left])}.

add(K, {A, B}, Acc) ->
    {A0, B0} = maps:get(K, Acc, {0, 0}),
    Acc#{K => {A0 + A, B0 + B}}.

edge(Row = #{sender := S, receiver := R, count := C}) ->
    Kinds = maps:get(kinds, Row, []),
    #{<<"s">> => id(S), <<"r">> => id(R), <<"count">> => C,
      <<"rate">> => float(maps:get(rate, Row)), <<"peak">> => float(maps:get(peak_rate, Row)),
      <<"kind">> => case Kinds of
                        [{K, T, _} | _] -> msgflow_fmt:kind(K, T);
                        [] -> <<"-">>
                    end,
      <<"kinds">> => msgflow_rows:kinds_json(Kinds),
      <<"windows">> => last(?WINDOWS, maps:get(windows, Row, [])),
      %% bytes its messages copied since start and a message's (sampled
      %% sizes, by process), null when none was measured
      <<"bytes">> => case Row of #{bytes := B} -> float(B); _ -> null end,
      <<"bytes_mean">> => case Row of #{bytes_mean := BM} -> float(BM); _ -> null end}.

%% A group key as the page names it: its text (unique in a view).
id(K) when is_binary(K) -> K;
id(K) -> msgflow_fmt:endpoint(K).

%% The matrix: the busiest ?MATRIX_KEYS keys, by messages sent and
%% received, in one order on both axes; the rest summed as `other'.
matrix(#{rows := Rows, cols := Cols, cells := Cells, sent := Sent, received := Recv,
         labels := Labels}) ->
    Total = fun(K) -> maps:get(K, Sent, 0) + maps:get(K, Recv, 0) end,
    All = [K || {_, K} <- lists:sort([{-Total(K), K} || K <- lists:usort(Rows ++ Cols)])],
    Keys = lists:sublist(All, ?MATRIX_KEYS),
    Index = maps:from_list(lists:zip(Keys, lists:seq(1, length(Keys)))),
    Other = length(Keys) + 1,
    Grid = maps:fold(fun({S, R}, #{count := C}, Acc) ->
                             At = {maps:get(S, Index, Other), maps:get(R, Index, Other)},
                             Acc#{At => C + maps:get(At, Acc, 0)}
                     end, #{}, Cells),
    HasOther = length(All) > length(Keys),
    N = case HasOther of true -> Other; false -> length(Keys) end,
    #{<<"keys">> => [id(K) || K <- Keys],
      <<"labels">> => [maps:get(K, Labels, id(K)) || K <- Keys],
      <<"other">> => HasOther,
      <<"other_keys">> => length(All) - length(Keys),
      <<"cells">> => [[maps:get({I, J}, Grid, 0) || J <- lists:seq(1, N)] || I <- lists:seq(1, N)]}.

%% The busiest pairs by process, each end with its group under By.
pairs(V = #{rows := Rows, endpoints := Ends}, By) ->
    Group = fun(K) ->
                    Info = maps:get(K, Ends, #{}),
                    case By of
                        process -> msgflow_fmt:endpoint(K);
                        name -> maps:get(label, Info, msgflow_fmt:endpoint(K));
                        kind -> null;
                        _ -> case maps:get(By, Info, undefined) of
                                 undefined -> msgflow_fmt:endpoint(K);
                                 A -> atom_to_binary(A)
                             end
                    end
            end,
    [#{<<"sender">> => msgflow_fmt:endpoint(S), <<"receiver">> => msgflow_fmt:endpoint(R),
       <<"sender_label">> => msgflow_rows:display(V, S),
       <<"receiver_label">> => msgflow_rows:display(V, R),
       <<"sender_group">> => Group(S), <<"receiver_group">> => Group(R),
       <<"count">> => C, <<"rate">> => float(maps:get(rate, Row)),
       <<"peak">> => float(maps:get(peak_rate, Row)),
       <<"kinds">> => msgflow_rows:kinds_json(maps:get(kinds, Row, [])),
       <<"windows">> => last(?WINDOWS, maps:get(windows, Row, []))}
     || Row = #{sender := S, receiver := R, count := C} <- Rows].

%% The call edges with their sampled round trips (µs), keyed as the
%% graph's edges are.
calls(none) ->
    [];
calls(#{entries := Es}) ->
    Num = fun(undefined) -> null; (X) -> float(X) end,
    [#{<<"s">> => id(C), <<"r">> => id(S), <<"kind">> => atom_to_binary(K),
       <<"tag">> => msgflow_fmt:name(T), <<"calls">> => case N of undefined -> null; _ -> N end,
       <<"sampled">> => Sa, <<"unanswered">> => U, <<"p50">> => Num(P50), <<"p99">> => Num(P99),
       <<"max">> => Num(Max)}
     || #{caller := C, server := S, kind := K, tag := T, calls := N, sampled := Sa,
          unanswered := U, p50 := P50, p99 := P99, max := Max} <- Es].

node_traffic(Status, ByNode) ->
    #{<<"status">> => [#{<<"node">> => atom_to_binary(N), <<"status">> => atom_to_binary(St),
                         <<"pairs">> => P, <<"events">> => E,
                         <<"last_snapshot_ms">> => case L of undefined -> null; _ -> L end}
                       || #{node := N, status := St, pairs := P, events := E,
                            last_snapshot_ms := L} <- Status],
      <<"traffic">> => case ByNode of
                           undefined -> [];
                           #{rows := Rows} ->
                               [#{<<"sender">> => id(S), <<"receiver">> => id(R), <<"messages">> => C,
                                  <<"rate">> => float(Rate)}
                                || #{sender := S, receiver := R, count := C, rate := Rate} <- Rows]
                       end}.

%%% The page

%% @doc The page: `live' loads its scripts and the state from the node
%% that serves it (msgflow_web); `{static, StateJson}' has the scripts,
%% the style and the state inlined.  `{error, {missing, File}}' when a
%% file of priv/www is not there (the libraries are put there by the
%% build: tools/web/vendor.sh).
-spec page(live | {static, iodata()}, binary()) -> iodata() | {error, {missing, string()}}.
page(Mode, Title) ->
    case file(<<"index.html">>) of
        {error, _} = E -> E;
        {ok, Html} ->
            Parts = case Mode of
                        live -> {[["<link rel=\"stylesheet\" href=\"www/msgflow.css\">\n"]],
                                 [["<script src=\"vendor/", F, "\"></script>\n"] || F <- ?VENDOR]
                                 ++ ["<script src=\"www/msgflow.js\"></script>\n"]};
                        {static, Json} -> inlined(Json)
                    end,
            case Parts of
                {error, _} = E -> E;
                {Head, Scripts} ->
                    fill(Html, [{<<"@TITLE@">>, msgflow_fmt:xml(Title)}, {<<"@HEAD@">>, Head},
                                {<<"@SCRIPTS@">>, Scripts}])
            end
    end.

inlined(Json) ->
    Files = [{vendor, F} || F <- ?VENDOR] ++ [{www, "msgflow.js"}],
    case [{K, F} || {K, F} <- [{www, "msgflow.css"} | Files], not filelib:is_regular(path(K, F))] of
        [{K, F} | _] -> {error, {missing, path(K, F)}};
        [] ->
            Read = fun(K, F) -> {ok, B} = file:read_file(path(K, F)), script_safe(B) end,
            {["<style>", Read(www, "msgflow.css"), "</style>\n"],
             %% the state first: the page's script reads it when it runs
             ["<script type=\"application/json\" id=\"msgflow-state\">", json_safe(Json),
              "</script>\n"
              | [["<script>", Read(K, F), "\n</script>\n"] || {K, F} <- Files]]}
    end.

%% Text inside a <script> element ends at `</script' (any case): in a
%% library's source it is written `<\/script', which means the same in a
%% string or a regular expression.
script_safe(B) ->
    re:replace(B, "</(script)", "<\\\\/\\1", [global, caseless, {return, binary}]).

%% The state as JSON in a <script> element: every `<' as `\u003c', which
%% JSON reads as the same character.
json_safe(Json) ->
    binary:replace(iolist_to_binary(Json), <<"<">>, <<"\\u003c">>, [global]).

fill(Html, []) -> Html;
fill(Html, [{Mark, With} | Rest]) ->
    [A, B] = binary:split(Html, Mark),
    fill(iolist_to_binary([A, With, B]), Rest).

%% @doc A file of the page (priv/www/Name, Name a plain file name from
%% the page's own files or vendor/Name), or `{error, enoent}'.
-spec file(binary()) -> {ok, binary()} | {error, enoent}.
file(<<"vendor/", Name/binary>>) -> read(vendor, Name);
file(Name) -> read(www, Name).

read(Where, Name) ->
    case plain(Name) of
        true ->
            case file:read_file(path(Where, Name)) of
                {ok, B} -> {ok, B};
                {error, _} -> {error, enoent}
            end;
        false -> {error, enoent}
    end.

%% A name of letters, digits, `.', `-', `_', not starting with `.': no
%% way out of the folder.
plain(<<C, _/binary>> = Name) when C =/= $. ->
    lists:all(fun(X) -> (X >= $a andalso X =< $z) orelse (X >= $A andalso X =< $Z)
                            orelse (X >= $0 andalso X =< $9) orelse X =:= $. orelse X =:= $-
                            orelse X =:= $_ end, binary_to_list(Name));
plain(_) -> false.

path(www, F) -> filename:join(www_dir(), F);
path(vendor, F) -> filename:join([www_dir(), "vendor", F]).

%% @doc priv/www of this build.
-spec www_dir() -> file:filename().
www_dir() ->
    case code:priv_dir(msgflow) of
        {error, bad_name} -> filename:join([filename:dirname(code:which(?MODULE)), "..", "priv", "www"]);
        Priv -> filename:join(Priv, "www")
    end.

