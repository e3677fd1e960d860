/*
 * mf_gen.h -- a generation: one thread's tables for one session epoch.
 *
 * What it owns: its shard (the pair and dead-letter counts, mf_shard.h),
 * its interned terms (mf_intern.h), and its heap: a jemalloc arena made
 * for it when that can be had (so that freeing it is one call), else the
 * session's allocator.  The generation itself lives in its heap.  It knows
 * nothing of slots or sessions: the session makes one per thread and epoch
 * (mf_session.h) and chains the retired ones through `older'.
 *
 * Threads: one owner thread counts into it (the slot's, or whoever holds
 * the spill slot's lock); the snapshot reads its shard and interns while
 * the owner writes (each publishes with release stores); it is freed only
 * when no thread can reach it.
 */
#ifndef MF_GEN_H
#define MF_GEN_H

#include <stdint.h>

#include "mf_alloc.h"
#include "mf_intern.h"
#include "mf_shard.h"

typedef struct mf_gen mf_gen;

struct mf_gen {
    mf_shard *shard;
    mf_alloc heap;          /* what the shard, its interns and this use */
    int own_heap;           /* heap is an arena made for this generation */
    uint64_t epoch;         /* the session's epoch it was made under */
    mf_interns interns;     /* its heap, shard and the session's cap */
    mf_gen *older;          /* next in the slot's retired list */
};

/* A new, empty generation made under `epoch', its heap an arena on `base'
 * when one can be made, its entries capped by `limit' (the session's, which
 * outlives it).  NULL when out of memory.  Any thread (the one that will own
 * it). */
mf_gen *mf_gen_new(const mf_alloc *base, mf_limit *limit, uint64_t epoch);

/* Frees a generation and everything in it (its arena in one call when it
 * has one).  NULL is fine.  Only when no thread can reach it. */
void mf_gen_free(mf_gen *g);

/* Adds the generation's bytes (itself and its shard) and entries to the
 * sums.  Any thread while g cannot be freed. */
void mf_gen_figures(const mf_gen *g, uint64_t *bytes, uint64_t *entries);

#endif
