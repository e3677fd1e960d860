/*
 * mf_intern.h -- ids for endpoints that are not local pids.
 *
 * What it owns: per generation (mf_gen), every port, atom, {Name, Node},
 * remote pid and alias reference (one whose owner is not read, see
 * alias_owner) its thread has counted a send to or from, as an mf_intern:
 * a copy of the term in an env the generation owns (for equality on the
 * owner thread) and its external format in the generation's heap (for the
 * snapshot reader).  The interned term's id, whose low four bits
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

#include "mf_layout.h"
#include "mf_session.h"

#include <uthash.h>

struct mf_intern {
    uint64_t hash;          /* uthash key */
    uint64_t id;            /* what pair keys hold */
    ERL_NIF_TERM term;      /* in slot->env */
    unsigned char *etf;     /* external format, owned */
    size_t etf_len;
    mf_intern *same;        /* other terms with this hash; owner only */
    mf_intern *next;        /* publish list; immutable once published */
    UT_hash_handle hh;
};

/* Owner thread of `g` only.  Finds t's id; interns t when new and the
 * session may still grow.  Returns 0 when t has no id and none can be made. */
int mf_intern_term(ErlNifEnv *env, mf_gen *g, ERL_NIF_TERM t, uint64_t *id);

/* Owner thread only.  The key word of an endpoint: a local pid's word, else
 * its interned id. */
static inline int mf_endpoint_word(ErlNifEnv *env, mf_gen *g, ERL_NIF_TERM t, uint64_t *w)
{
    if (mf_is_local_pid(t)) {
        *w = (uint64_t)t;
        return 1;
    }
    return mf_intern_term(env, g, t, w);
}

/* Frees every interned entry of g, block by block, through its heap (not
 * its env).  Only when no thread can reach g any more. */
void mf_intern_free_all(mf_gen *g);

#endif
