/*
 * Measured fp32 FMA peak: every thread runs independent chains of vector
 * fused multiply-adds (enough chains to cover the FMA latency on two ports),
 * so the rate is limited only by FMA throughput. flops = threads · iters ·
 * chains · lanes · 2. The best of several short runs is reported: on a
 * shared machine interference only ever slows a run down.
 *
 *   fma_peak [threads]   ->  one JSON line per ISA the CPU has (avx2,
 *   avx512, and avx512_bf16: vdpbf16ps, the bf16 peak); "gflops" is the
 *   CPU-time rate (the peak), "gflops_wall" the wall-clock one.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* the kernels tfcore train measures its MFU peak with */
#include "../tools/fma_kernels.h"

#define CHAINS FMA_CHAINS
#define ITERS 20000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double clock_of(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * Best rate over reps, two ways: by wall time (what the machine gave us) and
 * by each thread's own CPU time summed over threads (what the cores do when
 * they run us — the hardware peak even while other processes share them).
 */
static void peak(int threads, int lanes, long iters, int reps, double *wall_best, double *cpu_best) {
    volatile float sink = 0;
    *wall_best = *cpu_best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now(), cpu_rate = 0;
#pragma omp parallel num_threads(threads)
        {
            double c0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
            float v = lanes == 8 ? fma_chains_avx2(iters, (float)omp_get_thread_num())
                : lanes == 16    ? fma_chains_avx512(iters, 1.0f)
                                 : fma_chains_avx512_bf16(iters, 1.0f);
            double rate = (double)iters * CHAINS * lanes * 2 / (clock_of(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e9;
#pragma omp critical
            {
                sink += v;
                cpu_rate += rate;
            }
        }
        double gf = (double)threads * (double)iters * CHAINS * lanes * 2 / (now() - t0) / 1e9;
        if (gf > *wall_best) *wall_best = gf;
        if (cpu_rate > *cpu_best) *cpu_best = cpu_rate;
    }
    (void)sink;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_num_procs();
    if (threads < 1) threads = 1;
    __builtin_cpu_init();
    int have[3] = {__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), __builtin_cpu_supports("avx512f"),
                   __builtin_cpu_supports("avx512bf16")};
    static const struct {
        const char *isa;
        int lanes; /* f32 lanes × 2 for vdpbf16ps, whose lane does two multiply-adds */
    } isas[] = {{"avx2", 8}, {"avx512", 16}, {"avx512_bf16", 32}};
    for (int i = 0; i < 3; i++) {
        if (!have[i]) continue;
        double wall, cpu;
        peak(threads, isas[i].lanes, ITERS / isas[i].lanes, 10, &wall, &cpu);
        printf("{\"bench\":\"fma_peak\",\"isa\":\"%s\",\"threads\":%d,\"gflops\":%.1f,\"gflops_wall\":%.1f}\n",
               isas[i].isa, threads, cpu, wall);
    }
    return 0;
}
