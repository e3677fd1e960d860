/*
 * mf_calls.c -- sampled round trips of calls (see mf_calls.h).
 *
 * What it owns: each mf_calls it makes, with its in-flight slots and its
 * edges; every block comes from and goes back to the mf_alloc it was made
 * with.
 *
 * Threads: mf_calls_request and mf_calls_reply on any scheduler thread at
 * once (a slot is claimed by a compare-and-swap of its key; the edges are
 * under a spin lock held for a lookup and a few adds); mf_calls_take and
 * mf_calls_free_edges by the collector only; mf_calls_new and
 * mf_calls_free by whoever owns the session.
 */
#include "mf_calls.h"

#include <string.h>

#include "mf_spin.h"

#define EDGE_CHAINS (1u << MF_CALL_EDGE_BITS)

mf_calls *mf_calls_new(const mf_alloc *alloc, uint32_t sample, uint64_t timeout_ns)
{
    mf_calls *c = alloc->alloc(alloc->ctx, sizeof(*c));
    if (!c)
        return NULL;
    memset(c, 0, sizeof(*c));
    c->alloc = *alloc;
    c->sample = sample;
    c->timeout_ns = timeout_ns;
    atomic_flag_clear(&c->lock);
    c->edges = alloc->alloc(alloc->ctx, EDGE_CHAINS * sizeof(mf_call_edge *));
    if (!c->edges) {
        alloc->free(alloc->ctx, c, sizeof(*c));
        return NULL;
    }
    memset(c->edges, 0, EDGE_CHAINS * sizeof(mf_call_edge *));
    return c;
}

void mf_calls_free_edges(mf_calls *c, mf_call_edge *list)
{
    while (list) {
        mf_call_edge *next = list->next;
        c->alloc.free(c->alloc.ctx, list, sizeof(*list));
        list = next;
    }
}

void mf_calls_free(mf_calls *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < EDGE_CHAINS; i++)
        mf_calls_free_edges(c, c->edges[i]);
    c->alloc.free(c->alloc.ctx, c->edges, EDGE_CHAINS * sizeof(mf_call_edge *));
    c->alloc.free(c->alloc.ctx, c, sizeof(*c));
}

unsigned mf_call_bucket(uint64_t ns)
{
    if (ns < (1ULL << MF_CALL_MIN_EXP))
        return 0;
    unsigned e = 63 - (unsigned)__builtin_clzll(ns);
    if (e >= MF_CALL_MAX_EXP)
        return MF_CALL_BUCKETS - 1;
    unsigned half = (unsigned)(ns >> (e - 1)) & 1; /* the bit below the top one */
    return 1 + 2 * (e - MF_CALL_MIN_EXP) + half;
}

uint64_t mf_call_bucket_low(unsigned b)
{
    if (b == 0)
        return 0;
    if (b >= MF_CALL_BUCKETS - 1)
        return 1ULL << MF_CALL_MAX_EXP;
    unsigned e = MF_CALL_MIN_EXP + (b - 1) / 2;
    return (1ULL << e) + ((b - 1) % 2 ? 1ULL << (e - 1) : 0);
}

uint64_t mf_call_bucket_high(unsigned b)
{
    return b >= MF_CALL_BUCKETS - 1 ? UINT64_MAX : mf_call_bucket_low(b + 1);
}


static unsigned chain(uint64_t caller, uint64_t server, uint64_t kind)
{
    uint64_t h = (caller * 0x9E3779B97F4A7C15ULL) ^ (server * 0xC2B2AE3D27D4EB4FULL) ^ kind;
    return (unsigned)(h >> (64 - MF_CALL_EDGE_BITS));
}

static mf_call_edge *find(mf_calls *c, unsigned ch, uint64_t caller, uint64_t server,
                          uint64_t kind)
{
    for (mf_call_edge *e = c->edges[ch]; e; e = e->next)
        if (e->caller == caller && e->server == server && e->kind == kind)
            return e;
    return NULL;
}

/* Adds a round trip (bucket b) or an unanswered call (b < 0) to the edge,
 * made when new (allocated outside the lock; a copy another thread made
 * meanwhile wins).  Any thread. */
static void edge_add(mf_calls *c, uint64_t caller, uint64_t server, uint64_t kind, int b)
{
    unsigned ch = chain(caller, server, kind);
    mf_call_edge *made = NULL;
    for (;;) {
        mf_spin_lock(&c->lock);
        mf_call_edge *e = find(c, ch, caller, server, kind);
        if (!e && made) {
            e = made;
            made = NULL;
            e->next = c->edges[ch];
            c->edges[ch] = e;
        }
        if (e) {
            if (b < 0) {
                e->unanswered++;
            } else {
                e->sampled++;
                e->buckets[b]++;
            }
            mf_spin_unlock(&c->lock);
            if (made)
                c->alloc.free(c->alloc.ctx, made, sizeof(*made));
            return;
        }
        mf_spin_unlock(&c->lock);
        made = c->alloc.alloc(c->alloc.ctx, sizeof(*made));
        if (!made)
            return; /* out of memory: this sample is lost */
        memset(made, 0, sizeof(*made));
        made->caller = caller;
        made->server = server;
        made->kind = kind;
    }
}

void mf_calls_request(mf_calls *c, uint64_t id, uint64_t caller, uint64_t server,
                      uint64_t kind, uint64_t now_ns)
{
    unsigned i = mf_calls_index(id);
    mf_call_slot *s = &c->slots[i];
    uint64_t old = atomic_load_explicit(&s->key, memory_order_acquire);
    if (old == MF_CALL_BUSY ||
        !atomic_compare_exchange_strong_explicit(&s->key, &old, MF_CALL_BUSY,
                                                 memory_order_acquire, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&c->busy, 1, memory_order_relaxed);
        return;
    }
    if (old != MF_CALL_FREE) {
        /* a call noted earlier and never answered: this one needs its slot */
        edge_add(c, atomic_load_explicit(&s->caller, memory_order_relaxed),
                 atomic_load_explicit(&s->server, memory_order_relaxed),
                 atomic_load_explicit(&s->kind, memory_order_relaxed), -1);
        atomic_fetch_add_explicit(&c->displaced, 1, memory_order_relaxed);
    }
    atomic_store_explicit(&s->caller, caller, memory_order_relaxed);
    atomic_store_explicit(&s->server, server, memory_order_relaxed);
    atomic_store_explicit(&s->kind, kind, memory_order_relaxed);
    atomic_store_explicit(&s->t0, now_ns, memory_order_relaxed);
    atomic_fetch_or_explicit(&c->used[i / 64], 1ULL << (i % 64), memory_order_relaxed);
    atomic_store_explicit(&s->key, id | 2, memory_order_release);
}

/* Empties the claimed slot i (its key MF_CALL_BUSY): its bit is cleared
 * before the slot is free, so that a request that claims it next sets the
 * bit after this cleared it. */
static void release(mf_calls *c, unsigned i)
{
    atomic_fetch_and_explicit(&c->used[i / 64], ~(1ULL << (i % 64)), memory_order_relaxed);
    atomic_store_explicit(&c->slots[i].key, MF_CALL_FREE, memory_order_release);
}

void mf_calls_reply(mf_calls *c, uint64_t id, uint64_t now_ns)
{
    unsigned i = mf_calls_index(id);
    mf_call_slot *s = &c->slots[i];
    uint64_t key = id | 2;
    if (!atomic_compare_exchange_strong_explicit(&s->key, &key, MF_CALL_BUSY,
                                                 memory_order_acquire, memory_order_relaxed))
        return; /* not a sampled call's (or its slot is being read) */
    uint64_t caller = atomic_load_explicit(&s->caller, memory_order_relaxed);
    uint64_t server = atomic_load_explicit(&s->server, memory_order_relaxed);
    uint64_t kind = atomic_load_explicit(&s->kind, memory_order_relaxed);
    uint64_t t0 = atomic_load_explicit(&s->t0, memory_order_relaxed);
    release(c, i);
    edge_add(c, caller, server, kind, (int)mf_call_bucket(now_ns > t0 ? now_ns - t0 : 0));
}

mf_call_edge *mf_calls_take(mf_calls *c, uint64_t now_ns)
{
    /* the calls past the timeout: unanswered */
    for (unsigned w = 0; w < MF_CALLS_SLOTS / 64; w++) {
        uint64_t bits = atomic_load_explicit(&c->used[w], memory_order_relaxed);
        while (bits) {
            unsigned i = w * 64 + (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            mf_call_slot *s = &c->slots[i];
            uint64_t key = atomic_load_explicit(&s->key, memory_order_acquire);
            if (key <= MF_CALL_BUSY)
                continue;
            uint64_t t0 = atomic_load_explicit(&s->t0, memory_order_relaxed);
            if (now_ns < t0 || now_ns - t0 < c->timeout_ns)
                continue;
            if (!atomic_compare_exchange_strong_explicit(&s->key, &key, MF_CALL_BUSY,
                                                         memory_order_acquire,
                                                         memory_order_relaxed))
                continue;
            uint64_t caller = atomic_load_explicit(&s->caller, memory_order_relaxed);
            uint64_t server = atomic_load_explicit(&s->server, memory_order_relaxed);
            uint64_t kind = atomic_load_explicit(&s->kind, memory_order_relaxed);
            release(c, i);
            edge_add(c, caller, server, kind, -1);
        }
    }
    /* every edge, as one list: the chains are emptied under the lock,
     * then linked outside it */
    mf_call_edge *heads[64], *all = NULL;
    for (unsigned base = 0; base < EDGE_CHAINS; base += 64) {
        mf_spin_lock(&c->lock);
        for (unsigned j = 0; j < 64; j++) {
            heads[j] = c->edges[base + j];
            c->edges[base + j] = NULL;
        }
        mf_spin_unlock(&c->lock);
        for (unsigned j = 0; j < 64; j++) {
            mf_call_edge *e = heads[j];
            while (e) {
                mf_call_edge *next = e->next;
                e->next = all;
                all = e;
                e = next;
            }
        }
    }
    return all;
}
