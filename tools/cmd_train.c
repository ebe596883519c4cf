/*
 * tfcore train: tokenize a text file (or read tokens made already: llm.c
 * shards, nanoGPT's u16 files, --data-bin), train a GPT with AdamW (decay
 * on 2-D weights only), warmup + cosine learning rate and gradient
 * clipping, evaluate on the held-out last 10% (or --val-bin), then write a
 * checkpoint, the loss curve (CSV + SVG) and a short sample.
 *
 * Reproducibility: the model is initialised from --seed, batch `step` is
 * drawn from (seed, step), the learning rate is a function of the step, and
 * the checkpoint holds the weights and the whole optimizer state — so N
 * steps, save, --resume, M more steps give the same numbers as N+M steps.
 *
 * Under `mpirun -np N`, --batch stays the global batch: each step's B rows
 * are drawn as in one process and split into --grad-accum K micro-steps of
 * N slices of B/(N·K) rows, rank r taking slice r of each micro-step, so N
 * ranks see exactly the tokens one process sees. Gradients are averaged by
 * tfc_ddp during backward (or reduce-scattered by the ZeRO-1 optimizer,
 * --zero 1); rank 0 logs, evaluates, samples and writes the checkpoint,
 * which does not depend on N (docs/DISTRIBUTED.md).
 */
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "model_source.h"
#include "cli.h"
#include "train_forensics.h"
#include "lora_cli.h"
#include "train_mfu.h"
#include "train_plan.h"
#include "train_shape.h"

static const char *CMD = "train";

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

static const train_opts defaults = {
    .tokenizer = "char",
    .preset = "char-tiny",
    .out = "out",
    .device = "cpu",
    .dtype = "f32",
    .data_format = "auto",
    .cuda_index = -1,
    .steps = 2000,
    .batch = 16,
    .seed = 1337,
    .eval_every = 100,
    .eval_batches = 10,
    .warmup = -1,
    .sample_tokens = 300,
    .lr = 1e-3,
    .min_lr = 1e-4,
    .weight_decay = 0.1,
    .clip = 1.0,
    .grad_accum = 1,
    .bucket_mb = 25,
    .shape = TRAIN_SHAPE_INIT,
};

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: tfcore train [--data FILE | --data-bin GLOB [--val-bin GLOB] [--data-format auto|llmc|u16]]\n"
        "                    [--tokenizer char|bpe:VOCAB|gpt2:DIR|FILE] [--preset NAME | --init-from MODEL]\n"
        "                    [--steps N] [--batch B] [--lr LR] [--min-lr LR] [--warmup N] [--weight-decay WD]\n"
        "                    [--clip C] [--seed S] [--out DIR] [--resume] [--force] [--log-json FILE]\n"
        "                    [--eval-every K] [--eval-batches N] [--stop-after N] [--sample-tokens N]\n"
        "                    [--save-every N] [--profile] [--profile-steps N] [--device cpu|cuda|cuda:N]\n"
        "                    [--dtype f32|f64|bf16] [--grad-accum K] [--zero 0|1] [--bucket-mb M]\n"
        "                    [--lora-rank R --lora-base DIR [--lora-alpha A] [--lora-targets LIST]]\n"
        "                    [--n-layer L] [--n-head H] [--n-embd C] [--block-size T] [--dropout P] [--bias|--no-bias]\n"
        "                    [--peak-flops F] [--plan] [--log-every N]\n"
        "Defaults: tinyshakespeare ($TFCORE_DATA, else the project's data/tinyshakespeare.txt), char, char-tiny,\n"
        "2000 steps, batch 16, lr 1e-3 -> 1e-4 cosine after 100 warmup steps, weight decay 0.1, clip 1.0,\n"
        "seed 1337, out ./out, eval every 100 steps over 10 batches, device cpu, dtype f32.\n"
        "--n-layer, --n-head, --n-embd, --block-size, --bias/--no-bias override the preset's shape, --dropout P\n"
        "(0) drops after the embeddings, on attention probabilities and after each block's two output\n"
        "projections while training; recorded in config.json and the checkpoint (--resume keeps the shape).\n"
        "--peak-flops F is the peak FLOP/s of MFU (default: this CPU's FMA peak, measured once and cached in\n"
        "$XDG_CACHE_HOME/tfcore; on CUDA the card's datasheet peak).\n"
        "--data-bin GLOB trains on tokens already made: llm.c data shards (train_*.bin, its 1024-byte header)\n"
        "or nanoGPT's headerless u16 train.bin, the files in sorted order as one stream; --val-bin GLOB the\n"
        "validation tokens (else the last 10%%); --data-format picks the format (auto: llm.c by its magic,\n"
        "else u16). --tokenizer gpt2:DIR or FILE names the vocabulary the tokens are in (for the checkpoint).\n"
        "--init-from MODEL starts from a model's weights and shape (a tfcore checkpoint, a Hugging Face GPT-2\n"
        "directory or an llm.c .bin) with a fresh optimizer at step 0; its vocabulary is the model's (an llm.c\n"
        "file: give --tokenizer gpt2:DIR).\n"
        "--save-every N also checkpoints (model, optimizer, loss curve) every N steps, not only at the end.\n"
        "--profile prints a per-op time table (calls, forward/backward ms, %%, the clip + optimizer\n"
        "row) of one step after the first (warm-up) step to stderr; --profile-steps N averages N steps.\n"
        "--device cuda trains on the GPU (the model is initialised on the CPU, so a seed gives the same\n"
        "weights on either device); checkpoints are written from the device and the final sample runs on\n"
        "the CPU. --dtype f64 trains in double precision; --dtype bf16 (CPU or CUDA) trains in bf16 mixed precision:\n"
        "f32 weights, optimizer state and checkpoints, the Linear and LM-head GEMMs on bf16-rounded operands\n"
        "with f32 accumulation (tfc_gpt_set_autocast, docs/MODEL.md); its checkpoints resume in f32 or bf16.\n"
        "--log-every N reads the loss and gradient norm from the device every N steps (default 1 on the CPU,\n"
        "10 on CUDA, where each read makes the host wait for the step): the progress lines, the --log-json\n"
        "records and the loss curve are written at those steps (and the first, last, eval and save steps),\n"
        "tok/s and MFU over the steps since the last one; the other steps queue their work without a wait.\n"
        "--skip-nonfinite, --log-grad-norms, --overfit-batch and several ranks read every step (N = 1).\n"
        "--grad-accum K splits each batch into K micro-steps whose gradients add up before one optimizer step.\n"
        "Under mpirun -np N (docs/DISTRIBUTED.md) --batch is the global batch (divisible by N x K), gradients\n"
        "are averaged in --bucket-mb buckets (25) during backward, --zero 1 shards the optimizer state\n"
        "across ranks; rank 0 logs, evaluates and writes checkpoints, which resume with any N.\n"
        "--lora-rank R trains LoRA adapters (W + (A/R)·B·A) on the frozen model of --lora-base DIR (a tfcore\n"
        "checkpoint; its vocabulary and config): --lora-alpha A (default R), --lora-targets a comma list of\n"
        "module-name suffixes as PEFT matches them (default c_attn; c_proj is attn.c_proj and mlp.c_proj;\n"
        "all-linear). --init-from DIR stands for --lora-base DIR. --out then holds the adapters (PEFT's adapter_model.safetensors + adapter_config.json)\n"
        "and their optimizer state, not the base; --resume, eval and sample read the base from DIR.\n");
    fx_usage(f);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int file_exists(const char *p) {
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/*
 * --data, else $TFCORE_DATA, else the corpus that ships with the project:
 * the source tree's data/ (a build-tree binary), else the installed copy.
 * The last candidate is returned even when missing, so the error names it.
 */
static const char *find_data(const char *given) {
    if (given) return given;
    const char *env = getenv("TFCORE_DATA");
    if (env && *env) return env;
    static const char *const candidates[] = {TFC_SOURCE_ROOT "/data/tinyshakespeare.txt",
                                             TFC_DATA_DIR "/tinyshakespeare.txt"};
    for (size_t i = 0; i + 1 < sizeof candidates / sizeof candidates[0]; i++)
        if (file_exists(candidates[i])) return candidates[i];
    return candidates[sizeof candidates / sizeof candidates[0] - 1];
}

static int parse(int argc, char **argv, train_opts *o) {
    *o = defaults;
    cli_args a = {.argc = argc, .argv = argv};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) return cli_error(EXIT_USAGE, CMD, "unexpected argument '%s' (see tfcore train --help)", name);
        int64_t iv;
        int fx_rc;
        if (fx_parse_flag(&o->fx, CMD, name, val, &fx_rc)) {
            if (fx_rc) return fx_rc;
            continue;
        }
        int shape_rc;
        if (train_shape_parse(CMD, name, val, &o->shape, &shape_rc)) {
            if (shape_rc) return shape_rc;
            continue;
        }
#define NEED_VAL \
    if (!val) return cli_error(EXIT_USAGE, CMD, "--%s needs a value", name)
#define INT_FLAG(flag, field, lo, hi)                                 \
    else if (strcmp(name, flag) == 0) {                               \
        if (!cli_int(CMD, name, val, lo, hi, &iv)) return EXIT_USAGE; \
        o->field = iv;                                                \
    }
#define DBL_FLAG(flag, field, lo, hi)                                          \
    else if (strcmp(name, flag) == 0) {                                        \
        if (!cli_double(CMD, name, val, lo, hi, &o->field)) return EXIT_USAGE; \
    }
        if (strcmp(name, "help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(name, "resume") == 0 || strcmp(name, "force") == 0 || strcmp(name, "profile") == 0) {
            if (val) return cli_error(EXIT_USAGE, CMD, "--%s takes no value", name);
            if (name[0] == 'r')
                o->resume = 1;
            else if (name[0] == 'f')
                o->force = 1;
            else if (!o->profile_steps)
                o->profile_steps = 1;
        } else if (strcmp(name, "plan") == 0) {
            if (val) return cli_error(EXIT_USAGE, CMD, "--plan takes no value");
            o->plan = 1;
        } else if (strcmp(name, "data") == 0) {
            NEED_VAL;
            o->data = val;
        } else if (strcmp(name, "data-bin") == 0) {
            NEED_VAL;
            o->data_bin = val;
        } else if (strcmp(name, "val-bin") == 0) {
            NEED_VAL;
            o->val_bin = val;
        } else if (strcmp(name, "init-from") == 0) {
            NEED_VAL;
            o->init_from = val;
        } else if (strcmp(name, "data-format") == 0) {
            NEED_VAL;
            o->data_format = val;
        } else if (strcmp(name, "tokenizer") == 0) {
            NEED_VAL;
            o->tokenizer = val;
            o->tokenizer_given = 1;
        } else if (strcmp(name, "preset") == 0) {
            NEED_VAL;
            o->preset = val;
            o->preset_given = 1;
        } else if (strcmp(name, "out") == 0) {
            NEED_VAL;
            o->out = val;
        } else if (strcmp(name, "log-json") == 0) {
            NEED_VAL;
            o->log_json = val;
        } else if (strcmp(name, "device") == 0) {
            NEED_VAL;
            o->device = val;
        } else if (strcmp(name, "dtype") == 0) {
            NEED_VAL;
            o->dtype = val;
        }
        INT_FLAG("steps", steps, 1, 100000000)
        INT_FLAG("batch", batch, 1, 65536)
        INT_FLAG("seed", seed, 0, INT64_MAX)
        INT_FLAG("eval-every", eval_every, 1, INT64_MAX)
        INT_FLAG("eval-batches", eval_batches, 1, 100000)
        INT_FLAG("warmup", warmup, 0, 100000000)
        INT_FLAG("stop-after", stop_after, 1, 100000000)
        INT_FLAG("sample-tokens", sample_tokens, 0, 1000000)
        INT_FLAG("profile-steps", profile_steps, 1, 100000000)
        INT_FLAG("save-every", save_every, 1, 100000000)
        INT_FLAG("grad-accum", grad_accum, 1, 65536)
        INT_FLAG("zero", zero, 0, 1)
        INT_FLAG("bucket-mb", bucket_mb, 1, 65536)
        INT_FLAG("log-every", log_every, 1, 100000000)
        DBL_FLAG("lr", lr, 0, 10)
        DBL_FLAG("min-lr", min_lr, 0, 10)
        DBL_FLAG("weight-decay", weight_decay, 0, 10)
        DBL_FLAG("clip", clip, 1e-12, INFINITY)
        DBL_FLAG("peak-flops", peak_flops, 1, 1e21)
        else if ((iv = lora_parse_flag(CMD, name, val, &o->lora)) != 0) {
            if (iv < 0) return EXIT_USAGE;
        }
        else return cli_error(EXIT_USAGE, CMD, "unknown flag --%s (see tfcore train --help)", name);
#undef NEED_VAL
#undef INT_FLAG
#undef DBL_FLAG
    }
    if (strcmp(o->device, "cpu") == 0) {
        o->cuda_index = -1;
    } else if (strcmp(o->device, "cuda") == 0) {
        o->cuda_index = 0;
    } else if (strncmp(o->device, "cuda:", 5) == 0) {
        int64_t di;
        if (!cli_int(CMD, "device cuda:", o->device + 5, 0, 1023, &di)) return EXIT_USAGE;
        o->cuda_index = (int32_t)di;
    } else {
        return cli_error(EXIT_USAGE, CMD, "--device must be cpu, cuda or cuda:N, got '%s'", o->device);
    }
    if (strcmp(o->dtype, "f32") != 0 && strcmp(o->dtype, "f64") != 0 && strcmp(o->dtype, "bf16") != 0)
        return cli_error(EXIT_USAGE, CMD, "--dtype must be f32, f64 or bf16, got '%s'", o->dtype);
    if (strcmp(o->data_format, "auto") != 0 && strcmp(o->data_format, "llmc") != 0 &&
        strcmp(o->data_format, "u16") != 0)
        return cli_error(EXIT_USAGE, CMD, "--data-format must be auto, llmc or u16, got '%s'", o->data_format);
    if (o->data_bin && o->data) return cli_error(EXIT_USAGE, CMD, "--data and --data-bin exclude each other");
    if (o->init_from && (o->resume || o->preset_given || strcmp(o->dtype, "f64") == 0))
        return cli_error(EXIT_USAGE, CMD,
                         "--init-from starts a new run from the model's own shape and f32 weights: it "
                         "excludes --resume, --preset and --dtype f64");
    if (o->val_bin && !o->data_bin && !o->resume) return cli_error(EXIT_USAGE, CMD, "--val-bin needs --data-bin");
    if (o->min_lr > o->lr) return cli_error(EXIT_USAGE, CMD, "--min-lr %g is above --lr %g", o->min_lr, o->lr);
    /* --init-from with --lora-rank: the model it names is the frozen base */
    if (o->lora.rank && !o->lora.base && o->init_from) o->lora.base = o->init_from;
    if (lora_check_opts(CMD, &o->lora, o->resume)) return EXIT_USAGE;
    if (o->warmup < 0) o->warmup = o->steps >= 1000 ? 100 : o->steps / 10;
    if (o->warmup >= o->steps)
        return cli_error(EXIT_USAGE, CMD, "--warmup %lld must be below --steps %lld", (long long)o->warmup,
                         (long long)o->steps);
    return fx_check_opts(&o->fx, CMD, o->resume, o->save_every);
}

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
    char peak_src[512];
    int64_t mem_base, rss_base; /* library bytes live and RSS before the model was built */
} train_run;

/* ---- load: the corpus, its vocabulary and token file, the config ------------------ */

/* --resume: the vocabulary (so token ids mean the same) and, unless --preset is given, the preset. */
static int vocab_from_checkpoint(train_run *r) {
    /* first finish or discard a save a kill interrupted */
    int rc = ckpt_recover(CMD, r->o.out);
    if (rc) return rc;
    if (!ckpt_exists(r->o.out)) return cli_error(EXIT_USAGE, CMD, "--resume: no checkpoint in '%s'", r->o.out);
    /* model and optimizer checked against checkpoint.json and against each other before anything is written */
    rc = ckpt_open(CMD, r->o.out, CKPT_VERIFY | CKPT_OPTIMIZER, &r->ck);
    if (rc) return rc;
    const char *vm = NULL, *pr = NULL;
    if (tfc_safetensors_metadata(r->ck.model, "tfc.vocab", &vm) != TFC_OK) vm = NULL;
    /* a --data-bin run resumes on the same shards unless told otherwise */
    const char *db = NULL, *vb = NULL, *df = NULL;
    if (!r->o.data_bin && !r->o.data && tfc_safetensors_metadata(r->ck.model, "train.data_bin", &db) == TFC_OK && db) {
        snprintf(r->data_bin, sizeof r->data_bin, "%s", db);
        r->o.data_bin = r->data_bin;
        if (!r->o.val_bin && tfc_safetensors_metadata(r->ck.model, "train.val_bin", &vb) == TFC_OK && vb) {
            snprintf(r->val_bin, sizeof r->val_bin, "%s", vb);
            r->o.val_bin = r->val_bin;
        }
        if (tfc_safetensors_metadata(r->ck.model, "train.data_format", &df) == TFC_OK && df) {
            snprintf(r->data_format, sizeof r->data_format, "%s", df);
            r->o.data_format = r->data_format;
        }
    }
    if (!r->o.preset_given && tfc_safetensors_metadata(r->ck.model, "train.preset", &pr) == TFC_OK && pr) {
        snprintf(r->preset, sizeof r->preset, "%s", pr);
        r->o.preset = r->preset;
    }
    return vocab_from_meta(CMD, vm, ckpt_path(&r->ck, "tokenizer.tfctok"), &r->v);
}

static int config_for(const train_opts *o, const vocab *v, tfc_gpt_config *c) {
    *c = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    c->vocab_size = v->size;
    if (tfc_gpt_config_preset(o->preset, c) != TFC_OK)
        return cli_error(EXIT_USAGE, CMD, "unknown preset '%s' (known: char-tiny, char-small, gpt2-mini, gpt2)",
                         o->preset);
    if (strcmp(o->dtype, "f64") == 0) c->dtype = TFC_DTYPE_F64;
    if (v->size > c->vocab_size)
        return cli_error(EXIT_USAGE, CMD, "the tokenizer has %d tokens but preset %s has a vocabulary of %d", v->size,
                         o->preset, c->vocab_size);
    return 0;
}

/*
 * Refuse a checkpoint in --out whose config differs from c (checked before
 * anything is written); --resume: the step to start from. A --resume run's
 * checkpoint is open already (vocab_from_checkpoint).
 */
static int check_existing(train_run *r, const tfc_gpt_config *c, int64_t *start_step) {
    const train_opts *o = &r->o;
    ckpt_set fresh;
    memset(&fresh, 0, sizeof fresh);
    ckpt_set *ck = o->resume ? &r->ck : &fresh;
    int rc = 0;
    if (!o->resume) {
        if ((rc = ckpt_recover(CMD, o->out)) != 0) return rc;
        if (!ckpt_exists(o->out)) return 0;
        if ((rc = ckpt_open(CMD, o->out, 0, ck)) != 0) return rc;
    }
    tfc_safetensors *f = ck->model;
    struct {
        const char *key;
        int32_t want;
    } keys[] = {{"tfc.n_layer", c->n_layer},
                {"tfc.n_head", c->n_head},
                {"tfc.n_embd", c->n_embd},
                {"tfc.block_size", c->block_size},
                {"tfc.vocab_size", c->vocab_size}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && !rc; i++) {
        const char *s = NULL;
        if (tfc_safetensors_metadata(f, keys[i].key, &s) != TFC_OK || !s || atoi(s) != keys[i].want) {
            if (o->force && !o->resume) break;
            rc = cli_error(EXIT_USAGE, CMD,
                           "'%s' holds a checkpoint of another config (%s %s, this run %d); use another --out%s",
                           o->out, keys[i].key + 4, s ? s : "?", keys[i].want, o->resume ? "" : " or --force");
        }
    }
    if (!rc && o->resume) {
        *start_step = ck->step; /* ckpt_open refused a checkpoint without one */
        if (*start_step >= o->steps)
            rc = cli_error(EXIT_USAGE, CMD, "the checkpoint is at step %lld, --steps is %lld: nothing to do",
                           (long long)*start_step, (long long)o->steps);
    }
    ckpt_close(&fresh);
    return rc;
}

/* Encode the corpus into OUT/data.tokens and open it; the last 10% is the validation split. */
static int load_tokens(train_run *r, const char *text, size_t len) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = vocab_encode(CMD, &r->v, text, len, &ids, &n_ids);
    if (rc) return rc;
    const int64_t T = r->cfg.block_size, n_val = (int64_t)n_ids / 10;
    r->n_tokens = (int64_t)n_ids;
    r->n_train = r->n_tokens - n_val;
    const char *tok_path = path_join(r->o.out, "data.tokens");
    if (n_val < T + 1)
        rc = cli_error(EXIT_USAGE, CMD,
                       "the corpus '%s' is too small: %zu tokens, but its last 10%% (validation) must hold one block "
                       "of %lld+1 tokens, so at least %lld tokens are needed",
                       r->data_path, n_ids, (long long)T, (long long)(10 * (T + 1)));
    else if (r->rank == 0 && ensure_dir(r->o.out) != 0)
        rc = cli_error(EXIT_USAGE, CMD, "cannot create the output directory '%s'", r->o.out);
    else if (r->rank == 0 && tfc_token_file_write(tok_path, ids, r->n_tokens, r->v.size) != TFC_OK)
        rc = cli_lib_error(CMD, "writing the token file");
    /* the other ranks open the file rank 0 wrote (a rank 0 failure ends the job instead) */
    else if (tfc_barrier(r->comm) != TFC_OK)
        rc = cli_lib_error(CMD, "waiting for rank 0's token file");
    else if (tfc_token_file_open(tok_path, &r->tf) != TFC_OK)
        rc = cli_lib_error(CMD, "opening the token file");
    r->vf = r->tf;
    r->val_begin = r->n_train;
    r->val_end = r->n_tokens;
    free(ids);
    return rc;
}

/* The files a --data-bin / --val-bin pattern names, sorted (glob's order); 0 or the exit code. */
static int expand_glob(const char *flag, const char *pattern, glob_t *g) {
    memset(g, 0, sizeof *g);
    int e = glob(pattern, 0, NULL, g);
    if (e == GLOB_NOMATCH) return cli_error(EXIT_USAGE, CMD, "--%s '%s' matches no file", flag, pattern);
    if (e != 0) return cli_error(EXIT_USAGE, CMD, "--%s '%s': cannot read the directories it names", flag, pattern);
    if (g->gl_pathc > INT32_MAX) {
        globfree(g);
        return cli_error(EXIT_USAGE, CMD, "--%s '%s' matches too many files", flag, pattern);
    }
    return 0;
}

/* --data-format auto: an llm.c shard starts with one of its magics; anything else is read as headerless u16. */
static tfc_token_format detect_format(const char *flag_format, const char *first) {
    if (strcmp(flag_format, "llmc") == 0) return TFC_TOKENS_LLMC;
    if (strcmp(flag_format, "u16") == 0) return TFC_TOKENS_U16;
    unsigned char h[4] = {0};
    FILE *fp = fopen(first, "rb");
    size_t got = fp ? fread(h, 1, 4, fp) : 0;
    if (fp) fclose(fp);
    const uint32_t magic = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    return got == 4 && (magic == 20240520u || magic == 20240801u) ? TFC_TOKENS_LLMC : TFC_TOKENS_U16;
}

/* Open the shards pattern names, every token checked against the model's vocabulary (which = 0: train, 1: val). */
static int open_bin(train_run *r, int which, const char *flag, const char *pattern, tfc_token_file **f) {
    glob_t g;
    int rc = expand_glob(flag, pattern, &g);
    if (rc) return rc;
    const tfc_token_format fmt = detect_format(r->o.data_format, g.gl_pathv[0]);
    if (tfc_token_file_open_shards((const char *const *)g.gl_pathv, (int32_t)g.gl_pathc, fmt, r->cfg.vocab_size, f) !=
        TFC_OK)
        rc = cli_error(EXIT_USAGE, CMD, "--%s: %s", flag, tfc_last_error());
    r->bin_format[which] = fmt == TFC_TOKENS_LLMC ? "llm.c shards" : "headerless u16";
    r->bin_files[which] = (int64_t)g.gl_pathc;
    globfree(&g);
    return rc;
}

/*
 * --data-bin: the shards read in place (nothing converted or written); the
 * validation split is --val-bin's files, else the last 10%.
 */
static int load_bin(train_run *r) {
    int rc = open_bin(r, 0, "data-bin", r->o.data_bin, &r->tf);
    if (!rc && r->o.val_bin) rc = open_bin(r, 1, "val-bin", r->o.val_bin, &r->vf);
    if (rc) return rc;
    const int64_t T = r->cfg.block_size, n = tfc_token_file_count(r->tf);
    if (r->vf) {
        r->n_train = n;
        r->val_begin = 0;
        r->val_end = tfc_token_file_count(r->vf);
    } else {
        r->vf = r->tf;
        r->n_train = n - n / 10;
        r->val_begin = r->n_train;
        r->val_end = n;
    }
    r->n_tokens = r->n_train + (r->val_end - r->val_begin);
    if (r->n_train < T + 1)
        return cli_error(EXIT_USAGE, CMD, "--data-bin '%s' is too small: %lld training tokens, one block needs %lld+1",
                         r->o.data_bin, (long long)r->n_train, (long long)T);
    if (r->val_end - r->val_begin < T + 1)
        return cli_error(EXIT_USAGE, CMD,
                         "the validation split of %s is too small: %lld tokens, one block needs %lld+1%s",
                         r->o.val_bin ? r->o.val_bin : r->o.data_bin, (long long)(r->val_end - r->val_begin),
                         (long long)T, r->o.val_bin ? "" : " (the last 10%; or give --val-bin)");
    return 0;
}

/* --resume of a LoRA run: its base is the directory the checkpoint names, unless --lora-base moves it. */
static int lora_resume_base(train_run *r) {
    const char *b = NULL;
    if (!r->o.lora.base && (tfc_safetensors_metadata(r->ck.model, "lora.base", &b) != TFC_OK || !b))
        return cli_error(EXIT_USAGE, CMD,
                         "--resume: the LoRA checkpoint in '%s' does not name its base; give --lora-base DIR",
                         r->o.out);
    if (!r->o.lora.base) {
        snprintf(r->lora_base, sizeof r->lora_base, "%s", b);
        r->o.lora.base = r->lora_base;
    }
    return 0;
}

static int load(train_run *r) {
    /* Before anything is read or written: is the asked-for device there? */
    if (r->o.cuda_index >= 0 && !tfc_cuda_available())
        return cli_error(EXIT_RUNTIME, CMD, "--device %s: %s", r->o.device, tfc_last_error());
    if (r->o.cuda_index >= 0 && r->size > 1)
        return cli_error(EXIT_USAGE, CMD,
                         "--device %s with %d ranks: multi-GPU training needs NCCL, which this build does not "
                         "provide yet (train on the CPU, or with one rank)",
                         r->o.device, r->size);
    if (r->o.batch % (r->size * r->o.grad_accum) != 0)
        return cli_error(EXIT_USAGE, CMD,
                         "--batch %lld does not split evenly into %d ranks x %lld micro-steps (--grad-accum): use a "
                         "multiple of %lld",
                         (long long)r->o.batch, r->size, (long long)r->o.grad_accum,
                         (long long)(r->size * r->o.grad_accum));
    /* rank 0 finishes or discards a save a kill interrupted before any rank reads the checkpoint */
    if (r->rank == 0) {
        int rc = ckpt_recover(CMD, r->o.out);
        if (rc) return rc;
    }
    if (tfc_barrier(r->comm) != TFC_OK) return cli_lib_error(CMD, "waiting for rank 0");
    char *text = NULL;
    size_t len = 0;
    int rc = 0;
    /* a resumed --data-bin run learns its shards from the checkpoint */
    if (r->o.resume) rc = vocab_from_checkpoint(r);
    if (!rc && !r->o.data_bin) {
        r->data_path = find_data(r->o.data);
        if (read_file(r->data_path, &text, &len) != 0)
            rc = cli_error(EXIT_USAGE, CMD, "cannot read the data file '%s' (give --data FILE or set $TFCORE_DATA)",
                           r->data_path);
    }
    if (r->o.data_bin) r->data_path = r->o.data_bin;
    int64_t lib_peak, rss_peak; /* the baseline of the measured peak, before a model is loaded here */
    train_plan_measure(&lib_peak, &r->mem_base, &rss_peak, &r->rss_base);
    /* a LoRA run's base: its model, vocabulary and config (a resumed one: the base its checkpoint names) */
    if (!rc && r->o.resume && r->ck.lora) rc = lora_resume_base(r);
    if (!rc && r->o.resume && !r->ck.lora && r->o.lora.base)
        rc = cli_error(EXIT_USAGE, CMD, "--lora-base: the checkpoint in '%s' is not a LoRA run's (resume it without)",
                       r->o.out);
    if (!rc && r->o.lora.base) {
        vocab bv;
        rc = lora_load_base(CMD, r->o.lora.base, &r->m, r->o.resume ? &bv : &r->v, r->preset);
        if (!rc && r->o.resume) vocab_free(&bv);
        if (!rc && r->preset[0] && !r->o.preset_given) r->o.preset = r->preset;
    } else if (!rc && r->o.init_from) {
        rc = model_source_load(CMD, r->o.init_from, r->o.tokenizer_given ? r->o.tokenizer : NULL, 1, &r->init, &r->v,
                               NULL);
        r->o.preset = INIT_PRESET;
        r->cfg = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
        if (!rc && tfc_gpt_get_config(r->init, &r->cfg) != TFC_OK) rc = cli_lib_error(CMD, "config");
    } else if (!rc && !r->o.resume && !r->m) {
        rc = cli_make_vocab(CMD, r->o.tokenizer_given ? r->o.tokenizer : NULL, text, len, &r->v);
    }
    if (!rc && r->m) {
        r->cfg = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
        if (tfc_gpt_get_config(r->m, &r->cfg) != TFC_OK) rc = cli_lib_error(CMD, "config");
        /* the shape (and dropout) of --init-from's or --lora-base's model is its own */
        if (!rc && train_shape_given(&r->o.shape))
            rc = cli_error(EXIT_USAGE, CMD,
                           "--n-layer/--n-head/--n-embd/--block-size/--dropout/--bias do not combine with %s "
                           "(the model's shape is its own)",
                           r->o.lora.base ? "--lora-base or a LoRA run" : "--init-from");
    } else if (!rc && r->o.resume && strcmp(r->o.preset, INIT_PRESET) == 0) {
        /* a resumed --init-from run has the shape of the model it started from, not a preset's */
        rc = ckpt_meta_config(CMD, r->ck.model, &r->cfg);
        if (!rc) rc = train_shape_apply(CMD, &r->o.shape, r->ck.model, 1, &r->cfg);
    } else if (!rc && !r->o.init_from) {
        rc = config_for(&r->o, &r->v, &r->cfg);
        /* --resume keeps the checkpoint's shape unless --preset names one (then checked against it below) */
        if (!rc)
            rc = train_shape_apply(CMD, &r->o.shape, r->o.resume ? r->ck.model : NULL, !r->o.preset_given, &r->cfg);
    }
    if (!rc && r->o.plan) { /* the plan needs the config only: nothing is written */
        free(text);
        return 0;
    }
    if (!rc) rc = check_existing(r, &r->cfg, &r->start);
    if (!rc) rc = r->o.data_bin ? load_bin(r) : load_tokens(r, text, len);
    free(text);
    r->end_step = r->o.stop_after && r->o.stop_after < r->o.steps ? r->o.stop_after : r->o.steps;
    return rc;
}

/* ---- build: the model, its optimizer, a resumed run's state ---------------------- */

/*
 * AdamW, weight decay where the model's parameter table says so
 * (tfc_gpt_param_decay: the weight matrices and embeddings, as GPT-2 does).
 * The decayed group comes first: the optimizer state's param.{k} order is
 * part of the checkpoint format.
 */
static int make_optimizer(train_run *r) {
    int32_t np;
    const char *const *pnames;
    tfc_tensor *const *params;
    /* LoRA: the adapters only, all decayed (the base is frozen) */
    if ((r->o.lora.base ? tfc_gpt_lora_params(r->m, &np, &pnames, &params)
                        : tfc_gpt_params(r->m, &np, &pnames, &params)) != TFC_OK)
        np = 0;
    tfc_tensor **decay = malloc((size_t)np * sizeof *decay), **no_decay = malloc((size_t)np * sizeof *no_decay);
    int32_t nd = 0, nn = 0;
    for (int32_t i = 0; i < np && decay && no_decay; i++) {
        int32_t d = 0;
        if (r->o.lora.base)
            d = 1;
        else if (tfc_gpt_param_decay(r->m, i, &d) != TFC_OK)
            break;
        if (d)
            decay[nd++] = params[i];
        else
            no_decay[nn++] = params[i];
    }
    tfc_optim_options oo = TFC_ADAMW_OPTIONS_INIT;
    oo.lr = r->o.lr;
    oo.beta1 = 0.9;
    oo.beta2 = 0.95;
    oo.weight_decay = r->o.weight_decay;
    int rc = 0;
    if (!decay || !no_decay || tfc_optim_adamw(&oo, &r->opt) != TFC_OK ||
        tfc_optim_add_group(r->opt, decay, nd, r->o.lr, r->o.weight_decay, NULL) != TFC_OK ||
        tfc_optim_add_group(r->opt, no_decay, nn, r->o.lr, 0.0, NULL) != TFC_OK)
        rc = cli_lib_error(CMD, "setting up AdamW");
    free(decay);
    free(no_decay);
    return rc;
}

/*
 * A resumed run's loss curve starts with the rows of the previous runs'
 * loss.csv up to the checkpoint's step, so the CSV and SVG cover the whole
 * run. A missing or damaged file costs only the history (a warning).
 */
static void load_history(const train_opts *o, int64_t start, loss_log *curve) {
    char csv[4096];
    snprintf(csv, sizeof csv, "%s", path_join(o->out, "loss.csv"));
    int64_t bad = 0;
    int r = loss_log_read_csv(curve, csv, start, &bad);
    if (r == -1)
        fprintf(stderr, "tfcore train: warning: cannot read %s; the loss curve will cover steps %lld.. only\n", csv,
                (long long)start);
    else if (r == -2)
        fprintf(stderr,
                "tfcore train: warning: %s line %lld is not a 'step,loss,val_loss,lr' row in step order; the loss "
                "curve will cover steps %lld.. only\n",
                csv, (long long)bad, (long long)start);
    else if (curve->n == 0 || curve->step[curve->n - 1] != start)
        fprintf(stderr, "tfcore train: warning: %s ends at step %lld, the checkpoint is at step %lld\n", csv,
                curve->n ? (long long)curve->step[curve->n - 1] : 0LL, (long long)start);
}

/* --resume: weights, optimizer state and loss history from the checkpoint in --out. */
static int resume_state(train_run *r) {
    if (!r->ck.lora && tfc_gpt_load_into(r->m, ckpt_path(&r->ck, "model.safetensors")) != TFC_OK)
        return cli_lib_error(CMD, "resuming");
    int rc = ckpt_load_optim(CMD, &r->ck, r->opt);
    ckpt_close(&r->ck);
    if (rc) return rc;
    load_history(&r->o, r->start, &r->curve);
    return 0;
}

static int build(train_run *r) {
    int64_t lib_peak, rss_peak;
    /* a model loaded already (--init-from, a LoRA base) is part of what the plan counts */
    if (!r->init && !r->m) train_plan_measure(&lib_peak, &r->mem_base, &rss_peak, &r->rss_base);
    if (r->init) { /* --init-from: its weights, a fresh optimizer from step 0 */
        r->m = r->init;
        r->init = NULL;
    } else if (!r->m && tfc_gpt_new(&r->cfg, (uint64_t)r->o.seed, &r->m) != TFC_OK) {
        return cli_lib_error(CMD, "building the model");
    }
    /* LoRA: the adapters (new, or the resumed checkpoint's) before the optimizer is built on them */
    if (r->o.lora.base) {
        int lrc = lora_attach(CMD, r->m, &r->o.lora, (uint64_t)r->o.seed,
                              r->o.resume ? ckpt_path(&r->ck, "adapter_model.safetensors") : NULL);
        if (lrc) return lrc;
    }
    /* The model moves before the optimizer is built on its parameters. */
    if (r->o.cuda_index >= 0 && tfc_gpt_to_device(r->m, TFC_DEVICE_CUDA, r->o.cuda_index) != TFC_OK)
        return cli_lib_error(CMD, "moving the model to the GPU");
    /* bf16 mixed precision: the parameters (and so the optimizer and the checkpoints) stay f32 */
    if (strcmp(r->o.dtype, "bf16") == 0 && tfc_gpt_set_autocast(r->m, TFC_DTYPE_BF16) != TFC_OK)
        return cli_lib_error(CMD, "turning on bf16 mixed precision");
    int rc = make_optimizer(r);
    if (!rc && r->o.resume) rc = resume_state(r);
    if (rc) return rc;
    if (tfc_graph_new(&r->g) != TFC_OK) return cli_lib_error(CMD, "graph");
    /* After a resume's state is loaded: sharding keeps this rank's slice of it. */
    if (r->o.zero && tfc_optim_shard(r->opt, r->comm) != TFC_OK) return cli_lib_error(CMD, "sharding the optimizer");
    if (!r->o.zero && r->size > 1) {
        int32_t np;
        const char *const *pnames;
        tfc_tensor *const *params;
        if ((r->o.lora.base ? tfc_gpt_lora_params(r->m, &np, &pnames, &params)
                            : tfc_gpt_params(r->m, &np, &pnames, &params)) != TFC_OK ||
            tfc_ddp_new(r->comm, params, np, r->o.bucket_mb << 20, &r->ddp) != TFC_OK ||
            tfc_ddp_attach(r->ddp, r->g) != TFC_OK)
            return cli_lib_error(CMD, "setting up data-parallel gradient averaging");
    }
    if (r->rank == 0 && r->o.log_json && !(r->jl = fopen(r->o.log_json, r->o.resume ? "a" : "w")))
        return cli_error(EXIT_USAGE, CMD, "cannot write --log-json file '%s'", r->o.log_json);
    /* reading the loss and norm costs a wait on CUDA only; the checks that look at every step need every step */
    r->log_every = r->o.log_every ? r->o.log_every : r->o.cuda_index >= 0 ? 10 : 1;
    if (r->o.fx.skip_nonfinite || r->o.fx.log_grad_norms || r->o.fx.overfit || r->size > 1) r->log_every = 1;
    return fx_setup(&r->fx, &r->o.fx, CMD, r->o.out, r->m);
}

/* ---- loop: the training steps, evaluation and progress ----------------------------- */

/* Mean loss over eval_batches fixed random batches of the val split, no graph. */
static int val_loss(const train_run *r, double *out) {
    const int32_t B = (int32_t)r->o.batch, T = r->cfg.block_size;
    double sum = 0;
    for (int64_t k = 0; k < r->o.eval_batches; k++) {
        tfc_tensor *x, *y, *loss;
        if (tfc_token_file_batch(r->vf, r->val_begin, r->val_end, B, T, (uint64_t)r->o.seed ^ 0x5eedULL, (uint64_t)k,
                                 &x, &y) != TFC_OK)
            return cli_lib_error(CMD, "val batch");
        tfc_status s = tfc_gpt_forward(r->m, NULL, x, y, NULL, &loss);
        tfc_tensor_release(x);
        tfc_tensor_release(y);
        if (s != TFC_OK) return cli_lib_error(CMD, "val forward");
        double l;
        s = tfc_tensor_item(loss, &l);
        tfc_tensor_release(loss);
        if (s != TFC_OK) return cli_lib_error(CMD, "val loss");
        sum += l;
    }
    *out = sum / (double)r->o.eval_batches;
    return 0;
}

/* The per-op table of steps [begin, end) to stderr. */
static tfc_status print_profile(int64_t begin, int64_t end) {
    char *table = NULL;
    tfc_status s = tfc_profile_report(&table);
    if (s != TFC_OK) return s;
    fflush(stdout);
    if (end - begin == 1)
        fprintf(stderr, "\ntfcore train: profile of step %lld (forward, backward, clip, optimizer):\n", (long long)end);
    else
        fprintf(stderr, "\ntfcore train: profile of steps %lld..%lld (forward, backward, clip, optimizer):\n",
                (long long)begin + 1, (long long)end);
    fputs(table, stderr);
    fputc('\n', stderr);
    fflush(stderr);
    tfc_free(table);
    return TFC_OK;
}

/*
 * Micro-step j of K on this rank: rows [(j·N + rank)·b, +b) of the global
 * batch x, y (b = B/(N·K)), forward and backward with the loss scaled by
 * 1/K (the seed), so K micro-steps add up to the gradient of the batch
 * mean; *l gets the micro-batch's loss.
 */
static tfc_status micro_step(train_run *r, const tfc_tensor *x, const tfc_tensor *y, int64_t j, double *l) {
    /* l NULL: a step that does not log; its loss stays on the device (reading it would wait for the step) */
    const int64_t K = r->o.grad_accum, b = r->o.batch / (r->size * K), first = (j * r->size + r->rank) * b;
    tfc_tensor *xs = NULL, *ys = NULL, *loss = NULL, *seed = NULL;
    tfc_status s = tfc_narrow(NULL, x, 0, first, b, &xs);
    if (s == TFC_OK) s = tfc_narrow(NULL, y, 0, first, b, &ys);
    if (s == TFC_OK && K > 1) s = tfc_tensor_full(NULL, 0, r->cfg.dtype, 1.0 / (double)K, &seed);
    /* the gradients are averaged over ranks once the last micro-step's backward finishes them */
    if (s == TFC_OK && r->ddp) s = tfc_ddp_set_sync(r->ddp, j == K - 1);
    if (s == TFC_OK) s = tfc_gpt_forward(r->m, r->g, xs, ys, NULL, &loss);
    if (s == TFC_OK) s = tfc_graph_backward(r->g, loss, seed);
    if (s == TFC_OK && l) s = tfc_tensor_item(loss, l);
    if (s == TFC_OK) s = tfc_graph_clear(r->g);
    tfc_tensor_release(xs);
    tfc_tensor_release(ys);
    tfc_tensor_release(loss);
    tfc_tensor_release(seed);
    return s;
}

/* The mean of this rank's micro-step losses over all ranks: the loss one process reports for the batch. */
static tfc_status global_loss(train_run *r, double *l) {
    if (r->size == 1) return TFC_OK;
    tfc_tensor *t = NULL;
    tfc_status s = tfc_tensor_from_data(l, NULL, 0, TFC_DTYPE_F64, &t);
    if (s == TFC_OK) s = tfc_all_reduce(r->comm, t, TFC_COMM_AVG);
    if (s == TFC_OK) s = tfc_tensor_item(t, l);
    tfc_tensor_release(t);
    return s;
}

/*
 * One optimizer step on batch `step`: sets its learning rate, and with `logged` its loss and gradient norm (read
 * on the host, which on CUDA waits for the step) and the non-finite watch; without, *l and *norm are NaN and
 * nothing is read back: the loss is left on the device and the clipping runs there (tfc_optim_clip_grad_norm_async).
 */
static tfc_status train_step(train_run *r, int64_t step, int logged, double *lr, double *l, double *norm) {
    const train_opts *o = &r->o;
    tfc_tensor *x = NULL, *y = NULL;
    tfc_status s = tfc_lr_cosine(step, o->lr, o->min_lr, o->warmup, o->steps, lr);
    if (s == TFC_OK) s = tfc_optim_set_lr(r->opt, *lr);
    /* dropout masks: a function of (seed, step, rank, micro-step), so a resumed run repeats them */
    if (s == TFC_OK)
        s = tfc_gpt_set_dropout_stream(r->m, (uint64_t)o->seed,
                                       ((uint64_t)step * (uint64_t)r->size + (uint64_t)r->rank) *
                                           (uint64_t)o->grad_accum);
    if (s == TFC_OK)
        s = tfc_token_file_batch(r->tf, 0, r->n_train, (int32_t)o->batch, r->cfg.block_size, (uint64_t)o->seed,
                                 (uint64_t)fx_batch_index(&r->fx, step), &x, &y);
    /* profiled: forward, backward, clip and the optimizer step (not the batch, eval or logging) */
    const int profiled = step >= r->prof_begin && step < r->prof_end;
    if (s == TFC_OK && profiled && step == r->prof_begin) s = tfc_profile_reset();
    if (s == TFC_OK && profiled) s = tfc_profile_enable(1);
    double sum = 0;
    for (int64_t j = 0; j < o->grad_accum && s == TFC_OK; j++) {
        double lj = 0;
        s = micro_step(r, x, y, j, logged ? &lj : NULL);
        sum += lj;
    }
    *l = logged ? sum / (double)o->grad_accum : NAN;
    *norm = NAN;
    if (s == TFC_OK && r->ddp) s = tfc_ddp_finish(r->ddp);
    if (s == TFC_OK && logged) s = global_loss(r, l);
    /* a non-finite step stops the run or is skipped: no clip, no update, only the gradients dropped */
    r->fx_rc = s == TFC_OK && logged ? fx_after_backward(&r->fx, CMD, step, *lr, *l, x, y, r->comm, r->rank) : 0;
    if (s == TFC_OK && !r->fx_rc)
        s = logged ? tfc_optim_clip_grad_norm(r->opt, o->clip, norm)
                   : tfc_optim_clip_grad_norm_async(r->opt, o->clip, NULL);
    if (s == TFC_OK && !r->fx_rc) s = tfc_optim_step(r->opt);
    if (s == TFC_OK) s = tfc_optim_zero_grad(r->opt, 1);
    if (s == TFC_OK && profiled) s = tfc_profile_enable(0);
    if (s == TFC_OK && profiled && step == r->prof_end - 1 && r->rank == 0)
        s = print_profile(r->prof_begin, r->prof_end);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    return s;
}

static void fmt_eta(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e7)
        snprintf(buf, n, "?");
    else if (s >= 3600)
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, n, "%.0fs", s);
}

/* What one step reports: to the loss curve, --log-json and the progress line. */
typedef struct step_stats {
    int64_t done; /* steps finished, this one included */
    int eval;     /* val was measured after this step */
    double loss, val, lr, norm, tokens_per_s, elapsed_s;
    double mfu; /* model FLOPs utilisation of this step, a fraction */
} step_stats;

static void log_json(FILE *jl, const step_stats *st, const forensics *fx) {
    fprintf(
        jl,
        "{\"step\": %lld, \"loss\": %.17g, \"lr\": %.9g, \"grad_norm\": %.17g, \"tokens_per_s\": %.1f, \"mfu\": %.6g, "
        "\"elapsed_s\": %.3f",
        (long long)st->done, st->loss, st->lr, st->norm, st->tokens_per_s, st->mfu, st->elapsed_s);
    /* the timing fields stay before elapsed_s: tests compare what follows it between runs */
    if (st->eval) fprintf(jl, ", \"val_loss\": %.17g", st->val);
    fx_log_json(fx, jl, st->done);
    fprintf(jl, "}\n");
    fflush(jl);
}

/* On a terminal a bar redrawn in place (a new line at each eval); otherwise a line every 10 steps and at each eval. */
static void print_progress(const train_run *r, const step_stats *st) {
    char eta[32];
    fmt_eta(st->elapsed_s / (double)(st->done - r->start) * (double)(r->end_step - st->done), eta, sizeof eta);
    if (isatty(fileno(stdout))) {
        int width = 24, fill = (int)((double)width * (double)st->done / (double)r->end_step);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        char vs[32] = "-";
        if (!isnan(r->last_val)) snprintf(vs, sizeof vs, "%.4f", r->last_val);
        printf("\r[%s] step %lld/%lld  loss %.4f  val %s  %.0f tok/s  MFU %.1f%%  ETA %s   ", bar, (long long)st->done,
               (long long)r->end_step, st->loss, vs, st->tokens_per_s, 100.0 * st->mfu, eta);
        if (st->eval) printf("\n");
        fflush(stdout);
    } else if (st->eval || st->done % 10 == 0 || st->done == r->start + 1 || r->log_every > 1) {
        printf("step %lld/%lld  loss %.4f", (long long)st->done, (long long)r->end_step, st->loss);
        if (st->eval) printf("  val %.4f", st->val);
        printf("  lr %.2e  %.0f tok/s  elapsed %.0fs  ETA %s  MFU %.1f%%\n", st->lr, st->tokens_per_s, st->elapsed_s,
               eta, 100.0 * st->mfu);
        fflush(stdout);
    }
}

static void print_header(const train_run *r) {
    const tfc_gpt_config *c = &r->cfg;
    printf("tfcore train: %s, preset %s (%d layers, %d heads, %d dims, block %d, vocab %d), %lld parameters\n",
           r->data_path, r->o.preset, c->n_layer, c->n_head, c->n_embd, c->block_size, c->vocab_size,
           (long long)tfc_gpt_num_elements(r->m));
    printf("device: %s, dtype %s\n", r->o.device, r->o.dtype);
    if (r->o.lora.base) {
        printf("lora-base: %s\n", r->o.lora.base);
        lora_print_summary(r->m);
    }
    if (r->size > 1 || r->o.zero || r->o.grad_accum > 1)
        printf("ranks: %d (%s); %lld micro-steps of %lld rows per rank; %s\n", r->size, tfc_comm_backend(r->comm),
               (long long)r->o.grad_accum, (long long)(r->o.batch / (r->size * r->o.grad_accum)),
               r->o.zero         ? "ZeRO-1 sharded optimizer state"
                   : r->size > 1 ? "gradients averaged in buckets during backward"
                                 : "one process");
    if (r->o.data_bin) {
        printf("data-bin: %s, %lld file(s) of %s", r->o.data_bin, (long long)r->bin_files[0], r->bin_format[0]);
        if (r->o.val_bin)
            printf("; val-bin: %s, %lld file(s) of %s", r->o.val_bin, (long long)r->bin_files[1], r->bin_format[1]);
        printf("\n");
    }
    train_plan p;
    train_plan_make(c, r->o.batch / (r->size * r->o.grad_accum), r->o.batch, r->o.grad_accum,
                    strcmp(r->o.dtype, "bf16") == 0, &p);
    train_plan_print(stdout, &p, c);
    if (r->o.lora.base)
        printf("  (the plan is a full run's: a LoRA run's smaller gradients and optimizer state and its adapters'\n"
               "  activations are not modelled yet, so the measured peak is not compared with it)\n");
    printf("data: %lld tokens (%lld train, %lld val); batch %d x %d; steps %lld..%lld of %lld; out %s\n",
           (long long)r->n_tokens, (long long)r->n_train, (long long)(r->n_tokens - r->n_train), (int)r->o.batch,
           c->block_size, (long long)r->start, (long long)r->end_step, (long long)r->o.steps, r->o.out);
    fflush(stdout);
}

static int save_checkpoint(const train_run *r, int64_t step);

static int loop(train_run *r) {
    print_header(r);
    /* MFU: every rank its own peak (--peak-flops is per process) */
    int64_t n_lora = 0; /* a LoRA run trains its adapters only */
    int32_t nl = 0;
    const char *const *lnames;
    tfc_tensor *const *lps;
    if (r->o.lora.base && tfc_gpt_lora_params(r->m, &nl, &lnames, &lps) == TFC_OK)
        for (int32_t i = 0; i < nl; i++) n_lora += tfc_tensor_numel(lps[i]);
    r->flops_per_token = r->o.lora.base ? mfu_lora_flops_per_token(&r->cfg, tfc_gpt_num_elements(r->m), n_lora)
                                        : mfu_flops_per_token(&r->cfg, tfc_gpt_num_elements(r->m));
    r->peak_flops = (double)r->size *
        mfu_peak_flops(r->o.peak_flops, r->o.cuda_index,
                       r->cfg.dtype == TFC_DTYPE_F64         ? MFU_F64
                           : strcmp(r->o.dtype, "bf16") == 0 ? MFU_BF16
                                                             : MFU_F32,
                       tfc_get_num_threads(), r->peak_src, sizeof r->peak_src);
    printf("MFU: %.4g FLOPs per token (%s), peak %.4g FLOP/s (%s)\n", r->flops_per_token,
           r->o.lora.base ? "4N + 6N_lora + 12LCT: no gradients of the frozen weights" : "6N + 12LCT", r->peak_flops,
           r->peak_src);
    /* --profile: the steps after the first (warm-up: allocator, caches), or the only one */
    r->prof_begin = r->end_step - r->start >= 2 ? r->start + 1 : r->start;
    r->prof_end = r->prof_begin;
    if (r->o.profile_steps)
        r->prof_end =
            r->prof_begin + r->o.profile_steps < r->end_step ? r->prof_begin + r->o.profile_steps : r->end_step;
    r->t0 = now_s();
    r->last_val = NAN;
    const double tokens_per_step = (double)r->o.batch * (double)r->cfg.block_size;
    /* --log-every: the steps since the last logged one, timed together (their work is only queued until then) */
    double t_interval = 0;
    int64_t interval_steps = 0;
    for (int64_t step = r->start; step < r->end_step; step++) {
        const double t_step = now_s();
        if (interval_steps == 0) t_interval = t_step;
        step_stats st = {.done = step + 1, .loss = NAN, .val = NAN};
        st.eval = (st.done % r->o.eval_every == 0 || st.done == r->end_step) && !r->o.fx.overfit;
        const int logged = st.done % r->log_every == 0 || st.done == r->start + 1 || st.done == r->end_step ||
            st.eval || (r->o.save_every && st.done % r->o.save_every == 0);
        if (train_step(r, step, logged, &st.lr, &st.loss, &st.norm) != TFC_OK)
            return cli_lib_error(CMD, "training step");
        interval_steps++;
        if (r->fx_rc == FX_SKIP) {
            interval_steps = 0;
            continue;
        }
        if (r->fx_rc) return r->fx_rc;
        if (!logged) continue;
        const double t1 = now_s();
        st.elapsed_s = t1 - r->t0;
        st.tokens_per_s = tokens_per_step * (double)interval_steps / (t1 - t_interval);
        st.mfu = mfu_of(r->flops_per_token, st.tokens_per_s, r->peak_flops);
        r->mfu_sum += st.mfu * (double)interval_steps;
        r->mfu_n += interval_steps;
        interval_steps = 0;
        if (st.eval && r->rank == 0) {
            int rc = val_loss(r, &st.val);
            if (rc) return rc;
            r->last_val = st.val;
        }
        loss_log_add(&r->curve, st.done, st.loss, st.val, st.lr);
        if (r->jl) log_json(r->jl, &st, &r->fx);
        print_progress(r, &st);
        if (fx_overfit_step(&r->fx, st.done, st.loss)) break;
        /* --save-every: the last step's checkpoint is save()'s */
        if (r->o.save_every && st.done % r->o.save_every == 0 && st.done < r->end_step) {
            int rc = save_checkpoint(r, st.done);
            if (rc) return rc;
        }
    }
    return 0;
}

/* ---- save: checkpoint, loss curve, a sample ----------------------------------------- */

/* Weights, optimizer state, the position to resume from (`done` steps trained) and the loss curve so far. */
static int save_checkpoint(const train_run *r, int64_t done) {
    char step[32], seed[32], batch[32], steps[32], title[256];
    snprintf(step, sizeof step, "%lld", (long long)done);
    snprintf(seed, sizeof seed, "%lld", (long long)r->o.seed);
    snprintf(batch, sizeof batch, "%lld", (long long)r->o.batch);
    snprintf(steps, sizeof steps, "%lld", (long long)r->o.steps);
    snprintf(title, sizeof title, "tfcore train: %s, %s, batch %d, steps %lld-%lld", r->o.preset, r->o.tokenizer,
             (int)r->o.batch, (long long)(r->curve.n ? r->curve.step[0] - 1 : r->start), (long long)done);
    /* a --data-bin run also records its shards (as given: a relative pattern resumes from the same directory) */
    const char *keys[] = {"train.step",   "train.seed",     "train.batch",       "train.steps",
                          "train.preset", "train.data_bin", "train.data_format", "train.val_bin"};
    const char *vals[] = {step, seed, batch, steps, r->o.preset, r->o.data_bin, r->o.data_format, r->o.val_bin};
    const int32_t n_meta = !r->o.data_bin ? 5 : !r->o.val_bin ? 7 : 8;
    /* a sharded optimizer's state is gathered on rank 0 (every rank takes part) */
    tfc_optim *full = NULL;
    if (tfc_optim_is_sharded(r->opt) && tfc_optim_gather(r->opt, 0, &full) != TFC_OK)
        return cli_lib_error(CMD, "gathering the sharded optimizer state");
    if (r->rank != 0) return 0;
    const ckpt_contents c = {.model = r->m,
                             .opt = full ? full : r->opt,
                             .v = &r->v,
                             .keys = keys,
                             .vals = vals,
                             .n_meta = n_meta,
                             .step = done,
                             .curve = &r->curve,
                             .curve_title = title,
                             .lora_base = r->o.lora.base};
    int rc = ckpt_save(CMD, r->o.out, &c);
    tfc_optim_release(full);
    return rc;
}

/* A short sample from a newline (or token 0), streamed to stdout. */
static int sample(train_run *r) {
    int32_t prompt = 0;
    if (r->v.kind == VOCAB_CHAR && r->v.index['\n'] >= 0) prompt = r->v.index['\n'];
    const int32_t n = (int32_t)r->o.sample_tokens;
    int32_t *out = malloc((size_t)n * sizeof *out);
    /* Generation (KV cache, host sampling) runs on the CPU; the optimizer is not used after this. */
    if (r->o.cuda_index >= 0 && tfc_gpt_to_device(r->m, TFC_DEVICE_CPU, 0) != TFC_OK) {
        free(out);
        return cli_lib_error(CMD, "moving the model back to the CPU for sampling");
    }
    printf("--- sample (temperature 0.8, top-k 40) ---\n");
    fflush(stdout);
    int rc = 0;
    if (!out ||
        tfc_gpt_generate(r->m, &prompt, 1, n, 0.8, 40, 1.0, (uint64_t)r->o.seed, out, n, vocab_print_token, &r->v) !=
            TFC_OK)
        rc = cli_lib_error(CMD, "sampling");
    printf("\n---\n");
    free(out);
    return rc;
}

/* How much of the gradient communication backward hid (tfc_ddp's measurements). */
static void print_dist_stats(const train_run *r) {
    tfc_ddp_stats st = {.struct_size = sizeof st};
    if (!r->ddp || tfc_ddp_get_stats(r->ddp, &st) != TFC_OK || st.syncs == 0) return;
    double hidden = st.comm_s > 0 ? 1.0 - st.exposed_s / st.comm_s : 0;
    printf("ddp: %lld buckets in %lld steps, %.1f MB all-reduced per step, communication %.3f s of which %.0f%% "
           "hidden behind backward\n",
           (long long)st.buckets, (long long)st.syncs, (double)st.bytes / (double)st.syncs / 1e6, st.comm_s,
           100.0 * (hidden > 0 ? hidden : 0));
}

/*
 * The optimizer state each rank holds (the largest over ranks) next to what
 * one process holds: what --zero 1 saves. Collective.
 */
static int print_state_memory(train_run *r) {
    int64_t mine = 0;
    tfc_tensor *t = NULL;
    double most = 0;
    if (tfc_optim_state_bytes(r->opt, &mine) != TFC_OK) return cli_lib_error(CMD, "optimizer state size");
    double v = (double)mine;
    if (tfc_tensor_from_data(&v, NULL, 0, TFC_DTYPE_F64, &t) != TFC_OK) return cli_lib_error(CMD, "state size");
    /* every rank's size, to report the largest */
    tfc_tensor *all = NULL;
    int64_t n = r->size;
    tfc_status s = tfc_tensor_zeros(&n, 1, TFC_DTYPE_F64, &all);
    if (s == TFC_OK) s = tfc_all_gather(r->comm, t, all);
    double *h = malloc(sizeof *h * (size_t)n);
    if (s == TFC_OK && h) s = tfc_tensor_copy_to_host(all, h, sizeof *h * (size_t)n);
    for (int64_t i = 0; s == TFC_OK && h && i < n; i++)
        if (h[i] > most) most = h[i];
    free(h);
    tfc_tensor_release(t);
    tfc_tensor_release(all);
    if (s != TFC_OK) return cli_lib_error(CMD, "gathering the optimizer state sizes");
    const double one = 2.0 * (double)tfc_gpt_num_elements(r->m) * (r->cfg.dtype == TFC_DTYPE_F64 ? 8 : 4);
    printf("optimizer state: %.2f MB on the largest of %d ranks (%.2f MB in one process, %.2fx)\n", most / 1e6, r->size,
           one / 1e6, one / (most > 0 ? most : 1));
    return 0;
}

/* The measured peak next to the plan: the library's allocations above what was live before the model, and RSS. */
static void print_memory(const train_run *r) {
    train_plan p;
    train_plan_make(&r->cfg, r->o.batch / (r->size * r->o.grad_accum), r->o.batch, r->o.grad_accum,
                    strcmp(r->o.dtype, "bf16") == 0, &p);
    int64_t lib_peak, lib_live, rss_peak, rss_now;
    train_plan_measure(&lib_peak, &lib_live, &rss_peak, &rss_now);
    const double measured = (double)(lib_peak - r->mem_base);
    if (r->o.fx.recompute) p.peak = p.peak_recompute; /* the plan of the run that ran */
    if (r->o.lora.base) {
        printf("memory: measured peak %.2f MB (library allocations above the %.2f MB live before the model), peak RSS "
               "%.2f MB above the %.2f MB before it\n",
               measured / 1e6, (double)r->mem_base / 1e6, (double)(rss_peak - r->rss_base) / 1e6,
               (double)r->rss_base / 1e6);
        return;
    }
    printf("memory: planned peak %.2f MB, measured peak %.2f MB (%+.1f%%; library allocations above the %.2f MB live "
           "before the model), peak RSS %.2f MB above the %.2f MB before it\n",
           (double)p.peak / 1e6, measured / 1e6, 100.0 * (measured - (double)p.peak) / (double)p.peak,
           (double)r->mem_base / 1e6, (double)(rss_peak - r->rss_base) / 1e6, (double)r->rss_base / 1e6);
}

static int save(train_run *r) {
    if (r->rank == 0) print_memory(r); /* before the checkpoint and the sample allocate their own */
    int rc = save_checkpoint(r, r->end_step);
    if (rc) return rc;
    if ((r->size > 1 || r->o.zero) && (rc = print_state_memory(r)) != 0) return rc;
    if (r->rank != 0) return 0;
    print_dist_stats(r);
    const loss_log *c = &r->curve;
    printf("final: train loss %.4f, val loss %.4f after %lld steps in %.1fs, mean MFU %.2f%%\n",
           c->n ? c->loss[c->n - 1] : NAN, r->last_val, (long long)r->end_step, now_s() - r->t0,
           100.0 * (r->mfu_n ? r->mfu_sum / (double)r->mfu_n : 0));
    printf("wrote %s/%s, optimizer.safetensors, config.json, loss.csv, loss.svg, checkpoint.json\n", r->o.out,
           r->o.lora.base ? "adapter_model.safetensors, adapter_config.json" : "model.safetensors");
    return r->o.sample_tokens > 0 ? sample(r) : 0;
}

static void run_free(train_run *r) {
    fx_free(&r->fx);
    if (r->jl) fclose(r->jl);
    tfc_ddp_release(r->ddp);
    ckpt_close(&r->ck);
    loss_log_free(&r->curve);
    tfc_graph_release(r->g);
    tfc_optim_release(r->opt);
    /* the last one: finalizes MPI when libtfcore started it */
    tfc_gpt_release(r->m);
    tfc_gpt_release(r->init);
    if (r->vf != r->tf) tfc_token_file_close(r->vf);
    tfc_token_file_close(r->tf);
    vocab_free(&r->v);
    tfc_comm_release(r->comm);
}

/*
 * mpirun's ranks, or this process alone. Ranks other than 0 stay quiet on
 * stdout; their errors still reach stderr.
 */
static int join(train_run *r) {
    if (tfc_comm_init(&r->comm) != TFC_OK) return cli_lib_error(CMD, "joining the other ranks");
    r->rank = tfc_comm_rank(r->comm);
    r->size = tfc_comm_size(r->comm);
    if (r->rank != 0 && !freopen("/dev/null", "w", stdout))
        return cli_error(EXIT_RUNTIME, CMD, "rank %d: cannot silence stdout", r->rank);
    return 0;
}

int cmd_train(int argc, char **argv) {
    train_run r = {0};
    int rc = parse(argc, argv, &r.o);
    if (!rc) rc = join(&r);
    if (!rc) rc = load(&r);
    if (!rc && r.o.plan) { /* --plan: the table and nothing else */
        train_plan p;
        train_plan_make(&r.cfg, r.o.batch / (r.size * r.o.grad_accum), r.o.batch, r.o.grad_accum,
                        strcmp(r.o.dtype, "bf16") == 0, &p);
        train_plan_print(stdout, &p, &r.cfg);
        run_free(&r);
        return 0;
    }
    if (!rc) rc = build(&r);
    if (!rc) rc = loop(&r);
    if (!rc) rc = r.o.fx.overfit ? fx_overfit_report(&r.fx, CMD) : save(&r);
    /* A rank that failed ends the job, so the others do not wait for it in their next collective. */
    if (rc && r.size > 1) {
        fprintf(stderr, "tfcore train: rank %d of %d failed (exit status %d); ending the job\n", r.rank, r.size, rc);
        tfc_comm_abort(r.comm, rc);
    }
    run_free(&r);
    return rc;
}
