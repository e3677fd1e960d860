/*
 * mf_births.c -- births (see mf_births.h for what it owns and the threads
 * that touch it).
 */
#include "mf_births.h"

#define MF_BIRTH_ARGS 8 /* arguments of a proc_lib start kept */

static ERL_NIF_TERM atom_elided; /* '_': an argument births leave out */

void mf_births_load(ErlNifEnv *env)
{
    atom_elided = enif_make_atom(env, "_");
}

/* A bounded summary of a proc_lib start's argument list: atoms and pids as
 * they are, {_, Atom, _} as such (a supervisor's name), anything else '_'.
 * Enough to name what proc_lib names, never a copy of a big argument. */
static ERL_NIF_TERM args_summary(ErlNifEnv *env, ERL_NIF_TERM list)
{
    ERL_NIF_TERM out[MF_BIRTH_ARGS], head;
    unsigned n = 0;
    while (n < MF_BIRTH_ARGS && enif_get_list_cell(env, list, &head, &list)) {
        const ERL_NIF_TERM *el;
        int arity;
        if (enif_is_atom(env, head) || enif_is_pid(env, head))
            out[n++] = head;
        else if (enif_get_tuple(env, head, &arity, &el) && arity == 3 && enif_is_atom(env, el[1]))
            out[n++] = enif_make_tuple3(env, atom_elided, el[1], atom_elided);
        else
            out[n++] = atom_elided;
    }
    return enif_make_list_from_array(env, out, n);
}

/* What a spawn's {M, F, Args} says about the new process: {M, F, Arity},
 * or for proc_lib:init_p/5 {proc_lib, {M, F, ArgsSummary}} so that the
 * collector can name it as proc_lib would. */
ERL_NIF_TERM mf_spawn_summary(ErlNifEnv *env, ERL_NIF_TERM mfa)
{
    const ERL_NIF_TERM *el;
    int arity;
    unsigned len;
    if (!enif_get_tuple(env, mfa, &arity, &el) || arity != 3 ||
        !enif_get_list_length(env, el[2], &len))
        return atom_undefined;
    if (el[0] == atom_proc_lib && el[1] == atom_init_p && len == 5) {
        ERL_NIF_TERM a[5], list = el[2];
        for (unsigned i = 0; i < 5; i++)
            enif_get_list_cell(env, list, &a[i], &list);
        if (enif_is_atom(env, a[2]) && enif_is_atom(env, a[3]) && enif_is_list(env, a[4])) {
            return enif_make_tuple2(env, atom_proc_lib,
                                    enif_make_tuple3(env, a[2], a[3], args_summary(env, a[4])));
        }
    }
    return enif_make_tuple3(env, el[0], el[1], enif_make_uint(env, len));
}

/* Any scheduler thread.  Appends {Pid, What} to the session's births. */
void mf_birth(ErlNifEnv *env, mf_session *s, ERL_NIF_TERM pid, ERL_NIF_TERM what)
{
    ERL_NIF_TERM rec = enif_make_tuple2(env, pid, what);
    enif_mutex_lock(s->births_lock);
    if (s->nbirths >= MF_MAX_BIRTHS) {
        s->births_dropped++;
    } else {
        if (!s->births_env && (s->births_env = enif_alloc_env()) != NULL)
            s->births = enif_make_list(s->births_env, 0);
        if (s->births_env) {
            s->births = enif_make_list_cell(s->births_env, enif_make_copy(s->births_env, rec),
                                            s->births);
            s->nbirths++;
        } else {
            s->births_dropped++;
        }
    }
    enif_mutex_unlock(s->births_lock);
}

/* births_take(Session) -> {[{Pid, Name | {M, F, Arity} |
 * {proc_lib, {M, F, ArgsSummary}}}], Dropped}: at most MF_BIRTHS_CHUNK of
 * the spawn and register events recorded and not yet taken (the newest
 * ones, oldest of them first);
 * Dropped counts those lost past the cap since the last call.  Call again
 * until none come back (a call that takes the last ones also frees the
 * births env, under the lock).  Any normal scheduler; the work is bounded
 * by the chunk (well under 1 ms). */
ERL_NIF_TERM mf_nif_births_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!mf_get_session(env, argv[0], &s))
        return enif_make_badarg(env);
    ERL_NIF_TERM out = enif_make_list(env, 0), head;
    unsigned n = 0;
    enif_mutex_lock(s->births_lock);
    if (s->births_env) {
        ERL_NIF_TERM list = s->births;
        while (n < MF_BIRTHS_CHUNK && enif_get_list_cell(s->births_env, list, &head, &list)) {
            out = enif_make_list_cell(env, enif_make_copy(env, head), out);
            n++;
        }
        s->births = list;
        s->nbirths -= n;
        if (s->nbirths == 0) {
            enif_free_env(s->births_env);
            s->births_env = NULL;
        }
    }
    uint64_t dropped = s->births_dropped;
    s->births_dropped = 0;
    enif_mutex_unlock(s->births_lock);
    return enif_make_tuple2(env, out, enif_make_uint64(env, dropped));
}
