/*
 * mf_size.h -- how big sampled messages are: one in `sample' sends per
 * scheduler thread is measured (mf_size_measure: its heap words, what a
 * send copies, and the bytes of the off-heap binaries it references), and
 * added to its edge (sender, receiver).
 *
 * What it owns: one session's sized edges (mf_sizes): a hash table of
 * edges under a spin lock, every block from the session's mf_alloc.  Made
 * by mf_sizes_new (sizes_config, before any send is traced), freed by
 * mf_sizes_free (the session's destructor, when no thread can reach it).
 *
 * Threads: mf_size_measure and mf_sizes_add on any scheduler thread (the
 * sender's), the add under the spin lock held for one lookup and a few
 * adds; mf_sizes_take_some by one caller at a time, the collector (the
 * chains emptied under the lock, 64 at a time).  msgflow allocates
 * nothing on a send but the first sample of an edge in a take interval
 * (the VM may, for a hash map's iterator or an unaligned binary:
 * mf_size_measure).
 */
#ifndef MF_SIZE_H
#define MF_SIZE_H

#include <stdatomic.h>
#include <stdint.h>

#include "erl_nif.h"
#include "mf_alloc.h"
#include "mf_layout.h"

/* Terms one measure visits at most (each tuple, list cell, map, binary,
 * and each element, immediates included), past which the message is
 * marked large and its figures are a lower bound: walking 1,024 terms
 * takes a few µs, about what the VM takes to copy a message of that many
 * terms, so that a sample costs at most about one more send. */
#define MF_SIZE_BUDGET 1024
#define MF_SIZE_EDGE_BITS 12 /* the edges' hash table: 4,096 chains */

/* Heap words of the boxed terms the walk cannot read inside, as
 * erts_debug:flat_size/1 gives them on this VM (sizes_config): each a
 * lower bound where a term of the type may be bigger (a fun's free
 * variables, a remote reference). */
typedef struct mf_size_words {
    uint32_t flt;      /* a float */
    uint32_t ref;      /* a local reference */
    uint32_t fun;      /* a fun with no free variables */
    uint32_t ext_pid;  /* a pid of another node */
    uint32_t heap_bin; /* a binary of 0 bytes on the heap (plus a word per 8 bytes) */
    uint32_t refc_bin; /* a binary off the heap (over 64 bytes) */
    uint32_t map;      /* a map of N keys: map + N x map_key, its keys and values aside */
    uint32_t map_key;
    uint32_t big;      /* an integer of 64 bits that is not small */
    uint32_t map0;     /* #{} */
    uint32_t tuple0;   /* {} */
} mf_size_words;

/* What one measure found: heap words, the bytes of off-heap binaries, and
 * whether the budget ran out (then both are lower bounds). */
typedef struct mf_size {
    uint64_t words, bin_bytes;
    int large;
} mf_size;

typedef struct mf_size_edge mf_size_edge;
struct mf_size_edge {
    uint64_t sender, receiver; /* the key: words of immediates (pids, ports, atoms) */
    uint64_t sampled, words, words_max, bin_bytes, large;
    mf_size_edge *next; /* the table's chain, then the taken list */
};

typedef struct mf_sizes {
    uint32_t sample; /* 1 in `sample' sends per thread; set at creation */
    mf_size_words w;
    mf_alloc alloc;
    atomic_flag lock;       /* the edges */
    mf_size_edge **edges;   /* 2^MF_SIZE_EDGE_BITS chains; under `lock' */
    /* a take's edges not yet given out (mf_sizes_take_some), the next
     * chain it empties (0 between takes), and 1 while a caller gives some
     * out: one at a time */
    mf_size_edge *pending;
    unsigned cursor;
    _Atomic int taking;
} mf_sizes;

/* A new mf_sizes measuring 1 in `sample' sends with the words of w, or
 * NULL (out of memory).  Any thread; the caller publishes it before any
 * send is measured. */
mf_sizes *mf_sizes_new(const mf_alloc *alloc, uint32_t sample, const mf_size_words *w);

/* Frees z and its edges.  Only when no thread can reach z. */
void mf_sizes_free(mf_sizes *z);

/* Measures msg (read in place, never copied; the walk's stack is an
 * array of MF_SIZE_BUDGET terms on the C stack: 8 KiB; only the VM
 * allocates, for a hash map's iterator or a copy of an unaligned
 * sub-binary, in the callback's env), with the layout the caller's
 * callback loaded.  Any thread. */
mf_size mf_size_measure(const mf_layout_t *L, ErlNifEnv *env, const mf_sizes *z, ERL_NIF_TERM msg);

/* Adds one measure to edge (sender, receiver), made when new.  Any
 * thread. */
void mf_sizes_add(mf_sizes *z, uint64_t sender, uint64_t receiver, const mf_size *m);

/* Frees a list mf_sizes_take_some returned. */
void mf_sizes_free_edges(mf_sizes *z, mf_size_edge *list);

/* Up to `max' edges of a take: those the last call left, then the chains
 * from where it stopped, emptied 64 at a time (an edge added meanwhile to
 * a chain not yet emptied is in this take, to one emptied already in the
 * next): a list the caller owns and frees with mf_sizes_free_edges, NULL
 * when none are left; *more set to 1 while edges or chains are left for
 * the next call.  NULL with *busy set when another caller is in it.  The
 * collector; a call walks the edges it gives out and 64 chains more.
 * `max' 0 gives NULL and moves nothing (*more and *busy 0). */
mf_size_edge *mf_sizes_take_some(mf_sizes *z, unsigned max, int *more, int *busy);

#endif
