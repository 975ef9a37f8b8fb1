/*
 * Tests of the zcio C library across real processes.
 *
 *   test_zcio            run every test
 *   test_zcio NAME...    run the named tests
 *
 * Each test runs in a fork of the runner (which itself never calls zcio) under a
 * watchdog alarm; peers are separate processes (this program re-executed with
 * --child ROLE ...), each with its own watchdog too. Rings and sockets live in a
 * fresh directory (ZCIO_RING_DIR) removed at the end. Prints "N passed, N failed"
 * and exits non-zero if any test failed. Never asserts on timing.
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
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <zcio.h>

/* Not in zcio.h: a test-only entry point that panics inside the library. */
extern int zcio__test_panic(int kind);

#define WATCHDOG_S 60
#define CHILD_WAIT_S 30

#include "harness.h"

/* ------------------------------------------------------------- utilities */

static unsigned char pattern(uint64_t msg, size_t k) {
    return (unsigned char)(msg * 131u + k * 7u + 1u);
}

/* Block i of a test stream: 8..1000 bytes, its first 8 bytes carry i. */
static size_t block_len(uint64_t i) { return 8 + (size_t)((i * 37 + 11) % 993); }

static void fill_block(unsigned char *b, uint64_t i) {
    size_t n = block_len(i);
    for (size_t k = 0; k < n; k++) b[k] = pattern(i, k);
    memcpy(b, &i, 8);
}

static int check_block(const unsigned char *b, size_t n, uint64_t i) {
    uint64_t seq;
    if (n != block_len(i)) return -1;
    memcpy(&seq, b, 8);
    if (seq != i) return -1;
    for (size_t k = 8; k < n; k++)
        if (b[k] != pattern(i, k)) return -1;
    return 0;
}

/* Connect, retrying while the listener is not there yet (at most 10 s). */
static int connect_retry(const char *path, zcio_channel **ch) {
    int rc = -1;
    for (int i = 0; i < 1000; i++) {
        rc = zcio_connect(path, 5000, ch);
        if (rc != -ENOENT && rc != -ECONNREFUSED) return rc;
        sleep_ms(10);
    }
    return rc;
}

/* --------------------------------------------------------- child roles */

static int child_fail(const char *role, const char *what, long rc) {
    fprintf(stderr, "    child %s: %s: %s (%s)\n", role, what, zcio_strerror((int)rc),
            zcio_last_error());
    return 1;
}

/* ring-producer NAME MODE COUNT: attach to NAME as producer, wait for a
 * consumer, write COUNT blocks; then by MODE: close (end of stream), "fail"
 * (close with error 5), "die" (SIGKILL itself without closing). */
static int role_ring_producer(char **a) {
    const char *name = a[0], *mode = a[1];
    uint64_t count = strtoull(a[2], NULL, 10);
    zcio_ring *r;
    int rc = zcio_ring_open(name, ZCIO_O_WRONLY, 0, 0, &r);
    if (rc < 0) return child_fail("ring-producer", "open", rc);
    if (zcio_ring_wait_consumers(r, 1, 10000) < 1) return child_fail("ring-producer", "wait", -ETIMEDOUT);
    unsigned char b[1024];
    for (uint64_t i = 0; i < count; i++) {
        fill_block(b, i);
        ssize_t n = zcio_ring_write(r, b, block_len(i));
        if (n != (ssize_t)block_len(i)) return child_fail("ring-producer", "write", n);
    }
    if (strcmp(mode, "die") == 0) raise(SIGKILL);
    if (strcmp(mode, "fail") == 0) {
        zcio_ring_close_error(r, 5);
        return 0;
    }
    zcio_ring_close(r);
    return 0;
}

/* chan-sender SOCK MODE COUNT: connect and send COUNT messages (message i:
 * block_len(i * 3) bytes of fill_block(i)); MODE "plain" (pool buffers),
 * "bytes" (zcio_send_bytes), "slices" (3 buffers per message, zcio_sendv),
 * "secured", "die" (SIGKILL after sending, without closing). */
static int role_chan_sender(char **a) {
    const char *sock = a[0], *mode = a[1];
    uint64_t count = strtoull(a[2], NULL, 10);
    zcio_channel *ch;
    int rc = connect_retry(sock, &ch);
    if (rc < 0) return child_fail("chan-sender", "connect", rc);
    zcio_pool *pool;
    rc = zcio_pool_create("ctest-sender", 1 << 20, 4, &pool);
    if (rc < 0) return child_fail("chan-sender", "pool", rc);
    for (uint64_t i = 0; i < count; i++) {
        unsigned char b[1024];
        fill_block(b, i);
        size_t n = block_len(i);
        if (strcmp(mode, "bytes") == 0) {
            rc = zcio_send_bytes(ch, b, n, -1);
        } else if (strcmp(mode, "slices") == 0) {
            /* the same bytes in three slices: 3 | n - 5 | 2 */
            size_t cut[4] = {0, 3, n - 2, n};
            zcio_buf *bufs[3];
            for (int s = 0; s < 3; s++) {
                rc = zcio_buf_alloc(pool, cut[s + 1] - cut[s], &bufs[s]);
                if (rc < 0) return child_fail("chan-sender", "alloc", rc);
                memcpy(zcio_buf_data(bufs[s]), b + cut[s], cut[s + 1] - cut[s]);
            }
            rc = zcio_sendv(ch, bufs, 3, -1);
        } else {
            zcio_buf *buf;
            rc = strcmp(mode, "secured") == 0 ? zcio_buf_alloc_secured(pool, n, &buf)
                                               : zcio_buf_alloc(pool, n, &buf);
            if (rc < 0) return child_fail("chan-sender", "alloc", rc);
            memcpy(zcio_buf_data(buf), b, n);
            rc = zcio_send(ch, buf, -1);
        }
        if (rc < 0) return child_fail("chan-sender", "send", rc);
    }
    if (strcmp(mode, "die") == 0) raise(SIGKILL);
    /* Stay until the receiver closes, so our buffers stay mapped for it. */
    zcio_msg *m;
    rc = zcio_recv(ch, 20000, &m);
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    return rc == -EPIPE ? 0 : child_fail("chan-sender", "waiting for the receiver to close", rc);
}

/* chan-holder SOCK: connect; receive one message, say "got", wait for
 * "release", release it, say "done", wait for the other side to close. */
static int role_chan_holder(char **a) {
    zcio_channel *ch;
    int rc = connect_retry(a[0], &ch);
    if (rc < 0) return child_fail("chan-holder", "connect", rc);
    zcio_msg *m, *cmd;
    if ((rc = zcio_recv(ch, 20000, &m)) < 0) return child_fail("chan-holder", "recv", rc);
    if ((rc = zcio_send_bytes(ch, "got", 3, -1)) < 0) return child_fail("chan-holder", "send", rc);
    if ((rc = zcio_recv(ch, 20000, &cmd)) < 0) return child_fail("chan-holder", "recv cmd", rc);
    zcio_msg_release(cmd);
    zcio_msg_release(m);
    if ((rc = zcio_send_bytes(ch, "done", 4, -1)) < 0) return child_fail("chan-holder", "send", rc);
    rc = zcio_recv(ch, 20000, &m);
    zcio_channel_close(ch);
    return rc == -EPIPE ? 0 : child_fail("chan-holder", "waiting for close", rc);
}

/* chan-idle SOCK: connect and receive nothing until the file SOCK.done
 * exists (a peer that does not keep up). */
static int role_chan_idle(char **a) {
    zcio_channel *ch;
    int rc = connect_retry(a[0], &ch);
    if (rc < 0) return child_fail("chan-idle", "connect", rc);
    char done[PATH_MAX];
    snprintf(done, sizeof done, "%s.done", a[0]);
    while (access(done, F_OK) != 0) sleep_ms(5);
    zcio_channel_close(ch);
    return 0;
}

/* chan-sink SOCK COUNT: listen, accept, receive COUNT messages checking
 * message i against fill_block(i), then expect the end (-EPIPE). */
static int role_chan_sink(char **a) {
    uint64_t count = strtoull(a[1], NULL, 10);
    zcio_listener *l;
    int rc = zcio_listen(a[0], &l);
    if (rc < 0) return child_fail("chan-sink", "listen", rc);
    zcio_channel *ch;
    rc = zcio_accept(l, 20000, &ch);
    zcio_listener_close(l);
    if (rc < 0) return child_fail("chan-sink", "accept", rc);
    for (uint64_t i = 0; i < count; i++) {
        zcio_msg *m;
        unsigned char b[1024];
        if ((rc = zcio_recv(ch, 20000, &m)) < 0) return child_fail("chan-sink", "recv", rc);
        ssize_t n = zcio_msg_read(m, 0, b, sizeof b);
        if (n < 0 || check_block(b, (size_t)n, i)) return child_fail("chan-sink", "content", -EBADMSG);
        zcio_msg_release(m);
    }
    zcio_msg *m;
    rc = zcio_recv(ch, 20000, &m);
    zcio_channel_close(ch);
    return rc == -EPIPE ? 0 : child_fail("chan-sink", "expected the end", rc);
}

/* garbage-listener SOCK: a Unix seqpacket listener that answers any
 * connection with junk and hangs up (a hostile peer). */
static int role_garbage_listener(char **a) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, a[0], sizeof addr.sun_path - 1);
    if (s < 0 || bind(s, (struct sockaddr *)&addr, sizeof addr) || listen(s, 4)) return 1;
    int c = accept(s, NULL, NULL);
    if (c < 0) return 1;
    char junk[512];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 5);
    ssize_t w = write(c, junk, sizeof junk);
    (void)w;
    sleep_ms(100);
    close(c);
    close(s);
    unlink(a[0]);
    return 0;
}

/* lane-echo SOCK COUNT: connect; take the parent's lane, open one back
 * (8 slots of 1 KiB), echo COUNT messages, then wait for the parent's lane
 * to end (-EPIPE). lane-die SOCK: open a lane, send blocks 0..2, SIGKILL. */
static int role_lane(char **a, int die) {
    zcio_channel *ch;
    int rc = connect_retry(a[0], &ch);
    if (rc < 0) return child_fail("lane", "connect", rc);
    zcio_lane_sender *tx;
    rc = zcio_lane_open(ch, 8, 1024, &tx);
    if (rc < 0) return child_fail("lane", "open", rc);
    if (die) {
        unsigned char b[1024];
        for (uint64_t i = 0; i < 3; i++) {
            fill_block(b, i);
            rc = zcio_lane_send_bytes(tx, b, block_len(i), -1);
            if (rc < 0) return child_fail("lane-die", "send", rc);
        }
        raise(SIGKILL);
    }
    zcio_lane_receiver *rx;
    rc = zcio_lane_accept(ch, 20000, &rx);
    if (rc < 0) return child_fail("lane-echo", "accept", rc);
    uint64_t count = strtoull(a[1], NULL, 10);
    for (uint64_t i = 0; i < count; i++) {
        const void *data;
        size_t len;
        rc = zcio_lane_recv(rx, 20000, &data, &len);
        if (rc < 0) return child_fail("lane-echo", "recv", rc);
        void *slot;
        size_t cap;
        rc = zcio_lane_loan(tx, 20000, &slot, &cap);
        if (rc < 0) return child_fail("lane-echo", "loan", rc);
        if (len > cap) return child_fail("lane-echo", "capacity", -EMSGSIZE);
        memcpy(slot, data, len);
        rc = zcio_lane_send(tx, len);
        if (rc < 0) return child_fail("lane-echo", "send", rc);
    }
    const void *data;
    size_t len;
    rc = zcio_lane_recv(rx, 20000, &data, &len);
    zcio_lane_receiver_free(rx);
    zcio_lane_sender_free(tx);
    zcio_channel_close(ch);
    return rc == -EPIPE ? 0 : child_fail("lane-echo", "waiting for the end", rc);
}

/* chan-rounds SOCK ROUNDS: connect; ROUNDS times: wait for the parent's
 * "next", then send 10 blocks (block r * 10 + k) with the blocking API; then
 * wait for the parent to close (-EPIPE). */
static int role_chan_rounds(char **a) {
    zcio_channel *ch;
    int rc = connect_retry(a[0], &ch);
    if (rc < 0) return child_fail("chan-rounds", "connect", rc);
    uint64_t rounds = strtoull(a[1], NULL, 10);
    for (uint64_t r = 0; r < rounds; r++) {
        zcio_msg *cmd;
        if ((rc = zcio_recv(ch, 20000, &cmd)) < 0) return child_fail("chan-rounds", "recv next", rc);
        zcio_msg_release(cmd);
        for (uint64_t k = 0; k < 10; k++) {
            unsigned char b[1024];
            fill_block(b, r * 10 + k);
            rc = zcio_send_bytes(ch, b, block_len(r * 10 + k), -1);
            if (rc < 0) return child_fail("chan-rounds", "send", rc);
        }
    }
    zcio_msg *m;
    rc = zcio_recv(ch, 20000, &m);
    zcio_channel_close(ch);
    return rc == -EPIPE ? 0 : child_fail("chan-rounds", "waiting for the receiver to close", rc);
}

/* chan-drain SOCK COUNT: listen; COUNT times accept a channel, read its 8
 * blocks of 1 KiB (before or after the sender closed: whenever they come),
 * wait for its end (-EPIPE) and close it. */
static int role_chan_drain(char **a) {
    zcio_listener *l;
    int rc = zcio_listen(a[0], &l);
    if (rc < 0) return child_fail("chan-drain", "listen", rc);
    uint64_t count = strtoull(a[1], NULL, 10);
    for (uint64_t c = 0; c < count; c++) {
        zcio_channel *ch;
        if ((rc = zcio_accept(l, 20000, &ch)) < 0) return child_fail("chan-drain", "accept", rc);
        for (int i = 0; i < 8; i++) {
            zcio_msg *m;
            if ((rc = zcio_recv(ch, 20000, &m)) < 0) return child_fail("chan-drain", "recv", rc);
            zcio_msg_release(m);
        }
        zcio_msg *m;
        rc = zcio_recv(ch, 20000, &m);
        zcio_channel_close(ch);
        if (rc != -EPIPE) return child_fail("chan-drain", "waiting for the sender's close", rc);
    }
    zcio_listener_close(l);
    return 0;
}

/* chan-hang SOCK COUNT: connect, send blocks 0..COUNT-1, then receive
 * nothing and stay until killed (the watchdog ends a forgotten one). */
static int role_chan_hang(char **a) {
    zcio_channel *ch;
    int rc = connect_retry(a[0], &ch);
    if (rc < 0) return child_fail("chan-hang", "connect", rc);
    uint64_t count = strtoull(a[1], NULL, 10);
    for (uint64_t i = 0; i < count; i++) {
        unsigned char b[1024];
        fill_block(b, i);
        if ((rc = zcio_send_bytes(ch, b, block_len(i), -1)) < 0) return child_fail("chan-hang", "send", rc);
    }
    for (;;) pause();
}

/* ring-trickle NAME COUNT: attach to NAME as producer (blocking writes), wait
 * for a consumer, write COUNT blocks pausing 5 ms after every 10th (so the
 * reader sleeps now and then), then stay until killed. */
static int role_ring_trickle(char **a) {
    uint64_t count = strtoull(a[1], NULL, 10);
    zcio_ring *r;
    int rc = zcio_ring_open(a[0], ZCIO_O_WRONLY, 0, 0, &r);
    if (rc < 0) return child_fail("ring-trickle", "open", rc);
    if (zcio_ring_wait_consumers(r, 1, 10000) < 1) return child_fail("ring-trickle", "wait", -ETIMEDOUT);
    unsigned char b[1024];
    for (uint64_t i = 0; i < count; i++) {
        fill_block(b, i);
        ssize_t n = zcio_ring_write(r, b, block_len(i));
        if (n != (ssize_t)block_len(i)) return child_fail("ring-trickle", "write", n);
        if (i % 10 == 9) sleep_ms(5);
    }
    for (;;) pause();
}

/* ring-slow-reader NAME COUNT: attach to NAME as a consumer (from its oldest
 * data, blocking reads), sleep 200 ms, read COUNT blocks checking each, pausing
 * 5 ms after every 20th, then expect the end of the stream (0). */
static int role_ring_slow_reader(char **a) {
    uint64_t count = strtoull(a[1], NULL, 10);
    zcio_ring *r;
    int rc = zcio_ring_open(a[0], ZCIO_O_RDONLY | ZCIO_O_OLDEST, 0, 0, &r);
    if (rc < 0) return child_fail("ring-slow-reader", "open", rc);
    sleep_ms(200);
    unsigned char b[1024];
    for (uint64_t i = 0; i < count; i++) {
        ssize_t n = zcio_ring_read(r, b, sizeof b);
        if (n < 0) return child_fail("ring-slow-reader", "read", n);
        if (check_block(b, (size_t)n, i)) return child_fail("ring-slow-reader", "block corrupt or out of order", (long)i);
        if (i % 20 == 19) sleep_ms(5);
    }
    ssize_t n = zcio_ring_read(r, b, sizeof b);
    if (n != 0) return child_fail("ring-slow-reader", "expected the end of the stream", n);
    zcio_ring_close(r);
    return 0;
}

/* The type of the typed-message tests; the same layout as the Rust test
 * type `Reading` of crates/zcio-c/src/typed.rs (16 bytes, align 8). */
struct reading {
    uint32_t seq;
    uint8_t ok; /* a Rust bool: 0 or 1 */
    uint8_t kind;
    uint8_t reserved[2];
    double value;
};

static zcio_type reading_type(uint32_t schema) {
    zcio_type t = {"example.Reading", schema, sizeof(struct reading), _Alignof(struct reading), 0};
    return t;
}

/* typed-sender SOCK: connect and send 5 messages: a tagged reading
 * (zcio_send_typed), one made with reserve -> fill -> send (zcio_type_tag
 * into a pool buffer), one of schema 2, one untagged, one tagged with a
 * short payload; then wait for the receiver to close. */
static int role_typed_sender(char **a) {
    zcio_channel *ch;
    int rc = connect_retry(a[0], &ch);
    if (rc < 0) return child_fail("typed-sender", "connect", rc);
    zcio_pool *pool;
    if ((rc = zcio_pool_create("ctest-typed", 1 << 20, 2, &pool)) < 0)
        return child_fail("typed-sender", "pool", rc);
    zcio_type t1 = reading_type(1), t2 = reading_type(2);
    struct reading r = {.seq = 1, .ok = 1, .kind = 3, .value = 2.5};
    if ((rc = zcio_send_typed(ch, &t1, &r, sizeof r, -1)) < 0)
        return child_fail("typed-sender", "send_typed", rc);
    /* reserve -> fill -> send */
    ssize_t off = zcio_type_tag(&t1, NULL, 0);
    if (off != -ENOBUFS) return child_fail("typed-sender", "type_tag size", (int)off);
    zcio_buf *buf;
    if ((rc = zcio_buf_alloc(pool, 128 + sizeof r, &buf)) < 0)
        return child_fail("typed-sender", "alloc", rc);
    unsigned char *d = zcio_buf_data(buf);
    if ((off = zcio_type_tag(&t1, d, zcio_buf_len(buf))) != 128)
        return child_fail("typed-sender", "type_tag", (int)off);
    struct reading *in_place = (struct reading *)(d + off);
    memset(in_place, 0, sizeof *in_place);
    in_place->seq = 2;
    in_place->value = -1.0;
    if ((rc = zcio_send(ch, buf, -1)) < 0) return child_fail("typed-sender", "send", rc);
    if ((rc = zcio_send_typed(ch, &t2, &r, sizeof r, -1)) < 0)
        return child_fail("typed-sender", "send v2", rc);
    if ((rc = zcio_send_bytes(ch, &r, sizeof r, -1)) < 0)
        return child_fail("typed-sender", "send untagged", rc);
    if ((rc = zcio_buf_alloc(pool, 128 + 8, &buf)) < 0)
        return child_fail("typed-sender", "alloc", rc);
    d = zcio_buf_data(buf);
    if (zcio_type_tag(&t1, d, 128) != 128) return child_fail("typed-sender", "type_tag", -1);
    memset(d + 128, 0, 8);
    if ((rc = zcio_send(ch, buf, -1)) < 0) return child_fail("typed-sender", "send short", rc);
    zcio_msg *m;
    rc = zcio_recv(ch, 20000, &m);
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    return rc == -EPIPE ? 0 : child_fail("typed-sender", "waiting for the receiver to close", rc);
}

static int run_child(const char *role, char **a, int n) {
    if (strcmp(role, "ring-producer") == 0 && n == 3) return role_ring_producer(a);
    if (strcmp(role, "ring-trickle") == 0 && n == 2) return role_ring_trickle(a);
    if (strcmp(role, "ring-slow-reader") == 0 && n == 2) return role_ring_slow_reader(a);
    if (strcmp(role, "chan-sender") == 0 && n == 3) return role_chan_sender(a);
    if (strcmp(role, "chan-holder") == 0 && n == 1) return role_chan_holder(a);
    if (strcmp(role, "typed-sender") == 0 && n == 1) return role_typed_sender(a);
    if (strcmp(role, "chan-sink") == 0 && n == 2) return role_chan_sink(a);
    if (strcmp(role, "chan-idle") == 0 && n == 1) return role_chan_idle(a);
    if (strcmp(role, "garbage-listener") == 0 && n == 1) return role_garbage_listener(a);
    if (strcmp(role, "lane-echo") == 0 && n == 2) return role_lane(a, 0);
    if (strcmp(role, "lane-die") == 0 && n == 1) return role_lane(a, 1);
    if (strcmp(role, "chan-rounds") == 0 && n == 2) return role_chan_rounds(a);
    if (strcmp(role, "chan-hang") == 0 && n == 2) return role_chan_hang(a);
    if (strcmp(role, "chan-drain") == 0 && n == 2) return role_chan_drain(a);
    fprintf(stderr, "unknown child role %s\n", role);
    return 2;
}

/* ------------------------------------------------------------- the tests */

/* The receive of an event loop: zcio_recv(ch, 0) until -EAGAIN, then
 * prepare_recv_sleep, epoll_wait on the doorbell, doorbell_rang, again
 * (docs/c.md, "Event loops"). Returns zcio_recv's final code; counts the
 * epoll wakes in *wakes. */
static int epoll_recv(int ep, zcio_channel *ch, zcio_msg **m, int *wakes) {
    for (;;) {
        int rc = zcio_recv(ch, 0, m);
        if (rc != -EAGAIN) return rc;
        rc = zcio_channel_prepare_recv_sleep(ch);
        if (rc < 0) return rc;
        if (rc == 0) continue; /* a message came meanwhile */
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, 20000);
        if (n != 1) return -ETIMEDOUT; /* a ring that never came fails the test */
        (*wakes)++;
        rc = zcio_channel_doorbell_rang(ch);
        if (rc != 0) return rc < 0 ? rc : -ECONNRESET; /* hung up: not in this test */
    }
}

/* An epoll loop receives from a process that sends with the blocking API:
 * the doorbell rings for every round (the flag was set before the peer could
 * send), every message arrives intact and in order (waiting on the doorbell
 * whenever none is ready). */
static int test_chan_epoll_recv(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "epoll.sock");
    zcio_listener *l;
    CHECK_OK(zcio_listen(sock, &l));
    pid_t p = spawn("chan-rounds", sock, "20", NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    CHECK_RC(zcio_channel_doorbell(NULL), -EINVAL);
    CHECK_RC(zcio_channel_prepare_recv_sleep(NULL), -EINVAL);
    CHECK_RC(zcio_channel_prepare_send_sleep(NULL, 1, 0), -EINVAL);
    CHECK_RC(zcio_channel_doorbell_rang(NULL), -EINVAL);
    int fd = zcio_channel_doorbell(ch);
    CHECK_OK(fd);
    CHECK_RC(zcio_channel_doorbell(ch), fd); /* the same fd every time */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
    int wakes = 0;
    for (uint64_t r = 0; r < 20; r++) {
        /* Armed before asking: the child's first send of the round rings. */
        CHECK_RC(zcio_channel_prepare_recv_sleep(ch), 1);
        CHECK_OK(zcio_send_bytes(ch, "next", 4, -1));
        struct epoll_event got;
        CHECK_RC(epoll_wait(ep, &got, 1, 20000), 1);
        CHECK(got.data.fd == fd && (got.events & EPOLLIN));
        CHECK_RC(zcio_channel_doorbell_rang(ch), 0);
        for (uint64_t k = 0; k < 10; k++) {
            zcio_msg *m;
            CHECK_OK(epoll_recv(ep, ch, &m, &wakes));
            unsigned char b[1024];
            ssize_t n = zcio_msg_read(m, 0, b, sizeof b);
            if (n < 0 || check_block(b, (size_t)n, r * 10 + k))
                FAILF("message %" PRIu64 " corrupt or out of order", r * 10 + k);
            zcio_msg_release(m);
        }
    }
    /* Room to send now: no sleep needed. */
    CHECK_RC(zcio_channel_prepare_send_sleep(ch, 1, 64), 0);
    CHECK_RC(zcio_channel_prepare_send_sleep(ch, 0, 0), 0);
    close(ep);
    zcio_channel_close(ch);
    CHECK_CHILD(p, 0);
    return 0;
}

/* A peer killed while an epoll loop waits to receive and to send (its ring
 * full): the doorbell polls readable, doorbell_rang says it hung up, and
 * then -- at once, or after looks on a 50 ms timer -- receive and send say
 * -EPIPE. */
static int test_chan_epoll_peer_killed(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "epollkill.sock");
    zcio_listener *l;
    CHECK_OK(zcio_listen(sock, &l));
    pid_t p = spawn("chan-hang", sock, "3", NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    int fd = zcio_channel_doorbell(ch);
    CHECK_OK(fd);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
    int wakes = 0;
    for (uint64_t i = 0; i < 3; i++) {
        zcio_msg *m;
        CHECK_OK(epoll_recv(ep, ch, &m, &wakes));
        CHECK(zcio_msg_len(m) == block_len(i));
        zcio_msg_release(m);
    }
    /* The child receives nothing: fill its ring. */
    int sent = 0;
    for (;;) {
        int rc = zcio_send_bytes(ch, "x", 1, 0);
        if (rc == -EAGAIN) break;
        CHECK_OK(rc);
        sent++;
    }
    CHECK(sent > 0);
    CHECK_RC(zcio_channel_prepare_send_sleep(ch, 1, 64), 1);
    CHECK_RC(zcio_channel_prepare_recv_sleep(ch), 1);
    kill(p, SIGKILL);
    /* Readable (the hang-up), possibly after rings queued before it. */
    int hung = 0;
    for (int k = 0; k < 100 && !hung; k++) {
        struct epoll_event got;
        CHECK_RC(epoll_wait(ep, &got, 1, 20000), 1);
        CHECK(got.events & EPOLLIN);
        hung = zcio_channel_doorbell_rang(ch);
        CHECK_OK(hung);
    }
    CHECK_RC(hung, 1);
    /* The fd stays readable now: look on a timer until the peer is seen gone. */
    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0);
    zcio_msg *m;
    int rc = -EAGAIN;
    for (int k = 0; k < 400 && rc == -EAGAIN; k++) {
        rc = zcio_recv(ch, 0, &m);
        if (rc == -EAGAIN) {
            sleep_ms(50);
            CHECK_RC(zcio_channel_doorbell_rang(ch), 1);
        }
    }
    CHECK_RC(rc, -EPIPE);
    CHECK_RC(zcio_send_bytes(ch, "x", 1, 0), -EPIPE);
    CHECK_RC(zcio_channel_prepare_send_sleep(ch, 1, 64), -EPIPE);
    CHECK_CHILD(p, 128 + SIGKILL);
    close(ep);
    zcio_channel_close(ch);
    return 0;
}

/* The read of an event loop on a ring consumer's bell (docs/c.md, "Event
 * loops"): zcio_ring_read with timeout 0 until -EAGAIN, then
 * prepare_read_sleep, epoll_wait on the bell with a 50 ms timeout (a ring
 * cannot hang up), doorbell_rang, again. Returns the read's count or the
 * first error (doorbell_rang's -EPIPE for a dead producer); counts the wakes
 * by the bell and by the timeout; gives up with -ETIMEDOUT after `looks`
 * timeouts in a row. */
static ssize_t epoll_ring_read(int ep, zcio_ring *c, unsigned char *b, size_t n, int looks,
                               int *bell_wakes, int *timer_wakes) {
    int idle = 0;
    for (;;) {
        ssize_t got = zcio_ring_read(c, b, n);
        if (got != -EAGAIN) return got;
        int rc = zcio_ring_prepare_read_sleep(c);
        if (rc < 0) return rc;
        if (rc == 0) continue; /* a block came meanwhile */
        struct epoll_event ev;
        int k = epoll_wait(ep, &ev, 1, 50);
        if (k < 0 && errno != EINTR) return -errno;
        if (k == 1) {
            (*bell_wakes)++;
            idle = 0;
        } else {
            (*timer_wakes)++;
            if (++idle > looks) return -ETIMEDOUT;
        }
        rc = zcio_ring_doorbell_rang(c);
        if (rc < 0) return rc;
    }
}

/* An epoll loop reads everything a producer process writes with the blocking
 * API, waiting on the consumer's bell (the producer rings it); then, while it
 * waits for more, the producer is killed: doorbell_rang's look says -EPIPE. */
static int test_ring_epoll_read(void) {
    CHECK_RC(zcio_ring_doorbell(NULL), -EINVAL);
    CHECK_RC(zcio_ring_prepare_read_sleep(NULL), -EINVAL);
    CHECK_RC(zcio_ring_prepare_write_sleep(NULL, 1), -EINVAL);
    CHECK_RC(zcio_ring_doorbell_rang(NULL), -EINVAL);
    zcio_ring *c;
    CHECK_OK(zcio_ring_open("epr", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_BLOCKS | ZCIO_O_NONBLOCK,
                            0600, 64 << 10, &c));
    int fd = zcio_ring_doorbell(c);
    CHECK_OK(fd);
    CHECK_RC(zcio_ring_doorbell(c), fd); /* the same fd every time */
    CHECK_RC(zcio_ring_doorbell_rang(c), 0); /* nothing rang: harmless */
    CHECK_RC(zcio_ring_prepare_write_sleep(c, 1), -EBADF);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
    const uint64_t count = 300;
    pid_t p = spawn("ring-trickle", "epr", "300", NULL);
    int bell = 0, timer = 0;
    unsigned char b[1024];
    for (uint64_t i = 0; i < count; i++) {
        ssize_t n = epoll_ring_read(ep, c, b, sizeof b, 200, &bell, &timer);
        CHECK_OK(n);
        if (check_block(b, (size_t)n, i)) FAILF("block %" PRIu64 " corrupt or out of order", i);
    }
    /* The producer paused every 10 blocks: the reader slept on the bell, and
     * the producer rang it. */
    CHECK(bell > 0);
    /* Nothing more comes: the looks say nothing (the producer lives) ... */
    ssize_t n = epoll_ring_read(ep, c, b, sizeof b, 4, &bell, &timer);
    CHECK_RC(n, -ETIMEDOUT);
    /* ... until it is killed in the middle of its stream. */
    kill(p, SIGKILL);
    CHECK_CHILD(p, 128 + SIGKILL);
    n = epoll_ring_read(ep, c, b, sizeof b, 200, &bell, &timer);
    CHECK_RC(n, -EPIPE);
    CHECK(strstr(zcio_last_error(), "died") != NULL || strstr(zcio_last_error(), "producer") != NULL);
    close(ep);
    zcio_ring_close(c);
    return 0;
}

/* An epoll loop writes through a small block ring to a consumer process that
 * reads slowly with the blocking API: every write that finds no room waits on
 * the producer's bell, which the consumer's reads ring. */
static int test_ring_epoll_write(void) {
    zcio_ring *pr;
    CHECK_OK(zcio_ring_open("epw", ZCIO_O_WRONLY | ZCIO_O_CREAT | ZCIO_O_BLOCKS | ZCIO_O_NONBLOCK,
                            0600, 4096, &pr));
    CHECK_RC(zcio_ring_prepare_read_sleep(pr), -EBADF);
    zcio_ring_stats st;
    CHECK_OK(zcio_ring_get_stats(pr, &st));
    CHECK_RC(zcio_ring_prepare_write_sleep(pr, (size_t)st.max_block + 1), -EMSGSIZE);
    CHECK_RC(zcio_ring_prepare_write_sleep(pr, 8), 0); /* room now */
    int fd = zcio_ring_doorbell(pr);
    CHECK_OK(fd);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
    const uint64_t count = 400;
    pid_t p = spawn("ring-slow-reader", "epw", "400", NULL);
    CHECK(zcio_ring_wait_consumers(pr, 1, 20000) == 1);
    int bell = 0, waits = 0;
    unsigned char b[1024];
    for (uint64_t i = 0; i < count; i++) {
        fill_block(b, i);
        for (int looks = 0;;) {
            ssize_t n = zcio_ring_write(pr, b, block_len(i)); /* 1. try */
            if (n == (ssize_t)block_len(i)) break;
            CHECK_RC(n, -EAGAIN);
            int rc = zcio_ring_prepare_write_sleep(pr, block_len(i)); /* 2. */
            CHECK_OK(rc);
            if (rc == 0) continue;
            waits++;
            struct epoll_event got;
            int k = epoll_wait(ep, &got, 1, 50); /* 3. the bell, or 50 ms */
            CHECK(k >= 0 || errno == EINTR);
            if (k == 1) bell++;
            else if (++looks > 400) FAILF("no room for block %" PRIu64 " after 20 s", i);
            CHECK_RC(zcio_ring_doorbell_rang(pr), 0); /* 4. */
        }
    }
    /* The ring holds a few blocks; the reader started late and paused. */
    CHECK(waits > 0 && bell > 0);
    close(ep);
    zcio_ring_close(pr); /* the end of the stream for the reader */
    CHECK_CHILD(p, 0);
    return 0;
}

/* A block ring: what a producer process writes arrives intact and in order,
 * then the end of the stream (0). */
static int test_ring_round_trip(void) {
    zcio_ring *c;
    CHECK_OK(zcio_ring_open("rt", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_BLOCKS, 0600, 64 << 10, &c));
    pid_t p = spawn("ring-producer", "rt", "close", "2000", NULL);
    unsigned char b[1024];
    for (uint64_t i = 0; i < 2000; i++) {
        ssize_t n = zcio_ring_read(c, b, sizeof b);
        CHECK_OK(n);
        if (check_block(b, (size_t)n, i)) FAILF("block %" PRIu64 " corrupt or out of order", i);
    }
    CHECK_RC(zcio_ring_read(c, b, sizeof b), 0);
    CHECK_CHILD(p, 0);
    zcio_ring_stats s;
    CHECK_OK(zcio_ring_get_stats(c, &s));
    CHECK(s.read_blocks == 2000 && s.size == 64 << 10);
    /* The live counters (what the registry entry shows) agree. */
    zcio_ring_counters k;
    CHECK_OK(zcio_ring_get_counters(c, &k, sizeof k));
    CHECK(k.producer == 0 && k.blocks == 2000 && k.bytes == s.read_bytes && k.lag == 0);
    CHECK(k.position > 0 && k.would_block == 0);
    /* A size below the struct's first version is refused, and nothing is written
     * (docs/c.md, "The ABI"; c/tests/test_abi.c checks the rule call by call). */
    zcio_ring_counters part;
    memset(&part, 0xab, sizeof part);
    CHECK_RC(zcio_ring_get_counters(c, &part, sizeof part.blocks), -EINVAL);
    CHECK(part.blocks == 0xababababababababULL && part.bytes == 0xababababababababULL);
    CHECK_RC(zcio_ring_get_counters(c, NULL, sizeof k), -EINVAL);
    zcio_ring_close(c);
    CHECK_OK(zcio_ring_unlink("rt"));
    return 0;
}

/* A byte-stream ring: written in uneven pieces, read in others; the bytes
 * come out as they went in. */
static int test_ring_stream(void) {
    zcio_ring *c, *p;
    CHECK_OK(zcio_ring_open("st", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 8192, &c));
    CHECK_OK(zcio_ring_open("st", ZCIO_O_WRONLY, 0, 0, &p));
    CHECK_OK(zcio_ring_set_timeout(p, 0));
    unsigned char out[3000], in[777];
    uint64_t wrote = 0, read = 0;
    while (read < 200000) {
        if (wrote < 200000) {
            size_t n = 1 + (size_t)(wrote % 2999);
            if (n > 200000 - wrote) n = (size_t)(200000 - wrote);
            for (size_t k = 0; k < n; k++) out[k] = (unsigned char)((wrote + k) % 251);
            ssize_t w = zcio_ring_write(p, out, n);
            if (w != -EAGAIN) CHECK_OK(w);
            if (w > 0) wrote += (uint64_t)w;
        }
        CHECK_OK(zcio_ring_set_timeout(c, 0));
        ssize_t r = zcio_ring_read(c, in, sizeof in);
        if (r == -EAGAIN) continue;
        CHECK_OK(r);
        for (ssize_t k = 0; k < r; k++)
            if (in[k] != (unsigned char)((read + (uint64_t)k) % 251)) FAILF("byte %" PRIu64 " differs", read + (uint64_t)k);
        read += (uint64_t)r;
    }
    zcio_ring_close(p);
    CHECK_OK(zcio_ring_set_timeout(c, -1));
    CHECK_RC(zcio_ring_read(c, in, sizeof in), 0);
    zcio_ring_close(c);
    return 0;
}

/* Peek shows the block in place; release moves past it; the handle refuses
 * other reads while a block is peeked. */
static int test_ring_peek_release(void) {
    zcio_ring *c, *p;
    CHECK_OK(zcio_ring_open("pk", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_BLOCKS | ZCIO_O_NONBLOCK, 0600,
                            16384, &c));
    CHECK_OK(zcio_ring_open("pk", ZCIO_O_WRONLY, 0, 0, &p));
    CHECK_RC(zcio_ring_write(p, "first", 5), 5);
    CHECK_RC(zcio_ring_write(p, "second", 6), 6);
    const void *data;
    size_t len;
    CHECK_RC(zcio_ring_peek(c, 4096, &data, &len), 1);
    CHECK(len == 5 && memcmp(data, "first", 5) == 0);
    char b[16];
    CHECK_RC(zcio_ring_read(c, b, sizeof b), -EBUSY);
    CHECK_RC(zcio_ring_peek(c, 4096, &data, &len), -EBUSY);
    CHECK_RC(zcio_ring_seek(c, 0, ZCIO_SEEK_NEWEST), -EBUSY);
    CHECK_RC(zcio_ring_release(c), 0);
    CHECK_RC(zcio_ring_release(c), -EINVAL);
    CHECK_RC(zcio_ring_read(c, b, sizeof b), 6);
    CHECK(memcmp(b, "second", 6) == 0);
    CHECK_RC(zcio_ring_peek(c, 4096, &data, &len), -EAGAIN);
    CHECK_RC(zcio_ring_peek(p, 4096, &data, &len), -EBADF);
    CHECK_RC(zcio_ring_release(p), -EINVAL);
    /* close with a peeked block releases it */
    CHECK_RC(zcio_ring_write(p, "third", 5), 5);
    CHECK_RC(zcio_ring_peek(c, 4096, &data, &len), 1);
    zcio_ring_close(c);
    zcio_ring_close(p);
    return 0;
}

/* Under FRP a block overwritten while peeked is reported by release. */
static int test_ring_peek_lapped(void) {
    zcio_ring *c, *p;
    CHECK_OK(zcio_ring_open("lap", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_BLOCKS | ZCIO_O_FRP |
                                       ZCIO_O_NONBLOCK,
                            0600, 4096, &c));
    CHECK_OK(zcio_ring_open("lap", ZCIO_O_WRONLY, 0, 0, &p));
    unsigned char b[512];
    memset(b, 0xab, sizeof b);
    CHECK_RC(zcio_ring_write(p, b, 100), 100);
    const void *data;
    size_t len;
    CHECK_RC(zcio_ring_peek(c, 4096, &data, &len), 1);
    CHECK(len == 100);
    for (int i = 0; i < 40; i++) CHECK_RC(zcio_ring_write(p, b, sizeof b), sizeof b);
    CHECK_RC(zcio_ring_release(c), -ZCIO_ELAPPED);
    zcio_ring_stats s;
    CHECK_OK(zcio_ring_get_stats(c, &s));
    CHECK(s.skipped_blocks >= 1);
    zcio_ring_close(c);
    zcio_ring_close(p);
    return 0;
}

/* lseek-like cursor moves. */
static int test_ring_seek(void) {
    zcio_ring *c, *p;
    CHECK_OK(zcio_ring_open("sk", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_NONBLOCK, 0600, 4096, &c));
    CHECK_OK(zcio_ring_open("sk", ZCIO_O_WRONLY, 0, 0, &p));
    unsigned char b[100], in[100];
    for (int i = 0; i < 100; i++) b[i] = (unsigned char)i;
    CHECK_RC(zcio_ring_write(p, b, 100), 100);
    int64_t start = zcio_ring_seek(c, 0, ZCIO_SEEK_CUR);
    CHECK_OK(start);
    CHECK_RC(zcio_ring_seek(c, 10, ZCIO_SEEK_CUR), start + 10);
    CHECK_RC(zcio_ring_read(c, in, 5), 5);
    CHECK(in[0] == 10 && in[4] == 14);
    CHECK_RC(zcio_ring_seek(c, -15, ZCIO_SEEK_CUR), start);
    CHECK_RC(zcio_ring_read(c, in, 1), 1);
    CHECK(in[0] == 0);
    CHECK_RC(zcio_ring_seek(c, 0, ZCIO_SEEK_NEWEST), start + 100);
    CHECK_RC(zcio_ring_read(c, in, 1), -EAGAIN);
    CHECK_OK(zcio_ring_seek(c, 0, ZCIO_SEEK_OLDEST));
    CHECK_RC(zcio_ring_seek(c, 1000000, ZCIO_SEEK_CUR), start + 100); /* clamped to the head */
    CHECK_RC(zcio_ring_seek(c, 5, ZCIO_SEEK_NEWEST), -EINVAL);
    CHECK_RC(zcio_ring_seek(c, 0, 42), -EINVAL);
    CHECK_RC(zcio_ring_seek(p, 0, ZCIO_SEEK_CUR), -EBADF);
    zcio_ring_close(c);
    zcio_ring_close(p);
    return 0;
}

/* Non-blocking calls return -EAGAIN; a non-blocking write into a nearly
 * full ring reports how much went in, as write(2). */
static int test_ring_nonblock(void) {
    zcio_ring *c, *p;
    CHECK_OK(zcio_ring_open("nb", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_NONBLOCK, 0600, 4096, &c));
    CHECK_OK(zcio_ring_open("nb", ZCIO_O_WRONLY | ZCIO_O_NONBLOCK, 0, 0, &p));
    char b[8192] = {0};
    CHECK_RC(zcio_ring_read(c, b, 10), -EAGAIN);
    CHECK_RC(zcio_ring_write(p, b, 8192), 4096); /* the consumer holds the rest back */
    CHECK_RC(zcio_ring_write(p, b, 10), -EAGAIN);
    CHECK_RC(zcio_ring_read(c, b, 8192), 4096);
    CHECK_RC(zcio_ring_write(p, b, 10), 10);
    zcio_ring_close(c);
    zcio_ring_close(p);
    return 0;
}

/* Timed calls end with -ETIMEDOUT (no assertion on how long they took). */
static int test_ring_timeouts(void) {
    zcio_ring *c, *p;
    CHECK_OK(zcio_ring_open("to", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 4096, &c));
    CHECK_OK(zcio_ring_open("to", ZCIO_O_WRONLY, 0, 0, &p));
    CHECK_OK(zcio_ring_set_timeout(c, 50));
    CHECK_OK(zcio_ring_set_timeout(p, 50));
    char b[4096] = {0};
    const void *d;
    size_t n;
    CHECK_RC(zcio_ring_read(c, b, 10), -ETIMEDOUT);
    CHECK_RC(zcio_ring_peek(c, 10, &d, &n), -ETIMEDOUT);
    CHECK_RC(zcio_ring_write(p, b, 4096), 4096);
    CHECK_RC(zcio_ring_write(p, b, 10), -ETIMEDOUT);
    CHECK(strstr(zcio_strerror(-ETIMEDOUT), "imed out") != NULL);
    zcio_ring_close(c);
    zcio_ring_close(p);
    return 0;
}

/* The consumer's fd polls readable when a producer process writes. */
static int test_ring_fd_poll(void) {
    zcio_ring *c;
    CHECK_OK(zcio_ring_open("fd", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_BLOCKS | ZCIO_O_NONBLOCK,
                            0600, 64 << 10, &c));
    int fd = zcio_ring_fd(c);
    CHECK_OK(fd);
    CHECK_RC(zcio_ring_fd(c), fd);
    pid_t p = spawn("ring-producer", "fd", "close", "50", NULL);
    unsigned char b[1024];
    uint64_t got = 0;
    int ended = 0;
    while (!ended) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, 20000);
        CHECK(pr == 1);
        for (;;) {
            ssize_t n = zcio_ring_read(c, b, sizeof b);
            if (n == -EAGAIN) break;
            CHECK_OK(n);
            if (n == 0) {
                ended = 1;
                break;
            }
            if (check_block(b, (size_t)n, got)) FAILF("block %" PRIu64 " corrupt", got);
            got++;
        }
    }
    CHECK(got == 50);
    CHECK_CHILD(p, 0);
    zcio_ring *prod;
    CHECK_OK(zcio_ring_open("fd", ZCIO_O_WRONLY, 0, 0, &prod));
    CHECK_RC(zcio_ring_fd(prod), -EBADF);
    zcio_ring_close(prod);
    zcio_ring_close(c);
    return 0;
}

/* A producer killed with SIGKILL: its readers get what it wrote, then
 * -EPIPE, not a hang. One that closes with an error: -ZCIO_EPRODFAIL. */
static int test_ring_producer_killed(void) {
    const char *modes[2] = {"die", "fail"};
    int want[2] = {-EPIPE, -ZCIO_EPRODFAIL};
    for (int m = 0; m < 2; m++) {
        char name[32];
        snprintf(name, sizeof name, "kill-%s", modes[m]);
        zcio_ring *c;
        CHECK_OK(zcio_ring_open(name, ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_BLOCKS, 0600, 64 << 10, &c));
        pid_t p = spawn("ring-producer", name, modes[m], "20", NULL);
        CHECK_CHILD(p, m == 0 ? 128 + SIGKILL : 0);
        unsigned char b[1024];
        for (uint64_t i = 0; i < 20; i++) {
            ssize_t n = zcio_ring_read(c, b, sizeof b);
            CHECK_OK(n);
            if (check_block(b, (size_t)n, i)) FAILF("block %" PRIu64 " corrupt", i);
        }
        CHECK_RC(zcio_ring_read(c, b, sizeof b), want[m]);
        if (m == 1) CHECK(strstr(zcio_last_error(), "error code 5") != NULL);
        zcio_ring_close(c);
    }
    return 0;
}

/* Messages sent by reference from another process arrive intact, volatile,
 * with counters to match; then the end (-EPIPE) when the sender goes. */
static int recv_blocks(const char *mode, uint64_t count, int want_volatile) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "%s.sock", mode);
    zcio_listener *l;
    CHECK_OK(zcio_listen(sock, &l));
    pid_t p = spawn("chan-sender", sock, mode, mode[0] == 'd' ? "3" : "100", NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    for (uint64_t i = 0; i < count; i++) {
        zcio_msg *m;
        unsigned char b[1024];
        CHECK_OK(zcio_recv(ch, 20000, &m));
        size_t len = zcio_msg_len(m);
        CHECK(len == block_len(i));
        ssize_t n = zcio_msg_read(m, 0, b, sizeof b);
        if (n != (ssize_t)len || check_block(b, len, i)) FAILF("message %" PRIu64 " corrupt", i);
        CHECK_RC(zcio_msg_is_volatile(m), want_volatile);
        if (strcmp(mode, "slices") == 0) {
            zcio_slice s[3];
            CHECK_RC(zcio_msg_slices(m, NULL, 0), 3);
            CHECK_RC(zcio_msg_slices(m, s, 2), 3); /* fills 2, says 3 */
            CHECK_RC(zcio_msg_slices(m, s, 3), 3);
            CHECK(s[0].len == 3 && s[1].len == len - 5 && s[2].len == 2);
            size_t off = 0;
            for (int k = 0; k < 3; k++) {
                unsigned char tmp[1024];
                memcpy(tmp, s[k].data, s[k].len); /* copy out, then check */
                CHECK(memcmp(tmp, b + off, s[k].len) == 0);
                off += s[k].len;
            }
            /* a read across the slice boundaries */
            unsigned char mid[4];
            CHECK_RC(zcio_msg_read(m, 1, mid, 4), 4);
            CHECK(memcmp(mid, b + 1, 4) == 0);
        }
        CHECK_RC(zcio_msg_read(m, len, b, 10), 0);
        zcio_msg_release(m);
    }
    zcio_channel_stats s;
    CHECK_OK(zcio_channel_get_stats(ch, &s));
    CHECK(s.msgs_received == count);
    if (mode[0] == 'd') {
        /* the sender killed itself: an error, not a hang */
        zcio_msg *m;
        CHECK_RC(zcio_recv(ch, 20000, &m), -EPIPE);
        CHECK_CHILD(p, 128 + SIGKILL);
    } else {
        zcio_channel_close(ch);
        ch = NULL;
        CHECK_CHILD(p, 0);
    }
    zcio_channel_close(ch);
    return 0;
}

static int test_chan_send_recv(void) { return recv_blocks("plain", 100, 1); }
/* The spin policy reads back as set, and a channel made after it (no spinning
 * at all: every wait sleeps at once) still moves every message. */
static int test_spin_policy(void) {
    uint64_t max_us = 1, task_us = 1;
    CHECK_OK(zcio_spin_policy_get(&max_us, &task_us));
    CHECK(max_us == 500 && task_us == 50);
    CHECK_RC(zcio_spin_policy_get(NULL, &task_us), -EINVAL);
    CHECK_OK(zcio_spin_policy_set(0, 0));
    CHECK_OK(zcio_spin_policy_get(&max_us, &task_us));
    CHECK(max_us == 0 && task_us == 0);
    return recv_blocks("plain", 100, 1);
}
static int test_chan_send_bytes(void) { return recv_blocks("bytes", 100, 1); }
static int test_chan_slices(void) { return recv_blocks("slices", 100, 1); }
static int test_chan_secured(void) { return recv_blocks("secured", 100, 0); }
static int test_chan_sender_killed(void) { return recv_blocks("die", 3, 1); }

/* A buffer held by the receiver counts as in use; released, it is back in
 * the pool. */
static int test_chan_release_returns_buffer(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "hold.sock");
    zcio_listener *l;
    CHECK_OK(zcio_listen(sock, &l));
    pid_t p = spawn("chan-holder", sock, NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    zcio_pool *pool;
    CHECK_OK(zcio_pool_create("ctest-hold", 1 << 20, 1, &pool));
    zcio_buf *buf;
    CHECK_OK(zcio_buf_alloc(pool, 10000, &buf));
    CHECK(zcio_buf_len(buf) == 10000);
    CHECK_OK(zcio_buf_truncate(buf, 5000));
    CHECK(zcio_buf_len(buf) == 5000);
    memset(zcio_buf_data(buf), 7, 5000);
    CHECK_OK(zcio_send(ch, buf, -1));
    zcio_msg *m;
    CHECK_OK(zcio_recv(ch, 20000, &m)); /* "got": the holder has it */
    zcio_msg_release(m);
    zcio_channel_reclaim(ch);
    zcio_pool_stats ps;
    zcio_channel_stats cs;
    CHECK_OK(zcio_pool_get_stats(pool, &ps));
    CHECK_OK(zcio_channel_get_stats(ch, &cs));
    CHECK(ps.buffers_in_use == 1 && cs.held_by_peer == 1);
    /* live statistics: bytes each way, what the peer holds, who it is */
    CHECK(cs.held_by_peer_bytes == 5000 && cs.bytes_sent == 5000);
    CHECK(cs.peer_pid == (uint64_t)p && cs.connection != 0);
    CHECK_OK(zcio_send_bytes(ch, "release", 7, -1));
    CHECK_OK(zcio_recv(ch, 20000, &m)); /* "done": released */
    zcio_msg_release(m);
    zcio_channel_reclaim(ch);
    CHECK_OK(zcio_pool_get_stats(pool, &ps));
    CHECK_OK(zcio_channel_get_stats(ch, &cs));
    if (ps.buffers_in_use != 0 || cs.held_by_peer != 0)
        FAILF("after release: %" PRIu64 " buffers in use, %" PRIu64 " held by the peer",
              ps.buffers_in_use, cs.held_by_peer);
    CHECK(cs.notices_received >= 1);
    CHECK(cs.held_by_peer_bytes == 0 && cs.bytes_sent == 5000 + 7);
    CHECK(cs.msgs_received == 2 && cs.holding == 0);
    zcio_channel_close(ch);
    CHECK_CHILD(p, 0);
    zcio_pool_destroy(pool);
    return 0;
}

/* Descriptors and shared mappings (count, bytes) of this process. */
static void resources(long out[3]) {
    out[0] = out[1] = out[2] = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        while (readdir(d)) out[0]++;
        closedir(d);
    }
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3 && perms[3] == 's') {
            out[1]++;
            out[2] += (long)(b - a);
        }
    }
    fclose(f);
}

/* The same figures twice 100 ms apart (closed ends go on their own thread)
 * and at most `want` (NULL: any); bounded (20 s). */
static int settled(long now[3], const long *want) {
    long last[3];
    resources(last);
    for (int i = 0; i < 200; i++) {
        struct timespec t = {0, 100 * 1000 * 1000};
        nanosleep(&t, NULL);
        resources(now);
        int same = memcmp(now, last, sizeof last) == 0;
        int within = !want || (now[0] <= want[0] && now[1] <= want[1] && now[2] <= want[2]);
        if (same && within) return 1;
        memcpy(last, now, sizeof last);
    }
    return 0;
}

/* Closing a channel (and destroying its pool) with messages in flight frees
 * it: 300 channels, 8 x 1 KiB each, read by the peer before or after the
 * close; descriptors and shared mappings come back to where they were. */
static int one_closed_channel(const char *sock) {
    zcio_channel *ch;
    CHECK_OK(connect_retry(sock, &ch));
    zcio_pool *pool;
    CHECK_OK(zcio_pool_create("ctest-close", 64 << 10, 1, &pool));
    for (int i = 0; i < 8; i++) {
        zcio_buf *buf;
        CHECK_OK(zcio_buf_alloc(pool, 1024, &buf));
        memset(zcio_buf_data(buf), i, 1024);
        CHECK_OK(zcio_send(ch, buf, -1));
    }
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    return 0;
}

static int test_chan_close_leaks_nothing(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "close.sock");
    const int warm = 5, n = 300;
    char count[16];
    snprintf(count, sizeof count, "%d", warm + n);
    pid_t p = spawn("chan-drain", sock, count, NULL);
    for (int i = 0; i < warm; i++)
        if (one_closed_channel(sock)) return 1;
    long base[3], after[3];
    if (!settled(base, NULL)) FAILF("the baseline never settled");
    for (int i = 0; i < n; i++)
        if (one_closed_channel(sock)) return 1;
    CHECK_CHILD(p, 0);
    if (!settled(after, base))
        FAILF("fds, shared mappings, bytes: before %ld %ld %ld, after %ld %ld %ld", base[0],
              base[1], base[2], after[0], after[1], after[2]);
    return 0;
}

/* Huge pages: a pool reports the system's setting and how many of its chunk
 * bytes are mapped with huge pages; NULL arguments are refused. */
static int test_pool_huge_pages(void) {
    zcio_pool *pool = NULL;
    zcio_buf *b = NULL;
    CHECK_OK(zcio_pool_create("thp", 4u << 20, 1, &pool));
    CHECK_OK(zcio_buf_alloc(pool, 4u << 20, &b));
    memset(zcio_buf_data(b), 1, zcio_buf_len(b));
    zcio_huge_pages h;
    CHECK_OK(zcio_pool_get_huge_pages(pool, &h));
    CHECK(h.setting <= 2);
    CHECK(h.chunk_bytes == (4u << 20));
    CHECK(h.huge_bytes <= h.chunk_bytes);
    if (h.setting == 0)
        CHECK(h.huge_bytes == 0);
    CHECK_RC(zcio_pool_get_huge_pages(NULL, &h), -EINVAL);
    CHECK_RC(zcio_pool_get_huge_pages(pool, NULL), -EINVAL);
    zcio_buf_free(b);
    zcio_pool_destroy(pool);
    return 0;
}

/* Channel waits: 0 does not wait (-EAGAIN), > 0 ends with -ETIMEDOUT; a
 * full channel refuses a non-blocking send with -EAGAIN and the message
 * stays ours. */
static int test_chan_timeouts(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "to.sock");
    zcio_listener *l;
    zcio_channel *ch = NULL;
    zcio_msg *m = NULL;
    CHECK_OK(zcio_listen(sock, &l));
    CHECK_RC(zcio_accept(l, 0, &ch), -EAGAIN);
    CHECK_RC(zcio_accept(l, 30, &ch), -ETIMEDOUT);
    CHECK(ch == NULL);
    pid_t p = spawn("chan-idle", sock, NULL);
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    CHECK_RC(zcio_recv(ch, 0, &m), -EAGAIN);
    CHECK_RC(zcio_recv(ch, 30, &m), -ETIMEDOUT);
    CHECK(m == NULL);
    /* The peer does not receive: the ring fills up. */
    int rc = 0, sent = 0;
    while (sent < 100000 && (rc = zcio_send_bytes(ch, "0123456789abcdef", 16, 0)) == 0) sent++;
    CHECK_RC(rc, -EAGAIN);
    CHECK(sent > 1);
    zcio_pool *pool;
    zcio_buf *buf;
    CHECK_OK(zcio_pool_create("ctest-full", 1 << 20, 1, &pool));
    CHECK_OK(zcio_buf_alloc(pool, 100, &buf));
    CHECK_RC(zcio_send(ch, buf, 0), -EAGAIN);
    CHECK(zcio_buf_data(buf) == NULL && zcio_buf_len(buf) == 100); /* still ours, frozen */
    CHECK_RC(zcio_send(ch, buf, 20), -ETIMEDOUT);
    zcio_buf_free(buf);
    char done[PATH_MAX + 8];
    snprintf(done, sizeof done, "%s.done", sock);
    int fd = open(done, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    close(fd);
    CHECK_CHILD(p, 0);
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    return 0;
}

/* Default waits (timeout_ms < 0) end with -ETIMEDOUT at the bounds the
 * channel's configuration sets (200 ms here) when the peer never answers:
 * accept with nobody connecting, receive and lane accept from a peer that
 * sends nothing, send to a peer that never receives. */
static int test_chan_default_waits(void) {
    struct zcio_channel_config cfg;
    zcio_channel_config_init(&cfg);
    CHECK(cfg.send_timeout_ms == 10000 && cfg.recv_timeout_ms == 3600000);
    CHECK(cfg.connect_timeout_ms == 5000 && cfg.accept_timeout_ms == 3600000);
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "dflt.sock");
    zcio_listener *l;
    struct zcio_channel_config other = cfg;
    other.recv_timeout_ms = 0;
    CHECK_RC(zcio_listen_with(sock, &other, &l), -EINVAL);
    other.recv_timeout_ms = ZCIO_TIMEOUT_INFINITE;
    CHECK_OK(zcio_listen_with(sock, &other, &l));
    zcio_listener_close(l);
    cfg.send_timeout_ms = cfg.recv_timeout_ms = cfg.accept_timeout_ms = 200;
    CHECK_OK(zcio_listen_with(sock, &cfg, &l));
    zcio_channel *ch = NULL;
    CHECK_RC(zcio_accept(l, ZCIO_TIMEOUT_DEFAULT, &ch), -ETIMEDOUT);
    CHECK(ch == NULL);
    pid_t p = spawn("chan-idle", sock, NULL);
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    zcio_msg *m = NULL;
    CHECK_RC(zcio_recv(ch, ZCIO_TIMEOUT_DEFAULT, &m), -ETIMEDOUT);
    CHECK_RC(zcio_recv(ch, -5, &m), -ETIMEDOUT); /* any negative value */
    CHECK(m == NULL);
    zcio_lane_receiver *rx = NULL;
    CHECK_RC(zcio_lane_accept(ch, ZCIO_TIMEOUT_DEFAULT, &rx), -ETIMEDOUT);
    CHECK(rx == NULL);
    /* The peer does not receive: the ring fills up. */
    int rc = 0, sent = 0;
    while (sent < 100000 && (rc = zcio_send_bytes(ch, "0123456789abcdef", 16, 0)) == 0) sent++;
    CHECK_RC(rc, -EAGAIN);
    zcio_pool *pool;
    zcio_buf *buf;
    CHECK_OK(zcio_pool_create("ctest-dflt", 1 << 20, 1, &pool));
    CHECK_OK(zcio_buf_alloc(pool, 100, &buf));
    CHECK_RC(zcio_send(ch, buf, ZCIO_TIMEOUT_DEFAULT), -ETIMEDOUT);
    zcio_buf_free(buf);
    char done[PATH_MAX + 8];
    snprintf(done, sizeof done, "%s.done", sock);
    int fd = open(done, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    close(fd);
    CHECK_CHILD(p, 0);
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    return 0;
}

/* Three processes: a sender, this process forwarding by reference, a sink. */
static int test_chan_forward(void) {
    char in_sock[PATH_MAX], out_sock[PATH_MAX];
    path_in_work(in_sock, sizeof in_sock, "fwd-in.sock");
    path_in_work(out_sock, sizeof out_sock, "fwd-out.sock");
    pid_t sink = spawn("chan-sink", out_sock, "20", NULL);
    zcio_listener *l;
    CHECK_OK(zcio_listen(in_sock, &l));
    pid_t src = spawn("chan-sender", in_sock, "plain", "20", NULL);
    zcio_channel *in, *out;
    CHECK_OK(zcio_accept(l, 20000, &in));
    zcio_listener_close(l);
    CHECK_OK(connect_retry(out_sock, &out));
    for (int i = 0; i < 20; i++) {
        zcio_msg *m;
        CHECK_OK(zcio_recv(in, 20000, &m));
        CHECK_OK(zcio_forward(out, m, -1));
        zcio_msg_release(m);
    }
    zcio_channel_close(out);
    CHECK_CHILD(sink, 0);
    zcio_channel_close(in);
    CHECK_CHILD(src, 0);
    return 0;
}

/* Message bytes written to a pipe with writev, straight from shared pages. */
static int test_msg_write_to(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "wt.sock");
    zcio_listener *l;
    CHECK_OK(zcio_listen(sock, &l));
    pid_t p = spawn("chan-sender", sock, "slices", "1", NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    zcio_msg *m;
    CHECK_OK(zcio_recv(ch, 20000, &m));
    int fds[2];
    CHECK(pipe(fds) == 0);
    CHECK_RC(zcio_msg_write_to(m, fds[1]), block_len(0));
    unsigned char b[1024];
    CHECK(read(fds[0], b, sizeof b) == (ssize_t)block_len(0));
    CHECK(check_block(b, block_len(0), 0) == 0);
    CHECK_RC(zcio_msg_write_to(m, -1), -EBADF);
    close(fds[0]);
    close(fds[1]);
    zcio_msg_release(m);
    zcio_channel_close(ch);
    CHECK_CHILD(p, 0);
    return 0;
}

/* NULL pointers, bad names, zero and absurd sizes, wrong handles: error
 * codes, never a crash. */
static int test_hostile_input(void) {
    zcio_ring *r = NULL;
    char b[16];
    const void *d;
    size_t n;
    /* NULL everywhere */
    CHECK_RC(zcio_ring_open(NULL, ZCIO_O_RDONLY, 0, 0, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("x", ZCIO_O_RDONLY, 0, 0, NULL), -EINVAL);
    CHECK_RC(zcio_ring_read(NULL, b, 1), -EINVAL);
    CHECK_RC(zcio_ring_write(NULL, b, 1), -EINVAL);
    CHECK_RC(zcio_ring_peek(NULL, 1, &d, &n), -EINVAL);
    CHECK_RC(zcio_ring_release(NULL), -EINVAL);
    CHECK_RC(zcio_ring_seek(NULL, 0, ZCIO_SEEK_CUR), -EINVAL);
    CHECK_RC(zcio_ring_fd(NULL), -EINVAL);
    CHECK_RC(zcio_ring_set_timeout(NULL, 0), -EINVAL);
    CHECK_RC(zcio_ring_wait_consumers(NULL, 1, 0), -EINVAL);
    CHECK_RC(zcio_ring_get_stats(NULL, NULL), -EINVAL);
    CHECK_RC(zcio_ring_unlink(NULL), -EINVAL);
    zcio_ring_close(NULL);
    zcio_ring_close_error(NULL, 1);
    CHECK_RC(zcio_listen(NULL, NULL), -EINVAL);
    CHECK_RC(zcio_accept(NULL, 0, NULL), -EINVAL);
    CHECK_RC(zcio_connect(NULL, 0, NULL), -EINVAL);
    CHECK_RC(zcio_send(NULL, NULL, 0), -EINVAL);
    CHECK_RC(zcio_sendv(NULL, NULL, 0, 0), -EINVAL);
    CHECK_RC(zcio_send_bytes(NULL, "x", 1, 0), -EINVAL);
    CHECK_RC(zcio_forward(NULL, NULL, 0), -EINVAL);
    CHECK_RC(zcio_recv(NULL, 0, NULL), -EINVAL);
    CHECK_RC(zcio_channel_reclaim(NULL), -EINVAL);
    CHECK_RC(zcio_channel_get_stats(NULL, NULL), -EINVAL);
    CHECK_RC(zcio_pool_create("p", 0, 0, NULL), -EINVAL);
    CHECK_RC(zcio_pool_get_stats(NULL, NULL), -EINVAL);
    CHECK_RC(zcio_buf_alloc(NULL, 1, NULL), -EINVAL);
    {
        /* More than the machine has: refused, not populated into an OOM. */
        zcio_pool *big = NULL;
        zcio_buf *huge = NULL;
        CHECK_OK(zcio_pool_create("huge", 4096, 2, &big));
        CHECK_RC(zcio_buf_alloc(big, (size_t)1 << 40, &huge), -ENOMEM);
        CHECK(strstr(zcio_last_error(), "MemAvailable") != NULL);
        CHECK(huge == NULL);
        zcio_pool_destroy(big);
    }
    CHECK(zcio_buf_data(NULL) == NULL && zcio_buf_len(NULL) == 0);
    CHECK_RC(zcio_buf_truncate(NULL, 1), -EINVAL);
    CHECK(zcio_msg_len(NULL) == 0);
    CHECK_RC(zcio_msg_slices(NULL, NULL, 0), -EINVAL);
    CHECK_RC(zcio_msg_read(NULL, 0, b, 1), -EINVAL);
    CHECK_RC(zcio_msg_is_volatile(NULL), -EINVAL);
    CHECK_RC(zcio_msg_write_to(NULL, 1), -EINVAL);
    zcio_listener_close(NULL);
    zcio_channel_close(NULL);
    zcio_pool_destroy(NULL);
    zcio_buf_free(NULL);
    zcio_msg_release(NULL);
    CHECK(strstr(zcio_last_error(), "NULL") != NULL);

    /* bad names */
    const char *names[] = {"", "a/b", ".hidden", "sp ace", "\xff\xfe", "../../etc/passwd"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        CHECK_RC(zcio_ring_open(names[i], ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 4096, &r), -EINVAL);
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK_RC(zcio_ring_open(longname, ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 4096, &r), -EINVAL);
    CHECK_RC(zcio_ring_unlink("a/b"), -EINVAL);
    CHECK_RC(zcio_ring_unlink("no-such-ring"), -ENOENT);
    CHECK_RC(zcio_ring_open("no-such-ring", ZCIO_O_RDONLY, 0, 0, &r), -ENOENT);

    /* sizes, flags, modes */
    CHECK_RC(zcio_ring_open("sz", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 0, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("sz", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 1000, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("sz", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 1024, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("sz", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, (size_t)1 << 62, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("sz", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0100000, 4096, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("sz", 2 /* O_RDWR */, 0, 0, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("sz", ZCIO_O_RDONLY | 0x40000000, 0600, 4096, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("sz", ZCIO_O_RDONLY | ZCIO_O_EXCL, 0600, 4096, &r), -EINVAL);
    CHECK_RC(zcio_ring_open("sz", ZCIO_O_WRONLY | ZCIO_O_OLDEST, 0600, 4096, &r), -EINVAL);
    CHECK(r == NULL); /* untouched by the failures */

    /* wrong direction, bad arguments on a live ring */
    zcio_ring *c, *p, *p2;
    CHECK_OK(zcio_ring_open("hx", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_EXCL | ZCIO_O_BLOCKS, 0600,
                            4096, &c));
    CHECK_RC(zcio_ring_open("hx", ZCIO_O_RDONLY | ZCIO_O_CREAT | ZCIO_O_EXCL, 0600, 4096, &r), -EEXIST);
    CHECK_OK(zcio_ring_open("hx", ZCIO_O_WRONLY, 0, 0, &p));
    CHECK_RC(zcio_ring_open("hx", ZCIO_O_WRONLY, 0, 0, &p2), -EBUSY); /* one producer */
    CHECK_RC(zcio_ring_write(c, "x", 1), -EBADF);
    CHECK_RC(zcio_ring_read(p, b, sizeof b), -EBADF);
    CHECK_RC(zcio_ring_read(c, NULL, 1), -EINVAL);
    CHECK_RC(zcio_ring_read(c, b, 0), -EINVAL);
    CHECK_RC(zcio_ring_write(p, NULL, 5), -EINVAL);
    CHECK_RC(zcio_ring_peek(c, 0, &d, &n), -EINVAL);
    CHECK_RC(zcio_ring_peek(c, 1, NULL, &n), -EINVAL);
    CHECK_RC(zcio_ring_get_stats(c, NULL), -EINVAL);
    char big[8192] = {0};
    CHECK_RC(zcio_ring_write(p, big, sizeof big), -EMSGSIZE); /* a block beyond max_block */
    CHECK_RC(zcio_ring_write(p, big, 100), 100);
    CHECK_RC(zcio_ring_read(c, b, sizeof b), -EMSGSIZE); /* block does not fit: not consumed */
    CHECK_RC(zcio_ring_read(c, big, sizeof big), 100);
    zcio_ring_close(p);
    zcio_ring_close(c);

    /* a file that is not a ring */
    char junk[PATH_MAX];
    path_in_work(junk, sizeof junk, "zcio-ring.junk");
    int fd = open(junk, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    for (int i = 0; i < 8192; i++) CHECK(write(fd, &(char){(char)(i * 13)}, 1) == 1);
    close(fd);
    CHECK_RC(zcio_ring_open("junk", ZCIO_O_RDONLY, 0, 0, &r), -ZCIO_EBADRING);

    /* pools and buffers */
    zcio_pool *pool;
    zcio_buf *buf = NULL;
    CHECK_OK(zcio_pool_create(NULL, 1 << 16, 1, &pool));
    CHECK_RC(zcio_pool_create("", 0, 0, &pool), -EINVAL);
    CHECK_RC(zcio_pool_create("p", SIZE_MAX, 1, &pool), -EINVAL);
    CHECK_RC(zcio_buf_alloc(pool, 0, &buf), -EINVAL);
    CHECK_RC(zcio_buf_alloc(pool, SIZE_MAX, &buf), -EMSGSIZE);
    CHECK_RC(zcio_buf_alloc(pool, (size_t)1 << 60, &buf), -EMSGSIZE);
    CHECK(buf == NULL);
    CHECK_OK(zcio_buf_alloc(pool, 100, &buf));
    CHECK_RC(zcio_buf_truncate(buf, 0), -EINVAL);
    zcio_buf_free(buf);

    /* channels: nobody listening, a listener that speaks garbage, sendv misuse */
    char sock[PATH_MAX];
    zcio_channel *ch = NULL;
    path_in_work(sock, sizeof sock, "nobody.sock");
    int rc = zcio_connect(sock, 1000, &ch);
    CHECK(rc == -ENOENT || rc == -ECONNREFUSED);
    CHECK_RC(zcio_connect("", 1000, &ch), -EINVAL);
    zcio_listener *l = NULL;
    CHECK(zcio_listen("/nonexistent-dir/x.sock", &l) < 0);
    CHECK(l == NULL);
    path_in_work(sock, sizeof sock, "garbage.sock");
    pid_t g = spawn("garbage-listener", sock, NULL);
    for (int i = 0; i < 1000 && access(sock, F_OK) != 0; i++) sleep_ms(5);
    rc = zcio_connect(sock, 2000, &ch);
    CHECK(rc < 0);
    CHECK(ch == NULL);
    CHECK_CHILD(g, 0);
    zcio_pool_destroy(pool);
    return 0;
}

/* A listener path that cannot be taken fails with the bind error and names
 * the path (a missing directory is -ENOENT, not the -EINVAL of the listen()
 * that used to follow a failed bind); an empty path is -EINVAL; a live
 * listener's path is -EADDRINUSE. */
static int test_listen_path_errors(void) {
    zcio_listener *l = NULL;
    CHECK_RC(zcio_listen("/nonexistent-zcio-dir/sub/x.sock", &l), -ENOENT);
    CHECK(strstr(zcio_last_error(), "/nonexistent-zcio-dir/sub/x.sock") != NULL);
    CHECK(strstr(zcio_last_error(), "does not exist") != NULL);
    CHECK_RC(zcio_listen("", &l), -EINVAL);
    CHECK(strstr(zcio_last_error(), "empty") != NULL);
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "busy.sock");
    zcio_listener *first;
    CHECK_OK(zcio_listen(sock, &first));
    CHECK_RC(zcio_listen(sock, &l), -EADDRINUSE);
    CHECK(strstr(zcio_last_error(), sock) != NULL);
    zcio_listener_close(first);
    CHECK(l == NULL);
    return 0;
}

/* Ring modes beyond 0777 (setuid, setgid, sticky) are -EINVAL, not silently
 * reduced to the permission bits; nothing is created. */
static int test_ring_mode_errors(void) {
    zcio_ring *r = NULL;
    const mode_t modes[] = {07777, 04600, 02600, 01600};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        CHECK_RC(zcio_ring_open("mode", ZCIO_O_WRONLY | ZCIO_O_CREAT, modes[i], 4096, &r), -EINVAL);
        CHECK(strstr(zcio_last_error(), "beyond 0777") != NULL);
    }
    CHECK(r == NULL);
    char file[PATH_MAX];
    path_in_work(file, sizeof file, "zcio-ring.mode");
    CHECK(access(file, F_OK) != 0); /* nothing was created */
    CHECK_OK(zcio_ring_open("mode", ZCIO_O_WRONLY | ZCIO_O_CREAT, 0640, 4096, &r));
    struct stat st;
    CHECK(stat(file, &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
    zcio_ring_close(r);
    CHECK_OK(zcio_ring_unlink("mode"));
    return 0;
}

/* An exhausted pool says -EAGAIN (no wait: nothing available now, as for
 * every transport) or -ETIMEDOUT (timed); freeing a buffer makes room.
 * Rings run out of consumer slots (-ENOSPC). */
static int test_exhaustion(void) {
    zcio_pool *pool;
    CHECK_OK(zcio_pool_create("ctest-small", 64 << 10, 1, &pool));
    zcio_buf *bufs[16], *extra = NULL;
    for (int i = 0; i < 16; i++) CHECK_OK(zcio_buf_alloc_timeout(pool, 4096, 0, &bufs[i]));
    CHECK_RC(zcio_buf_alloc_timeout(pool, 4096, 0, &extra), -EAGAIN);
    CHECK_RC(zcio_buf_alloc_timeout(pool, 4096, 20, &extra), -ETIMEDOUT);
    CHECK(extra == NULL);
    zcio_pool_stats ps;
    CHECK_OK(zcio_pool_get_stats(pool, &ps));
    CHECK(ps.buffers_in_use == 16 && ps.exhausted >= 2 && ps.chunks == 1);
    CHECK(ps.alloc_timed_out == 1 && ps.capacity_buffers == (64 << 10) / 4096);
    zcio_buf_free(bufs[3]);
    CHECK_OK(zcio_buf_alloc_timeout(pool, 4096, 0, &bufs[3]));
    for (int i = 0; i < 16; i++) zcio_buf_free(bufs[i]);
    CHECK_OK(zcio_pool_get_stats(pool, &ps));
    CHECK(ps.buffers_in_use == 0);
    zcio_pool_destroy(pool);

    zcio_ring *cons[65];
    int opened = 0, rc = 0;
    while (opened < 65) {
        rc = zcio_ring_open("slots", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 4096, &cons[opened]);
        if (rc < 0) break;
        opened++;
    }
    CHECK(opened == 64);
    CHECK_RC(rc, -ENOSPC);
    for (int i = 0; i < opened; i++) zcio_ring_close(cons[i]);
    CHECK_OK(zcio_ring_open("slots", ZCIO_O_RDONLY, 0, 0, &cons[0]));
    zcio_ring_close(cons[0]);
    return 0;
}

/* A panic inside the library comes back as -ZCIO_EPANIC, and the library
 * keeps working. */
static int test_panic_becomes_error_code(void) {
    fprintf(stderr, "    (a panic message from libzcio may follow: it is expected)\n");
    CHECK_RC(zcio__test_panic(0), -ZCIO_EPANIC);
    CHECK(strstr(zcio_last_error(), "deliberate panic") != NULL);
    CHECK_RC(zcio__test_panic(1), -ZCIO_EPANIC);
    CHECK(strstr(zcio_strerror(-ZCIO_EPANIC), "panic") != NULL);
    zcio_ring *r;
    CHECK_OK(zcio_ring_open("after-panic", ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, 4096, &r));
    zcio_ring_close(r);
    return 0;
}

/* Every code the library returns has a text; both signs work. */
static int test_strerror(void) {
    const int codes[] = {EAGAIN, ETIMEDOUT, EPIPE,      EBADMSG,    EINVAL, ENOENT,
                         EEXIST, EACCES,    ENOSPC,     EBUSY,      ENOMEM, EOPNOTSUPP,
                         EMSGSIZE, ECANCELED, ECONNABORTED, EPROTO, EBADF,  ERANGE,
                         ECONNREFUSED, EIO};
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
        const char *t = zcio_strerror(-codes[i]);
        CHECK(t != NULL && *t != 0 && strcmp(t, "unknown error code") != 0);
        CHECK(strcmp(t, zcio_strerror(codes[i])) == 0);
        CHECK(strcmp(t, strerror(codes[i])) == 0);
    }
    for (int c = ZCIO_ECODE_MIN; c <= ZCIO_ECODE_MAX; c++) {
        const char *t = zcio_strerror(-c);
        CHECK(t != NULL && *t != 0 && strcmp(t, "unknown error code") != 0);
        for (int o = ZCIO_ECODE_MIN; o < c; o++) CHECK(strcmp(t, zcio_strerror(-o)) != 0);
    }
    CHECK(strcmp(zcio_strerror(0), "success") == 0);
    CHECK(strcmp(zcio_strerror(-99999), "unknown error code") == 0);
    CHECK(strcmp(zcio_strerror(INT_MIN), "unknown error code") == 0);
    CHECK(strcmp(zcio_version(), "0.1.0") == 0);
    CHECK(zcio_last_error() != NULL);
    return 0;
}

/* A lane each way with an echoing process: every message comes back
 * intact; one loan at a time; a message too long for the slot keeps the
 * loan; freeing our end ends the child's wait with -EPIPE. */
static int test_lane_echo(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "lane.sock");
    zcio_listener *l;
    CHECK_OK(zcio_listen(sock, &l));
    pid_t p = spawn("lane-echo", sock, "500", NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    zcio_lane_sender *tx;
    CHECK_RC(zcio_lane_open(ch, 0, 1024, &tx), -EINVAL);
    CHECK_OK(zcio_lane_open(ch, 4, 1024, &tx));
    CHECK(zcio_lane_slot_size(tx) == 1024);
    zcio_lane_receiver *rx;
    CHECK_OK(zcio_lane_accept(ch, 20000, &rx));
    void *slot;
    size_t cap;
    CHECK_OK(zcio_lane_loan(tx, 0, &slot, &cap));
    CHECK(cap == 1024);
    CHECK_RC(zcio_lane_loan(tx, 0, &slot, &cap), -EBUSY);
    CHECK_RC(zcio_lane_send(tx, 1025), -EMSGSIZE);
    CHECK_OK(zcio_lane_cancel(tx));
    CHECK_RC(zcio_lane_cancel(tx), -EINVAL);
    CHECK_RC(zcio_lane_send(tx, 1), -EINVAL);
    for (uint64_t i = 0; i < 500; i++) {
        CHECK_OK(zcio_lane_loan(tx, 20000, &slot, &cap));
        fill_block(slot, i);
        CHECK_OK(zcio_lane_send(tx, block_len(i)));
        const void *data;
        size_t len;
        CHECK_OK(zcio_lane_recv(rx, 20000, &data, &len));
        unsigned char b[1024];
        CHECK(len == block_len(i));
        memcpy(b, data, len); /* copy out, then check */
        if (check_block(b, len, i)) FAILF("echo %" PRIu64 " corrupt", i);
    }
    CHECK_OK(zcio_lane_release(rx));
    CHECK_RC(zcio_lane_release(rx), -EINVAL);
    const void *data;
    size_t len;
    CHECK_RC(zcio_lane_recv(rx, 0, &data, &len), -EAGAIN);
    zcio_lane_stats st;
    uint64_t want = 0;
    for (uint64_t i = 0; i < 500; i++) want += block_len(i);
    CHECK_OK(zcio_lane_sender_get_stats(tx, &st));
    CHECK(st.messages == 500 && st.bad_notices == 0);
    CHECK(st.bytes == want && st.peer_pid == (uint32_t)p && st.connection != 0);
    uint64_t tx_lane = st.connection;
    CHECK_OK(zcio_lane_receiver_get_stats(rx, &st));
    CHECK(st.messages == 500 && st.malformed == 0);
    /* the -EAGAIN above; the echo lane is another lane */
    CHECK(st.bytes == want && st.would_block == 1);
    CHECK(st.connection != 0 && st.connection != tx_lane);
    zcio_lane_sender_free(tx);
    CHECK_CHILD(p, 0);
    zcio_lane_receiver_free(rx);
    zcio_channel_close(ch);
    return 0;
}

/* A lane whose sender was killed: what it sent is still read, then -EPIPE. */
static int test_lane_sender_killed(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "lanedie.sock");
    zcio_listener *l;
    CHECK_OK(zcio_listen(sock, &l));
    pid_t p = spawn("lane-die", sock, NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    zcio_lane_receiver *rx;
    CHECK_OK(zcio_lane_accept(ch, 20000, &rx));
    CHECK_CHILD(p, 128 + SIGKILL);
    for (uint64_t i = 0; i < 3; i++) {
        const void *data;
        size_t len;
        unsigned char b[1024];
        CHECK_OK(zcio_lane_recv(rx, 20000, &data, &len));
        CHECK(len == block_len(i));
        memcpy(b, data, len);
        if (check_block(b, len, i)) FAILF("message %" PRIu64 " corrupt", i);
    }
    const void *data;
    size_t len;
    CHECK_RC(zcio_lane_recv(rx, 20000, &data, &len), -EPIPE);
    zcio_lane_receiver_free(rx);
    zcio_channel_close(ch);
    return 0;
}

/* Typed messages from another process: the tag written by zcio_send_typed
 * and by zcio_type_tag is checked against the reader's zcio_type; another
 * schema, a missing tag and a short payload are -EBADMSG, never a value. */
static int test_typed_messages(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "typed.sock");
    zcio_listener *l;
    CHECK_OK(zcio_listen(sock, &l));
    pid_t p = spawn("typed-sender", sock, NULL);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, 20000, &ch));
    zcio_listener_close(l);
    zcio_type t1 = reading_type(1);
    zcio_msg *m;
    for (uint32_t seq = 1; seq <= 2; seq++) {
        struct reading r;
        CHECK_OK(zcio_recv(ch, 20000, &m));
        CHECK(zcio_msg_len(m) == 128 + sizeof r);
        CHECK_RC(zcio_msg_read_typed(m, &t1, &r, sizeof r), (ssize_t)sizeof r);
        /* the C reader validates fields itself: a bool is 0 or 1 */
        CHECK(r.seq == seq && r.ok <= 1);
        CHECK(seq == 1 ? (r.ok == 1 && r.kind == 3 && r.value == 2.5)
                       : (r.ok == 0 && r.value == -1.0));
        CHECK_RC(zcio_msg_read_typed(m, &t1, &r, sizeof r - 1), -ENOBUFS);
        zcio_type untagged = {NULL, 0, sizeof r, _Alignof(struct reading), 0};
        CHECK_RC(zcio_msg_read_typed(m, &untagged, &r, sizeof r), -EBADMSG);
        zcio_type bad = {"x", 1, 16, 3, 0};
        CHECK_RC(zcio_msg_read_typed(m, &bad, &r, sizeof r), -EINVAL);
        zcio_msg_release(m);
    }
    struct reading r;
    memset(&r, 0xee, sizeof r);
    CHECK_OK(zcio_recv(ch, 20000, &m)); /* schema 2 */
    CHECK_RC(zcio_msg_read_typed(m, &t1, &r, sizeof r), -EBADMSG);
    const char *e = zcio_last_error();
    if (!strstr(e, "`example.Reading` v2") || !strstr(e, "expected `example.Reading` v1"))
        FAILF("unexpected error text: %s", e);
    zcio_type t2 = reading_type(2);
    CHECK_RC(zcio_msg_read_typed(m, &t2, &r, sizeof r), (ssize_t)sizeof r);
    zcio_msg_release(m);
    memset(&r, 0xee, sizeof r);
    CHECK_OK(zcio_recv(ch, 20000, &m)); /* untagged */
    CHECK_RC(zcio_msg_read_typed(m, &t1, &r, sizeof r), -EBADMSG);
    if (!strstr(zcio_last_error(), "no type tag")) FAILF("unexpected: %s", zcio_last_error());
    zcio_msg_release(m);
    CHECK_OK(zcio_recv(ch, 20000, &m)); /* tagged, 8 bytes of payload */
    CHECK_RC(zcio_msg_read_typed(m, &t1, &r, sizeof r), -EBADMSG);
    if (!strstr(zcio_last_error(), "payload of 8 bytes"))
        FAILF("unexpected: %s", zcio_last_error());
    unsigned char *raw = (unsigned char *)&r;
    for (size_t i = 0; i < sizeof r; i++) CHECK(raw[i] == 0xee); /* nothing written */
    zcio_msg_release(m);
    CHECK_RC(zcio_send_typed(ch, &t1, &r, sizeof r - 1, 0), -EINVAL);
    zcio_channel_close(ch);
    CHECK_CHILD(p, 0);
    return 0;
}

/* ----------------------------------------------------------- the runner */

static const struct test tests[] = {
    {"ring_round_trip", test_ring_round_trip},
    {"ring_stream", test_ring_stream},
    {"ring_peek_release", test_ring_peek_release},
    {"ring_peek_lapped", test_ring_peek_lapped},
    {"ring_seek", test_ring_seek},
    {"ring_nonblock", test_ring_nonblock},
    {"ring_timeouts", test_ring_timeouts},
    {"ring_fd_poll", test_ring_fd_poll},
    {"ring_producer_killed", test_ring_producer_killed},
    {"chan_send_recv", test_chan_send_recv},
    {"chan_send_bytes", test_chan_send_bytes},
    {"chan_slices", test_chan_slices},
    {"chan_secured", test_chan_secured},
    {"chan_sender_killed", test_chan_sender_killed},
    {"chan_release_returns_buffer", test_chan_release_returns_buffer},
    {"chan_close_leaks_nothing", test_chan_close_leaks_nothing},
    {"chan_timeouts", test_chan_timeouts},
    {"chan_default_waits", test_chan_default_waits},
    {"spin_policy", test_spin_policy},
    {"pool_huge_pages", test_pool_huge_pages},
    {"chan_forward", test_chan_forward},
    {"typed_messages", test_typed_messages},
    {"lane_echo", test_lane_echo},
    {"lane_sender_killed", test_lane_sender_killed},
    {"chan_epoll_recv", test_chan_epoll_recv},
    {"chan_epoll_peer_killed", test_chan_epoll_peer_killed},
    {"ring_epoll_read", test_ring_epoll_read},
    {"ring_epoll_write", test_ring_epoll_write},
    {"msg_write_to", test_msg_write_to},
    {"hostile_input", test_hostile_input},
    {"exhaustion", test_exhaustion},
    {"listen_path_errors", test_listen_path_errors},
    {"ring_mode_errors", test_ring_mode_errors},
    {"panic_becomes_error_code", test_panic_becomes_error_code},
    {"strerror", test_strerror},
};

int main(int argc, char **argv) {
    if (child_or_runner(argc, argv, run_child)) return 2;

    if (make_work_dir(shm_or_tmp(), "zcio-ctest")) return 2;
    setenv("ZCIO_RING_DIR", work_dir, 1);

    int rc = run_tests(tests, sizeof tests / sizeof *tests, argc, argv, WATCHDOG_S);
    remove_work_dir();
    return rc;
}
