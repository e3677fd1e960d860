/*
 * mf_layout.h -- the NIF's reads of the VM's term layout, inline for the hot
 * path; mf_layout.c checks them when the library loads or is upgraded.
 * These two files are the only ones that know how the VM lays out a term.
 *
 * What it owns: the published layout (mf_layout_t: the words and flags the
 * checks found), one immutable struct reached through an atomic pointer.
 * mf_layout_load computes a new one into a local and publishes it in one
 * release store (under the code-loading lock); a struct once published is
 * never written again nor freed while the library is loaded, so a callback
 * of an old instance that is still running on another scheduler during an
 * upgrade reads one whole struct, the old one or the new, never half of
 * each.  Any thread may call the inline readers.  Each takes the layout
 * (L) it reads with: a callback loads the pointer once (mf_layout_get, an
 * acquire load: a plain load on x86-64, a load-acquire on arm64) and
 * passes it down, so one send reads one layout however many reads it
 * makes; the checks pass the candidate layouts they test.
 */
#ifndef MF_LAYOUT_H
#define MF_LAYOUT_H

#include <erl_nif.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mf_atoms.h"

#define MF_PID_TAG_MASK 0xFULL
#define MF_PID_TAG 0x3ULL
#define MF_ID_TAG 0x0ULL /* what the NIF's own ids carry in those bits */
#define MF_ID_SHIFT 4    /* an interned id is (sequence << MF_ID_SHIFT) | MF_ID_TAG */
#define MF_ID_WORD(seq) (((uint64_t)(seq) << MF_ID_SHIFT) | MF_ID_TAG)
#define MF_ID_SEQ(word) ((uint64_t)(word) >> MF_ID_SHIFT)
/* A receiver word that stands for "an alias of the process whose pid word
 * is w ^ MF_REPLY_FLIP": a reply to one of its aliases. */
#define MF_REPLY_TAG 0x1ULL
#define MF_REPLY_FLIP (MF_PID_TAG ^ MF_REPLY_TAG)

/* A local pid is an immediate whose low four bits are 0x3: the test
 * enif_get_local_pid makes, without the call.  Its word is what
 * ErlNifPid.pid would hold. */
static inline int mf_is_local_pid(ERL_NIF_TERM t)
{
    return ((uint64_t)t & MF_PID_TAG_MASK) == MF_PID_TAG;
}

/* Whether a pair word names its process by itself, without the NIF's
 * interned terms: a local pid's word, or the reply word of one. */
static inline int mf_is_process_word(uint64_t w)
{
    return (w & MF_PID_TAG_MASK) == MF_PID_TAG || (w & MF_PID_TAG_MASK) == MF_REPLY_TAG;
}

/* Whether a word the VM passed to a callback is a term at all.  Where it
 * has nothing to pass the VM passes THE_NON_VALUE, a word whose primary tag
 * is a header's (0 in a release build): OTP 25 calls trace_send/5 with it
 * as both the message and the options when a traced port exits.  No term's
 * word has that tag, so a callback checks each argument it reads. */
static inline int mf_is_term(ERL_NIF_TERM t)
{
    return ((uint64_t)t & 0x3) != 0;
}

/* Whether argv[1] .. argv[argc - 1] are all terms (argv[0], the tag, is
 * an atom the VM makes). */
static inline int mf_args_are_terms(int argc, const ERL_NIF_TERM argv[])
{
    for (int i = 1; i < argc; i++)
        if (!mf_is_term(argv[i]))
            return 0;
    return 1;
}

/* What the checks at load found: each read the inline functions may make
 * themselves instead of asking the VM.  Published whole (mf_layout_get). */
typedef struct {
    /* the header word of a flat map, as the VM lays maps out, when
     * mf_get_extra reads a one-key map right; 0 to always ask
     * enif_get_map_value */
    uint64_t flatmap_header;
    /* the header word of a local process alias (OTP 24+: a reference made
     * by alias/0 or monitor/3's {alias, _}, as gen:call makes one per
     * call), when such a reference holds its owner's pid in its fourth
     * word; 0 to treat every reference as a receiver of its own */
    uint64_t pidref_header;
    /* the header word of a plain local reference (make_ref/0, monitor/2:
     * gen:call's tag for a local call with timeout infinity), when all
     * such references given at load have it, none of the aliases does, and
     * its two words after the header tell them apart; 0 to ask
     * enif_is_ref, and to time no call without an alias */
    uint64_t ref_header;
    /* 1 when mf_is_atom and mf_get_tuple read the term's words themselves
     * (checked against enif_is_atom and enif_get_tuple); 0 to call those */
    int fast_terms;
    /* the types of term this VM has, as its release says (not a read, so
     * kept when every read is off): MF_TYPES_CLASSIC before OTP 29, whose
     * every type enif_term_type knows; MF_TYPES_RECORDS on OTP 29, which
     * adds native records, on which enif_term_type aborts the VM; and
     * MF_TYPES_UNKNOWN for a release after those, or not said */
    int types;
    /* the low six bits of a native record's header word (OTP 29+), when
     * records made at load all have them and no other boxed term does; 0
     * when records cannot be told by their words */
    uint64_t record_tag;
    /* A NIF resource's term, read as enif_get_resource reads it: a magic
     * reference (its header `magic_ref_header', and in its first word
     * after the header no ordinary reference's marker, MF_REF_MARKER)
     * points to its magic binary; that binary is a NIF resource when the
     * word `destructor_at' bytes into it is the VM's resource destructor
     * (`resource_destructor'); its type is the pointer `type_at' bytes in,
     * its object `data_at' bytes in.  All checked after load against
     * resources made then (mf_layout_probe); magic_ref_header 0: ask
     * enif_get_resource */
    uint64_t magic_ref_header;
    uint64_t resource_destructor;
    unsigned destructor_at, type_at, data_at;
} mf_layout_t;

/* The low half of the first word after an ordinary reference's header,
 * on 64-bit little-endian (the VM's ERTS_ORDINARY_REF_MARKER): a magic
 * reference has the same header and its binary's address there. */
#define MF_REF_MARKER 0xFFFFFFFFu

enum { MF_TYPES_UNKNOWN = 0, MF_TYPES_CLASSIC = 1, MF_TYPES_RECORDS = 2 };

/* The layout in use: every read off until the first load published one. */
extern _Atomic(const mf_layout_t *) mf_layout_cur __attribute__((visibility("hidden")));

static inline const mf_layout_t *mf_layout_get(void)
{
    return atomic_load_explicit(&mf_layout_cur, memory_order_acquire);
}

/* The value under `extra' in trace_send's options.  The VM passes a flat map
 * with that one key: a boxed term whose words are the header, the size, the
 * keys tuple, then the value.  Read so, it costs no call into the VM, whose
 * map code is cold in the caches of a traced workload; any other map (or a
 * layout not verified) goes to enif_get_map_value; no term (see is_term)
 * has no `extra'. */
static inline int mf_get_extra(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM opts,
                                    ERL_NIF_TERM *to)
{
    if (!mf_is_term(opts))
        return 0;
    if (L->flatmap_header && ((uint64_t)opts & 0x3) == 0x2) {
        const uint64_t *map = (const uint64_t *)((uint64_t)opts - 0x2);
        if (map[0] == L->flatmap_header && map[1] == 1) {
            const uint64_t *keys = (const uint64_t *)(map[2] - 0x2);
            if (keys[1] == (uint64_t)atom_extra) {
                *to = (ERL_NIF_TERM)map[3];
                return 1;
            }
        }
    }
    return enif_get_map_value(env, opts, atom_extra, to);
}

/* Whether t is a native record (OTP 29+): 1 yes, 0 no, -1 when that
 * cannot be told here (a VM that may have them, whose records were not
 * verified at load).  Any thread. */
static inline int mf_is_native_record(const mf_layout_t *L, ERL_NIF_TERM t)
{
    if (L->types == MF_TYPES_CLASSIC)
        return 0;
    if (!L->record_tag)
        return -1;
    if (((uint64_t)t & 0x3) != 0x2)
        return 0;
    return (*(const uint64_t *)((uint64_t)t - 0x2) & 0x3F) == L->record_tag;
}

/* The words of a local alias (a reference with its owner's pid inside,
 * laid out as mf_layout_load verified), or NULL for any other term or when
 * the layout was not verified.  Any thread. */
static inline const uint64_t *mf_pidref(const mf_layout_t *L, ERL_NIF_TERM t)
{
    if (L->pidref_header && ((uint64_t)t & 0x3) == 0x2) {
        const uint64_t *ref = (const uint64_t *)((uint64_t)t - 0x2);
        if (ref[0] == L->pidref_header && mf_is_local_pid((ERL_NIF_TERM)ref[3]))
            return ref;
    }
    return NULL;
}

/* The id of a local alias from its words (mf_pidref): its reference's
 * number, the two words between the header and the owner. */
static inline uint64_t mf_pidref_id(const uint64_t *ref)
{
    return ref[1] ^ (ref[2] * 0x9E3779B97F4A7C15ULL);
}

/* The pid word of the process a local alias belongs to: the VM keeps it in
 * the reference (to find the process a send to the alias goes to), so a
 * reply to a gen:call's alias can be counted for its caller.  0 for any
 * other term, or when the layout was not verified. */
static inline int mf_alias_owner(const mf_layout_t *L, ERL_NIF_TERM t, uint64_t *owner)
{
    const uint64_t *ref = mf_pidref(L, t);
    if (ref)
        *owner = ref[3];
    return ref != NULL;
}

/* The words of a plain local reference (no alias: laid out as
 * mf_layout_load verified), or NULL.  On 64-bit a magic reference (a
 * resource's, an ETS table's) has the same header: it is a reference
 * too, and its id is only ever compared with a call's.  Any thread. */
static inline const uint64_t *mf_plainref(const mf_layout_t *L, ERL_NIF_TERM t)
{
    if (L->ref_header && ((uint64_t)t & 0x3) == 0x2) {
        const uint64_t *ref = (const uint64_t *)((uint64_t)t - 0x2);
        if (ref[0] == L->ref_header)
            return ref;
    }
    return NULL;
}

/* The id of a call's tag, as mf_calls keys it: a local alias's (its
 * reference's number, the two words between the header and the owner,
 * checked at load: aliases made one after another get different ids), or a plain local reference's, from the same two words
 * (the VM numbers both kinds from one counter).  0 for any other term,
 * or when the layout was not verified.  Any thread. */
static inline int mf_tag_id(const mf_layout_t *L, ERL_NIF_TERM t, uint64_t *id)
{
    const uint64_t *ref = mf_plainref(L, t);
    if (!ref)
        ref = mf_pidref(L, t);
    if (ref)
        *id = mf_pidref_id(ref);
    return ref != NULL;
}

/* Whether t tags a reply in gen's protocol, as the first element of
 * {Tag, Reply}: a reference that is no local alias (a caller's monitor
 * reference, or one from another node), or [alias | Ref] (a reply to a
 * caller's alias).  A local alias is left out: {Alias, Request} is how
 * some servers are asked (inet_gethost_native on OTP 27), and a reply to
 * one is sent to the alias itself.  A plain local reference is read from
 * its words; the rest is asked of the VM.  Any thread. */
static inline int mf_is_reply_tag(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM t)
{
    ERL_NIF_TERM head, tail;
    if (mf_plainref(L, t))
        return 1;
    if (!L->fast_terms)
        return (enif_is_ref(env, t) && !mf_pidref(L, t)) ||
               (enif_get_list_cell(env, t, &head, &tail) && head == atom_alias &&
                enif_is_ref(env, tail));
    switch ((uint64_t)t & 0x3) {
    case 0x2: return !mf_pidref(L, t) && enif_is_ref(env, t); /* boxed */
    case 0x1: /* a list cell */
        return enif_get_list_cell(env, t, &head, &tail) && head == atom_alias &&
               enif_is_ref(env, tail);
    default: return 0;
    }
}

/* enif_get_resource, inline where the layout was checked (mf_layout_probe):
 * the object of resource type `type' behind term t (*obj: borrowed, no
 * reference taken, valid while t is), 1; 0 for a term that is no resource
 * of that type.  Read so, a callback's tracer state
 * costs no call into the VM (the VM asks trace_status on every schedule-in
 * of a traced process, and trace_send on every send).  A magic reference
 * whose binary is no NIF resource, or a resource of another type, answers
 * 0 as enif_get_resource does; any other term goes to it.  Any thread. */
static inline int mf_get_resource(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM t,
                                  ErlNifResourceType *type, void **obj)
{
    if (L->magic_ref_header && ((uint64_t)t & 0x3) == 0x2) {
        const uint64_t *ref = (const uint64_t *)((uint64_t)t - 0x2);
        if (ref[0] == L->magic_ref_header && (uint32_t)ref[1] != MF_REF_MARKER) {
            const char *bin = (const char *)ref[1];
            if (*(const uint64_t *)(bin + L->destructor_at) != L->resource_destructor ||
                *(ErlNifResourceType *const *)(bin + L->type_at) != type)
                return 0;
            *obj = (void *)(bin + L->data_at);
            return 1;
        }
    }
    return enif_get_resource(env, t, type, obj);
}

/* enif_is_atom, inline: an atom is an immediate whose low six bits are
 * 0x0B.  Any thread. */
static inline int mf_is_atom(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM t)
{
    if (L->fast_terms)
        return ((uint64_t)t & 0x3F) == 0x0B;
    return enif_is_atom(env, t);
}

/* enif_get_tuple, inline: a tuple is boxed (low two bits 0x2), and the
 * word it points to is an arity header, (Arity << 6) | 0; its elements
 * follow.  Read so, the kind of a message (mf_kind) costs no call into the
 * VM.  Any thread. */
static inline int mf_get_tuple(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM t,
                                    int *arity, const ERL_NIF_TERM **elems)
{
    if (!L->fast_terms)
        return enif_get_tuple(env, t, arity, elems);
    if (((uint64_t)t & 0x3) != 0x2)
        return 0;
    const uint64_t *box = (const uint64_t *)((uint64_t)t - 0x2);
    if ((box[0] & 0x3F) != 0)
        return 0;
    *arity = (int)(box[0] >> 6);
    *elems = (const ERL_NIF_TERM *)(box + 1);
    return 1;
}


/* Checks the reads against this VM; called from load and upgrade, after
 * the atoms are made, with the load info msgflow_tracer passes: `{Aliases,
 * Refs, Types}', a list of {Alias, OwnerPid}, a list of references that
 * are no aliases, and the VM's types (`classic', {records, Records} or
 * {unknown, Records}, Records native records made for the check).  Returns 0 when a local pid's tag is not what mf_is_local_pid
 * tests (the library must then refuse to load: pair keys would mix up),
 * 1 otherwise; each read is on only if its check passed.  What it found is
 * published in one step (see the top of this file); a layout equal to the
 * one in use is not published again.  Load and upgrade only (the
 * code-loading lock). */
int mf_layout_load(ErlNifEnv *env, ERL_NIF_TERM load_info);

/* 1 when mf_get_extra reads the map's words itself.  Any thread. */
int mf_layout_fast_extra(void);

/* 1 when alias_owner reads an alias's owner.  Any thread. */
int mf_layout_alias_owner(void);

/* 1 when a plain local reference is read from its words (round trips of
 * calls without an alias).  Any thread. */
int mf_layout_plain_refs(void);

/* 1 when mf_is_atom and mf_get_tuple read terms themselves.  Any thread. */
int mf_layout_fast_terms(void);

/* 1 when mf_get_resource reads a resource's term itself.  Any thread. */
int mf_layout_fast_resources(void);

/* Checks the resource read (mf_get_resource) against this VM, with
 * `others' a list of references that are no NIF resource (plain ones,
 * aliases, an ETS table's, an atomics array's), and publishes it when the
 * check passes: once per VM (a later call finds it on; a check that
 * failed is made again).  1 when the read is on.  After load, from a process (the type load opened
 * takes resources only once load has returned): msgflow_tracer's on_load
 * calls it right after erlang:load_nif/2.  Any scheduler thread; one call
 * checks at a time. */
int mf_layout_probe(ErlNifEnv *env, ERL_NIF_TERM others);

/* Opens the type of the resource check's resources (mf_layout_probe);
 * NULL when it cannot be, and the read stays off.  Load and upgrade, last
 * (after nothing can fail the load: the type would go, the pointer stay). */
void mf_layout_open_type(ErlNifEnv *env);

/* What native records are on this VM: atom_none (it has none: before OTP
 * 29), atom_read (told by their words, checked at load) or atom_unread
 * (the VM may have them and they cannot be told from bitstrings: both are
 * tagged `other').  Any thread. */
ERL_NIF_TERM mf_layout_native_records(void);

#endif
