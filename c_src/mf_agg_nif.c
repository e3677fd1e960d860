/*
 * mf_agg_nif.c -- the aggregate (mf_agg.h) as a NIF resource: terms in,
 * terms out.
 *
 * What it owns: the `msgflow_agg' resource type; each resource owns one
 * mf_agg (on the chosen mf_alloc) and the read-write lock around it; the
 * registry of live aggregates by number (below).  No term is kept across
 * calls but the node's atom: endpoints are numbers, local pids words,
 * other endpoints external formats (mf_agg.c), kinds atoms' words.
 *
 * Threads: any process may call; every call that changes the aggregate
 * takes the write lock (the collector is its one writer, so it never
 * waits on another), a read takes the read lock.  No call holds a
 * scheduler past a few hundred µs of work: row reads come in chunks the
 * caller sizes.
 */
#include "mf_abi.h"
#include "mf_agg_nif.h"

#include <string.h>

#include "mf_agg.h"
#include "mf_atoms.h"
#include "mf_kind.h"
#include "mf_topk.h"

typedef mf_agg_res agg_res; /* (the node's atom: atoms are never freed) */

static ErlNifResourceType *agg_rt;

/*
 * Every aggregate alive, by a number of its own.  A handle is the term
 * {Resource, Number}.  When msgflow_tracer is deleted and purged, and then
 * loaded again, the new code opens a new resource type: it cannot read a
 * resource of the old one (enif_get_resource fails).  The library stays
 * mapped while such resources live, so this table, a static of it,
 * does too, and the number finds the aggregate the resource still holds
 * alive.  So the counts of a run outlive the tracer module, as the store's
 * ETS tables did.  Under registry_lock, made once (load); an entry
 * leaves with its resource (the destructor).
 */
static ErlNifMutex *registry_lock;
static struct {
    uint64_t id;
    agg_res *r;
} *registry;
static size_t registry_n, registry_cap;
static uint64_t registry_next;

static uint64_t registry_add(agg_res *r)
{
    uint64_t id = 0;
    enif_mutex_lock(registry_lock);
    if (registry_n == registry_cap) {
        size_t cap = registry_cap ? 2 * registry_cap : 16;
        void *p = enif_realloc(registry, cap * sizeof(*registry));
        if (p) {
            registry = p;
            registry_cap = cap;
        }
    }
    if (registry_n < registry_cap) {
        /* (numbers no one guesses: a handle made up of a reference and
         * another's number finds nothing) */
        if (!registry_next)
            registry_next = (uint64_t)enif_monotonic_time(ERL_NIF_NSEC) ^ (uint64_t)(uintptr_t)&registry_next;
        registry_next += 0x9E3779B97F4A7C15ULL;
        id = (registry_next ^ (registry_next >> 31)) * 0xBF58476D1CE4E5B9ULL;
        id = id ? id : 1;
        registry[registry_n].id = id;
        registry[registry_n].r = r;
        registry_n++;
    }
    enif_mutex_unlock(registry_lock);
    return id;
}

static agg_res *registry_find(uint64_t id)
{
    agg_res *r = NULL;
    enif_mutex_lock(registry_lock);
    for (size_t i = 0; i < registry_n && !r; i++)
        if (registry[i].id == id)
            r = registry[i].r;
    enif_mutex_unlock(registry_lock);
    return r;
}

static void registry_del(agg_res *r)
{
    enif_mutex_lock(registry_lock);
    for (size_t i = 0; i < registry_n; i++)
        if (registry[i].r == r) {
            registry[i] = registry[--registry_n];
            break;
        }
    enif_mutex_unlock(registry_lock);
}

static void agg_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    agg_res *r = obj;
    if (registry_lock)
        registry_del(r);
    mf_agg_free(r->g);
    if (r->lock)
        enif_rwlock_destroy(r->lock);
}

int mf_agg_open_type(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    ErlNifResourceTypeInit init = {agg_dtor, NULL, NULL, 0, NULL};
    ErlNifResourceFlags tried;
    if (!registry_lock && !(registry_lock = enif_mutex_create("msgflow_agg_registry")))
        return -1;
    agg_rt = enif_open_resource_type_x(env, MF_RT_NAME("msgflow_agg"), &init, flags, &tried);
    return agg_rt ? 0 : -1;
}

/* The aggregate of a handle {Resource, Number}: the resource when it is of
 * this code's type, else (one made before the module was deleted and
 * loaded again) the one its number names, which the resource in the term
 * keeps alive. */
static int get_agg(ErlNifEnv *env, ERL_NIF_TERM t, agg_res **r)
{
    const ERL_NIF_TERM *e;
    int n;
    ErlNifUInt64 id;
    if (!enif_get_tuple(env, t, &n, &e) || n != 2 || !enif_get_uint64(env, e[1], &id))
        return 0;
    if (enif_get_resource(env, e[0], agg_rt, (void **)r))
        return (*r)->g != NULL;
    if (!enif_is_ref(env, e[0]))
        return 0;
    *r = registry_find(id);
    return *r && (*r)->g;
}

int mf_agg_res_get(ErlNifEnv *env, ERL_NIF_TERM t, mf_agg_res **r)
{
    return get_agg(env, t, r);
}

static int table_of(ERL_NIF_TERM t, unsigned *table)
{
    if (t == atom_pairs) *table = MF_AGG_PAIRS;
    else if (t == atom_rolled_up) *table = MF_AGG_ROLLED;
    else if (t == atom_dead) *table = MF_AGG_DEAD;
    else if (t == atom_groups) *table = MF_AGG_GROUPS;
    else return 0;
    return 1;
}

/* ---- endpoints ---- */

/* Whether t is a local registered name: Name, or {Name, node()}. */
static int is_named(ErlNifEnv *env, const agg_res *r, ERL_NIF_TERM t)
{
    const ERL_NIF_TERM *e;
    int n;
    if (enif_is_atom(env, t))
        return 1;
    return enif_get_tuple(env, t, &n, &e) && n == 2 && enif_is_atom(env, e[0]) && e[1] == r->node;
}

/* The endpoint number of term t; made when `make' (writer), else 0 when t
 * is none yet. */
static uint32_t end_of(ErlNifEnv *env, agg_res *r, ERL_NIF_TERM t, int make)
{
    ErlNifPid pid;
    if (enif_get_local_pid(env, t, &pid))
        return make ? mf_agg_end_word(r->g, (uint64_t)pid.pid) : mf_agg_find_word(r->g, (uint64_t)pid.pid);
    ErlNifBinary b;
    if (!enif_term_to_binary(env, t, &b))
        return 0;
    uint32_t e = make ? mf_agg_end_bytes(r->g, b.data, b.size, is_named(env, r, t) ? MF_AGG_NAMED : 0)
                      : mf_agg_find_bytes(r->g, b.data, b.size);
    enif_release_binary(&b);
    return e;
}

uint32_t mf_agg_res_end_etf(ErlNifEnv *env, mf_agg_res *r, const unsigned char *etf, size_t len)
{
    uint32_t e = mf_agg_find_bytes(r->g, etf, len);
    if (e)
        return e;
    ERL_NIF_TERM t;
    int named = enif_binary_to_term(env, etf, len, &t, 0) && is_named(env, r, t);
    return mf_agg_end_bytes(r->g, etf, len, named ? MF_AGG_NAMED : 0);
}

static ERL_NIF_TERM end_term(ErlNifEnv *env, const agg_res *r, uint32_t e);

ERL_NIF_TERM mf_agg_res_end_term(ErlNifEnv *env, const mf_agg_res *r, uint32_t e)
{
    return end_term(env, r, e);
}

/* Endpoint number e as a term. */
static ERL_NIF_TERM end_term(ErlNifEnv *env, const agg_res *r, uint32_t e)
{
    const mf_agg_end *x = mf_agg_end_at(r->g, e);
    if (!x)
        return atom_undefined; /* (none, or freed: never a pid of word 0) */
    if (!x->etf) {
        ErlNifPid pid;
        pid.pid = (ERL_NIF_TERM)x->word;
        return enif_make_pid(env, &pid);
    }
    ERL_NIF_TERM t;
    return enif_binary_to_term(env, x->etf, x->etf_len, &t, 0) ? t : atom_undefined;
}

/* ---- rows ---- */

static ERL_NIF_TERM kind_term(ErlNifEnv *env, uint64_t w, uint64_t n, int with_n)
{
    return with_n ? enif_make_tuple3(env, mf_kind_atom(w), mf_kind_tag(w), enif_make_uint64(env, n))
                  : enif_make_tuple2(env, mf_kind_atom(w), mf_kind_tag(w));
}

/* A row as msgflow_row.erl has it: {{From, To}, Total, LastWindow,
 * LastCount, History, PeakMhz, Kinds} (kinds [] when not asked for). */
static ERL_NIF_TERM row_term(ErlNifEnv *env, const agg_res *r, const mf_agg_row *row, int kinds)
{
    ERL_NIF_TERM key = enif_make_tuple2(env, end_term(env, r, row->from), end_term(env, r, row->to));
    if (row->table == MF_AGG_DEAD)
        return enif_make_tuple2(env, key, enif_make_uint64(env, row->total));
    ERL_NIF_TERM hist = enif_make_list(env, 0);
    if (row->hist_n) {
        unsigned char *p = enif_make_new_binary(env, (size_t)row->hist_n * 8, &hist);
        for (uint32_t i = 0; i < row->hist_n; i++) {
            uint64_t x = row->hist[i];
            for (int b = 0; b < 8; b++)
                p[8 * i + b] = (unsigned char)(x >> (56 - 8 * b));
        }
    }
    ERL_NIF_TERM ks = enif_make_list(env, 0);
    if (kinds) {
        if (!row->kinds_n && row->kinds.one)
            ks = kind_term(env, row->kinds.one, 0, 0);
        else
            for (uint32_t i = row->kinds_n; i-- > 0;)
                ks = enif_make_list_cell(env, kind_term(env, row->kinds.list[i].word, row->kinds.list[i].n, 1), ks);
    }
    ERL_NIF_TERM f[7] = {key, enif_make_uint64(env, row->total), enif_make_uint(env, row->last_window),
                         enif_make_uint64(env, row->last_count), hist, enif_make_uint64(env, row->peak_mhz), ks};
    return enif_make_tuple_from_array(env, f, 7);
}

/* ---- calls ---- */

/* agg_new({Keep, MaxKinds, TopTotal, TopWindow, Node}) -> Agg: empty,
 * window 1 open (mf_agg_opts; Node the local node's name).  badarg for
 * values out of range; raises `memory'. */
ERL_NIF_TERM mf_nif_agg_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const ERL_NIF_TERM *e;
    int n;
    unsigned keep, max_kinds, top_total, top_window;
    if (!enif_get_tuple(env, argv[0], &n, &e) || n != 5 || !enif_get_uint(env, e[0], &keep) ||
        !enif_get_uint(env, e[1], &max_kinds) || !enif_get_uint(env, e[2], &top_total) ||
        !enif_get_uint(env, e[3], &top_window) || !enif_is_atom(env, e[4]) || keep < 1 ||
        keep > 1000000 || max_kinds < 1 || max_kinds > 1000 || top_total < 1 || top_window < 1 ||
        top_total > 1000000 || top_window > 1000000)
        return enif_make_badarg(env);
    const mf_alloc *a = mf_alloc_chosen();
    mf_agg_opts o = {keep, max_kinds, (uint64_t)atom_other, MF_KIND_BITS, MF_K_REPLY, top_total, top_window};
    agg_res *r = enif_alloc_resource(agg_rt, sizeof(*r));
    if (!r)
        return enif_raise_exception(env, atom_memory);
    memset(r, 0, sizeof(*r));
    r->node = e[4];
    r->g = a ? mf_agg_new(a, &o) : NULL;
    r->lock = enif_rwlock_create("msgflow_agg");
    uint64_t id = r->g && r->lock ? registry_add(r) : 0;
    ERL_NIF_TERM t = enif_make_tuple2(env, enif_make_resource(env, r), enif_make_uint64(env, id));
    enif_release_resource(r);
    if (!r->g || !r->lock || !id)
        return enif_raise_exception(env, atom_memory);
    return t;
}

static int kind_code(ERL_NIF_TERM k)
{
    for (unsigned c = 1; c < MF_K_COUNT; c++)
        if (mf_kind_atom(c) == k)
            return (int)c;
    return 0;
}

/* agg_add(Agg, Table, Deltas) -> Overflow: each {From, To, N} or {From, To,
 * N, Kind, Tag} added to Table (pairs, rolled_up, dead) in the open
 * window; Overflow the messages of keys that found no row (mf_agg_add).
 * For a store made from deltas (a history range, the tests); the
 * collector's snapshot folds into the aggregate without terms.  badarg for
 * a malformed delta (those before it are added). */
ERL_NIF_TERM mf_nif_agg_add(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned table;
    if (!get_agg(env, argv[0], &r) || !table_of(argv[1], &table) || table == MF_AGG_GROUPS ||
        !enif_is_list(env, argv[2]))
        return enif_make_badarg(env);
    uint64_t over = 0;
    int bad = 0;
    ERL_NIF_TERM list = argv[2], d;
    enif_rwlock_rwlock(r->lock);
    while (enif_get_list_cell(env, list, &d, &list)) {
        const ERL_NIF_TERM *e;
        int n, k = 0;
        ErlNifUInt64 count;
        if (!enif_get_tuple(env, d, &n, &e) || (n != 3 && n != 5) || !enif_get_uint64(env, e[2], &count) ||
            (n == 5 && (!(k = kind_code(e[3])) || !enif_is_atom(env, e[4])))) {
            bad = 1;
            break;
        }
        uint64_t kw = n == 5 ? mf_kind_make(e[4], (unsigned)k) : 0;
        uint32_t from = end_of(env, r, e[0], 1), to = end_of(env, r, e[1], 1);
        if (!from || !to || mf_agg_add(r->g, table, from, to, kw, count))
            over += count;
    }
    enif_rwlock_rwunlock(r->lock);
    return bad ? enif_make_badarg(env) : enif_make_uint64(env, over);
}

/* At most argv[1] endpoints `take' gives (256 at a time) under the write
 * lock, each as {Number, Endpoint} when `numbered', else as Endpoint. */
static ERL_NIF_TERM take_ends(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                              uint32_t (*take)(mf_agg *g, uint32_t *out, uint32_t max), int numbered)
{
    agg_res *r;
    unsigned max;
    if (!get_agg(env, argv[0], &r) || !enif_get_uint(env, argv[1], &max) || max > 100000)
        return enif_make_badarg(env);
    uint32_t got[256];
    ERL_NIF_TERM out = enif_make_list(env, 0);
    enif_rwlock_rwlock(r->lock);
    while (max) {
        uint32_t k = take(r->g, got, max < 256 ? max : 256);
        if (!k)
            break;
        max -= k;
        for (uint32_t i = 0; i < k; i++) {
            ERL_NIF_TERM e = end_term(env, r, got[i]);
            out = enif_make_list_cell(env, numbered ? enif_make_tuple2(env, enif_make_uint(env, got[i]), e) : e,
                                      out);
        }
    }
    enif_rwlock_rwunlock(r->lock);
    return out;
}

/* agg_new_ends(Agg, Max) -> [{Number, Endpoint}]: at most Max endpoints
 * new since the last call (each comes once), for the owner to label. */
ERL_NIF_TERM mf_nif_agg_new_ends(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    return take_ends(env, argv, mf_agg_take_new, 1);
}

/* Each {A, B} of the list argv[1] given to `one' under the write lock (1
 * set, 0 out of memory: the rest go on, -1 no such pair: stops), then
 * `then' (NULL: nothing; < 0 out of memory).  ok, badarg, or the
 * exception `memory'. */
typedef int (*pair_fn)(ErlNifEnv *env, agg_res *r, const ERL_NIF_TERM *e);
static ERL_NIF_TERM set_each(ErlNifEnv *env, const ERL_NIF_TERM argv[], pair_fn one,
                             int (*then)(mf_agg *g))
{
    agg_res *r;
    if (!get_agg(env, argv[0], &r) || !enif_is_list(env, argv[1]))
        return enif_make_badarg(env);
    int bad = 0, mem = 0;
    ERL_NIF_TERM list = argv[1], x;
    enif_rwlock_rwlock(r->lock);
    while (enif_get_list_cell(env, list, &x, &list)) {
        const ERL_NIF_TERM *e;
        int n, done;
        if (!enif_get_tuple(env, x, &n, &e) || n != 2 || (done = one(env, r, e)) < 0) {
            bad = 1;
            break;
        }
        mem |= !done;
    }
    if (then && then(r->g) < 0)
        mem = 1;
    enif_rwlock_rwunlock(r->lock);
    return bad ? enif_make_badarg(env) : mem ? enif_raise_exception(env, atom_memory) : atom_ok;
}

/* {Number, GroupEnd}: the endpoint's group end. */
static int set_group(ErlNifEnv *env, agg_res *r, const ERL_NIF_TERM *e)
{
    unsigned num;
    if (!enif_get_uint(env, e[0], &num) || !mf_agg_end_at(r->g, num))
        return -1;
    uint32_t grp = end_of(env, r, e[1], 1);
    if (grp)
        mf_agg_flag(r->g, grp, MF_AGG_GROUP);
    return grp && mf_agg_set_group(r->g, num, grp) == 0;
}

/* agg_set_groups(Agg, [{Number, GroupEnd}]) -> ok: each endpoint's group
 * end (a term: {LabelId, Node}, or a rolled-up group), then the deltas
 * that waited for group ends they now have are added to their groups.
 * badarg for a number that is no endpoint (those before it are set). */
ERL_NIF_TERM mf_nif_agg_set_groups(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    return set_each(env, argv, set_group, mf_agg_groups_ready);
}

/* agg_close(Agg, Ms, MinPartners) -> ok: the open window closed after Ms
 * ms (mf_agg_close). */
ERL_NIF_TERM mf_nif_agg_close(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    ErlNifUInt64 ms;
    unsigned min;
    if (!get_agg(env, argv[0], &r) || !enif_get_uint64(env, argv[1], &ms) || !enif_get_uint(env, argv[2], &min))
        return enif_make_badarg(env);
    enif_rwlock_rwlock(r->lock);
    int err = mf_agg_close(r->g, ms, min);
    enif_rwlock_rwunlock(r->lock);
    return err ? enif_raise_exception(env, atom_memory) : atom_ok;
}

/* agg_full(Agg, Full, MaxPairs) -> ok: whether new rows may be made, and
 * the most pairs rows (0: no bound). */
ERL_NIF_TERM mf_nif_agg_full(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    ErlNifUInt64 max;
    if (!get_agg(env, argv[0], &r) || (argv[1] != atom_true && argv[1] != atom_false) ||
        !enif_get_uint64(env, argv[2], &max))
        return enif_make_badarg(env);
    enif_rwlock_rwlock(r->lock);
    mf_agg_set_full(r->g, argv[1] == atom_true);
    mf_agg_set_max_pairs(r->g, max);
    enif_rwlock_rwunlock(r->lock);
    return atom_ok;
}

/* agg_lookup(Agg, Table, {From, To}) -> [Row] | []: the row of a key (a
 * dead letter's is {Key, N}). */
ERL_NIF_TERM mf_nif_agg_lookup(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned table;
    const ERL_NIF_TERM *k;
    int n;
    if (!get_agg(env, argv[0], &r) || !table_of(argv[1], &table) || !enif_get_tuple(env, argv[2], &n, &k) ||
        n != 2)
        return enif_make_badarg(env);
    ERL_NIF_TERM out = enif_make_list(env, 0);
    enif_rwlock_rlock(r->lock);
    uint32_t from = end_of(env, r, k[0], 0), to = from ? end_of(env, r, k[1], 0) : 0;
    const mf_agg_row *row = to ? mf_agg_find(r->g, table, from, to) : NULL;
    if (row)
        out = enif_make_list1(env, row_term(env, r, row, 1));
    enif_rwlock_runlock(r->lock);
    return out;
}

/* agg_rows(Agg, Table, Cursor, Max, Kinds) -> {Rows, Next}: at most Max rows
 * of Table after Cursor (0 to start), Next the cursor to go on from, or
 * `done' when none are left; Kinds false leaves each row's kinds [].  A
 * row added meanwhile may or may not come; none comes twice. */
ERL_NIF_TERM mf_nif_agg_rows(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned table, cursor, max;
    if (!get_agg(env, argv[0], &r) || !table_of(argv[1], &table) || !enif_get_uint(env, argv[2], &cursor) ||
        !enif_get_uint(env, argv[3], &max) || max < 1 || max > 100000 ||
        (argv[4] != atom_true && argv[4] != atom_false))
        return enif_make_badarg(env);
    ERL_NIF_TERM out = enif_make_list(env, 0);
    const mf_agg_row *row = NULL;
    enif_rwlock_rlock(r->lock);
    uint32_t cur = cursor;
    for (unsigned i = 0; i < max && (row = mf_agg_next(r->g, table, &cur)); i++)
        out = enif_make_list_cell(env, row_term(env, r, row, argv[4] == atom_true), out);
    enif_rwlock_runlock(r->lock);
    return enif_make_tuple2(env, out, row ? enif_make_uint(env, cur) : atom_done);
}

/* agg_busiest(Agg, total | open | last, N) -> {[{{From, To}, Value}],
 * Floor}: the busiest keys, highest first (mf_agg_busiest). */
ERL_NIF_TERM mf_nif_agg_busiest(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned which, max;
    if (!get_agg(env, argv[0], &r) || !enif_get_uint(env, argv[2], &max) || max > 1000000)
        return enif_make_badarg(env);
    if (argv[1] == atom_total) which = 0;
    else if (argv[1] == atom_open) which = 1;
    else if (argv[1] == atom_last) which = 2;
    else return enif_make_badarg(env);
    mf_agg_top *top = max ? enif_alloc((size_t)max * sizeof(*top)) : NULL;
    if (max && !top)
        return enif_raise_exception(env, atom_memory);
    uint64_t floor = 0;
    ERL_NIF_TERM out = enif_make_list(env, 0);
    enif_rwlock_rlock(r->lock);
    uint32_t k = mf_agg_busiest(r->g, which, top, max, &floor); /* (the floor even for max 0) */
    for (uint32_t i = k; i-- > 0;) {
        ERL_NIF_TERM key = enif_make_tuple2(env, end_term(env, r, top[i].from), end_term(env, r, top[i].to));
        out = enif_make_list_cell(env, enif_make_tuple2(env, key, enif_make_uint64(env, top[i].value)), out);
    }
    enif_rwlock_runlock(r->lock);
    enif_free(top);
    return enif_make_tuple2(env, out, enif_make_uint64(env, floor));
}

/* agg_last_ends(Agg) -> [{End, InPartners, InMessages, OutPartners,
 * OutMessages}]: the last closed window's ends kept. */
ERL_NIF_TERM mf_nif_agg_last_ends(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    if (!get_agg(env, argv[0], &r))
        return enif_make_badarg(env);
    ERL_NIF_TERM out = enif_make_list(env, 0);
    enif_rwlock_rlock(r->lock);
    uint32_t cur = 0;
    const mf_agg_ends_row *e;
    while ((e = mf_agg_last_ends(r->g, &cur))) {
        ERL_NIF_TERM f[5] = {end_term(env, r, e->end), enif_make_uint(env, e->in_partners),
                             enif_make_uint64(env, e->in_msgs), enif_make_uint(env, e->out_partners),
                             enif_make_uint64(env, e->out_msgs)};
        out = enif_make_list_cell(env, enif_make_tuple_from_array(env, f, 5), out);
    }
    enif_rwlock_runlock(r->lock);
    return out;
}

/* agg_info(Agg) -> #{bytes, pairs, rolled_up, dead, groups, ends, open}. */
ERL_NIF_TERM mf_nif_agg_info(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    if (!get_agg(env, argv[0], &r))
        return enif_make_badarg(env);
    enif_rwlock_rlock(r->lock);
    ERL_NIF_TERM k[7] = {atom_bytes, atom_pairs, atom_rolled_up, atom_dead, atom_groups, atom_ends, atom_open};
    ERL_NIF_TERM v[7] = {enif_make_uint64(env, mf_agg_bytes(r->g)),
                         enif_make_uint64(env, mf_agg_size(r->g, MF_AGG_PAIRS)),
                         enif_make_uint64(env, mf_agg_size(r->g, MF_AGG_ROLLED)),
                         enif_make_uint64(env, mf_agg_size(r->g, MF_AGG_DEAD)),
                         enif_make_uint64(env, mf_agg_size(r->g, MF_AGG_GROUPS)),
                         enif_make_uint(env, mf_agg_ends(r->g)), enif_make_uint(env, mf_agg_open(r->g))};
    enif_rwlock_runlock(r->lock);
    ERL_NIF_TERM m;
    enif_make_map_from_arrays(env, k, v, 7, &m);
    return m;
}

/* {Endpoint, RollupTo}: what the endpoint becomes in a row rolled up (one
 * the aggregate does not hold is passed over). */
static int set_rollup(ErlNifEnv *env, agg_res *r, const ERL_NIF_TERM *e)
{
    uint32_t end = end_of(env, r, e[0], 0);
    if (!end)
        return 1;
    uint32_t to = end_of(env, r, e[1], 1);
    if (to && to != end)
        mf_agg_flag(r->g, to, MF_AGG_GROUP);
    return to && mf_agg_set_rollup(r->g, end, to == end ? 0 : to) == 0;
}

/* agg_set_rollups(Agg, [{Endpoint, RollupTo}]) -> ok: what each endpoint
 * (one the aggregate does not hold is passed over) becomes in a row
 * rolled up (mf_agg_set_rollup). */
ERL_NIF_TERM mf_nif_agg_set_rollups(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    return set_each(env, argv, set_rollup, NULL);
}

/* agg_sweep(Agg, Table, Idle, Budget) -> {Moved, done | more}: the next
 * Budget rows of Table (pairs, rolled_up, dead) swept (mf_agg_sweep):
 * Moved the messages of pairs rows rolled up. */
ERL_NIF_TERM mf_nif_agg_sweep(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned table, idle, budget;
    if (!get_agg(env, argv[0], &r) || !table_of(argv[1], &table) || table == MF_AGG_GROUPS ||
        !enif_get_uint(env, argv[2], &idle) || !enif_get_uint(env, argv[3], &budget))
        return enif_make_badarg(env);
    uint64_t moved;
    enif_rwlock_rwlock(r->lock);
    int done = mf_agg_sweep(r->g, table, idle, budget, &moved);
    enif_rwlock_rwunlock(r->lock);
    if (done < 0)
        return enif_raise_exception(env, atom_memory);
    return enif_make_tuple2(env, enif_make_uint64(env, moved), done ? atom_done : atom_more);
}

/* agg_take_released(Agg, Max) -> [Endpoint]: endpoints no row names any
 * more, since the last call (mf_agg_take_released). */
ERL_NIF_TERM mf_nif_agg_take_released(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    return take_ends(env, argv, mf_agg_take_released, 0);
}

typedef struct {
    uint32_t end, senders;
    uint64_t msgs;
} recv_row;

static int recv_most_first(const void *a, const void *b)
{
    const recv_row *x = a, *y = b;
    if (x->senders != y->senders)
        return x->senders > y->senders ? -1 : 1;
    return x->msgs > y->msgs ? -1 : x->msgs < y->msgs ? 1 : 0;
}

/* agg_open_receivers(Agg, MinSenders, MinMessages, Max) -> [{Receiver,
 * Senders, Messages}]: the open window's receivers with at least that
 * many: the Max with the most senders, and every registered name among
 * them (the views join a name to its pid).  Max `all': every one. */
ERL_NIF_TERM mf_nif_agg_open_receivers(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned min_s, max = UINT32_MAX;
    ErlNifUInt64 min_m;
    if (!get_agg(env, argv[0], &r) || !enif_get_uint(env, argv[1], &min_s) || !enif_get_uint64(env, argv[2], &min_m) ||
        (argv[3] != atom_all && !enif_get_uint(env, argv[3], &max)))
        return enif_make_badarg(env);
    ERL_NIF_TERM out = enif_make_list(env, 0);
    recv_row *rows = NULL;
    size_t n = 0, cap = 0;
    int mem = 0;
    enif_rwlock_rlock(r->lock);
    uint32_t cur = 0;
    const mf_agg_end *x;
    while ((x = mf_agg_open_receivers(r->g, min_s, min_m, &cur))) {
        if (n == cap) {
            size_t c = cap ? 2 * cap : 256;
            recv_row *p = enif_realloc(rows, c * sizeof(*rows));
            if (!p) {
                mem = 1;
                break;
            }
            rows = p;
            cap = c;
        }
        rows[n++] = (recv_row){cur, x->in_partners, x->in_msgs};
    }
    if (n > max)
        qsort(rows, n, sizeof(*rows), recv_most_first);
    for (size_t i = 0; i < n; i++) {
        if (i >= max && !(mf_agg_end_at(r->g, rows[i].end)->flags & MF_AGG_NAMED))
            continue;
        out = enif_make_list_cell(env, enif_make_tuple3(env, end_term(env, r, rows[i].end),
                                                        enif_make_uint(env, rows[i].senders),
                                                        enif_make_uint64(env, rows[i].msgs)),
                                  out);
    }
    enif_rwlock_runlock(r->lock);
    enif_free(rows);
    return mem ? enif_raise_exception(env, atom_memory) : out;
}

/* agg_partner(Agg, Number) -> Endpoint | undefined: the receiver of the
 * first pairs row endpoint Number sent (mf_agg_partner). */
ERL_NIF_TERM mf_nif_agg_partner(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned e;
    if (!get_agg(env, argv[0], &r) || !enif_get_uint(env, argv[1], &e))
        return enif_make_badarg(env);
    enif_rwlock_rlock(r->lock);
    uint32_t p = mf_agg_partner(r->g, e);
    ERL_NIF_TERM out = p ? end_term(env, r, p) : atom_undefined;
    enif_rwlock_runlock(r->lock);
    return out;
}

/* agg_sum(Agg, Table) -> Messages: the table's rows' totals added up. */
ERL_NIF_TERM mf_nif_agg_sum(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned table;
    if (!get_agg(env, argv[0], &r) || !table_of(argv[1], &table))
        return enif_make_badarg(env);
    enif_rwlock_rlock(r->lock);
    uint64_t sum = mf_agg_sum(r->g, table);
    enif_rwlock_runlock(r->lock);
    return enif_make_uint64(env, sum);
}

/* agg_named(Agg) -> [{{Sender, Name}}]: the keys of pairs rows sent to a
 * local registered name (msgflow_store_kept's `named' rows). */
ERL_NIF_TERM mf_nif_agg_named(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    if (!get_agg(env, argv[0], &r))
        return enif_make_badarg(env);
    ERL_NIF_TERM out = enif_make_list(env, 0);
    enif_rwlock_rlock(r->lock);
    uint32_t cur = 0;
    const mf_agg_row *row;
    while ((row = mf_agg_named(r->g, &cur)))
        out = enif_make_list_cell(
            env, enif_make_tuple1(env, enif_make_tuple2(env, end_term(env, r, row->from), end_term(env, r, row->to))),
            out);
    enif_rwlock_runlock(r->lock);
    return out;
}

/* agg_take_top(Agg) -> [{Min, [{Sender, Receiver, Count, Err}]}]: the
 * summary of the busiest keys that found no row, taken (emptied). */
ERL_NIF_TERM mf_nif_agg_take_top(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    if (!get_agg(env, argv[0], &r))
        return enif_make_badarg(env);
    mf_topk_slot *slots = enif_alloc(MF_TOPK_SLOTS * sizeof(*slots));
    if (!slots)
        return enif_raise_exception(env, atom_memory);
    uint64_t min;
    ERL_NIF_TERM list = enif_make_list(env, 0);
    enif_rwlock_rwlock(r->lock);
    unsigned n = mf_agg_take_top(r->g, slots, &min);
    for (unsigned i = 0; i < n; i++)
        list = enif_make_list_cell(env,
                                   enif_make_tuple4(env, end_term(env, r, (uint32_t)slots[i].from),
                                                    end_term(env, r, (uint32_t)slots[i].to),
                                                    enif_make_uint64(env, slots[i].count),
                                                    enif_make_uint64(env, slots[i].err)),
                                   list);
    enif_rwlock_rwunlock(r->lock);
    enif_free(slots);
    return n ? enif_make_list1(env, enif_make_tuple2(env, enif_make_uint64(env, min), list)) : enif_make_list(env, 0);
}

/* agg_idle_ends(Agg, Idle, Cursor) -> {[Endpoint], Cursor | done}: the
 * endpoints of up to 20,000 rows of those whose last window is Idle,
 * from Cursor on (start with 0), that roll up to nothing yet
 * (mf_agg_idle_ends), each once for that window. */
#define IDLE_ROWS 20000u
ERL_NIF_TERM mf_nif_agg_idle_ends(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    agg_res *r;
    unsigned idle, cursor;
    if (!get_agg(env, argv[0], &r) || !enif_get_uint(env, argv[1], &idle) ||
        !enif_get_uint(env, argv[2], &cursor) || cursor == UINT32_MAX)
        return enif_make_badarg(env);
    uint32_t *got = enif_alloc(2 * IDLE_ROWS * sizeof(*got));
    if (!got)
        return enif_raise_exception(env, atom_memory);
    ERL_NIF_TERM out = enif_make_list(env, 0);
    uint32_t at = cursor;
    enif_rwlock_rwlock(r->lock);
    uint32_t k = mf_agg_idle_ends(r->g, idle, &at, IDLE_ROWS, got);
    for (uint32_t i = 0; i < k; i++)
        out = enif_make_list_cell(env, end_term(env, r, got[i]), out);
    enif_rwlock_rwunlock(r->lock);
    enif_free(got);
    return enif_make_tuple2(env, out, at == UINT32_MAX ? atom_done : enif_make_uint(env, at));
}
