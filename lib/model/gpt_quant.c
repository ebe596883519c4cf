/*
 * Quantized inference for the GPT: the block Linear layers as tfc_qweight
 * handles (include/tfcore/quant.h). The forward pass (gpt.c) picks
 * tfc_qlinear for a layer that has a handle; gpt_weights.c saves and loads
 * the handles' arrays.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/gpt_impl.h"

const gpt_qlinear tfc_gpt_qlinears[GPT_N_QLINEAR] = {
    {"attn.c_attn.weight", offsetof(gpt_block, attn_w), offsetof(gpt_block, attn_q)},
    {"attn.c_proj.weight", offsetof(gpt_block, attn_proj_w), offsetof(gpt_block, attn_proj_q)},
    {"mlp.c_fc.weight", offsetof(gpt_block, fc_w), offsetof(gpt_block, fc_q)},
    {"mlp.c_proj.weight", offsetof(gpt_block, mlp_proj_w), offsetof(gpt_block, mlp_proj_q)},
};

tfc_tensor **tfc_gpt_block_weight(tfc_gpt *m, int32_t l, int j) {
    return (tfc_tensor **)((char *)&m->blocks[l] + tfc_gpt_qlinears[j].weight);
}

tfc_qweight **tfc_gpt_block_qweight(const tfc_gpt *m, int32_t l, int j) {
    return (tfc_qweight **)((char *)&m->blocks[l] + tfc_gpt_qlinears[j].qweight);
}

/* Whether a parameter's field is one of the weights tfc_gpt_quantize replaces. */
static int is_quantized_field(const tfc_gpt *m, tfc_tensor **field) {
    const char *p = (const char *)field, *b = (const char *)m->blocks;
    if (p < b || p >= (const char *)(m->blocks + m->cfg.n_layer)) return 0;
    const size_t off = (size_t)(p - b) % sizeof(gpt_block);
    for (int j = 0; j < GPT_N_QLINEAR; j++)
        if (off == tfc_gpt_qlinears[j].weight) return 1;
    return 0;
}

tfc_status tfc_gpt_install_qweights(tfc_gpt *m, tfc_qformat format, int32_t group_size, tfc_qweight **qs,
                                    tfc_status s) {
    if (s != TFC_OK) {
        for (int32_t i = 0; i < m->cfg.n_layer * GPT_N_QLINEAR; i++) tfc_qweight_release(qs[i]);
        free(qs);
        return s;
    }
    for (int32_t l = 0; l < m->cfg.n_layer; l++)
        for (int j = 0; j < GPT_N_QLINEAR; j++) *tfc_gpt_block_qweight(m, l, j) = qs[l * GPT_N_QLINEAR + j];
    /* drop the f32 weights from the parameter list, keeping the order of the rest */
    int32_t kept = 0;
    for (int32_t i = 0; i < m->n_params; i++) {
        if (is_quantized_field(m, m->fields[i])) {
            *m->fields[i] = NULL;
            free(m->names[i]);
            tfc_tensor_release(m->params[i]);
            continue;
        }
        m->names[kept] = m->names[i];
        m->params[kept] = m->params[i];
        m->fields[kept] = m->fields[i];
        m->decays[kept] = m->decays[i];
        kept++;
    }
    m->n_params = kept;
    m->qformat = format;
    m->qgroup = group_size;
    free(qs);
    return TFC_OK;
}

static const char *format_name(tfc_qformat f) { return f == TFC_QFORMAT_INT8 ? "int8" : "int4"; }

TFC_API tfc_status tfc_gpt_quantize(tfc_gpt *m, tfc_qformat format, int32_t group_size) {
    const char *fn = "tfc_gpt_quantize";
    TFC_CHECK_NOT_NULL(fn, m);
    if (m->qformat)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: the model is already quantized (%s); load the f32 checkpoint again to change format", fn,
                       format_name(m->qformat));
    if (format != TFC_QFORMAT_INT8 && format != TFC_QFORMAT_INT4)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: format is %d, need TFC_QFORMAT_INT8 (%d) or TFC_QFORMAT_INT4 (%d)", fn,
                       (int)format, (int)TFC_QFORMAT_INT8, (int)TFC_QFORMAT_INT4);
    const int32_t C = m->cfg.n_embd;
    if (format == TFC_QFORMAT_INT8 && group_size != 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: group_size is %d; int8 has one scale per output feature: pass 0", fn,
                       (int)group_size);
    if (format == TFC_QFORMAT_INT4 && (group_size <= 0 || group_size % 32 != 0 || C % group_size != 0))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: group_size is %d; int4 needs a positive multiple of 32 that divides n_embd %d (the "
                       "shortest input dim of the quantized layers)",
                       fn, (int)group_size, (int)C);
    if (m->cfg.dtype != TFC_DTYPE_F32)
        return tfc_err(TFC_ERR_DTYPE, "%s: the model is %s; quantization starts from an f32 model", fn,
                       tfc_dtype_name(m->cfg.dtype));
    if (tfc_tensor_device_type(m->wte) != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the model is on cuda:%d; quantized weights are CPU-only: move it to the CPU first", fn,
                       (int)tfc_tensor_device_index(m->wte));
    const int32_t n = m->cfg.n_layer * GPT_N_QLINEAR;
    tfc_qweight **qs = calloc((size_t)n, sizeof *qs);
    if (!qs) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        const int32_t l = i / GPT_N_QLINEAR;
        const int j = i % GPT_N_QLINEAR;
        s = tfc_quantize(*tfc_gpt_block_weight(m, l, j), format, group_size, TFC_QUANT_IN_OUT, &qs[i]);
        if (s != TFC_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", tfc_last_error());
            s = tfc_err(s, "%s: transformer.h.%d.%s: %s", fn, (int)l, tfc_gpt_qlinears[j].name, why);
        }
    }
    return tfc_gpt_install_qweights(m, format, group_size, qs, s);
}

TFC_API tfc_qformat tfc_gpt_quant_format(const tfc_gpt *m) { return m ? m->qformat : (tfc_qformat)0; }

TFC_API int32_t tfc_gpt_quant_group_size(const tfc_gpt *m) { return m ? m->qgroup : -1; }
