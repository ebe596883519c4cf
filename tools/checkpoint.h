/* Checkpoint directories of the CLI (layout and guarantees in checkpoint.c and docs/MODEL.md). */
#ifndef TFCORE_TOOLS_CHECKPOINT_H
#define TFCORE_TOOLS_CHECKPOINT_H

#include "checkpoint_manifest.h"
#include "cli.h"

/* What one save holds. */
typedef struct ckpt_contents {
    const tfc_gpt *model;
    tfc_optim *opt; /* NULL: no optimizer state */
    const vocab *v;
    const char *const *keys, *const *vals; /* extra model metadata (train.step, ...) */
    int32_t n_meta;
    int64_t step;          /* steps trained, as in train.step */
    const loss_log *curve; /* NULL: no loss.csv / loss.svg */
    const char *curve_title;
    /*
     * A LoRA run (tools/lora_cli.c): the adapters go to adapter_model.safetensors
     * (+ adapter_config.json) instead of the base weights to model.safetensors;
     * lora_base is the base checkpoint's directory, recorded as "lora.base".
     */
    const char *lora_base;
} ckpt_contents;

/*
 * Save into dir as one unit: every file goes to dir/.checkpoint.new, is
 * fsync'd and hashed; checkpoint.json, written there last, commits the save;
 * then the files are renamed into dir and checkpoint.json last. A kill at any
 * point leaves the previous checkpoint or the new one (ckpt_recover finishes
 * a committed save). Starts with ckpt_recover.
 */
int ckpt_save(const char *cmd, const char *dir, const ckpt_contents *c);

/*
 * For the one writer of dir (tfcore train), before it reads or writes a
 * checkpoint there: finish a committed but unfinished save, discard an
 * uncommitted one, and remove orphaned temporary files (NAME.tmp.PID.N of a
 * checkpoint file NAME whose process PID is gone). Other files are left alone.
 */
int ckpt_recover(const char *cmd, const char *dir);

/* dir holds a checkpoint (or a committed save not yet moved in). */
int ckpt_exists(const char *dir);

enum {
    CKPT_VERIFY = 1,    /* check the files read against checkpoint.json (size + hash) */
    CKPT_OPTIMIZER = 2, /* also read the optimizer state; refuse one whose step is not the model's */
};

/* An opened checkpoint: its manifest, the files read (kept open, so they cannot change under us). */
typedef struct ckpt_set {
    const char *dir;
    int has_manifest; /* 0: a directory from before checkpoint.json: its files as they are */
    ckpt_manifest man;
    int32_t n;
    struct {
        const char *name;
        int fd;
        char path[4096]; /* where it was found */
    } files[CKPT_MAX_FILES];
    tfc_safetensors *model; /* model.safetensors, or a LoRA run's adapter_model.safetensors (for its metadata) */
    int lora;               /* the set holds LoRA adapters on a base in another directory ("lora.base") */
    tfc_safetensors *optim; /* optimizer.safetensors, with CKPT_OPTIMIZER */
    int64_t step;           /* the model's train.step; -1 when absent */
} ckpt_set;

/* Open dir's checkpoint for reading (flags: CKPT_*); errors are printed and returned as exit codes. */
int ckpt_open(const char *cmd, const char *dir, int flags, ckpt_set *s);
/* The path to read the opened file name from (the very file verified), or where it would be. */
const char *ckpt_path(const ckpt_set *s, const char *name);
void ckpt_close(ckpt_set *s);
/* Build the model and vocabulary of an opened checkpoint (a LoRA one: its base with the adapters attached). */
int ckpt_load_model(const char *cmd, const ckpt_set *s, tfc_gpt **m, vocab *v);
/* Restore the optimizer state of a set opened with CKPT_OPTIMIZER (then dropped from memory). */
int ckpt_load_optim(const char *cmd, ckpt_set *s, tfc_optim *opt);

#endif
