/*
 * Ids -> bytes (concatenated token bytes, the exact inverse of encode) and
 * ids -> valid UTF-8 text, replacing each maximal ill-formed subsequence
 * with U+FFFD as Unicode's "best practice" (and Python's errors="replace")
 * does: a lead byte followed by continuation bytes that can still start a
 * valid sequence is one error; any other bad byte is an error of its own.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

static tfc_status decode_bytes(const char *fn, const tfc_tokenizer *t, const int32_t *ids, size_t n, uint8_t **bytes,
                               size_t *len) {
    const tok_span *span = t->span;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || span[id].len == 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids[%zu] is %d, not a token (vocab size %d)", fn, i, (int)id,
                           (int)t->n_ids);
        total += span[id].len;
    }
    /* TOK_BLOB_SLACK spare bytes on both sides let short tokens go as one 8-byte copy */
    uint8_t *out = malloc(total + TOK_BLOB_SLACK + 1);
    if (!out) return tfc_err(TFC_ERR_OOM, "%s: out of memory for %zu bytes", fn, total);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        tok_span sp = span[ids[i]];
        if (sp.len <= 8)
            memcpy(out + k, t->blob + sp.off, 8);
        else
            memcpy(out + k, t->blob + sp.off, sp.len);
        k += sp.len;
    }
    out[k] = 0;
    *bytes = out;
    *len = total;
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

/* Length of the valid UTF-8 sequence at p (1..4), or 0 with *bad = bytes of the maximal ill-formed subpart. */
static size_t utf8_valid_len(const uint8_t *p, size_t n, size_t *bad) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    size_t k = 1;
    for (; k <= need; k++) {
        if (k >= n) break;
        uint8_t x = p[k];
        uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (x < l || x > h) break;
    }
    if (k == need + 1) return need + 1;
    *bad = k; /* lead byte plus the continuation bytes that were still acceptable */
    return 0;
}

TFC_API tfc_status tfc_tokenizer_decode_utf8(const tfc_tokenizer *t, const int32_t *ids, size_t n_ids, char **text,
                                             size_t *len) {
    static const char fn[] = "tfc_tokenizer_decode_utf8";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, text);
    TFC_CHECK_NOT_NULL(fn, len);
    if (!ids && n_ids > 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids is NULL and n_ids is %zu", fn, n_ids);
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
