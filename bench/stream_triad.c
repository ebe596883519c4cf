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
 * touched by the same split of the index range the passes use, so on a NUMA
 * machine each thread streams its own node's memory. Best of several
 * repetitions: on a shared machine interference only ever slows a run down.
 *
 * Also a read-only pass (s += b[i] + c[i], two arrays read, nothing
 * written): a decode step only reads its weights, and a core with no write
 * stream (and no write-allocate reads) gets more bandwidth than the triad
 * shows, so "gbs_read" is the roof for a read-only kernel.
 *
 * Each rate is also given per CPU-second (bytes over each thread's own CPU
 * time, summed over threads, as bench/fma_peak.c does): on a machine shared
 * with other processes, wall time counts the slices this process waited,
 * which a tokens-per-CPU-second decode figure does not.
 *
 *   stream_triad [threads [mib_total]]  ->  one JSON line: gbs (triad, best),
 *   gbs_median, gbs_read (read-only, best), gbs_cpu and gbs_read_cpu (the
 *   same per CPU-second), the array size, the LLC size it was sized against.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef double v4 __attribute__((vector_size(32)));

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

static double thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* This thread's share [lo, hi) of n: the contiguous blocks of schedule(static), as the first touch made them. */
static void span(long n, long *lo, long *hi) {
    long t = omp_get_thread_num(), nt = omp_get_num_threads(), q = n / nt, r = n % nt;
    *lo = t * q + (t < r ? t : r);
    *hi = *lo + q + (t < r);
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
#pragma omp parallel num_threads(threads)
    {
        long lo, hi;
        span(n, &lo, &hi);
        for (long i = lo; i < hi; i++) {
            a[i] = 0.0;
            b[i] = 1.0;
            c[i] = 2.0;
        }
    }
    const double s = 3.0;
    double rates[REPS], cpu_rates[REPS], reads[REPS], cpu_reads[REPS], sum = 0;
    for (int r = 0; r < REPS; r++) {
        double t0 = now(), cpu_rate = 0;
#pragma omp parallel num_threads(threads) reduction(+ : cpu_rate)
        {
            long lo, hi;
            span(n, &lo, &hi);
            double c0 = thread_cpu();
            for (long i = lo; i < hi; i++) a[i] = b[i] + s * c[i];
            cpu_rate += 3.0 * (double)(hi - lo) * sizeof(double) / (thread_cpu() - c0 + 1e-9) / 1e9;
        }
        rates[r] = 3.0 * (double)n * sizeof(double) / (now() - t0) / 1e9;
        cpu_rates[r] = cpu_rate;
    }
    /* every a[i] must be 7: a check that also keeps the loops from being dropped */
    long bad = 0;
    for (long i = 0; i < n; i += 4096) bad += a[i] != 7.0;
    if (bad) {
        fprintf(stderr, "stream_triad: %ld wrong results\n", bad);
        return 1;
    }
    for (int r = 0; r < REPS; r++) {
        double t0 = now(), cpu_rate = 0, part = 0;
#pragma omp parallel num_threads(threads) reduction(+ : cpu_rate, part)
        {
            long lo, hi;
            span(n, &lo, &hi);
            double c0 = thread_cpu(), p = 0;
            /* four independent vector sums: one chain of adds would bound the pass by add latency, not memory */
            v4 acc[4] = {{0}};
            long i = lo;
            for (; i + 16 <= hi; i += 16)
                for (int u = 0; u < 4; u++) {
                    v4 x, y;
                    memcpy(&x, b + i + 4 * u, sizeof x);
                    memcpy(&y, c + i + 4 * u, sizeof y);
                    acc[u] += x + y;
                }
            for (; i < hi; i++) p += b[i] + c[i];
            for (int u = 0; u < 4; u++) p += acc[u][0] + acc[u][1] + acc[u][2] + acc[u][3];
            part += p;
            cpu_rate += 2.0 * (double)(hi - lo) * sizeof(double) / (thread_cpu() - c0 + 1e-9) / 1e9;
        }
        reads[r] = 2.0 * (double)n * sizeof(double) / (now() - t0) / 1e9;
        cpu_reads[r] = cpu_rate;
        sum += part;
    }
    if (sum != 3.0 * (double)n * REPS) {
        fprintf(stderr, "stream_triad: read pass summed %g, not %g\n", sum, 3.0 * (double)n * REPS);
        return 1;
    }
    qsort(rates, REPS, sizeof rates[0], cmp);
    qsort(cpu_rates, REPS, sizeof cpu_rates[0], cmp);
    qsort(reads, REPS, sizeof reads[0], cmp);
    qsort(cpu_reads, REPS, sizeof cpu_reads[0], cmp);
    printf("{\"bench\":\"stream_triad\",\"threads\":%d,\"gbs\":%.2f,\"gbs_median\":%.2f,\"gbs_read\":%.2f,"
           "\"gbs_cpu\":%.2f,\"gbs_read_cpu\":%.2f,\"array_mib\":%.1f,\"total_mib\":%.1f,\"llc_mib\":%.1f,"
           "\"reps\":%d}\n",
           threads, rates[REPS - 1], rates[REPS / 2], reads[REPS - 1], cpu_rates[REPS - 1], cpu_reads[REPS - 1],
           (double)n * sizeof(double) / (1 << 20), 3.0 * (double)n * sizeof(double) / (1 << 20),
           (double)llc / (1 << 20), REPS);
    free(a);
    free(b);
    free(c);
    return 0;
}
