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

/*
 * One optimizer step (tfc_optim_problem), by rule:
 *
 * SGD, per element, in the order torch 1.13's _single_tensor_sgd rounds:
 *   d = ±g;  if wd: d = d + wd·p
 *   if momentum: b = first ? d : b·μ + (1 − dampening)·d;  d = nesterov ? d + μ·b : b
 *   p = p + (−lr)·d
 *
 * Adam / AdamW, per element, in the order torch 1.13's _single_tensor_adam(w) rounds:
 *   d = ±g;  AdamW: p = p·(1 − lr·wd)   Adam: if wd: d = d + wd·p
 *   m = m·β1 + (1 − β1)·d;   v = v·β2 + ((1 − β2)·d)·d
 *   v̂ = amsgrad ? (vmax = max(vmax, v)) : v
 *   p = p + ((−step_size)·m) / (√v̂ / bc2_sqrt + eps)
 * which is p − lr·m̂/(√v̂ₜ + eps) with m̂ = m/(1 − β1ᵗ), v̂ₜ = v̂/(1 − β2ᵗ).
 */
tfc_status tfc_cpu_optim_step(const tfc_optim_problem *p);

/*
 * The global L2 norm of the grads (tfc_grad_norm_problem), Σ g² in f64 over
 * fixed blocks of the range summed in block order (thread-count
 * independent); the block sums are allocated (TFC_ERR_OOM) when there are
 * more than 64.
 */
tfc_status tfc_cpu_grad_norm(const tfc_grad_norm_problem *p);
/* g = g·c for every grad (written through the const pointers). */
tfc_status tfc_cpu_grad_scale(const tfc_grad_norm_problem *p);

#endif
