/*
 * Quantized inference for the GPT: the block Linear layers as tfc_qweight
 * handles (include/tfcore/quant.h). Which layers: the table's block Linear
 * rows (gpt_params.c). A layer with a handle runs the quantized strategy
 * (gpt_linear.c); gpt_weights.c saves and loads the handles' arrays.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/gpt_impl.h"

/* Whether parameter i is one of the weights tfc_gpt_quantize replaces: a block Linear's (the table's column). */
static int is_quantized_param(const tfc_gpt *m, int32_t i) { return m->rows[i]->linear >= 0; }

static int is_head_param(const tfc_gpt *m, int32_t i) { return m->fields[i] == &((tfc_gpt *)m)->lm_head; }

/* Drop the parameters `which` picks from the parameter list (keeping the order of the rest). */
static void drop_params(tfc_gpt *m, int (*which)(const tfc_gpt *, int32_t)) {
    int32_t kept = 0;
    for (int32_t i = 0; i < m->n_params; i++) {
        if (which(m, i)) {
            *m->fields[i] = NULL;
            free(m->names[i]);
            tfc_tensor_release(m->params[i]);
            continue;
        }
        m->names[kept] = m->names[i];
        m->params[kept] = m->params[i];
        m->fields[kept] = m->fields[i];
        m->rows[kept] = m->rows[i];
        kept++;
    }
    m->n_params = kept;
}

void tfc_gpt_install_head(tfc_gpt *m, tfc_qweight *q) {
    m->head_q = q;
    drop_params(m, is_head_param);
    tfc_gpt_choose_linears(m);
}

tfc_status tfc_gpt_install_qweights(tfc_gpt *m, tfc_qformat format, int32_t group_size, tfc_qweight **qs,
                                    tfc_status s) {
    if (s != TFC_OK) {
        for (int32_t i = 0; i < m->cfg.n_layer * GPT_N_LINEAR; i++) tfc_qweight_release(qs[i]);
        free(qs);
        return s;
    }
    for (int32_t l = 0; l < m->cfg.n_layer; l++)
        for (int j = 0; j < GPT_N_LINEAR; j++) m->blocks[l].lin[j].q = qs[l * GPT_N_LINEAR + j];
    drop_params(m, is_quantized_param);
    m->qformat = format;
    m->qgroup = group_size;
    free(qs);
    tfc_gpt_choose_linears(m);
    return TFC_OK;
}

static const char *format_name(tfc_qformat f) { return f == TFC_QFORMAT_INT8 ? "int8" : "int4"; }

const char *tfc_gpt_quant_desc(const tfc_gpt *m, char *buf, size_t n) {
    if (!m->head_q)
        snprintf(buf, n, "%s", m->qformat ? format_name(m->qformat) : "f32");
    else if (m->qformat)
        snprintf(buf, n, "%s, head %s", format_name(m->qformat), format_name(tfc_qweight_format(m->head_q)));
    else
        snprintf(buf, n, "f32 blocks, head %s", format_name(tfc_qweight_format(m->head_q)));
    return buf;
}

/* The checks tfc_gpt_quantize and tfc_gpt_quantize_head share: format, group size against n_embd, dtype, device. */
static tfc_status check_quantizable(const char *fn, const tfc_gpt *m, tfc_qformat format, int32_t group_size,
                                    const char *why_c) {
    if (format != TFC_QFORMAT_INT8 && format != TFC_QFORMAT_INT4)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: format is %d, need TFC_QFORMAT_INT8 (%d) or TFC_QFORMAT_INT4 (%d)", fn,
                       (int)format, (int)TFC_QFORMAT_INT8, (int)TFC_QFORMAT_INT4);
    const int32_t C = m->cfg.n_embd;
    if (format == TFC_QFORMAT_INT8 && group_size != 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: group_size is %d; int8 has one scale per output feature: pass 0", fn,
                       (int)group_size);
    if (format == TFC_QFORMAT_INT4 && (group_size <= 0 || group_size % 32 != 0 || C % group_size != 0))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: group_size is %d; int4 needs a positive multiple of 32 that divides n_embd %d (%s)", fn,
                       (int)group_size, (int)C, why_c);
    if (m->cfg.dtype != TFC_DTYPE_F32)
        return tfc_err(TFC_ERR_DTYPE, "%s: the model is %s; quantization starts from an f32 model", fn,
                       tfc_dtype_name(m->cfg.dtype));
    if (tfc_tensor_device_type(m->wte) != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the model is on cuda:%d; quantized weights are CPU-only: move it to the CPU first", fn,
                       (int)tfc_tensor_device_index(m->wte));
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_quantize(tfc_gpt *m, tfc_qformat format, int32_t group_size) {
    const char *fn = "tfc_gpt_quantize";
    TFC_CHECK_NOT_NULL(fn, m);
    if (m->qformat)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: the model is already quantized (%s); load the f32 checkpoint again to change format", fn,
                       format_name(m->qformat));
    TFC_TRY(check_quantizable(fn, m, format, group_size, "the shortest input dim of the quantized layers"));
    const int32_t n = m->cfg.n_layer * GPT_N_LINEAR;
    tfc_qweight **qs = calloc((size_t)n, sizeof *qs);
    if (!qs) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        const int32_t l = i / GPT_N_LINEAR;
        const int j = i % GPT_N_LINEAR;
        if (j >= m->arch.table->n_linear) continue; /* a slot the architecture does not use */
        const gpt_param_row *r = tfc_gpt_linear_row(&m->arch, j);
        /* stored [in, out] (Conv1D) where the handle is nn.Linear's [out, in]: the table's transpose column */
        s = tfc_quantize(m->blocks[l].lin[j].w, format, group_size, r->transpose ? TFC_QUANT_IN_OUT : 0, &qs[i]);
        if (s != TFC_OK) {
            char why[512], name[128];
            snprintf(why, sizeof why, "%s", tfc_last_error());
            s = tfc_err(s, "%s: %s.weight: %s", fn, tfc_gpt_module_name(&m->arch, l, j, name, sizeof name), why);
        }
    }
    return tfc_gpt_install_qweights(m, format, group_size, qs, s);
}

TFC_API tfc_status tfc_gpt_quantize_head(tfc_gpt *m, tfc_qformat format, int32_t group_size) {
    const char *fn = "tfc_gpt_quantize_head";
    TFC_CHECK_NOT_NULL(fn, m);
    if (m->head_q)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: the LM head is already quantized (%s); load the f32 checkpoint again to change format", fn,
                       format_name(tfc_qweight_format(m->head_q)));
    TFC_TRY(check_quantizable(fn, m, format, group_size, "the head's input dim"));
    /* the head is [V, C] = [out, in] (nn.Linear's layout, tied or not): no TFC_QUANT_IN_OUT */
    const char *name = m->lm_head ? "lm_head.weight" : "transformer.wte.weight (tied LM head)";
    tfc_qweight *q = NULL;
    tfc_status s = tfc_quantize(m->lm_head ? m->lm_head : m->wte, format, group_size, 0, &q);
    if (s != TFC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        return tfc_err(s, "%s: %s: %s", fn, name, why);
    }
    tfc_gpt_install_head(m, q);
    return TFC_OK;
}

TFC_API tfc_qformat tfc_gpt_head_quant_format(const tfc_gpt *m) {
    return m && m->head_q ? tfc_qweight_format(m->head_q) : (tfc_qformat)0;
}

TFC_API int32_t tfc_gpt_head_quant_group_size(const tfc_gpt *m) {
    return !m ? -1 : m->head_q ? tfc_qweight_group_size(m->head_q) : 0;
}

TFC_API tfc_qformat tfc_gpt_quant_format(const tfc_gpt *m) { return m ? m->qformat : (tfc_qformat)0; }

TFC_API int32_t tfc_gpt_quant_group_size(const tfc_gpt *m) { return m ? m->qgroup : -1; }
