/*
 * Batched generation without padding: n sequences, each with its own KV
 * cache (batch 1) and its own length. A prompt is run once on its own; then
 * every step feeds the last token of each unfinished sequence through one
 * tfc_gpt_run_seqs, where the Linear layers and the head are GEMMs over the
 * n rows (a decode step reads each weight once for all of them, which is
 * what batching buys in a memory-bound decode) and attention is per
 * sequence over its own positions.
 *
 * Each sequence follows tfc_gpt_generate's loop exactly: sample from its
 * current logits row, stop or refill a full context, else take part in the
 * next step. A refilled sequence gets its next row from the refill and
 * skips one batched step.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_impl.h"

/* Per-sequence state. */
typedef struct seq {
    tfc_gpt_cache *cache;
    int32_t *ctxt;     /* prompt then generated tokens, for refills */
    int32_t len;       /* tokens in ctxt */
    int32_t produced;  /* tokens generated */
    int32_t done;      /* stopped by on_token or max_new reached */
    int32_t row_ready; /* rows[i] holds the logits for its next draw */
} seq;

static tfc_status check_args(const char *fn, const tfc_gpt *m, int32_t n_seq, const int32_t *const *prompts,
                             const int32_t *n_prompts, int32_t max_new, double temperature, int32_t top_k, double top_p,
                             uint64_t seed, const int32_t *out, int64_t cap) {
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, prompts);
    TFC_CHECK_NOT_NULL(fn, n_prompts);
    if (n_seq < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_seq is %d, need >= 1", fn, n_seq);
    if (max_new < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: max_new is %d, need >= 0", fn, max_new);
    if (max_new > 0 && !out) return tfc_err(TFC_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if (cap < (int64_t)n_seq * max_new)
        return tfc_err(TFC_ERR_BUFFER_TOO_SMALL, "%s: cap %lld < n_seq %d x max_new %d", fn, (long long)cap, n_seq,
                       max_new);
    float probe = 0;
    int32_t dummy;
    TFC_TRY_IN(fn, tfc_sample(&probe, 1, temperature, top_k, top_p, seed, 0, &dummy));
    if (tfc_tensor_device_type(m->wte) != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_DEVICE,
                       "%s: the model is on cuda:%d; batched generation keeps its KV caches in host "
                       "memory and needs the model on the CPU (tfc_gpt_to_device)",
                       fn, (int)tfc_tensor_device_index(m->wte));
    const int32_t V = m->cfg.vocab_size;
    for (int32_t i = 0; i < n_seq; i++) {
        if (n_prompts[i] < 1)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_prompts[%d] is %d, need >= 1", fn, i, n_prompts[i]);
        if (!prompts[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: prompts[%d] is NULL", fn, i);
        for (int32_t j = 0; j < n_prompts[i]; j++)
            if (prompts[i][j] < 0 || prompts[i][j] >= V)
                return tfc_err(TFC_ERR_INVALID_ARG, "%s: prompts[%d][%d] is %d, outside [0, %d)", fn, i, j,
                               prompts[i][j], V);
    }
    return TFC_OK;
}

/* One batched step for the k sequences in act (their last tokens in toks): their rows receive the new logits. */
static tfc_status step(tfc_gpt *m, seq *sq, const int32_t *act, const int32_t *toks, int32_t k, float *rows,
                       tfc_gpt_cache **caches, float *staging, const char *fn) {
    const int64_t V = m->cfg.vocab_size, dims[2] = {k, 1};
    for (int32_t a = 0; a < k; a++) caches[a] = sq[act[a]].cache;
    tfc_tensor *idx, *lg;
    TFC_TRY(tfc_tensor_from_data(toks, dims, 2, TFC_DTYPE_I32, &idx));
    tfc_status s = tfc_gpt_run_seqs(m, idx, caches, fn, &lg);
    tfc_tensor_release(idx);
    TFC_TRY(s);
    TFC_TRY(tfc_gpt_logits_rows(lg, 0, k, staging));
    for (int32_t a = 0; a < k; a++) memcpy(rows + act[a] * V, staging + a * V, (size_t)V * sizeof(float));
    return TFC_OK;
}

/* Start sequence i: a cache of cap positions fed the last block_size tokens of its prompt. */
static tfc_status start(tfc_gpt *m, seq *q, const int32_t *prompt, int32_t n, int32_t max_new, int32_t cap, float *row,
                        const char *fn) {
    q->ctxt = malloc(((size_t)n + (size_t)max_new) * sizeof *q->ctxt);
    if (!q->ctxt) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    memcpy(q->ctxt, prompt, (size_t)n * sizeof *q->ctxt);
    q->len = n;
    TFC_TRY(tfc_gpt_cache_with_cap(m, 1, cap, fn, &q->cache));
    const int32_t keep = n < m->cfg.block_size ? n : m->cfg.block_size;
    TFC_TRY(tfc_gpt_feed(m, q->cache, q->ctxt + n - keep, keep, row));
    q->row_ready = 1;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_generate_batch(tfc_gpt *m, int32_t n_seq, const int32_t *const *prompts,
                                          const int32_t *n_prompts, int32_t max_new, double temperature, int32_t top_k,
                                          double top_p, uint64_t seed, int32_t *out, int64_t cap, int32_t *lengths,
                                          tfc_gpt_batch_token_fn on_token, void *ctx) {
    const char *fn = "tfc_gpt_generate_batch";
    TFC_TRY(check_args(fn, m, n_seq, prompts, n_prompts, max_new, temperature, top_k, top_p, seed, out, cap));
    const int32_t block = m->cfg.block_size;
    const int64_t V = m->cfg.vocab_size;
    /* positions a sequence can reach: its (clipped) prompt plus max_new - 1 fed tokens */
    int64_t longest = 0;
    for (int32_t i = 0; i < n_seq; i++) longest = n_prompts[i] > longest ? n_prompts[i] : longest;
    const int32_t npos = (int32_t)(longest + max_new < block ? longest + max_new : block);
    for (int64_t i = 0; i < (int64_t)n_seq * max_new; i++) out[i] = -1;
    if (lengths) memset(lengths, 0, (size_t)n_seq * sizeof *lengths);
    if (max_new == 0) return TFC_OK;

    seq *sq = calloc((size_t)n_seq, sizeof *sq);
    float *rows = malloc((size_t)n_seq * (size_t)V * sizeof *rows);
    float *staging = malloc((size_t)n_seq * (size_t)V * sizeof *staging);
    int32_t *act = malloc((size_t)n_seq * sizeof *act), *toks = malloc((size_t)n_seq * sizeof *toks);
    tfc_gpt_cache **caches = malloc((size_t)n_seq * sizeof *caches);
    tfc_status s = (!sq || !rows || !staging || !act || !toks || !caches)
        ? tfc_err(TFC_ERR_OOM, "%s: out of memory for %d sequences", fn, n_seq)
        : TFC_OK;
    for (int32_t i = 0; i < n_seq && s == TFC_OK; i++)
        s = start(m, &sq[i], prompts[i], n_prompts[i], max_new, npos, rows + i * V, fn);

    int32_t left = n_seq;
    while (s == TFC_OK && left > 0) {
        /* every sequence with logits ready draws its next token */
        for (int32_t i = 0; i < n_seq && s == TFC_OK; i++) {
            seq *q = &sq[i];
            if (q->done || !q->row_ready) continue;
            int32_t tok;
            s = tfc_sample(rows + i * V, V, temperature, top_k, top_p, seed + (uint64_t)i, (uint64_t)q->produced, &tok);
            if (s != TFC_OK) break;
            out[(int64_t)i * max_new + q->produced++] = tok;
            q->ctxt[q->len++] = tok;
            q->row_ready = 0;
            if ((on_token && on_token(i, tok, ctx)) || q->produced == max_new) {
                q->done = 1;
                left--;
            } else if (q->cache->len + 1 > q->cache->cap) {
                /* full context (cap is block_size then): restart from the last half block */
                int32_t keep = block / 2 > 0 ? block / 2 : 1;
                s = tfc_gpt_cache_reset(q->cache);
                if (s == TFC_OK) s = tfc_gpt_feed(m, q->cache, q->ctxt + q->len - keep, keep, rows + i * V);
                q->row_ready = 1;
            }
        }
        /* the rest take one step together */
        int32_t k = 0;
        for (int32_t i = 0; i < n_seq; i++)
            if (!sq[i].done && !sq[i].row_ready) {
                act[k] = i;
                toks[k++] = sq[i].ctxt[sq[i].len - 1];
            }
        if (s == TFC_OK && k > 0) s = step(m, sq, act, toks, k, rows, caches, staging, fn);
        for (int32_t a = 0; a < k && s == TFC_OK; a++) sq[act[a]].row_ready = 1;
    }

    if (sq)
        for (int32_t i = 0; i < n_seq; i++) {
            if (lengths) lengths[i] = sq[i].produced;
            tfc_gpt_cache_release(sq[i].cache);
            free(sq[i].ctxt);
        }
    free(sq);
    free(rows);
    free(staging);
    free(act);
    free(toks);
    free(caches);
    return tfc_err_in(fn, s);
}
