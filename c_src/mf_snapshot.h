/*
 * mf_snapshot.h -- snapshot/1: what was counted since the previous one.
 *
 * What it owns: while a snapshot runs, a take resource (its cursor and the
 * index of the current slot's interned terms, C data only) and the
 * session's `taking' flag (one snapshot per session at a time).
 *
 * Threads: the caller's normal scheduler, in steps of at most ~0.5 ms
 * (enif_schedule_nif between them); it reads the slots without stopping
 * the threads that count in them (see mf_shard.h for the protocol).
 */
#ifndef MF_SNAPSHOT_H
#define MF_SNAPSHOT_H

#include "mf_session.h"

/* Load and upgrade: opens (or takes over) the take resource type. */
int mf_snapshot_open_type(ErlNifEnv *env, ErlNifResourceFlags flags);

/* snapshot/1, and the same in chunks: snapshot_start/1, snapshot_next/1. */
ERL_NIF_TERM mf_nif_snapshot(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_snapshot_start(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_snapshot_next(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
/* The same take folded into an aggregate: snapshot_fold_start/2, snapshot_fold/1. */
ERL_NIF_TERM mf_nif_snapshot_fold_start(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_snapshot_fold(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

#endif
