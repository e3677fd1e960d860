/*
 * mf_own.h -- msgflow's own processes: a send whose sender or receiver is
 * one of them is left out of the counts (and counted as left out), so
 * that msgflow never counts itself, from the first message on.
 *
 * What it owns: an mf_own (one per send session, inside it): a table of
 * MF_OWN_SLOTS words, each a local pid or a registered name's atom (the
 * words of immediates: no term is kept), open addressing with linear
 * probing, 0 empty and MF_OWN_GONE a removed entry; a 512-bit filter of
 * the words in it (one bit each); its lock; the count of messages left
 * out.  Made and freed by mf_own_init and mf_own_free.
 *
 * Threads: any scheduler thread reads it on every counted send
 * (mf_own_send), without a lock: the filter first (a clear bit: not own,
 * one load), then the table, where a seqlock (`seq', odd while a writer
 * changes slots) tells a reader that raced a change to read again.
 * Writers take `lock': the collector (own_add/2, own_remove/2) and the
 * spawn callback on the parent's thread, which adds the child of an own
 * process before the child runs.  A table past its fill (live and
 * removed entries) is rebuilt in place under the seqlock.
 */
#ifndef MF_OWN_H
#define MF_OWN_H

#include <erl_nif.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mf_layout.h"

#define MF_OWN_SLOTS 1024 /* a power of two; 8 KB */
#define MF_OWN_MAX 512    /* own entries at most (half the slots) */
#define MF_OWN_GONE 1ULL  /* no pid or atom word is 1 */
#define MF_OWN_FILTER_WORDS 8 /* 512 bits: 64 bytes */

typedef struct mf_own {
    _Atomic uint64_t seq;      /* odd while a writer changes `slots' */
    _Atomic uint32_t live;     /* entries in the set; 0: nothing to look up */
    uint32_t used;             /* live and removed slots; under `lock' */
    _Atomic uint64_t left_out; /* sends not counted: an end was msgflow's */
    _Atomic uint64_t refused;  /* adds past MF_OWN_MAX */
    ErlNifMutex *lock;
    /* One bit a word's hash (mf_own_filter_bit) for every word in the set,
     * 64 bytes read together: a send whose ends' bits are clear (most,
     * with a few dozen own processes) is answered without a probe of
     * `slots'.
     * Written under `lock': a bit is set before its word is placed, and
     * the bits are made again from the set on each mf_own_remove (a
     * rebuild keeps the same words, and so their bits), each word stored
     * whole, so that a word in the set never has its bit
     * clear to a reader. */
    _Atomic uint64_t filter[MF_OWN_FILTER_WORDS];
    _Atomic uint64_t slots[MF_OWN_SLOTS];
} mf_own;

/* Sets up a zeroed mf_own; 0 when its lock cannot be made.  Before any
 * other thread can reach o. */
int mf_own_init(mf_own *o);

/* Frees o's lock.  Only when no thread can reach o; safe on a zeroed one. */
void mf_own_free(mf_own *o);

/* Adds the word of a local pid or an atom (1: in the set now; 0: the set
 * is full, counted as refused).  Any thread; takes the lock. */
int mf_own_add(mf_own *o, uint64_t w);

/* Removes a word (1 when it was there).  Any thread; takes the lock. */
int mf_own_remove(mf_own *o, uint64_t w);

/* Up to max words of the set into out; their number.  Any thread; takes
 * the lock. */
unsigned mf_own_list(mf_own *o, uint64_t *out, unsigned max);

static inline unsigned mf_own_index(uint64_t w)
{
    return (unsigned)((w * 0x9E3779B97F4A7C15ULL) >> 54) & (MF_OWN_SLOTS - 1);
}

/* The bit of w in the filter (0..511): other bits of the hash than the
 * slot's. */
static inline unsigned mf_own_filter_bit(uint64_t w)
{
    return (unsigned)((w * 0x9E3779B97F4A7C15ULL) >> 45) & (MF_OWN_FILTER_WORDS * 64 - 1);
}

/* Whether w is in the set, read without the lock.  Any thread. */
static inline int mf_own_has(mf_own *o, uint64_t w)
{
    unsigned b = mf_own_filter_bit(w);
    if (!((atomic_load_explicit(&o->filter[b >> 6], memory_order_relaxed) >> (b & 63)) & 1))
        return 0; /* not in the set, nor being placed before this send */
    for (;;) {
        uint64_t s = atomic_load_explicit(&o->seq, memory_order_acquire);
        int found = 0;
        if (!(s & 1)) {
            unsigned i = mf_own_index(w);
            for (unsigned n = 0; n < MF_OWN_SLOTS; n++, i = (i + 1) & (MF_OWN_SLOTS - 1)) {
                uint64_t v = atomic_load_explicit(&o->slots[i], memory_order_relaxed);
                if (v == w) {
                    found = 1;
                    break;
                }
                if (v == 0)
                    break;
            }
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&o->seq, memory_order_relaxed) == s)
                return found;
        }
    }
}

/* Whether a send from `from' to `to' (the callback's terms) has an own
 * end; if so it is counted as left out.  One load when the set is empty;
 * else a probe for each end that is a local pid or an atom, and for the
 * owner of a local alias `to' is (ports and remote endpoints are never
 * own: a port's messages go to and come from its owner, which is).  Any thread, with the layout its callback loaded
 * (L). */
static inline int mf_own_send(mf_own *o, const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM from,
                              ERL_NIF_TERM to)
{
    if (!atomic_load_explicit(&o->live, memory_order_relaxed))
        return 0;
    const uint64_t *alias;
    if ((mf_is_local_pid(from) && mf_own_has(o, (uint64_t)from)) ||
        ((mf_is_local_pid(to) || mf_is_atom(L, env, to)) && mf_own_has(o, (uint64_t)to)) ||
        /* a reply to an own process's alias (counted for the owner) */
        ((alias = mf_pidref(L, to)) && mf_own_has(o, alias[3]))) {
        atomic_fetch_add_explicit(&o->left_out, 1, memory_order_relaxed);
        return 1;
    }
    return 0;
}

#endif
