/*
 * Tests of the rendezvous (zcio_rendezvous_*) and of asynchronous IPC through proxy
 * threads (zcio_proxies_*, zcio_proxy_endpoint_*, zcio_ticket_*, zcio_recv_handle_*) in
 * the zcio C library, across real processes.
 *
 *   test_rendezvous            run every test
 *   test_rendezvous NAME...    run the named tests
 *
 * As in test_zcio.c: each test runs in a fork of the runner under a watchdog alarm;
 * peers are this program re-executed with --child ROLE ... (their own watchdog too);
 * sockets live in a fresh directory removed at the end. A child that fails to start
 * fails the test. Never asserts on timing: a timeout test asserts what a wait that
 * nobody can satisfy returns.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <zcio.h>

#define WATCHDOG_S 120
#define CHILD_WAIT_S 90
#define TIMEOUT_MS 30000

#include "harness.h"

/* ------------------------------------------------------------- utilities */

static zcio_envelope env(uint64_t label, size_t nwords, const uint64_t *words) {
    zcio_envelope m;
    memset(&m, 0, sizeof m);
    m.label = label;
    m.nwords = nwords;
    for (size_t i = 0; i < nwords; i++) m.words[i] = words[i];
    for (size_t i = 0; i < ZCIO_ENVELOPE_MAX_FDS; i++) m.fds[i] = -1;
    return m;
}

static zcio_envelope env2(uint64_t label, uint64_t a, uint64_t b) {
    uint64_t w[2] = {a, b};
    return env(label, 2, w);
}

/* Listen at `name` in the work directory with `cfg` (NULL: defaults). */
static int listen_at(const char *name, const zcio_rendezvous_config *cfg, char *sock, size_t n,
                     zcio_rendezvous_listener **l) {
    path_in_work(sock, n, "%s", name);
    return zcio_rendezvous_listen(sock, cfg, NULL, l);
}

/* Open descriptors of this process. */
static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own */
}

/* Block until a byte comes on `fd` (or it closes). */
static void wait_byte(int fd) {
    char c;
    while (read(fd, &c, 1) < 0 && errno == EINTR) {
    }
}

/* The endpoint's counters, once they show at least `delivered` and `failed` (a
 * proxy counts a message just after its outcome is known, so they may lag a
 * completed ticket or an answered call a little): looked at every millisecond, for
 * at most TIMEOUT_MS. */
static int settled_stats(zcio_proxy_endpoint *pe, uint64_t delivered, uint64_t failed,
                         zcio_proxy_endpoint_stats *es) {
    for (int i = 0; i < TIMEOUT_MS; i++) {
        int rc = zcio_proxy_endpoint_get_stats(pe, es, sizeof *es);
        if (rc < 0) return rc;
        if (es->delivered >= delivered && es->failed >= failed) return 0;
        sleep_ms(1);
    }
    return 0; /* the caller's checks say what is missing */
}

/* ---------------------------------------------------------------- children */

/* caller SOCK COUNT TAG: connect, make COUNT calls [i, 2i] with label TAG, expect
 * [3i] with label TAG + 1 each time; then hang up. */
static int role_caller(char **a) {
    int count = atoi(a[1]);
    uint64_t tag = strtoull(a[2], NULL, 10);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_connect(a[0], NULL, &ep));
    zcio_peer_cred pc;
    CHECK_OK(zcio_rendezvous_peer(ep, &pc));
    CHECK(pc.uid == geteuid());
    for (int i = 0; i < count; i++) {
        zcio_envelope m = env2(tag, (uint64_t)i, 2 * (uint64_t)i);
        /* The request and the answer in one struct. */
        CHECK_OK(zcio_rendezvous_call(ep, &m, i % 2 ? TIMEOUT_MS : -1, &m));
        CHECK(m.label == tag + 1 && m.nwords == 1 && m.words[0] == 3 * (uint64_t)i);
        CHECK(m.nfds == 0);
    }
    zcio_rendezvous_stats s;
    CHECK_OK(zcio_rendezvous_get_stats(ep, &s, sizeof s));
    CHECK(s.sent_messages == (uint64_t)count && s.received_messages == (uint64_t)count);
    CHECK(s.sent_bytes == 24 * (uint64_t)count && s.peers == 1);
    zcio_rendezvous_close(ep);
    return 0;
}

/* fd-peer SOCK: receive a memfd, read its text through it, answer with its length;
 * then send the read end of a pipe whose write end we filled, and keep our copy. */
static int role_fd_peer(char **a) {
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_connect(a[0], NULL, &ep));
    zcio_envelope m;
    CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
    CHECK(m.label == 7 && m.nfds == 1 && m.fds[0] >= 0);
    CHECK(fcntl(m.fds[0], F_GETFD) & FD_CLOEXEC);
    char buf[64] = {0};
    ssize_t n = pread(m.fds[0], buf, sizeof buf - 1, 0);
    CHECK(n > 0 && strcmp(buf, "through a memfd") == 0);
    close(m.fds[0]);
    zcio_envelope r = env(8, 1, (uint64_t[]){(uint64_t)n});
    int p[2];
    CHECK(pipe(p) == 0);
    const char *text = "through a pipe";
    CHECK(write(p[1], text, strlen(text)) == (ssize_t)strlen(text));
    close(p[1]);
    r.fds[0] = p[0];
    r.nfds = 1;
    CHECK_OK(zcio_rendezvous_send(ep, &r, TIMEOUT_MS));
    /* Ours stays ours. */
    CHECK(fcntl(p[0], F_GETFD) >= 0);
    close(p[0]);
    /* Wait for the runner to hang up. */
    CHECK_RC(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m), -EPIPE);
    zcio_rendezvous_close(ep);
    return 0;
}

/* idle SOCK GO_FD: connect, then wait for a byte on GO_FD (not receiving on the
 * rendezvous meanwhile), then receive one message (label 99) and hang up. */
static int role_idle(char **a) {
    int go = atoi(a[1]);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_connect(a[0], NULL, &ep));
    wait_byte(go);
    zcio_envelope m;
    CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
    CHECK(m.label == 99 && m.nwords == 0);
    zcio_rendezvous_close(ep);
    return 0;
}

/* hang SOCK GO_FD: connect, send one message, then block on GO_FD (to be killed). */
static int role_hang(char **a) {
    int go = atoi(a[1]);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_connect(a[0], NULL, &ep));
    zcio_envelope m = env2(1, 2, 3);
    CHECK_OK(zcio_rendezvous_send(ep, &m, TIMEOUT_MS));
    wait_byte(go);
    zcio_rendezvous_close(ep);
    return 0;
}

/* sink SOCK COUNT: a plain synchronous partner of a proxy endpoint. Receive COUNT
 * messages labelled 0..COUNT-1 (in order), then a call (label 1000) answered with the
 * count; then send three messages labelled 100, 101, 102 and hang up. */
static int role_sink(char **a) {
    uint64_t count = strtoull(a[1], NULL, 10);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_connect(a[0], NULL, &ep));
    zcio_envelope m;
    for (uint64_t i = 0; i < count; i++) {
        CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
        if (m.label != i || m.nwords != 1 || m.words[0] != i * i)
            FAILF("message %" PRIu64 ": label %" PRIu64 " (%zu words), out of order", i,
                  m.label, m.nwords);
    }
    CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
    CHECK(m.label == 1000);
    zcio_envelope r = env(1001, 1, &count);
    CHECK_OK(zcio_rendezvous_send(ep, &r, TIMEOUT_MS));
    for (uint64_t l = 100; l < 103; l++) {
        zcio_envelope u = env(l, 0, NULL);
        CHECK_OK(zcio_rendezvous_send(ep, &u, TIMEOUT_MS));
    }
    zcio_rendezvous_close(ep);
    return 0;
}

/* stall SOCK GO_FD: connect, receive one message, then block on GO_FD. */
static int role_stall(char **a) {
    int go = atoi(a[1]);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_connect(a[0], NULL, &ep));
    zcio_envelope m;
    CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
    wait_byte(go);
    zcio_rendezvous_close(ep);
    return 0;
}

/* echo SOCK COUNT GO_FD: connect, answer COUNT messages (label + 1, the same words),
 * then wait for a byte on GO_FD (not receiving meanwhile) and hang up. */
static int role_echo(char **a) {
    int count = atoi(a[1]), go = atoi(a[2]);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_connect(a[0], NULL, &ep));
    for (int i = 0; i < count; i++) {
        zcio_envelope m;
        CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
        m.label++;
        CHECK_OK(zcio_rendezvous_send(ep, &m, TIMEOUT_MS));
    }
    wait_byte(go);
    zcio_rendezvous_close(ep);
    return 0;
}

/* refused SOCK: connecting must fail (the listener's access list leaves us out). */
static int role_refused(char **a) {
    zcio_rendezvous *ep = NULL;
    int rc = zcio_rendezvous_connect(a[0], NULL, &ep);
    if (rc >= 0) FAILF("connected although the access list leaves this uid and gid out");
    CHECK(ep == NULL);
    return 0;
}

static int run_child(const char *role, char **a, int n) {
    if (strcmp(role, "caller") == 0 && n == 3) return role_caller(a);
    if (strcmp(role, "fd-peer") == 0 && n == 1) return role_fd_peer(a);
    if (strcmp(role, "idle") == 0 && n == 2) return role_idle(a);
    if (strcmp(role, "hang") == 0 && n == 2) return role_hang(a);
    if (strcmp(role, "sink") == 0 && n == 2) return role_sink(a);
    if (strcmp(role, "stall") == 0 && n == 2) return role_stall(a);
    if (strcmp(role, "echo") == 0 && n == 3) return role_echo(a);
    if (strcmp(role, "refused") == 0 && n == 1) return role_refused(a);
    fprintf(stderr, "unknown child role %s (%d arguments)\n", role, n);
    return 2;
}

/* A pipe whose read end a child inherits (its number as an argument) and whose
 * write end the runner keeps, close-on-exec. */
static int go_pipe(int p[2], char *num, size_t n) {
    if (pipe(p) != 0) return -1;
    if (fcntl(p[1], F_SETFD, FD_CLOEXEC) != 0) return -1;
    snprintf(num, n, "%d", p[0]);
    return 0;
}

/* ------------------------------------------------------------------- tests */

/* A caller in another process: calls answered by recv + reply_and_recv over one
 * endpoint; the partner's credentials; the counters; -EPIPE once it is gone. */
static int test_call_round_trip(void) {
    char sock[PATH_MAX];
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("call.sock", NULL, sock, sizeof sock, &l));
    CHECK(strcmp(zcio_rendezvous_listener_path(l), sock) == 0);
    pid_t p = spawn("caller", sock, "200", "5", NULL);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    zcio_peer_cred pc;
    CHECK_OK(zcio_rendezvous_peer(ep, &pc));
    CHECK(pc.pid == p && pc.uid == geteuid() && pc.gid == getegid());
    zcio_rendezvous *eps[1] = {ep};
    zcio_envelope m;
    CHECK_RC(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m), 0);
    for (int i = 0; i < 200; i++) {
        CHECK(m.label == 5 && m.nwords == 2 && m.words[0] == (uint64_t)i);
        CHECK(m.words[1] == 2 * (uint64_t)i);
        zcio_envelope r = env(6, 1, (uint64_t[]){m.words[0] + m.words[1]});
        if (i == 199) {
            CHECK_OK(zcio_rendezvous_send(ep, &r, -1));
        } else {
            /* The reply and the next request in one struct. */
            m = r;
            CHECK_RC(zcio_rendezvous_reply_and_recv(ep, &m, eps, 1, i % 2 ? -1 : TIMEOUT_MS, &m),
                     0);
        }
    }
    CHECK_CHILD(p, 0);
    CHECK_RC(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m), -EPIPE);
    CHECK_RC(zcio_rendezvous_send(ep, &m, TIMEOUT_MS), -EPIPE);
    zcio_rendezvous_stats s;
    CHECK_OK(zcio_rendezvous_get_stats(ep, &s, sizeof s));
    CHECK(s.received_messages == 200 && s.sent_messages == 200 && s.disconnected >= 1);
    /* A size below the struct's first version is refused, and nothing is written
     * (docs/c.md, "The ABI"). */
    uint64_t two[3] = {0, 0, 77};
    CHECK_RC(zcio_rendezvous_get_stats(ep, (zcio_rendezvous_stats *)two, 2 * sizeof(uint64_t)),
             -EINVAL);
    CHECK(two[0] == 0 && two[1] == 0 && two[2] == 77);
    zcio_rendezvous_stats ls;
    CHECK_OK(zcio_rendezvous_listener_get_stats(l, &ls, sizeof ls));
    CHECK(ls.accepted == 1 && ls.peers == 1);
    zcio_rendezvous_close(ep);
    CHECK_OK(zcio_rendezvous_listener_get_stats(l, &ls, sizeof ls));
    CHECK(ls.peers == 0);
    zcio_rendezvous_listener_close(l);
    /* The socket file is gone with the listener. */
    CHECK(access(sock, F_OK) != 0);
    return 0;
}

/* A server over three callers: recv_any says which one each request came from;
 * reply_and_recv answers it and takes the next request from any of them; -EPIPE
 * once all three are gone. */
static int test_recv_any_three(void) {
    char sock[PATH_MAX];
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("any.sock", NULL, sock, sizeof sock, &l));
    enum { N = 3, CALLS = 100 };
    pid_t pids[N];
    zcio_rendezvous *eps[N];
    const char *tags[N] = {"10", "20", "30"};
    for (int k = 0; k < N; k++) {
        pids[k] = spawn("caller", sock, "100", tags[k], NULL);
        CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &eps[k]));
    }
    /* Which tag each accepted endpoint speaks: learnt from its peer's pid. */
    uint64_t tag_of[N];
    for (int k = 0; k < N; k++) {
        zcio_peer_cred pc;
        CHECK_OK(zcio_rendezvous_peer(eps[k], &pc));
        tag_of[k] = 0;
        for (int j = 0; j < N; j++)
            if (pc.pid == pids[j]) tag_of[k] = strtoull(tags[j], NULL, 10);
        CHECK(tag_of[k] != 0);
    }
    int served[N] = {0};
    zcio_envelope m;
    int i = zcio_rendezvous_recv_any(eps, N, TIMEOUT_MS, &m);
    for (;;) {
        if (i == -EPIPE) break;
        CHECK(i >= 0 && i < N);
        if (m.label != tag_of[i])
            FAILF("recv_any said endpoint %d (tag %" PRIu64 ") but the message has label %" PRIu64,
                  i, tag_of[i], m.label);
        CHECK(m.words[0] == (uint64_t)served[i]);
        served[i]++;
        zcio_envelope r = env(m.label + 1, 1, (uint64_t[]){m.words[0] + m.words[1]});
        i = zcio_rendezvous_reply_and_recv(eps[i], &r, eps, N, TIMEOUT_MS, &m);
    }
    for (int k = 0; k < N; k++) {
        CHECK(served[k] == CALLS);
        CHECK_CHILD(pids[k], 0);
    }
    CHECK_RC(zcio_rendezvous_recv_any(eps, N, 0, &m), -EPIPE);
    for (int k = 0; k < N; k++) zcio_rendezvous_close(eps[k]);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* Descriptors both ways: a memfd to the child (it reads the text through it), the
 * read end of a pipe back (we read through it); each sender keeps its own. */
static int test_pass_descriptors(void) {
    char sock[PATH_MAX];
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("fds.sock", NULL, sock, sizeof sock, &l));
    pid_t p = spawn("fd-peer", sock, NULL);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    int mfd = memfd_create("zcio-test", MFD_CLOEXEC);
    CHECK(mfd >= 0);
    const char *text = "through a memfd";
    CHECK(write(mfd, text, strlen(text)) == (ssize_t)strlen(text));
    zcio_envelope m = env(7, 0, NULL);
    m.fds[0] = mfd;
    m.nfds = 1;
    CHECK_OK(zcio_rendezvous_call(ep, &m, TIMEOUT_MS, &m));
    CHECK(m.label == 8 && m.nwords == 1 && m.words[0] == strlen(text));
    CHECK(fcntl(mfd, F_GETFD) >= 0); /* still ours */
    close(mfd);
    CHECK(m.nfds == 1 && m.fds[0] >= 0);
    for (size_t k = 1; k < ZCIO_ENVELOPE_MAX_FDS; k++) CHECK(m.fds[k] == -1);
    char buf[64] = {0};
    ssize_t n = read(m.fds[0], buf, sizeof buf - 1);
    CHECK(n > 0 && strcmp(buf, "through a pipe") == 0);
    CHECK(read(m.fds[0], buf, sizeof buf) == 0); /* the child closed its write end */
    close(m.fds[0]);
    zcio_rendezvous_stats s;
    CHECK_OK(zcio_rendezvous_get_stats(ep, &s, sizeof s));
    CHECK(s.descriptors == 2);
    /* A message that cannot be sent: too many words or descriptors, a closed one. */
    m = env(1, 0, NULL);
    m.nwords = ZCIO_ENVELOPE_WORDS + 1;
    CHECK_RC(zcio_rendezvous_send(ep, &m, TIMEOUT_MS), -EMSGSIZE);
    m.nwords = 0;
    m.nfds = ZCIO_ENVELOPE_MAX_FDS + 1;
    CHECK_RC(zcio_rendezvous_send(ep, &m, TIMEOUT_MS), -EMSGSIZE);
    m.nfds = 1;
    m.fds[0] = mfd; /* closed above */
    CHECK_RC(zcio_rendezvous_send(ep, &m, TIMEOUT_MS), -EBADF);
    m.fds[0] = -1;
    CHECK_RC(zcio_rendezvous_send(ep, &m, TIMEOUT_MS), -EBADF);
    zcio_rendezvous_close(ep);
    CHECK_CHILD(p, 0);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* Waits nobody can satisfy end as the timeout says: -ETIMEDOUT for a bounded
 * wait, -EAGAIN for none, and the configured bound for the default. */
static int test_timeouts(void) {
    char sock[PATH_MAX], go[16];
    zcio_rendezvous_config cfg;
    zcio_rendezvous_config_init(&cfg);
    CHECK(cfg.send_timeout_ms == 10000 && cfg.recv_timeout_ms == 3600000);
    CHECK(cfg.accept_timeout_ms == 3600000);
    cfg.recv_timeout_ms = 20;
    cfg.send_timeout_ms = 20;
    cfg.accept_timeout_ms = 20;
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("to.sock", &cfg, sock, sizeof sock, &l));
    zcio_rendezvous *ep;
    /* Nobody connects. */
    CHECK_RC(zcio_rendezvous_accept(l, 0, &ep), -EAGAIN);
    CHECK_RC(zcio_rendezvous_accept(l, 20, &ep), -ETIMEDOUT);
    CHECK_RC(zcio_rendezvous_accept(l, -1, &ep), -ETIMEDOUT);
    int gp[2];
    CHECK(go_pipe(gp, go, sizeof go) == 0);
    pid_t p = spawn("idle", sock, go, NULL);
    close(gp[0]);
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    /* The child waits on the pipe: it neither sends nor receives. */
    zcio_envelope m;
    CHECK_RC(zcio_rendezvous_recv(ep, 0, &m), -EAGAIN);
    CHECK_RC(zcio_rendezvous_recv(ep, 20, &m), -ETIMEDOUT);
    CHECK_RC(zcio_rendezvous_recv(ep, -1, &m), -ETIMEDOUT); /* the listener's 20 ms */
    zcio_rendezvous *eps[1] = {ep};
    CHECK_RC(zcio_rendezvous_recv_any(eps, 1, 0, &m), -EAGAIN);
    CHECK_RC(zcio_rendezvous_recv_any(eps, 1, 20, &m), -ETIMEDOUT);
    zcio_envelope one = env2(1, 2, 3);
    CHECK_RC(zcio_rendezvous_send(ep, &one, 0), -EAGAIN);
    CHECK_RC(zcio_rendezvous_send(ep, &one, 20), -ETIMEDOUT);
    CHECK_RC(zcio_rendezvous_send(ep, &one, -1), -ETIMEDOUT);
    CHECK_RC(zcio_rendezvous_call(ep, &one, 20, &m), -ETIMEDOUT);
    zcio_rendezvous_stats s;
    CHECK_OK(zcio_rendezvous_get_stats(ep, &s, sizeof s));
    CHECK(s.timed_out >= 5 && s.sent_messages == 0 && s.received_messages == 0);
    /* Now the child receives: a send waiting without a bound gets through. */
    CHECK(write(gp[1], "g", 1) == 1);
    zcio_envelope bye = env(99, 0, NULL);
    CHECK_OK(zcio_rendezvous_send(ep, &bye, ZCIO_TIMEOUT_INFINITE));
    CHECK_CHILD(p, 0);
    close(gp[1]);
    zcio_rendezvous_close(ep);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* A partner killed with SIGKILL: the survivor's waits end with -EPIPE (within the
 * bound, never a hang), whether it receives, sends or calls. */
static int test_peer_killed(void) {
    char sock[PATH_MAX], go[16];
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("kill.sock", NULL, sock, sizeof sock, &l));
    int gp[2];
    CHECK(go_pipe(gp, go, sizeof go) == 0);
    pid_t p = spawn("hang", sock, go, NULL);
    close(gp[0]);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    zcio_envelope m;
    CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
    CHECK(m.label == 1 && m.words[1] == 3);
    CHECK(kill(p, SIGKILL) == 0);
    CHECK_CHILD(p, 128 + SIGKILL);
    CHECK_RC(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m), -EPIPE);
    zcio_envelope one = env2(1, 2, 3);
    CHECK_RC(zcio_rendezvous_send(ep, &one, TIMEOUT_MS), -EPIPE);
    CHECK_RC(zcio_rendezvous_call(ep, &one, TIMEOUT_MS, &m), -EPIPE);
    zcio_rendezvous *eps[1] = {ep};
    CHECK_RC(zcio_rendezvous_recv_any(eps, 1, TIMEOUT_MS, &m), -EPIPE);
    close(gp[1]);
    zcio_rendezvous_close(ep);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* A raw client that connects and writes `len` bytes of `data` (with `fd` attached
 * if >= 0), then hangs up. */
static int raw_client(const char *sock, int type, const void *data, size_t len, int fd) {
    int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(sock);
    if (n >= sizeof a.sun_path) {
        close(s);
        return -1;
    }
    memcpy(a.sun_path, sock, n + 1);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return 0; /* refused outright: fine */
    }
    if (len > 0 || fd >= 0) {
        struct iovec io = {.iov_base = (void *)data, .iov_len = len};
        char ctl[CMSG_SPACE(sizeof(int))];
        struct msghdr mh = {.msg_iov = &io, .msg_iovlen = 1};
        if (fd >= 0) {
            memset(ctl, 0, sizeof ctl);
            mh.msg_control = ctl;
            mh.msg_controllen = sizeof ctl;
            struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &fd, sizeof fd);
        }
        (void)sendmsg(s, &mh, MSG_NOSIGNAL);
    }
    close(s);
    return 0;
}

/* Garbage on the rendezvous socket from raw AF_UNIX clients (short, long, bad magic,
 * a descriptor attached, a stream socket, nothing at all): accept fails with a code,
 * the listener never crashes, keeps nothing it was sent, and still serves a real
 * caller afterwards. */
static int test_hostile_input(void) {
    char sock[PATH_MAX];
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("hostile.sock", NULL, sock, sizeof sock, &l));
    int before = count_fds();
    unsigned char junk[512];
    for (size_t k = 0; k < sizeof junk; k++) junk[k] = (unsigned char)(k * 37 + 11);
    unsigned char hello[32];
    memcpy(hello, "ZCIORDV1", 8); /* the right magic, the rest garbage */
    memset(hello + 8, 0xff, sizeof hello - 8);
    int pfd[2];
    CHECK(pipe2(pfd, O_CLOEXEC) == 0);
    struct {
        int type;
        const void *data;
        size_t len;
        int fd;
    } cases[] = {
        {SOCK_SEQPACKET, junk, 1, -1},          {SOCK_SEQPACKET, junk, 31, -1},
        {SOCK_SEQPACKET, junk, 32, -1},         {SOCK_SEQPACKET, junk, sizeof junk, -1},
        {SOCK_SEQPACKET, hello, sizeof hello, -1}, {SOCK_SEQPACKET, hello, sizeof hello, pfd[0]},
        {SOCK_SEQPACKET, junk, 32, pfd[1]},     {SOCK_SEQPACKET, NULL, 0, -1},
        {SOCK_STREAM, junk, 64, -1},            {SOCK_DGRAM, junk, 64, -1},
    };
    int rejected = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        CHECK(raw_client(sock, cases[c].type, cases[c].data, cases[c].len, cases[c].fd) == 0);
        if (cases[c].type != SOCK_SEQPACKET) continue; /* a socket of another type cannot connect */
        zcio_rendezvous *ep = NULL;
        int rc = zcio_rendezvous_accept(l, TIMEOUT_MS, &ep);
        if (rc >= 0) FAILF("case %zu: accepted a garbage handshake", c);
        if (rc == -ZCIO_EPANIC) FAILF("case %zu: the listener panicked: %s", c, zcio_last_error());
        CHECK(ep == NULL);
        rejected++;
    }
    close(pfd[0]);
    close(pfd[1]);
    CHECK(rejected == 8);
    /* Nothing the garbage carried stayed open here. */
    CHECK_RC(count_fds(), before);
    pid_t p = spawn("caller", sock, "3", "40", NULL);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    zcio_envelope m;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
        CHECK(m.label == 40 && m.words[0] == (uint64_t)i);
        zcio_envelope r = env(41, 1, (uint64_t[]){m.words[0] + m.words[1]});
        CHECK_OK(zcio_rendezvous_send(ep, &r, TIMEOUT_MS));
    }
    CHECK_CHILD(p, 0);
    zcio_rendezvous_close(ep);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* NULL arguments and bad configurations are -EINVAL, never a crash; the frees take
 * NULL. */
static int test_null_arguments(void) {
    char sock[PATH_MAX];
    path_in_work(sock, sizeof sock, "null.sock");
    zcio_rendezvous_listener *l = NULL;
    zcio_rendezvous *ep = NULL;
    zcio_envelope m = env(1, 0, NULL);
    zcio_rendezvous_stats s;
    zcio_peer_cred pc;
    CHECK_RC(zcio_rendezvous_listen(NULL, NULL, NULL, &l), -EINVAL);
    CHECK_RC(zcio_rendezvous_listen("", NULL, NULL, &l), -EINVAL);
    CHECK_RC(zcio_rendezvous_listen(sock, NULL, NULL, NULL), -EINVAL);
    zcio_rendezvous_config cfg;
    zcio_rendezvous_config_init(&cfg);
    cfg.recv_timeout_ms = 0;
    CHECK_RC(zcio_rendezvous_listen(sock, &cfg, NULL, &l), -EINVAL);
    zcio_access nobody = {NULL, 0, NULL, 0};
    CHECK_RC(zcio_rendezvous_listen(sock, NULL, &nobody, &l), -EINVAL);
    zcio_access dangling = {NULL, 3, NULL, 0};
    CHECK_RC(zcio_rendezvous_listen(sock, NULL, &dangling, &l), -EINVAL);
    CHECK(l == NULL);
    CHECK_RC(zcio_rendezvous_accept(NULL, 0, &ep), -EINVAL);
    CHECK(zcio_rendezvous_listener_path(NULL) == NULL);
    CHECK_RC(zcio_rendezvous_listener_get_stats(NULL, &s, sizeof s), -EINVAL);
    CHECK_RC(zcio_rendezvous_connect(NULL, NULL, &ep), -EINVAL);
    CHECK_RC(zcio_rendezvous_connect(sock, NULL, NULL), -EINVAL);
    CHECK_RC(zcio_rendezvous_connect(sock, NULL, &ep), -ENOENT); /* nobody listens */
    CHECK(ep == NULL);
    CHECK_RC(zcio_rendezvous_send(NULL, &m, 0), -EINVAL);
    CHECK_RC(zcio_rendezvous_recv(NULL, 0, &m), -EINVAL);
    CHECK_RC(zcio_rendezvous_call(NULL, &m, 0, &m), -EINVAL);
    CHECK_RC(zcio_rendezvous_recv_any(NULL, 1, 0, &m), -EINVAL);
    zcio_rendezvous *none[2] = {NULL, NULL};
    CHECK_RC(zcio_rendezvous_recv_any(none, 2, 0, &m), -EINVAL);
    CHECK_RC(zcio_rendezvous_recv_any(none, 0, 0, &m), -EINVAL);
    CHECK_RC(zcio_rendezvous_reply_and_recv(NULL, &m, none, 2, 0, &m), -EINVAL);
    CHECK_RC(zcio_rendezvous_peer(NULL, &pc), -EINVAL);
    CHECK_RC(zcio_rendezvous_get_stats(NULL, &s, sizeof s), -EINVAL);
    CHECK_RC(zcio_rendezvous_hang_up(NULL), -EINVAL);
    CHECK_RC(zcio_rendezvous_doorbell(NULL), -EINVAL);
    CHECK_RC(zcio_rendezvous_prepare_recv_sleep(NULL), -EINVAL);
    CHECK_RC(zcio_rendezvous_doorbell_rang(NULL), -EINVAL);
    uint64_t seq;
    CHECK_RC(zcio_rendezvous_send_begin(NULL, &m, &seq), -EINVAL);
    CHECK_RC(zcio_rendezvous_send_poll(NULL, 1), -EINVAL);
    CHECK_RC(zcio_rendezvous_send_cancel(NULL, 1), -EINVAL);
    zcio_rendezvous_close(NULL);
    zcio_rendezvous_listener_close(NULL);
    zcio_rendezvous_config_init(NULL);
    /* The proxy layer. */
    zcio_proxies *px = NULL;
    zcio_proxy_endpoint *pe = NULL;
    zcio_ticket *t = NULL;
    zcio_recv_handle *h = NULL;
    zcio_proxy_config pcfg;
    zcio_proxy_config_init(&pcfg);
    CHECK(pcfg.max_proxies == 64 && pcfg.quota == 4096);
    pcfg.quota = 0;
    CHECK_RC(zcio_proxies_new(&pcfg, &px), -EINVAL);
    CHECK_RC(zcio_proxies_new(NULL, NULL), -EINVAL);
    zcio_proxy_stats ps;
    CHECK_RC(zcio_proxies_get_stats(NULL, &ps, sizeof ps), -EINVAL);
    CHECK_RC(zcio_proxy_endpoint_new(NULL, NULL, &pe), -EINVAL);
    CHECK_RC(zcio_proxy_endpoint_send(NULL, &m, &t), -EINVAL);
    CHECK_RC(zcio_proxy_endpoint_call(NULL, &m, &h), -EINVAL);
    CHECK_RC(zcio_proxy_endpoint_post(NULL, &h), -EINVAL);
    CHECK_RC(zcio_proxy_endpoint_recv(NULL, 0, &m), -EINVAL);
    CHECK_RC(zcio_proxy_endpoint_set_quota(NULL, 1), -EINVAL);
    CHECK_RC(zcio_proxy_endpoint_peer(NULL, &pc), -EINVAL);
    zcio_proxy_endpoint_stats es;
    CHECK_RC(zcio_proxy_endpoint_get_stats(NULL, &es, sizeof es), -EINVAL);
    CHECK_RC(zcio_proxy_endpoint_close(NULL), -EINVAL);
    CHECK_RC(zcio_ticket_status(NULL), -EINVAL);
    CHECK_RC(zcio_ticket_wait(NULL, 0), -EINVAL);
    CHECK_RC(zcio_recv_handle_ready(NULL), -EINVAL);
    CHECK_RC(zcio_recv_handle_wait(NULL, 0, &m), -EINVAL);
    CHECK(px == NULL && pe == NULL && t == NULL && h == NULL);
    zcio_proxy_endpoint_free(NULL);
    zcio_ticket_free(NULL);
    zcio_recv_handle_free(NULL);
    zcio_proxies_free(NULL);
    zcio_proxy_config_init(NULL);
    return 0;
}

/* Asynchronous sends through proxy threads to a plain synchronous partner: many
 * queued at once, each ticket delivered, in order; an asynchronous call; posted and
 * plain receives; the counters. */
static int test_proxy_many_sends(void) {
    char sock[PATH_MAX];
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("proxy.sock", NULL, sock, sizeof sock, &l));
    enum { N = 500 };
    pid_t p = spawn("sink", sock, "500", NULL);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    zcio_proxy_config pcfg;
    zcio_proxy_config_init(&pcfg);
    pcfg.max_proxies = 4;
    zcio_proxies *px;
    CHECK_OK(zcio_proxies_new(&pcfg, &px));
    zcio_proxy_endpoint *pe;
    CHECK_OK(zcio_proxy_endpoint_new(ep, px, &pe)); /* `ep` is the proxy endpoint's now */
    zcio_peer_cred pc;
    CHECK_OK(zcio_proxy_endpoint_peer(pe, &pc));
    CHECK(pc.pid == p);
    static zcio_ticket *t[N];
    for (uint64_t i = 0; i < N; i++) {
        zcio_envelope m = env(i, 1, (uint64_t[]){i * i});
        CHECK_OK(zcio_proxy_endpoint_send(pe, &m, &t[i]));
    }
    /* Send returned at once for all of them; each ticket now completes. */
    for (int i = 0; i < N; i++) {
        CHECK_RC(zcio_ticket_wait(t[i], TIMEOUT_MS), 0);
        CHECK_RC(zcio_ticket_status(t[i]), ZCIO_TICKET_DELIVERED);
        CHECK_RC(zcio_ticket_wait(t[i], 0), 0);
        zcio_ticket_free(t[i]);
    }
    zcio_recv_handle *reply;
    zcio_envelope end = env(1000, 0, NULL);
    CHECK_OK(zcio_proxy_endpoint_call(pe, &end, &reply));
    zcio_envelope m;
    CHECK_RC(zcio_recv_handle_wait(reply, TIMEOUT_MS, &m), 0);
    CHECK(m.label == 1001 && m.nwords == 1 && m.words[0] == N);
    CHECK_RC(zcio_recv_handle_ready(reply), 1);
    CHECK_RC(zcio_recv_handle_wait(reply, 0, &m), -EINVAL); /* collected already */
    zcio_recv_handle_free(reply);
    zcio_recv_handle *h;
    CHECK_OK(zcio_proxy_endpoint_post(pe, &h));
    CHECK_RC(zcio_recv_handle_wait(h, TIMEOUT_MS, &m), 0);
    CHECK(m.label == 100 && m.nwords == 0);
    zcio_recv_handle_free(h);
    CHECK_RC(zcio_proxy_endpoint_recv(pe, TIMEOUT_MS, &m), 0);
    CHECK(m.label == 101);
    CHECK_RC(zcio_proxy_endpoint_recv(pe, -1, &m), 0);
    CHECK(m.label == 102);
    CHECK_CHILD(p, 0);
    CHECK_RC(zcio_proxy_endpoint_recv(pe, TIMEOUT_MS, &m), -EPIPE);
    zcio_proxy_endpoint_stats es;
    CHECK_OK(settled_stats(pe, N + 1, 0, &es));
    if (es.delivered != N + 1 || es.failed != 0 || es.send_queued != 0 || es.received != 4)
        FAILF("stats: delivered %" PRIu64 " failed %" PRIu64 " queued %" PRIu64
              " received %" PRIu64 ", want %d 0 0 4",
              es.delivered, es.failed, es.send_queued, es.received, N + 1);
    zcio_proxy_stats ps;
    CHECK_OK(zcio_proxies_get_stats(px, &ps, sizeof ps));
    CHECK(ps.spawned >= 1 && ps.threads <= 4);
    zcio_proxy_endpoint_free(pe);
    zcio_proxies_free(px);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* The partner of a proxy endpoint killed while messages wait: the one it took is
 * delivered, every other ticket fails with -EPIPE (none hangs), later sends are
 * refused; the quota holds; close fails what is queued. */
static int test_proxy_peer_killed(void) {
    char sock[PATH_MAX], go[16];
    zcio_rendezvous_config cfg;
    zcio_rendezvous_config_init(&cfg);
    cfg.send_timeout_ms = 60000; /* a failure is the kill's, not a timeout */
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("pkill.sock", &cfg, sock, sizeof sock, &l));
    int gp[2];
    CHECK(go_pipe(gp, go, sizeof go) == 0);
    pid_t p = spawn("stall", sock, go, NULL);
    close(gp[0]);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    zcio_proxy_endpoint *pe;
    CHECK_OK(zcio_proxy_endpoint_new(ep, NULL, &pe)); /* the library's shared pool */
    CHECK_OK(zcio_proxy_endpoint_set_quota(pe, 8));
    enum { N = 8 };
    zcio_ticket *t[N];
    for (uint64_t i = 0; i < N; i++) {
        zcio_envelope m = env(i, 0, NULL);
        CHECK_OK(zcio_proxy_endpoint_send(pe, &m, &t[i]));
    }
    /* The child takes the first and stalls. */
    CHECK_RC(zcio_ticket_wait(t[0], TIMEOUT_MS), 0);
    CHECK_RC(zcio_ticket_status(t[N - 1]), ZCIO_TICKET_PENDING);
    CHECK_RC(zcio_ticket_wait(t[N - 1], 0), -EAGAIN);
    /* The queue holds at most the quota (8): 6 or 7 wait (one is in flight or
     * about to be), so one or two more fit, then -EAGAIN. */
    zcio_envelope more = env(50, 0, NULL);
    int rc, extra = 0;
    while ((rc = zcio_proxy_endpoint_send(pe, &more, NULL)) == 0 && extra < 10) extra++;
    CHECK_RC(rc, -EAGAIN);
    CHECK(extra == 1 || extra == 2);
    CHECK(kill(p, SIGKILL) == 0);
    CHECK_CHILD(p, 128 + SIGKILL);
    for (int i = 1; i < N; i++) {
        CHECK_RC(zcio_ticket_wait(t[i], TIMEOUT_MS), -EPIPE);
        CHECK_RC(zcio_ticket_status(t[i]), -EPIPE);
    }
    CHECK_RC(zcio_ticket_status(t[0]), ZCIO_TICKET_DELIVERED);
    for (int i = 0; i < N; i++) zcio_ticket_free(t[i]);
    CHECK_RC(zcio_proxy_endpoint_send(pe, &more, NULL), -EPIPE);
    zcio_proxy_endpoint_stats es;
    CHECK_OK(settled_stats(pe, 1, (uint64_t)(N - 1 + extra), &es));
    CHECK(es.delivered == 1 && es.send_queued == 0);
    CHECK(es.failed == (uint64_t)(N - 1 + extra));
    zcio_envelope m;
    CHECK_RC(zcio_proxy_endpoint_recv(pe, TIMEOUT_MS, &m), -EPIPE);
    CHECK_OK(zcio_proxy_endpoint_close(pe));
    zcio_proxy_endpoint_free(pe);
    close(gp[1]);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* zcio_proxy_endpoint_close fails what is still queued with -EPIPE and refuses
 * new sends; the partner sees the connection end once the endpoint is freed. */
static int test_proxy_close(void) {
    char sock[PATH_MAX], go[16];
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("pclose.sock", NULL, sock, sizeof sock, &l));
    int gp[2];
    CHECK(go_pipe(gp, go, sizeof go) == 0);
    pid_t p = spawn("stall", sock, go, NULL);
    close(gp[0]);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    zcio_proxy_endpoint *pe;
    CHECK_OK(zcio_proxy_endpoint_new(ep, NULL, &pe));
    zcio_ticket *t[4];
    for (uint64_t i = 0; i < 4; i++) {
        zcio_envelope m = env(i, 0, NULL);
        CHECK_OK(zcio_proxy_endpoint_send(pe, &m, &t[i]));
    }
    CHECK_RC(zcio_ticket_wait(t[0], TIMEOUT_MS), 0);
    CHECK_OK(zcio_proxy_endpoint_close(pe));
    /* The one in flight ends too: closing hangs nothing up, but its bound (10 s)
     * or the freed endpoint's hang-up does; the queued ones fail at once. */
    for (int i = 2; i < 4; i++) CHECK_RC(zcio_ticket_wait(t[i], TIMEOUT_MS), -EPIPE);
    zcio_envelope m = env(9, 0, NULL);
    CHECK_RC(zcio_proxy_endpoint_send(pe, &m, NULL), -EPIPE);
    CHECK_RC(zcio_proxy_endpoint_recv(pe, 0, &m), -EPIPE);
    CHECK(write(gp[1], "g", 1) == 1); /* the child receives no more and hangs up */
    CHECK_CHILD(p, 0);
    int r1 = zcio_ticket_wait(t[1], TIMEOUT_MS);
    CHECK(r1 == 0 || r1 == -EPIPE); /* taken by the child's last receive, or not */
    for (int i = 0; i < 4; i++) zcio_ticket_free(t[i]);
    zcio_proxy_endpoint_free(pe);
    close(gp[1]);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* Wait until the doorbell `fd` polls readable (bounded), then take the rings;
 * returns zcio_rendezvous_doorbell_rang's answer, or -1 if nothing came. */
static int wait_bell(int epfd, zcio_rendezvous *ep) {
    struct epoll_event ev;
    int n;
    while ((n = epoll_wait(epfd, &ev, 1, TIMEOUT_MS)) < 0 && errno == EINTR) {
    }
    if (n != 1) return -1;
    return zcio_rendezvous_doorbell_rang(ep);
}

/* An endpoint driven from an epoll loop: sends in steps (send_begin, send_poll,
 * waiting on the doorbell), receives with prepare_recv_sleep; a send cancelled while
 * nobody receives is taken back; the partner's end seen through the bell. */
static int test_event_loop(void) {
    char sock[PATH_MAX], go[16];
    zcio_rendezvous_listener *l;
    CHECK_OK(listen_at("ev.sock", NULL, sock, sizeof sock, &l));
    int gp[2];
    CHECK(go_pipe(gp, go, sizeof go) == 0);
    enum { N = 50 };
    pid_t p = spawn("echo", sock, "50", go, NULL);
    close(gp[0]);
    zcio_rendezvous *ep;
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    int fd = zcio_rendezvous_doorbell(ep);
    CHECK(fd >= 0);
    CHECK_RC(zcio_rendezvous_doorbell(ep), fd); /* the same fd every time */
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    CHECK(epfd >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
    for (uint64_t i = 0; i < N; i++) {
        zcio_envelope m = env2(2 * i, i, i + 1);
        uint64_t seq;
        CHECK_OK(zcio_rendezvous_send_begin(ep, &m, &seq));
        int rc;
        while ((rc = zcio_rendezvous_send_poll(ep, seq)) == 0) CHECK_RC(wait_bell(epfd, ep), 0);
        CHECK_RC(rc, 1);
        for (;;) {
            rc = zcio_rendezvous_recv(ep, 0, &m);
            if (rc != -EAGAIN) break;
            if (zcio_rendezvous_prepare_recv_sleep(ep) == 1) CHECK_RC(wait_bell(epfd, ep), 0);
        }
        CHECK_RC(rc, 0);
        CHECK(m.label == 2 * i + 1 && m.nwords == 2 && m.words[1] == i + 1);
    }
    /* The child no longer receives: a begun send stays pending, and is taken back. */
    zcio_envelope m = env(7, 0, NULL);
    uint64_t seq;
    CHECK_OK(zcio_rendezvous_send_begin(ep, &m, &seq));
    CHECK_RC(zcio_rendezvous_send_poll(ep, seq), 0);
    CHECK_RC(zcio_rendezvous_send_cancel(ep, seq), 1);
    CHECK(write(gp[1], "g", 1) == 1);
    CHECK_CHILD(p, 0);
    /* The partner is gone: the bell hangs up, the receive says -EPIPE. */
    int rc, rounds = 0;
    while ((rc = zcio_rendezvous_recv(ep, 0, &m)) == -EAGAIN && rounds++ < 100)
        if (zcio_rendezvous_prepare_recv_sleep(ep) == 1) (void)wait_bell(epfd, ep);
    CHECK_RC(rc, -EPIPE);
    close(epfd);
    close(gp[1]);
    zcio_rendezvous_close(ep);
    zcio_rendezvous_listener_close(l);
    return 0;
}

/* struct zcio_access: a listener admitting neither our uid nor our gid refuses us
 * (accept says -EACCES and stays usable); one admitting our gid lets us in. */
static int test_access_list(void) {
    char sock[PATH_MAX];
    uint32_t other = (uint32_t)geteuid() + 1, gid = (uint32_t)getegid(), ogid = gid + 1;
    zcio_access no = {&other, 1, &ogid, 1};
    path_in_work(sock, sizeof sock, "acl.sock");
    zcio_rendezvous_listener *l;
    CHECK_OK(zcio_rendezvous_listen(sock, NULL, &no, &l));
    pid_t p = spawn("refused", sock, NULL);
    zcio_rendezvous *ep = NULL;
    CHECK_RC(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep), -EACCES);
    CHECK(ep == NULL);
    CHECK_CHILD(p, 0);
    zcio_rendezvous_listener_close(l);
    zcio_access by_group = {&other, 1, &gid, 1};
    CHECK_OK(zcio_rendezvous_listen(sock, NULL, &by_group, &l));
    p = spawn("caller", sock, "2", "50", NULL);
    CHECK_OK(zcio_rendezvous_accept(l, TIMEOUT_MS, &ep));
    zcio_envelope m;
    for (int i = 0; i < 2; i++) {
        CHECK_OK(zcio_rendezvous_recv(ep, TIMEOUT_MS, &m));
        zcio_envelope r = env(51, 1, (uint64_t[]){m.words[0] + m.words[1]});
        CHECK_OK(zcio_rendezvous_send(ep, &r, TIMEOUT_MS));
    }
    CHECK_CHILD(p, 0);
    zcio_rendezvous_close(ep);
    zcio_rendezvous_listener_close(l);
    return 0;
}

static const struct test tests[] = {
    {"call_round_trip", test_call_round_trip},
    {"recv_any_three", test_recv_any_three},
    {"pass_descriptors", test_pass_descriptors},
    {"timeouts", test_timeouts},
    {"peer_killed", test_peer_killed},
    {"event_loop", test_event_loop},
    {"hostile_input", test_hostile_input},
    {"access_list", test_access_list},
    {"null_arguments", test_null_arguments},
    {"proxy_many_sends", test_proxy_many_sends},
    {"proxy_peer_killed", test_proxy_peer_killed},
    {"proxy_close", test_proxy_close},
};

int main(int argc, char **argv) {
    if (child_or_runner(argc, argv, run_child)) return 2;
    signal(SIGPIPE, SIG_IGN);

    if (make_work_dir(shm_or_tmp(), "zcio-rdvtest")) return 2;
    int rc = run_tests(tests, sizeof tests / sizeof *tests, argc, argv, WATCHDOG_S);
    remove_work_dir();
    return rc;
}
