/*
 * mf_topk.h -- the busiest of the pairs that found no entry: a Space-Saving
 * summary (Metwally, Agrawal and El Abbadi, 2005) of a shard's overflowed
 * sends, so that past the entry cap (max_pairs, max_memory) the heaviest
 * pairs are still found, with a bound on their error.
 *
 * The summary holds MF_TOPK_SLOTS pairs, each with a count and an error:
 * the pair's true messages since the summary was last taken are between
 * `count - err' and `count', and every pair with more than `min' messages
 * (the least count, once the slots are all taken) is in it.  A pair not in
 * it takes the slot of a least one, whose count it inherits as its error.
 *
 * What it owns: nothing but its own bytes (36 KiB), which the caller
 * holds (a shard holds one: mf_shard.c); mf_topk_init makes them a
 * summary.
 *
 * Threads: mf_topk_add on the shard's owner thread only (a send that
 * found no entry), mf_topk_take by the one snapshot taking the shard; both
 * under the summary's spin lock, held for one add or one copy of the
 * slots (never across a call into the VM or an allocation).
 */
#ifndef MF_TOPK_H
#define MF_TOPK_H

#include <stdatomic.h>
#include <stdint.h>

#define MF_TOPK_SLOTS 1024  /* pairs a summary holds */
#define MF_TOPK_INDEX 2048  /* its index: a power of two, at most half full */

typedef struct mf_topk_slot {
    uint64_t from, to; /* the pair's words, as the shard keys them */
    uint64_t count;    /* messages, an upper bound */
    uint64_t err;      /* count - err is a lower bound */
} mf_topk_slot;

typedef struct mf_topk {
    atomic_flag lock;
    unsigned used;   /* slots taken */
    uint64_t min;    /* least count of a slot, once all are taken */
    unsigned at_min; /* slots whose count is min */
    unsigned cursor; /* where the search for a slot at min goes on */
    uint16_t index[MF_TOPK_INDEX]; /* slot numbers, MF_TOPK_FREE when free */
    mf_topk_slot slots[MF_TOPK_SLOTS];
} mf_topk;

/* The memory at t made an empty summary.  Before any other thread sees it. */
void mf_topk_init(mf_topk *t);

/* One message of (from, to).  Amortised O(1): a scan of the slots happens
 * only when the least count rises, and it rises at most once per
 * MF_TOPK_SLOTS messages.  The shard's owner thread only. */
void mf_topk_add(mf_topk *t, uint64_t from, uint64_t to);

/* Copies the summary's slots to out (room for MF_TOPK_SLOTS), empties it,
 * and returns how many were copied; *min is the least count when every
 * slot was taken (a pair left out had at most that many messages), else
 * 0.  The snapshot only. */
unsigned mf_topk_take(mf_topk *t, mf_topk_slot *out, uint64_t *min);

/* mf_topk_add of n messages at once (the aggregate's pairs that found no
 * row: mf_agg.h).  Its owner only. */
void mf_topk_add_n(mf_topk *t, uint64_t from, uint64_t to, uint64_t n);

#endif
