/*
 * mf_proc_events.c -- proc_events (see mf_proc_events.h for what it owns and the threads
 * that touch it).
 */
#include "mf_proc_events.h"

#include "mf_atoms.h"

#define MF_PROC_EVENT_ARGS 8 /* arguments of a proc_lib start kept */

/* A bounded summary of a proc_lib start's argument list: atoms and pids as
 * they are, {_, Atom, _} as such (a supervisor's name), anything else '_'.
 * Enough to name what proc_lib names, never a copy of a big argument. */
static ERL_NIF_TERM args_summary(ErlNifEnv *env, ERL_NIF_TERM list)
{
    ERL_NIF_TERM out[MF_PROC_EVENT_ARGS], head;
    unsigned n = 0;
    while (n < MF_PROC_EVENT_ARGS && enif_get_list_cell(env, list, &head, &list)) {
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
 * collector can name it as proc_lib would, or for a fun (erlang:apply/2
 * with a fun, as spawn(Fun) reports it) {fun, Fun}, so that the collector
 * can name the function the fun was written in (erlang:fun_info/2).  The
 * fun goes into the process events' env with its free variables: a copy of what
 * the spawn itself just copied to the new process, once per spawn. */
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
    if (el[0] == atom_erts_internal && el[1] == atom_dist_spawn_init && len == 1) {
        /* a spawn from another node: its {M, F, Arity} (the arguments
         * come after, as a message) */
        ERL_NIF_TERM real;
        const ERL_NIF_TERM *r;
        int n;
        if (enif_get_list_cell(env, el[2], &real, &(ERL_NIF_TERM){0}) &&
            enif_get_tuple(env, real, &n, &r) && n == 3 && enif_is_atom(env, r[0]) &&
            enif_is_atom(env, r[1]) && enif_is_number(env, r[2]))
            return real;
    }
    if (el[0] == atom_erlang && el[1] == atom_apply && len == 2) {
        ERL_NIF_TERM fun;
        if (enif_get_list_cell(env, el[2], &fun, &(ERL_NIF_TERM){0}) &&
            enif_is_fun(env, fun))
            return enif_make_tuple2(env, atom_fun, fun);
    }
    return enif_make_tuple3(env, el[0], el[1], enif_make_uint(env, len));
}

int mf_proc_events_init(mf_proc_events *pe)
{
    pe->lock = enif_mutex_create("msgflow_proc_events");
    return pe->lock != NULL;
}

void mf_proc_events_free(mf_proc_events *pe)
{
    if (pe->lock)
        enif_mutex_destroy(pe->lock);
    if (pe->env)
        enif_free_env(pe->env);
    pe->lock = NULL;
    pe->env = NULL;
}

void mf_proc_event(ErlNifEnv *env, mf_proc_events *pe, ERL_NIF_TERM pid, ERL_NIF_TERM what)
{
    ERL_NIF_TERM rec = enif_make_tuple2(env, pid, what);
    enif_mutex_lock(pe->lock);
    if (pe->n >= MF_MAX_PROC_EVENTS) {
        pe->dropped++;
    } else {
        if (!pe->env && (pe->env = enif_alloc_env()) != NULL)
            pe->list = enif_make_list(pe->env, 0);
        if (pe->env) {
            pe->list = enif_make_list_cell(pe->env, enif_make_copy(pe->env, rec), pe->list);
            pe->n++;
        } else {
            pe->dropped++;
        }
    }
    enif_mutex_unlock(pe->lock);
}

ERL_NIF_TERM mf_proc_events_take(ErlNifEnv *env, mf_proc_events *pe)
{
    ERL_NIF_TERM out = enif_make_list(env, 0), head;
    unsigned n = 0;
    enif_mutex_lock(pe->lock);
    if (pe->env) {
        ERL_NIF_TERM list = pe->list;
        while (n < MF_PROC_EVENTS_CHUNK && enif_get_list_cell(pe->env, list, &head, &list)) {
            out = enif_make_list_cell(env, enif_make_copy(env, head), out);
            n++;
        }
        pe->list = list;
        pe->n -= n;
        if (pe->n == 0) {
            enif_free_env(pe->env);
            pe->env = NULL;
        }
    }
    uint64_t dropped = pe->dropped;
    pe->dropped = 0;
    enif_mutex_unlock(pe->lock);
    return enif_make_tuple2(env, out, enif_make_uint64(env, dropped));
}
