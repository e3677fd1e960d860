%%% @doc The request handler of msgflow's web server: an inets httpd
%%% module (its `do/1' runs in httpd's request process, which it first
%%% takes out of msgflow's tracing with its socket: the page's traffic is
%%% msgflow's own).
%%% GET (or HEAD) only; every other method gets 405.
%%% <ul>
%%% <li>`/' the live page (msgflow_web_page:page/2);</li>
%%% <li>`/www/File', `/vendor/File' the page's script and style and the
%%%     libraries vendored from npm (plain file names only);</li>
%%% <li>`/api/state?by=Grouping' the page's state as JSON (`by' one of
%%%     msgflow_rows:groupings(), `name' when left out);</li>
%%% <li>`/api/hotspots' the hotspots as JSON (the page asks every 5 s);</li>
%%% <li>`/api/views' the views' names; `/api/view?name=View&Opt=Value...'
%%%     a view as JSON, `/api/text?name=View&...' as the shell prints it
%%%     (msgflow_query);</li>
%%% <li>`/metrics' Prometheus' text format (msgflow_prom).</li>
%%% </ul>
%%% A bad parameter gets 400 with `{"error": ..., "allowed": [...]}', an
%%% unknown path 404, a state msgflow cannot give (never started) 503, as
%%% does a request past the computations the server runs at once (with
%%% `Retry-After').  Before any of that, who asks is checked
%%% (msgflow_web_source:access/1): a Host header (port aside) or an Origin
%%% that names no host the server answers to gets 403 (a page of another
%%% site cannot read the node through DNS rebinding), and with a token set
%%% every `/api/' path and `/metrics' without `Authorization: Bearer
%%% Token' get 401 (`/' and its files are served without: the page reads
%%% the token from its URL's fragment).  Nothing a request holds reaches
%%% an atom table or a file name.
-module(msgflow_web_httpd).
-export([do/1]).
-include_lib("inets/include/httpd.hrl").

%% @private httpd's module callback.
-spec do(#mod{}) -> {proceed, list()}.
do(#mod{method = Method, request_uri = Uri, data = Data, socket = Socket, parsed_header = Hs}) ->
    untrace_connection(Socket),
    Response = case proplists:get_value(status, Data) of
                   undefined ->
                       case allowed(Uri, Hs, msgflow_web:access()) of
                           ok when Method =:= "GET"; Method =:= "HEAD" -> route(Uri);
                           ok -> {405, "text/plain", <<"GET only\n">>};
                           Refused -> Refused
                       end;
                   _ -> none        %% an earlier module answered
               end,
    case Response of
        none -> {proceed, Data};
        {Code, Type, Body} -> respond(Method, Code, Type, Body, []);
        {Code, Type, Body, Extra} -> respond(Method, Code, Type, Body, Extra)
    end.

respond(Method, Code, Type, Body, Extra) ->
    Bin = iolist_to_binary(Body),
    Head = Extra ++ [{code, Code}, {content_type, Type},
                     {content_length, integer_to_list(byte_size(Bin))},
                     {cache_control, "no-store"},
                     {"x-content-type-options", "nosniff"},
                     {"content-security-policy",
                      "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'"}],
    {proceed, [{response, {response, Head, case Method of "HEAD" -> []; _ -> Bin end}}]}.

%% `ok' when the request names a host the server answers to (its Host,
%% and its Origin when it has one) and carries the token where one is
%% needed; else the response that refuses it.
allowed(_, _, undefined) ->
    {503, "text/plain", <<"the server is stopping\n">>};
allowed(Uri, Hs, #{hosts := Hosts, token := Token}) ->
    Host = host_of(proplists:get_value("host", Hs, "")),
    Origin = proplists:get_value("origin", Hs),
    case lists:member(Host, Hosts) andalso (Origin =:= undefined orelse origin_ok(Origin, Hosts)) of
        false ->
            {403, "text/plain", <<"this server answers requests to its own address only: "
                                  "msgflow:web(#{hosts => [Name]}) adds a name\n">>};
        true when Token =:= none ->
            ok;
        true ->
            case needs_token(Uri) andalso not bearer(proplists:get_value("authorization", Hs, ""), Token) of
                true -> {401, "text/plain", <<"a token is needed: Authorization: Bearer Token\n">>,
                         [{"www-authenticate", "Bearer realm=\"msgflow\""}]};
                false -> ok
            end
    end.

%% A Host header's name, port aside, lower case: `localhost',
%% `127.0.0.1', `[::1]'.
host_of(H) ->
    L = string:lowercase(string:trim(H)),
    Name = case L of
               "[" ++ _ -> hd(string:split(L, "]")) ++ "]";
               _ -> hd(string:split(L, ":"))
           end,
    unicode:characters_to_binary(Name).

origin_ok(Origin, Hosts) ->
    case uri_string:parse(Origin) of
        #{scheme := S, host := H} when S =:= "http"; S =:= "https" ->
            Name = case string:find(H, ":") of
                       nomatch -> H;
                       _ -> "[" ++ H ++ "]"          %% an IPv6 address
                   end,
            lists:member(unicode:characters_to_binary(string:lowercase(Name)), Hosts);
        _ -> false
    end.

%% Every path but the page and its files needs the token, by the path
%% route/1 will serve (a request URI with a scheme, a host or a fragment
%% too, whatever its path: route/1 reads the path alone).
needs_token(Uri) ->
    case uri_string:parse(Uri) of
        #{path := Path} = U when not is_map_key(scheme, U), not is_map_key(host, U),
                                 not is_map_key(fragment, U) ->
            not (Path =:= "/" orelse Path =:= "/index.html" orelse lists:prefix("/www/", Path)
                 orelse lists:prefix("/vendor/", Path));
        _ ->
            true
    end.

%% the header's token equals Token, compared in a time that does not
%% depend on where they differ
bearer([B, E, A, R, E2, R2, $\s | Given], Token) when is_binary(Token) ->
    case string:lowercase([B, E, A, R, E2, R2]) of
        "bearer" -> same(unicode:characters_to_binary(string:trim(Given)), Token);
        _ -> false
    end;
bearer(_, _) ->
    false.

same(G, Token) ->
    byte_size(G) =:= byte_size(Token)
        andalso lists:foldl(fun({A, B}, Acc) -> Acc bor (A bxor B) end, 0,
                            lists:zip(binary_to_list(G), binary_to_list(Token))) =:= 0.

%% A connection's request process is msgflow's own from its first
%% message (httpd's acceptor, msgflow's, spawned it: msgflow_collector:own/1);
%% at its first request its send flag and its socket's are cleared, so
%% that the tracer is not even called for them.
untrace_connection(Socket) ->
    case get(msgflow_untraced) of
        true -> ok;
        undefined ->
            put(msgflow_untraced, true),
            _ = msgflow_collector:own([self()]),
            _ = is_port(Socket) andalso msgflow_collector:untrace(Socket),
            ok
    end.

route(Uri) ->
    case uri_string:parse(Uri) of
        #{path := Path} = U ->
            case query(maps:get(query, U, "")) of
                {ok, Q} -> route(Path, Q);
                error -> bad(<<"query">>, [<<"key=value pairs, percent-encoded">>])
            end;
        _ ->
            bad(<<"path">>, [<<"a path the page uses">>])
    end.

query(Q) ->
    case uri_string:dissect_query(Q) of
        L when is_list(L) ->
            try {ok, [{unicode:characters_to_binary(K), unicode:characters_to_binary(V)}
                      || {K, V} <- L]}
            catch
                _:_ -> error
            end;
        _ -> error
    end.

route(P, _) when P =:= "/"; P =:= "/index.html" ->
    case msgflow_web_page:page(live, atom_to_binary(node())) of
        {error, {missing, F}} -> missing(F);
        Html -> {200, "text/html; charset=utf-8", Html}
    end;
route("/www/" ++ Name, _) ->
    static(list_to_binary(Name));
route("/vendor/" ++ Name, _) ->
    static(<<"vendor/", (list_to_binary(Name))/binary>>);
route("/api/state", Q) ->
    Names = [atom_to_binary(G) || G <- msgflow_rows:groupings()],
    case proplists:get_value(<<"by">>, Q, <<"name">>) of
        By when is_binary(By) ->
            case lists:member(By, Names) of
                true ->
                    case range(Q, <<"from">>, <<"to">>) of
                        {ok, Range} -> doc({state, binary_to_existing_atom(By), Range},
                                           "application/json");
                        {error, K} -> bad(K, [<<"system time in ms">>])
                    end;
                false -> bad(<<"by">>, Names)
            end;
        _ -> bad(<<"by">>, Names)
    end;
%% the diff of two ranges of the history (msgflow_diff): before
%% cfrom..cto, after from..to
route("/api/diff", Q) ->
    case {range(Q, <<"cfrom">>, <<"cto">>), range(Q, <<"from">>, <<"to">>)} of
        {{ok, B = #{from := _}}, {ok, A = #{from := _}}} -> doc({diff, B, A}, "application/json");
        {{error, K}, _} -> bad(K, [<<"system time in ms">>]);
        {_, {error, K}} -> bad(K, [<<"system time in ms">>]);
        _ -> bad(<<"from">>, [<<"from, to, cfrom and cto: system time in ms">>])
    end;
route("/api/hotspots", _) ->
    doc(hotspots, "application/json");
route("/api/views", _) ->
    doc(views, "application/json");
route("/api/view", Q) ->
    view_request(view, Q, "application/json");
route("/api/text", Q) ->
    view_request(text, Q, "text/plain; charset=utf-8");
route("/metrics", _) ->
    doc(metrics, "text/plain; version=0.0.4; charset=utf-8");
route(_, _) ->
    {404, "text/plain", <<"not found: the page is at /\n">>}.

%% A range of the history from two parameters (system ms): `#{}' when
%% neither is given.
range(Q, F, T) ->
    case {proplists:get_value(F, Q), proplists:get_value(T, Q)} of
        {undefined, undefined} -> {ok, #{}};
        {From, To} ->
            case {ms(From), ms(To)} of
                {{ok, A}, {ok, B}} -> {ok, #{from => A, to => B}};
                {error, _} -> {error, F};
                _ -> {error, T}
            end
    end.

ms(undefined) -> {ok, now};
ms(V) -> value(time, V).

%% A view by `name', its options from the other parameters: each key one
%% of the view's options, each value read by the option's rule (an atom
%% the rule names, an integer, a number, a text); anything else is a 400.
view_request(As, Q, Type) ->
    Names = [atom_to_binary(N) || N <- msgflow_view:names()],
    case proplists:get_value(<<"name">>, Q) of
        Name when is_binary(Name) ->
            case lists:member(Name, Names) of
                true ->
                    View = binary_to_existing_atom(Name),
                    {ok, Schema} = msgflow_query:options(View),
                    case view_options(proplists:delete(<<"name">>, Q), Schema, #{}) of
                        {ok, Opts} -> doc({As, View, Opts}, Type);
                        {error, Key, Allowed} -> bad(Key, Allowed)
                    end;
                false -> bad(<<"name">>, Names)
            end;
        _ -> bad(<<"name">>, Names)
    end.

view_options([], _, Acc) ->
    {ok, Acc};
view_options([{K, V} | Rest], Schema0, Acc) ->
    %% a request reads the run's history only, never a directory it names
    Schema = maps:remove(history, Schema0),
    Keys = [atom_to_binary(X) || X <- lists:sort(maps:keys(Schema))],
    case lists:member(K, Keys) of
        false ->
            {error, K, Keys};
        true ->
            Key = binary_to_existing_atom(K),
            {_, Rule} = maps:get(Key, Schema),
            case value(Rule, V) of
                {ok, X} -> view_options(Rest, Schema, Acc#{Key => X});
                error -> {error, K, msgflow_opts:allowed(Rule)}
            end
    end.

%% A parameter's text read by an option's rule; the option checks it
%% after (msgflow_opts).  No atom is made from a request.
value({one_of, As}, V) ->
    case [A || A <- As, atom_to_binary(A) =:= V] of
        [A] -> {ok, A};
        [] -> error
    end;
value({int, _, _, _}, V) ->
    try {ok, binary_to_integer(V)} catch error:badarg -> error end;
value(pos_number, V) ->
    try {ok, binary_to_integer(V)}
    catch error:badarg -> try {ok, binary_to_float(V)} catch error:badarg -> error end
    end;
value({either, Rules}, V) ->
    case [X || R <- Rules, {ok, X} <- [value(R, V)]] of
        [X | _] -> {ok, X};
        [] -> error
    end;
value(Rule, V) when Rule =:= text; Rule =:= pid_text -> {ok, V};
value(time, V) ->
    try {ok, binary_to_integer(V)} catch error:badarg -> {ok, V} end;
value(atom, V) ->
    try {ok, binary_to_existing_atom(V)} catch error:badarg -> error end;
value(_, _) ->
    error.

doc(Request, Type) ->
    case msgflow_web:get(Request) of
        {ok, Bin} -> {200, Type, Bin};
        {error, busy} ->
            {503, "application/json", <<"{\"error\":\"the server computes as many documents as it "
                                        "may at once: retry\"}">>, [{"retry-after", "1"}]};
        {error, {Bad, {Key, Value}, Allowed}} when Bad =:= badopt; Bad =:= badarg ->
            {400, "application/json",
             msgflow_report:json_encode(#{<<"error">> => iolist_to_binary(
                                                           io_lib:format("bad ~0tp: ~0tp",
                                                                         [Key, Value])),
                                          <<"allowed">> => allowed_texts(Allowed)})};
        {error, not_started} ->
            {503, "application/json", <<"{\"error\":\"msgflow has not been started on this node: "
                                        "msgflow:start/1\"}">>};
        {error, Reason} ->
            {500, "application/json",
             msgflow_report:json_encode(#{<<"error">> => iolist_to_binary(io_lib:format("~0tp", [Reason]))})}
    end.

static(Name) ->
    case msgflow_web_page:file(Name) of
        {ok, Bin} -> {200, type(filename:extension(Name)), Bin};
        {error, enoent} -> {404, "text/plain", <<"not found\n">>}
    end.

type(<<".js">>) -> "text/javascript; charset=utf-8";
type(<<".css">>) -> "text/css; charset=utf-8";
type(<<".html">>) -> "text/html; charset=utf-8";
type(_) -> "text/plain; charset=utf-8".

allowed_texts(Allowed) ->
    [case A of
         B when is_binary(B) -> B;
         X when is_atom(X) -> atom_to_binary(X);
         X -> iolist_to_binary(io_lib:format("~0tp", [X]))
     end || A <- Allowed].

bad(What, Allowed) ->
    {400, "application/json",
     msgflow_report:json_encode(#{<<"error">> => <<"bad ", What/binary>>, <<"allowed">> => Allowed})}.

missing(F) ->
    {500, "text/plain",
     ["msgflow: the page's file ", F, " is missing: the build puts the libraries there "
      "(tools/web/vendor.sh needs npm)\n"]}.
