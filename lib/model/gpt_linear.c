/*
 * How the block Linears run: one small strategy per way (gpt_impl.h's
 * gpt_linear_ops), chosen for every Linear by tfc_gpt_choose_linears when
 * the model's mode changes, so a forward calls l->ops->run and never asks
 * which mode it is in:
 *
 *   f32        tfc_linear: y = x · w + b, one fused op (w [out, in]: its transposed view)
 *   autocast   tfc_linear_bf16 with the slot's cached bf16 copy of w (gpt_autocast.c)
 *   quantized  tfc_qlinear on the int8/int4 handle (inference only)
 *   LoRA       any of those, then + scale·(x·Aᵀ)·Bᵀ (gpt_lora.c)
 *
 * and the LM head's (gpt_head_ops), chosen with them:
 *
 *   f32        logits h · Wᵀ; loss by tfc_linear_cross_entropy (no [N, V] logits)
 *   autocast   the bf16 head (gpt_autocast.c); loss fused where the device runs it
 *   quantized  tfc_qlinear on the int8/int4 head, then the cross-entropy
 */
#include "core/error.h"
#include "model/gpt_impl.h"
#include "tensor/tensor_impl.h"

static tfc_status run_f32(const tfc_gpt *m, tfc_graph *g, const gpt_linear *l, const tfc_tensor *x, tfc_tensor **y) {
    (void)m;
    if (l->in_out) return tfc_linear(g, x, l->w, l->b, y);
    /* w [out, in] (nn.Linear's): a transposed view, which tfc_linear hands to the GEMM as a flag */
    tfc_tensor *wt = NULL;
    tfc_status s = tfc_transpose(g, l->w, 0, 1, &wt);
    if (s == TFC_OK) s = tfc_linear(g, x, wt, l->b, y);
    tfc_tensor_release(wt);
    return s;
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

static tfc_status head_f32(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, int padded, tfc_tensor **lg) {
    (void)padded;
    tfc_tensor *wt = NULL;
    tfc_status s = tfc_transpose(g, tfc_gpt_head_weight(m), 0, 1, &wt); /* [C, V] */
    if (s == TFC_OK) s = tfc_matmul(g, h, wt, lg);
    tfc_tensor_release(wt);
    return s;
}

static tfc_status loss_f32(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *targets,
                           tfc_tensor **loss) {
    return tfc_linear_cross_entropy(g, h, tfc_gpt_head_weight(m), targets, TFC_GPT_IGNORE_INDEX, loss);
}

static tfc_status head_autocast(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, int padded, tfc_tensor **lg) {
    return tfc_gpt_autocast_head(m, g, h, tfc_gpt_head_weight(m), padded, lg);
}

/* tfc_gpt_forward refuses a graph for a quantized model; the head never records */
static tfc_status head_quant(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, int padded, tfc_tensor **lg) {
    (void)g;
    (void)padded;
    return tfc_qlinear(NULL, h, m->head_q, NULL, lg);
}

/* The loss of a head with no fused kernel: its (possibly padded) logits, then the cross-entropy. */
static tfc_status loss_composed(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *targets,
                                tfc_tensor **loss) {
    tfc_tensor *lg = NULL;
    tfc_status s = m->head->logits(m, g, h, 1, &lg);
    if (s == TFC_OK && tfc_tensor_dim(lg, 1) > m->cfg.vocab_size &&
        !tfc_storage_range_within(targets, m->cfg.vocab_size, TFC_GPT_IGNORE_INDEX)) {
        /* targets not known (from the host) to be below V: the cross-entropy of the unpadded view checks them
         * against V, not against the padded width */
        tfc_tensor *v = NULL;
        s = tfc_narrow(g, lg, 1, 0, m->cfg.vocab_size, &v);
        tfc_tensor_release(lg);
        lg = v;
    }
    if (s == TFC_OK) s = tfc_cross_entropy(g, lg, targets, TFC_GPT_IGNORE_INDEX, loss);
    tfc_tensor_release(lg);
    return s;
}

static tfc_status loss_quant(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *targets,
                             tfc_tensor **loss) {
    (void)g;
    return loss_composed(m, NULL, h, targets, loss);
}

/* The fused bf16 head and loss where the device runs it (the CPU), else composed. */
static tfc_status loss_autocast(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *targets,
                                tfc_tensor **loss) {
    int fused = 0;
    TFC_TRY(tfc_gpt_autocast_loss(m, g, h, tfc_gpt_head_weight(m), targets, TFC_GPT_IGNORE_INDEX, &fused, loss));
    return fused ? TFC_OK : loss_composed(m, g, h, targets, loss);
}

static const gpt_head_ops HEAD_F32 = {"f32", head_f32, loss_f32};
static const gpt_head_ops HEAD_AUTOCAST = {"bf16 autocast", head_autocast, loss_autocast};
static const gpt_head_ops HEAD_QUANT = {"quantized", head_quant, loss_quant};

void tfc_gpt_choose_linears(tfc_gpt *m) {
    m->head = m->head_q ? &HEAD_QUANT : m->autocast ? &HEAD_AUTOCAST : &HEAD_F32;
    for (int32_t layer = 0; layer < m->cfg.n_layer; layer++)
        for (int j = 0; j < m->arch.table->n_linear; j++) {
            gpt_linear *l = &m->blocks[layer].lin[j];
            l->base = l->q ? &QUANT : m->autocast ? &AUTOCAST : &F32;
            l->ops = l->lora ? &LORA : l->base;
        }
}
