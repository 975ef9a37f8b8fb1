/*
 * Tests of buffering semantics in the zcio C library (zcio_semantic_endpoint_*, zcio_arena_*,
 * zcio_owned_*, zcio_semantics_*, the cost model zcio_cost_model_*, zcio_calibrate_measure,
 * zcio_calibration_path) across real processes.
 *
 *   test_semantics            run every test
 *   test_semantics NAME...    run the named tests
 *
 * As in test_zcio.c: each test runs in a fork of the runner under a watchdog alarm;
 * peers are this program re-executed with --child ROLE ... (their own watchdog too);
 * sockets live in a fresh directory removed at the end. A child that fails to start
 * fails the test. Never asserts on timing.
 *
 * ZCIO_TEST_NO_TCOW=1 skips the tests whose sender writes to write-protected pages
 * in flight (TCOW: a SIGSEGV handler that fixes the page and returns), printing
 * "skipped: <reason>", and expects the arena-backed move family to copy: for runs
 * under tools where arenas cannot lend (valgrind does not emulate
 * mremap(MREMAP_DONTUNMAP); scripts/test-c sets it there).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zcio.h>

#define WATCHDOG_S 120
#define CHILD_WAIT_S 90
#define TIMEOUT_MS 30000

#include "harness.h"

/* ------------------------------------------------------------- utilities */

/* Byte k of message i. */
static unsigned char pat(uint64_t i, uint64_t k) {
    return (unsigned char)((k * 7) ^ (i * 131) ^ (k >> 9) ^ 0x5a);
}

static void fill(unsigned char *b, size_t n, uint64_t i) {
    for (size_t k = 0; k < n; k++) b[k] = pat(i, k);
}

/* Index of the first byte of `b` that is not message i's, or -1. */
static long long first_bad(const unsigned char *b, size_t n, uint64_t i) {
    for (size_t k = 0; k < n; k++)
        if (b[k] != pat(i, k)) return (long long)k;
    return -1;
}

/* Listen at `name` in the work directory. */
static int listen_at(const char *name, char *sock, size_t n, zcio_listener **l) {
    path_in_work(sock, n, "%s", name);
    return zcio_listen(sock, l);
}

/* An endpoint over a channel accepted on `l` (the listener is closed). */
static int accept_endpoint(zcio_listener *l, const zcio_semantic_config *cfg, zcio_semantic_endpoint **ep) {
    zcio_channel *ch;
    int rc = zcio_accept(l, TIMEOUT_MS, &ch);
    zcio_listener_close(l);
    if (rc < 0) return rc;
    return zcio_semantic_endpoint_new(ch, cfg, ep);
}

static int connect_endpoint(const char *sock, const zcio_semantic_config *cfg, zcio_semantic_endpoint **ep) {
    zcio_channel *ch;
    int rc = zcio_connect(sock, TIMEOUT_MS, &ch);
    if (rc < 0) return rc;
    return zcio_semantic_endpoint_new(ch, cfg, ep);
}

static zcio_semantic_config config(int output, int input, int trust) {
    zcio_semantic_config c;
    zcio_semantic_config_init(&c);
    c.output = output;
    c.input = input;
    c.arena_capacity = 16 << 20;
    c.hello_timeout_ms = TIMEOUT_MS;
    c.trust_peer = trust;
    /* The mechanisms themselves, whatever the cost model prefers here. */
    c.ignore_cost_model = 1;
    return c;
}

/* ---------------------------------------------------------------- children */

/* ec-recv SOCK COUNT LEN TRUST: input COUNT messages of LEN bytes into arena
 * buffers at the sender's page offset (round robin over 4), check each is
 * message i exactly, and re-check the previous one (what was received
 * never changes afterwards). With TRUST, pages are swapped in. */
static int role_ec_recv(char **a) {
    int count = atoi(a[1]), trust = atoi(a[3]);
    size_t len = (size_t)strtoull(a[2], NULL, 10);
    zcio_semantic_config cfg = config(ZCIO_SEM_EMULATED_COPY, ZCIO_SEM_EMULATED_COPY, trust);
    zcio_semantic_endpoint *ep;
    CHECK_OK(connect_endpoint(a[0], &cfg, &ep));
    size_t n, off;
    CHECK_OK(zcio_semantic_endpoint_next(ep, TIMEOUT_MS, &n, &off));
    CHECK(n == len);
    zcio_arena_buf *bufs[4];
    for (int j = 0; j < 4; j++) CHECK_OK(zcio_arena_alloc(ep, len, off, &bufs[j]));
    size_t swapped = 0;
    for (int i = 0; i < count; i++) {
        unsigned char *b = zcio_arena_buf_data(bufs[i % 4]);
        zcio_received r;
        CHECK_RC(zcio_semantic_endpoint_input(ep, b, len, -1, &r), (long long)len);
        CHECK(r.len == len && r.sender == ZCIO_SEM_EMULATED_COPY);
        swapped += r.swapped_pages;
        long long bad = first_bad(b, len, (uint64_t)i);
        if (bad >= 0)
            FAILF("message %d: byte %lld is %u, want %u (the sender's later write leaked)", i,
                  bad, b[bad], pat((uint64_t)i, (uint64_t)bad));
        if (i > 0) {
            unsigned char *p = zcio_arena_buf_data(bufs[(i - 1) % 4]);
            if ((bad = first_bad(p, len, (uint64_t)(i - 1))) >= 0)
                FAILF("message %d changed after it was received (byte %lld)", i - 1, bad);
        }
    }
    zcio_semantic_stats st;
    CHECK_OK(zcio_semantic_endpoint_get_stats(ep, &st));
    if (trust && swapped == 0) FAILF("trusted emulated-copy input swapped no page in");
    if (!trust && swapped != 0) FAILF("untrusted input swapped %zu pages in", swapped);
    printf("    receiver: %d messages, %zu pages swapped in, %" PRIu64 " bytes copied\n", count,
           swapped, st.in_copied_bytes);
    CHECK_RC(zcio_semantic_endpoint_output(ep, "done", 4, ZCIO_SEM_COPY), ZCIO_DELIVERY_COPIED);
    /* The sender closes first: then -EPIPE. */
    char tmp[16];
    CHECK_RC(zcio_semantic_endpoint_input(ep, tmp, sizeof tmp, -1, NULL), -EPIPE);
    for (int j = 0; j < 4; j++) zcio_arena_buf_free(bufs[j]);
    zcio_semantic_endpoint_close(ep);
    return 0;
}

/* plain-recv SOCK SEM SIZES...: input each size under SEM into malloc memory and
 * check it is message i. */
static int role_plain_recv(char **a, int n) {
    int sem = zcio_semantics_parse(a[1]);
    CHECK_OK(sem);
    zcio_semantic_config cfg = config(ZCIO_SEM_COPY, sem, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(connect_endpoint(a[0], &cfg, &ep));
    for (int i = 0; i + 2 < n; i++) {
        size_t len = (size_t)strtoull(a[i + 2], NULL, 10);
        unsigned char *b = malloc(len);
        CHECK(b != NULL);
        zcio_received r;
        CHECK_RC(zcio_semantic_endpoint_input(ep, b, len, -1, &r), (long long)len);
        CHECK(r.copied == len && r.swapped_pages == 0);
        long long bad = first_bad(b, len, (uint64_t)i);
        if (bad >= 0) FAILF("message %d (%zu bytes): byte %lld differs", i, len, bad);
        free(b);
    }
    CHECK_RC(zcio_semantic_endpoint_output(ep, "done", 4, -1), ZCIO_DELIVERY_COPIED);
    char tmp[16];
    CHECK_RC(zcio_semantic_endpoint_input(ep, tmp, sizeof tmp, -1, NULL), -EPIPE);
    zcio_semantic_endpoint_close(ep);
    return 0;
}

/* owned-recv SOCK SEM COUNT LEN: input_owned COUNT messages, check, free. */
static int role_owned_recv(char **a) {
    int sem = zcio_semantics_parse(a[1]);
    CHECK_OK(sem);
    int count = atoi(a[2]);
    size_t len = (size_t)strtoull(a[3], NULL, 10);
    zcio_semantic_config cfg = config(sem, sem, 1);
    zcio_semantic_endpoint *ep;
    CHECK_OK(connect_endpoint(a[0], &cfg, &ep));
    for (int i = 0; i < count; i++) {
        zcio_owned *o;
        CHECK_RC(zcio_semantic_endpoint_input_owned(ep, -1, &o), (long long)len);
        CHECK(zcio_owned_len(o) == len);
        unsigned char *b = zcio_owned_data(o);
        long long bad = first_bad(b, len, (uint64_t)i);
        if (bad >= 0) FAILF("message %d: byte %lld differs", i, bad);
        b[0] ^= 0xff; /* the receiver's writes stay private */
        zcio_semantic_endpoint_free(ep, o);
    }
    CHECK_RC(zcio_semantic_endpoint_output(ep, "done", 4, ZCIO_SEM_COPY), ZCIO_DELIVERY_COPIED);
    char tmp[16];
    CHECK_RC(zcio_semantic_endpoint_input(ep, tmp, sizeof tmp, -1, NULL), -EPIPE);
    zcio_semantic_endpoint_close(ep);
    return 0;
}

/* one-msg SOCK LEN: output one message of LEN bytes (message 0), then wait for
 * "done". */
static int role_one_msg(char **a) {
    size_t len = (size_t)strtoull(a[1], NULL, 10);
    zcio_semantic_config cfg = config(ZCIO_SEM_EMULATED_COPY, ZCIO_SEM_EMULATED_COPY, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(connect_endpoint(a[0], &cfg, &ep));
    zcio_arena_buf *b;
    CHECK_OK(zcio_arena_alloc(ep, len, 100, &b));
    fill(zcio_arena_buf_data(b), len, 0);
    CHECK_OK(zcio_semantic_endpoint_output(ep, zcio_arena_buf_data(b), len, -1));
    char tmp[16];
    CHECK_RC(zcio_semantic_endpoint_input(ep, tmp, sizeof tmp, -1, NULL), 4);
    zcio_arena_buf_free(b);
    zcio_semantic_endpoint_close(ep);
    return 0;
}

/* streamer SOCK: output emulated-copy messages until an output fails (the
 * test kills this process long before). */
static int role_streamer(char **a) {
    zcio_semantic_config cfg = config(ZCIO_SEM_EMULATED_COPY, ZCIO_SEM_EMULATED_COPY, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(connect_endpoint(a[0], &cfg, &ep));
    size_t len = 64 << 10;
    zcio_arena_buf *b;
    CHECK_OK(zcio_arena_alloc(ep, len, 0, &b));
    unsigned char *d = zcio_arena_buf_data(b);
    for (uint64_t i = 0;; i++) {
        fill(d, len, i);
        int rc = zcio_semantic_endpoint_output(ep, d, len, -1);
        if (rc < 0) {
            fprintf(stderr, "    streamer: output %" PRIu64 ": %s\n", i, zcio_strerror(rc));
            return 3;
        }
    }
}

/* sink SOCK: input messages (and tell nothing) until killed. */
static int role_sink(char **a) {
    zcio_semantic_config cfg = config(ZCIO_SEM_EMULATED_COPY, ZCIO_SEM_EMULATED_COPY, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(connect_endpoint(a[0], &cfg, &ep));
    static unsigned char b[1 << 20];
    for (int i = 0; i < 3; i++) CHECK_OK(zcio_semantic_endpoint_input(ep, b, sizeof b, -1, NULL));
    CHECK_OK(zcio_semantic_endpoint_output(ep, "got3", 4, ZCIO_SEM_COPY));
    for (;;) pause(); /* killed by the test */
}

/* peer-check SOCK: an endpoint that inputs emulated move and trusts its peer;
 * checks what the test's endpoint said in its hello (copy input, not
 * trusting), then tells "ok" and waits for "done". */
static int role_peer_check(char **a) {
    zcio_semantic_config cfg = config(ZCIO_SEM_COPY, ZCIO_SEM_EMULATED_MOVE, 1);
    zcio_semantic_endpoint *ep;
    CHECK_OK(connect_endpoint(a[0], &cfg, &ep));
    int input = -2, trusts = -2;
    CHECK_OK(zcio_semantic_endpoint_peer(ep, &input, &trusts));
    CHECK(input == ZCIO_SEM_COPY && trusts == 0);
    CHECK_OK(zcio_semantic_endpoint_output(ep, "ok", 2, ZCIO_SEM_COPY));
    char tmp[8];
    CHECK_RC(zcio_semantic_endpoint_input(ep, tmp, sizeof tmp, ZCIO_SEM_COPY, NULL), 4);
    zcio_semantic_endpoint_close(ep);
    return 0;
}

/* calibrate PATH: measure this machine (quick) and save the model to PATH.
 * Under ZCIO_TEST_NO_TCOW (valgrind: no TCOW fault handler, which the
 * tcow_fault measurement uses) the built-in model is saved instead. */
static int role_calibrate(char **a) {
    zcio_cost_model *m;
    const char *v = getenv("ZCIO_TEST_NO_TCOW");
    if (v && *v && strcmp(v, "0") != 0) {
        CHECK_OK(zcio_cost_model_builtin(&m));
    } else {
        CHECK_OK(zcio_calibrate_measure(1, &m));
        CHECK(strcmp(zcio_cost_model_source(m), "measured") == 0);
    }
    CHECK_OK(zcio_cost_model_save(m, a[0]));
    zcio_cost_model_free(m);
    return 0;
}

/* current-model PATH: with ZCIO_CALIBRATION=PATH (inherited), the model this
 * process decides with is that file's, and it is where the calibration file is. */
static int role_current_model(char **a) {
    char path[PATH_MAX];
    CHECK_RC(zcio_calibration_path(path, sizeof path), (long long)strlen(a[0]));
    CHECK(strcmp(path, a[0]) == 0);
    zcio_cost_model *m;
    CHECK_OK(zcio_cost_model_current(&m));
    CHECK(strcmp(zcio_cost_model_source(m), "file") == 0);
    double ns;
    CHECK_OK(zcio_cost_model_cost(m, "copy_in", 1 << 20, &ns));
    CHECK(ns > 0);
    zcio_cost_model_free(m);
    return 0;
}

static int run_child(const char *role, char **a, int n) {
    if (strcmp(role, "peer-check") == 0 && n == 1) return role_peer_check(a);
    if (strcmp(role, "calibrate") == 0 && n == 1) return role_calibrate(a);
    if (strcmp(role, "current-model") == 0 && n == 1) return role_current_model(a);
    if (strcmp(role, "ec-recv") == 0 && n == 4) return role_ec_recv(a);
    if (strcmp(role, "plain-recv") == 0 && n >= 2) return role_plain_recv(a, n);
    if (strcmp(role, "owned-recv") == 0 && n == 4) return role_owned_recv(a);
    if (strcmp(role, "one-msg") == 0 && n == 2) return role_one_msg(a);
    if (strcmp(role, "streamer") == 0 && n == 1) return role_streamer(a);
    if (strcmp(role, "sink") == 0 && n == 1) return role_sink(a);
    fprintf(stderr, "unknown child role %s\n", role);
    return 2;
}

/* ------------------------------------------------------------- the tests */

static int tcow_skipped(const char *test) {
    const char *v = getenv("ZCIO_TEST_NO_TCOW");
    if (v && *v && strcmp(v, "0") != 0) {
        printf("    skipped: %s (ZCIO_TEST_NO_TCOW: the sender's writes to write-protected "
               "pages in flight need the TCOW SIGSEGV handler, which this run cannot use)\n",
               test);
        return 1;
    }
    return 0;
}

/* Emulated copy: the sender writes its buffer right after every output (in a
 * loop); the receiver always sees the bytes as they were at the output. */
static int emulated_copy_overwrite(int trust) {
    if (tcow_skipped(trust ? "emulated_copy_overwrite_trusted" : "emulated_copy_overwrite"))
        return 0;
    char sock[PATH_MAX];
    zcio_listener *l;
    CHECK_OK(listen_at(trust ? "ect.sock" : "ec.sock", sock, sizeof sock, &l));
    const int count = 200;
    const size_t len = (64 << 10) + 1000; /* a partial page at the end */
    char cs[16], ls[32], ts[4];
    snprintf(cs, sizeof cs, "%d", count);
    snprintf(ls, sizeof ls, "%zu", len);
    snprintf(ts, sizeof ts, "%d", trust);
    pid_t p = spawn("ec-recv", sock, cs, ls, ts, NULL);
    zcio_semantic_config cfg = config(ZCIO_SEM_EMULATED_COPY, ZCIO_SEM_EMULATED_COPY, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(accept_endpoint(l, &cfg, &ep));
    zcio_arena_buf *b;
    CHECK_OK(zcio_arena_alloc(ep, len, 300, &b));
    CHECK(zcio_arena_buf_len(b) == len);
    unsigned char *d = zcio_arena_buf_data(b);
    int protected = 0;
    for (int i = 0; i < count; i++) {
        fill(d, len, (uint64_t)i);
        int rc = zcio_semantic_endpoint_output(ep, d, len, -1);
        CHECK_OK(rc);
        protected += rc == ZCIO_DELIVERY_PROTECTED;
        /* Overwrite at once: every page, the first and last bytes included. */
        memset(d, 0xee ^ i, len);
        d[0] = (unsigned char)~pat((uint64_t)i, 0);
        d[len - 1] = (unsigned char)~pat((uint64_t)i, len - 1);
    }
    char done[8];
    CHECK_RC(zcio_semantic_endpoint_input(ep, done, sizeof done, -1, NULL), 4);
    CHECK(memcmp(done, "done", 4) == 0);
    zcio_semantic_stats st;
    CHECK_OK(zcio_semantic_endpoint_get_stats(ep, &st));
    printf("    sender: %d of %d outputs lent write-protected, %" PRIu64 " copied, %" PRIu64
           " fallbacks, %" PRIu64 " TCOW page copies\n",
           protected, count, st.out_copied, st.out_fallbacks, st.tcow_copies);
    if (protected == 0) FAILF("no output was lent write-protected (TCOW never exercised)");
    CHECK(st.tcow_copies > 0);
    zcio_arena_buf_free(b);
    zcio_semantic_endpoint_close(ep);
    CHECK_CHILD(p, 0);
    return 0;
}

/* Emulated copy with no rewriting tolerated: a sender that rewrites its
 * buffer at once gets its outputs copied after the first lend, with probes
 * (lends) after 1, 2, 4, 8, 16 copies; the receiver still sees every
 * message as it was at its output. */
static int test_emulated_copy_rewrite_adapts(void) {
    if (tcow_skipped("emulated_copy_rewrite_adapts")) return 0;
    char sock[PATH_MAX];
    zcio_listener *l;
    CHECK_OK(listen_at("ecr.sock", sock, sizeof sock, &l));
    const int count = 40;
    const size_t len = (64 << 10) + 1000;
    char cs[16], ls[32];
    snprintf(cs, sizeof cs, "%d", count);
    snprintf(ls, sizeof ls, "%zu", len);
    pid_t p = spawn("ec-recv", sock, cs, ls, "1", NULL);
    zcio_semantic_config cfg = config(ZCIO_SEM_EMULATED_COPY, ZCIO_SEM_EMULATED_COPY, 0);
    zcio_semantic_config def;
    zcio_semantic_config_init(&def);
    CHECK(def.rewrite_tolerance < 0); /* the cost model's */
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, TIMEOUT_MS, &ch));
    zcio_listener_close(l);
    /* Not a fraction: refused, and the channel is still ours. */
    cfg.rewrite_tolerance = 1.5;
    zcio_semantic_endpoint *ep = NULL;
    CHECK_RC(zcio_semantic_endpoint_new(ch, &cfg, &ep), -EINVAL);
    CHECK(ep == NULL);
    cfg.rewrite_tolerance = 0.0;
    CHECK_OK(zcio_semantic_endpoint_new(ch, &cfg, &ep));
    double tol = -1;
    CHECK_OK(zcio_semantic_endpoint_rewrite_tolerance(ep, len, &tol));
    CHECK(tol == 0.0);
    CHECK_RC(zcio_semantic_endpoint_rewrite_tolerance(ep, len, NULL), -EINVAL);
    zcio_arena_buf *b;
    CHECK_OK(zcio_arena_alloc(ep, len, 300, &b));
    unsigned char *d = zcio_arena_buf_data(b);
    char lent[64] = "";
    for (int i = 0; i < count; i++) {
        fill(d, len, (uint64_t)i);
        int rc = zcio_semantic_endpoint_output(ep, d, len, -1);
        CHECK_OK(rc);
        if (rc == ZCIO_DELIVERY_PROTECTED)
            snprintf(lent + strlen(lent), sizeof lent - strlen(lent), "%d,", i);
        memset(d, 0xee ^ i, len);
    }
    char done[8];
    CHECK_RC(zcio_semantic_endpoint_input(ep, done, sizeof done, -1, NULL), 4);
    zcio_semantic_stats st;
    CHECK_OK(zcio_semantic_endpoint_get_stats(ep, &st));
    printf("    sender: lent at %s %" PRIu64 " copied for rewriting\n", lent,
           st.out_rewrite_copies);
    if (strcmp(lent, "0,1,4,9,18,35,") != 0) FAILF("lent at %s, want 0,1,4,9,18,35,", lent);
    CHECK(st.out_rewrite_copies == (uint64_t)count - 6);
    zcio_arena_buf_free(b);
    zcio_semantic_endpoint_close(ep);
    CHECK_CHILD(p, 0);
    return 0;
}

static int test_emulated_copy_overwrite(void) { return emulated_copy_overwrite(0); }
static int test_emulated_copy_overwrite_trusted(void) { return emulated_copy_overwrite(1); }

/* Copy (and emulated copy) from malloc memory: always copied, and arrives. */
static int test_copy_round_trip_malloc(void) {
    static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 100000, 1 << 20, (1 << 20) + 3};
    const int n = (int)(sizeof sizes / sizeof *sizes);
    char sock[PATH_MAX];
    zcio_listener *l;
    CHECK_OK(listen_at("copy.sock", sock, sizeof sock, &l));
    char args[8][32];
    for (int i = 0; i < n; i++) snprintf(args[i], sizeof args[i], "%zu", sizes[i]);
    pid_t p = spawn("plain-recv", sock, "copy", args[0], args[1], args[2], args[3], args[4],
                    args[5], args[6], args[7], NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, TIMEOUT_MS, &ch));
    zcio_listener_close(l);
    /* A bad config is -EINVAL and leaves the channel ours. */
    zcio_semantic_config bad = config(8, ZCIO_SEM_COPY, 0);
    zcio_semantic_endpoint *ep = NULL;
    CHECK_RC(zcio_semantic_endpoint_new(ch, &bad, &ep), -EINVAL);
    CHECK(ep == NULL);
    zcio_semantic_config cfg = config(ZCIO_SEM_COPY, ZCIO_SEM_COPY, 0);
    CHECK_OK(zcio_semantic_endpoint_new(ch, &cfg, &ep));
    /* A bad per-call semantics is -EINVAL. */
    CHECK_RC(zcio_semantic_endpoint_output(ep, "x", 1, 8), -EINVAL);
    CHECK_RC(zcio_semantic_endpoint_output(ep, "x", 1, -2), -EINVAL);
    CHECK_RC(zcio_semantic_endpoint_output(ep, "x", 0, -1), -EINVAL);
    CHECK_RC(zcio_semantic_endpoint_output(ep, NULL, 1, -1), -EINVAL);
    for (int i = 0; i < n; i++) {
        unsigned char *b = malloc(sizes[i]);
        CHECK(b != NULL);
        fill(b, sizes[i], (uint64_t)i);
        /* Half under copy, half under emulated copy: malloc memory is copied
         * either way. */
        int sem = i % 2 ? ZCIO_SEM_EMULATED_COPY : -1;
        CHECK_RC(zcio_semantic_endpoint_output(ep, b, sizes[i], sem), ZCIO_DELIVERY_COPIED);
        memset(b, 0, sizes[i]);
        free(b);
    }
    char done[8];
    CHECK_RC(zcio_semantic_endpoint_input(ep, done, sizeof done, -1, NULL), 4);
    zcio_semantic_stats st;
    CHECK_OK(zcio_semantic_endpoint_get_stats(ep, &st));
    CHECK(st.out_copied == (uint64_t)n && st.out_protected == 0);
    zcio_semantic_endpoint_close(ep);
    CHECK_CHILD(p, 0);
    return 0;
}

/* The move family: alloc, fill, output_owned (consumed), input_owned on the
 * other side; the deliveries are what each semantics promises. */
static int owned_round_trip(const char *name, int sem, int want_delivery) {
    char sock[PATH_MAX];
    zcio_listener *l;
    char sname[64];
    snprintf(sname, sizeof sname, "%s.sock", name);
    CHECK_OK(listen_at(sname, sock, sizeof sock, &l));
    const int count = 20;
    const size_t len = (256 << 10) + 17;
    char cs[16], ls[32];
    snprintf(cs, sizeof cs, "%d", count);
    snprintf(ls, sizeof ls, "%zu", len);
    pid_t p = spawn("owned-recv", sock, name, cs, ls, NULL);
    zcio_semantic_config cfg = config(sem, sem, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(accept_endpoint(l, &cfg, &ep));
    /* Where arenas cannot lend (ZCIO_TEST_NO_TCOW: valgrind lacks the
     * page moves they need), the arena-backed move family copies. */
    const char *no_lend = getenv("ZCIO_TEST_NO_TCOW");
    if (no_lend && *no_lend && strcmp(no_lend, "0") != 0 && sem != ZCIO_SEM_MOVE)
        want_delivery = ZCIO_DELIVERY_COPIED;
    for (int i = 0; i < count; i++) {
        zcio_owned *o;
        CHECK_OK(zcio_semantic_endpoint_alloc(ep, len, &o));
        CHECK(zcio_owned_len(o) == len);
        fill(zcio_owned_data(o), len, (uint64_t)i);
        CHECK_RC(zcio_semantic_endpoint_output_owned(ep, &o, -1), want_delivery);
        CHECK(o == NULL);
    }
    char done[8];
    CHECK_RC(zcio_semantic_endpoint_input(ep, done, sizeof done, -1, NULL), 4);
    zcio_semantic_endpoint_close(ep);
    CHECK_CHILD(p, 0);
    return 0;
}

static int test_move_round_trip(void) {
    return owned_round_trip("move", ZCIO_SEM_MOVE, ZCIO_DELIVERY_SEALED);
}
static int test_emulated_move_round_trip(void) {
    return owned_round_trip("emulated-move", ZCIO_SEM_EMULATED_MOVE, ZCIO_DELIVERY_HIDDEN);
}
static int test_weak_move_round_trip(void) {
    return owned_round_trip("emulated-weak-move", ZCIO_SEM_EMULATED_WEAK_MOVE,
                            ZCIO_DELIVERY_LENT);
}

/* A buffer too short: -EMSGSIZE with the length needed; the message is kept
 * and arrives whole into a big enough buffer. */
static int test_input_too_short(void) {
    char sock[PATH_MAX];
    zcio_listener *l;
    CHECK_OK(listen_at("short.sock", sock, sizeof sock, &l));
    const size_t len = 50000;
    char ls[32];
    snprintf(ls, sizeof ls, "%zu", len);
    pid_t p = spawn("one-msg", sock, ls, NULL);
    zcio_semantic_config cfg = config(ZCIO_SEM_EMULATED_COPY, ZCIO_SEM_EMULATED_COPY, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(accept_endpoint(l, &cfg, &ep));
    unsigned char small[100];
    zcio_received r = {0};
    CHECK_RC(zcio_semantic_endpoint_input(ep, small, sizeof small, -1, &r), -EMSGSIZE);
    CHECK(r.len == len);
    CHECK(strstr(zcio_last_error(), "50000") != NULL);
    size_t n = 0, off = 0;
    CHECK_OK(zcio_semantic_endpoint_next(ep, 0, &n, &off));
    CHECK(n == len && off == 100);
    zcio_arena_buf *b;
    CHECK_OK(zcio_arena_alloc(ep, n, off, &b));
    CHECK_RC(zcio_semantic_endpoint_input(ep, zcio_arena_buf_data(b), n, -1, &r), (long long)len);
    long long bad = first_bad(zcio_arena_buf_data(b), len, 0);
    if (bad >= 0) FAILF("byte %lld differs", bad);
    CHECK_RC(zcio_semantic_endpoint_next(ep, 0, NULL, NULL), -EAGAIN);
    CHECK_RC(zcio_semantic_endpoint_next(ep, 20, NULL, NULL), -ETIMEDOUT);
    CHECK_RC(zcio_semantic_endpoint_output(ep, "done", 4, -1), ZCIO_DELIVERY_COPIED);
    zcio_arena_buf_free(b);
    CHECK_CHILD(p, 0);
    zcio_semantic_endpoint_close(ep);
    return 0;
}

/* Names: every semantics round-trips; unknown names and values are refused. */
static int test_semantics_names(void) {
    static const char *names[] = {"copy",      "emulated-copy", "share",     "emulated-share",
                                  "move",      "emulated-move", "weak-move", "emulated-weak-move"};
    for (int i = 0; i < 8; i++) {
        CHECK_RC(zcio_semantics_parse(names[i]), i);
        CHECK(zcio_semantics_name(i) != NULL && strcmp(zcio_semantics_name(i), names[i]) == 0);
    }
    CHECK_RC(zcio_semantics_parse("EMULATED_COPY"), ZCIO_SEM_EMULATED_COPY);
    CHECK_RC(zcio_semantics_parse("nope"), -EINVAL);
    CHECK(strstr(zcio_last_error(), "emulated-copy") != NULL); /* lists the names */
    CHECK_RC(zcio_semantics_parse(""), -EINVAL);
    CHECK_RC(zcio_semantics_parse(NULL), -EINVAL);
    CHECK(zcio_semantics_name(8) == NULL && zcio_semantics_name(-1) == NULL);
    /* NULL handles are -EINVAL, not crashes. */
    zcio_semantic_endpoint *ep = NULL;
    CHECK_RC(zcio_semantic_endpoint_new(NULL, NULL, &ep), -EINVAL);
    CHECK_RC(zcio_semantic_endpoint_output(NULL, "x", 1, -1), -EINVAL);
    CHECK_RC(zcio_semantic_endpoint_input(NULL, names, 1, -1, NULL), -EINVAL);
    CHECK_RC(zcio_semantic_endpoint_get_stats(NULL, NULL), -EINVAL);
    CHECK(zcio_arena_buf_data(NULL) == NULL && zcio_owned_data(NULL) == NULL);
    zcio_semantic_endpoint_close(NULL);
    zcio_semantic_endpoint_free(NULL, NULL);
    zcio_arena_buf_free(NULL);
    return 0;
}

/* A peer killed with SIGKILL mid-stream is an error (-EPIPE), never a hang:
 * first the sender dies under the receiving test, then the receiver dies
 * under the sending test. */
static int test_peer_killed(void) {
    char sock[PATH_MAX];
    zcio_listener *l;
    CHECK_OK(listen_at("kill1.sock", sock, sizeof sock, &l));
    pid_t p = spawn("streamer", sock, NULL);
    zcio_semantic_config cfg = config(ZCIO_SEM_EMULATED_COPY, ZCIO_SEM_EMULATED_COPY, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(accept_endpoint(l, &cfg, &ep));
    static unsigned char b[64 << 10];
    for (int i = 0; i < 5; i++) CHECK_RC(zcio_semantic_endpoint_input(ep, b, sizeof b, -1, NULL), sizeof b);
    CHECK(kill(p, SIGKILL) == 0);
    CHECK_CHILD(p, 128 + SIGKILL);
    int rc, got = 0;
    while ((rc = (int)zcio_semantic_endpoint_input(ep, b, sizeof b, -1, NULL)) > 0) got++;
    CHECK_RC(rc, -EPIPE);
    printf("    sender killed: %d more messages, then %s\n", got, zcio_strerror(rc));
    zcio_semantic_endpoint_close(ep);

    CHECK_OK(listen_at("kill2.sock", sock, sizeof sock, &l));
    p = spawn("sink", sock, NULL);
    CHECK_OK(accept_endpoint(l, &cfg, &ep));
    zcio_arena_buf *ab;
    CHECK_OK(zcio_arena_alloc(ep, 256 << 10, 0, &ab));
    for (int i = 0; i < 3; i++) CHECK_OK(zcio_semantic_endpoint_output(ep, zcio_arena_buf_data(ab), 256 << 10, -1));
    char got3[8];
    CHECK_RC(zcio_semantic_endpoint_input(ep, got3, sizeof got3, -1, NULL), 4);
    CHECK(kill(p, SIGKILL) == 0);
    CHECK_CHILD(p, 128 + SIGKILL);
    int sent = 0;
    while (sent < 100000 &&
           (rc = zcio_semantic_endpoint_output(ep, zcio_arena_buf_data(ab), 256 << 10, -1)) >= 0) {
        memset(zcio_arena_buf_data(ab), sent, 256 << 10);
        sent++;
    }
    CHECK_RC(rc, -EPIPE);
    printf("    receiver killed: %d more outputs, then %s\n", sent, zcio_strerror(rc));
    zcio_arena_buf_free(ab);
    zcio_semantic_endpoint_close(ep);
    return 0;
}

/* Each end learns the other's hello: its input semantics and whether it
 * trusts this side (zcio_semantic_endpoint_peer), in both directions. */
static int test_peer_hello(void) {
    char sock[PATH_MAX];
    zcio_listener *l;
    CHECK_OK(listen_at("peer.sock", sock, sizeof sock, &l));
    pid_t p = spawn("peer-check", sock, NULL);
    zcio_semantic_config cfg = config(ZCIO_SEM_COPY, ZCIO_SEM_COPY, 0);
    zcio_semantic_endpoint *ep;
    CHECK_OK(accept_endpoint(l, &cfg, &ep));
    int input = -2, trusts = -2;
    CHECK_OK(zcio_semantic_endpoint_peer(ep, &input, &trusts));
    CHECK(input == ZCIO_SEM_EMULATED_MOVE && trusts == 1);
    CHECK_OK(zcio_semantic_endpoint_peer(ep, NULL, NULL));
    CHECK_RC(zcio_semantic_endpoint_peer(NULL, &input, &trusts), -EINVAL);
    char ok[8];
    CHECK_RC(zcio_semantic_endpoint_input(ep, ok, sizeof ok, -1, NULL), 2);
    CHECK_OK(zcio_semantic_endpoint_output(ep, "done", 4, -1));
    CHECK_CHILD(p, 0);
    zcio_semantic_endpoint_close(ep);
    return 0;
}

/* The cost model: a child calibrates (quick) and saves the file; this process
 * loads it, reads costs and predictions, round-trips the JSON, and a second
 * child started with ZCIO_CALIBRATION pointing at it decides with it. Bad
 * files and arguments are errors, not crashes. */
static int test_cost_model(void) {
    char path[PATH_MAX], bad[PATH_MAX];
    path_in_work(path, sizeof path, "cal/calibration.json");
    pid_t p = spawn("calibrate", path, NULL);
    CHECK_CHILD(p, 0);

    zcio_cost_model *m, *b, *j;
    CHECK_OK(zcio_cost_model_load(path, &m));
    CHECK(strcmp(zcio_cost_model_source(m), "file") == 0);
    double copy_small, copy_big, pred;
    CHECK_OK(zcio_cost_model_cost(m, "copy_in", 4096, &copy_small));
    CHECK_OK(zcio_cost_model_cost(m, "copy_in", 4 << 20, &copy_big));
    CHECK(copy_small > 0 && copy_big > copy_small);
    for (int s = 0; s < 8; s++) {
        CHECK_OK(zcio_cost_model_predict(m, s, 1 << 20, 1, &pred));
        CHECK(pred > 0 && pred < 1e12);
    }
    CHECK_RC(zcio_cost_model_cost(m, "teleport", 1, &pred), -EINVAL);
    CHECK(strstr(zcio_last_error(), "copy_in") != NULL); /* lists the names */
    CHECK_RC(zcio_cost_model_predict(m, 8, 1, 1, &pred), -EINVAL);
    CHECK_RC(zcio_cost_model_predict(m, -1, 1, 1, &pred), -EINVAL);
    CHECK_RC(zcio_cost_model_cost(m, "copy_in", 1, NULL), -EINVAL);

    /* JSON: ask the length, then round-trip it. */
    ssize_t n = zcio_cost_model_to_json(m, NULL, 0);
    CHECK(n > 0);
    char *text = malloc((size_t)n + 1);
    CHECK(text != NULL);
    CHECK_RC(zcio_cost_model_to_json(m, text, (size_t)n + 1), n);
    CHECK_OK(zcio_cost_model_from_json(text, &j));
    double again;
    CHECK_OK(zcio_cost_model_cost(j, "copy_in", 4 << 20, &again));
    CHECK(again == copy_big);
    char cut[8];
    CHECK_RC(zcio_cost_model_to_json(j, cut, sizeof cut), n);
    CHECK(strlen(cut) == sizeof cut - 1);
    free(text);

    CHECK_OK(zcio_cost_model_builtin(&b));
    CHECK(strcmp(zcio_cost_model_source(b), "builtin") == 0);
    CHECK_OK(zcio_cost_model_cost(b, "ref_pass", 64, &pred));
    CHECK(pred > 0);

    /* Errors. */
    path_in_work(bad, sizeof bad, "nope.json");
    CHECK_RC(zcio_cost_model_load(bad, &j), -ENOENT);
    CHECK_RC(zcio_cost_model_from_json("{\"format\": \"something else\"}", &j), -EPROTO);
    CHECK(zcio_last_error()[0] != '\0');
    CHECK_RC(zcio_cost_model_from_json("not json", &j), -EPROTO);
    CHECK_RC(zcio_cost_model_load(NULL, &j), -EINVAL);
    CHECK_RC(zcio_cost_model_load(path, NULL), -EINVAL);
    CHECK_RC(zcio_calibrate_measure(1, NULL), -EINVAL);
    CHECK_RC(zcio_cost_model_save(NULL, path), -EINVAL);
    CHECK(zcio_cost_model_source(NULL) == NULL);
    CHECK_RC(zcio_cost_model_to_json(NULL, NULL, 0), -EINVAL);
    zcio_cost_model_free(NULL);

    /* A process started with ZCIO_CALIBRATION decides with that file. */
    CHECK(setenv("ZCIO_CALIBRATION", path, 1) == 0);
    char where[PATH_MAX];
    CHECK_RC(zcio_calibration_path(where, sizeof where), (long long)strlen(path));
    CHECK(strcmp(where, path) == 0);
    p = spawn("current-model", path, NULL);
    CHECK_CHILD(p, 0);
    CHECK(unsetenv("ZCIO_CALIBRATION") == 0);

    zcio_cost_model_free(j);
    zcio_cost_model_free(b);
    zcio_cost_model_free(m);
    return 0;
}

static const struct test tests[] = {
    {"peer_hello", test_peer_hello},
    {"cost_model", test_cost_model},
    {"semantics_names", test_semantics_names},
    {"emulated_copy_overwrite", test_emulated_copy_overwrite},
    {"emulated_copy_overwrite_trusted", test_emulated_copy_overwrite_trusted},
    {"emulated_copy_rewrite_adapts", test_emulated_copy_rewrite_adapts},
    {"copy_round_trip_malloc", test_copy_round_trip_malloc},
    {"move_round_trip", test_move_round_trip},
    {"emulated_move_round_trip", test_emulated_move_round_trip},
    {"weak_move_round_trip", test_weak_move_round_trip},
    {"input_too_short", test_input_too_short},
    {"peer_killed", test_peer_killed},
};

int main(int argc, char **argv) {
    if (child_or_runner(argc, argv, run_child)) return 2;
    signal(SIGPIPE, SIG_IGN);

    if (make_work_dir(shm_or_tmp(), "zcio-semtest")) return 2;
    int rc = run_tests(tests, sizeof tests / sizeof *tests, argc, argv, WATCHDOG_S);
    remove_work_dir();
    return rc;
}
