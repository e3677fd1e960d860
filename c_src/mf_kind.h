/*
 * mf_kind.h -- the kind and tag of a message, read from the message term in
 * trace_send, as one word (a "kind word") that joins the pair's key.
 *
 * What it owns: nothing but the table of kind atoms, made in load from
 * mf_atoms.  A kind word is (Tag << MF_KIND_BITS) | Kind: Kind one of
 * MF_K_* (never 0), Tag the word of an atom (atoms live as long as the VM,
 * so the word stays a valid term for any env); 0 is "no kind" (kinds off,
 * and dead letters).  Nothing is copied or allocated: the message is read
 * in place (mf_layout's inline reads, or enif calls where those are off).
 *
 * Threads: any; reads the caller's terms and the atoms made at load.
 */
#ifndef MF_KIND_H
#define MF_KIND_H

#include <erl_nif.h>
#include <stdint.h>

#include "mf_atoms.h"
#include "mf_layout.h"

#include "mf_kind_word.h"

/* The name of t's type as a tag (`binary', `list', `map', `integer',
 * `record' for a native record, ...), for a term that is neither an atom
 * nor a tuple.  enif_term_type only where L says it knows every type of
 * this VM but native records (it aborts the VM on one, OTP 29); else one
 * enif_is_* test at a time.  Any thread. */
ERL_NIF_TERM mf_kind_type_tag(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM t);

static inline uint64_t mf_kind_make(ERL_NIF_TERM tag, unsigned kind)
{
    return ((uint64_t)tag << MF_KIND_BITS) | kind;
}

/* The tag of a tuple of n elements e (as mf_kind_tag_of has it). */
static inline ERL_NIF_TERM mf_kind_tuple_tag(const mf_layout_t *L, ErlNifEnv *env, int n,
                                             const ERL_NIF_TERM *e)
{
    if (n >= 1 && mf_is_atom(L, env, e[0]))
        return e[0];
    if (n == 2 && mf_is_atom(L, env, e[1]))
        return e[1];
    if (n == 2 && mf_get_tuple(L, env, e[1], &n, &e) && n >= 1 && mf_is_atom(L, env, e[0]))
        return e[0];
    return atom_tuple;
}

/* The tag of a term: itself for an atom, the first element of a tuple that
 * starts with an atom, and for a pair whose first element is no atom
 * ({Ref, Reply}, {Port, {data, D}}) the second's tag when that is an atom
 * or starts with one; else the name of its type. */
static inline ERL_NIF_TERM mf_kind_tag_of(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM t)
{
    const ERL_NIF_TERM *e;
    int n;
    if (mf_is_atom(L, env, t))
        return t;
    if (mf_get_tuple(L, env, t, &n, &e))
        return mf_kind_tuple_tag(L, env, n, e);
    return mf_kind_type_tag(L, env, t);
}

/* What the tracer reads of one message, once a send (mf_kind_read): its
 * kind word, and the terms a round trip needs, so that counting, the
 * sampled call and the sampled size share one read of the message's outer
 * tuple.  Lives on the callback's stack; holds the caller's terms, valid
 * for the callback only. */
typedef struct mf_msg {
    ERL_NIF_TERM term;      /* the message; 0 for a flow's event (never read) */
    uint64_t kind;          /* its kind word as sent to a process; 0: not read */
    ERL_NIF_TERM reply_tag; /* Tag of {Tag, Reply} with Tag no atom, else 0 */
    ERL_NIF_TERM reply;     /* that Reply */
    ERL_NIF_TERM call_from; /* From of {'$gen_call', From, Request}, else 0 */
} mf_msg;

/* Reads msg once: its kind word as sent to a process (never 0), returned
 * and kept in m->kind, and the terms above, in m, which the caller made as
 * {.term = msg} (its other fields 0: a field this read does not set stays
 * 0).
 * {Tag, Reply} with Tag a reference or [alias | Ref] is a reply
 * (mf_is_reply_tag); with Tag another non-atom it is `info', and sent to a
 * local alias a reply after all (mf_kind_to_alias).  Always inline:
 * trace_send calls it on every send with kinds on, with the layout it
 * loaded (L), and inline m stays in registers.  Any thread. */
static inline __attribute__((always_inline)) uint64_t
mf_kind_read(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM msg, mf_msg *m)
{
    const ERL_NIF_TERM *e;
    int n;
    uint64_t kw;
    if (!mf_get_tuple(L, env, msg, &n, &e)) {
        kw = mf_kind_make(mf_is_atom(L, env, msg) ? msg : mf_kind_type_tag(L, env, msg),
                          MF_K_INFO);
    } else if (n < 2) {
        kw = mf_kind_make(mf_kind_tuple_tag(L, env, n, e), MF_K_INFO);
    } else if (!mf_is_atom(L, env, e[0])) {
        /* {Mref, Reply} to the caller's pid (gen's reply to a local call
         * with timeout infinity, Task's reply), {[alias | Ref], Reply} to
         * a remote caller's alias */
        if (n == 2) {
            m->reply_tag = e[0];
            m->reply = e[1];
        }
        kw = n == 2 && mf_is_reply_tag(L, env, e[0])
                 ? mf_kind_make(mf_kind_tag_of(L, env, e[1]), MF_K_REPLY)
                 : mf_kind_make(mf_kind_tuple_tag(L, env, n, e), MF_K_INFO);
    } else {
        ERL_NIF_TERM h = e[0]; /* atoms: compare words */
        /* a known kind's tag is its request's or reason's: the last element */
        kw = mf_kind_make(h, MF_K_INFO);
        switch (n) {
        case 2:
            if (h == atom_gen_cast)
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[1]), MF_K_CAST);
            else if (h == atom_gen_event || h == atom_gen_all_state_event)
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[1]), MF_K_EVENT);
            break;
        case 3:
            if (h == atom_gen_call) {
                m->call_from = e[1];
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_CALL);
            } else if (h == atom_EXIT) {
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_EXIT);
            } else if (h == atom_system) {
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_SYSTEM);
            } else if (h == atom_gen_sync_event || h == atom_gen_sync_all_state_event) {
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_EVENT);
            } else if (h == atom_io_reply) {
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_IO);
            }
            break;
        case 4:
            if (h == atom_io_request)
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[3]), MF_K_IO);
            break;
        case 5:
            if (h == atom_DOWN)
                kw = mf_kind_make(mf_kind_tag_of(L, env, e[4]), MF_K_DOWN);
            break;
        }
    }
    m->kind = kw;
    return kw;
}

/* The kind word of a message read by mf_kind_read, sent to a local alias:
 * {Tag, Reply} with Tag no atom is then a reply (a Task's {Alias, Result}
 * too), its tag that of Reply; anything else as sent to a process (a
 * message to an OTP 28 priority alias, say).  Reads nothing of the message
 * but Reply, and that only for such a pair not read as a reply already.
 * Any thread. */
static inline uint64_t mf_kind_to_alias(const mf_layout_t *L, ErlNifEnv *env, const mf_msg *m)
{
    if (!m->reply_tag || (m->kind & MF_KIND_MASK) == MF_K_REPLY)
        return m->kind;
    return mf_kind_make(mf_kind_tag_of(L, env, m->reply), MF_K_REPLY);
}

/* The kind word of `msg' sent to a local alias (reply != 0) or anything
 * else, for a flow's kept event (mf_watch).  Any thread. */
static inline uint64_t mf_kind_word(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM msg,
                                    int reply)
{
    mf_msg m = {.term = msg};
    mf_kind_read(L, env, msg, &m);
    return reply ? mf_kind_to_alias(L, env, &m) : m.kind;
}

/* The same kind with the tag `other': where a pair's sends go past its
 * max_kinds distinct kind words. */
static inline uint64_t mf_kind_other(uint64_t kw)
{
    return ((uint64_t)atom_other << MF_KIND_BITS) | (kw & MF_KIND_MASK);
}

/* The kind atom and the tag atom of a non-zero kind word.  Any thread. */
ERL_NIF_TERM mf_kind_atom(uint64_t kw);
static inline ERL_NIF_TERM mf_kind_tag(uint64_t kw)
{
    return (ERL_NIF_TERM)(kw >> MF_KIND_BITS);
}

#endif
