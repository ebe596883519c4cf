/*
 * Hugging Face config.json of the Llama family (gpt_hf_llama.c), for the
 * HF directory reader and writer (gpt_hf.c).
 */
#ifndef TFC_MODEL_GPT_HF_H
#define TFC_MODEL_GPT_HF_H

#include "io/json.h"
#include "tfcore/gpt.h"

/*
 * config.json's tree root (model_type arch: llama, mistral or qwen2) as a
 * config, validated; anything the model cannot honour refused by name
 * (TFC_ERR_UNSUPPORTED), missing or malformed keys TFC_ERR_FORMAT, both
 * naming path.
 */
tfc_status tfc_gpt_llama_config_from_json(const char *fn, const char *path, const json_t *root, int32_t arch,
                                          tfc_gpt_config *c);

/*
 * c (a Llama-family config) as transformers' config.json, keys sorted as it writes them; ids -1: left out;
 * torch_dtype the JSON string of the stored dtype ("\"bfloat16\"").
 */
void tfc_gpt_llama_config_json(tfc_strbuf *b, const tfc_gpt_config *c, int32_t bos, int32_t eos,
                               const char *torch_dtype);

#endif
