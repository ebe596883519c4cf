/*
 * One tfcore train run, by concern; tools/cmd_train.c drives them in order
 * (load, build, loop, save):
 *   train_options.c     the flags, their defaults, usage and checks (train_options.h)
 *   train_data.c        the tokens: a text encoded into OUT/data.tokens, or --data-bin shards; the validation split
 *   train_model.c       the model's source (preset and shape, --init-from, a LoRA base), the model and its optimizer
 *   train_checkpoint.c  --out's checkpoint: what a resumed or refused run reads from it, and the saves
 *   train_loop.c        the steps: batches, micro-steps, clipping, the optimizer, evaluation, --profile
 *   train_report.c      what a run prints: the header, MFU, progress, --log-json, memory, the final line, a sample
 */
#ifndef TFCORE_TOOLS_TRAIN_RUN_H
#define TFCORE_TOOLS_TRAIN_RUN_H

#include <time.h>

#include "checkpoint.h"
#include "train_options.h"

#define CMD "train"

/* One run's state: load, build, loop and save fill it in that order; run_free frees it. */
typedef struct train_run {
    train_opts o;
    char preset[64];      /* --resume without --preset: the checkpoint's (a LoRA run: the base's) */
    char lora_base[4096]; /* --resume of a LoRA run: the base its checkpoint names */
    const char *data_path;
    vocab v;
    tfc_gpt_config cfg;
    int64_t start, end_step;   /* this run trains steps [start, end_step) */
    int64_t n_tokens, n_train; /* the corpus; tokens from n_train on are the validation split */
    tfc_token_file *tf;
    tfc_token_file *vf;                                  /* the validation tokens: tf, or --val-bin's own file */
    int64_t val_begin, val_end;                          /* the validation split: [val_begin, val_end) of vf */
    char data_bin[4096], val_bin[4096], data_format[16]; /* --resume: what the checkpoint trained on */
    const char *bin_format[2];                           /* --data-bin, --val-bin: the format found */
    int64_t bin_files[2];                                /* and their number of files */
    tfc_gpt *m;
    tfc_gpt *init; /* --init-from: the model read, until build takes it */
    tfc_optim *opt;
    tfc_graph *g;
    tfc_comm *comm; /* mpirun's ranks, or this process alone */
    int32_t rank, size;
    tfc_ddp *ddp; /* several ranks without --zero: gradients averaged during backward */
    ckpt_set ck;  /* --resume: the checkpoint, open from load until build has read it */
    FILE *jl;     /* --log-json */
    loss_log curve;
    int64_t prof_begin, prof_end; /* the profiled steps; empty without --profile */
    double t0, last_val;
    forensics fx;                                /* train_forensics.h */
    int fx_rc;                                   /* this step's fx_after_backward verdict */
    int64_t log_every;                           /* --log-every resolved (1 when a check needs every step) */
    double flops_per_token, peak_flops, mfu_sum; /* MFU (train_mfu.h): per-step values summed for the mean */
    int64_t mfu_n;
    int peak_measured;   /* the peak is this CPU's measured one (not --peak-flops or a datasheet's) */
    int peak_rechecked;  /* a step above it made train_report_check_mfu measure again */
    int64_t mfu_unknown; /* logged steps above even that peak: their MFU is not shown, nor the mean */
    char peak_src[512];
    int64_t mem_base, rss_base; /* library bytes live and RSS before the model was built */
} train_run;

/* What one step reports: to the loss curve, --log-json and the progress line. */
typedef struct step_stats {
    int64_t done; /* steps finished, this one included */
    int eval;     /* val was measured after this step */
    double loss, val, lr, norm, tokens_per_s, elapsed_s;
    double mfu; /* model FLOPs utilisation of this step, a fraction */
} step_stats;

static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- train_data.c ---- */

/* --data, else $TFCORE_DATA, else the corpus that ships with the project (the path even when missing). */
const char *train_find_data(const char *given);
/* Encode the corpus into OUT/data.tokens and open it; the last 10% is the validation split. */
int train_load_tokens(train_run *r, const char *text, size_t len);
/* --data-bin (and --val-bin): the shards read in place; the validation split. */
int train_load_bin(train_run *r);

/* ---- train_model.c ---- */

/*
 * The vocabulary (unless a resume read it) and the config: a LoRA base's,
 * --init-from's, or a preset's with the shape flags; text is the corpus a
 * char or bpe vocabulary is learnt from.
 */
int train_model_source(train_run *r, const char *text, size_t len);
/* The model, on its device, its optimizer, a resumed run's state, the graph, DDP, --log-json, the forensics. */
int train_build(train_run *r);

/* ---- train_checkpoint.c ---- */

/* --resume: open the checkpoint in --out (verified), its vocabulary, and the preset and shards it recorded. */
int train_ckpt_open_resume(train_run *r);
/* --resume of a LoRA run: the base the checkpoint names, unless --lora-base moves it. */
int train_ckpt_lora_base(train_run *r);
/* Refuse a checkpoint in --out of another config; --resume: the step to start from, refusing a stop at or before it. */
int train_ckpt_check_existing(train_run *r, const tfc_gpt_config *c, int64_t *start_step);
/* --resume --tokenizer: refused unless it names the checkpoint's vocabulary (text: the corpus, NULL with --data-bin). */
int train_ckpt_check_tokenizer(const train_run *r, const char *text, size_t len);
/* --resume: weights, optimizer state and loss history from the checkpoint (closed after). */
int train_ckpt_resume_state(train_run *r);
/* The checkpoint after `done` steps (a collective with ZeRO-1; rank 0 writes). */
int train_ckpt_save(const train_run *r, int64_t done);

/* ---- train_loop.c ---- */

/* Steps [start, end_step): train, evaluate, log, --save-every. */
int train_loop(train_run *r);

/* ---- train_report.c ---- */

/* The run's header: data, shape, device, ranks, the memory plan, the steps. */
void train_report_header(const train_run *r);
/* The FLOPs per token and the peak MFU is measured against (into r), and their line. */
void train_report_mfu(train_run *r);
/*
 * A step's MFU above 100% of a measured peak is impossible: the peak was
 * measured low. The first time, measure again (the larger peak kept, the
 * step's MFU recomputed, a line says so); if the step is still above, its
 * MFU becomes NaN: "n/a" in the progress, null in --log-json, and the
 * final line's mean is "n/a" too.
 */
void train_report_check_mfu(train_run *r, step_stats *st);
/* One logged step: its --log-json record (when asked) and its progress line or bar. */
void train_report_step(const train_run *r, const step_stats *st);
/* The end of a run: the memory measured, the checkpoint, ZeRO's and DDP's numbers, the final line, a sample. */
int train_report_end(train_run *r);

#endif
