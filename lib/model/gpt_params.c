/*
 * The GPT's parameters, written once. Each row of `rows` is one parameter
 * (llm.c's fill_in_parameter_sizes plays this part there): its Hugging Face
 * name, the field the forward pass reads it from, its shape in terms of
 * the config, its GPT-2 init, when it exists and whether it takes weight
 * decay. Construction, the list tfc_gpt_params hands out (checkpoint
 * names), the optimizer groups (tfc_gpt_param_decay) and device moves all
 * walk these rows; nothing else lists the parameters.
 *
 * Row order is the parameter order, and the normal inits draw consecutive
 * Philox offsets in that order: moving a row changes the model every seed
 * gives and the layout of every checkpoint.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "model/gpt_impl.h"

/* A dimension as a function of the config; D_NONE as the second makes the shape 1-D. */
typedef enum { D_NONE, D_VOCAB, D_BLOCK, D_C, D_3C, D_4C } dim_rule;

/* GPT-2's init: normal(0, 0.02), the residual projections normal(0, 0.02/√(2·n_layer)), 0 or 1. */
typedef enum { INIT_NORMAL, INIT_RESIDUAL, INIT_ZERO, INIT_ONE } init_rule;

typedef enum { ALWAYS, IF_BIAS, IF_UNTIED } presence;

typedef struct param_row {
    const char *name; /* per-block rows: the part after "transformer.h.<layer>." */
    int per_block;    /* 1: one per block, field in gpt_block; 0: one, field in tfc_gpt */
    size_t field;     /* offset of the tfc_tensor * that aliases it */
    dim_rule shape[2];
    init_rule init;
    presence when;
    int decay; /* GPT-2's recipe: the matrices and embeddings decay, biases and LayerNorm do not */
} param_row;

#define MODEL(f) 0, offsetof(tfc_gpt, f)
#define BLOCK(f) 1, offsetof(gpt_block, f)

/* One row per parameter, aligned as a table. */
/* clang-format off */
static const param_row rows[] = {
    /* name                      field               shape             init           exists     decay */
    {"transformer.wte.weight",  MODEL(wte),         {D_VOCAB, D_C},   INIT_NORMAL,   ALWAYS,    1},
    {"transformer.wpe.weight",  MODEL(wpe),         {D_BLOCK, D_C},   INIT_NORMAL,   ALWAYS,    1},
    {"ln_1.weight",             BLOCK(ln1_w),       {D_C},            INIT_ONE,      ALWAYS,    0},
    {"ln_1.bias",               BLOCK(ln1_b),       {D_C},            INIT_ZERO,     IF_BIAS,   0},
    {"attn.c_attn.weight",      BLOCK(attn_w),      {D_C, D_3C},      INIT_NORMAL,   ALWAYS,    1},
    {"attn.c_attn.bias",        BLOCK(attn_b),      {D_3C},           INIT_ZERO,     IF_BIAS,   0},
    {"attn.c_proj.weight",      BLOCK(attn_proj_w), {D_C, D_C},       INIT_RESIDUAL, ALWAYS,    1},
    {"attn.c_proj.bias",        BLOCK(attn_proj_b), {D_C},            INIT_ZERO,     IF_BIAS,   0},
    {"ln_2.weight",             BLOCK(ln2_w),       {D_C},            INIT_ONE,      ALWAYS,    0},
    {"ln_2.bias",               BLOCK(ln2_b),       {D_C},            INIT_ZERO,     IF_BIAS,   0},
    {"mlp.c_fc.weight",         BLOCK(fc_w),        {D_C, D_4C},      INIT_NORMAL,   ALWAYS,    1},
    {"mlp.c_fc.bias",           BLOCK(fc_b),        {D_4C},           INIT_ZERO,     IF_BIAS,   0},
    {"mlp.c_proj.weight",       BLOCK(mlp_proj_w),  {D_4C, D_C},      INIT_RESIDUAL, ALWAYS,    1},
    {"mlp.c_proj.bias",         BLOCK(mlp_proj_b),  {D_C},            INIT_ZERO,     IF_BIAS,   0},
    {"transformer.ln_f.weight", MODEL(lnf_w),       {D_C},            INIT_ONE,      ALWAYS,    0},
    {"transformer.ln_f.bias",   MODEL(lnf_b),       {D_C},            INIT_ZERO,     IF_BIAS,   0},
    {"lm_head.weight",          MODEL(lm_head),     {D_VOCAB, D_C},   INIT_NORMAL,   IF_UNTIED, 1},
};
/* clang-format on */
enum { N_ROWS = sizeof rows / sizeof rows[0] };

#undef MODEL
#undef BLOCK

/* One parameter of a model: its row and, for a per-block row, its block. */
typedef struct param_at {
    const param_row *row;
    int32_t layer;
} param_at;

static int exists(const param_row *r, const tfc_gpt_config *c) {
    switch (r->when) {
    case ALWAYS: return 1;
    case IF_BIAS: return c->bias;
    case IF_UNTIED: return !c->tie_weights;
    }
    return 0;
}

/*
 * The parameters of c in order into at[0..cap) (at may be NULL when cap is
 * 0); returns their count. Rows go in table order, a run of per-block rows
 * once per block, as GPT-2's state_dict lists them.
 */
static int64_t list_params(const tfc_gpt_config *c, param_at *at, int64_t cap) {
    int64_t n = 0;
    size_t i = 0;
    while (i < N_ROWS) {
        size_t end = i + 1;
        while (end < N_ROWS && rows[end].per_block == rows[i].per_block) end++;
        const int32_t repeats = rows[i].per_block ? c->n_layer : 1;
        for (int32_t l = 0; l < repeats; l++)
            for (size_t k = i; k < end; k++) {
                if (!exists(&rows[k], c)) continue;
                if (n < cap) at[n] = (param_at){.row = &rows[k], .layer = l};
                n++;
            }
        i = end;
    }
    return n;
}

static int64_t dim_size(dim_rule d, const tfc_gpt_config *c) {
    switch (d) {
    case D_NONE: break;
    case D_VOCAB: return c->vocab_size;
    case D_BLOCK: return c->block_size;
    case D_C: return c->n_embd;
    case D_3C: return 3 * (int64_t)c->n_embd;
    case D_4C: return 4 * (int64_t)c->n_embd;
    }
    return 0;
}

int64_t tfc_gpt_config_numel(const tfc_gpt_config *c) {
    int64_t total = 0, n;
    for (size_t i = 0; i < N_ROWS; i++) {
        if (!exists(&rows[i], c)) continue;
        const int64_t d1 = rows[i].shape[1] == D_NONE ? 1 : dim_size(rows[i].shape[1], c);
        if (!tfc_mul_i64(dim_size(rows[i].shape[0], c), d1, &n) ||
            !tfc_mul_i64(n, rows[i].per_block ? c->n_layer : 1, &n) || !tfc_add_i64(total, n, &total))
            return INT64_MAX;
    }
    return total;
}

static tfc_tensor **field_of(tfc_gpt *m, param_at p) {
    char *base = p.row->per_block ? (char *)&m->blocks[p.layer] : (char *)m;
    return (tfc_tensor **)(base + p.row->field);
}

/* Where the init's normal draws stand: each parameter starts past the previous one's Philox counters. */
typedef struct init_stream {
    uint64_t seed, offset;
    double std, residual_std;
} init_stream;

static tfc_status init_values(tfc_tensor *t, init_rule r, init_stream *st) {
    if (r == INIT_ZERO || r == INIT_ONE) return tfc_tensor_fill(t, r == INIT_ONE ? 1.0 : 0.0);
    tfc_status s = tfc_tensor_fill_normal(t, 0.0, r == INIT_NORMAL ? st->std : st->residual_std, st->seed, st->offset);
    /* one Philox counter gives four normals */
    st->offset += (uint64_t)(tfc_tensor_numel(t) + 3) / 4;
    return s;
}

/* Create, initialise and name parameter p, appending it to m's list and pointing its field at it. */
static tfc_status add_param(tfc_gpt *m, param_at p, init_stream *st) {
    const param_row *r = p.row;
    const int64_t dims[2] = {dim_size(r->shape[0], &m->cfg), dim_size(r->shape[1], &m->cfg)};
    char name[96];
    if (r->per_block)
        snprintf(name, sizeof name, "transformer.h.%d.%s", (int)p.layer, r->name);
    else
        snprintf(name, sizeof name, "%s", r->name);
    tfc_tensor *t = NULL;
    TFC_TRY(tfc_tensor_empty(dims, r->shape[1] == D_NONE ? 1 : 2, m->cfg.dtype, &t));
    tfc_status s = init_values(t, r->init, st);
    if (s == TFC_OK) s = tfc_tensor_set_requires_grad(t, 1);
    char *copy = s == TFC_OK ? strdup(name) : NULL;
    if (s == TFC_OK && !copy) s = tfc_err(TFC_ERR_OOM, "tfc_gpt_new: out of memory");
    if (s != TFC_OK) {
        tfc_tensor_release(t);
        return s;
    }
    int32_t i = m->n_params++;
    m->names[i] = copy;
    m->params[i] = t;
    m->decays[i] = r->decay;
    m->fields[i] = field_of(m, p);
    *m->fields[i] = t;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_new(const tfc_gpt_config *cfg, uint64_t seed, tfc_gpt **out) {
    const char *fn = "tfc_gpt_new";
    TFC_CHECK_NOT_NULL(fn, cfg);
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_gpt_check_config(fn, cfg));
    const int64_t n = list_params(cfg, NULL, 0);
    if (n > INT32_MAX) return tfc_err(TFC_ERR_OOM, "%s: %lld parameters is too many", fn, (long long)n);
    tfc_gpt *m = calloc(1, sizeof *m);
    param_at *at = calloc((size_t)n, sizeof *at);
    if (m) {
        tfc_gpt_config_normalize(cfg, &m->cfg); /* an older caller's struct may end at ln_eps */
        m->drop_seed = seed;
        m->blocks = calloc((size_t)cfg->n_layer, sizeof *m->blocks);
        m->names = calloc((size_t)n, sizeof *m->names);
        m->params = calloc((size_t)n, sizeof *m->params);
        m->fields = calloc((size_t)n, sizeof *m->fields);
        m->decays = calloc((size_t)n, sizeof *m->decays);
    }
    tfc_status s = TFC_OK;
    if (!m || !at || !m->blocks || !m->names || !m->params || !m->fields || !m->decays)
        s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    init_stream st = {.seed = seed, .std = 0.02, .residual_std = 0.02 / sqrt(2.0 * cfg->n_layer)};
    if (s == TFC_OK) list_params(cfg, at, n);
    for (int64_t i = 0; i < n && s == TFC_OK; i++) s = add_param(m, at[i], &st);
    free(at);
    if (s != TFC_OK) {
        tfc_gpt_release(m);
        return tfc_err_in(fn, s);
    }
    *out = m;
    return TFC_OK;
}

TFC_API void tfc_gpt_release(tfc_gpt *m) {
    if (!m) return;
    for (int32_t l = 0; m->blocks && l < m->cfg.n_layer; l++)
        for (int j = 0; j < GPT_N_QLINEAR; j++) tfc_qweight_release(*tfc_gpt_block_qweight(m, l, j));
    tfc_qweight_release(m->head_q);
    tfc_gpt_lora_free(m);
    tfc_gpt_autocast_free(m);
    for (int32_t i = 0; i < m->n_params; i++) {
        free(m->names[i]);
        tfc_tensor_release(m->params[i]);
    }
    free(m->names);
    free(m->params);
    free(m->fields);
    free(m->decays);
    free(m->blocks);
    free(m);
}

TFC_API tfc_status tfc_gpt_params(const tfc_gpt *m, int32_t *n, const char *const **names, tfc_tensor *const **params) {
    const char *fn = "tfc_gpt_params";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, n);
    TFC_CHECK_NOT_NULL(fn, names);
    TFC_CHECK_NOT_NULL(fn, params);
    *n = m->n_params;
    *names = (const char *const *)m->names;
    *params = m->params;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_param_decay(const tfc_gpt *m, int32_t i, int32_t *decay) {
    const char *fn = "tfc_gpt_param_decay";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, decay);
    if (i < 0 || i >= m->n_params)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: i is %d, the model has %d parameters", fn, (int)i, (int)m->n_params);
    *decay = m->decays[i];
    return TFC_OK;
}

TFC_API int64_t tfc_gpt_num_elements(const tfc_gpt *m) {
    if (!m) return 0;
    int64_t n = 0;
    for (int32_t i = 0; i < m->n_params; i++) n += tfc_tensor_numel(m->params[i]);
    return n;
}

/* A new leaf holding parameter i on the device, even when it is already there (its gradient must not carry over). */
static tfc_status moved_param(const tfc_gpt *m, int32_t i, tfc_device_type device, int32_t index, tfc_tensor **out) {
    tfc_tensor *t = NULL;
    tfc_status s = tfc_tensor_to_device(m->params[i], device, index, &t);
    if (s == TFC_OK && t == m->params[i]) {
        tfc_tensor_release(t);
        t = NULL;
        s = tfc_tensor_clone(m->params[i], &t);
    }
    /* as it was: a base frozen under LoRA adapters stays frozen */
    if (s == TFC_OK) s = tfc_tensor_set_requires_grad(t, tfc_tensor_requires_grad(m->params[i]));
    if (s != TFC_OK) {
        tfc_tensor_release(t);
        char why[600];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        return tfc_err(s, "tfc_gpt_to_device: parameter %s: %s", m->names[i], why);
    }
    *out = t;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_to_device(tfc_gpt *m, tfc_device_type device, int32_t device_index) {
    const char *fn = "tfc_gpt_to_device";
    TFC_CHECK_NOT_NULL(fn, m);
    if (device != TFC_DEVICE_CPU && device != TFC_DEVICE_CUDA)
        return tfc_err(TFC_ERR_DEVICE, "%s: device is %d, need TFC_DEVICE_CPU (%d) or TFC_DEVICE_CUDA (%d)", fn,
                       (int)device, (int)TFC_DEVICE_CPU, (int)TFC_DEVICE_CUDA);
    if (device == TFC_DEVICE_CUDA && device_index < 0)
        return tfc_err(TFC_ERR_DEVICE, "%s: device_index is %d, must be >= 0", fn, (int)device_index);
    char what[64];
    if (device == TFC_DEVICE_CUDA && tfc_gpt_is_quantized(m))
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the model is quantized (%s) and quantized weights are CPU-only (docs/CUDA.md)", fn,
                       tfc_gpt_quant_desc(m, what, sizeof what));
    const int32_t index = device == TFC_DEVICE_CPU ? 0 : device_index;
    tfc_tensor **moved = calloc((size_t)m->n_params, sizeof *moved);
    if (!moved) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < m->n_params && s == TFC_OK; i++) s = moved_param(m, i, device, index, &moved[i]);
    tfc_tensor **lora = NULL; /* LoRA adapters move with the model (gpt_lora.c) */
    if (s == TFC_OK) s = tfc_gpt_lora_move(m, device, index, &lora);
    if (s != TFC_OK) {
        /* the model is unchanged until every parameter has its copy */
        for (int32_t i = 0; i < m->n_params; i++) tfc_tensor_release(moved[i]);
        free(moved);
        return tfc_err_in(fn, s);
    }
    tfc_gpt_lora_install_moved(m, lora);
    for (int32_t i = 0; i < m->n_params; i++) {
        tfc_tensor_release(m->params[i]);
        m->params[i] = *m->fields[i] = moved[i];
    }
    free(moved);
    tfc_gpt_autocast_drop_copies(m); /* bf16 autocast stays on; its copies are remade on the new device */
    return TFC_OK;
}
