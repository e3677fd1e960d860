/*
 * mf_size.c -- how big sampled messages are (see mf_size.h).
 *
 * What it owns: each mf_sizes it makes, with its edges; every block comes
 * from and goes back to the mf_alloc it was made with.
 *
 * Threads: mf_size_measure and mf_sizes_add on any scheduler thread at
 * once (the edges under a spin lock held for a lookup and a few adds);
 * mf_sizes_take_some and mf_sizes_free_edges by the collector (and
 * tests and benches, through sizes_take_some: a second caller of
 * mf_sizes_take_some at once is told busy);
 * mf_sizes_new and mf_sizes_free by whoever owns the session.
 */
#include "mf_size.h"

#include <string.h>

#include "mf_spin.h"

#define EDGE_CHAINS (1u << MF_SIZE_EDGE_BITS)
_Static_assert(EDGE_CHAINS % 64 == 0, "chains are emptied 64 at a time");
/* a small integer's bounds on a 64-bit VM (60 bits with its sign) */
#define SMALL_MAX ((int64_t)((1ULL << 59) - 1))
#define SMALL_MIN (-(int64_t)(1ULL << 59))

mf_sizes *mf_sizes_new(const mf_alloc *alloc, uint32_t sample, const mf_size_words *w)
{
    mf_sizes *z = alloc->alloc(alloc->ctx, sizeof(*z));
    if (!z)
        return NULL;
    memset(z, 0, sizeof(*z));
    z->alloc = *alloc;
    z->sample = sample;
    z->w = *w;
    atomic_flag_clear(&z->lock);
    z->edges = alloc->alloc(alloc->ctx, EDGE_CHAINS * sizeof(mf_size_edge *));
    if (!z->edges) {
        alloc->free(alloc->ctx, z, sizeof(*z));
        return NULL;
    }
    memset(z->edges, 0, EDGE_CHAINS * sizeof(mf_size_edge *));
    return z;
}

void mf_sizes_free_edges(mf_sizes *z, mf_size_edge *list)
{
    while (list) {
        mf_size_edge *next = list->next;
        z->alloc.free(z->alloc.ctx, list, sizeof(*list));
        list = next;
    }
}

void mf_sizes_free(mf_sizes *z)
{
    if (!z)
        return;
    for (unsigned i = 0; i < EDGE_CHAINS; i++)
        mf_sizes_free_edges(z, z->edges[i]);
    mf_sizes_free_edges(z, z->pending);
    z->alloc.free(z->alloc.ctx, z->edges, EDGE_CHAINS * sizeof(mf_size_edge *));
    z->alloc.free(z->alloc.ctx, z, sizeof(*z));
}

/* The heap words of a term the walk does not go inside (no tuple, list
 * cell, map, atom or local pid), and the bytes of the binary it is when
 * that binary is off the heap. */
static uint64_t leaf_words(ErlNifEnv *env, const mf_sizes *z, ERL_NIF_TERM t, uint64_t *bin_bytes)
{
    ErlNifBinary b;
    ErlNifSInt64 i;
    ErlNifUInt64 u;
    double d;
    if (enif_is_binary(env, t)) {
        if (!enif_inspect_binary(env, t, &b))
            return z->w.heap_bin;
        if (b.size <= 64)
            return z->w.heap_bin + (b.size + 7) / 8;
        *bin_bytes += b.size;
        return z->w.refc_bin;
    }
    if (enif_is_number(env, t)) {
        if (enif_get_double(env, t, &d))
            return z->w.flt;
        if (enif_get_int64(env, t, &i))
            return i >= SMALL_MIN && i <= SMALL_MAX ? 0 : z->w.big;
        if (enif_get_uint64(env, t, &u))
            return z->w.big;
        return z->w.big + 1; /* a bignum of more digits: a lower bound */
    }
    if (enif_is_pid(env, t))
        return z->w.ext_pid; /* a local pid is no leaf: told before */
    if (enif_is_ref(env, t))
        return z->w.ref;
    if (enif_is_fun(env, t))
        return z->w.fun;
    if (enif_is_port(env, t))
        return 0;
    return 1; /* a bitstring that is no binary, a native record: a lower bound */
}

mf_size mf_size_measure(const mf_layout_t *L, ErlNifEnv *env, const mf_sizes *z, ERL_NIF_TERM msg)
{
    mf_size r = {0, 0, 0};
    ERL_NIF_TERM stack[MF_SIZE_BUDGET];
    unsigned sp = 0, steps = 0;
    stack[sp++] = msg;
    while (sp) {
        ERL_NIF_TERM t = stack[--sp];
        for (;;) {
            /* each term pushed takes a step when it is popped: a push that
             * cannot be taken would run out the budget anyway */
            if (++steps + sp > MF_SIZE_BUDGET)
                goto large;
            const ERL_NIF_TERM *e;
            ERL_NIF_TERM head, tail;
            int n;
            size_t nk;
            if (mf_is_local_pid(t) || mf_is_atom(L, env, t))
                break;
            if (mf_get_tuple(L, env, t, &n, &e)) {
                r.words += n ? 1 + (uint64_t)n : z->w.tuple0;
                if (steps + sp + (unsigned)n > MF_SIZE_BUDGET)
                    goto large;
                while (n-- > 0)
                    stack[sp++] = e[n];
                break;
            }
            if (enif_get_list_cell(env, t, &head, &tail)) {
                r.words += 2;
                if (steps + sp + 1 > MF_SIZE_BUDGET)
                    goto large;
                stack[sp++] = head;
                t = tail; /* the tail in this loop: a long list takes no stack */
                continue;
            }
            if (enif_is_empty_list(env, t))
                break;
            if (enif_get_map_size(env, t, &nk)) {
                r.words += nk ? z->w.map + z->w.map_key * (uint64_t)nk : z->w.map0;
                if (steps + sp + 2 * nk > MF_SIZE_BUDGET)
                    goto large;
                ErlNifMapIterator it;
                if (nk && enif_map_iterator_create(env, t, &it, ERL_NIF_MAP_ITERATOR_FIRST)) {
                    ERL_NIF_TERM k, v;
                    while (enif_map_iterator_get_pair(env, &it, &k, &v)) {
                        stack[sp++] = k;
                        stack[sp++] = v;
                        enif_map_iterator_next(env, &it);
                    }
                    enif_map_iterator_destroy(env, &it);
                }
                break;
            }
            r.words += leaf_words(env, z, t, &r.bin_bytes);
            break;
        }
    }
    return r;
large:
    r.large = 1;
    return r;
}


static unsigned chain(uint64_t sender, uint64_t receiver)
{
    uint64_t h = (sender * 0x9E3779B97F4A7C15ULL) ^ (receiver * 0xC2B2AE3D27D4EB4FULL);
    return (unsigned)(h >> (64 - MF_SIZE_EDGE_BITS));
}

static void add_to(mf_size_edge *e, const mf_size *m)
{
    e->sampled++;
    e->words += m->words;
    if (m->words > e->words_max)
        e->words_max = m->words;
    e->bin_bytes += m->bin_bytes;
    e->large += (uint64_t)m->large;
}

void mf_sizes_add(mf_sizes *z, uint64_t sender, uint64_t receiver, const mf_size *m)
{
    unsigned ch = chain(sender, receiver);
    mf_size_edge *made = NULL;
    for (;;) {
        mf_spin_lock(&z->lock);
        mf_size_edge *e = z->edges[ch];
        while (e && !(e->sender == sender && e->receiver == receiver))
            e = e->next;
        if (!e && made) {
            e = made;
            made = NULL;
            e->next = z->edges[ch];
            z->edges[ch] = e;
        }
        if (e) {
            add_to(e, m);
            mf_spin_unlock(&z->lock);
            if (made)
                z->alloc.free(z->alloc.ctx, made, sizeof(*made));
            return;
        }
        mf_spin_unlock(&z->lock);
        /* allocated outside the lock; a copy another thread made
         * meanwhile wins */
        made = z->alloc.alloc(z->alloc.ctx, sizeof(*made));
        if (!made)
            return; /* out of memory: this sample is lost */
        memset(made, 0, sizeof(*made));
        made->sender = sender;
        made->receiver = receiver;
    }
}

mf_size_edge *mf_sizes_take_some(mf_sizes *z, unsigned max, int *more, int *busy)
{
    int idle = 0;
    *more = 0;
    *busy = 0;
    if (max == 0)
        return NULL; /* nothing asked: nothing moves */
    *busy = !atomic_compare_exchange_strong(&z->taking, &idle, 1);
    if (*busy)
        return NULL;
    /* the edges the last call left, then the chains from the take's
     * cursor on, 64 at a time (emptied under the lock, linked outside
     * it), until `max' are in hand: a call walks about what it gives out
     * and 64 chains more, however many edges the table holds */
    mf_size_edge *all = z->pending, **tail = &all, *heads[64];
    unsigned n = 0;
    while (*tail && n < max) {
        tail = &(*tail)->next;
        n++;
    }
    while (n < max && z->cursor < EDGE_CHAINS) {
        unsigned base = z->cursor;
        mf_spin_lock(&z->lock);
        for (unsigned j = 0; j < 64; j++) {
            heads[j] = z->edges[base + j];
            z->edges[base + j] = NULL;
        }
        mf_spin_unlock(&z->lock);
        z->cursor = base + 64;
        for (unsigned j = 0; j < 64; j++) {
            /* each chain's edges linked after those in hand and counted
             * here (the cut below walks up to `max' of them once more) */
            *tail = heads[j];
            while (*tail) {
                tail = &(*tail)->next;
                n++;
            }
        }
    }
    /* cut after `max': the rest waits for the next call */
    mf_size_edge **cut = &all;
    for (unsigned i = 0; *cut && i < max; i++)
        cut = &(*cut)->next;
    z->pending = *cut;
    *cut = NULL;
    *more = z->pending != NULL || z->cursor < EDGE_CHAINS;
    if (!*more)
        z->cursor = 0; /* the take is over: the next starts at chain 0 */
    atomic_store(&z->taking, 0);
    return all;
}
