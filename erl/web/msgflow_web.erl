%%% @doc msgflow's web server: OTP's inets httpd (stand-alone, linked to
%%% this process) serving the live page (msgflow_web_page), its state as
%%% JSON at `/api/state?by=Grouping', and `/metrics' for Prometheus
%%% (msgflow_prom).  Requests are answered by msgflow_web_httpd in
%%% httpd's request processes; what they serve comes from this process,
%%% which has its Source asked for each document at most once per
%%% `refresh' ms, or per ten times what the last one took when that is
%%% longer, and hands the same bytes to every browser that asks meanwhile:
%%% the node computes one state per interval, however many pages are open,
%%% and spends at most about a tenth of a scheduler on it.  A document is
%%% computed by a process of its own (untraced before it starts), so that
%%% a slow one (every pair, a cluster waiting for a node) never holds the
%%% others.
%%%
%%% Source is a fun msgflow_web_source:source/1 makes: `Source(Request)'
%%% returns `{ok, iodata()}' or `{error, Reason}' for each request().  The server is read-only: nothing it serves
%%% starts, stops or changes tracing.  This process and httpd's request
%%% processes are msgflow's own: never traced (msgflow_flags).
-module(msgflow_web).
-behaviour(gen_server).
-export([start/2, stop/0, url/0, get/1, access/0]).
-export([start_link/2, init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-type request() :: {state, msgflow_rows:grouping(), #{from => integer(), to => integer()}}
                 | {diff, map(), map()} | hotspots | metrics | views
                 | {view | text, msgflow_view:name(), map()}.
-type source() :: fun((request()) -> {ok, iodata()} | {error, term()}).
-export_type([request/0, source/0]).

%% how long a computed document is served before the next is computed, ms
-define(REFRESH_MS, 1000).
%% The page's address and httpd's processes (msgflow's own: msgflow_flags
%% reads them), in a table of the server's, gone with it.  Not persistent
%% terms: erasing one that holds a boxed term makes every process on the
%% node scan its heap (a literal area collection).
-define(KEPT, msgflow_web_kept).
%% a document is computed again at most every COST_SHARE times what it
%% took (on a big node the page updates less often, and costs the node at
%% most about a tenth of a scheduler)
-define(COST_SHARE, 10).
%% how long a request waits for a document, ms (a state at a million pairs
%% takes about a second to compute the first time); a computation still
%% running then is killed
-define(CALL_MS, 60000).
%% documents computed at once, at most: a request for another gets 503
%% with Retry-After (each distinct query string is a computation)
-define(COMPUTING, 4).
%% a computation's heap, at most (words: 64 MB on a 64-bit VM); past it
%% the VM kills it and its waiters get an error
-define(COMPUTE_HEAP_WORDS, 8388608).
%% httpd's limits, so that slow or oversized requests cannot hold the
%% server: a request line and headers of at most these sizes, no body
%% (GET only), at least 100 bytes a second from a client while a request
%% is read, an idle keep-alive connection closed after 30 s
-define(HTTPD_LIMITS, [{max_uri_size, 8192}, {max_header_size, 16384}, {max_body_size, 1024},
                       {max_content_length, 1024}, {minimum_bytes_per_second, 100},
                       {keep_alive_timeout, 30}, {max_keep_alive_request, 1000},
                       {max_clients, 50}]).

%% @doc Starts the server under msgflow_sup: Opts `port' (0: any free
%% port), `ip' (an address tuple), `refresh' (ms).  `{ok, Url}', or
%% `{error, {already_started, Url}}', or `{error, {Reason, {port,
%% Port}}}' when httpd cannot listen there (eaddrinuse, eacces).
-spec start(#{port := inet:port_number(), ip := inet:ip_address(), refresh => pos_integer(),
              atom() => term()},
            source()) -> {ok, string()} | {error, term()}.
start(Opts, Source) ->
    case url() of
        undefined ->
            Spec = #{id => ?MODULE, start => {?MODULE, start_link, [Opts, Source]},
                     restart => temporary, shutdown => 5000, type => worker},
            case supervisor:start_child(msgflow_sup, Spec) of
                {ok, _} -> {ok, url()};
                {error, {already_started, _}} -> {error, {already_started, url()}};
                {error, {Reason, _Child}} when is_tuple(Reason) -> {error, Reason};
                {error, _} = E -> E
            end;
        Url ->
            {error, {already_started, Url}}
    end.

%% @doc Stops the server: `ok', or `{error, not_started}' (also when
%% msgflow's application is not running).
-spec stop() -> ok | {error, not_started}.
stop() ->
    try supervisor:terminate_child(msgflow_sup, ?MODULE) of
        ok -> _ = supervisor:delete_child(msgflow_sup, ?MODULE), ok;
        {error, not_found} -> {error, not_started}
    catch
        exit:{noproc, _} -> {error, not_started}
    end.

%% @doc The page's address, `"http://127.0.0.1:7780/"', or undefined
%% when the server is not running.
-spec url() -> string() | undefined.
url() ->
    kept(url).

%% @doc Who the running server answers (msgflow_web_source:access/1), or
%% undefined when none runs.
-spec access() -> msgflow_web_source:access() | undefined.
access() ->
    kept(access).

%% What the running server keeps under Key, or undefined (none runs).
kept(Key) ->
    try ets:lookup(?KEPT, Key) of
        [{Key, V}] -> V;
        [] -> undefined
    catch
        error:badarg -> undefined
    end.

%% @doc A document: the one computed within the last `refresh' ms, or a
%% new one (computed once, whoever asks meanwhile waits for it).
%% `{error, busy}' when ?COMPUTING others are being computed;
%% `{error, {computation, Reason}}' when its computation died (killed
%% past its heap or time bound).
-spec get(request()) -> {ok, binary()} | {error, term()}.
get(Request) ->
    try
        gen_server:call(?MODULE, {get, Request}, ?CALL_MS)
    catch
        exit:{noproc, _} -> {error, not_started};
        exit:{timeout, _} -> {error, timeout}
    end.

%% @private
-spec start_link(map(), source()) -> {ok, pid()} | {error, term()}.
start_link(Opts, Source) ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, {Opts, Source}, []).

%% @private
-spec init({map(), source()}) -> {ok, map()} | {stop, term()}.
init({Opts = #{port := Port, ip := Ip}, Source}) ->
    ok = msgflow_flags:untrace_self(),
    %% msgflow's own, and so are the processes it spawns from now on
    %% (httpd's, before they send their first message)
    _ = msgflow_collector:own([self()]),
    process_flag(trap_exit, true),
    Www = msgflow_web_page:www_dir(),
    Real = free_port(Port, Ip),
    Config = [{port, Real}, {bind_address, Ip}, {ipfamily, family(Ip)},
              {server_name, "msgflow"}, {server_root, Www}, {document_root, Www},
              {modules, [msgflow_web_httpd]} | ?HTTPD_LIMITS],
    case application:ensure_all_started(inets) of
        {ok, _} ->
            case inets:start(httpd, Config, stand_alone) of
                {ok, Httpd} ->
                    %% httpd's own processes are msgflow's, and so are
                    %% the processes they spawn (a connection's handler):
                    %% left out of the run now and of one that starts
                    %% later (msgflow_flags:own_pids/0)
                    Own = tree(Httpd),
                    _ = ets:new(?KEPT, [named_table, protected, set]),
                    true = ets:insert(?KEPT, {own, Own}),
                    _ = msgflow_collector:own([self() | Own]),
                    Url = lists:flatten(io_lib:format("http://~s:~b/", [host(Ip), Real])),
                    true = ets:insert(?KEPT, {url, Url}),
                    true = ets:insert(?KEPT, {access, maps:get(access, Opts,
                                                                #{hosts => [], token => none})}),
                    {ok, #{httpd => Httpd, source => Source, cache => #{}, pending => #{},
                           computing => #{}, refresh => maps:get(refresh, Opts, ?REFRESH_MS)}};
                {error, Reason} ->
                    {stop, {listen_error(Reason), {port, Port}}}
            end;
        {error, Reason} ->
            {stop, {inets, Reason}}
    end.

%% A supervisor and the processes below it.
tree(Sup) ->
    Children = try supervisor:which_children(Sup) catch exit:_ -> [] end,
    [Sup | lists:append([case Type of
                             supervisor -> tree(P);
                             worker -> [P]
                         end || {_, P, Type, _} <- Children, is_pid(P)])].

%% Port, or for 0 one the system gives as free now (a stand-alone httpd
%% cannot say which port it was given).
free_port(0, Ip) ->
    case gen_tcp:listen(0, [{ip, Ip}, family(Ip)]) of
        {ok, L} -> {ok, P} = inet:port(L), ok = gen_tcp:close(L), P;
        {error, _} -> 0
    end;
free_port(Port, _) ->
    Port.

%% httpd's reasons come nested in its supervisors' failures: the socket's
%% `{listen, Reason}' is the one to say.
listen_error({listen, R}) -> R;
listen_error(T) when is_tuple(T) ->
    case [R || X <- tuple_to_list(T), R <- [listen_error(X)], R =/= T, R =/= X] of
        [R | _] -> R;
        [] -> T
    end;
listen_error(R) -> R.

family(Ip) when tuple_size(Ip) =:= 8 -> inet6;
family(_) -> inet.

host({0, 0, 0, 0}) -> net_adm:localhost();
host(Ip) when tuple_size(Ip) =:= 8 -> "[" ++ inet:ntoa(Ip) ++ "]";
host(Ip) -> inet:ntoa(Ip).

%% @private
-spec handle_call(term(), gen_server:from(), map()) -> {reply, term(), map()} | {noreply, map()}.
handle_call({get, Request}, From, S = #{cache := Cache, pending := Pending, refresh := Refresh,
                                         source := Source, computing := Computing}) ->
    Now = erlang:monotonic_time(millisecond),
    case {Cache, Pending} of
        {#{Request := {At, Cost, Doc}}, _} when Now - At < Refresh; Now - At < ?COST_SHARE * Cost ->
            {reply, Doc, S};
        {_, #{Request := Waiting}} ->
            {noreply, S#{pending := Pending#{Request := [From | Waiting]}}};
        _ when map_size(Computing) >= ?COMPUTING ->
            {reply, {error, busy}, S};
        _ ->
            Pid = compute(Source, Request, Now),
            {noreply, S#{pending := Pending#{Request => [From]}, computing := Computing#{Pid => Request}}}
    end;
handle_call(_, _From, S) ->
    {reply, {error, unknown_call}, S}.

%% Request's document computed by a process of its own, which says
%% `{computed, Request, Began, Doc}' (linked: it ends with the server; one
%% that dies is an `EXIT' here), with a heap of at most
%% ?COMPUTE_HEAP_WORDS and killed after ?CALL_MS.  It is msgflow's own
%% from its first message, spawned by this process
%% (msgflow_collector:own/1); the call below also clears its send flag.
compute(Source, Request, Began) ->
    Self = self(),
    Pid = spawn_opt(fun() ->
                            receive go -> ok end,
                            ok = msgflow_workers:enter(),
                            Doc = try Source(Request) of
                                      {ok, Data} -> {ok, iolist_to_binary(Data)};
                                      {error, _} = E -> E
                                  catch
                                      C:R -> {error, {C, R}}
                                  end,
                            Self ! {computed, self(), Request, Began, Doc}
                    end,
                    [link, {max_heap_size, #{size => ?COMPUTE_HEAP_WORDS, kill => true,
                                             error_logger => false}}]),
    _ = msgflow_collector:own([Pid]),
    Pid ! go,
    _ = erlang:send_after(?CALL_MS, self(), {compute_timeout, Pid}),
    Pid.

%% @private
-spec handle_cast(term(), map()) -> {noreply, map()}.
handle_cast(_, S) -> {noreply, S}.

%% @private
-spec handle_info(term(), map()) -> {noreply, map()} | {stop, term(), map()}.
handle_info({'EXIT', Httpd, Reason}, S = #{httpd := Httpd}) ->
    {stop, {httpd, Reason}, S};
handle_info({computed, Pid, Request, Began, Doc},
            S = #{cache := Cache, pending := Pending, computing := Computing}) ->
    Done = erlang:monotonic_time(millisecond),
    ok = msgflow_workers:leave(Pid),
    [gen_server:reply(From, Doc) || From <- maps:get(Request, Pending, [])],
    %% a document nobody asked for within a minute is forgotten
    Kept = maps:filter(fun(_, {At, _, _}) -> Done - At < 60000 end, Cache),
    {noreply, S#{cache := Kept#{Request => {Done, Done - Began, Doc}},
                 pending := maps:remove(Request, Pending), computing := maps:remove(Pid, Computing)}};
handle_info({compute_timeout, Pid}, S = #{computing := Computing}) ->
    _ = is_map_key(Pid, Computing) andalso exit(Pid, kill),
    {noreply, S};
%% a computation that died (killed past its heap or time bound, or by
%% anyone): its waiters get an error, and the next request computes anew
handle_info({'EXIT', Pid, Reason}, S = #{pending := Pending, computing := Computing})
  when is_map_key(Pid, Computing) ->
    Request = map_get(Pid, Computing),
    ok = msgflow_workers:leave(Pid),
    [gen_server:reply(From, {error, {computation, Reason}}) || From <- maps:get(Request, Pending, [])],
    {noreply, S#{pending := maps:remove(Request, Pending), computing := maps:remove(Pid, Computing)}};
handle_info(_, S) ->
    {noreply, S}.

%% @private
-spec terminate(term(), map()) -> ok.
terminate(_, #{httpd := Httpd}) ->
    %% (the table goes with this process, once httpd is down: msgflow
    %% leaves httpd's processes out until then)
    _ = inets:stop(stand_alone, Httpd),
    ok;
terminate(_, _) ->
    ok.
