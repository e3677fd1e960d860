/*
 * mf_flow.c -- request flows: the flow session's NIFs (its watches are
 * mf_watch.c's) and call entries (see mf_flow.h for what it owns and which
 * threads touch it).  The seq_trace send events themselves are counted by
 * the tracer callback (msgflow_tracer_nif.c) like sends, in the flow
 * session's shards.
 */
#include "mf_abi.h"
#include "mf_flow.h"

#include <stdatomic.h>
#include <string.h>

static int get_flow_session(ErlNifEnv *env, ERL_NIF_TERM t, mf_session **s)
{
    return mf_get_session(mf_layout_get(), env, t, s) && (*s)->type == MF_SESSION_FLOW &&
           (*s)->watches.lock;
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
    if (!mf_session_make(env, &keeper, max, 0, MF_SESSION_FLOW, &term))
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
    return mf_watches_watch(&s->watches, argv[1], max);
}

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
    return mf_watches_take(env, &s->watches, argv[1]);
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
    mf_entry_rt = enif_open_resource_type(env, NULL, MF_RT_NAME("msgflow_entry"), NULL, flags, &tried);
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
