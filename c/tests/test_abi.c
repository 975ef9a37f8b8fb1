/*
 * The size rule of the C ABI (docs/c.md, "The ABI: structs grow, sizes travel"):
 * every struct the library fills or reads travels with sizeof the caller's struct.
 * These tests call the exported *_sized symbols as programs built against other
 * versions of zcio.h would:
 *  - a size below the struct's first version, or above 4096: -EINVAL, and not a
 *    byte of the caller's memory written (guard bytes around the buffer);
 *  - today's size: the struct, and not a byte past it;
 *  - a larger size (a program built against a newer header): the struct, then
 *    zeros up to that size (the fields this library does not know), and not a byte
 *    past it; a configuration that large works while its unknown tail is zero, and
 *    is -EINVAL (naming the byte) once a byte there is set;
 *  - a configuration not filled by its _init (size 0): -EINVAL saying so;
 *  - across processes: a listener and a connecting child that each pass a larger,
 *    zero-tailed configuration talk; the child's non-zero tail is refused.
 * (The prefix a smaller, older struct gets from a newer library is the same code,
 * checked with a grown struct in crates/zcio-c/src/abi.rs's unit tests: no struct
 * here has grown since the rule began.)
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>

#define WATCHDOG_S 120
#define CHILD_WAIT_S 90
#define TIMEOUT_MS 30000
#include "harness.h"

#define GUARD 0xab
#define SLACK 64   /* guard bytes past the size passed */
#define NEWER 24   /* a newer header's struct: this many bytes longer */
#define BUF (4096 + 2 * SLACK)

static unsigned char buf[BUF];

/* Every byte of buf[from..to) is `v`. */
static int all_are(size_t from, size_t to, unsigned char v) {
    for (size_t i = from; i < to; i++)
        if (buf[i] != v) {
            fprintf(stderr, "    byte %zu is 0x%02x, want 0x%02x\n", i, buf[i], v);
            return 0;
        }
    return 1;
}

#define CHECK_LAST(what)                                                              \
    do {                                                                              \
        if (!strstr(zcio_last_error(), what))                                         \
            FAILF("last error \"%s\" does not say \"%s\"", zcio_last_error(), what);   \
    } while (0)

/* A call that fills `size` bytes at `out`. */
typedef int (*fill_fn)(void *obj, void *out, size_t size);

/* The rule for a call that fills a struct of `size_now` bytes (today's and first
 * version's). Leaves buf holding the result of a `size_now + NEWER` call. */
static int check_fill(const char *what, fill_fn f, void *obj, size_t size_now) {
    fprintf(stderr, "    %s (%zu bytes)\n", what, size_now);
    size_t bad[] = {0, 8, size_now - 1, 4097, (size_t)-1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(buf, GUARD, sizeof buf);
        CHECK_RC(f(obj, buf, bad[i]), -EINVAL);
        CHECK_LAST(bad[i] < size_now ? "smaller than" : "larger than");
        CHECK(all_are(0, sizeof buf, GUARD));
    }
    memset(buf, GUARD, sizeof buf);
    CHECK_RC(f(obj, NULL, size_now), -EINVAL);
    CHECK_RC(f(obj, buf, size_now), 0);
    CHECK(all_are(size_now, sizeof buf, GUARD));
    memset(buf, GUARD, sizeof buf);
    CHECK_RC(f(obj, buf, size_now + NEWER), 0);
    CHECK(all_are(size_now, size_now + NEWER, 0));
    CHECK(all_are(size_now + NEWER, sizeof buf, GUARD));
    memset(buf, GUARD, sizeof buf);
    CHECK_RC(f(obj, buf, 4096), 0); /* the largest size there is */
    CHECK(all_are(size_now, 4096, 0));
    CHECK(all_are(4096, sizeof buf, GUARD));
    memset(buf, GUARD, sizeof buf);
    CHECK_RC(f(obj, buf, size_now + NEWER), 0);
    return 0;
}

/* ------------------------------------------------------------ the fillers */

static int f_channel_stats(void *o, void *out, size_t n) {
    return zcio_channel_get_stats_sized(o, out, n);
}
static int f_channel_config(void *o, void *out, size_t n) {
    return zcio_channel_get_config_sized(o, out, n);
}
static int f_pool_stats(void *o, void *out, size_t n) {
    return zcio_pool_get_stats_sized(o, out, n);
}
static int f_pool_config(void *o, void *out, size_t n) {
    return zcio_pool_get_config_sized(o, out, n);
}
static int f_huge_pages(void *o, void *out, size_t n) {
    return zcio_pool_get_huge_pages_sized(o, out, n);
}
static int f_ring_stats(void *o, void *out, size_t n) {
    return zcio_ring_get_stats_sized(o, out, n);
}
static int f_ring_counters(void *o, void *out, size_t n) {
    return zcio_ring_get_counters(o, out, n);
}
static int f_ring_stat(void *o, void *out, size_t n) {
    return zcio_ring_stat(o, out, n);
}
static int f_ring_options_init(void *o, void *out, size_t n) {
    (void)o;
    return zcio_ring_options_init(out, n);
}
static int f_lane_tx(void *o, void *out, size_t n) {
    return zcio_lane_sender_get_stats_sized(o, out, n);
}
static int f_lane_rx(void *o, void *out, size_t n) {
    return zcio_lane_receiver_get_stats_sized(o, out, n);
}
static int f_channel_config_init(void *o, void *out, size_t n) {
    (void)o;
    return zcio_channel_config_init_sized(out, n);
}
static int f_pool_config_init(void *o, void *out, size_t n) {
    (void)o;
    return zcio_pool_config_init_sized(out, n);
}
static int f_forward_config_init(void *o, void *out, size_t n) {
    (void)o;
    return zcio_forward_config_init_sized(out, n);
}
static int f_rendezvous_config_init(void *o, void *out, size_t n) {
    (void)o;
    return zcio_rendezvous_config_init_sized(out, n);
}
static int f_proxy_config_init(void *o, void *out, size_t n) {
    (void)o;
    return zcio_proxy_config_init_sized(out, n);
}
static int f_semantic_config_init(void *o, void *out, size_t n) {
    (void)o;
    return zcio_semantic_config_init_sized(out, n);
}
static int f_proxies_stats(void *o, void *out, size_t n) {
    return zcio_proxies_get_stats(o, out, n);
}
static int f_rendezvous_listener_stats(void *o, void *out, size_t n) {
    return zcio_rendezvous_listener_get_stats(o, out, n);
}

/* ------------------------------------------------------------ the tests */

/* The calls that fill a struct: channel, pool, ring and lane counters and
 * configurations. */
static int test_fill(void) {
    zcio_channel *a, *b;
    CHECK_OK(zcio_channel_pair(NULL, &a, &b));
    CHECK_OK(zcio_send_bytes(a, "abcd", 4, TIMEOUT_MS));
    zcio_msg *m;
    CHECK_OK(zcio_recv(b, TIMEOUT_MS, &m));
    zcio_msg_release(m);
    if (check_fill("zcio_channel_get_stats", f_channel_stats, a, sizeof(zcio_channel_stats)))
        return 1;
    zcio_channel_stats cs;
    memcpy(&cs, buf, sizeof cs);
    CHECK(cs.msgs_sent == 1 && cs.bytes_sent == 4);
    if (check_fill("zcio_channel_get_config", f_channel_config, a, sizeof(zcio_channel_config)))
        return 1;
    zcio_channel_config cc;
    memcpy(&cc, buf, sizeof cc);
    CHECK(cc.size == sizeof cc + NEWER); /* the caller's size, to pass it back */
    CHECK(cc.ring_entries == 1024 && cc.futile_wake_limit == 64);

    zcio_pool *p;
    CHECK_OK(zcio_pool_create("abi", 1 << 20, 2, &p));
    if (check_fill("zcio_pool_get_stats", f_pool_stats, p, sizeof(zcio_pool_stats))) return 1;
    zcio_pool_stats ps;
    memcpy(&ps, buf, sizeof ps);
    CHECK(ps.bytes_in_use == 0);
    if (check_fill("zcio_pool_get_config", f_pool_config, p, sizeof(zcio_pool_config))) return 1;
    zcio_pool_config pc;
    memcpy(&pc, buf, sizeof pc);
    CHECK(pc.size == sizeof pc + NEWER && pc.max_chunks == 2);
    if (check_fill("zcio_pool_get_huge_pages", f_huge_pages, p, sizeof(zcio_huge_pages)))
        return 1;
    zcio_pool_destroy(p);

    zcio_lane_sender *tx;
    zcio_lane_receiver *rx;
    CHECK_OK(zcio_lane_open(a, 8, 64, &tx));
    CHECK_OK(zcio_lane_accept(b, TIMEOUT_MS, &rx));
    CHECK_OK(zcio_lane_send_bytes(tx, "xy", 2, TIMEOUT_MS));
    if (check_fill("zcio_lane_sender_get_stats", f_lane_tx, tx, sizeof(zcio_lane_stats)))
        return 1;
    if (check_fill("zcio_lane_receiver_get_stats", f_lane_rx, rx, sizeof(zcio_lane_stats)))
        return 1;
    zcio_lane_sender_free(tx);
    zcio_lane_receiver_free(rx);
    zcio_channel_close(a);
    zcio_channel_close(b);

    zcio_ring *r;
    CHECK_OK(zcio_ring_open("abi", ZCIO_O_WRONLY | ZCIO_O_CREAT, 0600, 1 << 16, &r));
    CHECK_OK(zcio_ring_write(r, "hello", 5));
    if (check_fill("zcio_ring_get_stats", f_ring_stats, r, sizeof(zcio_ring_stats))) return 1;
    if (check_fill("zcio_ring_get_counters", f_ring_counters, r, sizeof(zcio_ring_counters)))
        return 1;
    zcio_ring_counters rc;
    memcpy(&rc, buf, sizeof rc);
    CHECK(rc.bytes == 5 && rc.producer == 1);
    if (check_fill("zcio_ring_stat", f_ring_stat, (void *)"abi", sizeof(zcio_ring_stat_info))) return 1;
    zcio_ring_close(r);
    CHECK_OK(zcio_ring_unlink("abi"));

    zcio_proxies *px;
    CHECK_OK(zcio_proxies_new(NULL, &px));
    if (check_fill("zcio_proxies_get_stats", f_proxies_stats, px, sizeof(zcio_proxy_stats)))
        return 1;
    zcio_proxies_free(px);
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "rdv.sock");
    zcio_rendezvous_listener *l;
    CHECK_OK(zcio_rendezvous_listen(sock, NULL, NULL, &l));
    if (check_fill("zcio_rendezvous_listener_get_stats", f_rendezvous_listener_stats, l,
                   sizeof(zcio_rendezvous_stats)))
        return 1;
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* Byte `at` of buf set: the configuration there is refused, naming it. */
#define CHECK_TAIL_REFUSED(call, at)                                                  \
    do {                                                                              \
        buf[at] = 1;                                                                  \
        CHECK_RC(call, -EINVAL);                                                      \
        CHECK_LAST("is not zero");                                                    \
        buf[at] = 0;                                                                  \
    } while (0)

/* A configuration never passed through its _init (size 0, or garbage). */
#define CHECK_UNINIT_REFUSED(call)                                                    \
    do {                                                                              \
        size_t _s;                                                                    \
        memcpy(&_s, buf, sizeof _s);                                                  \
        memset(buf, 0, sizeof(size_t));                                               \
        CHECK_RC(call, -EINVAL);                                                      \
        CHECK_LAST("_init");                                                          \
        memset(buf, 0x5a, sizeof(size_t));                                            \
        CHECK_RC(call, -EINVAL);                                                      \
        memcpy(buf, &_s, sizeof _s);                                                  \
    } while (0)

/* The configurations: filled by _init at a newer header's size they work, with a
 * non-zero unknown byte or without _init they are refused. */
static int test_configs(void) {
    /* channel */
    size_t n = sizeof(zcio_channel_config);
    if (check_fill("zcio_channel_config_init", f_channel_config_init, NULL, n)) return 1;
    zcio_channel_config *cc = (zcio_channel_config *)buf;
    CHECK(cc->size == n + NEWER && cc->ring_entries == 1024);
    zcio_channel *a, *b;
    CHECK_OK(zcio_channel_pair(cc, &a, &b));
    zcio_channel_close(a);
    zcio_channel_close(b);
    CHECK_TAIL_REFUSED(zcio_channel_pair(cc, &a, &b), n + NEWER - 1);
    CHECK_TAIL_REFUSED(zcio_channel_pair(cc, &a, &b), n);
    CHECK_UNINIT_REFUSED(zcio_channel_pair(cc, &a, &b));
    cc->size = n; /* exactly today's struct */
    CHECK_OK(zcio_channel_pair(cc, &a, &b));
    zcio_channel_close(a);
    zcio_channel_close(b);
    zcio_channel_config_init(cc); /* the macro: sizeof *(cc) */
    CHECK(cc->size == n);

    /* pool */
    n = sizeof(zcio_pool_config);
    if (check_fill("zcio_pool_config_init", f_pool_config_init, NULL, n)) return 1;
    zcio_pool_config *pc = (zcio_pool_config *)buf;
    pc->max_chunks = 3;
    zcio_pool *p;
    CHECK_OK(zcio_pool_create_with("abi", pc, &p));
    zcio_pool_config back;
    CHECK_OK(zcio_pool_get_config(p, &back));
    CHECK(back.size == sizeof back && back.max_chunks == 3);
    zcio_pool_destroy(p);
    CHECK_TAIL_REFUSED(zcio_pool_create_with("abi", pc, &p), n + 5);
    CHECK_UNINIT_REFUSED(zcio_pool_create_with("abi", pc, &p));

    /* forward: checked before anything runs (the upstream has ended already) */
    n = sizeof(zcio_forward_config);
    if (check_fill("zcio_forward_config_init", f_forward_config_init, NULL, n)) return 1;
    zcio_channel *src, *up, *down, *dst;
    CHECK_OK(zcio_channel_pair(NULL, &src, &up));
    CHECK_OK(zcio_channel_pair(NULL, &down, &dst));
    CHECK_TAIL_REFUSED(zcio_forward_run(up, down, NULL, (zcio_forward_config *)buf, NULL, 0),
                       n + 1);
    CHECK_UNINIT_REFUSED(zcio_forward_run(up, down, NULL, (zcio_forward_config *)buf, NULL, 0));
    zcio_channel_close(src);
    unsigned char rep[sizeof(zcio_forward_report) + NEWER];
    memset(rep, GUARD, sizeof rep);
    CHECK_RC(zcio_forward_run(up, down, NULL, (zcio_forward_config *)buf, (zcio_forward_report *)rep,
                              sizeof rep),
             0);
    CHECK(((zcio_forward_report *)rep)->end == ZCIO_FORWARD_UPSTREAM_DISCONNECTED);
    for (size_t i = sizeof(zcio_forward_report); i < sizeof rep; i++) CHECK(rep[i] == 0);
    zcio_channel_close(up);
    zcio_channel_close(down);
    zcio_channel_close(dst);

    /* rendezvous */
    n = sizeof(zcio_rendezvous_config);
    if (check_fill("zcio_rendezvous_config_init", f_rendezvous_config_init, NULL, n)) return 1;
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "rdv-cfg.sock");
    zcio_rendezvous_listener *l;
    zcio_rendezvous_config *rc = (zcio_rendezvous_config *)buf;
    CHECK_OK(zcio_rendezvous_listen(sock, rc, NULL, &l));
    zcio_rendezvous_listener_close(l);
    CHECK_TAIL_REFUSED(zcio_rendezvous_listen(sock, rc, NULL, &l), n + NEWER - 8);
    CHECK_UNINIT_REFUSED(zcio_rendezvous_listen(sock, rc, NULL, &l));

    /* proxies */
    n = sizeof(zcio_proxy_config);
    if (check_fill("zcio_proxy_config_init", f_proxy_config_init, NULL, n)) return 1;
    zcio_proxies *px;
    CHECK_OK(zcio_proxies_new((zcio_proxy_config *)buf, &px));
    zcio_proxies_free(px);
    CHECK_TAIL_REFUSED(zcio_proxies_new((zcio_proxy_config *)buf, &px), n + 2);
    CHECK_UNINIT_REFUSED(zcio_proxies_new((zcio_proxy_config *)buf, &px));

    /* semantic endpoint: refused with -EINVAL, so the channel is still ours */
    n = sizeof(zcio_semantic_config);
    if (check_fill("zcio_semantic_config_init", f_semantic_config_init, NULL, n)) return 1;
    CHECK_OK(zcio_channel_pair(NULL, &a, &b));
    zcio_semantic_endpoint *ep;
    CHECK_TAIL_REFUSED(zcio_semantic_endpoint_new(a, (zcio_semantic_config *)buf, &ep), n + 7);
    CHECK_UNINIT_REFUSED(zcio_semantic_endpoint_new(a, (zcio_semantic_config *)buf, &ep));
    zcio_channel_close(a);
    zcio_channel_close(b);

    /* ring options: the size is an argument */
    n = sizeof(zcio_ring_options);
    if (check_fill("zcio_ring_options_init", f_ring_options_init, NULL, n)) return 1;
    zcio_ring *r;
    CHECK_OK(zcio_ring_open_with("abi-opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, (zcio_ring_options *)buf,
                                 n + NEWER, &r));
    zcio_ring_close(r);
    CHECK_OK(zcio_ring_unlink("abi-opt"));
    CHECK_TAIL_REFUSED(zcio_ring_open_with("abi-opt", ZCIO_O_WRONLY | ZCIO_O_CREAT,
                                           (zcio_ring_options *)buf, n + NEWER, &r),
                       n);
    CHECK_RC(zcio_ring_open_with("abi-opt", ZCIO_O_WRONLY | ZCIO_O_CREAT, (zcio_ring_options *)buf,
                                 n - 1, &r),
             -EINVAL);
    CHECK_LAST("smaller than");
    return 0;
}

/* A child connects to `sock` with a configuration of a newer header's size: first
 * with a non-zero byte this library does not know (refused), then zero (works);
 * it sends one message. */
static int child_connect(const char *sock) {
    static unsigned char cfg[sizeof(zcio_channel_config) + 2 * NEWER];
    zcio_channel_config *c = (zcio_channel_config *)cfg;
    CHECK_OK(zcio_channel_config_init_sized(c, sizeof cfg));
    c->connect_timeout_ms = TIMEOUT_MS;
    cfg[sizeof cfg - 1] = 9;
    zcio_channel *ch;
    CHECK_RC(zcio_connect_with(sock, c, &ch), -EINVAL);
    CHECK(strstr(zcio_last_error(), "is not zero") != NULL);
    cfg[sizeof cfg - 1] = 0;
    CHECK_OK(zcio_connect_with(sock, c, &ch));
    CHECK_OK(zcio_send_bytes(ch, "newer", 5, TIMEOUT_MS));
    zcio_msg *m;
    CHECK_RC(zcio_recv(ch, TIMEOUT_MS, &m), -EPIPE); /* until the parent hangs up */
    zcio_channel_close(ch);
    return 0;
}

/* Across processes: a listener whose configuration is a newer header's size (its
 * tail zero) and a child that connects with another such configuration. */
static int test_across_processes(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "chan.sock");
    memset(buf, GUARD, sizeof buf);
    zcio_channel_config *c = (zcio_channel_config *)buf;
    CHECK_OK(zcio_channel_config_init_sized(c, sizeof *c + NEWER));
    c->recv_timeout_ms = TIMEOUT_MS;
    zcio_listener *l;
    CHECK_OK(zcio_listen_with(sock, c, &l));
    pid_t pid = spawn("connect", sock, NULL);
    CHECK(pid > 0);
    zcio_channel *ch;
    CHECK_OK(zcio_accept(l, TIMEOUT_MS, &ch));
    zcio_msg *m;
    CHECK_OK(zcio_recv(ch, TIMEOUT_MS, &m));
    char got[8] = {0};
    CHECK_RC(zcio_msg_read(m, 0, got, sizeof got), 5);
    CHECK(memcmp(got, "newer", 5) == 0);
    zcio_msg_release(m);
    zcio_channel_stats st;
    CHECK_OK(zcio_channel_get_stats(ch, &st)); /* the macro: sizeof st */
    CHECK(st.msgs_received == 1 && st.peer_pid == (uint64_t)pid);
    zcio_channel_close(ch);
    zcio_listener_close(l);
    CHECK_CHILD(pid, 0);
    return 0;
}

static int run_child(const char *role, char **a, int n) {
    if (strcmp(role, "connect") == 0 && n == 1) return child_connect(a[0]);
    fprintf(stderr, "unknown child role %s\n", role);
    return 2;
}

static const struct test tests[] = {
    {"fill", test_fill},
    {"configs", test_configs},
    {"across_processes", test_across_processes},
};

int main(int argc, char **argv) {
    if (child_or_runner(argc, argv, run_child)) return 2;
    if (make_work_dir(shm_or_tmp(), "zcio-abitest")) return 2;
    setenv("ZCIO_RING_DIR", work_dir, 1);
    int rc = run_tests(tests, sizeof tests / sizeof *tests, argc, argv, WATCHDOG_S);
    remove_work_dir();
    return rc;
}
