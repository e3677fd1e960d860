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
    if (mf_get_tuple(L, env, t, &n, &e)) {
        if (n >= 1 && mf_is_atom(L, env, e[0]))
            return e[0];
        if (n == 2 && mf_is_atom(L, env, e[1]))
            return e[1];
        if (n == 2 && mf_get_tuple(L, env, e[1], &n, &e) && n >= 1 && mf_is_atom(L, env, e[0]))
            return e[0];
        return atom_tuple;
    }
    return mf_kind_type_tag(L, env, t);
}

/* The kind word of `msg' sent to a receiver; `reply' != 0 when the send
 * is to a local alias: {Tag, Reply} with Tag no atom is then a reply
 * (MF_K_REPLY, the tag that of Reply), and anything else is read as if
 * sent to a pid (a message to an OTP 28 priority alias, say).  Sent to
 * anything else, {Tag, Reply} with Tag a reference or [alias | Ref] is a
 * reply too (mf_is_reply_tag).  *reply_tag is set to Tag of any {Tag, _}
 * with Tag no atom (a reply's round trip reads it, and a send to an alias
 * is read again only for one: the message is read once); it is left as it
 * is otherwise (NULL: not wanted).  Never 0.  Inline: trace_send calls
 * it on every send with kinds on, with the layout it loaded (L).  Any
 * thread. */
static inline uint64_t mf_kind_word(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM msg,
                                    int reply, ERL_NIF_TERM *reply_tag)
{
    const ERL_NIF_TERM *e;
    int n;
    int tuple = mf_get_tuple(L, env, msg, &n, &e);
    /* {[alias | Ref], Reply}: gen's reply; {Alias, Result}: a Task's */
    if (reply && tuple && n == 2 && !mf_is_atom(L, env, e[0]))
        return mf_kind_make(mf_kind_tag_of(L, env, e[1]), MF_K_REPLY);
    if (!tuple || n < 2)
        return mf_kind_make(mf_kind_tag_of(L, env, msg), MF_K_INFO);
    if (!mf_is_atom(L, env, e[0])) {
        /* {Mref, Reply} to the caller's pid (gen's reply to a local call
         * with timeout infinity, Task's reply), {[alias | Ref], Reply} to
         * a remote caller's alias */
        if (n == 2 && reply_tag)
            *reply_tag = e[0];
        if (n == 2 && mf_is_reply_tag(L, env, e[0]))
            return mf_kind_make(mf_kind_tag_of(L, env, e[1]), MF_K_REPLY);
        return mf_kind_make(mf_kind_tag_of(L, env, msg), MF_K_INFO);
    }
    ERL_NIF_TERM h = e[0]; /* atoms: compare words */
    switch (n) {
    case 2:
        if (h == atom_gen_cast)
            return mf_kind_make(mf_kind_tag_of(L, env, e[1]), MF_K_CAST);
        if (h == atom_gen_event || h == atom_gen_all_state_event)
            return mf_kind_make(mf_kind_tag_of(L, env, e[1]), MF_K_EVENT);
        break;
    case 3:
        if (h == atom_gen_call)
            return mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_CALL);
        if (h == atom_EXIT)
            return mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_EXIT);
        if (h == atom_system)
            return mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_SYSTEM);
        if (h == atom_gen_sync_event || h == atom_gen_sync_all_state_event)
            return mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_EVENT);
        if (h == atom_io_reply)
            return mf_kind_make(mf_kind_tag_of(L, env, e[2]), MF_K_IO);
        break;
    case 4:
        if (h == atom_io_request)
            return mf_kind_make(mf_kind_tag_of(L, env, e[3]), MF_K_IO);
        break;
    case 5:
        if (h == atom_DOWN)
            return mf_kind_make(mf_kind_tag_of(L, env, e[4]), MF_K_DOWN);
        break;
    }
    return mf_kind_make(h, MF_K_INFO);
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
