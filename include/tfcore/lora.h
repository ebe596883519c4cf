/*
 * tfcore/lora.h — LoRA adapters (Hu et al. 2021) on a GPT's block Linear
 * layers, in Hugging Face PEFT's conventions. Guide: docs/MODEL.md,
 * "Fine-tuning with LoRA".
 *
 * An adapted layer computes y = x·W + b + (alpha/r)·(x·Aᵀ)·Bᵀ, with
 * W [in, out] the frozen base weight (GPT-2's Conv1D layout), A [r, in]
 * (PEFT's lora_A.weight) and B [out, r] (lora_B.weight). A starts
 * Kaiming-uniform as PEFT draws it (uniform(-1/√in, 1/√in)), B at zero, so
 * a freshly adapted model computes exactly what the base does. The
 * forward pass, the KV-cache paths and generation all run the adapters; a
 * graph records them, so autograd gives their gradients.
 *
 * Targets are PEFT's target_modules: a comma-separated list of module-name
 * suffixes matched at dot boundaries against each block Linear's name
 * "transformer.h.<l>.attn.c_attn", ".attn.c_proj", ".mlp.c_fc",
 * ".mlp.c_proj". So "c_proj" takes both attn.c_proj and mlp.c_proj (as in
 * PEFT), "attn.c_proj" only the attention's, "h.0.attn.c_attn" one layer;
 * "all-linear" takes all four in every block. The LM head and embeddings
 * are never adapted.
 *
 * Files: tfc_gpt_save_lora writes the adapters under PEFT's names
 * ("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight" [r, in],
 * "...lora_B.weight" [out, r]; fan_in_fan_out = true, the layout PEFT uses
 * for GPT-2's Conv1D), and tfc_gpt_save_lora_config an adapter_config.json
 * beside it, so a directory holding both is one PEFT adapter
 * (PeftModel.from_pretrained reads it) and tfc_gpt_load_lora reads PEFT's.
 *
 * Thread-safety: as for the model (include/tfcore/gpt.h): the functions
 * that change m must not run concurrently with any other use of it.
 */
#ifndef TFCORE_LORA_H
#define TFCORE_LORA_H

#include "tfcore/core.h"
#include "tfcore/gpt.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * How to adapt a model. Set struct_size = sizeof(tfc_lora_config) (the
 * INIT macro does): fields added later go at the end.
 */
typedef struct tfc_lora_config {
    uint32_t struct_size;
    int32_t rank;        /* r: 1 .. min(in, out) of every targeted layer */
    double alpha;        /* lora_alpha: the update is scaled by alpha / rank; finite, > 0 */
    const char *targets; /* comma-separated module-name suffixes, or "all-linear" (above) */
    uint64_t seed;       /* the Philox stream lora_A is drawn from */
} tfc_lora_config;

/* PEFT's defaults for GPT-2: r 8, lora_alpha 8, target_modules ["c_attn"]; seed 0. */
#define TFC_LORA_CONFIG_INIT \
    { (uint32_t)sizeof(tfc_lora_config), 8, 8.0, "c_attn", 0 }

/*
 * Attach LoRA adapters to the layers cfg->targets names and freeze the
 * base: every parameter of tfc_gpt_params gets requires_grad 0, so a
 * graph records (and backward computes) gradients for the adapters only.
 * The adapters are created in the model's dtype on its device; their
 * tensors come from tfc_gpt_lora_params (build the optimizer from those).
 * Layer l's A draws from Philox (cfg->seed, offset) with offsets
 * consecutive in tfc_gpt_lora_params order, so a seed gives the same
 * adapters on any device.
 *
 * Quantized models (tfc_gpt_quantize) are inference-only: adapters can be
 * loaded onto one (tfc_gpt_load_lora) for eval and generation, but not
 * trained (the quantized linear has no backward) or merged.
 *
 * Errors (m unchanged): NULL m or cfg, cfg->struct_size too small
 * (TFC_ERR_VERSION); m has adapters already; cfg->rank < 1 or above
 * min(in, out) of a targeted layer (naming it); cfg->alpha not finite or
 * <= 0; cfg->targets NULL, empty, with an empty item, or an item that
 * matches no layer (TFC_ERR_INVALID_ARG naming the item and the layer
 * names); a quantized model (TFC_ERR_UNSUPPORTED); TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_add_lora(tfc_gpt *m, const tfc_lora_config *cfg);

/*
 * The adapter tensors under their PEFT names, in the model's module order
 * (per block: attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj; lora_A then
 * lora_B): *names[i], *params[i] for i < *n (*n = 0 without adapters).
 * Borrowed, valid until the adapters are merged, or the model moved or
 * released. Each requires grad. Errors: NULL arguments.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_lora_params(const tfc_gpt *m, int32_t *n, const char *const **names,
                                                     tfc_tensor *const **params);

/*
 * The adapters' rank, alpha, targets (borrowed from m, valid while the
 * adapters live) and seed into *cfg (cfg->struct_size must be set). A model
 * without adapters gives rank 0, alpha 0 and targets NULL. Errors: NULL
 * arguments, struct_size too small (TFC_ERR_VERSION).
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_get_lora_config(const tfc_gpt *m, tfc_lora_config *cfg);

/*
 * Fold the adapters into the base: W += (alpha/r)·(B·A)ᵀ for each adapted
 * layer, then drop the adapters and make every base parameter require grad
 * again. The merged model's outputs equal the adapted model's to rounding
 * (one f32 addition per weight). Errors (m unchanged): NULL m, no adapters
 * (TFC_ERR_INVALID_ARG); a quantized model (TFC_ERR_UNSUPPORTED);
 * TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_merge_lora(tfc_gpt *m);

/*
 * Write the adapters to a safetensors file at path under their PEFT names,
 * with metadata "format" = "pt", "tfc.lora.rank", "tfc.lora.alpha",
 * "tfc.lora.targets" and n_meta extra pairs of the caller (e.g. a training
 * position). Atomic as tfc_safetensors_save. Errors: NULL m or path, m
 * without adapters, n_meta < 0 or NULL keys/values with n_meta > 0
 * (TFC_ERR_INVALID_ARG); as tfc_safetensors_save.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_save_lora(const tfc_gpt *m, const char *path,
                                                   const char *const *meta_keys /* nullable when n_meta == 0 */,
                                                   const char *const *meta_values /* nullable when n_meta == 0 */,
                                                   int32_t n_meta);

/*
 * Write PEFT's adapter_config.json for m's adapters to path (usually
 * DIR/adapter_config.json beside DIR/adapter_model.safetensors): peft_type
 * LORA, task_type CAUSAL_LM, r, lora_alpha, target_modules (the targets'
 * items), fan_in_fan_out true, lora_dropout 0, bias "none",
 * base_model_name_or_path (the argument; NULL writes null). Atomic.
 * Errors: NULL m or path, no adapters (TFC_ERR_INVALID_ARG), TFC_ERR_IO.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_save_lora_config(const tfc_gpt *m, const char *path,
                                                          const char *base_model /* nullable */);

/*
 * Attach the adapters stored at path — a file written by tfc_gpt_save_lora
 * or PEFT, or a directory holding adapter_model.safetensors — and freeze
 * the base, as tfc_gpt_add_lora does. The layers adapted and the rank come
 * from the tensors; alpha from the metadata tfc_gpt_save_lora writes, else
 * from "lora_alpha" of the adapter_config.json beside the file. Values are
 * converted to the model's dtype and device. Works on a quantized model
 * too (inference).
 *
 * Errors (m unchanged): NULL arguments; m has adapters already
 * (TFC_ERR_INVALID_ARG); an unreadable or corrupt file (TFC_ERR_IO,
 * TFC_ERR_FORMAT as tfc_safetensors_load); a tensor that is not a LoRA
 * weight of a block Linear, a layer with lora_A or lora_B missing, ranks
 * that differ, a tfc.lora.rank or adapter_config.json "r" other than the
 * tensors' rank, a non-float dtype (refused before any conversion), no
 * alpha (TFC_ERR_FORMAT naming it); a PEFT setting the model cannot honour
 * (TFC_ERR_UNSUPPORTED naming it: alpha_pattern, rank_pattern,
 * layers_to_transform, modules_to_save, use_dora, lora_bias, bias other
 * than "none"); a layer beyond the model's or a shape that does not fit the
 * model (TFC_ERR_SHAPE naming the tensor, its shape and the expected one);
 * a non-finite value (TFC_ERR_NONFINITE); TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gpt_load_lora(tfc_gpt *m, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_LORA_H */
