/*
 * mf_dump.h -- decodes msgflow's ETF dump (msgflow:export(Path, etf),
 * msgflow:dump/0), versions 1 to 5, with ei.  Shared by msgflow-report
 * and msgflow-top.
 *
 * The dump is term_to_binary of
 *   #{format => msgflow_dump, version => 5, node, taken_at, started_at,
 *     running, window_ms, scale, events, dead_letters, overflow,
 *     endpoints => [{Endpoint, Label, Module, Application, Node}],
 *     pairs => [{SenderIndex, ReceiverIndex, Messages, WindowMessages,
 *                [{Kind, Tag, KindMessages}]}],  (version 4; 4-tuples before)
 *     nodes => [...],          (version 3: a cluster's nodes, below)
 *     calls => [...]}          (version 5: call edges' round trips, below)
 * (README, "Reports").
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

/* 2: endpoints may be {exited, Kind, Node}, the exited endpoints of one
 * kind (1 is read too) */
#define MF_DUMP_VERSION 5 /* 2: group endpoints; 3: `nodes'; 4: kinds; 5: `calls' */
#define MF_DUMP_MAX_DEPTH 16

typedef enum {
    MF_EP_PID,
    MF_EP_PORT,
    MF_EP_ATOM,
    MF_EP_NAME_NODE,
    MF_EP_REF,
    MF_EP_GROUP /* the exited endpoints of one kind */
} mf_ep_kind;

typedef struct {
    mf_ep_kind kind;
    char *text;        /* as msgflow_fmt:endpoint/1 writes it, e.g. <0.80.0> */
    char *label;       /* the readable label the node gave it */
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

/* The messages of one kind and tag of a pair (version 4). */
typedef struct {
    uint32_t name;     /* index into kind_names */
    uint64_t messages;
} mf_pair_kind;

typedef struct {
    size_t sender, receiver;  /* indexes into endpoints */
    uint64_t messages;        /* since start */
    uint64_t window_messages; /* in the last window */
    size_t first_kind;        /* its kinds: pair_kinds[first_kind ..] */
    uint32_t n_kinds;         /* 0 before version 4, or with kinds off */
} mf_pair;

/* A node of a cluster-wide dump (version 3): its status when the dump
 * was taken (up, down, stale, incompatible), its pairs and messages. */
typedef struct {
    char *name;
    char *status;
    uint64_t pairs, events;
} mf_node;

/* A call edge's round trips (version 5): its ends as texts and labels,
 * the request's kind and tag, its calls (-1: not known), the round trips
 * sampled and the calls that got no reply, and the round trip's quantiles
 * in ns (-1: no round trip). */
typedef struct {
    char *caller, *caller_label, *server, *server_label, *kind, *tag;
    long long calls;
    uint64_t sampled, unanswered;
    long long p50_ns, p90_ns, p99_ns, max_ns;
} mf_call;

typedef struct {
    long version;
    char *node;
    long long taken_at;    /* system time, ms */
    long long started_at;  /* system time, ms; -1 when undefined */
    int running;
    uint64_t window_ms;
    double scale;          /* > 1: sampled, rates are estimates */
    uint64_t events, dead_letters, overflow; /* messages */
    size_t n_endpoints;
    mf_endpoint *endpoints;
    size_t n_pairs;
    mf_pair *pairs;
    size_t n_nodes;        /* version 3; 0 before */
    mf_node *nodes;
    size_t n_calls;        /* version 5; 0 before */
    mf_call *calls;
    size_t n_kind_names;   /* version 4: the distinct kinds and tags */
    mf_kind_name *kind_names;
    size_t n_pair_kinds;   /* version 4: every pair's kinds, pair after pair,
                            * most messages first within a pair */
    mf_pair_kind *pair_kinds;
} mf_dump;

/* Decodes the len bytes at buf into *out.  Returns 0, or -1 with a message
 * in err (errlen bytes, NUL-terminated) and *out empty.  The caller owns
 * *out and frees it with mf_dump_free() (also harmless after an error). */
int mf_dump_decode(const char *buf, size_t len, mf_dump *out, char *err, size_t errlen);

/* Frees what *d points to and zeroes it.  NULL is fine. */
void mf_dump_free(mf_dump *d);

/* Messages per second of a pair over the last window (scale applied). */
double mf_dump_rate(const mf_dump *d, const mf_pair *p);

#endif
