/*
 * chan_sender: connect to the zcio channel listening at SOCKET and send COUNT
 * messages of SIZE bytes by reference: each is a buffer allocated from a pool,
 * filled in place, and handed over without a copy. The receiver's releases
 * return the buffers to the pool, so a few buffers serve the whole run.
 *
 *   chan_receiver /tmp/demo.sock &
 *   chan_sender /tmp/demo.sock 1000 1M
 *
 * Build: cc -O2 chan_sender.c $(pkg-config --cflags --libs zcio) -o chan_sender
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zcio.h>

#include "example_util.h"

/* Every message starts with this header; the payload follows. */
struct header {
    uint64_t seq;
    uint64_t len;      /* payload bytes after the header */
    uint64_t checksum; /* sum of the payload's bytes */
};

static int fail(const char *what, int code) {
    fprintf(stderr, "chan_sender: %s: %s (%s)\n", what, zcio_strerror(code), zcio_last_error());
    return 1;
}

int main(int argc, char **argv) {
    size_t count = 1000, size = 1 << 20;
    if (argc < 2 || argc > 4 || (argc > 2 && parse_size(argv[2], &count)) ||
        (argc > 3 && parse_size(argv[3], &size)) || size < sizeof(struct header)) {
        fprintf(stderr, "usage: chan_sender SOCKET [COUNT] [SIZE]   (SIZE >= 24 bytes)\n");
        return 2;
    }

    /* The receiver may still be starting: retry while nobody listens. */
    zcio_channel *ch = NULL;
    int rc;
    for (int tries = 0;; tries++) {
        rc = zcio_connect(argv[1], 5000, &ch);
        if (rc == 0) break;
        if ((rc != -ENOENT && rc != -ECONNREFUSED) || tries == 500) return fail("connect", rc);
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }

    zcio_pool *pool;
    /* 4 chunks of 4 MiB: enough for a few messages in flight at a time. */
    rc = zcio_pool_create("chan-sender", 4 << 20, 4, &pool);
    if (rc < 0) return fail("pool", rc);

    for (uint64_t i = 0; i < count; i++) {
        zcio_buf *buf;
        rc = zcio_buf_alloc(pool, size, &buf); /* waits (up to 10 s) for releases */
        if (rc < 0) return fail("alloc", rc);
        unsigned char *p = zcio_buf_data(buf);
        struct header h = {.seq = i, .len = size - sizeof h, .checksum = 0};
        for (size_t k = 0; k < h.len; k++) {
            p[sizeof h + k] = (unsigned char)(i + k);
            h.checksum += p[sizeof h + k];
        }
        memcpy(p, &h, sizeof h);
        rc = zcio_send(ch, buf, -1); /* on success the buffer is the channel's */
        if (rc < 0) {
            zcio_buf_free(buf); /* on failure it is still ours */
            return fail("send", rc);
        }
    }

    /* Wait until the receiver has released everything, then report. */
    zcio_pool_stats ps;
    for (int i = 0; i < 500; i++) {
        zcio_channel_reclaim(ch);
        zcio_pool_get_stats(pool, &ps);
        if (ps.buffers_in_use == 0) break;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    zcio_channel_stats cs;
    zcio_channel_get_stats(ch, &cs);
    printf("chan_sender: sent %" PRIu64 " messages of %zu bytes by reference; pool: %" PRIu64
           " chunks, %" PRIu64 " allocations, %" PRIu64 " buffers still held by the receiver\n",
           cs.msgs_sent, size, ps.chunks, ps.allocs, ps.buffers_in_use);
    zcio_channel_close(ch);
    zcio_pool_destroy(pool);
    return 0;
}
