/*
 * Quantize, dequantize and the portable quantized linear (formats byte by
 * byte in include/tfcore/quant.h), and the run-time choice of the linear's
 * instruction family. Rounding is round-half-even of the f32 quotient
 * w / scale (nearbyintf in the default mode), as torch.quantize_per_channel.
 */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "cpu/quant.h"
#include "tfcore/quant.h"

/* Codes per scale and the largest code of a format. */
static int64_t group_of(const tfc_quant_problem *p) { return p->format == TFC_QFORMAT_INT4 ? p->group : p->K; }

tfc_status tfc_cpu_quantize(const tfc_quant_problem *p) {
    const float *w = p->w;
    const int64_t N = p->N, K = p->K, G = group_of(p), ng = K / G, sn = p->w_sn, sk = p->w_sk;
    const int int4 = p->format == TFC_QFORMAT_INT4;
    const float qmax = int4 ? 7.0f : 127.0f;
    /* A non-finite weight would make its whole group NaN or 0: refuse it by position. */
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            if (!isfinite(w[n * sn + k * sk]))
                return tfc_err(TFC_ERR_NONFINITE, "w[%lld,%lld] (row %lld of W [%lld,%lld]) is %g", (long long)n,
                               (long long)k, (long long)n, (long long)N, (long long)K, (double)w[n * sn + k * sk]);
    float *scales = p->scales;
    int8_t *c8 = p->codes;
    uint8_t *c4 = p->codes;
    TFC_PARALLEL_RANGE(N, 1 + 65536 / K, lo, hi) {
        for (int64_t n = lo; n < hi; n++)
            for (int64_t g = 0; g < ng; g++) {
                const float *wr = w + n * sn + g * G * sk;
                float amax = 0;
                for (int64_t k = 0; k < G; k++) amax = fmaxf(amax, fabsf(wr[k * sk]));
                const float s = amax / qmax;
                scales[n * ng + g] = s;
                for (int64_t k = 0; k < G; k++) {
                    float q = s > 0 ? nearbyintf(wr[k * sk] / s) : 0.0f;
                    q = fminf(fmaxf(q, -qmax), qmax);
                    const int64_t e = n * K + g * G + k;
                    if (!int4)
                        c8[e] = (int8_t)q;
                    else if (k % 2 == 0)
                        c4[e / 2] = (uint8_t)((int)q + 8);
                    else
                        c4[e / 2] |= (uint8_t)(((int)q + 8) << 4);
                }
            }
    }
    return TFC_OK;
}

tfc_status tfc_cpu_dequantize(const tfc_quant_problem *p) {
    const int64_t N = p->N, K = p->K, G = group_of(p), ng = K / G;
    const float *scales = p->scales;
    const int8_t *c8 = p->codes;
    const uint8_t *c4 = p->codes;
    float *out = p->w_out;
    const int64_t sn = p->out_in ? 1 : K, sk = p->out_in ? N : 1;
    TFC_PARALLEL_RANGE(N, 1 + 65536 / K, lo, hi) {
        for (int64_t n = lo; n < hi; n++)
            for (int64_t k = 0; k < K; k++) {
                const int64_t e = n * K + k;
                const int q = p->format == TFC_QFORMAT_INT4 ? ((c4[e / 2] >> (4 * (k & 1))) & 15) - 8 : c8[e];
                out[n * sn + k * sk] = (float)q * scales[n * ng + k / G];
            }
    }
    return TFC_OK;
}

/* One dot product of x [K] with row n's codes: int8 scaled at the end, int4 per group. */
static float dot_row(int32_t format, int64_t K, int64_t G, const float *x, const void *codes, const float *scales) {
    if (format == TFC_QFORMAT_INT8) {
        const int8_t *c = codes;
        float a[4] = {0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 4 <= K; k += 4)
            for (int j = 0; j < 4; j++) a[j] += (float)c[k + j] * x[k + j];
        for (; k < K; k++) a[0] += (float)c[k] * x[k];
        return ((a[0] + a[1]) + (a[2] + a[3])) * scales[0];
    }
    const uint8_t *c = codes;
    float acc = 0;
    for (int64_t g = 0; g < K / G; g++) {
        float ga[2] = {0, 0};
        for (int64_t k = g * G; k < (g + 1) * G; k += 2) {
            ga[0] += (float)((c[k / 2] & 15) - 8) * x[k];
            ga[1] += (float)((c[k / 2] >> 4) - 8) * x[k + 1];
        }
        acc += (ga[0] + ga[1]) * scales[g];
    }
    return acc;
}

void tfc_cpu_qrows_portable(int32_t format, int64_t n0, int64_t n1, int64_t M, int64_t N, int64_t K, int64_t G,
                            const float *x, const void *codes, const float *scales, const float *b, float *y) {
    const int int4 = format == TFC_QFORMAT_INT4;
    const int64_t row_bytes = int4 ? K / 2 : K, ng = int4 ? K / G : 1;
    for (int64_t n = n0; n < n1; n++) {
        const char *cr = (const char *)codes + n * row_bytes;
        for (int64_t m = 0; m < M; m++)
            y[m * N + n] = dot_row(format, K, G, x + m * K, cr, scales + n * ng) + (b ? b[n] : 0.0f);
    }
}

/*
 * W[n0 .. n0+nb, k0 .. k0+kb] dequantized into dst [nb, kb] (row-major, W's
 * own layout): the same f32 product per element as tfc_cpu_dequantize, so
 * the tile path below multiplies exactly the reference's weights.
 */
void tfc_cpu_qtile_portable(int32_t format, int64_t n0, int64_t nb, int64_t k0, int64_t kb, int64_t K, int64_t G,
                            const void *codes, const float *scales, float *dst) {
    for (int64_t r = 0; r < nb; r++) {
        float *d = dst + r * kb;
        if (format == TFC_QFORMAT_INT8) {
            const int8_t *c = (const int8_t *)codes + (n0 + r) * K + k0;
            const float s = scales[n0 + r];
            for (int64_t k = 0; k < kb; k++) d[k] = (float)c[k] * s;
            continue;
        }
        const uint8_t *c = (const uint8_t *)codes + (n0 + r) * (K / 2) + k0 / 2;
        const float *sr = scales + (n0 + r) * (K / G);
        for (int64_t k = 0; k < kb; k += 2) {
            const float s = sr[(k0 + k) / G];
            d[k] = (float)((c[k / 2] & 15) - 8) * s;
            d[k + 1] = (float)((c[k / 2] >> 4) - 8) * s;
        }
    }
}

/*
 * From this many rows of x on, tfc_qlinear dequantizes W a tile at a time
 * into an f32 scratch that stays in L1/L2 and runs the f32 GEMM over all M
 * rows: the unpacking is paid once per weight instead of once per four rows
 * (at M = 16 the row kernels were slower than our own f32 linear, see
 * docs/PERFORMANCE.md, "Quantized linear"). Below it the row kernels, which
 * read each code once and never write W out, are faster. int4's unpacking
 * costs more than int8's widening, so it switches earlier. Measured on the
 * GPT-2 layer shapes (1 thread, CPU time): int4 tiles win from M = 6, int8
 * tiles tie at M = 12 and win from 16.
 */
#define QTILE_MIN_M_INT8 16
#define QTILE_MIN_M_INT4 6
/*
 * A tile is QTILE_N rows of W by QTILE_K of its columns (48 KB of f32); the
 * K chunks are summed into y by the GEMM (beta 1). Of 8–256 rows × 128–3072
 * columns this was the fastest at M = 16..64 on the benchmark's Xeon with
 * OpenBLAS 0.3.21: GEMM calls this narrow skip most of the packing that
 * wider ones pay per call (128-row tiles were 1.6× slower at M = 16), and
 * whole-K tiles at K = 3072 spill L1/L2 (1.5× slower at M = 64).
 */
#define QTILE_N 16
#define QTILE_K 768

/* y = x · Wᵀ + b through dequantized tiles; a thread that cannot get its scratch runs the row kernel fn instead. */
static void qlinear_tiled(const tfc_quant_problem *p, tfc_qrows_fn fn, tfc_qtile_fn deq) {
    const int64_t N = p->N, M = p->M, K = p->K, G = p->group;
    const float *x = p->x, *b = p->b;
    float *y = p->y;
    /* int4: a chunk is whole groups (K is a multiple of G) */
    const int64_t unit = p->format == TFC_QFORMAT_INT4 ? G : 16;
    int64_t kb = QTILE_K / unit * unit;
    if (kb < unit) kb = unit;
    if (kb > K) kb = K;
    const int64_t nb = QTILE_N, tiles = (N + nb - 1) / nb;
    TFC_PARALLEL_RANGE(tiles, 1, lo, hi) {
        float *tile = malloc((size_t)(nb * kb) * sizeof *tile);
        for (int64_t t = lo; t < hi; t++) {
            const int64_t n0 = t * nb, n1 = n0 + nb < N ? n0 + nb : N;
            if (!tile) {
                fn(p->format, n0, n1, M, N, K, G, x, p->codes, p->scales, b, y);
                continue;
            }
            for (int64_t k0 = 0; k0 < K; k0 += kb) {
                const int64_t kn = K - k0 < kb ? K - k0 : kb;
                deq(p->format, n0, n1 - n0, k0, kn, K, G, p->codes, p->scales, tile);
                tfc_cpu_gemm_matrix(TFC_DTYPE_F32, 0, 1, M, n1 - n0, kn, 1.0, x + k0, K, tile, kn, k0 ? 1.0 : 0.0,
                                    y + n0, N);
            }
            if (b)
                for (int64_t m = 0; m < M; m++)
                    for (int64_t n = n0; n < n1; n++) y[m * N + n] += b[n];
        }
        free(tile);
    }
}

tfc_status tfc_cpu_qlinear(const tfc_quant_problem *p) {
    tfc_qrows_fn fn = tfc_cpu_qrows_portable;
    tfc_qtile_fn deq = tfc_cpu_qtile_portable;
#if TFC_HAVE_QUANT_SIMD
    const int isa = tfc_cpu_qisa();
    if (isa == TFC_QISA_AVX512) {
        fn = tfc_cpu_qrows_avx512;
        deq = tfc_cpu_qtile_avx512;
    } else if (isa == TFC_QISA_AVX2) {
        fn = tfc_cpu_qrows_avx2;
        deq = tfc_cpu_qtile_avx2;
    }
#endif
    const int64_t N = p->N, M = p->M, K = p->K;
    if (M >= (p->format == TFC_QFORMAT_INT4 ? QTILE_MIN_M_INT4 : QTILE_MIN_M_INT8)) {
        qlinear_tiled(p, fn, deq);
        return TFC_OK;
    }
    /* Threads only for at least ~64K multiply-adds each: a GEMV row block of a small layer stays on one core. */
    const int64_t grain = 1 + 65536 / (K * M > 0 ? K * M : 1);
    TFC_PARALLEL_RANGE(N, grain, lo, hi) {
        fn(p->format, lo, hi, M, N, K, p->group, p->x, p->codes, p->scales, p->b, p->y);
    }
    return TFC_OK;
}
