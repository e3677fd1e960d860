/*
 * msgflow-top --node NAME@HOST [--cookie C | --cookie-file F] [--interval Ms]
 *             [--top N] [--by G] [--once] [--keep] [--start]
 *
 * A C node (ei_connect, as erl_call is) that attaches to a running
 * distributed node, loads msgflow's code there over RPC when it is missing
 * (from this build, through msgflow_cluster_code:install/1, as the cluster
 * ships it: refused on a node of another OTP release), starts msgflow unless
 * the node holds a run (running, or stopped: that one is shown as it is;
 * --start starts anew), and every interval asks the node for the rows it
 * shows: the `top' view, grouped, sorted, filtered and limited there
 * through msgflow's query path, as a version 6 dump (msgflow_dump) of
 * those rows only; this program renders them.  Its requests go to
 * msgflow_remote, a process of msgflow's own that is never traced, so
 * that they are not counted.
 *
 * On a terminal it is an interactive full-screen view (the alternate
 * screen, keys read one at a time): s sorts (messages, rate, peak: the
 * busiest window's rate, bytes: what its messages copied, from sampled
 * sizes, by process, a BYTES column then; wait: its receiver's mailbox
 * wait in the last window, a WAIT MS column then), g groups, / filters by a label substring (the
 * node keeps the rows with it in an end's label or text, upper and lower
 * case alike), the arrows move a cursor, Enter and o open the row's sender
 * or receiver (the node's `process' view, as the shell prints it), v shows
 * the node's other views in turn (receivers, calls, hotspots, ...: their
 * text), b shows the bottlenecks view, space pauses, + and - change the interval, h or ? shows the
 * keys, q quits.  It uses the terminal's size and follows SIGWINCH.  When
 * stdout is no terminal, or with --once, it prints plain tables (COLUMNS
 * wide, else 80) and no control codes.
 *
 * q, a signal (INT, TERM, HUP, QUIT, PIPE) or the node going away end it:
 * the terminal is restored, and the tracing it started is stopped, unless
 * --keep.  Should it die without that (SIGKILL, a dropped connection), the
 * node stops the run itself 2 s after the connection is gone
 * (msgflow:start/1's `owner').
 *
 * Memory and threads: one thread.  The rows' dump and its rows are
 * malloc'd here and freed before the next fetch; the names of the node's
 * views (asked once) and the text a view or an opened row shows are
 * malloc'd strings the screen owns, freed when it leaves them and at the
 * end.
 *
 * Exit: 0 done; 1 a failure (the message says which); 2 bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <ei.h>

#include "mf_dump.h"
#include "mf_file.h"
#include "mf_table.h"

/* what this build's beams and NIF are for (CMake asks the erl it builds
 * with) */
#ifndef MF_OTP_RELEASE
#define MF_OTP_RELEASE "unknown"
#endif
#ifndef MF_NIF_VERSION
#define MF_NIF_VERSION "unknown"
#endif

#define RPC_TIMEOUT_MS 30000
/* how long the node keeps counting after this program's connection went
 * away without a stop (see start_msgflow) */
#define OWNER_GRACE_MS 2000

/* Set by every signal that ends the program (INT, TERM, HUP, QUIT, PIPE):
 * the loop then stops what it started and exits. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

static const char usage[] =
    "usage: msgflow-top --node NAME@HOST [--cookie C | --cookie-file F] [--interval Ms]\n"
    "                   [--top N] [--by process|name|module|application|node|kind]\n"
    "                   [--once] [--keep] [--start] [--code DIR] [--from T [--to T]]\n"
    "  --from, --to: a range of the node's kept history (start/1's history\n"
    "  option) instead of the counts now: system time in ms, or RFC 3339\n"
    "  (2026-11-26T04:00:00Z); --to defaults to now\n"
    "  --code DIR: the msgflow application directory (ebin/, priv/) shipped to a\n"
    "  node without msgflow; default: the build beside this program\n"
    "  (its directory's ../default/lib/msgflow)\n";

/* The msgflow application directory (ebin/ and priv/) whose code is
 * shipped to a node without msgflow: --code, else the rebar3 build this
 * program was copied beside (tools/build-nif.sh puts it in the build
 * directory's bin/, next to default/lib/msgflow).  Set once in main. */
static char code_dir[PATH_MAX];
/* Without --code: this program's directory, where the build put the NIF
 * of this program's release beside it; "" with --code (code_dir/priv). */
static char nif_dir[PATH_MAX];

/* code_dir (and nif_dir) from the path of this program
 * (/proc/self/exe); 0, or -1. */
static int code_dir_beside_me(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = 0;
    char nif[PATH_MAX + 32];
    snprintf(nif, sizeof(nif), "%s/msgflow_tracer.so", exe);
    if (access(nif, R_OK) == 0)
        snprintf(nif_dir, sizeof(nif_dir), "%s", exe);
    return (size_t)snprintf(code_dir, sizeof(code_dir), "%s/../default/lib/msgflow", exe) <
                   sizeof(code_dir)
               ? 0
               : -1;
}

typedef struct {
    ei_cnode ec;
    int fd;
    const char *node;
} conn;

/* ------------------------------------------------------------------ rpc */

/* Sends mod:fun(Args) (args: a whole encoded list, no version byte) and
 * waits for the answer into the caller's `reply'.  Use rpc() below. */
static int rpc_wait(conn *c, const char *mod, const char *fun, ei_x_buff *args, ei_x_buff *reply)
{
    erlang_msg msg;
    if (ei_rpc_to(&c->ec, c->fd, (char *)mod, (char *)fun, args->buff, args->index) < 0)
        return -1;
    for (;;) {
        reply->index = 0;
        int r = ei_rpc_from(&c->ec, c->fd, RPC_TIMEOUT_MS, &msg, reply);
        if (r == ERL_TICK)
            continue;
        if (r == ERL_TIMEOUT || r == ERL_ERROR)
            return -1;
        if (r != ERL_MSG || (msg.msgtype != ERL_SEND && msg.msgtype != ERL_REG_SEND))
            continue;
        int idx = 0, ver, arity;
        char rex[MAXATOMLEN_UTF8];
        if (ei_decode_version(reply->buff, &idx, &ver) < 0 ||
            ei_decode_tuple_header(reply->buff, &idx, &arity) < 0 || arity != 2 ||
            ei_decode_atom(reply->buff, &idx, rex) < 0 || strcmp(rex, "rex") != 0)
            continue; /* not the rpc's answer */
        reply->index -= idx;
        memmove(reply->buff, reply->buff + idx, (size_t)reply->index);
        return 0;
    }
}

/* Calls mod:fun on the node with the arguments begun by args_new.  Ends and
 * frees `args'; `reply' is set up here (the rpc's result term, once the
 * {rex, _} wrapper is gone) and the caller frees it with ei_x_free in every
 * case.  0, or -1 when the node did not answer. */
static int rpc(conn *c, const char *mod, const char *fun, ei_x_buff *args, ei_x_buff *reply)
{
    ei_x_encode_empty_list(args);
    ei_x_new(reply);
    int rc = rpc_wait(c, mod, fun, args, reply);
    ei_x_free(args);
    return rc;
}

/* Begins the argument list of an rpc: n terms, then rpc(). */
static void args_new(ei_x_buff *x, int n)
{
    ei_x_new(x);
    if (n)
        ei_x_encode_list_header(x, n);
}

/* The reply as text, for messages. */
static void reply_text(ei_x_buff *reply, char *out, size_t len)
{
    char *s = NULL;
    int idx = 0;
    if (ei_s_print_term(&s, reply->buff, &idx) >= 0 && s) {
        snprintf(out, len, "%s", s);
        free(s);
    } else {
        snprintf(out, len, "(unprintable reply)");
    }
}

static int reply_is_atom(ei_x_buff *reply, const char *atom)
{
    char a[MAXATOMLEN_UTF8];
    int idx = 0;
    return ei_decode_atom(reply->buff, &idx, a) == 0 && strcmp(a, atom) == 0;
}

/* erlang:system_info(What) of the node as a string into out (a release,
 * a NIF version); 0, or -1 when the node did not answer with one. */
static int node_info(conn *c, const char *what, char *out, int len)
{
    ei_x_buff args, reply;
    args_new(&args, 1);
    ei_x_encode_atom(&args, what);
    int r = rpc(c, "erlang", "system_info", &args, &reply);
    int idx = 0, type, size;
    if (r == 0 && (ei_get_type(reply.buff, &idx, &type, &size) != 0 || type != ERL_STRING_EXT ||
                   size >= len || ei_decode_string(reply.buff, &idx, out) != 0))
        r = -1;
    ei_x_free(&reply);
    return r;
}

/* --------------------------------------------------------- connecting */

static int read_cookie(const char *file, char *cookie, size_t len)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    if (!fgets(cookie, (int)len, f))
        cookie[0] = 0;
    fclose(f);
    cookie[strcspn(cookie, "\r\n")] = 0;
    return cookie[0] ? 0 : -1;
}

static int epmd_port(void)
{
    const char *p = getenv("ERL_EPMD_PORT");
    return p && atoi(p) > 0 ? atoi(p) : 4369;
}

/* Asks epmd on host for alive's port: 1 registered, 0 not, -1 no epmd. */
static int epmd_knows(const char *host, const char *alive)
{
    struct addrinfo hints = {0}, *res;
    char port[16];
    snprintf(port, sizeof(port), "%d", epmd_port());
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    size_t n = strlen(alive);
    unsigned char req[3 + 256];
    if (n > 255)
        n = 255;
    req[0] = (unsigned char)((n + 1) >> 8);
    req[1] = (unsigned char)(n + 1);
    req[2] = 122; /* PORT_PLEASE2_REQ */
    memcpy(req + 3, alive, n);
    unsigned char resp[2];
    int known = -1;
    if (write(fd, req, 3 + n) == (ssize_t)(3 + n) && read(fd, resp, 2) == 2 && resp[0] == 119)
        known = resp[1] == 0;
    close(fd);
    return known;
}

static int attach(conn *c, const char *cookie, const char *cookie_from)
{
    char me[64];
    snprintf(me, sizeof(me), "msgflow_top_%ld", (long)getpid());
    if (ei_connect_init(&c->ec, me, cookie, (short)(time(NULL) & 0x7fff)) < 0) {
        fprintf(stderr, "msgflow-top: cannot initialise the C node (ei_connect_init)\n");
        return -1;
    }
    c->fd = ei_connect_tmo(&c->ec, (char *)c->node, 10000);
    if (c->fd >= 0)
        return 0;
    const char *at = strchr(c->node, '@');
    char alive[256];
    snprintf(alive, sizeof(alive), "%.*s", (int)(at - c->node), c->node);
    switch (epmd_knows(at + 1, alive)) {
    case -1:
        fprintf(stderr, "msgflow-top: epmd is not running on %s (port %d): no Erlang node "
                        "there, or it was started without distribution\n", at + 1, epmd_port());
        break;
    case 0:
        fprintf(stderr, "msgflow-top: unknown node %s: epmd on %s has no node named %s\n",
                c->node, at + 1, alive);
        break;
    default:
        fprintf(stderr, "msgflow-top: %s refused the connection: wrong cookie? (the cookie "
                        "came from %s)\n", c->node, cookie_from);
    }
    return -1;
}

/* -------------------------------------------------------- loading code */

/* One file of the local build, read whole (mf_read_file); NULL on error,
 * with a message. */
static char *read_build_file(const char *dir, const char *name, size_t *len)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path)) {
        fprintf(stderr, "msgflow-top: path too long: %s/%s\n", dir, name);
        return NULL;
    }
    char *data = mf_read_file(path, len);
    if (!data)
        fprintf(stderr, "msgflow-top: cannot read %s (run make; or give --code DIR)\n", path);
    return data;
}

/* Encodes [{Module, Beam}] of every .beam in ebin into x; 0, or -1. */
static int encode_beams(ei_x_buff *x, const char *ebin)
{
    DIR *dh = opendir(ebin);
    if (!dh) {
        fprintf(stderr, "msgflow-top: no local build at %s (run make; or give --code DIR)\n",
                ebin);
        return -1;
    }
    struct dirent *de;
    int failed = 0;
    while (!failed && (de = readdir(dh)) != NULL) {
        size_t n = strlen(de->d_name), len;
        if (n <= 5 || strcmp(de->d_name + n - 5, ".beam") != 0 || n - 5 >= MAXATOMLEN)
            continue;
        char mod[MAXATOMLEN];
        snprintf(mod, sizeof(mod), "%.*s", (int)(n - 5), de->d_name);
        char *bin = read_build_file(ebin, de->d_name, &len);
        if (!bin) {
            failed = 1;
            break;
        }
        ei_x_encode_list_header(x, 1);
        ei_x_encode_tuple_header(x, 2);
        ei_x_encode_atom(x, mod);
        ei_x_encode_binary(x, bin, (long)len);
        free(bin);
    }
    closedir(dh);
    ei_x_encode_empty_list(x);
    return failed ? -1 : 0;
}

/* msgflow present on the node?  If not, it is shipped from this build the
 * way msgflow's cluster ships it: msgflow_cluster_code loaded there, and
 * its install/1 given the bundle (release and NIF version this build is
 * for, application spec, modules, NIF), which refuses a node of another
 * release before it writes anything. */
static int ensure_code(conn *c)
{
    ei_x_buff args, reply;
    args_new(&args, 1);
    ei_x_encode_atom(&args, "msgflow");
    int r = rpc(c, "code", "which", &args, &reply);
    int missing = r == 0 && reply_is_atom(&reply, "non_existing");
    ei_x_free(&reply);
    if (r != 0)
        return -1;
    if (!missing)
        return 0;
    fprintf(stderr, "msgflow-top: msgflow is not loaded on %s; loading this build's code there "
                    "(the node's user cache directory)\n", c->node);
    /* a node of another release could not even load this build's loader:
     * refused here with the reason install/1 would give */
    char rel[64], nif[64];
    if (node_info(c, "otp_release", rel, sizeof(rel)) != 0 ||
        node_info(c, "nif_version", nif, sizeof(nif)) != 0)
        return -1;
    if (strcmp(rel, MF_OTP_RELEASE) != 0 || strcmp(nif, MF_NIF_VERSION) != 0) {
        fprintf(stderr, "msgflow-top: could not load msgflow on %s (this build is for OTP %s, "
                        "NIF %s): {error, {incompatible, {otp_release, \"%s\", nif_version, "
                        "\"%s\"}}}\n", c->node, MF_OTP_RELEASE, MF_NIF_VERSION, rel, nif);
        return -1;
    }

    /* the beams of code_dir; the NIF beside this program (the build puts
     * the one of this program's release there), else code_dir's priv/ */
    char ebin[PATH_MAX + 8], priv[PATH_MAX + 8], text[512];
    snprintf(ebin, sizeof(ebin), "%s/ebin", code_dir);
    if (nif_dir[0])
        snprintf(priv, sizeof(priv), "%s", nif_dir);
    else
        snprintf(priv, sizeof(priv), "%s/priv", code_dir);
    size_t len;
    char *loader = read_build_file(ebin, "msgflow_cluster_code.beam", &len);
    if (!loader)
        return -1;
    args_new(&args, 3);
    ei_x_encode_atom(&args, "msgflow_cluster_code");
    ei_x_encode_string(&args, "msgflow_cluster_code.beam");
    ei_x_encode_binary(&args, loader, (long)len);
    free(loader);
    r = rpc(c, "code", "load_binary", &args, &reply);
    if (r == 0 && reply_is_atom(&reply, "error"))
        r = -1;
    int idx = 0, arity;
    if (r == 0 && (ei_decode_tuple_header(reply.buff, &idx, &arity) != 0 || arity != 2 ||
                   ei_skip_term(reply.buff, &idx) != 0 ||
                   ei_decode_atom(reply.buff, &idx, text) != 0 ||
                   strcmp(text, "msgflow_cluster_code") != 0)) {
        reply_text(&reply, text, sizeof(text));
        fprintf(stderr, "msgflow-top: %s cannot load this build's code (%s): it is built for "
                        "OTP %s\n", c->node, text, MF_OTP_RELEASE);
        r = -1;
    }
    ei_x_free(&reply);
    if (r != 0)
        return -1;

    char *app = read_build_file(ebin, "msgflow.app", &len);
    size_t so_len;
    char *so = app ? read_build_file(priv, "msgflow_tracer.so", &so_len) : NULL;
    args_new(&args, 1);
    ei_x_encode_map_header(&args, 5);
    ei_x_encode_atom(&args, "otp_release");
    ei_x_encode_string(&args, MF_OTP_RELEASE);
    ei_x_encode_atom(&args, "nif_version");
    ei_x_encode_string(&args, MF_NIF_VERSION);
    ei_x_encode_atom(&args, "app");
    ei_x_encode_binary(&args, app ? app : "", app ? (long)len : 0);
    ei_x_encode_atom(&args, "nif");
    ei_x_encode_binary(&args, so ? so : "", so ? (long)so_len : 0);
    ei_x_encode_atom(&args, "beams");
    int failed = !app || !so || encode_beams(&args, ebin) != 0;
    free(app);
    free(so);
    if (failed) {
        ei_x_free(&args);
        return -1;
    }
    r = rpc(c, "msgflow_cluster_code", "install", &args, &reply);
    if (r == 0 && !reply_is_atom(&reply, "ok")) {
        reply_text(&reply, text, sizeof(text));
        fprintf(stderr, "msgflow-top: could not load msgflow on %s (this build is for OTP %s, "
                        "NIF %s): %s\n", c->node, MF_OTP_RELEASE, MF_NIF_VERSION, text);
        r = -1;
    }
    ei_x_free(&reply);
    return r;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (!interrupted && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* --------------------------------------------- requests to msgflow_remote */

/* Sends {msgflow_call, Self, Ref, Call} to the node's msgflow_remote (a
 * process of msgflow's own, never traced: what this program asks is not
 * counted) and waits for {msgflow_reply, Ref, Reply}.  `call' holds the
 * encoded Call (no version byte) and is freed here; `reply' is set up
 * here, holds Reply once this returns 0, and the caller frees it.  -1
 * when the node did not answer within RPC_TIMEOUT_MS or went away. */
static int call_node(conn *c, ei_x_buff *call, ei_x_buff *reply)
{
    static long next_ref = 1;
    long ref = next_ref++;
    ei_x_buff msg;
    ei_x_new_with_version(&msg);
    ei_x_encode_tuple_header(&msg, 4);
    ei_x_encode_atom(&msg, "msgflow_call");
    ei_x_encode_pid(&msg, ei_self(&c->ec));
    ei_x_encode_long(&msg, ref);
    ei_x_append_buf(&msg, call->buff, call->index);
    ei_x_free(call);
    ei_x_new(reply);
    int rc = ei_reg_send_tmo(&c->ec, c->fd, "msgflow_remote", msg.buff, msg.index, RPC_TIMEOUT_MS);
    ei_x_free(&msg);
    if (rc < 0)
        return -1;
    for (;;) {
        erlang_msg m;
        reply->index = 0;
        int r = ei_xreceive_msg_tmo(c->fd, &m, reply, RPC_TIMEOUT_MS);
        if (r == ERL_TICK)
            continue;
        if (r == ERL_ERROR || r == ERL_TIMEOUT)
            return -1;
        if (m.msgtype != ERL_SEND && m.msgtype != ERL_REG_SEND)
            continue;
        int idx = 0, ver, arity;
        long got;
        char tag[MAXATOMLEN_UTF8];
        if (ei_decode_version(reply->buff, &idx, &ver) < 0 ||
            ei_decode_tuple_header(reply->buff, &idx, &arity) < 0 || arity != 3 ||
            ei_decode_atom(reply->buff, &idx, tag) < 0 || strcmp(tag, "msgflow_reply") != 0 ||
            ei_decode_long(reply->buff, &idx, &got) < 0 || got != ref)
            continue; /* an answer to a request given up on, or not ours */
        reply->index -= idx;
        memmove(reply->buff, reply->buff + idx, (size_t)reply->index);
        return 0;
    }
}

/* A call with no arguments: `stop', `info', `views'. */
static int call_atom(conn *c, const char *what, ei_x_buff *reply)
{
    ei_x_buff call;
    ei_x_new(&call);
    ei_x_encode_atom(&call, what);
    return call_node(c, &call, reply);
}

/* msgflow's application started on the node (once, over rex: nothing is
 * counted yet, or the run is another's), so that msgflow_remote is there.
 * 0, or -1 with a message. */
static int ensure_started(conn *c)
{
    ei_x_buff args, reply;
    args_new(&args, 1);
    ei_x_encode_atom(&args, "msgflow");
    int r = rpc(c, "application", "ensure_all_started", &args, &reply);
    char text[512];
    int idx = 0, arity;
    char ok[MAXATOMLEN_UTF8];
    if (r == 0 && (ei_decode_tuple_header(reply.buff, &idx, &arity) != 0 || arity != 2 ||
                   ei_decode_atom(reply.buff, &idx, ok) != 0 || strcmp(ok, "ok") != 0)) {
        reply_text(&reply, text, sizeof(text));
        fprintf(stderr, "msgflow-top: cannot start msgflow on %s: %s\n", c->node, text);
        r = -1;
    } else if (r != 0) {
        fprintf(stderr, "msgflow-top: %s went away\n", c->node);
    }
    ei_x_free(&reply);
    return r;
}

/* msgflow:start(#{interval => I, owner => self(), grace => G}): 1 started,
 * 0 already running, -1 error.  The owner is this C node's pid: the node
 * stops the run OWNER_GRACE_MS after this program's connection is gone
 * (however it ended, SIGKILL included), unless `keep'. */
static int start_msgflow(conn *c, long interval, int keep)
{
    ei_x_buff call, reply;
    ei_x_new(&call);
    ei_x_encode_tuple_header(&call, 2);
    ei_x_encode_atom(&call, "start");
    ei_x_encode_map_header(&call, keep ? 1 : 3);
    ei_x_encode_atom(&call, "interval");
    ei_x_encode_long(&call, interval);
    if (!keep) {
        ei_x_encode_atom(&call, "owner");
        ei_x_encode_pid(&call, ei_self(&c->ec));
        ei_x_encode_atom(&call, "grace");
        ei_x_encode_long(&call, OWNER_GRACE_MS);
    }
    int rc = -1;
    char text[512];
    if (call_node(c, &call, &reply) != 0) {
        fprintf(stderr, "msgflow-top: %s went away\n", c->node);
    } else if (reply_is_atom(&reply, "ok")) {
        rc = 1;
    } else {
        reply_text(&reply, text, sizeof(text));
        if (strstr(text, "already_started"))
            rc = 0;
        else
            fprintf(stderr, "msgflow-top: msgflow:start/1 on %s: %s\n", c->node, text);
    }
    ei_x_free(&reply);
    return rc;
}

/* Whether the node holds a run, running or stopped: the info view's
 * `started_at' is an integer.  1 yes, 0 no, -1 the node went away. */
static int run_exists(conn *c)
{
    ei_x_buff reply;
    if (call_atom(c, "info", &reply) != 0) {
        ei_x_free(&reply);
        fprintf(stderr, "msgflow-top: %s went away\n", c->node);
        return -1;
    }
    int idx = 0, arity, found = 0, type, size;
    char key[MAXATOMLEN_UTF8];
    if (ei_decode_map_header(reply.buff, &idx, &arity) == 0) {
        for (int i = 0; i < arity; i++) {
            if (ei_decode_atom(reply.buff, &idx, key) != 0)
                break;
            if (!strcmp(key, "started_at")) {
                found = ei_get_type(reply.buff, &idx, &type, &size) == 0 &&
                        (type == ERL_SMALL_INTEGER_EXT || type == ERL_INTEGER_EXT ||
                         type == ERL_SMALL_BIG_EXT);
                break;
            }
            if (ei_skip_term(reply.buff, &idx) != 0)
                break;
        }
    }
    ei_x_free(&reply);
    return found;
}

static int stop_msgflow(conn *c)
{
    ei_x_buff reply;
    int rc = call_atom(c, "stop", &reply) == 0 && reply_is_atom(&reply, "ok") ? 0 : -1;
    ei_x_free(&reply);
    return rc;
}

static const char *const sort_names[] = {"messages", "rate", "peak", "bytes", "wait"};
static const char *const by_names[] = {"process", "name", "module", "application", "node", "kind"};

/* A binary the node answered with, malloc'd for the caller (NUL added
 * after its *len bytes); NULL with why in err: the answer's text when it
 * is no binary. */
static char *reply_binary(ei_x_buff *reply, size_t *len, char *err, size_t errlen)
{
    int idx = 0, type, size;
    if (ei_get_type(reply->buff, &idx, &type, &size) != 0 || type != ERL_BINARY_EXT) {
        reply_text(reply, err, errlen);
        return NULL;
    }
    char *bin = malloc((size_t)size + 1);
    long got;
    if (!bin) {
        snprintf(err, errlen, "out of memory (%d bytes)", size);
        return NULL;
    }
    if (ei_decode_binary(reply->buff, &idx, bin, &got) != 0) {
        free(bin);
        snprintf(err, errlen, "a binary that does not decode");
        return NULL;
    }
    bin[got] = 0;
    *len = (size_t)got;
    return bin;
}

/* Asks the node for the rows to show (msgflow_remote's {rows, Opts}: the
 * `top' view with `by', `sort', `limit' and, when not empty, `filter') and
 * decodes the dump of them.  0, or -1 with a message in err; *gone set
 * when the connection failed. */
/* --from and --to: a range of the history, or NULL (set once in main) */
static const char *range_from, *range_to;

/* A time of --from or --to as the node reads it: ms digits as an
 * integer, anything else as text (msgflow_opts:system_ms/1). */
static void encode_time(ei_x_buff *x, const char *t)
{
    char *end;
    long long ms = strtoll(t, &end, 10);
    if (*t && !*end)
        ei_x_encode_longlong(x, ms);
    else
        ei_x_encode_binary(x, t, (long)strlen(t));
}

/* The keys encode_range adds to a map of options. */
static int range_keys(void)
{
    return (range_from ? 1 : 0) + (range_to ? 1 : 0);
}

/* `from' and `to' of --from and --to, as keys of a map of options. */
static void encode_range(ei_x_buff *x)
{
    if (range_from) {
        ei_x_encode_atom(x, "from");
        encode_time(x, range_from);
    }
    if (range_to) {
        ei_x_encode_atom(x, "to");
        encode_time(x, range_to);
    }
}

static int fetch(conn *c, mf_by by, int sort, long limit, const char *filter, mf_dump *d,
                 int *gone, char *err, size_t errlen)
{
    ei_x_buff call, reply;
    int rc = -1;
    *gone = 0;
    ei_x_new(&call);
    ei_x_encode_tuple_header(&call, 2);
    ei_x_encode_atom(&call, "rows");
    ei_x_encode_map_header(&call, (filter[0] ? 4 : 3) + range_keys());
    encode_range(&call);
    ei_x_encode_atom(&call, "by");
    ei_x_encode_atom(&call, by_names[by]);
    ei_x_encode_atom(&call, "sort");
    ei_x_encode_atom(&call, sort_names[sort]);
    ei_x_encode_atom(&call, "limit");
    ei_x_encode_long(&call, limit);
    if (filter[0]) {
        ei_x_encode_atom(&call, "filter");
        ei_x_encode_binary(&call, filter, (long)strlen(filter));
    }
    if (call_node(c, &call, &reply) != 0) {
        *gone = 1;
        snprintf(err, errlen, "msgflow-top: %s went away", c->node);
    } else {
        size_t len;
        char why[512];
        char *bin = reply_binary(&reply, &len, why, sizeof(why));
        if (bin && mf_dump_decode(bin, len, d, why, sizeof(why)) == 0)
            rc = 0;
        else
            snprintf(err, errlen, "msgflow-top: the rows from %s: %.300s", c->node, why);
        free(bin);
    }
    ei_x_free(&reply);
    return rc;
}

/* A binary the node answered with, as a malloc'd string for the caller;
 * NULL with why in err. */
static char *reply_string(ei_x_buff *reply, char *err, size_t errlen)
{
    size_t len;
    return reply_binary(reply, &len, err, errlen);
}

/* The text the node prints for one view (msgflow_remote's {text, View,
 * Opts, Width}: any view, by name; Opts one key and value, or none),
 * malloc'd for the caller; NULL with a message in err. */
static char *view_text(conn *c, const char *view, const char *key, const char *value, int width,
                       char *err, size_t errlen)
{
    ei_x_buff call, reply;
    ei_x_new(&call);
    ei_x_encode_tuple_header(&call, 4);
    ei_x_encode_atom(&call, "text");
    ei_x_encode_atom(&call, view);
    ei_x_encode_map_header(&call, (key ? 1 : 0) + range_keys());
    if (key) {
        ei_x_encode_atom(&call, key);
        ei_x_encode_string(&call, value);
    }
    encode_range(&call);
    ei_x_encode_long(&call, width < 40 ? 40 : width);
    char *text = NULL;
    if (call_node(c, &call, &reply) != 0)
        snprintf(err, errlen, "%s went away", c->node);
    else
        text = reply_string(&reply, err, errlen);
    ei_x_free(&reply);
    return text;
}

/* The names of the views the node shows without options (for the v
 * key), into names (each malloc'd); how many, 0 on failure. */
static int view_names(conn *c, char **names, int max)
{
    ei_x_buff reply;
    int n = 0, idx = 0, len;
    if (call_atom(c, "views", &reply) == 0 && ei_decode_list_header(reply.buff, &idx, &len) == 0) {
        for (int i = 0; i < len && n < max; i++) {
            char a[MAXATOMLEN_UTF8];
            if (ei_decode_atom(reply.buff, &idx, a) != 0)
                break;
            if (strcmp(a, "top") != 0 && (names[n] = strdup(a)) != NULL)
                n++;
        }
    }
    ei_x_free(&reply);
    return n;
}

/* ---------------------------------------------------------- the screen */

/* The terminal as it was, put back by term_restore on every way out. */
static struct termios saved_tio;
static int raw_on;
static volatile sig_atomic_t resized;

static void on_winch(int sig)
{
    (void)sig;
    resized = 1;
}

static void term_restore(void)
{
    if (!raw_on)
        return;
    raw_on = 0;
    /* cursor shown, attributes off, the main screen back */
    fputs("\x1b[0m\x1b[?25h\x1b[?1049l", stdout);
    fflush(stdout);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
}

/* Keys one at a time, no echo, the alternate screen, the cursor hidden.
 * 0, or -1 when stdin is no terminal. */
static int term_raw(void)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio) != 0)
        return -1;
    struct termios t = saved_tio;
    t.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) != 0)
        return -1;
    raw_on = 1;
    atexit(term_restore);
    fputs("\x1b[?1049h\x1b[?25l", stdout);
    return 0;
}

static void term_size(int *cols, int *lines)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        *cols = ws.ws_col;
        *lines = ws.ws_row;
    } else {
        const char *c = getenv("COLUMNS");
        *cols = c && atoi(c) >= 40 ? atoi(c) : 80;
        *lines = 24;
    }
    if (*cols < 40)
        *cols = 40;
    if (*lines < 10)
        *lines = 10;
}

enum { SORT_MESSAGES, SORT_RATE, SORT_PEAK };

/* Rows asked of the node when the screen scrolls no further: enough for
 * several pages, few enough that the node labels them at once. */
#define MF_TOP_ROWS 500
#define MF_TOP_VIEWS 32

typedef struct {
    /* what is shown */
    mf_by by;
    int sort;
    char filter[128];
    long selected;   /* index into the rows */
    size_t first;    /* first shown row on screen */
    int paused, help;
    long interval;
    /* typing a filter */
    int typing;
    char typed[128];
    /* an opened row or another view: the node's text for it */
    char *detail;
    int view;        /* the view shown (v): index into views, -1 the table */
    char *views[MF_TOP_VIEWS];
    int n_views;
    /* a message for the status line */
    char note[256];
} screen;

static const char help_text[] =
    "msgflow-top keys\n"
    "  s            sort: messages, rate, peak, bytes copied, receiver's wait (in turn)\n"
    "  g            group: process, name, module, application, node, kind\n"
    "  /            filter by a text in a label (Enter applies, Esc cancels;\n"
    "               an empty filter shows every row)\n"
    "  Up/Down j/k  move the cursor; PgUp/PgDn a page\n"
    "  Enter        open the selected row's sender (by process): its label,\n"
    "               queue, memory, reductions, current function, partners\n"
    "  o            open the selected row's receiver\n"
    "  v            the node's other views in turn (receivers, calls, ...)\n"
    "  b            bottlenecks: who is saturated, who waits on whom (v: the\n"
    "               views after it)\n"
    "  space        pause / go on\n"
    "  + / -        show every 2x / 0.5x as often (interval)\n"
    "  h or ?       this help; any key closes it\n"
    "  q            quit (stops the counting msgflow-top started, unless --keep)\n";

/* One frame: the table that fits, a status line, or the help, or an
 * opened row or view; every line erased to its end, the rest of the
 * screen below. */
static void draw(screen *s, const mf_dump *d, const mf_row *rows, size_t n, int cols, int lines,
                 const char *ellipsis)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return;
    if (s->help) {
        fputs(help_text, f);
    } else if (s->detail) {
        fputs(s->detail, f);
        fputs("\n(Esc, Enter or q: back to the table; v: the next view)\n", f);
    } else {
        /* head lines, column heads, status line; past max_memory, on a
         * terminal of 20 lines or more, the 5 busiest in overflow below
         * the rows (a blank line, two of title, column heads, 5 rows) */
        int head = mf_top_head_lines(d) + 1;
        size_t over = d->n_overflow_top && lines >= 20 ? (d->n_overflow_top < 5 ? d->n_overflow_top : 5) : 0;
        int below = over ? (int)over + 4 : 0;
        size_t fit = lines - head - below - 1 > 1 ? (size_t)(lines - head - below - 1) : 1;
        if (s->selected >= (long)n)
            s->selected = n ? (long)n - 1 : 0;
        if (s->selected < 0)
            s->selected = 0;
        if ((size_t)s->selected < s->first)
            s->first = (size_t)s->selected;
        if ((size_t)s->selected >= s->first + fit)
            s->first = (size_t)s->selected - fit + 1;
        mf_top_layout lay = {.by = s->by, .width = cols, .first = s->first, .top = fit,
                             .selected = s->selected, .peaks = 1, .ellipsis = ellipsis,
                             .total = mf_given_total(d), .overflow = over,
                             .overflow_at = "the busiest below on a terminal of 20 lines"};
        mf_print_top(f, d, rows, n, &lay);
    }
    fclose(f);
    fputs("\x1b[H", stdout);
    /* each line erased to its end; at most lines - 1 of them */
    int shown_lines = 0;
    for (char *p = buf, *nl; p && *p && shown_lines < lines - 1; p = nl + 1, shown_lines++) {
        nl = strchr(p, '\n');
        if (!nl)
            nl = p + strlen(p);
        fwrite(p, 1, (size_t)(nl - p), stdout);
        fputs("\x1b[K\n", stdout);
        if (!*nl)
            break;
    }
    free(buf);
    fputs("\x1b[J", stdout);
    /* the status line, at the bottom */
    char st[512];
    if (s->typing)
        snprintf(st, sizeof(st), "filter: %s_", s->typed);
    else
        snprintf(st, sizeof(st), "sort %s | by %s | filter %s | every %ld ms%s | %s",
                 sort_names[s->sort], by_names[s->by], s->filter[0] ? s->filter : "-",
                 s->interval, s->paused ? " | PAUSED" : "",
                 s->note[0] ? s->note : "h: help  q: quit");
    fprintf(stdout, "\x1b[%d;1H\x1b[7m%-*.*s\x1b[0m", lines, cols, cols, st);
    fflush(stdout);
}

/* A key as read: a character, or one of these for escape sequences. */
enum { K_NONE = -1, K_UP = 1000, K_DOWN, K_PGUP, K_PGDN, K_ESC };

/* Bytes read from the terminal and not yet taken as keys: a paste or
 * fast typing brings several at once. */
static unsigned char keybuf[64];
static size_t keylen;

static int read_key(void)
{
    if (keylen == 0) {
        ssize_t r = read(STDIN_FILENO, keybuf, sizeof(keybuf));
        if (r <= 0)
            return K_NONE;
        keylen = (size_t)r;
    }
    size_t used = 1;
    int k = keybuf[0];
    if (k == 0x1b) {
        k = K_ESC;
        if (keylen >= 3 && keybuf[1] == '[') {
            used = 3;
            switch (keybuf[2]) {
            case 'A': k = K_UP; break;
            case 'B': k = K_DOWN; break;
            case '5': k = K_PGUP; used = keylen >= 4 && keybuf[3] == '~' ? 4 : 3; break;
            case '6': k = K_PGDN; used = keylen >= 4 && keybuf[3] == '~' ? 4 : 3; break;
            default: k = K_NONE;
            }
        }
    }
    memmove(keybuf, keybuf + used, keylen - used);
    keylen -= used;
    return k;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* The rows the screen may scroll to: a page more than where the cursor is,
 * at least MF_TOP_ROWS. */
static long rows_wanted(const screen *s, int lines)
{
    long want = s->selected + 2L * lines;
    return want > MF_TOP_ROWS ? want : MF_TOP_ROWS;
}

/* The open view's text (v) asked again; a message on the status line
 * when the node says no. */
static void view_refresh(conn *c, screen *s, int cols)
{
    char err[512] = "";
    free(s->detail);
    s->detail = view_text(c, s->views[s->view], NULL, NULL, cols, err, sizeof(err));
    if (!s->detail) {
        snprintf(s->note, sizeof(s->note), "%s: %.200s", s->views[s->view], err);
        s->view = -1;
    }
}

/* The interactive view until a key, a signal or the node ends it.  0,
 * or 1 when the node went away (*gone) or answered with an error. */
static int interactive(conn *c, mf_by by, long interval, const char *ellipsis, int *gone)
{
    screen s = {.by = by, .sort = SORT_MESSAGES, .interval = interval, .view = -1};
    mf_dump d;
    int have = 0, rc = 0, cols, lines;
    mf_row *rows = NULL;
    size_t n = 0;
    long next = now_ms();
    char err[512] = "";
    term_size(&cols, &lines);
    s.n_views = view_names(c, s.views, MF_TOP_VIEWS);
    for (;;) {
        if (interrupted)
            break;
        int redraw = 0;
        if (resized) {
            resized = 0;
            term_size(&cols, &lines);
            redraw = 1;
        }
        if (!s.paused && now_ms() >= next) {
            mf_dump nd;
            if (fetch(c, s.by, s.sort, rows_wanted(&s, lines), s.filter, &nd, gone, err,
                      sizeof(err)) != 0) {
                rc = 1;
                break;
            }
            if (have) {
                mf_rows_free(rows);
                mf_dump_free(&d);
            }
            d = nd;
            have = 1;
            rows = NULL;
            if (mf_rows_given(&d, &rows, &n) != 0)
                n = 0;
            if (s.view >= 0)
                view_refresh(c, &s, cols);
            next = now_ms() + s.interval;
            redraw = 1;
        }
        /* keys */
        struct pollfd pf[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = c->fd, .events = POLLIN}};
        long wait = s.paused ? 1000 : next - now_ms();
        if (!redraw && poll(pf, 2, wait < 0 ? 0 : (int)wait) > 0) {
            if (pf[1].revents) {
                /* a tick to answer, or the node gone (the connection
                 * closed: nothing to read) */
                char peek;
                int closed = recv(c->fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
                if (!closed) {
                    erlang_msg msg;
                    ei_x_buff x;
                    ei_x_new(&x);
                    (void)ei_xreceive_msg_tmo(c->fd, &msg, &x, 100);
                    ei_x_free(&x);
                }
                if (closed) {
                    *gone = 1;
                    snprintf(err, sizeof(err), "msgflow-top: %s went away", c->node);
                    rc = 1;
                    break;
                }
            }
            int k;
            while ((pf[0].revents || keylen) && (k = read_key()) != K_NONE) {
                redraw = 1;
                s.note[0] = 0;
                if (s.typing) {
                    size_t tl = strlen(s.typed);
                    if (k == '\r' || k == '\n') {
                        snprintf(s.filter, sizeof(s.filter), "%s", s.typed);
                        s.typing = 0;
                        s.selected = 0;
                        next = now_ms(); /* the node filters: ask again now */
                    } else if (k == K_ESC) {
                        s.typing = 0;
                    } else if ((k == 127 || k == 8) && tl > 0) {
                        s.typed[tl - 1] = 0;
                    } else if (k >= 32 && k < 127 && tl + 1 < sizeof(s.typed)) {
                        s.typed[tl] = (char)k;
                        s.typed[tl + 1] = 0;
                    }
                    continue;
                }
                if (s.help) {
                    s.help = 0;
                    if (k != 'q')
                        continue;
                }
                if (s.detail) {
                    if (k == 'v' && s.view >= 0 && s.view + 1 < s.n_views) {
                        s.view++;
                        view_refresh(c, &s, cols);
                        continue;
                    }
                    free(s.detail);
                    s.detail = NULL;
                    s.view = -1;
                    continue;
                }
                switch (k) {
                case 'q':
                    goto done;
                case 'h':
                case '?':
                    s.help = 1;
                    break;
                case 's':
                    s.sort = (s.sort + 1) % 5;
                    s.selected = 0;
                    next = now_ms();
                    break;
                case 'g':
                    s.by = (mf_by)((s.by + 1) % 6);
                    s.selected = 0;
                    next = now_ms();
                    break;
                case '/':
                    s.typing = 1;
                    snprintf(s.typed, sizeof(s.typed), "%s", s.filter);
                    break;
                case 'v':
                    if (s.n_views > 0) {
                        s.view = 0;
                        view_refresh(c, &s, cols);
                    }
                    break;
                case 'b':
                    /* the bottlenecks view, where the node has it */
                    for (int i = 0; i < s.n_views; i++)
                        if (strcmp(s.views[i], "bottlenecks") == 0) {
                            s.view = i;
                            view_refresh(c, &s, cols);
                            break;
                        }
                    if (s.view < 0)
                        snprintf(s.note, sizeof(s.note), "this node has no bottlenecks view (msgflow 0.1)");
                    break;
                case K_UP:
                case 'k':
                    s.selected--;
                    break;
                case K_DOWN:
                case 'j':
                    s.selected++;
                    break;
                case K_PGUP:
                    s.selected -= lines - 4;
                    break;
                case K_PGDN:
                    s.selected += lines - 4;
                    break;
                case ' ':
                    s.paused = !s.paused;
                    if (!s.paused)
                        next = now_ms();
                    break;
                case '+':
                    if (s.interval / 2 >= 100)
                        s.interval /= 2;
                    next = now_ms() + s.interval;
                    break;
                case '-':
                    if (s.interval * 2 <= 60000)
                        s.interval *= 2;
                    next = now_ms() + s.interval;
                    break;
                case '\r':
                case '\n':
                case 'o':
                    if (s.selected >= 0 && (size_t)s.selected < n) {
                        const char *who = k == 'o' ? rows[s.selected].receiver : rows[s.selected].sender;
                        if (s.by != MF_BY_PROCESS)
                            snprintf(s.note, sizeof(s.note), "open works by process (g to group by it)");
                        else if (who[0] != '<')
                            snprintf(s.note, sizeof(s.note), "%.200s is no process", who);
                        else if ((s.detail = view_text(c, "process", "pid", who, cols, err,
                                                       sizeof(err))) == NULL)
                            snprintf(s.note, sizeof(s.note), "%.200s", err);
                    }
                    break;
                }
            }
        }
        /* a key that changed what is asked (sort, grouping, filter) makes
         * a fetch due: the screen is drawn with its rows, never the old
         * rows under the new status line */
        if (redraw && have && (s.paused || now_ms() < next))
            draw(&s, &d, rows, n, cols, lines, ellipsis);
    }
done:
    free(s.detail);
    for (int i = 0; i < s.n_views; i++)
        free(s.views[i]);
    if (have) {
        mf_rows_free(rows);
        mf_dump_free(&d);
    }
    term_restore();
    if (err[0] && rc)
        fprintf(stderr, "%s\n", err);
    return rc;
}

/* Plain tables, no control codes: when stdout is no terminal, or --once.
 * The first table waits an interval when this program started the run
 * (there is nothing to show yet), else comes at once. */
static int plain(conn *c, mf_by by, long interval, long top, int once, int started,
                 const char *ellipsis, int *gone)
{
    const char *cs = getenv("COLUMNS");
    int width = cs && atoi(cs) >= 40 ? atoi(cs) : 80;
    char err[512];
    for (int first = 1; !interrupted; first = 0) {
        if (!first || started)
            sleep_ms(interval);
        if (interrupted)
            break;
        mf_dump d;
        if (fetch(c, by, SORT_MESSAGES, top, "", &d, gone, err, sizeof(err)) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        mf_row *rows;
        size_t n;
        if (mf_rows_given(&d, &rows, &n) == 0) {
            /* past max_memory, the busiest in overflow below the rows, as
             * many as rows (the node sends at most 100) */
            mf_top_layout lay = {.by = by, .width = width, .first = 0, .top = (size_t)top,
                                 .selected = -1, .peaks = 0, .ellipsis = ellipsis,
                                 .total = mf_given_total(&d), .overflow = (size_t)top};
            mf_print_top(stdout, &d, rows, n, &lay);
            if (!once)
                fputc('\n', stdout);
            if (fflush(stdout) != 0 || ferror(stdout))
                interrupted = SIGPIPE; /* nobody reads any more */
            mf_rows_free(rows);
        }
        mf_dump_free(&d);
        if (once)
            break;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *node = NULL, *cookie = NULL, *cookie_file = NULL, *by_name = "process";
    long interval = 1000, top = 20;
    int once = 0, keep = 0, fresh = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = !strcmp(a, "--node") || !strcmp(a, "--cookie") ||
                        !strcmp(a, "--cookie-file") || !strcmp(a, "--interval") ||
                        !strcmp(a, "--top") || !strcmp(a, "--by") || !strcmp(a, "--code") ||
                        !strcmp(a, "--from") || !strcmp(a, "--to");
        if (has_value && i + 1 >= argc) {
            fprintf(stderr, "msgflow-top: %s needs a value\n%s", a, usage);
            return 2;
        }
        char *end;
        if (!strcmp(a, "--node")) {
            node = argv[++i];
        } else if (!strcmp(a, "--cookie")) {
            cookie = argv[++i];
        } else if (!strcmp(a, "--cookie-file")) {
            cookie_file = argv[++i];
        } else if (!strcmp(a, "--by")) {
            by_name = argv[++i];
        } else if (!strcmp(a, "--from")) {
            range_from = argv[++i];
        } else if (!strcmp(a, "--to")) {
            range_to = argv[++i];
        } else if (!strcmp(a, "--code")) {
            if ((size_t)snprintf(code_dir, sizeof(code_dir), "%s", argv[++i]) >=
                sizeof(code_dir)) {
                fprintf(stderr, "msgflow-top: --code %s: path too long\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--interval") || !strcmp(a, "--top")) {
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < (a[2] == 'i' ? 10 : 1) || v > 3600000) {
                fprintf(stderr, "msgflow-top: %s %s: out of range\n", a, argv[i]);
                return 2;
            }
            *(a[2] == 'i' ? &interval : &top) = v;
        } else if (!strcmp(a, "--once")) {
            once = 1;
        } else if (!strcmp(a, "--keep")) {
            keep = 1;
        } else if (!strcmp(a, "--start")) {
            fresh = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "msgflow-top: unknown argument %s\n%s", a, usage);
            return 2;
        }
    }
    if (range_to && !range_from) {
        fprintf(stderr, "msgflow-top: --to needs --from\n%s", usage);
        return 2;
    }
    if (range_from && fresh) {
        fprintf(stderr, "msgflow-top: --from reads the node's kept history: no --start\n");
        return 2;
    }
    if (!code_dir[0] && code_dir_beside_me() != 0)
        snprintf(code_dir, sizeof(code_dir), "."); /* read_build_file says what is missing */
    mf_by by;
    if (!node || mf_by_parse(by_name, &by) != 0) {
        fprintf(stderr, node ? "msgflow-top: --by %s: not a grouping\n" : "%s",
                node ? by_name : usage);
        return 2;
    }
    char fullnode[512];
    if (!strchr(node, '@')) {
        char host[256];
        gethostname(host, sizeof(host));
        host[strcspn(host, ".")] = 0;
        snprintf(fullnode, sizeof(fullnode), "%s@%s", node, host);
    } else {
        snprintf(fullnode, sizeof(fullnode), "%s", node);
    }
    char cookie_buf[512], from[PATH_MAX + 32];
    if (cookie) {
        /* argv is every local user's to read (ps, /proc/PID/cmdline) */
        fprintf(stderr, "msgflow-top: --cookie is visible to other users of this machine "
                        "(ps); --cookie-file F or ~/.erlang.cookie keep it private\n");
        snprintf(from, sizeof(from), "--cookie");
    } else {
        char path[PATH_MAX];
        if (cookie_file)
            snprintf(path, sizeof(path), "%s", cookie_file);
        else
            snprintf(path, sizeof(path), "%s/.erlang.cookie", getenv("HOME") ? getenv("HOME") : "");
        if (read_cookie(path, cookie_buf, sizeof(cookie_buf)) != 0) {
            fprintf(stderr, "msgflow-top: no cookie: cannot read %s (give --cookie or "
                            "--cookie-file)\n", path);
            return 1;
        }
        cookie = cookie_buf;
        snprintf(from, sizeof(from), "%s", path);
    }

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    /* a reader of a pipe that went away (| head) is SIGPIPE, a closed
     * terminal SIGHUP: each ends the loop like Ctrl-C, so what was
     * started is stopped */
    int ending[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (size_t i = 0; i < sizeof(ending) / sizeof(ending[0]); i++)
        sigaction(ending[i], &sa, NULL);
    int tty = isatty(STDOUT_FILENO);
    setlocale(LC_CTYPE, "");
    const char *lc = setlocale(LC_CTYPE, NULL);
    const char *ellipsis = lc && (strstr(lc, "UTF-8") || strstr(lc, "utf8")) ? "\xe2\x80\xa6"
                                                                              : "~";
    ei_init();
    conn c = {.node = fullnode};
    if (attach(&c, cookie, from) != 0)
        return 1;
    if (ensure_code(&c) != 0 || ensure_started(&c) != 0)
        return 1;
    /* a run the node holds, running or stopped, is shown as it is: only
     * --start (or no run at all) starts one, which clears the last */
    int exists = fresh ? 0 : run_exists(&c);
    if (exists < 0)
        return 1;
    /* a range of the history is read, never a run started for it */
    int started = exists || range_from ? 0 : start_msgflow(&c, interval, keep);
    if (started < 0)
        return 1;
    int gone = 0, rc;
    /* interactive on a terminal (stdin and stdout), unless --once */
    if (!once && tty && term_raw() == 0) {
        struct sigaction wa = {0};
        wa.sa_handler = on_winch;
        sigaction(SIGWINCH, &wa, NULL);
        rc = interactive(&c, by, interval, ellipsis, &gone);
    } else {
        rc = plain(&c, by, interval, top, once, started == 1, ellipsis, &gone);
    }
    if (started == 1 && !keep && !gone && stop_msgflow(&c) != 0) {
        fprintf(stderr, "msgflow-top: could not stop msgflow on %s\n", c.node);
        rc = 1;
    }
    ei_close_connection(c.fd);
    return rc;
}
