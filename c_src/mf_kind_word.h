/*
 * mf_kind_word.h -- a kind word's layout and the kinds' names, with no
 * atom of the NIF's: what both NIF libraries (the tracer's, and the
 * aggregate's, mf_agg_nif.c) read of a kind word.  A kind word is (Tag <<
 * MF_KIND_BITS) | Kind: Kind one of MF_K_* (never 0), Tag the word of an
 * atom (atoms are global to the VM, so the word is one term in either
 * library); 0 is "no kind".
 *
 * Threads: any; constants only.
 */
#ifndef MF_KIND_WORD_H
#define MF_KIND_WORD_H

#include <stdint.h>

#define MF_KIND_BITS 4
#define MF_KIND_MASK ((1ULL << MF_KIND_BITS) - 1)

enum {
    MF_K_NONE = 0,
    MF_K_CALL = 1,   /* {'$gen_call', From, Request} */
    MF_K_CAST = 2,   /* {'$gen_cast', Request} */
    MF_K_EVENT = 3,  /* {'$gen_event', E}, {'$gen_all_state_event', E}, sync variants */
    MF_K_SYSTEM = 4, /* {system, From, Request} */
    MF_K_REPLY = 5,  /* {Tag, Reply}: to an alias (counted for its owner), or
                      * Tag a reference or [alias | Ref] (gen:reply/2's shapes) */
    MF_K_EXIT = 6,   /* {'EXIT', From, Reason} */
    MF_K_DOWN = 7,   /* {'DOWN', Ref, Type, Object, Info} */
    MF_K_IO = 8,     /* {io_request, From, ReplyAs, Request}, {io_reply, ReplyAs, Reply} */
    MF_K_INFO = 9,   /* anything else */
    MF_K_COUNT = 10
};

/* Each kind's atom's text, by MF_K_* (what views show). */
static const char *const mf_kind_names[MF_K_COUNT] = {
    "none", "call", "cast", "event", "system", "reply", "exit", "down", "io", "info"};

#endif
