/*
 * msgflow_tracer_nif.c -- the erl_tracer module msgflow_tracer, and the
 * session NIFs the collector drives.
 *
 * What it owns
 * ------------
 * A session is a resource.  Its term is the tracer state given to
 * erlang:trace/3 as {tracer, msgflow_tracer, Session}, so the VM passes it to
 * every callback, and it stays alive while any trace flag or the collector
 * refers to it.  A session holds one slot per thread that has counted for it
 * (schedulers and dirty schedulers alike): the slot's shard (mf_shard.h) and
 * the terms the slot interned.
 *
 * Threads
 * -------
 * The enabled and trace callbacks run on the tracee's scheduler thread.  A thread finds its
 * slot through a thread-local cache tagged with the session id, so after its
 * first message a thread takes no lock and writes nothing shared.  A new slot
 * is claimed with one atomic add on the session's slot counter.  Threads past
 * MF_MAX_SLOTS share one spill slot under a mutex (not expected: it would
 * need more than that many scheduler threads).
 *
 * snapshot/1 runs on the collector's scheduler in steps of at most ~0.5 ms
 * (it yields in between), one at a time per session, and reads the slots
 * without stopping writers.
 *
 * Keys
 * ----
 * A local pid is keyed by its ErlNifPid word.  Any other endpoint (port,
 * atom, {Name, Node}, remote pid, alias reference) is interned per slot: a
 * copy of the term in an env the slot owns (for equality on the owner thread)
 * and its external format in memory the slot owns (for the reader).  The
 * interned term's id, whose low four bits (0x0) can never be those of a
 * local pid's word (0x3), is what the pair key holds.
 *
 * Memory: tables, interned terms and slots come from the allocator chosen at
 * load (jemalloc arena, or enif_alloc); each session keeps a copy of it and
 * frees through that copy.
 */
#include <erl_nif.h>

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "mf_alloc.h"
#include "mf_shard.h"
#include "mf_atoms.h"

/* The interned-term tables (uthash) allocate through the slot that owns
 * them; each macro use below has `slot` in scope (and `oomed` for adds). */
typedef struct mf_slot mf_slot;
static void *slot_alloc(mf_slot *slot, size_t sz);
static void slot_free(mf_slot *slot, void *p, size_t sz, int account);
#define uthash_malloc(sz) slot_alloc(slot, (sz))
#define uthash_free(ptr, sz) slot_free(slot, (ptr), (sz), 1)
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (oomed = 1)
#define HASH_FUNCTION(keyptr, keylen, hashv) \
    ((hashv) = (unsigned)((*(const uint64_t *)(keyptr)) ^ (*(const uint64_t *)(keyptr) >> 32)))
#include <uthash.h>

#define MF_MAX_SLOTS 2048
#define MF_PID_TAG_MASK 0xFULL
#define MF_PID_TAG 0x3ULL
#define MF_ID_TAG 0x0ULL

/* ------------------------------------------------------------------ atoms */

#define MF_ATOM_DEF(name) ERL_NIF_TERM atom_##name;
MF_ATOMS(MF_ATOM_DEF)
#undef MF_ATOM_DEF

static ERL_NIF_TERM atom_elided; /* '_': an argument births leave out */

static void make_atoms(ErlNifEnv *env)
{
#define MF_ATOM_MAKE(name) atom_##name = enif_make_atom(env, #name);
    MF_ATOMS(MF_ATOM_MAKE)
#undef MF_ATOM_MAKE
    atom_elided = enif_make_atom(env, "_");
}

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
static char mf_jemalloc_error[256];

static void choose_allocator(void)
{
    if (mf_active.alloc)
        return;
    char want[16] = "auto";
    size_t len = sizeof(want);
    if (enif_getenv("MSGFLOW_ALLOCATOR", want, &len) != 0)
        strcpy(want, "auto");
    if (strcmp(want, "enif") == 0) {
        snprintf(mf_jemalloc_error, sizeof(mf_jemalloc_error), "MSGFLOW_ALLOCATOR=enif");
        mf_active = mf_alloc_enif;
        return;
    }
    if (!mf_alloc_jemalloc(&mf_active, mf_jemalloc_error, sizeof(mf_jemalloc_error)))
        mf_active = mf_alloc_enif;
}

/* --------------------------------------------------------------- sessions */

typedef struct mf_intern mf_intern;
typedef struct mf_session mf_session;

enum { MF_ACTIVE = 0, MF_STOPPED = 1, MF_COLLECTOR_DOWN = 2 };

struct mf_slot {
    mf_shard *shard;
    mf_session *session;
    ErlNifEnv *env;         /* copies of interned terms; owner only */
    mf_intern *interns;     /* uthash by hash; owner only */
    _Atomic(mf_intern *) intern_list; /* newest first; for the reader */
    _Atomic uint64_t ninterns;
    ErlNifMutex *lock;      /* only for the spill slot */
};

/* Read on every traced send and schedule-in: `id', never written after
 * creation, and `state', written once when the session stops or its
 * collector dies; together, so both callbacks miss on one line at most.
 * The padding keeps the fields written at claim and snapshot time at least
 * a cache line away from them (a resource is only 8-byte aligned, so
 * padding, not _Alignas). */
struct mf_session {
    uint64_t id;
    _Atomic int state;
    char pad_id[MF_CACHE_LINE];
    ErlNifMonitor monitor;
    int monitored;
    mf_alloc alloc;
    mf_limit limit;
    _Atomic int taking;      /* 1 while a snapshot runs: one at a time */
    ErlNifMutex *spill_lock; /* creation of the spill slot */
    /* Births: spawn and register events since the last births_take, so that
     * a process keeps its label after it exits.  Under births_lock. */
    ErlNifMutex *births_lock;
    ErlNifEnv *births_env;   /* owned; holds `births' */
    ERL_NIF_TERM births;     /* list in births_env, newest first */
    uint64_t nbirths;        /* in `births' */
    uint64_t births_dropped; /* past MF_MAX_BIRTHS since the last take */
    _Atomic(mf_slot *) spill;
    _Atomic unsigned nslots; /* claimed, may exceed MF_MAX_SLOTS */
    _Atomic(mf_slot *) slots[MF_MAX_SLOTS];
};

static ErlNifResourceType *mf_session_rt;
static _Atomic uint64_t mf_next_session_id = 1;

/* The calling thread's slot for one session: valid while session_id
 * matches.  `shard` is the slot's shard when the slot is the thread's own,
 * NULL for the shared spill slot (which takes its lock): a send between two
 * local pids then reads nothing of the slot. */
static __thread struct {
    uint64_t session_id;
    mf_slot *slot;
    mf_shard *shard;
} mf_tls;

/* ------------------------------------------------------------- interning */

struct mf_intern {
    uint64_t hash;          /* uthash key */
    uint64_t id;            /* what pair keys hold */
    ERL_NIF_TERM term;      /* in slot->env */
    unsigned char *etf;     /* external format, owned */
    size_t etf_len;
    mf_intern *same;        /* other terms with this hash; owner only */
    mf_intern *next;        /* publish list; immutable once published */
    UT_hash_handle hh;
};

static void *slot_alloc(mf_slot *slot, size_t sz)
{
    void *p = slot->session->alloc.alloc(slot->session->alloc.ctx, sz);
    if (p)
        mf_shard_account(slot->shard, (long)sz);
    return p;
}

static void slot_free(mf_slot *slot, void *p, size_t sz, int account)
{
    if (!p)
        return;
    slot->session->alloc.free(slot->session->alloc.ctx, p, sz);
    if (account)
        mf_shard_account(slot->shard, -(long)sz);
}


static uint64_t term_hash(ERL_NIF_TERM t)
{
    return (enif_hash(ERL_NIF_INTERNAL_HASH, t, 0x9E3779B9u) << 32) ^
           enif_hash(ERL_NIF_INTERNAL_HASH, t, 0x85EBCA6Bu);
}

/* Owner thread of `slot` only.  Finds t's id; interns t when new and the
 * session may still grow.  Returns 0 when t has no id and none can be made. */
static int intern(ErlNifEnv *env, mf_slot *slot, ERL_NIF_TERM t, uint64_t *id)
{
    uint64_t h = term_hash(t);
    mf_intern *head, *e;
    HASH_FIND(hh, slot->interns, &h, sizeof(h), head);
    for (e = head; e; e = e->same) {
        if (enif_is_identical(e->term, t)) {
            *id = e->id;
            return 1;
        }
    }
    if (mf_limit_full(&slot->session->limit))
        return 0;
    ErlNifBinary bin;
    if (!enif_term_to_binary(env, t, &bin))
        return 0;
    e = slot_alloc(slot, sizeof(*e));
    unsigned char *etf = e ? slot_alloc(slot, bin.size) : NULL;
    if (!e || !etf) {
        slot_free(slot, e, sizeof(*e), 1);
        enif_release_binary(&bin);
        return 0;
    }
    memcpy(etf, bin.data, bin.size);
    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->etf = etf;
    e->etf_len = bin.size;
    enif_release_binary(&bin);
    if (!slot->env && !(slot->env = enif_alloc_env())) {
        slot_free(slot, etf, e->etf_len, 1);
        slot_free(slot, e, sizeof(*e), 1);
        return 0;
    }
    e->term = enif_make_copy(slot->env, t);
    uint64_t seq = atomic_load_explicit(&slot->ninterns, memory_order_relaxed);
    e->id = (seq << 4) | MF_ID_TAG;
    if (head) {
        e->same = head->same;
        head->same = e;
    } else {
        int oomed = 0;
        HASH_ADD(hh, slot->interns, hash, sizeof(e->hash), e);
        if (oomed) {
            slot_free(slot, etf, e->etf_len, 1);
            slot_free(slot, e, sizeof(*e), 1);
            return 0;
        }
    }
    e->next = atomic_load_explicit(&slot->intern_list, memory_order_relaxed);
    atomic_store_explicit(&slot->intern_list, e, memory_order_release);
    atomic_store_explicit(&slot->ninterns, seq + 1, memory_order_release);
    *id = e->id;
    return 1;
}

/* A local pid is an immediate whose low four bits are 0x3: the test
 * enif_get_local_pid makes, without the call.  Its word is what
 * ErlNifPid.pid would hold. */
static inline int is_local_pid(ERL_NIF_TERM t)
{
    return ((uint64_t)t & MF_PID_TAG_MASK) == MF_PID_TAG;
}

/* Owner thread only.  The key word of an endpoint (see Keys above). */
static inline int endpoint_word(ErlNifEnv *env, mf_slot *slot, ERL_NIF_TERM t, uint64_t *w)
{
    if (is_local_pid(t)) {
        *w = (uint64_t)t;
        return 1;
    }
    return intern(env, slot, t, w);
}

/* The header word of a flat map, as the VM lays maps out, when
 * extra_layout_check verified at load that get_extra reads a one-key map right;
 * 0 to always ask enif_get_map_value. */
static uint64_t mf_flatmap_header;

/* The value under `extra' in trace_send's options.  The VM passes a flat map
 * with that one key: a boxed term whose words are the header, the size, the
 * keys tuple, then the value.  Read so, it costs no call into the VM, whose
 * map code is cold in the caches of a traced workload; any other map (or a
 * layout not verified) goes to enif_get_map_value. */
static inline int get_extra(ErlNifEnv *env, ERL_NIF_TERM opts, ERL_NIF_TERM *to)
{
    if (mf_flatmap_header && ((uint64_t)opts & 0x3) == 0x2) {
        const uint64_t *map = (const uint64_t *)((uint64_t)opts - 0x2);
        if (map[0] == mf_flatmap_header && map[1] == 1) {
            const uint64_t *keys = (const uint64_t *)(map[2] - 0x2);
            if (keys[1] == (uint64_t)atom_extra) {
                *to = (ERL_NIF_TERM)map[3];
                return 1;
            }
        }
    }
    return enif_get_map_value(env, opts, atom_extra, to);
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
    mf_intern *e = atomic_load_explicit(&slot->intern_list, memory_order_acquire);
    HASH_CLEAR(hh, slot->interns);
    while (e) {
        mf_intern *next = e->next;
        slot_free(slot, e->etf, e->etf_len, 0);
        slot_free(slot, e, sizeof(*e), 0);
        e = next;
    }
    if (slot->env)
        enif_free_env(slot->env);
    if (slot->lock)
        enif_mutex_destroy(slot->lock);
    mf_shard_free(slot->shard);
    mf_session *s = slot->session;
    s->alloc.free(s->alloc.ctx, slot, sizeof(*slot));
}

/* The calling thread's slot in s, claimed on first use.  NULL: out of memory. */
static mf_slot *slot_claim(mf_session *s)
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
    mf_tls.session_id = s->id;
    mf_tls.slot = slot;
    mf_tls.shard = slot->lock ? NULL : slot->shard;
    return slot;
}

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

static int get_session(ErlNifEnv *env, ERL_NIF_TERM t, mf_session **s)
{
    return enif_get_resource(env, t, mf_session_rt, (void **)s);
}

/* ------------------------------------------------------ tracer callbacks */

static inline ERL_NIF_TERM status_answer(ErlNifEnv *env, mf_session *s)
{
    (void)env;
    return atomic_load_explicit(&s->state, memory_order_relaxed) == MF_ACTIVE ? atom_trace
                                                                             : atom_remove;
}

/* enabled(TraceTag, TracerState, Tracee).  The VM asks trace_status each
 * time it schedules a traced process in (once per message in a ping-pong),
 * so that answer is one load: the session's state, which stop/0 and the
 * monitor on the collector (session_down) set. */
static ERL_NIF_TERM nif_enabled(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!get_session(env, argv[1], &s))
        return atom_remove;
    if (argv[0] == atom_trace_status || argv[0] == atom_send ||
        argv[0] == atom_send_to_non_existing_process)
        return status_answer(env, s);
    return atom_discard;
}

/* enabled_send(send | send_to_non_existing_process, TracerState, Tracee):
 * always `trace', touching nothing.  Whether the session is still active is
 * answered by trace_status (enabled/3), which the VM asks when it schedules
 * a traced process in and when flags are read or set; stop/0 clears the
 * flags itself, and a collector restarted after a crash sweeps the flags its
 * predecessor left. */
static ERL_NIF_TERM nif_enabled_send(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)env;
    (void)argc;
    (void)argv;
    return atom_trace;
}

/* Owner thread of `slot` (or holding the spill slot's lock). */
static inline void count_send(ErlNifEnv *env, mf_slot *slot, ERL_NIF_TERM from, ERL_NIF_TERM to,
                              int dead)
{
    uint64_t f, t;
    if (endpoint_word(env, slot, from, &f) && endpoint_word(env, slot, to, &t))
        mf_shard_count(slot->shard, f, t, dead);
    else
        mf_shard_overflow(slot->shard, dead);
}

/* trace_send(Tag, TracerState, Tracee, Message, #{extra => Receiver}) */
static ERL_NIF_TERM nif_trace_send(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    ERL_NIF_TERM to;
    if (!get_extra(env, argv[4], &to))
        return atom_ok;
    /* Start loading the pair's line of counts in this thread's shard before
     * the session is checked, so that the two cache misses overlap; if the
     * shard turns out to be another session's, the prefetch was wasted. */
    mf_shard *sh = mf_tls.shard;
    if (sh)
        mf_shard_prefetch(sh, (uint64_t)argv[2], (uint64_t)to);
    if (!get_session(env, argv[1], &s))
        return atom_ok;
    int dead = argv[0] == atom_send_to_non_existing_process; /* atoms: compare words */
    mf_slot *slot;
    if (mf_tls.session_id == s->id) {
        if (sh && is_local_pid(argv[2]) && is_local_pid(to)) {
            mf_shard_count(sh, (uint64_t)argv[2], (uint64_t)to, dead);
            return atom_ok;
        }
        slot = mf_tls.slot;
    } else if (!(slot = slot_claim(s))) {
        return atom_ok;
    }
    if (!slot->lock) {
        count_send(env, slot, argv[2], to, dead);
    } else {
        enif_mutex_lock(slot->lock);
        count_send(env, slot, argv[2], to, dead);
        enif_mutex_unlock(slot->lock);
    }
    return atom_ok;
}

/* ----------------------------------------------------------------- births */

#define MF_MAX_BIRTHS 1000000 /* kept between two births_take calls */
#define MF_BIRTH_ARGS 8       /* arguments of a proc_lib start kept */

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
static ERL_NIF_TERM spawn_summary(ErlNifEnv *env, ERL_NIF_TERM mfa)
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
static void birth(ErlNifEnv *env, mf_session *s, ERL_NIF_TERM pid, ERL_NIF_TERM what)
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

/* enabled_procs(Tag, TracerState, Tracee): spawn and register only. */
static ERL_NIF_TERM nif_enabled_procs(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!get_session(env, argv[1], &s))
        return atom_remove;
    if (atomic_load_explicit(&s->state, memory_order_relaxed) != MF_ACTIVE)
        return atom_remove;
    return argv[0] == atom_spawn || argv[0] == atom_register ? atom_trace : atom_discard;
}

/* trace_procs(spawn, S, Parent, Child, #{extra => {M, F, Args}}) and
 * trace_procs(register, S, Tracee, Name, _): recorded as births. */
static ERL_NIF_TERM nif_trace_procs(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    ERL_NIF_TERM mfa;
    if (!get_session(env, argv[1], &s))
        return atom_ok;
    if (argv[0] == atom_spawn && enif_get_map_value(env, argv[4], atom_extra, &mfa))
        birth(env, s, argv[3], spawn_summary(env, mfa));
    else if (argv[0] == atom_register && enif_is_atom(env, argv[3]))
        birth(env, s, argv[2], argv[3]);
    return atom_ok;
}

/* trace/5: the fallback for tags without their own callback. */
static ERL_NIF_TERM nif_trace(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    if (argv[0] == atom_send || argv[0] == atom_send_to_non_existing_process)
        return nif_trace_send(env, argc, argv);
    if (argv[0] == atom_spawn || argv[0] == atom_register)
        return nif_trace_procs(env, argc, argv);
    return atom_ok;
}

/* births_take(Session) -> {[{Pid, Name | {M, F, Arity} |
 * {proc_lib, {M, F, ArgsSummary}}}], Dropped}: at most MF_BIRTHS_CHUNK of
 * the spawn and register events recorded and not yet taken (the newest
 * ones, oldest of them first);
 * Dropped counts those lost past the cap since the last call.  Call again
 * until fewer than MF_BIRTHS_CHUNK come back: the call that returns fewer
 * emptied the list under the lock, so it also frees the births env.  Any
 * normal scheduler; the work is bounded by the chunk (well under 1 ms). */
#define MF_BIRTHS_CHUNK 4096
static ERL_NIF_TERM nif_births_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!get_session(env, argv[0], &s))
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

/* ---------------------------------------------------------- session NIFs */

/* session_new(CollectorPid, MaxPairs) -> Session.  The caller (the
 * collector) is monitored: when it dies the session answers remove. */
static ERL_NIF_TERM nif_session_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
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
static ERL_NIF_TERM nif_session_stop(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!get_session(env, argv[0], &s))
        return enif_make_badarg(env);
    atomic_store(&s->state, MF_STOPPED);
    if (s->monitored) {
        enif_demonitor_process(env, s, &s->monitor);
        s->monitored = 0;
    }
    return atom_ok;
}

/*
 * A snapshot in progress.  It yields between steps (enif_schedule_nif), so
 * what it keeps across steps is C data only: the cursor, and the current
 * slot's interned entries by seq.  Decoded terms are cached within one step
 * only: a term of the process env not passed on as an argument does not
 * survive the yield.
 */
typedef struct {
    mf_session *session;      /* kept (enif_keep_resource) while we exist */
    unsigned idx;             /* slot being taken: slots[idx], spill when idx == end */
    unsigned end;             /* slots[] claimed when the take began */
    unsigned count;           /* end, plus 1 when there is a spill slot */
    mf_cursor cur;
    mf_take_totals tot;
    int finished;
    const mf_intern **interns; /* current slot's, by seq; enif_alloc */
    ERL_NIF_TERM *terms;       /* decoded this step; 0 = not yet */
    uint64_t n;
    /* valid during one step only */
    ErlNifEnv *env;
    mf_slot *slot;
    ERL_NIF_TERM pairs, dead;
} mf_take;

static ErlNifResourceType *mf_take_rt;

static void take_drop_index(mf_take *t)
{
    enif_free(t->interns);
    enif_free(t->terms);
    t->interns = NULL;
    t->terms = NULL;
    t->n = 0;
}

static void take_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    mf_take *t = obj;
    take_drop_index(t);
    if (t->session) {
        if (!t->finished)
            atomic_store(&t->session->taking, 0);
        enif_release_resource(t->session);
    }
}

/* Reader.  Indexes the slot's interned terms by seq; newer ones may appear
 * while we read, so index again on a miss. */
static int index_interns(mf_take *t)
{
    const mf_intern *e = atomic_load_explicit(&t->slot->intern_list, memory_order_acquire);
    uint64_t need = e ? (e->id >> 4) + 1 : 0;
    if (need <= t->n)
        return 1;
    const mf_intern **interns = enif_alloc(sizeof(*interns) * need);
    ERL_NIF_TERM *terms = enif_alloc(sizeof(*terms) * need);
    if (!interns || !terms) {
        enif_free(interns);
        enif_free(terms);
        return 0;
    }
    memset(interns, 0, sizeof(*interns) * need);
    memset(terms, 0, sizeof(*terms) * need);
    for (; e; e = e->next)
        interns[e->id >> 4] = e;
    if (t->terms)
        memcpy(terms, t->terms, sizeof(*terms) * t->n);
    take_drop_index(t);
    t->interns = interns;
    t->terms = terms;
    t->n = need;
    return 1;
}

static ERL_NIF_TERM word_term(mf_take *t, uint64_t w)
{
    if ((w & MF_PID_TAG_MASK) == MF_PID_TAG) {
        ErlNifPid pid;
        pid.pid = (ERL_NIF_TERM)w;
        return enif_make_pid(t->env, &pid);
    }
    uint64_t seq = w >> 4;
    if (seq >= t->n && !index_interns(t))
        return atom_undefined; /* out of memory */
    if (seq >= t->n || !t->interns[seq])
        return atom_undefined; /* cannot happen: interned before its pair was published */
    if (!t->terms[seq]) {
        ERL_NIF_TERM term;
        const mf_intern *e = t->interns[seq];
        if (enif_binary_to_term(t->env, e->etf, e->etf_len, &term, 0) == 0)
            term = atom_undefined;
        t->terms[seq] = term;
    }
    return t->terms[seq];
}

static ERL_NIF_TERM delta_tuple(mf_take *t, uint64_t from, uint64_t to, uint64_t delta)
{
    return enif_make_tuple3(t->env, word_term(t, from), word_term(t, to),
                            enif_make_uint64(t->env, delta));
}

static void take_pair(void *ctx, uint64_t from, uint64_t to, uint64_t delta)
{
    mf_take *t = ctx;
    t->pairs = enif_make_list_cell(t->env, delta_tuple(t, from, to, delta), t->pairs);
}

static void take_dead(void *ctx, uint64_t from, uint64_t to, uint64_t delta)
{
    mf_take *t = ctx;
    t->dead = enif_make_list_cell(t->env, delta_tuple(t, from, to, delta), t->dead);
}

#define MF_TAKE_CHUNK 512       /* entries between clock reads */
#define MF_TAKE_SLICE_US 500    /* at most this long on a scheduler per step */

/* snapshot_step(Take, PairsAcc, DeadAcc): one step of snapshot/1. */
static ERL_NIF_TERM nif_snapshot_step(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_take *t;
    if (!enif_get_resource(env, argv[0], mf_take_rt, (void **)&t) || t->finished)
        return enif_make_badarg(env);
    mf_session *s = t->session;
    t->env = env;
    t->pairs = argv[1];
    t->dead = argv[2];
    if (t->terms)
        memset(t->terms, 0, sizeof(*t->terms) * t->n); /* last step's terms are gone */
    ErlNifTime began = enif_monotonic_time(ERL_NIF_USEC);
    while (t->idx < t->count) {
        mf_slot *slot = atomic_load_explicit(t->idx < t->end ? &s->slots[t->idx] : &s->spill,
                                             memory_order_acquire);
        if (!slot) {
            /* claimed but not yet published: its counts go to the next take */
            t->idx++;
            continue;
        }
        if (t->slot != slot) {
            take_drop_index(t);
            t->slot = slot;
        }
        if (slot->lock)
            enif_mutex_lock(slot->lock);
        int done = mf_shard_take_some(slot->shard, &t->cur, take_pair, take_dead, t, &t->tot,
                                      MF_TAKE_CHUNK);
        if (slot->lock)
            enif_mutex_unlock(slot->lock);
        if (done) {
            memset(&t->cur, 0, sizeof(t->cur));
            t->idx++;
        }
        ErlNifTime now = enif_monotonic_time(ERL_NIF_USEC);
        if (now - began >= MF_TAKE_SLICE_US && t->idx < t->count) {
            int pct = (int)((now - began) / 10);
            enif_consume_timeslice(env, pct > 100 ? 100 : pct);
            ERL_NIF_TERM next[3] = {argv[0], t->pairs, t->dead};
            t->slot = NULL; /* the index stays valid, the terms do not */
            take_drop_index(t);
            return enif_schedule_nif(env, "snapshot", 0, nif_snapshot_step, 3, next);
        }
    }
    take_drop_index(t);
    t->finished = 1;
    atomic_store(&s->taking, 0);
    return enif_make_tuple4(env, t->pairs, t->dead, enif_make_uint64(env, t->tot.overflow),
                            enif_make_uint64(env, t->tot.overflow_dead));
}

/*
 * snapshot(Session) -> {Pairs, DeadLetters, Overflow, OverflowDead}.
 * What was counted since the previous snapshot:
 *   Pairs       [{Sender, Receiver, Messages}], one tuple per pair per slot
 *               (a pair whose sender ran on two threads appears twice);
 *   DeadLetters [{Sender, Receiver, Messages}], sends to non-existing
 *               processes (also in Pairs);
 *   Overflow    messages that found no entry (cap reached), in no pair;
 *   OverflowDead dead letters in no DeadLetters tuple.
 * Runs on the caller's normal scheduler in steps of at most ~0.5 ms,
 * yielding in between; the tracees keep counting meanwhile.  Raises badarg
 * for a non-session and `busy' while another snapshot of the session runs.
 */
static ERL_NIF_TERM nif_snapshot(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!get_session(env, argv[0], &s))
        return enif_make_badarg(env);
    int idle = 0;
    if (!atomic_compare_exchange_strong(&s->taking, &idle, 1))
        return enif_raise_exception(env, atom_busy);
    mf_take *t = enif_alloc_resource(mf_take_rt, sizeof(*t));
    if (!t) {
        atomic_store(&s->taking, 0);
        return enif_raise_exception(env, atom_memory);
    }
    memset(t, 0, sizeof(*t));
    enif_keep_resource(s);
    t->session = s;
    unsigned claimed = atomic_load_explicit(&s->nslots, memory_order_relaxed);
    t->end = claimed > MF_MAX_SLOTS ? MF_MAX_SLOTS : claimed;
    t->count = t->end + (claimed > MF_MAX_SLOTS ? 1 : 0);
    ERL_NIF_TERM take = enif_make_resource(env, t);
    enif_release_resource(t);
    ERL_NIF_TERM args[3] = {take, enif_make_list(env, 0), enif_make_list(env, 0)};
    return nif_snapshot_step(env, 3, args);
}

/* session_info(Session) -> #{state, shards, memory (bytes), entries, max_pairs} */
static ERL_NIF_TERM nif_session_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    if (!get_session(env, argv[0], &s))
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

/* lib_info() -> #{allocator => jemalloc | enif, jemalloc_error => binary(),
 *                 fast_extra => boolean()} */
static ERL_NIF_TERM nif_lib_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    ERL_NIF_TERM why;
    size_t len = strlen(mf_jemalloc_error);
    memcpy(enif_make_new_binary(env, len, &why), mf_jemalloc_error, len);
    ERL_NIF_TERM keys[] = {atom_allocator, atom_jemalloc_error, atom_fast_extra};
    ERL_NIF_TERM vals[] = {strcmp(mf_active.name, "jemalloc") == 0 ? atom_jemalloc : atom_enif,
                           why, mf_flatmap_header ? atom_true : atom_false};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, 3, &map);
    return map;
}

/* ----------------------------------------------------------- load/unload */

static int open_types(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    ErlNifResourceTypeInit init = {session_dtor, NULL, session_down, 0, NULL};
    ErlNifResourceFlags tried;
    mf_session_rt = enif_open_resource_type_x(env, "msgflow_session", &init, flags, &tried);
    ErlNifResourceTypeInit take_init = {take_dtor, NULL, NULL, 0, NULL};
    mf_take_rt = enif_open_resource_type_x(env, "msgflow_take", &take_init, flags, &tried);
    return mf_session_rt && mf_take_rt ? 0 : -1;
}

/* The keys rest on a local pid being the only term whose low four bits are
 * MF_PID_TAG (see endpoint_word).  Checked once here, so that a VM where
 * that no longer holds refuses the library instead of mixing up pairs. */
static int pid_layout_ok(ErlNifEnv *env)
{
    ErlNifPid self;
    if (!enif_self(env, &self))
        return 1; /* no process to check with; true of every VM so far */
    return ((uint64_t)enif_make_pid(env, &self) & MF_PID_TAG_MASK) == MF_PID_TAG &&
           ((uint64_t)enif_make_int(env, 3) & MF_PID_TAG_MASK) != MF_PID_TAG &&
           ((uint64_t)enif_make_atom(env, "ok") & MF_PID_TAG_MASK) != MF_PID_TAG &&
           ((uint64_t)enif_make_list(env, 0) & MF_PID_TAG_MASK) != MF_PID_TAG;
}

/* Whether get_extra may read a one-key map itself: a map made here the way
 * the VM makes trace_send's options must read back right, and terms that
 * are not such a map must not pass for one.  Sets mf_flatmap_header. */
static void extra_layout_check(ErlNifEnv *env)
{
    ERL_NIF_TERM key = atom_extra, val = enif_make_int(env, 42), map, other, got;
    const uint64_t *words;
    mf_flatmap_header = 0;
    if (!enif_make_map_from_arrays(env, &key, &val, 1, &map) || ((uint64_t)map & 0x3) != 0x2)
        return;
    words = (const uint64_t *)((uint64_t)map - 0x2);
    if (words[1] != 1)
        return;
    mf_flatmap_header = words[0];
    ERL_NIF_TERM keys2[2] = {atom_extra, atom_ok}, vals2[2] = {val, val};
    if (!get_extra(env, map, &got) || got != val ||
        !enif_make_map_from_arrays(env, keys2, vals2, 2, &other) ||
        ((const uint64_t *)((uint64_t)other - 0x2))[0] != mf_flatmap_header ||
        ((const uint64_t *)((uint64_t)enif_make_tuple2(env, key, val) - 0x2))[0] ==
            mf_flatmap_header)
        mf_flatmap_header = 0;
}

static int on_load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)info;
    if (!pid_layout_ok(env))
        return 1;
    make_atoms(env);
    extra_layout_check(env);
    choose_allocator();
    *priv = NULL;
    return open_types(env, ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER);
}

/* Upgrade keeps the sessions of the old code: the resource type is taken
 * over, so their destructors and monitors run the new code. */
static int on_upgrade(ErlNifEnv *env, void **priv, void **old_priv, ERL_NIF_TERM info)
{
    (void)old_priv;
    return on_load(env, priv, info);
}

static void on_unload(ErlNifEnv *env, void *priv)
{
    (void)env;
    (void)priv;
}

static ErlNifFunc nif_funcs[] = {
    {"enabled", 3, nif_enabled, 0},
    {"enabled_send", 3, nif_enabled_send, 0},
    {"trace_send", 5, nif_trace_send, 0},
    {"trace", 5, nif_trace, 0},
    {"enabled_procs", 3, nif_enabled_procs, 0},
    {"trace_procs", 5, nif_trace_procs, 0},
    {"births_take", 1, nif_births_take, 0},
    {"session_new", 2, nif_session_new, 0},
    {"session_stop", 1, nif_session_stop, 0},
    {"snapshot", 1, nif_snapshot, 0},
    {"session_info", 1, nif_session_info, 0},
    {"lib_info", 0, nif_lib_info, 0},
};

ERL_NIF_INIT(msgflow_tracer, nif_funcs, on_load, NULL, on_upgrade, on_unload)
