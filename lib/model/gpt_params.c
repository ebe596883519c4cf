/*
 * The GPT's parameters, written once (gpt_table.h). Each row of `rows` is
 * one parameter (llm.c's fill_in_parameter_sizes plays this part there):
 * its Hugging Face name, the field the forward pass reads it from, its
 * shape in terms of the architecture, its GPT-2 init, when it exists,
 * whether it takes weight decay, its place and layout in llm.c's files, and
 * for a block Linear's weight its index and PEFT module name. Construction,
 * the list tfc_gpt_params hands out (checkpoint names), the optimizer
 * groups (tfc_gpt_param_decay), device moves, the HF writer's zero biases
 * (gpt_hf.c), llm.c's order (gpt_llmc.c), the quantized Linears
 * (gpt_quant.c, gpt_weights.c) and the LoRA targets (gpt_lora.c) all walk
 * these rows; nothing else lists the parameters.
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

#define MODEL(f) 0, offsetof(tfc_gpt, f)
#define BLOCK(f) 1, offsetof(gpt_block, f)
/* llm.c's place: position in its order, its name, whether stored transposed there ([out, in]) */
#define LLMC(pos, name, t) pos, name, t
#define NO_LLMC -1, NULL, 0
/* A block Linear's weight: gpt_block.lin[] index and PEFT module name */
#define LINEAR(j, module) j, module
#define NO_LINEAR -1, NULL
#define D_V GPT_D_VOCAB
#define D_T GPT_D_BLOCK
#define D_C GPT_D_C
#define D_QKV GPT_D_QKV
#define D_Q GPT_D_Q
#define D_KV GPT_D_KV
#define D_MLP GPT_D_MLP
#define NORMAL GPT_INIT_NORMAL
#define RESID GPT_INIT_RESIDUAL
#define ZERO GPT_INIT_ZERO
#define ONE GPT_INIT_ONE

/* GPT-2's rows, one per parameter, aligned as a table. */
/* clang-format off */
static const gpt_param_row gpt2_rows[] = {
    /* name                      field                  shape          init    exists              decay llm.c                  block Linear */
    {"transformer.wte.weight",  MODEL(wte),            {D_V, D_C},    NORMAL, GPT_ALWAYS,         1, LLMC(0, "wte", 0),       NO_LINEAR},
    {"transformer.wpe.weight",  MODEL(wpe),            {D_T, D_C},    NORMAL, GPT_IF_LEARNED_POS, 1, LLMC(1, "wpe", 0),       NO_LINEAR},
    {"ln_1.weight",             BLOCK(ln1_w),          {D_C},         ONE,    GPT_ALWAYS,         0, LLMC(2, "ln1w", 0),      NO_LINEAR},
    {"ln_1.bias",               BLOCK(ln1_b),          {D_C},         ZERO,   GPT_IF_BIAS,        0, LLMC(3, "ln1b", 0),      NO_LINEAR},
    {"attn.c_attn.weight",      BLOCK(lin[0].w),       {D_C, D_QKV},  NORMAL, GPT_ALWAYS,         1, LLMC(4, "qkvw", 1),      LINEAR(0, "attn.c_attn")},
    {"attn.c_attn.bias",        BLOCK(lin[0].b),       {D_QKV},       ZERO,   GPT_IF_BIAS,        0, LLMC(5, "qkvb", 0),      NO_LINEAR},
    {"attn.c_proj.weight",      BLOCK(lin[1].w),       {D_C, D_C},    RESID,  GPT_ALWAYS,         1, LLMC(6, "attprojw", 1),  LINEAR(1, "attn.c_proj")},
    {"attn.c_proj.bias",        BLOCK(lin[1].b),       {D_C},         ZERO,   GPT_IF_BIAS,        0, LLMC(7, "attprojb", 0),  NO_LINEAR},
    {"ln_2.weight",             BLOCK(ln2_w),          {D_C},         ONE,    GPT_ALWAYS,         0, LLMC(8, "ln2w", 0),      NO_LINEAR},
    {"ln_2.bias",               BLOCK(ln2_b),          {D_C},         ZERO,   GPT_IF_BIAS,        0, LLMC(9, "ln2b", 0),      NO_LINEAR},
    {"mlp.c_fc.weight",         BLOCK(lin[2].w),       {D_C, D_MLP},  NORMAL, GPT_ALWAYS,         1, LLMC(10, "fcw", 1),      LINEAR(2, "mlp.c_fc")},
    {"mlp.c_fc.bias",           BLOCK(lin[2].b),       {D_MLP},       ZERO,   GPT_IF_BIAS,        0, LLMC(11, "fcb", 0),      NO_LINEAR},
    {"mlp.c_proj.weight",       BLOCK(lin[3].w),       {D_MLP, D_C},  RESID,  GPT_ALWAYS,         1, LLMC(12, "fcprojw", 1),  LINEAR(3, "mlp.c_proj")},
    {"mlp.c_proj.bias",         BLOCK(lin[3].b),       {D_C},         ZERO,   GPT_IF_BIAS,        0, LLMC(13, "fcprojb", 0),  NO_LINEAR},
    {"transformer.ln_f.weight", MODEL(lnf_w),          {D_C},         ONE,    GPT_ALWAYS,         0, LLMC(14, "lnfw", 0),     NO_LINEAR},
    {"transformer.ln_f.bias",   MODEL(lnf_b),          {D_C},         ZERO,   GPT_IF_BIAS,        0, LLMC(15, "lnfb", 0),     NO_LINEAR},
    {"lm_head.weight",          MODEL(lm_head),        {D_V, D_C},    NORMAL, GPT_IF_UNTIED,      1, NO_LLMC,                 NO_LINEAR},
};

/*
 * The Llama family's rows (llama, mistral, qwen2 name them alike), in the
 * order transformers' state_dict lists them (a decoder layer registers
 * self_attn, mlp, then its two norms). Every Linear is nn.Linear's [out,
 * in]; transformers' _init_weights draws them all from normal(0, 0.02).
 */
static const gpt_param_row llama_rows[] = {
    /* name                               field            shape          init    exists           decay llm.c    block Linear */
    {"model.embed_tokens.weight",        MODEL(wte),      {D_V, D_C},    NORMAL, GPT_ALWAYS,      1, NO_LLMC, NO_LINEAR},
    {"self_attn.q_proj.weight",          BLOCK(lin[0].w), {D_Q, D_C},    NORMAL, GPT_ALWAYS,      1, NO_LLMC, LINEAR(0, "self_attn.q_proj")},
    {"self_attn.q_proj.bias",            BLOCK(lin[0].b), {D_Q},         ZERO,   GPT_IF_QKV_BIAS, 0, NO_LLMC, NO_LINEAR},
    {"self_attn.k_proj.weight",          BLOCK(lin[1].w), {D_KV, D_C},   NORMAL, GPT_ALWAYS,      1, NO_LLMC, LINEAR(1, "self_attn.k_proj")},
    {"self_attn.k_proj.bias",            BLOCK(lin[1].b), {D_KV},        ZERO,   GPT_IF_QKV_BIAS, 0, NO_LLMC, NO_LINEAR},
    {"self_attn.v_proj.weight",          BLOCK(lin[2].w), {D_KV, D_C},   NORMAL, GPT_ALWAYS,      1, NO_LLMC, LINEAR(2, "self_attn.v_proj")},
    {"self_attn.v_proj.bias",            BLOCK(lin[2].b), {D_KV},        ZERO,   GPT_IF_QKV_BIAS, 0, NO_LLMC, NO_LINEAR},
    {"self_attn.o_proj.weight",          BLOCK(lin[3].w), {D_C, D_Q},    NORMAL, GPT_ALWAYS,      1, NO_LLMC, LINEAR(3, "self_attn.o_proj")},
    {"self_attn.o_proj.bias",            BLOCK(lin[3].b), {D_C},         ZERO,   GPT_IF_O_BIAS,   0, NO_LLMC, NO_LINEAR},
    {"mlp.gate_proj.weight",             BLOCK(lin[4].w), {D_MLP, D_C},  NORMAL, GPT_ALWAYS,      1, NO_LLMC, LINEAR(4, "mlp.gate_proj")},
    {"mlp.gate_proj.bias",               BLOCK(lin[4].b), {D_MLP},       ZERO,   GPT_IF_MLP_BIAS, 0, NO_LLMC, NO_LINEAR},
    {"mlp.up_proj.weight",               BLOCK(lin[5].w), {D_MLP, D_C},  NORMAL, GPT_ALWAYS,      1, NO_LLMC, LINEAR(5, "mlp.up_proj")},
    {"mlp.up_proj.bias",                 BLOCK(lin[5].b), {D_MLP},       ZERO,   GPT_IF_MLP_BIAS, 0, NO_LLMC, NO_LINEAR},
    {"mlp.down_proj.weight",             BLOCK(lin[6].w), {D_C, D_MLP},  NORMAL, GPT_ALWAYS,      1, NO_LLMC, LINEAR(6, "mlp.down_proj")},
    {"mlp.down_proj.bias",               BLOCK(lin[6].b), {D_C},         ZERO,   GPT_IF_MLP_BIAS, 0, NO_LLMC, NO_LINEAR},
    {"input_layernorm.weight",           BLOCK(ln1_w),    {D_C},         ONE,    GPT_ALWAYS,      0, NO_LLMC, NO_LINEAR},
    {"post_attention_layernorm.weight",  BLOCK(ln2_w),    {D_C},         ONE,    GPT_ALWAYS,      0, NO_LLMC, NO_LINEAR},
    {"model.norm.weight",                MODEL(lnf_w),    {D_C},         ONE,    GPT_ALWAYS,      0, NO_LLMC, NO_LINEAR},
    {"lm_head.weight",                   MODEL(lm_head),  {D_V, D_C},    NORMAL, GPT_IF_UNTIED,   1, NO_LLMC, NO_LINEAR},
};
/* clang-format on */

static const gpt_table gpt2_table = {gpt2_rows, sizeof gpt2_rows / sizeof gpt2_rows[0], "transformer.h.", 4};
static const gpt_table llama_table = {llama_rows, sizeof llama_rows / sizeof llama_rows[0], "model.layers.", 7};

#undef MODEL
#undef BLOCK
#undef LLMC
#undef NO_LLMC
#undef LINEAR
#undef NO_LINEAR
#undef D_V
#undef D_T
#undef D_C
#undef D_QKV
#undef D_Q
#undef D_KV
#undef D_MLP
#undef NORMAL
#undef RESID
#undef ZERO
#undef ONE

void gpt_arch_of(const tfc_gpt_config *c, gpt_arch *a) {
    const int llama = c->arch != TFC_GPT_ARCH_GPT2;
    const int32_t kv = c->n_kv_head > 0 ? c->n_kv_head : c->n_head;
    *a = (gpt_arch){
        .table = llama ? &llama_table : &gpt2_table,
        .n_layer = c->n_layer,
        .n_embd = c->n_embd,
        .vocab_size = c->vocab_size,
        .block_size = c->block_size,
        .n_head = c->n_head,
        .n_kv_head = kv,
        .head_dim = c->n_head > 0 ? c->n_embd / c->n_head : 0,
        .mlp_hidden = tfc_gpt_mlp_hidden(c),
        .norm = llama ? GPT_NORM_RMS : GPT_NORM_LAYER,
        .norm_eps = c->ln_eps,
        .pos = llama ? GPT_POS_ROPE : GPT_POS_LEARNED,
        .rope = c->rope,
        .mlp = llama ? GPT_MLP_SWIGLU : GPT_MLP_GELU_TANH,
        .bias = llama ? 0 : c->bias,
        .qkv_bias = llama && c->attention_bias,
        .o_bias = c->arch == TFC_GPT_ARCH_LLAMA && c->attention_bias,
        .mlp_bias = llama && c->mlp_bias,
        .window = llama ? c->sliding_window : 0,
        .tied_head = c->tie_weights,
    };
}

int tfc_gpt_row_exists(const gpt_param_row *r, const gpt_arch *a) {
    switch (r->when) {
    case GPT_ALWAYS: return 1;
    case GPT_IF_BIAS: return a->bias;
    case GPT_IF_UNTIED: return !a->tied_head;
    case GPT_IF_LEARNED_POS: return a->pos == GPT_POS_LEARNED;
    case GPT_IF_QKV_BIAS: return a->qkv_bias;
    case GPT_IF_O_BIAS: return a->o_bias;
    case GPT_IF_MLP_BIAS: return a->mlp_bias;
    }
    return 0;
}

int64_t tfc_gpt_list_params(const tfc_gpt_config *c, gpt_param_at *at, int64_t cap) {
    gpt_arch a;
    gpt_arch_of(c, &a);
    const gpt_param_row *rows = a.table->rows;
    const int32_t N_ROWS = a.table->n_rows;
    int64_t n = 0;
    int32_t i = 0;
    while (i < N_ROWS) {
        int32_t end = i + 1;
        while (end < N_ROWS && rows[end].per_block == rows[i].per_block) end++;
        const int32_t repeats = rows[i].per_block ? a.n_layer : 1;
        int64_t per = 0; /* the run's parameters in one repeat */
        for (int32_t k = i; k < end; k++) per += tfc_gpt_row_exists(&rows[k], &a);
        for (int32_t l = 0; l < repeats; l++) {
            if (n >= cap) { /* counted, not listed: O(1) in n_layer, whatever a config.json claims */
                n += (int64_t)(repeats - l) * per;
                break;
            }
            for (int32_t k = i; k < end; k++) {
                if (!tfc_gpt_row_exists(&rows[k], &a)) continue;
                if (n < cap) at[n] = (gpt_param_at){.row = &rows[k], .table = a.table, .layer = l};
                n++;
            }
        }
        i = end;
    }
    return n;
}

const char *tfc_gpt_param_name(gpt_param_at p, char *buf, size_t n) {
    if (p.row->per_block)
        snprintf(buf, n, "%s%d.%s", p.table->block_prefix, (int)p.layer, p.row->name);
    else
        snprintf(buf, n, "%s", p.row->name);
    return buf;
}

const char *tfc_gpt_module_name(const gpt_arch *a, int32_t layer, int j, char *buf, size_t n) {
    snprintf(buf, n, "%s%d.%s", a->table->block_prefix, (int)layer, tfc_gpt_linear_row(a, j)->module);
    return buf;
}

int32_t tfc_gpt_llmc_rows(const gpt_param_row **out, int32_t cap) {
    const int32_t N_ROWS = gpt2_table.n_rows;
    int32_t n = 0;
    for (int pos = 0; pos < N_ROWS; pos++)
        for (int32_t i = 0; i < N_ROWS; i++)
            if (gpt2_rows[i].llmc_pos == pos) {
                if (n < cap) out[n] = &gpt2_rows[i];
                n++;
            }
    return n;
}

const gpt_param_row *tfc_gpt_linear_row(const gpt_arch *a, int j) {
    if (j < 0 || j >= a->table->n_linear) return NULL;
    for (int32_t i = 0; i < a->table->n_rows; i++)
        if (a->table->rows[i].linear == j) return &a->table->rows[i];
    return NULL;
}

void tfc_gpt_linear_dims(const gpt_arch *a, int j, int64_t *in, int64_t *out) {
    const gpt_param_row *r = tfc_gpt_linear_row(a, j);
    const int64_t d0 = tfc_gpt_dim_size(r->shape[0], a), d1 = tfc_gpt_dim_size(r->shape[1], a);
    *in = r->transpose ? d0 : d1; /* [in, out] (Conv1D) or [out, in] (nn.Linear) */
    *out = r->transpose ? d1 : d0;
}

int64_t tfc_gpt_dim_size(gpt_dim d, const gpt_arch *a) {
    switch (d) {
    case GPT_D_NONE: break;
    case GPT_D_VOCAB: return a->vocab_size;
    case GPT_D_BLOCK: return a->block_size;
    case GPT_D_C: return a->n_embd;
    case GPT_D_QKV: return ((int64_t)a->n_head + 2 * (int64_t)a->n_kv_head) * a->head_dim;
    case GPT_D_Q: return (int64_t)a->n_head * a->head_dim;
    case GPT_D_KV: return (int64_t)a->n_kv_head * a->head_dim;
    case GPT_D_MLP: return a->mlp_hidden;
    }
    return 0;
}

int64_t tfc_gpt_config_numel(const tfc_gpt_config *c) {
    gpt_arch a;
    gpt_arch_of(c, &a);
    const gpt_param_row *rows = a.table->rows;
    int64_t total = 0, n;
    for (int32_t i = 0; i < a.table->n_rows; i++) {
        if (!tfc_gpt_row_exists(&rows[i], &a)) continue;
        const int64_t d1 = rows[i].shape[1] == GPT_D_NONE ? 1 : tfc_gpt_dim_size(rows[i].shape[1], &a);
        if (!tfc_mul_i64(tfc_gpt_dim_size(rows[i].shape[0], &a), d1, &n) ||
            !tfc_mul_i64(n, rows[i].per_block ? a.n_layer : 1, &n) || !tfc_add_i64(total, n, &total))
            return INT64_MAX;
    }
    return total;
}

static tfc_tensor **field_of(tfc_gpt *m, gpt_param_at p) {
    char *base = p.row->per_block ? (char *)&m->blocks[p.layer] : (char *)m;
    return (tfc_tensor **)(base + p.row->field);
}

/* Where the init's normal draws stand: each parameter starts past the previous one's Philox counters. */
typedef struct init_stream {
    uint64_t seed, offset;
    double std, residual_std;
} init_stream;

static tfc_status init_values(tfc_tensor *t, gpt_init r, init_stream *st) {
    if (!st) return TFC_OK; /* tfc_gpt_alloc: the loader writes every value */
    if (r == GPT_INIT_ZERO || r == GPT_INIT_ONE) return tfc_tensor_fill(t, r == GPT_INIT_ONE ? 1.0 : 0.0);
    tfc_status s =
        tfc_tensor_fill_normal(t, 0.0, r == GPT_INIT_NORMAL ? st->std : st->residual_std, st->seed, st->offset);
    /* one Philox counter gives four normals */
    st->offset += (uint64_t)(tfc_tensor_numel(t) + 3) / 4;
    return s;
}

/*
 * Create, initialise (from st; left unwritten when st is NULL) and name
 * parameter p, appending it to m's list and pointing its field at it.
 */
static tfc_status add_param(tfc_gpt *m, gpt_param_at p, init_stream *st) {
    const gpt_param_row *r = p.row;
    const int64_t dims[2] = {tfc_gpt_dim_size(r->shape[0], &m->arch), tfc_gpt_dim_size(r->shape[1], &m->arch)};
    char name[96];
    tfc_gpt_param_name(p, name, sizeof name);
    tfc_tensor *t = NULL;
    TFC_TRY(tfc_tensor_empty(dims, r->shape[1] == GPT_D_NONE ? 1 : 2, m->cfg.dtype, &t));
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
    m->rows[i] = r;
    m->fields[i] = field_of(m, p);
    *m->fields[i] = t;
    return TFC_OK;
}

/* tfc_gpt_new, and tfc_gpt_alloc with init 0: the parameters' values left unwritten. */
static tfc_status gpt_make(const char *fn, const tfc_gpt_config *cfg, uint64_t seed, int init, tfc_gpt **out) {
    TFC_CHECK_NOT_NULL(fn, cfg);
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_gpt_check_config(fn, cfg));
    tfc_gpt_config full; /* an older caller's struct may end at ln_eps or dropout: read only the whole one */
    tfc_gpt_config_normalize(cfg, &full);
    cfg = &full;
    const int64_t n = tfc_gpt_list_params(cfg, NULL, 0);
    if (n > INT32_MAX) return tfc_err(TFC_ERR_OOM, "%s: %lld parameters is too many", fn, (long long)n);
    tfc_gpt *m = calloc(1, sizeof *m);
    gpt_param_at *at = calloc((size_t)n, sizeof *at);
    if (m) {
        m->cfg = full;
        gpt_arch_of(&m->cfg, &m->arch);
        m->cfg.n_kv_head = m->arch.n_kv_head; /* the defaults resolved, as tfc_gpt_get_config reports them */
        m->cfg.mlp_hidden = m->arch.mlp_hidden;
        m->drop_seed = seed;
        m->blocks = calloc((size_t)cfg->n_layer, sizeof *m->blocks);
        m->names = calloc((size_t)n, sizeof *m->names);
        m->params = calloc((size_t)n, sizeof *m->params);
        m->fields = calloc((size_t)n, sizeof *m->fields);
        m->rows = calloc((size_t)n, sizeof *m->rows);
    }
    tfc_status s = TFC_OK;
    if (!m || !at || !m->blocks || !m->names || !m->params || !m->fields || !m->rows)
        s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    init_stream st = {.seed = seed, .std = 0.02, .residual_std = 0.02 / sqrt(2.0 * cfg->n_layer)};
    if (s == TFC_OK) tfc_gpt_list_params(cfg, at, n);
    for (int64_t i = 0; i < n && s == TFC_OK; i++) s = add_param(m, at[i], init ? &st : NULL);
    free(at);
    if (s == TFC_OK) {
        for (int32_t l = 0; l < cfg->n_layer; l++)
            for (int j = 0; j < GPT_N_LINEAR; j++) {
                gpt_linear *lin = &m->blocks[l].lin[j];
                lin->slot = l * GPT_N_LINEAR + j;
                lin->in_out = j < m->arch.table->n_linear && tfc_gpt_linear_row(&m->arch, j)->transpose;
            }
        tfc_gpt_choose_linears(m);
    }
    if (s != TFC_OK) {
        tfc_gpt_release(m);
        return tfc_err_in(fn, s);
    }
    *out = m;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_new(const tfc_gpt_config *cfg, uint64_t seed, tfc_gpt **out) {
    return gpt_make("tfc_gpt_new", cfg, seed, 1, out);
}

tfc_status tfc_gpt_alloc(const char *fn, const tfc_gpt_config *cfg, tfc_gpt **out) {
    return gpt_make(fn, cfg, 0, 0, out);
}

TFC_API void tfc_gpt_release(tfc_gpt *m) {
    if (!m) return;
    for (int32_t l = 0; m->blocks && l < m->cfg.n_layer; l++)
        for (int j = 0; j < GPT_N_LINEAR; j++) tfc_qweight_release(m->blocks[l].lin[j].q);
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
    free(m->rows);
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
    *decay = m->rows[i]->decay;
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
    tfc_gpt_choose_linears(m);
    return TFC_OK;
}
