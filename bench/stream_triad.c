/*
 * Measured memory bandwidth: the STREAM triad a[i] = b[i] + s·c[i] on
 * doubles, over three arrays that together are at least 4× the last-level
 * cache (so every repetition streams from DRAM, not from a cache warmed by
 * the one before). The roof a bandwidth-bound kernel — batch-1 decode — is
 * measured against (bench/decode_roofline.py).
 *
 * Bytes are counted as STREAM counts them: 3 arrays × 8 bytes per element
 * (read b, read c, write a; the write-allocate read of a is not counted, so
 * the figure is comparable to published STREAM numbers). Pages are first
 * touched by the same static OpenMP schedule the triad uses, so on a NUMA
 * machine each thread streams its own node's memory. Best of several
 * repetitions: on a shared machine interference only ever slows a run down.
 *
 * Also a read-only pass (s += b[i] + c[i], two arrays read, nothing
 * written): a decode step only reads its weights, and a core with no write
 * stream (and no write-allocate reads) gets more bandwidth than the triad
 * shows, so "gbs_read" is the roof for a read-only kernel.
 *
 *   stream_triad [threads [mib_total]]  ->  one JSON line: gbs (triad, best),
 *   gbs_median, gbs_read (read-only, best), the array size, the LLC size it
 *   was sized against.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define REPS 10

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The largest data/unified cache size sysfs reports for cpu0, in bytes (0 when unreadable). */
static long llc_bytes(void) {
    long best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char unit = 0;
            long v = 0;
            if (sscanf(buf, "%ld%c", &v, &unit) >= 1) {
                if (unit == 'K') v <<= 10;
                if (unit == 'M') v <<= 20;
                if (v > best) best = v;
            }
        }
        fclose(f);
    }
    return best;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_num_procs();
    if (threads < 1) threads = 1;
    long llc = llc_bytes();
    /* three arrays together ≥ 4× the LLC, at least 384 MiB when the LLC is unknown or small */
    long total = 4 * llc > (384L << 20) ? 4 * llc : (384L << 20);
    if (argc > 2 && atol(argv[2]) > 0) total = atol(argv[2]) << 20;
    long n = total / 3 / (long)sizeof(double);
    double *a = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
    double *b = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
    double *c = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
    if (!a || !b || !c) {
        fprintf(stderr, "stream_triad: cannot allocate 3 x %ld doubles\n", n);
        return 1;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    const double s = 3.0;
    double rates[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        rates[r] = 3.0 * (double)n * sizeof(double) / (now() - t0) / 1e9;
    }
    /* every a[i] must be 7: a check that also keeps the loops from being dropped */
    long bad = 0;
    for (long i = 0; i < n; i += 4096) bad += a[i] != 7.0;
    if (bad) {
        fprintf(stderr, "stream_triad: %ld wrong results\n", bad);
        return 1;
    }
    double reads[REPS], sum = 0;
    for (int r = 0; r < REPS; r++) {
        double t0 = now(), part = 0;
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(+ : part)
        for (long i = 0; i < n; i++) part += b[i] + c[i];
        reads[r] = 2.0 * (double)n * sizeof(double) / (now() - t0) / 1e9;
        sum += part;
    }
    if (sum != 3.0 * (double)n * REPS) {
        fprintf(stderr, "stream_triad: read pass summed %g, not %g\n", sum, 3.0 * (double)n * REPS);
        return 1;
    }
    qsort(reads, REPS, sizeof reads[0], cmp);
    qsort(rates, REPS, sizeof rates[0], cmp);
    printf("{\"bench\":\"stream_triad\",\"threads\":%d,\"gbs\":%.2f,\"gbs_median\":%.2f,\"gbs_read\":%.2f,"
           "\"array_mib\":%.1f,\"total_mib\":%.1f,\"llc_mib\":%.1f,\"reps\":%d}\n",
           threads, rates[REPS - 1], rates[REPS / 2], reads[REPS - 1], (double)n * sizeof(double) / (1 << 20),
           3.0 * (double)n * sizeof(double) / (1 << 20), (double)llc / (1 << 20), REPS);
    free(a);
    free(b);
    free(c);
    return 0;
}
