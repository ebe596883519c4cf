/*
 * tfcore train's flags: what a run is asked to do, with the defaults, the
 * usage text and the checks a flag can fail on its own (before anything is
 * read). A new flag lives here: a field, its row in train_options.c, a line
 * of usage, and the check of its value.
 */
#ifndef TFCORE_TOOLS_TRAIN_OPTIONS_H
#define TFCORE_TOOLS_TRAIN_OPTIONS_H

#include <stdio.h>

#include "cli.h"
#include "lora_cli.h"
#include "train_forensics.h"
#include "train_shape.h"

typedef struct train_opts {
    const char *data, *tokenizer, *preset, *out, *log_json, *device, *dtype;
    const char *data_bin, *val_bin, *data_format; /* pre-tokenized shards (--data-bin) instead of a text */
    const char *init_from;                        /* --init-from: start from this model's weights */
    int32_t cuda_index;                           /* -1: train on the CPU */
    int64_t steps, batch, seed, eval_every, eval_batches;
    int64_t warmup;     /* -1: 100 steps, or steps/10 below 1000 steps */
    int64_t stop_after; /* 0: run to --steps */
    int64_t sample_tokens;
    int64_t profile_steps; /* 0: no --profile */
    int64_t save_every;    /* 0: checkpoint at the end only */
    int64_t grad_accum;    /* micro-steps per optimizer step */
    int64_t zero;          /* 1: ZeRO-1 sharded optimizer state */
    int64_t bucket_mb;     /* DDP bucket size, MiB */
    int64_t log_every;     /* --log-every: steps between reads of the loss and norm; 0: 1 on the CPU, 10 on CUDA */
    double lr, min_lr, weight_decay, clip;
    int resume, force, preset_given, tokenizer_given;
    forensics_opts fx; /* --overfit-batch, --skip-nonfinite, --log-grad-norms, --recompute */
    lora_opts lora;    /* --lora-*: adapters on a frozen base (tools/lora_cli.c) */
    train_shape shape; /* --n-layer ... --dropout --bias over the preset */
    double peak_flops; /* --peak-flops; 0: measured (CPU) or the card's table entry (CUDA) */
    int plan;          /* --plan: print the memory plan and exit */
} train_opts;

/* The usage text of tfcore train --help. */
void train_usage(FILE *f);

/* Parse and check the flags into *o (--help prints the usage and exits); 0 or the exit code (message printed). */
int train_parse(int argc, char **argv, train_opts *o);

#endif
