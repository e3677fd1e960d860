/*
 * mf_alloc.c -- libc and jemalloc allocators for the tables (see mf_alloc.h).
 *
 * jemalloc is reached only through dlopen/dlsym of its non-standard API
 * (mallocx, dallocx, mallctl).  Linking it would bind the plain malloc names
 * and, in beam.smp, fail the whole NIF load with "cannot allocate memory in
 * static TLS block" unless the VM was started with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384.  With dlopen that
 * failure is an answer we can report, and the NIF falls back to enif_alloc.
 */
#include "mf_alloc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jemalloc/jemalloc.h> /* MALLOCX_* flags only; functions via dlsym */

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
    int flags;
} je;

static void *je_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return je.mallocx(size ? size : 1, je.flags);
}

static void je_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (ptr)
        je.sdallocx(ptr, size ? size : 1, MALLOCX_TCACHE_NONE);
}

int mf_alloc_jemalloc(mf_alloc *out, char *why, size_t why_len)
{
    if (!je.mallocx) {
        void *h = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(why, why_len, "%s", e ? e : "dlopen failed");
            return 0;
        }
        mallocx_fn mx = (mallocx_fn)dlsym(h, "mallocx");
        sdallocx_fn sdx = (sdallocx_fn)dlsym(h, "sdallocx");
        mallctl_fn mc = (mallctl_fn)dlsym(h, "mallctl");
        if (!mx || !sdx || !mc) {
            snprintf(why, why_len, "libjemalloc.so.2 lacks mallocx/sdallocx/mallctl");
            return 0; /* the handle stays open: harmless, and never used */
        }
        unsigned arena = 0;
        size_t sz = sizeof(arena);
        int rc = mc("arenas.create", &arena, &sz, NULL, 0);
        if (rc != 0) {
            snprintf(why, why_len, "mallctl(\"arenas.create\") failed: %s", strerror(rc));
            return 0;
        }
        je.flags = (int)MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE;
        je.sdallocx = sdx;
        je.mallocx = mx; /* last: marks the set-up as done */
    }
    out->alloc = je_alloc;
    out->free = je_free;
    out->ctx = NULL;
    out->name = "jemalloc";
    if (why_len)
        why[0] = '\0';
    return 1;
}
