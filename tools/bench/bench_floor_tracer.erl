%%% Benchmark tracer module; see bench_floor_tracer.c.
-module(bench_floor_tracer).
-export([enabled/3, enabled_send/3, trace/5, trace_send/5]).
-on_load(init/0).

init() ->
    erlang:load_nif(filename:join(filename:dirname(code:which(?MODULE)), "bench_floor_tracer"), 0).

enabled(_, _, _) -> erlang:nif_error(not_loaded).
enabled_send(_, _, _) -> erlang:nif_error(not_loaded).
trace(_, _, _, _, _) -> erlang:nif_error(not_loaded).
trace_send(_, _, _, _, _) -> erlang:nif_error(not_loaded).
