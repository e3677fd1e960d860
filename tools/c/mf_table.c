/*
 * mf_table.c -- see mf_table.h.
 */
#include "mf_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>

/* A DOT edge's pen width, in hundredths: 1 + 7 ln(1 + c) / ln(1 + max),
 * rounded half away from zero, computed as msgflow_report:dot/2 does
 * (the same operations in the same order, so the same double). */
static long pen_hundredths(uint64_t c, uint64_t max)
{
    return lround(100.0 * (1.0 + 7.0 * log((double)(c + 1)) / log((double)(max + 1))));
}

int mf_by_parse(const char *s, mf_by *by)
{
    static const char *const names[] = {"process", "name", "module", "application", "node",
                                        "kind"};
    for (int i = 0; i < 6; i++)
        if (strcmp(s, names[i]) == 0) {
            *by = (mf_by)i;
            return 0;
        }
    return -1;
}

static const char *key_of(const mf_endpoint *e, mf_by by, const char **label)
{
    const char *k;
    switch (by) {
    case MF_BY_PROCESS:
        *label = e->label;
        return e->text;
    case MF_BY_NAME:
        k = e->label;
        break;
    case MF_BY_MODULE:
        k = e->module ? e->module : "undefined";
        break;
    case MF_BY_APPLICATION:
        k = e->application ? e->application : "undefined";
        break;
    default:
        k = e->node;
        break;
    }
    *label = k;
    return k;
}

typedef struct {
    const char *key[2]; /* the uthash key: two string pointers */
    size_t row;
    UT_hash_handle hh;
} group;

/* Group keys are strings inside the dump; equal strings may sit at
 * different addresses, so hash and compare their contents. */
static unsigned str_hash2(const char *const *k)
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 2; i++) {
        for (const unsigned char *p = (const unsigned char *)k[i]; *p; p++)
            h = (h ^ *p) * 16777619u;
        h = (h ^ 0xff) * 16777619u;
    }
    return h;
}

#undef HASH_FUNCTION
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = str_hash2((const char *const *)(keyptr)))
#undef HASH_KEYCMP
#define HASH_KEYCMP(a, b, n)                                                             \
    (strcmp(((const char *const *)(a))[0], ((const char *const *)(b))[0]) ||             \
     strcmp(((const char *const *)(a))[1], ((const char *const *)(b))[1]))

/* Where an endpoint's term comes in Erlang's term order: atoms
 * (registered names), references (aliases), ports, pids, tuples ({Name,
 * Node} before the 3-tuple {exited, LabelId, Node}), binaries (a group's
 * key). */
static int type_rank(mf_ep_type t)
{
    switch (t) {
    case MF_EP_ATOM: return 1;
    case MF_EP_REF: return 3;
    case MF_EP_PORT: return 5;
    case MF_EP_PID: return 6;
    case MF_EP_NAME_NODE: return 7;
    case MF_EP_EXITED: return 8;
    default: return 11;
    }
}

/* Two endpoints in Erlang's term order, as msgflow_rows ranks rows of
 * equal messages by their key: by type (type_rank), pids by node, serial
 * and number (<_.Number.Serial>), ports by number, the rest by text. */
static int end_order(const mf_endpoint *a, const mf_endpoint *b)
{
    int ra = type_rank(a->type), rb = type_rank(b->type);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    unsigned long an = 0, as = 0, bn = 0, bs = 0;
    if (a->type == MF_EP_PID && sscanf(a->text, "<%*u.%lu.%lu>", &an, &as) == 2 &&
        sscanf(b->text, "<%*u.%lu.%lu>", &bn, &bs) == 2) {
        int c = strcmp(a->node, b->node);
        if (c)
            return c;
        return as != bs ? (as < bs ? -1 : 1) : an != bn ? (an < bn ? -1 : 1) : 0;
    }
    if (a->type == MF_EP_PORT && sscanf(a->text, "#Port<%*u.%lu>", &an) == 1 &&
        sscanf(b->text, "#Port<%*u.%lu>", &bn) == 1 && an != bn)
        return an < bn ? -1 : 1;
    return strcmp(a->text, b->text);
}

/* Rows busiest first; rows of equal messages by their key as msgflow_rows
 * ranks them: the sender's, then the receiver's, in Erlang's term order
 * (a group's key is a label, module, application, node or kind: its text
 * in byte order, as Erlang orders binaries and atoms). */
static int by_messages_desc(const void *a, const void *b)
{
    const mf_row *x = a, *y = b;
    if (x->messages != y->messages)
        return x->messages < y->messages ? 1 : -1;
    int c = x->sender_end && y->sender_end ? end_order(x->sender_end, y->sender_end)
                                           : strcmp(x->sender, y->sender);
    if (c)
        return c;
    return x->receiver_end && y->receiver_end ? end_order(x->receiver_end, y->receiver_end)
                                              : strcmp(x->receiver, y->receiver);
}

/* One kind of one row while rows' kinds are summed. */
typedef struct {
    size_t row;
    uint32_t name;
    uint64_t messages;
} row_kind_acc;

static int by_row_name(const void *a, const void *b)
{
    const row_kind_acc *x = a, *y = b;
    if (x->row != y->row)
        return x->row < y->row ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* Most messages first; equal counts by kind, then tag (msgflow_row's
 * order), through the names' ranks. */
static int kind_most_first(const void *a, const void *b)
{
    const mf_row_kind *x = a, *y = b;
    if (x->messages != y->messages)
        return x->messages < y->messages ? 1 : -1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int name_order(const void *a, const void *b)
{
    const mf_kind_name *x = *(const mf_kind_name *const *)a, *y = *(const mf_kind_name *const *)b;
    int c = strcmp(x->kind, y->kind);
    return c ? c : strcmp(x->tag, y->tag);
}

/* rank[i]: the place of kind name i in (kind, tag) order.  NULL when out
 * of memory (or there are no names). */
static uint32_t *name_ranks(const mf_dump *d)
{
    if (d->n_kind_names == 0)
        return NULL;
    const mf_kind_name **by = malloc(d->n_kind_names * sizeof(*by));
    uint32_t *rank = malloc(d->n_kind_names * sizeof(*rank));
    if (!by || !rank) {
        free(by);
        free(rank);
        return NULL;
    }
    for (size_t i = 0; i < d->n_kind_names; i++)
        by[i] = &d->kind_names[i];
    qsort(by, d->n_kind_names, sizeof(*by), name_order);
    for (size_t i = 0; i < d->n_kind_names; i++)
        rank[by[i] - d->kind_names] = (uint32_t)i;
    free(by);
    return rank;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    /* saturating: a crafted dump's counts near 2^64 must not wrap into a
     * small number */
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The row of (key0, key1), added (with labels sl, rl) when new: groups[*n]
 * is written only then (the caller sized groups for the rows it can
 * make, and a lookup of a row already made may come past the last). */
static size_t row_of(mf_row *rows, group *groups, group **table, size_t *n, const char *k0,
                     const char *k1, const char *sl, const char *rl)
{
    group probe, *found;
    memset(&probe, 0, sizeof(probe));
    probe.key[0] = k0;
    probe.key[1] = k1;
    HASH_FIND(hh, *table, probe.key, sizeof(probe.key), found);
    if (found)
        return found->row;
    group *g = &groups[*n];
    g->key[0] = k0;
    g->key[1] = k1;
    rows[*n] = (mf_row){k0, k1, sl, rl, -1, -1, 0, 0.0, -1.0, NULL, 0, -1.0, -1.0, 0, NULL,
                        NULL};
    g->row = (*n)++;
    HASH_ADD(hh, *table, key, sizeof(g->key), g);
    return g->row;
}

/* The block mf_group() and mf_rows_given() allocate: a header, then the
 * rows; the kinds of all rows follow in a second allocation the header
 * points to (mf_rows_free frees both). */
typedef struct {
    mf_row_kind *kinds;
} rows_header;

/* Rows the header takes the room of. */
#define ROWS_HDR ((sizeof(rows_header) + sizeof(mf_row) - 1) / sizeof(mf_row))

/* Room for n rows (one more, so that n may be 0) after a header whose
 * kinds are none yet; the rows, or NULL when out of memory. */
static mf_row *rows_alloc(size_t n)
{
    mf_row *block = malloc((ROWS_HDR + n + 1) * sizeof(mf_row));
    if (!block)
        return NULL;
    ((rows_header *)block)->kinds = NULL;
    return block + ROWS_HDR;
}

static rows_header *rows_head(mf_row *rows)
{
    return (rows_header *)(rows - ROWS_HDR);
}

int mf_group(const mf_dump *d, mf_by by, mf_row **rows_out, size_t *n_out)
{
    /* by kind, a row per distinct kind at most; else per pair at most */
    size_t max_rows = by == MF_BY_KIND ? d->n_kind_names + 1 : d->n_pairs;
    mf_row *rows = rows_alloc(max_rows);
    group *groups = max_rows ? malloc(max_rows * sizeof(*groups)) : NULL;
    row_kind_acc *acc = d->n_pair_kinds ? malloc(d->n_pair_kinds * sizeof(*acc)) : NULL;
    group *table = NULL;
    size_t n = 0, n_acc = 0;
    if (!rows || (max_rows && !groups) || (d->n_pair_kinds && !acc)) {
        mf_rows_free(rows);
        free(groups);
        free(acc);
        return -1;
    }
    for (size_t i = 0; i < d->n_pairs; i++) {
        const mf_pair *p = &d->pairs[i];
        double rate = mf_dump_rate(d, p);
        if (by == MF_BY_KIND) {
            if (p->n_kinds == 0) {
                /* as msgflow_rows keys a row without kinds */
                size_t r = row_of(rows, groups, &table, &n, "none", "none", "none", "none");
                rows[r].messages = sat_add(rows[r].messages, p->messages);
                rows[r].rate += rate;
                continue;
            }
            for (uint32_t j = 0; j < p->n_kinds; j++) {
                const mf_pair_kind *k = &d->pair_kinds[p->first_kind + j];
                const mf_kind_name *kn = &d->kind_names[k->name];
                size_t r = row_of(rows, groups, &table, &n, kn->kind, kn->tag, kn->kind, kn->tag);
                rows[r].messages = sat_add(rows[r].messages, k->messages);
                if (p->messages)
                    rows[r].rate += rate * (double)k->messages / (double)p->messages;
                acc[n_acc++] = (row_kind_acc){r, k->name, k->messages};
            }
            continue;
        }
        const char *sl, *rl, *k0, *k1;
        k0 = key_of(&d->endpoints[p->sender], by, &sl);
        k1 = key_of(&d->endpoints[p->receiver], by, &rl);
        size_t r = row_of(rows, groups, &table, &n, k0, k1, sl, rl);
        if (by == MF_BY_PROCESS) {
            rows[r].sender_end = &d->endpoints[p->sender];
            rows[r].receiver_end = &d->endpoints[p->receiver];
        }
        rows[r].messages = sat_add(rows[r].messages, p->messages);
        rows[r].rate += rate;
        if (p->bytes >= 0) /* the bytes of its pairs that had sizes measured */
            rows[r].bytes = (rows[r].bytes < 0 ? 0 : rows[r].bytes) + p->bytes;
        for (uint32_t j = 0; j < p->n_kinds; j++) {
            const mf_pair_kind *k = &d->pair_kinds[p->first_kind + j];
            acc[n_acc++] = (row_kind_acc){r, k->name, k->messages};
        }
    }
    HASH_CLEAR(hh, table);
    free(groups);
    /* each row's kinds summed: sorted by (row, name), runs added up */
    mf_row_kind *kinds = n_acc ? malloc(n_acc * sizeof(*kinds)) : NULL;
    if (n_acc && !kinds) {
        free(acc);
        mf_rows_free(rows);
        return -1;
    }
    if (n_acc)
        qsort(acc, n_acc, sizeof(*acc), by_row_name);
    size_t nk = 0;
    for (size_t i = 0; i < n_acc; i++) {
        if (i > 0 && acc[i].row == acc[i - 1].row && acc[i].name == acc[i - 1].name) {
            kinds[nk - 1].messages = sat_add(kinds[nk - 1].messages, acc[i].messages);
            continue;
        }
        if (i == 0 || acc[i].row != acc[i - 1].row)
            rows[acc[i].row].kinds = &kinds[nk];
        kinds[nk++] = (mf_row_kind){acc[i].name, 0, acc[i].messages};
        rows[acc[i].row].n_kinds++;
    }
    free(acc);
    uint32_t *rank = name_ranks(d);
    if (n_acc && !rank) {
        free(kinds);
        mf_rows_free(rows);
        return -1;
    }
    for (size_t i = 0; i < nk; i++)
        kinds[i].rank = rank[kinds[i].name];
    free(rank);
    for (size_t r = 0; r < n; r++)
        if (rows[r].n_kinds > 1)
            qsort((void *)rows[r].kinds, rows[r].n_kinds, sizeof(mf_row_kind), kind_most_first);
    rows_head(rows)->kinds = kinds;
    if (n)
        qsort(rows, n, sizeof(*rows), by_messages_desc);
    *rows_out = rows;
    *n_out = n;
    return 0;
}

/* Labels that more than one endpoint of rows[0..n) has: a row shows the
 * endpoint's text beside such a label, as msgflow's views do. */
typedef struct {
    const char *key[2]; /* label, "" */
    const char *text;   /* the first endpoint seen with it */
    int shared;
    UT_hash_handle hh;
} label_use;

typedef struct {
    label_use *table;
    label_use *cells;
} label_index;

static void index_one(label_index *ix, size_t *used, const char *label, const char *text)
{
    label_use key = {{label, ""}, text, 0, {0}}, *found;
    HASH_FIND(hh, ix->table, key.key, sizeof(key.key), found);
    if (found) {
        if (strcmp(found->text, text) != 0)
            found->shared = 1;
        return;
    }
    label_use *c = &ix->cells[(*used)++];
    *c = key;
    HASH_ADD(hh, ix->table, key, sizeof(c->key), c);
}

/* 0, or -1 when out of memory.  Only grouping by process has labels that
 * differ from their keys; for groups the index stays empty. */
static int index_labels(label_index *ix, const mf_row *rows, size_t n, int by_process)
{
    size_t used = 0;
    ix->table = NULL;
    ix->cells = NULL;
    if (!by_process || n == 0)
        return 0;
    if (!(ix->cells = malloc(2 * n * sizeof(*ix->cells))))
        return -1;
    for (size_t i = 0; i < n; i++) {
        index_one(ix, &used, rows[i].sender_label, rows[i].sender);
        index_one(ix, &used, rows[i].receiver_label, rows[i].receiver);
    }
    return 0;
}

static int label_shared(const label_index *ix, const char *label)
{
    label_use *found;
    const char *key[2] = {label, ""};
    if (!ix->table)
        return 0;
    HASH_FIND(hh, ix->table, key, sizeof(key), found);
    return found && found->shared;
}

static void index_free(label_index *ix)
{
    HASH_CLEAR(hh, ix->table);
    free(ix->cells);
}

int mf_rows_given(const mf_dump *d, mf_row **rows_out, size_t *n_out)
{
    mf_row *rows = rows_alloc(d->n_pairs);
    mf_row_kind *kinds = d->n_pair_kinds ? malloc(d->n_pair_kinds * sizeof(*kinds)) : NULL;
    uint32_t *rank = name_ranks(d);
    if (!rows || (d->n_pair_kinds && (!kinds || !rank))) {
        mf_rows_free(rows);
        free(kinds);
        free(rank);
        return -1;
    }
    rows_head(rows)->kinds = kinds;
    for (size_t i = 0; i < d->n_pairs; i++) {
        const mf_pair *p = &d->pairs[i];
        const mf_endpoint *s = &d->endpoints[p->sender], *r = &d->endpoints[p->receiver];
        rows[i] = (mf_row){s->text, r->text, s->label, r->label,
                           s->display ? strcmp(s->display, s->label) != 0 : -1,
                           r->display ? strcmp(r->display, r->label) != 0 : -1,
                           p->messages, mf_dump_rate(d, p), p->peak,
                           kinds ? kinds + p->first_kind : NULL, p->n_kinds, p->bytes,
                           p->wait_ms, p->growing, s, r};
        for (uint32_t j = 0; j < p->n_kinds; j++) {
            const mf_pair_kind *k = &d->pair_kinds[p->first_kind + j];
            kinds[p->first_kind + j] = (mf_row_kind){k->name, rank[k->name], k->messages};
        }
    }
    free(rank);
    *rows_out = rows;
    *n_out = d->n_pairs;
    return 0;
}

static int by_bytes_cmp(const void *a, const void *b)
{
    const mf_row *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->messages < y->messages ? 1 : x->messages > y->messages ? -1 : 0;
}

void mf_rows_by_bytes(mf_row *rows, size_t n)
{
    qsort(rows, n, sizeof(*rows), by_bytes_cmp);
}

void mf_rows_free(mf_row *rows)
{
    if (!rows)
        return;
    free(rows_head(rows)->kinds);
    free(rows_head(rows));
}

/* Bytes in at most 6 columns into buf (at least 32 bytes): 512, 9.8K,
 * 1.0M, 3.2G (powers of 1,024), as msgflow_fmt:bytes/1 writes them. */
const char *mf_bytes(double b, char *buf)
{
    if (b < 1024)
        sprintf(buf, "%.0f", b);
    else if (b < 1024.0 * 1024)
        sprintf(buf, "%.1fK", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        sprintf(buf, "%.1fM", b / (1024.0 * 1024));
    else
        sprintf(buf, "%.1fG", b / (1024.0 * 1024 * 1024));
    return buf;
}

const char *mf_int(uint64_t v, char *buf)
{
    char digits[24];
    int len = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
    return buf;
}

static const char *rate_text(double r, char *buf)
{
    uint64_t tenths = (uint64_t)(r * 10.0 + 0.5);
    char whole[32];
    sprintf(buf, "%s.%u", mf_int(tenths / 10, whole), (unsigned)(tenths % 10));
    return buf;
}

/* A rate in at most 7 columns, as msgflow:top/1 prints it: one decimal
 * below 100, whole numbers with separators up to 999,999, then 1.2M. */
static const char *short_rate(double r, char *buf)
{
    if (r < 99.95)
        return rate_text(r, buf);
    if (r < 999999.5)
        return mf_int((uint64_t)(r + 0.5), buf);
    sprintf(buf, "%.1fM", r / 1e6);
    return buf;
}

static size_t utf8_len(const char *s)
{
    size_t total = 0;
    for (const unsigned char *q = (const unsigned char *)s; *q; q++)
        total += (*q & 0xC0) != 0x80;
    return total;
}

/* Prints s left-aligned in exactly `width' columns (UTF-8 characters),
 * cut with the ellipsis (one column) when longer. */
static void cell(FILE *out, const char *s, int width, const char *ellipsis)
{
    int cols = 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t total = 0;
    for (const unsigned char *q = p; *q; q++)
        total += (*q & 0xC0) != 0x80;
    if ((int)total <= width) {
        fputs(s, out);
        for (int i = (int)total; i < width; i++)
            fputc(' ', out);
        return;
    }
    while (*p && cols < width - 1) {
        do
            fputc(*p++, out);
        while ((*p & 0xC0) == 0x80);
        cols++;
    }
    fputs(ellipsis, out);
}

/* The bytes of a label's name part (msgflow_fmt:label_cell/4): all of it
 * but a last `:f/1', `.f/1' or `:f/1 fun'; the whole label when it has
 * none. */
static size_t name_part(const char *label)
{
    size_t n = strlen(label), end = n;
    if (n > 4 && strcmp(label + n - 4, " fun") == 0)
        end = n - 4;
    size_t i = end;
    while (i > 0 && label[i - 1] >= '0' && label[i - 1] <= '9')
        i--;
    if (i == end || i == 0 || label[i - 1] != '/')
        return n;
    size_t slash = i - 1, j = slash;
    while (j > 0 && !strchr(":./ ", label[j - 1]))
        j--;
    /* a separator, a function name of one character at least, a name
     * part of one at least */
    if (j < 2 || j == slash || (label[j - 1] != ':' && label[j - 1] != '.'))
        return n;
    return j - 1;
}

/* The short form of a pid's or port's text, its second number's last
 * five digits: `<181>' for `<0.181.0>', `<8>' for `#Port<0.8>'; other
 * text as it is.  Returns buf (of 16 bytes) or text. */
static const char *short_text(const char *text, char *buf)
{
    const char *p = text, *run = NULL;
    size_t runlen = 0;
    for (int runs = 0; *p && runs < 2;) {
        if (*p >= '0' && *p <= '9') {
            run = p;
            while (*p >= '0' && *p <= '9')
                p++;
            runlen = (size_t)(p - run);
            runs++;
            if (runs < 2)
                run = NULL;
        } else {
            p++;
        }
    }
    if (!run)
        return text;
    if (runlen > 5) {
        run += runlen - 5;
        runlen = 5;
    }
    snprintf(buf, 16, "<%.*s>", (int)runlen, run);
    return buf;
}

/* A label, and `text' beside it (the pid or port of an endpoint whose
 * label others share; NULL for none), in exactly `width' columns, by the
 * rule of msgflow_fmt:label_cell/4: the first that fits of the label and
 * the text; the label and the text's number; the name part, the ellipsis
 * and the number; the name part cut at its end, with the number when nine
 * columns are left for the name, else alone.  (test/c/test_dump.c checks
 * the cells msgflow_fmt_tests checks.) */
void mf_label_cell(FILE *out, const char *label, const char *text, int width,
                   const char *ellipsis)
{
    char shortbuf[16], buf[1024], name[512];
    const char *sh = text ? short_text(text, shortbuf) : NULL;
    size_t np = name_part(label);
    snprintf(name, sizeof(name), "%.*s", (int)np, label);
    int l = (int)utf8_len(label), t = text ? (int)utf8_len(text) : 0,
        s = sh ? (int)utf8_len(sh) : 0, n = (int)utf8_len(name);
    if (l + (text ? 1 + t : 0) <= width)
        snprintf(buf, sizeof(buf), "%s%s%s", label, text ? " " : "", text ? text : "");
    else if (text && l + 1 + s <= width)
        snprintf(buf, sizeof(buf), "%s %s", label, sh);
    else if (label[np] && n + 1 + (sh ? 1 + s : 0) <= width)
        snprintf(buf, sizeof(buf), "%s%s%s%s", name, ellipsis, sh ? " " : "", sh ? sh : "");
    else if (sh && width - 1 - s >= 9) {
        cell(out, name, width - 1 - s, ellipsis);
        fprintf(out, " %s", sh);
        return;
    } else {
        cell(out, name, width, ellipsis);
        return;
    }
    cell(out, buf, width, ellipsis);
}

/* An endpoint's label in `width' columns (mf_label_cell); a shared label
 * (known, or found in the index) has the endpoint's text beside it. */
static void endpoint_cell(FILE *out, const label_index *ix, const char *label, const char *text,
                          int shared, int width, const char *ellipsis)
{
    mf_label_cell(out, label, (shared < 0 ? label_shared(ix, label) : shared) ? text : NULL, width,
                  ellipsis);
}

/* The top table's layout in `width' columns, as msgflow_top_view:text/3 lays
 * it out: a KIND column of 16 (18 from 120 columns), PEAK/S when peaks
 * are given, the ends sharing the rest; by kind, KIND and TAG columns of
 * 24 and no KIND column.  At 80 columns: the ends get 20 each. */
#define MF_TOP_KIND_W(width) ((width) >= 120 ? 18 : 16)
#define MF_TOP_KIND_END_W 24

static int top_end_w(int width, int by_kind, int peak, int bytes, int wait)
{
    if (by_kind)
        return MF_TOP_KIND_END_W;
    int fixed = 3 + 1 + 1 + 1 + 9 + 1 + 8 + (peak ? 8 : 0) + (bytes ? 7 : 0) + (wait ? 8 : 0) +
                MF_TOP_KIND_W(width) + 2;
    int w = (width - 1 - fixed) / 2;
    return w < 8 ? 8 : w;
}

/* A module or tag as msgflow_fmt:name/1 writes it: an Elixir alias
 * without its `Elixir.' prefix. */
static const char *elixir_name(const char *s)
{
    return strncmp(s, "Elixir.", 7) == 0 && s[7] ? s + 7 : s;
}

/* A row's main kind with its share in `width' columns, as
 * msgflow_fmt:main_kind/4 writes it: `call get 92%', the tag cut when
 * long, the kind and share never; `-' without kinds. */
static void main_kind_cell(FILE *out, const mf_dump *d, const mf_row *r, int width,
                           const char *ellipsis)
{
    if (r->n_kinds == 0) {
        cell(out, "-", width, ellipsis);
        return;
    }
    const mf_kind_name *kn = &d->kind_names[r->kinds[0].name];
    const char *tag = elixir_name(kn->tag);
    char share[16] = "", text[1024];
    if (r->messages > 0) {
        uint64_t pct = (uint64_t)(100.0 * (double)r->kinds[0].messages / (double)r->messages + 0.5);
        snprintf(share, sizeof(share), " %llu%%", (unsigned long long)(pct > 100 ? 100 : pct));
    }
    int room = width - (int)utf8_len(kn->kind) - 1 - (int)strlen(share);
    if (room < 2) {
        snprintf(text, sizeof(text), "%s%s", kn->kind, share);
    } else {
        int tl = (int)utf8_len(tag);
        size_t o = (size_t)snprintf(text, sizeof(text), "%s ", kn->kind);
        if (tl <= room) {
            o += (size_t)snprintf(text + o, sizeof(text) - o, "%s", tag);
        } else {
            /* the first room - 1 characters, then the ellipsis */
            const unsigned char *p = (const unsigned char *)tag;
            for (int cols = 0; *p && cols < room - 1 && o + 5 < sizeof(text); cols++)
                do
                    text[o++] = (char)*p++;
                while ((*p & 0xC0) == 0x80 && o + 1 < sizeof(text));
            o += (size_t)snprintf(text + o, sizeof(text) - o, "%s", ellipsis);
        }
        snprintf(text + o, sizeof(text) - o, "%s", share);
    }
    cell(out, text, width, ellipsis);
}

long long mf_given_total(const mf_dump *d)
{
    return d->by && strcmp(d->by, "process") == 0 ? d->pair_count : d->group_count;
}

static void print_overflow_top(FILE *out, const mf_dump *d, size_t max, int width,
                               const char *ellipsis);

void mf_print_top(FILE *out, const mf_dump *d, const mf_row *rows, size_t n,
                  const mf_top_layout *lay)
{
    char a[32], b[32], c[32];
    int width = lay->width < 40 ? 40 : lay->width, by_kind = lay->by == MF_BY_KIND;
    /* BYTES, as msgflow_top_view lays it out: from 120 columns, or sorted
     * by bytes, when a row has sampled sizes */
    int peak = lay->peaks != 0, bytes = 0;
    if (lay->bytes || width >= 120 || (d->sort && strcmp(d->sort, "bytes") == 0))
        for (size_t i = 0; i < n && !bytes; i++)
            bytes = rows[i].bytes >= 0;
    /* WAIT MS: the receiver's mailbox wait, on rows sorted by it */
    int wait = d->sort && strcmp(d->sort, "wait") == 0;
    int end_w = top_end_w(width, by_kind, peak, bytes, wait);
    int kind_w = MF_TOP_KIND_W(width);
    const char *ellipsis = lay->ellipsis;
    char state[96] = "";
    if (d->range_from >= 0) {
        /* a range of the history, in local time as msgflow prints it */
        char from[32], to[32];
        time_t f = (time_t)(d->range_from / 1000), t = (time_t)(d->range_to / 1000);
        struct tm tf, tt;
        strftime(from, sizeof(from), "%Y-%m-%d %H:%M:%S", localtime_r(&f, &tf));
        localtime_r(&t, &tt);
        int same_day = tf.tm_yday == tt.tm_yday && tf.tm_year == tt.tm_year;
        strftime(to, sizeof(to), same_day ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tt);
        snprintf(state, sizeof(state), "history %s to %s", from, to);
    }
    fprintf(out, "msgflow %s on %s: %s messages, %s %s; MSG/S over the last %s ms\n",
            state[0] ? state : d->running ? "running" : "stopped", d->node, mf_int(d->events, a),
            mf_int(lay->total >= 0 ? (uint64_t)lay->total : n, b),
            lay->by == MF_BY_PROCESS ? "pairs" : "groups", mf_int(d->window_ms, c));
    if (d->n_missing > 0) {
        fputs("not in it:", out);
        for (size_t i = 0; i < d->n_missing; i++)
            fprintf(out, "%s %s", i ? "," : "", d->missing[i]);
        fputc('\n', out);
    }
    if (d->scale > 1.0)
        fprintf(out, "sampled: rates are estimates (x%.1f)\n", d->scale);
    if (d->memory_full)
        fprintf(out, "max_memory reached: new pairs are counted in overflow (%s messages so far; "
                "%s)\n", mf_int(d->overflow, a),
                d->n_overflow_top && lay->overflow ? "the busiest below"
                : d->n_overflow_top && lay->overflow_at ? lay->overflow_at : "info()");
    if (d->n_nodes > 1) {
        /* a cluster-wide dump (version 3): each node and its status */
        fprintf(out, "%zu nodes:", d->n_nodes);
        for (size_t i = 0; i < d->n_nodes; i++)
            fprintf(out, " %s (%s, %s messages)", d->nodes[i].name, d->nodes[i].status,
                    mf_int(d->nodes[i].events, a));
        fputc('\n', out);
    }
    fprintf(out, "%3s ", "#");
    cell(out, by_kind ? "KIND" : "SENDER", end_w, ellipsis);
    fputc(' ', out);
    cell(out, by_kind ? "TAG" : "RECEIVER", end_w, ellipsis);
    fprintf(out, " %9s %7s ", "MESSAGES", "MSG/S");
    if (peak)
        fprintf(out, " %7s", "PEAK/S");
    if (bytes)
        fprintf(out, " %6s", "BYTES");
    if (wait)
        fprintf(out, " %7s", "WAIT MS");
    if (!by_kind) {
        fputs("  ", out);
        cell(out, "KIND", kind_w, ellipsis);
    }
    fputc('\n', out);
    size_t first = lay->first < n ? lay->first : n, end = first + lay->top < n ? first + lay->top : n;
    label_index ix;
    int by_process = n > 0 && rows[0].sender != rows[0].sender_label;
    if (index_labels(&ix, rows + first, end - first, by_process) != 0)
        ix.table = NULL;
    for (size_t i = first; i < end; i++) {
        int sel = lay->selected >= 0 && (size_t)lay->selected == i;
        if (sel)
            fputs("\x1b[7m", out);
        fprintf(out, "%3zu ", i + 1);
        if (by_kind) {
            cell(out, rows[i].sender, end_w, ellipsis);
            fputc(' ', out);
            cell(out, elixir_name(rows[i].receiver), end_w, ellipsis);
        } else {
            endpoint_cell(out, &ix, rows[i].sender_label, rows[i].sender, rows[i].sender_shared,
                          end_w, ellipsis);
            fputc(' ', out);
            endpoint_cell(out, &ix, rows[i].receiver_label, rows[i].receiver,
                          rows[i].receiver_shared, end_w, ellipsis);
        }
        /* the dump keeps one window: no trend */
        fprintf(out, " %9s %7s ", mf_int(rows[i].messages, a), short_rate(rows[i].rate, b));
        if (peak)
            fprintf(out, " %7s", short_rate(rows[i].peak < 0 ? rows[i].rate : rows[i].peak, c));
        if (bytes)
            fprintf(out, " %6s", rows[i].bytes < 0 ? "-" : mf_bytes(rows[i].bytes, c));
        if (wait) {
            if (rows[i].growing)
                fprintf(out, " %7s", "grew");
            else if (rows[i].wait_ms < 0)
                fprintf(out, " %7s", "-");
            else
                fprintf(out, " %7.1f", rows[i].wait_ms);
        }
        if (!by_kind) {
            fputs("  ", out);
            main_kind_cell(out, d, &rows[i], kind_w, ellipsis);
        }
        if (sel)
            fputs("\x1b[0m", out);
        fputc('\n', out);
    }
    index_free(&ix);
    print_overflow_top(out, d, lay->overflow, width, ellipsis);
}

int mf_top_head_lines(const mf_dump *d)
{
    return 1 + (d->n_missing > 0) + (d->scale > 1.0) + (d->memory_full != 0) + (d->n_nodes > 1);
}

/* Below the rows, past the bound: the busiest pairs among the messages in
 * overflow, at most `max' of them, their counts estimates with the most
 * each may be over (msgflow_top_view's overflow table). */
static void print_overflow_top(FILE *out, const mf_dump *d, size_t max, int width,
                               const char *ellipsis)
{
    size_t n = d->n_overflow_top < max ? d->n_overflow_top : max;
    if (n == 0)
        return;
    char a[32], b[32];
    int end_w = (width - 1 - (3 + 1 + 1 + 1 + 9 + 1 + 9)) / 2;
    if (end_w < 8)
        end_w = 8;
    fprintf(out, "\nbusiest in overflow (estimates: each has MESSAGES - ERROR to MESSAGES;\n"
                 "a pair not listed, at most %s):\n", mf_int(d->overflow_top_min, a));
    fprintf(out, "%3s ", "#");
    cell(out, "SENDER", end_w, ellipsis);
    fputc(' ', out);
    cell(out, "RECEIVER", end_w, ellipsis);
    fprintf(out, " %9s %9s\n", "MESSAGES", "ERROR");
    for (size_t i = 0; i < n; i++) {
        const mf_overflow_pair *o = &d->overflow_top[i];
        fprintf(out, "%3zu ", i + 1);
        cell(out, o->sender, end_w, ellipsis);
        fputc(' ', out);
        cell(out, o->receiver, end_w, ellipsis);
        fprintf(out, " %9s %9s\n", mf_int(o->messages, a), mf_int(o->error, b));
    }
}

/* [+-]digits[.digits][(e|E)[+-]digits], all of s. */
static int is_number(const char *s)
{
    const char *p = s + (*s == '+' || *s == '-');
    size_t n = strspn(p, "0123456789");
    if (!n)
        return 0;
    p += n;
    if (*p == '.') {
        if (!(n = strspn(++p, "0123456789")))
            return 0;
        p += n;
    }
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '+' || p[1] == '-');
        if (!(n = strspn(p, "0123456789")))
            return 0;
        p += n;
    }
    return !*p;
}

/* A field quoted when it must be; a text a spreadsheet would read as a
 * formula (it starts with =, +, -, @, a tab or a carriage return, and is
 * no number) gets a leading ' first, as msgflow_report's csv_field/1. */
static void csv_field(FILE *f, const char *s)
{
    if (s[0] && strchr("=+-@\t\r", s[0]) && !is_number(s))
        fputc('\'', f);
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A label, with the endpoint's text beside it when shared. */
static void label_field(FILE *f, const label_index *ix, const char *label, const char *text)
{
    if (!label_shared(ix, label)) {
        csv_field(f, label);
        return;
    }
    size_t ll = strlen(label), tl = strlen(text);
    char *both = malloc(ll + tl + 2);
    if (!both) {
        csv_field(f, label);
        return;
    }
    memcpy(both, label, ll);
    both[ll] = ' ';
    memcpy(both + ll + 1, text, tl + 1);
    csv_field(f, both);
    free(both);
}

/* A row's kinds in one CSV field, most first: `call:get=41 cast:add=30'. */
static void kinds_field(FILE *f, const mf_dump *d, const mf_row *r)
{
    size_t len = 1;
    for (size_t j = 0; j < r->n_kinds; j++) {
        const mf_kind_name *kn = &d->kind_names[r->kinds[j].name];
        len += strlen(kn->kind) + strlen(kn->tag) + 24;
    }
    char *text = malloc(len), *p = text;
    if (!text)
        return;
    *p = 0;
    for (size_t j = 0; j < r->n_kinds; j++) {
        const mf_kind_name *kn = &d->kind_names[r->kinds[j].name];
        p += sprintf(p, "%s%s:%s=%llu", j ? " " : "", elixir_name(kn->kind),
                     elixir_name(kn->tag), (unsigned long long)r->kinds[j].messages);
    }
    csv_field(f, text);
    free(text);
}

/* The row's call round trips (version 5 dumps, which have them by
 * process), as msgflow's CSV has them: `Tag:P50:P99' (µs, rounded) for
 * each tag of the row's call edges, by tag, matched by their ends' texts;
 * none by another grouping (the dump has no histograms to add up). */
static void calls_field(FILE *f, const mf_dump *d, const mf_row *r, mf_by by)
{
    const mf_call *found[64];
    size_t n = 0;
    if (by != MF_BY_PROCESS)
        return;
    for (size_t i = 0; i < d->n_calls && n < 64; i++) {
        const mf_call *c = &d->calls[i];
        if (c->p50_ns >= 0 && strcmp(c->caller, r->sender) == 0 &&
            strcmp(c->server, r->receiver) == 0)
            found[n++] = c;
    }
    /* by tag (few: an insertion sort) */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(found[j - 1]->tag, found[j]->tag) > 0; j--) {
            const mf_call *t = found[j];
            found[j] = found[j - 1];
            found[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%s:%lld:%lld", i ? " " : "", found[i]->tag, (found[i]->p50_ns + 500) / 1000,
                (found[i]->p99_ns + 500) / 1000);
}

int mf_write_csv(FILE *f, const mf_dump *d, const mf_row *rows, size_t n, mf_by by)
{
    label_index ix;
    if (index_labels(&ix, rows, n, n > 0 && rows[0].sender != rows[0].sender_label) != 0)
        return -1;
    fputs("sender,receiver,sender_label,receiver_label,messages,msg_per_s,kinds,call_rtt_us,bytes\n",
          f);
    for (size_t i = 0; i < n; i++) {
        csv_field(f, rows[i].sender);
        fputc(',', f);
        csv_field(f, rows[i].receiver);
        fputc(',', f);
        label_field(f, &ix, rows[i].sender_label, rows[i].sender);
        fputc(',', f);
        label_field(f, &ix, rows[i].receiver_label, rows[i].receiver);
        fputc(',', f);
        fprintf(f, "%llu,%.1f,", (unsigned long long)rows[i].messages, rows[i].rate);
        kinds_field(f, d, &rows[i]);
        fputc(',', f);
        calls_field(f, d, &rows[i], by);
        fputc(',', f);
        /* bytes copied since start, rounded; empty with no size measured */
        if (rows[i].bytes >= 0)
            fprintf(f, "%llu", (unsigned long long)(rows[i].bytes + 0.5));
        fputc('\n', f);
    }
    index_free(&ix);
    return ferror(f) ? -1 : 0;
}

static void dot_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('"', f);
}

int mf_write_dot(FILE *f, const mf_dump *d, const mf_row *rows, size_t n, size_t limit,
                 const char *by)
{
    if (n > limit)
        n = limit;
    uint64_t max = 1;
    for (size_t i = 0; i < n; i++)
        if (rows[i].messages > max)
            max = rows[i].messages;
    char a[32];
    fprintf(f, "digraph msgflow {\n  graph [rankdir=LR, fontname=\"Helvetica\", label=\"msgflow "
               "on %s, by %s: %s messages (top %zu edges)\"];\n",
            d->node, by, mf_int(d->events, a), n);
    fputs("  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n"
          "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#b03a2e\"];\n", f);
    /* nodes are named by the position of their first appearance */
    const char **names = n ? malloc(2 * n * sizeof(*names)) : NULL;
    const char **labels = n ? malloc(2 * n * sizeof(*labels)) : NULL;
    size_t nn = 0;
    if (n && (!names || !labels)) {
        free(names);
        free(labels);
        return -1;
    }
    size_t *ids = n ? malloc(2 * n * sizeof(*ids)) : NULL;
    if (n && !ids) {
        free(names);
        free(labels);
        return -1;
    }
    for (size_t i = 0; i < 2 * n; i++) {
        const char *k = i % 2 ? rows[i / 2].receiver : rows[i / 2].sender;
        /* an end's display label (its text beside a label others share) */
        const mf_endpoint *e = i % 2 ? rows[i / 2].receiver_end : rows[i / 2].sender_end;
        const char *l = e && e->display ? e->display
                        : i % 2         ? rows[i / 2].receiver_label
                                        : rows[i / 2].sender_label;
        size_t j;
        for (j = 0; j < nn && strcmp(names[j], k) != 0; j++)
            ;
        if (j == nn) {
            names[nn] = k;
            labels[nn] = l;
            fprintf(f, "  n%zu [label=", nn + 1);
            dot_string(f, l);
            fputs("];\n", f);
            nn++;
        }
        ids[i] = j + 1;
    }
    for (size_t i = 0; i < n; i++) {
        long w = pen_hundredths(rows[i].messages, max);
        /* 1 + 99 m / max in integers, as msgflow_report:dot/2 */
        unsigned long long weight =
            (unsigned long long)(1 + (unsigned __int128)99 * rows[i].messages / max);
        fprintf(f, "  n%zu -> n%zu [weight=%llu, penwidth=%ld.%02ld, label=\"%s\"];\n",
                ids[2 * i], ids[2 * i + 1], weight, w / 100, w % 100, mf_int(rows[i].messages, a));
    }
    fputs("}\n", f);
    free(names);
    free(labels);
    free(ids);
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------ diff */

/* One edge of a diff: its labels and each side's row (NULL: none). */
typedef struct {
    const char *s, *r;
    const mf_row *b, *a;
    double change, z;
} diff_edge;

static int ends_cmp(const char *s1, const char *r1, const char *s2, const char *r2)
{
    int c = strcmp(s1, s2);
    return c ? c : strcmp(r1, r2);
}

static int row_ends_cmp(const void *x, const void *y)
{
    const mf_row *const *a = x, *const *b = y;
    return ends_cmp((*a)->sender, (*a)->receiver, (*b)->sender, (*b)->receiver);
}

/* Most change first, then by ends (as msgflow_diff sorts them). */
static int change_cmp(const void *x, const void *y)
{
    const diff_edge *a = x, *b = y;
    if (a->change != b->change)
        return a->change < b->change ? 1 : -1;
    return ends_cmp(a->s, a->r, b->s, b->r);
}

/* What was traced of a recording, in seconds: start to stop, or to when
 * the dump was taken, a millisecond at least, over the dump's scale (with
 * sampling only T of every P ms were traced), as msgflow_diff has it. */
static double diff_seconds(const mf_dump *d)
{
    if (d->started_at < 0)
        return 1.0;
    long long end = d->stopped_at >= 0 ? d->stopped_at : d->taken_at;
    long long ms = end - d->started_at < 1 ? 1 : end - d->started_at;
    return (double)ms / 1000.0 / (d->scale > 1 ? d->scale : 1);
}

/* x to one decimal from its tenths rounded half away from zero (as
 * msgflow_diff writes it), into buf of 32 bytes. */
static const char *tenths(double x, char *buf)
{
    long long t = llround(x * 10);
    snprintf(buf, 32, "%lld.%lld", t / 10, t % 10);
    return buf;
}

/* A row's main kind and share, as msgflow_diff's notes write it: `info m
 * 100%'; empty without kinds. */
static void kind_note(const mf_dump *d, const mf_row *r, char *buf, size_t len)
{
    buf[0] = 0;
    if (!r || r->n_kinds == 0 || r->messages == 0)
        return;
    const mf_kind_name *kn = &d->kind_names[r->kinds[0].name];
    long long pct = llround(100.0 * (double)r->kinds[0].messages / (double)r->messages);
    snprintf(buf, len, "%s %s %lld%%", kn->kind, elixir_name(kn->tag), pct);
}

static const char *diff_rate(double r, char *buf)
{
    if (r <= 0)
        return "-";
    return short_rate(r, buf);
}

int mf_print_diff(FILE *out, const mf_dump *db, const mf_row *rb, size_t nb, const mf_dump *da,
                  const mf_row *ra, size_t na, int width)
{
    const mf_row **sb = malloc((nb + 1) * sizeof(*sb)), **sa = malloc((na + 1) * sizeof(*sa));
    diff_edge *e = malloc((nb + na + 1) * sizeof(*e));
    if (!sb || !sa || !e) {
        free(sb);
        free(sa);
        free(e);
        return -1;
    }
    /* the rows with messages (a group's rows of none are no edge) */
    size_t kb0 = 0, ka0 = 0;
    for (size_t i = 0; i < nb; i++)
        if (rb[i].messages > 0)
            sb[kb0++] = &rb[i];
    for (size_t i = 0; i < na; i++)
        if (ra[i].messages > 0)
            sa[ka0++] = &ra[i];
    nb = kb0;
    na = ka0;
    qsort(sb, nb, sizeof(*sb), row_ends_cmp);
    qsort(sa, na, sizeof(*sa), row_ends_cmp);
    double tb = diff_seconds(db), ta = diff_seconds(da);
    uint64_t mb = 0, ma = 0;
    for (size_t i = 0; i < nb; i++)
        mb += sb[i]->messages;
    for (size_t i = 0; i < na; i++)
        ma += sa[i]->messages;
    /* the two sides merged by ends */
    size_t n = 0, i = 0, j = 0;
    while (i < nb || j < na) {
        int c = i == nb ? 1 : j == na ? -1
                                      : ends_cmp(sb[i]->sender, sb[i]->receiver, sa[j]->sender,
                                                 sa[j]->receiver);
        diff_edge *x = &e[n++];
        x->b = c <= 0 ? sb[i] : NULL;
        x->a = c >= 0 ? sa[j] : NULL;
        x->s = x->b ? x->b->sender : x->a->sender;
        x->r = x->b ? x->b->receiver : x->a->receiver;
        double rbv = x->b ? (double)x->b->messages / tb : 0, rav = x->a ? (double)x->a->messages / ta : 0;
        x->change = fabs(rav - rbv);
        x->z = 0;
        if (x->b && x->a) {
            double cb = (double)x->b->messages, ca = (double)x->a->messages, all = cb + ca;
            double p = ta / (tb + ta);
            x->z = (ca - all * p) / sqrt(all * p * (1 - p));
        }
        if (c <= 0)
            i++;
        if (c >= 0)
            j++;
    }
    qsort(e, n, sizeof(*e), change_cmp);
    size_t appeared = 0, vanished = 0, changed = 0;
    for (size_t k = 0; k < n; k++) {
        appeared += !e[k].b;
        vanished += !e[k].a;
        changed += e[k].b && e[k].a && fabs(e[k].z) >= MF_DIFF_Z;
    }
    char a1[32], a2[32], t1[32], t2[32];
    fprintf(out, "msgflow diff: before %s, %s s, %s messages; after %s, %s s, %s messages\n",
            db->node, tenths(tb, t1), mf_int(mb, a1), da->node, tenths(ta, t2), mf_int(ma, a2));
    fprintf(out, "%zu appeared, %zu vanished, %zu changed, %zu the same (a changed rate: |z| >= %d, "
                 "a binomial test on the counts)\n",
            appeared, vanished, changed, n - appeared - vanished - changed, MF_DIFF_Z);
    int end_w = (width - 9 - 1 - 1 - 9 - 9 - 7 - 4) / 3;
    if (end_w < 12)
        end_w = 12;
    cell(out, "CHANGE", 9, "~");
    fputc(' ', out);
    cell(out, "SENDER", end_w, "~");
    fputc(' ', out);
    cell(out, "RECEIVER", end_w, "~");
    fprintf(out, " %8s %8s %6s  NOTES\n", "BEFORE/S", "AFTER/S", "AFTER");
    const char *whats[3] = {"appeared", "vanished", "changed"};
    for (int w = 0; w < 3; w++) {
        for (size_t k = 0; k < n; k++) {
            diff_edge *x = &e[k];
            int is = w == 0 ? !x->b : w == 1 ? !x->a : x->b && x->a && fabs(x->z) >= MF_DIFF_Z;
            if (!is)
                continue;
            char r1[32], r2[32], f[40] = "-", note[4200], kb[2048], ka[2048];
            double rbv = x->b ? (double)x->b->messages / tb : 0, rav = x->a ? (double)x->a->messages / ta : 0;
            if (rbv > 0 && rav > 0) {
                char tb10[32];
                snprintf(f, sizeof(f), "%sx", tenths(rav / rbv, tb10));
            }
            kind_note(db, x->b, kb, sizeof(kb));
            kind_note(da, x->a, ka, sizeof(ka));
            /* the main kind: the vanished edge's before, the others' after;
             * a changed edge's shift of kind too */
            snprintf(note, sizeof(note), "%s", w == 1 ? kb : ka);
            if (w == 2 && kb[0] && ka[0]) {
                const mf_kind_name *k1 = &db->kind_names[x->b->kinds[0].name];
                const mf_kind_name *k2 = &da->kind_names[x->a->kinds[0].name];
                /* the shares as printed (rounded), as msgflow_diff compares them */
                long long s1 = llround(100.0 * (double)x->b->kinds[0].messages / (double)x->b->messages);
                long long s2 = llround(100.0 * (double)x->a->kinds[0].messages / (double)x->a->messages);
                if (strcmp(k1->kind, k2->kind) || strcmp(k1->tag, k2->tag) || llabs(s1 - s2) >= 20)
                    snprintf(note + strlen(note), sizeof(note) - strlen(note), "; %s -> %s", kb, ka);
            }
            cell(out, whats[w], 9, "~");
            fputc(' ', out);
            mf_label_cell(out, x->s, NULL, end_w, "~");
            fputc(' ', out);
            mf_label_cell(out, x->r, NULL, end_w, "~");
            fprintf(out, " %8s %8s %6s  %s\n", diff_rate(rbv, r1), diff_rate(rav, r2), f, note);
        }
    }
    free(sb);
    free(sa);
    free(e);
    return ferror(out) ? -1 : 0;
}
