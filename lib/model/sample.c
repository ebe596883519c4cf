/*
 * Drawing one token from a logits vector: temperature, then top-k, then
 * top-p (nucleus), renormalised, then one uniform number u from the Philox
 * stream (seed, offset) picks the token whose cumulative probability first
 * exceeds u. Probabilities are computed in double.
 */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/rng.h"
#include "model/gpt_impl.h"

/* Most probable first; equal probabilities in id order, so results never depend on qsort's stability. */
static int by_prob_desc(const void *a, const void *b) {
    const tfc_sample_cand *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static tfc_status check_args(const char *fn, const float *logits, int64_t n, double temperature, int32_t top_k,
                             double top_p, int64_t *best) {
    TFC_CHECK_NOT_NULL(fn, logits);
    if (n < 1 || n > INT32_MAX)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %lld, need 1 .. 2^31-1", fn, (long long)n);
    if (!(temperature >= 0) || !isfinite(temperature))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: temperature is %g, need a finite value >= 0", fn, temperature);
    if (top_k < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: top_k is %d, need >= 0 (0 = all)", fn, top_k);
    if (!(top_p > 0 && top_p <= 1)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: top_p is %g, need (0, 1]", fn, top_p);
    int64_t b = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(logits[i]))
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: logits[%lld] is %g, need finite values", fn, (long long)i,
                           (double)logits[i]);
        if (logits[i] > logits[b]) b = i;
    }
    *best = b;
    return TFC_OK;
}

tfc_status tfc_sample_dist(const char *fn, const float *logits, int64_t n, double temperature, int32_t top_k,
                           double top_p, tfc_sample_cand **out, int64_t *keep_out, double *mass_out) {
    int64_t best;
    TFC_TRY(check_args(fn, logits, n, temperature, top_k, top_p, &best));
    tfc_sample_cand *c = malloc((size_t)(temperature == 0 ? 1 : n) * sizeof *c);
    if (!c) return tfc_err(TFC_ERR_OOM, "%s: out of memory for %lld candidates", fn, (long long)n);
    if (temperature == 0) {
        c[0] = (tfc_sample_cand){1.0, (int32_t)best};
        *out = c;
        *keep_out = 1;
        *mass_out = 1.0;
        return TFC_OK;
    }
    /* softmax(logits / T), shifted by the maximum for stability */
    double mx = logits[best], z = 0;
    for (int64_t i = 0; i < n; i++) {
        c[i].p = exp(((double)logits[i] - mx) / temperature);
        c[i].id = (int32_t)i;
        z += c[i].p;
    }
    for (int64_t i = 0; i < n; i++) c[i].p /= z;
    qsort(c, (size_t)n, sizeof *c, by_prob_desc);
    int64_t keep = top_k > 0 && top_k < n ? top_k : n;
    /* top-p over the renormalised top-k set: smallest prefix whose mass reaches p */
    double mass_k = 0;
    for (int64_t i = 0; i < keep; i++) mass_k += c[i].p;
    if (top_p < 1) {
        double cum = 0;
        int64_t i = 0;
        while (i < keep) {
            cum += c[i].p / mass_k;
            i++;
            if (cum >= top_p) break;
        }
        keep = i;
    }
    double mass = 0;
    for (int64_t i = 0; i < keep; i++) mass += c[i].p;
    *out = c;
    *keep_out = keep;
    *mass_out = mass;
    return TFC_OK;
}

int32_t tfc_sample_draw(const tfc_sample_cand *c, int64_t keep, double mass, double u) {
    double target = u * mass, cum = 0;
    for (int64_t i = 0; i < keep; i++) {
        cum += c[i].p;
        if (target < cum) return c[i].id;
    }
    return c[keep - 1].id;
}

TFC_API tfc_status tfc_sample(const float *logits, int64_t n, double temperature, int32_t top_k, double top_p,
                              uint64_t seed, uint64_t offset, int32_t *token) {
    const char *fn = "tfc_sample";
    TFC_CHECK_NOT_NULL(fn, token);
    if (temperature == 0) { /* greedy: no candidate list */
        int64_t best;
        TFC_TRY(check_args(fn, logits, n, temperature, top_k, top_p, &best));
        *token = (int32_t)best;
        return TFC_OK;
    }
    tfc_sample_cand *c;
    int64_t keep;
    double mass;
    TFC_TRY(tfc_sample_dist(fn, logits, n, temperature, top_k, top_p, &c, &keep, &mass));
    *token = tfc_sample_draw(c, keep, mass, tfc_rng_uniform(seed, offset, 0));
    free(c);
    return TFC_OK;
}
