/*
 * Each format's wanted tensors, from the parameter table (gpt_want.h): the
 * lists the loader contract (io/tensor_contract.h) holds a file against.
 * Names, shapes and orders all come from the table's rows; this file only
 * says how each format spells and lays them out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_want.h"

/* The table's shape rule of row r as sizes: its ndim. */
static int32_t row_dims(const gpt_param_row *r, const gpt_arch *a, int64_t *dims) {
    dims[0] = tfc_gpt_dim_size(r->shape[0], a);
    if (r->shape[1] == GPT_D_NONE) return 1;
    dims[1] = tfc_gpt_dim_size(r->shape[1], a);
    return 2;
}

tfc_status tfc_gpt_want_params(const tfc_gpt *m, tfc_contract *c, uint32_t dtypes, int bare, int skip_linear,
                               int skip_head, const char *head_hint) {
    static const char pre[] = "transformer.";
    for (int32_t i = 0; i < m->n_params; i++) {
        const gpt_param_row *r = m->rows[i];
        if ((skip_linear && r->linear >= 0) || (skip_head && r->when == GPT_IF_UNTIED)) continue;
        tfc_want w = TFC_WANT_INIT;
        w.name = m->names[i];
        w.alias = bare && strncmp(w.name, pre, sizeof pre - 1) == 0 ? w.name + sizeof pre - 1 : NULL;
        w.ndim = row_dims(r, &m->arch, w.dims);
        w.dtypes = dtypes;
        w.dest = m->params[i];
        if (r->when == GPT_IF_UNTIED) w.hint = head_hint;
        TFC_TRY(tfc_contract_want(c, &w));
    }
    return TFC_OK;
}

tfc_status tfc_gpt_want_config(const tfc_gpt_config *cfg, tfc_contract *c, uint32_t dtypes, int bare,
                               const char *head_hint) {
    static const char pre[] = "transformer.";
    gpt_arch a;
    gpt_arch_of(cfg, &a);
    const int64_t n = tfc_gpt_list_params(cfg, NULL, 0);
    gpt_param_at *at = calloc((size_t)n + 1, sizeof *at);
    if (!at) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    tfc_gpt_list_params(cfg, at, n);
    tfc_status s = TFC_OK;
    for (int64_t i = 0; i < n && s == TFC_OK; i++) {
        char name[160];
        tfc_want w = TFC_WANT_INIT;
        w.name = tfc_gpt_param_name(at[i], name, sizeof name);
        w.alias = bare && strncmp(w.name, pre, sizeof pre - 1) == 0 ? w.name + sizeof pre - 1 : NULL;
        w.ndim = row_dims(at[i].row, &a, w.dims);
        w.dtypes = dtypes;
        if (at[i].row->when == GPT_IF_UNTIED) w.hint = head_hint;
        s = tfc_contract_want(c, &w);
    }
    free(at);
    return s;
}

tfc_status tfc_gpt_want_set_dest(const tfc_gpt *m, tfc_contract *c) {
    for (int32_t i = 0; i < m->n_params; i++) {
        if (i >= c->n_want || strcmp(c->want[i].name, m->names[i]) != 0)
            return tfc_err(TFC_ERR_INTERNAL, "%s: want %d is not the model's parameter %s", c->fn, (int)i, m->names[i]);
        c->want[i].dest = m->params[i];
    }
    return TFC_OK;
}

tfc_status tfc_gpt_want_hf_extras(const tfc_gpt_config *cfg, tfc_contract *c, const char *tied_hint) {
    /*
     * buffers older transformers saved with each block, consumed, never read: GPT-2's causal masks, the Llama
     * family's rotary inv_freq (recomputed from config.json, which is what transformers does too)
     */
    static const char *const gpt2_buffers[2] = {"attn.bias", "attn.masked_bias"};
    static const char *const llama_buffers[1] = {"self_attn.rotary_emb.inv_freq"};
    gpt_arch a;
    gpt_arch_of(cfg, &a);
    const int gpt2 = cfg->arch == TFC_GPT_ARCH_GPT2;
    const char *const *buffers = gpt2 ? gpt2_buffers : llama_buffers;
    for (int32_t l = 0; l < cfg->n_layer; l++)
        for (int k = 0; k < (gpt2 ? 2 : 1); k++) {
            char name[128], alias[128];
            snprintf(name, sizeof name, "%s%d.%s", a.table->block_prefix, (int)l, buffers[k]);
            snprintf(alias, sizeof alias, "h.%d.%s", (int)l, buffers[k]);
            tfc_want w = TFC_WANT_INIT;
            w.name = name;
            w.alias = gpt2 ? alias : NULL;
            w.ndim = -1;
            w.presence = TFC_WANT_IGNORED;
            TFC_TRY(tfc_contract_want(c, &w));
        }
    if (!cfg->tie_weights) return TFC_OK;
    /* a tied model's stored head (older exports keep both) is wte's copy; one that differs is an untied head */
    const char *wte_name = a.table->rows[0].name; /* wte: every table's first row */
    int32_t wte = -1;
    for (int32_t i = 0; i < c->n_want && wte < 0; i++)
        if (strcmp(c->want[i].name, wte_name) == 0) wte = i;
    if (wte < 0) return tfc_err(TFC_ERR_INTERNAL, "%s: no wanted %s to tie the head to", c->fn, wte_name);
    tfc_want w = c->want[wte];
    w.name = "lm_head.weight";
    w.alias = NULL;
    w.presence = TFC_WANT_OPTIONAL;
    w.same_as = wte;
    w.dest = NULL;
    w.hint = tied_hint;
    return tfc_contract_want(c, &w);
}

int32_t tfc_gpt_llmc_dims(const tfc_gpt_config *cfg, int32_t vp, const gpt_param_row *r, int64_t *dims) {
    gpt_arch a;
    gpt_arch_of(cfg, &a);
    /* llm.c holds a Linear as nn.Linear's [out, in], the table's [in, out] transposed */
    const gpt_dim first = r->transpose ? r->shape[1] : r->shape[0], second = r->transpose ? r->shape[0] : r->shape[1];
    int32_t nd = 0;
    if (r->per_block) dims[nd++] = cfg->n_layer;
    dims[nd++] = first == GPT_D_VOCAB ? vp : tfc_gpt_dim_size(first, &a);
    if (second != GPT_D_NONE) dims[nd++] = tfc_gpt_dim_size(second, &a);
    return nd;
}

tfc_status tfc_gpt_want_llmc(const tfc_gpt_config *cfg, tfc_contract *c, tfc_dtype dtype) {
    int32_t vp;
    TFC_TRY(tfc_contract_add_symbol(c, "Vp", cfg->vocab_size, INT32_MAX, &vp));
    const gpt_param_row *rows[32];
    const int32_t n = tfc_gpt_llmc_rows(rows, 32);
    for (int32_t i = 0; i < n && i < 32; i++) {
        tfc_want w = TFC_WANT_INIT;
        w.name = rows[i]->llmc;
        w.ndim = tfc_gpt_llmc_dims(cfg, 0, rows[i], w.dims);
        if (rows[i]->shape[0] == GPT_D_VOCAB) w.dims[rows[i]->per_block ? 1 : 0] = TFC_DIM_SYM(vp);
        w.dtypes = TFC_DTYPE_BIT(dtype);
        TFC_TRY(tfc_contract_want(c, &w));
    }
    return TFC_OK;
}

const char *tfc_gpt_lora_key(const gpt_arch *a, int32_t layer, int j, int is_b, char *buf, size_t n) {
    char module[128];
    snprintf(buf, n, "base_model.model.%s.lora_%c.weight", tfc_gpt_module_name(a, layer, j, module, sizeof module),
             is_b ? 'B' : 'A');
    return buf;
}

tfc_status tfc_gpt_want_lora(const tfc_gpt *m, tfc_contract *c, int32_t *rank) {
    const int n_lin = m->arch.table->n_linear;
    int64_t hi = INT64_MAX, in[GPT_N_LINEAR], out[GPT_N_LINEAR];
    for (int j = 0; j < n_lin; j++) {
        tfc_gpt_linear_dims(&m->arch, j, &in[j], &out[j]);
        if (in[j] < hi) hi = in[j];
        if (out[j] < hi) hi = out[j];
    }
    TFC_TRY(tfc_contract_add_symbol(c, "r", 1, hi, rank));
    for (int32_t l = 0; l < m->cfg.n_layer; l++)
        for (int j = 0; j < n_lin; j++)
            for (int is_b = 0; is_b < 2; is_b++) {
                char name[160];
                tfc_want w = TFC_WANT_INIT;
                w.name = tfc_gpt_lora_key(&m->arch, l, j, is_b, name, sizeof name);
                w.ndim = 2;
                /* PEFT: A is nn.Linear(in, r)'s weight [r, in], B nn.Linear(r, out)'s [out, r] */
                w.dims[0] = is_b ? out[j] : TFC_DIM_SYM(*rank);
                w.dims[1] = is_b ? TFC_DIM_SYM(*rank) : in[j];
                w.dtypes = TFC_DTYPES_FLOAT;
                w.presence = TFC_WANT_OPTIONAL;
                w.group = l * n_lin + j + 1;
                TFC_TRY(tfc_contract_want(c, &w));
            }
    return TFC_OK;
}
