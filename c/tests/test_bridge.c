/*
 * Tests of the Zenoh bridge as library calls (zcio_bridge_*, a library built with
 * `scripts/build-c --bridge`), across real processes over tcp/127.0.0.1 with multicast
 * scouting off: a ring exported by one process and imported into a ring by another,
 * blocks byte-exact to the end of the stream; an exporter killed by SIGKILL ends the
 * importer with a failure (no hang); bad arguments.
 *
 *   test_bridge            run every test
 *   test_bridge NAME...    run the named tests
 *
 * As in test_zcio.c: each test runs in a fork of the runner under a watchdog alarm;
 * peers are this program re-executed with --child ROLE ...; rings live in a fresh
 * directory ($ZCIO_RING_DIR). The exporter listens on port 0 and reports the endpoint
 * it got (zcio_bridge_endpoints); the importer connects to it. No timing assertions:
 * each step waits for the previous one's evidence (a line on a pipe, a consumer).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zcio.h>

#define WATCHDOG_S 120
#define CHILD_WAIT_S 90
#define TIMEOUT_MS 30000

#include "harness.h"

#ifndef ZCIO_BRIDGE
#error "build against a library with the bridge: scripts/build-c --bridge (defines ZCIO_BRIDGE)"
#endif

static size_t blk_len(uint64_t i) { return 1 + (size_t)((i * 53 + 3) % 3000); }
static unsigned char blk_byte(uint64_t i, size_t k) { return (unsigned char)(i * 29 + k * 13 + 5); }

/* Read one line from `fd` into `buf` (without the newline), waiting at most
 * TIMEOUT_MS for it; 0, or -1 on EOF or timeout. */
static int read_line(int fd, char *buf, size_t n) {
    size_t len = 0;
    while (len + 1 < n) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, TIMEOUT_MS) <= 0) return -1;
        char c;
        if (read(fd, &c, 1) != 1) return -1;
        if (c == '\n') break;
        buf[len++] = c;
    }
    buf[len] = 0;
    return 0;
}

static void session_defaults(zcio_bridge_session *s) {
    zcio_bridge_session_init(s, sizeof *s);
    s->grace_ms = 500;
}

/* ------------------------------------------------------------- children */

/* exporter RING KEY: export ring:RING to KEY, listening on tcp/127.0.0.1:0; print
 * "ready ENDPOINT"; exit 0 at the end of the stream. */
static int child_exporter(const char *ring, const char *key) {
    const char *listen[1] = {"tcp/127.0.0.1:0"};
    zcio_bridge_session s;
    session_defaults(&s);
    s.listen = listen;
    s.n_listen = 1;
    char src[64];
    snprintf(src, sizeof src, "ring:%s", ring);
    zcio_bridge *b;
    CHECK_RC(zcio_bridge_export_start(src, key, &s, sizeof s, &b), 0);
    char eps[256];
    ssize_t n = zcio_bridge_endpoints(b, eps, sizeof eps);
    CHECK(n > 0 && (size_t)n < sizeof eps && strchr(eps, ' ') == NULL);
    printf("ready %s\n", eps);
    fflush(stdout);
    int st = 99;
    CHECK_RC(zcio_bridge_wait(b, TIMEOUT_MS * 2, &st), 0);
    CHECK_RC(st, ZCIO_BRIDGE_END_OF_STREAM);
    zcio_bridge_counters c;
    CHECK_RC(zcio_bridge_get_counters(b, &c, sizeof c), 0);
    CHECK(c.samples > 0);
    zcio_bridge_close(b);
    return 0;
}

/* importer KEY ENDPOINT RING N MODE: create RING (a consumer first), import KEY into
 * it connecting to ENDPOINT, read N blocks byte-exact; MODE "eos": then the end of the
 * stream and the bridge's END_OF_STREAM; MODE "killed": print "got", then the bridge
 * fails with -EPIPE and the ring reader sees the stream cut. */
static int child_importer(const char *key, const char *endpoint, const char *ring, uint64_t n,
                          const char *mode) {
    zcio_ring_options o;
    zcio_ring_options_init(&o, sizeof o);
    o.layout = ZCIO_LAYOUT_VARIABLE;
    o.size = 1 << 20;
    zcio_ring *c;
    CHECK_OK(zcio_ring_open_with(ring, ZCIO_O_RDONLY | ZCIO_O_CREAT, &o, sizeof o, &c));
    CHECK_OK(zcio_ring_set_timeout(c, TIMEOUT_MS));
    const char *connect[1] = {endpoint};
    zcio_bridge_session s;
    session_defaults(&s);
    s.connect = connect;
    s.n_connect = 1;
    s.connect_timeout_ms = TIMEOUT_MS;
    char sink[64];
    snprintf(sink, sizeof sink, "ring:%s", ring);
    zcio_bridge *b;
    CHECK_RC(zcio_bridge_import_start(key, sink, &s, sizeof s, &b), 0);
    static unsigned char buf[4096];
    for (uint64_t i = 0; i < n; i++) {
        ssize_t r = zcio_ring_read(c, buf, sizeof buf);
        CHECK_OK(r);
        if ((size_t)r != blk_len(i)) FAILF("block %" PRIu64 ": %zd bytes", i, r);
        for (size_t k = 0; k < (size_t)r; k++)
            if (buf[k] != blk_byte(i, k)) FAILF("block %" PRIu64 " differs at %zu", i, k);
    }
    int st = 99;
    if (strcmp(mode, "eos") == 0) {
        CHECK_RC(zcio_ring_read(c, buf, sizeof buf), 0);
        CHECK_RC(zcio_bridge_wait(b, TIMEOUT_MS * 2, &st), 0);
        CHECK_RC(st, ZCIO_BRIDGE_END_OF_STREAM);
        zcio_bridge_counters cn;
        CHECK_RC(zcio_bridge_get_counters(b, &cn, sizeof cn), 0);
        CHECK(cn.samples == n && cn.gaps == 0);
    } else {
        printf("got\n");
        fflush(stdout);
        CHECK_RC(zcio_bridge_wait(b, TIMEOUT_MS * 2, &st), 0);
        CHECK_RC(st, -EPIPE);
        CHECK_RC(zcio_ring_read(c, buf, sizeof buf), -ZCIO_EPRODFAIL);
    }
    zcio_bridge_close(b);
    zcio_ring_close(c);
    return 0;
}

static int run_child(const char *role, char **a, int n) {
    if (strcmp(role, "exporter") == 0 && n == 2) return child_exporter(a[0], a[1]);
    if (strcmp(role, "importer") == 0 && n == 5)
        return child_importer(a[0], a[1], a[2], strtoull(a[3], NULL, 10), a[4]);
    fprintf(stderr, "unknown child role %s\n", role);
    return 2;
}

/* ---------------------------------------------------------------- tests */

/* Start the exporter of `ring` (which must exist) and the importer into `dst`; the
 * exporter's endpoint comes back on a pipe. */
static int start_pair(const char *ring, const char *key, const char *dst, const char *count,
                      const char *mode, pid_t *ex, pid_t *im, int *im_out) {
    int ep[2], ip[2];
    CHECK(pipe(ep) == 0 && pipe(ip) == 0);
    *ex = spawn_to(ep[1], "exporter", ring, key, NULL);
    close(ep[1]);
    char line[300];
    if (read_line(ep[0], line, sizeof line) || strncmp(line, "ready ", 6) != 0)
        FAILF("the exporter did not report its endpoint");
    close(ep[0]);
    *im = spawn_to(ip[1], "importer", key, line + 6, dst, count, mode, NULL);
    close(ip[1]);
    *im_out = ip[0];
    return 0;
}

/* A ring exported from one process and imported into a ring in another: every block
 * arrives byte-exact, then the end of the stream on both sides. */
static int test_export_import(void) {
    const uint64_t n = 500;
    zcio_ring_options o;
    zcio_ring_options_init(&o, sizeof o);
    o.layout = ZCIO_LAYOUT_VARIABLE;
    zcio_ring *p;
    CHECK_OK(zcio_ring_open_with("bsrc", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &p));
    CHECK_OK(zcio_ring_set_timeout(p, TIMEOUT_MS));
    pid_t ex, im;
    int im_out;
    if (start_pair("bsrc", "zcio/test/eos", "bdst", "500", "eos", &ex, &im, &im_out)) return 1;
    /* The exporter reads from the newest block: write once it is attached. */
    CHECK_RC(zcio_ring_wait_consumers(p, 1, TIMEOUT_MS), 1);
    static unsigned char b[4096];
    for (uint64_t i = 0; i < n; i++) {
        for (size_t k = 0; k < blk_len(i); k++) b[k] = blk_byte(i, k);
        CHECK_RC(zcio_ring_write_tagged(p, b, blk_len(i), (uint32_t)i), blk_len(i));
    }
    zcio_ring_close(p);
    CHECK_CHILD(im, 0);
    CHECK_CHILD(ex, 0);
    close(im_out);
    return 0;
}

/* The exporter killed by SIGKILL mid-stream: the importer's bridge ends with -EPIPE
 * within its grace period and its ring's readers see the stream cut. */
static int test_exporter_killed(void) {
    zcio_ring_options o;
    zcio_ring_options_init(&o, sizeof o);
    o.layout = ZCIO_LAYOUT_VARIABLE;
    zcio_ring *p;
    CHECK_OK(zcio_ring_open_with("ksrc", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &p));
    CHECK_OK(zcio_ring_set_timeout(p, TIMEOUT_MS));
    pid_t ex, im;
    int im_out;
    if (start_pair("ksrc", "zcio/test/killed", "kdst", "20", "killed", &ex, &im, &im_out))
        return 1;
    CHECK_RC(zcio_ring_wait_consumers(p, 1, TIMEOUT_MS), 1);
    static unsigned char b[4096];
    for (uint64_t i = 0; i < 20; i++) {
        for (size_t k = 0; k < blk_len(i); k++) b[k] = blk_byte(i, k);
        CHECK_RC(zcio_ring_write(p, b, blk_len(i)), blk_len(i));
    }
    char line[16];
    if (read_line(im_out, line, sizeof line) || strcmp(line, "got") != 0)
        FAILF("the importer did not get the blocks");
    kill(ex, SIGKILL);
    CHECK_CHILD(ex, 128 + SIGKILL);
    CHECK_CHILD(im, 0);
    close(im_out);
    zcio_ring_close(p);
    return 0;
}

/* Bad arguments: codes, never a crash; a failed start leaves *out untouched. */
static int test_bridge_errors(void) {
    zcio_bridge_session s;
    session_defaults(&s);
    zcio_bridge *b = NULL;
    CHECK_RC(zcio_bridge_session_init(NULL, sizeof s), -EINVAL);
    CHECK_RC(zcio_bridge_export_start(NULL, "k", &s, sizeof s, &b), -EINVAL);
    CHECK_RC(zcio_bridge_export_start("ring:x", NULL, &s, sizeof s, &b), -EINVAL);
    CHECK_RC(zcio_bridge_export_start("ring:x", "k", &s, sizeof s, NULL), -EINVAL);
    CHECK_RC(zcio_bridge_export_start("file:x", "k", &s, sizeof s, &b), -EINVAL);
    CHECK_RC(zcio_bridge_export_start("ring:x", "a/*", &s, sizeof s, &b), -EINVAL);
    CHECK_RC(zcio_bridge_export_start("ring:no-such-ring", "k", &s, sizeof s, &b), -ENOENT);
    const char *bad[1] = {"nonsense"};
    s.listen = bad;
    s.n_listen = 1;
    CHECK_RC(zcio_bridge_export_start("ring:x", "k", &s, sizeof s, &b), -EINVAL);
    s.listen = NULL; /* NULL with a count */
    CHECK_RC(zcio_bridge_export_start("ring:x", "k", &s, sizeof s, &b), -EINVAL);
    session_defaults(&s);
    s.max_sample = 0;
    CHECK_RC(zcio_bridge_import_start("k", "ring:x", &s, sizeof s, &b), -EINVAL);
    session_defaults(&s);
    CHECK_RC(zcio_bridge_import_start("k", "pipe:x", &s, sizeof s, &b), -EINVAL);
    s.grace_ms = -1;
    CHECK_RC(zcio_bridge_import_start("k", "ring:x", &s, sizeof s, &b), -EINVAL);
    session_defaults(&s);
    s.connect_timeout_ms = 0;
    CHECK_RC(zcio_bridge_import_start("k", "ring:x", &s, sizeof s, &b), -EINVAL);
    CHECK(b == NULL);
    int st;
    char buf[8];
    zcio_bridge_counters c;
    CHECK_RC(zcio_bridge_wait(NULL, 0, &st), -EINVAL);
    CHECK_RC(zcio_bridge_stop(NULL), -EINVAL);
    CHECK_RC(zcio_bridge_endpoints(NULL, buf, sizeof buf), -EINVAL);
    CHECK_RC(zcio_bridge_get_counters(NULL, &c, sizeof c), -EINVAL);
    zcio_bridge_close(NULL);

    /* An import that reaches nobody within its connect timeout fails with -ETIMEDOUT;
     * stop on a running bridge ends it as STOPPED. */
    session_defaults(&s);
    s.connect_timeout_ms = 300;
    CHECK_RC(zcio_bridge_import_start("zcio/test/nobody", "ring:lonely", &s, sizeof s, &b), 0);
    CHECK_RC(zcio_bridge_wait(b, TIMEOUT_MS, &st), 0);
    CHECK_RC(st, -ETIMEDOUT);
    CHECK_RC(zcio_bridge_wait(b, TIMEOUT_MS, NULL), -EINVAL);
    zcio_bridge_close(b);
    session_defaults(&s);
    CHECK_RC(zcio_bridge_import_start("zcio/test/stop", "ring:stopped", &s, sizeof s, &b), 0);
    CHECK_RC(zcio_bridge_stop(b), 0);
    CHECK_RC(zcio_bridge_wait(b, TIMEOUT_MS, &st), 0);
    CHECK_RC(st, ZCIO_BRIDGE_STOPPED);
    CHECK_RC(zcio_bridge_stop(b), 0); /* again: nothing to do */
    zcio_bridge_close(b);
    return 0;
}

static const struct test tests[] = {
    {"export_import", test_export_import},
    {"exporter_killed", test_exporter_killed},
    {"bridge_errors", test_bridge_errors},
};

int main(int argc, char **argv) {
    if (child_or_runner(argc, argv, run_child)) return 2;
    signal(SIGPIPE, SIG_IGN);
    if (make_work_dir(shm_or_tmp(), "zcio-bridgetest")) return 2;
    setenv("ZCIO_RING_DIR", work_dir, 1); /* children inherit it */
    int rc = run_tests(tests, sizeof tests / sizeof *tests, argc, argv, WATCHDOG_S);
    remove_work_dir();
    return rc;
}
