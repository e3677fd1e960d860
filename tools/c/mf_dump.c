/*
 * mf_dump.c -- see mf_dump.h.  Two passes: validate() walks the external
 * term format with every length checked against what is left of the
 * input; then ei decodes the term that passed.
 */
#include "mf_dump.h"

#include <ei.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* External term format tags (erts/emulator/beam/external.h). */
enum {
    T_VERSION = 131, T_NEW_FLOAT = 70, T_BIT_BINARY = 77, T_COMPRESSED = 80,
    T_NEW_PID = 88, T_NEW_PORT = 89, T_NEWER_REF = 90, T_SMALL_INT = 97, T_INT = 98,
    T_FLOAT = 99, T_ATOM = 100, T_REF = 101, T_PORT = 102, T_PID = 103,
    T_SMALL_TUPLE = 104, T_LARGE_TUPLE = 105, T_NIL = 106, T_STRING = 107, T_LIST = 108,
    T_BINARY = 109, T_SMALL_BIG = 110, T_LARGE_BIG = 111, T_NEW_REF = 114,
    T_SMALL_ATOM = 115, T_MAP = 116, T_ATOM_UTF8 = 118, T_SMALL_ATOM_UTF8 = 119,
    T_V4_PORT = 120
};

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ----------------------------------------------------------- validation */

typedef struct {
    const unsigned char *p;
    size_t len, pos;
} cur;

static int need(cur *c, size_t n)
{
    return c->len - c->pos >= n;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int skip(cur *c, size_t n)
{
    if (!need(c, n))
        return 0;
    c->pos += n;
    return 1;
}

static int valid_term(cur *c, int depth);

static int valid_atom(cur *c)
{
    if (!need(c, 1))
        return 0;
    unsigned tag = c->p[c->pos++];
    size_t n, max = 255; /* characters of a latin1 atom */
    switch (tag) {
    case T_ATOM:
    case T_ATOM_UTF8:
        if (!need(c, 2))
            return 0;
        n = (size_t)c->p[c->pos] << 8 | c->p[c->pos + 1];
        c->pos += 2;
        if (tag == T_ATOM_UTF8)
            max = MAXATOMLEN_UTF8 - 1;
        break;
    case T_SMALL_ATOM:
    case T_SMALL_ATOM_UTF8:
        if (!need(c, 1))
            return 0;
        n = c->p[c->pos++];
        if (tag == T_SMALL_ATOM_UTF8)
            max = MAXATOMLEN_UTF8 - 1;
        break;
    default:
        return 0;
    }
    /* what ei can hold once converted to UTF-8 (Erlang atoms: 255 characters) */
    return n <= max && skip(c, n);
}

/* n elements follow; each takes at least one byte. */
static int valid_elements(cur *c, uint64_t n, int depth)
{
    if (n > c->len - c->pos)
        return 0;
    for (uint64_t i = 0; i < n; i++)
        if (!valid_term(c, depth))
            return 0;
    return 1;
}

static int valid_term(cur *c, int depth)
{
    if (depth > MF_DUMP_MAX_DEPTH || !need(c, 1))
        return 0;
    unsigned tag = c->p[c->pos];
    uint32_t n;
    switch (tag) {
    case T_ATOM:
    case T_ATOM_UTF8:
    case T_SMALL_ATOM:
    case T_SMALL_ATOM_UTF8:
        return valid_atom(c);
    }
    c->pos++;
    switch (tag) {
    case T_SMALL_INT:
        return skip(c, 1);
    case T_INT:
        return skip(c, 4);
    case T_NEW_FLOAT:
        return skip(c, 8);
    case T_FLOAT:
        return skip(c, 31);
    case T_NIL:
        return 1;
    case T_SMALL_BIG:
        if (!need(c, 1))
            return 0;
        n = c->p[c->pos];
        return skip(c, 2 + (size_t)n);
    case T_LARGE_BIG:
        if (!need(c, 4))
            return 0;
        n = be32(c->p + c->pos);
        return n <= 64 && skip(c, 5 + (size_t)n); /* ei: no bigger bignums here */
    case T_STRING:
        if (!need(c, 2))
            return 0;
        n = (uint32_t)c->p[c->pos] << 8 | c->p[c->pos + 1];
        return skip(c, 2 + (size_t)n);
    case T_BINARY:
        if (!need(c, 4))
            return 0;
        n = be32(c->p + c->pos);
        return skip(c, 4 + (size_t)n);
    case T_BIT_BINARY:
        if (!need(c, 5))
            return 0;
        n = be32(c->p + c->pos);
        return n > 0 && skip(c, 5 + (size_t)n);
    case T_SMALL_TUPLE:
        if (!need(c, 1))
            return 0;
        n = c->p[c->pos++];
        return valid_elements(c, n, depth + 1);
    case T_LARGE_TUPLE:
        if (!need(c, 4))
            return 0;
        n = be32(c->p + c->pos);
        c->pos += 4;
        return valid_elements(c, n, depth + 1);
    case T_LIST:
        if (!need(c, 4))
            return 0;
        n = be32(c->p + c->pos);
        c->pos += 4;
        return valid_elements(c, n, depth + 1) && valid_term(c, depth + 1); /* and the tail */
    case T_MAP:
        if (!need(c, 4))
            return 0;
        n = be32(c->p + c->pos);
        c->pos += 4;
        return valid_elements(c, 2 * (uint64_t)n, depth + 1);
    case T_PID:
        return valid_atom(c) && skip(c, 9);
    case T_NEW_PID:
        return valid_atom(c) && skip(c, 12);
    case T_PORT:
        return valid_atom(c) && skip(c, 5);
    case T_NEW_PORT:
        return valid_atom(c) && skip(c, 8);
    case T_V4_PORT:
        return valid_atom(c) && skip(c, 12);
    case T_REF:
        return valid_atom(c) && skip(c, 5);
    case T_NEW_REF:
    case T_NEWER_REF:
        if (!need(c, 2))
            return 0;
        n = (uint32_t)c->p[c->pos] << 8 | c->p[c->pos + 1];
        c->pos += 2;
        /* ei's erlang_ref holds at most 5 words */
        return n >= 1 && n <= 5 && valid_atom(c) &&
               skip(c, (tag == T_NEW_REF ? 1 : 4) + 4 * (size_t)n);
    default:
        return 0; /* funs, exports, compressed or unknown tags: never in a dump */
    }
}

/* -------------------------------------------------------------- decoding */

/* The length of the UTF-8 character at s (n bytes left) as Erlang's
 * <<C/utf8>> takes it (no overlong form, surrogate or code point past
 * U+10FFFF), its code point in *c; 0 when it is none. */
static size_t utf8_char(const unsigned char *s, size_t n, uint32_t *c)
{
    unsigned char b = s[0];
#define CONT(i) (n > (i) && (s[i] & 0xC0) == 0x80)
    if (b < 0x80) {
        *c = b;
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF && CONT(1)) {
        *c = (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3F);
        return 2;
    }
    if (b >= 0xE0 && b <= 0xEF && CONT(1) && CONT(2)) {
        *c = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        return *c >= 0x800 && (*c < 0xD800 || *c > 0xDFFF) ? 3 : 0;
    }
    if (b >= 0xF0 && b <= 0xF4 && CONT(1) && CONT(2) && CONT(3)) {
        *c = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
             (s[3] & 0x3F);
        return *c >= 0x10000 && *c <= 0x10FFFF ? 4 : 0;
    }
#undef CONT
    return 0;
}

char *mf_visible(const char *s0, size_t n)
{
    const unsigned char *s = (const unsigned char *)s0;
    char *out = malloc(4 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t len = utf8_char(s + i, n - i, &c);
        if (!len) {
            o += sprintf(o, "\\x%02X", s[i]); /* no UTF-8: the byte */
            i++;
            continue;
        }
        if (c == 0x1B)
            o += sprintf(o, "\\e");
        else if (c == '\n')
            o += sprintf(o, "\\n");
        else if (c == '\r')
            o += sprintf(o, "\\r");
        else if (c == '\t')
            o += sprintf(o, "\\t");
        else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F))
            o += sprintf(o, "\\x%02X", (unsigned)c);
        else if (c == 0x61C || c == 0x200E || c == 0x200F || (c >= 0x202A && c <= 0x202E) ||
                 (c >= 0x2066 && c <= 0x2069))
            o += sprintf(o, "\\x{%04X}", (unsigned)c);
        else {
            memcpy(o, s + i, len);
            o += len;
        }
        i += len;
    }
    *o = 0;
    return out;
}

/* Every string a dump holds (names, labels, tags, node names) is copied
 * visible (mf_visible), so nothing printed from it can drive a terminal. */
static char *dup_str(const char *s)
{
    return mf_visible(s, strlen(s));
}

/* An atom in backquote-free Erlang syntax: bare when it can be. */
static void atom_text(const char *a, char *out, size_t outlen)
{
    int bare = a[0] >= 'a' && a[0] <= 'z';
    for (const char *p = a; *p && bare; p++)
        bare = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
               *p == '_' || *p == '@';
    if (bare) {
        snprintf(out, outlen, "%s", a);
        return;
    }
    size_t o = 0;
    if (o + 1 < outlen)
        out[o++] = '\'';
    for (const char *p = a; *p && o + 3 < outlen; p++) {
        if (*p == '\'' || *p == '\\')
            out[o++] = '\\';
        out[o++] = *p;
    }
    if (o + 1 < outlen)
        out[o++] = '\'';
    out[o] = 0;
}

/* A kind name already seen while decoding: "kind\ttag" -> its index. */
typedef struct {
    char *key;
    uint32_t idx;
    UT_hash_handle hh;
} kind_seen;

typedef struct {
    const char *buf;
    int idx;
    const char *dump_node; /* known once `node' was read; may be NULL */
    char *err;
    size_t errlen;
    kind_seen *kinds;      /* kind names seen, freed by decode */
    size_t kinds_cap;      /* room in out->pair_kinds */
    size_t names_cap;      /* room in out->kind_names */
} dec;

/* An atom as UTF-8 into out (MAXATOMLEN_UTF8 bytes): names and tags with
 * characters past Latin-1 decode too, and read as the node wrote them. */
static int dec_atom(dec *d, char *out)
{
    return ei_decode_atom_as(d->buf, &d->idx, out, MAXATOMLEN_UTF8, ERLANG_UTF8, NULL, NULL) == 0;
}

/* An atom, or `undefined' as NULL.  Returns 0 on a non-atom. */
static int dec_opt_atom(dec *d, char **out)
{
    char a[MAXATOMLEN_UTF8];
    if (!dec_atom(d, a))
        return 0;
    *out = NULL;
    if (strcmp(a, "undefined") == 0)
        return 1;
    return (*out = dup_str(a)) != NULL;
}

static int dec_u64(dec *d, uint64_t *v)
{
    unsigned long long u;
    if (ei_decode_ulonglong(d->buf, &d->idx, &u) != 0)
        return 0;
    *v = u;
    return 1;
}

static int dec_binary_str(dec *d, char **out)
{
    int type, size;
    if (ei_get_type(d->buf, &d->idx, &type, &size) != 0 || type != ERL_BINARY_EXT)
        return 0;
    char *s = malloc((size_t)size + 1);
    long got;
    if (!s || ei_decode_binary(d->buf, &d->idx, s, &got) != 0) {
        free(s);
        return 0;
    }
    /* (a NUL inside shows as \x00, as the node shows it) */
    *out = mf_visible(s, (size_t)got);
    free(s);
    return *out != NULL;
}

static int dec_endpoint(dec *d, mf_endpoint *e)
{
    int type, size;
    char text[4 * MAXATOMLEN_UTF8 + 64], a[MAXATOMLEN_UTF8], b[MAXATOMLEN_UTF8], qa[2 * MAXATOMLEN_UTF8 + 3],
        qb[2 * MAXATOMLEN_UTF8 + 3];
    if (ei_get_type(d->buf, &d->idx, &type, &size) != 0)
        return 0;
    const char *home = d->dump_node ? d->dump_node : "";
    switch (type) {
    case ERL_PID_EXT:
    case ERL_NEW_PID_EXT: {
        erlang_pid p;
        if (ei_decode_pid(d->buf, &d->idx, &p) != 0)
            return 0;
        e->type = MF_EP_PID;
        if (strcmp(p.node, home) == 0)
            snprintf(text, sizeof(text), "<0.%u.%u>", p.num, p.serial);
        else
            snprintf(text, sizeof(text), "<%u.%u>@%s", p.num, p.serial, p.node);
        e->node = dup_str(p.node);
        break;
    }
    case ERL_PORT_EXT:
    case ERL_NEW_PORT_EXT:
    case ERL_V4_PORT_EXT: {
        erlang_port p;
        if (ei_decode_port(d->buf, &d->idx, &p) != 0)
            return 0;
        e->type = MF_EP_PORT;
        if (strcmp(p.node, home) == 0)
            snprintf(text, sizeof(text), "#Port<0.%llu>", (unsigned long long)p.id);
        else
            snprintf(text, sizeof(text), "#Port<%llu>@%s", (unsigned long long)p.id, p.node);
        e->node = dup_str(p.node);
        break;
    }
    case ERL_REFERENCE_EXT:
    case ERL_NEW_REFERENCE_EXT:
    case ERL_NEWER_REFERENCE_EXT: {
        erlang_ref r;
        if (ei_decode_ref(d->buf, &d->idx, &r) != 0 || r.len < 1 || r.len > 5)
            return 0;
        e->type = MF_EP_REF;
        size_t o = (size_t)snprintf(text, sizeof(text), "alias #Ref<0");
        for (int i = r.len - 1; i >= 0 && o < sizeof(text); i--)
            o += (size_t)snprintf(text + o, sizeof(text) - o, ".%u", r.n[i]);
        if (o < sizeof(text))
            snprintf(text + o, sizeof(text) - o, strcmp(r.node, home) == 0 ? ">" : ">@%s",
                     r.node);
        e->node = dup_str(r.node);
        break;
    }
    case ERL_ATOM_EXT:
    case ERL_SMALL_ATOM_EXT:
    case ERL_ATOM_UTF8_EXT:
    case ERL_SMALL_ATOM_UTF8_EXT:
        if (!dec_atom(d, a))
            return 0;
        e->type = MF_EP_ATOM;
        snprintf(text, sizeof(text), "%s", a);
        e->node = dup_str(home);
        break;
    case ERL_SMALL_TUPLE_EXT: {
        int arity;
        long kind;
        if (ei_decode_tuple_header(d->buf, &d->idx, &arity) != 0 || !dec_atom(d, a))
            return 0;
        if (arity == 3 && strcmp(a, "exited") == 0) {
            /* {exited, LabelId, Node}: the exited endpoints of one label */
            if (ei_decode_long(d->buf, &d->idx, &kind) != 0 ||
                !dec_atom(d, b))
                return 0;
            e->type = MF_EP_EXITED;
            snprintf(text, sizeof(text), "exited#%ld", kind);
            e->node = dup_str(b);
            break;
        }
        if (arity != 2 || !dec_atom(d, b))
            return 0;
        e->type = MF_EP_NAME_NODE;
        atom_text(a, qa, sizeof(qa));
        atom_text(b, qb, sizeof(qb));
        snprintf(text, sizeof(text), "{%s,%s}", qa, qb);
        e->node = dup_str(b);
        break;
    }
    default:
        return 0;
    }
    e->text = dup_str(text);
    return e->text && e->node;
}

static void endpoint_free(mf_endpoint *e)
{
    free(e->text);
    free(e->label);
    free(e->display);
    free(e->module);
    free(e->application);
    free(e->node);
}

/* The index of kind name (kind, tag) in out->kind_names, added when new;
 * -1 when out of memory. */
static long kind_name(dec *d, mf_dump *out, const char *kind, const char *tag)
{
    size_t kl = strlen(kind), tl = strlen(tag);
    char *key = malloc(kl + tl + 2);
    kind_seen *found;
    if (!key)
        return -1;
    memcpy(key, kind, kl);
    key[kl] = '\t';
    memcpy(key + kl + 1, tag, tl + 1);
    HASH_FIND_STR(d->kinds, key, found);
    if (found) {
        free(key);
        return found->idx;
    }
    if (out->n_kind_names == d->names_cap) {
        /* doubling: a crafted dump may hold a million distinct tags */
        size_t cap = d->names_cap ? 2 * d->names_cap : 64;
        mf_kind_name *grown = cap < UINT32_MAX ? realloc(out->kind_names, cap * sizeof(*grown))
                                               : NULL;
        if (!grown) {
            free(key);
            return -1;
        }
        out->kind_names = grown;
        d->names_cap = cap;
    }
    kind_seen *k = malloc(sizeof(*k));
    if (!k) {
        free(key);
        return -1;
    }
    mf_kind_name *n = &out->kind_names[out->n_kind_names];
    n->kind = dup_str(kind);
    n->tag = dup_str(tag);
    if (!n->kind || !n->tag) {
        free(n->kind);
        free(n->tag);
        free(key);
        free(k);
        return -1;
    }
    k->key = key;
    k->idx = (uint32_t)out->n_kind_names++;
    HASH_ADD_KEYPTR(hh, d->kinds, k->key, strlen(k->key), k);
    return k->idx;
}

/* Room in out->pair_kinds for n more kinds (it grows by doubling; the
 * array is out's, freed by mf_dump_free).  0 with a message in d->err when
 * out of memory. */
static int room_for_kinds(dec *d, mf_dump *out, size_t n)
{
    if (out->n_pair_kinds + n <= d->kinds_cap)
        return 1;
    size_t cap = d->kinds_cap ? d->kinds_cap : 1024;
    while (cap < out->n_pair_kinds + n)
        cap *= 2;
    mf_pair_kind *grown = realloc(out->pair_kinds, cap * sizeof(*grown));
    if (!grown)
        return fail(d->err, d->errlen, "out of memory (kinds)"), 0;
    out->pair_kinds = grown;
    d->kinds_cap = cap;
    return 1;
}

/* Kind and tag with their messages appended to out->pair_kinds as pair
 * p's next kind (room made by room_for_kinds).  0 with a message in
 * d->err when out of memory. */
static int add_kind(dec *d, mf_dump *out, mf_pair *p, const char *kind, const char *tag,
                    uint64_t messages)
{
    long idx = kind_name(d, out, kind, tag);
    if (idx < 0)
        return fail(d->err, d->errlen, "out of memory (kind names)"), 0;
    mf_pair_kind *k = &out->pair_kinds[out->n_pair_kinds++];
    k->name = (uint32_t)idx;
    k->messages = messages;
    p->n_kinds++;
    return 1;
}

/* An integer, or `undefined' as -1. */
static int dec_opt_ll(dec *d, long long *v)
{
    char a[MAXATOMLEN_UTF8];
    int save = d->idx;
    if (ei_decode_longlong(d->buf, &d->idx, v) == 0)
        return *v >= 0;
    d->idx = save;
    if (!dec_atom(d, a) || strcmp(a, "undefined") != 0)
        return 0;
    *v = -1;
    return 1;
}

/* ------------------------------------------------------ version 6: maps */

/* The map at d->idx: for each names[k], at[k] the index of its value (-1
 * when absent); other keys are skipped.  d->idx is left after the map.
 * 0 when it is no map (or malformed). */
static int map_fields(dec *d, const char *const *names, int n, int *at)
{
    int arity;
    for (int k = 0; k < n; k++)
        at[k] = -1;
    if (ei_decode_map_header(d->buf, &d->idx, &arity) != 0)
        return 0;
    for (int i = 0; i < arity; i++) {
        char key[MAXATOMLEN_UTF8];
        if (dec_atom(d, key)) {
            for (int k = 0; k < n; k++)
                if (strcmp(key, names[k]) == 0)
                    at[k] = d->idx;
        } else if (ei_skip_term(d->buf, &d->idx) != 0) {
            return 0;
        }
        if (ei_skip_term(d->buf, &d->idx) != 0)
            return 0;
    }
    return 1;
}

/* A number (an integer or a float) as a double. */
static int dec_number(dec *d, double *v)
{
    int type, size;
    if (ei_get_type(d->buf, &d->idx, &type, &size) != 0)
        return 0;
    if (type == ERL_FLOAT_EXT || type == NEW_FLOAT_EXT)
        return ei_decode_double(d->buf, &d->idx, v) == 0 && isfinite(*v);
    long long l;
    if (ei_decode_longlong(d->buf, &d->idx, &l) != 0)
        return 0;
    *v = (double)l;
    return 1;
}

/* The list header at d->idx: its length in *n (0 for []).  0 when no
 * list. */
static int dec_list(dec *d, int *n)
{
    return ei_decode_list_header(d->buf, &d->idx, n) == 0 && *n >= 0;
}

/* After n elements: the list's tail is []. */
static int dec_list_end(dec *d, int n)
{
    int tail;
    return n == 0 || (ei_decode_list_header(d->buf, &d->idx, &tail) == 0 && tail == 0);
}

/* The most fields a map of a list names (the fields of a call). */
#define MF_MAX_FIELDS 16

/* What one element of a list of maps gets: the element (in the array the
 * list is read into), its index, and where each named field's value is
 * (-1: absent).  0 with a message in d->err when it is bad. */
typedef int (*dec_one)(dec *d, mf_dump *out, void *elem, int i, const int *at);

/* The n maps of the list whose header dec_list read, each read by `one'
 * from the positions of its fields `names' (others skipped); element i is
 * base + i * stride (stride 0: each is base itself), and *count, when
 * given, is set to i + 1 before element i is read, so that mf_dump_free
 * frees what a failure leaves.  `what' names the list in messages. */
static int each_map(dec *d, mf_dump *out, const char *what, int n, const char *const *names,
                    int nn, char *base, size_t stride, size_t *count, dec_one one)
{
    int at[MF_MAX_FIELDS]; /* nn <= MF_MAX_FIELDS: asserted where the fields are named */
    for (int i = 0; i < n; i++) {
        if (count)
            *count = (size_t)i + 1;
        if (!map_fields(d, names, nn, at))
            return fail(d->err, d->errlen, "%s: entry %d is not a map", what, i), 0;
        int next = d->idx;
        if (!one(d, out, base + (size_t)i * stride, i, at))
            return 0;
        d->idx = next;
    }
    return dec_list_end(d, n) ? 1 : (fail(d->err, d->errlen, "%s: not a proper list", what), 0);
}

/* A list of maps at d->idx (each_map) read into an array of `size' bytes
 * an element, calloc'd into *arr (out's: mf_dump_free frees it). */
static int dec_maps(dec *d, mf_dump *out, const char *what, const char *const *names, int nn,
                    size_t size, void **arr, size_t *count, dec_one one)
{
    int n;
    if (!dec_list(d, &n))
        return fail(d->err, d->errlen, "%s: not a list", what), 0;
    if (n > 0 && !(*arr = calloc((size_t)n, size)))
        return fail(d->err, d->errlen, "out of memory (%d %s)", n, what), 0;
    return each_map(d, out, what, n, names, nn, *arr, size, count, one);
}

/* Every field named is there. */
static int all_there(const int *at, int nn)
{
    for (int k = 0; k < nn; k++)
        if (at[k] < 0)
            return 0;
    return 1;
}

/* A map's field, read where map_fields found it (pos): 1 when read.  The
 * _dup form copies an atom's text (the caller owns it, free()). */
static int at_u64(dec *d, int pos, uint64_t *v)
{
    d->idx = pos;
    return dec_u64(d, v);
}

static int at_atom(dec *d, int pos, char *a)
{
    d->idx = pos;
    return dec_atom(d, a);
}

static int at_atom_dup(dec *d, int pos, char **s)
{
    char a[MAXATOMLEN_UTF8];
    return at_atom(d, pos, a) && (*s = dup_str(a)) != NULL;
}

enum { E_END, E_TEXT, E_LABEL, E_DISPLAY, E_MODULE, E_APP, E_NODE, E_N };
static const char *const endpoint_fields[E_N] = {"endpoint", "text", "label", "display",
                                                 "module", "application", "node"};

static int dec_endpoint6(dec *d, mf_dump *out, void *elem, int i, const int *at)
{
    (void)out;
    mf_endpoint *e = elem;
    if (at[E_TEXT] < 0 || at[E_LABEL] < 0)
        return fail(d->err, d->errlen, "endpoint %d: no text or label", i), 0;
    /* what it is: an endpoint the VM reported, or a group's key */
    d->idx = at[E_END];
    if (at[E_END] < 0 || !dec_endpoint(d, e))
        e->type = MF_EP_KEY;
    free(e->text);
    e->text = NULL;
    d->idx = at[E_TEXT];
    if (!dec_binary_str(d, &e->text))
        return fail(d->err, d->errlen, "endpoint %d: text is not a binary", i), 0;
    d->idx = at[E_LABEL];
    if (!dec_binary_str(d, &e->label))
        return fail(d->err, d->errlen, "endpoint %d: label is not a binary", i), 0;
    d->idx = at[E_DISPLAY];
    if (at[E_DISPLAY] >= 0 && !dec_binary_str(d, &e->display))
        return fail(d->err, d->errlen, "endpoint %d: display is not a binary", i), 0;
    d->idx = at[E_MODULE];
    if (at[E_MODULE] >= 0 && !dec_opt_atom(d, &e->module))
        return fail(d->err, d->errlen, "endpoint %d: module is not an atom", i), 0;
    d->idx = at[E_APP];
    if (at[E_APP] >= 0 && !dec_opt_atom(d, &e->application))
        return fail(d->err, d->errlen, "endpoint %d: application is not an atom", i), 0;
    char *node = NULL;
    d->idx = at[E_NODE];
    if (at[E_NODE] >= 0 && !dec_opt_atom(d, &node))
        return fail(d->err, d->errlen, "endpoint %d: node is not an atom", i), 0;
    if (node || !e->node) {
        free(e->node);
        e->node = node ? node : dup_str(d->dump_node ? d->dump_node : "");
    }
    return e->node ? 1 : (fail(d->err, d->errlen, "out of memory"), 0);
}

enum { K_KIND6, K_TAG6, K_MSGS6, K_N6 };
static const char *const kind_fields[K_N6] = {"kind", "tag", "messages"};

/* A row's kind (elem: the row), appended to out->pair_kinds (room made
 * by dec_row6). */
static int dec_kind6(dec *d, mf_dump *out, void *elem, int i, const int *at)
{
    char kind[MAXATOMLEN_UTF8], tag[MAXATOMLEN_UTF8];
    uint64_t messages;
    int ok = all_there(at, K_N6) && at_atom(d, at[K_KIND6], kind) && at_atom(d, at[K_TAG6], tag) &&
             at_u64(d, at[K_MSGS6], &messages);
    if (!ok)
        return fail(d->err, d->errlen, "row %zu: kind %d is not #{kind, tag, messages}",
                    (size_t)((mf_pair *)elem - out->pairs), i), 0;
    return add_kind(d, out, elem, kind, tag, messages);
}

enum { R_S, R_R, R_MSGS, R_WIN, R_RATE, R_PEAK, R_KINDS, R_BYTES, R_BYTES_MEAN, R_WAIT,
       R_GROWING, R_N };
static const char *const row_fields[R_N] = {"sender", "receiver", "messages", "window_messages",
                                            "rate", "peak_rate", "kinds", "bytes", "bytes_mean",
                                            "receiver_wait_ms", "receiver_growing"};

static int dec_row6(dec *d, mf_dump *out, void *elem, int i, const int *at)
{
    mf_pair *p = elem;
    uint64_t s, r;
    if (at[R_S] < 0 || at[R_R] < 0 || at[R_MSGS] < 0)
        return fail(d->err, d->errlen, "row %d: no sender, receiver or messages", i), 0;
    int ok = at_u64(d, at[R_S], &s) && at_u64(d, at[R_R], &r) &&
             at_u64(d, at[R_MSGS], &p->messages);
    p->window_messages = 0;
    p->rate = p->peak = p->bytes = p->bytes_mean = p->wait_ms = -1;
    p->growing = 0;
    if (ok && at[R_WIN] >= 0)
        ok = at_u64(d, at[R_WIN], &p->window_messages);
    if (ok && at[R_RATE] >= 0) {
        d->idx = at[R_RATE];
        ok = dec_number(d, &p->rate) && p->rate >= 0;
    }
    if (ok && at[R_PEAK] >= 0) {
        d->idx = at[R_PEAK];
        ok = dec_number(d, &p->peak) && p->peak >= 0;
    }
    if (ok && at[R_BYTES] >= 0) {
        d->idx = at[R_BYTES];
        ok = dec_number(d, &p->bytes) && p->bytes >= 0;
    }
    if (ok && at[R_BYTES_MEAN] >= 0) {
        d->idx = at[R_BYTES_MEAN];
        ok = dec_number(d, &p->bytes_mean) && p->bytes_mean >= 0;
    }
    if (ok && at[R_WAIT] >= 0) {
        d->idx = at[R_WAIT];
        ok = dec_number(d, &p->wait_ms) && p->wait_ms >= 0;
    }
    if (ok && at[R_GROWING] >= 0) {
        char g[MAXATOMLEN_UTF8];
        ok = at_atom(d, at[R_GROWING], g);
        p->growing = ok && strcmp(g, "true") == 0;
    }
    if (!ok)
        return fail(d->err, d->errlen, "row %d: a field is not a non-negative number (counts below 2^64)", i), 0;
    if (s >= out->n_endpoints || r >= out->n_endpoints)
        return fail(d->err, d->errlen, "row %d: endpoint index %llu out of range (%zu endpoints)",
                    i, (unsigned long long)(s >= out->n_endpoints ? s : r), out->n_endpoints), 0;
    p->sender = (size_t)s;
    p->receiver = (size_t)r;
    p->first_kind = out->n_pair_kinds;
    p->n_kinds = 0;
    if (at[R_KINDS] < 0)
        return 1;
    /* room for its kinds, then each (appended to out->pair_kinds: each
     * element is the row itself) */
    int n;
    char what[48];
    snprintf(what, sizeof(what), "row %d: kinds", i);
    d->idx = at[R_KINDS];
    if (!dec_list(d, &n))
        return fail(d->err, d->errlen, "%s are not a list", what), 0;
    if (!room_for_kinds(d, out, (size_t)n))
        return 0;
    return each_map(d, out, what, n, kind_fields, K_N6, (char *)p, 0, NULL, dec_kind6);
}

enum { N_NODE, N_STATUS, N_PAIRS, N_EVENTS, N_N };
static const char *const node_fields[N_N] = {"node", "status", "pairs", "events"};

static int dec_node6(dec *d, mf_dump *out, void *elem, int i, const int *at)
{
    (void)out;
    mf_node *nd = elem;
    int ok = all_there(at, N_N) && at_atom_dup(d, at[N_NODE], &nd->name) &&
             at_atom_dup(d, at[N_STATUS], &nd->status) && at_u64(d, at[N_PAIRS], &nd->pairs) &&
             at_u64(d, at[N_EVENTS], &nd->events);
    return ok ? 1 : (fail(d->err, d->errlen, "nodes: entry %d is not #{node, status, pairs, "
                          "events}", i), 0);
}

enum { M_NODE, M_REASON, M_N };
static const char *const missing_fields[M_N] = {"node", "reason"};

static int dec_missing6(dec *d, mf_dump *out, void *elem, int i, const int *at)
{
    (void)out;
    char **text = elem, a[MAXATOMLEN_UTF8], *why = NULL;
    int ok = all_there(at, M_N) && at_atom(d, at[M_NODE], a);
    d->idx = at[M_REASON];
    if (!ok || !dec_binary_str(d, &why))
        return fail(d->err, d->errlen, "missing: entry %d is not #{node, reason}", i), 0;
    size_t len = strlen(a) + strlen(why) + 4;
    if ((*text = malloc(len)) != NULL)
        snprintf(*text, len, "%s (%s)", a, why);
    free(why);
    return *text ? 1 : (fail(d->err, d->errlen, "out of memory"), 0);
}

enum { C_CALLER, C_CL, C_SERVER, C_SL, C_KIND, C_TAG, C_CALLS, C_SAMPLED, C_UNANS, C_P50,
       C_P90, C_P99, C_MAX, C_N };
static const char *const call_fields[C_N] = {"caller", "caller_label", "server", "server_label",
                                             "kind", "tag", "calls", "sampled", "unanswered",
                                             "p50_ns", "p90_ns", "p99_ns", "max_ns"};

enum { O_SENDER, O_RECEIVER, O_MESSAGES, O_ERROR, O_N };
static const char *const overflow_fields[O_N] = {"sender", "receiver", "messages", "error"};

_Static_assert(E_N <= MF_MAX_FIELDS && R_N <= MF_MAX_FIELDS && K_N6 <= MF_MAX_FIELDS &&
                   N_N <= MF_MAX_FIELDS && M_N <= MF_MAX_FIELDS && C_N <= MF_MAX_FIELDS &&
                   O_N <= MF_MAX_FIELDS,
               "each_map's maps name at most MF_MAX_FIELDS fields");

static int dec_call6(dec *d, mf_dump *out, void *elem, int i, const int *at)
{
    (void)out;
    mf_call *c = elem;
    int ok = all_there(at, C_N);
    char **strs[] = {&c->caller, &c->caller_label, &c->server, &c->server_label};
    for (int k = 0; ok && k < 4; k++) {
        d->idx = at[C_CALLER + k];
        ok = dec_binary_str(d, strs[k]);
    }
    ok = ok && at_atom_dup(d, at[C_KIND], &c->kind) && at_atom_dup(d, at[C_TAG], &c->tag);
    d->idx = at[C_CALLS];
    ok = ok && dec_opt_ll(d, &c->calls) && at_u64(d, at[C_SAMPLED], &c->sampled) &&
         at_u64(d, at[C_UNANS], &c->unanswered);
    long long *qs[] = {&c->p50_ns, &c->p90_ns, &c->p99_ns, &c->max_ns};
    for (int k = 0; ok && k < 4; k++) {
        d->idx = at[C_P50 + k];
        ok = dec_opt_ll(d, qs[k]);
    }
    return ok ? 1 : (fail(d->err, d->errlen, "calls: entry %d is not #{caller, caller_label, "
                          "server, server_label, kind, tag, calls, sampled, unanswered, "
                          "p50_ns, p90_ns, p99_ns, max_ns}", i), 0);
}

static int dec_overflow6(dec *d, mf_dump *out, void *elem, int i, const int *at)
{
    (void)out;
    mf_overflow_pair *o = elem;
    int ok = all_there(at, O_N);
    d->idx = at[O_SENDER];
    ok = ok && dec_binary_str(d, &o->sender);
    d->idx = at[O_RECEIVER];
    ok = ok && dec_binary_str(d, &o->receiver) && at_u64(d, at[O_MESSAGES], &o->messages) &&
         at_u64(d, at[O_ERROR], &o->error);
    return ok ? 1 : (fail(d->err, d->errlen, "overflow_top: entry %d is not #{sender, "
                          "receiver, messages, error}", i), 0);
}

static int dec_endpoints6(dec *d, mf_dump *out)
{
    return dec_maps(d, out, "endpoints", endpoint_fields, E_N, sizeof(mf_endpoint),
                    (void **)&out->endpoints, &out->n_endpoints, dec_endpoint6);
}

static int dec_rows6(dec *d, mf_dump *out)
{
    return dec_maps(d, out, "rows", row_fields, R_N, sizeof(mf_pair), (void **)&out->pairs,
                    &out->n_pairs, dec_row6);
}

static int dec_nodes6(dec *d, mf_dump *out)
{
    return dec_maps(d, out, "nodes", node_fields, N_N, sizeof(mf_node), (void **)&out->nodes,
                    &out->n_nodes, dec_node6);
}

static int dec_missing_list6(dec *d, mf_dump *out)
{
    return dec_maps(d, out, "missing", missing_fields, M_N, sizeof(char *),
                    (void **)&out->missing, &out->n_missing, dec_missing6);
}

static int dec_overflow_top6(dec *d, mf_dump *out)
{
    return dec_maps(d, out, "overflow_top", overflow_fields, O_N, sizeof(mf_overflow_pair),
                    (void **)&out->overflow_top, &out->n_overflow_top, dec_overflow6);
}

static int dec_calls6(dec *d, mf_dump *out)
{
    return dec_maps(d, out, "calls", call_fields, C_N, sizeof(mf_call), (void **)&out->calls,
                    &out->n_calls, dec_call6);
}

int mf_dump_decode(const char *buf, size_t len, mf_dump *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (errlen)
        err[0] = 0;
    if (len > 0x7fffffff)
        return fail(err, errlen, "dump too large (%zu bytes)", len), -1;
    if (len < 1 || (unsigned char)buf[0] != T_VERSION)
        return fail(err, errlen, "not an Erlang external term (no version byte 131)"), -1;
    if (len >= 2 && (unsigned char)buf[1] == T_COMPRESSED)
        return fail(err, errlen, "compressed terms are not supported"), -1;
    cur c = {(const unsigned char *)buf, len, 1};
    if (!valid_term(&c, 0))
        return fail(err, errlen, "truncated or malformed term (stopped at byte %zu of %zu)",
                    c.pos, len), -1;
    if (c.pos != len)
        return fail(err, errlen, "%zu bytes of garbage after the term", len - c.pos), -1;

    dec d = {.buf = buf, .idx = 1, .err = err, .errlen = errlen};
    /* Keys come in any order: note where each value is, then decode. */
    enum { K_FORMAT, K_VERSION, K_NODE, K_TAKEN, K_STARTED, K_RUNNING, K_WINDOW, K_SCALE,
           K_EVENTS, K_DEAD, K_OVERFLOW, K_ENDPOINTS, K_NODES, K_CALLS, K_BY, K_SORT,
           K_PAIR_COUNT, K_GROUP_COUNT, K_ROWS, K_MISSING, K_STOPPED, K_RANGE_FROM, K_RANGE_TO,
           K_FULL, K_OVER_TOP, K_OVER_MIN, K_N };
    static const char *const names[K_N] = {"format", "version", "node", "taken_at",
                                           "started_at", "running", "window_ms", "scale",
                                           "events", "dead_letters", "overflow", "endpoints",
                                           "nodes", "calls", "by", "sort", "pair_count",
                                           "group_count", "rows", "missing", "stopped_at",
                                           "range_from", "range_to", "memory_full",
                                           "overflow_top", "overflow_top_min"};
    int at[K_N];
    if (!map_fields(&d, names, K_N, at))
        return fail(err, errlen, "not a msgflow dump: the term is not a map (or not a well-formed one)"), -1;
    char a[MAXATOMLEN_UTF8];
    d.idx = at[K_FORMAT];
    if (at[K_FORMAT] < 0 || !dec_atom(&d, a) || strcmp(a, "msgflow_dump") != 0)
        return fail(err, errlen, "not a msgflow dump (no format => msgflow_dump)"), -1;
    d.idx = at[K_VERSION];
    if (at[K_VERSION] < 0 || ei_decode_long(buf, &d.idx, &out->version) != 0)
        return fail(err, errlen, "msgflow dump without a version"), -1;
    if (out->version >= 1 && out->version < MF_DUMP_VERSION)
        return fail(err, errlen,
                    "msgflow dump version %ld is from msgflow 0.1, whose dumps this reader no "
                    "longer reads (it reads version %d): read it with msgflow 0.1's "
                    "msgflow-report, or export the run again with this msgflow "
                    "(msgflow:export(Path, etf) on the node)",
                    out->version, MF_DUMP_VERSION), -1;
    if (out->version != MF_DUMP_VERSION)
        return fail(err, errlen, "msgflow dump version %ld is not known (this reader knows %d)",
                    out->version, MF_DUMP_VERSION), -1;
    for (int k = 0; k < K_N; k++) {
        /* what a dump must have */
        int needed = k != K_STARTED && k != K_RUNNING && k != K_SORT &&
                     k != K_PAIR_COUNT && k != K_GROUP_COUNT && k != K_MISSING &&
                     k != K_STOPPED && k != K_RANGE_FROM && k != K_RANGE_TO && k != K_FULL &&
                     k != K_OVER_TOP && k != K_OVER_MIN;
        if (at[k] < 0 && needed)
            return fail(err, errlen, "msgflow dump without `%s'", names[k]), -1;
    }
    out->pair_count = out->group_count = -1;

    d.idx = at[K_NODE];
    if (!dec_atom(&d, a) || !(out->node = dup_str(a))) {
        fail(err, errlen, "node: not an atom");
        goto bad;
    }
    d.dump_node = out->node;
    d.idx = at[K_TAKEN];
    if (ei_decode_longlong(buf, &d.idx, &out->taken_at) != 0) {
        fail(err, errlen, "taken_at: not an integer");
        goto bad;
    }
    out->started_at = out->stopped_at = -1;
    if (at[K_STARTED] >= 0) {
        d.idx = at[K_STARTED];
        if (ei_decode_longlong(buf, &d.idx, &out->started_at) != 0)
            out->started_at = -1; /* undefined */
    }
    if (at[K_STOPPED] >= 0) {
        d.idx = at[K_STOPPED];
        if (ei_decode_longlong(buf, &d.idx, &out->stopped_at) != 0)
            out->stopped_at = -1; /* undefined */
    }
    /* a range of the history: both ends, or neither */
    out->range_from = out->range_to = -1;
    if (at[K_RANGE_FROM] >= 0 && at[K_RANGE_TO] >= 0) {
        d.idx = at[K_RANGE_FROM];
        int bad_from = ei_decode_longlong(buf, &d.idx, &out->range_from) != 0;
        d.idx = at[K_RANGE_TO];
        if (bad_from || ei_decode_longlong(buf, &d.idx, &out->range_to) != 0) {
            fail(err, errlen, "range_from, range_to: not integers");
            goto bad;
        }
    }
    if (at[K_RUNNING] >= 0) {
        d.idx = at[K_RUNNING];
        out->running = dec_atom(&d, a) && strcmp(a, "true") == 0;
    }
    uint64_t *u64s[] = {&out->window_ms, &out->events, &out->dead_letters, &out->overflow};
    int u64k[] = {K_WINDOW, K_EVENTS, K_DEAD, K_OVERFLOW};
    for (int i = 0; i < 4; i++) {
        d.idx = at[u64k[i]];
        if (!dec_u64(&d, u64s[i])) {
            fail(err, errlen, "%s: not a non-negative integer below 2^64", names[u64k[i]]);
            goto bad;
        }
    }
    d.idx = at[K_SCALE];
    int type, size;
    ei_get_type(buf, &d.idx, &type, &size);
    if (type == ERL_FLOAT_EXT || type == NEW_FLOAT_EXT) {
        if (ei_decode_double(buf, &d.idx, &out->scale) != 0 || !(out->scale >= 1.0) ||
            !isfinite(out->scale)) {
            fail(err, errlen, "scale: not a finite number >= 1");
            goto bad;
        }
    } else {
        uint64_t s;
        if (!dec_u64(&d, &s) || s < 1) {
            fail(err, errlen, "scale: not a finite number >= 1");
            goto bad;
        }
        out->scale = (double)s;
    }
    {
        d.idx = at[K_BY];
        if (!dec_atom(&d, a) || !(out->by = dup_str(a))) {
            fail(err, errlen, "by: not an atom");
            goto bad;
        }
        d.idx = at[K_SORT];
        if (at[K_SORT] >= 0 && (!dec_atom(&d, a) || !(out->sort = dup_str(a)))) {
            fail(err, errlen, "sort: not an atom");
            goto bad;
        }
        long long *counts[] = {&out->pair_count, &out->group_count};
        int ck[] = {K_PAIR_COUNT, K_GROUP_COUNT};
        for (int i = 0; i < 2; i++) {
            d.idx = at[ck[i]];
            if (at[ck[i]] >= 0 && !dec_opt_ll(&d, counts[i])) {
                fail(err, errlen, "%s: not a count", names[ck[i]]);
                goto bad;
            }
        }
        if (at[K_MISSING] >= 0) {
            d.idx = at[K_MISSING];
            if (!dec_missing_list6(&d, out))
                goto bad;
        }
        if (at[K_FULL] >= 0) {
            d.idx = at[K_FULL];
            out->memory_full = dec_atom(&d, a) && strcmp(a, "true") == 0;
        }
        /* the busiest in overflow: both, or neither */
        if (at[K_OVER_TOP] >= 0 && at[K_OVER_MIN] >= 0) {
            d.idx = at[K_OVER_MIN];
            if (!dec_u64(&d, &out->overflow_top_min)) {
                fail(err, errlen, "overflow_top_min: not a count");
                goto bad;
            }
            d.idx = at[K_OVER_TOP];
            if (!dec_overflow_top6(&d, out))
                goto bad;
        }
    }
    d.idx = at[K_ENDPOINTS];
    if (!dec_endpoints6(&d, out))
        goto bad;
    d.idx = at[K_ROWS];
    int pairs_ok = dec_rows6(&d, out);
    kind_seen *k, *tmp;
    HASH_ITER(hh, d.kinds, k, tmp) {
        HASH_DEL(d.kinds, k);
        free(k->key);
        free(k);
    }
    if (!pairs_ok)
        goto bad;
    d.idx = at[K_NODES];
    if (!dec_nodes6(&d, out))
        goto bad;
    d.idx = at[K_CALLS];
    if (!dec_calls6(&d, out))
        goto bad;
    return 0;
bad:
    mf_dump_free(out);
    return -1;
}

void mf_dump_free(mf_dump *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_nodes; i++) {
        free(d->nodes[i].name);
        free(d->nodes[i].status);
    }
    free(d->nodes);
    for (size_t i = 0; i < d->n_calls; i++) {
        mf_call *c = &d->calls[i];
        free(c->caller);
        free(c->caller_label);
        free(c->server);
        free(c->server_label);
        free(c->kind);
        free(c->tag);
    }
    free(d->calls);
    for (size_t i = 0; i < d->n_endpoints; i++)
        endpoint_free(&d->endpoints[i]);
    free(d->endpoints);
    free(d->pairs);
    for (size_t i = 0; i < d->n_kind_names; i++) {
        free(d->kind_names[i].kind);
        free(d->kind_names[i].tag);
    }
    free(d->kind_names);
    free(d->pair_kinds);
    for (size_t i = 0; i < d->n_missing; i++)
        free(d->missing[i]);
    free(d->missing);
    for (size_t i = 0; i < d->n_overflow_top; i++) {
        free(d->overflow_top[i].sender);
        free(d->overflow_top[i].receiver);
    }
    free(d->overflow_top);
    free(d->node);
    free(d->by);
    free(d->sort);
    memset(d, 0, sizeof(*d));
}

double mf_dump_rate(const mf_dump *d, const mf_pair *p)
{
    if (p->rate >= 0)
        return p->rate;
    if (d->window_ms == 0)
        return 0.0;
    return (double)p->window_messages * 1000.0 / (double)d->window_ms * d->scale;
}
