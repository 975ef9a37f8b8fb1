/*
 * chan_receiver: listen on SOCKET, accept one zcio channel, and receive messages
 * until the sender closes it (or COUNT messages arrived). Each message is read in
 * place, slice by slice, in the sender's own pages; releasing it returns the
 * buffer to the sender's pool.
 *
 *   chan_receiver /tmp/demo.sock &
 *   chan_sender /tmp/demo.sock 1000 1M
 *
 * The volatile rule in practice: the sender can still write a pool buffer, so the
 * header is copied out (zcio_msg_read) and validated as a copy, and the payload is
 * summed reading each byte once.
 *
 * Build: cc -O2 chan_receiver.c $(pkg-config --cflags --libs zcio) -o chan_receiver
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zcio.h>

struct header {
    uint64_t seq;
    uint64_t len;
    uint64_t checksum;
};

static int fail(const char *what, int code) {
    fprintf(stderr, "chan_receiver: %s: %s (%s)\n", what, zcio_strerror(code), zcio_last_error());
    return 1;
}

/* Sum of the bytes from offset `from` on, reading each byte once through a
 * volatile pointer, slice by slice, in place. */
static uint64_t sum_from(const zcio_msg *msg, size_t from) {
    zcio_slice slices[64];
    ssize_t n = zcio_msg_slices(msg, slices, 64);
    uint64_t sum = 0;
    for (ssize_t i = 0; i < n; i++) {
        const volatile unsigned char *p = slices[i].data;
        size_t len = slices[i].len, k = 0;
        if (from >= len) {
            from -= len;
            continue;
        }
        for (k = from; k < len; k++) sum += p[k];
        from = 0;
    }
    return sum;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: chan_receiver SOCKET [COUNT]\n");
        return 2;
    }
    unsigned long long limit = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;

    zcio_listener *l;
    int rc = zcio_listen(argv[1], &l);
    if (rc < 0) return fail("listen", rc);
    zcio_channel *ch;
    rc = zcio_accept(l, 30000, &ch);
    zcio_listener_close(l); /* one channel is all we want */
    if (rc < 0) return fail("accept", rc);

    uint64_t msgs = 0, bytes = 0, volatile_msgs = 0;
    for (;;) {
        zcio_msg *msg;
        rc = zcio_recv(ch, 30000, &msg);
        if (rc == -EPIPE) break; /* the sender closed (or died): all received */
        if (rc < 0) return fail("recv", rc);

        struct header h; /* a private copy: it cannot change after we check it */
        size_t len = zcio_msg_len(msg);
        if (zcio_msg_read(msg, 0, &h, sizeof h) != (ssize_t)sizeof h || h.len != len - sizeof h ||
            h.seq != msgs) {
            fprintf(stderr, "chan_receiver: message %" PRIu64 " has a bad header\n", msgs);
            return 1;
        }
        uint64_t sum = sum_from(msg, sizeof h);
        if (sum != h.checksum) {
            fprintf(stderr, "chan_receiver: message %" PRIu64 ": checksum mismatch\n", msgs);
            return 1;
        }
        volatile_msgs += zcio_msg_is_volatile(msg) == 1;
        msgs++;
        bytes += len;
        zcio_msg_release(msg); /* the deallocation notice goes back to the sender */
        if (limit && msgs == limit) break;
    }
    printf("chan_receiver: received %" PRIu64 " messages, %.1f MiB, checksums verified "
           "(%" PRIu64 " volatile)\n",
           msgs, (double)bytes / 1048576.0, volatile_msgs);
    zcio_channel_close(ch);
    return 0;
}
