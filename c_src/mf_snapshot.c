/*
 * mf_snapshot.c -- the yielding snapshot (see mf_snapshot.h).
 */
#include "mf_abi.h"
#include "mf_snapshot.h"

#include <string.h>

#include "mf_agg_nif.h"
#include "mf_gen.h"
#include "mf_kind.h"
#include "mf_topk.h"

/*
 * A snapshot in progress.  It yields between steps (enif_schedule_nif), so
 * what it keeps across steps is C data only: the cursor, and the
 * generation's interned entries by seq.  Each slot is taken in turn: its
 * retired generations (each freed once taken: nobody writes to them any
 * more), then its current one.  Decoded terms are cached within one step
 * only: a term of the process env not passed on as an argument does not
 * survive the yield.
 */
typedef struct {
    mf_session *session;      /* kept (enif_keep_resource) while we exist */
    unsigned idx;             /* slot being taken: slots[idx], spill when idx == end */
    unsigned end;             /* slots[] claimed when the take began */
    unsigned count;           /* end, plus 1 when there is a spill slot */
    mf_cursor cur;
    mf_take_totals tot;
    int finished;
    mf_gen *gen;              /* being taken; NULL between generations */
    int gen_retired;          /* gen is in the slot's retired list */
    int current_done;         /* the slot's current generation was taken */
    const mf_intern **interns; /* gen's, by seq; enif_alloc */
    ERL_NIF_TERM *terms;       /* decoded this step; 0 = not yet */
    uint32_t *ends;            /* folding: the aggregate's endpoint by seq; 0 = not yet */
    uint64_t n;
    uint64_t emitted;          /* deltas added in this step */
    /* the summaries of the busiest overflowed pairs taken so far, each
     * shard's as a part {min, first, n} of the slots (enif_alloc; only
     * process words, turned into terms when the take is done) */
    mf_topk_slot *top;
    unsigned top_n, top_cap;
    mf_topk_slot *scratch; /* one shard's summary as it is taken */
    struct { uint64_t min; unsigned first, n; } *parts;
    unsigned parts_n, parts_cap;
    /* folding into an aggregate (snapshot_fold): kept while we exist */
    mf_agg_res *agg;
    uint64_t folded;           /* deltas folded in this step */
    uint64_t msgs[3], no_row[3]; /* messages by MF_AGG_PAIRS, _ROLLED, _DEAD; of those, with no row */
    /* valid during one step only */
    ErlNifEnv *env;
    ERL_NIF_TERM pairs, dead, replies;
} mf_take;

static ErlNifResourceType *mf_take_rt;

static void take_drop_index(mf_take *t)
{
    enif_free(t->interns);
    enif_free(t->terms);
    enif_free(t->ends);
    t->interns = NULL;
    t->terms = NULL;
    t->ends = NULL;
    t->n = 0;
}

static void take_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    mf_take *t = obj;
    take_drop_index(t);
    enif_free(t->top);
    enif_free(t->scratch);
    enif_free(t->parts);
    if (t->session) {
        if (!t->finished)
            atomic_store(&t->session->taking, 0);
        enif_release_resource(t->session);
    }
    if (t->agg)
        enif_release_resource(t->agg);
}

/* Reader.  Indexes the generation's interned terms by seq; newer ones may
 * appear while we read, so index again on a miss. */
static int index_interns(mf_take *t)
{
    const mf_intern *e = atomic_load_explicit(&t->gen->interns.list, memory_order_acquire);
    uint64_t need = e ? MF_ID_SEQ(e->id) + 1 : 0;
    if (need <= t->n)
        return 1;
    const mf_intern **interns = enif_alloc(sizeof(*interns) * need);
    ERL_NIF_TERM *terms = enif_alloc(sizeof(*terms) * need);
    uint32_t *ends = t->agg ? enif_alloc(sizeof(*ends) * need) : NULL;
    if (!interns || !terms || (t->agg && !ends)) {
        enif_free(interns);
        enif_free(terms);
        enif_free(ends);
        return 0;
    }
    memset(interns, 0, sizeof(*interns) * need);
    memset(terms, 0, sizeof(*terms) * need);
    if (ends)
        memset(ends, 0, sizeof(*ends) * need);
    for (; e; e = e->next)
        interns[MF_ID_SEQ(e->id)] = e;
    if (t->terms)
        memcpy(terms, t->terms, sizeof(*terms) * t->n);
    if (ends && t->ends)
        memcpy(ends, t->ends, sizeof(*ends) * t->n); /* (numbers outlive a step) */
    take_drop_index(t);
    t->interns = interns;
    t->terms = terms;
    t->ends = ends;
    t->n = need;
    return 1;
}

static ERL_NIF_TERM word_term(mf_take *t, uint64_t w)
{
    if ((w & MF_PID_TAG_MASK) == MF_REPLY_TAG)
        w ^= MF_REPLY_FLIP; /* a reply to an alias: its owner */
    if ((w & MF_PID_TAG_MASK) == MF_PID_TAG) {
        ErlNifPid pid;
        pid.pid = (ERL_NIF_TERM)w;
        return enif_make_pid(t->env, &pid);
    }
    uint64_t seq = MF_ID_SEQ(w);
    if (seq >= t->n && !index_interns(t))
        return atom_undefined; /* out of memory */
    if (seq >= t->n || !t->interns[seq])
        return atom_undefined; /* cannot happen: interned before its pair was published */
    if (!t->terms[seq]) {
        ERL_NIF_TERM term;
        const mf_intern *e = t->interns[seq];
        if (enif_binary_to_term(t->env, e->etf, e->etf_len, &term, 0) == 0)
            term = atom_undefined;
        t->terms[seq] = term;
    }
    return t->terms[seq];
}

/* {From, To, N}, or {From, To, N, Kind, Tag} for a key with a kind word. */
static ERL_NIF_TERM delta_tuple(mf_take *t, uint64_t from, uint64_t to, uint64_t kind,
                                uint64_t delta)
{
    ERL_NIF_TERM f = word_term(t, from), r = word_term(t, to);
    ERL_NIF_TERM n = enif_make_uint64(t->env, delta);
    if (!kind)
        return enif_make_tuple3(t->env, f, r, n);
    return enif_make_tuple5(t->env, f, r, n, mf_kind_atom(kind), mf_kind_tag(kind));
}

/* A pair's delta goes to Pairs, or to Replies when its receiver stands for
 * the aliases of a process. */
static void take_pair(void *ctx, uint64_t from, uint64_t to, uint64_t kind, uint64_t delta)
{
    mf_take *t = ctx;
    ERL_NIF_TERM d = delta_tuple(t, from, to, kind, delta);
    if ((to & MF_PID_TAG_MASK) == MF_REPLY_TAG)
        t->replies = enif_make_list_cell(t->env, d, t->replies);
    else
        t->pairs = enif_make_list_cell(t->env, d, t->pairs);
    t->emitted++;
}

static void take_dead(void *ctx, uint64_t from, uint64_t to, uint64_t kind, uint64_t delta)
{
    mf_take *t = ctx;
    t->dead = enif_make_list_cell(t->env, delta_tuple(t, from, to, kind, delta), t->dead);
    t->emitted++;
}

static const mf_take_fns take_fns = {take_pair, take_dead};

/* The aggregate's endpoint of a key's word (a reply's: the alias's
 * owner), 0 when it cannot be had (out of memory).  The aggregate's
 * write lock held. */
static uint32_t word_end(mf_take *t, uint64_t w)
{
    if ((w & MF_PID_TAG_MASK) == MF_REPLY_TAG)
        w ^= MF_REPLY_FLIP;
    if ((w & MF_PID_TAG_MASK) == MF_PID_TAG)
        return mf_agg_end_word(t->agg->g, w);
    uint64_t seq = MF_ID_SEQ(w);
    if (seq >= t->n && !index_interns(t))
        return 0;
    if (seq >= t->n || !t->interns[seq])
        return 0;
    if (!t->ends[seq])
        t->ends[seq] = mf_agg_res_end_etf(t->env, t->agg, t->interns[seq]->etf,
                                          t->interns[seq]->etf_len);
    return t->ends[seq];
}

/* A delta folded into the aggregate: replies to a process's aliases in
 * its rolled-up rows, the rest in its pairs; the messages of a key that
 * finds no row (the aggregate is full) counted apart. */
static void fold(mf_take *t, unsigned table, uint64_t from, uint64_t to, uint64_t kind,
                 uint64_t delta)
{
    uint32_t f = word_end(t, from), r = word_end(t, to);
    t->msgs[table] += delta;
    if (!f || !r || mf_agg_add(t->agg->g, table, f, r, kind, delta))
        t->no_row[table] += delta;
    t->folded++;
    t->emitted++;
}

static void fold_pair(void *ctx, uint64_t from, uint64_t to, uint64_t kind, uint64_t delta)
{
    fold(ctx, (to & MF_PID_TAG_MASK) == MF_REPLY_TAG ? MF_AGG_ROLLED : MF_AGG_PAIRS, from, to, kind,
         delta);
}

static void fold_dead(void *ctx, uint64_t from, uint64_t to, uint64_t kind, uint64_t delta)
{
    (void)kind;
    fold(ctx, MF_AGG_DEAD, from, to, 0, delta);
}

static const mf_take_fns fold_fns = {fold_pair, fold_dead};

/* The shard's summary of its busiest overflowed pairs, taken (and so
 * emptied) as the shard's take ends, kept as a part of t->top: dropped
 * when there is no memory for it (its messages are in the overflow tally
 * all the same). */
static void take_top(mf_take *t, mf_shard *sh)
{
    if (!t->scratch && !(t->scratch = enif_alloc(MF_TOPK_SLOTS * sizeof(*t->scratch))))
        return;
    uint64_t min;
    unsigned n = mf_topk_take(mf_shard_topk(sh), t->scratch, &min);
    if (!n)
        return; /* (most takes: nothing overflowed) */
    if (t->top_cap - t->top_n < n) {
        mf_topk_slot *top = enif_realloc(t->top, (t->top_n + n) * sizeof(*top));
        if (!top)
            return;
        t->top = top;
        t->top_cap = t->top_n + n;
    }
    if (t->parts_n == t->parts_cap) {
        unsigned cap = t->parts_cap ? 2 * t->parts_cap : 4;
        void *parts = enif_realloc(t->parts, cap * sizeof(*t->parts));
        if (!parts)
            return;
        t->parts = parts;
        t->parts_cap = cap;
    }
    memcpy(t->top + t->top_n, t->scratch, n * sizeof(*t->scratch));
    t->parts[t->parts_n].min = min;
    t->parts[t->parts_n].first = t->top_n;
    t->parts[t->parts_n].n = n;
    t->parts_n++;
    t->top_n += n;
}

/* [{Min, [{Sender, Receiver, Count, Err}]}]: the summaries taken, a
 * receiver word of a reply as the alias's owner. */
static ERL_NIF_TERM top_term(mf_take *t)
{
    ERL_NIF_TERM parts = enif_make_list(t->env, 0);
    for (unsigned p = 0; p < t->parts_n; p++) {
        ERL_NIF_TERM slots = enif_make_list(t->env, 0);
        for (unsigned i = 0; i < t->parts[p].n; i++) {
            const mf_topk_slot *e = &t->top[t->parts[p].first + i];
            slots = enif_make_list_cell(t->env,
                                        enif_make_tuple4(t->env, word_term(t, e->from),
                                                         word_term(t, e->to),
                                                         enif_make_uint64(t->env, e->count),
                                                         enif_make_uint64(t->env, e->err)),
                                        slots);
        }
        parts = enif_make_list_cell(
            t->env, enif_make_tuple2(t->env, enif_make_uint64(t->env, t->parts[p].min), slots),
            parts);
    }
    return parts;
}

#define MF_ENTRIES_PER_CLOCK_READ 256       /* entries between clock reads */
#define MF_TAKE_SLICE_US 500    /* at most this long on a scheduler per step */
#define MF_NEXT_SLICE_US 250    /* ... per snapshot_next call */
#define MF_NEXT_DELTAS 1024     /* deltas snapshot_next returns, about */

enum { TAKE_DONE, TAKE_SLICE, TAKE_FULL };

/* Runs the take on from where it stopped, adding to t->pairs, t->dead, t->replies
 * (terms of env), until it is done, `slice_us' have passed (TAKE_SLICE),
 * or at least `max' deltas were added in this call (TAKE_FULL).  When
 * done, the session may take again. */
static int take_run(mf_take *t, ErlNifEnv *env, uint64_t max, ErlNifTime slice_us)
{
    mf_session *s = t->session;
    t->env = env;
    t->emitted = 0;
    if (t->terms)
        memset(t->terms, 0, sizeof(*t->terms) * t->n); /* last step's terms are gone */
    ErlNifTime began = enif_monotonic_time(ERL_NIF_USEC);
    while (t->idx < t->count) {
        mf_slot *slot = atomic_load_explicit(t->idx < t->end ? &s->slots[t->idx] : &s->spill,
                                             memory_order_acquire);
        if (!slot) {
            /* claimed but not yet published: its counts go to the next take */
            t->idx++;
            continue;
        }
        if (!t->gen) {
            /* the next generation of this slot: the oldest retired... */
            mf_gen *r = atomic_load_explicit(&slot->retired, memory_order_acquire);
            while (r && r->older)
                r = r->older;
            if (r) {
                t->gen = r;
                t->gen_retired = 1;
            } else if (!t->current_done) {
                /* ...then the current one, which the owner may retire while
                 * we take it: it is then freed by a later take only */
                t->gen = atomic_load_explicit(&slot->gen, memory_order_acquire);
                t->gen_retired = 0;
            } else {
                t->current_done = 0;
                t->idx++;
                continue;
            }
            memset(&t->cur, 0, sizeof(t->cur));
            take_drop_index(t);
        }
        if (slot->lock)
            enif_mutex_lock(slot->lock);
        int done = mf_shard_take_some(t->gen->shard, &t->cur, t->agg ? &fold_fns : &take_fns, t,
                                      &t->tot, MF_ENTRIES_PER_CLOCK_READ);
        if (slot->lock)
            enif_mutex_unlock(slot->lock);
        if (done) {
            take_top(t, t->gen->shard);
            take_drop_index(t);
            if (t->gen_retired)
                mf_slot_free_retired(slot, t->gen);
            else
                t->current_done = 1;
            t->gen = NULL;
        }
        ErlNifTime now = enif_monotonic_time(ERL_NIF_USEC);
        int stop = t->emitted >= max ? TAKE_FULL
                   : now - began >= slice_us ? TAKE_SLICE : TAKE_DONE;
        if (stop != TAKE_DONE) {
            int pct = (int)((now - began) / 10);
            enif_consume_timeslice(env, pct > 100 ? 100 : pct < 1 ? 1 : pct);
            /* the index stays valid, the terms do not */
            if (t->terms)
                memset(t->terms, 0, sizeof(*t->terms) * t->n);
            return stop;
        }
    }
    take_drop_index(t);
    t->finished = 1;
    atomic_store(&s->taking, 0);
    return TAKE_DONE;
}

/* snapshot_step(Take, PairsAcc, DeadAcc, RepliesAcc): one step of snapshot/1. */
static ERL_NIF_TERM nif_snapshot_step(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_take *t;
    if (!enif_get_resource(env, argv[0], mf_take_rt, (void **)&t) || t->finished)
        return enif_make_badarg(env);
    t->pairs = argv[1];
    t->dead = argv[2];
    t->replies = argv[3];
    if (take_run(t, env, UINT64_MAX, MF_TAKE_SLICE_US) != TAKE_DONE) {
        ERL_NIF_TERM next[4] = {argv[0], t->pairs, t->dead, t->replies};
        return enif_schedule_nif(env, "snapshot", 0, nif_snapshot_step, 4, next);
    }
    return enif_make_tuple5(env, t->pairs, t->dead, t->replies,
                            enif_make_uint64(env, t->tot.overflow),
                            enif_make_uint64(env, t->tot.overflow_dead));
}

/* A new take of s, or an exception term (busy, memory) in *err. */
static mf_take *take_new(ErlNifEnv *env, mf_session *s, ERL_NIF_TERM *err)
{
    int idle = 0;
    if (!atomic_compare_exchange_strong(&s->taking, &idle, 1)) {
        *err = enif_raise_exception(env, atom_busy);
        return NULL;
    }
    mf_take *t = enif_alloc_resource(mf_take_rt, sizeof(*t));
    if (!t) {
        atomic_store(&s->taking, 0);
        *err = enif_raise_exception(env, atom_memory);
        return NULL;
    }
    memset(t, 0, sizeof(*t));
    enif_keep_resource(s);
    t->session = s;
    unsigned claimed = atomic_load_explicit(&s->nslots, memory_order_relaxed);
    t->end = claimed > MF_MAX_SLOTS ? MF_MAX_SLOTS : claimed;
    t->count = t->end + (claimed > MF_MAX_SLOTS ? 1 : 0);
    return t;
}

/*
 * snapshot_start(Session) -> Take, and snapshot_next(Take) ->
 * {more, Pairs, DeadLetters, Replies} | {done, Pairs, DeadLetters, Replies,
 * Overflow, OverflowDead, Top}: the snapshot/1 below in chunks of about MF_NEXT_DELTAS
 * deltas (or ~0.25 ms of work), so that the caller's heap never holds a
 * whole snapshot and no call holds its scheduler long.  Call snapshot_next until it says done; a take dropped
 * before that lets the session take again when it is garbage collected.
 * badarg for a non-session, a non-take or a finished take; `busy' while
 * another take of the session runs.
 */
ERL_NIF_TERM mf_nif_snapshot_start(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    ERL_NIF_TERM err;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s))
        return enif_make_badarg(env);
    mf_take *t = take_new(env, s, &err);
    if (!t)
        return err;
    ERL_NIF_TERM take = enif_make_resource(env, t);
    enif_release_resource(t);
    return take;
}

ERL_NIF_TERM mf_nif_snapshot_next(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_take *t;
    /* (a fold's take writes only under its aggregate's lock: snapshot_fold) */
    if (!enif_get_resource(env, argv[0], mf_take_rt, (void **)&t) || t->finished || t->agg)
        return enif_make_badarg(env);
    t->pairs = enif_make_list(env, 0);
    t->dead = enif_make_list(env, 0);
    t->replies = enif_make_list(env, 0);
    int r = take_run(t, env, MF_NEXT_DELTAS, MF_NEXT_SLICE_US);
    /* the caller merges what it got before it asks again: it is scheduled
     * out first, so that the merging and the next call do not add up to
     * more than one short slice */
    enif_consume_timeslice(env, 100);
    if (r != TAKE_DONE)
        return enif_make_tuple4(env, atom_more, t->pairs, t->dead, t->replies);
    ERL_NIF_TERM done[7] = {atom_done, t->pairs, t->dead, t->replies,
                            enif_make_uint64(env, t->tot.overflow),
                            enif_make_uint64(env, t->tot.overflow_dead), top_term(t)};
    return enif_make_tuple_from_array(env, done, 7);
}

/* The aggregate's summary of the keys that found no row, taken (so
 * emptied): [{Min, [{Sender, Receiver, Count, Err}]}] as top_term's, or
 * [] when none did.  Its write lock held. */
static ERL_NIF_TERM agg_top_term(mf_take *t)
{
    if (!t->scratch && !(t->scratch = enif_alloc(MF_TOPK_SLOTS * sizeof(*t->scratch))))
        return enif_make_list(t->env, 0);
    uint64_t min;
    unsigned n = mf_agg_take_top(t->agg->g, t->scratch, &min);
    ERL_NIF_TERM slots = enif_make_list(t->env, 0);
    for (unsigned i = 0; i < n; i++) {
        const mf_topk_slot *e = &t->scratch[i];
        slots = enif_make_list_cell(
            t->env,
            enif_make_tuple4(t->env, mf_agg_res_end_term(t->env, t->agg, (uint32_t)e->from),
                             mf_agg_res_end_term(t->env, t->agg, (uint32_t)e->to),
                             enif_make_uint64(t->env, e->count), enif_make_uint64(t->env, e->err)),
            slots);
    }
    return n ? enif_make_list1(t->env, enif_make_tuple2(t->env, enif_make_uint64(t->env, min), slots))
             : enif_make_list(t->env, 0);
}

/*
 * snapshot_fold_start(Session, Agg) -> Take, and snapshot_fold(Take) ->
 * {more, Folded, Msgs, NoRow} | {done, Folded, Msgs, NoRow, Overflow,
 * OverflowDead, Top, AggTop}: the take of snapshot_start/next folded into
 * the aggregate Agg (mf_agg.h) instead of made into terms, in steps of
 * ~0.25 ms under its write lock.  Each step's: Folded its deltas, Msgs
 * {Pairs, Replies, Dead} its messages of pairs, replies to aliases and
 * dead letters, NoRow the same of keys that found no row in the aggregate
 * (past mf_agg_set_full or max pairs), so that a take abandoned half-way
 * (the module reloaded) has counted what it folded; Overflow,
 * OverflowDead and Top are snapshot_next's; AggTop the aggregate's summary
 * of the busiest keys that found no row, in Top's shape.  badarg for a
 * non-session or non-aggregate; `busy' as snapshot_start's.
 */
ERL_NIF_TERM mf_nif_snapshot_fold_start(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_session *s;
    mf_agg_res *agg;
    ERL_NIF_TERM err;
    if (!mf_get_session(mf_layout_get(), env, argv[0], &s) || !mf_agg_res_get(env, argv[1], &agg))
        return enif_make_badarg(env);
    mf_take *t = take_new(env, s, &err);
    if (!t)
        return err;
    enif_keep_resource(agg);
    t->agg = agg;
    ERL_NIF_TERM take = enif_make_resource(env, t);
    enif_release_resource(t);
    return take;
}

ERL_NIF_TERM mf_nif_snapshot_fold(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    mf_take *t;
    if (!enif_get_resource(env, argv[0], mf_take_rt, (void **)&t) || t->finished || !t->agg)
        return enif_make_badarg(env);
    t->folded = 0;
    memset(t->msgs, 0, sizeof(t->msgs));
    memset(t->no_row, 0, sizeof(t->no_row));
    enif_rwlock_rwlock(t->agg->lock);
    int r = take_run(t, env, UINT64_MAX, MF_NEXT_SLICE_US);
    ERL_NIF_TERM agg_top = r == TAKE_DONE ? agg_top_term(t) : 0;
    enif_rwlock_rwunlock(t->agg->lock);
    ERL_NIF_TERM folded = enif_make_uint64(env, t->folded);
    ERL_NIF_TERM msgs = enif_make_tuple3(env, enif_make_uint64(env, t->msgs[0]), enif_make_uint64(env, t->msgs[1]),
                                         enif_make_uint64(env, t->msgs[2]));
    ERL_NIF_TERM no_row = enif_make_tuple3(env, enif_make_uint64(env, t->no_row[0]),
                                           enif_make_uint64(env, t->no_row[1]), enif_make_uint64(env, t->no_row[2]));
    if (r != TAKE_DONE)
        return enif_make_tuple4(env, atom_more, folded, msgs, no_row);
    ERL_NIF_TERM done[8] = {atom_done, folded, msgs, no_row, enif_make_uint64(env, t->tot.overflow),
                            enif_make_uint64(env, t->tot.overflow_dead), top_term(t), agg_top};
    return enif_make_tuple_from_array(env, done, 8);
}

/*
 * snapshot(Session) -> {Pairs, DeadLetters, Replies, Overflow, OverflowDead}.
 * What was counted since the previous snapshot:
 *   Pairs       [{Sender, Receiver, Messages}], one tuple per pair per slot
 *               (a pair whose sender ran on two threads appears twice);
 *   DeadLetters [{Sender, Receiver, Messages}], sends to non-existing
 *               processes (also in Pairs or Replies; a send to an alias
 *               no longer active has the alias's owner as Receiver);
 *   Replies     [{Sender, Owner, Messages}], sends to aliases of the local
 *               process Owner (gen:call's replies), one tuple per sender
 *               and owner, when lib_info() says alias_owner (else those
 *               sends are in Pairs, to the alias);
 *   Overflow    messages that found no entry (cap reached), in no pair;
 *   OverflowDead dead letters in no DeadLetters tuple;
 *   Top         (snapshot_next only) the busiest pairs among the
 *               overflowed sends of a local process to a local process or
 *               its aliases, one Space-Saving summary a shard (mf_topk.h):
 *               [{Min, [{Sender, Receiver, Count, Err}]}], each pair's
 *               messages between Count - Err and Count, a pair left out of
 *               a summary with at most Min (0: none left out); a reply's
 *               receiver is the alias's owner, so a pair may come twice.
 * Runs on the caller's normal scheduler in steps of at most ~0.5 ms,
 * yielding in between; the tracees keep counting meanwhile.  Raises badarg
 * for a non-session and `busy' while another snapshot of the session runs.
 */
ERL_NIF_TERM mf_nif_snapshot(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    ERL_NIF_TERM take = mf_nif_snapshot_start(env, argc, argv);
    if (enif_is_exception(env, take))
        return take;
    ERL_NIF_TERM args[4] = {take, enif_make_list(env, 0), enif_make_list(env, 0),
                            enif_make_list(env, 0)};
    return nif_snapshot_step(env, 4, args);
}

int mf_snapshot_open_type(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    ErlNifResourceTypeInit take_init = {take_dtor, NULL, NULL, 0, NULL};
    ErlNifResourceFlags tried;
    mf_take_rt = enif_open_resource_type_x(env, MF_RT_NAME("msgflow_take"), &take_init, flags, &tried);
    return mf_take_rt ? 0 : -1;
}
