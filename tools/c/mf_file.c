/*
 * mf_file.c -- reading a whole file (mf_file.h), for the C tools and their
 * tests.
 *
 * Owns nothing between calls: no global state, any thread.  The buffer it
 * returns is the caller's (malloc(); free it with free()).
 */
#include "mf_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

char *mf_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    /* a directory opens, and then fails to read as EIO: say what it is */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        errno = EISDIR;
        return NULL;
    }
    size_t cap = (size_t)1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *bigger = cap < ((size_t)1 << 31) ? realloc(buf, cap * 2) : NULL;
        if (!bigger) {
            free(buf);
            buf = NULL;
            errno = cap < ((size_t)1 << 31) ? ENOMEM : EFBIG;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
        errno = EIO;
    }
    fclose(f);
    *len = n;
    return buf;
}
