/*
 * C unit tests of the aggregate (c_src/mf_agg.c): each check compares
 * exact figures with a plain model of the same deltas.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_agg.h"
#include "mf_alloc.h"

#include "check.h"

static long live_bytes, live_blocks;
static void *count_alloc(void *ctx, size_t sz)
{
    (void)ctx;
    live_bytes += (long)sz;
    live_blocks++;
    return malloc(sz);
}
static void count_free(void *ctx, void *p, size_t sz)
{
    (void)ctx;
    live_bytes -= (long)sz;
    live_blocks--;
    free(p);
}
static const mf_alloc counting = {count_alloc, count_free, NULL, "counting"};
/* An allocator whose fail_at-th allocation fails (0: none does). */
static long fail_at, allocs;
static void *failing_alloc(void *ctx, size_t sz)
{
    if (++allocs == fail_at)
        return NULL;
    return count_alloc(ctx, sz);
}
static const mf_alloc failing = {failing_alloc, count_free, NULL, "failing"};


#define KIND_BITS 4
#define OTHER 7u /* the tag word of `other' */
#define REPLY 5u
static uint64_t kw(uint64_t tag, unsigned kind) { return tag << KIND_BITS | kind; }

static mf_agg *agg(unsigned keep, unsigned max_kinds, unsigned top_total, unsigned top_window)
{
    mf_agg_opts o = {keep, max_kinds, OTHER, KIND_BITS, REPLY, top_total, top_window};
    return mf_agg_new(&counting, &o);
}

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* A row's history as the model expects: windows and counts. */
static int hist_is(const mf_agg_row *r, const uint32_t *w, const uint64_t *c, uint32_t n)
{
    if (r->hist_n != n)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (r->hist[i] >> 32 != w[i] || (r->hist[i] & 0xFFFFFFFFu) != c[i])
            return 0;
    return 1;
}

static uint64_t kind_n(const mf_agg_row *r, uint64_t word)
{
    if (!r->kinds_n)
        return r->kinds.one == word ? r->total : 0;
    for (uint32_t i = 0; i < r->kinds_n; i++)
        if (r->kinds.list[i].word == word)
            return r->kinds.list[i].n;
    return 0;
}

/* One row through windows: totals, counts, history kept `keep' windows,
 * the peak from the closed windows' lengths. */
static void test_windows(void)
{
    mf_agg *g = agg(3, 8, 16, 16);
    uint32_t a = mf_agg_end_word(g, 0x103), b = mf_agg_end_word(g, 0x203);
    CHECK(a == 1 && b == 2);
    CHECK(mf_agg_end_word(g, 0x103) == a);
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b, 0, 5) == 0);
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b, 0, 5) == 0);
    mf_agg_close(g, 1000, 5);                         /* window 1: 10 in 1 s */
    mf_agg_close(g, 500, 5);                          /* window 2: none */
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b, 0, 3) == 0); /* window 3 */
    const mf_agg_row *r = mf_agg_find(g, MF_AGG_PAIRS, a, b);
    CHECK(r && r->total == 13 && r->last_window == 3 && r->last_count == 3);
    CHECK(r->peak_mhz == 10000);                      /* 10 messages/s */
    CHECK(hist_is(r, (uint32_t[]){1}, (uint64_t[]){10}, 1));
    mf_agg_close(g, 250, 5);                          /* window 3: 3 in 250 ms */
    mf_agg_close(g, 1000, 5);
    mf_agg_close(g, 1000, 5);
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b, 0, 1) == 0); /* window 6: keeps 3.. */
    r = mf_agg_find(g, MF_AGG_PAIRS, a, b);
    CHECK(r->peak_mhz == 12000);
    CHECK(hist_is(r, (uint32_t[]){3}, (uint64_t[]){3}, 1));
    CHECK(mf_agg_window_ms(g, 5) == 1000 && mf_agg_window_ms(g, 1) == 0);
    CHECK(mf_agg_size(g, MF_AGG_PAIRS) == 1);
    mf_agg_free(g);
    CHECK(live_bytes == 0 && live_blocks == 0);
}

/* Kinds: one word, then a list; past max_kinds a word of its own counts
 * under its kind's `other'; the sum is the total. */
static void test_kinds(void)
{
    mf_agg *g = agg(10, 2, 16, 16);
    uint32_t a = mf_agg_end_word(g, 0x103), b = mf_agg_end_word(g, 0x203);
    uint64_t call_get = kw(100, 1), call_put = kw(101, 1), call_del = kw(102, 1), cast_x = kw(103, 2);
    mf_agg_add(g, MF_AGG_PAIRS, a, b, call_get, 4);
    const mf_agg_row *r = mf_agg_find(g, MF_AGG_PAIRS, a, b);
    CHECK(r->kinds_n == 0 && r->kinds.one == call_get);
    mf_agg_add(g, MF_AGG_PAIRS, a, b, call_get, 1);
    r = mf_agg_find(g, MF_AGG_PAIRS, a, b);
    CHECK(r->kinds_n == 0 && kind_n(r, call_get) == 5);
    mf_agg_add(g, MF_AGG_PAIRS, a, b, call_put, 2);
    mf_agg_add(g, MF_AGG_PAIRS, a, b, call_del, 3); /* a third: call's other */
    mf_agg_add(g, MF_AGG_PAIRS, a, b, cast_x, 1);   /* also past the two */
    mf_agg_add(g, MF_AGG_PAIRS, a, b, 0, 6);        /* no kind: in the total only */
    r = mf_agg_find(g, MF_AGG_PAIRS, a, b);
    CHECK(r->total == 17);
    CHECK(kind_n(r, call_get) == 5 && kind_n(r, call_put) == 2);
    CHECK(kind_n(r, kw(OTHER, 1)) == 3 && kind_n(r, kw(OTHER, 2)) == 1);
    CHECK(kind_n(r, call_del) == 0 && r->kinds_n == 4);
    mf_agg_free(g);
    CHECK(live_bytes == 0 && live_blocks == 0);
}

#define NS 200
#define NR 50
/* Many keys with random counts: every row exact, the busiest indexes equal
 * to a sort of the model (the key's pairs and rolled-up rows added up;
 * names left out), the ends of the window exact. */
static void test_busiest(void)
{
    mf_agg *g = agg(60, 8, 64, 64);
    static uint64_t pairs[NS][NR], rolled[NS][NR], win[NS][NR];
    uint32_t se[NS], re[NR];
    for (int i = 0; i < NS; i++)
        se[i] = mf_agg_end_word(g, (uint64_t)(i + 1) << 4 | 3);
    for (int j = 0; j < NR; j++) {
        unsigned char etf[8] = {131, 100, 0, 3, 'r', (unsigned char)('a' + j / 26), (unsigned char)('a' + j % 26), 0};
        re[j] = j % 10 == 9 ? mf_agg_end_bytes(g, etf, 7, MF_AGG_NAMED) : mf_agg_end_word(g, (uint64_t)(1000 + j) << 4 | 3);
    }
    CHECK(mf_agg_find_bytes(g, (const unsigned char *)"\x83\x64\x00\x03raj", 7) == re[9]);
    for (int w = 0; w < 3; w++) {
        memset(win, 0, sizeof(win));
        for (int k = 0; k < 20000; k++) {
            int i = (int)(rnd() % NS), j = (int)(rnd() % NR);
            uint64_t n = 1 + rnd() % (i < 5 ? 50 : 3);
            int rep = rnd() % 4 == 0;
            CHECK(mf_agg_add(g, rep ? MF_AGG_ROLLED : MF_AGG_PAIRS, se[i], re[j],
                             rep ? kw(9, REPLY) : kw(8, 1), n) == 0);
            (rep ? rolled : pairs)[i][j] += n;
            win[i][j] += n;
        }
        /* the open window's index */
        mf_agg_top got[64];
        uint64_t floor;
        uint32_t k = mf_agg_busiest(g, 1, got, 10, &floor);
        CHECK(k == 10);
        for (uint32_t x = 0; x < k; x++) {
            int i = (int)(got[x].from - se[0]), j = -1;
            for (int y = 0; y < NR; y++)
                if (re[y] == got[x].to)
                    j = y;
            CHECK(j >= 0 && j % 10 != 9 && got[x].value == win[i][j]);
            /* none not listed has more */
            for (int i2 = 0; i2 < NS; i2++)
                for (int j2 = 0; j2 < NR; j2++) {
                    if (j2 % 10 == 9)
                        continue;
                    int listed = 0;
                    for (uint32_t y = 0; y <= x; y++)
                        listed |= got[y].from == se[i2] && got[y].to == re[j2];
                    CHECK(listed || win[i2][j2] <= got[x].value);
                }
        }
        /* ends of the window: messages in and out (replies not out) */
        uint64_t in0 = 0, out0 = 0;
        for (int j = 0; j < NR; j++)
            in0 += win[0][j];
        (void)out0;
        CHECK(mf_agg_close(g, 1000, 5) == 0);
        uint32_t cur = 0;
        const mf_agg_ends_row *e;
        uint64_t in_all = 0, out_all = 0;
        while ((e = mf_agg_last_ends(g, &cur))) {
            in_all += e->in_msgs;
            out_all += e->out_msgs;
        }
        uint64_t sum = 0;
        for (int i = 0; i < NS; i++)
            for (int j = 0; j < NR; j++)
                sum += win[i][j];
        CHECK(in_all == sum); /* every receiver has >= 5 senders a window */
        CHECK(out_all <= sum);
    }
    /* by total, both tables */
    mf_agg_top got[64];
    uint64_t floor;
    uint32_t k = mf_agg_busiest(g, 0, got, 20, &floor);
    CHECK(k == 20);
    for (uint32_t x = 0; x < k; x++) {
        int i = (int)(got[x].from - se[0]), j = -1;
        for (int y = 0; y < NR; y++)
            if (re[y] == got[x].to)
                j = y;
        CHECK(j >= 0 && got[x].value == pairs[i][j] + rolled[i][j]);
        if (x)
            CHECK(got[x].value <= got[x - 1].value);
    }
    for (int i = 0; i < NS; i++)
        for (int j = 0; j < NR; j++) {
            const mf_agg_row *p = mf_agg_find(g, MF_AGG_PAIRS, se[i], re[j]);
            const mf_agg_row *q = mf_agg_find(g, MF_AGG_ROLLED, se[i], re[j]);
            CHECK((p ? p->total : 0) == pairs[i][j] && (q ? q->total : 0) == rolled[i][j]);
            int listed = 0;
            for (uint32_t y = 0; y < k; y++)
                listed |= got[y].from == se[i] && got[y].to == re[j];
            CHECK(listed || j % 10 == 9 || pairs[i][j] + rolled[i][j] <= got[k - 1].value);
        }
    /* the named receivers' pairs are listed apart */
    mf_agg_free(g);
    CHECK(live_bytes == 0 && live_blocks == 0);
}

/* Groups: a pair's delta waits for its ends' group ends, then adds to the
 * group row; the groups' totals are the pairs'. */
static void test_groups(void)
{
    mf_agg *g = agg(10, 8, 16, 16);
    uint32_t e[6];
    for (int i = 0; i < 6; i++)
        e[i] = mf_agg_end_word(g, (uint64_t)(i + 1) << 4 | 3);
    uint32_t gx = mf_agg_end_bytes(g, (const unsigned char *)"gx", 2, 0);
    uint32_t gy = mf_agg_end_bytes(g, (const unsigned char *)"gy", 2, 0);
    uint32_t fresh[16];
    CHECK(mf_agg_take_new(g, fresh, 16) == 8 && fresh[0] == e[0] && fresh[7] == gy);
    CHECK(mf_agg_take_new(g, fresh, 16) == 0);
    for (int i = 0; i < 3; i++)
        for (int j = 3; j < 6; j++)
            mf_agg_add(g, MF_AGG_PAIRS, e[i], e[j], kw(8, 1), (uint64_t)(1 + i + j));
    CHECK(mf_agg_size(g, MF_AGG_GROUPS) == 0);
    for (int i = 0; i < 3; i++)
        mf_agg_set_group(g, e[i], gx);
    CHECK(mf_agg_groups_ready(g) == 0);
    CHECK(mf_agg_size(g, MF_AGG_GROUPS) == 0);
    for (int j = 3; j < 6; j++)
        mf_agg_set_group(g, e[j], gy);
    CHECK(mf_agg_groups_ready(g) == 0);
    const mf_agg_row *r = mf_agg_find(g, MF_AGG_GROUPS, gx, gy);
    uint64_t want = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 3; j < 6; j++)
            want += (uint64_t)(1 + i + j);
    CHECK(r && r->total == want && kind_n(r, kw(8, 1)) == want);
    mf_agg_add(g, MF_AGG_PAIRS, e[0], e[3], kw(8, 1), 2);
    r = mf_agg_find(g, MF_AGG_GROUPS, gx, gy);
    CHECK(r->total == want + 2 && mf_agg_size(g, MF_AGG_GROUPS) == 1);
    mf_agg_free(g);
    CHECK(live_bytes == 0 && live_blocks == 0);
}

/* Full: a new key finds no row, a held one still counts; many rows and
 * endpoints grow the indexes; a scan sees each row once. */
static void test_full_and_scale(void)
{
    mf_agg *g = agg(10, 8, 2048, 5000);
    const uint32_t N = 300000;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t a = mf_agg_end_word(g, (uint64_t)(i % 1000 + 1) << 4 | 3);
        uint32_t b = mf_agg_end_word(g, (uint64_t)(i / 1000 + 5000) << 4 | 3);
        CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b, 0, 1) == 0);
    }
    CHECK(mf_agg_size(g, MF_AGG_PAIRS) == N && mf_agg_ends(g) == 1300);
    uint32_t grp = mf_agg_end_bytes(g, (const unsigned char *)"g", 1, 0);
    for (uint32_t e = 1; e <= 1300; e++)
        CHECK(mf_agg_set_group(g, e, grp) == 0);
    CHECK(mf_agg_groups_ready(g) == 0);
    CHECK(mf_agg_find(g, MF_AGG_GROUPS, grp, grp)->total == N);
    mf_agg_set_full(g, 1);
    uint32_t a = mf_agg_find_word(g, 1 << 4 | 3), b = mf_agg_find_word(g, 5000 << 4 | 3);
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b, 0, 1) == 0);
    uint32_t c = mf_agg_end_word(g, 99999 << 4 | 3);
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, c, 0, 1) == 1);
    uint32_t cur = 0, seen = 0;
    uint64_t sum = 0;
    const mf_agg_row *r;
    while ((r = mf_agg_next(g, MF_AGG_PAIRS, &cur))) {
        seen++;
        sum += r->total;
    }
    CHECK(seen == N && sum == N + 1);
    printf("300,000 rows: %.1f bytes a row\n", (double)mf_agg_bytes(g) / N);
    CHECK(mf_agg_bytes(g) < 90ull * N);
    mf_agg_free(g);
    CHECK(live_bytes == 0 && live_blocks == 0);
}

/* Roll-ups: rows of an endpoint that rolls up move, once idle, to the
 * rolled-up row of its group, summed with what is there (windows added,
 * kinds added); the busiest index ranks the new key; the endpoint is let
 * go, then freed two windows on and its number reused. */
static void test_rollup(void)
{
    mf_agg *g = agg(10, 8, 16, 16);
    uint32_t a = mf_agg_end_word(g, 0x13), b1 = mf_agg_end_word(g, 0x23), b2 = mf_agg_end_word(g, 0x33);
    uint32_t grp = mf_agg_end_bytes(g, (const unsigned char *)"grp", 3, 0);
    uint32_t gg = mf_agg_end_bytes(g, (const unsigned char *)"gg", 2, 0);
    uint32_t all[] = {a, b1, b2, grp, gg};
    for (int i = 0; i < 5; i++)
        CHECK(mf_agg_set_group(g, all[i], gg) == 0);
    uint64_t call = kw(100, 1), cast = kw(101, 2);
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b1, call, 5) == 0);   /* window 1 */
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b2, cast, 7) == 0);
    CHECK(mf_agg_add(g, MF_AGG_DEAD, a, b1, 0, 2) == 0);
    mf_agg_close(g, 1000, 5);
    CHECK(mf_agg_add(g, MF_AGG_PAIRS, a, b2, cast, 3) == 0);   /* window 2 */
    CHECK(mf_agg_add(g, MF_AGG_ROLLED, b1, a, kw(102, REPLY), 4) == 0);
    mf_agg_close(g, 500, 5);
    mf_agg_close(g, 1000, 5);                                  /* open: 4 */
    uint64_t moved;
    /* nothing rolls up while the ends stay */
    CHECK(mf_agg_sweep(g, MF_AGG_PAIRS, 2, 100, &moved) == 1 && moved == 0);
    CHECK(mf_agg_set_rollup(g, b1, grp) == 0 && mf_agg_set_rollup(g, b2, grp) == 0);
    /* idle up to window 1 only: a->b2 had messages in 2 */
    CHECK(mf_agg_sweep(g, MF_AGG_PAIRS, 1, 100, &moved) == 1 && moved == 5);
    CHECK(!mf_agg_find(g, MF_AGG_PAIRS, a, b1) && mf_agg_find(g, MF_AGG_PAIRS, a, b2));
    CHECK(mf_agg_sweep(g, MF_AGG_PAIRS, 2, 100, &moved) == 1 && moved == 10);
    CHECK(mf_agg_size(g, MF_AGG_PAIRS) == 0);
    const mf_agg_row *r = mf_agg_find(g, MF_AGG_ROLLED, a, grp);
    CHECK(r && r->total == 15 && r->last_window == 2 && r->last_count == 3);
    CHECK(hist_is(r, (uint32_t[]){1}, (uint64_t[]){12}, 1));
    CHECK(r->peak_mhz == 12000);                               /* 12 in window 1's 1 s */
    CHECK(kind_n(r, call) == 5 && kind_n(r, cast) == 10 && r->kinds_n == 2);
    CHECK(mf_agg_sweep(g, MF_AGG_ROLLED, 2, 100, &moved) == 1 && moved == 0);
    CHECK(mf_agg_find(g, MF_AGG_ROLLED, grp, a)->total == 4 && !mf_agg_find(g, MF_AGG_ROLLED, b1, a));
    CHECK(mf_agg_sweep(g, MF_AGG_DEAD, 2, 100, &moved) == 1);
    CHECK(mf_agg_find(g, MF_AGG_DEAD, a, grp)->total == 2 && mf_agg_size(g, MF_AGG_DEAD) == 1);
    /* the busiest by total: the group's keys, not the pairs' */
    mf_agg_top top[16];
    uint64_t floor;
    uint32_t k = mf_agg_busiest(g, 0, top, 16, &floor);
    CHECK(k == 2 && top[0].from == a && top[0].to == grp && top[0].value == 15);
    CHECK(top[1].from == grp && top[1].to == a && top[1].value == 4);
    /* b1 and b2 let go, then freed; a new endpoint takes a number back */
    uint32_t out[8];
    CHECK(mf_agg_take_released(g, out, 8) == 2);
    mf_agg_close(g, 1000, 5);
    CHECK(mf_agg_find_word(g, 0x23) == b1);
    mf_agg_close(g, 1000, 5);
    CHECK(mf_agg_find_word(g, 0x23) == 0 && mf_agg_find_word(g, 0x33) == 0);
    uint32_t fresh[16];
    CHECK(mf_agg_take_new(g, fresh, 16) == 3);                 /* a, grp, gg: b1, b2 are gone */
    uint32_t c = mf_agg_end_word(g, 0x43);
    CHECK(c == b1 || c == b2);
    CHECK(mf_agg_take_new(g, fresh, 16) == 1 && fresh[0] == c);
    CHECK(mf_agg_end_at(g, grp)->refs == 0 && mf_agg_end_at(g, gg)->refs == 3);
    CHECK(mf_agg_find(g, MF_AGG_GROUPS, gg, gg)->total == 5 + 7 + 3 + 4);
    mf_agg_free(g);
    CHECK(live_bytes == 0 && live_blocks == 0);
}

/* Every live row found through the index, the tables' sums equal to their
 * rows added up, every live endpoint found by its word. */
static void check_index(mf_agg *g, uint64_t max_word)
{
    for (unsigned t = 0; t < MF_AGG_TABLES; t++) {
        uint32_t cur = 0, seen = 0;
        uint64_t sum = 0;
        const mf_agg_row *r;
        while ((r = mf_agg_next(g, t, &cur))) {
            seen++;
            sum += r->total;
            if (mf_agg_find(g, t, r->from, r->to) != r)
                CHECK(!"a live row found through the index");
        }
        CHECK(seen == mf_agg_size(g, t));
        CHECK(sum == mf_agg_sum(g, t));
    }
    uint32_t live = 0;
    for (uint32_t e = 1; e <= mf_agg_ends(g); e++) {
        const mf_agg_end *x = mf_agg_end_at(g, e);
        if (!x || !x->word)
            continue;
        live++;
        if (mf_agg_find_word(g, x->word) != e)
            CHECK(!"a live endpoint found through the index");
    }
    CHECK(live > 0);
    (void)max_word;
}

/* Churn across many index growths: endpoints come, send for five windows,
 * roll up and are freed; their rows roll up and their numbers are reused,
 * while the larger index is being built (a window of few inserts leaves a
 * build half done when the sweep deletes).  After every window the index
 * finds every row and endpoint and the sums hold; mf_agg_idle_ends gives
 * exactly the ends a read of every row finds. */
static void test_index_churn(void)
{
    mf_agg *g = agg(4, 4, 64, 64);
    uint32_t gg = mf_agg_end_bytes(g, (const unsigned char *)"gg", 2, MF_AGG_GROUP);
    uint32_t rg = mf_agg_end_bytes(g, (const unsigned char *)"rg", 2, MF_AGG_GROUP);
    CHECK(mf_agg_set_group(g, gg, gg) == 0 && mf_agg_set_group(g, rg, gg) == 0);
    enum { PER = 600, LIFE = 5, WINDOWS = 70 };
    static uint32_t born[WINDOWS + 1][PER];
    uint64_t word = 1;
    int half_done = 0;
    for (uint32_t w = 1; w <= WINDOWS; w++) {
        for (int i = 0; i < PER; i++) {
            born[w][i] = mf_agg_end_word(g, (word++) << 4 | 3);
            CHECK(born[w][i] && mf_agg_set_group(g, born[w][i], gg) == 0);
        }
        CHECK(mf_agg_groups_ready(g) == 0);
        /* 100 to 60,000 deltas between the living endpoints */
        uint32_t first = w > LIFE ? w - LIFE + 1 : 1;
        uint32_t deltas = w % 7 == 3 ? 100 : (uint32_t)(rnd() % 60000);
        for (uint32_t d = 0; d < deltas; d++) {
            uint32_t a = born[first + rnd() % (w - first + 1)][rnd() % PER];
            uint32_t b = born[first + rnd() % (w - first + 1)][rnd() % PER];
            CHECK(mf_agg_add(g, d % 50 ? MF_AGG_PAIRS : MF_AGG_DEAD, a, b, kw(100, 1), 1 + d % 3) == 0);
        }
        mf_agg_close(g, 1000, 1000);
        /* the idle ends (window w - 2's rows, the open one being w + 1):
         * as a read of every row finds them */
        if (w >= 3) {
            uint32_t idle = w - 2;
            static uint32_t got[2 * WINDOWS * PER];
            static uint8_t mark[WINDOWS * PER + 16];
            memset(mark, 0, sizeof(mark));
            uint32_t nw = 0;
            for (unsigned t = MF_AGG_PAIRS; t <= MF_AGG_ROLLED; t++) {
                uint32_t cur = 0;
                const mf_agg_row *r;
                while ((r = mf_agg_next(g, t, &cur))) {
                    if (r->last_window != idle)
                        continue;
                    uint32_t e2[2] = {r->from, r->to};
                    for (int j = 0; j < 2; j++) {
                        const mf_agg_end *x = mf_agg_end_at(g, e2[j]);
                        if (!x->rollup && !(x->flags & MF_AGG_GROUP) && !mark[e2[j]]) {
                            mark[e2[j]] = 1;
                            nw++;
                        }
                    }
                }
            }
            /* in slices of 1,000 rows */
            uint32_t ng = 0, cursor = 0;
            while (cursor != UINT32_MAX)
                ng += mf_agg_idle_ends(g, idle, &cursor, 1000, got + ng);
            CHECK(ng == nw);
            uint32_t both = 0;
            for (uint32_t i = 0; i < ng; i++)
                both += mark[got[i]] == 1 ? (mark[got[i]] = 2, 1) : 0;
            CHECK(both == nw);
        }
        /* the endpoints born LIFE windows ago roll up; the rows idle since
         * window w - 2 roll with them (as msgflow_rollup sweeps) */
        if (w > LIFE)
            for (int i = 0; i < PER; i++)
                CHECK(mf_agg_set_rollup(g, born[w - LIFE][i], rg) == 0);
        uint64_t moved;
        for (unsigned t = MF_AGG_PAIRS; t <= MF_AGG_DEAD; t++)
            while (mf_agg_sweep(g, t, w >= 3 ? w - 2 : 0, 5000, &moved) == 0)
                ;
        check_index(g, word);
        uint32_t out[4096];
        while (mf_agg_take_released(g, out, 4096))
            ;
        half_done += deltas == 100;
    }
    CHECK(half_done > 0);
    CHECK(mf_agg_sum(g, MF_AGG_ROLLED) + mf_agg_sum(g, MF_AGG_PAIRS) == mf_agg_sum(g, MF_AGG_GROUPS));
    mf_agg_free(g);
    CHECK(live_bytes == 0 && live_blocks == 0);
}

/* One allocation refused, for each allocation a workload makes in turn
 * (rows with kinds, windows, roll-ups that merge rows): no message is
 * counted twice or lost (what the rows hold plus what found no row is
 * what was added, in both the rows and the kept sums), and nothing
 * leaks. */
static void test_oom_conserved(void)
{
    long total_allocs = 0;
    for (long k = 1;; k++) {
        fail_at = k;
        allocs = 0;
        mf_agg_opts o = {4, 2, OTHER, KIND_BITS, REPLY, 16, 16};
        mf_agg *g = mf_agg_new(&failing, &o);
        if (!g)
            continue;
        uint64_t added = 0, no_row = 0, moved_all = 0;
        uint32_t e[12] = {0};
        for (int i = 0; i < 12; i++)
            e[i] = mf_agg_end_word(g, (uint64_t)(i + 1) << 4 | 3);
        uint32_t grp = mf_agg_end_bytes(g, (const unsigned char *)"grp", 3, MF_AGG_GROUP);
        for (uint32_t w = 1; w <= 8; w++) {
            for (int i = 0; i < 12; i++)
                if (e[i] && grp)
                    (void)mf_agg_set_group(g, e[i], grp);
            (void)mf_agg_groups_ready(g);
            for (int i = 0; i < 40; i++) {
                uint32_t a = e[i % 12], b = e[(i * 7 + w) % 12];
                uint64_t n = 1 + (uint64_t)(i % 5);
                if (!a || !b)
                    continue;
                int r = mf_agg_add(g, MF_AGG_PAIRS, a, b, kw(100 + (uint64_t)(i + w) % 4, 1 + i % 3), n);
                added += n;
                if (r == 1)
                    no_row += n;
            }
            (void)mf_agg_close(g, 1000, 3);
            /* half the endpoints roll up to grp from window 3 on */
            if (w >= 3 && grp)
                for (int i = 0; i < 6; i++)
                    if (e[i])
                        (void)mf_agg_set_rollup(g, e[i], grp);
            uint64_t moved;
            for (unsigned t = MF_AGG_PAIRS; t <= MF_AGG_DEAD; t++) {
                int r;
                while ((r = mf_agg_sweep(g, t, w >= 2 ? w - 1 : 0, 7, &moved)) == 0)
                    moved_all += t == MF_AGG_PAIRS ? moved : 0;
                moved_all += t == MF_AGG_PAIRS && r >= 0 ? moved : 0;
            }
        }
        uint64_t held = 0;
        for (unsigned t = MF_AGG_PAIRS; t <= MF_AGG_ROLLED; t++) {
            uint32_t cur = 0;
            const mf_agg_row *r;
            uint64_t sum = 0;
            while ((r = mf_agg_next(g, t, &cur)))
                sum += r->total;
            if (sum != mf_agg_sum(g, t))
                CHECK(!"the kept sum equals the rows'");
            held += sum;
        }
        if (held + no_row != added) {
            fprintf(stderr, "allocation %ld refused: held %llu + no row %llu != added %llu\n", k,
                    (unsigned long long)held, (unsigned long long)no_row, (unsigned long long)added);
            CHECK(!"conserved");
        }
        (void)moved_all;
        mf_agg_free(g);
        CHECK(live_bytes == 0 && live_blocks == 0);
        if (allocs < k) {
            total_allocs = allocs; /* the workload made fewer: every one was tried */
            break;
        }
    }
    fail_at = 0;
    CHECK(total_allocs > 50);
    printf("one allocation refused: each of %ld tried\n", total_allocs);
}

int main(void)
{
    test_windows();
    test_kinds();
    test_busiest();
    test_groups();
    test_rollup();
    test_full_and_scale();
    test_index_churn();
    test_oom_conserved();
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("all checks passed\n");
    return failures ? 1 : 0;
}
