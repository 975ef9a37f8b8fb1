// The harness of the C++ tests (test_zcio_cpp.cpp, test_bridge_cpp.cpp): checks that
// throw, peers forked under a watchdog and waited for with a bound, and the runner that
// forks each test under a watchdog in a fresh ring directory (ZCIO_RING_DIR).
#pragma once

#include <zcio.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>

namespace {

constexpr unsigned watchdog_s = 120; // a test (or a peer) that runs longer has hung
constexpr int child_wait_s = 100;    // how long a test waits for a peer to exit

std::string work_dir;

struct failure {
    std::string what;
};

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond))                                                                         \
            throw failure{std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #cond}; \
    } while (0)

/// `expr` must throw zcio::error of kind `k`.
#define CHECK_THROWS_KIND(expr, k)                                                          \
    do {                                                                                     \
        bool thrown_ = false;                                                                \
        try {                                                                                \
            (void)(expr);                                                                    \
        } catch (const zcio::error &e_) {                                                    \
            thrown_ = true;                                                                  \
            if (e_.kind() != (k))                                                            \
                throw failure{std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                              #expr " threw " + zcio::to_string(e_.kind()) + ": " + e_.what()}; \
        }                                                                                    \
        CHECK(thrown_);                                                                      \
    } while (0)

/// Run `fn`: 0 if it returned normally, 1 on a failed check or an exception, printed on
/// stderr after `prefix`.
int run_reporting(const std::function<void()> &fn, const char *prefix) {
    try {
        fn();
        return 0;
    } catch (const failure &f) {
        fprintf(stderr, "%s%s\n", prefix, f.what.c_str());
    } catch (const std::exception &e) {
        fprintf(stderr, "%sexception: %s\n", prefix, e.what());
    }
    return 1;
}

/// Fork a peer running `fn` under the watchdog, its stdout on `out_fd` (-1: inherited);
/// it exits 0 if fn returns normally, 1 on a failed check or an exception (printed). It
/// never runs the destructors of the parent's objects (_exit).
pid_t spawn(int out_fd, const std::function<void()> &fn) {
    fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) throw failure{"fork failed"};
    if (pid > 0) return pid;
    alarm(watchdog_s);
    if (out_fd >= 0) dup2(out_fd, 1);
    int rc = run_reporting(fn, "    peer: ");
    fflush(nullptr);
    _exit(rc);
}
[[maybe_unused]] pid_t spawn(const std::function<void()> &fn) { return spawn(-1, fn); }

/// Wait for `pid` at most child_wait_s (then kill it); its exit status, 128+signal if
/// killed. Waits on the child's pidfd, which becomes readable when it exits.
int wait_peer(pid_t pid) {
    int pfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pfd >= 0) {
        struct pollfd p = {pfd, POLLIN, 0};
        int n = poll(&p, 1, child_wait_s * 1000);
        close(pfd);
        if (n <= 0) kill(pid, SIGKILL);
    } else {
        alarm(child_wait_s); // no pidfd (an old kernel, valgrind): the watchdog bounds waitpid
    }
    int st = 0;
    pid_t r = waitpid(pid, &st, 0);
    if (pfd < 0) alarm(watchdog_s);
    if (r != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/// A peer that must have exited 0.
[[maybe_unused]] void check_peer(pid_t pid) {
    int rc = wait_peer(pid);
    if (rc != 0) throw failure{"peer exited with " + std::to_string(rc)};
}

struct test {
    const char *name;
    void (*fn)();
};

/// Run one test in a forked child under the watchdog: 0 if it passed.
int run(const test &t) {
    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(watchdog_s);
        int rc = run_reporting(t.fn, "    ");
        fflush(nullptr);
        // exit, not _exit: destructors of statics run and LeakSanitizer looks.
        exit(rc);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "    killed by signal %d%s\n", WTERMSIG(st),
                WTERMSIG(st) == SIGALRM ? " (the watchdog: it hung)" : "");
        return 1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/// main of a test program: the named tests (none: every test) in a fresh ring directory.
template <std::size_t N> int run_tests(const char *prog, int argc, char **argv, const test (&tests)[N]) {
    signal(SIGPIPE, SIG_IGN);
    std::string t = std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : "/tmp/") + prog + ".XXXXXX";
    if (!mkdtemp(t.data())) {
        perror("mkdtemp");
        return 1;
    }
    work_dir = t;
    setenv("ZCIO_RING_DIR", work_dir.c_str(), 1);
    int failed = 0, ran = 0;
    for (const auto &tc : tests) {
        bool want = argc < 2;
        for (int i = 1; i < argc; i++) want |= std::strcmp(argv[i], tc.name) == 0;
        if (!want) continue;
        ran++;
        fprintf(stderr, "test %s ...\n", tc.name);
        int rc = run(tc);
        fprintf(stderr, "%s %s\n", rc == 0 ? "ok  " : "FAIL", tc.name);
        failed += rc != 0;
    }
    std::string rm = "rm -rf '" + work_dir + "'";
    if (std::system(rm.c_str()) != 0) fprintf(stderr, "could not remove %s\n", work_dir.c_str());
    fprintf(stderr, "%s: %d passed, %d failed\n", prog, ran - failed, failed);
    return failed ? 1 : 0;
}

} // namespace
