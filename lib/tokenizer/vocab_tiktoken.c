/*
 * tiktoken rank files: one "<base64 token bytes> <rank>" per line, the
 * rank doubling as the token id. tiktoken merges two adjacent parts when
 * their concatenation is a token, lowest rank first, so the merge rules
 * are every split (left, right) of every token whose halves are both
 * tokens, with the rank of the whole token. Whole chunks that are a token
 * map to it directly (direct_all), as tiktoken does.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

static tfc_status parse_ranks(const char *fn, const char *path, tfc_tokenizer *t, const uint8_t *buf, size_t len,
                              byte_map *index) {
    uint8_t *tok = malloc(TFC_TOKEN_MAX_LEN + 4);
    if (!tok) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    size_t pos = 0, lineno = 0, ll, n_lines = tok_count_lines(buf, len);
    int64_t limit = tok_id_limit(n_lines);
    const char *line;
    while (s == TFC_OK && tok_next_line(buf, len, &pos, &line, &ll)) {
        lineno++;
        if (ll == 0) continue;
        const char *sp = memchr(line, ' ', ll);
        int64_t rank;
        if (memchr(line, 0, ll)) {
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: NUL byte", fn, path, lineno);
        } else if (!sp) {
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: expected '<base64> <rank>'", fn, path, lineno);
        } else if ((size_t)(sp - line) > (TFC_TOKEN_MAX_LEN / 3 + 1) * 4) {
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: token longer than %d bytes", fn, path, lineno,
                        TFC_TOKEN_MAX_LEN);
        } else if (tok_parse_int(sp + 1, ll - (size_t)(sp - line) - 1, TFC_TOKENIZER_MAX_ID - 1, &rank)) {
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: rank '%.*s' is not an integer in [0, 2^30)", fn, path,
                        lineno, (int)(ll - (size_t)(sp - line) - 1 > 32 ? 32 : ll - (size_t)(sp - line) - 1), sp + 1);
        } else if (rank >= limit) {
            s = tfc_err(TFC_ERR_FORMAT,
                        "%s: '%s' line %zu: rank %lld is beyond what a file of %zu lines can hold (ranks must be "
                        "below 2 x lines + %d)",
                        fn, path, lineno, (long long)rank, n_lines, TOK_ID_SLACK);
        } else {
            long n = tok_base64_decode(line, (size_t)(sp - line), tok);
            int added;
            byte_slot *slot;
            if (n <= 0 || n > TFC_TOKEN_MAX_LEN)
                s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: bad base64 token", fn, path, lineno);
            else if (rank < t->n_ids && t->tok_kind[rank] != TOK_UNUSED)
                s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: rank %lld appears twice", fn, path, lineno,
                            (long long)rank);
            else if (!(slot = byte_map_upsert(index, tok, (size_t)n, rank, &added)))
                s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
            else if (!added)
                s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: token already has rank %lld", fn, path, lineno,
                            (long long)slot->value);
            else
                s = tok_set_token(fn, t, (int32_t)rank, tok, (size_t)n, TOK_ORDINARY);
        }
    }
    free(tok);
    return s;
}

static tfc_status add_split_merges(const char *fn, tfc_tokenizer *t, const byte_map *index) {
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (t->tok_kind[id] != TOK_ORDINARY || t->span[id].len < 2) continue;
        const uint8_t *p = tok_bytes(t, id);
        size_t n = t->span[id].len;
        for (size_t k = 1; k < n; k++) {
            int64_t l, r;
            if (byte_map_get(index, p, k, &l) && byte_map_get(index, p + k, n - k, &r))
                TFC_TRY(tok_add_merge(fn, t, (int32_t)l, (int32_t)r, id, id));
        }
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_load_tiktoken(const char *path, int32_t pattern, tfc_tokenizer **out) {
    static const char fn[] = "tfc_tokenizer_load_tiktoken";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_tokenizer *t;
    TFC_TRY(tok_create(fn, pattern, &t));
    uint8_t *buf = NULL;
    size_t len;
    byte_map index = {0};
    tfc_status s = tok_read_file(fn, path, &buf, &len);
    if (s == TFC_OK && byte_map_init(&index, 1024)) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) s = parse_ranks(fn, path, t, buf, len, &index);
    free(buf);
    if (s == TFC_OK) s = add_split_merges(fn, t, &index);
    byte_map_free(&index);
    t->direct_all = 1;
    if (s == TFC_OK) s = tok_finalize(fn, t);
    if (s != TFC_OK) {
        tfc_tokenizer_release(t);
        return s;
    }
    *out = t;
    return TFC_OK;
}
