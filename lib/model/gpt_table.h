/*
 * The model as data (docs/ARCHITECTURE.md, lib/model): the architecture a
 * forward pass reads (gpt_arch) and the one table of parameters
 * (gpt_params.c's rows[]) from which every list of them is derived — the
 * checkpoint / Hugging Face names and order, llm.c's order and layouts,
 * the quantizable Linears, the LoRA targets and the weight-decay groups.
 *
 * Adding an architecture is adding enum values here, rows to the table and
 * the small functions of gpt.c that read them (norm(), positions(),
 * mlp()); not a second forward. Internal: the public config stays
 * tfc_gpt_config, which gpt_arch_of describes.
 */
#ifndef TFC_MODEL_GPT_TABLE_H
#define TFC_MODEL_GPT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/gpt.h"

/* Which normalization the blocks and the final norm run (GPT-2: LayerNorm with weight and, with biases, bias). */
typedef enum { GPT_NORM_LAYER } gpt_norm_kind;
/* How positions enter (GPT-2: a learned table wpe added to the token embedding). */
typedef enum { GPT_POS_LEARNED } gpt_pos_kind;
/* The MLP's form (GPT-2: fc → GELU, tanh form → proj). */
typedef enum { GPT_MLP_GELU_TANH } gpt_mlp_kind;

/*
 * One architecture, as the forward and the parameter table read it. For
 * GPT-2 it is a function of tfc_gpt_config (gpt_arch_of); every field a
 * config of another family sets differently (norm, pos, mlp, n_kv_head,
 * bias, tied) is already read through here.
 */
typedef struct gpt_arch {
    int32_t n_layer, n_embd, vocab_size, block_size;
    int32_t n_head, n_kv_head, head_dim; /* grouped-query attention when n_kv_head < n_head; GPT-2: equal */
    int64_t mlp_hidden;                  /* the MLP's inner width (GPT-2: 4 · n_embd) */
    gpt_norm_kind norm;
    double norm_eps;
    gpt_pos_kind pos;
    gpt_mlp_kind mlp;
    int32_t bias;      /* the Linears and norms have biases */
    int32_t tied_head; /* the LM head is wte (no lm_head.weight) */
} gpt_arch;

/* The architecture config c describes (GPT-2 for every tfc_gpt_config). */
void gpt_arch_of(const tfc_gpt_config *c, gpt_arch *a);

/* A dimension as a function of the architecture; GPT_D_NONE as a row's second makes its shape 1-D. */
typedef enum { GPT_D_NONE, GPT_D_VOCAB, GPT_D_BLOCK, GPT_D_C, GPT_D_QKV, GPT_D_MLP } gpt_dim;
/* GPT-2's init: normal(0, 0.02), the residual projections normal(0, 0.02/√(2·n_layer)), 0 or 1. */
typedef enum { GPT_INIT_NORMAL, GPT_INIT_RESIDUAL, GPT_INIT_ZERO, GPT_INIT_ONE } gpt_init;
/* When a row's parameter exists. */
typedef enum { GPT_ALWAYS, GPT_IF_BIAS, GPT_IF_UNTIED, GPT_IF_LEARNED_POS } gpt_presence;

/* The block Linears (gpt_block.lin[]): attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj. */
enum { GPT_N_LINEAR = 4 };

typedef struct gpt_param_row {
    const char *name; /* Hugging Face's name; per-block rows: the part after "transformer.h.<layer>." */
    int per_block;    /* 1: one per block, field in gpt_block; 0: one, field in tfc_gpt */
    size_t field;     /* offset of the tfc_tensor * that aliases it */
    gpt_dim shape[2];
    gpt_init init;
    gpt_presence when;
    int decay;          /* GPT-2's recipe: the matrices and embeddings decay, biases and norms do not */
    int llmc_pos;       /* position in llm.c's parameter order; -1: not in llm.c's files */
    const char *llmc;   /* llm.c's name of the tensor (for messages) */
    int transpose;      /* stored [in, out] (Conv1D), where llm.c and nn.Linear hold [out, in] */
    int linear;         /* a block Linear's weight: its index in gpt_block.lin[] (quantizable, LoRA target); else -1 */
    const char *module; /* that Linear's module name, as PEFT's target_modules match it (e.g. "attn.c_attn") */
} gpt_param_row;

/* The table: row i of n (tfc_gpt_table_size). */
int32_t tfc_gpt_table_size(void);
const gpt_param_row *tfc_gpt_table_row(int32_t i);

/* One parameter of a model: its row and, for a per-block row, its block. */
typedef struct gpt_param_at {
    const gpt_param_row *row;
    int32_t layer;
} gpt_param_at;

/* Whether row r's parameter exists in architecture a. */
int tfc_gpt_row_exists(const gpt_param_row *r, const gpt_arch *a);

/* The size of dimension rule d in architecture a (0 for GPT_D_NONE). */
int64_t tfc_gpt_dim_size(gpt_dim d, const gpt_arch *a);

/*
 * The parameters of c in checkpoint order into at[0..cap) (at may be NULL
 * when cap is 0); returns their count. Rows go in table order, a run of
 * per-block rows once per block, as GPT-2's state_dict lists them.
 */
int64_t tfc_gpt_list_params(const tfc_gpt_config *c, gpt_param_at *at, int64_t cap);

/* p's name ("transformer.h.3.ln_1.weight") into buf[0..n); returns buf. */
const char *tfc_gpt_param_name(gpt_param_at p, char *buf, size_t n);

/* The rows of llm.c's files in its order into out[0..cap); returns their count. */
int32_t tfc_gpt_llmc_rows(const gpt_param_row **out, int32_t cap);

/* The weight row of block Linear j (0 .. GPT_N_LINEAR-1): its name, module name, shape. */
const gpt_param_row *tfc_gpt_linear_row(int j);

#endif
