/*
 * mf_kind.c -- the kind and tag of a message (see mf_kind.h).
 */
#include "mf_kind.h"

ERL_NIF_TERM mf_kind_type_tag(ErlNifEnv *env, ERL_NIF_TERM t)
{
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
