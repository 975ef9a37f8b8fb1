/* The C test suites' runner: each test runs in a forked child under a
 * watchdog (alarm), so a hang or a crash fails that test only. Shared by
 * test_zcio.c and test_splice.c. */
#ifndef ZCIO_TEST_HARNESS_H
#define ZCIO_TEST_HARNESS_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
