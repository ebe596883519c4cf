/*
 * libtfcore's own tokenizer file, a versioned line-based text format that
 * holds everything encoding depends on, so save -> load round-trips
 * exactly (docs/TOKENIZER.md):
 *
 *   tfcore-tokenizer 1
 *   pattern gpt2                  none | gpt2 | cl100k | llama3 | qwen2
 *   direct merges                 merges | all (whole-chunk lookup rule)
 *   tokens N
 *   <id> <base64 bytes>           N lines, ordinary tokens
 *   merges M
 *   <rank> <left id> <right id> <id>   M lines, in rank order
 *   specials S
 *   <id> <base64 bytes>           S lines
 *   end
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

#define NATIVE_VERSION 1

static const char *pattern_name(int32_t p) {
    switch (p) {
    case TFC_SPLIT_GPT2: return "gpt2";
    case TFC_SPLIT_CL100K: return "cl100k";
    case TFC_SPLIT_LLAMA3: return "llama3";
    case TFC_SPLIT_QWEN2: return "qwen2";
    default: return "none";
    }
}

TFC_API tfc_status tfc_tokenizer_save(const tfc_tokenizer *t, const char *path) {
    static const char fn[] = "tfc_tokenizer_save";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, path);
    if (t->hf)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the tokenizer was loaded from a tokenizer.json, whose normalizer, pre-tokenizer, added "
                       "tokens and decoder this format cannot hold; keep (copy) the tokenizer.json instead",
                       fn);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    char *b64 = malloc((TFC_TOKEN_MAX_LEN / 3 + 2) * 4 + 1);
    if (!tmp || !b64) {
        free(tmp);
        free(b64);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        tfc_status s = tfc_err(TFC_ERR_IO, "%s: cannot create '%s': %s", fn, tmp, strerror(errno));
        free(tmp);
        free(b64);
        return s;
    }
    int32_t n_ord = 0;
    for (int32_t id = 0; id < t->n_ids; id++) n_ord += t->tok_kind[id] == TOK_ORDINARY;
    fprintf(f, "tfcore-tokenizer %d\npattern %s\ndirect %s\ntokens %d\n", NATIVE_VERSION,
            pattern_name(t->split.pattern), t->direct_all ? "all" : "merges", (int)n_ord);
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (t->tok_kind[id] != TOK_ORDINARY) continue;
        tok_base64_encode(tok_bytes(t, id), t->span[id].len, b64);
        fprintf(f, "%d %s\n", (int)id, b64);
    }
    fprintf(f, "merges %d\n", (int)t->n_merges);
    for (int32_t i = 0; i < t->n_merges; i++) {
        const tfc_merge *m = &t->merges[i];
        fprintf(f, "%d %d %d %d\n", (int)m->rank, (int)m->left, (int)m->right, (int)m->id);
    }
    fprintf(f, "specials %d\n", (int)t->n_special);
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special_ids[k];
        tok_base64_encode(tok_bytes(t, id), t->span[id].len, b64);
        fprintf(f, "%d %s\n", (int)id, b64);
    }
    fprintf(f, "end\n");
    int bad = ferror(f);
    bad |= fflush(f) != 0;
    bad |= fclose(f) != 0;
    tfc_status s = TFC_OK;
    if (bad) {
        s = tfc_err(TFC_ERR_IO, "%s: error writing '%s'", fn, tmp);
        remove(tmp);
    } else if (rename(tmp, path) != 0) {
        s = tfc_err(TFC_ERR_IO, "%s: cannot rename '%s' to '%s': %s", fn, tmp, path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    free(b64);
    return s;
}

/* Parsing state: the buffer, position and line number for messages. */
typedef struct reader {
    const char *fn, *path;
    const uint8_t *buf;
    size_t len, pos, lineno;
    const char *line;
    size_t ll;
    int64_t id_limit; /* tok_id_limit of the file's line count */
} reader;

static tfc_status bad_line(reader *r, const char *what) {
    return tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: %s", r->fn, r->path, r->lineno, what);
}

static tfc_status read_line(reader *r) {
    if (!tok_next_line(r->buf, r->len, &r->pos, &r->line, &r->ll)) {
        r->lineno++;
        return bad_line(r, "file ends early (truncated?)");
    }
    r->lineno++;
    if (memchr(r->line, 0, r->ll)) return bad_line(r, "NUL byte");
    return TFC_OK;
}

/* Split the current line into up to 4 space-separated fields. */
static int fields(reader *r, const char **f, size_t *fl, int want) {
    int k = 0;
    size_t i = 0;
    while (i <= r->ll && k < want) {
        size_t j = i;
        while (j < r->ll && r->line[j] != ' ') j++;
        f[k] = r->line + i;
        fl[k] = j - i;
        k++;
        i = j + 1;
        if (j == r->ll) break;
    }
    return k == want && i >= r->ll + 1 ? 0 : -1;
}

static tfc_status header_count(reader *r, const char *key, int64_t *n) {
    const char *f[2];
    size_t fl[2];
    TFC_TRY(read_line(r));
    if (fields(r, f, fl, 2) || fl[0] != strlen(key) || memcmp(f[0], key, fl[0]) ||
        tok_parse_int(f[1], fl[1], TFC_TOKENIZER_MAX_ID, n)) {
        char msg[64];
        snprintf(msg, sizeof msg, "expected '%s <count>'", key);
        return bad_line(r, msg);
    }
    return TFC_OK;
}

static tfc_status read_token_lines(reader *r, tfc_tokenizer *t, int64_t count, int kind, uint8_t *tok) {
    for (int64_t k = 0; k < count; k++) {
        const char *f[2];
        size_t fl[2];
        int64_t id;
        TFC_TRY(read_line(r));
        if (fields(r, f, fl, 2) || tok_parse_int(f[0], fl[0], TFC_TOKENIZER_MAX_ID - 1, &id))
            return bad_line(r, "expected '<id> <base64>'");
        if (fl[1] > (TFC_TOKEN_MAX_LEN / 3 + 1) * 4) return bad_line(r, "token too long");
        long n = tok_base64_decode(f[1], fl[1], tok);
        if (n <= 0) return bad_line(r, "bad base64 token");
        if (id >= r->id_limit) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "id %lld is beyond what a file of %zu lines can hold (ids must be below 2 x lines + %d)",
                     (long long)id, tok_count_lines(r->buf, r->len), TOK_ID_SLACK);
            return bad_line(r, msg);
        }
        if (id < t->n_ids && t->tok_kind[id] != TOK_UNUSED) return bad_line(r, "id appears twice");
        if (kind == TOK_SPECIAL) {
            char text[TFC_SPECIAL_MAX_LEN + 1];
            if (n > TFC_SPECIAL_MAX_LEN || memchr(tok, 0, (size_t)n)) return bad_line(r, "bad special token");
            memcpy(text, tok, (size_t)n);
            text[n] = 0;
            TFC_TRY(tfc_tokenizer_add_special(t, text, (int32_t)id));
        } else {
            TFC_TRY(tok_set_token(r->fn, t, (int32_t)id, tok, (size_t)n, TOK_ORDINARY));
        }
    }
    return TFC_OK;
}

static int is_ordinary(const tfc_tokenizer *t, int64_t id) {
    return id >= 0 && id < t->n_ids && t->tok_kind[id] == TOK_ORDINARY;
}

static tfc_status read_merges(reader *r, tfc_tokenizer *t, int64_t count) {
    int64_t prev_rank = -1;
    for (int64_t k = 0; k < count; k++) {
        const char *f[4];
        size_t fl[4];
        int64_t v[4];
        TFC_TRY(read_line(r));
        if (fields(r, f, fl, 4)) return bad_line(r, "expected '<rank> <left> <right> <id>'");
        for (int i = 0; i < 4; i++)
            if (tok_parse_int(f[i], fl[i], TFC_TOKENIZER_MAX_ID - 1, &v[i]))
                return bad_line(r, "expected '<rank> <left> <right> <id>'");
        if (v[0] < prev_rank) return bad_line(r, "merges are not in rank order");
        prev_rank = v[0];
        if (!is_ordinary(t, v[1]) || !is_ordinary(t, v[2]) || !is_ordinary(t, v[3]))
            return bad_line(r, "merge refers to an unknown token");
        size_t ll = t->span[v[1]].len, rl = t->span[v[2]].len;
        if (t->span[v[3]].len != ll + rl || memcmp(tok_bytes(t, v[3]), tok_bytes(t, v[1]), ll) ||
            memcmp(tok_bytes(t, v[3]) + ll, tok_bytes(t, v[2]), rl))
            return bad_line(r, "merged token's bytes are not left's + right's");
        tfc_status s = tok_add_merge(r->fn, t, (int32_t)v[1], (int32_t)v[2], (int32_t)v[3], (int32_t)v[0]);
        if (s == TFC_ERR_FORMAT) return bad_line(r, "pair merges twice");
        TFC_TRY(s);
    }
    return TFC_OK;
}

static tfc_status parse_native(reader *r, tfc_tokenizer **out) {
    const char *f[2];
    size_t fl[2];
    int64_t version, n;
    TFC_TRY(read_line(r));
    if (fields(r, f, fl, 2) || fl[0] != 16 || memcmp(f[0], "tfcore-tokenizer", 16) ||
        tok_parse_int(f[1], fl[1], 1000000, &version))
        return bad_line(r, "not a tfcore tokenizer file (expected 'tfcore-tokenizer <version>')");
    if (version > NATIVE_VERSION || version < 1)
        return tfc_err(TFC_ERR_VERSION, "%s: '%s' has format version %lld, this library reads version %d", r->fn,
                       r->path, (long long)version, NATIVE_VERSION);
    TFC_TRY(read_line(r));
    int32_t pattern = -1;
    if (fields(r, f, fl, 2) == 0 && fl[0] == 7 && memcmp(f[0], "pattern", 7) == 0)
        for (int32_t p = 0; p <= TFC_SPLIT_QWEN2; p++)
            if (fl[1] == strlen(pattern_name(p)) && memcmp(f[1], pattern_name(p), fl[1]) == 0) pattern = p;
    if (pattern < 0) return bad_line(r, "expected 'pattern none|gpt2|cl100k|llama3|qwen2'");
    TFC_TRY(read_line(r));
    int32_t direct = -1;
    if (fields(r, f, fl, 2) == 0 && fl[0] == 6 && memcmp(f[0], "direct", 6) == 0) {
        if (fl[1] == 3 && memcmp(f[1], "all", 3) == 0) direct = 1;
        if (fl[1] == 6 && memcmp(f[1], "merges", 6) == 0) direct = 0;
    }
    if (direct < 0) return bad_line(r, "expected 'direct all|merges'");
    tfc_tokenizer *t;
    TFC_TRY(tok_create(r->fn, pattern, &t));
    t->direct_all = direct;
    uint8_t *tok = malloc(TFC_TOKEN_MAX_LEN + 4);
    tfc_status s = tok ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", r->fn);
    if (s == TFC_OK) s = header_count(r, "tokens", &n);
    if (s == TFC_OK) s = read_token_lines(r, t, n, TOK_ORDINARY, tok);
    if (s == TFC_OK) s = header_count(r, "merges", &n);
    if (s == TFC_OK) s = read_merges(r, t, n);
    if (s == TFC_OK) s = header_count(r, "specials", &n);
    if (s == TFC_OK) s = read_token_lines(r, t, n, TOK_SPECIAL, tok);
    if (s == TFC_OK) s = read_line(r);
    if (s == TFC_OK && (r->ll != 3 || memcmp(r->line, "end", 3))) s = bad_line(r, "expected 'end'");
    if (s == TFC_OK) {
        size_t rest = 0;
        while (r->pos + rest < r->len && (r->buf[r->pos + rest] == '\n' || r->buf[r->pos + rest] == '\r')) rest++;
        if (r->pos + rest != r->len) s = bad_line(r, "text after 'end'");
    }
    free(tok);
    if (s == TFC_OK) s = tok_finalize(r->fn, t);
    if (s != TFC_OK) {
        if (s == TFC_ERR_INVALID_ARG) { /* e.g. a special token clashing with another token */
            char msg[768];
            snprintf(msg, sizeof msg, "%s", tfc_last_error());
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: %s", r->fn, r->path, r->lineno, msg);
        }
        tfc_tokenizer_release(t);
        return s;
    }
    *out = t;
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_load(const char *path, tfc_tokenizer **out) {
    static const char fn[] = "tfc_tokenizer_load";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, out);
    reader r = {.fn = fn, .path = path};
    uint8_t *buf;
    TFC_TRY(tok_read_file(fn, path, &buf, &r.len));
    r.buf = buf;
    r.id_limit = tok_id_limit(tok_count_lines(buf, r.len));
    tfc_status s = parse_native(&r, out);
    free(buf);
    return s;
}
