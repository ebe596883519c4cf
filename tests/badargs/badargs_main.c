/*
 * Runner of the generated bad-argument cases: each case runs in a forked
 * child, so a crash, a sanitizer report (ASan/UBSan exit non-zero) or a leak
 * found by LeakSanitizer at the child's exit fails that one case and the run
 * goes on. The parent never calls the library (an OpenMP pool made before
 * fork() would not survive it); the fixture files are written by a first
 * child. Prints every failing case with what the child wrote to stderr,
 * then "N passed, N failed" (scripts/run-tests.sh reads the counts).
 *
 * Usage: test_badargs [--oom] [SUBSTRING]   runs only the cases of functions
 * whose name contains SUBSTRING. With --oom, the valid call of every
 * function returning a status runs again and again, the n-th allocation
 * libtfcore makes failing in run n (oom_inject.c), until a run makes fewer
 * than n allocations (or OOM_MAX_RUNS): each must end in TFC_OK or a clean
 * TFC_ERR_OOM naming the function, without a crash or a leak.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "badargs.h"
#include "fixtures.h"

/* Run f in a child with stdout discarded; collect its stderr into buf. Returns the wait status. */
static int run_child(int (*f)(void), char *buf, size_t cap) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        if (!freopen("/dev/null", "w", stdout)) _exit(4);
        alarm(120);
        int r = f();
        fx_cleanup();
        fflush(NULL);
        exit(r);
    }
    close(fd[1]);
    size_t n = 0;
    for (;;) {
        char tmp[4096];
        ssize_t k = read(fd[0], tmp, sizeof tmp);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        size_t take = (size_t)k < cap - 1 - n ? (size_t)k : cap - 1 - n;
        memcpy(buf + n, tmp, take);
        n += take;
    }
    buf[n] = 0;
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return st;
}

static int setup(void) { return fx_setup_files() ? 0 : 1; }

#define OOM_MAX_RUNS 300
#define NOT_REACHED 10

static const badargs_case *oom_case;
static long oom_n;

/* Child of the OOM mode: 0 pass, 1 fail, NOT_REACHED when the call made fewer than oom_n allocations. */
static int oom_run(void) {
    fx_oom_set(oom_n);
    int r = oom_case->run();
    return r ? 1 : fx_oom_injected() ? 0 : NOT_REACHED;
}

static const char *describe(int st, char *why, size_t cap) {
    if (st == -1)
        snprintf(why, cap, "could not run");
    else if (WIFSIGNALED(st))
        snprintf(why, cap, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(why, cap, "exit status %d", WEXITSTATUS(st));
    return why;
}

static char outbuf[1 << 16];

int main(int argc, char **argv) {
    int oom = argc > 1 && strcmp(argv[1], "--oom") == 0;
    const char *filter = argc > 1 + oom ? argv[1 + oom] : NULL;
    char dir[] = "/tmp/tfc_badargs_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    fx_set_dir(dir);
    int st = run_child(setup, outbuf, sizeof outbuf);
    if (st != 0) {
        fprintf(stderr, "fixture setup failed:\n%s", outbuf);
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int passed = 0, failed = 0, ran = 0;
    long runs = 0;
    char why[64];
    for (int i = 0; i < badargs_n_cases; i++) {
        const badargs_case *c = &badargs_cases[i];
        if (filter && !strstr(c->fn, filter)) continue;
        if (!oom) {
            ran++;
            st = run_child(c->run, outbuf, sizeof outbuf);
            if (st == 0) {
                passed++;
                continue;
            }
            failed++;
            printf("FAIL %s: %s: %s\n%s", c->fn, c->what, describe(st, why, sizeof why), outbuf);
            continue;
        }
        if (!c->valid) continue;
        ran++;
        /* One verdict per function: its first failing allocation is reported. */
        int bad = 0;
        oom_case = c;
        for (oom_n = 1; oom_n <= OOM_MAX_RUNS; oom_n++) {
            st = run_child(oom_run, outbuf, sizeof outbuf);
            runs++;
            if (WIFEXITED(st) && WEXITSTATUS(st) == NOT_REACHED) break;
            if (st == 0) continue;
            bad = 1;
            printf("FAIL %s: allocation %ld fails: %s\n%s", c->fn, oom_n, describe(st, why, sizeof why), outbuf);
            break;
        }
        if (oom_n > OOM_MAX_RUNS)
            printf("note: %s makes more than %d allocations; the rest are not tried\n", c->fn, OOM_MAX_RUNS);
        bad ? failed++ : passed++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (oom)
        printf("%d functions' valid calls with each allocation failing in turn: %ld runs in %.1f s\n", ran, runs, secs);
    else
        printf("%d functions, %d of %d cases in %.1f s\n", badargs_n_functions, ran, badargs_n_cases, secs);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
