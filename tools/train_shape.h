/*
 * tfcore train's model shape flags on top of a preset (nanoGPT's config
 * overrides): --n-layer --n-head --n-embd --block-size --dropout
 * --bias/--no-bias, and the architecture with its own widths: --arch
 * gpt2|llama|mistral|qwen2, --n-kv-head, --mlp-hidden, --rope-theta,
 * --sliding-window. A resumed run takes its shape from the checkpoint.
 */
#ifndef TFC_TOOLS_TRAIN_SHAPE_H
#define TFC_TOOLS_TRAIN_SHAPE_H

#include <stdint.h>

#include "tfcore/gpt.h"
#include "tfcore/io.h"

typedef struct train_shape {
    int64_t n_layer, n_head, n_embd, block_size; /* 0: the preset's (or the resumed checkpoint's) */
    int bias;                                    /* -1: the preset's / checkpoint's; 0 --no-bias; 1 --bias */
    double dropout;                              /* < 0: not given (0, or the resumed checkpoint's) */
    int32_t arch;                                /* -1: the preset's / checkpoint's; else a tfc_gpt_arch */
    int64_t n_kv_head, mlp_hidden;               /* 0: the preset's / checkpoint's (or the family's default) */
    double rope_theta;                           /* 0: the preset's / checkpoint's */
    int64_t sliding_window;                      /* -1: the preset's / checkpoint's; 0: none */
} train_shape;

#define TRAIN_SHAPE_INIT \
    { 0, 0, 0, 0, -1, -1.0, -1, 0, 0, 0.0, -1 }

/*
 * Whether `name` (a flag without its dashes) is a shape flag: 1 when it is
 * (parsed into *s; *rc then 0 or the exit code of a bad value, already
 * reported), 0 when it is not.
 */
int train_shape_parse(const char *cmd, const char *name, const char *val, train_shape *s, int *rc);

/*
 * The flags applied to c (already the preset's config). --arch first: a
 * switch to the Llama family takes the family's defaults (rotary positions
 * with theta 10000, no biases but Qwen2's q/k/v ones, an untied head, n_kv_head
 * and mlp_hidden their defaults) and one to GPT-2 drops the family's
 * fields; then the widths. ckpt (NULL unless resuming) is the checkpoint's
 * model file: its dropout is kept unless --dropout is given, and with
 * keep_shape (no --preset given) so is its whole shape, read by
 * tfc_gpt_config_from_metadata, a flag that asks for another being an
 * error naming the flag and the checkpoint's tfc.* key; without keep_shape
 * the preset and flags make the shape and the caller compares it with the
 * checkpoint's. Checks the result (n_head divides n_embd, n_kv_head divides
 * n_head, a family flag on GPT-2, ...) and resolves n_kv_head and
 * mlp_hidden for the Llama family. Returns 0 or the exit code after a
 * one-line error.
 */
int train_shape_apply(const char *cmd, const train_shape *s, const tfc_safetensors *ckpt, int keep_shape,
                      tfc_gpt_config *c);

/* Whether any shape flag was given (the header then says "preset X with overrides"). */
int train_shape_given(const train_shape *s);

#endif
