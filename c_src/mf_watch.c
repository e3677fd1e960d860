/*
 * mf_watch.c -- a flow session's watches (see mf_watch.h for what it owns
 * and which threads touch it).
 */
#include "mf_watch.h"

#include "mf_kind.h"

#include <string.h>

#include "mf_atoms.h"

struct mf_watch {
    int used;
    ERL_NIF_TERM label;  /* in the watches' env */
    uint64_t max;        /* events kept at most */
    uint64_t kept;
    ERL_NIF_TERM events; /* list in the watches' env, newest first */
};

int mf_watches_init(mf_watches *w)
{
    w->lock = enif_mutex_create("msgflow_flow");
    return w->lock != NULL;
}

void mf_watches_free(mf_watches *w)
{
    if (w->env)
        enif_free_env(w->env);
    if (w->slots)
        enif_free(w->slots);
    if (w->lock)
        enif_mutex_destroy(w->lock);
    w->env = NULL;
    w->slots = NULL;
    w->lock = NULL;
}

/* Under the lock: the watch of `label', or NULL. */
static mf_watch *find_watch(mf_watches *w, ERL_NIF_TERM label)
{
    if (!w->slots)
        return NULL;
    for (unsigned i = 0; i < MF_MAX_WATCHES; i++)
        if (w->slots[i].used && enif_compare(w->slots[i].label, label) == 0)
            return &w->slots[i];
    return NULL;
}

void mf_watches_event(mf_watches *ws, ErlNifEnv *env, ERL_NIF_TERM label, ERL_NIF_TERM prev,
                      ERL_NIF_TERM cur, ERL_NIF_TERM from, ERL_NIF_TERM to, ERL_NIF_TERM msg,
                      int reply)
{
    /* once every watch is full, no event takes the lock */
    if (atomic_load_explicit(&ws->room, memory_order_relaxed) == 0 || !ws->lock)
        return;
    ErlNifTime now = enif_monotonic_time(ERL_NIF_USEC);
    enif_mutex_lock(ws->lock);
    mf_watch *w = find_watch(ws, label);
    if (w && w->kept < w->max) {
        uint64_t kind = mf_kind_word(mf_layout_get(), env, msg, reply);
        ErlNifEnv *fe = ws->env;
        ERL_NIF_TERM ev = enif_make_tuple7(fe, enif_make_copy(fe, prev), enif_make_copy(fe, cur),
                                           enif_make_copy(fe, from), enif_make_copy(fe, to),
                                           enif_make_int64(fe, now), mf_kind_atom(kind),
                                           mf_kind_tag(kind));
        w->events = enif_make_list_cell(fe, ev, w->events);
        w->kept++;
        atomic_fetch_sub_explicit(&ws->room, 1, memory_order_relaxed);
    }
    enif_mutex_unlock(ws->lock);
}

ERL_NIF_TERM mf_watches_watch(mf_watches *ws, ERL_NIF_TERM label, uint64_t max)
{
    ERL_NIF_TERM res = atom_full;
    enif_mutex_lock(ws->lock);
    if (!ws->slots && (ws->slots = enif_alloc(MF_MAX_WATCHES * sizeof(mf_watch))) != NULL)
        memset(ws->slots, 0, MF_MAX_WATCHES * sizeof(mf_watch));
    if (!ws->env)
        ws->env = enif_alloc_env();
    if (ws->slots && ws->env) {
        mf_watch *w = find_watch(ws, label);
        for (unsigned i = 0; !w && i < MF_MAX_WATCHES; i++)
            if (!ws->slots[i].used) {
                w = &ws->slots[i];
                w->used = 1;
                w->label = enif_make_copy(ws->env, label);
                atomic_fetch_add(&ws->nwatched, 1);
            }
        if (w) {
            atomic_fetch_sub(&ws->room, w->max - w->kept);
            w->max = max;
            w->kept = 0;
            w->events = enif_make_list(ws->env, 0);
            atomic_fetch_add(&ws->room, max);
            res = atom_ok;
        }
    }
    enif_mutex_unlock(ws->lock);
    return res;
}

ERL_NIF_TERM mf_watches_take(ErlNifEnv *env, mf_watches *ws, ERL_NIF_TERM label)
{
    ERL_NIF_TERM out = enif_make_list(env, 0), head, rest;
    ERL_NIF_TERM state = atom_done;
    enif_mutex_lock(ws->lock);
    mf_watch *w = find_watch(ws, label);
    if (w) {
        /* closed: no room left for new events */
        atomic_fetch_sub(&ws->room, w->max - w->kept);
        w->max = w->kept;
        unsigned n = 0;
        ERL_NIF_TERM cells[MF_FLOW_EVENTS_PER_TAKE];
        while (n < MF_FLOW_EVENTS_PER_TAKE &&
               enif_get_list_cell(ws->env, w->events, &head, &rest)) {
            cells[n++] = enif_make_copy(env, head);
            w->events = rest;
        }
        out = enif_make_list_from_array(env, cells, n);
        if (enif_is_empty_list(ws->env, w->events)) {
            memset(w, 0, sizeof(*w));
            if (atomic_fetch_sub(&ws->nwatched, 1) == 1) {
                enif_free_env(ws->env); /* the last watch: its terms go */
                ws->env = NULL;
            }
        } else {
            state = atom_more;
        }
    }
    enif_mutex_unlock(ws->lock);
    return enif_make_tuple2(env, out, state);
}
