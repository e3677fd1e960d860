/*
 * mf_alloc.h -- the allocator msgflow's tables use.
 *
 * Every byte the tables hold goes through one mf_alloc, and is freed through
 * the same one (the table records which).  In the VM that is either jemalloc
 * (mallocx/dallocx on an arena of msgflow's own, loaded with dlopen so the NIF
 * still loads when libjemalloc cannot) or enif_alloc.  The C unit tests use a
 * plain malloc one.
 *
 * Threads: an mf_alloc is immutable once set up; alloc/free may be called from
 * any thread at the same time.
 */
#ifndef MF_ALLOC_H
#define MF_ALLOC_H

#include <stddef.h>
#include <stdint.h>

typedef struct mf_alloc {
    /* Returns NULL on failure.  The caller owns the block and must give it
     * back to free() of this same mf_alloc with the same size. */
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *ptr, size_t size);
    void *ctx;         /* jemalloc: its mallocx flags (the arena) */
    const char *name; /* "jemalloc", "enif" or "malloc" (tests) */
} mf_alloc;

/* An allocator on libc malloc/free, for the C tests and tools. */
extern const mf_alloc mf_alloc_libc;

/*
 * Try to set up jemalloc with an arena of its own.  On success fills *out and
 * returns 1.  On failure returns 0 and writes why (dlerror() text or the
 * failing call) into why[0..why_len).  The library handle is never closed: the
 * arena lives as long as the process.  Call from one thread at a time (the
 * NIF calls it from load, under the code-loading lock).
 */
int mf_alloc_jemalloc(mf_alloc *out, char *why, size_t why_len);

/*
 * A heap for one table generation, on `base': with jemalloc an arena of its
 * own (so that mf_alloc_heap_drop frees every block in it at once), else
 * `base' itself.  Returns 1 when *out is a new arena, 0 when it is a copy of
 * `base' (enif, libc, or no arena could be made).  Any thread; jemalloc
 * takes its own lock to make the arena.
 */
int mf_alloc_heap(const mf_alloc *base, mf_alloc *out);

/* Frees every block of a heap mf_alloc_heap made an arena for, in one call
 * (jemalloc's arena.<i>.destroy), and makes the arena's index free for
 * reuse.  Returns 1 when done; 0 when `heap' is not such an arena or the
 * call failed: the caller must then free each block itself.  Only when no
 * thread can reach a block of the heap any more. */
int mf_alloc_heap_drop(mf_alloc *heap);

/*
 * The allocator every session of this process uses, chosen once (the NIF's
 * load, under the code-loading lock; a later call keeps the first choice):
 * jemalloc with an arena of its own unless `want' is "enif" (the value of
 * MSGFLOW_ALLOCATOR) or jemalloc cannot be set up; then `fallback' (the
 * NIF's enif_alloc one).  The answer is copied; any thread may read it
 * after the choice.
 */
void mf_alloc_choose(const char *want, const mf_alloc *fallback);

/* The chosen allocator (NULL before mf_alloc_choose).  Any thread. */
const mf_alloc *mf_alloc_chosen(void);

/* Why the chosen allocator is not jemalloc ("" when it is, or before the
 * choice): a static string.  Any thread. */
const char *mf_alloc_jemalloc_error(void);

/* "static" when jemalloc is linked in (built by tools/jemalloc.sh), else
 * "system" (the system's library through dlopen).  Any thread. */
const char *mf_alloc_jemalloc_build(void);

/* Bytes allocated in msgflow's arenas and resident for them, as jemalloc
 * counts them (it refreshes its statistics first; arenas already dropped
 * are not in them).  With the static build every arena of that jemalloc is
 * msgflow's.  1, or 0 when jemalloc is not set up.  Any thread. */
int mf_alloc_jemalloc_stats(uint64_t *allocated, uint64_t *resident);

#endif
