/*
 * Speculative decoding (Leviathan, Kalman & Matias 2023; Chen et al. 2023):
 * a draft model proposes k tokens one at a time, the target scores all of
 * them in one pass of k + 1 positions, and a rejection rule keeps the
 * output distributed exactly as the target's:
 *   accept the draft's x_i ~ q_i with probability min(1, p_i(x_i) / q_i(x_i));
 *   at the first rejection draw from max(0, p_i − q_i) / Σ max(0, p_i − q_i);
 *   if all k are accepted, draw one more from p_k.
 * p and q are the distributions tfc_sample draws from (temperature, top_k,
 * top_p applied: tfc_sample_dist), so with temperature 0 both are one-hot
 * and the rule keeps the target's argmax.
 *
 * Bookkeeping: ctxt holds every token (prompt, then output); each model's
 * cache holds a window of it, the target's everything but the last token
 * (ws + target->len == n - 1), the draft's possibly one token less (its
 * pending tokens, 1 or 2, are fed at the start of the next round). Each
 * window restarts from the last half of its own model's block when full. Rejected
 * positions are dropped by shortening the caches' lengths: what lies beyond
 * a cache's length is overwritten before it is read.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "model/gpt_impl.h"

typedef struct spec {
    tfc_gpt *t, *d;
    tfc_gpt_cache *tc, *dc;
    int32_t *ctxt, n; /* tokens so far */
    int32_t ws, wd;   /* where each cache's window starts in ctxt */
    int32_t V, k;
    double temperature, top_p;
    int32_t top_k;
    uint64_t seed;
    float *rows; /* (k + 1) · V logits of the target's pass */
    float *drow; /* the draft's logits row */
    double *q;   /* k · V: the draft's distributions */
    double *p;   /* V: one target distribution */
    const char *fn;
} spec;

/* dense[V] = the distribution tfc_sample draws from; *tok (if not NULL) drawn from it with u. */
static tfc_status dist(const spec *s, const float *logits, double *dense, double u, int32_t *tok) {
    tfc_sample_cand *c;
    int64_t keep;
    double mass;
    TFC_TRY(tfc_sample_dist(s->fn, logits, s->V, s->temperature, s->top_k, s->top_p, &c, &keep, &mass));
    if (dense) {
        memset(dense, 0, (size_t)s->V * sizeof *dense);
        for (int64_t i = 0; i < keep; i++) dense[c[i].id] = c[i].p / mass;
    }
    if (tok) *tok = tfc_sample_draw(c, keep, mass, u);
    free(c);
    return TFC_OK;
}

/* Feed tokens[0..T) to the target and copy the T logits rows to s->rows (f32). */
static tfc_status target_pass(spec *s, const int32_t *tokens, int32_t T) {
    const int64_t dims[2] = {1, T};
    tfc_tensor *idx, *lg;
    TFC_TRY(tfc_tensor_from_data(tokens, dims, 2, TFC_DTYPE_I32, &idx));
    tfc_status st = tfc_gpt_forward_cached(s->t, s->tc, idx, &lg);
    tfc_tensor_release(idx);
    TFC_TRY(st);
    return tfc_gpt_logits_rows(lg, 0, T, s->rows);
}

/*
 * Restart one model's cache from the last `keep` tokens of the context, all
 * but the last fed (its window start in *w). Each model refills by its own
 * block size, so a small draft never shortens the target's context.
 */
static tfc_status refill(spec *s, tfc_gpt *m, tfc_gpt_cache *c, int32_t *w, int32_t keep, float *row) {
    if (keep > s->n) keep = s->n;
    *w = s->n - keep;
    TFC_TRY(tfc_gpt_cache_reset(c));
    if (keep > 1) TFC_TRY(tfc_gpt_feed(m, c, s->ctxt + *w, keep - 1, row));
    return TFC_OK;
}

/*
 * Make room for a round of k: the target needs k + 1 more positions, the
 * draft its pending tokens and k - 1 more. A cache without room restarts
 * from the last half of its block (the whole context at the start, when it
 * fits).
 */
static tfc_status make_room(spec *s, int start) {
    const int32_t bt = s->t->cfg.block_size, bd = s->d->cfg.block_size;
    if (start || s->tc->len + s->k + 1 > s->tc->cap) {
        const int32_t keep = start && s->n + s->k <= bt ? s->n : bt / 2;
        TFC_TRY(refill(s, s->t, s->tc, &s->ws, keep, s->rows));
    }
    if (start || (s->n - s->wd) + s->k > s->dc->cap) {
        const int32_t keep = start && s->n + s->k <= bd ? s->n : bd / 2;
        TFC_TRY(refill(s, s->d, s->dc, &s->wd, keep, s->drow));
    }
    return TFC_OK;
}

/* Emit token tok as output j; non-zero when on_token asks to stop. */
static int emit(spec *s, int32_t tok, int32_t *out, int32_t *j, tfc_gpt_token_fn on_token, void *ctx) {
    out[(*j)++] = tok;
    s->ctxt[s->n++] = tok;
    return on_token && on_token(tok, ctx);
}

/*
 * One round from output position j: up to kk draft tokens, one target pass,
 * the accepted ones and one more emitted. *stop set when on_token stops.
 */
static tfc_status round_(spec *s, int32_t kk, int32_t *out, int32_t *j, tfc_spec_stats *st, int *stop,
                         tfc_gpt_token_fn on_token, void *ctx) {
    const int64_t V = s->V;
    const int32_t j0 = *j, last = s->ctxt[s->n - 1];
    int32_t draft[64 + 1];
    /* the draft: its pending tokens, then k - 1 of its own proposals, fed one at a time */
    const int32_t dlen0 = s->dc->len, pending = s->n - (s->wd + dlen0);
    for (int32_t i = 0; i < kk; i++) {
        if (i == 0)
            TFC_TRY(tfc_gpt_feed(s->d, s->dc, s->ctxt + s->n - pending, pending, s->drow));
        else
            TFC_TRY(tfc_gpt_feed(s->d, s->dc, &draft[i - 1], 1, s->drow));
        TFC_TRY(dist(s, s->drow, s->q + i * V, tfc_rng_uniform(s->seed, (uint64_t)(j0 + i), 1), &draft[i]));
    }
    /* the target scores last, d_0 .. d_{kk-1}: rows p_0 .. p_kk */
    int32_t toks[64 + 1];
    toks[0] = last;
    for (int32_t i = 0; i < kk; i++) toks[1 + i] = draft[i];
    const int32_t tlen0 = s->tc->len;
    TFC_TRY(target_pass(s, toks, kk + 1));
    st->target_passes++;
    st->drafted += kk;
    int32_t a = 0;
    for (; a < kk; a++) {
        TFC_TRY(dist(s, s->rows + a * V, s->p, 0, NULL));
        const double *q = s->q + a * V, pq = s->p[draft[a]], qq = q[draft[a]];
        if (tfc_rng_uniform(s->seed, (uint64_t)*j, 2) * qq < pq) { /* u < p/q, q > 0 as x was drawn from q */
            st->accepted++;
            if (emit(s, draft[a], out, j, on_token, ctx)) {
                *stop = 1;
                a++;
                break;
            }
            continue;
        }
        /* rejected: draw from the normalised residual max(0, p − q), in id order */
        double z = 0;
        for (int64_t v = 0; v < V; v++) z += s->p[v] > q[v] ? s->p[v] - q[v] : 0;
        const double u = tfc_rng_uniform(s->seed, (uint64_t)*j, 0) * z;
        double cum = 0;
        int32_t pick = -1;
        for (int64_t v = 0; v < V && pick < 0; v++) {
            const double r = s->p[v] > q[v] ? s->p[v] - q[v] : 0;
            cum += r;
            if (r > 0 && u < cum) pick = (int32_t)v;
        }
        if (pick < 0) /* rounding left u at the top: the last token with residual mass */
            for (int64_t v = V - 1; v >= 0 && pick < 0; v--)
                if (s->p[v] > q[v]) pick = (int32_t)v;
        *stop = emit(s, pick, out, j, on_token, ctx);
        break;
    }
    if (a == kk && !*stop) { /* all accepted: one more from p_kk */
        int32_t tok;
        TFC_TRY(dist(s, s->rows + kk * V, NULL, tfc_rng_uniform(s->seed, (uint64_t)*j, 0), &tok));
        *stop = emit(s, tok, out, j, on_token, ctx);
    }
    /* keep what the accepted tokens built: the target fed last + d_0..d_{a-1}, the draft up to d_{a-1} */
    s->tc->len = tlen0 + 1 + a;
    s->dc->len = dlen0 + pending + (a < kk - 1 ? a : kk - 1);
    return TFC_OK;
}

static tfc_status check(const char *fn, const tfc_gpt *target, const tfc_gpt *draft, const int32_t *prompt,
                        int32_t n_prompt, int32_t max_new, int32_t k, double temperature, int32_t top_k, double top_p,
                        const int32_t *out, int32_t cap, const tfc_spec_stats *stats) {
    TFC_CHECK_NOT_NULL(fn, target);
    TFC_CHECK_NOT_NULL(fn, draft);
    const tfc_gpt *t = target, *d = draft;
    TFC_CHECK_NOT_NULL(fn, prompt);
    if (t->cfg.vocab_size != d->cfg.vocab_size)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: the target's vocabulary has %d tokens, the draft's %d; they must match", fn,
                       t->cfg.vocab_size, d->cfg.vocab_size);
    const int32_t block = t->cfg.block_size < d->cfg.block_size ? t->cfg.block_size : d->cfg.block_size;
    if (k < 1 || k > 64 || k > block / 2)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: k is %d, need 1 .. min(64, smaller block_size / 2 = %d)", fn, k,
                       block / 2);
    if (n_prompt < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_prompt is %d, need >= 1", fn, n_prompt);
    if (max_new < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: max_new is %d, need >= 0", fn, max_new);
    if (max_new > 0 && !out) return tfc_err(TFC_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if (cap < max_new) return tfc_err(TFC_ERR_BUFFER_TOO_SMALL, "%s: cap %d < max_new %d", fn, cap, max_new);
    if (stats && stats->struct_size < sizeof *stats)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: stats->struct_size is %u, need %zu", fn, stats->struct_size,
                       sizeof *stats);
    float probe = 0;
    int32_t dummy;
    TFC_TRY_IN(fn, tfc_sample(&probe, 1, temperature, top_k, top_p, 0, 0, &dummy));
    const tfc_gpt *ms[2] = {t, d};
    for (int i = 0; i < 2; i++)
        if (tfc_tensor_device_type(ms[i]->wte) != TFC_DEVICE_CPU)
            return tfc_err(TFC_ERR_DEVICE,
                           "%s: the %s model is on cuda:%d; speculative decoding keeps its KV caches "
                           "in host memory and needs both models on the CPU",
                           fn, i ? "draft" : "target", (int)tfc_tensor_device_index(ms[i]->wte));
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= t->cfg.vocab_size)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: prompt[%d] is %d, outside [0, %d)", fn, i, prompt[i],
                           t->cfg.vocab_size);
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_generate_speculative(tfc_gpt *target, tfc_gpt *draft, const int32_t *prompt,
                                                int32_t n_prompt, int32_t max_new, int32_t k, double temperature,
                                                int32_t top_k, double top_p, uint64_t seed, int32_t *out, int32_t cap,
                                                tfc_spec_stats *stats, tfc_gpt_token_fn on_token, void *ctx) {
    const char *fn = "tfc_gpt_generate_speculative";
    TFC_TRY(check(fn, target, draft, prompt, n_prompt, max_new, k, temperature, top_k, top_p, out, cap, stats));
    tfc_spec_stats st = {sizeof st, 0, 0, 0};
    const int32_t V = target->cfg.vocab_size;
    spec s = {.t = target,
              .d = draft,
              .V = V,
              .k = k,
              .temperature = temperature,
              .top_p = top_p,
              .top_k = top_k,
              .seed = seed,
              .fn = fn};
    s.ctxt = malloc(((size_t)n_prompt + (size_t)max_new) * sizeof *s.ctxt);
    s.rows = malloc((size_t)(k + 1) * (size_t)V * sizeof *s.rows);
    s.drow = malloc((size_t)V * sizeof *s.drow);
    s.q = malloc((size_t)k * (size_t)V * sizeof *s.q);
    s.p = malloc((size_t)V * sizeof *s.p);
    tfc_status r =
        (!s.ctxt || !s.rows || !s.drow || !s.q || !s.p) ? tfc_err(TFC_ERR_OOM, "%s: out of memory", fn) : TFC_OK;
    if (r == TFC_OK) r = tfc_gpt_cache_new(target, 1, &s.tc);
    if (r == TFC_OK) r = tfc_gpt_cache_new(draft, 1, &s.dc);
    int32_t j = 0;
    int stop = 0;
    if (r == TFC_OK) {
        memcpy(s.ctxt, prompt, (size_t)n_prompt * sizeof *s.ctxt);
        s.n = n_prompt;
        r = make_room(&s, 1);
        if (r == TFC_OK && n_prompt > 1) st.target_passes++;
    }
    while (r == TFC_OK && j < max_new && !stop) {
        r = make_room(&s, 0);
        if (r != TFC_OK) break;
        const int32_t left = max_new - j, kk = left - 1 < k ? left - 1 : k;
        if (kk == 0) { /* the last token: the target alone */
            const int32_t last = s.ctxt[s.n - 1];
            r = target_pass(&s, &last, 1);
            if (r != TFC_OK) break;
            st.target_passes++;
            int32_t tok;
            r = dist(&s, s.rows, NULL, tfc_rng_uniform(seed, (uint64_t)j, 0), &tok);
            if (r == TFC_OK) stop = emit(&s, tok, out, &j, on_token, ctx);
            break;
        }
        r = round_(&s, kk, out, &j, &st, &stop, on_token, ctx);
    }
    if (r == TFC_OK && stop) r = tfc_err(TFC_ERR_CANCELLED, "%s: stopped by on_token after %d tokens", fn, j);
    if (stats) *stats = st;
    tfc_gpt_cache_release(s.tc);
    tfc_gpt_cache_release(s.dc);
    free(s.ctxt);
    free(s.rows);
    free(s.drow);
    free(s.q);
    free(s.p);
    return tfc_err_in(fn, r);
}
