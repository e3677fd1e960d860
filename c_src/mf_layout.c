/*
 * mf_layout.c -- the load-time checks of the term layout mf_layout.h reads.
 * Runs in load (one thread, under the code-loading lock).
 */
#include "mf_layout.h"

uint64_t mf_flatmap_header;

/* The keys rest on a local pid being the only term whose low four bits are
 * MF_PID_TAG (see mf_endpoint_word).  Checked once here, so that a VM where
 * that no longer holds refuses the library instead of mixing up pairs. */
static int pid_layout_ok(ErlNifEnv *env)
{
    ErlNifPid self;
    if (!enif_self(env, &self))
        return 1; /* no process to check with; true of every VM so far */
    return ((uint64_t)enif_make_pid(env, &self) & MF_PID_TAG_MASK) == MF_PID_TAG &&
           ((uint64_t)enif_make_int(env, 3) & MF_PID_TAG_MASK) != MF_PID_TAG &&
           ((uint64_t)enif_make_atom(env, "ok") & MF_PID_TAG_MASK) != MF_PID_TAG &&
           ((uint64_t)enif_make_list(env, 0) & MF_PID_TAG_MASK) != MF_PID_TAG;
}

/* Whether get_extra may read a one-key map itself: a map made here the way
 * the VM makes trace_send's options must read back right, and terms that
 * are not such a map must not pass for one.  Sets mf_flatmap_header. */
static void extra_layout_check(ErlNifEnv *env)
{
    ERL_NIF_TERM key = atom_extra, val = enif_make_int(env, 42), map, other, got;
    const uint64_t *words;
    mf_flatmap_header = 0;
    if (!enif_make_map_from_arrays(env, &key, &val, 1, &map) || ((uint64_t)map & 0x3) != 0x2)
        return;
    words = (const uint64_t *)((uint64_t)map - 0x2);
    if (words[1] != 1)
        return;
    mf_flatmap_header = words[0];
    ERL_NIF_TERM keys2[2] = {atom_extra, atom_ok}, vals2[2] = {val, val};
    if (!get_extra(env, map, &got) || got != val ||
        !enif_make_map_from_arrays(env, keys2, vals2, 2, &other) ||
        ((const uint64_t *)((uint64_t)other - 0x2))[0] != mf_flatmap_header ||
        ((const uint64_t *)((uint64_t)enif_make_tuple2(env, key, val) - 0x2))[0] ==
            mf_flatmap_header)
        mf_flatmap_header = 0;
}

int mf_layout_load(ErlNifEnv *env)
{
    if (!pid_layout_ok(env))
        return 0;
    extra_layout_check(env);
    return 1;
}

int mf_layout_fast_extra(void)
{
    return mf_flatmap_header != 0;
}
