/*
 * mf_alloc.c -- libc and jemalloc allocators for the tables (see mf_alloc.h).
 *
 * jemalloc comes one of two ways:
 *  - MF_JEMALLOC_STATIC: built from Debian's source by tools/jemalloc.sh
 *    with a private prefix (mf_je_*, never the process's malloc) and no
 *    initial-exec TLS, and linked into the NIF: it loads into a running VM
 *    as it is;
 *  - otherwise the system's libjemalloc.so.2, reached through dlopen/dlsym
 *    of its non-standard API (mallocx, sdallocx, mallctl).  Linking that one
 *    would bind the plain malloc names and, in beam.smp, fail the whole NIF
 *    load with "cannot allocate memory in static TLS block" unless the VM
 *    was started with GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384;
 *    with dlopen that failure is an answer we can report.
 * Either way a failure leaves the NIF on enif_alloc.  The choice between
 * them, made once per process, is held here too (mf_alloc_choose).
 */
#include "mf_alloc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The built one (mf_je_ names behind the usual ones) or the system's
 * (MALLOCX_* flags only; its functions via dlsym).  Built where the
 * system has no jemalloc headers (a dependency's build machine): the two
 * flags of jemalloc's stable API the dlopen path uses, as jemalloc.h
 * defines them. */
#if defined(MF_JEMALLOC_STATIC) || __has_include(<jemalloc/jemalloc.h>)
#include <jemalloc/jemalloc.h>
#else
#define MALLOCX_ARENA(a) ((int)(((unsigned)(a) + 1) << 20))
#define MALLOCX_TCACHE_NONE ((int)((-1 + 2) << 8))
#endif

static void *libc_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static void libc_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;
    free(ptr);
}

const mf_alloc mf_alloc_libc = {libc_alloc, libc_free, NULL, "malloc"};

typedef void *(*mallocx_fn)(size_t, int);
typedef void (*sdallocx_fn)(void *, size_t, int);
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);

/* Set once, by the first successful mf_alloc_jemalloc, never changed. */
static struct {
    mallocx_fn mallocx;
    sdallocx_fn sdallocx;
    mallctl_fn mallctl;
    unsigned arena;
    int flags;
} je;

static void *arena_alloc(void *ctx, size_t size)
{
    return je.mallocx(size ? size : 1, (int)(intptr_t)ctx);
}

static void arena_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (ptr)
        je.sdallocx(ptr, size ? size : 1, MALLOCX_TCACHE_NONE);
}

/* The jemalloc functions: linked in, or from the system's library. */
static int je_functions(mallocx_fn *mx, sdallocx_fn *sdx, mallctl_fn *mc, char *why,
                        size_t why_len)
{
#ifdef MF_JEMALLOC_STATIC
    (void)why;
    (void)why_len;
    *mx = mf_je_mallocx;
    *sdx = mf_je_sdallocx;
    *mc = mf_je_mallctl;
    return 1;
#else
    void *h = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "%s", e ? e : "dlopen failed");
        return 0;
    }
    *mx = (mallocx_fn)dlsym(h, "mallocx");
    *sdx = (sdallocx_fn)dlsym(h, "sdallocx");
    *mc = (mallctl_fn)dlsym(h, "mallctl");
    if (!*mx || !*sdx || !*mc) {
        snprintf(why, why_len, "libjemalloc.so.2 lacks mallocx/sdallocx/mallctl");
        return 0; /* the handle stays open: harmless, and never used */
    }
    return 1;
#endif
}

int mf_alloc_jemalloc(mf_alloc *out, char *why, size_t why_len)
{
    if (!je.mallocx) {
        mallocx_fn mx;
        sdallocx_fn sdx;
        mallctl_fn mc;
        if (!je_functions(&mx, &sdx, &mc, why, why_len))
            return 0;
        unsigned arena = 0;
        size_t sz = sizeof(arena);
        int rc = mc("arenas.create", &arena, &sz, NULL, 0);
        if (rc != 0) {
            snprintf(why, why_len, "mallctl(\"arenas.create\") failed: %s", strerror(rc));
            return 0;
        }
        je.flags = (int)MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE;
        je.arena = arena;
        je.mallctl = mc;
        je.sdallocx = sdx;
        je.mallocx = mx; /* last: marks the set-up as done */
    }
    out->alloc = arena_alloc;
    out->free = arena_free;
    out->ctx = (void *)(intptr_t)je.flags;
    out->name = "jemalloc";
    if (why_len)
        why[0] = '\0';
    return 1;
}

int mf_alloc_heap(const mf_alloc *base, mf_alloc *out)
{
    *out = *base;
    if (base->alloc != arena_alloc || !je.mallocx)
        return 0;
    unsigned arena = 0;
    size_t sz = sizeof(arena);
    if (je.mallctl("arenas.create", &arena, &sz, NULL, 0) != 0)
        return 0;
    out->ctx = (void *)(intptr_t)((int)MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE);
    return 1;
}

int mf_alloc_heap_drop(mf_alloc *heap)
{
    if (heap->alloc != arena_alloc || !je.mallocx || heap->ctx == (void *)(intptr_t)je.flags)
        return 0;
    /* MALLOCX_ARENA(a) is (a + 1) << 20 */
    unsigned arena = (unsigned)((((intptr_t)heap->ctx) >> 20) & 0xFFF) - 1;
    char name[64];
    snprintf(name, sizeof(name), "arena.%u.destroy", arena);
    return je.mallctl(name, NULL, NULL, NULL, 0) == 0;
}

const char *mf_alloc_jemalloc_build(void)
{
#ifdef MF_JEMALLOC_STATIC
    return "static";
#else
    return "system";
#endif
}

int mf_alloc_jemalloc_stats(uint64_t *allocated, uint64_t *resident)
{
    if (!je.mallocx)
        return 0;
    uint64_t epoch = 1;
    size_t sz = sizeof(epoch);
    if (je.mallctl("epoch", &epoch, &sz, &epoch, sz) != 0)
        return 0;
    char name[64];
    size_t small = 0, large = 0, res = 0, vsz = sizeof(size_t);
#ifdef MF_JEMALLOC_STATIC
    unsigned which = MALLCTL_ARENAS_ALL; /* every arena is msgflow's */
#else
    unsigned which = je.arena; /* the system's: the first arena only */
#endif
    snprintf(name, sizeof(name), "stats.arenas.%u.small.allocated", which);
    if (je.mallctl(name, &small, &vsz, NULL, 0) != 0)
        return 0;
    snprintf(name, sizeof(name), "stats.arenas.%u.large.allocated", which);
    if (je.mallctl(name, &large, &vsz, NULL, 0) != 0)
        return 0;
    snprintf(name, sizeof(name), "stats.arenas.%u.resident", which);
    if (je.mallctl(name, &res, &vsz, NULL, 0) != 0)
        return 0;
    *allocated = small + large;
    *resident = res;
    return 1;
}

/* Chosen by the first load of the NIF; never changed after. */
static mf_alloc mf_chosen;
static char mf_jemalloc_error_text[256];

void mf_alloc_choose(const char *want, const mf_alloc *fallback)
{
    if (mf_chosen.alloc)
        return;
    if (strcmp(want, "enif") == 0) {
        snprintf(mf_jemalloc_error_text, sizeof(mf_jemalloc_error_text), "MSGFLOW_ALLOCATOR=enif");
        mf_chosen = *fallback;
        return;
    }
    if (!mf_alloc_jemalloc(&mf_chosen, mf_jemalloc_error_text, sizeof(mf_jemalloc_error_text)))
        mf_chosen = *fallback;
}

const mf_alloc *mf_alloc_chosen(void)
{
    return mf_chosen.alloc ? &mf_chosen : NULL;
}

const char *mf_alloc_jemalloc_error(void)
{
    return mf_jemalloc_error_text;
}
