/*
 * Model configs: the architectures' names, the named presets, the
 * validation every constructor runs, and reading a model's config back.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_impl.h"

typedef struct gpt_preset {
    const char *name;
    int32_t n_layer, n_head, n_embd, block_size, vocab_size; /* vocab 0: keep the caller's */
    int32_t arch, n_kv_head, mlp_hidden, tie_weights;        /* the Llama family's presets */
} gpt_preset;

static const gpt_preset presets[] = {
    {.name = "char-tiny", .n_layer = 4, .n_head = 4, .n_embd = 128, .block_size = 128},
    {.name = "char-small", .n_layer = 6, .n_head = 6, .n_embd = 384, .block_size = 256},
    {.name = "gpt2-mini", .n_layer = 4, .n_head = 4, .n_embd = 256, .block_size = 128, .vocab_size = 50257},
    {.name = "gpt2", .n_layer = 12, .n_head = 12, .n_embd = 768, .block_size = 1024, .vocab_size = 50257},
    /* char-tiny's scale: 8·128/3 rounded up to 32 is 352, TinyLlama's 2 query heads per kv head, untied */
    {.name = "llama-tiny",
     .n_layer = 4,
     .n_head = 4,
     .n_embd = 128,
     .block_size = 128,
     .arch = TFC_GPT_ARCH_LLAMA,
     .n_kv_head = 2,
     .mlp_hidden = 352},
};

static const char *const arch_names[] = {"gpt2", "llama", "mistral", "qwen2"};
enum { N_ARCH = sizeof arch_names / sizeof arch_names[0] };

TFC_API const char *tfc_gpt_arch_name(int32_t arch) { return arch >= 0 && arch < N_ARCH ? arch_names[arch] : NULL; }

TFC_API tfc_status tfc_gpt_arch_from_name(const char *name, int32_t *arch) {
    const char *fn = "tfc_gpt_arch_from_name";
    TFC_CHECK_NOT_NULL(fn, name);
    TFC_CHECK_NOT_NULL(fn, arch);
    for (int32_t i = 0; i < N_ARCH; i++)
        if (strcmp(name, arch_names[i]) == 0) {
            *arch = i;
            return TFC_OK;
        }
    return tfc_err(TFC_ERR_INVALID_ARG, "%s: unknown architecture '%s' (known: gpt2, llama, mistral, qwen2)", fn, name);
}

int64_t tfc_gpt_mlp_hidden(const tfc_gpt_config *c) {
    if (c->mlp_hidden > 0) return c->mlp_hidden;
    if (c->arch == TFC_GPT_ARCH_GPT2) return 4 * (int64_t)c->n_embd;
    /* LLaMA's rule: two thirds of 4·C, rounded up to a multiple of 32 */
    return (8 * (int64_t)c->n_embd / 3 + 31) / 32 * 32;
}

TFC_API tfc_status tfc_gpt_config_preset(const char *name, tfc_gpt_config *cfg) {
    const char *fn = "tfc_gpt_config_preset";
    TFC_CHECK_NOT_NULL(fn, name);
    TFC_CHECK_NOT_NULL(fn, cfg);
    if (cfg->struct_size < TFC_GPT_CONFIG_V1_SIZE)
        return tfc_err(TFC_ERR_VERSION, "%s: cfg->struct_size is %u, need %zu", fn, cfg->struct_size,
                       sizeof(tfc_gpt_config));
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const gpt_preset *p = &presets[i];
        if (strcmp(p->name, name) != 0) continue;
        if (p->arch != TFC_GPT_ARCH_GPT2 && cfg->struct_size < sizeof(tfc_gpt_config))
            return tfc_err(TFC_ERR_VERSION, "%s: preset '%s' needs the whole config: cfg->struct_size is %u, need %zu",
                           fn, name, cfg->struct_size, sizeof(tfc_gpt_config));
        cfg->n_layer = p->n_layer;
        cfg->n_head = p->n_head;
        cfg->n_embd = p->n_embd;
        cfg->block_size = p->block_size;
        if (p->vocab_size) cfg->vocab_size = p->vocab_size;
        if (cfg->struct_size >= sizeof(tfc_gpt_config)) {
            cfg->arch = p->arch;
            cfg->n_kv_head = p->n_kv_head;
            cfg->mlp_hidden = p->mlp_hidden;
        }
        if (p->arch != TFC_GPT_ARCH_GPT2) {
            const tfc_rope_config rope = TFC_ROPE_CONFIG_INIT;
            cfg->rope = rope;
            cfg->tie_weights = 0;
            cfg->bias = 0;
            cfg->attention_bias = cfg->mlp_bias = cfg->sliding_window = 0;
        }
        return TFC_OK;
    }
    return tfc_err(TFC_ERR_INVALID_ARG,
                   "%s: unknown preset '%s' (known: char-tiny, char-small, gpt2-mini, gpt2, llama-tiny)", fn, name);
}

void tfc_gpt_config_normalize(const tfc_gpt_config *in, tfc_gpt_config *out) {
    const size_t size = in->struct_size < sizeof *out ? in->struct_size : sizeof *out;
    *out = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    memcpy(out, in, size);
    if (size < offsetof(tfc_gpt_config, dropout) + sizeof out->dropout) out->dropout = 0.0;
    out->struct_size = sizeof *out;
}

/* The fields added with the Llama family, for c's architecture. */
static tfc_status check_family(const char *fn, const tfc_gpt_config *c) {
    const char *an = tfc_gpt_arch_name(c->arch);
    if (!an)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->arch is %d, need a tfc_gpt_arch (0 gpt2 .. 3 qwen2)", fn,
                       (int)c->arch);
    if (c->n_kv_head < 0 || (c->n_kv_head > 0 && c->n_head % c->n_kv_head != 0))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->n_kv_head is %d, need 0 (n_head) or a divisor of n_head %d", fn,
                       (int)c->n_kv_head, (int)c->n_head);
    if (c->mlp_hidden < 0 || c->mlp_hidden > INT32_MAX)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->mlp_hidden is %lld, need 0 (the default) .. 2^31-1", fn,
                       (long long)c->mlp_hidden);
    const int32_t flags[3] = {c->attention_bias, c->mlp_bias, c->sliding_window >= 0};
    static const char *const flag_names[2] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++)
        if (flags[i] != 0 && flags[i] != 1)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->%s is %d, need 0 or 1", fn, flag_names[i], (int)flags[i]);
    if (!flags[2])
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->sliding_window is %d, need 0 (none) or a positive count", fn,
                       (int)c->sliding_window);
    if (c->arch == TFC_GPT_ARCH_GPT2) {
        if (c->n_kv_head != 0 && c->n_kv_head != c->n_head)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->n_kv_head is %d but GPT-2 has n_head %d key/value heads", fn,
                           (int)c->n_kv_head, (int)c->n_head);
        if (c->mlp_hidden != 0 && c->mlp_hidden != 4 * (int64_t)c->n_embd)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->mlp_hidden is %lld but GPT-2's MLP is 4·n_embd = %lld", fn,
                           (long long)c->mlp_hidden, 4 * (long long)c->n_embd);
        if (c->sliding_window)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->sliding_window is %d but GPT-2 has no sliding window", fn,
                           (int)c->sliding_window);
        return TFC_OK;
    }
    if (c->arch == TFC_GPT_ARCH_LLAMA && c->sliding_window)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: cfg->sliding_window is %d but llama has no sliding window (mistral and qwen2 do)", fn,
                       (int)c->sliding_window);
    if (c->arch == TFC_GPT_ARCH_MISTRAL && c->attention_bias)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->attention_bias is 1 but mistral's projections have no biases",
                       fn);
    if (c->arch != TFC_GPT_ARCH_LLAMA && c->mlp_bias)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->mlp_bias is 1 but %s's MLP has no biases", fn, an);
    const int64_t D = c->n_embd / c->n_head;
    if (D % 2 != 0 || D < 2)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: the head dim n_embd/n_head is %lld; rotary positions need it even", fn,
                       (long long)D);
    /* the rope fields, checked by the function that reads them */
    double *inv = malloc((size_t)D / 2 * sizeof *inv);
    if (!inv) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    const tfc_status rs = tfc_rope_inv_freq(&c->rope, D, 0, inv);
    free(inv);
    if (rs != TFC_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->rope: %s", fn, why);
    }
    const int gqa = c->n_kv_head > 0 && c->n_kv_head < c->n_head;
    if (c->dropout > 0 && (gqa || c->sliding_window))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: cfg->dropout is %g with %s; dropout on the attention probabilities runs the unfused "
                       "attention, which has neither: set dropout 0",
                       fn, c->dropout, gqa ? "grouped-query attention (n_kv_head < n_head)" : "a sliding window");
    return TFC_OK;
}

tfc_status tfc_gpt_check_config(const char *fn, const tfc_gpt_config *caller) {
    if (caller->struct_size < TFC_GPT_CONFIG_V1_SIZE)
        return tfc_err(TFC_ERR_VERSION, "%s: cfg->struct_size is %u, need %zu", fn, caller->struct_size,
                       sizeof(tfc_gpt_config));
    tfc_gpt_config full;
    tfc_gpt_config_normalize(caller, &full);
    const tfc_gpt_config *c = &full;
    struct {
        const char *name;
        int32_t v;
    } f[] = {{"n_layer", c->n_layer},
             {"n_head", c->n_head},
             {"n_embd", c->n_embd},
             {"block_size", c->block_size},
             {"vocab_size", c->vocab_size}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->%s is %d, must be >= 1", fn, f[i].name, f[i].v);
    if (c->n_embd % c->n_head)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->n_embd %d is not a multiple of cfg->n_head %d", fn, c->n_embd,
                       c->n_head);
    if (c->dtype != TFC_DTYPE_F32 && c->dtype != TFC_DTYPE_F64)
        return tfc_err(TFC_ERR_DTYPE, "%s: cfg->dtype is %s, need f32 or f64", fn, tfc_dtype_name(c->dtype));
    if (c->bias != 0 && c->bias != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->bias is %d, need 0 or 1", fn, c->bias);
    if (c->tie_weights != 0 && c->tie_weights != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->tie_weights is %d, need 0 or 1", fn, c->tie_weights);
    /* (0, 1], the rule config.json's layer_norm_epsilon has too: 1e308 or 2 is a corrupt file, not a model */
    if (!(c->ln_eps > 0 && c->ln_eps <= 1))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->ln_eps is %g, must be in (0, 1]", fn, c->ln_eps);
    if (!(c->dropout >= 0.0 && c->dropout < 1.0))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->dropout is %g, must be in [0, 1)", fn, c->dropout);
    return check_family(fn, c);
}

TFC_API tfc_status tfc_gpt_get_config(const tfc_gpt *m, tfc_gpt_config *cfg) {
    const char *fn = "tfc_gpt_get_config";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, cfg);
    uint32_t size = cfg->struct_size;
    if (size < offsetof(tfc_gpt_config, n_layer) + sizeof(int32_t))
        return tfc_err(TFC_ERR_VERSION, "%s: cfg->struct_size %u is too small", fn, size);
    if (size > sizeof(tfc_gpt_config)) size = sizeof(tfc_gpt_config);
    memcpy(cfg, &m->cfg, size);
    cfg->struct_size = size;
    return TFC_OK;
}
