/*
 * mf_shard.c -- see mf_shard.h for the design and the thread rules.
 */
#include "mf_shard.h"

#include <string.h>

#include "mf_topk.h"

typedef struct mf_entry mf_entry;

struct mf_entry {
    uint64_t key[3];        /* from, to, kind word */
    _Atomic uint64_t count; /* messages; written by the owner only */
    uint64_t seen;          /* count at the last take; reader only */
    mf_entry *next;         /* publish list; immutable once published */
};
_Static_assert(sizeof(void *) != 8 || sizeof(mf_entry) == 48, "an entry is six words");

/* Where the owner finds a key's entry: open addressing with linear
 * probing over entry pointers, at most three quarters full, doubled when
 * it gets there (8 bytes a slot: 11 to 21 bytes an entry).  Owner only;
 * the reader never looks (it walks the publish list).  uthash's handle
 * took 56 bytes in every entry and its buckets 16 more a chain. */
typedef struct mf_index {
    mf_entry **slots; /* NULL until the first entry */
    uint64_t size;    /* slots, a power of two */
    uint64_t used;
} mf_index;
#define MF_INDEX_MIN 1024
/* The first tier: mf_cell (mf_shard.h), two to a cache line.  A pair's
 * cells are the two of one line; a send to a pair found there touches that
 * line and nothing else of the shard.  A cell once taken keeps its pair
 * while the shard lives (so a pair whose line was full when it came is
 * never in the cells later), and it is published to the reader by the
 * release store of its first count. */

/* The second tier, for pairs whose line of cells was full: an mf_index,
 * with a direct-mapped front cache of entry pointers before it. */
#define MF_FRONT_SLOTS 4096 /* power of two; 32 KiB of pointers */
#define MF_SLAB_ENTRIES 64  /* entries per slab: 3 KiB on LP64 */

/* How many kind words each pair has in this shard (cells and entries),
 * for max_kinds: an open-addressing table with linear probing, three
 * quarters full at most, doubled when it gets there.  A slot is one word:
 * the pair's 53-bit fingerprint (a mix of from and to, the top bit set)
 * above its count of kind words (max_kinds <= MF_MAX_KINDS fits the low
 * 10 bits); 0 is a free slot, and a taken one has a count of at least 1.
 * Two pairs whose fingerprints collide (about 1 in 2^53 per pair of
 * pairs) share one count: a pair may
 * then meet max_kinds sooner, and sends past it are counted under their
 * kind's `other', so totals stay exact.  Owner only, and only when a kind
 * word is new to the shard; the reader never looks. */
typedef uint64_t mf_pair_kinds;
#define MF_KINDS_COUNT_BITS 10
#define MF_KINDS_COUNT_MASK ((1ull << MF_KINDS_COUNT_BITS) - 1)
_Static_assert(MF_MAX_KINDS <= MF_KINDS_COUNT_MASK, "a pair's count of kind words fits its slot");
#define MF_PAIR_KINDS_MIN 1024

/* Entries come from slabs the shard owns, cache-line aligned, so no other
 * thread's data ever shares a line with a count this thread writes.
 * Entries are only freed with the shard, so a slab is a bump allocator. */
typedef struct mf_slab {
    struct mf_slab *prev;
    void *base;              /* what alloc returned */
    unsigned used;
    _Alignas(MF_CACHE_LINE) mf_entry entries[MF_SLAB_ENTRIES];
} mf_slab;

struct mf_shard {
    /* Owner-written.  First: mf_shard_line finds a cell at its offset
     * from the shard. */
    _Alignas(MF_CACHE_LINE) mf_cell cells[MF_CELLS];
    mf_entry *front[MF_FRONT_SLOTS];    /* direct-mapped cache of pair entries */
    mf_index pairs;                     /* the pairs' entries */
    mf_index dead;                      /* the dead letters' entries */
    mf_slab *slab;                      /* newest slab */
    _Atomic(mf_entry *) pairs_list;     /* newest first */
    _Atomic(mf_entry *) dead_list;
    _Atomic uint64_t overflow;
    _Atomic uint64_t overflow_dead;
    _Atomic uint64_t bytes;
    _Atomic uint64_t entries;
    const mf_alloc *alloc;
    mf_limit *limit;
    void *base; /* what alloc returned, for the aligned shard itself */
    mf_pair_kinds *kinds; /* NULL until a pair has a kind word */
    uint64_t kinds_size;  /* slots, a power of two */
    uint64_t kinds_used;
    /* the busiest pairs of the sends that found no entry (mf_topk.h): its
     * own lock, written by the owner, taken by the snapshot */
    mf_topk top;
    /* Reader-written, on lines of their own: the count of each cell at the
     * last take, and the overflow tallies then. */
    _Alignas(MF_CACHE_LINE) uint64_t seen[MF_CELLS];
    uint64_t seen_overflow;
    uint64_t seen_overflow_dead;
};
_Static_assert(offsetof(struct mf_shard, cells) == 0,
               "mf_shard_line finds the cells at the shard's address");

/* A key's home slot in an index: pid words differ in their middle bits,
 * and a multiply-xorshift mix spreads them over the low ones. */
static inline uint64_t mf_mix(const uint64_t *k)
{
    uint64_t h = k[0] * 0x9E3779B97F4A7C15ULL ^ (k[1] + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL ^
                 k[2] * 0xD6E8FEB86659FD93ULL;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return h;
}

/* Front-cache slot: the high bits of a two-multiply mix. */
static inline unsigned mf_front_index(const uint64_t k[3])
{
    return (unsigned)(((k[0] * 0x9E3779B97F4A7C15ULL) ^ mf_to_kind(k[1], k[2])) *
                          0xC2B2AE3D27D4EB4FULL >>
                      52) &
           (MF_FRONT_SLOTS - 1);
}

static inline int same_key(const uint64_t a[3], const uint64_t b[3])
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

static inline void owner_add(_Atomic uint64_t *w, uint64_t n)
{
    /* Single writer: a plain load and store, no locked instruction. */
    atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static void *mf_shard_raw_alloc(mf_shard *sh, size_t sz)
{
    void *p = sh->alloc->alloc(sh->alloc->ctx, sz);
    if (p)
        owner_add(&sh->bytes, sz);
    return p;
}

static void mf_shard_raw_free(mf_shard *sh, void *p, size_t sz)
{
    if (!p)
        return;
    sh->alloc->free(sh->alloc->ctx, p, sz);
    owner_add(&sh->bytes, (uint64_t)0 - sz);
}

mf_shard *mf_shard_new(const mf_alloc *alloc, mf_limit *limit)
{
    size_t sz = sizeof(mf_shard) + MF_CACHE_LINE;
    void *base = alloc->alloc(alloc->ctx, sz);
    if (!base)
        return NULL;
    /* Align so that no other thread's data shares the shard's lines. */
    uintptr_t a = ((uintptr_t)base + MF_CACHE_LINE - 1) & ~(uintptr_t)(MF_CACHE_LINE - 1);
    mf_shard *sh = (mf_shard *)a;
    memset(sh, 0, sizeof(*sh));
    sh->alloc = alloc;
    sh->limit = limit;
    sh->base = base;
    mf_topk_init(&sh->top);
    atomic_store_explicit(&sh->bytes, sz, memory_order_relaxed);
    return sh;
}

void mf_shard_free(mf_shard *sh)
{
    if (!sh)
        return;
    mf_shard_raw_free(sh, sh->pairs.slots, sh->pairs.size * sizeof(mf_entry *));
    mf_shard_raw_free(sh, sh->dead.slots, sh->dead.size * sizeof(mf_entry *));
    for (mf_slab *sl = sh->slab, *prev; sl; sl = prev) {
        prev = sl->prev;
        mf_shard_raw_free(sh, sl->base, sizeof(mf_slab) + MF_CACHE_LINE);
    }
    mf_shard_raw_free(sh, sh->kinds, sh->kinds_size * sizeof(mf_pair_kinds));
    const mf_alloc *alloc = sh->alloc;
    alloc->free(alloc->ctx, sh->base, sizeof(mf_shard) + MF_CACHE_LINE);
}

int mf_limit_full(const mf_limit *limit)
{
    return atomic_load_explicit(&limit->used, memory_order_relaxed) >=
           atomic_load_explicit(&limit->max, memory_order_relaxed);
}

static int limit_take(mf_limit *limit)
{
    if (mf_limit_full(limit))
        return 0;
    uint64_t before = atomic_fetch_add_explicit(&limit->used, 1, memory_order_relaxed);
    if (before >= atomic_load_explicit(&limit->max, memory_order_relaxed)) {
        atomic_fetch_sub_explicit(&limit->used, 1, memory_order_relaxed);
        return 0;
    }
    return 1;
}

/* A zeroed entry from the shard's slabs; NULL when out of memory. */
static mf_entry *slab_entry(mf_shard *sh)
{
    mf_slab *sl = sh->slab;
    if (!sl || sl->used == MF_SLAB_ENTRIES) {
        void *base = mf_shard_raw_alloc(sh, sizeof(mf_slab) + MF_CACHE_LINE);
        if (!base)
            return NULL;
        uintptr_t a = ((uintptr_t)base + MF_CACHE_LINE - 1) & ~(uintptr_t)(MF_CACHE_LINE - 1);
        sl = (mf_slab *)a;
        sl->prev = sh->slab;
        sl->base = base;
        sl->used = 0;
        sh->slab = sl;
    }
    mf_entry *e = &sl->entries[sl->used++];
    memset(e, 0, sizeof(*e));
    return e;
}

/* The entry of key in the index, or NULL. */
static mf_entry *index_find(const mf_index *ix, const uint64_t key[3])
{
    if (!ix->slots)
        return NULL;
    uint64_t mask = ix->size - 1;
    for (uint64_t j = mf_mix(key) & mask;; j = (j + 1) & mask) {
        mf_entry *e = ix->slots[j];
        if (!e || same_key(e->key, key))
            return e;
    }
}

/* Puts e in a free slot of slots (size a power of two, e's key absent). */
static void index_put(mf_entry **slots, uint64_t size, mf_entry *e)
{
    uint64_t j = mf_mix(e->key) & (size - 1);
    while (slots[j])
        j = (j + 1) & (size - 1);
    slots[j] = e;
}

/* Room for one more entry: the index doubled (or made) when it would pass
 * three quarters full; 0 when out of memory.  The rehash is one pass over
 * the old slots: at 1M entries on one thread a few ms, once. */
static int index_room(mf_shard *sh, mf_index *ix)
{
    if (4 * (ix->used + 1) <= 3 * ix->size)
        return 1;
    uint64_t size = ix->slots ? ix->size * 2 : MF_INDEX_MIN;
    mf_entry **t = mf_shard_raw_alloc(sh, size * sizeof(*t));
    if (!t)
        return 0;
    memset(t, 0, size * sizeof(*t));
    for (uint64_t i = 0; ix->slots && i < ix->size; i++)
        if (ix->slots[i])
            index_put(t, size, ix->slots[i]);
    mf_shard_raw_free(sh, ix->slots, ix->size * sizeof(*t));
    ix->slots = t;
    ix->size = size;
    return 1;
}

/* Finds or makes the entry for key in one table; NULL when none can be made. */
static mf_entry *find_or_add(mf_shard *sh, mf_index *ix, _Atomic(mf_entry *) *list,
                             const uint64_t key[3])
{
    mf_entry *e = index_find(ix, key);
    if (e)
        return e;
    if (!limit_take(sh->limit))
        return NULL;
    if (!index_room(sh, ix) || !(e = slab_entry(sh))) {
        atomic_fetch_sub_explicit(&sh->limit->used, 1, memory_order_relaxed);
        return NULL;
    }
    memcpy(e->key, key, sizeof(e->key));
    index_put(ix->slots, ix->size, e);
    ix->used++;
    e->next = atomic_load_explicit(list, memory_order_relaxed);
    atomic_store_explicit(list, e, memory_order_release);
    owner_add(&sh->entries, 1);
    return e;
}

void mf_shard_overflow(mf_shard *sh, int dead)
{
    owner_add(&sh->overflow, 1);
    if (dead)
        owner_add(&sh->overflow_dead, 1);
}

void mf_shard_overflow_pair(mf_shard *sh, uint64_t from, uint64_t to)
{
    mf_topk_add(&sh->top, from, to);
}

mf_topk *mf_shard_topk(mf_shard *sh)
{
    return &sh->top;
}

/* ---------------------------------------------- kind words per pair */

/* A pair's fingerprint, in the high 54 bits, the top one set (the low
 * ones are the count's). */
static inline uint64_t kinds_print(uint64_t from, uint64_t to)
{
    uint64_t h = from * 0x9E3779B97F4A7C15ULL ^ to * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 29;
    return (h | (1ull << 63)) & ~MF_KINDS_COUNT_MASK; /* never 0 */
}

static inline uint64_t kinds_home(uint64_t print, uint64_t mask)
{
    return (print >> MF_KINDS_COUNT_BITS) & mask;
}

/* Doubles the table (or makes its first); 0 when out of memory.  The
 * rehash is one pass over the old slots: at 1M pairs on one thread a few
 * ms, once, as the index's own doubling is. */
static int kinds_grow(mf_shard *sh)
{
    uint64_t size = sh->kinds ? sh->kinds_size * 2 : MF_PAIR_KINDS_MIN;
    mf_pair_kinds *t = mf_shard_raw_alloc(sh, size * sizeof(*t));
    if (!t)
        return 0;
    memset(t, 0, size * sizeof(*t));
    for (uint64_t i = 0; sh->kinds && i < sh->kinds_size; i++) {
        uint64_t o = sh->kinds[i];
        if (!o)
            continue;
        uint64_t j = kinds_home(o & ~MF_KINDS_COUNT_MASK, size - 1);
        while (t[j])
            j = (j + 1) & (size - 1);
        t[j] = o;
    }
    mf_shard_raw_free(sh, sh->kinds, sh->kinds_size * sizeof(*t));
    sh->kinds = t;
    sh->kinds_size = size;
    return 1;
}

/* Whether the new kind word key[2] may have a cell or an entry of its own
 * for the pair (key[0], key[1]): yes while the pair has fewer than
 * max_kinds in this shard (it then has one more), no past that (the caller
 * counts the send under the kind's `other' word, always admitted).  Out of
 * memory: admitted, uncounted. */
static int kinds_admit(mf_shard *sh, const uint64_t key[3], uint64_t other)
{
    if (!key[2] || key[2] == other)
        return 1;
    if (4 * (sh->kinds_used + 1) > 3 * sh->kinds_size && !kinds_grow(sh))
        return 1;
    uint64_t mask = sh->kinds_size - 1;
    uint64_t print = kinds_print(key[0], key[1]);
    uint64_t j = kinds_home(print, mask);
    for (; sh->kinds[j]; j = (j + 1) & mask) {
        uint64_t k = sh->kinds[j];
        if ((k & ~MF_KINDS_COUNT_MASK) == print) {
            if ((k & MF_KINDS_COUNT_MASK) >= sh->limit->max_kinds)
                return 0;
            sh->kinds[j] = k + 1;
            return 1;
        }
    }
    sh->kinds[j] = print | 1;
    sh->kinds_used++;
    return 1;
}

/* ------------------------------------------------------------ counting */

/* Takes a free cell for a key and counts its first message; 0 when the
 * session may not grow. */
static int cell_take(mf_shard *sh, mf_cell *c, const uint64_t key[3])
{
    if (!limit_take(sh->limit))
        return 0;
    memcpy(c->key, key, sizeof(c->key)); /* `seen' is the reader's, zero since mf_shard_new */
    owner_add(&sh->entries, 1);
    atomic_store_explicit(&c->count, 1, memory_order_release);
    return 1;
}

/* The second tier: a key seen lately sits in its front slot, found with
 * one multiply and three compares, before the index is asked. */
static int count_entry(mf_shard *sh, const uint64_t key[3])
{
    mf_entry **slot = &sh->front[mf_front_index(key)];
    mf_entry *e = *slot;
    if (!e || !same_key(e->key, key)) {
        e = find_or_add(sh, &sh->pairs, &sh->pairs_list, key);
        if (!e)
            return 0;
        *slot = e;
    }
    owner_add(&e->count, 1);
    return 1;
}

/* Is the key anywhere yet?  Only asked for a key whose line of cells was
 * full: a key found nowhere is new. */
static int entry_known(mf_shard *sh, const uint64_t key[3])
{
    mf_entry *e = sh->front[mf_front_index(key)];
    if (e && same_key(e->key, key))
        return 1;
    return index_find(&sh->pairs, key) != NULL;
}

/* Counts one message of key: 1 counted, 0 no room (cap or memory), -1 a
 * new kind word the pair may not have (kinds_admit). */
static int count_key(mf_shard *sh, const uint64_t key[3], uint64_t other)
{
    mf_cell *line = mf_shard_line(sh, key[0], key[1], key[2]);
    if (mf_shard_count_hit(line, key[0], key[1], key[2]))
        return 1;
    /* not in the cells: a free cell on the key's line means the key is
     * nowhere yet (cells fill in order, and are never freed) */
    /* A new key past the entry cap is refused before the table of kind
     * words hears of it (it would grow by the overflowed pairs); one with
     * a kind word of its own is tried again as the pair's `other' kind,
     * which may have a place. */
    int refused = key[2] && key[2] != other ? -1 : 0;
    for (unsigned i = 0; i < MF_CELLS_PER_LINE; i++) {
        mf_cell *c = &line[i];
        if (atomic_load_explicit(&c->count, memory_order_relaxed) == 0) {
            if (mf_limit_full(sh->limit))
                return refused;
            return kinds_admit(sh, key, other) ? cell_take(sh, c, key) : -1;
        }
    }
    if (key[2] && key[2] != other && !entry_known(sh, key) &&
        (mf_limit_full(sh->limit) || !kinds_admit(sh, key, other)))
        return -1;
    return count_entry(sh, key);
}

int mf_shard_count(mf_shard *sh, uint64_t from, uint64_t to, uint64_t kind, uint64_t other,
                   int dead)
{
    uint64_t key[3] = {from, to, kind};
    int counted = count_key(sh, key, other);
    if (counted < 0) {
        key[2] = other;
        counted = count_key(sh, key, other);
    }
    if (!counted) {
        mf_shard_overflow(sh, dead);
        return MF_OVERFLOW;
    }
    if (dead) {
        const uint64_t dkey[3] = {from, to, 0};
        mf_entry *d = find_or_add(sh, &sh->dead, &sh->dead_list, dkey);
        if (d)
            owner_add(&d->count, 1);
        else
            owner_add(&sh->overflow_dead, 1); /* counted as a pair, not as a dead-letter pair */
    }
    return MF_COUNTED;
}

static inline void take_entry(mf_entry *e, mf_delta_fn fn, void *ctx)
{
    uint64_t now = atomic_load_explicit(&e->count, memory_order_relaxed);
    if (now != e->seen) {
        if (fn)
            fn(ctx, e->key[0], e->key[1], e->key[2], now - e->seen);
        e->seen = now;
    }
}

int mf_shard_take_some(mf_shard *sh, mf_cursor *cur, const mf_take_fns *fns, void *ctx,
                       mf_take_totals *totals, unsigned budget)
{
    mf_delta_fn pairs = fns->pairs;
    for (;;) {
        switch (cur->phase) {
        case 0:
            for (; cur->cell < MF_CELLS && budget; cur->cell++, budget--) {
                mf_cell *c = &sh->cells[cur->cell];
                /* acquire: a count seen non-zero comes with its key */
                uint64_t now = atomic_load_explicit(&c->count, memory_order_acquire);
                if (now != sh->seen[cur->cell]) {
                    if (pairs)
                        pairs(ctx, c->key[0], c->key[1], c->key[2], now - sh->seen[cur->cell]);
                    sh->seen[cur->cell] = now;
                }
            }
            if (cur->cell < MF_CELLS)
                return 0;
            cur->next = atomic_load_explicit(&sh->pairs_list, memory_order_acquire);
            cur->phase = 1;
            break;
        case 1:
        case 2: {
            mf_entry *e = cur->next;
            for (; e && budget; e = e->next, budget--)
                take_entry(e, cur->phase == 1 ? pairs : fns->dead, ctx);
            cur->next = e;
            if (e)
                return 0;
            if (cur->phase == 1)
                cur->next = atomic_load_explicit(&sh->dead_list, memory_order_acquire);
            cur->phase++;
            break;
        }
        case 3: {
            uint64_t of = atomic_load_explicit(&sh->overflow, memory_order_relaxed);
            uint64_t od = atomic_load_explicit(&sh->overflow_dead, memory_order_relaxed);
            totals->overflow += of - sh->seen_overflow;
            totals->overflow_dead += od - sh->seen_overflow_dead;
            sh->seen_overflow = of;
            sh->seen_overflow_dead = od;
            cur->phase = 4;
            return 1;
        }
        default:
            return 1;
        }
    }
}

size_t mf_shard_bytes(const mf_shard *sh)
{
    return (size_t)atomic_load_explicit(&sh->bytes, memory_order_relaxed);
}

uint64_t mf_shard_entries(const mf_shard *sh)
{
    return atomic_load_explicit(&sh->entries, memory_order_relaxed);
}

void mf_shard_account(mf_shard *sh, long delta)
{
    owner_add(&sh->bytes, (uint64_t)(int64_t)delta);
}
