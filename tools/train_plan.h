/*
 * tfcore train's memory plan (--plan, and the header of every run): the
 * bytes a training step needs for the actual config, from what each op of
 * the forward pass keeps for backward, next to the measured peak after the
 * run. docs/MODEL.md, "Knowing what a run costs".
 */
#ifndef TFC_TOOLS_TRAIN_PLAN_H
#define TFC_TOOLS_TRAIN_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "tfcore/gpt.h"

typedef struct train_plan {
    int64_t params, grads, optim;      /* bytes: weights, their gradients, AdamW's two moments */
    int64_t acts, acts_recompute;      /* kept for backward per micro-batch; with per-block recomputation */
    int64_t workspace;                 /* transient: the head's logits chunk, backward's activation gradients */
    int64_t copies;                    /* bf16 autocast: the Linear and head weights' bf16 copies (0 without) */
    int64_t eval;                      /* an evaluation forward of the whole batch (no graph) */
    int64_t kv_cache;                  /* sampling one sequence of block_size positions */
    int64_t peak, peak_recompute;      /* max(params + grads + optim + copies + acts + workspace,
                                          params + optim + copies + eval) */
    int64_t n_params, rows, eval_rows; /* parameter count; tokens per micro-batch and per evaluation batch */
} train_plan;

/*
 * The plan of training cfg with micro-batches of `rows` sequences of
 * cfg->block_size tokens, grad_accum micro-steps a step, evaluated in
 * batches of eval_rows sequences; autocast_bf16: --dtype bf16 (the CPU's
 * form of it, whose GEMM operands are bf16 values in f32 storage). Byte
 * counts are what the CPU allocator hands out (each tensor rounded up to
 * its size class, lib/core/alloc.c).
 */
void train_plan_make(const tfc_gpt_config *cfg, int64_t rows, int64_t eval_rows, int64_t grad_accum, int autocast_bf16,
                     train_plan *p);

/* The plan as a table on f. */
void train_plan_print(FILE *f, const train_plan *p, const tfc_gpt_config *cfg);

/* The allocator's high-water mark (tfc_memory_stats) and peak RSS (VmHWM), bytes; -1 where unknown. */
void train_plan_measure(int64_t *lib_peak, int64_t *lib_live, int64_t *rss_peak, int64_t *rss_now);

#endif
