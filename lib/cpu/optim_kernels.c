/*
 * The fused optimizer kernels: the per-element bodies (written once, below
 * the #else, compiled per element type by kernel_tmpl.h: f64, f32 and an
 * AVX2+FMA f32), and the walk over the segment range that dispatches them.
 * Each body works on elements [lo, hi) of one segment; pointers are
 * restrict and the flags loop-invariant, so the loops vectorise.
 */
#ifndef TFC_T

#include "cpu/optim_kernels.h"

#include <math.h>
#include <stdlib.h>

#include "core/error.h"

#define TFC_TMPL_FILE "cpu/optim_kernels.c"
#include "cpu/kernel_tmpl.h"

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
        if (segs[mid].start <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Call piece(segment, local lo, local hi) for each segment part inside fused [lo, hi). */
#define FOR_PIECES(segs, nseg, lo, hi, s, a, b)                                                           \
    for (int64_t k_ = seg_find(segs, nseg, lo); k_ < (nseg) && (segs)[k_].start < (hi); k_++)             \
        for (const tfc_optim_seg *s = &(segs)[k_]; s; s = NULL)                                           \
            for (int64_t a = ((lo) > s->start ? (lo) : s->start) - s->start,                              \
                         b = ((hi) < s->start + s->n ? (hi) : s->start + s->n) - s->start, once_ = a < b; \
                 once_; once_ = 0)

tfc_status tfc_cpu_optim_step(const tfc_optim_problem *p) {
    const tfc_optim_seg *segs = p->segs;
    const int64_t nseg = p->nseg, total = seg_total(segs, nseg);
    const int adam = p->rule == TFC_OPTIM_RULE_ADAM;
    if (total == 0) return TFC_OK;
    TFC_PARALLEL_RANGE(total, OPTIM_GRAIN, lo, hi) {
        FOR_PIECES(segs, nseg, lo, hi, s, a, b) {
            if (adam)
                TFC_DISPATCH(s->dtype, adam_piece, p, s, a, b);
            else
                TFC_DISPATCH(s->dtype, sgd_piece, p, s, a, b);
        }
    }
    return TFC_OK;
}

/*
 * *out = Σ (scale·g)² over every segment's grad, in f64. The range is cut
 * into fixed blocks summed in block order, so the result does not depend
 * on the thread count.
 */
static tfc_status grad_sumsq(const tfc_optim_seg *segs, int64_t nseg, double scale, double *out) {
    int64_t total = seg_total(segs, nseg);
    int64_t nblocks = (total + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    double small[64];
    double *part = nblocks <= 64 ? small : malloc((size_t)nblocks * sizeof *part);
    if (!part) return tfc_err(TFC_ERR_OOM, "out of memory");
    TFC_PARALLEL_RANGE(nblocks, 2, blo, bhi) {
        for (int64_t blk = blo; blk < bhi; blk++) {
            int64_t lo = blk * SUMSQ_BLOCK, hi = lo + SUMSQ_BLOCK < total ? lo + SUMSQ_BLOCK : total;
            double acc = 0;
            FOR_PIECES(segs, nseg, lo, hi, s, a, b) { acc += TFC_DISPATCH(s->dtype, sumsq_piece, s, a, b, scale); }
            part[blk] = acc;
        }
    }
    double sum = 0;
    for (int64_t blk = 0; blk < nblocks; blk++) sum += part[blk];
    if (part != small) free(part);
    *out = sum;
    return TFC_OK;
}

/* max |g| over every grad (NaN when any element is NaN). */
static double grad_maxabs(const tfc_optim_seg *segs, int64_t nseg) {
    /* Only reached on the rare overflow path: one thread is plenty. */
    double mx = 0;
    for (int64_t k = 0; k < nseg; k++) {
        const tfc_optim_seg *s = &segs[k];
        double m = TFC_DISPATCH(s->dtype, maxabs_piece, s, 0, s->n);
        if (m != m) return m;
        if (m > mx) mx = m;
    }
    return mx;
}

/*
 * The norm in f64 over fixed blocks (thread-count independent). A sum of
 * squares that overflows is redone on grads scaled by 1/max|g|, so only a
 * NaN/Inf element or a norm beyond f64 stays non-finite.
 */
tfc_status tfc_cpu_grad_norm(const tfc_grad_norm_problem *p) {
    double sumsq = 0;
    *p->overflow = 0;
    TFC_TRY(grad_sumsq(p->segs, p->nseg, 1.0, &sumsq));
    double norm = sqrt(sumsq);
    if (!isfinite(norm)) {
        double mx = grad_maxabs(p->segs, p->nseg);
        if (!isfinite(mx)) {
            *p->norm = mx;
            return TFC_OK;
        }
        TFC_TRY(grad_sumsq(p->segs, p->nseg, 1.0 / mx, &sumsq));
        norm = mx * sqrt(sumsq);
        *p->overflow = !isfinite(norm);
    }
    *p->norm = norm;
    return TFC_OK;
}

tfc_status tfc_cpu_grad_scale(const tfc_grad_norm_problem *p) {
    const tfc_optim_seg *segs = p->segs;
    const int64_t nseg = p->nseg, total = seg_total(segs, nseg);
    const double c = p->c;
    if (total == 0) return TFC_OK;
    TFC_PARALLEL_RANGE(total, OPTIM_GRAIN, lo, hi) {
        FOR_PIECES(segs, nseg, lo, hi, s, a, b) { TFC_DISPATCH(s->dtype, scale_piece, s, a, b, c); }
    }
    return TFC_OK;
}

#else /* TFC_T: the per-element bodies, once per element type */

static void FN(sgd_piece)(const tfc_optim_problem *h, const tfc_optim_seg *s, int64_t lo, int64_t hi) {
    T *restrict p = (T *)s->param;
    const T *restrict g = (const T *)s->grad;
    T *restrict b = (T *)s->buf[0];
    const T sign = h->maximize ? (T)-1 : (T)1;
    const T wd = (T)s->weight_decay, neg_lr = (T)(-s->lr);
    const T mu = (T)h->momentum, one_minus_damp = (T)(1.0 - h->dampening);
    const int use_wd = s->weight_decay != 0, use_mom = h->momentum != 0, nesterov = h->nesterov, first = s->first;
    for (int64_t i = lo; i < hi; i++) {
        T d = sign * g[i];
        if (use_wd) d = d + wd * p[i];
        if (use_mom) {
            T bi = first ? d : b[i] * mu + one_minus_damp * d;
            b[i] = bi;
            d = nesterov ? d + mu * bi : bi;
        }
        p[i] = p[i] + neg_lr * d;
    }
}

static void FN(adam_piece)(const tfc_optim_problem *h, const tfc_optim_seg *s, int64_t lo, int64_t hi) {
    T *restrict p = (T *)s->param;
    const T *restrict g = (const T *)s->grad;
    T *restrict m = (T *)s->buf[0];
    T *restrict v = (T *)s->buf[1];
    T *restrict vmax = (T *)s->buf[2];
    const T sign = h->maximize ? (T)-1 : (T)1;
    const T b1 = (T)h->beta1, one_minus_b1 = (T)(1.0 - h->beta1);
    const T b2 = (T)h->beta2, one_minus_b2 = (T)(1.0 - h->beta2);
    const T eps = (T)h->eps, bc2_sqrt = (T)s->bc2_sqrt, neg_step = (T)(-s->step_size);
    const T wd = (T)s->weight_decay, decay = (T)(1.0 - s->lr * s->weight_decay);
    const int l2 = !h->decoupled && s->weight_decay != 0;
    const int decoupled = h->decoupled && s->weight_decay != 0, amsgrad = h->amsgrad;
    for (int64_t i = lo; i < hi; i++) {
        T pi = p[i];
        T d = sign * g[i];
        if (decoupled) pi = pi * decay;
        if (l2) d = d + wd * pi;
        T mi = m[i] * b1 + one_minus_b1 * d;
        T vi = v[i] * b2 + (one_minus_b2 * d) * d;
        m[i] = mi;
        v[i] = vi;
        if (amsgrad) {
            T vm = vmax[i] < vi ? vi : vmax[i];
            vmax[i] = vm;
            vi = vm;
        }
        T denom = SQRT(vi) / bc2_sqrt + eps;
        p[i] = pi + (neg_step * mi) / denom;
    }
}

/* Σ (scale·x)² of x[lo, hi) in sixteen fixed lanes (four AVX2 registers of f64): the
 * same order however it is vectorised, and enough independent sums to hide the add latency. */
static double FN(sumsq_piece)(const tfc_optim_seg *s, int64_t lo, int64_t hi, double scale) {
    const T *restrict x = (const T *)s->grad;
    double acc[16] = {0};
    int64_t i = lo;
    for (; i + 16 <= hi; i += 16)
        for (int j = 0; j < 16; j++) {
            double v = (double)x[i + j] * scale;
            acc[j] += v * v;
        }
    for (; i < hi; i++) {
        double v = (double)x[i] * scale;
        acc[0] += v * v;
    }
    for (int w = 8; w >= 1; w /= 2) /* pairwise: a fixed tree */
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

static double FN(maxabs_piece)(const tfc_optim_seg *s, int64_t lo, int64_t hi) {
    const T *restrict x = (const T *)s->grad;
    double mx = 0;
    for (int64_t i = lo; i < hi; i++) {
        double a = fabs((double)x[i]);
        if (a != a) return a; /* NaN wins */
        if (a > mx) mx = a;
    }
    return mx;
}

static void FN(scale_piece)(const tfc_optim_seg *s, int64_t lo, int64_t hi, double c) {
    T *restrict x = (T *)s->grad;
    const T cc = (T)c;
    for (int64_t i = lo; i < hi; i++) x[i] = x[i] * cc;
}

#endif /* TFC_T */
