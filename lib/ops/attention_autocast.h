/*
 * Attention as bf16 autocast runs it (tfc_gpt_set_autocast): on a device
 * whose attention computes in bf16 under autocast (tfc_backend_autocast_dtype:
 * CUDA), q, k, v [B,H,T,D]
 * (f32) are rounded to bf16, the device's bf16 attention runs (CUDA's
 * tensor-core FlashAttention-2 kernels for D 64 and 128: f32 accumulation,
 * the probabilities rounded to bf16 for p·v), and the output and, in
 * backward, the gradients of q, k, v come back as f32; elsewhere it is
 * tfc_attention in f32. Arguments, errors and recording as tfc_attention.
 */
#ifndef TFC_OPS_ATTENTION_AUTOCAST_H
#define TFC_OPS_ATTENTION_AUTOCAST_H

#include "tfcore/ops.h"

tfc_status tfc_attention_autocast(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                  int32_t causal, double scale, tfc_tensor **out);
/* The same around tfc_attention_ex: k, v with Hkv heads dividing q's, opts as there (NULL: no window). */
tfc_status tfc_attention_autocast_ex(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                     int32_t causal, double scale, const tfc_attention_options *opts, tfc_tensor **out);

#endif
