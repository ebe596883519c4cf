/*
 * The AVX512-BF16 GEMM: f32 C (+)= alpha · op(A) · op(B) for bf16 A and B,
 * products summed in f32 by vdpbf16ps. Compiled for that ISA here only (the
 * rest of the library keeps baseline flags); gemm_bf16.c calls it after
 * CPUID says the CPU has it.
 *
 * vdpbf16ps adds to each f32 lane the two products of a pair of bf16s:
 *   c[j] += a[2i]·b[2i] + a[2i+1]·b[2i+1]
 * so both operands are packed as pairs along K ("pair-interleaved"): a
 * 32-bit word holds X(k) in its low and X(k+1) in its high half. A panel
 * of B (NR = 32 columns) is [K/2][32] words — two zmm per pair of K — and
 * a panel of A (MR rows) is [K/2][MR] words, each broadcast to all lanes.
 * The micro-kernel keeps an MR × 32 tile of C in 2·MR zmm accumulators.
 *
 * Blocking (Goto's): K in blocks of KC (the B micro-panel, KC/2 × 32 words
 * = 24 KiB, stays in L1 while MR-row panels of A stream past it), M in
 * blocks of MC rows (a packed A block, MC × KC bf16 = 144 KiB, stays in
 * L2). Per K block both operands are packed once into scratch (all of
 * op(B)'s columns, all of op(A)'s rows), then the (MC rows × NCHUNK
 * columns) tiles of C are shared out to the OpenMP threads. Each element of
 * C is summed by one thread in K order, so results do not depend on the
 * thread count.
 *
 * vdpbf16ps rounds to nearest even and treats subnormal inputs and outputs
 * as zero (DAZ/FTZ); the portable path keeps subnormals. Both stay within
 * the f32 accumulation bound K · eps_f32 · Σ|a||b| of the exact sum for
 * normal inputs (tests/c/test_bf16.c).
 */
#include "cpu/gemm.h"

#if TFC_BF16_AVX512_BUILT

#include <immintrin.h>
#include <string.h>

#include "core/alloc.h"
#include "cpu/parallel.h"

#define MR 12
#define NR 32
#define KC 384 /* K per block (even) */
#define MC (MR * 16)
#define NCHUNK (NR * 4)

#define TGT __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq")))

static inline uint32_t pair(uint16_t lo, uint16_t hi) { return (uint32_t)lo | (uint32_t)hi << 16; }

/*
 * Panel jp of op(B) for K rows [k0, k0 + kc): words [kc2][NR], zero past N
 * and past K. B(k, j) = tb ? b[j·ldb + k] : b[k·ldb + j].
 */
TGT static void pack_b_panel(int tb, const uint16_t *b, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t n,
                             uint32_t *dst) {
    int64_t kc2 = (kc + 1) / 2, nj = n - j0 < NR ? n - j0 : NR;
    if (nj < NR || (kc & 1)) memset(dst, 0, (size_t)kc2 * NR * sizeof *dst);
    if (!tb) {
        for (int64_t p = 0; p < kc / 2; p++) {
            const uint16_t *r0 = b + (k0 + 2 * p) * ldb + j0, *r1 = r0 + ldb;
            uint32_t *d = dst + p * NR;
            if (nj == NR) {
                /* zero-extend 16 bf16 of each row to 32 bits, shift the second up, OR */
                for (int h = 0; h < 2; h++) {
                    __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r0 + 16 * h)));
                    __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r1 + 16 * h)));
                    _mm512_storeu_si512(d + 16 * h, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
                }
            } else {
                for (int64_t j = 0; j < nj; j++) d[j] = pair(r0[j], r1[j]);
            }
        }
        if (kc & 1) {
            const uint16_t *r0 = b + (k0 + kc - 1) * ldb + j0;
            for (int64_t j = 0; j < nj; j++) dst[(kc2 - 1) * NR + j] = r0[j];
        }
    } else {
        for (int64_t j = 0; j < nj; j++) {
            const uint16_t *row = b + (j0 + j) * ldb + k0;
            for (int64_t p = 0; p < kc / 2; p++) {
                uint32_t w;
                memcpy(&w, row + 2 * p, 4);
                dst[p * NR + j] = w;
            }
            if (kc & 1) dst[(kc2 - 1) * NR + j] = row[kc - 1];
        }
    }
}

/* Panel of op(A) rows [i0, i0 + MR) for K [k0, k0 + kc): words [kc2][MR]. A(i, k) = ta ? a[k·lda + i] : a[i·lda + k]. */
TGT static void pack_a_panel(int ta, const uint16_t *a, int64_t lda, int64_t k0, int64_t kc, int64_t i0, int64_t m,
                             uint32_t *dst) {
    int64_t kc2 = (kc + 1) / 2, ni = m - i0 < MR ? m - i0 : MR;
    if (ni < MR || (kc & 1)) memset(dst, 0, (size_t)kc2 * MR * sizeof *dst);
    if (!ta) {
        for (int64_t r = 0; r < ni; r++) {
            const uint16_t *row = a + (i0 + r) * lda + k0;
            for (int64_t p = 0; p < kc / 2; p++) {
                uint32_t w;
                memcpy(&w, row + 2 * p, 4);
                dst[p * MR + r] = w;
            }
            if (kc & 1) dst[(kc2 - 1) * MR + r] = row[kc - 1];
        }
    } else {
        for (int64_t p = 0; p < kc / 2; p++) {
            const uint16_t *r0 = a + (k0 + 2 * p) * lda + i0, *r1 = r0 + lda;
            for (int64_t r = 0; r < ni; r++) dst[p * MR + r] = pair(r0[r], r1[r]);
        }
        if (kc & 1) {
            const uint16_t *r0 = a + (k0 + kc - 1) * lda + i0;
            for (int64_t r = 0; r < ni; r++) dst[(kc2 - 1) * MR + r] = r0[r];
        }
    }
}

/*
 * The MR × NR tile at c (mr rows, nr columns of it real): first K block
 * c = alpha·acc + beta·c (beta = 0 never reads c), later blocks c += alpha·acc.
 */
TGT static void kernel(int64_t kc2, const uint32_t *ap, const uint32_t *bp, float *c, int64_t ldc, int64_t mr,
                       int64_t nr, float alpha, float beta, int first) {
    __m512 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kc2; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
        ap += MR;
        bp += NR;
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    for (int64_t r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        for (int h = 0; h < 2; h++) {
            __mmask16 m = h ? m1 : m0;
            if (!m) continue;
            __m512 v = _mm512_mul_ps(acc[r][h], va);
            if (!first)
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cr + 16 * h));
            else if (beta != 0.0f)
                v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, cr + 16 * h), v);
            _mm512_mask_storeu_ps(cr + 16 * h, m, v);
        }
    }
}

int tfc_cpu_gemm_bf16_avx512(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t *a,
                             int64_t lda, const uint16_t *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    const int64_t mp = (m + MR - 1) / MR, np = (n + NR - 1) / NR; /* panels */
    const int64_t kcmax = k < KC ? k : KC, kc2max = (kcmax + 1) / 2;
    const size_t abytes = (size_t)(mp * MR * kc2max) * 4, bbytes = (size_t)(np * NR * kc2max) * 4;
    uint32_t *ap = tfc_host_alloc(abytes), *bp = tfc_host_alloc(bbytes);
    if (!ap || !bp) {
        tfc_host_free(ap, abytes);
        tfc_host_free(bp, bbytes);
        return -1;
    }
    const int64_t mb = (m + MC - 1) / MC, nb = (n + NCHUNK - 1) / NCHUNK, items = mb * nb;
    int nth = tfc_threads_for(m * n * k / TFC_GEMM_SPLIT_MIN_MNK, 1);
    if (nth > items) nth = (int)items;
    (void)nth;
#pragma omp parallel num_threads(nth) if (nth > 1)
    for (int64_t k0 = 0; k0 < k; k0 += KC) {
        const int64_t kc = k - k0 < KC ? k - k0 : KC, kc2 = (kc + 1) / 2;
#pragma omp for schedule(static)
        for (int64_t jp = 0; jp < np; jp++) pack_b_panel(tb, b, ldb, k0, kc, jp * NR, n, bp + jp * NR * kc2);
#pragma omp for schedule(static)
        for (int64_t ip = 0; ip < mp; ip++) pack_a_panel(ta, a, lda, k0, kc, ip * MR, m, ap + ip * MR * kc2);
            /* the implicit barrier after each `omp for` orders packing before use, and this K block before the next */
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; it++) {
            const int64_t i0 = (it / nb) * MC, j0 = (it % nb) * NCHUNK;
            const int64_t i1 = i0 + MC < m ? i0 + MC : m, j1 = j0 + NCHUNK < n ? j0 + NCHUNK : n;
            for (int64_t j = j0; j < j1; j += NR)
                for (int64_t i = i0; i < i1; i += MR)
                    kernel(kc2, ap + (i / MR) * MR * kc2, bp + (j / NR) * NR * kc2, c + i * ldc + j, ldc,
                           i1 - i < MR ? i1 - i : MR, j1 - j < NR ? j1 - j : NR, alpha, beta, k0 == 0);
        }
    }
    tfc_host_free(ap, abytes);
    tfc_host_free(bp, bbytes);
    return 0;
}

#endif
