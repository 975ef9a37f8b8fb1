/* What the C test suites (test_zcio.c, test_splice.c, test_semantics.c) share:
 *
 *  - the runner: each test runs in a forked child under a watchdog (alarm), so
 *    a hang or a crash fails that test only (run_tests);
 *  - the checks: FAILF, CHECK, CHECK_RC, CHECK_OK, CHECK_CHILD (each returns 1
 *    from the test on failure);
 *  - peers: this program re-executed as `--child ROLE ARGS...` (spawn,
 *    spawn_to), under their own watchdog (child_or_runner), waited for at most
 *    CHILD_WAIT_S (wait_child);
 *  - a fresh work directory for files and sockets, removed at the end
 *    (make_work_dir, path_in_work, remove_work_dir).
 *
 * A suite defines WATCHDOG_S (seconds a test or a child may run) and
 * CHILD_WAIT_S (seconds a test waits for a child) before including this. */
#ifndef ZCIO_TEST_HARNESS_H
#define ZCIO_TEST_HARNESS_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zcio.h>

#if !defined(WATCHDOG_S) || !defined(CHILD_WAIT_S)
#error "define WATCHDOG_S and CHILD_WAIT_S before including harness.h"
#endif

static char self_exe[PATH_MAX];
static char work_dir[256];

/* ---------------------------------------------------------------- checks */

#define FAILF(...)                                                                   \
    do {                                                                             \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);                          \
        fprintf(stderr, __VA_ARGS__);                                                \
        fprintf(stderr, "\n");                                                       \
        return 1;                                                                    \
    } while (0)

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) FAILF("check failed: %s (last error: %s)", #cond, zcio_last_error()); \
    } while (0)

/* `expr` must return exactly `want` (a count or a code). */
#define CHECK_RC(expr, want)                                                         \
    do {                                                                             \
        long long _r = (long long)(expr), _w = (long long)(want);                    \
        if (_r != _w)                                                                \
            FAILF("%s = %lld (%s), want %lld (%s); last error: %s", #expr, _r,       \
                  zcio_strerror((int)_r), _w, zcio_strerror((int)_w),                \
                  zcio_last_error());                                                \
    } while (0)

/* `expr` must not return a negative code. */
#define CHECK_OK(expr)                                                               \
    do {                                                                             \
        long long _r = (long long)(expr);                                            \
        if (_r < 0)                                                                  \
            FAILF("%s = %lld (%s); last error: %s", #expr, _r, zcio_strerror((int)_r), \
                  zcio_last_error());                                                \
    } while (0)

/* ------------------------------------------------------------- utilities */

/* `out` = the work directory / the name printf makes of `fmt`. */
__attribute__((format(printf, 3, 4)))
static inline void path_in_work(char *out, size_t n, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if ((size_t)snprintf(out, n, "%s/%s", work_dir, name) >= n) abort(); /* our own names: short */
}

static inline void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
}

/* ---------------------------------------------------------------- children */

/* Start this program as `--child role args...` (the arguments end with NULL)
 * with its standard output on `out_fd` (-1: inherited); returns the pid (> 0). */
static inline pid_t spawn_to(int out_fd, const char *role, ...) {
    char *argv[16];
    int n = 0;
    argv[n++] = self_exe;
    argv[n++] = "--child";
    argv[n++] = (char *)role;
    va_list ap;
    va_start(ap, role);
    char *a;
    while (n < 15 && (a = va_arg(ap, char *)) != NULL) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0) _exit(127);
        execv(self_exe, argv);
        _exit(127);
    }
    return pid;
}

/* spawn(role, args..., NULL): spawn_to with the standard output inherited. */
#define spawn(...) spawn_to(-1, __VA_ARGS__)

/* Wait for `pid` at most CHILD_WAIT_S; returns its exit code, 128 + signal,
 * or -1 if it had to be killed. */
static inline int wait_child(pid_t pid) {
    if (pid <= 0) return -1;
    for (int i = 0; i < CHILD_WAIT_S * 1000; i++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0 && errno != EINTR) return -1;
        sleep_ms(1);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fprintf(stderr, "    child %d did not finish within %d s: killed\n", (int)pid, CHILD_WAIT_S);
    return -1;
}

/* A child that failed to start (exit 127) fails the test like any other. */
#define CHECK_CHILD(pid, want)                                                        \
    do {                                                                              \
        int _st = wait_child(pid);                                                    \
        if (_st != (want))                                                            \
            FAILF("child %s exited with %d, want %d%s", #pid, _st, (want),            \
                  _st == 127 ? " (it failed to start)" : "");                         \
    } while (0)

/* The start of main: find this program (spawn re-executes it) and, if it was
 * started as `--child ROLE ARGS...`, run that role under a WATCHDOG_S alarm and
 * exit with its status: run_child(ROLE, ARGS, number of ARGS). Returns 0 in the
 * runner, -1 (after saying why) if this program cannot be found. */
static inline int child_or_runner(int argc, char **argv,
                                  int (*run_child)(const char *role, char **a, int n)) {
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) {
        perror("readlink /proc/self/exe");
        return -1;
    }
    self_exe[n] = 0;
    if (argc >= 3 && strcmp(argv[1], "--child") == 0) {
        alarm(WATCHDOG_S);
        exit(run_child(argv[2], argv + 3, argc - 3)); /* as a return from main */
    }
    return 0;
}

/* ------------------------------------------------------------ work directory */

/* /dev/shm if it can be written, else /tmp. */
static inline const char *shm_or_tmp(void) {
    return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

/* Create the work directory `base`/`prefix`-XXXXXX; 0, or -1 after saying why. */
static inline int make_work_dir(const char *base, const char *prefix) {
    snprintf(work_dir, sizeof work_dir, "%s/%s-XXXXXX", base, prefix);
    if (!mkdtemp(work_dir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* Remove the work directory and the files in it. */
static inline void remove_work_dir(void) {
    DIR *d = opendir(work_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[PATH_MAX * 2];
        snprintf(p, sizeof p, "%s/%s", work_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(work_dir);
}

/* ------------------------------------------------------------------ runner */

struct test {
    const char *name;
    int (*fn)(void);
};

/* Run `tests` (only those named in argv[1..], if any), each in a child with
 * a `watchdog_s` alarm; print one line per test and a summary. Returns the
 * process exit status: 0 when every test that ran passed (and one ran). */
static int run_tests(const struct test *tests, size_t n, int argc, char **argv, int watchdog_s) {
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1) {
            int wanted = 0;
            for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], tests[i].name) == 0;
            if (!wanted) continue;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            alarm((unsigned)watchdog_s);
            exit(tests[i].fn()); /* exit, not _exit: leak checkers run at exit */
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            printf("ok   %s\n", tests[i].name);
            passed++;
        } else {
            if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
                printf("FAIL %s (watchdog: still running after %d s)\n", tests[i].name, watchdog_s);
            else if (WIFSIGNALED(st))
                printf("FAIL %s (killed by signal %d)\n", tests[i].name, WTERMSIG(st));
            else
                printf("FAIL %s\n", tests[i].name);
            failed++;
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : (passed ? 0 : 1);
}

#endif
