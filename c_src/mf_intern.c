/*
 * mf_intern.c -- interning (see mf_intern.h for what it owns and the
 * threads that touch it).
 */
#include <string.h>

#include "mf_session.h"

/* The interned-term tables (uthash) allocate through the slot that owns
 * them; each macro use below has `slot` in scope (and `oomed` for adds). */
static void *slot_alloc(mf_slot *slot, size_t sz);
static void slot_free(mf_slot *slot, void *p, size_t sz, int account);
#define uthash_malloc(sz) slot_alloc(slot, (sz))
#define uthash_free(ptr, sz) slot_free(slot, (ptr), (sz), 1)
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (oomed = 1)
#define HASH_FUNCTION(keyptr, keylen, hashv) \
    ((hashv) = (unsigned)((*(const uint64_t *)(keyptr)) ^ (*(const uint64_t *)(keyptr) >> 32)))

#include "mf_intern.h"

static void *slot_alloc(mf_slot *slot, size_t sz)
{
    void *p = slot->session->alloc.alloc(slot->session->alloc.ctx, sz);
    if (p)
        mf_shard_account(slot->shard, (long)sz);
    return p;
}

static void slot_free(mf_slot *slot, void *p, size_t sz, int account)
{
    if (!p)
        return;
    slot->session->alloc.free(slot->session->alloc.ctx, p, sz);
    if (account)
        mf_shard_account(slot->shard, -(long)sz);
}

static uint64_t term_hash(ERL_NIF_TERM t)
{
    return (enif_hash(ERL_NIF_INTERNAL_HASH, t, 0x9E3779B9u) << 32) ^
           enif_hash(ERL_NIF_INTERNAL_HASH, t, 0x85EBCA6Bu);
}

/* Owner thread of `slot` only (see mf_intern.h). */
int mf_intern_term(ErlNifEnv *env, mf_slot *slot, ERL_NIF_TERM t, uint64_t *id)
{
    uint64_t h = term_hash(t);
    mf_intern *head, *e;
    HASH_FIND(hh, slot->interns, &h, sizeof(h), head);
    for (e = head; e; e = e->same) {
        if (enif_is_identical(e->term, t)) {
            *id = e->id;
            return 1;
        }
    }
    if (mf_limit_full(&slot->session->limit))
        return 0;
    ErlNifBinary bin;
    if (!enif_term_to_binary(env, t, &bin))
        return 0;
    e = slot_alloc(slot, sizeof(*e));
    unsigned char *etf = e ? slot_alloc(slot, bin.size) : NULL;
    if (!e || !etf) {
        slot_free(slot, e, sizeof(*e), 1);
        enif_release_binary(&bin);
        return 0;
    }
    memcpy(etf, bin.data, bin.size);
    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->etf = etf;
    e->etf_len = bin.size;
    enif_release_binary(&bin);
    if (!slot->env && !(slot->env = enif_alloc_env())) {
        slot_free(slot, etf, e->etf_len, 1);
        slot_free(slot, e, sizeof(*e), 1);
        return 0;
    }
    e->term = enif_make_copy(slot->env, t);
    uint64_t seq = atomic_load_explicit(&slot->ninterns, memory_order_relaxed);
    e->id = (seq << 4) | MF_ID_TAG;
    if (head) {
        e->same = head->same;
        head->same = e;
    } else {
        int oomed = 0;
        HASH_ADD(hh, slot->interns, hash, sizeof(e->hash), e);
        if (oomed) {
            slot_free(slot, etf, e->etf_len, 1);
            slot_free(slot, e, sizeof(*e), 1);
            return 0;
        }
    }
    e->next = atomic_load_explicit(&slot->intern_list, memory_order_relaxed);
    atomic_store_explicit(&slot->intern_list, e, memory_order_release);
    atomic_store_explicit(&slot->ninterns, seq + 1, memory_order_release);
    *id = e->id;
    return 1;
}

void mf_intern_free_all(mf_slot *slot)
{
    mf_intern *e = atomic_load_explicit(&slot->intern_list, memory_order_acquire);
    HASH_CLEAR(hh, slot->interns);
    while (e) {
        mf_intern *next = e->next;
        slot_free(slot, e->etf, e->etf_len, 0);
        slot_free(slot, e, sizeof(*e), 0);
        e = next;
    }
}
