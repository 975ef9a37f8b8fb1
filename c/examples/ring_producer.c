/*
 * ring_producer: write COUNT messages of MSG_SIZE bytes into the named ring NAME
 * (created with RING_SIZE bytes if it does not exist), after waiting for one
 * consumer, then close the ring (end of stream). Prints the throughput.
 *
 *   ring_consumer demo 1M 16K 65536 &      # start the reader first
 *   ring_producer demo 1M 16K 65536
 *
 * Sizes take K, M, G suffixes (binary). Each message carries its sequence
 * number in its first 8 bytes, which ring_consumer checks. --raw prints one
 * machine-readable line (for scripts/bench-c) instead of the sentence.
 *
 * Build: cc -O2 ring_producer.c $(pkg-config --cflags --libs zcio) -o ring_producer
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

static int die(const char *what, long code) {
    fprintf(stderr, "ring_producer: %s: %s (%s)\n", what, zcio_strerror((int)code),
            zcio_last_error());
    return 1;
}

int main(int argc, char **argv) {
    int raw = 0;
    if (argc > 1 && strcmp(argv[1], "--raw") == 0) {
        raw = 1;
        argv++;
        argc--;
    }
    size_t ring_size, msg, count;
    if (argc != 5 || parse_size(argv[2], &ring_size) || parse_size(argv[3], &msg) ||
        parse_size(argv[4], &count) || msg == 0) {
        fprintf(stderr, "usage: ring_producer [--raw] NAME RING_SIZE MSG_SIZE COUNT\n"
                        "  e.g. ring_producer demo 1M 16K 65536\n");
        return 2;
    }
    const char *name = argv[1];

    zcio_ring *ring;
    int rc = zcio_ring_open(name, ZCIO_O_WRONLY | ZCIO_O_CREAT, 0600, ring_size, &ring);
    if (rc < 0) return die("open", rc);
    rc = zcio_ring_wait_consumers(ring, 1, 10000);
    if (rc < 1) {
        zcio_ring_close(ring);
        fprintf(stderr, "ring_producer: no consumer attached within 10 s\n");
        return 1;
    }

    unsigned char *buf = malloc(msg);
    if (!buf) return 1;
    for (size_t i = 0; i < msg; i++) buf[i] = (unsigned char)(i * 7 + 1);

    uint64_t t0 = now_ns(), c0 = cpu_ns();
    for (uint64_t k = 0; k < count; k++) {
        if (msg >= 8) memcpy(buf, &k, 8);
        ssize_t n = zcio_ring_write(ring, buf, msg);
        if (n != (ssize_t)msg) {
            zcio_ring_close(ring);
            return die("write", n < 0 ? n : -EIO);
        }
    }
    uint64_t t1 = now_ns(), c1 = cpu_ns();
    zcio_ring_close(ring); /* end of stream for the consumers */
    free(buf);

    double bytes = (double)msg * (double)count, secs = (double)(t1 - t0) / 1e9;
    if (raw) {
        printf("role=producer bytes=%.0f msgs=%zu ns=%" PRIu64 " cpu_ns=%" PRIu64 "\n", bytes,
               count, t1 - t0, c1 - c0);
    } else {
        printf("ring_producer: wrote %zu messages of %zu bytes (%.1f MiB) in %.3f s: %.1f MiB/s, "
               "%.0f ns CPU per message\n",
               count, msg, bytes / 1048576.0, secs, secs > 0 ? bytes / 1048576.0 / secs : 0.0,
               count ? (double)(c1 - c0) / (double)count : 0.0);
    }
    return 0;
}
