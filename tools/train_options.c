/*
 * tfcore train's flags (train_options.h): defaults, usage, parsing and the
 * checks of values and combinations that need nothing but the flags.
 */
#include "train_options.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "train";

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

void train_usage(FILE *f) {
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
        "                    [--arch gpt2|llama|mistral|qwen2] [--n-kv-head K] [--mlp-hidden F] [--rope-theta X]\n"
        "                    [--sliding-window W] [--peak-flops F] [--plan] [--log-every N]\n"
        "Defaults: tinyshakespeare ($TFCORE_DATA, else the project's data/tinyshakespeare.txt), char, char-tiny,\n"
        "2000 steps, batch 16, lr 1e-3 -> 1e-4 cosine after 100 warmup steps, weight decay 0.1, clip 1.0,\n"
        "seed 1337, out ./out, eval every 100 steps over 10 batches, device cpu, dtype f32.\n"
        "Presets: char-tiny, char-small, gpt2-mini, gpt2 (GPT-2) and llama-tiny (llama: 4 layers, 4 heads, 2 kv\n"
        "heads, 128 dims, MLP 352, block 128, untied head).\n"
        "--n-layer, --n-head, --n-embd, --block-size, --bias/--no-bias override the preset's shape, --dropout P\n"
        "(0) drops after the embeddings, on attention probabilities and after each block's two output\n"
        "projections while training; recorded in config.json and the checkpoint (--resume keeps the shape).\n"
        "--arch llama|mistral|qwen2 makes the preset's shape a Llama-family model (RMSNorm, rotary positions,\n"
        "SwiGLU MLP, untied head; qwen2 with q/k/v biases), --arch gpt2 a GPT-2 one; for the family,\n"
        "--n-kv-head K key/value heads (grouped-query attention; K divides --n-head; default all), --mlp-hidden F\n"
        "the MLP width (default 8C/3 rounded up to 32), --rope-theta X (10000), --sliding-window W (mistral,\n"
        "qwen2: a query sees its last W positions; 0 none). Recorded as tfc.arch, tfc.n_kv_head, tfc.mlp_hidden,\n"
        "tfc.rope.theta, tfc.sliding_window; --resume checks them like the shape.\n"
        "--peak-flops F is the peak FLOP/s of MFU (default: this CPU's FMA peak, measured once and cached in\n"
        "$XDG_CACHE_HOME/tfcore; on CUDA the card's datasheet peak).\n"
        "--data-bin GLOB trains on tokens already made: llm.c data shards (train_*.bin, its 1024-byte header)\n"
        "or nanoGPT's headerless u16 train.bin, the files in sorted order as one stream; --val-bin GLOB the\n"
        "validation tokens (else the last 10%%); --data-format picks the format (auto: llm.c by its magic,\n"
        "else u16). --tokenizer gpt2:DIR or FILE names the vocabulary the tokens are in (for the checkpoint).\n"
        "A tokenizer FILE is tfcore tokenizer's or a Hugging Face tokenizer.json (the checkpoint keeps a copy).\n"
        "--init-from MODEL starts from a model's weights and shape (a tfcore checkpoint, a Hugging Face GPT-2,\n"
        "Llama, Mistral or Qwen2 directory, or an llm.c .bin) with a fresh optimizer at step 0; its vocabulary\n"
        "is the model's (an llm.c file: give --tokenizer gpt2:DIR).\n"
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
        "module-name suffixes as PEFT matches them (default PEFT's for the architecture: GPT-2 c_attn, the\n"
        "Llama family q_proj,v_proj; GPT-2's modules c_attn, c_proj (attn.c_proj and mlp.c_proj), c_fc; the\n"
        "family's q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj; all-linear: every one).\n"
        "--init-from DIR stands for --lora-base DIR. --out then holds the adapters (PEFT's\n"
        "adapter_model.safetensors + adapter_config.json) and their optimizer state, not the base; --resume, eval\n"
        "and sample read the base from DIR.\n");
    fx_usage(f);
}

/* The flags that set one field: a string, an integer in [lo, hi] or a double in [lo, hi]. */
static const struct {
    const char *flag;
    size_t off;
} str_flags[] = {{"data", offsetof(train_opts, data)},
                 {"data-bin", offsetof(train_opts, data_bin)},
                 {"val-bin", offsetof(train_opts, val_bin)},
                 {"init-from", offsetof(train_opts, init_from)},
                 {"data-format", offsetof(train_opts, data_format)},
                 {"tokenizer", offsetof(train_opts, tokenizer)},
                 {"preset", offsetof(train_opts, preset)},
                 {"out", offsetof(train_opts, out)},
                 {"log-json", offsetof(train_opts, log_json)},
                 {"device", offsetof(train_opts, device)},
                 {"dtype", offsetof(train_opts, dtype)}};

static const struct {
    const char *flag;
    size_t off;
    int64_t lo, hi;
} int_flags[] = {{"steps", offsetof(train_opts, steps), 1, 100000000},
                 {"batch", offsetof(train_opts, batch), 1, 65536},
                 {"seed", offsetof(train_opts, seed), 0, INT64_MAX},
                 {"eval-every", offsetof(train_opts, eval_every), 1, INT64_MAX},
                 {"eval-batches", offsetof(train_opts, eval_batches), 1, 100000},
                 {"warmup", offsetof(train_opts, warmup), 0, 100000000},
                 {"stop-after", offsetof(train_opts, stop_after), 1, 100000000},
                 {"sample-tokens", offsetof(train_opts, sample_tokens), 0, 1000000},
                 {"profile-steps", offsetof(train_opts, profile_steps), 1, 100000000},
                 {"save-every", offsetof(train_opts, save_every), 1, 100000000},
                 {"grad-accum", offsetof(train_opts, grad_accum), 1, 65536},
                 {"zero", offsetof(train_opts, zero), 0, 1},
                 {"bucket-mb", offsetof(train_opts, bucket_mb), 1, 65536},
                 {"log-every", offsetof(train_opts, log_every), 1, 100000000}};

static const struct {
    const char *flag;
    size_t off;
    double lo, hi;
} dbl_flags[] = {{"lr", offsetof(train_opts, lr), 0, 10},
                 {"min-lr", offsetof(train_opts, min_lr), 0, 10},
                 {"weight-decay", offsetof(train_opts, weight_decay), 0, 10},
                 {"clip", offsetof(train_opts, clip), 1e-12, INFINITY},
                 {"peak-flops", offsetof(train_opts, peak_flops), 1, 1e21}};

/* One flag of train's own (not forensics', shape's or LoRA's); 0, or the exit code of a bad one. */
static int parse_flag(train_opts *o, const char *name, const char *val) {
    if (strcmp(name, "help") == 0) {
        train_usage(stdout);
        exit(0);
    }
    if (strcmp(name, "resume") == 0 || strcmp(name, "force") == 0 || strcmp(name, "profile") == 0 ||
        strcmp(name, "plan") == 0) {
        if (val) return cli_error(EXIT_USAGE, CMD, "--%s takes no value", name);
        if (name[0] == 'r')
            o->resume = 1;
        else if (name[0] == 'f')
            o->force = 1;
        else if (strcmp(name, "plan") == 0)
            o->plan = 1;
        else if (!o->profile_steps)
            o->profile_steps = 1;
        return 0;
    }
    for (size_t i = 0; i < sizeof str_flags / sizeof str_flags[0]; i++) {
        if (strcmp(name, str_flags[i].flag) != 0) continue;
        if (!val) return cli_error(EXIT_USAGE, CMD, "--%s needs a value", name);
        *(const char **)((char *)o + str_flags[i].off) = val;
        if (strcmp(name, "tokenizer") == 0) o->tokenizer_given = 1;
        if (strcmp(name, "preset") == 0) o->preset_given = 1;
        return 0;
    }
    for (size_t i = 0; i < sizeof int_flags / sizeof int_flags[0]; i++) {
        if (strcmp(name, int_flags[i].flag) != 0) continue;
        int64_t iv;
        if (!cli_int(CMD, name, val, int_flags[i].lo, int_flags[i].hi, &iv)) return EXIT_USAGE;
        *(int64_t *)((char *)o + int_flags[i].off) = iv;
        return 0;
    }
    for (size_t i = 0; i < sizeof dbl_flags / sizeof dbl_flags[0]; i++)
        if (strcmp(name, dbl_flags[i].flag) == 0)
            return cli_double(CMD, name, val, dbl_flags[i].lo, dbl_flags[i].hi,
                              (double *)((char *)o + dbl_flags[i].off))
                ? 0
                : EXIT_USAGE;
    const int64_t lr = lora_parse_flag(CMD, name, val, &o->lora);
    if (lr) return lr < 0 ? EXIT_USAGE : 0;
    return cli_error(EXIT_USAGE, CMD, "unknown flag --%s (see tfcore train --help)", name);
}

/* The device, dtype and data format named, and the combinations of flags that exclude each other. */
static int validate(train_opts *o) {
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

int train_parse(int argc, char **argv, train_opts *o) {
    *o = defaults;
    cli_args a = {.argc = argc, .argv = argv};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) return cli_error(EXIT_USAGE, CMD, "unexpected argument '%s' (see tfcore train --help)", name);
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
        const int rc = parse_flag(o, name, val);
        if (rc) return rc;
    }
    return validate(o);
}
