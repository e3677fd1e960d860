/*
 * mf_agg.h -- a run's aggregate: every row the collector holds, folded from
 * the snapshot's deltas in C (issue 53; c_src/DESIGN.md, "A delta's
 * consumers").
 *
 * What it owns: the endpoints its rows name, and the rows.
 *
 * An endpoint is a number (1, 2, ...; 0 is none) for a local pid's word, or
 * for the external format of any other endpoint term (a registered name,
 * {Name, Node}, a remote pid, a port, an alias, a group end such as
 * {exited, LabelId, Node}).  Numbers are never reused while the aggregate
 * lives.  Each endpoint has a group end (an endpoint number the owner sets
 * once it has labelled it, 0 until then), and the open window's ends: the
 * partners whose pair had its first messages of the window, and the
 * messages, in and out.
 *
 * A row is keyed by (table, sender, receiver): the pairs; the rolled-up rows
 * (replies to a process's aliases, counted for the process, and rows rolled
 * up); the dead letters; and the groups, keyed by the ends' group ends.  A
 * row holds what msgflow_row.erl's rows hold: messages since start, the
 * latest window with traffic and its count, the earlier windows' counts
 * (window, count; none before the oldest kept window), the highest rate of
 * a closed window before the last (mHz), and the messages by kind word: none
 * (kinds off), all of one word, or a list of at most max_kinds words of the
 * row's own plus each kind's `other'.
 *
 * Two bounded indexes of the busiest keys (msgflow_store_index.erl's rule: a
 * key whose value rises above the index's floor is in it, and every key not
 * in it has at most the floor): by messages since start, and by messages in
 * the open window; a key's value is its pairs row's plus its rolled-up
 * row's.  Keys whose receiver is a local registered name are in neither;
 * the pairs rows of such keys are listed apart.
 *
 * Memory: every block from the aggregate's mf_alloc, counted in `bytes'.
 *
 * Threads: none of its own.  One writer at a time (the collector: adds,
 * window closes, group ends, roll-ups); readers only while no writer runs.
 * The NIF (mf_agg_nif.c) holds a read-write lock around each call.
 */
#ifndef MF_AGG_H
#define MF_AGG_H

#include <stddef.h>
#include <stdint.h>

#include "mf_alloc.h"

enum { MF_AGG_PAIRS = 0, MF_AGG_ROLLED = 1, MF_AGG_DEAD = 2, MF_AGG_GROUPS = 3, MF_AGG_TABLES = 4 };

/* An endpoint's flags (mf_agg_end_bytes). */
#define MF_AGG_NAMED 1u /* a local registered name: Name or {Name, node()} */
#define MF_AGG_GROUP 2u /* a group end or a rollup (never labelled: not new) */
#define MF_AGG_PAIRS_OUT 4u  /* the sender of a pairs row (ever) */
#define MF_AGG_ROLLED_OUT 8u /* the sender of a rolled-up row (ever) */
#define MF_AGG_LISTED 16u    /* in the released list, not yet taken: kept */

typedef struct {
    uint64_t word; /* a kind word (mf_kind.h) */
    uint64_t n;    /* messages */
} mf_agg_kind;

typedef struct mf_agg_row {
    uint32_t from, to;     /* endpoint numbers; from == 0: a free row */
    uint32_t table : 2;    /* MF_AGG_* */
    uint32_t named_at : 30; /* its place in the named rows + 1 (0: none) */
    uint32_t last_window;  /* the latest window with traffic */
    uint64_t total;        /* messages since start */
    uint64_t last_count;   /* messages in last_window */
    uint64_t peak_mhz;     /* highest rate of a closed window before the last */
    uint64_t *hist;        /* (window << 32) | min(count, 2^32 - 1), ascending */
    uint32_t hist_n, hist_cap;
    /* kinds: kinds_n == 0: `one' is the word of all (0: no kinds);
     * else `list' holds kinds_n words, newest first */
    uint32_t kinds_n, kinds_cap;
    union {
        uint64_t one;
        mf_agg_kind *list;
    } kinds;
} mf_agg_row;

typedef struct mf_agg_end {
    uint64_t word;          /* the local pid's word, or 0 */
    unsigned char *etf;     /* else its external format (owned) */
    uint32_t etf_len;
    uint32_t flags;         /* MF_AGG_NAMED */
    uint32_t group;         /* its group end (0: not labelled yet) */
    uint32_t rollup;        /* what it becomes in a row rolled up (0: itself) */
    uint32_t rows;          /* rows naming it */
    uint32_t refs;          /* endpoints whose group or rollup it is */
    uint32_t released;      /* the window it was let go in (0: it is not) */
    uint32_t idle_seen;     /* the last window mf_agg_idle_ends gave it for */
    uint32_t window;        /* the window the counts below are of */
    uint32_t in_partners, out_partners;
    uint32_t partner;       /* the receiver of its busiest pairs row as
                             * seen when it was added to (0: none yet; a
                             * number that may since be another's) */
    uint64_t in_msgs, out_msgs;
    uint64_t partner_msgs;  /* that row's messages then */
} mf_agg_end;

/* A key of the busiest indexes with its value. */
typedef struct {
    uint64_t value;
    uint32_t from, to;
} mf_agg_top;

typedef struct mf_agg mf_agg;

/* Settings fixed for the aggregate's life. */
typedef struct {
    unsigned keep;          /* windows of history a row keeps (>= 1) */
    unsigned max_kinds;     /* kind words of a row's own (>= 1) */
    uint64_t other_tag;     /* the tag word of `other' (mf_kind.h: the
                             * kind word of kind k's other is
                             * mf_kind_make(other_tag, k)) */
    unsigned kind_bits;     /* low bits of a kind word that are the kind */
    unsigned reply_kind;    /* the kind of a reply: not counted out */
    unsigned top_total;     /* keys of the index by total */
    unsigned top_window;    /* keys of the index by the open window */
} mf_agg_opts;

/* A new empty aggregate, window 1 open.  NULL when out of memory.  Any
 * thread; the caller owns it (mf_agg_free). */
mf_agg *mf_agg_new(const mf_alloc *a, const mf_agg_opts *o);
void mf_agg_free(mf_agg *g);

/* The endpoint of a local pid's word, or of an external format (copied),
 * made if new (with `flags').  0 when out of memory.  Writer only. */
uint32_t mf_agg_end_word(mf_agg *g, uint64_t word);
uint32_t mf_agg_end_bytes(mf_agg *g, const unsigned char *etf, size_t len, uint32_t flags);
/* Found only (0: not an endpoint yet).  Readers too. */
uint32_t mf_agg_find_word(const mf_agg *g, uint64_t word);
uint32_t mf_agg_find_bytes(const mf_agg *g, const unsigned char *etf, size_t len);
/* Endpoint e (1..ends); NULL for a number out of range.  Readers too. */
const mf_agg_end *mf_agg_end_at(const mf_agg *g, uint32_t e);
uint32_t mf_agg_ends(const mf_agg *g);

/* Endpoint e's group end is now `group' (an endpoint number); -1 when
 * either is no endpoint.  Then mf_agg_groups_ready adds the deltas that
 * waited for group ends they now have to their groups (one pass over
 * them): 0, or -1 out of memory (those wait on).  Writer only. */
int mf_agg_set_group(mf_agg *g, uint32_t e, uint32_t group);
int mf_agg_groups_ready(mf_agg *g);
/* The endpoints that are new since the last call (none labelled; a freed
 * number made anew is new again): their numbers written to out (room for
 * max), how many returned.  Writer only. */
uint32_t mf_agg_take_new(mf_agg *g, uint32_t *out, uint32_t max);

/* n messages of kind word `kind' (0: none) from `from' to `to' in the open
 * window, in table MF_AGG_PAIRS, MF_AGG_ROLLED or MF_AGG_DEAD (a pair's
 * group row follows once both its ends have group ends).  0; 1 when the key
 * had no row and none may be made (mf_agg_full, or out of memory): nothing
 * was added, and the caller counts the messages as overflow.  Writer
 * only. */
int mf_agg_add(mf_agg *g, unsigned table, uint32_t from, uint32_t to, uint64_t kind,
               uint64_t n);

/* Endpoint e rolls up to `to' (an endpoint number; 0: it stays itself)
 * when its rows are rolled up (mf_agg_sweep): -1 when either is no
 * endpoint.  Writer only. */
int mf_agg_set_rollup(mf_agg *g, uint32_t e, uint32_t to);

/* The next rows of `table' (from where its last sweep stopped; `budget'
 * rows at most) whose last window is `idle' or earlier (dead letters: any)
 * and one of whose ends rolls up: each leaves its table for the row of its
 * ends' rollups in MF_AGG_ROLLED (dead letters: MF_AGG_DEAD), added to
 * what is there as msgflow_row:merge/3 adds.  The key leaves the busiest
 * indexes, and is ranked again by its row in the other table; the key
 * rolled up to is ranked by both.  *moved: the messages of MF_AGG_PAIRS
 * rows moved.  1 when the sweep reached the end of the table (the next
 * starts anew), 0 else, -1 out of memory (the rows not moved stay).
 * Writer only. */
int mf_agg_sweep(mf_agg *g, unsigned table, uint32_t idle, uint32_t budget, uint64_t *moved);

/* Adds flags to endpoint e's (MF_AGG_GROUP).  Writer only. */
void mf_agg_flag(mf_agg *g, uint32_t e, uint32_t flags);

/* The endpoints of the rows whose last window is `idle' (those that went
 * idle as window idle + 2 closed: the ones that may roll up now) that
 * roll up to nothing yet and are no group end, each once for that
 * window: the owner checks which are gone (mf_agg_set_rollup).  Reads the
 * rows with traffic in window idle (a list kept for the open window and
 * the three before: none for an older one), not every row: at most `rows'
 * of them from *cursor on (start with 0), writing at most 2 * rows ends
 * to out; *cursor is UINT32_MAX when the list is done.  Writer only. */
uint32_t mf_agg_idle_ends(mf_agg *g, uint32_t idle, uint32_t *cursor, uint32_t rows, uint32_t *out);

/* Endpoints no row names any more (and no endpoint has as its group or
 * rollup) since the last call, at most max written to out: the owner's
 * labels may let them go.  An endpoint is freed (its number reused) two
 * windows after, when nothing names it still.  Writer only. */
uint32_t mf_agg_take_released(mf_agg *g, uint32_t *out, uint32_t max);

/* No new row may be made from now on (1), or again (0); no new pairs row
 * past `max' of them (0: no bound).  Writer only. */
void mf_agg_set_full(mf_agg *g, int full);
void mf_agg_set_max_pairs(mf_agg *g, uint64_t max);

/* The pairs rows whose receiver is a named endpoint, from *cursor on
 * (start with 0); NULL at the end.  Readers too. */
const mf_agg_row *mf_agg_named(const mf_agg *g, uint32_t *cursor);

/* The busiest keys of pairs and replies that found no row, since the last
 * call: a Space-Saving summary (mf_topk.h) of endpoint numbers, emptied;
 * its slots written to out (room for MF_TOPK_SLOTS), *min as
 * mf_topk_take's.  Writer only. */
struct mf_topk_slot;
unsigned mf_agg_take_top(mf_agg *g, struct mf_topk_slot *out, uint64_t *min);

/* The open window closed after `ms' milliseconds; the next is open.  Its
 * busiest index becomes the last window's, and its ends are kept with
 * `min_partners' partners or more, or a named endpoint (mf_agg_last_ends).
 * 0, or -1 out of memory (the window closed all the same, its ends not
 * kept).  Writer only. */
int mf_agg_close(mf_agg *g, uint64_t ms, uint32_t min_partners);

/* The open window's number. */
uint32_t mf_agg_open(const mf_agg *g);
/* The length in ms of closed window w, 0 when it is not kept. */
uint64_t mf_agg_window_ms(const mf_agg *g, uint32_t w);

/* The row of a key, NULL when none.  Readers too. */
const mf_agg_row *mf_agg_find(const mf_agg *g, unsigned table, uint32_t from, uint32_t to);
/* The rows of a table from number *cursor on (start with 0): the next one,
 * or NULL at the end; *cursor moves past it.  A row added meanwhile may or
 * may not come; none comes twice.  Readers too. */
const mf_agg_row *mf_agg_next(const mf_agg *g, unsigned table, uint32_t *cursor);
/* Rows of a table. */
uint64_t mf_agg_size(const mf_agg *g, unsigned table);

/* The busiest keys, highest first (ties by key), at most `max' written to
 * out; which: 0 by total, 1 the open window, 2 the last closed one.
 * *floor: the highest value the index let go of (a key not in it has at
 * most that).  Readers too. */
uint32_t mf_agg_busiest(const mf_agg *g, unsigned which, mf_agg_top *out, uint32_t max,
                        uint64_t *floor);

/* The last closed window's ends kept (mf_agg_close): endpoint numbers with
 * their in and out figures, from *cursor on; NULL at the end. */
typedef struct {
    uint32_t end, in_partners, out_partners;
    uint64_t in_msgs, out_msgs;
} mf_agg_ends_row;
const mf_agg_ends_row *mf_agg_last_ends(const mf_agg *g, uint32_t *cursor);

/* The open window's receivers with at least min_senders senders and
 * min_messages messages in it, from *cursor on (start with 0); NULL at the
 * end.  Readers too. */
const mf_agg_end *mf_agg_open_receivers(const mf_agg *g, uint32_t min_senders, uint64_t min_messages,
                                        uint32_t *cursor);

/* The receiver of endpoint e's busiest pairs row as its sender (as seen
 * when each was added to), while that receiver is an endpoint (0: none):
 * whom a port closed before it was labelled sent to, its owner.  Readers
 * too. */
uint32_t mf_agg_partner(const mf_agg *g, uint32_t e);

/* The messages of a table's rows, added up (kept as rows change: reads
 * no row).  Readers too. */
uint64_t mf_agg_sum(const mf_agg *g, unsigned table);

/* Bytes the aggregate holds. */
uint64_t mf_agg_bytes(const mf_agg *g);

#endif
