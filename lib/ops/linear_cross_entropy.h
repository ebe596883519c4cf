/* Internals of tfc_linear_cross_entropy: its autocast door, and what tests reach. */
#ifndef TFC_OPS_LINEAR_CROSS_ENTROPY_H
#define TFC_OPS_LINEAR_CROSS_ENTROPY_H

#include <stdint.h>

#include "tfcore/ops.h"

/*
 * Force the rows per chunk (rows >= 1), or go back to the size chosen from
 * the vocabulary (rows == 0). Returns the previous setting. For tests, so
 * small shapes cross chunk boundaries; process-wide and not synchronised:
 * call it while no tfc_linear_cross_entropy runs.
 */
int64_t tfc_linear_cross_entropy_set_chunk_rows(int64_t rows);

/*
 * The bf16 autocast LM head and its loss in the fused pass (the GPT's
 * loss-only forward under tfc_gpt_set_autocast): z = bf16(h) · bf16(w)ᵀ with
 * f32 sums, the loss in f32, ∂loss/∂z rounded to bf16 before the gradient
 * GEMMs; so tfc_linear_bf16 + tfc_cross_entropy without the [N, V] logits.
 * h [N, C] and w [V, C] are f32 (recorded on g: their gradients are f32),
 * w_bf16 [V, C] is w's bf16 copy (the model's), targets as
 * tfc_linear_cross_entropy's. Runs where the device has the fused rows
 * entry (the CPU) and its GEMM takes the autocast operands: bf16 values in
 * f32 storage where its bf16 GEMM widens to f32, bf16 tensors where it
 * multiplies bf16 (the CPU on AMX tiles), as tfc_backend_bf16_operands
 * answers; then *fused = 1 and *loss a new scalar. Elsewhere (CUDA)
 * *fused = 0, *loss untouched and TFC_OK: the caller composes the unfused
 * head. Errors as
 * tfc_linear_cross_entropy's, naming tfc_linear_cross_entropy_autocast,
 * plus TFC_ERR_DTYPE for non-f32 h and TFC_ERR_SHAPE for a w_bf16 that is
 * not bf16 of w's shape.
 */
tfc_status tfc_linear_cross_entropy_autocast(tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w,
                                             const tfc_tensor *w_bf16, const tfc_tensor *targets, int64_t ignore_index,
                                             int *fused, tfc_tensor **loss);

#endif
