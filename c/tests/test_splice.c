/*
 * Tests of associations in the zcio C library (zcio_splice_*, zcio_assoc_*, zcio_cp,
 * zcio_module_load, zcio_module_names) across real processes.
 *
 *   test_splice            run every test
 *   test_splice NAME...    run the named tests
 *
 * As in test_zcio.c: each test runs in a fork of the runner under a watchdog alarm;
 * peers are this program re-executed with --child ROLE ... (their own watchdog
 * too); files live in a fresh directory removed at the end. A child that fails to
 * start fails the test. Never asserts on timing. Feature probes print
 * "skipped: <reason>". ZCIO_TEST_MODULE names c/modules/rot13.c built as a shared
 * object (scripts/test-c sets it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zcio.h>

#define WATCHDOG_S 60
#define CHILD_WAIT_S 30

#include "harness.h"

/* ------------------------------------------------------------- utilities */

/* Byte k of every test stream. */
static unsigned char stream_byte(uint64_t k) {
    return (unsigned char)((k % 251) ^ (k >> 11) ^ ((k * 2654435761u) >> 29));
}

static void fill_stream(unsigned char *b, size_t n, uint64_t at) {
    for (size_t i = 0; i < n; i++) b[i] = stream_byte(at + i);
}

#define FNV0 UINT64_C(0xcbf29ce484222325)
static uint64_t fnv(uint64_t h, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

static uint64_t stream_hash(uint64_t size) {
    unsigned char b[65536];
    uint64_t h = FNV0;
    for (uint64_t at = 0; at < size; at += sizeof b) {
        size_t n = size - at < sizeof b ? (size_t)(size - at) : sizeof b;
        fill_stream(b, n, at);
        h = fnv(h, b, n);
    }
    return h;
}

/* A child's result file holds "COUNT HASH": both must be those of the stream of `size` bytes. */
static int check_result_file(const char *res, uint64_t size) {
    FILE *f = fopen(res, "r");
    CHECK(f != NULL);
    uint64_t n = 0, h = 0;
    int got = fscanf(f, "%" SCNu64 " %" SCNu64, &n, &h);
    fclose(f);
    CHECK(got == 2);
    CHECK(n == size);
    CHECK(h == stream_hash(size));
    return 0;
}

/* CRC32C (Castagnoli), bit by bit from a table. */
static uint32_t crc32c(uint32_t crc, const unsigned char *b, size_t n) {
    static uint32_t table[256];
    if (!table[1]) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static uint32_t stream_crc(uint64_t size) {
    unsigned char b[65536];
    uint32_t c = 0;
    for (uint64_t at = 0; at < size; at += sizeof b) {
        size_t n = size - at < sizeof b ? (size_t)(size - at) : sizeof b;
        fill_stream(b, n, at);
        c = crc32c(c, b, n);
    }
    return c;
}

static int write_all(int fd, const unsigned char *b, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Write the test stream's first `size` bytes to a new file `path`. */
static int make_stream_file(const char *path, uint64_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    unsigned char b[65536];
    for (uint64_t at = 0; at < size; at += sizeof b) {
        size_t n = size - at < sizeof b ? (size_t)(size - at) : sizeof b;
        fill_stream(b, n, at);
        if (write_all(fd, b, n)) {
            close(fd);
            return -1;
        }
    }
    return close(fd);
}

/* Size and FNV hash of a file (-1 if it cannot be read). */
static int file_hash(const char *path, uint64_t *size, uint64_t *hash) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    unsigned char b[65536];
    uint64_t h = FNV0, n = 0;
    ssize_t r;
    while ((r = read(fd, b, sizeof b)) > 0) {
        h = fnv(h, b, (size_t)r);
        n += (uint64_t)r;
    }
    close(fd);
    if (r < 0) return -1;
    *size = n;
    *hash = h;
    return 0;
}

/* The file holds exactly the test stream's first `size` bytes. */
static int file_is_stream(const char *path, uint64_t size) {
    uint64_t n, h;
    return file_hash(path, &n, &h) == 0 && n == size && h == stream_hash(size);
}

/* A loopback TCP listener; its port in *port. */
static int tcp_listener(int *port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4) ||
        getsockname(s, (struct sockaddr *)&a, &len)) {
        if (s >= 0) close(s);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return s;
}

/* Accept one connection within 20 s (-1 if none came: a child failed). */
static int accept_within(int l) {
    struct pollfd p = {.fd = l, .events = POLLIN};
    if (poll(&p, 1, 20000) != 1) return -1;
    return accept4(l, NULL, NULL, SOCK_CLOEXEC);
}

static int tcp_connect_retry(const char *port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t)atoi(port))};
    for (int i = 0; i < 1000; i++) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) return s;
        if (s >= 0) close(s);
        sleep_ms(10);
    }
    return -1;
}

static int have_zstd_cli(void) { return system("command -v zstd >/dev/null 2>&1") == 0; }

/* Decompress `zst` with the zstd command-line tool into `out`. */
static int zstd_decompress(const char *zst, const char *out) {
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof cmd, "zstd -q -d -f -o '%s' '%s'", out, zst);
    return system(cmd) == 0 ? 0 : -1;
}

/* --------------------------------------------------------- child roles */

/* tcp-reader PORT OUT: connect, read until EOF, write "COUNT HASH" to OUT. */
static int role_tcp_reader(char **a) {
    int s = tcp_connect_retry(a[0]);
    if (s < 0) return 3;
    unsigned char b[65536];
    uint64_t h = FNV0, n = 0;
    ssize_t r;
    while ((r = read(s, b, sizeof b)) > 0 || (r < 0 && errno == EINTR)) {
        if (r <= 0) continue;
        h = fnv(h, b, (size_t)r);
        n += (uint64_t)r;
    }
    if (r < 0) return 4;
    FILE *f = fopen(a[1], "w");
    if (!f) return 5;
    fprintf(f, "%" PRIu64 " %" PRIu64 "\n", n, h);
    return fclose(f) ? 6 : 0;
}

/* tcp-writer PORT SIZE MODE: connect, write SIZE bytes of the stream; then MODE
 * "close" exits, "die" SIGKILLs itself (no orderly shutdown), "silent" writes
 * nothing and waits to be killed. */
static int role_tcp_writer(char **a) {
    int s = tcp_connect_retry(a[0]);
    if (s < 0) return 3;
    uint64_t size = strtoull(a[1], NULL, 10);
    if (strcmp(a[2], "silent") == 0) {
        for (;;) pause(); /* the watchdog ends it if nobody else does */
    }
    unsigned char b[65536];
    for (uint64_t at = 0; at < size; at += sizeof b) {
        size_t n = size - at < sizeof b ? (size_t)(size - at) : sizeof b;
        fill_stream(b, n, at);
        if (write_all(s, b, n)) return 4;
    }
    if (strcmp(a[2], "die") == 0) raise(SIGKILL);
    return close(s) ? 5 : 0;
}

/* pipe-writer SIZE: write SIZE bytes of the stream to standard output. */
static int role_pipe_writer(char **a) {
    uint64_t size = strtoull(a[0], NULL, 10);
    unsigned char b[65536];
    for (uint64_t at = 0; at < size; at += sizeof b) {
        size_t n = size - at < sizeof b ? (size_t)(size - at) : sizeof b;
        fill_stream(b, n, at);
        if (write_all(STDOUT_FILENO, b, n)) return 4;
    }
    return 0;
}

/* chan-reader PATH OUT: connect a channel to PATH, receive until the peer closes,
 * write "COUNT HASH" to OUT. */
static int role_chan_reader(char **a) {
    struct zcio_channel *ch = NULL;
    if (zcio_connect(a[0], CHILD_WAIT_S * 1000, &ch) != 0) return 3;
    static unsigned char b[1 << 20];
    uint64_t h = FNV0, n = 0;
    int rc;
    for (;;) {
        struct zcio_msg *m = NULL;
        rc = zcio_recv(ch, CHILD_WAIT_S * 1000, &m);
        if (rc != 0) break;
        size_t len = zcio_msg_len(m);
        if (len > sizeof b || zcio_msg_read(m, 0, b, len) != (ssize_t)len) return 4;
        zcio_msg_release(m);
        h = fnv(h, b, len);
        n += len;
    }
    zcio_channel_close(ch);
    if (rc != -EPIPE) return 5;
    FILE *f = fopen(a[1], "w");
    if (!f) return 6;
    fprintf(f, "%" PRIu64 " %" PRIu64 "\n", n, h);
    return fclose(f) ? 7 : 0;
}

/* chan-writer PATH SIZE: connect a channel to PATH and close it at once, then
 * connect a second one and send SIZE bytes of the stream on it in 60000-byte
 * messages; then wait to be killed (the watchdog ends it if nobody does). */
static int role_chan_writer(char **a) {
    struct zcio_channel *ch = NULL;
    if (zcio_connect(a[0], CHILD_WAIT_S * 1000, &ch) != 0) return 3;
    zcio_channel_close(ch);
    if (zcio_connect(a[0], CHILD_WAIT_S * 1000, &ch) != 0) return 4;
    uint64_t size = strtoull(a[1], NULL, 10);
    static unsigned char b[60000];
    for (uint64_t at = 0; at < size; at += sizeof b) {
        size_t n = size - at < sizeof b ? (size_t)(size - at) : sizeof b;
        fill_stream(b, n, at);
        if (zcio_send_bytes(ch, b, n, CHILD_WAIT_S * 1000) != 0) return 5;
    }
    for (;;) pause();
}

static int run_child(const char *role, char **a, int n) {
    signal(SIGPIPE, SIG_DFL);
    if (strcmp(role, "tcp-reader") == 0 && n == 2) return role_tcp_reader(a);
    if (strcmp(role, "tcp-writer") == 0 && n == 3) return role_tcp_writer(a);
    if (strcmp(role, "pipe-writer") == 0 && n == 1) return role_pipe_writer(a);
    if (strcmp(role, "chan-reader") == 0 && n == 2) return role_chan_reader(a);
    if (strcmp(role, "chan-writer") == 0 && n == 2) return role_chan_writer(a);
    fprintf(stderr, "unknown child role %s\n", role);
    return 2;
}

/* Accept a TCP connection from a `tcp-writer` child writing SIZE bytes in MODE. */
static int writer_child(uint64_t size, const char *mode, pid_t *pid) {
    int port;
    int l = tcp_listener(&port);
    if (l < 0) return -1;
    char ps[16], ss[32];
    snprintf(ps, sizeof ps, "%d", port);
    snprintf(ss, sizeof ss, "%" PRIu64, size);
    *pid = spawn("tcp-writer", ps, ss, mode, NULL);
    int s = accept_within(l);
    close(l);
    return s;
}

/* ------------------------------------------------------------- the tests */

/* A file sent to a child's TCP socket: sendfile, every byte arrives. */
static int test_splice_sendfile_to_child(void) {
    const uint64_t size = (8 << 20) + 123;
    char src[PATH_MAX], res[PATH_MAX];
    path_in_work(src, sizeof src, "sendfile.src");
    path_in_work(res, sizeof res, "sendfile.result");
    CHECK(make_stream_file(src, size) == 0);
    int port;
    int l = tcp_listener(&port);
    CHECK(l >= 0);
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    pid_t kid = spawn("tcp-reader", ps, res, NULL);
    int sock = accept_within(l);
    close(l);
    CHECK(sock >= 0);
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);

    zcio_assoc *a = NULL;
    CHECK_RC(zcio_splice_fds(fd, sock, &a), 0);
    /* The association has its own duplicates: ours may go (and must, for EOF). */
    close(fd);
    close(sock);
    struct zcio_assoc_status st;
    CHECK_RC(zcio_assoc_get_status(a, &st), 0);
    CHECK_RC(st.mover, ZCIO_MOVER_SENDFILE);
    CHECK(strcmp(zcio_mover_name(st.mover), "sendfile") == 0);
    CHECK(!st.active && !st.eof && st.moved == 0 && st.modules == 0);

    struct zcio_completion c;
    CHECK_RC(zcio_assoc_run(a, ZCIO_INCREMENT_INFINITE, &c), 0);
    CHECK_RC(c.error, 0);
    CHECK(c.eof && !c.stopped && c.moved == size);
    CHECK_RC(zcio_assoc_get_status(a, &st), 0);
    CHECK(st.eof && !st.active && !st.error && st.moved == size);
    CHECK_RC(st.mover, ZCIO_MOVER_SENDFILE);
    CHECK_RC(st.fell_back, 0);
    CHECK(st.copied == 0);
    struct zcio_assoc_stats k;
    CHECK_RC(zcio_assoc_get_stats(a, &k, sizeof k), 0);
    CHECK(k.started == 1 && k.completed == 1 && k.failed == 0);
    CHECK(k.moved_bytes == size && k.running == 0);
    CHECK_RC(zcio_assoc_get_stats(a, NULL, sizeof k), -EINVAL);
    struct zcio_assoc_status fin;
    zcio_assoc_close(a, &fin);
    CHECK(fin.moved == size);

    CHECK_CHILD(kid, 0);
    return check_result_file(res, size);
}

/* A child's pipe through crc32c + zstd into a file: the checksum matches, the
 * file decompresses to the stream (zstd CLI), popping moves back to splice. */
static int test_splice_modules_from_child_pipe(void) {
    const uint64_t size = (6 << 20) + 777;
    char out[PATH_MAX], dec[PATH_MAX];
    path_in_work(out, sizeof out, "modules.zst");
    path_in_work(dec, sizeof dec, "modules.dec");
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    char ss[32];
    snprintf(ss, sizeof ss, "%" PRIu64, size);
    pid_t kid = spawn_to(p[1], "pipe-writer", ss, NULL);
    close(p[1]);
    int ofd = open(out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(ofd >= 0);

    zcio_assoc *a = NULL;
    CHECK_RC(zcio_splice_fds(p[0], ofd, &a), 0);
    close(p[0]);
    close(ofd);
    struct zcio_assoc_status st;
    CHECK_RC(zcio_assoc_get_status(a, &st), 0);
    CHECK_RC(st.mover, ZCIO_MOVER_SPLICE);
    CHECK_RC(zcio_assoc_push(a, "crc32c"), 0);
    CHECK_RC(zcio_assoc_push(a, "zstd:level=3"), 0);
    CHECK_RC(zcio_assoc_get_status(a, &st), 0);
    CHECK_RC(st.mover, ZCIO_MOVER_BUFFER);
    CHECK_RC(st.modules, 2);

    struct zcio_completion c;
    CHECK_RC(zcio_assoc_run(a, ZCIO_INCREMENT_INFINITE, &c), 0);
    CHECK_RC(c.error, 0);
    CHECK(c.eof && c.moved == size);
    CHECK_CHILD(kid, 0);

    char reply[128], want[32];
    snprintf(want, sizeof want, "0x%08" PRIx32, stream_crc(size));
    ssize_t n = zcio_assoc_control(a, "crc32c", "value", NULL, reply, sizeof reply);
    CHECK(n > 0 && (size_t)n == strlen(reply));
    if (strcmp(reply, want) != 0) FAILF("crc32c value %s, want %s", reply, want);
    n = zcio_assoc_control(a, "0", "stats", NULL, reply, sizeof reply);
    CHECK(n > 0);
    char bytes[48];
    snprintf(bytes, sizeof bytes, "bytes=%" PRIu64, size);
    if (!strstr(reply, bytes)) FAILF("crc32c stats '%s' lack '%s'", reply, bytes);
    char stats[1024];
    n = zcio_assoc_module_stats(a, stats, sizeof stats);
    CHECK(n > 0 && (size_t)n < sizeof stats);
    CHECK(strncmp(stats, "crc32c ", 7) == 0 && strstr(stats, "\nzstd ") != NULL);

    CHECK_RC(zcio_assoc_pop(a), 1);
    CHECK_RC(zcio_assoc_pop(a), 1);
    CHECK_RC(zcio_assoc_pop(a), 0);
    CHECK_RC(zcio_assoc_get_status(a, &st), 0);
    CHECK_RC(st.mover, ZCIO_MOVER_SPLICE);
    CHECK_RC(st.modules, 0);
    zcio_assoc_close(a, NULL);

    if (!have_zstd_cli()) {
        printf("skipped: decompressing the output (no zstd command; checked the crc32c value and the byte count)\n");
        return 0;
    }
    CHECK(zstd_decompress(out, dec) == 0);
    CHECK(file_is_stream(dec, size));
    return 0;
}

struct cb_ctx {
    int calls;
    uint64_t moved;
    uint64_t seen_next;
};

static int count_and_continue(void *ctx, const struct zcio_completion *c, uint64_t *next) {
    struct cb_ctx *x = ctx;
    x->calls++;
    x->moved += c->moved;
    x->seen_next = *next;
    *next = 1 << 20; /* later increments: 1 MiB */
    return 1;
}

/* Asynchronous increments: start + poll(zcio_assoc_fd) + wait over a child's
 * TCP stream; then a callback that chains increments until the end. */
static int test_splice_async_poll_wait(void) {
    const uint64_t size = (10 << 20) + 5;
    char out[PATH_MAX], out2[PATH_MAX], src[PATH_MAX];
    path_in_work(out, sizeof out, "async.out");
    path_in_work(out2, sizeof out2, "async2.out");
    path_in_work(src, sizeof src, "async.src");
    pid_t kid;
    int sock = writer_child(size, "close", &kid);
    CHECK(sock >= 0);
    int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(ofd >= 0);
    zcio_assoc *a = NULL;
    CHECK_RC(zcio_splice_fds(sock, ofd, &a), 0);
    close(sock);
    close(ofd);
    int efd = zcio_assoc_fd(a);
    CHECK(efd >= 0);
    CHECK_RC(zcio_assoc_wait(a, 0, NULL), -ECHILD);

    uint64_t total = 0;
    int increments = 0, eof = 0;
    while (!eof) {
        CHECK(increments < 1000);
        CHECK_RC(zcio_assoc_start(a, ZCIO_INCREMENT_DEFAULT), 0);
        struct pollfd pf = {.fd = efd, .events = POLLIN};
        CHECK_RC(poll(&pf, 1, 20000), 1);
        struct zcio_completion c;
        CHECK_RC(zcio_assoc_wait(a, 0, &c), 0);
        CHECK_RC(c.error, 0);
        CHECK(c.moved <= (4 << 20));
        total += c.moved;
        eof = c.eof;
        increments++;
    }
    CHECK(total == size);
    CHECK(increments >= 3); /* 4 MiB each */
    CHECK_RC(zcio_assoc_wait(a, 0, NULL), -ECHILD);
    struct pollfd pf = {.fd = efd, .events = POLLIN};
    CHECK_RC(poll(&pf, 1, 0), 0); /* collected: no longer readable */
    zcio_assoc_close(a, NULL);
    CHECK_CHILD(kid, 0);
    CHECK(file_is_stream(out, size));

    /* A callback chains the increments. */
    CHECK(make_stream_file(src, size) == 0);
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    ofd = open(out2, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0 && ofd >= 0);
    CHECK_RC(zcio_splice_fds(fd, ofd, &a), 0);
    close(fd);
    close(ofd);
    struct cb_ctx x = {0};
    CHECK_RC(zcio_assoc_on_complete(a, count_and_continue, &x), 0);
    CHECK_RC(zcio_assoc_start(a, 3 << 20), 0);
    total = 0;
    increments = 0;
    eof = 0;
    while (!eof) {
        struct zcio_completion c;
        CHECK_RC(zcio_assoc_wait(a, 20000, &c), 0);
        CHECK_RC(c.error, 0);
        total += c.moved;
        eof = c.eof;
        increments++;
        CHECK(increments < 1000);
    }
    CHECK(total == size);
    CHECK_RC(x.calls, increments);
    CHECK(x.moved == size);
    CHECK(x.seen_next == 1 << 20);
    CHECK(increments >= 8); /* 3 MiB, then 1 MiB each */
    zcio_assoc_close(a, NULL);
    CHECK(file_is_stream(out2, size));
    return 0;
}

struct stopper {
    zcio_assoc *a;
    int ok;
};

static void *stop_when_active(void *arg) {
    struct stopper *s = arg;
    struct zcio_assoc_status st;
    for (int i = 0; i < 20000; i++) {
        if (zcio_assoc_get_status(s->a, &st) == 0 && st.active) {
            s->ok = zcio_assoc_stop(s->a) == 0;
            return NULL;
        }
        sleep_ms(1);
    }
    return NULL;
}

/* A source that sends nothing: an asynchronous increment ends on stop; a
 * synchronous run blocked in one thread is stopped from another. */
static int test_splice_stop_silent_source(void) {
    char out[PATH_MAX];
    path_in_work(out, sizeof out, "stop.out");
    pid_t kid;
    int sock = writer_child(0, "silent", &kid);
    CHECK(sock >= 0);
    int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(ofd >= 0);
    zcio_assoc *a = NULL;
    CHECK_RC(zcio_splice_fds(sock, ofd, &a), 0);
    close(sock);
    close(ofd);

    CHECK_RC(zcio_assoc_start(a, ZCIO_INCREMENT_INFINITE), 0);
    CHECK_RC(zcio_assoc_wait(a, 100, NULL), -ETIMEDOUT);
    CHECK_RC(zcio_assoc_wait(a, 0, NULL), -EAGAIN);
    struct zcio_assoc_status st;
    CHECK_RC(zcio_assoc_get_status(a, &st), 0);
    CHECK(st.active);
    CHECK_RC(zcio_assoc_stop(a), 0);
    struct zcio_completion c;
    CHECK_RC(zcio_assoc_wait(a, 20000, &c), 0);
    CHECK(c.stopped && c.moved == 0 && !c.eof && c.error == 0);
    CHECK_RC(zcio_assoc_get_status(a, &st), 0);
    CHECK(!st.active);

    struct stopper s = {a, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, stop_when_active, &s) == 0);
    CHECK_RC(zcio_assoc_run(a, ZCIO_INCREMENT_INFINITE, &c), 0);
    pthread_join(t, NULL);
    CHECK(s.ok);
    CHECK(c.stopped && c.moved == 0 && !c.eof);
    zcio_assoc_close(a, NULL);
    kill(kid, SIGKILL);
    CHECK_CHILD(kid, 128 + SIGKILL);
    return 0;
}

/* The sender is killed with SIGKILL mid-stream: the run ends (end of stream or
 * an error), it does not hang; with and without modules. */
static int test_splice_sender_killed(void) {
    const uint64_t size = 3 << 20;
    for (int with_modules = 0; with_modules < 2; with_modules++) {
        char out[PATH_MAX];
        path_in_work(out, sizeof out, with_modules ? "killed-m.out" : "killed.out");
        pid_t kid;
        int sock = writer_child(size, "die", &kid);
        CHECK(sock >= 0);
        int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(ofd >= 0);
        zcio_assoc *a = NULL;
        CHECK_RC(zcio_splice_fds(sock, ofd, &a), 0);
        close(sock);
        close(ofd);
        if (with_modules) {
            CHECK_RC(zcio_assoc_push(a, "crc32c"), 0);
            CHECK_RC(zcio_assoc_push(a, "zstd"), 0);
        }
        struct zcio_completion c = {0};
        int rc = zcio_assoc_run(a, ZCIO_INCREMENT_INFINITE, &c);
        CHECK(rc < 0 || c.eof || c.error < 0);
        CHECK(c.moved <= size);
        struct zcio_assoc_status st;
        CHECK_RC(zcio_assoc_get_status(a, &st), 0);
        CHECK(!st.active);
        CHECK(st.moved <= size);
        zcio_assoc_close(a, NULL);
        CHECK_CHILD(kid, 128 + SIGKILL);
    }
    return 0;
}

/* zcio_cp: file to file (copy_file_range, or its recorded fallback), and
 * through crc32c + zstd (the buffer path). */
static int test_splice_cp(void) {
    const uint64_t size = (5 << 20) + 9;
    char src[PATH_MAX], dst[PATH_MAX], zst[PATH_MAX], dec[PATH_MAX];
    path_in_work(src, sizeof src, "cp.src");
    path_in_work(dst, sizeof dst, "cp.dst");
    path_in_work(zst, sizeof zst, "cp.zst");
    path_in_work(dec, sizeof dec, "cp.dec");
    CHECK(make_stream_file(src, size) == 0);
    struct zcio_assoc_status st;
    CHECK_RC(zcio_cp(src, dst, NULL, 0, &st), 0);
    CHECK(st.moved == size && st.eof && !st.error);
    CHECK(st.mover == ZCIO_MOVER_COPY_FILE_RANGE || (st.fell_back > 0 && st.fell_back_errno > 0));
    CHECK(file_is_stream(dst, size));

    const char *mods[] = {"crc32c", "zstd:level=1"};
    CHECK_RC(zcio_cp(src, zst, mods, 2, &st), 0);
    CHECK(st.moved == size);
    CHECK_RC(st.mover, ZCIO_MOVER_BUFFER);
    CHECK_RC(st.modules, 2);
    CHECK(zcio_cp(src, dst, mods, 2, NULL) == 0);
    if (!have_zstd_cli()) {
        printf("skipped: decompressing zcio_cp's output (no zstd command)\n");
        return 0;
    }
    CHECK(zstd_decompress(zst, dec) == 0);
    CHECK(file_is_stream(dec, size));
    return 0;
}

/* zcio_cp never destroys its source: the same file by its own path or a
 * symlink is refused with -EINVAL ("are the same file") and keeps every
 * byte; a destination directory gets the source's name. */
static int test_splice_cp_same_file(void) {
    const uint64_t size = (1 << 20) + 7;
    char src[PATH_MAX], link[PATH_MAX], sub[PATH_MAX], into[PATH_MAX];
    path_in_work(src, sizeof src, "same.src");
    path_in_work(link, sizeof link, "same.link");
    path_in_work(sub, sizeof sub, "into");
    path_in_work(into, sizeof into, "into/same.src");
    CHECK(make_stream_file(src, size) == 0);
    CHECK(symlink(src, link) == 0);
    const char *mods[] = {"crc32c"};
    const char *dsts[] = {src, link};
    for (int i = 0; i < 2; i++) {
        for (size_t n = 0; n < 2; n++) {
            CHECK_RC(zcio_cp(src, dsts[i], mods, n, NULL), -EINVAL);
            CHECK(strstr(zcio_last_error(), "are the same file") != NULL);
            CHECK(file_is_stream(src, size));
        }
        zcio_assoc *a = NULL;
        CHECK_RC(zcio_splice_specs(src, dsts[i], &a), -EINVAL);
        CHECK(file_is_stream(src, size));
    }
    CHECK(mkdir(sub, 0700) == 0);
    struct zcio_assoc_status st;
    CHECK_RC(zcio_cp(src, sub, NULL, 0, &st), 0);
    CHECK(st.moved == size && !st.error);
    CHECK(file_is_stream(into, size));
    return 0;
}

/* zcio_assoc_finish: a stream ended before the source's end still has its
 * modules flushed (the zstd frame decodes to exactly what was moved). */
static int test_splice_finish(void) {
    const uint64_t size = (3 << 20) + 5, part = 1000000;
    char src[PATH_MAX], zst[PATH_MAX], dec[PATH_MAX];
    path_in_work(src, sizeof src, "fin.src");
    path_in_work(zst, sizeof zst, "fin.zst");
    path_in_work(dec, sizeof dec, "fin.dec");
    CHECK(make_stream_file(src, size) == 0);
    zcio_assoc *a = NULL;
    CHECK_RC(zcio_splice_specs(src, zst, &a), 0);
    CHECK_RC(zcio_assoc_push(a, "zstd:level=1"), 0);
    struct zcio_completion c;
    CHECK_RC(zcio_assoc_run(a, part, &c), 0);
    CHECK(c.moved == part && !c.eof);
    CHECK_RC(zcio_assoc_finish(a), 0);
    CHECK_RC(zcio_assoc_run(a, ZCIO_INCREMENT_INFINITE, &c), 0);
    CHECK(c.eof && c.moved == 0);
    zcio_assoc_close(a, NULL);
    CHECK_RC(zcio_assoc_finish(NULL), -EINVAL);
    const char *mods[] = {"unzstd"};
    struct zcio_assoc_status st;
    CHECK_RC(zcio_cp(zst, dec, mods, 1, &st), 0);
    CHECK(st.moved > 0);
    CHECK(file_is_stream(dec, part));
    return 0;
}

/* A user module from a shared object (c/modules/rot13.c). */
static int test_splice_module_load(void) {
    char junk[PATH_MAX], src[PATH_MAX], dst[PATH_MAX], name[8];
    path_in_work(junk, sizeof junk, "not-a-module.so");
    path_in_work(src, sizeof src, "rot.src");
    path_in_work(dst, sizeof dst, "rot.dst");
    FILE *f = fopen(junk, "w");
    CHECK(f && fputs("not an ELF object\n", f) >= 0 && fclose(f) == 0);
    CHECK_RC(zcio_module_load(junk, NULL, 0), -ZCIO_EMODULE);
    CHECK(strstr(zcio_last_error(), "not-a-module.so") != NULL);
    CHECK_RC(zcio_module_load("/nonexistent/librot13.so", name, sizeof name), -ZCIO_EMODULE);

    const char *so = getenv("ZCIO_TEST_MODULE");
    if (!so || !*so) {
        printf("skipped: loading a module (ZCIO_TEST_MODULE does not name c/modules/rot13.c built as a shared object)\n");
        return 0;
    }
    CHECK_RC(zcio_module_load(so, name, sizeof name), 5);
    CHECK(strcmp(name, "rot13") == 0);
    f = fopen(src, "w");
    CHECK(f && fputs("Hello, zcio!\n", f) >= 0 && fclose(f) == 0);
    const char *mods[] = {"rot13"};
    struct zcio_assoc_status st;
    CHECK_RC(zcio_cp(src, dst, mods, 1, &st), 0);
    CHECK(st.moved == 13 && st.mover == ZCIO_MOVER_BUFFER);
    char got[64] = {0};
    f = fopen(dst, "r");
    CHECK(f && fgets(got, sizeof got, f) != NULL);
    fclose(f);
    CHECK(strcmp(got, "Uryyb, mpvb!\n") == 0);
    return 0;
}

/* A file into a channel whose receiver is a child: every byte arrives, by
 * reference; the labels name both ends. */
static int test_splice_file_to_child_channel(void) {
    const uint64_t size = (5 << 20) + 321;
    char src[PATH_MAX], res[PATH_MAX], sock[PATH_MAX];
    path_in_work(src, sizeof src, "chan.src");
    path_in_work(res, sizeof res, "chan.result");
    path_in_work(sock, sizeof sock, "chan.sock");
    CHECK(make_stream_file(src, size) == 0);
    struct zcio_listener *l = NULL;
    CHECK_RC(zcio_listen(sock, &l), 0);
    pid_t kid = spawn("chan-reader", sock, res, NULL);
    struct zcio_channel *ch = NULL;
    CHECK_RC(zcio_accept(l, CHILD_WAIT_S * 1000, &ch), 0);
    zcio_listener_close(l);
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);

    zcio_assoc *a = NULL;
    CHECK_RC(zcio_splice_fd_channel(fd, ch, &a), 0); /* ch is the association's now */
    char want[32], label[32];
    snprintf(want, sizeof want, "fd:%d", fd);
    close(fd);
    CHECK(zcio_assoc_label(a, ZCIO_ASSOC_SOURCE, label, sizeof label) == (ssize_t)strlen(want));
    CHECK(strcmp(label, want) == 0);
    CHECK(zcio_assoc_label(a, ZCIO_ASSOC_SINK, label, sizeof label) == 7);
    CHECK(strcmp(label, "channel") == 0);
    CHECK(zcio_assoc_label(a, ZCIO_ASSOC_SINK, NULL, 0) == 7);
    CHECK(zcio_assoc_label(a, ZCIO_ASSOC_SINK, label, 4) == 7 && strcmp(label, "cha") == 0);
    CHECK_RC(zcio_assoc_label(a, 2, label, sizeof label), -EINVAL);
    CHECK_RC(zcio_assoc_label(a, ZCIO_ASSOC_SOURCE, NULL, 5), -EINVAL);
    CHECK_RC(zcio_assoc_label(NULL, ZCIO_ASSOC_SOURCE, label, sizeof label), -EINVAL);

    struct zcio_completion c;
    CHECK_RC(zcio_assoc_run(a, ZCIO_INCREMENT_INFINITE, &c), 0);
    CHECK_RC(c.error, 0);
    CHECK(c.eof && c.moved == size);
    struct zcio_assoc_status st;
    zcio_assoc_close(a, &st); /* closes the channel: the child sees the end */
    CHECK_RC(st.mover, ZCIO_MOVER_BUFFER);
    CHECK(st.moved == size && st.copied == 0);

    CHECK_CHILD(kid, 0);
    return check_result_file(res, size);
}

/* A child's channel messages land in a file; the child killed with SIGKILL ends
 * the source. A channel is taken over also when the call fails. */
static int test_splice_child_channel_to_file(void) {
    const uint64_t size = (4 << 20) + 999;
    char out[PATH_MAX], sock[PATH_MAX], ss[32];
    path_in_work(out, sizeof out, "chansrc.out");
    path_in_work(sock, sizeof sock, "chansrc.sock");
    snprintf(ss, sizeof ss, "%" PRIu64, size);
    struct zcio_listener *l = NULL;
    CHECK_RC(zcio_listen(sock, &l), 0);
    pid_t kid = spawn("chan-writer", sock, ss, NULL);
    struct zcio_channel *ch = NULL;
    /* The child's first channel: handed to a call that fails (a closed sink
     * descriptor), which frees it all the same (ASan and valgrind check). */
    CHECK_RC(zcio_accept(l, CHILD_WAIT_S * 1000, &ch), 0);
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    close(p[1]);
    zcio_assoc *a = NULL;
    CHECK_RC(zcio_splice_channel_fd(ch, p[1], &a), -EBADF);
    CHECK(a == NULL);
    close(p[0]);
    CHECK_RC(zcio_splice_channel_fd(NULL, 1, &a), -EINVAL);
    CHECK_RC(zcio_splice_fd_channel(0, NULL, &a), -EINVAL);

    CHECK_RC(zcio_accept(l, CHILD_WAIT_S * 1000, &ch), 0);
    zcio_listener_close(l);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK_RC(zcio_splice_channel_fd(ch, fd, &a), 0);
    close(fd);
    char label[32];
    CHECK(zcio_assoc_label(a, ZCIO_ASSOC_SOURCE, label, sizeof label) == 7);
    CHECK(strcmp(label, "channel") == 0);
    struct zcio_completion c;
    CHECK_RC(zcio_assoc_run(a, size, &c), 0);
    CHECK_RC(c.error, 0);
    CHECK(c.moved == size && !c.eof);
    CHECK(file_is_stream(out, size));
    /* The sender dies without closing: the source ends, nothing more moves. */
    CHECK(kill(kid, SIGKILL) == 0);
    CHECK_CHILD(kid, 128 + SIGKILL);
    CHECK_RC(zcio_assoc_run(a, ZCIO_INCREMENT_INFINITE, &c), 0);
    CHECK(c.eof && c.moved == 0);
    struct zcio_assoc_status st;
    zcio_assoc_close(a, &st);
    CHECK(st.moved == size && st.eof);
    return 0;
}

/* zcio_module_names: the built-ins, sorted, one per line; truncation. */
static int test_splice_module_names(void) {
    char names[1024];
    ssize_t n = zcio_module_names(names, sizeof names);
    CHECK(n > 0 && (size_t)n < sizeof names && strlen(names) == (size_t)n);
    CHECK(zcio_module_names(NULL, 0) == n);
    CHECK(strstr(names, "count\n") != NULL && strstr(names, "crc32c\n") != NULL);
    CHECK(names[n - 1] == '\n');
    /* sorted: every line after the previous one */
    char copy[1024];
    memcpy(copy, names, (size_t)n + 1);
    const char *prev = NULL;
    for (char *save = NULL, *t = strtok_r(copy, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
        CHECK(prev == NULL || strcmp(prev, t) < 0);
        prev = t;
    }
    char small[4];
    CHECK(zcio_module_names(small, sizeof small) == n && strlen(small) == 3);
    CHECK_RC(zcio_module_names(NULL, 3), -EINVAL);
    /* a listed name is what zcio_assoc_push opens */
    zcio_assoc *a = NULL;
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    CHECK_RC(zcio_splice_fds(p[0], p[1], &a), 0);
    CHECK_RC(zcio_assoc_push(a, "count"), 0);
    zcio_assoc_close(a, NULL);
    close(p[0]);
    close(p[1]);
    return 0;
}

/* Bad input of every kind: errors, never crashes. */
static int test_splice_hostile_input(void) {
    zcio_assoc *a = NULL;
    struct zcio_completion c;
    struct zcio_assoc_status st;
    char reply[8];
    /* NULL everywhere */
    CHECK_RC(zcio_splice_fds(0, 1, NULL), -EINVAL);
    CHECK_RC(zcio_splice_specs(NULL, "x", &a), -EINVAL);
    CHECK_RC(zcio_splice_specs("x", NULL, &a), -EINVAL);
    CHECK_RC(zcio_splice_specs("x", "y", NULL), -EINVAL);
    CHECK_RC(zcio_assoc_run(NULL, 0, &c), -EINVAL);
    CHECK_RC(zcio_assoc_start(NULL, 0), -EINVAL);
    CHECK_RC(zcio_assoc_wait(NULL, 0, &c), -EINVAL);
    CHECK_RC(zcio_assoc_fd(NULL), -EINVAL);
    CHECK_RC(zcio_assoc_on_complete(NULL, NULL, NULL), -EINVAL);
    CHECK_RC(zcio_assoc_on_quench(NULL, NULL, NULL), -EINVAL);
    CHECK_RC(zcio_assoc_set_drop_when_behind(NULL, 1), -EINVAL);
    CHECK_RC(zcio_assoc_stop(NULL), -EINVAL);
    CHECK_RC(zcio_assoc_get_status(NULL, &st), -EINVAL);
    CHECK_RC(zcio_assoc_push(NULL, "count"), -EINVAL);
    CHECK_RC(zcio_assoc_pop(NULL), -EINVAL);
    CHECK_RC(zcio_assoc_control(NULL, "0", "stats", NULL, reply, sizeof reply), -EINVAL);
    CHECK_RC(zcio_assoc_module_stats(NULL, reply, sizeof reply), -EINVAL);
    CHECK_RC(zcio_cp(NULL, "x", NULL, 0, NULL), -EINVAL);
    CHECK_RC(zcio_cp("x", "y", NULL, 1, NULL), -EINVAL);
    CHECK_RC(zcio_module_load(NULL, NULL, 0), -EINVAL);
    zcio_assoc_close(NULL, NULL);
    CHECK(strstr(zcio_last_error(), "NULL") != NULL);
    CHECK(strcmp(zcio_mover_name(99), "unknown") == 0);
    CHECK(strcmp(zcio_mover_name(-1), "unknown") == 0);
    CHECK(strstr(zcio_strerror(-ZCIO_EMODULE), "module") != NULL);

    /* bad descriptors */
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    int closed = dup(p[0]);
    CHECK(closed >= 0);
    close(closed);
    CHECK_RC(zcio_splice_fds(closed, p[1], &a), -EBADF);
    CHECK_RC(zcio_splice_fds(p[0], closed, &a), -EBADF);
    CHECK_RC(zcio_splice_fds(-1, p[1], &a), -EBADF);
    CHECK_RC(zcio_splice_fds(p[0], INT_MAX, &a), -EBADF);
    int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(dir >= 0);
    CHECK_RC(zcio_splice_fds(dir, p[1], &a), -EINVAL);
    close(dir);

    /* bad specs */
    CHECK_RC(zcio_splice_specs("", "x", &a), -EINVAL);
    CHECK_RC(zcio_splice_specs("fd:x", "x", &a), -EINVAL);
    CHECK_RC(zcio_splice_specs("fd:-3", "x", &a), -EINVAL);
    CHECK_RC(zcio_splice_specs("/nonexistent/zcio-src", "x", &a), -ENOENT);
    CHECK_RC(zcio_splice_specs("\xff\xfe", "x", &a), -EINVAL);
    int port;
    int l = tcp_listener(&port);
    CHECK(l >= 0);
    close(l); /* nobody listens there now */
    char spec[64];
    snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", port);
    CHECK_RC(zcio_splice_specs(spec, "x", &a), -ECONNREFUSED);
    CHECK_RC(zcio_splice_specs("tcp:no-port", "x", &a), -EINVAL);
    CHECK_RC(zcio_cp("/nonexistent/zcio-src", "/nonexistent/zcio-dst", NULL, 0, NULL), -ENOENT);

    /* bad modules (before any endpoint is opened: the sink is not created) */
    const char *unknown[] = {"crc32c", "zsdt"};
    CHECK_RC(zcio_cp("/nonexistent/a", "/nonexistent/b", unknown, 2, NULL), -ENOENT);
    CHECK(strstr(zcio_last_error(), "zsdt") != NULL && strstr(zcio_last_error(), "zstd") != NULL);
    const char *badargs[] = {"zstd:level=banana"};
    CHECK_RC(zcio_cp("/nonexistent/a", "/nonexistent/b", badargs, 1, NULL), -EINVAL);
    const char *nullmod[] = {NULL};
    CHECK_RC(zcio_cp("/nonexistent/a", "/nonexistent/b", nullmod, 1, NULL), -EINVAL);

    /* a live association: bad module specs, controls, and calls while it runs */
    CHECK_RC(zcio_splice_fds(p[0], p[1], &a), 0);
    CHECK_RC(zcio_assoc_wait(a, 0, &c), -ECHILD);
    CHECK_RC(zcio_assoc_push(a, "nosuchmodule"), -ENOENT);
    CHECK_RC(zcio_assoc_push(a, "count:bogus=1"), -EINVAL);
    CHECK_RC(zcio_assoc_push(a, ""), -ENOENT);
    CHECK_RC(zcio_assoc_push(a, NULL), -EINVAL);
    CHECK_RC(zcio_assoc_control(a, "zstd", "stats", NULL, reply, sizeof reply), -ZCIO_EMODULE);
    CHECK_RC(zcio_assoc_push(a, "count"), 0);
    CHECK_RC(zcio_assoc_control(a, "count", "nosuchkey", NULL, reply, sizeof reply), -ZCIO_EMODULE);
    CHECK_RC(zcio_assoc_control(a, "count", NULL, NULL, reply, sizeof reply), -EINVAL);
    CHECK_RC(zcio_assoc_control(a, "count", "stats", NULL, NULL, 5), -EINVAL);
    ssize_t n = zcio_assoc_control(a, "count", "stats", NULL, reply, sizeof reply);
    CHECK(n > (ssize_t)sizeof reply && strlen(reply) == sizeof reply - 1); /* truncated */
    CHECK(zcio_assoc_control(a, "0", "stats", NULL, NULL, 0) == n);
    CHECK_RC(zcio_assoc_start(a, ZCIO_INCREMENT_INFINITE), 0); /* the pipe stays silent */
    CHECK_RC(zcio_assoc_start(a, ZCIO_INCREMENT_INFINITE), -EBUSY);
    CHECK_RC(zcio_assoc_run(a, 1, &c), -EBUSY);
    CHECK_RC(zcio_assoc_push(a, "count"), -EBUSY);
    CHECK_RC(zcio_assoc_pop(a), -EBUSY);
    CHECK_RC(zcio_assoc_control(a, "0", "stats", NULL, reply, sizeof reply), -EBUSY);
    CHECK_RC(zcio_assoc_on_complete(a, NULL, NULL), -EBUSY);
    CHECK_RC(zcio_assoc_set_drop_when_behind(a, 1), -EBUSY);
    CHECK_RC(zcio_assoc_stop(a), 0);
    CHECK_RC(zcio_assoc_wait(a, 20000, &c), 0);
    CHECK(c.stopped);
    CHECK_RC(zcio_assoc_pop(a), 1);
    zcio_assoc_close(a, NULL);
    close(p[0]);
    close(p[1]);
    return 0;
}

/* ----------------------------------------------------------- the runner */

static const struct test tests[] = {
    {"splice_sendfile_to_child", test_splice_sendfile_to_child},
    {"splice_modules_from_child_pipe", test_splice_modules_from_child_pipe},
    {"splice_async_poll_wait", test_splice_async_poll_wait},
    {"splice_stop_silent_source", test_splice_stop_silent_source},
    {"splice_sender_killed", test_splice_sender_killed},
    {"splice_cp", test_splice_cp},
    {"splice_cp_same_file", test_splice_cp_same_file},
    {"splice_finish", test_splice_finish},
    {"splice_module_load", test_splice_module_load},
    {"splice_file_to_child_channel", test_splice_file_to_child_channel},
    {"splice_child_channel_to_file", test_splice_child_channel_to_file},
    {"splice_module_names", test_splice_module_names},
    {"splice_hostile_input", test_splice_hostile_input},
};

int main(int argc, char **argv) {
    if (child_or_runner(argc, argv, run_child)) return 2;
    signal(SIGPIPE, SIG_IGN);

    /* Files on a disk-backed directory when possible (tmpfs lacks nothing we
     * need, but this keeps copy_file_range on a real filesystem). */
    const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (make_work_dir(base, "zcio-splice-test")) return 2;
    setenv("ZCIO_RING_DIR", work_dir, 1);

    int rc = run_tests(tests, sizeof tests / sizeof *tests, argc, argv, WATCHDOG_S);
    remove_work_dir();
    return rc;
}
