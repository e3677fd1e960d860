/*
 * mf_shard.h -- one thread's table of message counts per (sender, receiver).
 *
 * Design
 * ------
 * A shard belongs to exactly one writer thread (a scheduler or dirty
 * scheduler).  Only that thread looks pairs up, inserts them and counts, so
 * the hot path takes no lock and does no atomic read-modify-write: a count is
 * a relaxed load and a relaxed store of the same word by its only writer.
 *
 * Pairs live in two tiers.  The first is a fixed array of 4,096 cells, two
 * to a cache line, each holding a pair's key and count: a pair's cells are
 * the two of one line, so counting a pair found there touches that one line
 * of the shard.  A pair whose line is full goes to the second tier: an
 * entry, found through an open-addressing index of entry pointers behind
 * a direct-mapped front cache.
 * Cells are never freed or reused while the shard lives, so a pair found in
 * neither tier, with a free cell on its line, is new.
 *
 * One reader at a time (the snapshot, on another thread) walks the shard
 * without stopping the writer.  It scans the cells: a cell is published by
 * the release store of its first count, after its key, so the reader's
 * acquire load of a non-zero count comes with the key.  It never touches the
 * index, which the writer may resize at any moment; it walks a singly
 * linked list of entries instead.  The writer fills an entry completely,
 * then publishes it at the head of that list with a release store; entries
 * are never unlinked or freed while the shard lives, so the reader's acquire
 * load of the head gives it a list it can follow to the end.  Counts only
 * grow.  The reader keeps, per cell and entry, the count it last reported
 * (`seen`) and reports `count - seen`: an increment is in exactly one delta,
 * never lost, never twice.
 *
 * Keys are three 64-bit words chosen by the caller: sender, receiver (an
 * ErlNifPid's word or an id the NIF gave an interned term, never an
 * ERL_NIF_TERM of a call's env) and the message's kind word (mf_kind.h; 0
 * with kinds off).  A pair has at most `max_kinds' kind words of its own in
 * a shard; a send of another kind is counted under the word the caller
 * names for it (that kind's `other'), so a pair's total stays exact.  Sends
 * to a non-existing process are counted in the pair table like any send,
 * and once more, without their kind, in a dead-letter table.
 *
 * A shard is one generation of a thread's tables: the session retires it
 * whole (the owner stops writing, the reader takes what is left, then it is
 * freed), which is how pairs of processes long gone leave the tables.
 *
 * A limit shared by the shards of one session caps the number of entries.
 * A send that would need an entry past the cap is added to the shard's
 * overflow tally instead, so the sum of all counts stays exact.
 *
 * Memory: 192 KiB per shard for the cells, the reader's copy of their
 * counts and the front cache; with kinds on, 11 to 21 bytes per pair for
 * its count of kind words (a word a slot, the table at most three quarters
 * full); and for each key past
 * the cells one mf_entry (48 bytes on LP64) taken from
 * cache-line aligned slabs of 64 the shard owns (so no other thread's data
 * shares a line with a count), plus its slot in the index (8 bytes a slot,
 * the index at most three quarters full: 11 to 21 bytes); all of it from
 * the shard's mf_alloc.  The shard itself is cache-line aligned.
 */
#ifndef MF_SHARD_H
#define MF_SHARD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mf_alloc.h"

#define MF_CACHE_LINE 64

/* Shared by all shards of a session.  `used` is touched only when an entry
 * is created (an atomic add), never when a message is counted. */
/* The most kind words a pair may have in a shard (the max_kinds option's
 * bound, 1..1000): the table of kind words per pair counts them in 10
 * bits. */
#define MF_MAX_KINDS 1000

typedef struct mf_limit {
    _Atomic uint64_t used; /* entries created, all shards */
    _Atomic uint64_t max;  /* entries allowed, all shards: set after the session
                            * is made by session_limit/2 only (the collector's
                            * thread; read relaxed when an entry is created) */
    uint64_t max_kinds;    /* kind words a pair may have in one shard */
} mf_limit;

typedef struct mf_shard mf_shard;

enum { MF_COUNTED = 0, MF_OVERFLOW = 1 };

/* Creates an empty shard.  Any thread.  Returns NULL when out of memory.
 * The shard keeps pointers to `alloc` and `limit`: both must outlive it. */
mf_shard *mf_shard_new(const mf_alloc *alloc, mf_limit *limit);

/* Frees the shard and all its entries through its mf_alloc, block by
 * block (not needed when the whole heap is dropped at once).  Only when no
 * writer or reader can reach the shard any more. */
void mf_shard_free(mf_shard *sh);

/* Counts one message from `from` to `to` of kind word `kind' (0: none);
 * `other' is the word it is counted under when the pair has max_kinds
 * other words in this shard (0 with kinds off); `dead` != 0 for a send to
 * a non-existing process.  Owner thread only.  Returns MF_COUNTED, or
 * MF_OVERFLOW when the key had no entry and none could be made (cap reached
 * or out of memory): the message then went to the overflow tally. */
int mf_shard_count(mf_shard *sh, uint64_t from, uint64_t to, uint64_t kind, uint64_t other,
                   int dead);

/* The cells (the first tier), as mf_shard_line and mf_shard_count_hit
 * read them: the shard's first member is its array of MF_CELLS cells. */
#define MF_CELL_BITS 12  /* 4,096 cells per shard */
#define MF_CELL_BYTES 32 /* key, count: two cells to a cache line */
#define MF_CELLS (1u << MF_CELL_BITS) /* 128 KiB */
typedef struct mf_cell {
    uint64_t key[3];        /* from, to, kind word; written before publication */
    _Atomic uint64_t count; /* messages; 0 while free; written by the owner only */
} mf_cell;
#define MF_CELLS_PER_LINE (MF_CACHE_LINE / sizeof(mf_cell))
_Static_assert(sizeof(mf_cell) == MF_CELL_BYTES, "two cells to a line");

/* The receiver word mixed with the kind word, for the hashes. */
static inline uint64_t mf_to_kind(uint64_t to, uint64_t kind)
{
    return to ^ kind * 0xD6E8FEB86659FD93ULL;
}

/* The first of a key's two cells, on one line: the high bits of a
 * two-multiply mix of (from, mf_to_kind(to, kind)), even. */
static inline unsigned mf_cell_first(uint64_t from, uint64_t to)
{
    return (unsigned)((((from ^ 0x632BE59BD9B4E019ULL) * 0x9E3779B97F4A7C15ULL) ^ to) *
                          0xBF58476D1CE4E5B9ULL >>
                      (64 - MF_CELL_BITS)) &
           ~(unsigned)(MF_CACHE_LINE / MF_CELL_BYTES - 1);
}

/* The line of cells where key (from, to, kind) is counted in `sh': its
 * first cell.  Computes an address and reads nothing, so `sh' may even be
 * stale or freed: the caller may find the line (and prefetch it) before it
 * has checked that the shard is still its own, and use it once it has.
 * Any thread. */
static inline mf_cell *mf_shard_line(mf_shard *sh, uint64_t from, uint64_t to, uint64_t kind)
{
    return (mf_cell *)sh + mf_cell_first(from, mf_to_kind(to, kind));
}

/* Starts loading a line of cells (mf_shard_line), so that the caller's
 * other work overlaps the cache miss; mf_shard_count_hit then finds it
 * there.  A prefetch never faults.  Any thread. */
static inline void mf_shard_prefetch(const mf_cell *line)
{
    __builtin_prefetch(line, 1);
}

/* One message of key (from, to, kind) counted in place when the key sits
 * in its line of cells, `line' = mf_shard_line(sh, from, to, kind) of the
 * caller's own shard (the common case: a pair seen before, with room on
 * its line): 1.  0 when it is not there, and nothing was counted: the
 * caller then counts it with mf_shard_count.  Inline, so that a traced
 * send whose pair is in the cells makes no call into the shard's code and
 * finds its line once.  Owner thread only. */
static inline int mf_shard_count_hit(mf_cell *line, uint64_t from, uint64_t to, uint64_t kind)
{
    for (unsigned i = 0; i < MF_CELLS_PER_LINE; i++) {
        mf_cell *c = &line[i];
        uint64_t n = atomic_load_explicit(&c->count, memory_order_relaxed);
        if (n == 0)
            return 0;
        if (c->key[0] == from && c->key[1] == to && c->key[2] == kind) {
            /* single writer: a plain load and store, no locked instruction */
            atomic_store_explicit(&c->count, n + 1, memory_order_relaxed);
            return 1;
        }
    }
    return 0;
}

/* Adds one message to the overflow tally without looking anything up.
 * Owner thread only. */
void mf_shard_overflow(mf_shard *sh, int dead);

/* A message of (from, to) that mf_shard_count put in the overflow tally
 * (MF_OVERFLOW), added to the shard's summary of the busiest such pairs
 * (mf_topk.h: part of the shard, 36 KiB, so that its bytes count from the
 * start).  The caller passes only words that stay valid after the shard's
 * interned terms are gone (a local pid's, or its reply word): the
 * snapshot reads the summary apart from the entries.  Owner thread only. */
void mf_shard_overflow_pair(mf_shard *sh, uint64_t from, uint64_t to);

/* That summary.  Lives as long as the shard; the snapshot takes it
 * (mf_topk_take).  Any thread. */
struct mf_topk;
struct mf_topk *mf_shard_topk(mf_shard *sh);

/* 1 when the session's cap on entries is reached.  Any thread. */
int mf_limit_full(const mf_limit *limit);

/* Called by mf_shard_take_some once per key whose count grew since the last
 * take, with that growth (messages). */
typedef void (*mf_delta_fn)(void *ctx, uint64_t from, uint64_t to, uint64_t kind,
                            uint64_t delta);

typedef struct mf_take_totals {
    uint64_t overflow;      /* messages that found no entry, since last take */
    uint64_t overflow_dead; /* of those, sends to non-existing processes */
} mf_take_totals;

/* What a take reports, and to whom; any may be NULL. */
typedef struct mf_take_fns {
    mf_delta_fn pairs; /* each pair whose count grew */
    mf_delta_fn dead;  /* each dead-letter pair whose count grew */
} mf_take_fns;

/* Where a take stopped.  Zero it before the first mf_shard_take_some. */
typedef struct mf_cursor {
    int phase;     /* 0 cells, 1 pairs, 2 dead, 3 totals, 4 done */
    void *next;    /* next entry to visit in the current list */
    unsigned cell; /* next cell to visit in phase 0 */
} mf_cursor;

/*
 * Reports what was counted since the previous take, in steps, to `fns'
 * (see mf_take_fns), and the overflow tallies added to *totals.  Visits at most `budget'
 * entries from *cur on and returns 1 once the shard is done (totals are
 * added then), 0 when it stopped early.  Safe while the owner keeps
 * counting; at most one take per shard at a time (the caller serialises).  The caller may yield between steps; entries it has
 * not reached yet keep counting and are reported with their growth so far.
 * Entries published after the take began are left for the next take.
 */
int mf_shard_take_some(mf_shard *sh, mf_cursor *cur, const mf_take_fns *fns, void *ctx,
                       mf_take_totals *totals, unsigned budget);

/* Bytes held by the shard (entries, buckets, the shard itself).  Any thread;
 * the figure may lag the owner by an insert. */
size_t mf_shard_bytes(const mf_shard *sh);

/* Entries in the shard (pair and dead-letter), each of which took one from
 * the session's limit.  Any thread, may lag. */
uint64_t mf_shard_entries(const mf_shard *sh);

/* Adds `delta` to the bytes the shard reports, for memory the caller keeps on
 * the shard's behalf (the NIF's interned terms).  Owner thread only. */
void mf_shard_account(mf_shard *sh, long delta);

#endif
