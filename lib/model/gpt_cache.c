/*
 * Incremental decoding: a KV cache per layer and the generation loop.
 * Position t's keys and values never change once computed (causal
 * attention), so each new token costs one T=1 forward whose query attends
 * over the cached keys; tfc_attention's causal mask is aligned to the
 * bottom-right (key j visible to query i when j <= i + S - T), which is
 * exactly "everything cached plus itself".
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_impl.h"

tfc_status tfc_gpt_cache_with_cap(const tfc_gpt *m, int32_t batch, int32_t cap, const char *fn, tfc_gpt_cache **out) {
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, out);
    if (batch < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: batch is %d, need >= 1", fn, batch);
    const tfc_gpt_config *c = &m->cfg;
    if (cap < 1 || cap > c->block_size)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: a cache of %d positions, need 1 .. block_size %d", fn, cap,
                       c->block_size);
    tfc_gpt_cache *kc = calloc(1, sizeof *kc);
    if (kc) {
        kc->k = calloc((size_t)c->n_layer, sizeof *kc->k);
        kc->v = calloc((size_t)c->n_layer, sizeof *kc->v);
    }
    if (!kc || !kc->k || !kc->v) {
        tfc_gpt_cache_release(kc);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    kc->model = m;
    kc->batch = batch;
    kc->cap = cap;
    const int64_t dims[4] = {batch, m->arch.n_kv_head, cap, m->arch.head_dim}; /* grouped-query: the kv heads only */
    for (int32_t l = 0; l < c->n_layer; l++) {
        tfc_status s = tfc_tensor_zeros(dims, 4, c->dtype, &kc->k[l]);
        if (s == TFC_OK) s = tfc_tensor_zeros(dims, 4, c->dtype, &kc->v[l]);
        if (s != TFC_OK) {
            tfc_gpt_cache_release(kc);
            return tfc_err_in(fn, s);
        }
    }
    *out = kc;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_cache_new(const tfc_gpt *m, int32_t batch, tfc_gpt_cache **out) {
    const char *fn = "tfc_gpt_cache_new";
    TFC_CHECK_NOT_NULL(fn, m);
    return tfc_gpt_cache_with_cap(m, batch, m->cfg.block_size, fn, out);
}

TFC_API tfc_status tfc_gpt_cache_reset(tfc_gpt_cache *c) {
    TFC_CHECK_NOT_NULL("tfc_gpt_cache_reset", c);
    c->len = 0;
    return TFC_OK;
}

TFC_API int32_t tfc_gpt_cache_length(const tfc_gpt_cache *c) { return c ? c->len : 0; }

TFC_API void tfc_gpt_cache_release(tfc_gpt_cache *c) {
    if (!c) return;
    if (c->model)
        for (int32_t l = 0; l < c->model->cfg.n_layer; l++) {
            if (c->k) tfc_tensor_release(c->k[l]);
            if (c->v) tfc_tensor_release(c->v[l]);
        }
    free(c->k);
    free(c->v);
    free(c);
}

TFC_API tfc_status tfc_gpt_forward_cached(tfc_gpt *m, tfc_gpt_cache *c, const tfc_tensor *idx, tfc_tensor **logits) {
    const char *fn = "tfc_gpt_forward_cached";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, c);
    TFC_CHECK_NOT_NULL(fn, idx);
    TFC_CHECK_NOT_NULL(fn, logits);
    if (c->model != m) return tfc_err(TFC_ERR_INVALID_ARG, "%s: the cache was made for another model", fn);
    tfc_tensor *lg;
    TFC_TRY(tfc_gpt_run(m, NULL, idx, c, fn, &lg));
    c->len += (int32_t)tfc_tensor_dim(idx, 1);
    *logits = lg;
    return TFC_OK;
}

tfc_status tfc_gpt_logits_rows(tfc_tensor *lg, int64_t first, int64_t n, float *dst) {
    const int64_t V = tfc_tensor_dim(lg, tfc_tensor_ndim(lg) - 1), flat[2] = {-1, V};
    tfc_tensor *all = NULL, *rows = NULL, *f = NULL;
    tfc_status s = tfc_reshape(NULL, lg, flat, 2, &all);
    tfc_tensor_release(lg);
    if (s == TFC_OK) s = tfc_narrow(NULL, all, 0, first, n, &rows);
    if (s == TFC_OK) {
        if (tfc_tensor_dtype(rows) == TFC_DTYPE_F32)
            f = tfc_tensor_retain(rows);
        else
            s = tfc_cast(NULL, rows, TFC_DTYPE_F32, &f);
    }
    if (s == TFC_OK) s = tfc_tensor_copy_to_host(f, dst, (size_t)n * (size_t)V * sizeof(float));
    tfc_tensor_release(all);
    tfc_tensor_release(rows);
    tfc_tensor_release(f);
    return s;
}

tfc_status tfc_gpt_feed(tfc_gpt *m, tfc_gpt_cache *c, const int32_t *tokens, int32_t n, float *row) {
    const int64_t dims[2] = {1, n};
    tfc_tensor *idx, *lg;
    TFC_TRY(tfc_tensor_from_data(tokens, dims, 2, TFC_DTYPE_I32, &idx));
    tfc_status s = tfc_gpt_forward_cached(m, c, idx, &lg);
    tfc_tensor_release(idx);
    TFC_TRY(s);
    return tfc_gpt_logits_rows(lg, n - 1, 1, row);
}

TFC_API tfc_status tfc_gpt_generate(tfc_gpt *m, const int32_t *prompt, int32_t n_prompt, int32_t max_new,
                                    double temperature, int32_t top_k, double top_p, uint64_t seed, int32_t *out,
                                    int32_t cap, tfc_gpt_token_fn on_token, void *ctx) {
    const char *fn = "tfc_gpt_generate";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, prompt);
    if (n_prompt < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_prompt is %d, need >= 1", fn, n_prompt);
    if (max_new < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: max_new is %d, need >= 0", fn, max_new);
    if (max_new > 0 && !out) return tfc_err(TFC_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if (cap < max_new) return tfc_err(TFC_ERR_BUFFER_TOO_SMALL, "%s: cap %d < max_new %d", fn, cap, max_new);
    /* validate the sampling arguments once, before any work */
    float probe = 0;
    int32_t dummy;
    TFC_TRY_IN(fn, tfc_sample(&probe, 1, temperature, top_k, top_p, seed, 0, &dummy));
    const int32_t V = m->cfg.vocab_size, block = m->cfg.block_size;
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: prompt[%d] is %d, outside [0, %d)", fn, i, prompt[i], V);
    /* the whole context: prompt then generated tokens, for refills when the block is full */
    int32_t *ctxt = malloc(((size_t)n_prompt + (size_t)max_new) * sizeof *ctxt);
    float *row = malloc((size_t)V * sizeof *row);
    tfc_gpt_cache *c = NULL;
    tfc_status s = (!ctxt || !row) ? tfc_err(TFC_ERR_OOM, "%s: out of memory", fn) : tfc_gpt_cache_new(m, 1, &c);
    if (s == TFC_OK) {
        memcpy(ctxt, prompt, (size_t)n_prompt * sizeof *ctxt);
        int32_t len = n_prompt, keep = n_prompt < block ? n_prompt : block;
        s = tfc_gpt_feed(m, c, ctxt + len - keep, keep, row);
        for (int32_t i = 0; i < max_new && s == TFC_OK; i++) {
            int32_t tok;
            s = tfc_sample(row, V, temperature, top_k, top_p, seed, (uint64_t)i, &tok);
            if (s != TFC_OK) break;
            out[i] = tok;
            ctxt[len++] = tok;
            if (on_token && on_token(tok, ctx)) {
                s = tfc_err(TFC_ERR_CANCELLED, "%s: stopped by on_token after %d tokens", fn, i + 1);
                break;
            }
            if (i + 1 == max_new) break;
            if (tfc_gpt_cache_length(c) + 1 > block) {
                /* full: restart from the last half block of context */
                keep = block / 2 > 0 ? block / 2 : 1;
                s = tfc_gpt_cache_reset(c);
                if (s == TFC_OK) s = tfc_gpt_feed(m, c, ctxt + len - keep, keep, row);
            } else {
                s = tfc_gpt_feed(m, c, &tok, 1, row);
            }
        }
    }
    tfc_gpt_cache_release(c);
    free(ctxt);
    free(row);
    return tfc_err_in(fn, s);
}
