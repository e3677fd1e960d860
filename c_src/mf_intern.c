/*
 * mf_intern.c -- interning (see mf_intern.h for what it owns and the
 * threads that touch it).
 */
#include <string.h>

#include "mf_session.h"

/* The interned-term tables (uthash) allocate through the generation that
 * owns them; each macro use below has `g` in scope (and `oomed` for adds). */
static void *gen_alloc(mf_gen *g, size_t sz);
static void gen_free(mf_gen *g, void *p, size_t sz, int account);
#define uthash_malloc(sz) gen_alloc(g, (sz))
#define uthash_free(ptr, sz) gen_free(g, (ptr), (sz), 1)
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (oomed = 1)
#define HASH_FUNCTION(keyptr, keylen, hashv) \
    ((hashv) = (unsigned)((*(const uint64_t *)(keyptr)) ^ (*(const uint64_t *)(keyptr) >> 32)))

#include "mf_intern.h"

static void *gen_alloc(mf_gen *g, size_t sz)
{
    void *p = g->heap.alloc(g->heap.ctx, sz);
    if (p)
        mf_shard_account(g->shard, (long)sz);
    return p;
}

static void gen_free(mf_gen *g, void *p, size_t sz, int account)
{
    if (!p)
        return;
    g->heap.free(g->heap.ctx, p, sz);
    if (account)
        mf_shard_account(g->shard, -(long)sz);
}

static uint64_t term_hash(ERL_NIF_TERM t)
{
    return (enif_hash(ERL_NIF_INTERNAL_HASH, t, 0x9E3779B9u) << 32) ^
           enif_hash(ERL_NIF_INTERNAL_HASH, t, 0x85EBCA6Bu);
}

/* Owner thread of `g` only (see mf_intern.h). */
int mf_intern_term(ErlNifEnv *env, mf_gen *g, ERL_NIF_TERM t, uint64_t *id)
{
    uint64_t h = term_hash(t);
    mf_intern *head, *e;
    HASH_FIND(hh, g->interns, &h, sizeof(h), head);
    for (e = head; e; e = e->same) {
        if (enif_is_identical(e->term, t)) {
            *id = e->id;
            return 1;
        }
    }
    if (mf_limit_full(&g->session->limit))
        return 0;
    ErlNifBinary bin;
    if (!enif_term_to_binary(env, t, &bin))
        return 0;
    e = gen_alloc(g, sizeof(*e));
    unsigned char *etf = e ? gen_alloc(g, bin.size) : NULL;
    if (!e || !etf) {
        gen_free(g, e, sizeof(*e), 1);
        enif_release_binary(&bin);
        return 0;
    }
    memcpy(etf, bin.data, bin.size);
    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->etf = etf;
    e->etf_len = bin.size;
    enif_release_binary(&bin);
    if (!g->env && !(g->env = enif_alloc_env())) {
        gen_free(g, etf, e->etf_len, 1);
        gen_free(g, e, sizeof(*e), 1);
        return 0;
    }
    e->term = enif_make_copy(g->env, t);
    uint64_t seq = atomic_load_explicit(&g->ninterns, memory_order_relaxed);
    e->id = MF_ID_WORD(seq);
    if (head) {
        e->same = head->same;
        head->same = e;
    } else {
        int oomed = 0;
        HASH_ADD(hh, g->interns, hash, sizeof(e->hash), e);
        if (oomed) {
            gen_free(g, etf, e->etf_len, 1);
            gen_free(g, e, sizeof(*e), 1);
            return 0;
        }
    }
    e->next = atomic_load_explicit(&g->intern_list, memory_order_relaxed);
    atomic_store_explicit(&g->intern_list, e, memory_order_release);
    atomic_store_explicit(&g->ninterns, seq + 1, memory_order_release);
    *id = e->id;
    return 1;
}

void mf_intern_free_all(mf_gen *g)
{
    mf_intern *e = atomic_load_explicit(&g->intern_list, memory_order_acquire);
    HASH_CLEAR(hh, g->interns);
    while (e) {
        mf_intern *next = e->next;
        gen_free(g, e->etf, e->etf_len, 0);
        gen_free(g, e, sizeof(*e), 0);
        e = next;
    }
}
