/* Shared by the C benchmark programs: a monotonic clock and fail-fast status checks. */
#ifndef TFC_BENCH_UTIL_H
#define TFC_BENCH_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tfcore/tfcore.h"

static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A benchmark has nothing sensible to do after a failed call: report and exit. */
static inline void ok(tfc_status s, const char *what) {
    if (s != TFC_OK) {
        fprintf(stderr, "%s: %s failed: %s (%s)\n", program_invocation_short_name, what, tfc_status_name(s),
                tfc_last_error());
        exit(1);
    }
}
#define OK(expr) ok((expr), #expr)

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
