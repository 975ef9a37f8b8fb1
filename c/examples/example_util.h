/* Small helpers shared by the C examples: sizes with K/M/G suffixes,
 * a monotonic clock and this process's CPU time. */
#ifndef ZCIO_EXAMPLE_UTIL_H
#define ZCIO_EXAMPLE_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

/* "64", "16K", "1MiB", "2GB" → bytes (binary units); -1 if malformed. */
static inline int parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    int shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return -1;
    }
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    if (*end != '\0' || v > (SIZE_MAX >> shift)) return -1;
    *out = (size_t)v << shift;
    return 0;
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* User + system CPU time of this process in nanoseconds. */
static inline uint64_t cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

#endif
