/*
 * Model shape flags of tfcore train (train_shape.h): parsing, applying them
 * over a preset or a resumed checkpoint, and the one-line errors for values
 * the model cannot take.
 */
#include "train_shape.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model_dims.h"

/* The integer flags: their field and range. */
static const struct {
    const char *flag;
    size_t off;
    int64_t lo, hi;
} ints[] = {{"n-layer", offsetof(train_shape, n_layer), 1, 1 << 20},
            {"n-head", offsetof(train_shape, n_head), 1, 1 << 20},
            {"n-embd", offsetof(train_shape, n_embd), 1, 1 << 20},
            {"block-size", offsetof(train_shape, block_size), 1, 1 << 20},
            {"n-kv-head", offsetof(train_shape, n_kv_head), 1, 1 << 20},
            {"mlp-hidden", offsetof(train_shape, mlp_hidden), 1, INT32_MAX},
            {"sliding-window", offsetof(train_shape, sliding_window), 0, 1 << 30}};

int train_shape_parse(const char *cmd, const char *name, const char *val, train_shape *s, int *rc) {
    *rc = 0;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(name, ints[i].flag) != 0) continue;
        int64_t v;
        if (!val)
            *rc = cli_error(EXIT_USAGE, cmd, "--%s needs a value", name);
        else if (!cli_int(cmd, name, val, ints[i].lo, ints[i].hi, &v))
            *rc = EXIT_USAGE;
        else
            *(int64_t *)((char *)s + ints[i].off) = v;
        return 1;
    }
    if (strcmp(name, "arch") == 0) {
        int32_t a;
        if (!val || tfc_gpt_arch_from_name(val, &a) != TFC_OK)
            *rc = cli_error(EXIT_USAGE, cmd, "--arch must be gpt2, llama, mistral or qwen2, got '%s'", val ? val : "");
        else
            s->arch = a;
        return 1;
    }
    if (strcmp(name, "rope-theta") == 0) {
        if (!cli_double(cmd, name, val, 1.0, 1e15, &s->rope_theta)) *rc = EXIT_USAGE;
        return 1;
    }
    if (strcmp(name, "dropout") == 0) {
        char *end = NULL;
        const double p = val ? strtod(val, &end) : -1.0;
        if (!val || end == val || *end || !(p >= 0.0 && p < 1.0))
            *rc = cli_error(EXIT_USAGE, cmd, "--dropout needs a probability in [0, 1), got '%s'", val ? val : "");
        else
            s->dropout = p;
        return 1;
    }
    if (strcmp(name, "bias") == 0 || strcmp(name, "no-bias") == 0) {
        if (val)
            *rc = cli_error(EXIT_USAGE, cmd, "--%s takes no value", name);
        else
            s->bias = name[0] == 'b';
        return 1;
    }
    return 0;
}

int train_shape_given(const train_shape *s) {
    return s->n_layer || s->n_head || s->n_embd || s->block_size || s->bias >= 0 || s->dropout >= 0 || s->arch >= 0 ||
        s->n_kv_head || s->mlp_hidden || s->rope_theta > 0 || s->sliding_window >= 0;
}

/*
 * --arch over a preset of another architecture. Into the Llama family from
 * GPT-2: the family's defaults, as tfc_gpt_config_preset gives llama-tiny
 * (rotary positions, theta 10000, no scaling; an untied head; no biases;
 * n_kv_head = n_head and the default MLP width until the flags say
 * otherwise). Within the family: the biases each member has (Qwen2's q/k/v
 * projections, as its own loader implies; none for llama and mistral) and
 * no window for llama. Back to GPT-2: its biases and tied head, none of the
 * family's fields.
 */
static void set_arch(tfc_gpt_config *c, int32_t arch) {
    if (arch == c->arch) return;
    const int from_gpt2 = c->arch == TFC_GPT_ARCH_GPT2;
    c->arch = arch;
    c->attention_bias = c->mlp_bias = 0;
    if (arch == TFC_GPT_ARCH_GPT2) {
        c->n_kv_head = 0;
        c->mlp_hidden = 0;
        c->sliding_window = 0;
        c->bias = 1;
        c->tie_weights = 1;
        return;
    }
    if (from_gpt2) {
        const tfc_rope_config rope = TFC_ROPE_CONFIG_INIT;
        c->rope = rope;
        c->tie_weights = 0;
        c->bias = 0;
        c->n_kv_head = 0;
        c->mlp_hidden = 0;
    }
    if (arch == TFC_GPT_ARCH_QWEN2) c->attention_bias = 1;
    if (arch == TFC_GPT_ARCH_LLAMA) c->sliding_window = 0;
}

/*
 * --resume without --preset: the checkpoint's config (the library's reader
 * of its tfc.* metadata) is the model's shape; a flag asking for another
 * value is refused, naming the key. vocab_size and dtype stay c's (the
 * caller compares them), dropout is the caller's too.
 */
static int keep_checkpoint_shape(const char *cmd, const train_shape *s, const tfc_safetensors *ckpt,
                                 tfc_gpt_config *c) {
    tfc_gpt_config t = TFC_GPT_CONFIG_INIT;
    if (tfc_gpt_config_from_metadata(ckpt, &t) != TFC_OK) return cli_lib_error(cmd, "the checkpoint's config");
    if (s->arch >= 0 && s->arch != t.arch)
        return cli_error(EXIT_USAGE, cmd,
                         "--arch %s on --resume: the checkpoint's model is %s (tfc.arch; resume keeps the model's "
                         "architecture)",
                         tfc_gpt_arch_name(s->arch), tfc_gpt_arch_name(t.arch));
    const struct {
        const char *flag, *key;
        int given;
        double want, theirs;
    } f[] = {
        {"n-layer", "tfc.n_layer", s->n_layer > 0, (double)s->n_layer, t.n_layer},
        {"n-head", "tfc.n_head", s->n_head > 0, (double)s->n_head, t.n_head},
        {"n-embd", "tfc.n_embd", s->n_embd > 0, (double)s->n_embd, t.n_embd},
        {"block-size", "tfc.block_size", s->block_size > 0, (double)s->block_size, t.block_size},
        {"n-kv-head", "tfc.n_kv_head", s->n_kv_head > 0, (double)s->n_kv_head, (double)dims_kv_heads(&t)},
        {"mlp-hidden", "tfc.mlp_hidden", s->mlp_hidden > 0, (double)s->mlp_hidden, (double)dims_mlp_hidden(&t)},
        {"rope-theta", "tfc.rope.theta", s->rope_theta > 0, s->rope_theta, t.rope.theta},
        {"sliding-window", "tfc.sliding_window", s->sliding_window >= 0, (double)s->sliding_window, t.sliding_window}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].given || f[i].want == f[i].theirs) continue;
        /* the checkpoint's weights have its shape: a resume cannot change it */
        return cli_error(EXIT_USAGE, cmd, "--%s %.15g on --resume: the checkpoint's model has %s %.15g%s", f[i].flag,
                         f[i].want, f[i].key + 4, f[i].theirs,
                         f[i].want > f[i].theirs && strcmp(f[i].flag, "block-size") == 0 && t.arch == TFC_GPT_ARCH_GPT2
                             ? " (a larger block needs new position embeddings: train a new model)"
                             : " (resume keeps the model's shape)");
    }
    if (s->bias >= 0 && s->bias != t.bias)
        return cli_error(EXIT_USAGE, cmd, "--%s on --resume: the checkpoint's model was trained %s biases",
                         s->bias ? "bias" : "no-bias", t.bias ? "with" : "without");
    const int32_t vocab = c->vocab_size;
    const tfc_dtype dtype = c->dtype;
    *c = t;
    c->vocab_size = vocab;
    c->dtype = dtype;
    return 0;
}

/* The flags over the preset's config c. */
static void apply_flags(const train_shape *s, tfc_gpt_config *c) {
    if (s->arch >= 0) set_arch(c, s->arch);
    if (s->n_layer) c->n_layer = (int32_t)s->n_layer;
    if (s->n_head) c->n_head = (int32_t)s->n_head;
    if (s->n_embd) c->n_embd = (int32_t)s->n_embd;
    if (s->block_size) c->block_size = (int32_t)s->block_size;
    if (s->bias >= 0) c->bias = s->bias;
    if (s->n_kv_head) c->n_kv_head = (int32_t)s->n_kv_head;
    if (s->mlp_hidden) c->mlp_hidden = s->mlp_hidden;
    if (s->rope_theta > 0) c->rope.theta = s->rope_theta;
    if (s->sliding_window >= 0) c->sliding_window = (int32_t)s->sliding_window;
}

/* What the model cannot take, as the flags name it (tfc_gpt_new would refuse it after --out is written to). */
static int check(const char *cmd, const train_shape *s, const tfc_gpt_config *c) {
    const char *an = tfc_gpt_arch_name(c->arch);
    if (c->n_embd % c->n_head)
        return cli_error(EXIT_USAGE, cmd,
                         "--n-head %d does not divide --n-embd %d (each head gets n_embd / n_head dims)", c->n_head,
                         c->n_embd);
    if (!dims_is_llama(c)) {
        const char *fam = s->n_kv_head ? "n-kv-head"
            : s->mlp_hidden            ? "mlp-hidden"
            : s->rope_theta > 0        ? "rope-theta"
            : s->sliding_window >= 0   ? "sliding-window"
                                       : NULL;
        if (fam)
            return cli_error(EXIT_USAGE, cmd,
                             "--%s is the Llama family's (--arch llama|mistral|qwen2, or --preset llama-tiny); this "
                             "model is gpt2",
                             fam);
        return 0;
    }
    if (s->bias >= 0)
        return cli_error(EXIT_USAGE, cmd,
                         "--%s sets GPT-2's biases; a %s model's biases are its architecture's (qwen2: q/k/v "
                         "projections; llama, mistral: none)",
                         s->bias ? "bias" : "no-bias", an);
    if (c->arch == TFC_GPT_ARCH_LLAMA && c->sliding_window)
        return cli_error(EXIT_USAGE, cmd,
                         "--sliding-window %d: llama attends to every earlier position (mistral and qwen2 have a "
                         "window)",
                         c->sliding_window);
    if (c->n_kv_head > 0 && c->n_head % c->n_kv_head)
        return cli_error(EXIT_USAGE, cmd,
                         "--n-kv-head %d does not divide --n-head %d (each key/value head serves n_head / n_kv_head "
                         "query heads)",
                         c->n_kv_head, c->n_head);
    if ((c->n_embd / c->n_head) % 2)
        return cli_error(EXIT_USAGE, cmd,
                         "--n-embd %d / --n-head %d is %d dims a head: rotary positions need an even number", c->n_embd,
                         c->n_head, c->n_embd / c->n_head);
    if (c->dropout > 0 && (dims_kv_heads(c) < c->n_head || c->sliding_window))
        return cli_error(EXIT_USAGE, cmd,
                         "--dropout %g with %s: the attention that drops has neither (use --dropout 0%s)", c->dropout,
                         c->sliding_window ? "a sliding window" : "grouped-query attention (fewer kv heads than heads)",
                         c->sliding_window ? "" : ", or --n-kv-head equal to --n-head");
    return 0;
}

int train_shape_apply(const char *cmd, const train_shape *s, const tfc_safetensors *ckpt, int keep_shape,
                      tfc_gpt_config *c) {
    if (ckpt && keep_shape) {
        int rc = keep_checkpoint_shape(cmd, s, ckpt, c);
        if (rc) return rc;
    } else {
        apply_flags(s, c);
    }
    const char *dp = NULL;
    c->dropout = 0.0;
    if (s->dropout >= 0)
        c->dropout = s->dropout;
    else if (ckpt && tfc_safetensors_metadata(ckpt, "tfc.dropout", &dp) == TFC_OK && dp)
        c->dropout = strtod(dp, NULL); /* the library checked it when the checkpoint was verified */
    int rc = check(cmd, s, c);
    if (rc) return rc;
    if (dims_is_llama(c)) { /* resolved, as the built model's config has them (and the checkpoint records them) */
        c->n_kv_head = (int32_t)dims_kv_heads(c);
        c->mlp_hidden = dims_mlp_hidden(c);
    }
    return 0;
}
