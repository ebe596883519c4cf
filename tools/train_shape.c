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

int train_shape_parse(const char *cmd, const char *name, const char *val, train_shape *s, int *rc) {
    static const struct {
        const char *flag;
        size_t off;
    } ints[] = {{"n-layer", offsetof(train_shape, n_layer)},
                {"n-head", offsetof(train_shape, n_head)},
                {"n-embd", offsetof(train_shape, n_embd)},
                {"block-size", offsetof(train_shape, block_size)}};
    *rc = 0;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(name, ints[i].flag) != 0) continue;
        int64_t v;
        if (!val)
            *rc = cli_error(EXIT_USAGE, cmd, "--%s needs a value", name);
        else if (!cli_int(cmd, name, val, 1, 1 << 20, &v))
            *rc = EXIT_USAGE;
        else
            *(int64_t *)((char *)s + ints[i].off) = v;
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
    return s->n_layer || s->n_head || s->n_embd || s->block_size || s->bias >= 0 || s->dropout >= 0;
}

/* The checkpoint's integer config entry `key` into *v; 0 when present. */
static int meta_int(const tfc_safetensors *f, const char *key, int32_t *v) {
    const char *s = NULL;
    if (tfc_safetensors_metadata(f, key, &s) != TFC_OK || !s || !*s) return -1;
    *v = atoi(s);
    return 0;
}

int train_shape_apply(const char *cmd, const train_shape *s, const tfc_safetensors *ckpt, int keep_shape,
                      tfc_gpt_config *c) {
    struct {
        const char *flag, *key;
        int64_t want;
        int32_t *field;
    } f[] = {{"n-layer", "tfc.n_layer", s->n_layer, &c->n_layer},
             {"n-head", "tfc.n_head", s->n_head, &c->n_head},
             {"n-embd", "tfc.n_embd", s->n_embd, &c->n_embd},
             {"block-size", "tfc.block_size", s->block_size, &c->block_size}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        int32_t theirs;
        if (ckpt && keep_shape && meta_int(ckpt, f[i].key, &theirs) == 0) {
            /* the checkpoint's weights have its shape: a resume cannot change it */
            if (f[i].want && f[i].want != theirs)
                return cli_error(EXIT_USAGE, cmd, "--%s %lld on --resume: the checkpoint's model has %s %d%s",
                                 f[i].flag, (long long)f[i].want, f[i].key + 4, theirs,
                                 f[i].want > theirs && strcmp(f[i].flag, "block-size") == 0
                                     ? " (a larger block needs new position embeddings: train a new model)"
                                     : " (resume keeps the model's shape)");
            *f[i].field = theirs;
        } else if (f[i].want) {
            *f[i].field = (int32_t)f[i].want;
        }
    }
    int32_t bias;
    if (ckpt && keep_shape && meta_int(ckpt, "tfc.bias", &bias) == 0) {
        if (s->bias >= 0 && s->bias != bias)
            return cli_error(EXIT_USAGE, cmd, "--%s on --resume: the checkpoint's model was trained %s biases",
                             s->bias ? "bias" : "no-bias", bias ? "with" : "without");
        c->bias = bias;
    } else if (s->bias >= 0) {
        c->bias = s->bias;
    }
    const char *dp = NULL;
    c->dropout = 0.0;
    if (s->dropout >= 0)
        c->dropout = s->dropout;
    else if (ckpt && tfc_safetensors_metadata(ckpt, "tfc.dropout", &dp) == TFC_OK && dp)
        c->dropout = strtod(dp, NULL); /* the library checked it when the checkpoint was verified */
    if (c->n_embd % c->n_head)
        return cli_error(EXIT_USAGE, cmd,
                         "--n-head %d does not divide --n-embd %d (each head gets n_embd / n_head dims)", c->n_head,
                         c->n_embd);
    return 0;
}
