/*
 * mf_intern.h -- ids for endpoints that are not local pids.
 *
 * What it owns: an mf_interns table (one per generation, inside it,
 * mf_gen.h): every port, atom, {Name, Node}, remote pid and alias
 * reference (one whose owner is not read, see alias_owner) its thread has
 * counted a send to or from, as an mf_intern: a copy of the term in an env
 * of the table's (for equality on the owner thread) and its external format
 * in the table's heap (for the snapshot reader).  It knows nothing of
 * generations or sessions: the generation hands it a heap, the shard whose
 * byte count it adds to, and the session's cap.  The interned term's id, whose low four bits
 * (MF_ID_TAG, 0x0) can never be those of a local pid's word (MF_PID_TAG,
 * 0x3), is what a pair key holds.
 *
 * Threads: the generation's owner thread interns (no lock); the snapshot
 * reads the published list (intern_list, newest first, each entry immutable
 * once published by a release store).  Entries are freed with the
 * generation only.
 */
#ifndef MF_INTERN_H
#define MF_INTERN_H

#include <erl_nif.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mf_alloc.h"
#include "mf_layout.h"
#include "mf_shard.h"

#include <uthash.h>

typedef struct mf_intern mf_intern;

/* A thread's interned terms (one generation's). */
typedef struct mf_interns {
    const mf_alloc *heap;   /* entries and their external format */
    mf_shard *shard;        /* its byte count grows with the entries */
    mf_limit *limit;        /* no new entry once full (the session's cap) */
    ErlNifEnv *env;         /* copies of the terms; owner only */
    mf_intern *hash;        /* uthash by hash; owner only */
    _Atomic(mf_intern *) list; /* newest first; for the reader */
    _Atomic uint64_t n;
} mf_interns;

struct mf_intern {
    uint64_t hash;          /* uthash key */
    uint64_t id;            /* what pair keys hold */
    ERL_NIF_TERM term;      /* in the table's env */
    unsigned char *etf;     /* external format, owned */
    size_t etf_len;
    mf_intern *same;        /* other terms with this hash; owner only */
    mf_intern *next;        /* publish list; immutable once published */
    UT_hash_handle hh;
};

/* Owner thread of `in' only.  Finds t's id; interns t when new and the
 * cap allows.  Returns 0 when t has no id and none can be made. */
int mf_intern_term(ErlNifEnv *env, mf_interns *in, ERL_NIF_TERM t, uint64_t *id);

/* Owner thread only.  The key word of an endpoint: a local pid's word, else
 * its interned id. */
static inline int mf_endpoint_word(ErlNifEnv *env, mf_interns *in, ERL_NIF_TERM t,
                                   uint64_t *w)
{
    if (mf_is_local_pid(t)) {
        *w = (uint64_t)t;
        return 1;
    }
    return mf_intern_term(env, in, t, w);
}

/* Frees the table's env (the term copies), not its entries: enough when
 * the heap goes as a whole (an arena dropped).  Only when no thread can
 * reach the table any more. */
void mf_intern_free_env(mf_interns *in);

/* Frees the table's env and every entry, block by block, through its heap.
 * Only when no thread can reach the table any more. */
void mf_intern_free_all(mf_interns *in);

#endif
