/*
 * mf_proc_events.h -- spawn and register events, kept so that a process keeps
 * its name and initial call after it exits.
 *
 * What it owns: an mf_proc_events (one per session, inside it): the proc_events
 * recorded and not yet taken, a list in an env of its own, at most
 * MF_MAX_PROC_EVENTS of them; later ones are counted as dropped.  It makes and
 * frees its lock and env itself (mf_proc_events_init, mf_proc_events_free).
 *
 * Threads: mf_proc_event records on the tracee's scheduler thread (trace_procs),
 * taking the process events mutex once per spawn and register (never per send);
 * mf_proc_events_take runs on the collector's scheduler (proc_events_take/1).
 */
#ifndef MF_PROC_EVENTS_H
#define MF_PROC_EVENTS_H

#include <erl_nif.h>
#include <stdint.h>

#define MF_MAX_PROC_EVENTS 1000000 /* kept between two proc_events_take calls */
#define MF_PROC_EVENTS_CHUNK 1024  /* proc_events_take returns at most this many */

typedef struct mf_proc_events {
    ErlNifMutex *lock;
    ErlNifEnv *env;     /* owned; holds `list'; NULL when none are kept */
    ERL_NIF_TERM list;  /* {Pid, What}, newest first */
    uint64_t n;         /* in `list' */
    uint64_t dropped;   /* past MF_MAX_PROC_EVENTS since the last take */
} mf_proc_events;

/* Sets up a zeroed mf_proc_events; 0 when its lock cannot be made.  Any
 * thread, before anyone else can reach pe. */
int mf_proc_events_init(mf_proc_events *pe);

/* Frees what pe holds (its lock and env).  Only when no thread can reach pe
 * (the session's destructor); safe on a zeroed or half-made one. */
void mf_proc_events_free(mf_proc_events *pe);

/* Any scheduler thread.  What a spawn's {M, F, Args} says about the new
 * process, as a term of env: {M, F, Arity}, or for proc_lib:init_p/5
 * {proc_lib, {M, F, ArgsSummary}}, for a fun {fun, Fun}, for a spawn from
 * another node (erts_internal:dist_spawn_init/1) the {M, F, Arity} it
 * runs; `undefined' for anything else. */
ERL_NIF_TERM mf_spawn_summary(ErlNifEnv *env, ERL_NIF_TERM mfa);

/* Any scheduler thread.  Appends {Pid, What} (copied) to pe. */
void mf_proc_event(ErlNifEnv *env, mf_proc_events *pe, ERL_NIF_TERM pid, ERL_NIF_TERM what);

/* {[{Pid, What}], Dropped} in env: at most MF_PROC_EVENTS_CHUNK of the process
 * events not yet taken (the newest ones, oldest of them first), and how many were
 * lost past the cap since the last call.  The call that takes the last
 * ones frees pe's env.  Any normal scheduler; bounded by the chunk (well
 * under 1 ms). */
ERL_NIF_TERM mf_proc_events_take(ErlNifEnv *env, mf_proc_events *pe);

#endif
