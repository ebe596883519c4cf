/* The GEMM door of the ops layer, shared by matmul and linear. */
#ifndef TFC_OPS_MATMUL_INTO_H
#define TFC_OPS_MATMUL_INTO_H

#include "tensor/tensor_impl.h"

/*
 * out (contiguous, [batch..., M, N]) = a · b + beta · out, with a [.., M, K]
 * and b [.., K, N] (at least 2-D) whose batch dims broadcast to out's.
 * Transposed operands go to BLAS as flags; operands whose last two dims
 * BLAS cannot address are compacted first. No graph, no argument checks;
 * fn names the public op in messages. a and b share a dtype, out has it too,
 * or is f32 when a and b are bf16 (f32 accumulation kept unrounded).
 */
tfc_status tfc_matmul_into(const char *fn, tfc_tensor *out, const tfc_tensor *a, const tfc_tensor *b, double beta);

/*
 * out = a · b (beta 0) where out may be empty (nothing to do) and the inner
 * dim may be 0 (out zero-filled, as the empty sum): the GEMMs of a Linear
 * and its backward, whose shapes a caller may make degenerate.
 */
tfc_status tfc_matmul_into_or_zero(const char *fn, tfc_tensor *out, const tfc_tensor *a, const tfc_tensor *b);

/*
 * The same with bias [N] (a tensor of out's dtype on out's device, compacted
 * here if it is a view) added to every row of out by the GEMM's epilogue,
 * or none when bias is NULL. Only for a backend that fuses it
 * (tfc_backend_gemm_fuses(b, TFC_GEMM_EPI_BIAS)).
 */
tfc_status tfc_matmul_into_bias(const char *fn, tfc_tensor *out, const tfc_tensor *a, const tfc_tensor *b, double beta,
                                const tfc_tensor *bias);

/* 1 when an f32 GEMM may use TF32 under tfc_get_float32_matmul_precision() (f32 operands only). */
int tfc_gemm_allow_tf32(tfc_dtype dtype);

#endif
