/*
 * mf_spin.h -- a spin lock for tables held for a lookup and a few adds
 * (mf_calls' edges, mf_size's edges): an atomic_flag the caller owns,
 * cleared when it is made.  Any thread; never held across a call into
 * the VM or an allocation.
 */
#ifndef MF_SPIN_H
#define MF_SPIN_H

#include <stdatomic.h>

static inline void mf_spin_lock(atomic_flag *f)
{
    while (atomic_flag_test_and_set_explicit(f, memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static inline void mf_spin_unlock(atomic_flag *f)
{
    atomic_flag_clear_explicit(f, memory_order_release);
}

#endif
