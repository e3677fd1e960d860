/*
 * mf_flow.c -- request flows: watches of follow/1 labels with their events,
 * and call entries (see mf_flow.h for what it owns and which threads touch
 * it).  The seq_trace send events themselves are counted by the tracer
 * callback (msgflow_tracer_nif.c) like sends, in the flow session's shards.
 */
#include "mf_flow.h"

#include <stdatomic.h>
#include <string.h>

struct mf_watch {
    int used;
    ERL_NIF_TERM label;  /* in flow_env */
    uint64_t max;        /* events kept at most */
    uint64_t kept;
    ERL_NIF_TERM events; /* list in flow_env, newest first */
};

/* ------------------------------------------------------------- watches */

void mf_flow_free(mf_session *s)
{
    if (s->flow_env)
        enif_free_env(s->flow_env);
    s->flow_env = NULL;
    if (s->watches)
        enif_free(s->watches);
    s->watches = NULL;
    if (s->flow_lock)
        enif_mutex_destroy(s->flow_lock);
    s->flow_lock = NULL;
}

/* Under flow_lock: the watch of `label', or NULL. */
static mf_watch *find_watch(mf_session *s, ERL_NIF_TERM label)
{
    if (!s->watches)
        return NULL;
    for (unsigned i = 0; i < MF_MAX_WATCHES; i++)
        if (s->watches[i].used && enif_compare(s->watches[i].label, label) == 0)
            return &s->watches[i];
    return NULL;
}

void mf_flow_event(mf_session *s, ERL_NIF_TERM label, ERL_NIF_TERM prev, ERL_NIF_TERM cur,
                   ERL_NIF_TERM from, ERL_NIF_TERM to)
{
    /* once every watch is full, no event takes the lock */
    if (atomic_load_explicit(&s->room, memory_order_relaxed) == 0 || !s->flow_lock)
        return;
    ErlNifTime now = enif_monotonic_time(ERL_NIF_USEC);
    enif_mutex_lock(s->flow_lock);
    mf_watch *w = find_watch(s, label);
    if (w && w->kept < w->max) {
        ErlNifEnv *fe = s->flow_env;
        ERL_NIF_TERM ev = enif_make_tuple5(fe, enif_make_copy(fe, prev), enif_make_copy(fe, cur),
                                           enif_make_copy(fe, from), enif_make_copy(fe, to),
                                           enif_make_int64(fe, now));
        w->events = enif_make_list_cell(fe, ev, w->events);
        w->kept++;
        atomic_fetch_sub_explicit(&s->room, 1, memory_order_relaxed);
    }
    enif_mutex_unlock(s->flow_lock);
}

static int get_flow_session(ErlNifEnv *env, ERL_NIF_TERM t, mf_session **s)
{
    return mf_get_session(env, t, s) && (*s)->kind == MF_KIND_FLOW && (*s)->flow_lock;
}

/* flow_session_new(KeeperPid, MaxPairs) -> FlowSession: the tracer state
 * for seq_trace:set_system_tracer/1; the keeper is monitored (the session
 * discards everything once it died).  badarg for a bad argument. */
ERL_NIF_TERM mf_nif_flow_session_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ErlNifPid keeper;
    ErlNifUInt64 max;
    ERL_NIF_TERM term;
    if (!enif_get_local_pid(env, argv[0], &keeper) || !enif_get_uint64(env, argv[1], &max) ||
        max == 0)
        return enif_make_badarg(env);
    if (!mf_session_make(env, &keeper, max, MF_KIND_FLOW, &term))
        return enif_raise_exception(env, atom_memory);
    return term;
}

/* flow_watch(FlowSession, Label, MaxEvents) -> ok | full: from now on the
 * events of Label are kept, MaxEvents at most (0 keeps none; the rest are
 * only counted, as every event is).  `full' when MF_MAX_WATCHES labels are
 * watched.  A label watched already starts again with no events. */
ERL_NIF_TERM mf_nif_flow_watch(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    ErlNifUInt64 max;
    if (!get_flow_session(env, argv[0], &s) || !enif_get_uint64(env, argv[2], &max))
        return enif_make_badarg(env);
    ERL_NIF_TERM res = atom_full;
    enif_mutex_lock(s->flow_lock);
    if (!s->watches && (s->watches = enif_alloc(MF_MAX_WATCHES * sizeof(mf_watch))) != NULL)
        memset(s->watches, 0, MF_MAX_WATCHES * sizeof(mf_watch));
    if (!s->flow_env)
        s->flow_env = enif_alloc_env();
    if (s->watches && s->flow_env) {
        mf_watch *w = find_watch(s, argv[1]);
        for (unsigned i = 0; !w && i < MF_MAX_WATCHES; i++)
            if (!s->watches[i].used) {
                w = &s->watches[i];
                w->used = 1;
                w->label = enif_make_copy(s->flow_env, argv[1]);
                atomic_fetch_add(&s->nwatched, 1);
            }
        if (w) {
            atomic_fetch_sub(&s->room, w->max - w->kept);
            w->max = max;
            w->kept = 0;
            w->events = enif_make_list(s->flow_env, 0);
            atomic_fetch_add(&s->room, max);
            res = atom_ok;
        }
    }
    enif_mutex_unlock(s->flow_lock);
    return res;
}

#define MF_FLOW_EVENTS_PER_TAKE 500 /* events a flow_take call copies: 0.1-0.4 ms */

/* flow_take(FlowSession, Label) -> {Events, more | done}: at most
 * MF_FLOW_EVENTS_PER_TAKE of the events kept for Label, newest first, each {Prev,
 * Cur, From, To, MonotonicUs}; call again while `more'.  The first call
 * closes the watch to new events; the one that returns `done' ends it.
 * {[], done} for a label not watched. */
ERL_NIF_TERM mf_nif_flow_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!get_flow_session(env, argv[0], &s))
        return enif_make_badarg(env);
    ERL_NIF_TERM out = enif_make_list(env, 0), head, rest;
    ERL_NIF_TERM state = atom_done;
    enif_mutex_lock(s->flow_lock);
    mf_watch *w = find_watch(s, argv[1]);
    if (w) {
        /* closed: no room left for new events */
        atomic_fetch_sub(&s->room, w->max - w->kept);
        w->max = w->kept;
        unsigned n = 0;
        ERL_NIF_TERM cells[MF_FLOW_EVENTS_PER_TAKE];
        while (n < MF_FLOW_EVENTS_PER_TAKE && enif_get_list_cell(s->flow_env, w->events, &head, &rest)) {
            cells[n++] = enif_make_copy(env, head);
            w->events = rest;
        }
        out = enif_make_list_from_array(env, cells, n);
        if (enif_is_empty_list(s->flow_env, w->events)) {
            memset(w, 0, sizeof(*w));
            if (atomic_fetch_sub(&s->nwatched, 1) == 1) {
                enif_free_env(s->flow_env); /* the last watch: its terms go */
                s->flow_env = NULL;
            }
        } else {
            state = atom_more;
        }
    }
    enif_mutex_unlock(s->flow_lock);
    return enif_make_tuple2(env, out, state);
}

/* ------------------------------------------------------------- entries */

typedef struct mf_call_entry {
    _Atomic uint64_t calls;
    _Atomic uint64_t sampled;
    uint64_t every;
    _Atomic int active;
} mf_call_entry;

static ErlNifResourceType *mf_entry_rt;

int mf_flow_open_type(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    ErlNifResourceFlags tried;
    mf_entry_rt = enif_open_resource_type(env, NULL, "msgflow_entry", NULL, flags, &tried);
    return mf_entry_rt ? 0 : -1;
}

int mf_entry_call(ErlNifEnv *env, ERL_NIF_TERM state, ERL_NIF_TERM *answer)
{
    mf_call_entry *e;
    if (!enif_get_resource(env, state, mf_entry_rt, (void **)&e))
        return 0;
    if (!atomic_load_explicit(&e->active, memory_order_relaxed)) {
        *answer = atom_discard;
        return 1;
    }
    uint64_t n = atomic_fetch_add_explicit(&e->calls, 1, memory_order_relaxed);
    if (n % e->every == 0) {
        atomic_fetch_add_explicit(&e->sampled, 1, memory_order_relaxed);
        *answer = atom_trace;
    } else {
        *answer = atom_discard;
    }
    return 1;
}

int mf_entry_status(ErlNifEnv *env, ERL_NIF_TERM state, ERL_NIF_TERM *answer)
{
    mf_call_entry *e;
    if (!enif_get_resource(env, state, mf_entry_rt, (void **)&e))
        return 0;
    *answer = atomic_load_explicit(&e->active, memory_order_relaxed) ? atom_trace : atom_remove;
    return 1;
}

/* entry_new(Every) -> Entry: counts calls, samples one in Every (the
 * first, then every Every-th). */
ERL_NIF_TERM mf_nif_entry_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ErlNifUInt64 every;
    if (!enif_get_uint64(env, argv[0], &every) || every == 0)
        return enif_make_badarg(env);
    mf_call_entry *e = enif_alloc_resource(mf_entry_rt, sizeof(*e));
    if (!e)
        return enif_raise_exception(env, atom_memory);
    memset(e, 0, sizeof(*e));
    e->every = every;
    atomic_store(&e->active, 1);
    ERL_NIF_TERM t = enif_make_resource(env, e);
    enif_release_resource(e);
    return t;
}

/* entry_info(Entry) -> {Calls, Sampled} */
ERL_NIF_TERM mf_nif_entry_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_call_entry *e;
    if (!enif_get_resource(env, argv[0], mf_entry_rt, (void **)&e))
        return enif_make_badarg(env);
    return enif_make_tuple2(env, enif_make_uint64(env, atomic_load(&e->calls)),
                            enif_make_uint64(env, atomic_load(&e->sampled)));
}

/* entry_stop(Entry) -> ok: no call is sampled or counted after it. */
ERL_NIF_TERM mf_nif_entry_stop(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_call_entry *e;
    if (!enif_get_resource(env, argv[0], mf_entry_rt, (void **)&e))
        return enif_make_badarg(env);
    atomic_store(&e->active, 0);
    return atom_ok;
}
