/*
 * msgflow-top --node NAME@HOST [--cookie C | --cookie-file F] [--interval Ms]
 *             [--top N] [--by G] [--once] [--keep] [--start]
 *
 * A C node (ei_connect, as erl_call is) that attaches to a running
 * distributed node, loads msgflow's code there over RPC when it is missing
 * (from this build, through msgflow_cluster_code:install/1, as the cluster
 * ships it: refused on a node of another OTP release), starts msgflow unless the node holds a run
 * (running, or stopped: that one is shown as it is; --start starts anew),
 * and every interval fetches msgflow:dump/0 (the ETF dump as a binary) and
 * redraws the top table.  Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT, SIGPIPE),
 * --once (after one table) or the node going away end it; tracing it
 * started is stopped then, unless --keep.  Should it die without that
 * (SIGKILL, a dropped connection), the node stops the run itself 2 s after
 * the connection is gone (msgflow:start/1's `owner').
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

#include <ei.h>

#include "mf_dump.h"
#include "mf_file.h"
#include "mf_table.h"

#ifndef MSGFLOW_ROOT
#define MSGFLOW_ROOT "."
#endif
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
    "                   [--once] [--keep] [--start]\n";

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
        fprintf(stderr, "msgflow-top: cannot read %s (run make; or set MSGFLOW_HOME)\n", path);
    return data;
}

/* Encodes [{Module, Beam}] of every .beam in ebin into x; 0, or -1. */
static int encode_beams(ei_x_buff *x, const char *ebin)
{
    DIR *dh = opendir(ebin);
    if (!dh) {
        fprintf(stderr, "msgflow-top: no local build at %s (run make; or set MSGFLOW_HOME)\n",
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

    /* this build's beams and NIF; MSGFLOW_HOME: a checkout's, its OTP 25
     * build (_build/default, priv/) */
    const char *home = getenv("MSGFLOW_HOME");
    char ebin[PATH_MAX], priv[PATH_MAX], text[512];
    snprintf(ebin, sizeof(ebin), "%s%s", home ? home : MSGFLOW_EBIN,
             home ? "/_build/default/lib/msgflow/ebin" : "");
    snprintf(priv, sizeof(priv), "%s%s", home ? home : MSGFLOW_NIF_DIR, home ? "/priv" : "");
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

/* ------------------------------------------------------------ the loop */

/* msgflow:start(#{interval => I, owner => self(), grace => G}): 1 started,
 * 0 already running, -1 error.  The owner is this C node's pid: the node
 * stops the run OWNER_GRACE_MS after this program's connection is gone
 * (however it ended, SIGKILL included), unless `keep'. */
static int start_msgflow(conn *c, long interval, int keep)
{
    ei_x_buff args, reply;
    args_new(&args, 1);
    ei_x_encode_map_header(&args, keep ? 1 : 3);
    ei_x_encode_atom(&args, "interval");
    ei_x_encode_long(&args, interval);
    if (!keep) {
        ei_x_encode_atom(&args, "owner");
        ei_x_encode_pid(&args, ei_self(&c->ec));
        ei_x_encode_atom(&args, "grace");
        ei_x_encode_long(&args, OWNER_GRACE_MS);
    }
    int rc = -1;
    char text[512];
    if (rpc(c, "msgflow", "start", &args, &reply) != 0) {
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

/* Whether the node holds a run, running or stopped: msgflow:info()'s
 * `started_at' is an integer.  1 yes, 0 no, -1 the node went away. */
static int run_exists(conn *c)
{
    ei_x_buff args, reply;
    args_new(&args, 0);
    if (rpc(c, "msgflow", "info", &args, &reply) != 0) {
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
    ei_x_buff args, reply;
    args_new(&args, 0);
    int rc = rpc(c, "msgflow", "stop", &args, &reply) == 0 && reply_is_atom(&reply, "ok") ? 0 : -1;
    ei_x_free(&reply);
    return rc;
}

/* Fetches and decodes msgflow:dump().  0, or -1 with a message printed;
 * *gone set when the connection failed. */
static int fetch(conn *c, mf_dump *d, int *gone)
{
    ei_x_buff args, reply;
    args_new(&args, 0);
    int rc = -1, idx = 0, type, size;
    *gone = 0;
    if (rpc(c, "msgflow", "dump", &args, &reply) != 0) {
        *gone = 1;
        fprintf(stderr, "msgflow-top: %s went away\n", c->node);
    } else if (ei_get_type(reply.buff, &idx, &type, &size) == 0 && type == ERL_BINARY_EXT) {
        char *bin = malloc(size > 0 ? (size_t)size : 1);
        long got;
        char err[256];
        if (bin && ei_decode_binary(reply.buff, &idx, bin, &got) == 0) {
            if (mf_dump_decode(bin, (size_t)got, d, err, sizeof(err)) == 0)
                rc = 0;
            else
                fprintf(stderr, "msgflow-top: the dump from %s: %s\n", c->node, err);
        }
        free(bin);
    } else {
        char text[512];
        reply_text(&reply, text, sizeof(text));
        fprintf(stderr, "msgflow-top: msgflow:dump() on %s: %s\n", c->node, text);
    }
    ei_x_free(&reply);
    return rc;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (!interrupted && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
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
                        !strcmp(a, "--top") || !strcmp(a, "--by");
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
    if (ensure_code(&c) != 0)
        return 1;
    /* a run the node holds, running or stopped, is shown as it is: only
     * --start (or no run at all) starts one, which clears the last */
    int exists = fresh ? 0 : run_exists(&c);
    if (exists < 0)
        return 1;
    int started = exists ? 0 : start_msgflow(&c, interval, keep);
    if (started < 0)
        return 1;
    int rc = 0, gone = 0;
    while (!interrupted) {
        sleep_ms(interval);
        if (interrupted)
            break;
        mf_dump d;
        if (fetch(&c, &d, &gone) != 0) {
            rc = 1;
            break;
        }
        mf_row *rows;
        size_t n;
        if (mf_group(&d, by, &rows, &n) == 0) {
            /* screen codes to a terminal only, not into a pipe or file */
            if (!once && tty)
                fputs("\x1b[H\x1b[2J", stdout);
            mf_print_top(stdout, &d, rows, n, (size_t)top, by, ellipsis);
            if (fflush(stdout) != 0 || ferror(stdout))
                interrupted = SIGPIPE; /* nobody reads any more */
            mf_rows_free(rows);
        }
        mf_dump_free(&d);
        if (once)
            break;
    }
    if (started == 1 && !keep && !gone && stop_msgflow(&c) != 0) {
        fprintf(stderr, "msgflow-top: could not stop msgflow on %s\n", c.node);
        rc = 1;
    }
    ei_close_connection(c.fd);
    return rc;
}
