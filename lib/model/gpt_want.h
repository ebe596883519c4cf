/*
 * What each file format must hold for a model, derived from the one
 * parameter table (gpt_table.h) and handed to the loader contract
 * (io/tensor_contract.h) as its wanted list: tfcore checkpoints and
 * Hugging Face directories (the table's names, GPT2Model's bare names as
 * aliases, HF's attention mask buffers as ignorable), llm.c files (the
 * table's llm.c order and layouts) and LoRA/PEFT adapters (the table's
 * block Linear rows as targets). The readers (gpt_weights.c, gpt_hf.c,
 * gpt_llmc.c, gpt_lora.c) add what only their format has and run the
 * contract; no reader lists tensors or checks them itself.
 */
#ifndef TFC_MODEL_GPT_WANT_H
#define TFC_MODEL_GPT_WANT_H

#include "io/tensor_contract.h"
#include "model/gpt_impl.h"

/*
 * m's parameters (the table's rows for its config, in checkpoint order) as
 * required wants of c under their names, each loaded into its tensor of m,
 * taking the dtypes in `dtypes`. With `bare`, GPT2Model's name without
 * "transformer." is each one's alias (HF). skip_linear leaves out the block
 * Linear weights and skip_head an untied lm_head.weight (a quantized file
 * holds their arrays instead). head_hint (nullable) is appended to a fault
 * about an untied lm_head.weight. Errors: TFC_ERR_OOM.
 */
tfc_status tfc_gpt_want_params(const tfc_gpt *m, tfc_contract *c, uint32_t dtypes, int bare, int skip_linear,
                               int skip_head, const char *head_hint);

/*
 * The parameters a model of config cfg has, as tfc_gpt_want_params wants
 * them (every one, required) but without destinations: for a reader that
 * checks a file before it allocates the model, then points the wants at the
 * new model's tensors with tfc_gpt_want_set_dest. Errors: TFC_ERR_OOM.
 */
tfc_status tfc_gpt_want_config(const tfc_gpt_config *cfg, tfc_contract *c, uint32_t dtypes, int bare,
                               const char *head_hint);
/* The destinations of c's first m->n_params wants (tfc_gpt_want_config of m's config): m's tensors. */
tfc_status tfc_gpt_want_set_dest(const tfc_gpt *m, tfc_contract *c);

/*
 * What a Hugging Face file may hold beside the parameters: each block's
 * buffers (GPT-2's attention masks attn.bias, attn.masked_bias, under
 * either name; the Llama family's self_attn.rotary_emb.inv_freq) as ignored
 * wants, and for a tied model its lm_head.weight as an
 * optional want that must repeat wte's bytes (hint: what to change when it
 * does not). Call after tfc_gpt_want_params or tfc_gpt_want_config (bare = 1). Errors: TFC_ERR_OOM.
 */
tfc_status tfc_gpt_want_hf_extras(const tfc_gpt_config *cfg, tfc_contract *c, const char *tied_hint);

/*
 * llm.c's tensors (the table's rows with an llm.c position, in its order),
 * each whole and stacked over layers in llm.c's layout ([L, out, in] for
 * the transposed Linears), dtype `dtype`, wte's rows the symbol "Vp" (the
 * padded vocabulary, at least V), for config cfg: wanted before the model
 * is built, so a header that lies about the sizes costs nothing. No
 * destinations: the reader copies per layer. Errors: TFC_ERR_OOM.
 */
tfc_status tfc_gpt_want_llmc(const tfc_gpt_config *cfg, tfc_contract *c, tfc_dtype dtype);

/* The shape of llm.c's tensor for row r of config cfg with wte's rows padded to vp: [L,] rows, cols (or [L,] rows). */
int32_t tfc_gpt_llmc_dims(const tfc_gpt_config *cfg, int32_t vp, const gpt_param_row *r, int64_t *dims);

/*
 * The LoRA adapters a file may hold for m: for block l and Linear j
 * (i = l·n_linear + j, n_linear the architecture's), want 2·i its PEFT
 * lora_A.weight [r, in] and 2·i + 1 its lora_B.weight [out, r], optional as
 * a pair (group i + 1), float dtypes, no destinations; r is symbol *rank of
 * c, in [1, the smallest in/out of a Linear]. Errors: TFC_ERR_OOM.
 */
tfc_status tfc_gpt_want_lora(const tfc_gpt *m, tfc_contract *c, int32_t *rank);

/* PEFT's key of block Linear j of layer's A (is_b 0) or B weight in architecture a into buf. */
const char *tfc_gpt_lora_key(const gpt_arch *a, int32_t layer, int j, int is_b, char *buf, size_t n);

#endif
