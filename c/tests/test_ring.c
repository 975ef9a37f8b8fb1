/*
 * Tests of the ring calls beyond open/read/write in the zcio C library, across real
 * processes: every layout (zcio_ring_open_with), reserve -> fill -> commit and abort,
 * tags, gathered writes, ring-to-ring splice into an index ring, list/stat/dir/path,
 * consumers and wait bounds, a producer killed mid-stream, and bad arguments.
 *
 *   test_ring            run every test
 *   test_ring NAME...    run the named tests
 *
 * As in test_zcio.c: each test runs in a fork of the runner under a watchdog alarm;
 * peers are this program re-executed with --child ROLE ... (their own watchdog too);
 * rings live in a fresh directory ($ZCIO_RING_DIR) removed at the end. A child that
 * fails to start fails the test. Never asserts on timing: the producer waits for its
 * consumer (zcio_ring_wait_consumers) before it writes, and a consumer attaches before
 * its producer starts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
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

/* ------------------------------------------------------------- records */

/* Record i: rec_len(i) bytes of rec_byte(i, k), tag rec_tag(i). */
static size_t rec_len(uint64_t i) { return 1 + (size_t)((i * 37 + 5) % 700); }
static unsigned char rec_byte(uint64_t i, size_t k) {
    return (unsigned char)(i * 131 + k * 7 + 1);
}
static uint32_t rec_tag(uint64_t i) { return 0x1000u + (uint32_t)i; }

static void rec_fill(unsigned char *b, uint64_t i) {
    for (size_t k = 0; k < rec_len(i); k++) b[k] = rec_byte(i, k);
}

static int rec_check(const unsigned char *b, size_t n, uint64_t i) {
    if (n != rec_len(i)) return -1;
    for (size_t k = 0; k < n; k++)
        if (b[k] != rec_byte(i, k)) return -1;
    return 0;
}

/* Write record i one of three ways (i % 3): tagged write, reserve -> fill -> commit,
 * gathered write of three parts. */
static int write_rec(zcio_ring *p, uint64_t i) {
    unsigned char b[1024];
    size_t n = rec_len(i);
    rec_fill(b, i);
    switch (i % 3) {
    case 0:
        CHECK_RC(zcio_ring_write_tagged(p, b, n, rec_tag(i)), n);
        break;
    case 1: {
        void *room;
        size_t cap;
        CHECK_OK(zcio_ring_reserve(p, n + 8, &room, &cap)); /* commits less */
        CHECK(cap == n + 8);
        memcpy(room, b, n);
        CHECK_RC(zcio_ring_commit(p, n, rec_tag(i)), 0);
        break;
    }
    default: {
        zcio_iovec parts[3] = {{b, n / 3}, {b + n / 3, n / 3}, {b + 2 * (n / 3), n - 2 * (n / 3)}};
        CHECK_RC(zcio_ring_write_gather(p, parts, 3, rec_tag(i)), n);
        break;
    }
    }
    return 0;
}

static zcio_ring_options opts_for(uint32_t layout) {
    zcio_ring_options o;
    zcio_ring_options_init(&o, sizeof o);
    o.layout = layout;
    o.size = 64 << 10;
    o.slot_size = 1024;
    o.entries = 64;
    return o;
}

/* ------------------------------------------------------------- children */

/* read-recs NAME LAYOUT N: read records 0..N-1 (tags too, for block rings; the
 * byte stream for a continuous ring), then the end of the stream. */
static int child_read_recs(const char *name, uint32_t layout, uint64_t n) {
    zcio_ring *c;
    CHECK_OK(zcio_ring_open(name, ZCIO_O_RDONLY, 0, 0, &c));
    CHECK_OK(zcio_ring_set_timeout(c, TIMEOUT_MS));
    if (layout == ZCIO_LAYOUT_CONTINUOUS) {
        size_t total = 0;
        for (uint64_t i = 0; i < n; i++) total += rec_len(i);
        unsigned char *all = malloc(total), *got = malloc(total);
        CHECK(all && got);
        size_t off = 0;
        for (uint64_t i = 0; i < n; i++) {
            rec_fill(all + off, i);
            off += rec_len(i);
        }
        for (off = 0; off < total;) {
            ssize_t r = zcio_ring_read(c, got + off, total - off);
            CHECK(r > 0);
            off += (size_t)r;
        }
        CHECK(memcmp(all, got, total) == 0);
        free(all);
        free(got);
    } else {
        for (uint64_t i = 0; i < n; i++) {
            const void *data;
            size_t len;
            CHECK_RC(zcio_ring_peek(c, 1 << 16, &data, &len), 1);
            unsigned char b[1024];
            CHECK(len <= sizeof b);
            memcpy(b, data, len); /* copy out, then check */
            uint32_t tag;
            CHECK_OK(zcio_ring_peek_tag(c, &tag));
            CHECK_RC(zcio_ring_peek_is_intact(c), 1);
            if (rec_check(b, len, i)) FAILF("record %" PRIu64 " corrupt (len %zu)", i, len);
            if (tag != rec_tag(i)) FAILF("record %" PRIu64 ": tag %#x", i, tag);
            CHECK_RC(zcio_ring_release(c), 0);
        }
    }
    unsigned char b[16];
    CHECK_RC(zcio_ring_read(c, b, sizeof b), 0); /* the end */
    zcio_ring_close(c);
    return 0;
}

/* write-then-die NAME K: write K records by reserve/commit, open one more
 * reservation, fill part of it, and die by SIGKILL. */
static int child_write_then_die(const char *name, uint64_t k) {
    zcio_ring *p;
    CHECK_OK(zcio_ring_open(name, ZCIO_O_WRONLY, 0, 0, &p));
    CHECK_RC(zcio_ring_wait_consumers(p, 1, TIMEOUT_MS), 1);
    for (uint64_t i = 0; i < k; i++) {
        void *room;
        size_t cap;
        CHECK_OK(zcio_ring_reserve(p, rec_len(i), &room, &cap));
        rec_fill(room, i);
        CHECK_RC(zcio_ring_commit(p, rec_len(i), rec_tag(i)), 0);
    }
    void *room;
    size_t cap;
    CHECK_OK(zcio_ring_reserve(p, 512, &room, &cap));
    memset(room, 0xee, 100);
    raise(SIGKILL);
    return 1;
}

static int run_child(const char *role, char **a, int n) {
    if (strcmp(role, "read-recs") == 0 && n == 3)
        return child_read_recs(a[0], (uint32_t)atoi(a[1]), strtoull(a[2], NULL, 10));
    if (strcmp(role, "write-then-die") == 0 && n == 2)
        return child_write_then_die(a[0], strtoull(a[1], NULL, 10));
    fprintf(stderr, "unknown child role %s\n", role);
    return 2;
}

/* ---------------------------------------------------------------- tests */

/* Every layout with data, created here as the producer, read by another process:
 * records written three ways, read back byte-exact with their tags; stat and list
 * see the ring with its layout and its consumer. */
static int test_layouts(void) {
    const uint32_t layouts[4] = {ZCIO_LAYOUT_CONTINUOUS, ZCIO_LAYOUT_SLOTTED,
                                 ZCIO_LAYOUT_VARIABLE, ZCIO_LAYOUT_DESCRIPTORS};
    const uint64_t n = 300; /* several laps of a 64 KiB ring */
    for (int l = 0; l < 4; l++) {
        char name[32], lay[8], count[16];
        snprintf(name, sizeof name, "layout-%u", layouts[l]);
        snprintf(lay, sizeof lay, "%u", layouts[l]);
        snprintf(count, sizeof count, "%" PRIu64, n);
        zcio_ring_options o = opts_for(layouts[l]);
        zcio_ring *p;
        CHECK_OK(zcio_ring_open_with(name, ZCIO_O_WRONLY | ZCIO_O_CREAT | ZCIO_O_EXCL, &o,
                                     sizeof o, &p));
        CHECK_OK(zcio_ring_set_timeout(p, TIMEOUT_MS));
        pid_t c = spawn("read-recs", name, lay, count, NULL);
        CHECK_RC(zcio_ring_wait_consumers(p, 1, TIMEOUT_MS), 1);
        CHECK_RC(zcio_ring_consumers(p, 0), 1);
        CHECK_RC(zcio_ring_consumers(p, 1), 1);

        zcio_ring_stat_info st;
        CHECK_RC(zcio_ring_stat(name, &st, sizeof st), 0);
        CHECK(st.layout == layouts[l]);
        CHECK(st.overflow == ZCIO_OVERFLOW_BLOCK);
        CHECK(st.consumers == 1);
        CHECK(st.producer_state == ZCIO_PRODUCER_ACTIVE && st.producer_pid == (uint32_t)getpid());
        CHECK(st.mode == 0600);
        if (layouts[l] == ZCIO_LAYOUT_SLOTTED) CHECK(st.slot_size == 1024);
        if (layouts[l] == ZCIO_LAYOUT_DESCRIPTORS) CHECK(st.entries == 64);
        CHECK(st.size == 64 << 10);
        zcio_ring_consumer_info ci[2];
        CHECK_RC(zcio_ring_stat_consumers(name, ci, 2, sizeof ci[0]), 1);
        CHECK(ci[0].pid == (uint32_t)c && ci[0].alive == 1);
        char list[4096];
        ssize_t ln = zcio_ring_list(list, sizeof list);
        CHECK(ln > 0 && (size_t)ln < sizeof list);
        char line[40];
        snprintf(line, sizeof line, "%s\n", name);
        CHECK(strstr(list, line) != NULL);

        for (uint64_t i = 0; i < n; i++)
            if (write_rec(p, i)) FAILF("layout %u: writing record %" PRIu64, layouts[l], i);
        zcio_ring_close(p);
        CHECK_CHILD(c, 0);
        CHECK_RC(zcio_ring_stat(name, &st, sizeof st), 0);
        CHECK(st.producer_state == ZCIO_PRODUCER_CLOSED);
        CHECK_RC(zcio_ring_unlink(name), 0);
    }
    return 0;
}

/* N records by reserve -> fill -> commit, some committed shorter than reserved, with
 * aborted reservations between them: another process reads exactly the N records. */
static int test_reserve_commit(void) {
    const char *name = "reserve";
    const uint64_t n = 2000;
    zcio_ring_options o = opts_for(ZCIO_LAYOUT_VARIABLE);
    zcio_ring *p;
    CHECK_OK(zcio_ring_open_with(name, ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &p));
    CHECK_OK(zcio_ring_set_timeout(p, TIMEOUT_MS));
    char lay[8], count[16];
    snprintf(lay, sizeof lay, "%u", ZCIO_LAYOUT_VARIABLE);
    snprintf(count, sizeof count, "%" PRIu64, n);
    pid_t c = spawn("read-recs", name, lay, count, NULL);
    CHECK_RC(zcio_ring_wait_consumers(p, 1, TIMEOUT_MS), 1);
    for (uint64_t i = 0; i < n; i++) {
        void *room;
        size_t cap;
        if (i % 3 == 0) { /* an aborted reservation: publishes nothing */
            CHECK_OK(zcio_ring_reserve(p, 900, &room, &cap));
            memset(room, 0xab, cap);
            CHECK_RC(zcio_ring_abort(p), 0);
        }
        size_t want = i % 2 ? rec_len(i) : 1000; /* exact, or more than needed */
        CHECK_OK(zcio_ring_reserve(p, want, &room, &cap));
        CHECK(cap == want);
        rec_fill(room, i);
        CHECK_RC(zcio_ring_commit(p, rec_len(i), rec_tag(i)), 0);
    }
    zcio_ring_close(p);
    CHECK_CHILD(c, 0);
    return 0;
}

/* An index ring: blocks of a source ring spliced in as rich pointers; another process
 * reads the bytes (from the source ring) and tags through the index. Splicing into a
 * data ring copies. */
static int test_index_splice(void) {
    const uint64_t n = 60;
    zcio_ring_options so = opts_for(ZCIO_LAYOUT_VARIABLE);
    so.size = 256 << 10; /* holds every record: the source never laps */
    zcio_ring *sp, *sc, *ip, *cp;
    CHECK_OK(zcio_ring_open_with("src", ZCIO_O_WRONLY | ZCIO_O_CREAT, &so, sizeof so, &sp));
    CHECK_OK(zcio_ring_open("src", ZCIO_O_RDONLY, 0, 0, &sc));
    CHECK_OK(zcio_ring_set_timeout(sc, TIMEOUT_MS));
    zcio_ring_options io = opts_for(ZCIO_LAYOUT_INDEX);
    CHECK_OK(zcio_ring_open_with("idx", ZCIO_O_WRONLY | ZCIO_O_CREAT, &io, sizeof io, &ip));
    CHECK_OK(zcio_ring_set_timeout(ip, TIMEOUT_MS));
    zcio_ring_options co = opts_for(ZCIO_LAYOUT_DESCRIPTORS);
    co.size = 256 << 10;
    CHECK_OK(zcio_ring_open_with("copy", ZCIO_O_WRONLY | ZCIO_O_CREAT, &co, sizeof co, &cp));
    CHECK_OK(zcio_ring_set_timeout(cp, TIMEOUT_MS));

    char lay[8], count[16];
    snprintf(count, sizeof count, "%" PRIu64, n);
    snprintf(lay, sizeof lay, "%u", ZCIO_LAYOUT_INDEX);
    pid_t ci = spawn("read-recs", "idx", lay, count, NULL);
    snprintf(lay, sizeof lay, "%u", ZCIO_LAYOUT_DESCRIPTORS);
    pid_t cc = spawn("read-recs", "copy", lay, count, NULL);
    CHECK_RC(zcio_ring_wait_consumers(ip, 1, TIMEOUT_MS), 1);
    CHECK_RC(zcio_ring_wait_consumers(cp, 1, TIMEOUT_MS), 1);

    /* Index rings take only splices. */
    void *room;
    size_t cap;
    CHECK_RC(zcio_ring_reserve(ip, 16, &room, &cap), -EOPNOTSUPP);
    CHECK_RC(zcio_ring_splice(ip, sc), -EINVAL); /* nothing peeked */

    for (uint64_t i = 0; i < n; i++) {
        if (write_rec(sp, i)) FAILF("writing source record %" PRIu64, i);
        const void *data;
        size_t len;
        CHECK_RC(zcio_ring_peek(sc, 1 << 16, &data, &len), 1);
        CHECK_RC(zcio_ring_splice(ip, sc), 0);
        CHECK_RC(zcio_ring_splice(cp, sc), 0);
        CHECK_RC(zcio_ring_splice(sc, ip), -EINVAL); /* ip holds no peek */
        CHECK_RC(zcio_ring_release(sc), 0);
    }
    zcio_ring_close(ip);
    zcio_ring_close(cp);
    CHECK_CHILD(ci, 0);
    CHECK_CHILD(cc, 0);
    zcio_ring_stat_info st;
    CHECK_RC(zcio_ring_stat("idx", &st, sizeof st), 0);
    CHECK(st.layout == ZCIO_LAYOUT_INDEX && st.entries == 64 && st.size == 0);
    zcio_ring_close(sc);
    zcio_ring_close(sp);
    return 0;
}

/* A producer killed by SIGKILL in the middle of the stream (with a reservation open):
 * the consumer reads what was committed, then -EPIPE, within its timeout. */
static int test_producer_killed(void) {
    const char *name = "killed";
    zcio_ring_options o = opts_for(ZCIO_LAYOUT_VARIABLE);
    zcio_ring *c;
    CHECK_OK(zcio_ring_open_with(name, ZCIO_O_RDONLY | ZCIO_O_CREAT, &o, sizeof o, &c));
    CHECK_OK(zcio_ring_set_timeout(c, TIMEOUT_MS));
    pid_t p = spawn("write-then-die", name, "25", NULL);
    for (uint64_t i = 0; i < 25; i++) {
        unsigned char b[1024];
        ssize_t r = zcio_ring_read(c, b, sizeof b);
        CHECK_OK(r);
        if (rec_check(b, (size_t)r, i)) FAILF("record %" PRIu64 " corrupt", i);
    }
    CHECK_CHILD(p, 128 + SIGKILL);
    unsigned char b[1024];
    CHECK_RC(zcio_ring_read(c, b, sizeof b), -EPIPE); /* the open reservation: nothing */
    zcio_ring_stat_info st;
    CHECK_RC(zcio_ring_stat(name, &st, sizeof st), 0);
    CHECK(st.producer_state == ZCIO_PRODUCER_DEAD && st.blocks == 25);
    zcio_ring_close(c);
    return 0;
}

/* Reservations misused: every call returns a code, nothing crashes, nothing is
 * published that was not committed. */
static int test_reserve_errors(void) {
    zcio_ring_options o = opts_for(ZCIO_LAYOUT_VARIABLE);
    zcio_ring *p, *c;
    CHECK_OK(zcio_ring_open_with("rerr", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &p));
    CHECK_OK(zcio_ring_open("rerr", ZCIO_O_RDONLY | ZCIO_O_NONBLOCK, 0, 0, &c));
    void *room;
    size_t cap;
    unsigned char b[64];

    CHECK_RC(zcio_ring_commit(p, 0, 0), -EINVAL); /* nothing reserved */
    CHECK_RC(zcio_ring_abort(p), -EINVAL);
    CHECK_RC(zcio_ring_reserve(NULL, 16, &room, &cap), -EINVAL);
    CHECK_RC(zcio_ring_reserve(p, 16, NULL, &cap), -EINVAL);
    CHECK_RC(zcio_ring_reserve(p, 16, &room, NULL), -EINVAL);
    CHECK_RC(zcio_ring_reserve(p, 0, &room, &cap), -EINVAL);
    CHECK_RC(zcio_ring_reserve(p, (size_t)1 << 40, &room, &cap), -EMSGSIZE);
    CHECK_RC(zcio_ring_reserve(c, 16, &room, &cap), -EBADF);
    CHECK_RC(zcio_ring_commit(NULL, 0, 0), -EINVAL);
    CHECK_RC(zcio_ring_abort(NULL), -EINVAL);
    CHECK_RC(zcio_ring_commit(c, 0, 0), -EINVAL);

    CHECK_OK(zcio_ring_reserve(p, 16, &room, &cap));
    CHECK(cap == 16 && room != NULL);
    memcpy(room, "0123456789abcdef", 16);
    CHECK_RC(zcio_ring_reserve(p, 16, &room, &cap), -EINVAL); /* one at a time */
    CHECK_RC(zcio_ring_commit(p, 17, 0), -EINVAL);            /* more than reserved */
    CHECK_RC(zcio_ring_write(p, "x", 1), -EBUSY);             /* the handle is reserved */
    CHECK_RC(zcio_ring_write_tagged(p, "x", 1, 1), -EBUSY);
    zcio_ring_stats s;
    CHECK_RC(zcio_ring_get_stats(p, &s), -EBUSY);
    CHECK_RC(zcio_ring_consumers(p, 0), -EBUSY);
    CHECK_RC(zcio_ring_read(c, b, sizeof b), -EAGAIN); /* nothing published yet */
    CHECK_RC(zcio_ring_commit(p, 10, 7), 0);           /* still open after the refusal */
    CHECK_RC(zcio_ring_commit(p, 10, 7), -EINVAL);     /* a second commit */
    CHECK_RC(zcio_ring_abort(p), -EINVAL);
    const void *data;
    size_t len;
    uint32_t tag = 0;
    CHECK_RC(zcio_ring_peek(c, sizeof b, &data, &len), 1);
    CHECK(len == 10 && memcmp(data, "0123456789", 10) == 0);
    CHECK_RC(zcio_ring_peek_tag(c, &tag), 0);
    CHECK(tag == 7);
    CHECK_RC(zcio_ring_peek_tag(c, NULL), -EINVAL);
    CHECK_RC(zcio_ring_release(c), 0);
    CHECK_RC(zcio_ring_peek_tag(c, &tag), -EINVAL);   /* nothing peeked */
    CHECK_RC(zcio_ring_peek_is_intact(c), -EINVAL);
    CHECK_RC(zcio_ring_peek_is_intact(NULL), -EINVAL);

    /* A commit of 0 bytes is an empty block; abort publishes nothing. */
    CHECK_OK(zcio_ring_reserve(p, 32, &room, &cap));
    CHECK_RC(zcio_ring_abort(p), 0);
    CHECK_RC(zcio_ring_read(c, b, sizeof b), -EAGAIN);
    /* Gathered writes and splices with bad arguments. */
    zcio_iovec bad[2] = {{"ab", 2}, {NULL, 3}};
    CHECK_RC(zcio_ring_write_gather(p, bad, 2, 0), -EINVAL);
    CHECK_RC(zcio_ring_write_gather(p, NULL, 1, 0), -EINVAL);
    CHECK_RC(zcio_ring_write_gather(NULL, bad, 1, 0), -EINVAL);
    CHECK_RC(zcio_ring_write_gather(c, bad, 1, 0), -EBADF);
    CHECK_RC(zcio_ring_write_gather(p, bad, 1, 3), 2);
    CHECK_RC(zcio_ring_splice(p, p), -EINVAL);
    CHECK_RC(zcio_ring_splice(NULL, c), -EINVAL);
    CHECK_RC(zcio_ring_splice(p, NULL), -EINVAL);
    CHECK_RC(zcio_ring_peek(c, sizeof b, &data, &len), 1);
    CHECK_RC(zcio_ring_splice(c, c), -EINVAL);
    CHECK_RC(zcio_ring_release(c), 0);
    /* Closing with a reservation open aborts it. */
    CHECK_OK(zcio_ring_reserve(p, 32, &room, &cap));
    memset(room, 1, 32);
    zcio_ring_close(p);
    CHECK_RC(zcio_ring_read(c, b, sizeof b), 0); /* the end, no block */

    zcio_ring_close(c);
    return 0;
}

/* Options, names and bounds: bad values are -EINVAL with a message, never a crash. */
static int test_options_and_info(void) {
    zcio_ring_options o;
    zcio_ring *r = NULL;
    CHECK_RC(zcio_ring_options_init(NULL, sizeof o), -EINVAL);
    CHECK_RC(zcio_ring_options_init(&o, sizeof o), 0);
    CHECK(o.layout == ZCIO_LAYOUT_CONTINUOUS && o.overflow == ZCIO_OVERFLOW_BLOCK &&
          o.size == 1 << 20 && o.mode == 0600);
    o.layout = 9;
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &r), -EINVAL);
    CHECK(strstr(zcio_last_error(), "layout") != NULL);
    o = opts_for(ZCIO_LAYOUT_SLOTTED);
    o.slot_size = 100;
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &r), -EINVAL);
    CHECK(strstr(zcio_last_error(), "slot") != NULL);
    o = opts_for(ZCIO_LAYOUT_DESCRIPTORS);
    o.entries = 3;
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &r), -EINVAL);
    o = opts_for(ZCIO_LAYOUT_VARIABLE);
    o.overflow = 0;
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &r), -EINVAL);
    o = opts_for(ZCIO_LAYOUT_VARIABLE);
    o.mode = 04600;
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &r), -EINVAL);
    o = opts_for(ZCIO_LAYOUT_VARIABLE);
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT | ZCIO_O_BLOCKS, &o,
                                 sizeof o, &r), -EINVAL);
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, NULL, 0, &r), -EINVAL);
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY, &o, sizeof o, &r), -ENOENT);
    CHECK_RC(zcio_ring_open_with(NULL, ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, &r), -EINVAL);
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, &o, sizeof o, NULL), -EINVAL);
    CHECK(r == NULL);
    /* A struct shorter than the first version is refused (docs/c.md, "The
     * ABI"), and nothing is read or written. */
    o = opts_for(ZCIO_LAYOUT_SLOTTED);
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT | ZCIO_O_EXCL, &o,
                                 offsetof(zcio_ring_options, slot_size), &r), -EINVAL);
    CHECK(strstr(zcio_last_error(), "smaller than") != NULL);
    CHECK(r == NULL);
    CHECK_RC(zcio_ring_options_init(&o, sizeof o), 0); /* the default slot size */
    o.layout = ZCIO_LAYOUT_SLOTTED;
    o.size = 64 << 10;
    CHECK_RC(zcio_ring_open_with("opt", ZCIO_O_WRONLY | ZCIO_O_CREAT | ZCIO_O_EXCL, &o, sizeof o, &r), 0);
    zcio_ring_stat_info st;
    memset(&st, 0xff, sizeof st);
    CHECK_RC(zcio_ring_stat("opt", &st, 8), -EINVAL);
    CHECK(st.layout == UINT32_MAX && st.size == UINT64_MAX); /* untouched */
    CHECK_RC(zcio_ring_stat("opt", &st, sizeof st), 0);
    CHECK(st.layout == ZCIO_LAYOUT_SLOTTED);
    CHECK(st.slot_size == 2048 && st.size == 64 << 10);
    CHECK_RC(zcio_ring_stat("opt", NULL, sizeof st), -EINVAL);
    CHECK_RC(zcio_ring_stat("no-such-ring", &st, sizeof st), -ENOENT);
    CHECK_RC(zcio_ring_stat("../x", &st, sizeof st), -EINVAL);
    CHECK_RC(zcio_ring_stat_consumers("opt", NULL, 0, 0), 0);
    CHECK_RC(zcio_ring_stat_consumers("opt", NULL, 1, sizeof(zcio_ring_consumer_info)), -EINVAL);

    /* The wait bound: per end, settable, read back. */
    CHECK_RC(zcio_ring_wait_bound(r), 10000);
    CHECK_RC(zcio_ring_set_wait_bound(r, 2500), 0);
    CHECK_RC(zcio_ring_wait_bound(r), 2500);
    CHECK_RC(zcio_ring_set_wait_bound(r, ZCIO_TIMEOUT_INFINITE), 0);
    CHECK_RC(zcio_ring_wait_bound(r), ZCIO_TIMEOUT_INFINITE);
    CHECK_RC(zcio_ring_set_wait_bound(r, 0), -EINVAL);
    CHECK_RC(zcio_ring_set_wait_bound(r, -5), -EINVAL);
    CHECK_RC(zcio_ring_set_wait_bound(NULL, 5), -EINVAL);
    CHECK_RC(zcio_ring_wait_bound(NULL), -EINVAL);
    zcio_ring *c;
    CHECK_OK(zcio_ring_open("opt", ZCIO_O_RDONLY, 0, 0, &c));
    CHECK_RC(zcio_ring_wait_bound(c), 3600000);
    CHECK_RC(zcio_ring_consumers(c, 0), -EBADF);
    CHECK_RC(zcio_ring_consumers(r, 0), 1);
    CHECK_RC(zcio_ring_consumers(NULL, 0), -EINVAL);
    zcio_ring_close(c);
    zcio_ring_close(r);

    /* Directory, path and list, like snprintf. */
    char buf[PATH_MAX], want[PATH_MAX + 32];
    CHECK_RC(zcio_ring_dir(buf, sizeof buf), strlen(work_dir));
    CHECK(strcmp(buf, work_dir) == 0);
    CHECK_RC(zcio_ring_dir(NULL, 0), strlen(work_dir));
    CHECK_RC(zcio_ring_dir(NULL, 4), -EINVAL);
    snprintf(want, sizeof want, "%s/zcio-ring.opt", work_dir);
    CHECK_RC(zcio_ring_path("opt", buf, sizeof buf), strlen(want));
    CHECK(strcmp(buf, want) == 0);
    CHECK_RC(zcio_ring_path("opt", buf, 4), strlen(want)); /* cut, NUL-terminated */
    CHECK(strlen(buf) == 3);
    CHECK_RC(zcio_ring_path(".hidden", buf, sizeof buf), -EINVAL);
    CHECK_RC(zcio_ring_path(NULL, buf, sizeof buf), -EINVAL);
    ssize_t n = zcio_ring_list(NULL, 0);
    CHECK(n >= 4);
    CHECK_RC(zcio_ring_list(buf, sizeof buf), n);
    CHECK(strstr(buf, "opt\n") != NULL);
    CHECK_RC(zcio_ring_unlink("opt"), 0);
    CHECK_RC(zcio_ring_stat("opt", &st, sizeof st), -ENOENT);
    return 0;
}

static const struct test tests[] = {
    {"layouts", test_layouts},
    {"reserve_commit", test_reserve_commit},
    {"index_splice", test_index_splice},
    {"producer_killed", test_producer_killed},
    {"reserve_errors", test_reserve_errors},
    {"options_and_info", test_options_and_info},
};

int main(int argc, char **argv) {
    if (child_or_runner(argc, argv, run_child)) return 2;
    if (make_work_dir(shm_or_tmp(), "zcio-ringtest")) return 2;
    setenv("ZCIO_RING_DIR", work_dir, 1); /* children inherit it */
    int rc = run_tests(tests, sizeof tests / sizeof *tests, argc, argv, WATCHDOG_S);
    remove_work_dir();
    return rc;
}
