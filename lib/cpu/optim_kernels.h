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

#include "backend/backend.h"

/* Segments (tfc_optim_seg) and hyperparameters (tfc_optim_problem, whose segs/nseg these ignore) are the backend table's. */

/*
 * SGD, per element, in the order torch 1.13's _single_tensor_sgd rounds:
 *   d = ±g;  if wd: d = d + wd·p
 *   if momentum: b = first ? d : b·μ + (1 − dampening)·d;  d = nesterov ? d + μ·b : b
 *   p = p + (−lr)·d
 */
void tfc_cpu_sgd_step(const tfc_optim_problem *h, const tfc_optim_seg *segs, int64_t nseg);

/*
 * Adam / AdamW, per element, in the order torch 1.13's _single_tensor_adam(w) rounds:
 *   d = ±g;  AdamW: p = p·(1 − lr·wd)   Adam: if wd: d = d + wd·p
 *   m = m·β1 + (1 − β1)·d;   v = v·β2 + ((1 − β2)·d)·d
 *   v̂ = amsgrad ? (vmax = max(vmax, v)) : v
 *   p = p + ((−step_size)·m) / (√v̂ / bc2_sqrt + eps)
 * which is p − lr·m̂/(√v̂ₜ + eps) with m̂ = m/(1 − β1ᵗ), v̂ₜ = v̂/(1 − β2ᵗ).
 */
void tfc_cpu_adam_step(const tfc_optim_problem *h, const tfc_optim_seg *segs, int64_t nseg);

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
