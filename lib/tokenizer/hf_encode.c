/*
 * Encoding with a tokenizer.json's pipeline, steps 0 to 4 and 6 of hf.h
 * (the model, step 5, is encode.c's and bpe_merge.c's), in the order
 * Hugging Face's tokenizers runs them (TokenizerImpl::encode_single_sequence:
 * AddedVocabulary::extract_and_normalize, pre-tokenizer, model,
 * post-processor).
 *
 * Added tokens are found leftmost-longest, as tokenizers' Aho-Corasick
 * automaton (MatchKind::LeftmostLongest) finds them: the match that starts
 * first, the longest of those starting there. A special token found while
 * special tokens are text (TFC_SPECIAL_AS_TEXT, tokenizers'
 * encode_special_tokens) is skipped, and the search goes on after it, as
 * tokenizers' find_matches does; so an added token inside it is not
 * matched either.
 *
 * Metaspace (tokenizers' Metaspace::pre_tokenize): every ' ' becomes "▁";
 * "▁" is prepended unless the piece already starts with it, always or
 * (prepend_scheme "first") only for the piece that starts the input; with
 * split, the piece is cut before every "▁" but a leading one.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

#define META "\xE2\x96\x81" /* U+2581, "▁" */
#define META_LEN 3

/* ---- finding added tokens ------------------------------------------------------------------- */

typedef struct match_key {
    int32_t b0, b1, len, index;
} match_key;

static int key_cmp(const void *x, const void *y) {
    const match_key *a = x, *b = y;
    if (a->b0 != b->b0) return a->b0 - b->b0;
    if (a->b1 != b->b1) return a->b1 - b->b1;
    return b->len - a->len; /* longer first */
}

static int second_byte(const tok_hf *h, int32_t k) {
    const hf_added *a = &h->added[k];
    return a->len >= 2 ? h->added_text[a->off + 1] : 256; /* one-byte tokens after every longer one */
}

int hf_build_matchers(tok_hf *h) {
    for (int pass = 0; pass < 2; pass++) {
        hf_matcher *m = &h->match[pass];
        free(m->order);
        memset(m, 0, sizeof *m);
        int32_t n = 0;
        for (int32_t k = 0; k < h->n_added; k++) n += h->added[k].normalized == pass;
        match_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
        m->order = malloc((size_t)(n ? n : 1) * sizeof *m->order);
        if (!keys || !m->order) {
            free(keys);
            return -1;
        }
        int32_t j = 0;
        for (int32_t k = 0; k < h->n_added; k++)
            if (h->added[k].normalized == pass)
                keys[j++] = (match_key){h->added_text[h->added[k].off], second_byte(h, k), (int32_t)h->added[k].len, k};
        qsort(keys, (size_t)n, sizeof *keys, key_cmp);
        for (int32_t i = 0; i < n; i++) m->order[i] = keys[i].index;
        m->n = n;
        for (int b = 0, i = 0; b <= 256; b++) {
            while (i < n && keys[i].b0 < b) i++;
            m->first[b] = i;
        }
        free(keys);
    }
    return 0;
}

/* The leftmost-longest added token in p[from..n): its position (n when none) and its index in *which. */
static size_t find_added(const tok_hf *h, const hf_matcher *m, const uint8_t *p, size_t n, size_t from,
                         int32_t *which) {
    if (m->n == 0) return n;
    for (size_t i = from; i < n; i++) {
        int32_t lo = m->first[p[i]], hi = m->first[p[i] + 1];
        if (lo == hi) continue;
        if (i + 1 < n) { /* the tokens whose second byte is p[i + 1], longest first */
            int32_t a = lo, b = hi;
            while (a < b) {
                int32_t mid = (a + b) / 2;
                if (second_byte(h, m->order[mid]) < p[i + 1])
                    a = mid + 1;
                else
                    b = mid;
            }
            for (; a < hi && second_byte(h, m->order[a]) == p[i + 1]; a++) {
                const hf_added *t = &h->added[m->order[a]];
                if (t->len <= n - i && memcmp(h->added_text + t->off, p + i, t->len) == 0) {
                    *which = m->order[a];
                    return i;
                }
            }
        }
        if (h->added[m->order[hi - 1]].len == 1) {
            *which = m->order[hi - 1];
            return i;
        }
    }
    return n;
}

/* ---- one call ------------------------------------------------------------------------------- */

typedef struct run {
    const char *fn;
    const tfc_tokenizer *t;
    const tok_hf *h;
    int32_t mode;
    int (*word)(void *ctx, const uint8_t *p, size_t n);
    int (*id)(void *ctx, int32_t id);
    void *ctx;
    uint8_t *ms; /* Metaspace's buffer */
    size_t ms_cap;
} run;

static tfc_status oom(const run *r) { return tfc_err(TFC_ERR_OOM, "%s: out of memory", r->fn); }

static tfc_status emit_word(run *r, const uint8_t *p, size_t n) {
    if (n && r->word(r->ctx, p, n)) return oom(r);
    return TFC_OK;
}

/* Step 4: a piece's words. at_origin: the piece starts the input (Metaspace's "first"). */
static tfc_status pre_tokenize(run *r, const uint8_t *p, size_t n, int at_origin) {
    if (n == 0) return TFC_OK;
    const tok_hf *h = r->h;
    if (h->metaspace) {
        size_t spaces = 0;
        for (size_t i = 0; i < n; i++) spaces += p[i] == ' ';
        const int lead = n >= META_LEN && memcmp(p, META, META_LEN) == 0;
        const int prepend = !(p[0] == ' ' || lead) &&
            (h->ms_prepend == HF_PREPEND_ALWAYS || (h->ms_prepend == HF_PREPEND_FIRST && at_origin));
        const size_t need = n + 2 * spaces + (prepend ? META_LEN : 0);
        if (need > r->ms_cap) {
            uint8_t *b = realloc(r->ms, need);
            if (!b) return oom(r);
            r->ms = b;
            r->ms_cap = need;
        }
        size_t k = 0;
        if (prepend) {
            memcpy(r->ms, META, META_LEN);
            k = META_LEN;
        }
        for (size_t i = 0; i < n; i++) {
            if (p[i] == ' ') {
                memcpy(r->ms + k, META, META_LEN);
                k += META_LEN;
            } else {
                r->ms[k++] = p[i];
            }
        }
        if (!h->ms_split) return emit_word(r, r->ms, k);
        size_t start = 0; /* cut before every "▁" but at 0 (MergedWithNext) */
        for (size_t i = 1; i + META_LEN <= k; i++)
            if (memcmp(r->ms + i, META, META_LEN) == 0) {
                TFC_TRY(emit_word(r, r->ms + start, i - start));
                start = i;
                i += META_LEN - 1;
            }
        return emit_word(r, r->ms + start, k - start);
    }
    if (!r->t->split.re) return emit_word(r, p, n);
    split_iter it;
    TFC_TRY(split_iter_init(r->fn, &it, &r->t->split, p, n));
    size_t a, b;
    int rc;
    tfc_status s = TFC_OK;
    while (s == TFC_OK && (rc = split_next(r->fn, &it, &a, &b)) > 0) s = emit_word(r, p + a, b - a);
    if (s == TFC_OK && rc < 0) s = (tfc_status)rc;
    split_iter_free(&it);
    return s;
}

/* Step 2: the normalizer steps over p[0..n); *out is p or a new buffer (*owned). */
static tfc_status normalize(run *r, const uint8_t *p, size_t n, uint8_t **out, size_t *out_n, int *owned) {
    uint8_t *cur = (uint8_t *)p;
    size_t cn = n;
    *owned = 0;
    for (int32_t k = 0; k < r->h->n_norms; k++) {
        const hf_norm *x = &r->h->norms[k];
        uint8_t *next = NULL;
        size_t nn = 0;
        if (x->kind == HF_NORM_NFC) {
            int rc = tok_nfc(cur, cn, &next, &nn);
            if (rc < 0) goto fail;
        } else if (x->kind == HF_NORM_PREPEND) {
            if (cn == 0) continue; /* tokenizers prepends nothing to empty text */
            next = malloc(cn + x->to_len + 1);
            if (!next) goto fail;
            memcpy(next, x->to, x->to_len);
            memcpy(next + x->to_len, cur, cn);
            nn = cn + x->to_len;
        } else { /* HF_NORM_REPLACE: every occurrence, left to right, without overlap */
            size_t hits = 0;
            for (const uint8_t *q = cur, *e = cur + cn; (q = memmem(q, (size_t)(e - q), x->from, x->from_len));
                 q += x->from_len)
                hits++;
            if (!hits) continue;
            nn = cn - hits * x->from_len + hits * x->to_len;
            next = malloc(nn + 1);
            if (!next) goto fail;
            size_t i = 0, k2 = 0;
            while (i < cn) {
                const uint8_t *q = memmem(cur + i, cn - i, x->from, x->from_len);
                size_t upto = q ? (size_t)(q - cur) : cn;
                memcpy(next + k2, cur + i, upto - i);
                k2 += upto - i;
                if (!q) break;
                memcpy(next + k2, x->to, x->to_len);
                k2 += x->to_len;
                i = upto + x->from_len;
            }
        }
        if (!next) continue; /* NFC found nothing to change */
        if (*owned) free(cur);
        cur = next;
        cn = nn;
        *owned = 1;
    }
    *out = cur;
    *out_n = cn;
    return TFC_OK;
fail:
    if (*owned) free(cur);
    *owned = 0;
    return oom(r);
}

/*
 * Cut the added tokens of matcher m out of p[0..n): the pieces between go
 * to piece(), the tokens to the id callback. at_origin: p starts the input.
 */
static tfc_status cut_added(run *r, const hf_matcher *m, const uint8_t *p, size_t n, int at_origin,
                            tfc_status (*piece)(run *r, const uint8_t *p, size_t n, int at_origin)) {
    size_t start = 0, from = 0;
    for (;;) {
        int32_t k = -1;
        size_t at = find_added(r->h, m, p, n, from, &k);
        if (at == n) break;
        const hf_added *a = &r->h->added[k];
        if (a->special && r->mode == TFC_SPECIAL_AS_TEXT) {
            from = at + a->len;
            continue;
        }
        if (a->special && r->mode == TFC_SPECIAL_DISALLOWED)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: text contains special token '%.*s' (id %d) and special_mode is "
                           "TFC_SPECIAL_DISALLOWED; use TFC_SPECIAL_ALLOWED or TFC_SPECIAL_AS_TEXT",
                           r->fn, (int)a->len, (const char *)r->h->added_text + a->off, (int)a->id);
        TFC_TRY(piece(r, p + start, at - start, at_origin && start == 0));
        if (r->id(r->ctx, a->id)) return oom(r);
        start = from = at + a->len;
    }
    return piece(r, p + start, n - start, at_origin && start == 0);
}

/* Steps 2 to 4 for a piece between non-normalized added tokens. */
static tfc_status normalized_piece(run *r, const uint8_t *p, size_t n, int at_origin) {
    if (n == 0) return TFC_OK;
    uint8_t *np;
    size_t nn;
    int owned;
    TFC_TRY(normalize(r, p, n, &np, &nn, &owned));
    tfc_status s = cut_added(r, &r->h->match[1], np, nn, at_origin, pre_tokenize);
    if (owned) free(np);
    return s;
}

tfc_status hf_encode(const char *fn, const struct tfc_tokenizer *t, const uint8_t *text, size_t len, int32_t mode,
                     int (*word)(void *ctx, const uint8_t *p, size_t n), int (*id)(void *ctx, int32_t id), void *ctx) {
    run r = {fn, t, t->hf, mode, word, id, ctx, NULL, 0};
    uint8_t *clean = NULL;
    size_t clean_len = 0;
    int rc = utf8_replace_invalid(text, len, &clean, &clean_len); /* step 0 */
    if (rc < 0) return oom(&r);
    if (rc) {
        text = clean;
        len = clean_len;
    }
    tfc_status s = TFC_OK;
    for (int32_t k = 0; k < r.h->n_prefix && s == TFC_OK; k++)
        if (id(ctx, r.h->prefix[k])) s = oom(&r);
    if (s == TFC_OK) s = cut_added(&r, &r.h->match[0], text, len, 1, normalized_piece);
    for (int32_t k = 0; k < r.h->n_suffix && s == TFC_OK; k++)
        if (id(ctx, r.h->suffix[k])) s = oom(&r);
    free(clean);
    free(r.ms);
    return s;
}
