/*
 * mf_watch.h -- the watches of a flow session: the follow/1 labels whose
 * sequential-trace events are kept, with the events.
 *
 * What it owns: an mf_watches (one per flow session, inside it): up to
 * MF_MAX_WATCHES labels, each with its events ({Prev, Cur, From, To,
 * MonotonicUs, Kind, Tag}, newest first) up to the watch's cap, all in an env of its
 * own that goes when the last watch is taken; its lock.  It makes and frees
 * them itself (mf_watches_init, mf_watches_free).
 *
 * Threads: mf_watches_event runs on the scheduler thread of the process
 * that sent; it reads an atomic count of the room left in the watches and,
 * only while some watch has room, takes the lock to compare the label and
 * keep the event.  mf_watches_watch and mf_watches_take run on the caller's
 * scheduler and take the same lock, held for at most one watch's events
 * (bounded by its cap).
 */
#ifndef MF_WATCH_H
#define MF_WATCH_H

#include <erl_nif.h>
#include <stdatomic.h>
#include <stdint.h>

#define MF_MAX_WATCHES 64
#define MF_FLOW_EVENTS_PER_TAKE 500 /* events a take copies: 0.1-0.4 ms */

typedef struct mf_watch mf_watch;

typedef struct mf_watches {
    ErlNifMutex *lock;      /* NULL: no watches (a session that counts sends) */
    /* also read without the lock, to skip it when nothing is watched or
     * every watch is full */
    _Atomic unsigned nwatched;
    _Atomic uint64_t room;  /* events the watches may still keep, all */
    ErlNifEnv *env;         /* labels and events; under lock */
    mf_watch *slots;        /* MF_MAX_WATCHES of them, or NULL; under lock */
} mf_watches;

/* Sets up a zeroed mf_watches; 0 when its lock cannot be made.  Before
 * anyone else can reach w. */
int mf_watches_init(mf_watches *w);

/* Frees what w holds.  Only when no thread can reach w (the session's
 * destructor); safe on a zeroed or half-made one. */
void mf_watches_free(mf_watches *w);

/* Keeps the event {Prev, Cur, From, To, TimeUs, Kind, Tag} of a seq_trace
 * send of `msg' carrying `label' when the label is watched and its cap
 * allows; Kind and Tag are read from msg (mf_kind_word; `reply' != 0 for a
 * reply to an alias) only then, and are atoms: nothing copied for them.
 * Any scheduler thread; the terms are the caller's, copied into w's env. */
void mf_watches_event(mf_watches *w, ErlNifEnv *env, ERL_NIF_TERM label, ERL_NIF_TERM prev,
                      ERL_NIF_TERM cur, ERL_NIF_TERM from, ERL_NIF_TERM to, ERL_NIF_TERM msg,
                      int reply);

/* From now on the events of `label' are kept, `max' at most: `ok', or
 * `full' when MF_MAX_WATCHES labels are watched (or out of memory).  A
 * label watched already starts again with no events.  Caller's thread. */
ERL_NIF_TERM mf_watches_watch(mf_watches *w, ERL_NIF_TERM label, uint64_t max);

/* {Events, more | done} in env: at most MF_FLOW_EVENTS_PER_TAKE of the
 * events kept for `label', newest first.  The first call closes the watch
 * to new events; the one that returns `done' ends it.  {[], done} for a
 * label not watched.  Caller's thread. */
ERL_NIF_TERM mf_watches_take(ErlNifEnv *env, mf_watches *w, ERL_NIF_TERM label);

#endif
