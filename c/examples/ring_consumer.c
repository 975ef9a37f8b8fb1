/*
 * ring_consumer: read COUNT messages of MSG_SIZE bytes from the named ring NAME
 * (created with RING_SIZE bytes if it does not exist), check their sequence
 * numbers, wait for the end of the stream, remove the ring, and print the
 * throughput (from the first byte received to the last).
 *
 *   ring_consumer demo 1M 16K 65536 &
 *   ring_producer demo 1M 16K 65536
 *
 * --peek reads in place (zcio_ring_peek / zcio_ring_release) instead of copying
 * (zcio_ring_read). --raw prints one machine-readable line (for scripts/bench-c).
 *
 * Build: cc -O2 ring_consumer.c $(pkg-config --cflags --libs zcio) -o ring_consumer
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <zcio.h>

#include "example_util.h"

static int fail(zcio_ring *ring, const char *what, long code) {
    fprintf(stderr, "ring_consumer: %s: %s (%s)\n", what, zcio_strerror((int)code),
            zcio_last_error());
    zcio_ring_close(ring);
    return 1;
}

/* `data` holds `n` bytes of the stream at offset `off`: if a message starts
 * there, its sequence number must be off / msg. The word is copied out before
 * it is compared (the volatile rule: ring bytes may change under us). */
static int check(const void *data, size_t n, uint64_t off, size_t msg) {
    if (msg < 8 || n < 8 || off % msg != 0) return 0;
    uint64_t seq;
    memcpy(&seq, data, 8);
    if (seq != off / msg) {
        fprintf(stderr, "ring_consumer: message %" PRIu64 " carries sequence number %" PRIu64 "\n",
                off / msg, seq);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int raw = 0, peek = 0;
    while (argc > 1 && strncmp(argv[1], "--", 2) == 0) {
        if (strcmp(argv[1], "--raw") == 0) raw = 1;
        else if (strcmp(argv[1], "--peek") == 0) peek = 1;
        else break;
        argv++;
        argc--;
    }
    size_t ring_size, msg, count;
    if (argc != 5 || parse_size(argv[2], &ring_size) || parse_size(argv[3], &msg) ||
        parse_size(argv[4], &count) || msg == 0) {
        fprintf(stderr, "usage: ring_consumer [--raw] [--peek] NAME RING_SIZE MSG_SIZE COUNT\n"
                        "  e.g. ring_consumer demo 1M 16K 65536\n");
        return 2;
    }
    const char *name = argv[1];

    zcio_ring *ring;
    int rc = zcio_ring_open(name, ZCIO_O_RDONLY | ZCIO_O_CREAT, 0600, ring_size, &ring);
    if (rc < 0) {
        fprintf(stderr, "ring_consumer: open: %s (%s)\n", zcio_strerror(rc), zcio_last_error());
        return 1;
    }
    unsigned char *buf = malloc(msg);
    if (!buf) return 1;

    const uint64_t total = (uint64_t)msg * count;
    uint64_t got = 0, first = 0, reads = 0, t0 = 0, c0 = 0, t1 = 0, c1 = 0;
    while (got < total) {
        const void *data = buf;
        ssize_t n;
        if (peek) {
            size_t len;
            int r = zcio_ring_peek(ring, msg, &data, &len);
            n = r == 1 ? (ssize_t)len : r;
        } else {
            n = zcio_ring_read(ring, buf, msg);
        }
        if (n < 0) return fail(ring, peek ? "peek" : "read", n);
        if (n == 0) {
            fprintf(stderr, "ring_consumer: end of stream after %" PRIu64 " of %" PRIu64 " bytes\n",
                    got, total);
            zcio_ring_close(ring);
            return 1;
        }
        if (reads++ == 0) { /* the clock starts when the first data is here */
            t0 = now_ns();
            c0 = cpu_ns();
            first = (uint64_t)n;
        }
        if (check(data, (size_t)n, got, msg)) {
            zcio_ring_close(ring);
            return 1;
        }
        if (peek && (rc = zcio_ring_release(ring)) < 0) return fail(ring, "release", rc);
        got += (uint64_t)n;
    }
    t1 = now_ns();
    c1 = cpu_ns();
    /* The producer closes after its last message: the next read is the end. */
    zcio_ring_set_timeout(ring, 10000);
    ssize_t end = zcio_ring_read(ring, buf, msg);
    if (end != 0) return fail(ring, "expected the end of the stream", end < 0 ? end : -EPROTO);
    zcio_ring_close(ring);
    zcio_ring_unlink(name);
    free(buf);

    /* Bytes that arrived after the clock started, over the time they took. */
    double secs = (double)(t1 - t0) / 1e9, timed = (double)(got - first);
    if (raw) {
        printf("role=consumer bytes=%" PRIu64 " timed_bytes=%" PRIu64 " msgs=%zu reads=%" PRIu64
               " ns=%" PRIu64 " cpu_ns=%" PRIu64 "\n",
               got, got - first, count, reads, t1 - t0, c1 - c0);
    } else {
        printf("ring_consumer: read %zu messages of %zu bytes (%.1f MiB) by %s in %.3f s: "
               "%.1f MiB/s, %.0f ns CPU per message\n",
               count, msg, (double)got / 1048576.0, peek ? "peek" : "copy", secs,
               secs > 0 ? timed / 1048576.0 / secs : 0.0,
               count ? (double)(c1 - c0) / (double)count : 0.0);
    }
    return 0;
}
