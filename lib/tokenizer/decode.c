/*
 * Ids -> bytes (concatenated token bytes, the exact inverse of encode) and
 * ids -> valid UTF-8 text, replacing each maximal ill-formed subsequence
 * with U+FFFD as Unicode's "best practice" (and Python's errors="replace")
 * does: a lead byte followed by continuation bytes that can still start a
 * valid sequence is one error; any other bad byte is an error of its own.
 * A tokenizer.json's decoder (hf.h) is followed: each token's decoded
 * bytes, its Strip over the whole text, and its ByteFallback's rule for
 * ill-formed runs of byte tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

/* The ids' decoded bytes, concatenated; the length of the result in *total. -1 naming the first bad id. */
static tfc_status check_ids(const char *fn, const tfc_tokenizer *t, const int32_t *ids, size_t n, size_t *total) {
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || t->span[id].len == 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids[%zu] is %d, not a token (vocab size %d)", fn, i, (int)id,
                           (int)t->n_ids);
        sum += t->dspan ? t->dspan[id].len : t->span[id].len;
    }
    *total = sum;
    return TFC_OK;
}

/*
 * A tokenizer.json's Strip decoder (after Fuse, so over the whole text):
 * up to strip_start leading and strip_stop trailing strip_char removed
 * from out[0..*k).
 */
static void strip(const tfc_tokenizer *t, uint8_t *out, size_t *k) {
    if (!t->hf || (!t->hf->strip_start && !t->hf->strip_stop)) return;
    const tok_hf *h = t->hf;
    size_t a = 0, b = *k;
    while (a < b && a < (size_t)h->strip_start && out[a] == h->strip_char) a++;
    while (b > a && *k - b < (size_t)h->strip_stop && out[b - 1] == h->strip_char) b--;
    memmove(out, out + a, b - a);
    *k = b - a;
    out[*k] = 0;
}

static tfc_status decode_bytes(const char *fn, const tfc_tokenizer *t, const int32_t *ids, size_t n, uint8_t **bytes,
                               size_t *len) {
    const tok_span *span = t->dspan ? t->dspan : t->span;
    const uint8_t *blob = t->dspan ? t->dblob : t->blob;
    size_t total;
    TFC_TRY(check_ids(fn, t, ids, n, &total));
    /* TOK_BLOB_SLACK spare bytes on both sides let short tokens go as one 8-byte copy */
    uint8_t *out = malloc(total + TOK_BLOB_SLACK + 1);
    if (!out) return tfc_err(TFC_ERR_OOM, "%s: out of memory for %zu bytes", fn, total);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        tok_span sp = span[ids[i]];
        if (sp.len <= 8)
            memcpy(out + k, blob + sp.off, 8);
        else
            memcpy(out + k, blob + sp.off, sp.len);
        k += sp.len;
    }
    out[k] = 0;
    strip(t, out, &k);
    *bytes = out;
    *len = k;
    return TFC_OK;
}

/*
 * tokenizers' ByteFallback decoder: a run of consecutive byte tokens
 * ("<0xNN>") that is not well-formed UTF-8 as a whole becomes one U+FFFD
 * per token; other tokens as they are (well-formed: the file's strings).
 * Then Strip.
 */
static tfc_status decode_byte_fallback(const char *fn, const tfc_tokenizer *t, const int32_t *ids, size_t n,
                                       char **text, size_t *len) {
    size_t total;
    TFC_TRY(check_ids(fn, t, ids, n, &total));
    if (total > (SIZE_MAX - 1) / 3) return tfc_err(TFC_ERR_OOM, "%s: %zu bytes too large", fn, total);
    uint8_t *out = malloc(3 * total + 1); /* a byte token becomes at most 3 bytes */
    if (!out) return tfc_err(TFC_ERR_OOM, "%s: out of memory for %zu bytes", fn, 3 * total);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (!t->hf->dec_is_byte[ids[i]]) {
            size_t l;
            const uint8_t *b = tok_dec_bytes(t, ids[i++], &l);
            memcpy(out + k, b, l);
            k += l;
            continue;
        }
        size_t j = i, start = k, bad = 0, v;
        while (j < n && t->hf->dec_is_byte[ids[j]]) out[k++] = t->dblob[t->dspan[ids[j++]].off];
        for (size_t q = start; q < k; q += v)
            if (!(v = utf8_valid_len(out + q, k - q, &bad))) break;
        if (bad) {
            k = start;
            for (size_t q = i; q < j; q++, k += 3) memcpy(out + k, "\xEF\xBF\xBD", 3);
        }
        i = j;
    }
    out[k] = 0;
    strip(t, out, &k);
    *text = (char *)out;
    *len = k;
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_decode(const tfc_tokenizer *t, const int32_t *ids, size_t n_ids, char **bytes,
                                        size_t *len) {
    static const char fn[] = "tfc_tokenizer_decode";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, bytes);
    TFC_CHECK_NOT_NULL(fn, len);
    if (!ids && n_ids > 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids is NULL and n_ids is %zu", fn, n_ids);
    return decode_bytes(fn, t, ids, n_ids, (uint8_t **)bytes, len);
}

TFC_API tfc_status tfc_tokenizer_decode_utf8(const tfc_tokenizer *t, const int32_t *ids, size_t n_ids, char **text,
                                             size_t *len) {
    static const char fn[] = "tfc_tokenizer_decode_utf8";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, text);
    TFC_CHECK_NOT_NULL(fn, len);
    if (!ids && n_ids > 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids is NULL and n_ids is %zu", fn, n_ids);
    if (t->hf && t->hf->dec_byte_fallback) return decode_byte_fallback(fn, t, ids, n_ids, text, len);
    uint8_t *raw;
    size_t n;
    TFC_TRY(decode_bytes(fn, t, ids, n_ids, &raw, &n));
    if (n > (SIZE_MAX - 1) / 3) {
        free(raw);
        return tfc_err(TFC_ERR_OOM, "%s: %zu bytes too large", fn, n);
    }
    uint8_t *out = malloc(3 * n + 1); /* each bad byte becomes at most 3 bytes */
    if (!out) {
        free(raw);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory for %zu bytes", fn, 3 * n);
    }
    size_t i = 0, k = 0;
    while (i < n) {
        size_t bad = 0, v = utf8_valid_len(raw + i, n - i, &bad);
        if (v) {
            memcpy(out + k, raw + i, v);
            k += v;
            i += v;
        } else {
            memcpy(out + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i += bad;
        }
    }
    out[k] = 0;
    free(raw);
    uint8_t *shrunk = realloc(out, k + 1);
    *text = (char *)(shrunk ? shrunk : out);
    *len = k;
    return TFC_OK;
}
