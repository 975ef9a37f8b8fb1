/*
 * rot13.c: an example zcio processing module in C (see include/zcio_module.h).
 *
 * Rotates ASCII letters by `shift` (default 13; "rot13:shift=1"), byte for byte, and
 * counts the bytes it has seen. Control: "bytes" (read), "shift" (read/write).
 *
 *     cc -O2 -shared -fPIC -I include -o librot13.so c/modules/rot13.c
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcio_module.h"

struct rot {
    unsigned shift;
    unsigned long long bytes;
    uint8_t buf[4096]; /* output scratch: emitted in pieces */
};

static int parse_shift(const char *s, unsigned *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 25)
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

static void *rot_open(const char *args, char *err, size_t err_len) {
    unsigned shift = 13;
    if (args[0] != '\0') {
        if (strncmp(args, "shift=", 6) != 0 || strchr(args, ',') != NULL) {
            snprintf(err, err_len, "unknown argument(s) '%s' (accepted: shift=0..25)", args);
            return NULL;
        }
        if (parse_shift(args + 6, &shift) != 0) {
            snprintf(err, err_len, "%s: expected shift=0..25", args);
            return NULL;
        }
    }
    struct rot *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    r->shift = shift;
    return r;
}

static uint8_t rotate(uint8_t c, unsigned k) {
    if (c >= 'a' && c <= 'z')
        return (uint8_t)('a' + (c - 'a' + k) % 26);
    if (c >= 'A' && c <= 'Z')
        return (uint8_t)('A' + (c - 'A' + k) % 26);
    return c;
}

static int rot_put(void *state, const uint8_t *in, size_t len, zcio_emit_fn emit,
                   void *emit_ctx) {
    struct rot *r = state;
    while (len > 0) {
        size_t n = len < sizeof r->buf ? len : sizeof r->buf;
        for (size_t i = 0; i < n; i++)
            r->buf[i] = rotate(in[i], r->shift);
        int rc = emit(emit_ctx, r->buf, n);
        if (rc != 0)
            return rc;
        r->bytes += n;
        in += n;
        len -= n;
    }
    return 0;
}

static int rot_control(void *state, const char *key, const char *value, char *reply,
                       size_t reply_len) {
    struct rot *r = state;
    if (strcmp(key, "bytes") == 0 && value == NULL) {
        snprintf(reply, reply_len, "%llu", r->bytes);
        return 0;
    }
    if (strcmp(key, "shift") == 0) {
        if (value == NULL) {
            snprintf(reply, reply_len, "%u", r->shift);
            return 0;
        }
        if (parse_shift(value, &r->shift) != 0)
            return -EINVAL;
        snprintf(reply, reply_len, "ok");
        return 0;
    }
    return -ENOENT;
}

static void rot_close(void *state) { free(state); }

static const struct zcio_module_v1 ROT13 = {
    .abi_version = ZCIO_MODULE_ABI_VERSION,
    .struct_size = sizeof(struct zcio_module_v1),
    .name = "rot13",
    .open = rot_open,
    .put = rot_put,
    .finish = NULL,
    .control = rot_control,
    .close = rot_close,
};

const struct zcio_module_v1 *zcio_module_v1_entry(void) { return &ROT13; }
