/*
 * mf_gen.c -- generations (see mf_gen.h for what one owns and which
 * threads touch it).
 */
#include "mf_gen.h"

#include <string.h>

mf_gen *mf_gen_new(const mf_alloc *base, mf_limit *limit, uint64_t epoch)
{
    mf_alloc heap;
    int own = mf_alloc_heap(base, &heap);
    mf_gen *g = heap.alloc(heap.ctx, sizeof(*g));
    if (!g) {
        if (own)
            mf_alloc_heap_drop(&heap);
        return NULL;
    }
    memset(g, 0, sizeof(*g));
    g->heap = heap;
    g->own_heap = own;
    g->epoch = epoch;
    g->shard = mf_shard_new(&g->heap, limit);
    if (!g->shard) {
        mf_gen_free(g);
        return NULL;
    }
    g->interns.heap = &g->heap;
    g->interns.shard = g->shard;
    g->interns.limit = limit;
    return g;
}

void mf_gen_free(mf_gen *g)
{
    if (!g)
        return;
    mf_intern_free_env(&g->interns);
    mf_alloc heap = g->heap; /* g is in it */
    if (g->own_heap && mf_alloc_heap_drop(&heap))
        return; /* shard, entries, interns and g, at once */
    mf_intern_free_all(&g->interns);
    mf_shard_free(g->shard);
    heap.free(heap.ctx, g, sizeof(*g));
}

void mf_gen_figures(const mf_gen *g, uint64_t *bytes, uint64_t *entries)
{
    *bytes += sizeof(*g) + mf_shard_bytes(g->shard);
    *entries += mf_shard_entries(g->shard);
}
