/*
 * A small test harness: TEST(name) { ... } functions register themselves;
 * CHECK* macros count passes and failures and print the failing location.
 * main() (from TFC_TEST_MAIN) runs every test and exits non-zero on failure.
 */
#ifndef TFC_TEST_H
#define TFC_TEST_H

#include <math.h>
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

#define TFC_TEST_MAIN                                                                                          \
    int tfc_test_failures, tfc_test_checks;                                                                    \
    static struct {                                                                                            \
        const char *name;                                                                                      \
        tfc_test_fn fn;                                                                                        \
    } tfc_tests_[512];                                                                                         \
    static int tfc_ntests_;                                                                                    \
    void tfc_test_register(const char *name, tfc_test_fn fn) {                                                 \
        if (tfc_ntests_ < 512) {                                                                               \
            tfc_tests_[tfc_ntests_].name = name;                                                               \
            tfc_tests_[tfc_ntests_++].fn = fn;                                                                 \
        }                                                                                                      \
    }                                                                                                          \
    int main(int argc, char **argv) {                                                                          \
        int failed_tests = 0;                                                                                  \
        for (int i = 0; i < tfc_ntests_; i++) {                                                                \
            if (argc > 1 && !strstr(tfc_tests_[i].name, argv[1])) continue;                                    \
            int before = tfc_test_failures;                                                                    \
            tfc_tests_[i].fn();                                                                                \
            int bad = tfc_test_failures != before;                                                             \
            failed_tests += bad;                                                                               \
            printf("%s %s\n", bad ? "FAIL" : "ok  ", tfc_tests_[i].name);                                      \
        }                                                                                                      \
        printf("%d checks, %d failed; %d tests, %d failed\n", tfc_test_checks, tfc_test_failures, tfc_ntests_, \
               failed_tests);                                                                                  \
        return tfc_test_failures ? 1 : 0;                                                                      \
    }

#endif
