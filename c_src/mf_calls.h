/*
 * mf_calls.h -- sampled round trips of calls: a gen:call's request
 * ({'$gen_call', {Caller, Tag}, Request}, Tag an alias or, for a local call
 * with timeout infinity, a plain monitor reference) noted when it is sent,
 * and the time to the reply (sent to the alias, or {Mref, Reply} sent to
 * the caller's pid), added to a histogram of the
 * call's edge (caller, server, the request's kind word).
 *
 * What it owns: one session's calls (mf_calls): the in-flight slots (a
 * call each, keyed by its tag's id: mf_tag_id), the bitmap of slots in use, and the
 * edges with their histograms, every block from the session's mf_alloc.
 * Made by mf_calls_new (the collector, before any send is traced), freed by
 * mf_calls_free (the session's destructor, when no thread can reach it).
 *
 * Threads: a request is noted on the caller's scheduler thread, its reply
 * found on the server's (usually another).  A slot changes hands by a
 * compare-and-swap of its key, so no thread waits for another: a request
 * that finds its slot being read gives up its sample (`busy').  The edges
 * are under a spin lock held for one lookup and a few adds (a reply found,
 * or a call given up as unanswered); the collector takes them all by
 * swapping the table under that lock (mf_calls_take) and, in the same
 * call, sweeps the slots older than the timeout.  Nothing allocates on a
 * send but the first round trip of an edge in a take interval.
 */
#ifndef MF_CALLS_H
#define MF_CALLS_H

#include <stdatomic.h>
#include <stdint.h>

#include "mf_alloc.h"

#define MF_CALLS_SLOTS 4096 /* calls in flight at most (a power of two) */
/* Histogram: two buckets per power of two of nanoseconds, from 2^8 ns
 * (256 ns; bucket 0 is everything below) to 2^40 ns (18 minutes; the last
 * bucket is everything above): a bucket's upper bound is at most 1.5 times
 * its lower one. */
#define MF_CALL_MIN_EXP 8
#define MF_CALL_MAX_EXP 40
#define MF_CALL_BUCKETS (2 * (MF_CALL_MAX_EXP - MF_CALL_MIN_EXP) + 2)

typedef struct mf_call_edge mf_call_edge;
struct mf_call_edge {
    uint64_t caller, server, kind; /* the key: words of immediates (pids, atoms) */
    uint64_t sampled;              /* round trips in the histogram */
    uint64_t unanswered;           /* sampled calls with no reply in time */
    uint32_t buckets[MF_CALL_BUCKETS];
    mf_call_edge *next; /* the table's chain, then the taken list */
};

typedef struct mf_call_slot {
    _Atomic uint64_t key; /* MF_CALL_FREE, MF_CALL_BUSY, or the tag's id | 2 */
    _Atomic uint64_t caller, server, kind, t0;
} mf_call_slot;

#define MF_CALL_FREE 0ULL
#define MF_CALL_BUSY 1ULL
#define MF_CALL_EDGE_BITS 12 /* the edges' hash table: 4,096 chains */

typedef struct mf_calls {
    uint32_t sample;     /* 1 in `sample' calls per thread (0: off); set at creation */
    uint64_t timeout_ns; /* a call with no reply after this is unanswered */
    mf_alloc alloc;
    _Atomic uint64_t busy;      /* samples given up: their slot was being read */
    _Atomic uint64_t displaced; /* calls given up as unanswered because their slot was needed */
    atomic_flag lock;           /* the edges */
    mf_call_edge **edges;       /* 2^MF_CALL_EDGE_BITS chains; under `lock' */
    _Atomic uint64_t used[MF_CALLS_SLOTS / 64];
    mf_call_slot slots[MF_CALLS_SLOTS];
} mf_calls;

/* A new mf_calls sampling 1 in `sample' calls, or NULL (out of memory).
 * Any thread; the caller publishes it before any send is noted. */
mf_calls *mf_calls_new(const mf_alloc *alloc, uint32_t sample, uint64_t timeout_ns);

/* Frees c, its edges and any taken list not yet freed.  Only when no
 * thread can reach c. */
void mf_calls_free(mf_calls *c);

/* The slot of a call whose tag has id `id'. */
static inline unsigned mf_calls_index(uint64_t id)
{
    return (unsigned)((id * 0x9E3779B97F4A7C15ULL) >> (64 - 12)) & (MF_CALLS_SLOTS - 1);
}

/* Whether a reply tagged with id `id' may be a sampled call's: one
 * relaxed load of the bitmap, so that the many replies that are not cost
 * nothing more.  Any thread. */
static inline int mf_calls_maybe(mf_calls *c, uint64_t id)
{
    unsigned i = mf_calls_index(id);
    return (atomic_load_explicit(&c->used[i / 64], memory_order_relaxed) >> (i % 64)) & 1;
}

/* Notes a sampled call's request: its tag's id, caller, server and kind
 * words, and the time it was sent (ns, monotonic).  A call still in the
 * slot is given up as unanswered.  Any thread (the caller's). */
void mf_calls_request(mf_calls *c, uint64_t id, uint64_t caller, uint64_t server,
                      uint64_t kind, uint64_t now_ns);

/* A reply tagged with id `id', sent at now_ns: when its call was
 * noted, the round trip goes to the edge's histogram.  Any thread. */
void mf_calls_reply(mf_calls *c, uint64_t id, uint64_t now_ns);

/* Gives up the calls noted before now_ns - timeout as unanswered, then
 * takes every edge: a list (through `next') the caller owns and frees with
 * mf_calls_free_edges.  The collector; one caller at a time. */
mf_call_edge *mf_calls_take(mf_calls *c, uint64_t now_ns);

/* Frees a list mf_calls_take returned. */
void mf_calls_free_edges(mf_calls *c, mf_call_edge *list);

/* The bucket of a round trip of `ns' nanoseconds, and a bucket's bounds
 * (lower included, upper excluded; the last bucket's upper is UINT64_MAX). */
unsigned mf_call_bucket(uint64_t ns);
uint64_t mf_call_bucket_low(unsigned b);
uint64_t mf_call_bucket_high(unsigned b);

#endif
