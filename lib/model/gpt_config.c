/*
 * GPT configs: the named presets, the validation every constructor runs,
 * and reading a model's config back.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_impl.h"

typedef struct gpt_preset {
    const char *name;
    int32_t n_layer, n_head, n_embd, block_size, vocab_size; /* vocab 0: keep the caller's */
} gpt_preset;

static const gpt_preset presets[] = {
    {.name = "char-tiny", .n_layer = 4, .n_head = 4, .n_embd = 128, .block_size = 128},
    {.name = "char-small", .n_layer = 6, .n_head = 6, .n_embd = 384, .block_size = 256},
    {.name = "gpt2-mini", .n_layer = 4, .n_head = 4, .n_embd = 256, .block_size = 128, .vocab_size = 50257},
    {.name = "gpt2", .n_layer = 12, .n_head = 12, .n_embd = 768, .block_size = 1024, .vocab_size = 50257},
};

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
        cfg->n_layer = p->n_layer;
        cfg->n_head = p->n_head;
        cfg->n_embd = p->n_embd;
        cfg->block_size = p->block_size;
        if (p->vocab_size) cfg->vocab_size = p->vocab_size;
        return TFC_OK;
    }
    return tfc_err(TFC_ERR_INVALID_ARG, "%s: unknown preset '%s' (known: char-tiny, char-small, gpt2-mini, gpt2)", fn,
                   name);
}

void tfc_gpt_config_normalize(const tfc_gpt_config *in, tfc_gpt_config *out) {
    const size_t size = in->struct_size < sizeof *out ? in->struct_size : sizeof *out;
    *out = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    memcpy(out, in, size);
    if (size < offsetof(tfc_gpt_config, dropout) + sizeof out->dropout) out->dropout = 0.0;
    out->struct_size = sizeof *out;
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
    return TFC_OK;
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
