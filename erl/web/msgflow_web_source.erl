%%% @doc What msgflow's web server serves (msgflow_web's source): the
%%% page's state for a grouping (msgflow_web_page:state/3), its hotspots,
%%% any view as JSON or as text, and `/metrics' (msgflow_prom), each asked
%%% of the query path and rendered here.  The web layer's own: msgflow_web
%%% gets its documents through the fun source/1 makes.
-module(msgflow_web_source).
-export([start/1, source/1, access/1]).
-export_type([access/0]).

%% Who the server answers (msgflow_web_httpd checks each request): the
%% host names a request's Host (and Origin, when it has one) may name,
%% port aside, and the token every API path and /metrics need (`none':
%% none).
-type access() :: #{hosts := [binary()], token := binary() | none}.

%% @doc web/1's options, with their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{port => {7780, {int, 0, 65535, "TCP port; 0: any free one"}},
      ip => {{127, 0, 0, 1}, ip},
      metrics_edges => {100, {int, 1, 100000, "edge series"}},
      hosts => {[], {list_of, text, 100}},
      token => {default, {either, [{one_of, [default, none, generate]}, {tagged, file, text}]}},
      metrics_views => {[], {subset, [N || {N, _} <- msgflow_view:with_metrics()]}}}.

%% @doc msgflow:web/1: serves msgflow's live page from this node with
%% OTP's inets httpd (msgflow_web), msgflow's application started if it
%% is not, until msgflow:web_stop/0 or the application stops: the graph of
%% the message flow (by name, or another grouping chosen on the page), the
%% top table, the matrix, hotspots, request flows, the nodes of a cluster,
%% every view (`/api/view?name=receivers', `/api/text?name=receivers'),
%% msgflow's own figures, updated every second; `/metrics' in Prometheus'
%% text format on the same server.  Read-only: nothing served starts,
%% stops or changes tracing.  Opts: `port' (7780; 0 for any free port),
%% `ip' (loopback, `{127,0,0,1}'; `{0,0,0,0}' listens on every interface:
%% guides/web.md shows an SSH tunnel instead), `metrics_edges' (100: edge
%% series of /metrics, the busiest by name, the rest summed as `other'),
%% `metrics_views' ([]: the views whose own series /metrics adds, among
%% those that give some, `receivers' say; each is built at every scrape),
%% `hosts' (host names a request's Host header may name besides the
%% bound address, and on loopback `localhost', `127.0.0.1', `[::1]': a
%% request naming another gets 403, as does one whose Origin names
%% another), `token' (what every API path and /metrics need as
%% `Authorization: Bearer Token'; `generate': a new one, in the returned
%% URL's fragment `#token=...', which the page reads and no server sees;
%% `{file, Path}': the file's first line; `none': no token; the default
%% is none on loopback, and binding beyond it without `token' is refused).
%% `{ok, Url}'; errors: `{error, {badopt, {Key, Value}, Allowed}}',
%% `{error, {already_started, Url}}', `{error, {Reason, {port, Port}}}'
%% when the port cannot be listened on (eaddrinuse).  The page says "not
%% started" until msgflow:start/1 has run.
-spec start(term()) -> {ok, string()} | {error, term()}.
start(Opts0) ->
    case msgflow_opts:check(options(), Opts0) of
        {ok, Opts} ->
            case {access(Opts), application:ensure_all_started(msgflow)} of
                {{ok, Access}, {ok, _}} ->
                    case msgflow_web:start(Opts#{access => Access}, source(Opts)) of
                        {ok, Url} when map_get(token, Opts) =:= generate ->
                            {ok, Url ++ "#token=" ++ binary_to_list(map_get(token, Access))};
                        Other -> Other
                    end;
                {{error, _} = E, _} -> E;
                {_, {error, _} = E} -> E
            end;
        {error, _} = E -> E
    end.

%% @doc Who a server started with web/1's checked Opts answers: its host
%% names and its token (see start/1).  Errors as start/1's: a bind beyond
%% loopback with no `token', a token file that cannot be read or is
%% empty.
-spec access(map()) -> {ok, access()} | {error, {badopt, {token, term()}, [binary()]}}.
access(#{ip := Ip, hosts := Extra, token := Token}) ->
    Loopback = loopback(Ip),
    Hosts = lists:usort([unicode:characters_to_binary(string:lowercase(H)) || H <- Extra]
                        ++ own_hosts(Ip, Loopback)),
    case token(Token, Loopback) of
        {ok, T} -> {ok, #{hosts => Hosts, token => T}};
        {error, Why} -> {error, {badopt, {token, Token}, [Why]}}
    end.

loopback({127, _, _, _}) -> true;
loopback({0, 0, 0, 0, 0, 0, 0, 1}) -> true;
loopback(_) -> false.

%% the names a request to Ip may give: on loopback the loopback names;
%% on every interface ({0,0,0,0} or ::) each interface's address, the
%% loopback names and this host's name; else the address
own_hosts(_, true) ->
    [<<"localhost">>, <<"127.0.0.1">>, <<"[::1]">>];
own_hosts(Ip, false) when Ip =:= {0, 0, 0, 0}; Ip =:= {0, 0, 0, 0, 0, 0, 0, 0} ->
    Addrs = case inet:getifaddrs() of
                {ok, Ifs} -> [A || {_, Props} <- Ifs, {addr, A} <- Props];
                _ -> []
            end,
    own_hosts(none, true) ++ [list_to_binary(string:lowercase(net_adm:localhost()))]
        ++ [host_text(A) || A <- Addrs];
own_hosts(Ip, false) ->
    [host_text(Ip)].

host_text(A) when tuple_size(A) =:= 8 -> list_to_binary(["[", inet:ntoa(A), "]"]);
host_text(A) -> list_to_binary(inet:ntoa(A)).

token(default, true) -> {ok, none};
token(default, false) ->
    {error, <<"a server beyond loopback needs a token: token => generate (a new one, in the "
              "returned URL), token => {file, Path}, or token => none to serve without one">>};
token(none, _) -> {ok, none};
token(generate, _) ->
    %% 32 URL-safe characters (base64 of 24 random bytes, + and / swapped)
    try crypto:strong_rand_bytes(24) of
        R -> {ok, << <<(case C of $+ -> $-; $/ -> $_; _ -> C end)>> || <<C>> <= base64:encode(R) >>}
    catch
        error:_ -> {error, <<"OTP's crypto, which this node lacks, for a generated token: "
                             "give token => {file, Path}">>}
    end;
token({file, Path}, _) ->
    case file:read_file(Path) of
        {ok, B} ->
            case string:trim(hd(binary:split(B, <<"\n">>) ++ [<<>>])) of
                <<>> -> {error, <<"a file whose first line is the token (this one has none)">>};
                T -> {ok, T}
            end;
        {error, R} ->
            {error, iolist_to_binary(io_lib:format("a file msgflow can read (~ts: ~ts)",
                                                   [Path, file:format_error(R)]))}
    end.

%% @doc What msgflow_web serves (web/1's checked Opts: `metrics_edges',
%% `metrics_views'): each request's document, from the views of every node
%% msgflow counts on.
-spec source(map()) -> msgflow_web:source().
source(Web = #{metrics_edges := Edges}) ->
    fun({state, By, Range}) ->
            case msgflow_web_page:state(By, all, false, Range) of
                {error, _} = E -> E;
                State -> {ok, msgflow_report:json_encode(State)}
            end;
       ({diff, Before, After}) ->
            case msgflow_diff:diff(Before, After, #{}) of
                {error, _} = E -> E;
                D -> {ok, msgflow_report:json_encode(msgflow_diff:json(D))}
            end;
       (hotspots) ->
            json(hotspots, #{});
       ({view, Name, Opts}) ->
            json(Name, Opts);
       ({text, Name, Opts}) ->
            case msgflow_query:text(Name, Opts, #{width => 120, height => 60}) of
                {ok, Text} -> {ok, unicode:characters_to_binary(Text)};
                {error, _} = E -> E
            end;
       (views) ->
            {ok, msgflow_report:json_encode([atom_to_binary(N) || N <- msgflow_query:ready()])};
       (metrics) ->
            metrics(Edges, maps:get(metrics_views, Web, []))
    end.

json(Name, Opts) ->
    case msgflow_query:json(Name, Opts) of
        {ok, Json} -> {ok, msgflow_report:json_encode(Json)};
        {error, _} = E -> E
    end.

%% `/metrics': the busiest edges by name with their kinds, the call
%% edges' round trips, msgflow's own figures, and the families of the
%% views asked for (msgflow_view:with_metrics/0 says which give some).
metrics(Edges, Views) ->
    Extra = [V || V = {N, _} <- msgflow_view:with_metrics(), lists:member(N, Views)],
    case msgflow_query:run_all([{top, #{by => name, limit => all, bytes => true}}, {calls, #{by => name}},
                                {info, #{}} | [{N, #{}} || {N, _} <- Extra]]) of
        [{error, _} = E | _] ->
            E;
        [Top, Calls, Info0 | Values] ->
            Families = lists:append([Mod:metrics(V) || {{_, Mod}, V} <- lists:zip(Extra, Values),
                                                       not is_tuple(V) orelse element(1, V) =/= error])
                ++ msgflow_alerts:families(),
            Info = case Info0 of
                       #{} -> Info0;
                       _ -> #{}
                   end,
            {ok, msgflow_prom:metrics(Top, case Calls of #{entries := _} -> Calls; _ -> none end,
                                      Info, Edges, Families)}
    end.
