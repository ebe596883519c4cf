/*
 * Measured fp32 FMA peak: every thread runs independent chains of vector
 * fused multiply-adds (enough chains to cover the FMA latency on two ports),
 * so the rate is limited only by FMA throughput. flops = threads · iters ·
 * chains · lanes · 2. The best of several short runs is reported: on a
 * shared machine interference only ever slows a run down.
 *
 *   fma_peak [threads]   ->  one JSON line per ISA the CPU has (avx2,
 *   avx512, avx512_bf16: vdpbf16ps, and amx_bf16: AMX tiles' tdpbf16ps,
 *   the bf16 peaks); "gflops" is the CPU-time rate (the peak),
 *   "gflops_wall" the wall-clock one. A CPU with AMX the kernel does not
 *   let us use gets an "amx_bf16" line with "unavailable" saying why.
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* the kernels tfcore train measures its MFU peak with */
#include "../tools/fma_kernels.h"

#define CHAINS FMA_CHAINS
#define ITERS 20000000L

#if defined(FMA_KERNELS_X86)
/*
 * AMX: tdpbf16ps multiplies a 16×32 bf16 tile by a 32×16 one (packed in
 * pairs, 16 rows of 64 bytes) into a 16×16 f32 tile: 16·16·32·2 = 16384
 * flops an instruction. Four accumulators from two A and two B tiles are
 * independent, so the tile unit's throughput, not a dependency, bounds
 * the loop: flops = iters · 4 · 16384 per thread. Each thread loads its
 * own tile configuration (tile state is per thread).
 */
#define AMX_TILE_FLOPS (16.0 * 16 * 32 * 2)
#define AMX_CHAINS 4

typedef struct amx_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

__attribute__((target("amx-tile,amx-bf16"))) static float amx_chains_bf16(long iters, float seed) {
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _Alignas(64) float c[16 * 16];
    _Alignas(64) uint16_t a[16 * 32], b[16 * 32];
    for (int i = 0; i < 16 * 16; i++) c[i] = seed;
    for (int i = 0; i < 16 * 32; i++) a[i] = 0x3f80, b[i] = 0x33d6; /* bf16 1.0 and ~1e-7: finite sums */
    _tile_loadconfig(&cfg);
    _tile_loadd(0, c, 64);
    _tile_loadd(1, c, 64);
    _tile_loadd(2, c, 64);
    _tile_loadd(3, c, 64);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    for (long i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    float s = 0;
    _tile_stored(0, c, 64);
    s += c[0];
    _tile_stored(1, c, 64);
    s += c[1];
    _tile_stored(2, c, 64);
    s += c[2];
    _tile_stored(3, c, 64);
    s += c[3];
    _tile_release();
    return s;
}

/*
 * 1 when AMX-BF16 can run: the CPU has AMX-TILE and AMX-BF16 (CPUID
 * leaf 7 EDX bits 24 and 22), the OS saves tile state (XCR0 bits 17-18),
 * and Linux grants this process the tile data (arch_prctl
 * ARCH_REQ_XCOMP_PERM, Linux 5.16+). Else 0, or -1 with *why set when
 * the CPU has AMX that the OS will not let us use.
 */
static int amx_usable(const char **why) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24)) || !(edx & (1u << 22))) return 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) {
        *why = "no OSXSAVE";
        return -1;
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) {
        *why = "the OS does not enable tile state (XCR0)";
        return -1;
    }
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
        *why = "arch_prctl(ARCH_REQ_XCOMP_PERM) refused (Linux before 5.16?)";
        return -1;
    }
    return 1;
}
#endif

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
/* lanes: 8, 16, 32 (vdpbf16ps) select the FMA chains; 0 the AMX tiles. */
static void peak(int threads, int lanes, long iters, int reps, double *wall_best, double *cpu_best) {
    const double per_iter = lanes ? (double)CHAINS * lanes * 2 : AMX_CHAINS * AMX_TILE_FLOPS; /* flops */
    volatile float sink = 0;
    *wall_best = *cpu_best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now(), cpu_rate = 0;
#pragma omp parallel num_threads(threads)
        {
            double c0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
            float v = lanes == 8 ? fma_chains_avx2(iters, (float)omp_get_thread_num())
                : lanes == 16    ? fma_chains_avx512(iters, 1.0f)
                : lanes == 32    ? fma_chains_avx512_bf16(iters, 1.0f)
                                 : amx_chains_bf16(iters, 1.0f);
            double rate = (double)iters * per_iter / (clock_of(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e9;
#pragma omp critical
            {
                sink += v;
                cpu_rate += rate;
            }
        }
        double gf = (double)threads * (double)iters * per_iter / (now() - t0) / 1e9;
        if (gf > *wall_best) *wall_best = gf;
        if (cpu_rate > *cpu_best) *cpu_best = cpu_rate;
    }
    (void)sink;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_num_procs();
    if (threads < 1) threads = 1;
    __builtin_cpu_init();
    const char *amx_why = NULL;
    const int amx = amx_usable(&amx_why);
    int have[4] = {__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), __builtin_cpu_supports("avx512f"),
                   __builtin_cpu_supports("avx512bf16"), amx == 1};
    static const struct {
        const char *isa;
        int lanes; /* f32 lanes × 2 for vdpbf16ps, whose lane does two multiply-adds; 0: AMX */
        long iters;
    } isas[] = {{"avx2", 8, ITERS / 8},
                {"avx512", 16, ITERS / 16},
                {"avx512_bf16", 32, ITERS / 32},
                /* ~16 cycles a tdpbf16ps: a similar few hundred ms a run */
                {"amx_bf16", 0, ITERS / 256}};
    for (int i = 0; i < 4; i++) {
        if (!have[i]) continue;
        double wall, cpu;
        peak(threads, isas[i].lanes, isas[i].iters, 10, &wall, &cpu);
        printf("{\"bench\":\"fma_peak\",\"isa\":\"%s\",\"threads\":%d,\"gflops\":%.1f,\"gflops_wall\":%.1f}\n",
               isas[i].isa, threads, cpu, wall);
    }
    if (amx < 0) printf("{\"bench\":\"fma_peak\",\"isa\":\"amx_bf16\",\"unavailable\":\"%s\"}\n", amx_why);
    return 0;
}
