/*
 * tfc_rope_inv_freq: the rotary inverse frequencies of a rope_theta and a
 * rope_scaling type (kernels.h has the formulas), written from the
 * equations of transformers' modeling_rope_utils (default, linear, dynamic
 * NTK, llama3) — the one place they live; the rope kernels take the
 * frequencies as a tensor.
 */
#include <math.h>

#include "core/error.h"
#include "tfcore/kernels.h"

/* x finite and > 0. */
static tfc_status positive(const char *fn, const char *field, double x) {
    if (!(isfinite(x) && x > 0))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: config->%s is %g, must be finite and > 0", fn, field, x);
    return TFC_OK;
}

/* What c->rope_type reads, checked; TFC_ERR_INVALID_ARG names the field. */
static tfc_status check_config(const char *fn, const tfc_rope_config *c, int64_t head_dim) {
    TFC_TRY(positive(fn, "theta", c->theta));
    switch (c->rope_type) {
    case TFC_ROPE_DEFAULT: return TFC_OK;
    case TFC_ROPE_LINEAR: return positive(fn, "factor", c->factor);
    case TFC_ROPE_DYNAMIC:
        TFC_TRY(positive(fn, "factor", c->factor));
        if (c->max_position_embeddings <= 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: config->max_position_embeddings is %lld, must be > 0 (dynamic)",
                           fn, (long long)c->max_position_embeddings);
        if (head_dim == 2) /* the exponent D / (D − 2) */
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: head_dim is 2; dynamic scaling needs head_dim > 2", fn);
        return TFC_OK;
    case TFC_ROPE_LLAMA3:
        TFC_TRY(positive(fn, "factor", c->factor));
        TFC_TRY(positive(fn, "low_freq_factor", c->low_freq_factor));
        if (!(isfinite(c->high_freq_factor) && c->high_freq_factor > c->low_freq_factor))
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: config->high_freq_factor is %g, must be finite and > low_freq_factor %g (llama3)", fn,
                           c->high_freq_factor, c->low_freq_factor);
        if (c->original_max_position_embeddings <= 0)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: config->original_max_position_embeddings is %lld, must be > 0 (llama3)", fn,
                           (long long)c->original_max_position_embeddings);
        return TFC_OK;
    default:
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: config->rope_type is %d; known rope types are TFC_ROPE_DEFAULT (0), TFC_ROPE_LINEAR (1), "
                       "TFC_ROPE_DYNAMIC (2) and TFC_ROPE_LLAMA3 (3)",
                       fn, (int)c->rope_type);
    }
}

TFC_API tfc_status tfc_rope_inv_freq(const tfc_rope_config *config, int64_t head_dim, int64_t seq_len,
                                     double *inv_freq) {
    const char *fn = "tfc_rope_inv_freq";
    TFC_CHECK_NOT_NULL(fn, config);
    TFC_CHECK_NOT_NULL(fn, inv_freq);
    if (config->struct_size < sizeof(tfc_rope_config))
        return tfc_err(TFC_ERR_VERSION, "%s: config->struct_size is %u, need %zu (use TFC_ROPE_CONFIG_INIT)", fn,
                       (unsigned)config->struct_size, sizeof(tfc_rope_config));
    if (head_dim < 2 || head_dim % 2)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: head_dim is %lld, must be even and >= 2", fn, (long long)head_dim);
    if (seq_len < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: seq_len is %lld, must be >= 0", fn, (long long)seq_len);
    TFC_TRY(check_config(fn, config, head_dim));

    const double D = (double)head_dim, L = (double)config->max_position_embeddings, factor = config->factor;
    double theta = config->theta;
    /* dynamic NTK: a larger base for a sequence past L, the same one at or below it */
    if (config->rope_type == TFC_ROPE_DYNAMIC && seq_len > config->max_position_embeddings)
        theta *= pow(factor * (double)seq_len / L - (factor - 1.0), D / (D - 2.0));
    const double O = (double)config->original_max_position_embeddings, lo = config->low_freq_factor,
                 hi = config->high_freq_factor;
    for (int64_t i = 0; i < head_dim / 2; i++) {
        const double f = 1.0 / pow(theta, (double)(2 * i) / D);
        double r = f;
        if (config->rope_type == TFC_ROPE_LINEAR) r = f / factor;
        if (config->rope_type == TFC_ROPE_LLAMA3) {
            const double w = 2.0 * M_PI / f; /* the wavelength, in positions */
            if (w > O / lo)
                r = f / factor; /* long wavelengths: interpolated as linear does */
            else if (w >= O / hi) {
                const double s = (O / w - lo) / (hi - lo); /* 0 at O / lo, 1 at O / hi: continuous at both ends */
                r = (1.0 - s) * f / factor + s * f;
            }
        }
        inv_freq[i] = r;
    }
    return TFC_OK;
}
