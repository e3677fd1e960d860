/*
 * mf_intern.c -- interning (see mf_intern.h for what it owns and the
 * threads that touch it).
 */
#include <string.h>

#include "mf_layout.h"
#include "mf_shard.h"

/* The interned-term tables (uthash) allocate through their heap; each
 * macro use below has `in` in scope (and `oomed` for adds). */
typedef struct mf_interns mf_interns;
static void *heap_alloc(mf_interns *in, size_t sz);
static void heap_free(mf_interns *in, void *p, size_t sz, int account);
#define uthash_malloc(sz) heap_alloc(in, (sz))
#define uthash_free(ptr, sz) heap_free(in, (ptr), (sz), 1)
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (oomed = 1)
#define HASH_FUNCTION(keyptr, keylen, hashv) \
    ((hashv) = (unsigned)((*(const uint64_t *)(keyptr)) ^ (*(const uint64_t *)(keyptr) >> 32)))

#include "mf_intern.h"

static void *heap_alloc(mf_interns *in, size_t sz)
{
    void *p = in->heap->alloc(in->heap->ctx, sz);
    if (p)
        mf_shard_account(in->shard, (long)sz);
    return p;
}

static void heap_free(mf_interns *in, void *p, size_t sz, int account)
{
    if (!p)
        return;
    in->heap->free(in->heap->ctx, p, sz);
    if (account)
        mf_shard_account(in->shard, -(long)sz);
}

static uint64_t term_hash(ERL_NIF_TERM t)
{
    return (enif_hash(ERL_NIF_INTERNAL_HASH, t, 0x9E3779B9u) << 32) ^
           enif_hash(ERL_NIF_INTERNAL_HASH, t, 0x85EBCA6Bu);
}

/* Owner thread of `in` only (see mf_intern.h). */
int mf_intern_term(ErlNifEnv *env, mf_interns *in, ERL_NIF_TERM t, uint64_t *id)
{
    uint64_t h = term_hash(t);
    mf_intern *head, *e;
    HASH_FIND(hh, in->hash, &h, sizeof(h), head);
    for (e = head; e; e = e->same) {
        if (enif_is_identical(e->term, t)) {
            *id = e->id;
            return 1;
        }
    }
    if (mf_limit_full(in->limit))
        return 0;
    ErlNifBinary bin;
    if (!enif_term_to_binary(env, t, &bin))
        return 0;
    e = heap_alloc(in, sizeof(*e));
    unsigned char *etf = e ? heap_alloc(in, bin.size) : NULL;
    if (!e || !etf) {
        heap_free(in, e, sizeof(*e), 1);
        enif_release_binary(&bin);
        return 0;
    }
    memcpy(etf, bin.data, bin.size);
    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->etf = etf;
    e->etf_len = bin.size;
    enif_release_binary(&bin);
    if (!in->env && !(in->env = enif_alloc_env())) {
        heap_free(in, etf, e->etf_len, 1);
        heap_free(in, e, sizeof(*e), 1);
        return 0;
    }
    e->term = enif_make_copy(in->env, t);
    uint64_t seq = atomic_load_explicit(&in->n, memory_order_relaxed);
    e->id = MF_ID_WORD(seq);
    if (head) {
        e->same = head->same;
        head->same = e;
    } else {
        int oomed = 0;
        HASH_ADD(hh, in->hash, hash, sizeof(e->hash), e);
        if (oomed) {
            heap_free(in, etf, e->etf_len, 1);
            heap_free(in, e, sizeof(*e), 1);
            return 0;
        }
    }
    e->next = atomic_load_explicit(&in->list, memory_order_relaxed);
    atomic_store_explicit(&in->list, e, memory_order_release);
    atomic_store_explicit(&in->n, seq + 1, memory_order_release);
    *id = e->id;
    return 1;
}

void mf_intern_free_all(mf_interns *in)
{
    mf_intern *e = atomic_load_explicit(&in->list, memory_order_acquire);
    HASH_CLEAR(hh, in->hash);
    while (e) {
        mf_intern *next = e->next;
        heap_free(in, e->etf, e->etf_len, 0);
        heap_free(in, e, sizeof(*e), 0);
        e = next;
    }
    mf_intern_free_env(in);
}

void mf_intern_free_env(mf_interns *in)
{
    if (in->env)
        enif_free_env(in->env);
    in->env = NULL;
}
