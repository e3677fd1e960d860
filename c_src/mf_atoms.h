/*
 * mf_atoms.h -- every atom the NIF returns or compares, made once in load.
 * Atoms live as long as the VM, so the values stay valid across upgrades.
 */
#ifndef MF_ATOMS_H
#define MF_ATOMS_H

#define MF_ATOMS(X)                                                                   \
    X(active) X(allocator) X(busy) X(collector_down) X(discard) X(enif) X(entries)    \
    X(extra) X(jemalloc) X(jemalloc_error) X(max_pairs) X(memory) X(ok) X(remove)     \
    X(send) X(send_to_non_existing_process) X(shards) X(state) X(stopped) X(trace)    \
    X(trace_status) X(undefined) X(spawn) X(spawned) X(register) X(proc_lib) X(init_p) X(fast_extra)   \
    X(true) X(false) X(more) X(done)  \
    X(jemalloc_build) X(jemalloc_allocated) X(jemalloc_resident) X(rotations) X(retired) \
    X(freed) X(alias_owner) X(static) X(system) X(seq_trace) X(full) X(call)            \
    X(cast) X(event) X(reply) X(exit) X(down) X(io) X(info) X(other) X(io_request)    \
    X(io_reply) X(tuple) X(binary) X(bitstring) X(float) X(fun) X(integer) X(list)    \
    X(map) X(pid) X(port) X(reference) X(max_kinds) X(fast_terms) X(fast_resources) X(pinned) \
    X(erlang) X(apply)                                                                  \
    X(displaced) X(call_sample) X(infinity) X(alias) X(plain_refs) X(own) X(own_left_out) X(add) X(erts_internal) X(dist_spawn_init) \
    X(record) X(native_records) X(none) X(read) X(unread) X(classic) X(records)     \
    X(pairs) X(rolled_up) X(dead) X(groups) X(total) X(open) X(last) X(bytes) X(ends) X(all)

/* Atoms whose text is no C name: atom_<name> is the atom <text>. */
#define MF_ATOMS_NAMED(X) \
    X(elided, "_") /* an argument process events leave out */                   \
    X(gen_call, "$gen_call") X(gen_cast, "$gen_cast") X(gen_event, "$gen_event") \
    X(gen_all_state_event, "$gen_all_state_event")                       \
    X(gen_sync_event, "$gen_sync_event")                                 \
    X(gen_sync_all_state_event, "$gen_sync_all_state_event")             \
    X(EXIT, "EXIT") X(DOWN, "DOWN")

#define MF_ATOM_DECL(name) extern ERL_NIF_TERM atom_##name;
#define MF_ATOM_DECL_NAMED(name, text) extern ERL_NIF_TERM atom_##name;
MF_ATOMS(MF_ATOM_DECL)
MF_ATOMS_NAMED(MF_ATOM_DECL_NAMED)
#undef MF_ATOM_DECL
#undef MF_ATOM_DECL_NAMED

#endif
