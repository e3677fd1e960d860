/*
 * msgflow-report FILE.etf [--top N] [--by G] [--csv OUT] [--dot OUT]
 *
 * Reads a dump written by msgflow:export(Path, etf), prints the top table
 * (the columns of msgflow:top/1) and optionally writes CSV or DOT, grouped
 * by process, name, module, application or node.  Exit 0 on success, 1 on
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
    "                      [--csv OUT] [--dot OUT]\n";

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
    return mf_write_csv(f, o->d, o->rows, o->n);
}

static int dot_fn(FILE *f, void *c)
{
    out_ctx *o = c;
    return mf_write_dot(f, o->d, o->rows, o->n, 200, o->by);
}

int main(int argc, char **argv)
{
    const char *file = NULL, *csv = NULL, *dot = NULL, *by_name = "process";
    long top = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--top") || !strcmp(a, "--by") || !strcmp(a, "--csv") ||
             !strcmp(a, "--dot")) && i + 1 >= argc) {
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
    if (mf_group(&d, by, &rows, &n) != 0) {
        fprintf(stderr, "msgflow-report: out of memory\n");
        mf_dump_free(&d);
        return 1;
    }
    setlocale(LC_CTYPE, "");
    const char *lc = setlocale(LC_CTYPE, NULL);
    const char *ellipsis = lc && (strstr(lc, "UTF-8") || strstr(lc, "utf8")) ? "\xe2\x80\xa6"
                                                                              : "~";
    mf_top_layout lay = {.by = by, .width = 80, .first = 0, .top = (size_t)top, .selected = -1,
                         .peaks = NULL, .ellipsis = ellipsis};
    mf_print_top(stdout, &d, rows, n, &lay);
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
