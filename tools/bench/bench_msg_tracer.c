/*
 * bench_msg_tracer.c -- the "example NIF" setup: the lightweight message
 * tracer the erl_tracer documentation describes, which sends {trace, From,
 * To} for every send to a process (the tracer state), where an Erlang
 * process counts.  Benchmark only.
 */
#include <erl_nif.h>

static ERL_NIF_TERM atom_trace, atom_ok, atom_remove, atom_discard, atom_trace_status,
    atom_send, atom_extra;

static int on_load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)priv;
    (void)info;
    atom_trace = enif_make_atom(env, "trace");
    atom_ok = enif_make_atom(env, "ok");
    atom_remove = enif_make_atom(env, "remove");
    atom_discard = enif_make_atom(env, "discard");
    atom_trace_status = enif_make_atom(env, "trace_status");
    atom_send = enif_make_atom(env, "send");
    atom_extra = enif_make_atom(env, "extra");
    return 0;
}

/* enabled(Tag, CounterPid, Tracee) */
static ERL_NIF_TERM enabled(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ErlNifPid counter;
    if (!enif_get_local_pid(env, argv[1], &counter) || !enif_is_process_alive(env, &counter))
        return enif_is_identical(argv[0], atom_trace_status) ? atom_remove : atom_discard;
    if (enif_is_identical(argv[1], argv[2]))
        return atom_discard; /* never the counter's own sends */
    return atom_trace;
}

/* trace(Tag, CounterPid, Tracee, Msg, #{extra => To}) */
static ERL_NIF_TERM trace(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ErlNifPid counter;
    ERL_NIF_TERM to;
    if (enif_get_local_pid(env, argv[1], &counter) &&
        enif_get_map_value(env, argv[4], atom_extra, &to))
        enif_send(env, &counter, NULL, enif_make_tuple3(env, atom_trace, argv[2], to));
    return atom_ok;
}

static ErlNifFunc funcs[] = {
    {"enabled", 3, enabled, 0},
    {"enabled_send", 3, enabled, 0},
    {"trace", 5, trace, 0},
    {"trace_send", 5, trace, 0},
};

ERL_NIF_INIT(bench_msg_tracer, funcs, on_load, NULL, NULL, NULL)
