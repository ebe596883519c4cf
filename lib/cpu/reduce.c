/* Reductions; sums accumulate in double for both f32 and f64 inputs. */
#include "cpu/reduce.h"

#include <math.h>

#include "core/dtype.h"
#include "cpu/parallel.h"

static inline double load(const tfc_sview *v, int64_t off) {
    return v->dtype == TFC_DTYPE_F64 ? ((const double *)v->data)[off] : (double)((const float *)v->data)[off];
}

void tfc_cpu_reduce(tfc_reduce_op op, const tfc_sview *in, int32_t nkeep, void *out, double scale) {
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
    int64_t grain = nred > 0 ? (1 << 14) / nred + 1 : 1 << 14;
    TFC_PARALLEL_RANGE(nout, grain, lo, hi) {
        for (int64_t o = lo; o < hi; o++) {
            int64_t base = 0, rem = o;
            for (int32_t d = nkeep - 1; d >= 0; d--) {
                base += (rem % in->shape[d]) * in->strides[d];
                rem /= in->shape[d];
            }
            int64_t idx[TFC_MAX_DIMS], off[4];
            tfc_iter_seek(&rit, 0, idx, off);
            double acc = op == TFC_REDUCE_MAX || op == TFC_REDUCE_ARGMAX ? -INFINITY
                         : op == TFC_REDUCE_MIN || op == TFC_REDUCE_ARGMIN ? INFINITY : 0.0;
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
                    if (isnan(x)) { if (!saw_nan) { saw_nan = 1; acc = x; best = i; } }
                    else if (!saw_nan && x > acc) { acc = x; best = i; }
                    break;
                case TFC_REDUCE_MIN:
                case TFC_REDUCE_ARGMIN:
                    if (isnan(x)) { if (!saw_nan) { saw_nan = 1; acc = x; best = i; } }
                    else if (!saw_nan && x < acc) { acc = x; best = i; }
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
            if (in->dtype == TFC_DTYPE_F64) ((double *)out)[o] = acc;
            else ((float *)out)[o] = (float)acc;
        }
    }
}

void tfc_cpu_reduce_scatter(const tfc_sview *dst, int32_t nkeep, const int64_t *pos, const tfc_sview *dy) {
    int64_t nout = 1;
    for (int32_t d = 0; d < nkeep; d++) nout *= dst->shape[d];
    const tfc_sview *dv[1] = {dy};
    tfc_iter it;
    tfc_iter_init(&it, dv, 1);
    int64_t idx[TFC_MAX_DIMS], off[4];
    tfc_iter_seek(&it, 0, idx, off);
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
        if (dst->dtype == TFC_DTYPE_F64) ((double *)dst->data)[base] = ((const double *)dy->data)[off[0]];
        else ((float *)dst->data)[base] = ((const float *)dy->data)[off[0]];
        tfc_iter_next(&it, idx, off);
    }
}
