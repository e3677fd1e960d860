/*
 * mf_dump.h -- decodes msgflow's ETF dump (msgflow:export(Path, etf),
 * msgflow:dump/0, and the rows msgflow-top asks for), version 6, with
 * ei.  Shared by msgflow-report and msgflow-top.
 *
 * Version 6 (erl/output/msgflow_dump.erl documents it) is term_to_binary
 * of a map whose every part is a map with named fields:
 *   #{format => msgflow_dump, version => 6, node, by, sort, taken_at,
 *     started_at, running, window_ms, scale, events, dead_letters,
 *     overflow, pair_count, group_count,
 *     endpoints => [#{endpoint, text, label, display, module, application,
 *                     node}],
 *     rows => [#{sender, receiver, messages, window_messages, rate,
 *                peak_rate, kinds => [#{kind, tag, messages}]}],
 *     nodes => [#{node, status, pairs, events}],
 *     missing => [#{node, reason}],
 *     calls => [#{caller, caller_label, server, server_label, kind, tag,
 *                 calls, sampled, unanswered, p50_ns, p90_ns, p99_ns,
 *                 max_ns}],
 *     memory_full, overflow_top => [#{sender, receiver, messages, error}],
 *     overflow_top_min}   (the last three optional)
 * A field this reader does not know is skipped.  Its rows are a view's:
 * grouped by `by' on the node, in its order.  Versions 1 to 5 (msgflow
 * 0.1's tuples by position) are refused, with the version and how to
 * export the run again.
 *
 * Safety: ei's decoders trust the lengths inside the term, so the whole
 * input is first walked by a bounds-checked validator (every length
 * against the bytes that are left, nesting at most MF_DUMP_MAX_DEPTH);
 * only a term that passed is handed to ei.  Anything else is answered
 * with an error message, never a read past `len'.
 *
 * Memory and threads: no global state.  Everything a decoded mf_dump points
 * to is malloc'd for the caller, who owns it and releases it with
 * mf_dump_free().  Any thread may decode, each into its own mf_dump.
 */
#ifndef MF_DUMP_H
#define MF_DUMP_H

#include <stddef.h>
#include <stdint.h>

/* the one version read: named fields, rows of any grouping (1 to 5,
 * msgflow 0.1's, are refused) */
#define MF_DUMP_VERSION 6
#define MF_DUMP_MAX_DEPTH 16

/* What an endpoint is: a process, port, registered name (here or on a
 * node), alias, the exited endpoints of one label, or (rows
 * grouped on the node) a group's key. */
typedef enum {
    MF_EP_PID,
    MF_EP_PORT,
    MF_EP_ATOM,
    MF_EP_NAME_NODE,
    MF_EP_REF,
    MF_EP_EXITED,
    MF_EP_KEY
} mf_ep_type;

typedef struct {
    mf_ep_type type;
    char *text;        /* as msgflow_fmt:endpoint/1 writes it, e.g. <0.80.0> */
    char *label;       /* the readable label the node gave it */
    char *display;     /* the label as the views show it (with the
                        * text beside a label other endpoints share); NULL
                        * before */
    char *module;      /* NULL when `undefined' */
    char *application; /* NULL when `undefined' */
    char *node;        /* node the endpoint lives on */
} mf_endpoint;

/* A kind of message and its tag as msgflow names them ("call", "get");
 * each distinct one is kept once per dump. */
typedef struct {
    char *kind;
    char *tag;
} mf_kind_name;

/* The messages of one kind and tag of a pair. */
typedef struct {
    uint32_t name;     /* index into kind_names */
    uint64_t messages;
} mf_pair_kind;

typedef struct {
    size_t sender, receiver;  /* indexes into endpoints */
    uint64_t messages;        /* since start */
    uint64_t window_messages; /* in the last window */
    double rate, peak;        /* messages/s over the last window and
                               * of the busiest, as the node gave them; -1
                               * before (the rate is then window_messages over
                               * window_ms) */
    size_t first_kind;        /* its kinds: pair_kinds[first_kind ..] */
    uint32_t n_kinds;         /* 0 with kinds off */
    double bytes, bytes_mean; /* the bytes its messages copied since start,
                               * and a message's, from sampled sizes; -1
                               * when none was measured (or before they
                               * were in the dump) */
    double wait_ms;           /* rows sorted by wait: the receiver's mailbox
                               * wait in the last window; -1 none */
    int growing;              /* 1: that mailbox grew all window */
} mf_pair;

/* A node of a cluster-wide dump: its status when the dump
 * was taken (up, down, stale, incompatible), its pairs and messages. */
typedef struct {
    char *name;
    char *status;
    uint64_t pairs, events;
} mf_node;

/* A call edge's round trips: its ends as texts and labels,
 * the request's kind and tag, its calls (-1: not known), the round trips
 * sampled and the calls that got no reply, and the round trip's quantiles
 * in ns (-1: no round trip). */
typedef struct {
    char *caller, *caller_label, *server, *server_label, *kind, *tag;
    long long calls;
    uint64_t sampled, unanswered;
    long long p50_ns, p90_ns, p99_ns, max_ns;
} mf_call;

/* A busiest pair among the messages in overflow (past
 * max_memory): its ends as the node shows them; its messages between
 * messages - error and messages. */
typedef struct {
    char *sender, *receiver;
    uint64_t messages, error;
} mf_overflow_pair;

typedef struct {
    long version;
    char *node;
    char *by;              /* the rows' grouping */
    char *sort;            /* what the rows are ranked by, else NULL */
    long long pair_count;  /* distinct pairs held; -1 unknown */
    long long group_count; /* groups of the grouping; -1 unknown */
    size_t n_missing;      /* nodes that did not answer, */
    char **missing;        /* as "node (reason)" */
    long long taken_at;    /* system time, ms */
    long long started_at;  /* system time, ms; -1 when undefined */
    long long stopped_at;  /* system time, ms; -1 when undefined (running, or
                            * a dump from before it was given) */
    int running;
    long long range_from;  /* a range of the history (system time, ms): its */
    long long range_to;    /* ends; -1 for the counts of a run */
    uint64_t window_ms;
    double scale;          /* > 1: sampled, rates are estimates */
    uint64_t events, dead_letters, overflow; /* messages */
    size_t n_endpoints;
    mf_endpoint *endpoints;
    size_t n_pairs;
    mf_pair *pairs;
    size_t n_nodes;        /* the cluster's nodes; 0 for one node's */
    mf_node *nodes;
    size_t n_calls;        /* call edges */
    mf_call *calls;
    size_t n_kind_names;   /* the distinct kinds and tags */
    mf_kind_name *kind_names;
    size_t n_pair_kinds;   /* every pair's kinds, pair after pair,
                            * most messages first within a pair */
    mf_pair_kind *pair_kinds;
    int memory_full;          /* max_memory reached (new pairs
                               * counted in overflow); 0 when not said */
    size_t n_overflow_top;    /* past the bound: the busiest */
    mf_overflow_pair *overflow_top; /* pairs in overflow, busiest first */
    uint64_t overflow_top_min; /* a pair not listed has at most this */
} mf_dump;

/* Decodes the len bytes at buf into *out.  Returns 0, or -1 with a message
 * in err (errlen bytes, NUL-terminated) and *out empty.  The caller owns
 * *out and frees it with mf_dump_free() (also harmless after an error). */
int mf_dump_decode(const char *buf, size_t len, mf_dump *out, char *err, size_t errlen);

/* Frees what *d points to and zeroes it.  NULL is fine. */
void mf_dump_free(mf_dump *d);

/* A copy of the n bytes at s (UTF-8) with every control character (C0,
 * DEL, C1) and bidirectional mark, embedding, override or isolate shown
 * escaped, as msgflow_fmt:visible/1 writes them (`\e', `\n', `\r',
 * `\t', `\xHH', `\x{HHHH}'; a byte that is no UTF-8 as `\xHH'):
 * what a terminal may be shown.  NUL-terminated; the caller frees it
 * (free()); NULL when out of memory.  Any thread. */
char *mf_visible(const char *s, size_t n);

/* Messages per second of a pair over the last window (scale applied): the
 * node's figure in version 6. */
double mf_dump_rate(const mf_dump *d, const mf_pair *p);

#endif
