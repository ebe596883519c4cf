/*
 * The models the CLI reads besides its own checkpoints: what `tfcore eval
 * --ckpt`, `tfcore sample --ckpt`, `tfcore train --init-from` and `tfcore
 * export` may name (docs/MODEL.md, "Other tools' model files").
 */
#ifndef TFCORE_TOOLS_MODEL_SOURCE_H
#define TFCORE_TOOLS_MODEL_SOURCE_H

#include "cli.h"

typedef enum {
    SRC_CKPT = 1, /* a directory written by tfcore train */
    SRC_HF,       /* a Hugging Face directory (GPT-2, Llama, Mistral, Qwen2): config.json + model.safetensors */
    SRC_LLMC      /* an llm.c GPT-2 checkpoint file (gpt2_124M.bin) */
} model_kind;

/* "tfcore checkpoint", "Hugging Face directory", "llm.c checkpoint". */
const char *model_kind_name(model_kind k);

/* Which kind path is, by content; 0 or an exit code (message printed). */
int model_source_kind(const char *cmd, const char *path, model_kind *kind);

/*
 * Build the model at path and its vocabulary: `tokenizer` (a --tokenizer
 * value naming a vocabulary to read: gpt2:DIR, a tokenizer FILE, a char
 * FILE) when not NULL; else a checkpoint's own, a Hugging Face directory's
 * vocab.json + merges.txt, else its tokenizer.json; an llm.c file has none,
 * so it needs tokenizer. A vocabulary larger than the model's (rows of its
 * token embedding) is
 * refused. need_vocab 0: a source without one is fine (v->size 0). *kind
 * (may be NULL) receives the kind. 0 or an exit code (message printed,
 * nothing returned).
 */
int model_source_load(const char *cmd, const char *path, const char *tokenizer, int need_vocab, tfc_gpt **m, vocab *v,
                      model_kind *kind);

/* The preset a --init-from run records (train.preset): its shape is the source model's. */
#define INIT_PRESET "init-from"

#endif
