/*
 * The bias of a linear layer y = x·w + b, x [rows, in], w [in, out]:
 *   forward:  y[r, j] = b[j] for every row r, before one GEMM with beta = 1
 *             adds x·w (so the bias costs a write pass, not an extra tensor
 *             and a read-modify-write pass after the product);
 *   backward: db[j] = Σ_r dy[r, j].
 * The column sums run in row order per column, accumulated in double, with
 * threads owning disjoint column ranges: the result does not depend on the
 * thread count.
 */
#ifndef TFC_T

#include "cpu/kernels.h"

#define TFC_TMPL_FILE "cpu/bias.c"
#include "cpu/kernel_tmpl.h"

tfc_status tfc_cpu_bias_rows(const tfc_bias_problem *p) {
    TFC_DISPATCH(p->dtype, bias_rows, p);
    return TFC_OK;
}

tfc_status tfc_cpu_bias_grad(const tfc_bias_problem *p) {
    TFC_DISPATCH(p->dtype, bias_grad, p);
    return TFC_OK;
}

#else /* TFC_T */

static void FN(bias_rows)(const tfc_bias_problem *p) {
    const int64_t rows = p->rows, n = p->n;
    const T *b = p->b;
    T *y = p->y;
    TFC_PARALLEL_RANGE(rows, TFC_GRAIN(n), lo, hi) {
        for (int64_t r = lo; r < hi; r++) {
            T *yr = y + r * n;
            for (int64_t j = 0; j < n; j++) yr[j] = b[j];
        }
    }
}

/* Columns per stack tile of accumulators: 64 doubles, two cache lines of f32 dy per row. */
#define BIAS_TILE 64

static void FN(bias_grad)(const tfc_bias_problem *p) {
    const int64_t rows = p->rows, n = p->n, ld = p->ld;
    const T *dy = p->dy;
    T *db = p->db;
    const int accumulate = p->accumulate;
    TFC_PARALLEL_RANGE(n, TFC_GRAIN(rows), lo, hi) {
        for (int64_t j0 = lo; j0 < hi; j0 += BIAS_TILE) {
            int64_t w = hi - j0 < BIAS_TILE ? hi - j0 : BIAS_TILE;
            ACC acc[BIAS_TILE];
            for (int64_t j = 0; j < w; j++) acc[j] = 0;
            for (int64_t r = 0; r < rows; r++) {
                const T *d = dy + r * ld + j0;
                for (int64_t j = 0; j < w; j++) acc[j] += (ACC)d[j];
            }
            for (int64_t j = 0; j < w; j++) db[j0 + j] = (T)(accumulate ? db[j0 + j] + acc[j] : acc[j]);
        }
    }
}

#undef BIAS_TILE

#endif
