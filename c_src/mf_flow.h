/*
 * mf_flow.h -- request flows: sequential-trace events, as the node's system
 * tracer (seq_trace:set_system_tracer({msgflow_tracer, FlowSession})), and
 * the call entries that start flows (msgflow:follow_calls/2).
 *
 * What it owns
 * ------------
 * - A flow session is an mf_session of type MF_SESSION_FLOW.  Its pair tables
 *   count each seq_trace `send' event by (label, sender, receiver): the key's
 *   first word is the interned term {Label, Sender}, the second the
 *   receiver's word, so counting is the send path's (the calling thread's
 *   shard, no lock, the message never copied).  The session's watches
 *   (mf_watch.h) keep the events of some labels (msgflow:follow/1 flows,
 *   and a slice of each follow_calls entry's per interval, for depth), up
 *   to each watch's cap; every event is counted all the same.
 * - An entry is a resource of its own, the tracer state of a meta call
 *   trace pattern: it counts the calls and answers `trace' to one in
 *   `every', so that the pattern's match spec sets the trace token on that
 *   call only.
 *
 * Threads
 * -------
 * The session NIFs (flow_session_new/2, flow_watch/3, flow_take/2) run on
 * the caller's scheduler (the watches' threads: mf_watch.h).  Entries:
 * entry_call runs on the caller's scheduler thread (one atomic add);
 * entry_new/info/stop on any.
 *
 * Memory: entries are resources (enif).
 */
#ifndef MF_FLOW_H
#define MF_FLOW_H

#include <erl_nif.h>

#include "mf_session.h"

/* Load and upgrade: opens (or takes over) the entry resource type. */
int mf_flow_open_type(ErlNifEnv *env, ErlNifResourceFlags flags);

/* An entry behind a tracer state: 1 and its answer to enabled_call (`trace'
 * for a sampled call, else `discard'), counting the call; 0 when the
 * state is no entry.  Caller's thread. */
int mf_entry_call(ErlNifEnv *env, ERL_NIF_TERM state, ERL_NIF_TERM *answer);

/* An entry's answer to trace_status: 1 and `trace' while it is active,
 * `remove' after entry_stop/1; 0 when the state is no entry. */
int mf_entry_status(ErlNifEnv *env, ERL_NIF_TERM state, ERL_NIF_TERM *answer);

/* The NIFs: flow_session_new/2, flow_watch/3, flow_take/2, entry_new/1,
 * entry_info/1, entry_stop/1. */
ERL_NIF_TERM mf_nif_flow_session_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_flow_watch(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_flow_take(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_entry_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_entry_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM mf_nif_entry_stop(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

#endif
