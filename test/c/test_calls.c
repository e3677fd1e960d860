/*
 * C unit tests of the calls' round trips (c_src/mf_calls.c): buckets,
 * one call answered, one never answered, a slot needed again, and 16
 * threads noting and answering calls at once while a 17th takes the edges
 * (run under ThreadSanitizer too).  Every check compares exact figures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_alloc.h"
#include "mf_calls.h"

#include "check.h"

/* sampled and unanswered summed over a taken list, which is freed */
static void sum_edges(mf_calls *c, mf_call_edge *l, uint64_t *sampled, uint64_t *unanswered,
                      unsigned *n)
{
    for (mf_call_edge *e = l; e; e = e->next) {
        uint64_t b = 0;
        for (unsigned i = 0; i < MF_CALL_BUCKETS; i++)
            b += e->buckets[i];
        CHECK(b == e->sampled);
        *sampled += e->sampled;
        *unanswered += e->unanswered;
        (*n)++;
    }
    mf_calls_free_edges(c, l);
}

static void test_buckets(void)
{
    CHECK(mf_call_bucket(0) == 0);
    CHECK(mf_call_bucket(255) == 0);
    CHECK(mf_call_bucket(256) == 1);
    CHECK(mf_call_bucket(383) == 1);
    CHECK(mf_call_bucket(384) == 2);
    CHECK(mf_call_bucket(512) == 3);
    CHECK(mf_call_bucket(1ULL << 40) == MF_CALL_BUCKETS - 1);
    for (unsigned b = 1; b < MF_CALL_BUCKETS - 1; b++) {
        CHECK(mf_call_bucket(mf_call_bucket_low(b)) == b);
        CHECK(mf_call_bucket(mf_call_bucket_high(b) - 1) == b);
        CHECK(mf_call_bucket_high(b) * 2 <= mf_call_bucket_low(b) * 3);
    }
    /* 20 ms falls in [16.8, 25.2) ms */
    unsigned b = mf_call_bucket(20000000);
    CHECK(mf_call_bucket_low(b) <= 20000000 && 20000000 < mf_call_bucket_high(b));
}

static void test_one_thread(void)
{
    mf_calls *c = mf_calls_new(&mf_alloc_libc, 1, 1000000);
    CHECK(c != NULL);
    CHECK(!mf_calls_maybe(c, 77));
    mf_calls_request(c, 77, 0x13, 0x23, 0x51, 1000);
    CHECK(mf_calls_maybe(c, 77));
    mf_calls_reply(c, 78, 3000);  /* another alias: nothing */
    mf_calls_reply(c, 77, 21000); /* 20 us */
    CHECK(!mf_calls_maybe(c, 77));
    mf_calls_reply(c, 77, 22000); /* a second reply: nothing */
    mf_calls_request(c, 99, 0x13, 0x23, 0x51, 5000); /* never answered */
    mf_call_edge *l = mf_calls_take(c, 5000 + 999999); /* not yet past the timeout */
    CHECK(l != NULL && l->next == NULL);
    CHECK(l && l->sampled == 1 && l->unanswered == 0 && l->buckets[mf_call_bucket(20000)] == 1);
    mf_calls_free_edges(c, l);
    l = mf_calls_take(c, 5000 + 1000000);
    CHECK(l != NULL && l->sampled == 0 && l->unanswered == 1);
    mf_calls_free_edges(c, l);
    CHECK(mf_calls_take(c, 1ULL << 50) == NULL);
    /* a slot needed by another call: the first is unanswered */
    uint64_t a = 5, b2 = 0;
    for (uint64_t id = 6; !b2; id++)
        if (mf_calls_index(id) == mf_calls_index(a))
            b2 = id;
    mf_calls_request(c, a, 0x13, 0x33, 0x51, 0);
    mf_calls_request(c, b2, 0x13, 0x33, 0x51, 0);
    mf_calls_reply(c, a, 100);
    mf_calls_reply(c, b2, 100);
    uint64_t sampled = 0, unanswered = 0;
    unsigned n = 0;
    sum_edges(c, mf_calls_take(c, 200), &sampled, &unanswered, &n);
    CHECK(n == 1 && sampled == 1 && unanswered == 1 && atomic_load(&c->displaced) == 1);
    mf_calls_free(c);
}

#define THREADS 16
#define CALLS 20000
static mf_calls *shared;
static _Atomic int done_noting, stop_taking;
static _Atomic uint64_t taken_sampled, taken_unanswered;

static void *noter(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    for (uint64_t k = 0; k < CALLS; k++)
        mf_calls_request(shared, (t << 32) | (k << 2), 0x13 + (t << 4), 0x23, 0x51 + (k % 4 << 4),
                         k);
    atomic_fetch_add(&done_noting, 1);
    while (atomic_load(&done_noting) < THREADS)
        ;
    /* answer the next thread's calls, while noting new ones (which take
     * the slots the answers free, and race with them) */
    uint64_t o = (t + 1) % THREADS;
    for (uint64_t k = 0; k < CALLS; k++) {
        uint64_t id = (t << 32) | (1ULL << 31) | (k << 2);
        mf_calls_reply(shared, (o << 32) | (k << 2), k + 1000);
        mf_calls_request(shared, id, 0x13 + (t << 4), 0x23, 0x51, k);
        mf_calls_reply(shared, id, k + 500);
    }
    return NULL;
}

static void *taker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_taking)) {
        uint64_t s = 0, u = 0;
        unsigned n = 0;
        /* a timeout far away: only the edges, no sweep */
        sum_edges(shared, mf_calls_take(shared, 0), &s, &u, &n);
        atomic_fetch_add(&taken_sampled, s);
        atomic_fetch_add(&taken_unanswered, u);
    }
    return NULL;
}

static void test_threads(void)
{
    shared = mf_calls_new(&mf_alloc_libc, 1, 1ULL << 60);
    pthread_t th[THREADS], tk;
    pthread_create(&tk, NULL, taker, NULL);
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, noter, (void *)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    atomic_store(&stop_taking, 1);
    pthread_join(tk, NULL);
    /* what is left in flight: given up now */
    shared->timeout_ns = 0;
    uint64_t s = atomic_load(&taken_sampled), u = atomic_load(&taken_unanswered);
    unsigned n = 0;
    sum_edges(shared, mf_calls_take(shared, 1ULL << 62), &s, &u, &n);
    uint64_t noted = 2ULL * THREADS * CALLS - atomic_load(&shared->busy);
    CHECK(s + u == noted);
    CHECK(s >= (uint64_t)THREADS * CALLS / 2); /* most self-answered calls */
    printf("threads: %d x 2 x %d calls: %llu round trips, %llu unanswered (%llu displaced), %llu busy\n",
           THREADS, CALLS, (unsigned long long)s, (unsigned long long)u,
           (unsigned long long)atomic_load(&shared->displaced),
           (unsigned long long)atomic_load(&shared->busy));
    mf_calls_free(shared);
}

int main(void)
{
    test_buckets();
    test_one_thread();
    test_threads();
    if (failures) {
        fprintf(stderr, "test_calls: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_calls: all checks passed\n");
    return 0;
}
