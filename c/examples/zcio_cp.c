/*
 * zcio_cp.c: copy SRC to DST with a zcio association, through processing modules.
 *
 *   zcio_cp [--load LIB.so]... SRC DST [MODULE[:ARGS]]...
 *
 * SRC and DST are endpoint specs: a file path, "-" (stdin/stdout), fd:N,
 * tcp:HOST:PORT, tcp-listen:HOST:PORT, udp:HOST:PORT, unix:PATH, ring:NAME.
 * MODULEs are stacked in data order (crc32c, zstd:level=3, unzstd, count, ...);
 * --load adds a user module from a shared object (it runs in this process: load
 * only code you trust). Examples:
 *
 *   zcio_cp big.iso copy.iso                      # copy_file_range in the kernel
 *   zcio_cp big.iso tcp:127.0.0.1:9000            # sendfile
 *   zcio_cp log.txt log.txt.zst crc32c zstd:level=3
 *   zcio_cp --load ./librot13.so secret.txt - rot13
 *
 * Moves the data in 4 MiB increments (a progress line on stderr per increment when
 * stderr is a terminal), then prints a summary: bytes, time, rate, mover, module
 * counters. Exit status 0, or 1 with the reason on stderr.
 *
 *   cc -O2 zcio_cp.c $(pkg-config --cflags --libs zcio) -o zcio_cp
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zcio.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void human(double bytes, char *out, size_t n) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, n, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

static int die(const char *what, int rc) {
    fprintf(stderr, "zcio_cp: %s: %s (%s)\n", what, zcio_strerror(rc), zcio_last_error());
    return 1;
}

int main(int argc, char **argv) {
    int i = 1;
    /* Writing to a reader that went away is an error (EPIPE), not a signal. */
    signal(SIGPIPE, SIG_IGN);
    for (; i + 1 < argc && strcmp(argv[i], "--load") == 0; i += 2) {
        char name[64];
        ssize_t n = zcio_module_load(argv[i + 1], name, sizeof name);
        if (n < 0) return die(argv[i + 1], (int)n);
        fprintf(stderr, "zcio_cp: loaded module '%s' from %s\n", name, argv[i + 1]);
    }
    if (argc - i < 2 || strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
        fprintf(stderr, "usage: zcio_cp [--load LIB.so]... SRC DST [MODULE[:ARGS]]...\n");
        return argc - i < 2 ? 2 : 0;
    }
    const char *src = argv[i], *dst = argv[i + 1];

    zcio_assoc *a;
    int rc = zcio_splice_specs(src, dst, &a);
    if (rc < 0) return die("open", rc);
    for (int m = i + 2; m < argc; m++) {
        rc = zcio_assoc_push(a, argv[m]);
        if (rc < 0) {
            zcio_assoc_close(a, NULL);
            return die(argv[m], rc);
        }
    }

    int tty = isatty(STDERR_FILENO) && strcmp(dst, "-") != 0;
    double t0 = now_s();
    struct zcio_completion c = {0};
    do {
        rc = zcio_assoc_run(a, ZCIO_INCREMENT_DEFAULT, &c);
        if (rc < 0 || c.error < 0) {
            zcio_assoc_close(a, NULL);
            return die("copy", rc < 0 ? rc : c.error);
        }
        if (tty) {
            struct zcio_assoc_status st;
            char b[32];
            zcio_assoc_get_status(a, &st);
            human((double)st.moved, b, sizeof b);
            fprintf(stderr, "\r%s moved", b);
        }
    } while (!c.eof);
    double dt = now_s() - t0;

    char stats[1024] = "";
    zcio_assoc_module_stats(a, stats, sizeof stats);
    struct zcio_assoc_status st;
    zcio_assoc_close(a, &st);
    char b[32], r[32];
    human((double)st.moved, b, sizeof b);
    human(dt > 0 ? (double)st.moved / dt : 0, r, sizeof r);
    fprintf(stderr, "%s%s -> %s: %s (%" PRIu64 " bytes) in %.3f s, %s/s, mover %s\n",
            tty ? "\r" : "", src, dst, b, st.moved, dt, r, zcio_mover_name(st.mover));
    if (st.fell_back > 0)
        fprintf(stderr, "  (the kernel refused %d faster mover(s): %s)\n", st.fell_back,
                zcio_strerror(st.fell_back_errno));
    if (*stats) fprintf(stderr, "%s", stats);
    return 0;
}
