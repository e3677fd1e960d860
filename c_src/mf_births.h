/*
 * mf_births.h -- spawn and register events, kept so that a process keeps
 * its name and initial call after it exits.
 *
 * What it owns: an mf_births (one per session, inside it): the births
 * recorded and not yet taken, a list in an env of its own, at most
 * MF_MAX_BIRTHS of them; later ones are counted as dropped.  It makes and
 * frees its lock and env itself (mf_births_init, mf_births_free).
 *
 * Threads: mf_birth records on the tracee's scheduler thread (trace_procs),
 * taking the births mutex once per spawn and register (never per send);
 * mf_births_take runs on the collector's scheduler (births_take/1).
 */
#ifndef MF_BIRTHS_H
#define MF_BIRTHS_H

#include <erl_nif.h>
#include <stdint.h>

#define MF_MAX_BIRTHS 1000000 /* kept between two births_take calls */
#define MF_BIRTHS_CHUNK 1024  /* births_take returns at most this many */

typedef struct mf_births {
    ErlNifMutex *lock;
    ErlNifEnv *env;     /* owned; holds `list'; NULL when none are kept */
    ERL_NIF_TERM list;  /* {Pid, What}, newest first */
    uint64_t n;         /* in `list' */
    uint64_t dropped;   /* past MF_MAX_BIRTHS since the last take */
} mf_births;

/* Sets up an zeroed mf_births; 0 when its lock cannot be made.  Any
 * thread, before anyone else can reach b. */
int mf_births_init(mf_births *b);

/* Frees what b holds (its lock and env).  Only when no thread can reach b
 * (the session's destructor); safe on a zeroed or half-made one. */
void mf_births_free(mf_births *b);

/* Any scheduler thread.  What a spawn's {M, F, Args} says about the new
 * process, as a term of env: {M, F, Arity}, or for proc_lib:init_p/5
 * {proc_lib, {M, F, ArgsSummary}}, for a fun {fun, Fun}; `undefined' for
 * anything else. */
ERL_NIF_TERM mf_spawn_summary(ErlNifEnv *env, ERL_NIF_TERM mfa);

/* Any scheduler thread.  Appends {Pid, What} (copied) to b. */
void mf_birth(ErlNifEnv *env, mf_births *b, ERL_NIF_TERM pid, ERL_NIF_TERM what);

/* {[{Pid, What}], Dropped} in env: at most MF_BIRTHS_CHUNK of the births
 * not yet taken (the newest ones, oldest of them first), and how many were
 * lost past the cap since the last call.  The call that takes the last
 * ones frees b's env.  Any normal scheduler; bounded by the chunk (well
 * under 1 ms). */
ERL_NIF_TERM mf_births_take(ErlNifEnv *env, mf_births *b);

#endif
