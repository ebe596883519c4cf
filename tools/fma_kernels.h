/*
 * The FMA throughput kernels behind the measured peak (tools/train_mfu.c,
 * the one tfcore train divides by for MFU, and bench/fma_peak.c): CHAINS
 * independent chains of vector fused multiply-adds per thread, enough to
 * cover the FMA latency on two ports, so the rate is limited only by FMA
 * throughput: flops = iters · FMA_CHAINS · lanes · 2 per thread. Each
 * returns a value derived from every accumulator so nothing is dead code.
 * x86-64 only (FMA_KERNELS_X86 says whether they exist); the callers pick
 * one at run time with __builtin_cpu_supports.
 */
#ifndef TFC_TOOLS_FMA_KERNELS_H
#define TFC_TOOLS_FMA_KERNELS_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FMA_KERNELS_X86 1
#include <immintrin.h>

#define FMA_CHAINS 12

__attribute__((target("avx2,fma"), unused)) static float fma_chains_avx2(long iters, float seed) {
    __m256 acc[FMA_CHAINS], m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    for (int c = 0; c < FMA_CHAINS; c++) acc[c] = _mm256_set1_ps(seed + (float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < FMA_CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
    float s = 0, out[8];
    for (int c = 0; c < FMA_CHAINS; c++) {
        _mm256_storeu_ps(out, acc[c]);
        s += out[0];
    }
    return s;
}

__attribute__((target("avx512f"), unused)) static float fma_chains_avx512(long iters, float seed) {
    __m512 acc[FMA_CHAINS], m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    for (int c = 0; c < FMA_CHAINS; c++) acc[c] = _mm512_set1_ps(seed + (float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < FMA_CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
    float s = 0;
    for (int c = 0; c < FMA_CHAINS; c++) s += _mm512_reduce_add_ps(acc[c]);
    return s;
}

/*
 * vdpbf16ps: each of the 16 f32 lanes adds two bf16 products, 4 flops per
 * lane, 64 per instruction (counted as lanes = 32). The peak a bf16 GEMM
 * is measured against.
 */
__attribute__((target("avx512bf16,avx512f"), unused)) static float fma_chains_avx512_bf16(long iters, float seed) {
    __m512 acc[FMA_CHAINS];
    __m512bh m = (__m512bh)_mm512_set1_epi32(0x3f803f80), a = (__m512bh)_mm512_set1_epi32(0x33d633d6);
    for (int c = 0; c < FMA_CHAINS; c++) acc[c] = _mm512_set1_ps(seed + (float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < FMA_CHAINS; c++) acc[c] = _mm512_dpbf16_ps(acc[c], m, a);
    float s = 0;
    for (int c = 0; c < FMA_CHAINS; c++) s += _mm512_reduce_add_ps(acc[c]);
    return s;
}
#endif

#endif
