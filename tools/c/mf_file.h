/*
 * mf_file.h -- reading a whole file, for the C tools and their tests.
 *
 * Memory and threads: no global state, any thread.  The buffer returned is
 * the caller's, from malloc(); free it with free().
 */
#ifndef MF_FILE_H
#define MF_FILE_H

#include <stddef.h>

/* Reads all of `path' (a regular file or a pipe) into a new buffer and sets
 * *len to its size in bytes.  NULL with errno set when the file can't be
 * opened or read, or is 2 GiB or more (EFBIG), or memory runs out.  An empty
 * file gives a non-NULL buffer and *len 0. */
char *mf_read_file(const char *path, size_t *len);

#endif
