/*
 * tfcore train's checks for a run that goes wrong: --overfit-batch (train
 * on one fixed batch: does the loss reach ~0?), the non-finite watch (a NaN
 * or Inf loss or gradient stops the run, or --skip-nonfinite N skips up to
 * N such steps, and writes a report next to the checkpoint), per-layer
 * gradient norms in the JSON log (--log-grad-norms K), and --recompute
 * (activation checkpointing of every block, tfc_gpt_set_recompute).
 * cmd_train.c parses the flags here and calls the hooks at the points each
 * names.
 */
#ifndef TFCORE_TOOLS_TRAIN_FORENSICS_H
#define TFCORE_TOOLS_TRAIN_FORENSICS_H

#include "cli.h"

/* Steps of gradient and weight norms a non-finite report looks back over. */
enum { FX_RING = 8 };
/* The loss --overfit-batch must get below. */
#define FX_OVERFIT_LOSS 0.05

typedef struct forensics_opts {
    int overfit;            /* --overfit-batch */
    int recompute;          /* --recompute */
    int64_t skip_nonfinite; /* --skip-nonfinite N: steps that may be skipped */
    int64_t log_grad_norms; /* --log-grad-norms K: every K steps; 0 off */
} forensics_opts;

/*
 * One of this file's flags? Returns 1 when name is one (then *rc is 0, or
 * the exit code of a bad value, message printed), else 0.
 */
int fx_parse_flag(forensics_opts *o, const char *cmd, const char *name, const char *val, int *rc);
/* The flags' usage lines. */
void fx_usage(FILE *f);
/* Combinations refused (--overfit-batch with --resume or --save-every); 0 or the exit code. */
int fx_check_opts(const forensics_opts *o, const char *cmd, int resume, int64_t save_every);

/* A parameter group of the report and the log: one block (transformer.h.N), or a parameter outside them. */
typedef struct fx_ring_entry {
    int64_t step; /* 1-based, as the log's; 0: empty */
    double loss, lr;
    double *grad, *weight; /* [n params] L2 norms */
} fx_ring_entry;

typedef struct forensics {
    forensics_opts o;
    const char *out;
    int32_t n;
    const char *const *names;
    tfc_tensor *const *params;
    int32_t n_groups;
    char **group_names; /* [n_groups] */
    int32_t *group;     /* [n] the group of parameter i */
    fx_ring_entry ring[FX_RING];
    int32_t head; /* the entry of the last step measured */
    int64_t skipped;
    double first_loss, last_loss; /* --overfit-batch */
    int64_t last_step;
} forensics;

/* Before the first step: the model's parameters, the norms' ring, --recompute. 0 or the exit code. */
int fx_setup(forensics *f, const forensics_opts *o, const char *cmd, const char *out, tfc_gpt *m);
void fx_free(forensics *f);

/* The batch step `step` (0-based) trains on: batch 0 every step under --overfit-batch. */
int64_t fx_batch_index(const forensics *f, int64_t step);

enum { FX_SKIP = -1 };
/*
 * After backward (gradients final, loss averaged over ranks), before
 * clipping: measure the norms, and on a non-finite loss or gradient write
 * the report. Returns 0 to go on with the update, FX_SKIP to drop this
 * step's update (--skip-nonfinite; gradients must then be zeroed without
 * clipping or stepping, so Adam's state does not move), or the exit code
 * of stopping (message printed). Every rank takes part (the verdict is
 * agreed over comm); rank 0 writes the files.
 */
int fx_after_backward(forensics *f, const char *cmd, int64_t step, double lr, double loss, const tfc_tensor *x,
                      const tfc_tensor *y, tfc_comm *comm, int rank);

/* --log-grad-norms: the `, "grad_norms": {...}` member of step done's JSON line, when it is due. */
void fx_log_json(const forensics *f, FILE *jl, int64_t done);

/* --overfit-batch: note step done's loss; 1 when it is below FX_OVERFIT_LOSS (the loop may stop). */
int fx_overfit_step(forensics *f, int64_t done, double loss);
/* --overfit-batch, at the end: the verdict line; 0 when the loss got below FX_OVERFIT_LOSS, else EXIT_RUNTIME. */
int fx_overfit_report(const forensics *f, const char *cmd);

#endif
