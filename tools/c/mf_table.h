/*
 * mf_table.h -- the rows of a decoded dump, and the top table (the
 * columns of msgflow:top/1), CSV or DOT written from them.  A version 6
 * dump's rows are a view's, grouped, sorted and labelled on the node
 * (mf_rows_given); a dump by process (every version) can be grouped here
 * (mf_group) for msgflow-report, which reads dumps with no node to ask.
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

typedef enum {
    MF_BY_PROCESS,
    MF_BY_NAME,
    MF_BY_MODULE,
    MF_BY_APPLICATION,
    MF_BY_NODE,
    MF_BY_KIND /* rows are (kind, tag): sender the kind, receiver the tag */
} mf_by;

/* A row's messages of one kind and tag (name indexes d->kind_names). */
typedef struct {
    uint32_t name;
    uint32_t rank;     /* of the name in (kind, tag) order: ties go by it */
    uint64_t messages;
} mf_row_kind;

typedef struct {
    const char *sender, *receiver;             /* endpoint text or group key */
    const char *sender_label, *receiver_label; /* label (the key again for groups) */
    int sender_shared, receiver_shared;        /* 1: the label is another end's too (its
                                                * text is shown beside it), 0 not, -1 not
                                                * known (found among the rows shown) */
    uint64_t messages;                         /* since start */
    double rate;                               /* messages/s in the last window */
    double peak;                               /* messages/s of the busiest window, as the
                                                * node gave it; -1 none */
    const mf_row_kind *kinds;                  /* most first, as msgflow's views order
                                                * them; NULL when the dump has none */
    size_t n_kinds;
    double bytes;                              /* bytes its messages copied since start,
                                                * from sampled sizes; -1 none */
    double wait_ms;                            /* its receiver's mailbox wait (ms) in
                                                * the last window; -1 none */
    int growing;                               /* 1: that mailbox grew all window */
    const mf_endpoint *sender_end, *receiver_end; /* by process, the ends (their
                                                * `display' the label as the views show
                                                * it); NULL for a group's key */
} mf_row;

/* "process" | "name" | "module" | "application" | "node" | "kind".  0 or -1. */
int mf_by_parse(const char *s, mf_by *by);

/* Groups d's pairs by `by', busiest first, each row with its kinds summed.
 * By kind, a pair's rate is shared among its kinds by their messages, as
 * msgflow:top(N, #{by => kind}) shares it.  0, or -1 when out of memory.
 * The rows and their kinds are one allocation: free with mf_rows_free(). */
int mf_group(const mf_dump *d, mf_by by, mf_row **rows, size_t *n);

/* Rows ranked by the bytes their messages copied (sampled sizes), most
 * first; rows with none last, by messages. */
void mf_rows_by_bytes(mf_row *rows, size_t n);

/* The rows of a version 6 dump as the node gave them (grouped by its `by',
 * in its order), with the node's labels and peaks.  0, or -1 when out of
 * memory; the array is the caller's (free with mf_rows_free()), its
 * strings are d's (valid until mf_dump_free(d)).  Any thread, d read
 * only. */
int mf_rows_given(const mf_dump *d, mf_row **rows, size_t *n);
void mf_rows_free(mf_row *rows);

/* How the top table is laid out: `width' columns (at least 40; at 80 as
 * msgflow:top/1 there), rows first..first+top-1 (numbered from 1 as in
 * the whole table), `selected' drawn in reverse video (-1: none; for a
 * terminal only), `peaks' 1 for a PEAK/S column (each row's peak, or its
 * rate when it has none). */
typedef struct {
    mf_by by;
    int width;
    size_t first, top;
    long selected;
    int peaks;
    int bytes;            /* 1: a BYTES column when a row has sampled sizes */
    const char *ellipsis; /* cuts labels */
    long long total;      /* pairs or groups the header names; -1: the rows given */
    size_t overflow;      /* past max_memory, at most this many of the busiest
                           * pairs in overflow below the rows (0: none) */
    const char *overflow_at; /* with overflow 0: where they are shown
                              * instead (NULL: info()) */
} mf_top_layout;

/* The pairs or groups the node held of the rows a version 6 dump gives
 * (its `pair_count' by process, else its `group_count'): a top layout's
 * `total' for mf_rows_given's rows; -1 when the dump does not say. */
long long mf_given_total(const mf_dump *d);

/* The top table: a summary line, then `#  SENDER  RECEIVER  MESSAGES  MSG/S
 * [PEAK/S] [BYTES]  KIND' for the rows the layout names (BYTES when a row
 * has sampled sizes, from 120 columns or with the dump's rows sorted by
 * bytes); past max_memory a line saying so (mf_top_head_lines counts the
 * summary lines), and the busiest pairs in overflow below the rows when
 * the layout asks for them, as msgflow:top/1 prints them. */
void mf_print_top(FILE *out, const mf_dump *d, const mf_row *rows, size_t n,
                  const mf_top_layout *lay);

/* The lines mf_print_top writes above the column heads (at least 1). */
int mf_top_head_lines(const mf_dump *d);

/* CSV with the header and columns of msgflow:export/3 (kinds as
 * `call:get=41 cast:add=30'), and a Graphviz digraph of the `limit'
 * busiest edges.  0, or -1 on a write error. */
/* A label, and `text' beside it (NULL: none), in exactly `width' columns
 * (UTF-8 characters), cut by msgflow_fmt:label_cell/4's rule so that the
 * name a person recognises stays; `ellipsis' is one column.  Any thread;
 * writes only to out. */
void mf_label_cell(FILE *out, const char *label, const char *text, int width,
                   const char *ellipsis);

/* The CSV and the DOT msgflow:export/3 writes of the same rows
 * (msgflow_report:csv/2, dot/2), byte for byte: msgflow_c_tools_SUITE's
 * report_equals_erlang holds them so on generated stores.  DOT numbers
 * nodes as they first appear and shows each by its display label.  0, or
 * -1 when out of memory or a write failed. */
int mf_write_csv(FILE *f, const mf_dump *d, const mf_row *rows, size_t n, mf_by by);
int mf_write_dot(FILE *f, const mf_dump *d, const mf_row *rows, size_t n, size_t limit,
                 const char *by);

/* |z| at least this: a diff's edge changed its rate (msgflow_diff's
 * ?Z_MIN) */
#define MF_DIFF_Z 5

/* The diff of two dumps' rows grouped by name (mf_group, MF_BY_NAME), as
 * msgflow:diff/3 prints it in `width' columns: the edges that appeared,
 * vanished, and whose rate changed beyond chance (a binomial test on the
 * counts, |z| >= MF_DIFF_Z), most change first, with their rates before
 * and after and their main kind (its shift on a changed edge); not the
 * call p99.  0, or -1 when out of memory or on a write error. */
int mf_print_diff(FILE *out, const mf_dump *db, const mf_row *rb, size_t nb, const mf_dump *da,
                  const mf_row *ra, size_t na, int width);

/* Bytes in at most 6 columns into buf (at least 32 bytes): 512, 9.8K,
 * 1.0M, 3.2G. */
const char *mf_bytes(double b, char *buf);

/* An integer with thousands separators into buf (at least 32 bytes). */
const char *mf_int(uint64_t v, char *buf);

#endif
