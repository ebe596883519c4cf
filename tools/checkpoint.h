/* Checkpoint directories of the CLI (layout in checkpoint.c). */
#ifndef TFCORE_TOOLS_CHECKPOINT_H
#define TFCORE_TOOLS_CHECKPOINT_H

#include "cli.h"

/* Save model (+ n extra metadata pairs), optimizer state (opt may be NULL), tokenizer, config.json. */
int ckpt_save(const char *cmd, const char *dir, const tfc_gpt *m, tfc_optim *opt, const vocab *v,
              const char *const *keys, const char *const *vals, int32_t n);
/* Parse dir/model.safetensors (for its metadata). */
int ckpt_open(const char *cmd, const char *dir, tfc_safetensors **file);
/* Build the model and vocabulary a checkpoint holds. */
int ckpt_load_model(const char *cmd, const char *dir, tfc_gpt **m, vocab *v);
/* Restore the optimizer state saved beside the model. */
int ckpt_load_optim(const char *cmd, const char *dir, tfc_optim *opt);

#endif
