/*
 * msgflow-report FILE.etf [--top N] [--by G] [--sort S] [--csv OUT] [--dot OUT]
 * msgflow-report --diff BEFORE.etf AFTER.etf
 *
 * Reads a dump written by msgflow:export(Path, etf) (version 6; msgflow
 * 0.1's versions 1 to 5 are refused), prints the top table (the columns of
 * msgflow:top/1) and optionally writes CSV or DOT, grouped by process,
 * name, module, application, node or kind (a dump by process is grouped
 * here; one of rows grouped on the node is shown as it is), ranked by messages or, `--sort bytes',
 * by the bytes their messages copied (sampled sizes, with a BYTES column).
 * With --diff, what changed between two dumps, by label, as msgflow:diff/3
 * prints it (mf_print_diff).  Exit 0 on success, 1 on
 * bad input (with a message on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_dump.h"
#include "mf_file.h"
#include "mf_table.h"

static const char usage[] =
    "usage: msgflow-report FILE.etf [--top N] [--by process|name|module|application|node|kind]\n"
    "                      [--sort messages|bytes] [--csv OUT] [--dot OUT]\n"
    "       msgflow-report --diff BEFORE.etf AFTER.etf\n";

/* Writes with fn to path through a temporary file: all or nothing. */
static int write_file(const char *path, int (*fn)(FILE *, void *), void *ctx)
{
    size_t len = strlen(path);
    char *tmp = malloc(len + 5);
    if (!tmp)
        return -1;
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (f) {
        rc = fn(f, ctx);
        if (fclose(f) != 0)
            rc = -1;
        if (rc == 0 && rename(tmp, path) != 0)
            rc = -1;
        if (rc != 0)
            remove(tmp);
    }
    free(tmp);
    return rc;
}

typedef struct {
    const mf_dump *d;
    const mf_row *rows;
    size_t n;
    const char *by;
} out_ctx;

static int csv_fn(FILE *f, void *c)
{
    out_ctx *o = c;
    mf_by by;
    return mf_by_parse(o->by, &by) == 0 ? mf_write_csv(f, o->d, o->rows, o->n, by) : -1;
}

static int dot_fn(FILE *f, void *c)
{
    out_ctx *o = c;
    return mf_write_dot(f, o->d, o->rows, o->n, 200, o->by);
}

/* A duration in ns as a person reads it: 38us, 2.1ms, 1.20s; - for none. */
static void duration(char *out, size_t len, long long ns)
{
    if (ns < 0)
        snprintf(out, len, "-");
    else if (ns < 10000)
        snprintf(out, len, "%.1fus", (double)ns / 1e3);
    else if (ns < 1000000)
        snprintf(out, len, "%lldus", (ns + 500) / 1000);
    else if (ns < 10000000)
        snprintf(out, len, "%.2fms", (double)ns / 1e6);
    else if (ns < 1000000000)
        snprintf(out, len, "%.1fms", (double)ns / 1e6);
    else
        snprintf(out, len, "%.2fs", (double)ns / 1e9);
}

/* The dump's call edges, as msgflow:calls/0 prints them: the
 * first `top', busiest total wait first (the dump's order). */
static void print_calls(FILE *f, const mf_dump *d, size_t top)
{
    if (d->n_calls == 0)
        return;
    fprintf(f, "\ncall edges: %zu, round trips of sampled calls (request sent to reply sent)\n",
            d->n_calls);
    fprintf(f, "%-22s %-22s %-14s %9s %7s %7s %7s %7s %6s\n", "CALLER", "SERVER", "CALL", "CALLS",
            "SAMPLED", "P50", "P99", "MAX", "UNANS");
    for (size_t i = 0; i < d->n_calls && i < top; i++) {
        const mf_call *c = &d->calls[i];
        char call[64], calls[24], p50[16], p99[16], max[16];
        snprintf(call, sizeof(call), "%s %s", c->kind, c->tag);
        if (c->calls < 0)
            snprintf(calls, sizeof(calls), "?");
        else
            snprintf(calls, sizeof(calls), "%lld", c->calls);
        duration(p50, sizeof(p50), c->p50_ns);
        duration(p99, sizeof(p99), c->p99_ns);
        duration(max, sizeof(max), c->max_ns);
        fprintf(f, "%-22.22s %-22.22s %-14.14s %9s %7llu %7s %7s %7s %6llu\n", c->caller_label,
                c->server_label, call, calls, (unsigned long long)c->sampled, p50, p99, max,
                (unsigned long long)c->unanswered);
    }
}

/* Reads and decodes the dump at path into *d, its rows grouped by name
 * into *rows.  0, or 1 with a message on stderr. */
static int read_grouped(const char *path, mf_dump *d, mf_row **rows, size_t *n)
{
    size_t len;
    char err[256];
    char *buf = mf_read_file(path, &len);
    if (!buf) {
        fprintf(stderr, "msgflow-report: %s: %s\n", path, strerror(errno));
        return 1;
    }
    int bad = mf_dump_decode(buf, len, d, err, sizeof(err)) != 0;
    free(buf);
    if (bad) {
        fprintf(stderr, "msgflow-report: %s: %s\n", path, err);
        return 1;
    }
    mf_by by;
    if (mf_by_parse("name", &by) != 0 || mf_group(d, by, rows, n) != 0) {
        fprintf(stderr, "msgflow-report: out of memory\n");
        mf_dump_free(d);
        return 1;
    }
    return 0;
}

/* --diff BEFORE AFTER: the diff of two dumps. */
static int diff_main(const char *before, const char *after)
{
    mf_dump db, da;
    mf_row *rb, *ra;
    size_t nb, na;
    if (read_grouped(before, &db, &rb, &nb) != 0)
        return 1;
    if (read_grouped(after, &da, &ra, &na) != 0) {
        mf_rows_free(rb);
        mf_dump_free(&db);
        return 1;
    }
    int rc = mf_print_diff(stdout, &db, rb, nb, &da, ra, na, 80) != 0;
    if (rc)
        fprintf(stderr, "msgflow-report: out of memory or a write error\n");
    mf_rows_free(rb);
    mf_rows_free(ra);
    mf_dump_free(&db);
    mf_dump_free(&da);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--diff")) {
        if (argc != 4) {
            fprintf(stderr, "msgflow-report: --diff needs two dumps\n%s", usage);
            return 2;
        }
        return diff_main(argv[2], argv[3]);
    }
    const char *file = NULL, *csv = NULL, *dot = NULL, *by_name = "process";
    int by_given = 0, sort_bytes = 0;
    long top = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--top") || !strcmp(a, "--by") || !strcmp(a, "--csv") ||
             !strcmp(a, "--dot") || !strcmp(a, "--sort")) && i + 1 >= argc) {
            fprintf(stderr, "msgflow-report: %s needs a value\n%s", a, usage);
            return 2;
        }
        if (!strcmp(a, "--top")) {
            char *end;
            top = strtol(argv[++i], &end, 10);
            if (*end || top < 1) {
                fprintf(stderr, "msgflow-report: --top %s: not a positive integer\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--by")) {
            by_name = argv[++i];
            by_given = 1;
        } else if (!strcmp(a, "--sort")) {
            const char *v = argv[++i];
            if (strcmp(v, "messages") != 0 && strcmp(v, "bytes") != 0) {
                fprintf(stderr, "msgflow-report: --sort %s: not messages or bytes\n", v);
                return 2;
            }
            sort_bytes = strcmp(v, "bytes") == 0;
        } else if (!strcmp(a, "--csv")) {
            csv = argv[++i];
        } else if (!strcmp(a, "--dot")) {
            dot = argv[++i];
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "msgflow-report: unknown option %s\n%s", a, usage);
            return 2;
        } else if (!file) {
            file = a;
        } else {
            fprintf(stderr, "msgflow-report: one dump at a time (%s and %s)\n", file, a);
            return 2;
        }
    }
    mf_by by;
    if (!file) {
        fputs(usage, stderr);
        return 2;
    }
    if (mf_by_parse(by_name, &by) != 0) {
        fprintf(stderr, "msgflow-report: --by %s: not process, name, module, application, "
                        "node or kind\n", by_name);
        return 2;
    }
    size_t len;
    char *buf = mf_read_file(file, &len);
    if (!buf) {
        fprintf(stderr, "msgflow-report: %s: %s\n", file, strerror(errno));
        return 1;
    }
    mf_dump d;
    char err[256];
    if (mf_dump_decode(buf, len, &d, err, sizeof(err)) != 0) {
        fprintf(stderr, "msgflow-report: %s: %s\n", file, err);
        free(buf);
        return 1;
    }
    free(buf);
    mf_row *rows;
    size_t n;
    /* a dump by process is grouped here; a dump of rows grouped on the node
     * (msgflow-top's) is shown as it is */
    int given = strcmp(d.by, "process") != 0;
    if (given && by_given && strcmp(by_name, d.by) != 0) {
        fprintf(stderr, "msgflow-report: %s: its rows are grouped by %s on the node (--by %s)\n",
                file, d.by, d.by);
        mf_dump_free(&d);
        return 1;
    }
    if (given) {
        by_name = d.by;
        if (mf_by_parse(by_name, &by) != 0) {
            fprintf(stderr, "msgflow-report: %s: its rows are grouped by %s, which this reader "
                            "does not know\n", file, d.by);
            mf_dump_free(&d);
            return 1;
        }
    }
    if ((given ? mf_rows_given(&d, &rows, &n) : mf_group(&d, by, &rows, &n)) != 0) {
        fprintf(stderr, "msgflow-report: out of memory\n");
        mf_dump_free(&d);
        return 1;
    }
    setlocale(LC_CTYPE, "");
    const char *lc = setlocale(LC_CTYPE, NULL);
    const char *ellipsis = lc && (strstr(lc, "UTF-8") || strstr(lc, "utf8")) ? "\xe2\x80\xa6"
                                                                              : "~";
    if (sort_bytes)
        mf_rows_by_bytes(rows, n);
    mf_top_layout lay = {.by = by, .width = 80, .first = 0, .top = (size_t)top, .selected = -1,
                         .peaks = 0, .bytes = sort_bytes, .ellipsis = ellipsis, .total = -1,
                         .overflow = (size_t)top};
    mf_print_top(stdout, &d, rows, n, &lay);
    print_calls(stdout, &d, (size_t)top);
    int rc = 0;
    out_ctx o = {&d, rows, n, by_name};
    if (csv && write_file(csv, csv_fn, &o) != 0) {
        fprintf(stderr, "msgflow-report: cannot write %s: %s\n", csv, strerror(errno));
        rc = 1;
    }
    if (dot && write_file(dot, dot_fn, &o) != 0) {
        fprintf(stderr, "msgflow-report: cannot write %s: %s\n", dot, strerror(errno));
        rc = 1;
    }
    mf_rows_free(rows);
    mf_dump_free(&d);
    return rc;
}
