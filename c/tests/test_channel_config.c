/*
 * Tests of channel options and introspection (zcio_channel_config with its policy,
 * zcio_listen_access, zcio_channel_pair, zcio_channel_flush/_expire_holds/_health/
 * _faults/_peer/_socket/_share_pool/_trust_peer), the forwarding loop
 * (zcio_forward_run, zcio_msg_copy_into) and the buffer calls (zcio_pool_create_with,
 * zcio_pool_reclaim_all, zcio_msg_is_secured/_join/_split/_clip, zcio_page_size,
 * zcio_set_non_dumpable) of the zcio C library, across real processes.
 *
 *   test_channel_config            run every test
 *   test_channel_config NAME...    run the named tests
 *
 * As in test_zcio.c: each test runs in a fork of the runner under a watchdog alarm;
 * peers are this program re-executed with --child ROLE ... (their own watchdog too);
 * sockets live in a fresh directory removed at the end. Never asserts on timing: a
 * test that needs time to pass (a hold limit) polls for the outcome under the
 * watchdog.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <zcio.h>

#define WATCHDOG_S 120
#define CHILD_WAIT_S 90
#define TIMEOUT_MS 30000

#include "harness.h"

/* ------------------------------------------------------------- utilities */

/* A pipe whose read end a child inherits (its number as an argument) and whose
 * write end the runner keeps, close-on-exec. */
static int go_pipe(int p[2], char *num, size_t n) {
    if (pipe(p) != 0) return -1;
    if (fcntl(p[1], F_SETFD, FD_CLOEXEC) != 0) return -1;
    snprintf(num, n, "%d", p[0]);
    return 0;
}

/* A pipe for a child's standard output: the runner reads p[0] (close-on-exec). */
static int out_pipe(int p[2]) {
    if (pipe(p) != 0) return -1;
    return fcntl(p[0], F_SETFD, FD_CLOEXEC);
}

/* Block until a byte comes on `fd` (or it closes); the byte, or -1. */
static int read_byte(int fd) {
    unsigned char c;
    ssize_t r;
    while ((r = read(fd, &c, 1)) < 0 && errno == EINTR) {
    }
    return r == 1 ? c : -1;
}

/* Read a line (at most n - 1 bytes) from `fd`; its length, or -1 at EOF first. */
static int read_line(int fd, char *buf, size_t n) {
    size_t k = 0;
    for (;;) {
        int c = read_byte(fd);
        if (c < 0) return k ? (int)k : -1;
        if (c == '\n' || k + 1 >= n) break;
        buf[k++] = (char)c;
    }
    buf[k] = 0;
    return (int)k;
}

/* Byte k of message i of a stream. */
static unsigned char pattern(uint64_t i, size_t k) { return (unsigned char)(i * 131u + k * 7u + 1u); }

/* Message i: 8..1000 bytes; its first 8 carry i. */
static size_t msg_len(uint64_t i) { return 8 + (size_t)((i * 37 + 11) % 993); }

static void fill(unsigned char *b, uint64_t i) {
    size_t n = msg_len(i);
    for (size_t k = 0; k < n; k++) b[k] = pattern(i, k);
    memcpy(b, &i, 8);
}

/* 0 if `m` is message i of the stream. */
static int check_msg(const zcio_msg *m, uint64_t i) {
    unsigned char b[1024];
    size_t n = zcio_msg_len(m);
    if (n != msg_len(i) || zcio_msg_read(m, 0, b, n) != (ssize_t)n) return -1;
    uint64_t seq;
    memcpy(&seq, b, 8);
    if (seq != i) return -1;
    for (size_t k = 8; k < n; k++)
        if (b[k] != pattern(i, k)) return -1;
    return 0;
}

/* A default configuration without the small-message slots, so every message is
 * lent by reference (and counts in the ledger and the ring). */
static zcio_channel_config by_ref_config(void) {
    zcio_channel_config c;
    zcio_channel_config_init(&c);
    c.lane_slots = 0;
    return c;
}

/* Send one buffer of `len` bytes (filled with `byte`) from `pool` on `ch`. */
static int send_buf(zcio_channel *ch, zcio_pool *pool, size_t len, int byte, int timeout_ms) {
    zcio_buf *b;
    int rc = zcio_buf_alloc(pool, len, &b);
    if (rc < 0) return rc;
    memset(zcio_buf_data(b), byte, len);
    rc = zcio_send(ch, b, timeout_ms);
    if (rc < 0) zcio_buf_free(b);
    return rc;
}

/* ----------------------------------------------------------------- children */

/* Connect to a[0] (with message rings of 8 entries) and stay connected,
 * receiving nothing, until a byte (or EOF) comes on fd a[1]. */
static int role_idle(char **a) {
    zcio_channel *ch;
    zcio_channel_config c;
    zcio_channel_config_init(&c);
    c.ring_entries = 8;
    if (zcio_connect_with(a[0], &c, &ch) != 0) {
        fprintf(stderr, "idle: connect: %s\n", zcio_last_error());
        return 1;
    }
    (void)read_byte(atoi(a[1]));
    zcio_channel_close(ch);
    return 0;
}

/* Connect to a[0], receive one message and hold it; print "got" and wait for a
 * byte (or EOF) on fd a[1]; then release it. */
static int role_holder(char **a) {
    zcio_channel *ch;
    zcio_msg *m;
    if (zcio_connect(a[0], TIMEOUT_MS, &ch) != 0 || zcio_recv(ch, TIMEOUT_MS, &m) != 0) {
        fprintf(stderr, "holder: %s\n", zcio_last_error());
        return 1;
    }
    printf("got\n");
    fflush(stdout);
    (void)read_byte(atoi(a[1]));
    zcio_msg_release(m);
    zcio_channel_close(ch);
    return 0;
}

/* Try to connect to a[0]; a listener whose access list leaves this process out
 * refuses it (the connect says -EACCES). Exit 0 when refused. */
static int role_refused(char **a) {
    zcio_channel *ch = NULL;
    int rc = zcio_connect(a[0], TIMEOUT_MS, &ch);
    if (rc == 0) {
        fprintf(stderr, "refused: the connect succeeded\n");
        zcio_channel_close(ch);
        return 1;
    }
    if (rc != -EACCES) fprintf(stderr, "refused: connect = %d (%s), want -EACCES\n", rc, zcio_last_error());
    return rc == -EACCES && ch == NULL ? 0 : 1;
}

/* Connect to a[0] and send a[1] messages of the test stream, then close. */
static int role_source(char **a) {
    zcio_channel *ch;
    if (zcio_connect(a[0], TIMEOUT_MS, &ch) != 0) {
        fprintf(stderr, "source: connect: %s\n", zcio_last_error());
        return 1;
    }
    long n = atol(a[1]);
    unsigned char b[1024];
    for (long i = 0; i < n; i++) {
        fill(b, (uint64_t)i);
        if (zcio_send_bytes(ch, b, msg_len((uint64_t)i), TIMEOUT_MS) != 0) {
            fprintf(stderr, "source: send %ld: %s\n", i, zcio_last_error());
            return 1;
        }
    }
    zcio_channel_close(ch);
    return 0;
}

/* The middle hop: listen at a[0], print "listening", connect to a[1], accept
 * one upstream and forward (a[2]: "ref" or "copy") until one side ends; print
 * "rc end error msgs bytes errors". */
static int role_middle(char **a) {
    zcio_listener *l;
    zcio_channel *up, *down;
    if (zcio_listen(a[0], &l) != 0) {
        fprintf(stderr, "middle: listen: %s\n", zcio_last_error());
        return 1;
    }
    printf("listening\n");
    fflush(stdout);
    if (zcio_connect(a[1], TIMEOUT_MS, &down) != 0 || zcio_accept(l, TIMEOUT_MS, &up) != 0) {
        fprintf(stderr, "middle: %s\n", zcio_last_error());
        return 1;
    }
    zcio_pool *pool = NULL;
    if (strcmp(a[2], "copy") == 0 && zcio_pool_create("fwd-copy", 1 << 20, 4, &pool) != 0) return 1;
    zcio_forward_config cfg;
    zcio_forward_config_init(&cfg);
    cfg.batch = 8;
    zcio_forward_report rep;
    memset(&rep, 0xff, sizeof rep);
    int rc = zcio_forward_run(up, down, pool, &cfg, &rep, sizeof rep);
    printf("%d %d %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", rc, rep.end, rep.error, rep.msgs,
           rep.bytes, rep.errors);
    fflush(stdout);
    zcio_channel_close(up);
    zcio_channel_close(down);
    zcio_pool_destroy(pool);
    zcio_listener_close(l);
    return 0;
}

/* A sink: listen at a[0], print "listening", accept, receive; after 10 messages
 * print "got" and keep receiving (until killed, or the channel ends). */
static int role_sink(char **a) {
    zcio_listener *l;
    zcio_channel *ch;
    if (zcio_listen(a[0], &l) != 0) return 1;
    printf("listening\n");
    fflush(stdout);
    if (zcio_accept(l, TIMEOUT_MS, &ch) != 0) return 1;
    for (long i = 0;; i++) {
        zcio_msg *m;
        int rc = zcio_recv(ch, TIMEOUT_MS, &m);
        if (rc != 0) break;
        zcio_msg_release(m);
        if (i == 9) {
            printf("got\n");
            fflush(stdout);
        }
    }
    zcio_channel_close(ch);
    zcio_listener_close(l);
    return 0;
}

static int run_child(const char *role, char **a, int n) {
    if (strcmp(role, "idle") == 0 && n == 2) return role_idle(a);
    if (strcmp(role, "holder") == 0 && n == 2) return role_holder(a);
    if (strcmp(role, "refused") == 0 && n == 1) return role_refused(a);
    if (strcmp(role, "source") == 0 && n == 2) return role_source(a);
    if (strcmp(role, "middle") == 0 && n == 3) return role_middle(a);
    if (strcmp(role, "sink") == 0 && n == 1) return role_sink(a);
    fprintf(stderr, "unknown child role %s (%d arguments)\n", role, n);
    return 2;
}

/* ------------------------------------------------------------------- tests */

/* `expr` must be -EINVAL with `zcio_last_error` naming `what`. */
#define CHECK_EINVAL(expr, what)                                                     \
    do {                                                                             \
        CHECK_RC(expr, -EINVAL);                                                     \
        if (!strstr(zcio_last_error(), what))                                        \
            FAILF("%s: last error \"%s\" does not name %s", #expr, zcio_last_error(), what); \
    } while (0)

/* Field by field (the structs have padding, which memcmp would read). */
static int same_channel_config(const zcio_channel_config *x, const zcio_channel_config *y) {
#define EQ(f) (x->f == y->f)
    return EQ(send_timeout_ms) && EQ(recv_timeout_ms) && EQ(connect_timeout_ms) &&
           EQ(accept_timeout_ms) && EQ(ring_entries) && EQ(notice_entries) && EQ(max_in_flight) &&
           EQ(max_bytes_in_flight) && EQ(populate) && EQ(liveness_interval_ms) &&
           EQ(max_region_len) && EQ(lane_slots) && EQ(lane_slot_size) && EQ(notify) &&
           EQ(wake_batch) && EQ(max_age_us) && EQ(spin_us) && EQ(full) && EQ(hold_limit_ms) &&
           EQ(hold_expiry) && EQ(futile_wake_limit);
}

static int same_pool_config(const zcio_pool_config *x, const zcio_pool_config *y) {
    return EQ(chunk_size) && EQ(max_chunks) && EQ(populate) && EQ(quick_list_cap) &&
           EQ(spin_us) && EQ(retire_budget) && EQ(alloc_timeout_ms);
#undef EQ
}

/* Put value i of test_config_values's list out of range in `x`. */
static void spoil(zcio_channel_config *x, size_t i) {
    switch (i) {
    case 0: x->send_timeout_ms = 0; break;
    case 1: x->ring_entries = 1000; break;
    case 2: x->ring_entries = 4; break;
    case 3: x->notice_entries = 0; break;
    case 4: x->max_in_flight = 0; break;
    case 5: x->max_bytes_in_flight = 0; break;
    case 6: x->populate = 2; break;
    case 7: x->liveness_interval_ms = 0; break;
    case 8: x->max_region_len = 0; break;
    case 9: x->lane_slots = 70000; break;
    case 10: x->lane_slot_size = (uint64_t)2 << 30; break;
    case 11: x->notify = 2; break;
    case 12: x->wake_batch = 0; break;
    case 13: x->max_age_us = 0; break;
    case 14: x->full = -1; break;
    case 15: x->hold_limit_ms = -5; break;
    case 16: x->hold_expiry = 7; break;
    default: x->futile_wake_limit = 0; break;
    }
}

/* The defaults are Rust's; every field out of range is -EINVAL naming it; a pair
 * made with a configuration reports it back. */
static int test_config_values(void) {
    zcio_channel_config c;
    zcio_channel_config_init(&c);
    CHECK(c.send_timeout_ms == 10000 && c.recv_timeout_ms == 3600000);
    CHECK(c.ring_entries == 1024 && c.notice_entries == 2048);
    CHECK(c.max_in_flight == 65536 && c.max_bytes_in_flight == 256u << 20);
    CHECK(c.populate == 1 && c.lane_slots == 64 && c.lane_slot_size == 4096);
    CHECK(c.notify == ZCIO_NOTIFY_NOW && c.wake_batch == 1 && c.max_age_us == 1000);
    CHECK(c.full == ZCIO_FULL_BLOCK && c.hold_limit_ms == 0 && c.futile_wake_limit == 64);
    zcio_channel *a = NULL, *b = NULL;
    static const char *const bad[] = {
        "send_timeout_ms", "ring_entries", "ring_entries", "notice_entries", "max_in_flight",
        "max_bytes_in_flight", "populate", "liveness_interval_ms", "max_region_len",
        "lane_slots", "lane_slot_size", "notify", "wake_batch", "max_age_us", "full",
        "hold_limit_ms", "hold_expiry", "futile_wake_limit",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        zcio_channel_config x = c;
        spoil(&x, i);
        CHECK_EINVAL(zcio_channel_pair(&x, &a, &b), bad[i]);
        char sock[PATH_MAX];
        path_in_work(sock, sizeof sock, "bad%zu.sock", i);
        zcio_listener *l;
        CHECK_EINVAL(zcio_listen_with(sock, &x, &l), bad[i]);
        CHECK_EINVAL(zcio_connect_with(sock, &x, &a), bad[i]);
    }
    /* Every field set survives the round trip through Rust. */
    c.ring_entries = 64;
    c.notice_entries = 128;
    c.max_in_flight = 100;
    c.max_bytes_in_flight = 1 << 20;
    c.populate = 0;
    c.liveness_interval_ms = 20;
    c.max_region_len = 1 << 30;
    c.lane_slots = 8;
    c.lane_slot_size = 512;
    c.notify = ZCIO_NOTIFY_DEFER;
    c.wake_batch = 4;
    c.max_age_us = 2000;
    c.spin_us = 0;
    c.full = ZCIO_FULL_FAIL;
    c.hold_limit_ms = 1500;
    c.hold_expiry = ZCIO_HOLD_RECLAIM;
    c.futile_wake_limit = 9;
    CHECK_OK(zcio_channel_pair(&c, &a, &b));
    zcio_channel_config back;
    CHECK_OK(zcio_channel_get_config(a, &back));
    CHECK(same_channel_config(&back, &c));
    /* Deferred wakes: the messages arrive once flushed. */
    for (int i = 0; i < 3; i++) CHECK_OK(zcio_send_bytes(a, "abc", 3, TIMEOUT_MS));
    CHECK_OK(zcio_channel_flush(a));
    for (int i = 0; i < 3; i++) {
        zcio_msg *m;
        CHECK_OK(zcio_recv(b, TIMEOUT_MS, &m));
        CHECK(zcio_msg_len(m) == 3);
        zcio_msg_release(m);
    }
    CHECK_RC(zcio_channel_health(a, NULL), 0);
    CHECK_RC(zcio_channel_faults(a, NULL, 0), 0);
    CHECK_RC(zcio_channel_is_disconnected(a), 0);
    CHECK_RC(zcio_channel_check_peer(a), 1);
    zcio_peer_cred pc;
    CHECK_OK(zcio_channel_peer(a, &pc));
    CHECK(pc.pid == getpid() && pc.uid == geteuid());
    CHECK(zcio_channel_socket(a) >= 0 && zcio_channel_socket(b) >= 0);
    zcio_channel_close(b);
    /* The peer is gone: a probe finds out, and the flag says so from then on. */
    CHECK_RC(zcio_channel_check_peer(a), 0);
    CHECK_RC(zcio_channel_is_disconnected(a), 1);
    zcio_channel_close(a);
    return 0;
}

/* NULL handles, NULL out pointers and bad arguments are -EINVAL, never a crash. */
static int test_null_arguments(void) {
    zcio_channel *a, *b;
    zcio_peer_fault f;
    zcio_peer_cred pc;
    zcio_channel_config cc;
    zcio_forward_report rep;
    zcio_pool *pool;
    zcio_pool_config pcfg;
    zcio_msg *m = NULL;
    CHECK_RC(zcio_channel_pair(NULL, NULL, &b), -EINVAL);
    CHECK_RC(zcio_channel_flush(NULL), -EINVAL);
    CHECK_RC(zcio_channel_expire_holds(NULL), -EINVAL);
    CHECK_RC(zcio_channel_health(NULL, &f), -EINVAL);
    CHECK_RC(zcio_channel_faults(NULL, &f, 1), -EINVAL);
    CHECK_RC(zcio_channel_peer(NULL, &pc), -EINVAL);
    CHECK_RC(zcio_channel_is_disconnected(NULL), -EINVAL);
    CHECK_RC(zcio_channel_check_peer(NULL), -EINVAL);
    CHECK_RC(zcio_channel_socket(NULL), -EINVAL);
    CHECK_RC(zcio_channel_share_pool(NULL, NULL), -EINVAL);
    CHECK_RC(zcio_channel_trust_peer(NULL), -EINVAL);
    CHECK_RC(zcio_channel_is_peer_trusted(NULL), -EINVAL);
    CHECK_RC(zcio_channel_get_config(NULL, &cc), -EINVAL);
    CHECK_RC(zcio_forward_run(NULL, NULL, NULL, NULL, &rep, sizeof rep), -EINVAL);
    CHECK_RC(zcio_msg_copy_into(NULL, NULL, 0, &m), -EINVAL);
    CHECK_RC(zcio_pool_create_with(NULL, NULL, NULL), -EINVAL);
    CHECK_RC(zcio_pool_get_config(NULL, &pcfg), -EINVAL);
    CHECK_RC(zcio_pool_reclaim_all(NULL), -EINVAL);
    CHECK_RC(zcio_msg_is_secured(NULL), -EINVAL);
    CHECK_RC(zcio_msg_join(NULL, NULL), -EINVAL);
    CHECK_RC(zcio_msg_split(NULL, 0, &m), -EINVAL);
    CHECK_RC(zcio_msg_clip(NULL, 0, 0), -EINVAL);
    CHECK_RC(zcio_listen_access(NULL, NULL, NULL, NULL), -EINVAL);
    zcio_channel_config_init(NULL);
    zcio_forward_config_init(NULL);
    zcio_pool_config_init(NULL);
    CHECK_OK(zcio_channel_pair(NULL, &a, &b));
    CHECK_RC(zcio_channel_faults(a, NULL, 3), -EINVAL);
    CHECK_RC(zcio_channel_peer(a, NULL), -EINVAL);
    CHECK_RC(zcio_channel_get_config(a, NULL), -EINVAL);
    CHECK_RC(zcio_channel_share_pool(a, NULL), -EINVAL);
    /* The same channel both ways, and forward configurations out of range. */
    CHECK_EINVAL(zcio_forward_run(a, a, NULL, NULL, &rep, sizeof rep), "same channel");
    zcio_forward_config fc;
    zcio_forward_config_init(&fc);
    CHECK(fc.batch == 64 && fc.idle_wait_ms == 20 && fc.max_idle_ms == 0);
    fc.batch = 0;
    CHECK_EINVAL(zcio_forward_run(a, b, NULL, &fc, &rep, sizeof rep), "batch");
    zcio_forward_config_init(&fc);
    fc.idle_wait_ms = 0;
    CHECK_EINVAL(zcio_forward_run(a, b, NULL, &fc, &rep, sizeof rep), "idle_wait_ms");
    zcio_forward_config_init(&fc);
    fc.max_idle_ms = -1;
    CHECK_EINVAL(zcio_forward_run(a, b, NULL, &fc, &rep, sizeof rep), "max_idle_ms");
    /* Access lists that admit nobody, or name an array that is not there. */
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "acl-bad.sock");
    zcio_listener *l;
    zcio_access nobody = {NULL, 0, NULL, 0};
    CHECK_EINVAL(zcio_listen_access(sock, NULL, &nobody, &l), "admits nobody");
    zcio_access dangling = {NULL, 2, NULL, 0};
    CHECK_EINVAL(zcio_listen_access(sock, NULL, &dangling, &l), "uids is NULL");
    /* Pool configurations out of range. */
    zcio_pool_config_init(&pcfg);
    pcfg.chunk_size = 0;
    CHECK_EINVAL(zcio_pool_create_with("p", &pcfg, &pool), "chunk_size");
    zcio_pool_config_init(&pcfg);
    pcfg.max_chunks = 0;
    CHECK_EINVAL(zcio_pool_create_with("p", &pcfg, &pool), "max_chunks");
    zcio_pool_config_init(&pcfg);
    pcfg.populate = 3;
    CHECK_EINVAL(zcio_pool_create_with("p", &pcfg, &pool), "populate");
    zcio_pool_config_init(&pcfg);
    pcfg.alloc_timeout_ms = -2;
    CHECK_EINVAL(zcio_pool_create_with("p", &pcfg, &pool), "alloc_timeout_ms");
    zcio_channel_close(a);
    zcio_channel_close(b);
    return 0;
}

/* ZCIO_FULL_FAIL: with a peer that does not receive, a send into the full ring
 * fails at once with -EAGAIN even though it asked for the default wait. */
static int test_full_policy_fail(void) {
    char sock[PATH_MAX], num[16];
    int gp[2];
    path_in_work(sock, sizeof sock, "full.sock");
    zcio_channel_config c = by_ref_config();
    c.ring_entries = 8;
    c.full = ZCIO_FULL_FAIL;
    zcio_listener *l;
    CHECK_OK(zcio_listen_with(sock, &c, &l));
    CHECK(go_pipe(gp, num, sizeof num) == 0);
    pid_t p = spawn("idle", sock, num, NULL);
    close(gp[0]);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, TIMEOUT_MS, &ch));
    zcio_pool *pool;
    CHECK_OK(zcio_pool_create("full", 1 << 20, 4, &pool));
    int rc = 0, sent = 0;
    while (sent < 100000 && (rc = send_buf(ch, pool, 64, 'x', ZCIO_TIMEOUT_DEFAULT)) == 0) sent++;
    CHECK_RC(rc, -EAGAIN);
    CHECK(sent >= 1);
    zcio_channel_stats s;
    CHECK_OK(zcio_channel_get_stats(ch, &s));
    CHECK(s.send_would_block == 1 && s.send_timed_out == 0 && s.msgs_sent == (uint64_t)sent);
    CHECK(write(gp[1], "g", 1) == 1);
    CHECK_CHILD(p, 0);
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    zcio_listener_close(l);
    close(gp[1]);
    return 0;
}

/* max_bytes_in_flight: a message larger than the cap goes while the peer holds
 * nothing; the next one is refused (the peer holds the cap already). */
static int test_max_bytes_in_flight(void) {
    char sock[PATH_MAX], num[16];
    int gp[2];
    path_in_work(sock, sizeof sock, "bytes.sock");
    zcio_channel_config c = by_ref_config();
    c.max_bytes_in_flight = 64 * 1024;
    zcio_listener *l;
    CHECK_OK(zcio_listen_with(sock, &c, &l));
    CHECK(go_pipe(gp, num, sizeof num) == 0);
    pid_t p = spawn("idle", sock, num, NULL);
    close(gp[0]);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, TIMEOUT_MS, &ch));
    zcio_pool *pool;
    CHECK_OK(zcio_pool_create("bytes", 1 << 20, 4, &pool));
    CHECK_OK(send_buf(ch, pool, 128 * 1024, 'a', 0));
    CHECK_RC(send_buf(ch, pool, 4096, 'b', 0), -EAGAIN);
    CHECK(strstr(zcio_last_error(), "max_bytes_in_flight") != NULL);
    zcio_channel_stats s;
    CHECK_OK(zcio_channel_get_stats(ch, &s));
    CHECK(s.msgs_sent == 1 && s.held_by_peer == 1 && s.held_by_peer_bytes == 128 * 1024);
    CHECK(write(gp[1], "g", 1) == 1);
    CHECK_CHILD(p, 0);
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    zcio_listener_close(l);
    close(gp[1]);
    return 0;
}

/* A hold limit with ZCIO_HOLD_RECLAIM: a peer holding a lent buffer too long has
 * it taken back, which zcio_channel_faults and the counters show. */
static int test_hold_limit_reclaims(void) {
    char sock[PATH_MAX], num[16], line[64];
    int gp[2], op[2];
    path_in_work(sock, sizeof sock, "hold.sock");
    zcio_channel_config c = by_ref_config();
    c.hold_limit_ms = 50;
    c.hold_expiry = ZCIO_HOLD_RECLAIM;
    zcio_listener *l;
    CHECK_OK(zcio_listen_with(sock, &c, &l));
    CHECK(go_pipe(gp, num, sizeof num) == 0 && out_pipe(op) == 0);
    pid_t p = spawn_to(op[1], "holder", sock, num, NULL);
    close(gp[0]);
    close(op[1]);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, TIMEOUT_MS, &ch));
    zcio_pool *pool;
    CHECK_OK(zcio_pool_create("hold", 1 << 20, 4, &pool));
    CHECK_OK(send_buf(ch, pool, 4096, 'h', TIMEOUT_MS));
    CHECK(read_line(op[0], line, sizeof line) > 0 && strcmp(line, "got") == 0);
    /* The peer holds it; enforce the limit (as a timer would) until, under the
     * watchdog, the fault record says the buffer was taken back. */
    zcio_peer_fault f[8];
    int nf, taken = 0, seen = 0;
    while (!seen) {
        int n = zcio_channel_expire_holds(ch);
        CHECK(n >= 0);
        taken += n;
        nf = zcio_channel_faults(ch, f, 8);
        CHECK(nf >= 0 && nf <= 8);
        for (int i = 0; i < nf; i++) seen |= f[i].kind == ZCIO_FAULT_HOLDS_RECLAIMED;
        if (!seen) sleep_ms(5);
    }
    CHECK(taken <= 1);
    for (int i = 0; i < nf; i++)
        if (f[i].kind == ZCIO_FAULT_HOLDS_RECLAIMED) CHECK(f[i].value == 1);
    zcio_peer_fault first;
    CHECK_RC(zcio_channel_health(ch, &first), 1);
    CHECK(strstr(zcio_last_error(), "hold limit") != NULL);
    zcio_channel_stats s;
    CHECK_OK(zcio_channel_get_stats(ch, &s));
    CHECK(s.held_by_peer == 0);
    zcio_pool_stats ps;
    CHECK_OK(zcio_pool_get_stats(pool, &ps));
    CHECK(ps.buffers_in_use == 0);
    CHECK(write(gp[1], "g", 1) == 1);
    CHECK_CHILD(p, 0);
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    zcio_listener_close(l);
    close(gp[1]);
    close(op[0]);
    return 0;
}

/* zcio_listen_access: a list leaving out our uid and gid refuses the connecting
 * process (its connect fails, accept says -EACCES); one naming our uid admits it,
 * and zcio_channel_peer names it. */
static int test_access_list(void) {
    char sock[PATH_MAX], num[16];
    uint32_t other = (uint32_t)geteuid() + 1, ogid = (uint32_t)getegid() + 1, uid = geteuid();
    path_in_work(sock, sizeof sock, "acl.sock");
    zcio_access no = {&other, 1, &ogid, 1};
    zcio_listener *l;
    CHECK_OK(zcio_listen_access(sock, NULL, &no, &l));
    pid_t p = spawn("refused", sock, NULL);
    zcio_channel *ch = NULL;
    CHECK_RC(zcio_accept(l, TIMEOUT_MS, &ch), -EACCES);
    CHECK(ch == NULL);
    CHECK_CHILD(p, 0);
    zcio_listener_close(l);
    zcio_access yes = {&uid, 1, NULL, 0};
    CHECK_OK(zcio_listen_access(sock, NULL, &yes, &l));
    int gp[2];
    CHECK(go_pipe(gp, num, sizeof num) == 0);
    p = spawn("idle", sock, num, NULL);
    close(gp[0]);
    CHECK_OK(zcio_accept(l, TIMEOUT_MS, &ch));
    zcio_peer_cred pc;
    CHECK_OK(zcio_channel_peer(ch, &pc));
    CHECK(pc.pid == p && pc.uid == uid && pc.gid == getegid());
    CHECK(write(gp[1], "g", 1) == 1);
    CHECK_CHILD(p, 0);
    /* The peer closed: the next receive says so, and so does a probe. */
    zcio_msg *m;
    CHECK_RC(zcio_recv(ch, TIMEOUT_MS, &m), -EPIPE);
    CHECK_RC(zcio_channel_check_peer(ch), 0);
    CHECK_RC(zcio_channel_is_disconnected(ch), 1);
    zcio_channel_close(ch);
    zcio_listener_close(l);
    close(gp[1]);
    return 0;
}

/* source -> middle (zcio_forward_run) -> this process: every message arrives in
 * order, and the middle's report counts them and says the upstream ended. */
static int forward_through(const char *mode) {
    enum { N = 500 };
    char sink[PATH_MAX], mid[PATH_MAX], line[256], nstr[16];
    path_in_work(sink, sizeof sink, "sink-%s.sock", mode);
    path_in_work(mid, sizeof mid, "mid-%s.sock", mode);
    snprintf(nstr, sizeof nstr, "%d", N);
    zcio_listener *l;
    CHECK_OK(zcio_listen(sink, &l));
    int op[2];
    CHECK(out_pipe(op) == 0);
    pid_t pm = spawn_to(op[1], "middle", mid, sink, mode, NULL);
    close(op[1]);
    CHECK(read_line(op[0], line, sizeof line) > 0 && strcmp(line, "listening") == 0);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, TIMEOUT_MS, &ch));
    pid_t ps = spawn("source", mid, nstr, NULL);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < N; i++) {
        zcio_msg *m;
        CHECK_OK(zcio_recv(ch, TIMEOUT_MS, &m));
        if (check_msg(m, i) != 0) FAILF("message %" PRIu64 " differs", i);
        bytes += zcio_msg_len(m);
        zcio_msg_release(m);
    }
    zcio_msg *m;
    CHECK_RC(zcio_recv(ch, TIMEOUT_MS, &m), -EPIPE);
    CHECK_CHILD(ps, 0);
    CHECK(read_line(op[0], line, sizeof line) > 0);
    int rc, end, err;
    uint64_t msgs, rbytes, errors;
    CHECK(sscanf(line, "%d %d %d %" SCNu64 " %" SCNu64 " %" SCNu64, &rc, &end, &err, &msgs,
                 &rbytes, &errors) == 6);
    CHECK(rc == 0 && end == ZCIO_FORWARD_UPSTREAM_DISCONNECTED && err == 0);
    CHECK(msgs == N && rbytes == bytes && errors == 0);
    CHECK_CHILD(pm, 0);
    zcio_channel_close(ch);
    zcio_listener_close(l);
    close(op[0]);
    return 0;
}

static int test_forward_run_by_ref(void) { return forward_through("ref"); }
static int test_forward_run_copy(void) { return forward_through("copy"); }

/* this process -> middle (zcio_forward_run) -> sink, and the sink is killed with
 * SIGKILL mid-stream: the loop ends (no hang) with -EPIPE and a report saying the
 * downstream went away, and closes its upstream, so our sends fail too. */
static int test_forward_downstream_killed(void) {
    char sink[PATH_MAX], mid[PATH_MAX], line[256];
    path_in_work(sink, sizeof sink, "ksink.sock");
    path_in_work(mid, sizeof mid, "kmid.sock");
    int sp[2], mp[2];
    CHECK(out_pipe(sp) == 0 && out_pipe(mp) == 0);
    pid_t psink = spawn_to(sp[1], "sink", sink, NULL);
    close(sp[1]);
    CHECK(read_line(sp[0], line, sizeof line) > 0 && strcmp(line, "listening") == 0);
    pid_t pm = spawn_to(mp[1], "middle", mid, sink, "ref", NULL);
    close(mp[1]);
    CHECK(read_line(mp[0], line, sizeof line) > 0 && strcmp(line, "listening") == 0);
    zcio_channel *ch;
    CHECK_OK(zcio_connect(mid, TIMEOUT_MS, &ch));
    unsigned char b[1024];
    int killed = 0, rc = 0;
    struct pollfd pf = {sp[0], POLLIN, 0};
    for (uint64_t i = 0;; i++) {
        fill(b, i);
        rc = zcio_send_bytes(ch, b, msg_len(i), TIMEOUT_MS);
        if (rc != 0) break;
        if (!killed && poll(&pf, 1, 0) == 1) {
            CHECK(read_line(sp[0], line, sizeof line) > 0 && strcmp(line, "got") == 0);
            CHECK(kill(psink, SIGKILL) == 0);
            CHECK_CHILD(psink, 128 + SIGKILL);
            killed = 1;
        }
    }
    CHECK(killed);
    CHECK_RC(rc, -EPIPE);
    CHECK(read_line(mp[0], line, sizeof line) > 0);
    int frc, end, err;
    uint64_t msgs, bytes, errors;
    CHECK(sscanf(line, "%d %d %d %" SCNu64 " %" SCNu64 " %" SCNu64, &frc, &end, &err, &msgs,
                 &bytes, &errors) == 6);
    CHECK(frc == -EPIPE && end == ZCIO_FORWARD_DOWNSTREAM_DISCONNECTED && err == 0);
    CHECK(msgs >= 10);
    CHECK_CHILD(pm, 0);
    zcio_channel_close(ch);
    close(sp[0]);
    close(mp[0]);
    return 0;
}

/* max_idle_ms stops the loop: what was sent is forwarded, then it ends with
 * ZCIO_FORWARD_IDLE and closes the downstream. */
static int test_forward_run_idle(void) {
    zcio_channel *src, *up, *down, *dst;
    CHECK_OK(zcio_channel_pair(NULL, &src, &up));
    CHECK_OK(zcio_channel_pair(NULL, &down, &dst));
    for (int i = 0; i < 3; i++) CHECK_OK(zcio_send_bytes(src, "abcd", 4, TIMEOUT_MS));
    zcio_forward_config cfg;
    zcio_forward_config_init(&cfg);
    cfg.max_idle_ms = 50;
    zcio_forward_report rep;
    CHECK_RC(zcio_forward_run(up, down, NULL, &cfg, &rep, sizeof rep), 0);
    CHECK(rep.end == ZCIO_FORWARD_IDLE && rep.error == 0);
    CHECK(rep.msgs == 3 && rep.bytes == 12 && rep.errors == 0 && rep.batches >= 1);
    /* A report struct smaller than the first version is refused before
     * anything runs, and left untouched (docs/c.md, "The ABI"). */
    struct { int end, error; } small = {0, 7};
    CHECK_EINVAL(zcio_forward_run(up, down, NULL, &cfg, (zcio_forward_report *)&small, sizeof small),
                 "smaller than");
    CHECK(small.end == 0 && small.error == 7);
    for (int i = 0; i < 3; i++) {
        zcio_msg *m;
        CHECK_OK(zcio_recv(dst, TIMEOUT_MS, &m));
        CHECK_RC(zcio_msg_len(m), 4);
        zcio_msg_release(m);
    }
    zcio_msg *m;
    CHECK_RC(zcio_recv(dst, TIMEOUT_MS, &m), -EPIPE);
    zcio_channel_close(src);
    zcio_channel_close(up);
    zcio_channel_close(down);
    zcio_channel_close(dst);
    return 0;
}

/* zcio_pool_create_with: the fields are applied (read back, the capacity in the
 * counters, the allocation bound), and zcio_pool_reclaim_all takes notices in. */
static int test_pool_config(void) {
    size_t page = zcio_page_size();
    CHECK(page == (size_t)sysconf(_SC_PAGESIZE));
    zcio_pool_config c;
    zcio_pool_config_init(&c);
    CHECK(c.chunk_size == 16u << 20 && c.max_chunks == 16 && c.populate == 1);
    CHECK(c.quick_list_cap == 64 && c.alloc_timeout_ms == 10000);
    c.chunk_size = 64 * 1024;
    c.max_chunks = 2;
    c.populate = 0;
    c.quick_list_cap = 3;
    c.spin_us = 0;
    c.retire_budget = 128 * 1024;
    c.alloc_timeout_ms = 50;
    zcio_pool *pool;
    CHECK_OK(zcio_pool_create_with("cfg", &c, &pool));
    zcio_pool_config back;
    CHECK_OK(zcio_pool_get_config(pool, &back));
    CHECK(same_pool_config(&back, &c));
    zcio_buf *x, *y, *z;
    CHECK_OK(zcio_buf_alloc(pool, 64 * 1024, &x));
    CHECK_OK(zcio_buf_alloc(pool, 64 * 1024, &y));
    zcio_pool_stats s;
    CHECK_OK(zcio_pool_get_stats(pool, &s));
    CHECK(s.chunks == 2 && s.bytes_total == 128 * 1024);
    CHECK(s.capacity_buffers == 128 * 1024 / page);
    /* Exhausted: the default wait is the pool's alloc_timeout_ms, then -ETIMEDOUT. */
    CHECK_RC(zcio_buf_alloc(pool, 4096, &z), -ETIMEDOUT);
    CHECK_OK(zcio_pool_get_stats(pool, &s));
    CHECK(s.alloc_timed_out == 1);
    zcio_buf_free(y);
    /* reclaim_all: a buffer sent over a pair and released comes back. */
    zcio_channel_config cc = by_ref_config();
    zcio_channel *a, *b;
    CHECK_OK(zcio_channel_pair(&cc, &a, &b));
    CHECK_OK(zcio_channel_share_pool(a, pool));
    zcio_channel_stats cs;
    CHECK_OK(zcio_channel_get_stats(a, &cs));
    CHECK(cs.regions_sent >= 1);
    memset(zcio_buf_data(x), 'r', 16);
    CHECK_OK(zcio_buf_truncate(x, 16));
    CHECK_OK(zcio_send(a, x, TIMEOUT_MS));
    zcio_msg *m;
    CHECK_OK(zcio_recv(b, TIMEOUT_MS, &m));
    CHECK_RC(zcio_msg_is_secured(m), 0);
    zcio_msg_release(m);
    CHECK_OK(zcio_channel_flush(b));
    int got = 0;
    for (int i = 0; i < 1000 && got == 0; i++) {
        int r = zcio_pool_reclaim_all(pool);
        CHECK(r >= 0);
        got += r;
        if (!got) sleep_ms(1);
    }
    CHECK_RC(got, 1);
    CHECK_OK(zcio_pool_get_stats(pool, &s));
    CHECK(s.buffers_in_use == 0);
    zcio_channel_close(a);
    zcio_channel_close(b);
    zcio_pool_destroy(pool);
    return 0;
}

/* Message aggregates (join, split, clip), secured messages, copies into a pool,
 * a trusted peer, and set_non_dumpable. */
static int test_messages(void) {
    zcio_channel *a, *b;
    CHECK_OK(zcio_channel_pair(NULL, &a, &b));
    CHECK_RC(zcio_channel_is_peer_trusted(b), 0);
    CHECK_OK(zcio_send_bytes(a, "hello ", 6, TIMEOUT_MS));
    CHECK_OK(zcio_send_bytes(a, "world", 5, TIMEOUT_MS));
    zcio_msg *m1, *m2, *tail;
    CHECK_OK(zcio_recv(b, TIMEOUT_MS, &m1));
    CHECK_OK(zcio_recv(b, TIMEOUT_MS, &m2));
    CHECK_RC(zcio_msg_is_volatile(m1), 1);
    CHECK_OK(zcio_msg_join(m1, m2)); /* m2's handle is gone */
    char buf[32] = {0};
    CHECK_RC(zcio_msg_len(m1), 11);
    CHECK_RC(zcio_msg_slices(m1, NULL, 0), 2);
    CHECK_RC(zcio_msg_read(m1, 0, buf, sizeof buf), 11);
    CHECK(memcmp(buf, "hello world", 11) == 0);
    CHECK_RC(zcio_msg_split(m1, 20, &tail), -ERANGE);
    CHECK_OK(zcio_msg_split(m1, 3, &tail));
    CHECK_RC(zcio_msg_len(m1), 3);
    CHECK_RC(zcio_msg_len(tail), 8);
    memset(buf, 0, sizeof buf);
    CHECK_RC(zcio_msg_read(tail, 0, buf, sizeof buf), 8);
    CHECK(memcmp(buf, "lo world", 8) == 0);
    CHECK_RC(zcio_msg_clip(tail, 5, 4), -ERANGE);
    CHECK_OK(zcio_msg_clip(tail, 3, 1));
    memset(buf, 0, sizeof buf);
    CHECK_RC(zcio_msg_read(tail, 0, buf, sizeof buf), 4);
    CHECK(memcmp(buf, "worl", 4) == 0);
    /* A copy into a pool of this process: one slice, the same bytes. */
    zcio_pool *pool;
    CHECK_OK(zcio_pool_create("copies", 1 << 20, 2, &pool));
    zcio_msg *copy;
    CHECK_OK(zcio_msg_copy_into(pool, tail, TIMEOUT_MS, &copy));
    CHECK_RC(zcio_msg_slices(copy, NULL, 0), 1);
    memset(buf, 0, sizeof buf);
    CHECK_RC(zcio_msg_read(copy, 0, buf, sizeof buf), 4);
    CHECK(memcmp(buf, "worl", 4) == 0);
    CHECK_OK(zcio_forward(a, copy, TIMEOUT_MS));
    zcio_msg *fw;
    CHECK_OK(zcio_recv(b, TIMEOUT_MS, &fw));
    CHECK_RC(zcio_msg_len(fw), 4);
    zcio_msg_release(fw);
    zcio_msg_release(copy);
    zcio_msg_release(tail);
    zcio_msg_release(m1);
    /* Secured buffers are secured; a trusted peer's messages are not volatile. */
    zcio_buf *sb;
    CHECK_OK(zcio_buf_alloc_secured(pool, 64, &sb));
    memset(zcio_buf_data(sb), 's', 64);
    CHECK_OK(zcio_send(a, sb, TIMEOUT_MS));
    zcio_msg *sm;
    CHECK_OK(zcio_recv(b, TIMEOUT_MS, &sm));
    CHECK_RC(zcio_msg_is_secured(sm), 1);
    CHECK_RC(zcio_msg_is_volatile(sm), 0);
    zcio_msg_release(sm);
    CHECK_OK(zcio_channel_trust_peer(b));
    CHECK_RC(zcio_channel_is_peer_trusted(b), 1);
    CHECK_OK(zcio_send_bytes(a, "t", 1, TIMEOUT_MS));
    CHECK_OK(zcio_recv(b, TIMEOUT_MS, &sm));
    CHECK_RC(zcio_msg_is_volatile(sm), 0);
    CHECK_RC(zcio_msg_is_secured(sm), 0);
    zcio_msg_release(sm);
    zcio_channel_close(a);
    zcio_channel_close(b);
    zcio_pool_destroy(pool);
    CHECK_RC(zcio_set_non_dumpable(), 0);
    CHECK(prctl(PR_GET_DUMPABLE) == 0);
    return 0;
}

static const struct test tests[] = {
    {"config_values", test_config_values},
    {"null_arguments", test_null_arguments},
    {"full_policy_fail", test_full_policy_fail},
    {"max_bytes_in_flight", test_max_bytes_in_flight},
    {"hold_limit_reclaims", test_hold_limit_reclaims},
    {"access_list", test_access_list},
    {"forward_run_by_ref", test_forward_run_by_ref},
    {"forward_run_copy", test_forward_run_copy},
    {"forward_downstream_killed", test_forward_downstream_killed},
    {"forward_run_idle", test_forward_run_idle},
    {"pool_config", test_pool_config},
    {"messages", test_messages},
};

int main(int argc, char **argv) {
    if (child_or_runner(argc, argv, run_child)) return 2;
    signal(SIGPIPE, SIG_IGN);

    if (make_work_dir(shm_or_tmp(), "zcio-cfgtest")) return 2;
    int rc = run_tests(tests, sizeof tests / sizeof *tests, argc, argv, WATCHDOG_S);
    remove_work_dir();
    return rc;
}
