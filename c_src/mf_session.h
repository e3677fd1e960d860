/*
 * mf_session.h -- the session resource (the tracer state) and its slots,
 * shared by the NIF's files.
 *
 * What it owns
 * ------------
 * A session is a resource.  Its term is the tracer state given to
 * erlang:trace/3 as {tracer, msgflow_tracer, Session}, so the VM passes it to
 * every callback, and it stays alive while any trace flag or the collector
 * refers to it.  A session holds one slot per thread that has counted for it
 * (schedulers and dirty schedulers alike).  A slot holds its thread's
 * current generation (mf_gen.h: a shard and the terms it interned) and the
 * generations it retired that the snapshot has not yet freed.  A session
 * also holds its proc_events (mf_proc_events.h), its own processes (mf_own.h)
 * and, for a flow session, its watches
 * (mf_watch.h): each made and freed by its own module, the session only
 * calls them from its constructor and destructor.
 *
 * Generations
 * -----------
 * session_rotate/1 gives the session a new epoch.  A thread that counts
 * under a epoch its generation was not made under makes a new generation,
 * publishes it, and retires the old one (it never writes to it again); the
 * snapshot then takes the old one's last counts and frees it, with its heap
 * in one call when that is a jemalloc arena of its own.  So a pair that
 * stops getting messages (its process exited) is gone from the tables one
 * rotation and one snapshot later, and the cap counts the pairs of the
 * current generations.  A thread that never counts again keeps its last
 * generation until the session ends.
 *
 * Threads
 * -------
 * The tracer callbacks run on the tracee's scheduler thread; a thread claims
 * its slot with one atomic add on the session's slot counter the first time
 * it counts for the session, and is the only writer of that slot's
 * generation after.  Threads past MF_MAX_SLOTS share one spill slot under a
 * mutex (not expected: it would need more than that many scheduler threads).
 * The session NIFs (new, stop, rotate, info) and the snapshot run on the
 * collector's scheduler; freeing a retired generation and reading the
 * retired lists (info) take the session's gens_lock, which the callbacks
 * never take.
 *
 * Memory: each generation's tables and interned terms come from its heap
 * (a jemalloc arena made for it, or the allocator chosen at load,
 * mf_alloc_chosen); slots from the allocator chosen at load.
 */
#ifndef MF_SESSION_H
#define MF_SESSION_H

#include <erl_nif.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mf_alloc.h"
#include "mf_atoms.h"
#include "mf_proc_events.h"
#include "mf_calls.h"
#include "mf_size.h"
#include "mf_gen.h"
#include "mf_layout.h"
#include "mf_own.h"
#include "mf_shard.h"
#include "mf_watch.h"

#define MF_MAX_SLOTS 2048

typedef struct mf_slot mf_slot;
typedef struct mf_session mf_session;

enum { MF_ACTIVE = 0, MF_STOPPED = 1, MF_COLLECTOR_DOWN = 2 };

/* What a session counts: traced sends (the collector's), or seq_trace send
 * events by label (a flow session, mf_flow.h: the flow keeper's).  A
 * thread caches its slot of one session of each type. */
enum { MF_SESSION_SEND = 0, MF_SESSION_FLOW = 1, MF_SESSION_TYPES = 2 };

struct mf_slot {
    _Atomic(mf_gen *) gen;     /* current; written by the owner only */
    _Atomic(mf_gen *) retired; /* newest first; owner pushes, snapshot frees */
    mf_session *session;
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
    _Atomic uint64_t epoch; /* changed by session_rotate only */
    _Atomic int state;
    int type;               /* MF_SESSION_*: what it counts; never changed */
    int kinds;              /* 1: sends are counted with their kind word */
    char pad_id[MF_CACHE_LINE];
    ErlNifMonitor monitor;
    int monitored;
    mf_alloc alloc;
    mf_limit limit;
    _Atomic int taking;      /* 1 while a snapshot runs: one at a time */
    ErlNifMutex *spill_lock; /* creation of the spill slot */
    ErlNifMutex *gens_lock;  /* freeing retired generations; reading them */
    _Atomic uint64_t rotations;
    uint64_t gens_freed;     /* retired generations freed; under gens_lock */
    mf_proc_events proc_events;        /* spawn and register events not yet taken */
    mf_own own;              /* msgflow's own processes: sends to or from them not counted */
    mf_watches watches;      /* flow sessions only (lock NULL otherwise) */
    /* sampled calls' round trips (mf_calls): set once by calls_config,
     * before tracing starts; NULL when off */
    _Atomic(mf_calls *) calls;
    /* sampled messages' sizes (mf_size): set once by sizes_config,
     * before tracing starts; NULL when off */
    _Atomic(mf_sizes *) sizes;
    _Atomic(mf_slot *) spill;
    _Atomic unsigned nslots; /* claimed, may exceed MF_MAX_SLOTS */
    _Atomic(mf_slot *) slots[MF_MAX_SLOTS];
};

#define MF_HIDDEN __attribute__((visibility("hidden")))

extern ErlNifResourceType *mf_session_rt MF_HIDDEN;

/* Any thread: the session behind a tracer state, without a reference,
 * read with layout L (mf_get_resource: a callback passes the one it
 * loaded; other NIFs mf_layout_get()). */
static inline int mf_get_session(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM t,
                                 mf_session **s)
{
    return mf_get_resource(L, env, t, mf_session_rt, (void **)s);
}

/* Load and upgrade: opens (or takes over) the session resource type. */
int mf_session_open_type(ErlNifEnv *env, ErlNifResourceFlags flags);

/* The counters sessions and generations take their numbers from. */
typedef struct mf_session_numbers {
    uint64_t abi; /* MF_ABI of the library that made them: first, always */
    _Atomic uint64_t next_session_id;
    _Atomic uint64_t next_epoch;
} mf_session_numbers;

/* The counters this library numbers sessions with: its own, or from now on
 * `old' (those of the library an upgrade takes over from, which stays
 * mapped: msgflow_tracer_nif.c pins every library it loads) when `old' is
 * of this MF_ABI.  Load and upgrade only (the code-loading lock). */
mf_session_numbers *mf_session_counters(mf_session_numbers *old);

/* The calling thread's new slot in s (it becomes the slot's only writer),
 * or the shared spill slot past MF_MAX_SLOTS (its `lock' set: take it to
 * count), with a generation of the current epoch.  NULL when out of memory.
 * The session owns the slot. */
mf_slot *mf_slot_claim(mf_session *s);

/* The slot's generation for `epoch' (the session's, read by the caller):
 * when the current one was made under another, a new one is made and
 * published and the old one retired.  Owner thread only (or holding the
 * spill slot's lock).  Out of memory: the current one, which keeps
 * counting. */
mf_gen *mf_slot_renew(mf_slot *slot, uint64_t epoch);

/* Unlinks the retired generation g from slot's list and frees it; under
 * the session's gens_lock.  Only the snapshot. */
void mf_slot_free_retired(mf_slot *slot, mf_gen *g);

/* A new session of `kind' monitoring `owner' (its state becomes
 * collector_down when the owner dies), with a cap of `max' entries and of
 * `max_kinds' kind words per pair and thread (0: kinds off); *term is its
 * resource term in env.  NULL when out of memory.  Any thread. */
mf_session *mf_session_make(ErlNifEnv *env, const ErlNifPid *owner, uint64_t max,
                            uint64_t max_kinds, int type, ERL_NIF_TERM *term);

/* The session NIFs: session_new/2, session_stop/1, session_rotate/1,
 * session_info/1, proc_events_take/1, own/3. */
ERL_NIF_TERM mf_nif_session_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_session_stop(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_session_rotate(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_session_limit(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_session_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_own(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_proc_events_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_calls_config(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_calls_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_sizes_config(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_sizes_take_some(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_call_buckets(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

#endif
