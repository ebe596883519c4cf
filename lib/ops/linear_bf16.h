/*
 * The padded door of tfc_linear_bf16 (linear_bf16.c), for a caller that
 * pads a GEMM's output columns to what its device runs fastest at (the
 * GPT's LM head under autocast: V = 50257 → 50304 on CUDA).
 */
#ifndef TFC_OPS_LINEAR_BF16_H
#define TFC_OPS_LINEAR_BF16_H

#include "tfcore/ops.h"

/*
 * n rounded up to the multiple of GEMM output columns t's backend runs
 * fastest at (tfc_backend_pad_cols; n itself where the backend pads
 * nothing, as the CPU, or when t's device has no backend).
 */
int64_t tfc_gemm_pad_cols(const tfc_tensor *t, int64_t n);

/*
 * tfc_linear_bf16 with w_bf16 [in, Np] wider than w [in, out] (Np ≥ out;
 * its columns past out are the caller's padding, zero for an exact
 * product) and b, when given, [Np]: out is [..., Np]. w's gradient is the
 * first `out` columns of bf16(x)ᵀ · bf16(dy) (a view with row stride Np);
 * dx sums over all Np columns of dy (zero there when the padding's
 * logits got no gradient). Errors as tfc_linear_bf16's; w_bf16 is required.
 */
tfc_status tfc_linear_bf16_padded(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *w, const tfc_tensor *w_bf16,
                                  const tfc_tensor *b, tfc_tensor **out);

#endif
