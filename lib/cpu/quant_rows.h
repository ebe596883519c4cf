/*
 * The row driver shared by the SIMD quantized-linear files, included once by
 * each after it defines, for its instruction set:
 *   INLINE, ROWS(i)                               (as in those files)
 *   dot_i8(MB, K, codes_row, x, out)              out[i] = Σ_k c[k]·x_i[k]
 *   dot_i4(MB, K, G, codes_row, scales_row, x, out)  the same, scaled per group
 * optionally PREPARE_X(format, M, K, x): a malloc'd copy of x [M, K] in the
 * layout its dot products read (NULL: they read x as it is; freed here),
 * with PREPARE_X_NEEDED(format) (whether the dots need that copy) and
 * PREPARE_X_FALLBACK, a row function with this driver's signature that
 * runs instead when the copy could not be allocated;
 * and QROWS_NAME, the name of the driver to define:
 *   y[m, n] = Σ_k x[m, k]·W[n, k] + b[n] for rows n0 <= n < n1 of W and
 * every m < M, four rows of x at a time so each unpacked weight vector feeds
 * four FMAs (MB, a constant after inlining, keeps accumulators in registers).
 */
#ifndef QROWS_NAME
#error "define QROWS_NAME before including cpu/quant_rows.h"
#endif

INLINE void rows_block(int MB, int32_t format, int64_t n, int64_t m, int64_t N, int64_t K, int64_t G, const float *x,
                       const void *codes, const float *scales, const float *b, float *y) {
    float o[4];
    const float bn = b ? b[n] : 0.0f;
    if (format == TFC_QFORMAT_INT8) {
        dot_i8(MB, K, (const int8_t *)codes + n * K, x + m * K, o);
        ROWS(i) y[(m + i) * N + n] = o[i] * scales[n] + bn;
    } else {
        dot_i4(MB, K, G, (const uint8_t *)codes + n * (K / 2), scales + n * (K / G), x + m * K, o);
        ROWS(i) y[(m + i) * N + n] = o[i] + bn;
    }
}

void QROWS_NAME(int32_t format, int64_t n0, int64_t n1, int64_t M, int64_t N, int64_t K, int64_t G, const float *x,
                const void *codes, const float *scales, const float *b, float *y) {
#ifdef PREPARE_X
    /* the family may want x in another layout (quant_avx512.c: int4); without memory for it, PREPARE_X_FALLBACK runs */
    float *xp = PREPARE_X(format, M, K, x);
    if (xp)
        x = xp;
    else if (PREPARE_X_NEEDED(format)) {
        PREPARE_X_FALLBACK(format, n0, n1, M, N, K, G, x, codes, scales, b, y);
        return;
    }
#endif
    for (int64_t n = n0; n < n1; n++) {
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) rows_block(4, format, n, m, N, K, G, x, codes, scales, b, y);
        switch (M - m) {
        case 3: rows_block(3, format, n, m, N, K, G, x, codes, scales, b, y); break;
        case 2: rows_block(2, format, n, m, N, K, G, x, codes, scales, b, y); break;
        case 1: rows_block(1, format, n, m, N, K, G, x, codes, scales, b, y); break;
        default: break;
        }
    }
#ifdef PREPARE_X
    free(xp);
#endif
}
