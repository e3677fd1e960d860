/*
 * mf_own.c -- msgflow's own processes (see mf_own.h): the writers, under
 * the set's lock and the seqlock.
 */
#include "mf_own.h"

#include <string.h>

int mf_own_init(mf_own *o)
{
    o->lock = enif_mutex_create("msgflow_own");
    return o->lock != NULL;
}

void mf_own_free(mf_own *o)
{
    if (o->lock)
        enif_mutex_destroy(o->lock);
    o->lock = NULL;
}

/* A writer's change, between two increments of seq (readers that overlap
 * it read again).  Under the lock. */
static void begin_write(mf_own *o)
{
    atomic_fetch_add_explicit(&o->seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static void end_write(mf_own *o)
{
    atomic_fetch_add_explicit(&o->seq, 1, memory_order_release);
}

/* The slot w is in, or -1.  Under the lock. */
static int find(mf_own *o, uint64_t w)
{
    unsigned i = mf_own_index(w);
    for (unsigned n = 0; n < MF_OWN_SLOTS; n++, i = (i + 1) & (MF_OWN_SLOTS - 1)) {
        uint64_t v = atomic_load_explicit(&o->slots[i], memory_order_relaxed);
        if (v == w)
            return (int)i;
        if (v == 0)
            return -1;
    }
    return -1;
}

/* Puts w in its first empty slot; the table has one (used < slots).
 * Under the lock, inside a write. */
static void place(mf_own *o, uint64_t w)
{
    unsigned i = mf_own_index(w);
    while (atomic_load_explicit(&o->slots[i], memory_order_relaxed) != 0)
        i = (i + 1) & (MF_OWN_SLOTS - 1);
    atomic_store_explicit(&o->slots[i], w, memory_order_relaxed);
}

/* w's bit set in the filter, before w is placed.  Under the lock. */
static void filter_add(mf_own *o, uint64_t w)
{
    unsigned b = mf_own_filter_bit(w);
    atomic_fetch_or_explicit(&o->filter[b >> 6], 1ULL << (b & 63), memory_order_relaxed);
}

/* The filter made again from the words in the set: the bits of removed
 * words cleared, a word of the set keeping its bit throughout (each filter
 * word is stored whole).  Under the lock, inside a write. */
static void filter_remake(mf_own *o)
{
    uint64_t f[MF_OWN_FILTER_WORDS] = {0};
    for (unsigned i = 0; i < MF_OWN_SLOTS; i++) {
        uint64_t v = atomic_load_explicit(&o->slots[i], memory_order_relaxed);
        if (v > MF_OWN_GONE) {
            unsigned b = mf_own_filter_bit(v);
            f[b >> 6] |= 1ULL << (b & 63);
        }
    }
    for (unsigned j = 0; j < MF_OWN_FILTER_WORDS; j++)
        atomic_store_explicit(&o->filter[j], f[j], memory_order_relaxed);
}

/* Drops the removed entries: the live ones placed again.  Under the lock,
 * inside a write. */
static void rebuild(mf_own *o)
{
    uint64_t keep[MF_OWN_MAX];
    unsigned n = 0;
    for (unsigned i = 0; i < MF_OWN_SLOTS; i++) {
        uint64_t v = atomic_load_explicit(&o->slots[i], memory_order_relaxed);
        if (v > MF_OWN_GONE && n < MF_OWN_MAX)
            keep[n++] = v;
        atomic_store_explicit(&o->slots[i], 0, memory_order_relaxed);
    }
    for (unsigned i = 0; i < n; i++)
        place(o, keep[i]);
    o->used = n;
}

int mf_own_add(mf_own *o, uint64_t w)
{
    int ok = 1;
    enif_mutex_lock(o->lock);
    if (find(o, w) < 0) {
        if (atomic_load_explicit(&o->live, memory_order_relaxed) >= MF_OWN_MAX) {
            atomic_fetch_add_explicit(&o->refused, 1, memory_order_relaxed);
            ok = 0;
        } else {
            begin_write(o);
            if (o->used >= MF_OWN_SLOTS * 3 / 4)
                rebuild(o);
            filter_add(o, w);
            place(o, w);
            o->used++;
            atomic_fetch_add_explicit(&o->live, 1, memory_order_relaxed);
            end_write(o);
        }
    }
    enif_mutex_unlock(o->lock);
    return ok;
}

int mf_own_remove(mf_own *o, uint64_t w)
{
    enif_mutex_lock(o->lock);
    int i = find(o, w);
    if (i >= 0) {
        begin_write(o);
        atomic_store_explicit(&o->slots[i], MF_OWN_GONE, memory_order_relaxed);
        filter_remake(o);
        atomic_fetch_sub_explicit(&o->live, 1, memory_order_relaxed);
        end_write(o);
    }
    enif_mutex_unlock(o->lock);
    return i >= 0;
}

unsigned mf_own_list(mf_own *o, uint64_t *out, unsigned max)
{
    unsigned n = 0;
    enif_mutex_lock(o->lock);
    for (unsigned i = 0; i < MF_OWN_SLOTS && n < max; i++) {
        uint64_t v = atomic_load_explicit(&o->slots[i], memory_order_relaxed);
        if (v > MF_OWN_GONE)
            out[n++] = v;
    }
    enif_mutex_unlock(o->lock);
    return n;
}
