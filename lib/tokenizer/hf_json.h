/*
 * Reading a Hugging Face tokenizer.json (shared by hf_json.c, which reads
 * the model and the added tokens and builds the tokenizer, and
 * hf_pipeline_json.c, which reads the normalizer, pre-tokenizer,
 * post-processor and decoder). Every refusal is TFC_ERR_FORMAT
 * "fn: 'path': <field>: <why>", the field written as a JSON path
 * (pre_tokenizer.pretokenizers[0].pattern.Regex).
 */
#ifndef TFC_TOKENIZER_HF_JSON_H
#define TFC_TOKENIZER_HF_JSON_H

#include <jansson.h>

#include "core/error.h"
#include "tokenizer/hf.h"

typedef struct hf_ctx {
    const char *fn, *path;
} hf_ctx;

/* TFC_ERR_FORMAT "fn: 'path': field: <fmt...>". */
tfc_status hf_bad(const hf_ctx *c, const char *field, const char *fmt, ...) TFC_PRINTF(3, 4);

/* obj must be an object whose keys are all in allowed (NULL-terminated); else a refusal naming the first other key. */
tfc_status hf_check_keys(const hf_ctx *c, const json_t *obj, const char *field, const char *const *allowed);

/* obj["type"] as a string, or a refusal. */
tfc_status hf_type(const hf_ctx *c, const json_t *obj, const char *field, const char **type);

/* obj[key]: absent or null leaves *v; true/false sets it; anything else is refused. */
tfc_status hf_bool(const hf_ctx *c, const json_t *obj, const char *field, const char *key, int *v);

/* The decoder steps the tokenizer.json asks for (hf_pipeline_json.c fills it). */
typedef struct hf_replace {
    char *from, *to;
} hf_replace;

typedef struct hf_pipeline {
    /* pre-tokenizer */
    int32_t pattern; /* TFC_SPLIT_*: Split's regex or ByteLevel's use_regex */
    int byte_level;  /* a ByteLevel pre-tokenizer: the model is byte-level */
    int metaspace, ms_prepend, ms_split;
    /* decoder */
    int dec_byte_level;      /* ByteLevel */
    hf_replace *dec_replace; /* Replace steps, in order, before ByteFallback */
    int32_t n_dec_replace;
    int dec_byte_fallback;
    int32_t strip_start, strip_stop;
    char strip_char;
    /* post-processor: the single-sequence template's special token names around the text */
    const char **prefix, **suffix; /* point into the document */
    int32_t n_prefix, n_suffix;
    const json_t *special_tokens; /* TemplateProcessing.special_tokens (borrowed), or NULL */
} hf_pipeline;

void hf_pipeline_free(hf_pipeline *p);

/* normalizer -> h->norms; pre_tokenizer, decoder, post_processor -> p. A null or absent section is none. */
tfc_status hf_read_normalizer(const hf_ctx *c, const json_t *v, tok_hf *h);
tfc_status hf_read_pre_tokenizer(const hf_ctx *c, const json_t *v, hf_pipeline *p);
tfc_status hf_read_decoder(const hf_ctx *c, const json_t *v, hf_pipeline *p);
tfc_status hf_read_post_processor(const hf_ctx *c, const json_t *v, hf_pipeline *p);

#endif
