/*
 * mf_topk.c -- see mf_topk.h for what it owns and which threads touch it.
 */
#include "mf_topk.h"

#include <string.h>

#include "mf_spin.h"

#define MF_TOPK_FREE 0xFFFFu

_Static_assert(MF_TOPK_SLOTS < MF_TOPK_FREE, "a slot number fits the index");
_Static_assert((MF_TOPK_INDEX & (MF_TOPK_INDEX - 1)) == 0, "the index is a power of two");
_Static_assert(MF_TOPK_INDEX >= 2 * MF_TOPK_SLOTS, "the index is at most half full");

static inline unsigned home(uint64_t from, uint64_t to)
{
    uint64_t h = from * 0x9E3779B97F4A7C15ULL ^ to * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 31;
    return (unsigned)h & (MF_TOPK_INDEX - 1);
}

void mf_topk_init(mf_topk *t)
{
    memset(t, 0, sizeof(*t));
    atomic_flag_clear(&t->lock);
    memset(t->index, 0xFF, sizeof(t->index));
}

/* The index position of (from, to), or of the free position where it
 * would go. */
static unsigned find(const mf_topk *t, uint64_t from, uint64_t to)
{
    unsigned i = home(from, to);
    for (;;) {
        unsigned s = t->index[i];
        if (s == MF_TOPK_FREE || (t->slots[s].from == from && t->slots[s].to == to))
            return i;
        i = (i + 1) & (MF_TOPK_INDEX - 1);
    }
}

/* Index position i freed, the positions after it moved back so that every
 * key stays reachable from its home (linear probing's deletion). */
static void unindex(mf_topk *t, unsigned i)
{
    unsigned j = i;
    for (;;) {
        j = (j + 1) & (MF_TOPK_INDEX - 1);
        unsigned s = t->index[j];
        if (s == MF_TOPK_FREE)
            break;
        unsigned h = home(t->slots[s].from, t->slots[s].to);
        /* move s back to i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (!stays) {
            t->index[i] = (uint16_t)s;
            i = j;
        }
    }
    t->index[i] = MF_TOPK_FREE;
}

/* The least count and how many slots have it, by a scan (all taken). */
static void rescan(mf_topk *t)
{
    uint64_t min = UINT64_MAX;
    unsigned at = 0;
    for (unsigned s = 0; s < MF_TOPK_SLOTS; s++) {
        uint64_t c = t->slots[s].count;
        if (c < min) {
            min = c;
            at = 1;
        } else if (c == min) {
            at++;
        }
    }
    t->min = min;
    t->at_min = at;
}

/* Slot s, all slots taken, n messages more. */
static void bump(mf_topk *t, unsigned s, uint64_t n)
{
    uint64_t old = t->slots[s].count;
    t->slots[s].count = old + n;
    if (old == t->min && --t->at_min == 0)
        rescan(t);
}

/* A slot at the least count: the search goes on from where the last one
 * stopped, and a slot passed has more than min until min rises. */
static unsigned least(mf_topk *t)
{
    for (;;) {
        unsigned s = t->cursor;
        t->cursor = (t->cursor + 1) % MF_TOPK_SLOTS;
        if (t->slots[s].count == t->min)
            return s;
    }
}

void mf_topk_add(mf_topk *t, uint64_t from, uint64_t to)
{
    mf_topk_add_n(t, from, to, 1);
}

void mf_topk_add_n(mf_topk *t, uint64_t from, uint64_t to, uint64_t n)
{
    mf_spin_lock(&t->lock);
    unsigned i = find(t, from, to);
    unsigned s = t->index[i];
    if (s != MF_TOPK_FREE) {
        if (t->used < MF_TOPK_SLOTS)
            t->slots[s].count += n;
        else
            bump(t, s, n);
    } else if (t->used < MF_TOPK_SLOTS) {
        s = t->used++;
        t->slots[s] = (mf_topk_slot){from, to, n, 0};
        t->index[i] = (uint16_t)s;
        if (t->used == MF_TOPK_SLOTS) {
            t->cursor = 0;
            rescan(t);
        }
    } else {
        /* the pair takes a least slot, its count as the error */
        s = least(t);
        unindex(t, find(t, t->slots[s].from, t->slots[s].to));
        t->slots[s].from = from;
        t->slots[s].to = to;
        t->slots[s].err = t->min;
        t->index[find(t, from, to)] = (uint16_t)s;
        bump(t, s, n);
    }
    mf_spin_unlock(&t->lock);
}

unsigned mf_topk_take(mf_topk *t, mf_topk_slot *out, uint64_t *min)
{
    mf_spin_lock(&t->lock);
    unsigned n = t->used;
    if (!n) {
        /* (most takes: nothing overflowed) */
        mf_spin_unlock(&t->lock);
        *min = 0;
        return 0;
    }
    memcpy(out, t->slots, n * sizeof(*out));
    *min = n == MF_TOPK_SLOTS ? t->min : 0;
    t->used = 0;
    t->min = 0;
    t->at_min = 0;
    t->cursor = 0;
    memset(t->index, 0xFF, sizeof(t->index));
    mf_spin_unlock(&t->lock);
    return n;
}
