%%% @private The msgflow application: loads its modules and every module
%%% they call, then starts msgflow_sup.  Loading them now (in an
%%% interactive node a module loads when first called, through the code
%%% server) keeps the code server's answers to msgflow's own processes out
%%% of the counts of a run.
-module(msgflow_app).
-behaviour(application).
-export([start/2, stop/1]).

-spec start(application:start_type(), term()) -> {ok, pid()} | {error, term()}.
start(_Type, _Args) ->
    {ok, Mods} = application:get_key(msgflow, modules),
    _ = code:ensure_modules_loaded(Mods),
    ok = msgflow_cluster_code:load_called([F || M <- Mods, F <- [code:which(M)], is_list(F)]),
    msgflow_sup:start_link().

-spec stop(term()) -> ok.
stop(_State) ->
    ok.
