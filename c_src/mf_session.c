/*
 * mf_session.c -- sessions and slots (see mf_session.h for what it owns and
 * which threads touch it).
 */
#include "mf_abi.h"
#include "mf_session.h"

#include "mf_kind.h"

#include <string.h>

ErlNifResourceType *mf_session_rt;

/* The numbers of sessions and generations: this library's, or on an
 * upgrade those of the library it took over from (mf_session_counters), so
 * that a session of the new library never has the number of one of the old
 * (a thread's cache finds its slot by the number).  Set in load and
 * upgrade, under the code-loading lock; the counters themselves are taken
 * by any thread. */
static mf_session_numbers mf_own_numbers = {MF_ABI, 1, 1};
static mf_session_numbers *mf_numbers = &mf_own_numbers;

mf_session_numbers *mf_session_counters(mf_session_numbers *old)
{
    if (old && old->abi == MF_ABI)
        mf_numbers = old;
    return mf_numbers;
}

/* ------------------------------------------------------------ generations */

/* A new generation of s under `epoch'; NULL when out of memory. */
static mf_gen *gen_new(mf_session *s, uint64_t epoch)
{
    return mf_gen_new(&s->alloc, &s->limit, epoch);
}

mf_gen *mf_slot_renew(mf_slot *slot, uint64_t epoch)
{
    mf_gen *old = atomic_load_explicit(&slot->gen, memory_order_relaxed);
    if (old && old->epoch == epoch)
        return old;
    mf_gen *g = gen_new(slot->session, epoch);
    if (!g)
        return old;
    atomic_store_explicit(&slot->gen, g, memory_order_release);
    if (old) {
        /* the old one is final from here: its entries leave the cap, and
         * the snapshot takes what is left in it and frees it */
        atomic_fetch_sub_explicit(&slot->session->limit.used, mf_shard_entries(old->shard),
                                  memory_order_relaxed);
        mf_gen *head = atomic_load_explicit(&slot->retired, memory_order_relaxed);
        do
            old->older = head;
        while (!atomic_compare_exchange_weak_explicit(&slot->retired, &head, old,
                                                      memory_order_release,
                                                      memory_order_relaxed));
    }
    return g;
}

void mf_slot_free_retired(mf_slot *slot, mf_gen *g)
{
    mf_session *s = slot->session;
    enif_mutex_lock(s->gens_lock);
    mf_gen *head = g;
    if (!atomic_compare_exchange_strong(&slot->retired, &head, g->older)) {
        /* the owner pushed newer ones: g is further down, where only we
         * write */
        mf_gen *p = atomic_load_explicit(&slot->retired, memory_order_acquire);
        while (p && p->older != g)
            p = p->older;
        if (p)
            p->older = g->older;
    }
    s->gens_freed++;
    enif_mutex_unlock(s->gens_lock);
    mf_gen_free(g);
}

/* ------------------------------------------------------------------ slots */

static mf_slot *slot_new(mf_session *s)
{
    mf_slot *slot = s->alloc.alloc(s->alloc.ctx, sizeof(*slot));
    if (!slot)
        return NULL;
    memset(slot, 0, sizeof(*slot));
    slot->session = s;
    mf_gen *g = gen_new(s, atomic_load_explicit(&s->epoch, memory_order_relaxed));
    if (!g) {
        s->alloc.free(s->alloc.ctx, slot, sizeof(*slot));
        return NULL;
    }
    atomic_store_explicit(&slot->gen, g, memory_order_relaxed);
    return slot;
}

/* Any thread, when no one else can reach the slot. */
static void slot_destroy(mf_slot *slot)
{
    if (!slot)
        return;
    mf_gen *r = atomic_load(&slot->retired);
    while (r) {
        mf_gen *older = r->older;
        mf_gen_free(r);
        r = older;
    }
    mf_gen_free(atomic_load(&slot->gen));
    if (slot->lock)
        enif_mutex_destroy(slot->lock);
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
    if (s->gens_lock)
        enif_mutex_destroy(s->gens_lock);
    mf_proc_events_free(&s->proc_events);
    mf_own_free(&s->own);
    mf_watches_free(&s->watches);
    mf_calls_free(atomic_load(&s->calls));
    mf_sizes_free(atomic_load(&s->sizes));
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
    mf_session_rt = enif_open_resource_type_x(env, MF_RT_NAME("msgflow_session"), &init, flags, &tried);
    return mf_session_rt ? 0 : -1;
}

mf_session *mf_session_make(ErlNifEnv *env, const ErlNifPid *owner, uint64_t max,
                            uint64_t max_kinds, int type, ERL_NIF_TERM *term)
{
    mf_session *s = enif_alloc_resource(mf_session_rt, sizeof(*s));
    if (!s)
        return NULL;
    memset(s, 0, sizeof(*s));
    s->id = atomic_fetch_add(&mf_numbers->next_session_id, 1);
    atomic_store(&s->epoch, atomic_fetch_add(&mf_numbers->next_epoch, 1));
    s->type = type;
    s->alloc = *mf_alloc_chosen();
    atomic_init(&s->limit.max, max);
    s->limit.max_kinds = max_kinds;
    s->kinds = max_kinds > 0;
    s->spill_lock = enif_mutex_create("msgflow_spill_claim");
    s->gens_lock = enif_mutex_create("msgflow_gens");
    int parts = mf_proc_events_init(&s->proc_events) && mf_own_init(&s->own) &&
                (type != MF_SESSION_FLOW || mf_watches_init(&s->watches));
    *term = enif_make_resource(env, s);
    enif_release_resource(s);
    if (!s->spill_lock || !s->gens_lock || !parts)
        return NULL;
    ErlNifPid pid = *owner;
    if (enif_monitor_process(env, s, &pid, &s->monitor) != 0)
        atomic_store(&s->state, MF_COLLECTOR_DOWN);
    else
        s->monitored = 1;
    return s;
}

/* session_new(CollectorPid, MaxPairs, MaxKinds) -> Session: MaxPairs
 * entries at most (all threads), MaxKinds kind words a pair may have in
 * one thread's table (0: kinds off, sends are counted by pair alone).  The
 * caller (the collector) is monitored: when it dies the session answers
 * remove. */
ERL_NIF_TERM mf_nif_session_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ErlNifPid collector;
    ErlNifUInt64 max, max_kinds;
    ERL_NIF_TERM term;
    if (!enif_get_local_pid(env, argv[0], &collector) || !enif_get_uint64(env, argv[1], &max) ||
        max == 0 || !enif_get_uint64(env, argv[2], &max_kinds) || max_kinds > MF_MAX_KINDS)
        return enif_make_badarg(env);
    if (!mf_session_make(env, &collector, max, max_kinds, MF_SESSION_SEND, &term))
        return enif_raise_exception(env, atom_memory);
    return term;
}

/* session_stop(Session) -> ok.  From now on the session answers remove. */
ERL_NIF_TERM mf_nif_session_stop(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s))
        return enif_make_badarg(env);
    atomic_store(&s->state, MF_STOPPED);
    if (s->monitored) {
        enif_demonitor_process(env, s, &s->monitor);
        s->monitored = 0;
    }
    return atom_ok;
}

/* session_rotate(Session) -> ok.  A new epoch: each thread makes a new
 * generation the next time it counts, and retires its current one. */
ERL_NIF_TERM mf_nif_session_rotate(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s))
        return enif_make_badarg(env);
    atomic_store(&s->epoch, atomic_fetch_add(&mf_numbers->next_epoch, 1));
    atomic_fetch_add(&s->rotations, 1);
    return atom_ok;
}

/* session_limit(Session, Max) -> ok.  The session's cap set to Max
 * entries: lowered so that its tables grow no more once the collector's
 * share of max_memory is used (a new entry past it is overflow, as past
 * the cap it was made with), set back when the collector's store is
 * emptied (a reset).  The collector's thread; the callbacks read the cap
 * relaxed when they create an entry. */
ERL_NIF_TERM mf_nif_session_limit(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    ErlNifUInt64 max;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s) || !enif_get_uint64(env, argv[1], &max) ||
        max == 0)
        return enif_make_badarg(env);
    atomic_store_explicit(&s->limit.max, max, memory_order_relaxed);
    return atom_ok;
}

/* session_info(Session) -> #{state, shards, memory (bytes), entries, max_pairs,
 *   max_kinds (0: kinds off), rotations, retired (generations not yet freed), freed (generations
 *   freed), own (msgflow's own processes and names in the set), own_left_out (sends to or
 *   from them, not counted)}.  memory and entries cover the retired generations too. */
ERL_NIF_TERM mf_nif_session_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s))
        return enif_make_badarg(env);
    uint64_t bytes = sizeof(*s), entries = 0, shards = 0, retired = 0, freed;
    unsigned n = atomic_load_explicit(&s->nslots, memory_order_relaxed);
    enif_mutex_lock(s->gens_lock);
    for (unsigned i = 0; i < n && i <= MF_MAX_SLOTS; i++) {
        mf_slot *slot = atomic_load_explicit(i < MF_MAX_SLOTS ? &s->slots[i] : &s->spill,
                                             memory_order_acquire);
        if (!slot)
            continue;
        shards++;
        bytes += sizeof(*slot);
        /* the current one is never freed while the session lives */
        mf_gen_figures(atomic_load_explicit(&slot->gen, memory_order_acquire), &bytes, &entries);
        for (mf_gen *r = atomic_load_explicit(&slot->retired, memory_order_acquire); r;
             r = r->older) {
            mf_gen_figures(r, &bytes, &entries);
            retired++;
        }
    }
    freed = s->gens_freed;
    enif_mutex_unlock(s->gens_lock);
    int st = atomic_load(&s->state);
    ERL_NIF_TERM keys[] = {atom_state,     atom_shards,    atom_memory,  atom_entries,
                           atom_max_pairs, atom_rotations, atom_retired, atom_freed,
                           atom_max_kinds, atom_own_left_out, atom_own};
    ERL_NIF_TERM vals[] = {
        st == MF_ACTIVE ? atom_active : st == MF_STOPPED ? atom_stopped : atom_collector_down,
        enif_make_uint64(env, shards),
        enif_make_uint64(env, bytes),
        enif_make_uint64(env, entries),
        enif_make_uint64(env, atomic_load_explicit(&s->limit.max, memory_order_relaxed)),
        enif_make_uint64(env, atomic_load(&s->rotations)),
        enif_make_uint64(env, retired),
        enif_make_uint64(env, freed),
        enif_make_uint64(env, s->limit.max_kinds),
        enif_make_uint64(env, atomic_load(&s->own.left_out)),
        enif_make_uint64(env, atomic_load(&s->own.live))};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, 11, &map);
    return map;
}

/* proc_events_take(Session) -> {[{Pid, Name | {M, F, Arity} |
 * {proc_lib, {M, F, ArgsSummary}}}], Dropped}: the next chunk of the
 * session's proc_events (mf_proc_events_take); call again until none come back.
 * Any normal scheduler. */
ERL_NIF_TERM mf_nif_proc_events_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s))
        return enif_make_badarg(env);
    return mf_proc_events_take(env, &s->proc_events);
}

/* calls_config(Session, Sample, TimeoutMs) -> ok: the session notes 1 in
 * Sample gen:calls per thread (their request and the reply to its alias),
 * and gives up as unanswered those without a reply after TimeoutMs.  Once
 * per session, before its tracing starts (the collector); a second call
 * changes nothing.  badarg for Sample 0 or over 2^30 (the countdown is an
 * int), or a flow session;
 * `memory' raised when the tables cannot be made. */
ERL_NIF_TERM mf_nif_calls_config(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    unsigned sample;
    ErlNifUInt64 timeout_ms;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s) || s->type != MF_SESSION_SEND ||
        !enif_get_uint(env, argv[1], &sample) || sample == 0 || sample > (1u << 30) ||
        !enif_get_uint64(env, argv[2], &timeout_ms) || timeout_ms > (1ULL << 40))
        return enif_make_badarg(env);
    if (atomic_load(&s->calls))
        return atom_ok;
    mf_calls *c = mf_calls_new(&s->alloc, sample, timeout_ms * 1000000ULL);
    if (!c)
        return enif_raise_exception(env, atom_memory);
    mf_calls *none = NULL;
    if (!atomic_compare_exchange_strong(&s->calls, &none, c))
        mf_calls_free(c);
    return atom_ok;
}

/* calls_take(Session) -> {Edges, #{busy, displaced}}: the round trips
 * noted since the last take, after the calls past their timeout were given
 * up as unanswered.  Edges: [{Caller, Server, Kind, Tag, Sampled,
 * Unanswered, [{Bucket, Count}]}], Caller a local pid, Server a local pid
 * or a registered name, Bucket as call_buckets/0 numbers them (nonzero
 * ones only).  busy and displaced are totals since the session began:
 * samples given up because their slot was being read, and calls given up
 * as unanswered because their slot was needed.  `[]' when calls are off.
 * The collector, on its own scheduler: the edges are a few per caller and
 * server in an interval. */
ERL_NIF_TERM mf_nif_calls_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s))
        return enif_make_badarg(env);
    mf_calls *c = atomic_load(&s->calls);
    ERL_NIF_TERM list = enif_make_list(env, 0), figures;
    if (c) {
        mf_call_edge *all = mf_calls_take(c, (uint64_t)enif_monotonic_time(ERL_NIF_NSEC));
        for (mf_call_edge *e = all; e; e = e->next) {
            ERL_NIF_TERM hist = enif_make_list(env, 0);
            for (unsigned b = MF_CALL_BUCKETS; b-- > 0;)
                if (e->buckets[b])
                    hist = enif_make_list_cell(env, enif_make_tuple2(env, enif_make_uint(env, b),
                                                                     enif_make_uint(env, e->buckets[b])),
                                               hist);
            ERL_NIF_TERM items[7] = {(ERL_NIF_TERM)e->caller, (ERL_NIF_TERM)e->server,
                                     mf_kind_atom(e->kind), mf_kind_tag(e->kind),
                                     enif_make_uint64(env, e->sampled),
                                     enif_make_uint64(env, e->unanswered), hist};
            list = enif_make_list_cell(env, enif_make_tuple_from_array(env, items, 7), list);
        }
        mf_calls_free_edges(c, all);
    }
    ERL_NIF_TERM keys[2] = {atom_busy, atom_displaced};
    ERL_NIF_TERM vals[2] = {enif_make_uint64(env, c ? atomic_load(&c->busy) : 0),
                            enif_make_uint64(env, c ? atomic_load(&c->displaced) : 0)};
    enif_make_map_from_arrays(env, keys, vals, 2, &figures);
    return enif_make_tuple2(env, list, figures);
}

/* sizes_config(Session, Sample, Words) -> ok: the session measures 1 in
 * Sample sends per thread (mf_size), Words the heap words of the terms
 * the walk does not go inside, as erts_debug:flat_size/1 gives them here:
 * {Float, Ref, Fun, ExtPid, HeapBin, RefcBin, Map, MapKey, Big, EmptyMap,
 * EmptyTuple} (msgflow_tracer:size_words/0).  Once per
 * session, before its tracing starts (the collector); a second call is
 * ignored.  badarg on bad types or a Sample of 0 or over 2^30 (the
 * countdown is an int). */
ERL_NIF_TERM mf_nif_sizes_config(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    unsigned sample, v[11];
    const ERL_NIF_TERM *e;
    int n;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s) || s->type != MF_SESSION_SEND ||
        !enif_get_uint(env, argv[1], &sample) || sample == 0 || sample > (1u << 30) ||
        !enif_get_tuple(env, argv[2], &n, &e) || n != 11)
        return enif_make_badarg(env);
    for (int i = 0; i < 11; i++)
        if (!enif_get_uint(env, e[i], &v[i]) || v[i] > 1024)
            return enif_make_badarg(env);
    if (atomic_load(&s->sizes))
        return atom_ok;
    mf_size_words w = {.flt = v[0], .ref = v[1], .fun = v[2], .ext_pid = v[3], .heap_bin = v[4],
                       .refc_bin = v[5], .map = v[6], .map_key = v[7], .big = v[8],
                       .map0 = v[9], .tuple0 = v[10]};
    mf_sizes *z = mf_sizes_new(&s->alloc, sample, &w);
    if (!z)
        return enif_raise_exception(env, atom_memory);
    mf_sizes *none = NULL;
    if (!atomic_compare_exchange_strong(&s->sizes, &none, z))
        mf_sizes_free(z);
    return atom_ok;
}

/* The edges of list as terms, prepended to acc; list freed. */
static ERL_NIF_TERM size_edges(ErlNifEnv *env, mf_sizes *z, mf_size_edge *list, ERL_NIF_TERM acc)
{
    for (mf_size_edge *e = list; e; e = e->next) {
        ERL_NIF_TERM items[7] = {(ERL_NIF_TERM)e->sender, (ERL_NIF_TERM)e->receiver,
                                 enif_make_uint64(env, e->sampled),
                                 enif_make_uint64(env, e->words),
                                 enif_make_uint64(env, e->words_max),
                                 enif_make_uint64(env, e->bin_bytes),
                                 enif_make_uint64(env, e->large)};
        acc = enif_make_list_cell(env, enif_make_tuple_from_array(env, items, 7), acc);
    }
    mf_sizes_free_edges(z, list);
    return acc;
}

/* sizes_take_some(Session, Max) -> {more | done, Edges}: the messages
 * measured since the last take, by edge, [{Sender, Receiver, Sampled,
 * Words, WordsMax, BinBytes, Large}] (Sender a local pid, Receiver a local
 * pid or registered name; Words and BinBytes sums over the Sampled
 * messages, Large how many of them ran out the walk's budget), at most Max (1 to 65,536) a call, so that no call holds its
 * scheduler long: `more' while edges or chains of this take are left,
 * which the next call goes on with (mf_sizes_take_some).  `{done, []}'
 * when sizes are off; `busy' while another caller takes them.  The
 * collector (tests and benches too). */
ERL_NIF_TERM mf_nif_sizes_take_some(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    unsigned max;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s) || !enif_get_uint(env, argv[1], &max) ||
        max < 1 || max > 65536)
        return enif_make_badarg(env);
    mf_sizes *z = atomic_load(&s->sizes);
    if (!z)
        return enif_make_tuple2(env, atom_done, enif_make_list(env, 0));
    int more, busy;
    mf_size_edge *some = mf_sizes_take_some(z, max, &more, &busy);
    if (busy)
        return enif_raise_exception(env, atom_busy);
    ERL_NIF_TERM list = size_edges(env, z, some, enif_make_list(env, 0));
    return enif_make_tuple2(env, more ? atom_more : atom_done, list);
}

/* call_buckets() -> [{Low, High}]: each histogram bucket's bounds in ns,
 * by number from 0 (Low included, High excluded; the last bucket's High is
 * `infinity').  Any process. */
ERL_NIF_TERM mf_nif_call_buckets(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (unsigned b = MF_CALL_BUCKETS; b-- > 0;) {
        uint64_t hi = mf_call_bucket_high(b);
        list = enif_make_list_cell(
            env,
            enif_make_tuple2(env, enif_make_uint64(env, mf_call_bucket_low(b)),
                             hi == UINT64_MAX ? atom_infinity
                                              : enif_make_uint64(env, hi)),
            list);
    }
    return list;
}

/* own(Session, add | remove | list, PidOrName) -> ok | full | [PidOrName]:
 * msgflow's own processes (mf_own): `add' a local pid or an atom (`full'
 * past MF_OWN_MAX), `remove' one, `list' them all.  Any normal scheduler;
 * the lock is held for one change, or one pass over 1,024 slots. */
ERL_NIF_TERM mf_nif_own(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    ErlNifPid pid;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s))
        return enif_make_badarg(env);
    if (argv[1] == atom_list) {
        uint64_t words[MF_OWN_MAX];
        unsigned n = mf_own_list(&s->own, words, MF_OWN_MAX);
        ERL_NIF_TERM list = enif_make_list(env, 0);
        for (unsigned i = 0; i < n; i++)
            list = enif_make_list_cell(env, (ERL_NIF_TERM)words[i], list); /* immediates */
        return list;
    }
    if (!(enif_get_local_pid(env, argv[2], &pid) || enif_is_atom(env, argv[2])))
        return enif_make_badarg(env);
    if (argv[1] == atom_add)
        return mf_own_add(&s->own, (uint64_t)argv[2]) ? atom_ok : atom_full;
    if (argv[1] == atom_remove) {
        mf_own_remove(&s->own, (uint64_t)argv[2]);
        return atom_ok;
    }
    return enif_make_badarg(env);
}
