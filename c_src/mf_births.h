/*
 * mf_births.h -- spawn and register events, kept so that a process keeps
 * its name and initial call after it exits.
 *
 * What it owns: per session, the births recorded and not yet taken (a list
 * in an env of the session's, under the session's births_lock), at most
 * MF_MAX_BIRTHS of them; later ones are counted as dropped.
 *
 * Threads: trace_procs records on the tracee's scheduler thread, taking the
 * births mutex once per spawn and register (never per send); births_take
 * runs on the collector's scheduler.
 */
#ifndef MF_BIRTHS_H
#define MF_BIRTHS_H

#include "mf_session.h"

#define MF_MAX_BIRTHS 1000000 /* kept between two births_take calls */
#define MF_BIRTHS_CHUNK 1024  /* births_take returns at most this many */

/* Load only: the atoms births use. */
void mf_births_load(ErlNifEnv *env);

/* Any scheduler thread.  What a spawn's {M, F, Args} says about the new
 * process, as a term of env: {M, F, Arity}, or for proc_lib:init_p/5
 * {proc_lib, {M, F, ArgsSummary}}; `undefined' for anything else. */
ERL_NIF_TERM mf_spawn_summary(ErlNifEnv *env, ERL_NIF_TERM mfa);

/* Any scheduler thread.  Appends {Pid, What} (copied) to s's births. */
void mf_birth(ErlNifEnv *env, mf_session *s, ERL_NIF_TERM pid, ERL_NIF_TERM what);

/* births_take/1 (see below). */
ERL_NIF_TERM mf_nif_births_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

#endif
