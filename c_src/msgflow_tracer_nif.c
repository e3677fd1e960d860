/*
 * msgflow_tracer_nif.c -- the erl_tracer module msgflow_tracer: its
 * callbacks, the NIF table and load.  The rest of the NIF is in files of
 * its own: sessions and slots (mf_session), generations (mf_gen),
 * interning (mf_intern), proc_events (mf_proc_events), the yielding snapshot
 * (mf_snapshot), the reads that rely on the VM's term layout (mf_layout),
 * the per-thread tables (mf_shard), the allocator (mf_alloc), request
 * flows' watches (mf_watch) and their NIFs and call entries (mf_flow),
 * msgflow's own processes, whose sends are left out (mf_own).
 *
 * What it owns: the atoms (made once in load, valid for the VM's life), the
 * enif_alloc allocator handed to mf_alloc_choose as the fallback, and
 * each thread's cache of its slot (mf_tls), one per session type (the
 * collector's session that counts sends, the flow keeper's that counts
 * seq_trace events), so that a thread doing both keeps both.
 *
 * Threads: the enabled and trace callbacks run on the tracee's scheduler
 * thread.  A thread finds its slot through the thread-local cache tagged
 * with the session id, so after its first message a thread takes no lock
 * and writes nothing shared (c_src/DESIGN.md walks the hot path).  Load,
 * upgrade and unload run under the code-loading lock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, RTLD_NODELETE */
#endif
#include <erl_nif.h>

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "mf_agg_nif.h"
#include "mf_atoms.h"
#include "mf_proc_events.h"
#include "mf_calls.h"
#include "mf_flow.h"
#include "mf_intern.h"
#include "mf_kind.h"
#include "mf_layout.h"
#include "mf_session.h"
#include "mf_snapshot.h"

/* ------------------------------------------------------------------ atoms */

#define MF_ATOM_DEF(name) ERL_NIF_TERM atom_##name;
#define MF_ATOM_DEF_NAMED(name, text) ERL_NIF_TERM atom_##name;
MF_ATOMS(MF_ATOM_DEF)
MF_ATOMS_NAMED(MF_ATOM_DEF_NAMED)
#undef MF_ATOM_DEF
#undef MF_ATOM_DEF_NAMED

static void make_atoms(ErlNifEnv *env)
{
#define MF_ATOM_MAKE(name) atom_##name = enif_make_atom(env, #name);
#define MF_ATOM_MAKE_NAMED(name, text) atom_##name = enif_make_atom(env, text);
    MF_ATOMS(MF_ATOM_MAKE)
    MF_ATOMS_NAMED(MF_ATOM_MAKE_NAMED)
#undef MF_ATOM_MAKE
#undef MF_ATOM_MAKE_NAMED
}

/* ------------------------------------------------------------------ slots */

/* The calling thread's slot for one session of each type (MF_SESSION_*), and
 * its generation: valid while `epoch' is the session's (session_rotate
 * changes it).  `gen' and
 * `shard' are the thread's own generation and its shard, NULL for the
 * shared spill slot (which takes its lock and reads its generation there):
 * a send between two local pids then reads nothing of the slot. */
typedef struct mf_tls_cache {
    uint64_t epoch;
    uint64_t session_id;
    mf_slot *slot;
    mf_gen *gen;
    mf_shard *shard;
    int kinds; /* the session counts kind words */
    /* calls this thread sends before it notes the next one's round trip
     * (mf_calls): counted down on each request, reset to the session's
     * sample when it reaches 0; 0 for a session new to the thread, whose
     * first call is noted */
    int call_countdown;
    /* sends this thread counts before it measures the next one's size
     * (mf_size), as call_countdown */
    int size_countdown;
    /* the owner thread's pointer (thread_pointer()), once send_cache()
     * published this cache; written by the owner only */
    _Atomic uintptr_t tp;
} mf_tls_cache;
static __thread mf_tls_cache mf_tls_all[MF_SESSION_TYPES];
#define mf_tls (mf_tls_all[MF_SESSION_SEND])

/* The calling thread's cache for the session that counts sends, found
 * without a call into the loader.  The loader gives this library's
 * thread-local block no static space (jemalloc's 2.6 KB in it is more
 * than the surplus glibc keeps for libraries loaded later), so `&mf_tls'
 * is a call to _dl_tlsdesc_dynamic: 5.5 % of the direct loop's samples.
 * Instead, a table indexed by a hash of the thread pointer (the %fs base
 * on x86-64, tpidr_el0 on aarch64) holds each thread's cache's address;
 * a thread takes the cache it finds there when the cache's `tp' is its
 * own, and the thread-local path otherwise (its first send, a slot two
 * threads share, another platform), which publishes it.  The callers
 * are scheduler threads, which live as long as the VM, so an address in
 * the table stays valid while the library is loaded (the table is the
 * library's and goes with it).  Any scheduler thread. */
#define MF_TP_BITS 10
static _Atomic(mf_tls_cache *) mf_tp_caches[1u << MF_TP_BITS];

static inline uintptr_t thread_pointer(void)
{
    uintptr_t tp;
#if defined(__x86_64__)
    __asm__("mov %%fs:0, %0" : "=r"(tp));
#elif defined(__aarch64__)
    __asm__("mrs %0, tpidr_el0" : "=r"(tp));
#else
    tp = 0;
#endif
    return tp;
}

static inline unsigned tp_index(uintptr_t tp)
{
    return (unsigned)(((uint64_t)tp * 0x9E3779B97F4A7C15ULL) >> (64 - MF_TP_BITS));
}

static __attribute__((noinline)) mf_tls_cache *send_cache_slow(uintptr_t tp)
{
    mf_tls_cache *c = &mf_tls;
    if (tp) {
        atomic_store_explicit(&c->tp, tp, memory_order_relaxed);
        atomic_store_explicit(&mf_tp_caches[tp_index(tp)], c, memory_order_release);
    }
    return c;
}

static inline mf_tls_cache *send_cache(void)
{
    uintptr_t tp = thread_pointer();
    mf_tls_cache *c = atomic_load_explicit(&mf_tp_caches[tp_index(tp)], memory_order_acquire);
    if (tp && c && atomic_load_explicit(&c->tp, memory_order_relaxed) == tp)
        return c;
    return send_cache_slow(tp);
}

/* The calling thread's slot in s, claimed on its first send for s, with a
 * generation of `epoch' (a new one after a rotation), and cached.  NULL:
 * out of memory. */
static mf_slot *find_slot(mf_session *s, uint64_t epoch)
{
    mf_tls_cache *c = &mf_tls_all[s->type];
    mf_slot *slot = c->session_id == s->id ? c->slot : mf_slot_claim(s);
    if (!slot)
        return NULL;
    if (c->session_id != s->id)
        c->call_countdown = c->size_countdown = 0;
    c->session_id = s->id;
    c->slot = slot;
    c->epoch = epoch;
    c->kinds = s->kinds;
    if (slot->lock) {
        c->gen = NULL;
        c->shard = NULL;
    } else {
        c->gen = mf_slot_renew(slot, epoch);
        c->shard = c->gen->shard;
    }
    return slot;
}

/* ------------------------------------------------------ tracer callbacks */

static inline int active(const mf_session *s)
{
    return atomic_load_explicit(&s->state, memory_order_relaxed) == MF_ACTIVE;
}

/* enabled(TraceTag, TracerState, Tracee).  The VM asks trace_status each
 * time it schedules a traced process in (once per message in a ping-pong),
 * so that answer is one load: the session's state, which stop/0 and the
 * monitor on the collector (session_down) set. */
static ERL_NIF_TERM nif_enabled(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    mf_session *s;
    /* `remove' is the answer to trace_status only: the VM removes a tracer
     * on that answer alone, and expects no other tag to get it (an
     * assertion in its debug build).  A tracer state this library cannot
     * read (the session of a deleted and purged instance of the module)
     * or a stopped session is removed there, and discarded elsewhere. */
    ERL_NIF_TERM answer;
    (void)argc;
    /* the state is the one argument read (the tracee never is) */
    if (!mf_is_term(argv[1]))
        return argv[0] == atom_trace_status ? atom_remove : atom_discard;
    const mf_layout_t *L = mf_layout_get();
    if (argv[0] == atom_trace_status) {
        if (mf_get_session(L, env, argv[1], &s))
            return active(s) ? atom_trace : atom_remove;
        /* a call entry's meta pattern (follow_calls) */
        return mf_entry_status(env, argv[1], &answer) ? answer : atom_remove;
    }
    if (!mf_get_session(L, env, argv[1], &s))
        /* a call entry's meta pattern asks here: see nif_enabled_call */
        return argv[0] == atom_call && mf_entry_call(env, argv[1], &answer) ? answer
                                                                           : atom_discard;
    if (argv[0] == atom_send || argv[0] == atom_send_to_non_existing_process)
        return active(s) && s->type == MF_SESSION_SEND ? atom_trace : atom_discard;
    /* the system tracer asks before each seq_trace event of a token with
     * any flag, and before a token send's serial is updated */
    if (argv[0] == atom_seq_trace)
        return active(s) && s->type == MF_SESSION_FLOW ? atom_trace : atom_discard;
    return atom_discard;
}

/* enabled_call(call | return_to | ..., TracerState, Tracee): for a call
 * entry, counts the call and answers `trace' for a sampled one (the
 * pattern's match spec, which sets the trace token, runs only then), else
 * `discard'.  `discard' for anything else.
 *
 * A meta pattern (what follow_calls sets) does not get here: ERTS 25-27
 * asks a meta tracer module through trace_call/5's slot with three
 * arguments, or, when the module has no trace_call/5, through enabled/3
 * with tag `call'.  So the module has no trace_call/5 (a call event goes
 * to trace/5, which ignores it) and enabled/3 answers `call' as this does;
 * this one serves call flags set on processes. */
static ERL_NIF_TERM nif_enabled_call(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    ERL_NIF_TERM answer;
    if (mf_args_are_terms(argc, argv) && argv[0] == atom_call && mf_entry_call(env, argv[1], &answer))
        return answer;
    return atom_discard;
}

/* enabled_send(send | send_to_non_existing_process, TracerState, Tracee):
 * always `trace', touching nothing.  Whether the session is still active is
 * answered by trace_status (enabled/3), which the VM asks when it schedules
 * a traced process in and when flags are read or set; stop/0 clears the
 * flags itself, and a collector restarted after a crash sweeps the flags its
 * predecessor left. */
static ERL_NIF_TERM nif_enabled_send(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)env;
    (void)argc;
    (void)argv;
    return atom_trace;
}

/* The key word of a receiver: a reply to a local process's alias (such as
 * gen:call's, one per call) is counted for the alias's owner, tagged as a
 * reply (MF_REPLY_TAG), so that a million calls make one pair, not a
 * million, and *alias is the alias's words (for its round trip); anything
 * else as mf_endpoint_word has it, *alias NULL.  Owner thread. */
static inline int receiver_word(const mf_layout_t *L, ErlNifEnv *env, mf_gen *g, ERL_NIF_TERM to,
                                uint64_t *w, const uint64_t **alias)
{
    if ((*alias = mf_pidref(L, to))) {
        *w = (*alias)[3] ^ MF_REPLY_FLIP;
        return 1;
    }
    return mf_endpoint_word(env, &g->interns, to, w);
}

/* One send as the callbacks pass it down: its sender and receiver (terms
 * of the callback's arguments, or a flow's interned key), whether the
 * receiver was gone, and its message as read once (mf_msg).  On the
 * callback's stack. */
typedef struct mf_send {
    ERL_NIF_TERM from, to;
    int dead;
    mf_msg msg;
} mf_send;

/* A gen:call's request {'$gen_call', {Caller, Tag}, Request} from a local
 * pid to a local pid or a registered name, Tag [alias | Alias] or Alias
 * (a call with a timeout) or a plain monitor reference (a local call with
 * timeout infinity), noted for its round trip (mf_calls) by the tag's id:
 * called for the sampled one of this thread's calls (note_call), whose
 * countdown `t' it resets.  Reads From, {Caller, Tag} (mf_kind_read kept
 * it), and the clock.  Any scheduler thread (the caller's), with the
 * layout its callback loaded (L). */
static void note_sampled_call(const mf_layout_t *L, ErlNifEnv *env, mf_session *s,
                              mf_tls_cache *t, ERL_NIF_TERM from, ERL_NIF_TERM to,
                              ERL_NIF_TERM call_from, uint64_t kind)
{
    mf_calls *c = atomic_load_explicit(&s->calls, memory_order_acquire);
    t->call_countdown = c ? (int)c->sample : 1 << 20;
    const ERL_NIF_TERM *f;
    int n;
    ERL_NIF_TERM alias, head, tail;
    uint64_t id;
    if (!c || !mf_is_local_pid(from) || !(mf_is_local_pid(to) || mf_is_atom(L, env, to)) ||
        !mf_get_tuple(L, env, call_from, &n, &f) || n != 2)
        return;
    alias = enif_get_list_cell(env, f[1], &head, &tail) ? tail : f[1];
    if (mf_tag_id(L, alias, &id))
        mf_calls_request(c, id, (uint64_t)from, (uint64_t)to, kind,
                         (uint64_t)enif_monotonic_time(ERL_NIF_NSEC));
}

/* A call's request counted: this thread's countdown (t, this session's
 * cache: trace_send found the slot through it) goes down by one, inline;
 * only the sampled call reads further (note_sampled_call). */
static inline void note_call(const mf_layout_t *L, ErlNifEnv *env, mf_session *s,
                             mf_tls_cache *t, ERL_NIF_TERM from, ERL_NIF_TERM to,
                             const mf_msg *m, uint64_t kind)
{
    if (--t->call_countdown <= 0)
        note_sampled_call(L, env, s, t, from, to, m->call_from, kind);
}

/* A reply sent to a local alias (its words, as receiver_word read them):
 * when it answers a sampled call (one load of the in-flight bitmap says
 * whether it may), its round trip.  Any scheduler thread (the server's). */
static inline void reply_call(mf_session *s, const uint64_t *alias)
{
    mf_calls *c = atomic_load_explicit(&s->calls, memory_order_relaxed);
    if (c) {
        uint64_t id = mf_pidref_id(alias);
        if (mf_calls_maybe(c, id))
            mf_calls_reply(c, id, (uint64_t)enif_monotonic_time(ERL_NIF_NSEC));
    }
}

/* A reply {Mref, Reply} sent to a local pid (kind MF_K_REPLY, not to an
 * alias), Mref as mf_kind_read kept it (`tag'): when it is a plain local
 * reference that tags a sampled call (one load of the bitmap, as
 * reply_call), its round trip.  Any scheduler thread (the server's), with
 * the layout its callback loaded (L). */
static inline void reply_to_pid(const mf_layout_t *L, mf_session *s, ERL_NIF_TERM tag)
{
    const uint64_t *ref;
    mf_calls *c = atomic_load_explicit(&s->calls, memory_order_relaxed);
    if (c && (ref = mf_plainref(L, tag))) {
        uint64_t id = mf_pidref_id(ref);
        if (mf_calls_maybe(c, id))
            mf_calls_reply(c, id, (uint64_t)enif_monotonic_time(ERL_NIF_NSEC));
    }
}

/* The sampled one of this thread's sends (measure): its message's size
 * added to edge (from, to), `to' a receiver's word that is an immediate (a
 * local pid or registered name; a send to an alias: its owner's pid), never
 * a boxed term (edges outlive the call), or 0 for a receiver that is not
 * measured; the countdown `t' reset.  Reads the message in place.  Any
 * scheduler thread (the sender's), with the layout its callback loaded
 * (L). */
static void measure_sampled(const mf_layout_t *L, ErlNifEnv *env, mf_session *s,
                            mf_tls_cache *t, ERL_NIF_TERM from, uint64_t to, ERL_NIF_TERM msg)
{
    mf_sizes *z = atomic_load_explicit(&s->sizes, memory_order_acquire);
    t->size_countdown = z ? (int)z->sample : 1 << 30;
    if (z && to && mf_is_local_pid(from)) {
        mf_size m = mf_size_measure(L, env, z, msg);
        mf_sizes_add(z, (uint64_t)from, to, &m);
    }
}

/* A send counted: this thread's size countdown goes down by one, inline;
 * only the sampled send reads the message for its size. */
static inline void measure(const mf_layout_t *L, ErlNifEnv *env, mf_session *s, mf_tls_cache *t,
                           ERL_NIF_TERM from, uint64_t to, ERL_NIF_TERM msg)
{
    if (--t->size_countdown <= 0)
        measure_sampled(L, env, s, t, from, to, msg);
}

/* What follows the count of a send from `from' to `to' of message m, kind
 * word k (0: kinds off): its sampled size, measured for `size_to'
 * (measure), and its round trip: a reply to a local alias (`alias', its
 * words), a call's request, or a reply to a pid.  The one dispatch both
 * paths of trace_send take.  Owner thread, as count_send. */
static inline void after_count(const mf_layout_t *L, ErlNifEnv *env, mf_session *s,
                               mf_tls_cache *t, ERL_NIF_TERM from, ERL_NIF_TERM to,
                               const mf_msg *m, uint64_t k, const uint64_t *alias,
                               uint64_t size_to)
{
    measure(L, env, s, t, from, size_to, m->term);
    if (alias)
        reply_call(s, alias);
    else if ((k & MF_KIND_MASK) == MF_K_CALL)
        note_call(L, env, s, t, from, to, m, k);
    else if ((k & MF_KIND_MASK) == MF_K_REPLY)
        reply_to_pid(L, s, m->reply_tag);
}

/* mf_kind_read out of line, for count_send: a send whose message the
 * callback did not read (the thread's cache is another session's) is
 * rare, and its copy of the read would double count_send's code. */
static __attribute__((noinline)) uint64_t kind_read(const mf_layout_t *L, ErlNifEnv *env,
                                                    mf_msg *m)
{
    return mf_kind_read(L, env, m->term, m);
}

/* Send x counted in generation g, owner thread of g (or holding the spill
 * slot's lock), with the layout its callback loaded (L) and its cache of
 * the session (tc).  x->msg.term is 0 for a flow's event, which is counted
 * alone; else the message is read for its kind, if the callback did not
 * (x->msg.kind 0) and the session counts kinds, and what follows the count
 * is done (after_count). */
static inline void count_send(const mf_layout_t *L, ErlNifEnv *env, mf_session *s,
                              mf_tls_cache *tc, mf_gen *g, mf_send *x)
{
    uint64_t f, t;
    const uint64_t *alias;
    if (!mf_endpoint_word(env, &g->interns, x->from, &f) ||
        !receiver_word(L, env, g, x->to, &t, &alias)) {
        mf_shard_overflow(g->shard, x->dead);
        return;
    }
    uint64_t k = 0;
    if (x->msg.term && s->kinds) {
        if (!x->msg.kind)
            kind_read(L, env, &x->msg);
        k = alias ? mf_kind_to_alias(L, env, &x->msg) : x->msg.kind;
    }
    if (alias && k && (k & MF_KIND_MASK) != MF_K_REPLY) {
        /* no reply (a message to an OTP 28 priority alias, say): a pair
         * to the owner, as if sent to its pid */
        t ^= MF_REPLY_FLIP;
        alias = NULL;
    }
    if (mf_shard_count(g->shard, f, t, k, k ? mf_kind_other(k) : 0, x->dead) == MF_OVERFLOW &&
        mf_is_process_word(f) && mf_is_process_word(t))
        mf_shard_overflow_pair(g->shard, f, t); /* the busiest past the cap */
    if (x->msg.term)
        after_count(L, env, s, tc, x->from, x->to, &x->msg, k, alias,
                    alias                                ? alias[3] /* the alias's owner */
                    : mf_is_local_pid((ERL_NIF_TERM)t)   ? t  /* a pid, or an alias's owner */
                    : mf_is_atom(L, env, x->to)          ? (uint64_t)x->to /* a name */
                                                         : 0); /* not measured */
}

/* trace_send(Tag, TracerState, Tracee, Message, #{extra => Receiver}).
 * An event with no options map or no `extra' counts nothing: OTP 25 calls
 * this with neither a message nor options (THE_NON_VALUE for both) when a
 * traced port exits; the exit signals the port sends its links then are
 * no messages, and no receiver is named.  With kinds on, the message is
 * read once, in place (mf_kind_read), never copied. */
static ERL_NIF_TERM nif_trace_send(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    ERL_NIF_TERM to, from = argv[2];
    const mf_layout_t *L = mf_layout_get(); /* one layout for the whole send */
    if (!mf_get_extra(L, env, argv[4], &to) || !mf_is_term(argv[1]) || !mf_is_term(from) ||
        !mf_is_term(argv[3]))
        return atom_ok;
    /* Start loading the pair's line of counts in this thread's shard before
     * the session is checked, so that the two cache misses overlap; if the
     * shard turns out to be another session's, the prefetch was wasted
     * (and so was the message's read, when the cache's session counts
     * kinds and this one does not).  The message is read here when the
     * cache's session counts kinds; count_send reads it only for a session
     * whose cache this is not. */
    /* the thread's cache, its address found once (send_cache) */
    mf_tls_cache *const t = send_cache();
    mf_shard *sh = t->shard;
    mf_msg m = {.term = argv[3]};
    uint64_t kind = t->kinds ? mf_kind_read(L, env, argv[3], &m) : 0;
    mf_cell *line = NULL; /* the pair's line in sh, if sh is still the thread's */
    if (sh)
        mf_shard_prefetch(line = mf_shard_line(sh, (uint64_t)from, (uint64_t)to, kind));
    if (!mf_get_session(L, env, argv[1], &s))
        return atom_ok;
    if (mf_own_send(&s->own, L, env, from, to))
        return atom_ok; /* msgflow's own: counted as left out */
    int dead = argv[0] == atom_send_to_non_existing_process; /* atoms: compare words */
    uint64_t epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed);
    mf_slot *slot;
    if (t->epoch == epoch) {
        if (sh && mf_is_local_pid(from) && mf_is_local_pid(to)) {
            if ((dead || !mf_shard_count_hit(line, (uint64_t)from, (uint64_t)to, kind)) &&
                mf_shard_count(sh, (uint64_t)from, (uint64_t)to, kind,
                               kind ? mf_kind_other(kind) : 0, dead) == MF_OVERFLOW)
                mf_shard_overflow_pair(sh, (uint64_t)from, (uint64_t)to);
            after_count(L, env, s, t, from, to, &m, kind, NULL, (uint64_t)to);
            return atom_ok;
        }
        slot = t->slot;
    } else if (!(slot = find_slot(s, epoch))) {
        return atom_ok;
    }
    mf_send x = {.from = from, .to = to, .dead = dead, .msg = m};
    if (!slot->lock) {
        count_send(L, env, s, t, t->gen, &x);
    } else {
        enif_mutex_lock(slot->lock);
        count_send(L, env, s, t, mf_slot_renew(slot, epoch), &x);
        enif_mutex_unlock(slot->lock);
    }
    return atom_ok;
}

/* enabled_procs(Tag, TracerState, Tracee): spawn, spawned and register
 * only. */
static ERL_NIF_TERM nif_enabled_procs(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    mf_session *s;
    /* never `remove' (see nif_enabled): trace_status goes to enabled/3 */
    if (!mf_args_are_terms(argc, argv) || !mf_get_session(mf_layout_get(), env, argv[1], &s) ||
        !active(s))
        return atom_discard;
    return argv[0] == atom_spawn || argv[0] == atom_spawned || argv[0] == atom_register
               ? atom_trace
               : atom_discard;
}

/* trace_procs(spawn, S, Parent, Child, #{extra => {M, F, Args}}),
 * trace_procs(spawned, S, Child, Parent, #{extra => {M, F, Args}}) for a
 * child whose parent is on another node (erpc's and rpc's processes,
 * spawn_request from there: no local parent tells of them), and
 * trace_procs(register, S, Tracee, Name, _): recorded as process events. */
static ERL_NIF_TERM nif_trace_procs(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    mf_session *s;
    ERL_NIF_TERM mfa;
    if (!mf_args_are_terms(argc, argv) || !mf_get_session(mf_layout_get(), env, argv[1], &s))
        return atom_ok;
    if (argv[0] == atom_spawn && atomic_load_explicit(&s->own.live, memory_order_relaxed) &&
        mf_is_local_pid(argv[2]) && mf_is_local_pid(argv[3]) &&
        mf_own_has(&s->own, (uint64_t)argv[2]))
        /* a child of msgflow's is msgflow's (an httpd connection's
         * handler), before it runs */
        mf_own_add(&s->own, (uint64_t)argv[3]);
    if (argv[0] == atom_spawn && enif_get_map_value(env, argv[4], atom_extra, &mfa))
        mf_proc_event(env, &s->proc_events, argv[3], mf_spawn_summary(env, mfa));
    else if (argv[0] == atom_spawned && !mf_is_local_pid(argv[3]) &&
             enif_get_map_value(env, argv[4], atom_extra, &mfa))
        mf_proc_event(env, &s->proc_events, argv[2], mf_spawn_summary(env, mfa));
    else if (argv[0] == atom_register && enif_is_atom(env, argv[3]))
        mf_proc_event(env, &s->proc_events, argv[2], argv[3]);
    return atom_ok;
}

/* trace(seq_trace, FlowSession, Label, {send, {Prev, Cur}, From, To, _Msg},
 * Opts): one message that carried a trace token with `send' set, counted
 * by ({Label, From}, To) in the calling thread's shard of the flow session
 * (the key's first word is the interned {Label, From}), and kept as an
 * event when Label is watched (a follow/1 flow).  Anything else (print and
 * 'receive' events, a state that is no flow session, odd shapes) is
 * ignored. */
static ERL_NIF_TERM trace_seq(ErlNifEnv *env, const ERL_NIF_TERM argv[])
{
    mf_session *s;
    const ERL_NIF_TERM *ev, *serial;
    int arity, sarity;
    const mf_layout_t *L = mf_layout_get();
    if (!mf_args_are_terms(5, argv) || !mf_get_session(L, env, argv[1], &s) ||
        s->type != MF_SESSION_FLOW || !active(s) ||
        !enif_get_tuple(env, argv[3], &arity, &ev) || arity != 5 || ev[0] != atom_send ||
        !enif_get_tuple(env, ev[1], &sarity, &serial) || sarity != 2)
        return atom_ok;
    uint64_t epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed);
    mf_tls_cache *c = &mf_tls_all[MF_SESSION_FLOW];
    mf_slot *slot = c->session_id == s->id && c->epoch == epoch ? c->slot : find_slot(s, epoch);
    if (slot) {
        mf_send x = {.from = enif_make_tuple2(env, argv[2], ev[2]), .to = ev[3]};
        if (!slot->lock) {
            count_send(L, env, s, c, c->gen, &x);
        } else {
            enif_mutex_lock(slot->lock);
            count_send(L, env, s, c, mf_slot_renew(slot, epoch), &x);
            enif_mutex_unlock(slot->lock);
        }
    }
    /* an event names a reply to a local alias by the alias's owner, as the
     * counts do, so that the owner's next send finds it as its cause */
    uint64_t owner;
    int reply = mf_alias_owner(L, ev[3], &owner);
    ERL_NIF_TERM to = reply ? (ERL_NIF_TERM)owner : ev[3];
    mf_watches_event(&s->watches, env, argv[2], serial[0], serial[1], ev[2], to, ev[4], reply);
    return atom_ok;
}

/* trace/5: the fallback for tags without their own callback; each path
 * checks the arguments it reads (is_term). */
static ERL_NIF_TERM nif_trace(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    if (argv[0] == atom_send || argv[0] == atom_send_to_non_existing_process)
        return nif_trace_send(env, argc, argv);
    if (argv[0] == atom_seq_trace)
        return trace_seq(env, argv);
    if (argv[0] == atom_spawn || argv[0] == atom_spawned || argv[0] == atom_register)
        return nif_trace_procs(env, argc, argv);
    return atom_ok;
}

/* ------------------------------------------------------------------- info */

/* Whether this library is pinned (pin_library): set in load. */
static int mf_pinned;

/* lib_info() -> #{allocator => jemalloc | enif, jemalloc_error => binary(),
 *                 jemalloc_build => static | system, fast_extra => boolean(),
 *                 alias_owner => boolean(), fast_terms => boolean(),
 *                 plain_refs => boolean(), native_records => none | read | unread,
 *                 fast_resources => boolean(), pinned => boolean(),
 *                 jemalloc_allocated => bytes, jemalloc_resident => bytes} */
static ERL_NIF_TERM nif_lib_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    ERL_NIF_TERM why;
    const char *err = mf_alloc_jemalloc_error();
    int je = strcmp(mf_alloc_chosen()->name, "jemalloc") == 0;
    size_t len = strlen(err);
    memcpy(enif_make_new_binary(env, len, &why), err, len);
    uint64_t allocated = 0, resident = 0;
    int stats = je && mf_alloc_jemalloc_stats(&allocated, &resident);
    ERL_NIF_TERM keys[] = {atom_allocator,      atom_jemalloc_error,     atom_jemalloc_build,
                           atom_fast_extra,     atom_jemalloc_allocated, atom_jemalloc_resident,
                           atom_alias_owner,    atom_fast_terms,         atom_plain_refs,
                           atom_native_records, atom_fast_resources, atom_pinned};
    ERL_NIF_TERM vals[] = {
        je ? atom_jemalloc : atom_enif, why,
        strcmp(mf_alloc_jemalloc_build(), "static") == 0 ? atom_static : atom_system,
        mf_layout_fast_extra() ? atom_true : atom_false,
        stats ? enif_make_uint64(env, allocated) : atom_undefined,
        stats ? enif_make_uint64(env, resident) : atom_undefined,
        mf_layout_alias_owner() ? atom_true : atom_false,
        mf_layout_fast_terms() ? atom_true : atom_false,
        mf_layout_plain_refs() ? atom_true : atom_false,
        mf_layout_native_records(),
        mf_layout_fast_resources() ? atom_true : atom_false,
        mf_pinned ? atom_true : atom_false};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, sizeof(keys) / sizeof(keys[0]), &map);
    return map;
}

/* layout_probe(Others) -> boolean(): the resource read checked after load
 * (mf_layout_probe), Others references that are no NIF resource. */
static ERL_NIF_TERM nif_layout_probe(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    return mf_layout_probe(env, argv[0]) ? atom_true : atom_false;
}

/* ----------------------------------------------------------- load/unload */

static void *enif_alloc_fn(void *ctx, size_t size)
{
    (void)ctx;
    return enif_alloc(size);
}

static void enif_free_fn(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;
    enif_free(ptr);
}

/* Load only: the allocator every session uses (mf_alloc_choose), from
 * MSGFLOW_ALLOCATOR (auto, the default, or enif), enif_alloc when
 * jemalloc is not to be had. */
static void choose_allocator(void)
{
    static const mf_alloc enif = {enif_alloc_fn, enif_free_fn, NULL, "enif"};
    char want[16] = "auto";
    size_t len = sizeof(want);
    if (enif_getenv("MSGFLOW_ALLOCATOR", want, &len) != 0)
        strcpy(want, "auto");
    mf_alloc_choose(want, &enif);
}

/* Load only: this library made never to be unmapped.  A session, an
 * aggregate or a take holds function pointers and static data of the
 * library that made it (its allocator's functions and their state, the
 * names of things); an upgrade from another file (a release's new
 * priv_dir) takes their resource types over, and purging the old code
 * would unmap the library they point into while they live.  Pinned, each
 * file loaded stays mapped for the VM's life (a few hundred kB a release
 * upgrade), and its sessions go on with it. */
static void pin_library(void)
{
#ifdef RTLD_NODELETE
    Dl_info self;
    if (dladdr((void *)&pin_library, &self) && self.dli_fname)
        mf_pinned = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != NULL;
#endif
}

static int on_load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    make_atoms(env);
    if (!mf_layout_load(env, info))
        return 1;
    pin_library();
    choose_allocator();
    /* (what an upgrade from this library carries over) */
    *priv = mf_session_counters(NULL);
    ErlNifResourceFlags flags = ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER;
    if (mf_session_open_type(env, flags) || mf_snapshot_open_type(env, flags) ||
        mf_flow_open_type(env, flags) || mf_agg_open_type(env, flags))
        return -1;
    mf_layout_open_type(env);
    return 0;
}

/* Upgrade keeps the sessions of the old code: the resource type is taken
 * over, so their destructors and monitors run the new code; their
 * allocators stay the old library's (pinned), and new sessions are
 * numbered on from the old library's counters (*old_priv: NULL when the
 * old library is this same file, which shares them already). */
static int on_upgrade(ErlNifEnv *env, void **priv, void **old_priv, ERL_NIF_TERM info)
{
    int rc = on_load(env, priv, info);
    if (rc == 0 && old_priv && *old_priv)
        *priv = mf_session_counters(*old_priv);
    return rc;
}

static void on_unload(ErlNifEnv *env, void *priv)
{
    (void)env;
    (void)priv;
}

static ErlNifFunc nif_funcs[] = {
    {"enabled", 3, nif_enabled, 0},
    {"enabled_send", 3, nif_enabled_send, 0},
    {"trace_send", 5, nif_trace_send, 0},
    {"trace", 5, nif_trace, 0},
    {"enabled_procs", 3, nif_enabled_procs, 0},
    {"trace_procs", 5, nif_trace_procs, 0},
    {"proc_events_take", 1, mf_nif_proc_events_take, 0},
    {"own", 3, mf_nif_own, 0},
    {"calls_config", 3, mf_nif_calls_config, 0},
    {"calls_take", 1, mf_nif_calls_take, 0},
    {"sizes_config", 3, mf_nif_sizes_config, 0},
    {"sizes_take_some", 2, mf_nif_sizes_take_some, 0},
    {"call_buckets", 0, mf_nif_call_buckets, 0},
    {"session_new", 3, mf_nif_session_new, 0},
    {"session_stop", 1, mf_nif_session_stop, 0},
    {"session_rotate", 1, mf_nif_session_rotate, 0},
    {"session_limit", 2, mf_nif_session_limit, 0},
    {"snapshot", 1, mf_nif_snapshot, 0},
    {"snapshot_start", 1, mf_nif_snapshot_start, 0},
    {"snapshot_next", 1, mf_nif_snapshot_next, 0},
    {"snapshot_fold_start", 2, mf_nif_snapshot_fold_start, 0},
    {"snapshot_fold", 1, mf_nif_snapshot_fold, 0},
    {"session_info", 1, mf_nif_session_info, 0},
    {"lib_info", 0, nif_lib_info, 0},
    {"layout_probe", 1, nif_layout_probe, 0},
    {"enabled_call", 3, nif_enabled_call, 0},
    {"flow_session_new", 2, mf_nif_flow_session_new, 0},
    {"flow_watch", 3, mf_nif_flow_watch, 0},
    {"flow_take", 2, mf_nif_flow_take, 0},
    {"entry_new", 1, mf_nif_entry_new, 0},
    {"entry_info", 1, mf_nif_entry_info, 0},
    {"entry_stop", 1, mf_nif_entry_stop, 0},
    {"agg_new", 1, mf_nif_agg_new, 0},
    {"agg_add", 3, mf_nif_agg_add, 0},
    {"agg_new_ends", 2, mf_nif_agg_new_ends, 0},
    {"agg_set_groups", 2, mf_nif_agg_set_groups, 0},
    {"agg_close", 3, mf_nif_agg_close, 0},
    {"agg_full", 3, mf_nif_agg_full, 0},
    {"agg_lookup", 3, mf_nif_agg_lookup, 0},
    {"agg_rows", 5, mf_nif_agg_rows, 0},
    {"agg_busiest", 3, mf_nif_agg_busiest, 0},
    {"agg_last_ends", 1, mf_nif_agg_last_ends, 0},
    {"agg_info", 1, mf_nif_agg_info, 0},
    {"agg_set_rollups", 2, mf_nif_agg_set_rollups, 0},
    {"agg_sweep", 4, mf_nif_agg_sweep, 0},
    {"agg_take_released", 2, mf_nif_agg_take_released, 0},
    {"agg_open_receivers", 4, mf_nif_agg_open_receivers, 0},
    {"agg_sum", 2, mf_nif_agg_sum, 0},
    {"agg_named", 1, mf_nif_agg_named, 0},
    {"agg_partner", 2, mf_nif_agg_partner, 0},
    {"agg_take_top", 1, mf_nif_agg_take_top, 0},
    {"agg_idle_ends", 3, mf_nif_agg_idle_ends, 0},
};

ERL_NIF_INIT(msgflow_tracer, nif_funcs, on_load, NULL, on_upgrade, on_unload)
