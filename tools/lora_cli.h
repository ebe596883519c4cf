/*
 * LoRA in the CLI (docs/MODEL.md, "Fine-tuning with LoRA"): tfcore train's
 * --lora-* flags, a LoRA run's checkpoint files, eval/sample --lora, and
 * `tfcore lora merge`.
 */
#ifndef TFCORE_TOOLS_LORA_CLI_H
#define TFCORE_TOOLS_LORA_CLI_H

#include "cli.h"

/* tfcore train's LoRA options; rank 0: a full fine-tune (no adapters). */
typedef struct lora_opts {
    int64_t rank;
    double alpha;        /* 0: the rank (scale 1) */
    const char *targets; /* NULL: PEFT's default for the base's architecture (lora_default_targets) */
    const char *base;    /* --lora-base DIR: the base checkpoint */
    int given;           /* a --lora-rank/--lora-alpha/--lora-targets flag was given */
} lora_opts;

/* Parse --lora-<name> of tfcore train into o: 1 taken, 0 not a LoRA flag, -1 a bad value (message printed). */
int lora_parse_flag(const char *cmd, const char *name, const char *val, lora_opts *o);
/* After parsing: the flags agree with each other and with --resume; 0 or EXIT_USAGE (message printed). */
int lora_check_opts(const char *cmd, const lora_opts *o, int resume);

/*
 * The base model (and its vocabulary) of a LoRA run from a tfcore checkpoint
 * directory; preset (64 bytes) receives its train.preset when it has one.
 */
int lora_load_base(const char *cmd, const char *dir, tfc_gpt **m, vocab *v, char *preset);
/*
 * The modules a LoRA run adapts when --lora-targets is not given: PEFT's
 * default for m's architecture, "c_attn" for GPT-2, "q_proj,v_proj" for
 * llama, mistral and qwen2.
 */
const char *lora_default_targets(const tfc_gpt *m);
/*
 * Attach new adapters (o; targets NULL: lora_default_targets) to m, or with
 * `adapters` (a file or directory) the stored ones.
 */
int lora_attach(const char *cmd, tfc_gpt *m, const lora_opts *o, uint64_t seed, const char *adapters);
/* One line: rank, alpha, targets, trainable parameters against the base's, and the optimizer state saved. */
void lora_print_summary(const tfc_gpt *m);

/*
 * A LoRA run's checkpoint files into stage: adapter_model.safetensors (the
 * adapters, the n metadata pairs, the model's config keys and "lora.base")
 * and adapter_config.json (PEFT's, base_model_name_or_path = base).
 */
int lora_save(const char *cmd, const char *stage, const tfc_gpt *m, const char *base, const char *const *keys,
              const char *const *vals, int32_t n);
/* The model of a LoRA checkpoint: the base from its "lora.base" (meta: the adapter file read) + the adapters at path. */
int lora_load_checkpoint(const char *cmd, const tfc_safetensors *meta, const char *path, tfc_gpt **m);

/* tfcore lora merge BASE ADAPTER OUT. */
int cmd_lora(int argc, char **argv);

#endif
