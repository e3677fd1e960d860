/*
 * C unit tests of the shard table (c_src/mf_shard.c) and the allocators.
 * Run by ctest.  Every check compares exact figures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_alloc.h"
#include "mf_shard.h"
#include "mf_topk.h"

#include "check.h"

/* An allocator that counts what is out, over libc. */
static _Atomic long live_bytes, live_blocks;
static void *count_alloc(void *ctx, size_t sz)
{
    (void)ctx;
    atomic_fetch_add(&live_bytes, (long)sz);
    atomic_fetch_add(&live_blocks, 1);
    return malloc(sz);
}
static void count_free(void *ctx, void *p, size_t sz)
{
    (void)ctx;
    atomic_fetch_sub(&live_bytes, (long)sz);
    atomic_fetch_sub(&live_blocks, 1);
    free(p);
}
static const mf_alloc counting = {count_alloc, count_free, NULL, "counting"};

#define NKEYS 64
typedef struct {
    uint64_t pairs[NKEYS][NKEYS];
    uint64_t dead[NKEYS][NKEYS];
    uint64_t total;
    uint64_t dead_kinds; /* dead-letter deltas with a kind word: none */
} tally;

static void on_pair(void *ctx, uint64_t from, uint64_t to, uint64_t kind, uint64_t n)
{
    tally *t = ctx;
    (void)kind;
    t->pairs[from % NKEYS][to % NKEYS] += n;
    t->total += n;
}
static void on_dead(void *ctx, uint64_t from, uint64_t to, uint64_t kind, uint64_t n)
{
    tally *t = ctx;
    t->dead_kinds += kind != 0;
    t->dead[from % NKEYS][to % NKEYS] += n;
}

static const mf_take_fns fns = {on_pair, on_dead};

/* A whole take, in steps of `budget' entries. */
static void take_in_steps(mf_shard *sh, void *ctx, mf_take_totals *tot, unsigned budget)
{
    mf_cursor cur = {0, NULL, 0};
    while (!mf_shard_take_some(sh, &cur, &fns, ctx, tot, budget))
        ;
}

static void test_counts_and_deltas(void)
{
    mf_limit lim = {0, 1000, 0};
    mf_shard *sh = mf_shard_new(&counting, &lim);
    CHECK(sh != NULL);
    for (int i = 0; i < 10; i++)
        CHECK(mf_shard_count(sh, 1, 2, 0, 0, 0) == MF_COUNTED);
    for (int i = 0; i < 3; i++)
        mf_shard_count(sh, 2, 1, 0, 0, 0);
    mf_shard_count(sh, 1, 5, 0, 0, 1);
    mf_shard_count(sh, 1, 5, 0, 0, 1);

    tally t;
    memset(&t, 0, sizeof(t));
    mf_take_totals tot = {0, 0};
    take_in_steps(sh, &t, &tot, ~0u);
    CHECK(t.pairs[1][2] == 10);
    CHECK(t.pairs[2][1] == 3);
    CHECK(t.pairs[1][5] == 2); /* dead letters count as pairs too */
    CHECK(t.dead[1][5] == 2);
    CHECK(t.dead[1][2] == 0);
    CHECK(t.total == 15);
    CHECK(t.dead_kinds == 0);
    CHECK(tot.overflow == 0 && tot.overflow_dead == 0);
    CHECK(mf_shard_entries(sh) == 4); /* 3 pairs + 1 dead-letter pair */
    CHECK(atomic_load(&lim.used) == 4);

    /* A second take reports nothing new; later counts only the growth. */
    memset(&t, 0, sizeof(t));
    take_in_steps(sh, &t, &tot, ~0u);
    CHECK(t.total == 0);
    mf_shard_count(sh, 1, 2, 0, 0, 0);
    take_in_steps(sh, &t, &tot, ~0u);
    CHECK(t.total == 1 && t.pairs[1][2] == 1);

    CHECK(mf_shard_bytes(sh) == (size_t)atomic_load(&live_bytes));
    mf_shard_free(sh);
    CHECK(atomic_load(&live_bytes) == 0);
    CHECK(atomic_load(&live_blocks) == 0);
}

static void test_cap_keeps_sum_exact(void)
{
    mf_limit lim = {0, 3, 0};
    mf_shard *a = mf_shard_new(&counting, &lim);
    mf_shard *b = mf_shard_new(&counting, &lim);
    /* 2 entries in a, 1 in b, then the cap (3, shared) is reached. */
    CHECK(mf_shard_count(a, 1, 1, 0, 0, 0) == MF_COUNTED);
    CHECK(mf_shard_count(a, 1, 2, 0, 0, 0) == MF_COUNTED);
    CHECK(mf_shard_count(b, 2, 2, 0, 0, 0) == MF_COUNTED);
    CHECK(mf_shard_count(b, 3, 3, 0, 0, 0) == MF_OVERFLOW);
    CHECK(mf_shard_count(a, 4, 4, 0, 0, 1) == MF_OVERFLOW);
    CHECK(mf_shard_count(a, 1, 1, 0, 0, 0) == MF_COUNTED); /* existing pairs still count */
    CHECK(mf_shard_count(a, 1, 2, 0, 0, 1) == MF_COUNTED); /* pair counted, its dead entry overflows */
    CHECK(mf_limit_full(&lim));

    tally t;
    memset(&t, 0, sizeof(t));
    mf_take_totals tot = {0, 0};
    take_in_steps(a, &t, &tot, ~0u);
    take_in_steps(b, &t, &tot, ~0u);
    CHECK(t.total == 5);
    CHECK(tot.overflow == 2);
    CHECK(t.total + tot.overflow == 7); /* every count() call is in the sum */
    CHECK(tot.overflow_dead == 2);      /* 4->4 (no pair) and 1->2's dead entry */
    mf_shard_free(a);
    mf_shard_free(b);
    CHECK(atomic_load(&live_bytes) == 0);
}

/* One writer counts a known workload while a reader takes snapshots. */
#define WRITER_MSGS 2000000ULL
static mf_shard *race_shard;
static _Atomic int writer_done;

static void *writer(void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < WRITER_MSGS; i++)
        mf_shard_count(race_shard, i % NKEYS, (i / NKEYS) % NKEYS, 0, 0, i % 1000 == 0);
    atomic_store(&writer_done, 1);
    return NULL;
}

static void test_concurrent_take_is_exact(void)
{
    mf_limit lim = {0, 1u << 20, 0};
    race_shard = mf_shard_new(&counting, &lim);
    static tally t;
    memset(&t, 0, sizeof(t));
    mf_take_totals tot = {0, 0};
    pthread_t w;
    pthread_create(&w, NULL, writer, NULL);
    int takes = 0;
    while (!atomic_load(&writer_done)) {
        take_in_steps(race_shard, &t, &tot, 7); /* stop and resume mid-list */
        takes++;
    }
    pthread_join(w, NULL);
    take_in_steps(race_shard, &t, &tot, ~0u);

    static tally want;
    memset(&want, 0, sizeof(want));
    for (uint64_t i = 0; i < WRITER_MSGS; i++) {
        want.pairs[i % NKEYS][(i / NKEYS) % NKEYS]++;
        if (i % 1000 == 0)
            want.dead[i % NKEYS][(i / NKEYS) % NKEYS]++;
    }
    CHECK(t.total == WRITER_MSGS);
    CHECK(memcmp(t.pairs, want.pairs, sizeof(want.pairs)) == 0);
    CHECK(memcmp(t.dead, want.dead, sizeof(want.dead)) == 0);
    CHECK(tot.overflow == 0);
    /* each pair in one place only: in a cell or, when its line of cells
     * was full, in the uthash tier; dead-letter pairs once more */
    uint64_t dead_pairs = 0;
    for (int a = 0; a < NKEYS; a++)
        for (int b = 0; b < NKEYS; b++)
            dead_pairs += want.dead[a][b] != 0;
    CHECK(mf_shard_entries(race_shard) == (uint64_t)NKEYS * NKEYS + dead_pairs);
    printf("concurrent: %d takes during %llu counts, all exact\n", takes,
           (unsigned long long)WRITER_MSGS);
    mf_shard_free(race_shard);
    CHECK(atomic_load(&live_bytes) == 0);
}

static void test_many_pairs_bytes(void)
{
    mf_limit lim = {0, 1u << 20, 0};
    mf_shard *sh = mf_shard_new(&counting, &lim);
    const uint64_t n = 100000;
    for (uint64_t i = 0; i < n; i++)
        mf_shard_count(sh, (i << 4) | 3, ((i * 7) << 4) | 3, 0, 0, 0);
    CHECK(mf_shard_entries(sh) == n);
    printf("100000 pairs: %.1f bytes per pair\n", (double)mf_shard_bytes(sh) / (double)n);
    /* an entry is 48 bytes and its index slot 11-21 (61 measured with the
     * shard's own 192 KiB shared out): more means an entry grew */
    CHECK(mf_shard_bytes(sh) < 70 * n);
    mf_shard_free(sh);
    CHECK(atomic_load(&live_bytes) == 0);
}

/* Kind words: a pair keeps max_kinds of its own in a shard, the sends of
 * any further word go to that kind's `other' word, and every total stays
 * exact, for pairs counted in cells and in entries alike. */
#define K_TAGS 6
#define K_OTHER 0x7770ULL
typedef struct {
    uint64_t own[NKEYS][K_TAGS + 1]; /* by pair (from) and tag */
    uint64_t other[NKEYS];
    uint64_t total;
} kind_tally;

static void on_kind(void *ctx, uint64_t from, uint64_t to, uint64_t kind, uint64_t n)
{
    kind_tally *t = ctx;
    (void)to;
    if ((kind & ~0xFULL) == K_OTHER)
        t->other[(from >> 4) % NKEYS] += n;
    else
        t->own[(from >> 4) % NKEYS][(kind >> 4) % (K_TAGS + 1)] += n;
    t->total += n;
}

static void test_kinds(void)
{
    static const mf_take_fns kfns = {on_kind, NULL};
    mf_limit lim = {0, 1u << 20, 3};
    mf_shard *sh = mf_shard_new(&counting, &lim);
    /* 3,000 pairs, so that lines of cells fill and entries hold the rest;
     * each pair sends tag t (1..6) t times, tags in turn */
    const unsigned pairs = 3000;
    for (unsigned round = 0; round < K_TAGS; round++)
        for (unsigned p = 0; p < pairs; p++)
            for (unsigned tag = round + 1; tag <= K_TAGS; tag++) {
                uint64_t kw = ((uint64_t)tag << 4) | 1;
                CHECK(mf_shard_count(sh, ((uint64_t)p << 4) | 3, 0x13, kw, K_OTHER | 1, 0) ==
                      MF_COUNTED);
            }
    static kind_tally t;
    memset(&t, 0, sizeof(t));
    mf_take_totals tot = {0, 0};
    mf_cursor cur = {0, NULL, 0};
    while (!mf_shard_take_some(sh, &cur, &kfns, &t, &tot, 100))
        ;
    int exact = 1;
    for (unsigned p = 0; p < NKEYS; p++) {
        uint64_t per = pairs / NKEYS + (p < pairs % NKEYS);
        for (unsigned tag = 1; tag <= 3; tag++)
            exact &= t.own[p][tag] == per * tag;
        exact &= t.own[p][4] + t.own[p][5] + t.own[p][6] == 0;
        exact &= t.other[p] == per * (4 + 5 + 6);
    }
    CHECK(exact);
    CHECK(t.total == (uint64_t)pairs * 21);
    CHECK(mf_shard_entries(sh) == (uint64_t)pairs * 4); /* 3 own + other */
    mf_shard_free(sh);

    /* bytes per pair with two kind words each, as the bench prints them */
    mf_limit lim2 = {0, 1u << 22, 8};
    mf_shard *big = mf_shard_new(&counting, &lim2);
    const uint64_t n = 100000;
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t k = 1; k <= 2; k++)
            mf_shard_count(big, (i << 4) | 3, ((i * 7) << 4) | 3, (k << 4) | 1, K_OTHER | 1, 0);
    CHECK(mf_shard_entries(big) == 2 * n);
    printf("100000 pairs with 2 kinds: %.1f bytes per pair\n",
           (double)mf_shard_bytes(big) / (double)n);
    CHECK(mf_shard_bytes(big) < 160 * n); /* 142 measured */
    mf_shard_free(big);
    CHECK(atomic_load(&live_bytes) == 0);
}

static void test_jemalloc(int required)
{
    mf_alloc je;
    char why[256];
    if (!mf_alloc_jemalloc(&je, why, sizeof(why))) {
        printf("jemalloc not usable here: %s\n", why);
        CHECK(!required);
        return;
    }
    mf_limit lim = {0, 1000, 0};
    mf_shard *sh = mf_shard_new(&je, &lim);
    CHECK(sh != NULL);
    for (int i = 0; i < 500; i++)
        mf_shard_count(sh, (uint64_t)i, 1, 0, 0, 0);
    CHECK(mf_shard_entries(sh) == 500);
    mf_shard_free(sh);
    CHECK(strcmp(je.name, "jemalloc") == 0);

    /* A generation's heap: an arena of its own, dropped in one call with
     * everything in it. */
    mf_alloc heap;
    CHECK(mf_alloc_heap(&je, &heap) == 1);
    CHECK(heap.ctx != je.ctx);
    mf_limit lim2 = {0, 1u << 20, 0};
    mf_shard *g = mf_shard_new(&heap, &lim2);
    CHECK(g != NULL);
    for (uint64_t i = 0; i < 20000; i++)
        mf_shard_count(g, (i << 4) | 3, 0x13, 0, 0, 0);
    CHECK(mf_shard_entries(g) == 20000);
    CHECK(mf_alloc_heap_drop(&heap) == 1);
    CHECK(mf_alloc_heap_drop(&je) == 0); /* never the base arena */
    /* dropped arenas are reused, so generations do not run out of them */
    for (int i = 0; i < 5000; i++) {
        CHECK(mf_alloc_heap(&je, &heap) == 1);
        void *p = heap.alloc(heap.ctx, 100);
        CHECK(p != NULL);
        CHECK(mf_alloc_heap_drop(&heap) == 1);
    }
}

/* Past the entry cap a new pair with a kind word is refused before the
 * table of kind words takes it: 200,000 such pairs leave the shard's
 * bytes as they were, all in the overflow tally. */
static void test_kinds_past_cap(void)
{
    mf_limit lim = {0, 100, 3};
    mf_shard *sh = mf_shard_new(&counting, &lim);
    for (uint64_t p = 0; p < 100; p++)
        CHECK(mf_shard_count(sh, (p << 4) | 3, 0x13, (1 << 4) | 1, K_OTHER | 1, 0) == MF_COUNTED);
    size_t full = mf_shard_bytes(sh);
    for (uint64_t p = 100; p < 200100; p++)
        CHECK(mf_shard_count(sh, (p << 4) | 3, 0x13, (1 << 4) | 1, K_OTHER | 1, 0) == MF_OVERFLOW);
    CHECK(mf_shard_bytes(sh) == full);
    mf_take_totals tot = {0, 0};
    mf_cursor cur = {0, NULL, 0};
    static const mf_take_fns none = {NULL, NULL};
    while (!mf_shard_take_some(sh, &cur, &none, NULL, &tot, 1000))
        ;
    CHECK(tot.overflow == 200000);
    mf_shard_free(sh);
}

/* The summary of overflowed sends: 20 heavy pairs (pair k sends 500 k
 * messages) among 300,000 pairs of one message, interleaved.  Every heavy
 * pair is in it, ranked in order by its count, its true count between
 * count - err and count;
 * counts add up to the sends; the least count bounds what was left out;
 * and a pair held is found again after many replacements (the index's
 * deletions keep it reachable). */
static mf_topk topk; /* 36 KiB: not on the stack */
static mf_topk_slot topk_out[MF_TOPK_SLOTS];
static void test_topk(void)
{
    mf_topk_init(&topk);
    uint64_t sends = 0, lcg = 12345;
    unsigned left[21] = {0};
    for (unsigned k = 1; k <= 20; k++)
        left[k] = 500 * k;
    for (uint64_t i = 0; i < 300000; i++) {
        mf_topk_add(&topk, (i << 4) | 3, 0x13);
        sends++;
        lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned k = 1 + (unsigned)(lcg >> 33) % 20;
        /* about 1 heavy send in 3 singles: the heavy ones end first */
        if (lcg % 3 == 0 && left[k]) {
            mf_topk_add(&topk, ((uint64_t)k << 4) | 3, 0x23);
            left[k]--;
            sends++;
        }
    }
    for (unsigned k = 1; k <= 20; k++)
        for (; left[k]; left[k]--, sends++)
            mf_topk_add(&topk, ((uint64_t)k << 4) | 3, 0x23);
    uint64_t min;
    unsigned n = mf_topk_take(&topk, topk_out, &min);
    CHECK(n == MF_TOPK_SLOTS);
    CHECK(min >= 1 && min < 500);
    uint64_t sum = 0, heavy[21] = {0}, single_max = 0;
    unsigned found = 0;
    for (unsigned i = 0; i < n; i++) {
        const mf_topk_slot *e = &topk_out[i];
        sum += e->count;
        CHECK(e->err < e->count);
        if (e->to == 0x23) {
            uint64_t truth = 500 * (e->from >> 4);
            CHECK(e->count - e->err <= truth && truth <= e->count);
            heavy[e->from >> 4] = e->count;
            found++;
        } else {
            CHECK(e->count - e->err <= 1); /* a single's lower bound */
            single_max = e->count > single_max ? e->count : single_max;
        }
    }
    CHECK(found == 20);
    /* ranked by count, the heavy pairs come first and in order */
    CHECK(heavy[1] > single_max);
    for (unsigned k = 2; k <= 20; k++)
        CHECK(heavy[k] > heavy[k - 1]);
    CHECK(sum == sends);
    /* taken: empty, and what comes next is counted from nothing */
    CHECK(mf_topk_take(&topk, topk_out, &min) == 0 && min == 0);
    for (int i = 0; i < 3; i++)
        mf_topk_add(&topk, 0x33, 0x43);
    CHECK(mf_topk_take(&topk, topk_out, &min) == 1 && topk_out[0].count == 3 && min == 0);
    /* a held pair is found after 100,000 replacements around it */
    for (uint64_t i = 0; i < 5000; i++)
        mf_topk_add(&topk, 0x53, 0x63);
    for (uint64_t i = 0; i < 100000; i++)
        mf_topk_add(&topk, (i << 4) | 3, 0x73);
    mf_topk_add(&topk, 0x53, 0x63);
    n = mf_topk_take(&topk, topk_out, &min);
    unsigned held = 0;
    for (unsigned i = 0; i < n; i++)
        if (topk_out[i].from == 0x53 && topk_out[i].to == 0x63) {
            held++;
            CHECK(topk_out[i].count == 5001 && topk_out[i].err == 0);
        }
    CHECK(held == 1);
    /* through a shard: its summary is part of it, in its bytes from the
     * start, and a take of it ends empty */
    mf_limit lim = {0, 1, 0};
    mf_shard *sh = mf_shard_new(&counting, &lim);
    size_t before = mf_shard_bytes(sh);
    CHECK(before > sizeof(mf_topk));
    CHECK(mf_topk_take(mf_shard_topk(sh), topk_out, &min) == 0);
    mf_shard_overflow_pair(sh, 0x13, 0x23);
    mf_shard_overflow_pair(sh, 0x13, 0x23);
    CHECK(mf_shard_bytes(sh) == before);
    CHECK(mf_topk_take(mf_shard_topk(sh), topk_out, &min) == 1 && topk_out[0].count == 2);
    CHECK(mf_topk_take(mf_shard_topk(sh), topk_out, &min) == 0);
    mf_shard_free(sh);
}

/* With --require-jemalloc (run by ctest under GLIBC_TUNABLES) the jemalloc
 * allocator must load; without, either answer is fine. */
int main(int argc, char **argv)
{
    int require_je = argc > 1 && strcmp(argv[1], "--require-jemalloc") == 0;
    test_counts_and_deltas();
    test_cap_keeps_sum_exact();
    test_concurrent_take_is_exact();
    test_many_pairs_bytes();
    test_kinds();
    test_kinds_past_cap();
    test_topk();
    test_jemalloc(require_je);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all shard checks passed\n");
    return 0;
}
