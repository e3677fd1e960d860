/*
 * bench_floor_tracer.c -- the floor: an erl_tracer whose enabled callbacks
 * always answer `trace' and whose trace callbacks do nothing.  What a traced
 * send costs under it is what the VM's tracer interface costs by itself; no
 * tracer module can be cheaper.  Benchmark only.
 */
#include <erl_nif.h>

static ERL_NIF_TERM atom_trace, atom_ok;

static int on_load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)priv;
    (void)info;
    atom_trace = enif_make_atom(env, "trace");
    atom_ok = enif_make_atom(env, "ok");
    return 0;
}

static ERL_NIF_TERM enabled(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)env;
    (void)argc;
    (void)argv;
    return atom_trace;
}

static ERL_NIF_TERM trace(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)env;
    (void)argc;
    (void)argv;
    return atom_ok;
}

static ErlNifFunc funcs[] = {
    {"enabled", 3, enabled, 0},
    {"enabled_send", 3, enabled, 0},
    {"trace", 5, trace, 0},
    {"trace_send", 5, trace, 0},
};

ERL_NIF_INIT(bench_floor_tracer, funcs, on_load, NULL, NULL, NULL)
