/*
 * The tokenizer object: its token table, merge rules and special tokens,
 * and the public calls that create, query and release it.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

int tok_ids_reserve(ids_vec *v, size_t extra) {
    if (v->n + extra <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 64;
    while (cap < v->n + extra) cap *= 2;
    int32_t *p = realloc(v->v, cap * sizeof *p);
    if (!p) return -1;
    v->v = p;
    v->cap = cap;
    return 0;
}

tfc_status tok_create(const char *fn, int32_t pattern, tfc_tokenizer **out) {
    tfc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = splitter_init(fn, &t->split, pattern);
    if (s != TFC_OK) {
        free(t);
        return s;
    }
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    *out = t;
    return TFC_OK;
}

static tfc_status grow_ids(const char *fn, tfc_tokenizer *t, int32_t need) {
    if (need <= t->cap_ids) return TFC_OK;
    int32_t cap = t->cap_ids ? t->cap_ids : 512;
    while (cap < need) cap = cap > TFC_TOKENIZER_MAX_ID / 2 ? TFC_TOKENIZER_MAX_ID : cap * 2;
    tok_span *span = realloc(t->span, (size_t)cap * sizeof *span);
    if (span) t->span = span;
    uint8_t *kind = realloc(t->tok_kind, (size_t)cap);
    if (kind) t->tok_kind = kind;
    if (!span || !kind) return tfc_err(TFC_ERR_OOM, "%s: out of memory for %d token ids", fn, (int)cap);
    memset(t->tok_kind + t->cap_ids, TOK_UNUSED, (size_t)(cap - t->cap_ids));
    memset(t->span + t->cap_ids, 0, (size_t)(cap - t->cap_ids) * sizeof *span);
    t->cap_ids = cap;
    return TFC_OK;
}

tfc_status tok_set_token(const char *fn, tfc_tokenizer *t, int32_t id, const uint8_t *p, size_t len, int kind) {
    if (id < 0 || id >= TFC_TOKENIZER_MAX_ID)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: id %d is outside [0, 2^30)", fn, (int)id);
    if (len == 0 || len > UINT32_MAX)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: token %d has %zu bytes", fn, (int)id, len);
    TFC_TRY(grow_ids(fn, t, id + 1));
    if (t->tok_kind[id] != TOK_UNUSED)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: id %d is already the %s token", fn, (int)id,
                       t->tok_kind[id] == TOK_SPECIAL ? "special" : "ordinary");
    if (t->blob_len + len > UINT32_MAX - TOK_BLOB_SLACK)
        return tfc_err(TFC_ERR_OOM, "%s: token bytes exceed 4 GiB", fn);
    if (t->blob_len + len + TOK_BLOB_SLACK > t->blob_cap) {
        size_t cap = t->blob_cap ? t->blob_cap : 4096;
        while (cap < t->blob_len + len + TOK_BLOB_SLACK) cap *= 2;
        uint8_t *b = realloc(t->blob, cap);
        if (!b) return tfc_err(TFC_ERR_OOM, "%s: out of memory for token bytes", fn);
        t->blob = b;
        t->blob_cap = cap;
    }
    memcpy(t->blob + t->blob_len, p, len);
    t->span[id].off = (uint32_t)t->blob_len;
    t->span[id].len = (uint32_t)len;
    t->tok_kind[id] = (uint8_t)kind;
    t->blob_len += len;
    if (id >= t->n_ids) t->n_ids = id + 1;
    if (kind == TOK_ORDINARY && len == 1 && t->byte_id[p[0]] < 0) t->byte_id[p[0]] = id;
    return TFC_OK;
}

tfc_status tok_add_merge(const char *fn, tfc_tokenizer *t, int32_t left, int32_t right, int32_t id, int32_t rank) {
    int r = pair_map_put(&t->pairs, left, right, rank, id);
    if (r < 0) return tfc_err(TFC_ERR_OOM, "%s: out of memory for merges", fn);
    if (r > 0) return tfc_err(TFC_ERR_FORMAT, "%s: pair (%d, %d) merges twice", fn, (int)left, (int)right);
    if (t->n_merges == t->cap_merges) {
        int32_t cap = t->cap_merges ? t->cap_merges * 2 : 1024;
        tfc_merge *m = realloc(t->merges, (size_t)cap * sizeof *m);
        if (!m) return tfc_err(TFC_ERR_OOM, "%s: out of memory for merges", fn);
        t->merges = m;
        t->cap_merges = cap;
    }
    t->merges[t->n_merges++] = (tfc_merge){left, right, id, rank};
    return TFC_OK;
}

static int merge_cmp(const void *a, const void *b) {
    const tfc_merge *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

tfc_status tok_finalize(const char *fn, tfc_tokenizer *t) {
    for (int b = 0; b < 256 && !(t->hf && t->hf->char_mode); b++) /* char mode starts from characters */
        if (t->byte_id[b] < 0) return tfc_err(TFC_ERR_FORMAT, "%s: byte 0x%02x has no token", fn, b);
    if (t->n_merges > 1) qsort(t->merges, (size_t)t->n_merges, sizeof *t->merges, merge_cmp);
    byte_map_free(&t->direct);
    size_t n_ordinary = 0; /* not n_ids: the map's size follows the tokens, not the largest id */
    for (int32_t id = 0; id < t->n_ids; id++) n_ordinary += t->tok_kind[id] == TOK_ORDINARY;
    if (byte_map_init(&t->direct, n_ordinary)) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    ids_vec tmp = {0};
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (t->tok_kind[id] != TOK_ORDINARY) continue;
        const uint8_t *p = tok_bytes(t, id);
        size_t n = t->span[id].len;
        if (!t->direct_all && n > 1) {
            tmp.n = 0;
            if (bpe_merge_chunk(t, p, n, &tmp)) goto oom;
            if (tmp.n != 1 || tmp.v[0] != id) continue;
        }
        int added;
        if (!byte_map_upsert(&t->direct, p, n, id, &added)) goto oom;
    }
    free(tmp.v);
    return TFC_OK;
oom:
    free(tmp.v);
    return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
}

TFC_API tfc_status tfc_tokenizer_new(int32_t pattern, tfc_tokenizer **out) {
    static const char fn[] = "tfc_tokenizer_new";
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_tokenizer *t;
    TFC_TRY(tok_create(fn, pattern, &t));
    tfc_status s = TFC_OK;
    for (int b = 0; b < 256 && s == TFC_OK; b++) {
        uint8_t c = (uint8_t)b;
        s = tok_set_token(fn, t, b, &c, 1, TOK_ORDINARY);
    }
    if (s == TFC_OK) s = tok_finalize(fn, t);
    if (s != TFC_OK) {
        tfc_tokenizer_release(t);
        return s;
    }
    *out = t;
    return TFC_OK;
}

TFC_API void tfc_tokenizer_release(tfc_tokenizer *t) {
    if (!t) return;
    splitter_free(&t->split);
    free(t->span);
    free(t->tok_kind);
    free(t->blob);
    free(t->merges);
    pair_map_free(&t->pairs);
    byte_map_free(&t->direct);
    free(t->special_ids);
    if (t->hf) tok_hf_free(t->hf);
    free(t->hf);
    free(t->dspan);
    free(t->dblob);
    free(t);
}

TFC_API tfc_status tfc_tokenizer_add_special(tfc_tokenizer *t, const char *text, int32_t id) {
    static const char fn[] = "tfc_tokenizer_add_special";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, text);
    if (t->hf) /* a tokenizer.json's tokens are final: new ones would need decoded bytes and an added-token entry */
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the tokenizer was loaded from a tokenizer.json; list '%s' in its added_tokens instead", fn,
                       text);
    size_t n = strlen(text);
    if (n == 0 || n > TFC_SPECIAL_MAX_LEN)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: text has %zu bytes, expected 1 to %d", fn, n, TFC_SPECIAL_MAX_LEN);
    for (int32_t i = 0; i < t->n_special; i++) {
        int32_t sid = t->special_ids[i];
        if (t->span[sid].len == n && memcmp(tok_bytes(t, sid), text, n) == 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: '%s' is already special token %d", fn, text, (int)sid);
    }
    if (t->n_special == t->cap_special) {
        int32_t cap = t->cap_special ? t->cap_special * 2 : 8;
        int32_t *p = realloc(t->special_ids, (size_t)cap * sizeof *p);
        if (!p) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        t->special_ids = p;
        t->cap_special = cap;
    }
    TFC_TRY(tok_set_token(fn, t, id, (const uint8_t *)text, n, TOK_SPECIAL));
    t->special_ids[t->n_special++] = id;
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_vocab_size(const tfc_tokenizer *t, int32_t *out) {
    TFC_CHECK_NOT_NULL_AS("tfc_tokenizer_vocab_size", t, "tok");
    TFC_CHECK_NOT_NULL("tfc_tokenizer_vocab_size", out);
    *out = t->n_ids;
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_token_bytes(const tfc_tokenizer *t, int32_t id, const char **bytes, size_t *len,
                                             int32_t *is_special) {
    static const char fn[] = "tfc_tokenizer_token_bytes";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, bytes);
    TFC_CHECK_NOT_NULL(fn, len);
    if (id < 0 || id >= t->n_ids || t->tok_kind[id] == TOK_UNUSED)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: id %d is not a token (vocab size %d)", fn, (int)id, (int)t->n_ids);
    *bytes = (const char *)tok_dec_bytes(t, id, len);
    if (is_special) *is_special = t->tok_kind[id] == TOK_SPECIAL;
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_n_merges(const tfc_tokenizer *t, int32_t *out) {
    TFC_CHECK_NOT_NULL_AS("tfc_tokenizer_n_merges", t, "tok");
    TFC_CHECK_NOT_NULL("tfc_tokenizer_n_merges", out);
    *out = t->n_merges;
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_get_merge(const tfc_tokenizer *t, int32_t i, int32_t *left, int32_t *right,
                                           int32_t *id, int32_t *rank) {
    static const char fn[] = "tfc_tokenizer_get_merge";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, left);
    TFC_CHECK_NOT_NULL(fn, right);
    TFC_CHECK_NOT_NULL(fn, id);
    TFC_CHECK_NOT_NULL(fn, rank);
    if (i < 0 || i >= t->n_merges)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: i is %d, the tokenizer has %d merges", fn, (int)i, (int)t->n_merges);
    *left = t->merges[i].left;
    *right = t->merges[i].right;
    *id = t->merges[i].id;
    *rank = t->merges[i].rank;
    return TFC_OK;
}
