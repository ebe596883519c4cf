/*
 * tfcore train: tokenize a text file, train a GPT with AdamW (decay on 2-D
 * weights only), warmup + cosine learning rate and gradient clipping,
 * evaluate on the held-out last 10%, then write a checkpoint, the loss
 * curve (CSV + SVG) and a short sample.
 *
 * Reproducibility: the model is initialised from --seed, batch `step` is
 * drawn from (seed, step), the learning rate is a function of the step, and
 * the checkpoint holds the weights and the whole optimizer state — so N
 * steps, save, --resume, M more steps give the same numbers as N+M steps.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "cli.h"

static const char *CMD = "train";

typedef struct train_opts {
    const char *data, *tokenizer, *preset, *out, *log_json, *device, *dtype;
    int32_t cuda_index; /* -1: train on the CPU */
    int64_t steps, batch, seed, eval_every, eval_batches, warmup, stop_after, sample_tokens;
    int64_t profile_steps; /* 0: no --profile */
    double lr, min_lr, weight_decay, clip;
    int resume, force, preset_given;
} train_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: tfcore train [--data FILE] [--tokenizer char|bpe:VOCAB|gpt2:DIR] [--preset NAME]\n"
            "                    [--steps N] [--batch B] [--lr LR] [--min-lr LR] [--warmup N] [--weight-decay WD]\n"
            "                    [--clip C] [--seed S] [--out DIR] [--resume] [--force] [--log-json FILE]\n"
            "                    [--eval-every K] [--eval-batches N] [--stop-after N] [--sample-tokens N]\n"
            "                    [--profile] [--profile-steps N] [--device cpu|cuda|cuda:N] [--dtype f32|bf16]\n"
            "Defaults: tinyshakespeare ($TFCORE_DATA or ../shared/data/tinyshakespeare.txt), char, char-tiny,\n"
            "2000 steps, batch 16, lr 1e-3 -> 1e-4 cosine after 100 warmup steps, weight decay 0.1, clip 1.0,\n"
            "seed 1337, out ./out, eval every 100 steps over 10 batches, device cpu, dtype f32.\n"
            "--profile prints a per-op time table (calls, forward/backward ms, %%, the clip + optimizer\n"
            "row) of one step after the first (warm-up) step to stderr; --profile-steps N averages N steps.\n"
            "--device cuda trains on the GPU (the model is initialised on the CPU, so a seed gives the same\n"
            "weights on either device); checkpoints are written from the device and the final sample runs on\n"
            "the CPU. --dtype bf16 (mixed precision) is not implemented yet.\n");
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

/* --data, else $TFCORE_DATA, else <repo>/../shared/data, else /work/shared/data. */
static const char *find_data(const char *given) {
    if (given) return given;
    const char *env = getenv("TFCORE_DATA");
    if (env && *env) return env;
    static char p[4096];
    snprintf(p, sizeof p, "%s/../shared/data/tinyshakespeare.txt", TFC_SOURCE_ROOT);
    if (file_exists(p)) return p;
    return "/work/shared/data/tinyshakespeare.txt";
}

static int parse(int argc, char **argv, train_opts *o) {
    *o = (train_opts){NULL, "char", "char-tiny", "out", NULL, "cpu", "f32", -1, 2000, 16, 1337, 100, 10, -1, 0, 300, 0,
                      1e-3, 1e-4, 0.1, 1.0, 0, 0, 0};
    cli_args a = {argc, 0, argv, NULL};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) return cli_error(EXIT_USAGE, CMD, "unexpected argument '%s' (see tfcore train --help)", name);
        int64_t iv;
#define NEED_VAL \
    if (!val) return cli_error(EXIT_USAGE, CMD, "--%s needs a value", name)
#define INT_FLAG(flag, field, lo, hi) \
    else if (strcmp(name, flag) == 0) { if (!cli_int(CMD, name, val, lo, hi, &iv)) return EXIT_USAGE; o->field = iv; }
#define DBL_FLAG(flag, field, lo, hi) \
    else if (strcmp(name, flag) == 0) { if (!cli_double(CMD, name, val, lo, hi, &o->field)) return EXIT_USAGE; }
        if (strcmp(name, "help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(name, "resume") == 0 || strcmp(name, "force") == 0 || strcmp(name, "profile") == 0) {
            if (val) return cli_error(EXIT_USAGE, CMD, "--%s takes no value", name);
            if (name[0] == 'r') o->resume = 1;
            else if (name[0] == 'f') o->force = 1;
            else if (!o->profile_steps) o->profile_steps = 1;
        } else if (strcmp(name, "data") == 0) { NEED_VAL; o->data = val; }
        else if (strcmp(name, "tokenizer") == 0) { NEED_VAL; o->tokenizer = val; }
        else if (strcmp(name, "preset") == 0) { NEED_VAL; o->preset = val; o->preset_given = 1; }
        else if (strcmp(name, "out") == 0) { NEED_VAL; o->out = val; }
        else if (strcmp(name, "log-json") == 0) { NEED_VAL; o->log_json = val; }
        else if (strcmp(name, "device") == 0) { NEED_VAL; o->device = val; }
        else if (strcmp(name, "dtype") == 0) { NEED_VAL; o->dtype = val; }
        INT_FLAG("steps", steps, 1, 100000000)
        INT_FLAG("batch", batch, 1, 65536)
        INT_FLAG("seed", seed, 0, INT64_MAX)
        INT_FLAG("eval-every", eval_every, 1, INT64_MAX)
        INT_FLAG("eval-batches", eval_batches, 1, 100000)
        INT_FLAG("warmup", warmup, 0, 100000000)
        INT_FLAG("stop-after", stop_after, 1, 100000000)
        INT_FLAG("sample-tokens", sample_tokens, 0, 1000000)
        INT_FLAG("profile-steps", profile_steps, 1, 100000000)
        DBL_FLAG("lr", lr, 0, 10)
        DBL_FLAG("min-lr", min_lr, 0, 10)
        DBL_FLAG("weight-decay", weight_decay, 0, 10)
        DBL_FLAG("clip", clip, 1e-12, INFINITY)
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
    if (strcmp(o->dtype, "bf16") == 0)
        return cli_error(EXIT_USAGE, CMD, "--dtype bf16: bf16 training not implemented yet (use --dtype f32)");
    if (strcmp(o->dtype, "f32") != 0)
        return cli_error(EXIT_USAGE, CMD, "--dtype must be f32 or bf16, got '%s'", o->dtype);
    if (o->min_lr > o->lr) return cli_error(EXIT_USAGE, CMD, "--min-lr %g is above --lr %g", o->min_lr, o->lr);
    if (o->warmup < 0) o->warmup = o->steps >= 1000 ? 100 : o->steps / 10;
    if (o->warmup >= o->steps)
        return cli_error(EXIT_USAGE, CMD, "--warmup %lld must be below --steps %lld", (long long)o->warmup,
                         (long long)o->steps);
    return 0;
}

/* Build the vocabulary named by --tokenizer from the corpus. */
static int make_vocab(const train_opts *o, const char *text, size_t len, vocab *v) {
    memset(v, 0, sizeof *v);
    if (strcmp(o->tokenizer, "char") == 0) {
        vocab_chars_from_text(v, text, len);
        return 0;
    }
    if (strncmp(o->tokenizer, "bpe:", 4) == 0) {
        int64_t n;
        if (!cli_int(CMD, "tokenizer bpe:", o->tokenizer + 4, 256, 65536, &n)) return EXIT_USAGE;
        v->kind = VOCAB_BPE;
        if (tfc_tokenizer_new(TFC_SPLIT_GPT2, &v->bpe) != TFC_OK ||
            tfc_tokenizer_train(v->bpe, text, len, (int32_t)n) != TFC_OK)
            return cli_lib_error(CMD, "training the BPE tokenizer");
    } else if (strncmp(o->tokenizer, "gpt2:", 5) == 0) {
        int rc = load_gpt2_tokenizer(CMD, o->tokenizer + 5, &v->bpe);
        if (rc) return rc;
        v->kind = VOCAB_BPE;
    } else {
        return cli_error(EXIT_USAGE, CMD, "--tokenizer must be char, bpe:VOCAB or gpt2:DIR, got '%s'", o->tokenizer);
    }
    if (tfc_tokenizer_vocab_size(v->bpe, &v->size) != TFC_OK) return cli_lib_error(CMD, "tokenizer");
    return 0;
}

/* Mean loss over eval_batches fixed random batches of the val split, no graph. */
static int val_loss(tfc_gpt *m, const tfc_token_file *tf, int64_t begin, int64_t end, int32_t B, int32_t T,
                    const train_opts *o, double *out) {
    double sum = 0;
    for (int64_t k = 0; k < o->eval_batches; k++) {
        tfc_tensor *x, *y, *loss;
        if (tfc_token_file_batch(tf, begin, end, B, T, (uint64_t)o->seed ^ 0x5eedULL, (uint64_t)k, &x, &y) != TFC_OK)
            return cli_lib_error(CMD, "val batch");
        tfc_status s = tfc_gpt_forward(m, NULL, x, y, NULL, &loss);
        tfc_tensor_release(x);
        tfc_tensor_release(y);
        if (s != TFC_OK) return cli_lib_error(CMD, "val forward");
        double l;
        s = tfc_tensor_item(loss, &l);
        tfc_tensor_release(loss);
        if (s != TFC_OK) return cli_lib_error(CMD, "val loss");
        sum += l;
    }
    *out = sum / (double)o->eval_batches;
    return 0;
}

static void fmt_eta(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, n, "?");
    else if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%.0fs", s);
}

static int32_t print_token(int32_t tok, void *ctx) {
    const vocab *v = ctx;
    const char *b;
    size_t n;
    if (vocab_token_bytes(v, tok, &b, &n) == 0) fwrite(b, 1, n, stdout);
    fflush(stdout);
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

static int config_for(const train_opts *o, const vocab *v, tfc_gpt_config *c) {
    *c = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    c->vocab_size = v->size;
    if (tfc_gpt_config_preset(o->preset, c) != TFC_OK)
        return cli_error(EXIT_USAGE, CMD, "unknown preset '%s' (known: char-tiny, char-small, gpt2-mini, gpt2)", o->preset);
    if (v->size > c->vocab_size)
        return cli_error(EXIT_USAGE, CMD, "the tokenizer has %d tokens but preset %s has a vocabulary of %d", v->size,
                         o->preset, c->vocab_size);
    return 0;
}

/* Refuse a checkpoint in --out whose config differs from c (checked before anything is written). */
static int check_existing(const train_opts *o, const tfc_gpt_config *c, int64_t *start_step) {
    tfc_safetensors *f = NULL;
    if (!file_exists(path_join(o->out, "model.safetensors"))) {
        if (o->resume) return cli_error(EXIT_USAGE, CMD, "--resume: no checkpoint in '%s'", o->out);
        return 0;
    }
    int rc = ckpt_open(CMD, o->out, &f);
    if (rc) return rc;
    struct { const char *key; int32_t want; } keys[] = {
        {"tfc.n_layer", c->n_layer}, {"tfc.n_head", c->n_head}, {"tfc.n_embd", c->n_embd},
        {"tfc.block_size", c->block_size}, {"tfc.vocab_size", c->vocab_size}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && !rc; i++) {
        const char *s = NULL;
        if (tfc_safetensors_metadata(f, keys[i].key, &s) != TFC_OK || !s || atoi(s) != keys[i].want) {
            if (o->force && !o->resume) break;
            rc = cli_error(EXIT_USAGE, CMD,
                           "'%s' holds a checkpoint of another config (%s %s, this run %d); use another --out%s",
                           o->out, keys[i].key + 4, s ? s : "?", keys[i].want, o->resume ? "" : " or --force");
        }
    }
    const char *st = NULL;
    if (!rc && o->resume) {
        if (tfc_safetensors_metadata(f, "train.step", &st) != TFC_OK || !st)
            rc = cli_error(EXIT_USAGE, CMD, "the checkpoint in '%s' has no training position", o->out);
        else *start_step = atoll(st);
        if (!rc && *start_step >= o->steps)
            rc = cli_error(EXIT_USAGE, CMD, "the checkpoint is at step %lld, --steps is %lld: nothing to do",
                           (long long)*start_step, (long long)o->steps);
    }
    tfc_safetensors_release(f);
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

int cmd_train(int argc, char **argv) {
    train_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    /* Before anything is read or written: is the asked-for device there? */
    if (o.cuda_index >= 0 && !tfc_cuda_available())
        return cli_error(EXIT_RUNTIME, CMD, "--device %s: %s", o.device, tfc_last_error());
    const char *data_path = find_data(o.data);
    char *text = NULL;
    size_t len = 0;
    if (read_file(data_path, &text, &len) != 0)
        return cli_error(EXIT_USAGE, CMD, "cannot read the data file '%s' (give --data FILE or set $TFCORE_DATA)",
                         data_path);
    vocab v = {0};
    tfc_gpt_config cfg;
    int64_t start = 0;
    if (o.resume) {
        /* the vocabulary comes from the checkpoint, so token ids mean the same */
        tfc_safetensors *f = NULL;
        const char *vm = NULL;
        if (!file_exists(path_join(o.out, "model.safetensors"))) {
            rc = cli_error(EXIT_USAGE, CMD, "--resume: no checkpoint in '%s'", o.out);
            goto out_text;
        }
        if ((rc = ckpt_open(CMD, o.out, &f)) != 0) goto out_text;
        if (tfc_safetensors_metadata(f, "tfc.vocab", &vm) != TFC_OK) vm = NULL;
        const char *pr = NULL;
        static char preset[64];
        if (!o.preset_given && tfc_safetensors_metadata(f, "train.preset", &pr) == TFC_OK && pr) {
            snprintf(preset, sizeof preset, "%s", pr);
            o.preset = preset;
        }
        rc = vocab_from_meta(CMD, vm, path_join(o.out, "tokenizer.tfctok"), &v);
        tfc_safetensors_release(f);
        if (rc) goto out_text;
    } else if ((rc = make_vocab(&o, text, len, &v)) != 0) {
        goto out_text;
    }
    if ((rc = config_for(&o, &v, &cfg)) != 0 || (rc = check_existing(&o, &cfg, &start)) != 0) goto out_vocab;

    int32_t *ids = NULL;
    size_t n_ids = 0;
    if ((rc = vocab_encode(CMD, &v, text, len, &ids, &n_ids)) != 0) goto out_vocab;
    const int64_t T = cfg.block_size, n_val = (int64_t)n_ids / 10, n_train = (int64_t)n_ids - n_val;
    if (n_val < T + 1) {
        rc = cli_error(EXIT_USAGE, CMD,
                       "the corpus '%s' is too small: %zu tokens, but its last 10%% (validation) must hold one block "
                       "of %lld+1 tokens, so at least %lld tokens are needed",
                       data_path, n_ids, (long long)T, (long long)(10 * (T + 1)));
        free(ids);
        goto out_vocab;
    }
    if (ensure_dir(o.out) != 0) {
        rc = cli_error(EXIT_USAGE, CMD, "cannot create the output directory '%s'", o.out);
        free(ids);
        goto out_vocab;
    }
    const char *tok_path = path_join(o.out, "data.tokens");
    tfc_status ts = tfc_token_file_write(tok_path, ids, (int64_t)n_ids, v.size);
    free(ids);
    tfc_token_file *tf = NULL;
    if (ts != TFC_OK || tfc_token_file_open(tok_path, &tf) != TFC_OK) {
        rc = cli_lib_error(CMD, "writing the token file");
        goto out_vocab;
    }

    tfc_gpt *m = NULL;
    tfc_optim *opt = NULL;
    tfc_graph *g = NULL;
    FILE *jl = NULL;
    loss_log curve = {0};
    if (tfc_gpt_new(&cfg, (uint64_t)o.seed, &m) != TFC_OK) {
        rc = cli_lib_error(CMD, "building the model");
        goto out_tf;
    }
    /* The model moves before the optimizer is built on its parameters. */
    if (o.cuda_index >= 0 && tfc_gpt_to_device(m, TFC_DEVICE_CUDA, o.cuda_index) != TFC_OK) {
        rc = cli_lib_error(CMD, "moving the model to the GPU");
        goto out_model;
    }
    /* AdamW, weight decay on the 2-D weights only */
    int32_t np;
    const char *const *pnames;
    tfc_tensor *const *params;
    if (tfc_gpt_params(m, &np, &pnames, &params) != TFC_OK) np = 0;
    tfc_tensor **decay = malloc((size_t)np * sizeof *decay), **no_decay = malloc((size_t)np * sizeof *no_decay);
    int32_t nd = 0, nn = 0;
    for (int32_t i = 0; i < np && decay && no_decay; i++) {
        if (tfc_tensor_ndim(params[i]) >= 2) decay[nd++] = params[i];
        else no_decay[nn++] = params[i];
    }
    tfc_optim_options oo = TFC_ADAMW_OPTIONS_INIT;
    oo.lr = o.lr;
    oo.beta1 = 0.9;
    oo.beta2 = 0.95;
    oo.weight_decay = o.weight_decay;
    if (!decay || !no_decay || tfc_optim_adamw(&oo, &opt) != TFC_OK ||
        tfc_optim_add_group(opt, decay, nd, o.lr, o.weight_decay, NULL) != TFC_OK ||
        tfc_optim_add_group(opt, no_decay, nn, o.lr, 0.0, NULL) != TFC_OK)
        rc = cli_lib_error(CMD, "setting up AdamW");
    free(decay);
    free(no_decay);
    if (rc) goto out_model;
    if (o.resume) {
        if (tfc_gpt_load_into(m, path_join(o.out, "model.safetensors")) != TFC_OK) {
            rc = cli_lib_error(CMD, "resuming");
            goto out_model;
        }
        if ((rc = ckpt_load_optim(CMD, o.out, opt)) != 0) goto out_model;
        load_history(&o, start, &curve);
    }
    if (o.log_json && !(jl = fopen(o.log_json, o.resume ? "a" : "w"))) {
        rc = cli_error(EXIT_USAGE, CMD, "cannot write --log-json file '%s'", o.log_json);
        goto out_model;
    }
    if (tfc_graph_new(&g) != TFC_OK) {
        rc = cli_lib_error(CMD, "graph");
        goto out_model;
    }
    const int tty = isatty(fileno(stdout));
    const int64_t end_step = o.stop_after && o.stop_after < o.steps ? o.stop_after : o.steps;
    const int32_t B = (int32_t)o.batch;
    printf("tfcore train: %s, preset %s (%d layers, %d heads, %d dims, block %d, vocab %d), %lld parameters\n",
           data_path, o.preset, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, cfg.vocab_size,
           (long long)tfc_gpt_num_elements(m));
    printf("device: %s, dtype %s\n", o.device, o.dtype);
    printf("data: %zu tokens (%lld train, %lld val); batch %d x %lld; steps %lld..%lld of %lld; out %s\n", n_ids,
           (long long)n_train, (long long)n_val, B, (long long)T, (long long)start, (long long)end_step,
           (long long)o.steps, o.out);
    fflush(stdout);
    /* --profile: the steps after the first (warm-up: allocator, caches), or the only one */
    const int64_t prof_begin = end_step - start >= 2 ? start + 1 : start;
    const int64_t prof_end = o.profile_steps ? (prof_begin + o.profile_steps < end_step ? prof_begin + o.profile_steps
                                                                                       : end_step)
                                             : prof_begin;
    const double t0 = now_s();
    double last_val = NAN, tps = 0;
    for (int64_t step = start; step < end_step; step++) {
        double lr, t_step = now_s();
        tfc_tensor *x = NULL, *y = NULL, *loss = NULL;
        double l = NAN, norm = 0;
        tfc_status s = tfc_lr_cosine(step, o.lr, o.min_lr, o.warmup, o.steps, &lr);
        if (s == TFC_OK) s = tfc_optim_set_lr(opt, lr);
        if (s == TFC_OK) s = tfc_token_file_batch(tf, 0, n_train, B, (int32_t)T, (uint64_t)o.seed, (uint64_t)step, &x, &y);
        /* profiled: forward, backward, clip and the optimizer step (not the batch, eval or logging) */
        const int profiled = step >= prof_begin && step < prof_end;
        if (s == TFC_OK && profiled && step == prof_begin) s = tfc_profile_reset();
        if (s == TFC_OK && profiled) s = tfc_profile_enable(1);
        if (s == TFC_OK) s = tfc_gpt_forward(m, g, x, y, NULL, &loss);
        if (s == TFC_OK) s = tfc_graph_backward(g, loss, NULL);
        if (s == TFC_OK) s = tfc_tensor_item(loss, &l);
        if (s == TFC_OK) s = tfc_graph_clear(g);
        if (s == TFC_OK) s = tfc_optim_clip_grad_norm(opt, o.clip, &norm);
        if (s == TFC_OK) s = tfc_optim_step(opt);
        if (s == TFC_OK) s = tfc_optim_zero_grad(opt, 1);
        if (s == TFC_OK && profiled) s = tfc_profile_enable(0);
        if (s == TFC_OK && profiled && step == prof_end - 1) s = print_profile(prof_begin, prof_end);
        tfc_tensor_release(x);
        tfc_tensor_release(y);
        tfc_tensor_release(loss);
        if (s != TFC_OK) {
            rc = cli_lib_error(CMD, "training step");
            goto out_model;
        }
        const double t1 = now_s(), elapsed = t1 - t0;
        tps = (double)B * (double)T / (t1 - t_step);
        const int64_t done = step + 1;
        const int eval = done % o.eval_every == 0 || done == end_step;
        double vl = NAN;
        if (eval) {
            if ((rc = val_loss(m, tf, n_train, (int64_t)n_ids, B, (int32_t)T, &o, &vl)) != 0) goto out_model;
            last_val = vl;
        }
        loss_log_add(&curve, done, l, vl, lr);
        if (jl) {
            fprintf(jl, "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.6g, \"tokens_per_s\": %.1f, \"elapsed_s\": %.3f",
                    (long long)done, l, lr, norm, tps, elapsed);
            if (eval) fprintf(jl, ", \"val_loss\": %.9g", vl);
            fprintf(jl, "}\n");
            fflush(jl);
        }
        char eta[32];
        fmt_eta(elapsed / (double)(done - start) * (double)(end_step - done), eta, sizeof eta);
        if (tty) {
            int width = 24, fill = (int)((double)width * (double)done / (double)end_step);
            char bar[32];
            for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
            bar[width] = 0;
            char vs[32] = "-";
            if (!isnan(last_val)) snprintf(vs, sizeof vs, "%.4f", last_val);
            printf("\r[%s] step %lld/%lld  loss %.4f  val %s  %.0f tok/s  ETA %s   ", bar, (long long)done,
                   (long long)end_step, l, vs, tps, eta);
            if (eval) printf("\n");
            fflush(stdout);
        } else if (eval || done % 10 == 0 || done == start + 1) {
            printf("step %lld/%lld  loss %.4f", (long long)done, (long long)end_step, l);
            if (eval) printf("  val %.4f", vl);
            printf("  lr %.2e  %.0f tok/s  elapsed %.0fs  ETA %s\n", lr, tps, elapsed, eta);
            fflush(stdout);
        }
    }
    /* checkpoint: weights + optimizer + the position to resume from */
    {
        char sstep[32], sseed[32], sbatch[32], ssteps[32];
        snprintf(sstep, sizeof sstep, "%lld", (long long)end_step);
        snprintf(sseed, sizeof sseed, "%lld", (long long)o.seed);
        snprintf(sbatch, sizeof sbatch, "%lld", (long long)o.batch);
        snprintf(ssteps, sizeof ssteps, "%lld", (long long)o.steps);
        const char *k[5] = {"train.step", "train.seed", "train.batch", "train.steps", "train.preset"};
        const char *val[5] = {sstep, sseed, sbatch, ssteps, o.preset};
        if ((rc = ckpt_save(CMD, o.out, m, opt, &v, k, val, 5)) != 0) goto out_model;
    }
    const char *csv = path_join(o.out, "loss.csv"), *svg = path_join(o.out, "loss.svg");
    char title[256];
    snprintf(title, sizeof title, "tfcore train: %s, %s, batch %d, steps %lld-%lld", o.preset, o.tokenizer, B,
             (long long)(curve.n ? curve.step[0] - 1 : start), (long long)end_step);
    if (loss_log_write_csv(&curve, csv) != 0 || loss_log_write_svg(&curve, svg, title) != 0)
        fprintf(stderr, "tfcore train: warning: could not write %s / %s\n", csv, svg);
    printf("final: train loss %.4f, val loss %.4f after %lld steps in %.1fs\n",
           curve.n ? curve.loss[curve.n - 1] : NAN, last_val, (long long)end_step, now_s() - t0);
    printf("wrote %s/model.safetensors, optimizer.safetensors, config.json, loss.csv, loss.svg\n", o.out);
    if (o.sample_tokens > 0) {
        /* a short sample from a newline (or token 0) */
        int32_t prompt = 0;
        if (v.kind == VOCAB_CHAR && v.index['\n'] >= 0) prompt = v.index['\n'];
        int32_t *outt = malloc((size_t)o.sample_tokens * sizeof *outt);
        /* Generation (KV cache, host sampling) runs on the CPU; the optimizer is not used after this. */
        if (o.cuda_index >= 0 && tfc_gpt_to_device(m, TFC_DEVICE_CPU, 0) != TFC_OK) {
            free(outt);
            rc = cli_lib_error(CMD, "moving the model back to the CPU for sampling");
            goto out_model;
        }
        printf("--- sample (temperature 0.8, top-k 40) ---\n");
        fflush(stdout);
        if (!outt || tfc_gpt_generate(m, &prompt, 1, (int32_t)o.sample_tokens, 0.8, 40, 1.0, (uint64_t)o.seed, outt,
                                      (int32_t)o.sample_tokens, print_token, &v) != TFC_OK)
            rc = cli_lib_error(CMD, "sampling");
        printf("\n---\n");
        free(outt);
    }
out_model:
    if (jl) fclose(jl);
    loss_log_free(&curve);
    tfc_graph_release(g);
    tfc_optim_release(opt);
    tfc_gpt_release(m);
out_tf:
    tfc_token_file_close(tf);
out_vocab:
    vocab_free(&v);
out_text:
    free(text);
    return rc;
}
