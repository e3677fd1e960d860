/*
 * mf_table.h -- a decoded dump grouped as msgflow:matrix/1 groups it, and
 * written as the top table (the columns of msgflow:top/1), CSV or DOT.
 * Shared by msgflow-report and msgflow-top.
 *
 * Memory and threads: no global state.  mf_group() allocates the rows for
 * the caller (free with mf_rows_free()); their strings point into the dump,
 * which must outlive them.  Any thread.
 */
#ifndef MF_TABLE_H
#define MF_TABLE_H

#include <stdio.h>

#include "mf_dump.h"

typedef enum { MF_BY_PROCESS, MF_BY_NAME, MF_BY_MODULE, MF_BY_APPLICATION, MF_BY_NODE } mf_by;

typedef struct {
    const char *sender, *receiver;             /* endpoint text or group key */
    const char *sender_label, *receiver_label; /* label (the key again for groups) */
    uint64_t messages;                         /* since start */
    double rate;                               /* messages/s in the last window */
} mf_row;

/* "process" | "name" | "module" | "application" | "node".  0 or -1. */
int mf_by_parse(const char *s, mf_by *by);

/* Groups d's pairs by `by', busiest first.  0, or -1 when out of memory. */
int mf_group(const mf_dump *d, mf_by by, mf_row **rows, size_t *n);
void mf_rows_free(mf_row *rows);

/* The top table: a summary line, then `#  SENDER  RECEIVER  MESSAGES  MSG/S'
 * for the first `top' rows, 80 columns wide; labels cut with `ellipsis'. */
void mf_print_top(FILE *out, const mf_dump *d, const mf_row *rows, size_t n, size_t top,
                  const char *ellipsis);

/* CSV with the header of msgflow:export/3, and a Graphviz digraph of the
 * `limit' busiest edges.  0, or -1 on a write error. */
int mf_write_csv(FILE *f, const mf_row *rows, size_t n);
int mf_write_dot(FILE *f, const mf_dump *d, const mf_row *rows, size_t n, size_t limit,
                 const char *by);

/* An integer with thousands separators into buf (at least 32 bytes). */
const char *mf_int(uint64_t v, char *buf);

#endif
