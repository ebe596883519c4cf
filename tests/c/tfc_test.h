/*
 * A small test harness: TEST(name) { ... } functions register themselves;
 * CHECK* macros count passes and failures and print the failing location.
 * main() (from TFC_TEST_MAIN) runs every test and exits non-zero on failure.
 */
#ifndef TFC_TEST_H
#define TFC_TEST_H

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/tfcore.h"

typedef void (*tfc_test_fn)(void);
void tfc_test_register(const char *name, tfc_test_fn fn);
extern int tfc_test_failures, tfc_test_checks;

#define TEST(name)                                                                                     \
    static void name(void);                                                                            \
    __attribute__((constructor)) static void register_##name(void) { tfc_test_register(#name, name); } \
    static void name(void)

#define TFC_FAIL_AT(...)                                      \
    do {                                                      \
        tfc_test_failures++;                                  \
        fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                         \
        fprintf(stderr, "\n");                                \
    } while (0)

#define CHECK(cond)                            \
    do {                                       \
        tfc_test_checks++;                     \
        if (!(cond)) TFC_FAIL_AT("%s", #cond); \
    } while (0)

/* expr must return TFC_OK. */
#define CHECK_OK(expr)                                                                               \
    do {                                                                                             \
        tfc_test_checks++;                                                                           \
        tfc_status s_ = (expr);                                                                      \
        if (s_ != TFC_OK) TFC_FAIL_AT("%s -> %s: %s", #expr, tfc_status_name(s_), tfc_last_error()); \
    } while (0)

/* expr must fail with `want`, and the message must mention `fragment`. */
#define CHECK_ERR(expr, want, fragment)                                                                \
    do {                                                                                               \
        tfc_test_checks++;                                                                             \
        tfc_clear_error();                                                                             \
        tfc_status s_ = (expr);                                                                        \
        if (s_ != (want))                                                                              \
            TFC_FAIL_AT("%s -> %s, wanted %s (%s)", #expr, tfc_status_name(s_), tfc_status_name(want), \
                        tfc_last_error());                                                             \
        else if (!strstr(tfc_last_error(), (fragment)))                                                \
            TFC_FAIL_AT("%s: message '%s' lacks '%s'", #expr, tfc_last_error(), (fragment));           \
    } while (0)

#define CHECK_CLOSE(a, b, tol)                                                             \
    do {                                                                                   \
        tfc_test_checks++;                                                                 \
        double a_ = (double)(a), b_ = (double)(b);                                         \
        if (!(fabs(a_ - b_) <= (tol) * (1.0 + fabs(b_))))                                  \
            TFC_FAIL_AT("%s = %.17g, %s = %.17g (tol %g)", #a, a_, #b, b_, (double)(tol)); \
    } while (0)

/*
 * Leave the running test at once, counted as failed, and go on with the
 * next one: for a precondition a test cannot continue without (a device
 * allocation that failed), where exit() would hide every later test.
 * Outside a test it exits 1. What the test had allocated is leaked.
 */
void tfc_test_bail(void) __attribute__((noreturn));

/* argv asks only for the list of test names (`--list`), which needs no device. */
static inline int tfc_test_listing(int argc, char **argv) { return argc > 1 && !strcmp(argv[1], "--list"); }

/*
 * main: no argument runs every test; `--list` prints the names, one a line;
 * `--exact NAME` runs the test of exactly that name (exit 2 if none has it),
 * so a driver can run each test in its own process; any other argument
 * runs the tests whose names contain it.
 */
#define TFC_TEST_MAIN                                                                                                 \
    int tfc_test_failures, tfc_test_checks;                                                                           \
    static struct {                                                                                                   \
        const char *name;                                                                                             \
        tfc_test_fn fn;                                                                                               \
    } tfc_tests_[512];                                                                                                \
    static int tfc_ntests_;                                                                                           \
    static jmp_buf tfc_test_jmp_;                                                                                     \
    static int tfc_test_in_;                                                                                          \
    void tfc_test_register(const char *name, tfc_test_fn fn) {                                                        \
        if (tfc_ntests_ < 512) {                                                                                      \
            tfc_tests_[tfc_ntests_].name = name;                                                                      \
            tfc_tests_[tfc_ntests_++].fn = fn;                                                                        \
        }                                                                                                             \
    }                                                                                                                 \
    void tfc_test_bail(void) {                                                                                        \
        fflush(stdout);                                                                                               \
        if (tfc_test_in_) longjmp(tfc_test_jmp_, 1);                                                                  \
        exit(1);                                                                                                      \
    }                                                                                                                 \
    /* Runs test i; 1 if it bailed out. Its own frame, so main's locals are not clobbered by longjmp. */              \
    static int tfc_test_run_(int i) {                                                                                 \
        tfc_test_in_ = 1;                                                                                             \
        int bailed = setjmp(tfc_test_jmp_) != 0;                                                                      \
        if (!bailed) tfc_tests_[i].fn();                                                                              \
        tfc_test_in_ = 0;                                                                                             \
        return bailed;                                                                                                \
    }                                                                                                                 \
    int main(int argc, char **argv) {                                                                                 \
        int failed_tests = 0, ran = 0;                                                                                \
        const char *exact = argc > 2 && !strcmp(argv[1], "--exact") ? argv[2] : NULL;                                 \
        const char *sub = !exact && argc > 1 ? argv[1] : NULL;                                                        \
        if (tfc_test_listing(argc, argv)) {                                                                           \
            for (int i = 0; i < tfc_ntests_; i++) printf("%s\n", tfc_tests_[i].name);                                 \
            return 0;                                                                                                 \
        }                                                                                                             \
        if (argc > 1 && !strcmp(argv[1], "--exact") && !exact) {                                                      \
            fprintf(stderr, "usage: %s [--list | --exact NAME | SUBSTRING]\n", argv[0]);                              \
            return 2;                                                                                                 \
        }                                                                                                             \
        for (int i = 0; i < tfc_ntests_; i++) {                                                                       \
            if (exact ? strcmp(tfc_tests_[i].name, exact) != 0 : sub && !strstr(tfc_tests_[i].name, sub)) continue;   \
            int before = tfc_test_failures;                                                                           \
            ran++;                                                                                                    \
            if (tfc_test_run_(i) && tfc_test_failures == before) tfc_test_failures++;                                 \
            int bad = tfc_test_failures != before;                                                                    \
            failed_tests += bad;                                                                                      \
            printf("%s %s\n", bad ? "FAIL" : "ok  ", tfc_tests_[i].name);                                             \
            fflush(stdout);                                                                                           \
        }                                                                                                             \
        if (exact && !ran) {                                                                                          \
            fprintf(stderr, "%s: no test is named '%s' (--list shows them)\n", argv[0], exact);                       \
            return 2;                                                                                                 \
        }                                                                                                             \
        printf("%d checks, %d failed; %d tests, %d failed\n", tfc_test_checks, tfc_test_failures, ran, failed_tests); \
        return tfc_test_failures ? 1 : 0;                                                                             \
    }

#endif
