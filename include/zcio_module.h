/*
 * zcio_module.h: the C ABI of zcio processing modules (version 1).
 *
 * A user module is a shared object that exports one function,
 *
 *     const struct zcio_module_v1 *zcio_module_v1_entry(void);
 *
 * returning a pointer to a static table of function pointers (below). zcio loads it
 * with Registry::load(path) (dlopen), checks abi_version and struct_size, registers
 * the module under `name`, and then opens instances by name like a built-in
 * ("rot13", "rot13:shift=5"). Build a module with
 *
 *     cc -O2 -shared -fPIC -I include -o librot13.so c/modules/rot13.c
 *
 * Data path. zcio calls put() once per slice of each block, with a pointer to the
 * bytes in place (immutable pool memory: no copy on the way in). The module hands
 * output to zcio by calling emit(emit_ctx, ptr, len) any number of times during
 * put() or finish(); zcio copies each emitted range into a new pool buffer (one copy
 * on the way out) before emit returns, so ptr may point to the module's own scratch
 * memory. emit returns 0, or a negative code (e.g. -ENOMEM) that the module must
 * return from put()/finish() without emitting more.
 *
 * Rules.
 *  - The `in` bytes and emit_ctx are valid only during the call. Never write `in`.
 *  - An instance is used by one thread at a time; different instances may run on
 *    different threads at once (make global state thread-safe).
 *  - Return 0 for success or a negative errno-style code; zcio reports it with the
 *    module name. Do not call exit/abort on bad input: return -EBADMSG.
 *  - Strings are NUL-terminated UTF-8. Error and reply buffers are written with at
 *    most `len` bytes including the NUL (snprintf does this).
 *  - zcio never passes NULL for `state`, `in` (when len > 0) or `emit`; `value` is
 *    NULL for a control read.
 */
#ifndef ZCIO_MODULE_H
#define ZCIO_MODULE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. */
#define ZCIO_MODULE_ABI_VERSION 1u

/* The name of the exported entry point. */
#define ZCIO_MODULE_ENTRY_SYMBOL "zcio_module_v1_entry"

/* Receives output: copy `len` bytes at `ptr` into the stream. 0 or -errno. */
typedef int (*zcio_emit_fn)(void *emit_ctx, const uint8_t *ptr, size_t len);

struct zcio_module_v1 {
    /* ZCIO_MODULE_ABI_VERSION; zcio refuses any other value. */
    uint32_t abi_version;
    /* sizeof(struct zcio_module_v1) as the module was built (later versions may
     * append fields; zcio refuses a smaller table). */
    uint32_t struct_size;
    /* The module's name: [A-Za-z0-9_-]+, static storage. */
    const char *name;

    /* Open an instance. `args` is "key=value,..." ("" for none). On failure return
     * NULL and write a message into err (err_len bytes, NUL included). */
    void *(*open)(const char *args, char *err, size_t err_len);

    /* One piece of input. 0 or a negative code. */
    int (*put)(void *state, const uint8_t *in, size_t len, zcio_emit_fn emit, void *emit_ctx);

    /* End of stream: emit anything buffered. May be NULL (nothing to do). */
    int (*finish)(void *state, zcio_emit_fn emit, void *emit_ctx);

    /* Control read (value == NULL) or write of `key`; reply text into reply.
     * 0, or a negative code (-ENOENT: unknown key, -EINVAL: bad value). May be NULL. */
    int (*control)(void *state, const char *key, const char *value, char *reply,
                   size_t reply_len);

    /* Free the instance. Called exactly once per successful open. */
    void (*close)(void *state);
};

/* Exported by the module. */
const struct zcio_module_v1 *zcio_module_v1_entry(void);

#ifdef __cplusplus
}
#endif

#endif /* ZCIO_MODULE_H */
