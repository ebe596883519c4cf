/*
 * Softmax and log-softmax along the middle dim of x [outer, d, inner].
 *
 * Forward, per (outer, inner) line of d values:
 *   m = max x,   s = Σ exp(x − m)
 *   softmax: y = exp(x − m) / s          log-softmax: y = x − (m + log s)
 * Backward from y (never a d×d Jacobian):
 *   softmax: dx = y ⊙ (dy − Σ dy ⊙ y)    log-softmax: dx = dy − exp(y) ⊙ Σ dy
 *
 * The last dim (inner == 1) goes a line at a time, vectorised along it.
 * Otherwise lines are d apart in memory, so SM_COLS adjacent lines are
 * walked together, row by row, each row a contiguous run, with the lines'
 * maxima and sums on the stack. Sums are in f64.
 */
#ifndef TFC_T

#include "cpu/kernels.h"

/* Adjacent lines processed together when the dim is not the last one. */
#define SM_COLS 64

#define TFC_TMPL_FILE "cpu/softmax.c"
#include "cpu/kernel_tmpl.h"

tfc_status tfc_cpu_softmax_forward(const tfc_softmax_problem *p) {
    if (p->outer * p->d * p->inner > 0) TFC_DISPATCH(p->dtype, softmax_forward, p);
    return TFC_OK;
}

tfc_status tfc_cpu_softmax_backward(const tfc_softmax_problem *p) {
    if (p->outer * p->d * p->inner > 0) TFC_DISPATCH(p->dtype, softmax_backward, p);
    return TFC_OK;
}

#else /* TFC_T */

/* One contiguous line of d values. */
static void FN(softmax_line)(int64_t d, int is_log, const T *x, T *y) {
    T m = -INFINITY;
    SIMD_MAX(m)
    for (int64_t j = 0; j < d; j++) m = x[j] > m ? x[j] : m;
    ACC s = 0;
    if (is_log) {
        SIMD_SUM(s)
        for (int64_t j = 0; j < d; j++) s += EXP(x[j] - m);
        T lz = m + (T)LOG((T)s);
        for (int64_t j = 0; j < d; j++) y[j] = x[j] - lz;
    } else {
        SIMD_SUM(s)
        for (int64_t j = 0; j < d; j++) {
            T e = EXP(x[j] - m);
            y[j] = e;
            s += e;
        }
        T inv = (T)(1.0 / s);
        for (int64_t j = 0; j < d; j++) y[j] *= inv;
    }
}

/* nb <= SM_COLS adjacent lines starting at x, rows `inner` apart. */
static void FN(softmax_lines)(int64_t d, int64_t inner, int64_t nb, int is_log, const T *x, T *y) {
    T m[SM_COLS];
    ACC s[SM_COLS];
    for (int64_t k = 0; k < nb; k++) {
        m[k] = -INFINITY;
        s[k] = 0;
    }
    for (int64_t j = 0; j < d; j++)
        for (int64_t k = 0; k < nb; k++) m[k] = x[j * inner + k] > m[k] ? x[j * inner + k] : m[k];
    for (int64_t j = 0; j < d; j++)
        for (int64_t k = 0; k < nb; k++) {
            T e = EXP(x[j * inner + k] - m[k]);
            if (!is_log) y[j * inner + k] = e;
            s[k] += e;
        }
    if (is_log) {
        for (int64_t k = 0; k < nb; k++) m[k] += (T)LOG((T)s[k]);
        for (int64_t j = 0; j < d; j++)
            for (int64_t k = 0; k < nb; k++) y[j * inner + k] = x[j * inner + k] - m[k];
    } else {
        for (int64_t k = 0; k < nb; k++) m[k] = (T)(1.0 / s[k]);
        for (int64_t j = 0; j < d; j++)
            for (int64_t k = 0; k < nb; k++) y[j * inner + k] *= m[k];
    }
}

static void FN(softmax_forward)(const tfc_softmax_problem *p) {
    const int64_t outer = p->outer, d = p->d, inner = p->inner;
    const int is_log = p->log;
    const T *x = p->x;
    T *y = p->y;
    if (inner == 1) {
        TFC_PARALLEL_RANGE(outer, TFC_GRAIN(d), lo, hi) {
            for (int64_t o = lo; o < hi; o++) FN(softmax_line)(d, is_log, x + o * d, y + o * d);
        }
        return;
    }
    int64_t nblk = (inner + SM_COLS - 1) / SM_COLS;
    TFC_PARALLEL_RANGE(outer * nblk, TFC_GRAIN(d * SM_COLS), lo, hi) {
        for (int64_t w = lo; w < hi; w++) {
            int64_t o = w / nblk, i0 = (w % nblk) * SM_COLS;
            int64_t nb = inner - i0 < SM_COLS ? inner - i0 : SM_COLS;
            int64_t off = o * d * inner + i0;
            FN(softmax_lines)(d, inner, nb, is_log, x + off, y + off);
        }
    }
}

static void FN(softmax_backward_line)(int64_t d, int is_log, const T *dy, const T *y, T *dx, int accumulate) {
    ACC t = 0;
    if (is_log) {
        SIMD_SUM(t)
        for (int64_t j = 0; j < d; j++) t += dy[j];
        T tt = (T)t;
        for (int64_t j = 0; j < d; j++) {
            T v = dy[j] - EXP(y[j]) * tt;
            dx[j] = accumulate ? dx[j] + v : v;
        }
    } else {
        SIMD_SUM(t)
        for (int64_t j = 0; j < d; j++) t += dy[j] * y[j];
        T tt = (T)t;
        for (int64_t j = 0; j < d; j++) {
            T v = y[j] * (dy[j] - tt);
            dx[j] = accumulate ? dx[j] + v : v;
        }
    }
}

static void FN(softmax_backward_lines)(int64_t d, int64_t inner, int64_t nb, int is_log, const T *dy, const T *y, T *dx,
                                       int accumulate) {
    ACC t[SM_COLS];
    T tt[SM_COLS];
    for (int64_t k = 0; k < nb; k++) t[k] = 0;
    for (int64_t j = 0; j < d; j++)
        for (int64_t k = 0; k < nb; k++) t[k] += is_log ? dy[j * inner + k] : dy[j * inner + k] * y[j * inner + k];
    for (int64_t k = 0; k < nb; k++) tt[k] = (T)t[k];
    for (int64_t j = 0; j < d; j++)
        for (int64_t k = 0; k < nb; k++) {
            int64_t i = j * inner + k;
            T v = is_log ? dy[i] - EXP(y[i]) * tt[k] : y[i] * (dy[i] - tt[k]);
            dx[i] = accumulate ? dx[i] + v : v;
        }
}

static void FN(softmax_backward)(const tfc_softmax_problem *p) {
    const int64_t outer = p->outer, d = p->d, inner = p->inner;
    const int is_log = p->log, accumulate = p->accumulate;
    const T *dy = p->dy, *y = p->y_in;
    T *dx = p->dx;
    if (inner == 1) {
        TFC_PARALLEL_RANGE(outer, TFC_GRAIN(d), lo, hi) {
            for (int64_t o = lo; o < hi; o++)
                FN(softmax_backward_line)(d, is_log, dy + o * d, y + o * d, dx + o * d, accumulate);
        }
        return;
    }
    int64_t nblk = (inner + SM_COLS - 1) / SM_COLS;
    TFC_PARALLEL_RANGE(outer * nblk, TFC_GRAIN(d * SM_COLS), lo, hi) {
        for (int64_t w = lo; w < hi; w++) {
            int64_t o = w / nblk, i0 = (w % nblk) * SM_COLS;
            int64_t nb = inner - i0 < SM_COLS ? inner - i0 : SM_COLS;
            int64_t off = o * d * inner + i0;
            FN(softmax_backward_lines)(d, inner, nb, is_log, dy + off, y + off, dx + off, accumulate);
        }
    }
}

#endif
