/*
 * mf_agg.c -- see mf_agg.h for what it owns and the thread rules.
 *
 * Layout: endpoints live in an array that doubles when full (so a pointer
 * to one is good until the next write), each table's rows in pages of
 * 4,096 of its own that never move (a scan of one table reads none of the
 * others'); each is found through an open-addressing index of 32-bit numbers
 * with linear probing, grown to twice its size past 5/8 full a few
 * numbers at each insert (num_index), so that no write reads every row.  A row rolled up
 * and an endpoint let go (freed two windows later) give their numbers
 * back for reuse.
 */
#include "mf_agg.h"

#include "mf_topk.h"

#include <stdlib.h>
#include <string.h>

#define IDX_MIN 1024u
/* slots of an index's larger table cleared at each insert before its scan */
#define IDX_ZERO 4096u
/* windows whose touched rows are kept: the open one and the three before
 * (mf_agg_idle_ends asks for the open one's minus 3) */
#define TOUCHED 4u
#define TOUCHED_PAGE 4096u
#define HEAP_MIN 64u
#define ROW_PAGE_BITS 12
#define ROW_PAGE (1u << ROW_PAGE_BITS)
/* A row's number: its table in the top 2 bits, its place in that table's
 * pages below (from 1), so that a table's rows are read without the
 * others'. */
#define ROW_TABLE_SHIFT 30
#define ROW_IN(n) ((n) & ((1u << ROW_TABLE_SHIFT) - 1))
#define ROW_NUM(t, i) ((uint32_t)(t) << ROW_TABLE_SHIFT | (i))
#define ROW(g, n) \
    (&(g)->tab[(n) >> ROW_TABLE_SHIFT].pages[ROW_IN(n) >> ROW_PAGE_BITS][ROW_IN(n) & (ROW_PAGE - 1)])

/* An open-addressing index of numbers (rows or endpoints).  It grows
 * without a pause: past five eighths full, a table twice the size is built beside
 * it, a few numbers at each insert (index_room; first its slots are
 * cleared, a page at each insert), by reading the numbers in order (`scan': every live number below it is in `next' too, and an
 * insert or delete below it is made in both), and takes over when the
 * scan is done.  Lookups read `slots' only, which stays whole until then. */
typedef struct {
    uint32_t *slots; /* numbers, 0 free */
    uint32_t size;   /* a power of two */
    uint32_t used;
    uint32_t *next;  /* the larger table being built (NULL: none) */
    uint32_t next_size, next_used;
    uint32_t zeroed; /* slots of `next' cleared so far (all: the scan runs) */
    uint32_t scan;   /* the next number to read into `next' (0: not begun) */
} num_index;

/* One table's rows. */
typedef struct {
    mf_agg_row **pages;     /* ROW_PAGE rows each: a row never moves */
    uint32_t rows_n, pages_cap;
    uint32_t *free_rows;    /* places of rows rolled up, to reuse */
    uint32_t free_rows_n, free_rows_cap;
} row_table;

/* A bounded index of the busiest keys: a min-heap of (value, key), and
 * where each key sits in it. */
typedef struct {
    uint32_t from, to, pos; /* pos: heap position + 1; 0 a free slot */
} pos_slot;

typedef struct {
    mf_agg_top *heap;      /* room + 1 entries, made on first use */
    uint32_t n, room;
    uint64_t floor;
    pos_slot *pos;         /* where each key sits, at most half full */
    uint32_t pos_size;
} busiest;

/* A pair's delta that waits for its ends' group ends. */
typedef struct {
    uint32_t from, to;
    uint64_t kind, n;
} pending;

struct mf_agg {
    const mf_alloc *a;
    mf_agg_opts o;
    uint64_t bytes;
    uint32_t open;              /* the open window */
    uint64_t *window_ms;        /* by w % (keep + 1): (w << 32 | ms), ms < 2^32 */
    int full;
    uint64_t max_pairs;         /* pairs rows at most (0: no bound) */
    mf_topk *over;              /* the busiest keys that found no row (pairs, replies) */
    /* endpoints, numbered from 1 (ends[0] unused) */
    mf_agg_end *ends;
    uint32_t ends_n, ends_cap;
    num_index end_index;
    uint32_t *fresh;            /* endpoints new since mf_agg_take_new */
    uint32_t fresh_n, fresh_cap;
    uint32_t *free_ends;        /* numbers to reuse */
    uint32_t free_ends_n, free_ends_cap;
    uint32_t *released;         /* let go since mf_agg_take_released */
    uint32_t released_n, released_cap;
    uint32_t *dying;            /* let go, freed two windows on if still so */
    uint32_t dying_n, dying_cap;
    /* rows, numbered from 1 */
    mf_agg_row *rows;
    row_table tab[MF_AGG_TABLES];
    uint32_t sweep_at[MF_AGG_TABLES]; /* where each table's sweep goes on */
    num_index row_index;
    uint64_t sizes[MF_AGG_TABLES];
    uint64_t sums[MF_AGG_TABLES];    /* each table's rows' messages */
    /* pairs rows whose receiver is a named endpoint */
    uint32_t *named;
    uint32_t named_n, named_cap;
    busiest top_total, top_open;
    mf_agg_top *last;           /* the last closed window's index, sorted */
    uint32_t last_n;
    uint64_t last_floor;
    mf_agg_ends_row *last_ends;
    uint32_t last_ends_n, last_ends_cap;
    pending *waiting;
    uint32_t waiting_n, waiting_cap;
    /* the pairs and rolled-up rows with traffic in each of the last
     * TOUCHED windows (by w % TOUCHED; a row may be listed twice, or after
     * its number was reused): the rows that may have gone idle in a
     * window, read without reading every row */
    uint32_t **touched[TOUCHED];     /* pages of TOUCHED_PAGE numbers */
    uint32_t touched_n[TOUCHED], touched_pages[TOUCHED];
};

static void touched_drop(mf_agg *g, unsigned w);

/* ---- memory ---- */

static void *g_alloc(mf_agg *g, size_t sz)
{
    void *p = g->a->alloc(g->a->ctx, sz);
    if (p)
        g->bytes += sz;
    return p;
}

static void g_free(mf_agg *g, void *p, size_t sz)
{
    if (!p)
        return;
    g->a->free(g->a->ctx, p, sz);
    g->bytes -= sz;
}

/* *p (of *cap elements of `size' bytes, n used) with room for one more. */
static int grow(mf_agg *g, void **p, uint32_t *cap, uint32_t n, size_t size, uint32_t min)
{
    if (n < *cap)
        return 0;
    uint32_t cap1 = *cap ? 2 * *cap : min;
    void *q = g_alloc(g, (size_t)cap1 * size);
    if (!q)
        return -1;
    if (*p)
        memcpy(q, *p, (size_t)n * size);
    g_free(g, *p, (size_t)*cap * size);
    *p = q;
    *cap = cap1;
    return 0;
}

/* ---- hashing and indexes ---- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_bytes(const unsigned char *b, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ULL; /* FNV-1a, then mixed */
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ULL;
    }
    return mix(h ^ n);
}

static uint64_t key_hash(unsigned table, uint32_t from, uint32_t to)
{
    return mix(((uint64_t)from << 32 | to) ^ (uint64_t)table * 0x9E3779B97F4A7C15ULL);
}

/* What an index holds: a live number's hash, whether a number is live,
 * and the number read after n when building a larger table (0: none). */
typedef struct {
    uint64_t (*hash)(const mf_agg *g, uint32_t n);
    int (*live)(const mf_agg *g, uint32_t n);
    uint32_t (*after)(const mf_agg *g, uint32_t n);
    uint32_t first;
} index_kind;

static void slots_put(uint32_t *slots, uint32_t size, uint64_t h, uint32_t n)
{
    uint32_t j = (uint32_t)h & (size - 1);
    while (slots[j])
        j = (j + 1) & (size - 1);
    slots[j] = n;
}

/* Removes n (hash h) from a table (backward-shift deletion keeps every
 * probe sequence whole); 1 when it was there. */
static int slots_del(const mf_agg *g, const index_kind *k, uint32_t *slots, uint32_t size,
                     uint64_t h, uint32_t n)
{
    uint32_t mask = size - 1;
    uint32_t i = (uint32_t)h & mask;
    while (slots[i] != n) {
        if (!slots[i])
            return 0; /* (not there) */
        i = (i + 1) & mask;
    }
    for (;;) {
        slots[i] = 0;
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            uint32_t m = slots[j];
            if (!m)
                return 1;
            uint32_t home = (uint32_t)k->hash(g, m) & mask;
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
                break;
        }
        slots[i] = slots[j];
        i = j;
    }
}

/* The larger table takes over. */
static void index_swap(mf_agg *g, num_index *ix)
{
    g_free(g, ix->slots, (size_t)ix->size * sizeof(*ix->slots));
    ix->slots = ix->next;
    ix->size = ix->next_size;
    ix->used = ix->next_used;
    ix->next = NULL;
    ix->next_size = ix->next_used = ix->zeroed = ix->scan = 0;
}

/* Reads up to `budget' numbers into the larger table; swaps when done. */
static void index_scan(mf_agg *g, num_index *ix, const index_kind *k, uint32_t budget)
{
    if (ix->next && ix->zeroed < ix->next_size) {
        uint32_t n = budget == UINT32_MAX ? ix->next_size - ix->zeroed
                     : ix->next_size - ix->zeroed < IDX_ZERO ? ix->next_size - ix->zeroed
                                                             : IDX_ZERO;
        memset(ix->next + ix->zeroed, 0, (size_t)n * sizeof(*ix->next));
        ix->zeroed += n;
        if (ix->zeroed < ix->next_size)
            return;
        ix->scan = k->first;
    }
    while (ix->next && budget--) {
        uint32_t n = ix->scan;
        if (k->live(g, n)) {
            slots_put(ix->next, ix->next_size, k->hash(g, n), n);
            ix->next_used++;
        }
        /* done: from here a number goes into `slots' alone */
        if (!(ix->scan = k->after(g, n)))
            index_swap(g, ix);
    }
}

/* Numbers read into the larger table at each insert: enough to finish it
 * before the index is three quarters full (an eighth of its size in
 * inserts) while fewer than 8 times its size are numbered. */
#define IDX_SCAN 64u

/* Makes room for one more number in the index: a step of the larger
 * table's build, begun past five eighths full; only when the index is three
 * quarters full with the build not done (or out of memory for it) is the
 * rest read at once.  -1 when out of memory and full. */
static int index_room(mf_agg *g, num_index *ix, const index_kind *k)
{
    if (!ix->slots) {
        if (!(ix->slots = g_alloc(g, (size_t)IDX_MIN * sizeof(*ix->slots))))
            return -1;
        memset(ix->slots, 0, (size_t)IDX_MIN * sizeof(*ix->slots));
        ix->size = IDX_MIN;
        return 0;
    }
    int full = (uint64_t)(ix->used + 1) * 4 > (uint64_t)ix->size * 3;
    if (!ix->next && (uint64_t)(ix->used + 1) * 8 > (uint64_t)ix->size * 5) {
        uint32_t size = 2 * ix->size;
        uint32_t *next = g_alloc(g, (size_t)size * sizeof(*next));
        if (!next)
            return full ? -1 : 0;
        ix->next = next;
        ix->next_size = size;
        ix->next_used = ix->zeroed = ix->scan = 0;
    }
    index_scan(g, ix, k, full ? UINT32_MAX : IDX_SCAN);
    return 0;
}

static void index_put(num_index *ix, uint64_t h, uint32_t n)
{
    slots_put(ix->slots, ix->size, h, n);
    ix->used++;
    if (ix->next && n < ix->scan) {
        slots_put(ix->next, ix->next_size, h, n);
        ix->next_used++;
    }
}

/* Removes number n from the index, found from its hash h; n is still
 * live (k->hash reads it). */
static void index_del(mf_agg *g, num_index *ix, const index_kind *k, uint64_t h, uint32_t n)
{
    ix->used -= (uint32_t)slots_del(g, k, ix->slots, ix->size, h, n);
    if (ix->next && n < ix->scan)
        ix->next_used -= (uint32_t)slots_del(g, k, ix->next, ix->next_size, h, n);
}

static void index_drop(mf_agg *g, num_index *ix)
{
    g_free(g, ix->slots, (size_t)ix->size * sizeof(*ix->slots));
    g_free(g, ix->next, (size_t)ix->next_size * sizeof(*ix->next));
    memset(ix, 0, sizeof(*ix));
}

static uint64_t end_hash_of(const mf_agg_end *e)
{
    return e->etf ? hash_bytes(e->etf, e->etf_len) : mix(e->word);
}

static uint64_t end_hash(const mf_agg *g, uint32_t n) { return end_hash_of(&g->ends[n]); }
static int end_live(const mf_agg *g, uint32_t n)
{
    return n <= g->ends_n && (g->ends[n].etf || g->ends[n].word);
}
static uint32_t end_after(const mf_agg *g, uint32_t n) { return n < g->ends_n ? n + 1 : 0; }
static const index_kind end_kind = {end_hash, end_live, end_after, 1};

static uint64_t row_hash(const mf_agg *g, uint32_t n)
{
    const mf_agg_row *r = ROW(g, n);
    return key_hash(r->table, r->from, r->to);
}
static int row_live(const mf_agg *g, uint32_t n)
{
    return ROW_IN(n) <= g->tab[n >> ROW_TABLE_SHIFT].rows_n && ROW(g, n)->from != 0;
}
/* the rows in number order: each table's from 1 to its rows_n (rows
 * added to a table the scan has left have numbers below it) */
static uint32_t row_after(const mf_agg *g, uint32_t n)
{
    unsigned t = n >> ROW_TABLE_SHIFT;
    if (ROW_IN(n) < g->tab[t].rows_n)
        return n + 1;
    for (t++; t < MF_AGG_TABLES; t++)
        if (g->tab[t].rows_n)
            return ROW_NUM(t, 1);
    return 0;
}
static const index_kind row_kind = {row_hash, row_live, row_after, ROW_NUM(0, 1)};

/* ---- the aggregate ---- */

mf_agg *mf_agg_new(const mf_alloc *a, const mf_agg_opts *o)
{
    mf_agg *g = a->alloc(a->ctx, sizeof(*g));
    if (!g)
        return NULL;
    memset(g, 0, sizeof(*g));
    g->a = a;
    g->o = *o;
    if (g->o.keep < 1)
        g->o.keep = 1;
    if (g->o.max_kinds < 1)
        g->o.max_kinds = 1;
    g->over = a->alloc(a->ctx, sizeof(*g->over));
    if (!g->over) {
        a->free(a->ctx, g, sizeof(*g));
        return NULL;
    }
    mf_topk_init(g->over);
    g->bytes = sizeof(*g) + sizeof(*g->over);
    g->open = 1;
    g->top_total.room = o->top_total ? o->top_total : 1;
    g->top_open.room = o->top_window ? o->top_window : 1;
    size_t wsz = (size_t)(g->o.keep + 1) * sizeof(uint64_t);
    g->window_ms = g_alloc(g, wsz);
    if (!g->window_ms) {
        a->free(a->ctx, g->over, sizeof(*g->over));
        a->free(a->ctx, g, sizeof(*g));
        return NULL;
    }
    memset(g->window_ms, 0, wsz);
    return g;
}

static void row_drop(mf_agg *g, mf_agg_row *r)
{
    g_free(g, r->hist, (size_t)r->hist_cap * sizeof(*r->hist));
    if (r->kinds_n || r->kinds_cap)
        g_free(g, r->kinds.list, (size_t)r->kinds_cap * sizeof(mf_agg_kind));
}

static void busiest_drop(mf_agg *g, busiest *b)
{
    if (b->heap) {
        g_free(g, b->heap, (size_t)(b->room + 1) * sizeof(*b->heap));
        g_free(g, b->pos, (size_t)b->pos_size * sizeof(*b->pos));
    }
    b->heap = NULL;
    b->pos = NULL;
}

void mf_agg_free(mf_agg *g)
{
    if (!g)
        return;
    for (unsigned t = 0; t < MF_AGG_TABLES; t++)
        for (uint32_t i = 1; i <= g->tab[t].rows_n; i++)
            if (ROW(g, ROW_NUM(t, i))->from)
                row_drop(g, ROW(g, ROW_NUM(t, i)));
    for (uint32_t i = 1; i <= g->ends_n; i++)
        g_free(g, g->ends[i].etf, g->ends[i].etf_len); /* (NULL when freed) */
    for (unsigned t = 0; t < MF_AGG_TABLES; t++) {
        for (uint32_t i = 0; i < g->tab[t].pages_cap && g->tab[t].pages[i]; i++)
            g_free(g, g->tab[t].pages[i], ROW_PAGE * sizeof(mf_agg_row));
        g_free(g, g->tab[t].pages, (size_t)g->tab[t].pages_cap * sizeof(mf_agg_row *));
        g_free(g, g->tab[t].free_rows, (size_t)g->tab[t].free_rows_cap * sizeof(uint32_t));
    }
    g_free(g, g->ends, (size_t)g->ends_cap * sizeof(*g->ends));
    index_drop(g, &g->row_index);
    index_drop(g, &g->end_index);
    g_free(g, g->named, (size_t)g->named_cap * sizeof(*g->named));
    busiest_drop(g, &g->top_total);
    busiest_drop(g, &g->top_open);
    g_free(g, g->last, (size_t)g->last_n * sizeof(*g->last));
    g_free(g, g->last_ends, (size_t)g->last_ends_cap * sizeof(*g->last_ends));
    g_free(g, g->waiting, (size_t)g->waiting_cap * sizeof(*g->waiting));
    for (unsigned w = 0; w < TOUCHED; w++)
        touched_drop(g, w);
    g_free(g, g->fresh, (size_t)g->fresh_cap * sizeof(*g->fresh));
    g_free(g, g->free_ends, (size_t)g->free_ends_cap * sizeof(*g->free_ends));
    g_free(g, g->released, (size_t)g->released_cap * sizeof(*g->released));
    g_free(g, g->dying, (size_t)g->dying_cap * sizeof(*g->dying));
    g_free(g, g->window_ms, (size_t)(g->o.keep + 1) * sizeof(uint64_t));
    g_free(g, g->over, sizeof(*g->over));
    const mf_alloc *a = g->a;
    a->free(a->ctx, g, sizeof(*g));
}

uint64_t mf_agg_bytes(const mf_agg *g) { return g->bytes; }
uint32_t mf_agg_open(const mf_agg *g) { return g->open; }
uint32_t mf_agg_ends(const mf_agg *g) { return g->ends_n; }
uint64_t mf_agg_size(const mf_agg *g, unsigned table) { return table < MF_AGG_TABLES ? g->sizes[table] : 0; }
void mf_agg_set_full(mf_agg *g, int full) { g->full = full; }
void mf_agg_set_max_pairs(mf_agg *g, uint64_t max) { g->max_pairs = max; }

unsigned mf_agg_take_top(mf_agg *g, mf_topk_slot *out, uint64_t *min)
{
    return mf_topk_take(g->over, out, min);
}

uint64_t mf_agg_window_ms(const mf_agg *g, uint32_t w)
{
    /* the last `keep' closed windows' lengths (msgflow_store's durations) */
    if (!w || w >= g->open || (uint64_t)w + g->o.keep < g->open)
        return 0;
    uint64_t x = g->window_ms[w % (g->o.keep + 1)];
    return (uint32_t)(x >> 32) == w ? (x & 0xFFFFFFFFu) : 0;
}

/* ---- endpoints ---- */

const mf_agg_end *mf_agg_end_at(const mf_agg *g, uint32_t e)
{
    /* (a number freed and not yet reused holds no endpoint) */
    return e >= 1 && e <= g->ends_n && (g->ends[e].etf || g->ends[e].word) ? &g->ends[e] : NULL;
}

static uint32_t find_end(const mf_agg *g, uint64_t h, uint64_t word, const unsigned char *etf,
                         size_t len)
{
    const num_index *ix = &g->end_index;
    if (!ix->slots)
        return 0;
    for (uint32_t j = (uint32_t)h & (ix->size - 1);; j = (j + 1) & (ix->size - 1)) {
        uint32_t n = ix->slots[j];
        if (!n)
            return 0;
        const mf_agg_end *e = &g->ends[n];
        if (etf ? (e->etf && e->etf_len == len && memcmp(e->etf, etf, len) == 0)
                : (!e->etf && e->word == word))
            return n;
    }
}

uint32_t mf_agg_find_word(const mf_agg *g, uint64_t word)
{
    return find_end(g, mix(word), word, NULL, 0);
}

uint32_t mf_agg_find_bytes(const mf_agg *g, const unsigned char *etf, size_t len)
{
    return find_end(g, hash_bytes(etf, len), 0, etf, len);
}

static uint32_t add_end(mf_agg *g, uint64_t h, uint64_t word, const unsigned char *etf, size_t len,
                        uint32_t flags)
{
    if (len > UINT32_MAX)
        return 0;
    if (g->ends_n + 1 >= UINT32_MAX - 1)
        return 0;
    /* ends[0] is unused: room for ends_n + 2 entries */
    if (grow(g, (void **)&g->ends, &g->ends_cap, g->ends_n + 1, sizeof(*g->ends), 1024) < 0)
        return 0;
    if (index_room(g, &g->end_index, &end_kind) < 0)
        return 0;
    if (grow(g, (void **)&g->fresh, &g->fresh_cap, g->fresh_n, sizeof(*g->fresh), 256) < 0)
        return 0;
    unsigned char *copy = NULL;
    if (etf) {
        copy = g_alloc(g, len);
        if (!copy)
            return 0;
        memcpy(copy, etf, len);
    }
    uint32_t n = g->free_ends_n ? g->free_ends[--g->free_ends_n] : ++g->ends_n;
    g->fresh[g->fresh_n++] = n;
    mf_agg_end *e = &g->ends[n];
    memset(e, 0, sizeof(*e));
    e->word = etf ? 0 : word;
    e->etf = copy;
    e->etf_len = (uint32_t)len;
    e->flags = flags;
    index_put(&g->end_index, h, n);
    return n;
}

uint32_t mf_agg_end_word(mf_agg *g, uint64_t word)
{
    uint64_t h = mix(word);
    uint32_t n = find_end(g, h, word, NULL, 0);
    return n ? n : add_end(g, h, word, NULL, 0, 0);
}

uint32_t mf_agg_end_bytes(mf_agg *g, const unsigned char *etf, size_t len, uint32_t flags)
{
    uint64_t h = hash_bytes(etf, len);
    uint32_t n = find_end(g, h, 0, etf, len);
    return n ? n : add_end(g, h, 0, etf, len, flags);
}

uint32_t mf_agg_take_new(mf_agg *g, uint32_t *out, uint32_t max)
{
    uint32_t k = 0, i = 0;
    for (; k < max && i < g->fresh_n; i++) {
        uint32_t e = g->fresh[i];
        if ((g->ends[e].etf || g->ends[e].word) && !(g->ends[e].flags & MF_AGG_GROUP))
            out[k++] = e; /* (not freed since, and no group end) */
    }
    memmove(g->fresh, g->fresh + i, (size_t)(g->fresh_n - i) * sizeof(*g->fresh));
    g->fresh_n -= i;
    if (!g->fresh_n && g->fresh_cap > 4096) {
        g_free(g, g->fresh, (size_t)g->fresh_cap * sizeof(*g->fresh));
        g->fresh = NULL;
        g->fresh_cap = 0;
    }
    return k;
}

/* e's rows or refs fell to 0: let go (the owner hears of it; freed two
 * windows on, when still so). */
static void end_unref_check(mf_agg *g, uint32_t e)
{
    mf_agg_end *x = &g->ends[e];
    if (x->rows || x->refs || x->released)
        return;
    if (grow(g, (void **)&g->released, &g->released_cap, g->released_n, sizeof(*g->released), 256) < 0 ||
        grow(g, (void **)&g->dying, &g->dying_cap, g->dying_n, sizeof(*g->dying), 256) < 0)
        return; /* (kept: it is freed with the aggregate) */
    x->released = g->open;
    x->flags |= MF_AGG_LISTED;
    g->released[g->released_n++] = e;
    g->dying[g->dying_n++] = e;
}

uint32_t mf_agg_take_released(mf_agg *g, uint32_t *out, uint32_t max)
{
    uint32_t k = 0;
    while (k < max && g->released_n) {
        uint32_t e = g->released[--g->released_n];
        g->ends[e].flags &= ~MF_AGG_LISTED;
        if (g->ends[e].released)
            out[k++] = e; /* (not named again since) */
    }
    return k;
}

static void end_ref(mf_agg *g, uint32_t e, int by)
{
    if (!e)
        return;
    g->ends[e].refs += (uint32_t)by;
    if (by > 0)
        g->ends[e].released = 0;
    else
        end_unref_check(g, e);
}

/* The endpoints let go at least two windows ago that nothing names since:
 * freed, their numbers to reuse (a view or a window's kept figures made
 * before may have named them until then). */
static void free_dying(mf_agg *g)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->dying_n; i++) {
        uint32_t e = g->dying[i];
        mf_agg_end *x = &g->ends[e];
        if (!x->released || x->rows || x->refs) {
            x->released = 0; /* named again */
            continue;
        }
        int waits = 0;
        for (uint32_t w = 0; w < g->waiting_n && !waits; w++)
            waits = g->waiting[w].from == e || g->waiting[w].to == e;
        if (x->released + 2 > g->open || waits || (x->flags & MF_AGG_LISTED) ||
            grow(g, (void **)&g->free_ends, &g->free_ends_cap, g->free_ends_n, sizeof(*g->free_ends), 256) < 0) {
            g->dying[k++] = e;
            continue;
        }
        index_del(g, &g->end_index, &end_kind, end_hash_of(x), e);
        end_ref(g, x->group, -1);
        end_ref(g, x->rollup, -1);
        g_free(g, x->etf, x->etf_len);
        memset(x, 0, sizeof(*x));
        g->free_ends[g->free_ends_n++] = e;
    }
    g->dying_n = k;
}

/* ---- rows ---- */

static uint32_t find_row(const mf_agg *g, unsigned table, uint32_t from, uint32_t to)
{
    const num_index *ix = &g->row_index;
    if (!ix->slots)
        return 0;
    for (uint32_t j = (uint32_t)key_hash(table, from, to) & (ix->size - 1);;
         j = (j + 1) & (ix->size - 1)) {
        uint32_t n = ix->slots[j];
        if (!n)
            return 0;
        const mf_agg_row *r = ROW(g, n);
        if (r->from == from && r->to == to && r->table == table)
            return n;
    }
}

const mf_agg_row *mf_agg_find(const mf_agg *g, unsigned table, uint32_t from, uint32_t to)
{
    uint32_t n = find_row(g, table, from, to);
    return n ? ROW(g, n) : NULL;
}

const mf_agg_row *mf_agg_next(const mf_agg *g, unsigned table, uint32_t *cursor)
{
    if (table >= MF_AGG_TABLES)
        return NULL;
    if (*cursor >= g->tab[table].rows_n) {
        *cursor = g->tab[table].rows_n;
        return NULL;
    }
    for (uint32_t i = *cursor + 1; i <= g->tab[table].rows_n; i++) {
        const mf_agg_row *r = ROW(g, ROW_NUM(table, i));
        if (r->from) {
            *cursor = i;
            return r;
        }
    }
    *cursor = g->tab[table].rows_n;
    return NULL;
}

static uint32_t new_row(mf_agg *g, unsigned table, uint32_t from, uint32_t to)
{
    row_table *tb = &g->tab[table];
    if (tb->rows_n + 1 >= (1u << ROW_TABLE_SHIFT) - 1)
        return 0;
    uint32_t page = (tb->rows_n + 1) >> ROW_PAGE_BITS;
    if (page >= tb->pages_cap) {
        uint32_t cap = tb->pages_cap ? 2 * tb->pages_cap : 16;
        mf_agg_row **pages = g_alloc(g, cap * sizeof(*pages));
        if (!pages)
            return 0;
        memset(pages, 0, cap * sizeof(*pages));
        if (tb->pages)
            memcpy(pages, tb->pages, tb->pages_cap * sizeof(*pages));
        g_free(g, tb->pages, (size_t)tb->pages_cap * sizeof(*tb->pages));
        tb->pages = pages;
        tb->pages_cap = cap;
    }
    if (!tb->pages[page] && !(tb->pages[page] = g_alloc(g, ROW_PAGE * sizeof(mf_agg_row))))
        return 0;
    if (index_room(g, &g->row_index, &row_kind) < 0)
        return 0;
    uint32_t n = ROW_NUM(table, tb->free_rows_n ? tb->free_rows[--tb->free_rows_n] : ++tb->rows_n);
    mf_agg_row *r = ROW(g, n);
    memset(r, 0, sizeof(*r));
    r->table = table;
    r->from = from;
    r->to = to;
    index_put(&g->row_index, key_hash(table, from, to), n);
    g->sizes[table]++;
    g->ends[from].rows++;
    g->ends[to].rows++;
    g->ends[from].released = g->ends[to].released = 0;
    if (table == MF_AGG_PAIRS)
        g->ends[from].flags |= MF_AGG_PAIRS_OUT;
    else if (table == MF_AGG_ROLLED)
        g->ends[from].flags |= MF_AGG_ROLLED_OUT;
    return n;
}

/* Row rn leaves its table (its history and kinds freed unless `keep'
 * says they went to another row); its number is reused. */
static void row_delete(mf_agg *g, uint32_t rn, int keep)
{
    mf_agg_row *r = ROW(g, rn);
    index_del(g, &g->row_index, &row_kind, key_hash(r->table, r->from, r->to), rn);
    g->sizes[r->table]--;
    g->sums[r->table] -= r->total;
    if (r->named_at) {
        /* the last named row takes its place */
        uint32_t last = g->named[--g->named_n];
        g->named[r->named_at - 1] = last;
        ROW(g, last)->named_at = r->named_at;
    }
    uint32_t from = r->from, to = r->to;
    if (!keep)
        row_drop(g, r);
    memset(r, 0, sizeof(*r));
    row_table *tb = &g->tab[rn >> ROW_TABLE_SHIFT];
    if (grow(g, (void **)&tb->free_rows, &tb->free_rows_cap, tb->free_rows_n, sizeof(*tb->free_rows), 256) == 0)
        tb->free_rows[tb->free_rows_n++] = ROW_IN(rn);
    g->ends[from].rows--;
    g->ends[to].rows--;
    end_unref_check(g, from);
    end_unref_check(g, to);
}

static uint64_t mhz(uint64_t count, uint64_t ms)
{
    return ms ? count * 1000000u / ms : 0;
}

/* (w, count) at the end of r's history, entries before `oldest' dropped. */
static int hist_push(mf_agg *g, mf_agg_row *r, uint32_t w, uint64_t count, int64_t oldest)
{
    uint32_t drop = 0;
    while (drop < r->hist_n && (int64_t)(r->hist[drop] >> 32) < oldest)
        drop++;
    if (drop) {
        memmove(r->hist, r->hist + drop, (size_t)(r->hist_n - drop) * sizeof(*r->hist));
        r->hist_n -= drop;
    }
    if ((int64_t)w < oldest)
        return 0;
    if (grow(g, (void **)&r->hist, &r->hist_cap, r->hist_n, sizeof(*r->hist), 2) < 0)
        return -1;
    r->hist[r->hist_n++] = (uint64_t)w << 32 | (count > 0xFFFFFFFFu ? 0xFFFFFFFFu : count);
    return 0;
}

static int is_other(const mf_agg *g, uint64_t kind)
{
    return (kind >> g->o.kind_bits) == g->o.other_tag;
}

static uint64_t other_of(const mf_agg *g, uint64_t kind)
{
    return g->o.other_tag << g->o.kind_bits | (kind & ((1ull << g->o.kind_bits) - 1));
}

/* n messages of `kind' (in r->total already) added to r's kinds: the rule
 * of msgflow_row:add_kind/4. */
static int add_kind(mf_agg *g, mf_agg_row *r, uint64_t n, uint64_t kind)
{
    if (!r->kinds_n && r->kinds.one == kind)
        return 0; /* all of this one kind still, or no kinds at all */
    if (!r->kinds_n) {
        uint64_t one = r->kinds.one;
        r->kinds.list = NULL;
        if (one) {
            if (grow(g, (void **)&r->kinds.list, &r->kinds_cap, 0, sizeof(mf_agg_kind), 2) < 0) {
                r->kinds.one = one;
                return -1;
            }
            r->kinds.list[0].word = one;
            r->kinds.list[0].n = r->total - n;
            r->kinds_n = 1;
        }
    }
    if (!kind)
        return 0; /* (no longer all of one kind) */
    for (;;) {
        for (uint32_t i = 0; i < r->kinds_n; i++) {
            if (r->kinds.list[i].word == kind) {
                mf_agg_kind k = r->kinds.list[i];
                k.n += n;
                memmove(r->kinds.list + 1, r->kinds.list, (size_t)i * sizeof(k));
                r->kinds.list[0] = k;
                return 0;
            }
        }
        uint32_t own = 0;
        for (uint32_t i = 0; i < r->kinds_n; i++)
            own += !is_other(g, r->kinds.list[i].word);
        if (is_other(g, kind) || own < g->o.max_kinds) {
            if (grow(g, (void **)&r->kinds.list, &r->kinds_cap, r->kinds_n, sizeof(mf_agg_kind), 2) < 0)
                return -1;
            memmove(r->kinds.list + 1, r->kinds.list, (size_t)r->kinds_n * sizeof(mf_agg_kind));
            r->kinds.list[0].word = kind;
            r->kinds.list[0].n = n;
            r->kinds_n++;
            return 0;
        }
        kind = other_of(g, kind);
    }
}


static void touched_drop(mf_agg *g, unsigned w)
{
    for (uint32_t p = 0; p < g->touched_pages[w]; p++)
        g_free(g, g->touched[w][p], TOUCHED_PAGE * sizeof(uint32_t));
    g_free(g, g->touched[w], (size_t)g->touched_pages[w] * sizeof(uint32_t *));
    g->touched[w] = NULL;
    g->touched_n[w] = g->touched_pages[w] = 0;
}

/* Row rn (pairs or rolled up) has traffic in the open window, its first
 * there: listed for mf_agg_idle_ends.  Out of memory: not listed (its ends
 * are then found gone only by the owner's own pass). */
static void touch(mf_agg *g, uint32_t rn)
{
    unsigned w = g->open % TOUCHED;
    if ((rn >> ROW_TABLE_SHIFT) > MF_AGG_ROLLED)
        return;
    uint32_t n = g->touched_n[w], p = n / TOUCHED_PAGE;
    if (p == g->touched_pages[w]) {
        /* a page more (the pages' list grows by copying its pointers) */
        uint32_t **pages = g_alloc(g, (size_t)(p + 1) * sizeof(*pages));
        uint32_t *page = pages ? g_alloc(g, TOUCHED_PAGE * sizeof(uint32_t)) : NULL;
        if (!page) {
            g_free(g, pages, (size_t)(p + 1) * sizeof(*pages));
            return;
        }
        if (p)
            memcpy(pages, g->touched[w], (size_t)p * sizeof(*pages));
        g_free(g, g->touched[w], (size_t)p * sizeof(*pages));
        pages[p] = page;
        g->touched[w] = pages;
        g->touched_pages[w] = p + 1;
    }
    g->touched[w][p][n % TOUCHED_PAGE] = rn;
    g->touched_n[w] = n + 1;
}

/* n messages of `kind' in row number rn in the open window: 1 when they are
 * its first of the window.  The rule of msgflow_row:add/5 and
 * add_in_open/2. */
static int row_add(mf_agg *g, uint32_t rn, uint64_t kind, uint64_t n)
{
    mf_agg_row *r = ROW(g, rn);
    int first = r->last_window != g->open;
    if (first && r->last_window) {
        uint64_t p = mhz(r->last_count, mf_agg_window_ms(g, r->last_window));
        if (p > r->peak_mhz)
            r->peak_mhz = p;
        (void)hist_push(g, r, r->last_window, r->last_count, (int64_t)g->open - g->o.keep);
        r = ROW(g, rn);
        r->last_count = 0;
    }
    if (first)
        touch(g, rn);
    r->last_window = g->open;
    r->last_count += n;
    r->total += n;
    g->sums[r->table] += n;
    (void)add_kind(g, r, n, kind);
    return first;
}

/* ---- busiest indexes ---- */

static uint64_t top_key_hash(uint32_t from, uint32_t to) { return mix((uint64_t)from << 32 | to); }

/* The slot of key (from, to) in b's position index (one holding it, or the
 * free one where it would go). */
static pos_slot *pos_find(const busiest *b, uint32_t from, uint32_t to)
{
    uint32_t mask = b->pos_size - 1;
    for (uint32_t j = (uint32_t)top_key_hash(from, to) & mask;; j = (j + 1) & mask) {
        pos_slot *s = &b->pos[j];
        if (!s->pos || (s->from == from && s->to == to))
            return s;
    }
}

static void pos_del(busiest *b, pos_slot *s)
{
    uint32_t mask = b->pos_size - 1;
    uint32_t i = (uint32_t)(s - b->pos);
    for (;;) {
        b->pos[i].pos = 0;
        uint32_t k = i;
        for (;;) {
            k = (k + 1) & mask;
            if (!b->pos[k].pos)
                return;
            uint32_t home = (uint32_t)top_key_hash(b->pos[k].from, b->pos[k].to) & mask;
            if (i <= k ? (home <= i || home > k) : (home <= i && home > k))
                break;
        }
        b->pos[i] = b->pos[k];
        i = k;
    }
}

static int top_less(const mf_agg_top *a, const mf_agg_top *b)
{
    if (a->value != b->value)
        return a->value < b->value;
    return a->from != b->from ? a->from > b->from : a->to > b->to;
}

/* t placed at heap position j, and its key's slot told so. */
static void heap_set(busiest *b, uint32_t j, mf_agg_top t)
{
    b->heap[j] = t;
    pos_find(b, t.from, t.to)->pos = j + 1;
}

static void sift_down(busiest *b, uint32_t i)
{
    mf_agg_top t = b->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= b->n)
            break;
        if (c + 1 < b->n && top_less(&b->heap[c + 1], &b->heap[c]))
            c++;
        if (!top_less(&b->heap[c], &t))
            break;
        heap_set(b, i, b->heap[c]);
        i = c;
    }
    heap_set(b, i, t);
}

static void sift_up(busiest *b, uint32_t i)
{
    mf_agg_top t = b->heap[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!top_less(&t, &b->heap[p]))
            break;
        heap_set(b, i, b->heap[p]);
        i = p;
    }
    heap_set(b, i, t);
}

/* The heap and its position index, made at their full size on first use:
 * room + 1 entries, the index at most half full. */
static int busiest_ready(mf_agg *g, busiest *b)
{
    if (b->heap)
        return 0;
    uint32_t size = 16;
    while (size < 2 * (b->room + 1))
        size *= 2;
    b->heap = g_alloc(g, (size_t)(b->room + 1) * sizeof(*b->heap));
    b->pos = g_alloc(g, (size_t)size * sizeof(*b->pos));
    if (!b->heap || !b->pos) {
        g_free(g, b->heap, (size_t)(b->room + 1) * sizeof(*b->heap));
        g_free(g, b->pos, (size_t)size * sizeof(*b->pos));
        b->heap = NULL;
        b->pos = NULL;
        return -1;
    }
    memset(b->pos, 0, (size_t)size * sizeof(*b->pos));
    b->pos_size = size;
    return 0;
}

/* Key (from, to) has value v now (never less than before).  -1 out of
 * memory (the floor then rises to v, so that the index stays exact). */
static int bump(mf_agg *g, busiest *b, uint32_t from, uint32_t to, uint64_t v)
{
    if (v <= b->floor)
        return 0;
    if (busiest_ready(g, b) < 0) {
        b->floor = v;
        return -1;
    }
    pos_slot *s = pos_find(b, from, to);
    if (s->pos) {
        uint32_t i = s->pos - 1;
        b->heap[i].value = v;
        sift_down(b, i);
        return 0;
    }
    uint32_t i = b->n++;
    s->from = from;
    s->to = to;
    s->pos = i + 1;
    b->heap[i] = (mf_agg_top){v, from, to};
    sift_up(b, i);
    if (b->n > b->room) {
        mf_agg_top min = b->heap[0];
        pos_del(b, pos_find(b, min.from, min.to));
        b->n--;
        if (b->n) {
            b->heap[0] = b->heap[b->n];
            sift_down(b, 0);
        }
        if (min.value > b->floor)
            b->floor = min.value;
    }
    return 0;
}

static int top_cmp_desc(const void *x, const void *y)
{
    const mf_agg_top *a = x, *b = y;
    return top_less(a, b) ? 1 : top_less(b, a) ? -1 : 0;
}

uint32_t mf_agg_busiest(const mf_agg *g, unsigned which, mf_agg_top *out, uint32_t max,
                        uint64_t *floor)
{
    const mf_agg_top *src;
    uint32_t n;
    if (which == 2) {
        src = g->last;
        n = g->last_n;
        *floor = g->last_floor;
    } else {
        const busiest *b = which == 0 ? &g->top_total : &g->top_open;
        src = b->heap;
        n = b->n;
        *floor = b->floor;
    }
    if (!n || !max)
        return 0;
    if (which == 2) {
        uint32_t k = n < max ? n : max; /* sorted at close */
        memcpy(out, src, (size_t)k * sizeof(*out));
        return k;
    }
    /* the heap sorted into a copy: at most the index's cap entries */
    mf_agg_top *all = malloc((size_t)n * sizeof(*all));
    if (!all)
        return 0;
    memcpy(all, src, (size_t)n * sizeof(*all));
    qsort(all, n, sizeof(*all), top_cmp_desc);
    uint32_t k = n < max ? n : max;
    memcpy(out, all, (size_t)k * sizeof(*out));
    free(all);
    return k;
}

/* ---- adding ---- */

static void end_count(mf_agg *g, uint32_t e, int in, int first, uint64_t n)
{
    mf_agg_end *x = &g->ends[e];
    if (x->window != g->open) {
        x->window = g->open;
        x->in_partners = x->out_partners = 0;
        x->in_msgs = x->out_msgs = 0;
    }
    if (in) {
        x->in_partners += first;
        x->in_msgs += n;
    } else {
        x->out_partners += first;
        x->out_msgs += n;
    }
}

/* The group row of a pair's delta, or -1 out of memory. */
static int add_group(mf_agg *g, uint32_t from, uint32_t to, uint64_t kind, uint64_t n)
{
    uint32_t gs = g->ends[from].group, gr = g->ends[to].group;
    if (!gs || !gr) {
        if (grow(g, (void **)&g->waiting, &g->waiting_cap, g->waiting_n, sizeof(*g->waiting), 64) < 0)
            return -1;
        g->waiting[g->waiting_n++] = (pending){from, to, kind, n};
        return 0;
    }
    uint32_t rn = find_row(g, MF_AGG_GROUPS, gs, gr);
    if (!rn) {
        if (!(rn = new_row(g, MF_AGG_GROUPS, gs, gr)))
            return -1;
        ROW(g, rn)->kinds.one = kind;
        ROW(g, rn)->last_window = g->open;
        ROW(g, rn)->total = ROW(g, rn)->last_count = n;
        g->sums[MF_AGG_GROUPS] += n;
        return 0;
    }
    (void)row_add(g, rn, kind, n);
    return 0;
}

int mf_agg_set_group(mf_agg *g, uint32_t e, uint32_t group)
{
    if (!mf_agg_end_at(g, e) || !mf_agg_end_at(g, group))
        return -1;
    if (g->ends[e].group != group) {
        end_ref(g, group, 1);
        end_ref(g, g->ends[e].group, -1);
        g->ends[e].group = group;
    }
    return 0;
}

int mf_agg_set_rollup(mf_agg *g, uint32_t e, uint32_t to)
{
    if (!mf_agg_end_at(g, e) || (to && !mf_agg_end_at(g, to)))
        return -1;
    if (g->ends[e].rollup != to) {
        end_ref(g, to, 1);
        end_ref(g, g->ends[e].rollup, -1);
        g->ends[e].rollup = to;
    }
    return 0;
}

int mf_agg_groups_ready(mf_agg *g)
{
    uint32_t k = 0;
    int err = 0;
    for (uint32_t i = 0; i < g->waiting_n; i++) {
        pending p = g->waiting[i];
        if (g->ends[p.from].group && g->ends[p.to].group) {
            if (add_group(g, p.from, p.to, p.kind, p.n) < 0)
                err = -1;
        } else {
            g->waiting[k++] = p;
        }
    }
    g->waiting_n = k;
    if (!k && g->waiting_cap > 1024) {
        g_free(g, g->waiting, (size_t)g->waiting_cap * sizeof(*g->waiting));
        g->waiting = NULL;
        g->waiting_cap = 0;
    }
    return err;
}

int mf_agg_add(mf_agg *g, unsigned table, uint32_t from, uint32_t to, uint64_t kind, uint64_t n)
{
    if (table > MF_AGG_DEAD || !mf_agg_end_at(g, from) || !mf_agg_end_at(g, to) || !n)
        return 1;
    uint32_t rn = find_row(g, table, from, to);
    int first;
    if (!rn) {
        if (g->full || (table == MF_AGG_PAIRS && g->max_pairs && g->sizes[MF_AGG_PAIRS] >= g->max_pairs) ||
            !(rn = new_row(g, table, from, to))) {
            if (table != MF_AGG_DEAD)
                mf_topk_add_n(g->over, from, to, n);
            end_unref_check(g, from); /* (made for this key only: let go) */
            end_unref_check(g, to);
            return 1;
        }
        mf_agg_row *r = ROW(g, rn);
        r->last_window = g->open;
        r->total = r->last_count = n;
        g->sums[table] += n;
        touch(g, rn);
        r->kinds.one = table == MF_AGG_DEAD ? 0 : kind;
        if (table == MF_AGG_PAIRS && (g->ends[to].flags & MF_AGG_NAMED) &&
            grow(g, (void **)&g->named, &g->named_cap, g->named_n, sizeof(*g->named), 16) == 0) {
            g->named[g->named_n++] = rn;
            r->named_at = g->named_n;
        }
        first = 1;
    } else if (table == MF_AGG_DEAD) {
        ROW(g, rn)->total += n;
        g->sums[MF_AGG_DEAD] += n;
        return 0;
    } else {
        first = row_add(g, rn, kind, n);
    }
    if (table == MF_AGG_DEAD)
        return 0;
    /* the sender's busiest receiver so far */
    mf_agg_end *sender = &g->ends[from];
    uint64_t sent = ROW(g, rn)->total;
    if (table == MF_AGG_PAIRS && (sender->partner == to || sent > sender->partner_msgs)) {
        sender->partner = to;
        sender->partner_msgs = sent;
    }
    /* the window's ends */
    end_count(g, to, 1, first, n);
    if ((kind & ((1ull << g->o.kind_bits) - 1)) != g->o.reply_kind || !kind)
        end_count(g, from, 0, first, n);
    /* the busiest indexes: the key's rows in both tables */
    if (!(g->ends[to].flags & MF_AGG_NAMED)) {
        const mf_agg_row *r = ROW(g, rn);
        uint64_t total = r->total, count = r->last_count;
        /* (most keys have rows in one table only: a sender of none in
         * the other is not looked up there) */
        unsigned other = table == MF_AGG_PAIRS ? MF_AGG_ROLLED : MF_AGG_PAIRS;
        uint32_t other_out = other == MF_AGG_PAIRS ? MF_AGG_PAIRS_OUT : MF_AGG_ROLLED_OUT;
        const mf_agg_row *o = g->ends[from].flags & other_out ? mf_agg_find(g, other, from, to) : NULL;
        if (o) {
            total += o->total;
            if (o->last_window == g->open)
                count += o->last_count;
        }
        (void)bump(g, &g->top_total, from, to, total);
        (void)bump(g, &g->top_open, from, to, count);
    }
    (void)add_group(g, from, to, kind, n);
    return 0;
}

/* ---- windows ---- */

int mf_agg_close(mf_agg *g, uint64_t ms, uint32_t min_partners)
{
    uint32_t w = g->open;
    g->window_ms[w % (g->o.keep + 1)] = (uint64_t)w << 32 | (ms > 0xFFFFFFFFu ? 0xFFFFFFFFu : ms);
    int err = 0;
    /* the open window's index becomes the last's, sorted */
    busiest *b = &g->top_open;
    g_free(g, g->last, (size_t)g->last_n * sizeof(*g->last));
    g->last = NULL;
    g->last_n = 0;
    g->last_floor = b->floor;
    if (b->n) {
        g->last = g_alloc(g, (size_t)b->n * sizeof(*g->last));
        if (g->last) {
            memcpy(g->last, b->heap, (size_t)b->n * sizeof(*g->last));
            qsort(g->last, b->n, sizeof(*g->last), top_cmp_desc);
            g->last_n = b->n;
        } else {
            err = -1;
        }
    }
    b->n = 0;
    b->floor = 0;
    if (b->pos)
        memset(b->pos, 0, (size_t)b->pos_size * sizeof(*b->pos));
    /* its ends kept: the busy ones and the names */
    g->last_ends_n = 0;
    for (uint32_t e = 1; e <= g->ends_n; e++) {
        const mf_agg_end *x = &g->ends[e];
        if (x->window != w)
            continue;
        if (x->in_partners < min_partners && x->out_partners < min_partners && !(x->flags & MF_AGG_NAMED))
            continue;
        if (grow(g, (void **)&g->last_ends, &g->last_ends_cap, g->last_ends_n, sizeof(*g->last_ends), 64) < 0) {
            err = -1;
            break;
        }
        g->last_ends[g->last_ends_n++] =
            (mf_agg_ends_row){e, x->in_partners, x->out_partners, x->in_msgs, x->out_msgs};
    }
    g->open = w + 1;
    /* the list of window w + 1 - TOUCHED makes room for the new one's */
    unsigned t = g->open % TOUCHED;
    if (g->touched_pages[t] > 1)
        touched_drop(g, t);
    g->touched_n[t] = 0;
    free_dying(g);
    return err;
}

const mf_agg_ends_row *mf_agg_last_ends(const mf_agg *g, uint32_t *cursor)
{
    if (*cursor >= g->last_ends_n)
        return NULL;
    return &g->last_ends[(*cursor)++];
}

/* ---- roll-ups ---- */

/* Key (from, to) leaves index b (a key tied with the rest stays exact:
 * msgflow_store_index's remove). */
static void heap_remove(busiest *b, uint32_t from, uint32_t to)
{
    if (!b->heap)
        return;
    pos_slot *s = pos_find(b, from, to);
    if (!s->pos)
        return;
    uint32_t i = s->pos - 1;
    pos_del(b, s);
    b->n--;
    if (i < b->n) {
        mf_agg_top t = b->heap[b->n];
        heap_set(b, i, t);
        sift_up(b, i);
        sift_down(b, pos_find(b, t.from, t.to)->pos - 1);
    }
}

/* Key (from, to) ranked by messages since start by its rows in both
 * tables (none sent to a name). */
static void rank(mf_agg *g, uint32_t from, uint32_t to)
{
    if (g->ends[to].flags & MF_AGG_NAMED)
        return;
    const mf_agg_row *p = mf_agg_find(g, MF_AGG_PAIRS, from, to), *q = mf_agg_find(g, MF_AGG_ROLLED, from, to);
    uint64_t total = (p ? p->total : 0) + (q ? q->total : 0);
    if (total)
        (void)bump(g, &g->top_total, from, to, total);
}

/* The windows of a row with their counts, ascending: its history, then its
 * last window. */
static uint32_t row_windows(const mf_agg_row *r, uint64_t *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->hist_n; i++)
        out[n++] = r->hist[i];
    out[n++] = (uint64_t)r->last_window << 32 | (r->last_count > 0xFFFFFFFFu ? 0xFFFFFFFFu : r->last_count);
    return n;
}

/* src's kinds added to d's, as add_kind would one by one with no cap on
 * own kinds (a kind found moves to the front, a new one goes there), into
 * a list made first: -1 out of memory, d unchanged.  d->total is d's
 * messages before. */
static int merge_kinds(mf_agg *g, mf_agg_row *d, const mf_agg_row *src)
{
    uint32_t dn = d->kinds_n ? d->kinds_n : d->kinds.one ? 1 : 0;
    uint32_t sn = src->kinds_n ? src->kinds_n : 1;
    uint32_t cap = dn + sn;
    mf_agg_kind *list = g_alloc(g, (size_t)cap * sizeof(*list));
    if (!list)
        return -1;
    if (d->kinds_n)
        memcpy(list, d->kinds.list, (size_t)dn * sizeof(*list));
    else if (dn)
        list[0] = (mf_agg_kind){d->kinds.one, d->total};
    uint32_t n = dn;
    for (uint32_t k = 0; k < sn; k++) {
        mf_agg_kind add = src->kinds_n ? src->kinds.list[k] : (mf_agg_kind){src->kinds.one, src->total};
        if (!add.word)
            continue;
        uint32_t i = 0;
        while (i < n && list[i].word != add.word)
            i++;
        if (i < n)
            add.n += list[i].n;
        else
            n++;
        memmove(list + 1, list, (size_t)i * sizeof(*list));
        list[0] = add;
    }
    if (!d->kinds_n && n == 1 && dn == 1) {
        /* all of d's one kind still */
        g_free(g, list, (size_t)cap * sizeof(*list));
        return 0;
    }
    if (d->kinds_n)
        g_free(g, d->kinds.list, (size_t)d->kinds_cap * sizeof(*d->kinds.list));
    d->kinds.list = list;
    d->kinds_n = n;
    d->kinds_cap = cap;
    return 0;
}

/* src's messages added to row dn: msgflow_row:merge/3's rule (windows
 * added up, the peak the highest of theirs and of the kept windows' rates,
 * kinds added with no cap).  0, or -1 out of memory (dn as it was). */
static int row_merge(mf_agg *g, uint32_t dn, const mf_agg_row *src)
{
    mf_agg_row *d = ROW(g, dn);
    uint32_t na = d->hist_n + 1, nb = src->hist_n + 1;
    uint64_t *a = g_alloc(g, (size_t)(na + nb) * sizeof(*a) * 2);
    if (!a)
        return -1;
    uint64_t *b = a + na, *w = a + na + nb;
    row_windows(d, a);
    row_windows(src, b);
    uint64_t last_count = d->last_count, src_last = src->last_count;
    uint32_t i = 0, j = 0, n = 0;
    while (i < na || j < nb) {
        uint32_t wa = i < na ? (uint32_t)(a[i] >> 32) : UINT32_MAX, wb = j < nb ? (uint32_t)(b[j] >> 32) : UINT32_MAX;
        uint32_t wn = wa < wb ? wa : wb;
        uint64_t c = 0;
        if (wa == wn)
            c += i == na - 1 ? last_count : (a[i] & 0xFFFFFFFFu), i++;
        if (wb == wn)
            c += j == nb - 1 ? src_last : (b[j] & 0xFFFFFFFFu), j++;
        w[n++] = (uint64_t)wn << 32 | (c > 0xFFFFFFFFu ? 0xFFFFFFFFu : c);
        if (i == na && j == nb)
            last_count = c; /* (the last window's, uncapped) */
    }
    uint64_t peak = d->peak_mhz > src->peak_mhz ? d->peak_mhz : src->peak_mhz;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t wk = (uint32_t)(w[k] >> 32);
        uint64_t ck = k == n - 1 ? last_count : (w[k] & 0xFFFFFFFFu);
        uint64_t ms = mf_agg_window_ms(g, wk);
        if (ms && mhz(ck, ms) > peak)
            peak = mhz(ck, ms);
    }
    /* the history: every window but the last, none before the oldest kept */
    int64_t oldest = (int64_t)g->open - g->o.keep;
    uint32_t first = 0;
    while (first < n - 1 && (int64_t)(w[first] >> 32) < oldest)
        first++;
    uint32_t hn = n - 1 - first;
    uint64_t *hist = NULL;
    uint32_t hcap = 0;
    if (hn) {
        hist = g_alloc(g, (size_t)hn * sizeof(*hist));
        if (!hist) {
            g_free(g, a, (size_t)(na + nb) * sizeof(*a) * 2);
            return -1;
        }
        memcpy(hist, w + first, (size_t)hn * sizeof(*hist));
        hcap = hn;
    }
    /* kinds: both all of one same word (or both none) stay so */
    if (d->kinds_n || src->kinds_n || d->kinds.one != src->kinds.one) {
        uint64_t total = d->total + src->total;
        if (src->kinds_n || src->kinds.one) {
            if (merge_kinds(g, d, src) < 0) {
                g_free(g, hist, (size_t)hcap * sizeof(*hist));
                g_free(g, a, (size_t)(na + nb) * sizeof(*a) * 2);
                return -1;
            }
        } else if (!d->kinds_n && d->kinds.one) {
            /* src has none: d is no longer all of one kind */
            uint64_t one = d->kinds.one;
            d->kinds.list = NULL;
            d->kinds_cap = 0;
            if (grow(g, (void **)&d->kinds.list, &d->kinds_cap, 0, sizeof(mf_agg_kind), 2) < 0) {
                d->kinds.one = one;
                g_free(g, hist, (size_t)hcap * sizeof(*hist));
                g_free(g, a, (size_t)(na + nb) * sizeof(*a) * 2);
                return -1;
            }
            d->kinds.list[0] = (mf_agg_kind){one, d->total};
            d->kinds_n = 1;
        }
        d->total = total;
    } else {
        d->total += src->total;
    }
    g_free(g, d->hist, (size_t)d->hist_cap * sizeof(*d->hist));
    d->hist = hist;
    d->hist_n = d->hist_cap = hn;
    d->last_window = (uint32_t)(w[n - 1] >> 32);
    d->last_count = last_count;
    d->peak_mhz = peak;
    g_free(g, a, (size_t)(na + nb) * sizeof(*a) * 2);
    return 0;
}

/* Row rn rolled up to key (f1, t1) of table `into': merged into the row
 * there, or moved there whole.  0, -1 out of memory (rn stays). */
static int roll(mf_agg *g, uint32_t rn, unsigned into, uint32_t f1, uint32_t t1)
{
    mf_agg_row *r = ROW(g, rn);
    uint32_t dn = find_row(g, into, f1, t1);
    if (dn) {
        uint64_t before = ROW(g, dn)->total;
        if (into == MF_AGG_DEAD)
            ROW(g, dn)->total += r->total;
        else if (row_merge(g, dn, r) < 0)
            return -1;
        g->sums[into] += ROW(g, dn)->total - before;
        row_delete(g, rn, 0);
        return 0;
    }
    if (!(dn = new_row(g, into, f1, t1)))
        return -1;
    r = ROW(g, rn); /* (pages never move; the row number may have been reused: not rn) */
    mf_agg_row *d = ROW(g, dn);
    d->total = r->total;
    g->sums[into] += r->total;
    d->last_window = r->last_window;
    d->last_count = r->last_count;
    d->peak_mhz = r->peak_mhz;
    d->hist = r->hist;
    d->hist_n = r->hist_n;
    d->hist_cap = r->hist_cap;
    d->kinds_n = r->kinds_n;
    d->kinds_cap = r->kinds_cap;
    d->kinds = r->kinds;
    row_delete(g, rn, 1);
    return 0;
}

int mf_agg_sweep(mf_agg *g, unsigned table, uint32_t idle, uint32_t budget, uint64_t *moved)
{
    *moved = 0;
    if (table > MF_AGG_DEAD)
        return 1;
    unsigned into = table == MF_AGG_DEAD ? MF_AGG_DEAD : MF_AGG_ROLLED;
    uint32_t i = g->sweep_at[table], end = g->tab[table].rows_n;
    int err = 0;
    for (; budget && i < end; budget--) {
        i++;
        uint32_t rn = ROW_NUM(table, i);
        mf_agg_row *r = ROW(g, rn);
        if (!r->from || (table != MF_AGG_DEAD && r->last_window > idle))
            continue;
        uint32_t from = r->from, to = r->to;
        uint32_t f1 = g->ends[from].rollup ? g->ends[from].rollup : from;
        uint32_t t1 = g->ends[to].rollup ? g->ends[to].rollup : to;
        if (f1 == from && t1 == to)
            continue;
        uint64_t total = r->total;
        if (roll(g, rn, into, f1, t1) < 0) {
            err = -1;
            continue;
        }
        if (table == MF_AGG_DEAD)
            continue;
        if (table == MF_AGG_PAIRS)
            *moved += total;
        /* msgflow_store:moved/3: the key forgotten, ranked by what is left
         * of it, the key rolled up to ranked by both its rows */
        heap_remove(&g->top_total, from, to);
        heap_remove(&g->top_open, from, to);
        for (uint32_t k = 0; k < g->last_n; k++)
            if (g->last[k].from == from && g->last[k].to == to) {
                memmove(g->last + k, g->last + k + 1, (size_t)(g->last_n - k - 1) * sizeof(*g->last));
                g->last_n--;
                break;
            }
        rank(g, from, to);
        rank(g, f1, t1);
    }
    g->sweep_at[table] = i < end ? i : 0;
    return err ? -1 : i >= end;
}

const mf_agg_end *mf_agg_open_receivers(const mf_agg *g, uint32_t min_senders, uint64_t min_messages,
                                        uint32_t *cursor)
{
    while (*cursor < g->ends_n) {
        const mf_agg_end *x = &g->ends[++*cursor];
        if (x->window == g->open && x->in_msgs && x->in_partners >= min_senders && x->in_msgs >= min_messages)
            return x;
    }
    return NULL;
}

uint32_t mf_agg_partner(const mf_agg *g, uint32_t e)
{
    const mf_agg_end *x = mf_agg_end_at(g, e);
    return x && mf_agg_end_at(g, x->partner) ? x->partner : 0;
}

uint64_t mf_agg_sum(const mf_agg *g, unsigned table)
{
    return table < MF_AGG_TABLES ? g->sums[table] : 0;
}

const mf_agg_row *mf_agg_named(const mf_agg *g, uint32_t *cursor)
{
    if (*cursor >= g->named_n)
        return NULL;
    uint32_t rn = g->named[*cursor];
    ++*cursor;
    return ROW(g, rn);
}

void mf_agg_flag(mf_agg *g, uint32_t e, uint32_t flags)
{
    if (mf_agg_end_at(g, e))
        g->ends[e].flags |= flags;
}

uint32_t mf_agg_idle_ends(mf_agg *g, uint32_t idle, uint32_t *cursor, uint32_t rows, uint32_t *out)
{
    uint32_t k = 0;
    if (!idle || idle >= g->open || idle + TOUCHED <= g->open) {
        *cursor = UINT32_MAX;
        return 0;
    }
    uint32_t *const *pages = g->touched[idle % TOUCHED];
    uint32_t n = g->touched_n[idle % TOUCHED], i = *cursor;
    for (; i < n && rows; i++, rows--) {
        uint32_t rn = pages[i / TOUCHED_PAGE][i % TOUCHED_PAGE];
        if (ROW_IN(rn) > g->tab[rn >> ROW_TABLE_SHIFT].rows_n)
            continue;
        const mf_agg_row *r = ROW(g, rn);
        if (!r->from || r->last_window != idle)
            continue;
        uint32_t e2[2] = {r->from, r->to};
        for (int j = 0; j < 2; j++) {
            mf_agg_end *x = &g->ends[e2[j]];
            if (x->rollup || (x->flags & MF_AGG_GROUP) || x->idle_seen == idle)
                continue;
            x->idle_seen = idle;
            out[k++] = e2[j];
        }
    }
    *cursor = i < n ? i : UINT32_MAX;
    return k;
}
