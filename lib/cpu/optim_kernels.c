/* The fused optimizer kernels: walking the segment range, dispatch per dtype. */
#include "cpu/optim_kernels.h"

#include <math.h>
#include <stdlib.h>

#include "cpu/parallel.h"

#define T float
#define SFX f32
#define SQRT sqrtf
#include "cpu/optim_kernels_impl.h"

#define T double
#define SFX f64
#define SQRT sqrt
#include "cpu/optim_kernels_impl.h"

/* Elements per thread below which waking more threads does not pay. */
#define OPTIM_GRAIN (1 << 15)
/* Elements per block of the norm reduction (fixed: the sum's order must not depend on threads). */
#define SUMSQ_BLOCK (1 << 14)

static int64_t seg_total(const tfc_optim_seg *segs, int64_t nseg) {
    return nseg > 0 ? segs[nseg - 1].start + segs[nseg - 1].n : 0;
}

/* The segment holding fused index i: the last one whose start <= i. */
static int64_t seg_find(const tfc_optim_seg *segs, int64_t nseg, int64_t i) {
    int64_t lo = 0, hi = nseg - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (segs[mid].start <= i) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Call piece(segment, local lo, local hi) for each segment part inside fused [lo, hi). */
#define FOR_PIECES(segs, nseg, lo, hi, s, a, b)                                                   \
    for (int64_t k_ = seg_find(segs, nseg, lo); k_ < (nseg) && (segs)[k_].start < (hi); k_++)     \
        for (const tfc_optim_seg *s = &(segs)[k_]; s; s = NULL)                                   \
            for (int64_t a = ((lo) > s->start ? (lo) : s->start) - s->start,                      \
                         b = ((hi) < s->start + s->n ? (hi) : s->start + s->n) - s->start,        \
                         once_ = a < b;                                                           \
                 once_; once_ = 0)

void tfc_cpu_sgd_step(const tfc_optim_hyper *h, const tfc_optim_seg *segs, int64_t nseg) {
    int64_t total = seg_total(segs, nseg);
    if (total == 0) return;
    TFC_PARALLEL_RANGE(total, OPTIM_GRAIN, lo, hi) {
        FOR_PIECES(segs, nseg, lo, hi, s, a, b) {
            if (s->dtype == TFC_DTYPE_F64) sgd_piece_f64(h, s, a, b);
            else sgd_piece_f32(h, s, a, b);
        }
    }
}

void tfc_cpu_adam_step(const tfc_optim_hyper *h, const tfc_optim_seg *segs, int64_t nseg) {
    int64_t total = seg_total(segs, nseg);
    if (total == 0) return;
    TFC_PARALLEL_RANGE(total, OPTIM_GRAIN, lo, hi) {
        FOR_PIECES(segs, nseg, lo, hi, s, a, b) {
            if (s->dtype == TFC_DTYPE_F64) adam_piece_f64(h, s, a, b);
            else adam_piece_f32(h, s, a, b);
        }
    }
}

tfc_status tfc_cpu_grad_sumsq(const tfc_optim_seg *segs, int64_t nseg, double scale, double *out) {
    int64_t total = seg_total(segs, nseg);
    int64_t nblocks = (total + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    double small[64];
    double *part = nblocks <= 64 ? small : malloc((size_t)nblocks * sizeof *part);
    if (!part) return TFC_ERR_OOM;
    TFC_PARALLEL_RANGE(nblocks, 2, blo, bhi) {
        for (int64_t blk = blo; blk < bhi; blk++) {
            int64_t lo = blk * SUMSQ_BLOCK, hi = lo + SUMSQ_BLOCK < total ? lo + SUMSQ_BLOCK : total;
            double acc = 0;
            FOR_PIECES(segs, nseg, lo, hi, s, a, b) {
                acc += s->dtype == TFC_DTYPE_F64 ? sumsq_piece_f64(s, a, b, scale) : sumsq_piece_f32(s, a, b, scale);
            }
            part[blk] = acc;
        }
    }
    double sum = 0;
    for (int64_t blk = 0; blk < nblocks; blk++) sum += part[blk];
    if (part != small) free(part);
    *out = sum;
    return TFC_OK;
}

double tfc_cpu_grad_maxabs(const tfc_optim_seg *segs, int64_t nseg) {
    /* Only reached on the rare overflow path: one thread is plenty. */
    double mx = 0;
    for (int64_t k = 0; k < nseg; k++) {
        const tfc_optim_seg *s = &segs[k];
        double m = s->dtype == TFC_DTYPE_F64 ? maxabs_piece_f64(s, 0, s->n) : maxabs_piece_f32(s, 0, s->n);
        if (m != m) return m;
        if (m > mx) mx = m;
    }
    return mx;
}

void tfc_cpu_grad_scale(const tfc_optim_seg *segs, int64_t nseg, double c) {
    int64_t total = seg_total(segs, nseg);
    if (total == 0) return;
    TFC_PARALLEL_RANGE(total, OPTIM_GRAIN, lo, hi) {
        FOR_PIECES(segs, nseg, lo, hi, s, a, b) {
            if (s->dtype == TFC_DTYPE_F64) scale_piece_f64(s, a, b, c);
            else scale_piece_f32(s, a, b, c);
        }
    }
}
