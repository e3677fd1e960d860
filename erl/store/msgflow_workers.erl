%%% @doc The processes msgflow runs beside its collector, and what they
%%% hold: view workers (run/3: a view built in a process sized for the
%%% store), the web server's
%%% computations (msgflow_web), and the store of a range of the history a
%%% view worker builds (msgflow_history_range).  Each enters itself when
%%% it starts; the process that started it takes it out once it has
%%% gone (leave/1: the table never grows past the workers alive, whether
%%% memory/0 is asked or not); memory/0 is what they hold
%%% now, which `own_memory' counts (msgflow:info/0: `workers_memory').
%%% The table is msgflow_sup's, made as it starts; with no msgflow_sup
%%% (a caller outside the application) nothing is entered or counted.
-module(msgflow_workers).

-export([run/2, run/3, table/0, enter/0, hold/1, leave/1, memory/0]).

-define(TABLE, msgflow_workers).

%% @doc Makes the table (msgflow_sup's).
-spec table() -> ok.
table() ->
    _ = ets:new(?TABLE, [named_table, public, set, {write_concurrency, true}]),
    ok.

%% @doc The calling process is one of msgflow's workers: its memory counts
%% until it has gone.
-spec enter() -> ok.
enter() ->
    kept(fun() -> ets:insert(?TABLE, {self(), none}) end).

%% @doc The calling worker holds Store (a range's, msgflow_store): its
%% tables and aggregate count too, until the worker has gone.
-spec hold(msgflow_store:state()) -> ok.
hold(Store) ->
    kept(fun() -> ets:insert(?TABLE, {self(), Store}) end).

%% @doc Worker Pid has gone (or is going): out of the count.
-spec leave(pid()) -> ok.
leave(Pid) ->
    kept(fun() -> ets:delete(?TABLE, Pid) end).

%% @doc The bytes the workers alive now hold: their processes' memory and
%% the stores they hold.  The entries of those gone are deleted.
-spec memory() -> non_neg_integer().
memory() ->
    try ets:tab2list(?TABLE) of
        Entries ->
            lists:sum([held(P, What) || {P, What} <- Entries])
    catch
        error:badarg -> 0
    end.

held(P, What) ->
    case erlang:process_info(P, memory) of
        {memory, M} ->
            M + case What of
                    none -> 0;
                    Store -> try msgflow_store:memory(Store) catch error:_ -> 0 end
                end;
        undefined ->
            _ = ets:delete(?TABLE, P),
            0
    end.

kept(F) ->
    try F(), ok catch error:badarg -> ok end.

%% @doc run/3 for a value a person waits for (`interactive').
-spec run(msgflow_store:store() | none, fun(() -> Result)) -> Result.
run(Store, Fun) ->
    run(Store, interactive, Fun).

%% @doc Fun() run in a process of its own whose first heap is sized for
%% the store, so that building the value does not run the garbage
%% collector over and over (each collection of a growing heap copies all
%% of it; a big heap's on a dirty scheduler, where it takes a core from
%% the node's work), nor leave the caller's heap grown: for an
%% `interactive' value about 40 words a pair, at most 8M words (64 MB);
%% for a `full' one (every pair: a top of them all, pairs(): 35-52M words
%% at a million pairs, measured) 64 words a pair, and for an `export' (a
%% dump or an export, which holds a full view and what it makes of it:
%% 66-79M words) 96, at most 128M words (1 GiB; past that it grows as it
%% must).  Only the pages it uses are taken from the OS.  Its value is
%% returned (copied), and what it raises is raised again here.  The
%% process is msgflow's own: its reads are no traffic of the node's.
-spec run(msgflow_store:store() | none, interactive | full | export, fun(() -> Result)) -> Result.
run(Store, Wait, Fun) ->
    Size = case Store of
               #{pairs := T} ->
                   case msgflow_row_table:size(T) of
                       undefined -> 0;      %% the collector is gone: the view says so
                       N -> N
                   end;
               _ -> 0
           end,
    Words = case Wait of
                interactive -> min(8 * 1024 * 1024, max(233, 40 * Size));
                full -> min(128 * 1024 * 1024, max(233, 64 * Size));
                export -> min(128 * 1024 * 1024, max(233, 96 * Size))
            end,
    {Pid, Ref} = spawn_opt(fun() ->
                                   ok = msgflow_flags:untrace_self(),
                                   ok = enter(),
                                   exit({done, try {ok, Fun()} catch C:R:St -> {C, R, St} end})
                           end, [monitor, {min_heap_size, Words}]),
    receive
        {'DOWN', Ref, process, Pid, Done} ->
            ok = leave(Pid),
            case Done of
                {done, {ok, Value}} -> Value;
                {done, {C, R, St}} -> erlang:raise(C, R, St);
                Other -> exit(Other)
            end
    end.
