/*
 * mf_agg_nif.h -- the aggregate's NIFs (mf_agg_nif.c).
 */
#ifndef MF_AGG_NIF_H
#define MF_AGG_NIF_H

#include <erl_nif.h>
#include <stdint.h>

#include "mf_agg.h"

/* The aggregate resource: its mf_agg, the lock every call takes (the
 * write lock to change it), the local node's atom. */
typedef struct mf_agg_res {
    mf_agg *g;
    ErlNifRWLock *lock;
    ERL_NIF_TERM node;
} mf_agg_res;

/* Endpoint number e as a term of env (`undefined' for none).  The lock
 * held. */
ERL_NIF_TERM mf_agg_res_end_term(ErlNifEnv *env, const mf_agg_res *r, uint32_t e);

/* The resource behind term t (1), or 0.  Any thread. */
int mf_agg_res_get(ErlNifEnv *env, ERL_NIF_TERM t, mf_agg_res **r);
/* The endpoint of an external format, made when new (flags from its term,
 * decoded in env then).  0 out of memory.  The write lock held. */
uint32_t mf_agg_res_end_etf(ErlNifEnv *env, mf_agg_res *r, const unsigned char *etf, size_t len);

int mf_agg_open_type(ErlNifEnv *env, ErlNifResourceFlags flags);
ERL_NIF_TERM mf_nif_agg_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_add(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_new_ends(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_set_groups(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_close(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_full(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_lookup(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_rows(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_busiest(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_last_ends(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_set_rollups(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_sweep(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_take_released(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_open_receivers(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_sum(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_named(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_partner(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_take_top(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_idle_ends(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_agg_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

#endif
