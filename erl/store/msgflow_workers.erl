%%% @doc The processes msgflow runs beside its collector, and what they
%%% hold: view workers (msgflow_view:run/3), the web server's
%%% computations (msgflow_web), and the store of a range of the history a
%%% view worker builds (msgflow_history_range).  Each enters itself when
%%% it starts; the process that started it takes it out once it has
%%% gone (leave/1: the table never grows past the workers alive, whether
%%% memory/0 is asked or not); memory/0 is what they hold
%%% now, which `own_memory' counts (msgflow:info/0: `workers_memory').
%%% The table is msgflow_sup's, made as it starts; with no msgflow_sup
%%% (a caller outside the application) nothing is entered or counted.
-module(msgflow_workers).

-export([table/0, enter/0, hold/1, leave/1, memory/0]).

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
