/*
 * mf_kind.c -- the kind and tag of a message (see mf_kind.h).
 */
#include "mf_kind.h"

/* The type of t asked one test at a time (each safe on any term), for a
 * VM where enif_term_type may meet a type it aborts on: what is left after
 * the tests (a bitstring that is no binary, a native record, a type of a
 * later release) is `other'. */
static ERL_NIF_TERM type_tag_by_tests(ErlNifEnv *env, ERL_NIF_TERM t)
{
    double d;
    if (enif_is_binary(env, t))
        return atom_binary;
    if (enif_is_list(env, t))
        return atom_list;
    if (enif_is_map(env, t))
        return atom_map;
    if (enif_is_number(env, t))
        return enif_get_double(env, t, &d) ? atom_float : atom_integer;
    if (enif_is_pid(env, t))
        return atom_pid;
    if (enif_is_ref(env, t))
        return atom_reference;
    if (enif_is_fun(env, t))
        return atom_fun;
    if (enif_is_port(env, t))
        return atom_port;
    return atom_other;
}

ERL_NIF_TERM mf_kind_type_tag(const mf_layout_t *L, ErlNifEnv *env, ERL_NIF_TERM t)
{
    switch (mf_is_native_record(L, t)) {
    case 1: return atom_record;
    case 0:
        if (L->types != MF_TYPES_UNKNOWN)
            break; /* enif_term_type knows every other type of this VM */
        return type_tag_by_tests(env, t);
    default: return type_tag_by_tests(env, t);
    }
    switch (enif_term_type(env, t)) {
    case ERL_NIF_TERM_TYPE_BITSTRING:
        return enif_is_binary(env, t) ? atom_binary : atom_bitstring;
    case ERL_NIF_TERM_TYPE_FLOAT: return atom_float;
    case ERL_NIF_TERM_TYPE_FUN: return atom_fun;
    case ERL_NIF_TERM_TYPE_INTEGER: return atom_integer;
    case ERL_NIF_TERM_TYPE_LIST: return atom_list;
    case ERL_NIF_TERM_TYPE_MAP: return atom_map;
    case ERL_NIF_TERM_TYPE_PID: return atom_pid;
    case ERL_NIF_TERM_TYPE_PORT: return atom_port;
    case ERL_NIF_TERM_TYPE_REFERENCE: return atom_reference;
    default: return atom_undefined;
    }
}

ERL_NIF_TERM mf_kind_atom(uint64_t kw)
{
    switch (kw & MF_KIND_MASK) {
    case MF_K_CALL: return atom_call;
    case MF_K_CAST: return atom_cast;
    case MF_K_EVENT: return atom_event;
    case MF_K_SYSTEM: return atom_system;
    case MF_K_REPLY: return atom_reply;
    case MF_K_EXIT: return atom_exit;
    case MF_K_DOWN: return atom_down;
    case MF_K_IO: return atom_io;
    case MF_K_INFO: return atom_info;
    default: return atom_undefined;
    }
}
