/*
 * The model as data (docs/ARCHITECTURE.md, lib/model): the architecture a
 * forward pass reads (gpt_arch) and the one table of parameters
 * (gpt_params.c's rows[]) from which every list of them is derived — the
 * checkpoint / Hugging Face names and order, llm.c's order and layouts,
 * the quantizable Linears, the LoRA targets and the weight-decay groups.
 *
 * An architecture is enum values here, a table of rows (gpt_params.c) and
 * the small functions of gpt.c that read them (norm(), positions(),
 * attention's projections, mlp()); not a second forward. GPT-2 and the
 * Llama family (llama, mistral, qwen2: one table, the presence of their
 * biases and window read from the config) are the two tables. Internal:
 * the public config stays tfc_gpt_config, which gpt_arch_of describes.
 */
#ifndef TFC_MODEL_GPT_TABLE_H
#define TFC_MODEL_GPT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/gpt.h"
#include "tfcore/kernels.h"

/* Which normalization the blocks and the final norm run. */
typedef enum {
    GPT_NORM_LAYER, /* GPT-2: LayerNorm with weight and, with biases, bias */
    GPT_NORM_RMS    /* Llama family: RMSNorm with weight */
} gpt_norm_kind;
/* How positions enter. */
typedef enum {
    GPT_POS_LEARNED, /* GPT-2: a learned table wpe added to the token embedding */
    GPT_POS_ROPE     /* Llama family: q and k rotated in attention (arch.rope) */
} gpt_pos_kind;
/* The MLP's form. */
typedef enum {
    GPT_MLP_GELU_TANH, /* GPT-2: c_fc → GELU, tanh form → c_proj */
    GPT_MLP_SWIGLU     /* Llama family: down(silu(gate(h)) ⊙ up(h)) */
} gpt_mlp_kind;

typedef struct gpt_table gpt_table;

/*
 * One architecture, as the forward and the parameter table read it: a
 * function of tfc_gpt_config (gpt_arch_of), with every default resolved.
 */
typedef struct gpt_arch {
    const gpt_table *table; /* the architecture's parameter rows */
    int32_t n_layer, n_embd, vocab_size, block_size;
    int32_t n_head, n_kv_head, head_dim; /* grouped-query attention when n_kv_head < n_head */
    int64_t mlp_hidden;                  /* the MLP's inner width */
    gpt_norm_kind norm;
    double norm_eps;
    gpt_pos_kind pos;
    tfc_rope_config rope; /* GPT_POS_ROPE's frequencies */
    gpt_mlp_kind mlp;
    int32_t bias;                       /* GPT-2: every Linear and norm has a bias */
    int32_t qkv_bias, o_bias, mlp_bias; /* Llama family: which projections have biases */
    int32_t window;                     /* keys a query sees at most; 0: all */
    int32_t tied_head;                  /* the LM head is wte (no lm_head.weight) */
} gpt_arch;

/* The architecture config c describes (c valid: tfc_gpt_check_config passed). */
void gpt_arch_of(const tfc_gpt_config *c, gpt_arch *a);

/* A dimension as a function of the architecture; GPT_D_NONE as a row's second makes its shape 1-D. */
typedef enum {
    GPT_D_NONE,
    GPT_D_VOCAB,
    GPT_D_BLOCK,
    GPT_D_C,
    GPT_D_QKV, /* (H + 2·Hkv)·D: GPT-2's fused q, k, v */
    GPT_D_Q,   /* H·D: the query heads */
    GPT_D_KV,  /* Hkv·D: the key (or value) heads */
    GPT_D_MLP
} gpt_dim;
/* Inits: normal(0, 0.02), GPT-2's residual projections normal(0, 0.02/√(2·n_layer)), 0 or 1. */
typedef enum { GPT_INIT_NORMAL, GPT_INIT_RESIDUAL, GPT_INIT_ZERO, GPT_INIT_ONE } gpt_init;
/* When a row's parameter exists. */
typedef enum {
    GPT_ALWAYS,
    GPT_IF_BIAS, /* GPT-2's biases */
    GPT_IF_UNTIED,
    GPT_IF_LEARNED_POS,
    GPT_IF_QKV_BIAS, /* the Llama family's q/k/v biases (llama's attention_bias, Qwen2's) */
    GPT_IF_O_BIAS,   /* llama's o_proj bias (attention_bias) */
    GPT_IF_MLP_BIAS  /* llama's gate/up/down biases (mlp_bias) */
} gpt_presence;

/*
 * Block Linear slots per block (gpt_block.lin[]): an architecture uses the
 * first table->n_linear of them. GPT-2: c_attn, attn.c_proj, c_fc,
 * mlp.c_proj; the Llama family: q, k, v, o, gate, up, down (PEFT's order).
 */
enum { GPT_N_LINEAR = 7 };

typedef struct gpt_param_row {
    const char *name; /* Hugging Face's name; per-block rows: the part after the table's block prefix and layer */
    int per_block;    /* 1: one per block, field in gpt_block; 0: one, field in tfc_gpt */
    size_t field;     /* offset of the tfc_tensor * that aliases it */
    gpt_dim shape[2];
    gpt_init init;
    gpt_presence when;
    int decay;          /* the matrices and embeddings decay, biases and norms do not */
    int llmc_pos;       /* position in llm.c's parameter order; -1: not in llm.c's files */
    const char *llmc;   /* llm.c's name of the tensor (for messages) */
    int transpose;      /* stored [in, out] (Conv1D), where llm.c and nn.Linear hold [out, in] */
    int linear;         /* a block Linear's weight: its index in gpt_block.lin[] (quantizable, LoRA target); else -1 */
    const char *module; /* that Linear's module name after the block prefix, as PEFT names it ("attn.c_attn") */
} gpt_param_row;

/* An architecture's parameters: its rows, in checkpoint order, and how per-block names begin. */
struct gpt_table {
    const gpt_param_row *rows;
    int32_t n_rows;
    const char *block_prefix; /* "transformer.h." (GPT-2), "model.layers." (Llama family) */
    int32_t n_linear;         /* block Linears: gpt_block.lin[0 .. n_linear) */
};

/* One parameter of a model: its row and, for a per-block row, its block. */
typedef struct gpt_param_at {
    const gpt_param_row *row;
    const gpt_table *table;
    int32_t layer;
} gpt_param_at;

/* Whether row r's parameter exists in architecture a. */
int tfc_gpt_row_exists(const gpt_param_row *r, const gpt_arch *a);

/* The size of dimension rule d in architecture a (0 for GPT_D_NONE). */
int64_t tfc_gpt_dim_size(gpt_dim d, const gpt_arch *a);

/*
 * The parameters of c in checkpoint order into at[0..cap) (at may be NULL
 * when cap is 0); returns their count. Rows go in table order, a run of
 * per-block rows once per block, as Hugging Face's state_dict lists them.
 */
int64_t tfc_gpt_list_params(const tfc_gpt_config *c, gpt_param_at *at, int64_t cap);

/* p's name ("transformer.h.3.ln_1.weight", "model.layers.3.input_layernorm.weight") into buf[0..n); returns buf. */
const char *tfc_gpt_param_name(gpt_param_at p, char *buf, size_t n);

/* Block Linear j of layer l's module name as PEFT keys it ("transformer.h.3.attn.c_attn") into buf; returns buf. */
const char *tfc_gpt_module_name(const gpt_arch *a, int32_t layer, int j, char *buf, size_t n);

/* The rows of llm.c's files (GPT-2's) in its order into out[0..cap); returns their count. */
int32_t tfc_gpt_llmc_rows(const gpt_param_row **out, int32_t cap);

/* The weight row of block Linear j (0 .. table->n_linear-1) of architecture a; NULL past them. */
const gpt_param_row *tfc_gpt_linear_row(const gpt_arch *a, int j);

/* Block Linear j's input and output widths in a (whatever the layout its weight is stored in). */
void tfc_gpt_linear_dims(const gpt_arch *a, int j, int64_t *in, int64_t *out);

#endif
