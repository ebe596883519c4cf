/*
 * The widths a model config implies, resolved from its 0 defaults as
 * include/tfcore/gpt.h documents them (tfc_gpt_config.n_kv_head,
 * .mlp_hidden, .sliding_window), for the CLI's arithmetic on configs that
 * have not built a model yet: the shape flags (train_shape.c), the FLOP
 * count (train_mfu.c) and the memory plan (train_plan.c). A built model's
 * tfc_gpt_get_config has them resolved already; these give the same values.
 */
#ifndef TFC_TOOLS_MODEL_DIMS_H
#define TFC_TOOLS_MODEL_DIMS_H

#include <stdint.h>

#include "tfcore/gpt.h"

/* Whether c is one of the Llama family (RMSNorm, RoPE, SwiGLU, grouped-query attention). */
static inline int dims_is_llama(const tfc_gpt_config *c) { return c->arch != TFC_GPT_ARCH_GPT2; }

/* Key/value heads: n_kv_head, 0 meaning n_head (GPT-2 always has n_head). */
static inline int64_t dims_kv_heads(const tfc_gpt_config *c) {
    return dims_is_llama(c) && c->n_kv_head > 0 ? c->n_kv_head : c->n_head;
}

/* The width of k and v, Hkv·D with D = n_embd / n_head. */
static inline int64_t dims_kv_width(const tfc_gpt_config *c) {
    return dims_kv_heads(c) * (c->n_head > 0 ? c->n_embd / c->n_head : 0);
}

/*
 * The MLP's inner width F: mlp_hidden when set; else GPT-2's 4·C, or the
 * Llama family's 8·C/3 rounded up to a multiple of 32 (gpt.h's rule, LLaMA's).
 */
static inline int64_t dims_mlp_hidden(const tfc_gpt_config *c) {
    if (c->mlp_hidden > 0) return c->mlp_hidden;
    if (!dims_is_llama(c)) return 4 * (int64_t)c->n_embd;
    return (8 * (int64_t)c->n_embd / 3 + 31) / 32 * 32;
}

/* The keys a query at position T-1 attends to: T, or the sliding window when it is shorter. */
static inline int64_t dims_attended(const tfc_gpt_config *c, int64_t T) {
    return c->sliding_window > 0 && c->sliding_window < T ? c->sliding_window : T;
}

#endif
