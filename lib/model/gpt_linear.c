/*
 * How the block Linears run: one small strategy per way (gpt_impl.h's
 * gpt_linear_ops), chosen for every Linear by tfc_gpt_choose_linears when
 * the model's mode changes, so a forward calls l->ops->run and never asks
 * which mode it is in:
 *
 *   f32        tfc_linear: y = x · w + b, one fused op
 *   autocast   tfc_linear_bf16 with the slot's cached bf16 copy of w (gpt_autocast.c)
 *   quantized  tfc_qlinear on the int8/int4 handle (inference only)
 *   LoRA       any of those, then + scale·(x·Aᵀ)·Bᵀ (gpt_lora.c)
 */
#include "core/error.h"
#include "model/gpt_impl.h"

static tfc_status run_f32(const tfc_gpt *m, tfc_graph *g, const gpt_linear *l, const tfc_tensor *x, tfc_tensor **y) {
    (void)m;
    return tfc_linear(g, x, l->w, l->b, y);
}

static tfc_status run_autocast(const tfc_gpt *m, tfc_graph *g, const gpt_linear *l, const tfc_tensor *x,
                               tfc_tensor **y) {
    return tfc_gpt_autocast_linear(m, g, l, x, y);
}

/* tfc_gpt_forward refuses a graph for a quantized model, so g is NULL here */
static tfc_status run_quant(const tfc_gpt *m, tfc_graph *g, const gpt_linear *l, const tfc_tensor *x, tfc_tensor **y) {
    (void)m;
    return tfc_qlinear(g, x, l->q, l->b, y);
}

/* The adapter over the base strategy: B = 0 makes the update exactly 0, so a fresh adapter is the base bit for bit. */
static tfc_status run_lora(const tfc_gpt *m, tfc_graph *g, const gpt_linear *l, const tfc_tensor *x, tfc_tensor **y) {
    tfc_tensor *base = NULL;
    TFC_TRY(l->base->run(m, g, l, x, &base));
    tfc_status s = tfc_gpt_lora_apply(g, l->lora, x, base, y);
    tfc_tensor_release(base);
    return s;
}

static const gpt_linear_ops F32 = {"f32", run_f32};
static const gpt_linear_ops AUTOCAST = {"bf16 autocast", run_autocast};
static const gpt_linear_ops QUANT = {"quantized", run_quant};
static const gpt_linear_ops LORA = {"LoRA", run_lora};

void tfc_gpt_choose_linears(tfc_gpt *m) {
    for (int32_t layer = 0; layer < m->cfg.n_layer; layer++)
        for (int j = 0; j < GPT_N_LINEAR; j++) {
            gpt_linear *l = &m->blocks[layer].lin[j];
            l->base = l->q ? &QUANT : m->autocast ? &AUTOCAST : &F32;
            l->ops = l->lora ? &LORA : l->base;
        }
}
