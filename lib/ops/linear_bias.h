/*
 * The bias half of a Linear, shared by tfc_linear and tfc_linear_bf16 (the
 * autocast Linear): one formula for how the bias enters the GEMM and how its
 * gradient leaves, whatever the operands' dtype.
 */
#ifndef TFC_OPS_LINEAR_BIAS_H
#define TFC_OPS_LINEAR_BIAS_H

#include "tensor/tensor_impl.h"

/*
 * out2 [M, N] = a [M, K] · w [K, N] + b [N] (b NULL: no bias; K = 0: the bias
 * rows or zeros). out2 is contiguous; a and w are the GEMM's operands in any
 * dtype tfc_matmul_into takes for out2's. Where the backend fuses a bias
 * epilogue (tfc_backend_gemm_fuses, CUDA) one GEMM adds b; elsewhere (the CPU) b is
 * written into every row and the GEMM accumulates onto it (beta = 1): the
 * same sum without a second tensor or pass. Errors name fn.
 */
tfc_status tfc_linear_bias_forward(const char *fn, tfc_tensor *out2, const tfc_tensor *a, const tfc_tensor *w,
                                   const tfc_tensor *b);

/*
 * *db [N] (new, dy2's dtype) = Σ_rows dy2 [rows, N] through the backend's
 * bias_grad entry (dy2 compacted first when its columns are strided).
 * Errors name fn.
 */
tfc_status tfc_linear_bias_grad(const char *fn, const tfc_tensor *dy2, tfc_tensor **db);

#endif
