/*
 * test_dump.c -- the dump decoder (tools/c/mf_dump.c) on the dumps the
 * Common Test suite writes (test_dump DIR), built with AddressSanitizer and
 * UndefinedBehaviorSanitizer.
 *
 * For every DIR/NAME.etf with a DIR/NAME.expect:
 *   - the dump decodes, and matches the expect file: a first line
 *     "node endpoints pairs events messages_sum", then (optional) one line per
 *     pair in dump order: sender text, receiver text, sender label, receiver
 *     label, messages, window messages, tab-separated;
 *   - every prefix of it (a sample of them for big dumps) is refused with a
 *     message, never read past its end (ASan checks);
 *   - 2,000 copies with random bytes changed never crash the decoder.
 * Then bad input made here: not ETF, other terms, unknown versions, a count
 * past 2^64, garbage after the term.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <ei.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_dump.h"
#include "mf_file.h"
#include "mf_table.h"

static int failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            failures++;                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

/* Decodes a private copy of exactly len bytes, so ASan sees any overread. */
static int decode(const char *buf, size_t len, mf_dump *d, char *err)
{
    char *copy = malloc(len ? len : 1);
    memcpy(copy, buf, len);
    int rc = mf_dump_decode(copy, len, d, err, 256);
    free(copy);
    return rc;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_expect(const char *name, const mf_dump *d, FILE *ex)
{
    char line[8192];
    char node[1024];
    size_t ne, np;
    unsigned long long events, sum, kinds_sum;
    CHECK(fgets(line, sizeof(line), ex) &&
              sscanf(line, "%1023s %zu %zu %llu %llu %llu", node, &ne, &np, &events, &sum,
                     &kinds_sum) == 6,
          "%s: bad expect header", name);
    CHECK(!strcmp(node, d->node), "%s: node %s, want %s", name, d->node, node);
    CHECK(d->n_endpoints == ne, "%s: %zu endpoints, want %zu", name, d->n_endpoints, ne);
    CHECK(d->n_pairs == np, "%s: %zu pairs, want %zu", name, d->n_pairs, np);
    CHECK(d->events == events, "%s: events %llu, want %llu", name,
          (unsigned long long)d->events, events);
    unsigned long long got_sum = 0;
    for (size_t i = 0; i < d->n_pairs; i++)
        got_sum += d->pairs[i].messages;
    CHECK(got_sum == sum, "%s: messages sum %llu, want %llu", name, got_sum, sum);
    unsigned long long got_kinds = 0;
    for (size_t i = 0; i < d->n_pair_kinds; i++)
        got_kinds += d->pair_kinds[i].messages;
    CHECK(got_kinds == kinds_sum, "%s: kinds sum %llu, want %llu", name, got_kinds, kinds_sum);
    size_t i = 0;
    while (fgets(line, sizeof(line), ex)) {
        line[strcspn(line, "\n")] = 0;
        CHECK(i < d->n_pairs, "%s: more expected pairs than decoded", name);
        if (i >= d->n_pairs)
            break;
        const mf_pair *p = &d->pairs[i];
        const mf_endpoint *s = &d->endpoints[p->sender], *r = &d->endpoints[p->receiver];
        char want[8192];
        size_t o = (size_t)snprintf(want, sizeof(want), "%s\t%s\t%s\t%s\t%llu\t%llu\t", s->text,
                                    r->text, s->label, r->label,
                                    (unsigned long long)p->messages,
                                    (unsigned long long)p->window_messages);
        for (uint32_t j = 0; j < p->n_kinds && o < sizeof(want); j++) {
            const mf_pair_kind *k = &d->pair_kinds[p->first_kind + j];
            o += (size_t)snprintf(want + o, sizeof(want) - o, "%s%s:%s=%llu", j ? " " : "",
                                  d->kind_names[k->name].kind, d->kind_names[k->name].tag,
                                  (unsigned long long)k->messages);
        }
        CHECK(!strcmp(line, want), "%s pair %zu:\n  got  %s\n  want %s", name, i, want, line);
        i++;
    }
}

static void check_dump_file(const char *dir, const char *name)
{
    char path[4096];
    size_t len;
    snprintf(path, sizeof(path), "%s/%s.etf", dir, name);
    char *buf = mf_read_file(path, &len);
    CHECK(buf != NULL, "cannot read %s", path);
    if (!buf)
        return;
    mf_dump d;
    char err[256];
    int rc = decode(buf, len, &d, err);
    CHECK(rc == 0, "%s: %s", name, err);
    if (rc == 0) {
        snprintf(path, sizeof(path), "%s/%s.expect", dir, name);
        FILE *ex = fopen(path, "r");
        CHECK(ex != NULL, "cannot read %s", path);
        if (ex) {
            check_expect(name, &d, ex);
            fclose(ex);
        }
        /* grouping and the writers run over it too */
        for (int by = MF_BY_PROCESS; by <= MF_BY_KIND; by++) {
            mf_row *rows;
            size_t n;
            CHECK(mf_group(&d, (mf_by)by, &rows, &n) == 0, "%s: group", name);
            uint64_t sum = 0;
            for (size_t k = 0; k < n; k++)
                sum += rows[k].messages;
            uint64_t want = 0;
            for (size_t k = 0; k < d.n_pairs; k++)
                want += d.pairs[k].messages;
            CHECK(sum == want, "%s: grouping %d lost messages", name, by);
            FILE *null = fopen("/dev/null", "w");
            /* 80 and 200 columns; a page scrolled to row 3 with a cursor and peaks */
            mf_top_layout lay = {.by = (mf_by)by, .width = 80, .first = 0, .top = 10,
                                 .selected = -1, .peaks = 0, .ellipsis = "~"};
            mf_print_top(null, &d, rows, n, &lay);
            mf_top_layout wide = {.by = (mf_by)by, .width = 200, .first = 3, .top = 5,
                                  .selected = 4, .peaks = 1, .ellipsis = "~"};
            mf_print_top(null, &d, rows, n, &wide);
            CHECK(mf_write_csv(null, &d, rows, n, MF_BY_PROCESS) == 0 && mf_write_dot(null, &d, rows, n, 200, "x") == 0,
                  "%s: writers", name);
            fclose(null);
            mf_rows_free(rows);
        }
        mf_dump_free(&d);
    }
    /* every prefix (3,000 of them for a bigger dump, 40 past 100 KB) is refused */
    size_t step = len > 100000 ? len / 40 : len > 3000 ? len / 3000 : 1;
    for (size_t cut = 0; cut < len; cut += step) {
        CHECK(decode(buf, cut, &d, err) != 0, "%s: prefix of %zu bytes accepted", name, cut);
        CHECK(err[0] != 0, "%s: prefix refused without a message", name);
        mf_dump_free(&d);
    }
    /* random damage: any answer, no crash, no leak */
    if (len < 1000000) {
        char *copy = malloc(len);
        for (int round = 0; round < 2000; round++) {
            memcpy(copy, buf, len);
            int flips = 1 + (int)(next() % 4);
            for (int k = 0; k < flips; k++)
                copy[next() % len] = (char)next();
            if (decode(copy, len, &d, err) == 0)
                mf_dump_free(&d);
        }
        free(copy);
    }
    free(buf);
    printf("ok %s (%zu bytes)\n", name, len);
}

/* ------------------------------------------------------- bad input here */

static void expect_refused(const char *what, ei_x_buff *x, const char *needle)
{
    mf_dump d;
    char err[256];
    int rc = decode(x->buff, (size_t)x->index, &d, err);
    CHECK(rc != 0, "%s: accepted", what);
    CHECK(strstr(err, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err, needle);
    mf_dump_free(&d);
}

/* What small_dump varies in its dump (version 6, by process) of one
 * endpoint and its rows to itself: the version written; how many (equal)
 * rows, and their messages (2^64 - 1, or with big_count 2^64 as a
 * bignum); the endpoint (the atom foo, or with `group' the exited
 * endpoints of label 7, {exited, 7, n@h}); kinds a row (call get with
 * 2^64 - 2 messages, info tick 1, info other 1; -1 leaves them out);
 * nodes (2 good ones; -1 one that is no map; 0 the key left out); calls
 * (1 one edge; -1 the key left out; -2 an entry that is no map); scale
 * (0: the integer 1). */
typedef struct {
    long version;
    int rows, big_count, group, kinds, nodes, calls;
    double scale;
} small_opts;
static const small_opts small_default = {.version = 6, .rows = 1, .kinds = 2, .nodes = 2,
                                         .calls = 1};

static void put_bin(ei_x_buff *x, const char *s)
{
    ei_x_encode_binary(x, s, (long)strlen(s));
}

static void small_dump(ei_x_buff *x, small_opts o)
{
    ei_x_new_with_version(x);
    ei_x_encode_map_header(x, 12 + (o.nodes != 0) + (o.calls != -1));
    ei_x_encode_atom(x, "format");
    ei_x_encode_atom(x, "msgflow_dump");
    ei_x_encode_atom(x, "version");
    ei_x_encode_long(x, o.version);
    ei_x_encode_atom(x, "node");
    ei_x_encode_atom(x, "n@h");
    ei_x_encode_atom(x, "by");
    ei_x_encode_atom(x, "process");
    ei_x_encode_atom(x, "taken_at");
    ei_x_encode_longlong(x, 1700000000000LL);
    ei_x_encode_atom(x, "window_ms");
    ei_x_encode_long(x, 1000);
    ei_x_encode_atom(x, "scale");
    if (o.scale != 0)
        ei_x_encode_double(x, o.scale);
    else
        ei_x_encode_long(x, 1);
    ei_x_encode_atom(x, "events");
    ei_x_encode_ulonglong(x, 18446744073709551615ULL);
    ei_x_encode_atom(x, "dead_letters");
    ei_x_encode_long(x, 0);
    ei_x_encode_atom(x, "overflow");
    ei_x_encode_long(x, 0);
    ei_x_encode_atom(x, "endpoints");
    ei_x_encode_list_header(x, 1);
    ei_x_encode_map_header(x, 3);
    ei_x_encode_atom(x, "endpoint");
    if (o.group) {
        ei_x_encode_tuple_header(x, 3);
        ei_x_encode_atom(x, "exited");
        ei_x_encode_long(x, 7);
        ei_x_encode_atom(x, "n@h");
    } else {
        ei_x_encode_atom(x, "foo");
    }
    ei_x_encode_atom(x, "text");
    put_bin(x, o.group ? "exited#7" : "foo");
    ei_x_encode_atom(x, "label");
    put_bin(x, "foo");
    ei_x_encode_empty_list(x);
    ei_x_encode_atom(x, "rows");
    ei_x_encode_list_header(x, o.rows);
    for (int i = 0; i < o.rows; i++) {
        ei_x_encode_map_header(x, 4 + (o.kinds >= 0));
        ei_x_encode_atom(x, "sender");
        ei_x_encode_long(x, 0);
        ei_x_encode_atom(x, "receiver");
        ei_x_encode_long(x, 0);
        ei_x_encode_atom(x, "messages");
        if (o.big_count) {
            /* 2^64 as SMALL_BIG_EXT: 9 little-endian bytes, one past ulonglong */
            const char big[] = {110, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
            ei_x_append_buf(x, big, sizeof(big));
        } else {
            ei_x_encode_ulonglong(x, 18446744073709551615ULL);
        }
        ei_x_encode_atom(x, "window_messages");
        ei_x_encode_long(x, 5);
        if (o.kinds >= 0) {
            ei_x_encode_atom(x, "kinds");
            if (o.kinds)
                ei_x_encode_list_header(x, o.kinds);
            for (int k = 0; k < o.kinds; k++) {
                ei_x_encode_map_header(x, 3);
                ei_x_encode_atom(x, "kind");
                ei_x_encode_atom(x, k == 0 ? "call" : "info");
                ei_x_encode_atom(x, "tag");
                ei_x_encode_atom(x, k == 0 ? "get" : k == 1 ? "tick" : "other");
                ei_x_encode_atom(x, "messages");
                ei_x_encode_ulonglong(x, k == 0 ? 18446744073709551614ULL : 1);
            }
            ei_x_encode_empty_list(x);
        }
    }
    ei_x_encode_empty_list(x);
    if (o.nodes) {
        ei_x_encode_atom(x, "nodes");
        ei_x_encode_list_header(x, 2);
        const char *names[] = {"n@h", "m@h"}, *status[] = {"up", "down"};
        for (int i = 0; i < 2; i++) {
            if (o.nodes < 0) {
                ei_x_encode_tuple_header(x, 2);
                ei_x_encode_atom(x, names[i]);
                ei_x_encode_atom(x, status[i]);
                continue;
            }
            ei_x_encode_map_header(x, 4);
            ei_x_encode_atom(x, "node");
            ei_x_encode_atom(x, names[i]);
            ei_x_encode_atom(x, "status");
            ei_x_encode_atom(x, status[i]);
            ei_x_encode_atom(x, "pairs");
            ei_x_encode_long(x, 3 + i);
            ei_x_encode_atom(x, "events");
            ei_x_encode_long(x, 10 + i);
        }
        ei_x_encode_empty_list(x);
    }
    if (o.calls != -1) {
        ei_x_encode_atom(x, "calls");
        if (o.calls > 0) {
            ei_x_encode_list_header(x, 1);
            ei_x_encode_map_header(x, 13);
            const char *texts[][2] = {{"caller", "<0.80.0>"}, {"caller_label", "client"},
                                      {"server", "<0.81.0>"}, {"server_label", "kv"}};
            for (int i = 0; i < 4; i++) {
                ei_x_encode_atom(x, texts[i][0]);
                put_bin(x, texts[i][1]);
            }
            ei_x_encode_atom(x, "kind");
            ei_x_encode_atom(x, "call");
            ei_x_encode_atom(x, "tag");
            ei_x_encode_atom(x, "get");
            const char *nums[] = {"calls", "sampled", "unanswered", "p50_ns", "p90_ns", "p99_ns"};
            const long vals[] = {171812, 2684, 1, 38000, 90000, 2100000};
            for (int i = 0; i < 6; i++) {
                ei_x_encode_atom(x, nums[i]);
                ei_x_encode_long(x, vals[i]);
            }
            ei_x_encode_atom(x, "max_ns");
            ei_x_encode_atom(x, "undefined");
        } else if (o.calls == -2) {
            ei_x_encode_list_header(x, 1);
            ei_x_encode_tuple_header(x, 2);
            ei_x_encode_atom(x, "call");
            ei_x_encode_atom(x, "get");
        }
        ei_x_encode_empty_list(x);
    }
}

/* Issue 20's crafted dumps: two pairs of 2^64 - 1 messages grouped into
 * one row saturate (as every grouping does) instead of wrapping; a scale
 * of infinity is refused; a directory is named as one. */
static void crafted_dumps(void)
{
    ei_x_buff x;
    mf_dump d;
    char err[256];
    small_opts two = small_default;
    two.rows = 2;
    small_dump(&x, two);
    CHECK(decode(x.buff, (size_t)x.index, &d, err) == 0, "two pairs: %s", err);
    mf_by bys[] = {MF_BY_PROCESS, MF_BY_NAME, MF_BY_MODULE, MF_BY_NODE};
    for (size_t i = 0; i < sizeof(bys) / sizeof(bys[0]); i++) {
        mf_row *rows;
        size_t n;
        CHECK(mf_group(&d, bys[i], &rows, &n) == 0 && n == 1 &&
                  rows[0].messages == 18446744073709551615ULL,
              "grouping %zu: two pairs of 2^64-1 did not saturate", i);
        mf_rows_free(rows);
    }
    mf_dump_free(&d);
    ei_x_free(&x);
    small_opts inf = small_default;
    inf.scale = INFINITY;
    small_dump(&x, inf);
    expect_refused("scale inf", &x, "finite");
    ei_x_free(&x);
    size_t len;
    errno = 0;
    CHECK(mf_read_file(".", &len) == NULL && errno == EISDIR, "a directory: errno %d", errno);
}

/* ------------------------------------------------------------ version 6 */

/* A version 6 dump: two endpoints (the pid-less name foo with a shared
 * label, and a group's key), one row with the node's rate and peak and
 * two kinds, a node, a node that did not answer, a call edge, and a key
 * this reader does not know.  `what' leaves a part out or breaks it:
 * "rows" (no rows), "row" (a row that is no map), "index" (a row's end
 * out of range), "" (none). */
static void v6_dump(ei_x_buff *x, const char *what)
{
    ei_x_new_with_version(x);
    ei_x_encode_map_header(x, strcmp(what, "rows") ? 21 : 20);
    ei_x_encode_atom(x, "format");
    ei_x_encode_atom(x, "msgflow_dump");
    ei_x_encode_atom(x, "version");
    ei_x_encode_long(x, 6);
    ei_x_encode_atom(x, "node");
    ei_x_encode_atom(x, "n@h");
    ei_x_encode_atom(x, "by");
    ei_x_encode_atom(x, "name");
    ei_x_encode_atom(x, "sort");
    ei_x_encode_atom(x, "rate");
    ei_x_encode_atom(x, "taken_at");
    ei_x_encode_long(x, 1000);
    ei_x_encode_atom(x, "started_at");
    ei_x_encode_atom(x, "undefined");
    ei_x_encode_atom(x, "running");
    ei_x_encode_atom(x, "true");
    ei_x_encode_atom(x, "window_ms");
    ei_x_encode_long(x, 1000);
    ei_x_encode_atom(x, "scale");
    ei_x_encode_long(x, 1);
    ei_x_encode_atom(x, "events");
    ei_x_encode_long(x, 9);
    ei_x_encode_atom(x, "dead_letters");
    ei_x_encode_long(x, 0);
    ei_x_encode_atom(x, "overflow");
    ei_x_encode_long(x, 0);
    ei_x_encode_atom(x, "pair_count");
    ei_x_encode_long(x, 1234);
    ei_x_encode_atom(x, "group_count");
    ei_x_encode_atom(x, "undefined");
    ei_x_encode_atom(x, "future_field"); /* a later version's: skipped */
    ei_x_encode_tuple_header(x, 2);
    ei_x_encode_atom(x, "any");
    ei_x_encode_long(x, 1);
    ei_x_encode_atom(x, "endpoints");
    ei_x_encode_list_header(x, 2);
    ei_x_encode_map_header(x, 7);
    ei_x_encode_atom(x, "endpoint");
    ei_x_encode_atom(x, "foo");
    ei_x_encode_atom(x, "text");
    put_bin(x, "foo");
    ei_x_encode_atom(x, "label");
    put_bin(x, "Foo");
    ei_x_encode_atom(x, "display");
    put_bin(x, "Foo foo");
    ei_x_encode_atom(x, "module");
    ei_x_encode_atom(x, "m");
    ei_x_encode_atom(x, "application");
    ei_x_encode_atom(x, "undefined");
    ei_x_encode_atom(x, "node");
    ei_x_encode_atom(x, "n@h");
    ei_x_encode_map_header(x, 3);
    ei_x_encode_atom(x, "endpoint");
    put_bin(x, "web_sink");
    ei_x_encode_atom(x, "text");
    put_bin(x, "web_sink");
    ei_x_encode_atom(x, "label");
    put_bin(x, "web_sink");
    ei_x_encode_empty_list(x);
    if (strcmp(what, "rows") != 0) {
        ei_x_encode_atom(x, "rows");
        ei_x_encode_list_header(x, 1);
        if (strcmp(what, "row") == 0) {
            ei_x_encode_tuple_header(x, 2);
            ei_x_encode_long(x, 0);
            ei_x_encode_long(x, 1);
        } else {
            ei_x_encode_map_header(x, 7);
            ei_x_encode_atom(x, "sender");
            ei_x_encode_long(x, 0);
            ei_x_encode_atom(x, "receiver");
            ei_x_encode_long(x, strcmp(what, "index") ? 1 : 2);
            ei_x_encode_atom(x, "messages");
            ei_x_encode_long(x, 9);
            ei_x_encode_atom(x, "window_messages");
            ei_x_encode_long(x, 3);
            ei_x_encode_atom(x, "rate");
            ei_x_encode_double(x, 2.5);
            ei_x_encode_atom(x, "peak_rate");
            ei_x_encode_double(x, 7.5);
            ei_x_encode_atom(x, "kinds");
            ei_x_encode_list_header(x, 2);
            const char *tags[] = {"get", "tick"};
            for (int i = 0; i < 2; i++) {
                ei_x_encode_map_header(x, 3);
                ei_x_encode_atom(x, "kind");
                ei_x_encode_atom(x, i ? "info" : "call");
                ei_x_encode_atom(x, "tag");
                ei_x_encode_atom(x, tags[i]);
                ei_x_encode_atom(x, "messages");
                ei_x_encode_long(x, i ? 3 : 6);
            }
            ei_x_encode_empty_list(x);
        }
        ei_x_encode_empty_list(x);
    }
    ei_x_encode_atom(x, "nodes");
    ei_x_encode_list_header(x, 1);
    ei_x_encode_map_header(x, 4);
    ei_x_encode_atom(x, "node");
    ei_x_encode_atom(x, "n@h");
    ei_x_encode_atom(x, "status");
    ei_x_encode_atom(x, "up");
    ei_x_encode_atom(x, "pairs");
    ei_x_encode_long(x, 1234);
    ei_x_encode_atom(x, "events");
    ei_x_encode_long(x, 9);
    ei_x_encode_empty_list(x);
    ei_x_encode_atom(x, "missing");
    ei_x_encode_list_header(x, 1);
    ei_x_encode_map_header(x, 2);
    ei_x_encode_atom(x, "node");
    ei_x_encode_atom(x, "m@h");
    ei_x_encode_atom(x, "reason");
    put_bin(x, "timeout");
    ei_x_encode_empty_list(x);
    ei_x_encode_atom(x, "calls");
    ei_x_encode_list_header(x, 1);
    ei_x_encode_map_header(x, 13);
    const char *texts[][2] = {{"caller", "<0.80.0>"}, {"caller_label", "web_client"},
                              {"server", "<0.81.0>"}, {"server_label", "kv"}};
    for (int i = 0; i < 4; i++) {
        ei_x_encode_atom(x, texts[i][0]);
        put_bin(x, texts[i][1]);
    }
    ei_x_encode_atom(x, "kind");
    ei_x_encode_atom(x, "call");
    ei_x_encode_atom(x, "tag");
    ei_x_encode_atom(x, "get");
    ei_x_encode_atom(x, "calls");
    ei_x_encode_long(x, 40);
    ei_x_encode_atom(x, "sampled");
    ei_x_encode_long(x, 39);
    ei_x_encode_atom(x, "unanswered");
    ei_x_encode_long(x, 1);
    const char *qs[] = {"p50_ns", "p90_ns", "p99_ns", "max_ns"};
    for (int i = 0; i < 4; i++) {
        ei_x_encode_atom(x, qs[i]);
        if (i == 3)
            ei_x_encode_atom(x, "undefined");
        else
            ei_x_encode_long(x, 1000 * (i + 1));
    }
    ei_x_encode_empty_list(x);
}

static void v6_dumps(void)
{
    ei_x_buff x;
    mf_dump d;
    char err[256];
    v6_dump(&x, "");
    CHECK(decode(x.buff, (size_t)x.index, &d, err) == 0, "version 6: %s", err);
    CHECK(d.version == 6 && !strcmp(d.by, "name") && !strcmp(d.sort, "rate") &&
              d.pair_count == 1234 && d.group_count == -1 && d.events == 9,
          "version 6: figures");
    CHECK(d.n_endpoints == 2 && d.endpoints[0].type == MF_EP_ATOM &&
              !strcmp(d.endpoints[0].display, "Foo foo") && !strcmp(d.endpoints[0].module, "m") &&
              d.endpoints[0].application == NULL && d.endpoints[1].type == MF_EP_KEY &&
              !strcmp(d.endpoints[1].text, "web_sink") && !strcmp(d.endpoints[1].node, "n@h"),
          "version 6: endpoints");
    CHECK(d.n_pairs == 1 && d.pairs[0].messages == 9 && d.pairs[0].window_messages == 3 &&
              d.pairs[0].rate == 2.5 && d.pairs[0].peak == 7.5 && d.pairs[0].n_kinds == 2 &&
              mf_dump_rate(&d, &d.pairs[0]) == 2.5,
          "version 6: the row");
    CHECK(d.n_nodes == 1 && d.nodes[0].pairs == 1234 && d.n_missing == 1 &&
              !strcmp(d.missing[0], "m@h (timeout)"),
          "version 6: nodes and missing");
    CHECK(d.n_calls == 1 && !strcmp(d.calls[0].server_label, "kv") && d.calls[0].calls == 40 &&
              d.calls[0].p99_ns == 3000 && d.calls[0].max_ns == -1,
          "version 6: calls");
    mf_row *rows;
    size_t n;
    CHECK(mf_rows_given(&d, &rows, &n) == 0 && n == 1 && !strcmp(rows[0].sender, "foo") &&
              !strcmp(rows[0].sender_label, "Foo") && rows[0].sender_shared == 1 &&
              rows[0].receiver_shared == -1 && rows[0].peak == 7.5 && rows[0].n_kinds == 2 &&
              !strcmp(d.kind_names[rows[0].kinds[0].name].tag, "get") &&
              rows[0].kinds[0].messages == 6 &&
              !strcmp(d.kind_names[rows[0].kinds[1].name].tag, "tick") &&
              rows[0].kinds[1].messages == 3,
          "version 6: the rows as given");
    /* the table msgflow-top prints of them */
    char *out = NULL;
    size_t outlen = 0;
    FILE *mem = open_memstream(&out, &outlen);
    mf_top_layout lay = {.by = MF_BY_NAME, .width = 80, .first = 0, .top = 10, .selected = -1,
                         .peaks = 0, .ellipsis = "~", .total = mf_given_total(&d)};
    mf_print_top(mem, &d, rows, n, &lay);
    fclose(mem);
    CHECK(out && strstr(out, "9 messages, 1 groups") && strstr(out, "not in it: m@h (timeout)") &&
              strstr(out, "\n  1 Foo ") && strstr(out, " web_sink ") &&
              strstr(out, "  9     2.5   call get 67%"),
          "version 6: the table printed:\n%s", out ? out : "");
    free(out);
    mf_rows_free(rows);
    mf_dump_free(&d);
    ei_x_free(&x);
    v6_dump(&x, "rows");
    expect_refused("version 6 without rows", &x, "without `rows'");
    ei_x_free(&x);
    v6_dump(&x, "row");
    expect_refused("version 6 with a row that is no map", &x, "rows: entry 0 is not a map");
    ei_x_free(&x);
    v6_dump(&x, "index");
    expect_refused("version 6 with an end out of range", &x, "out of range");
    ei_x_free(&x);
    printf("ok version 6\n");
}

static void bad_inputs(void)
{
    ei_x_buff x;
    mf_dump d;
    char err[256];
    small_opts o;

    small_dump(&x, small_default);
    CHECK(decode(x.buff, (size_t)x.index, &d, err) == 0, "small dump: %s", err);
    CHECK(d.n_pairs == 1 && d.pairs[0].messages == 18446744073709551615ULL,
          "small dump: 2^64-1 messages not kept");
    CHECK(d.n_endpoints == 1 && !strcmp(d.endpoints[0].text, "foo") &&
              d.endpoints[0].module == NULL, "small dump: endpoint");
    CHECK(d.n_nodes == 2 && !strcmp(d.nodes[1].name, "m@h") && !strcmp(d.nodes[1].status, "down") &&
              d.nodes[1].pairs == 4 && d.nodes[1].events == 11,
          "small dump: nodes");
    CHECK(d.n_calls == 1 && strcmp(d.calls[0].server_label, "kv") == 0 &&
              d.calls[0].calls == 171812 && d.calls[0].sampled == 2684 &&
              d.calls[0].unanswered == 1 && d.calls[0].p50_ns == 38000 &&
              d.calls[0].p99_ns == 2100000 && d.calls[0].max_ns == -1,
          "small dump: a call edge");
    mf_dump_free(&d);
    /* garbage after the term */
    ei_x_append_buf(&x, "zz", 2);
    expect_refused("trailing bytes", &x, "garbage");
    ei_x_free(&x);

    /* a group of exited endpoints */
    o = small_default;
    o.group = 1;
    small_dump(&x, o);
    CHECK(decode(x.buff, (size_t)x.index, &d, err) == 0, "group dump: %s", err);
    CHECK(d.n_endpoints == 1 && d.endpoints[0].type == MF_EP_EXITED &&
              !strcmp(d.endpoints[0].text, "exited#7") && !strcmp(d.endpoints[0].node, "n@h"),
          "group dump: endpoint");
    mf_dump_free(&d);
    ei_x_free(&x);
    /* the nodes: required; each a map */
    o = small_default;
    o.nodes = 0;
    small_dump(&x, o);
    expect_refused("without nodes", &x, "without `nodes'");
    ei_x_free(&x);
    o.nodes = -1;
    small_dump(&x, o);
    expect_refused("a bad node entry", &x, "nodes: entry 0");
    ei_x_free(&x);
    /* each row's kinds, names kept once */
    o = small_default;
    o.rows = 2;
    small_dump(&x, o);
    CHECK(decode(x.buff, (size_t)x.index, &d, err) == 0, "kinds dump: %s", err);
    CHECK(d.n_pairs == 2 && d.n_pair_kinds == 4 && d.n_kind_names == 2 &&
              d.pairs[1].first_kind == 2 && d.pairs[1].n_kinds == 2 &&
              !strcmp(d.kind_names[d.pair_kinds[3].name].tag, "tick") &&
              d.pair_kinds[2].messages == 18446744073709551614ULL,
          "kinds dump: kinds");
    {
        mf_row *rows;
        size_t n;
        CHECK(mf_group(&d, MF_BY_KIND, &rows, &n) == 0 && n == 2 &&
                  !strcmp(rows[0].sender, "call") && !strcmp(rows[0].receiver, "get") &&
                  rows[0].messages == UINT64_MAX && rows[1].messages == 2,
              "kinds dump: by kind (saturating)");
        mf_rows_free(rows);
    }
    mf_dump_free(&d);
    ei_x_free(&x);
    o = small_default;
    o.kinds = 3;
    small_dump(&x, o);
    CHECK(decode(x.buff, (size_t)x.index, &d, err) == 0 && d.n_kind_names == 3,
          "three kinds: %s", err);
    mf_dump_free(&d);
    ei_x_free(&x);
    /* the call edges: required; each a map */
    o = small_default;
    o.calls = -1;
    small_dump(&x, o);
    expect_refused("without calls", &x, "without `calls'");
    ei_x_free(&x);
    o.calls = -2;
    small_dump(&x, o);
    expect_refused("a bad call edge", &x, "calls: entry 0 is not");
    ei_x_free(&x);
    /* versions: 7 is not known; 1 to 5, msgflow 0.1's, are refused with
     * how to export the run again */
    o = small_default;
    o.version = 7;
    small_dump(&x, o);
    expect_refused("version 7", &x, "version 7 is not known");
    ei_x_free(&x);
    for (long v = 1; v <= 5; v++) {
        char what[32], needle[64];
        o.version = v;
        small_dump(&x, o);
        snprintf(what, sizeof(what), "version %ld", v);
        snprintf(needle, sizeof(needle), "version %ld is from msgflow 0.1", v);
        expect_refused(what, &x, needle);
        expect_refused(what, &x, "msgflow:export(Path, etf)");
        ei_x_free(&x);
    }
    v6_dumps();
    o = small_default;
    o.big_count = 1;
    small_dump(&x, o);
    expect_refused("count 2^64", &x, "below 2^64");
    ei_x_free(&x);

    ei_x_new_with_version(&x);
    ei_x_encode_tuple_header(&x, 1);
    ei_x_encode_atom(&x, "foo");
    expect_refused("a tuple", &x, "not a map");
    ei_x_free(&x);

    ei_x_new_with_version(&x);
    ei_x_encode_map_header(&x, 1);
    ei_x_encode_atom(&x, "format");
    ei_x_encode_atom(&x, "something_else");
    expect_refused("another map", &x, "not a msgflow dump");
    ei_x_free(&x);

    const char text[] = "sender,receiver\n";
    CHECK(decode(text, sizeof(text) - 1, &d, err) != 0 && strstr(err, "not an Erlang"),
          "text accepted or message \"%s\"", err);
    CHECK(decode(text, 0, &d, err) != 0, "empty input accepted");
    /* a binary claiming 4 GB inside a few bytes */
    const char liar[] = {(char)131, 109, (char)0xff, (char)0xff, (char)0xff, (char)0xf0, 1, 2};
    CHECK(decode(liar, sizeof(liar), &d, err) != 0 && strstr(err, "truncated"),
          "lying length: \"%s\"", err);
    /* deep nesting */
    char deep[200];
    deep[0] = (char)131;
    for (int i = 1; i < 199; i++)
        deep[i] = 104, deep[++i] = 1;
    deep[199] = 106;
    CHECK(decode(deep, sizeof(deep), &d, err) != 0, "deep nesting accepted");
    printf("ok bad inputs\n");
}

/* mf_label_cell cuts as msgflow_fmt:label_cell/4 does: the cells
 * msgflow_fmt_tests:label_cell_test_/0 checks, the same here. */
static void label_cells(void)
{
    static const struct {
        const char *label, *text;
        int width;
        const char *want;
    } cases[] = {
        {"xmpp_stream_in:init/1", "<0.181.0>", 40, "xmpp_stream_in:init/1 <0.181.0>"},
        {"xmpp_stream_in:init/1", "<0.181.0>", 30, "xmpp_stream_in:init/1 <181>"},
        {"xmpp_stream_in:init/1", "<0.181.0>", 24, "xmpp_stream_in~ <181>"},
        {"xmpp_stream_in:init/1", "<0.181.0>", 16, "xmpp_stre~ <181>"},
        {"xmpp_stream_in:init/1", "<0.181.0>", 12, "xmpp_stream~"},
        {"xmpp_stream_in:init/1", NULL, 20, "xmpp_stream_in~"},
        {"tcp_inet <- httpd_request_handler:init/1", "#Port<0.8>", 40,
         "tcp_inet <- httpd_request_handler~ <8>"},
        {"tcp_inet <- httpd_request_handler:init/1", "#Port<0.8>", 24, "tcp_inet <- httpd_r~ <8>"},
        {"ux_load:start/0 fun", NULL, 12, "ux_load~"},
        {"file_server_2", NULL, 20, "file_server_2"},
        {"My.Worker.init/1", NULL, 12, "My.Worker~"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&out, &len);
        mf_label_cell(mem, cases[i].label, cases[i].text, cases[i].width, "~");
        fclose(mem);
        size_t want = strlen(cases[i].want);
        int ok = out && len == (size_t)cases[i].width && !strncmp(out, cases[i].want, want);
        for (size_t j = want; ok && j < len; j++)
            ok = out[j] == ' ';
        CHECK(ok, "label cell %zu: \"%s\" in %d columns: \"%s\", not \"%s\"", i, cases[i].label,
              cases[i].width, out ? out : "", cases[i].want);
        free(out);
    }
}

/* mf_visible against the cases msgflow_fmt:visible/1 is checked against
 * (test/data/visible.tsv: input as hex bytes, a tab, the visible text). */
static void visible_cases(void)
{
    FILE *f = fopen(MF_TEST_DATA "/visible.tsv", "r");
    CHECK(f != NULL, "cannot read %s", MF_TEST_DATA "/visible.tsv");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof(line), f)) {
        if (line[0] == '#')
            continue;
        line[strcspn(line, "\n")] = 0;
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab = 0;
        char in[2048];
        size_t len = 0;
        for (const char *h = line; h[0] && h[1]; h += 2) {
            unsigned v;
            sscanf(h, "%2x", &v);
            in[len++] = (char)v;
        }
        char *got = mf_visible(in, len);
        CHECK(got && !strcmp(got, tab + 1), "visible case %d: \"%s\", not \"%s\"", n, got ? got : "",
              tab + 1);
        free(got);
        n++;
    }
    if (f)
        fclose(f);
    CHECK(n >= 10, "only %d visible cases", n);
}

int main(int argc, char **argv)
{
    visible_cases();
    label_cells();
    bad_inputs();
    crafted_dumps();
    if (argc > 1) {
        DIR *dh = opendir(argv[1]);
        CHECK(dh != NULL, "no dump directory %s (the Common Test suite writes it)", argv[1]);
        int seen = 0;
        struct dirent *de;
        while (dh && (de = readdir(dh)) != NULL) {
            size_t n = strlen(de->d_name);
            if (n > 4 && !strcmp(de->d_name + n - 4, ".etf")) {
                char name[1024];
                snprintf(name, sizeof(name), "%.*s", (int)(n - 4), de->d_name);
                check_dump_file(argv[1], name);
                seen++;
            }
        }
        if (dh)
            closedir(dh);
        CHECK(seen >= 3, "only %d dumps in %s", seen, argv[1]);
    }
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("all passed\n");
    return 0;
}
