/*
 * mf_agg_nif.h -- the aggregate's NIFs (mf_agg_nif.c).
 */
#ifndef MF_AGG_NIF_H
#define MF_AGG_NIF_H

#include <erl_nif.h>

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
ERL_NIF_TERM mf_nif_agg_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

#endif
