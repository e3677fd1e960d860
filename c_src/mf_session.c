/*
 * mf_session.c -- sessions and slots (see mf_session.h for what it owns and
 * which threads touch it), and the allocator chosen at load.
 */
#include "mf_session.h"

#include <string.h>

#include "mf_intern.h"

ErlNifResourceType *mf_session_rt;
static _Atomic uint64_t mf_next_session_id = 1;

/* ------------------------------------------------------------- allocators */

static void *enif_alloc_fn(void *ctx, size_t size)
{
    (void)ctx;
    return enif_alloc(size);
}

static void enif_free_fn(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;
    enif_free(ptr);
}

static const mf_alloc mf_alloc_enif = {enif_alloc_fn, enif_free_fn, NULL, "enif"};

/* Chosen by the first load of this library; never changed after. */
static mf_alloc mf_active;
static char mf_jemalloc_error_text[256];

void mf_choose_allocator(void)
{
    if (mf_active.alloc)
        return;
    char want[16] = "auto";
    size_t len = sizeof(want);
    if (enif_getenv("MSGFLOW_ALLOCATOR", want, &len) != 0)
        strcpy(want, "auto");
    if (strcmp(want, "enif") == 0) {
        snprintf(mf_jemalloc_error_text, sizeof(mf_jemalloc_error_text), "MSGFLOW_ALLOCATOR=enif");
        mf_active = mf_alloc_enif;
        return;
    }
    if (!mf_alloc_jemalloc(&mf_active, mf_jemalloc_error_text, sizeof(mf_jemalloc_error_text)))
        mf_active = mf_alloc_enif;
}

const char *mf_allocator_name(void)
{
    return mf_active.name;
}

const char *mf_jemalloc_error(void)
{
    return mf_jemalloc_error_text;
}

/* ------------------------------------------------------------------ slots */

static mf_slot *slot_new(mf_session *s)
{
    mf_slot *slot = s->alloc.alloc(s->alloc.ctx, sizeof(*slot));
    if (!slot)
        return NULL;
    memset(slot, 0, sizeof(*slot));
    slot->session = s;
    slot->shard = mf_shard_new(&s->alloc, &s->limit);
    if (!slot->shard) {
        s->alloc.free(s->alloc.ctx, slot, sizeof(*slot));
        return NULL;
    }
    return slot;
}

/* Any thread, when no one else can reach the slot. */
static void slot_destroy(mf_slot *slot)
{
    if (!slot)
        return;
    mf_intern_free_all(slot);
    if (slot->env)
        enif_free_env(slot->env);
    if (slot->lock)
        enif_mutex_destroy(slot->lock);
    mf_shard_free(slot->shard);
    mf_session *s = slot->session;
    s->alloc.free(s->alloc.ctx, slot, sizeof(*slot));
}

mf_slot *mf_slot_claim(mf_session *s)
{
    unsigned idx = atomic_fetch_add_explicit(&s->nslots, 1, memory_order_relaxed);
    mf_slot *slot;
    if (idx < MF_MAX_SLOTS) {
        slot = slot_new(s);
        if (!slot)
            return NULL;
        atomic_store_explicit(&s->slots[idx], slot, memory_order_release);
    } else {
        enif_mutex_lock(s->spill_lock);
        slot = atomic_load_explicit(&s->spill, memory_order_acquire);
        if (!slot && (slot = slot_new(s)) != NULL) {
            slot->lock = enif_mutex_create("msgflow_spill");
            atomic_store_explicit(&s->spill, slot, memory_order_release);
        }
        enif_mutex_unlock(s->spill_lock);
        if (!slot || !slot->lock)
            return NULL;
    }
    return slot;
}

/* --------------------------------------------------------------- sessions */

static void session_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    mf_session *s = obj;
    unsigned n = atomic_load(&s->nslots);
    for (unsigned i = 0; i < n && i < MF_MAX_SLOTS; i++)
        slot_destroy(atomic_load(&s->slots[i]));
    slot_destroy(atomic_load(&s->spill));
    if (s->spill_lock)
        enif_mutex_destroy(s->spill_lock);
    if (s->births_lock)
        enif_mutex_destroy(s->births_lock);
    if (s->births_env)
        enif_free_env(s->births_env);
}

static void session_down(ErlNifEnv *env, void *obj, ErlNifPid *pid, ErlNifMonitor *mon)
{
    (void)env;
    (void)pid;
    (void)mon;
    mf_session *s = obj;
    int active = MF_ACTIVE;
    atomic_compare_exchange_strong(&s->state, &active, MF_COLLECTOR_DOWN);
}

int mf_session_open_type(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    ErlNifResourceTypeInit init = {session_dtor, NULL, session_down, 0, NULL};
    ErlNifResourceFlags tried;
    mf_session_rt = enif_open_resource_type_x(env, "msgflow_session", &init, flags, &tried);
    return mf_session_rt ? 0 : -1;
}

/* session_new(CollectorPid, MaxPairs) -> Session.  The caller (the
 * collector) is monitored: when it dies the session answers remove. */
ERL_NIF_TERM mf_nif_session_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ErlNifPid collector;
    ErlNifUInt64 max;
    if (!enif_get_local_pid(env, argv[0], &collector) || !enif_get_uint64(env, argv[1], &max) ||
        max == 0)
        return enif_make_badarg(env);
    mf_session *s = enif_alloc_resource(mf_session_rt, sizeof(*s));
    if (!s)
        return enif_raise_exception(env, atom_memory);
    memset(s, 0, sizeof(*s));
    s->id = atomic_fetch_add(&mf_next_session_id, 1);
    s->alloc = mf_active;
    s->limit.max = max;
    s->spill_lock = enif_mutex_create("msgflow_spill_claim");
    s->births_lock = enif_mutex_create("msgflow_births");
    ERL_NIF_TERM term = enif_make_resource(env, s);
    enif_release_resource(s);
    if (!s->spill_lock || !s->births_lock)
        return enif_raise_exception(env, atom_memory);
    if (enif_monitor_process(env, s, &collector, &s->monitor) != 0)
        atomic_store(&s->state, MF_COLLECTOR_DOWN);
    else
        s->monitored = 1;
    return term;
}

/* session_stop(Session) -> ok.  From now on the session answers remove. */
ERL_NIF_TERM mf_nif_session_stop(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!mf_get_session(env, argv[0], &s))
        return enif_make_badarg(env);
    atomic_store(&s->state, MF_STOPPED);
    if (s->monitored) {
        enif_demonitor_process(env, s, &s->monitor);
        s->monitored = 0;
    }
    return atom_ok;
}

/* session_info(Session) -> #{state, shards, memory (bytes), entries, max_pairs} */
ERL_NIF_TERM mf_nif_session_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!mf_get_session(env, argv[0], &s))
        return enif_make_badarg(env);
    uint64_t bytes = sizeof(*s), entries = 0, shards = 0;
    unsigned n = atomic_load_explicit(&s->nslots, memory_order_relaxed);
    for (unsigned i = 0; i < n && i <= MF_MAX_SLOTS; i++) {
        mf_slot *slot = atomic_load_explicit(i < MF_MAX_SLOTS ? &s->slots[i] : &s->spill,
                                             memory_order_acquire);
        if (!slot)
            continue;
        shards++;
        bytes += sizeof(*slot) + mf_shard_bytes(slot->shard);
        entries += mf_shard_entries(slot->shard);
    }
    int st = atomic_load(&s->state);
    ERL_NIF_TERM keys[] = {atom_state, atom_shards, atom_memory, atom_entries, atom_max_pairs};
    ERL_NIF_TERM vals[] = {
        st == MF_ACTIVE ? atom_active : st == MF_STOPPED ? atom_stopped : atom_collector_down,
        enif_make_uint64(env, shards), enif_make_uint64(env, bytes),
        enif_make_uint64(env, entries), enif_make_uint64(env, s->limit.max)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, 5, &map);
    return map;
}
