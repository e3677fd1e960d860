/*
 * mf_layout.c -- the load-time checks of the term layouts mf_layout.h reads,
 * and the one published layout.  Runs in load and upgrade (one thread,
 * under the code-loading lock); callbacks on every scheduler read the
 * published layout meanwhile, which is why a check never writes to it: it
 * fills a local mf_layout_t, and mf_layout_load publishes the result in one
 * release store.
 *
 * Memory: four static layouts, none written once published nor freed (a
 * callback of an old instance may still hold one): every read off, every
 * read off with the VM's types (MSGFLOW_TERM_READS=off), the one the
 * first load found, and that one with the resource read mf_layout_probe
 * found after load.  The checks find the same layout on one
 * VM, so an upgrade publishes nothing new; should one ever find another,
 * every read goes through enif from then on (layout_off), which is right
 * on any VM.  Load opens a resource type of its own (mf_layout_probe, no
 * destructor); the resource check (mf_layout_probe, a NIF call after
 * load: a type opened in load takes no resources until load returned)
 * makes two resources of it, which go with the calling process's terms.
 */
#include "mf_layout.h"

#include <stddef.h>
#include <string.h>

/* every read off: what callbacks read before the first load */
static const mf_layout_t layout_off = {0};
static mf_layout_t layout_found;
static int found_published;
/* every read off, with the VM's types as its release says
 * (MSGFLOW_TERM_READS=off); written once, before it is published */
static mf_layout_t layout_api;
static int api_published;

/* the layout found at load with the resource read that mf_layout_probe
 * found after it; written once, before it is published */
static mf_layout_t layout_probed;
static int probed_published;
/* 1 while a call of mf_layout_probe checks; layout_probed and
 * probed_published are written under it */
static _Atomic int probing;
/* the type of the resource check's resources, opened at each load */
static ErlNifResourceType *probe_rt;

_Atomic(const mf_layout_t *) mf_layout_cur = &layout_off;

/* The keys rest on a local pid being the only term whose low four bits are
 * MF_PID_TAG (see mf_endpoint_word).  Checked once here, so that a VM where
 * that no longer holds refuses the library instead of mixing up pairs. */
static int pid_layout_ok(ErlNifEnv *env)
{
    ErlNifPid self;
    if (!enif_self(env, &self))
        return 1; /* no process to check with; true of every VM so far */
    return ((uint64_t)enif_make_pid(env, &self) & MF_PID_TAG_MASK) == MF_PID_TAG &&
           ((uint64_t)enif_make_int(env, 3) & MF_PID_TAG_MASK) != MF_PID_TAG &&
           ((uint64_t)enif_make_atom(env, "ok") & MF_PID_TAG_MASK) != MF_PID_TAG &&
           ((uint64_t)enif_make_list(env, 0) & MF_PID_TAG_MASK) != MF_PID_TAG;
}

/* Whether mf_get_extra may read a one-key map itself: a map made here the way
 * the VM makes trace_send's options must read back right, and terms that
 * are not such a map (a tuple, a flat map of two keys, a hash map) must not
 * pass for one and still read back right.  Sets L->flatmap_header. */
static void extra_layout_check(ErlNifEnv *env, mf_layout_t *L)
{
    ERL_NIF_TERM key = atom_extra, val = enif_make_int(env, 42), map, other, got;
    const uint64_t *words;
    L->flatmap_header = 0;
    if (!enif_make_map_from_arrays(env, &key, &val, 1, &map) || ((uint64_t)map & 0x3) != 0x2)
        return;
    words = (const uint64_t *)((uint64_t)map - 0x2);
    if (words[1] != 1)
        return;
    L->flatmap_header = words[0];
    ERL_NIF_TERM keys2[2] = {atom_ok, atom_extra}, vals2[2] = {enif_make_int(env, 7), val};
    if (!mf_get_extra(L, env, map, &got) || got != val ||
        !enif_make_map_from_arrays(env, keys2, vals2, 2, &other) ||
        ((const uint64_t *)((uint64_t)other - 0x2))[0] != L->flatmap_header ||
        !mf_get_extra(L, env, other, &got) || got != val ||
        ((const uint64_t *)((uint64_t)enif_make_tuple2(env, key, val) - 0x2))[0] ==
            L->flatmap_header) {
        L->flatmap_header = 0;
        return;
    }
    /* a map of the other kind (a hash map: over 32 keys) has another
     * header and reads back right through the API */
    ERL_NIF_TERM keys40[40], vals40[40], big;
    keys40[0] = atom_extra;
    vals40[0] = val;
    for (int i = 1; i < 40; i++) {
        keys40[i] = enif_make_int(env, i);
        vals40[i] = keys40[i];
    }
    if (!enif_make_map_from_arrays(env, keys40, vals40, 40, &big) ||
        ((uint64_t)big & 0x3) != 0x2 ||
        ((const uint64_t *)((uint64_t)big - 0x2))[0] == L->flatmap_header ||
        !mf_get_extra(L, env, big, &got) || got != val)
        L->flatmap_header = 0;
}

/* The checks' samples of one kind of reference: each must have the
 * header of the first (*header, 0 before it) and an id (mf_pidref_id) of
 * its own among the first 64 (ids[0 .. n-1]).  0 when ref fails. */
static int same_header_own_id(const uint64_t *ref, uint64_t *header, uint64_t ids[64],
                              unsigned n)
{
    if (*header && ref[0] != *header)
        return 0;
    *header = ref[0];
    uint64_t id = mf_pidref_id(ref);
    for (unsigned i = 0; i < n && i < 64; i++)
        if (ids[i] == id)
            return 0;
    if (n < 64)
        ids[n] = id;
    return 1;
}

/* Whether alias reads may find an alias's owner: every alias given (made
 * by alias/0 and by monitor/3, in this process and another) has one header
 * word and its owner's pid in its fourth word, and no plain reference has
 * that header.  Sets L->pidref_header. */
static void alias_layout_check(ErlNifEnv *env, ERL_NIF_TERM info, mf_layout_t *L)
{
    const ERL_NIF_TERM *el, *pair;
    int arity;
    ERL_NIF_TERM aliases, refs, head;
    uint64_t header = 0, ids[64];
    unsigned n = 0;
    L->pidref_header = 0;
    if (sizeof(ERL_NIF_TERM) != 8 || !enif_get_tuple(env, info, &arity, &el) || arity != 3)
        return;
    for (aliases = el[0]; enif_get_list_cell(env, aliases, &head, &aliases); n++) {
        if (!enif_get_tuple(env, head, &arity, &pair) || arity != 2 ||
            !enif_is_ref(env, pair[0]) || !mf_is_local_pid(pair[1]) ||
            ((uint64_t)pair[0] & 0x3) != 0x2)
            return;
        const uint64_t *ref = (const uint64_t *)((uint64_t)pair[0] - 0x2);
        /* mf_tag_id: every alias given has an id of its own */
        if (ref[3] != (uint64_t)pair[1] || !same_header_own_id(ref, &header, ids, n))
            return;
    }
    if (n < 2)
        return;
    L->pidref_header = header;
    for (refs = el[1]; enif_get_list_cell(env, refs, &head, &refs);) {
        if (!enif_is_ref(env, head) || mf_pidref(L, head) != NULL) {
            L->pidref_header = 0;
            return;
        }
    }
}

/* Whether plain references may be read from their words: every reference
 * given that is no alias (make_ref/0, monitor/2) has one header word, not
 * an alias's, and an id (mf_pidref_id of its words) of its own; and no
 * alias has that header.  Sets L->ref_header; after alias_layout_check. */
static void ref_layout_check(ErlNifEnv *env, ERL_NIF_TERM info, mf_layout_t *L)
{
    const ERL_NIF_TERM *el, *pair;
    int arity;
    ERL_NIF_TERM refs, aliases, head;
    uint64_t header = 0, ids[64];
    unsigned n = 0;
    L->ref_header = 0;
    if (sizeof(ERL_NIF_TERM) != 8 || !enif_get_tuple(env, info, &arity, &el) || arity != 3)
        return;
    for (refs = el[1]; enif_get_list_cell(env, refs, &head, &refs); n++) {
        if (!enif_is_ref(env, head) || ((uint64_t)head & 0x3) != 0x2)
            return;
        const uint64_t *ref = (const uint64_t *)((uint64_t)head - 0x2);
        if (ref[0] == L->pidref_header || !same_header_own_id(ref, &header, ids, n))
            return;
    }
    if (n < 2)
        return;
    for (aliases = el[0]; enif_get_list_cell(env, aliases, &head, &aliases);)
        if (enif_get_tuple(env, head, &arity, &pair) && arity == 2 &&
            ((uint64_t)pair[0] & 0x3) == 0x2 &&
            ((const uint64_t *)((uint64_t)pair[0] - 0x2))[0] == header)
            return;
    L->ref_header = header;
}

/* Whether mf_is_atom and mf_get_tuple may read words themselves: they
 * must answer as enif_is_atom and enif_get_tuple do for tuples of several
 * sizes and for terms of every other type, boxed or not.  Sets
 * L->fast_terms. */
static void terms_layout_check(ErlNifEnv *env, mf_layout_t *L)
{
    ERL_NIF_TERM bin, map, ref = enif_make_ref(env);
    unsigned char *b = enif_make_new_binary(env, 100, &bin);
    if (b)
        memset(b, 0, 100);
    enif_make_map_from_arrays(env, NULL, NULL, 0, &map);
    /* a hash map (over 32 keys), beside the empty flat one */
    ERL_NIF_TERM ks[40], big_map = map;
    for (int i = 0; i < 40; i++)
        ks[i] = enif_make_int(env, i);
    enif_make_map_from_arrays(env, ks, ks, 40, &big_map);
    ERL_NIF_TERM a = atom_ok, big = enif_make_uint64(env, ~(ErlNifUInt64)0);
    ERL_NIF_TERM samples[] = {
        a, atom_extra, enif_make_int(env, 3), enif_make_int(env, -7), big,
        enif_make_double(env, 1.5), bin, enif_make_sub_binary(env, bin, 1, 20), map, big_map,
        ref, enif_make_list(env, 0), enif_make_list2(env, a, a), enif_make_tuple(env, 0),
        enif_make_tuple1(env, a), enif_make_tuple3(env, a, bin, big),
        enif_make_tuple(env, 9, a, a, a, a, a, a, a, a, a), enif_make_string(env, "ab",
                                                                            ERL_NIF_LATIN1)};
    L->fast_terms = 0;
    ErlNifPid self;
    unsigned n = sizeof(samples) / sizeof(samples[0]);
    if (sizeof(ERL_NIF_TERM) != 8 || !b)
        return;
    /* what enif says, and what the inline reads say */
    mf_layout_t with_enif = *L, inline_reads = *L;
    with_enif.fast_terms = 0;
    inline_reads.fast_terms = 1;
    int ok = 1;
    for (unsigned i = 0; i <= n && ok; i++) {
        ERL_NIF_TERM t = i < n ? samples[i] : enif_self(env, &self) ? enif_make_pid(env, &self) : a;
        int arity1 = -1, arity2 = -1;
        const ERL_NIF_TERM *e1 = NULL, *e2 = NULL;
        int is1 = mf_is_atom(&with_enif, env, t),
            tu1 = mf_get_tuple(&with_enif, env, t, &arity1, &e1);
        int is2 = mf_is_atom(&inline_reads, env, t),
            tu2 = mf_get_tuple(&inline_reads, env, t, &arity2, &e2);
        ok = is1 == is2 && tu1 == tu2 && (!tu1 || (arity1 == arity2 && e1 == e2));
    }
    L->fast_terms = ok;
}

/* The VM's types, from the third element of the load info: `classic'
 * (a release before OTP 29), {records, Samples} (OTP 29: native records
 * made at load) or {unknown, Samples} (a later release).  Sets L->types. */
static void types_check(ErlNifEnv *env, ERL_NIF_TERM info, mf_layout_t *L)
{
    const ERL_NIF_TERM *el, *pair;
    int arity, n;
    L->types = MF_TYPES_UNKNOWN;
    if (!enif_get_tuple(env, info, &arity, &el) || arity != 3)
        return;
    if (el[2] == atom_classic)
        L->types = MF_TYPES_CLASSIC;
    else if (enif_get_tuple(env, el[2], &n, &pair) && n == 2 && pair[0] == atom_records)
        L->types = MF_TYPES_RECORDS;
}

/* Whether native records may be told by their words: every record given
 * (the load info's samples, at least two) has one tag in its header's low
 * six bits, and no boxed term of another type a NIF can make here has it
 * (funs and external pids, ports and references cannot be made here).  Sets
 * L->record_tag; after types_check. */
static void records_layout_check(ErlNifEnv *env, ERL_NIF_TERM info, mf_layout_t *L)
{
    const ERL_NIF_TERM *el, *pair;
    int arity, n;
    ERL_NIF_TERM samples, head;
    uint64_t tag = 0;
    unsigned count = 0;
    L->record_tag = 0;
    if (sizeof(ERL_NIF_TERM) != 8 || L->types == MF_TYPES_CLASSIC ||
        !enif_get_tuple(env, info, &arity, &el) || arity != 3 ||
        !enif_get_tuple(env, el[2], &n, &pair) || n != 2)
        return;
    for (samples = pair[1]; enif_get_list_cell(env, samples, &head, &samples); count++) {
        if (((uint64_t)head & 0x3) != 0x2 || enif_is_tuple(env, head) || enif_is_map(env, head) ||
            enif_is_binary(env, head) || enif_is_ref(env, head) || enif_is_fun(env, head) ||
            enif_is_number(env, head) || enif_is_pid(env, head) || enif_is_port(env, head))
            return;
        uint64_t t = *(const uint64_t *)((uint64_t)head - 0x2) & 0x3F;
        if (t == 0 || (tag && t != tag))
            return;
        tag = t;
    }
    if (count < 2)
        return;
    /* boxed terms of every other type a NIF can make */
    ERL_NIF_TERM bin, map, big_map, ks[40];
    unsigned char *b = enif_make_new_binary(env, 100, &bin);
    if (!b)
        return;
    memset(b, 0, 100);
    for (int i = 0; i < 40; i++)
        ks[i] = enif_make_int(env, i);
    if (!enif_make_map_from_arrays(env, ks, ks, 1, &map) ||
        !enif_make_map_from_arrays(env, ks, ks, 40, &big_map))
        return;
    ERL_NIF_TERM small; /* a heap binary (at most 64 bytes) */
    unsigned char *sb = enif_make_new_binary(env, 8, &small);
    if (!sb)
        return;
    memset(sb, 0, 8);
    ERL_NIF_TERM others[] = {bin, small, enif_make_sub_binary(env, bin, 1, 20), map, big_map,
                             enif_make_ref(env), enif_make_uint64(env, ~(ErlNifUInt64)0),
                             enif_make_int64(env, -(1LL << 62)), enif_make_double(env, 1.5),
                             enif_make_tuple(env, 0), enif_make_tuple2(env, bin, map)};
    for (unsigned i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        if (((uint64_t)others[i] & 0x3) == 0x2 &&
            (*(const uint64_t *)((uint64_t)others[i] - 0x2) & 0x3F) == tag)
            return;
    L->record_tag = tag;
}

/* Whether mf_get_resource may read a resource's term itself.  Two
 * resources of the probe type (8 and 200 bytes; the second kept once
 * more, so that the two binaries' reference counts differ) must have one
 * header word and a binary's address after it, where enif_get_resource
 * finds them: the type's pointer at one offset of both binaries, the
 * object at one offset after it, and before the type, the binary's size
 * (the two differ by 192 bytes) followed by a word the two share, the
 * VM's destructor for resources.  `others' lists references that are no
 * NIF resource (plain ones and aliases: they must fail the shape test; an
 * ETS table's and an atomics array's: magic references whose binaries
 * must fail the destructor test, at least one of them); the inline read
 * must answer as enif_get_resource does for every term here.  64-bit
 * little-endian only (the marker's place).  Sets L->magic_ref_header and
 * the offsets when all of it holds.  A process's NIF call after load (a
 * type opened in load takes no resources until load has returned). */
static void resource_layout_check(ErlNifEnv *env, ErlNifResourceType *rt, ERL_NIF_TERM others,
                                  mf_layout_t *L)
{
    ERL_NIF_TERM head, list;
    L->magic_ref_header = 0;
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    return;
#endif
    if (sizeof(ERL_NIF_TERM) != 8 || sizeof(void *) != 8 || !rt)
        return;
    void *obj[2] = {enif_alloc_resource(rt, 8), enif_alloc_resource(rt, 200)};
    if (!obj[0] || !obj[1]) {
        if (obj[0])
            enif_release_resource(obj[0]);
        if (obj[1])
            enif_release_resource(obj[1]);
        return;
    }
    enif_keep_resource(obj[1]);
    ERL_NIF_TERM term[2] = {enif_make_resource(env, obj[0]), enif_make_resource(env, obj[1])};
    const char *bin[2] = {NULL, NULL};
    mf_layout_t c = *L;
    int ok = 1;
    for (int i = 0; i < 2 && ok; i++) {
        ok = ((uint64_t)term[i] & 0x3) == 0x2;
        if (!ok)
            break;
        const uint64_t *ref = (const uint64_t *)((uint64_t)term[i] - 0x2);
        ok = (uint32_t)ref[1] != MF_REF_MARKER && ref[1] != 0 &&
             (!c.magic_ref_header || ref[0] == c.magic_ref_header);
        c.magic_ref_header = ref[0];
        bin[i] = (const char *)ref[1];
    }
    /* the type's pointer, then the object after it */
    unsigned at;
    for (at = 0; ok && at < 128; at += 8)
        if (*(ErlNifResourceType *const *)(bin[0] + at) == rt &&
            *(ErlNifResourceType *const *)(bin[1] + at) == rt)
            break;
    ok = ok && at < 128;
    c.type_at = at;
    if (ok) {
        ptrdiff_t d0 = (const char *)obj[0] - bin[0], d1 = (const char *)obj[1] - bin[1];
        ok = d0 == d1 && d0 > (ptrdiff_t)at && d0 - (ptrdiff_t)at <= 64;
        c.data_at = (unsigned)d0;
    }
    /* the size, then the destructor, before the type: the first word
     * whose values differ by the sizes' difference and whose next word
     * the two share (OTP 27 has a size in the binary's header too,
     * followed by the reference count, which differs) */
    unsigned size_at;
    for (size_at = 0; ok && size_at + 8 < at; size_at += 8) {
        const uint64_t *w0 = (const uint64_t *)(bin[0] + size_at),
                       *w1 = (const uint64_t *)(bin[1] + size_at);
        if (w1[0] - w0[0] == 192 && w1[1] == w0[1] && w0[1] != 0)
            break;
    }
    ok = ok && size_at + 8 < at;
    c.destructor_at = size_at + 8;
    c.resource_destructor = ok ? *(const uint64_t *)(bin[0] + c.destructor_at) : 0;
    /* what the inline read answers, against enif_get_resource */
    for (int i = 0; i < 2 && ok; i++) {
        void *got = NULL, *want = NULL;
        ok = mf_get_resource(&c, env, term[i], rt, &got) && got == obj[i] &&
             enif_get_resource(env, term[i], rt, &want) && want == got &&
             !mf_get_resource(&c, env, term[i], NULL, &got);
    }
    /* no other reference passes for one: a plain one or an alias fails
     * the shape, another magic reference the destructor */
    unsigned magic = 0;
    for (list = others; ok && enif_get_list_cell(env, list, &head, &list);) {
        void *got = NULL;
        ok = enif_is_ref(env, head) && !enif_get_resource(env, head, rt, &got) &&
             !mf_get_resource(&c, env, head, rt, &got);
        if (ok && ((uint64_t)head & 0x3) == 0x2) {
            const uint64_t *ref = (const uint64_t *)((uint64_t)head - 0x2);
            if (ref[0] == c.magic_ref_header && (uint32_t)ref[1] != MF_REF_MARKER) {
                magic++;
                ok = *(const uint64_t *)((const char *)ref[1] + c.destructor_at) !=
                     c.resource_destructor;
            }
        }
    }
    ok = ok && magic > 0 && enif_is_list(env, list);
    enif_release_resource(obj[0]);
    enif_release_resource(obj[1]);
    enif_release_resource(obj[1]);
    if (ok)
        *L = c;
}

/* MSGFLOW_TERM_READS=off in the environment: every read through enif, as
 * on a VM whose layout the checks refuse (for tests and benches of that
 * path). */
static int reads_forced_off(void)
{
    char want[8];
    size_t len = sizeof(want);
    return enif_getenv("MSGFLOW_TERM_READS", want, &len) == 0 && strcmp(want, "off") == 0;
}

int mf_layout_load(ErlNifEnv *env, ERL_NIF_TERM load_info)
{
    if (!pid_layout_ok(env))
        return 0;
    mf_layout_t found = layout_off;
    types_check(env, load_info, &found);
    if (reads_forced_off()) {
        /* the types are the release's, the same on an upgrade */
        if (!api_published) {
            layout_api = found;
            api_published = 1;
        }
        atomic_store_explicit(&mf_layout_cur, &layout_api, memory_order_release);
        return 1;
    }
    extra_layout_check(env, &found);
    alias_layout_check(env, load_info, &found);
    ref_layout_check(env, load_info, &found);
    terms_layout_check(env, &found);
    records_layout_check(env, load_info, &found);
    /* the resource read is checked after load (mf_layout_probe): as the
     * layout in use has it, so that an upgrade on this VM keeps it */
    const mf_layout_t *cur = mf_layout_get();
    found.magic_ref_header = cur->magic_ref_header;
    found.resource_destructor = cur->resource_destructor;
    found.destructor_at = cur->destructor_at;
    found.type_at = cur->type_at;
    found.data_at = cur->data_at;
    int same = cur->flatmap_header == found.flatmap_header &&
               cur->pidref_header == found.pidref_header && cur->ref_header == found.ref_header &&
               cur->fast_terms == found.fast_terms && cur->types == found.types &&
               cur->record_tag == found.record_tag &&
               cur->magic_ref_header == found.magic_ref_header &&
               cur->resource_destructor == found.resource_destructor &&
               cur->destructor_at == found.destructor_at && cur->type_at == found.type_at &&
               cur->data_at == found.data_at;
    if (same)
        return 1; /* an upgrade on this VM */
    if (found_published) {
        /* not what was found before: its slot may be read, so not rewritten */
        atomic_store_explicit(&mf_layout_cur, &layout_off, memory_order_release);
        return 1;
    }
    layout_found = found;
    found_published = 1;
    atomic_store_explicit(&mf_layout_cur, &layout_found, memory_order_release);
    return 1;
}

void mf_layout_open_type(ErlNifEnv *env)
{
    probe_rt = enif_open_resource_type(env, NULL, "mf_layout_probe", NULL,
                                       ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER, NULL);
}

int mf_layout_probe(ErlNifEnv *env, ERL_NIF_TERM others)
{
    int idle = 0;
    if (!atomic_compare_exchange_strong(&probing, &idle, 1))
        return mf_layout_get()->magic_ref_header != 0; /* another call checks */
    const mf_layout_t *cur = mf_layout_get();
    int on = cur->magic_ref_header != 0;
    /* only the layout the first load found, checked once: every read off
     * (MSGFLOW_TERM_READS=off, a layout that changed) stays so */
    if (cur == &layout_found && !on && !probed_published) {
        mf_layout_t c = *cur;
        resource_layout_check(env, probe_rt, others, &c);
        if (c.magic_ref_header) {
            layout_probed = c;
            probed_published = 1;
            /* unless a load published another layout meanwhile */
            const mf_layout_t *was = &layout_found;
            on = atomic_compare_exchange_strong(&mf_layout_cur, &was, &layout_probed);
        }
    }
    atomic_store_explicit(&probing, 0, memory_order_release);
    return on;
}

int mf_layout_fast_terms(void)
{
    return mf_layout_get()->fast_terms != 0;
}

int mf_layout_fast_resources(void)
{
    return mf_layout_get()->magic_ref_header != 0;
}

int mf_layout_plain_refs(void)
{
    return mf_layout_get()->ref_header != 0;
}

int mf_layout_alias_owner(void)
{
    return mf_layout_get()->pidref_header != 0;
}

ERL_NIF_TERM mf_layout_native_records(void)
{
    const mf_layout_t *L = mf_layout_get();
    return L->types == MF_TYPES_CLASSIC ? atom_none : L->record_tag ? atom_read : atom_unread;
}

int mf_layout_fast_extra(void)
{
    return mf_layout_get()->flatmap_header != 0;
}
