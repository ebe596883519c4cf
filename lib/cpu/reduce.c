/*
 * Reductions over the trailing dims of a strided view (tfc_reduce_problem:
 * the caller permutes the reduced dims to the end) and the max/min
 * backward scatter (tfc_scatter_problem). Sums accumulate in double for
 * both f32 and f64 inputs; each output is one thread's, summed in one
 * order, so results do not depend on the thread count.
 */
#include <math.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"

static inline double load(const tfc_sview *v, int64_t off) {
    return v->dtype == TFC_DTYPE_F64 ? ((const double *)v->data)[off] : (double)((const float *)v->data)[off];
}

/*
 * Column sums, out[j] = scale · Σ_r x[r, j], when the kept dims are one
 * unit-stride run (a bias gradient: [B·T, C] → [C]): walk the reduced
 * positions in order and add whole contiguous rows, so memory is read
 * sequentially. Threads split the columns.
 */
static int column_sum(const tfc_sview *in, int32_t nkeep, const tfc_iter *rit, int64_t nout, void *out, double scale) {
    tfc_sview kept = *in;
    kept.ndim = nkeep;
    const tfc_sview *kv[1] = {&kept};
    tfc_iter kit;
    tfc_iter_init(&kit, kv, 1);
    if (nkeep == 0 || kit.ndim != 1 || kit.strides[0][0] != 1 || nout < 8) return 0;
    int f64 = in->dtype == TFC_DTYPE_F64;
    TFC_PARALLEL_RANGE(nout, 64, lo, hi) {
        double acc_small[512], *acc = acc_small;
        for (int64_t j0 = lo; j0 < hi; j0 += 512) {
            int64_t j1 = j0 + 512 < hi ? j0 + 512 : hi;
            for (int64_t j = 0; j < j1 - j0; j++) acc[j] = 0.0;
            int64_t idx[TFC_MAX_DIMS], off[4];
            tfc_iter_seek(rit, 0, idx, off);
            for (int64_t r = 0; r < rit->numel; r++) {
                if (f64) {
                    const double *row = (const double *)in->data + off[0] + j0;
                    for (int64_t j = 0; j < j1 - j0; j++) acc[j] += row[j];
                } else {
                    const float *row = (const float *)in->data + off[0] + j0;
                    for (int64_t j = 0; j < j1 - j0; j++) acc[j] += (double)row[j];
                }
                tfc_iter_next(rit, idx, off);
            }
            for (int64_t j = 0; j < j1 - j0; j++) {
                if (f64)
                    ((double *)out)[j0 + j] = acc[j] * scale;
                else
                    ((float *)out)[j0 + j] = (float)(acc[j] * scale);
            }
        }
    }
    return 1;
}

/* Row sums over one unit-stride run, vectorised with lane partial sums. */
static double row_sum(const tfc_sview *in, int64_t base, int64_t n) {
    double acc = 0.0;
    if (in->dtype == TFC_DTYPE_F64) {
        const double *x = (const double *)in->data + base;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < n; i++) acc += x[i];
    } else {
        const float *x = (const float *)in->data + base;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < n; i++) acc += (double)x[i];
    }
    return acc;
}

/* Every output o < nout: the reduction of its nred elements, walked by rit from o's base offset in p->in. */
static void reduce_outputs(const tfc_reduce_problem *p, const tfc_iter *rit0, int64_t nout, int64_t nred) {
    const tfc_reduce_op op = p->op;
    const tfc_sview *in = &p->in;
    const int32_t nkeep = p->nkeep;
    void *out = p->out;
    const double scale = p->scale;
    const tfc_iter rit = *rit0;
    int row_run = op == TFC_REDUCE_SUM && rit.ndim == 1 && rit.strides[0][0] == 1;
    int64_t grain = nred > 0 ? (1 << 14) / nred + 1 : 1 << 14;
    TFC_PARALLEL_RANGE(nout, grain, lo, hi) {
        for (int64_t o = lo; o < hi; o++) {
            int64_t base = 0, rem = o;
            for (int32_t d = nkeep - 1; d >= 0; d--) {
                base += (rem % in->shape[d]) * in->strides[d];
                rem /= in->shape[d];
            }
            if (row_run) {
                double acc = row_sum(in, base, nred) * scale;
                if (in->dtype == TFC_DTYPE_F64)
                    ((double *)out)[o] = acc;
                else
                    ((float *)out)[o] = (float)acc;
                continue;
            }
            int64_t idx[TFC_MAX_DIMS], off[4];
            tfc_iter_seek(&rit, 0, idx, off);
            double acc = op == TFC_REDUCE_MAX || op == TFC_REDUCE_ARGMAX ? -INFINITY
                : op == TFC_REDUCE_MIN || op == TFC_REDUCE_ARGMIN        ? INFINITY
                                                                         : 0.0;
            int64_t best = 0;
            int saw_nan = 0;
            double mean = 0.0;
            if (op == TFC_REDUCE_VAR) {
                for (int64_t i = 0; i < nred; i++) {
                    mean += load(in, base + off[0]);
                    tfc_iter_next(&rit, idx, off);
                }
                mean /= (double)(nred ? nred : 1);
                tfc_iter_seek(&rit, 0, idx, off);
            }
            for (int64_t i = 0; i < nred; i++) {
                double x = load(in, base + off[0]);
                switch (op) {
                case TFC_REDUCE_SUM: acc += x; break;
                case TFC_REDUCE_VAR: acc += (x - mean) * (x - mean); break;
                case TFC_REDUCE_MAX:
                case TFC_REDUCE_ARGMAX:
                    if (isnan(x)) {
                        if (!saw_nan) {
                            saw_nan = 1;
                            acc = x;
                            best = i;
                        }
                    } else if (!saw_nan && x > acc) {
                        acc = x;
                        best = i;
                    }
                    break;
                case TFC_REDUCE_MIN:
                case TFC_REDUCE_ARGMIN:
                    if (isnan(x)) {
                        if (!saw_nan) {
                            saw_nan = 1;
                            acc = x;
                            best = i;
                        }
                    } else if (!saw_nan && x < acc) {
                        acc = x;
                        best = i;
                    }
                    break;
                }
                tfc_iter_next(&rit, idx, off);
            }
            if (op == TFC_REDUCE_ARGMAX || op == TFC_REDUCE_ARGMIN) {
                ((int64_t *)out)[o] = best;
                continue;
            }
            if (op == TFC_REDUCE_SUM) acc *= scale;
            if (op == TFC_REDUCE_VAR) acc = acc / ((double)nred - scale);
            if (in->dtype == TFC_DTYPE_F64)
                ((double *)out)[o] = acc;
            else
                ((float *)out)[o] = (float)acc;
        }
    }
}

tfc_status tfc_cpu_reduce(const tfc_reduce_problem *p) {
    TFC_TRY(tfc_cpu_check_float_view("reduce", &p->in));
    const tfc_sview *in = &p->in;
    const int32_t nkeep = p->nkeep;
    int64_t nout = 1, nred = 1;
    for (int32_t d = 0; d < nkeep; d++) nout *= in->shape[d];
    tfc_sview red = *in;
    red.ndim = in->ndim - nkeep;
    for (int32_t d = 0; d < red.ndim; d++) {
        red.shape[d] = in->shape[nkeep + d];
        red.strides[d] = in->strides[nkeep + d];
        nred *= red.shape[d];
    }
    const tfc_sview *rv[1] = {&red};
    tfc_iter rit;
    tfc_iter_init(&rit, rv, 1);
    if (p->op != TFC_REDUCE_SUM || !column_sum(in, nkeep, &rit, nout, p->out, p->scale))
        reduce_outputs(p, &rit, nout, nred);
    return TFC_OK;
}

tfc_status tfc_cpu_reduce_scatter(const tfc_scatter_problem *p) {
    const tfc_sview *dst = &p->dst;
    const int32_t nkeep = p->nkeep;
    const int64_t *pos = p->pos;
    int64_t nout = 1;
    for (int32_t d = 0; d < nkeep; d++) nout *= dst->shape[d];
    /* dy is contiguous over the kept dims: output o is dy[o]. */
    for (int64_t o = 0; o < nout; o++) {
        int64_t base = 0, rem = o;
        for (int32_t d = nkeep - 1; d >= 0; d--) {
            base += (rem % dst->shape[d]) * dst->strides[d];
            rem /= dst->shape[d];
        }
        rem = pos[o];
        for (int32_t d = dst->ndim - 1; d >= nkeep; d--) {
            base += (rem % dst->shape[d]) * dst->strides[d];
            rem /= dst->shape[d];
        }
        if (dst->dtype == TFC_DTYPE_F64)
            ((double *)dst->data)[base] = ((const double *)p->dy)[o];
        else
            ((float *)dst->data)[base] = ((const float *)p->dy)[o];
    }
    return TFC_OK;
}
