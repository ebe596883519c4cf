/*
 * Raw CPU kernels of the optimizers: one fused pass over every parameter's
 * contiguous memory per step, and the gradient-norm reduction of clipping.
 * The backend layer sees only memory: a list of segments (one per
 * parameter with a gradient) laid end to end in one index range, so the
 * threads split the whole range, not each parameter (a GPT's many small
 * biases cost one parallel region per step, not one each).
 */
#ifndef TFC_CPU_OPTIM_KERNELS_H
#define TFC_CPU_OPTIM_KERNELS_H

#include <stdint.h>

#include "tfcore/core.h"

/* One parameter in the fused range: all arrays contiguous, same dtype. */
typedef struct tfc_optim_seg {
    void *param;
    const void *grad;
    void *buf[3];    /* SGD: momentum_buffer; Adam: exp_avg, exp_avg_sq, max_exp_avg_sq */
    int64_t n;       /* elements (> 0) */
    int64_t start;   /* index of element 0 in the fused range: start of the previous + its n */
    tfc_dtype dtype; /* f32 or f64 */
    int32_t first;   /* SGD: the momentum buffer is new this step (buf = d, as torch) */
    double lr, weight_decay;
    double step_size; /* Adam: lr / (1 − β1^t) with t this parameter's step */
    double bc2_sqrt;  /* Adam: √(1 − β2^t) */
} tfc_optim_seg;

/* Hyperparameters shared by all segments of one step. */
typedef struct tfc_optim_hyper {
    double momentum, dampening; /* SGD */
    double beta1, beta2, eps;   /* Adam */
    int32_t nesterov;           /* SGD */
    int32_t amsgrad;            /* Adam */
    int32_t decoupled;          /* Adam: AdamW's p ← p·(1 − lr·wd) instead of L2 */
    int32_t maximize;           /* d = −g */
} tfc_optim_hyper;

/*
 * SGD, per element, in the order torch 1.13's _single_tensor_sgd rounds:
 *   d = ±g;  if wd: d = d + wd·p
 *   if momentum: b = first ? d : b·μ + (1 − dampening)·d;  d = nesterov ? d + μ·b : b
 *   p = p + (−lr)·d
 */
void tfc_cpu_sgd_step(const tfc_optim_hyper *h, const tfc_optim_seg *segs, int64_t nseg);

/*
 * Adam / AdamW, per element, in the order torch 1.13's _single_tensor_adam(w) rounds:
 *   d = ±g;  AdamW: p = p·(1 − lr·wd)   Adam: if wd: d = d + wd·p
 *   m = m·β1 + (1 − β1)·d;   v = v·β2 + ((1 − β2)·d)·d
 *   v̂ = amsgrad ? (vmax = max(vmax, v)) : v
 *   p = p + ((−step_size)·m) / (√v̂ / bc2_sqrt + eps)
 * which is p − lr·m̂/(√v̂ₜ + eps) with m̂ = m/(1 − β1ᵗ), v̂ₜ = v̂/(1 − β2ᵗ).
 */
void tfc_cpu_adam_step(const tfc_optim_hyper *h, const tfc_optim_seg *segs, int64_t nseg);

/*
 * *out = Σ (scale·g)² over every segment's grad, in f64. The range is cut
 * into fixed blocks summed in block order, so the result does not depend
 * on the thread count. TFC_ERR_OOM when the block sums cannot be allocated.
 */
tfc_status tfc_cpu_grad_sumsq(const tfc_optim_seg *segs, int64_t nseg, double scale, double *out);
/* max |g| over every grad (NaN when any element is NaN). */
double tfc_cpu_grad_maxabs(const tfc_optim_seg *segs, int64_t nseg);
/* g = g·c for every grad (the grads are written through the const pointer). */
void tfc_cpu_grad_scale(const tfc_optim_seg *segs, int64_t nseg, double c);

#endif
