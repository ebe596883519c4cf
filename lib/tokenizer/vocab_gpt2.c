/*
 * GPT-2's encoder.json + vocab.bpe. GPT-2 writes token bytes as printable
 * characters: bytes_to_unicode() keeps the 188 printable Latin-1 bytes
 * ('!'..'~', '¡'..'¬', '®'..'ÿ') as themselves and maps the other 68 bytes,
 * in increasing order, to U+0100, U+0101, ... Here every string is decoded
 * (JSON escapes, then UTF-8, then that map inverted) back to raw bytes.
 * vocab.bpe lists merges "left right", rank = order in the file; merging
 * follows them exactly (as GPT-2's encoder.py does). encoder.json entries
 * that are neither one byte nor the result of a merge become special tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

/* Code point -> byte of GPT-2's alphabet, -1 for code points outside it. */
static void unicode_to_byte(int32_t inv[324]) {
    for (int i = 0; i < 324; i++) inv[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        inv[printable ? b : 256 + extra++] = b;
    }
}

/* One UTF-8 code point from p[0..n): its length, or 0 when malformed. */
static size_t utf8_decode(const uint8_t *p, size_t n, uint32_t *cp) {
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    size_t k = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
    if (!k || k > n) return 0;
    uint32_t v = p[0] & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    *cp = v;
    return k;
}

/* GPT-2 alphabet text (UTF-8) -> bytes; -1 on a character outside the alphabet. */
static long gpt2_text_to_bytes(const int32_t inv[324], const uint8_t *s, size_t n, uint8_t *out) {
    long k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t step = utf8_decode(s + i, n - i, &cp);
        if (!step || cp >= 324 || inv[cp] < 0) return -1;
        out[k++] = (uint8_t)inv[cp];
        i += step;
    }
    return k;
}

static void put_utf8(uint32_t cp, uint8_t *out, size_t *k) {
    if (cp < 0x80)
        out[(*k)++] = (uint8_t)cp;
    else if (cp < 0x800) {
        out[(*k)++] = (uint8_t)(0xC0 | cp >> 6);
        out[(*k)++] = (uint8_t)(0x80 | (cp & 63));
    } else if (cp < 0x10000) {
        out[(*k)++] = (uint8_t)(0xE0 | cp >> 12);
        out[(*k)++] = (uint8_t)(0x80 | (cp >> 6 & 63));
        out[(*k)++] = (uint8_t)(0x80 | (cp & 63));
    } else {
        out[(*k)++] = (uint8_t)(0xF0 | cp >> 18);
        out[(*k)++] = (uint8_t)(0x80 | (cp >> 12 & 63));
        out[(*k)++] = (uint8_t)(0x80 | (cp >> 6 & 63));
        out[(*k)++] = (uint8_t)(0x80 | (cp & 63));
    }
}

/* JSON parsing over a buffer; errors carry the byte offset. */
typedef struct json {
    const uint8_t *p;
    size_t n, i;
} json;

static void json_ws(json *j) {
    while (j->i < j->n && (j->p[j->i] == ' ' || j->p[j->i] == '\n' || j->p[j->i] == '\r' || j->p[j->i] == '\t')) j->i++;
}

static int hex4(const uint8_t *p, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t c = p[k];
        int d = c >= '0' && c <= '9' ? c - '0'
            : c >= 'a' && c <= 'f'   ? c - 'a' + 10
            : c >= 'A' && c <= 'F'   ? c - 'A' + 10
                                     : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A JSON string into out (UTF-8, at most cap bytes): its length, or -1. */
static long json_string(json *j, uint8_t *out, size_t cap) {
    if (j->i >= j->n || j->p[j->i] != '"') return -1;
    j->i++;
    size_t k = 0;
    while (j->i < j->n && j->p[j->i] != '"') {
        if (k + 4 > cap) return -1;
        uint8_t c = j->p[j->i++];
        if (c < 0x20) return -1;
        if (c != '\\') {
            out[k++] = c;
            continue;
        }
        if (j->i >= j->n) return -1;
        c = j->p[j->i++];
        switch (c) {
        case '"':
        case '\\':
        case '/': out[k++] = c; break;
        case 'b': out[k++] = '\b'; break;
        case 'f': out[k++] = '\f'; break;
        case 'n': out[k++] = '\n'; break;
        case 'r': out[k++] = '\r'; break;
        case 't': out[k++] = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (j->i + 4 > j->n || hex4(j->p + j->i, &cp)) return -1;
            j->i += 4;
            if (cp >= 0xD800 && cp < 0xDC00) { /* surrogate pair */
                if (j->i + 6 > j->n || j->p[j->i] != '\\' || j->p[j->i + 1] != 'u' || hex4(j->p + j->i + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return -1;
                j->i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                return -1;
            }
            put_utf8(cp, out, &k);
            break;
        }
        default: return -1;
        }
    }
    if (j->i >= j->n) return -1;
    j->i++;
    return (long)k;
}

typedef struct entry {
    int32_t id;
    uint32_t len;
    size_t off; /* bytes in the index arena */
} entry;

typedef struct gpt2_vocab {
    byte_map index; /* token bytes -> position in entries */
    entry *entries;
    size_t n, cap;
    uint8_t *produced; /* per entry: made by a merge */
} gpt2_vocab;

static tfc_status parse_encoder(const char *fn, const char *path, const int32_t inv[324], const uint8_t *buf,
                                size_t len, gpt2_vocab *v) {
    uint8_t *s = malloc(4 * TFC_TOKEN_MAX_LEN + 8), *bytes = malloc(4 * TFC_TOKEN_MAX_LEN + 8);
    tfc_status st = TFC_OK;
    json j = {buf, len, 0};
    if (!s || !bytes) {
        st = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        goto done;
    }
    json_ws(&j);
    if (j.i >= j.n || buf[j.i++] != '{') {
        st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' does not start with a JSON object", fn, path);
        goto done;
    }
    json_ws(&j);
    if (j.i < j.n && buf[j.i] == '}') goto empty;
    for (;;) {
        json_ws(&j);
        size_t at = j.i;
        long sl = json_string(&j, s, 4 * TFC_TOKEN_MAX_LEN);
        if (sl < 0) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' byte %zu: expected a JSON string key (at most %d bytes)", fn, path,
                         at, 4 * TFC_TOKEN_MAX_LEN);
            goto done;
        }
        long bl = gpt2_text_to_bytes(inv, s, (size_t)sl, bytes);
        if (bl <= 0) {
            st = tfc_err(TFC_ERR_FORMAT,
                         "%s: '%s' byte %zu: key is empty or has a character outside GPT-2's "
                         "byte alphabet",
                         fn, path, at);
            goto done;
        }
        json_ws(&j);
        if (j.i >= j.n || buf[j.i++] != ':') {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' byte %zu: expected ':'", fn, path, j.i);
            goto done;
        }
        json_ws(&j);
        size_t d0 = j.i;
        while (j.i < j.n && buf[j.i] >= '0' && buf[j.i] <= '9') j.i++;
        int64_t id;
        if (tok_parse_int((const char *)buf + d0, j.i - d0, TFC_TOKENIZER_MAX_ID - 1, &id)) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' byte %zu: expected an id in [0, 2^30)", fn, path, d0);
            goto done;
        }
        int added;
        byte_slot *slot = byte_map_upsert(&v->index, bytes, (size_t)bl, (int64_t)v->n, &added);
        if (!slot) {
            st = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
            goto done;
        }
        if (!added) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' byte %zu: token appears twice", fn, path, at);
            goto done;
        }
        if (v->n == v->cap) {
            size_t cap = v->cap ? v->cap * 2 : 1024;
            entry *e = realloc(v->entries, cap * sizeof *e);
            if (!e) {
                st = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
                goto done;
            }
            v->entries = e;
            v->cap = cap;
        }
        v->entries[v->n++] = (entry){(int32_t)id, (uint32_t)bl, slot->off};
        json_ws(&j);
        if (j.i < j.n && buf[j.i] == ',') {
            j.i++;
            continue;
        }
        if (j.i < j.n && buf[j.i] == '}') break;
        st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' byte %zu: expected ',' or '}'", fn, path, j.i);
        goto done;
    }
empty:
    j.i++;
    json_ws(&j);
    if (j.i != j.n) st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' byte %zu: text after the JSON object", fn, path, j.i);
done:
    free(s);
    free(bytes);
    return st;
}

static tfc_status parse_merges(const char *fn, const char *path, const int32_t inv[324], const uint8_t *buf, size_t len,
                               gpt2_vocab *v, tfc_merge **merges, size_t *n_merges) {
    uint8_t *both = malloc(2 * TFC_TOKEN_MAX_LEN + 8);
    size_t cap = 0, n = 0, pos = 0, lineno = 0, ll;
    tfc_merge *m = NULL;
    tfc_status st = TFC_OK;
    const char *line;
    if (!both) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    while (st == TFC_OK && tok_next_line(buf, len, &pos, &line, &ll)) {
        lineno++;
        if (ll == 0 || (lineno == 1 && ll >= 1 && line[0] == '#')) continue;
        const char *sp = memchr(line, ' ', ll);
        long a, b;
        int64_t li, ri, mi;
        if (memchr(line, 0, ll)) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: NUL byte", fn, path, lineno);
        } else if (!sp || memchr(sp + 1, ' ', ll - (size_t)(sp - line) - 1)) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: expected 'left right'", fn, path, lineno);
        } else if (ll > 2 * TFC_TOKEN_MAX_LEN) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: line longer than %d bytes", fn, path, lineno,
                         2 * TFC_TOKEN_MAX_LEN);
        } else if ((a = gpt2_text_to_bytes(inv, (const uint8_t *)line, (size_t)(sp - line), both)) <= 0 ||
                   (b = gpt2_text_to_bytes(inv, (const uint8_t *)sp + 1, ll - (size_t)(sp - line) - 1, both + a)) <=
                       0) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: empty token or character outside GPT-2's byte alphabet",
                         fn, path, lineno);
        } else if (!byte_map_get(&v->index, both, (size_t)a, &li) ||
                   !byte_map_get(&v->index, both + a, (size_t)b, &ri)) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: merge '%.*s' refers to a token not in encoder.json", fn,
                         path, lineno, (int)(ll > 64 ? 64 : ll), line);
        } else if (!byte_map_get(&v->index, both, (size_t)(a + b), &mi)) {
            st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' line %zu: merge '%.*s' makes a token not in encoder.json", fn, path,
                         lineno, (int)(ll > 64 ? 64 : ll), line);
        } else {
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                tfc_merge *g = realloc(m, cap * sizeof *g);
                if (!g) {
                    st = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
                    break;
                }
                m = g;
            }
            v->produced[mi] = 1;
            /* entries indices for now; turned into ids by the caller */
            m[n] = (tfc_merge){(int32_t)li, (int32_t)ri, (int32_t)mi, (int32_t)n};
            n++;
        }
    }
    free(both);
    if (st != TFC_OK) {
        free(m);
        return st;
    }
    *merges = m;
    *n_merges = n;
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_load_gpt2(const char *encoder_json_path, const char *vocab_bpe_path,
                                           tfc_tokenizer **out) {
    static const char fn[] = "tfc_tokenizer_load_gpt2";
    TFC_CHECK_NOT_NULL(fn, encoder_json_path);
    TFC_CHECK_NOT_NULL(fn, vocab_bpe_path);
    TFC_CHECK_NOT_NULL(fn, out);
    int32_t inv[324];
    unicode_to_byte(inv);
    tfc_tokenizer *t;
    TFC_TRY(tok_create(fn, TFC_SPLIT_GPT2, &t));
    gpt2_vocab v = {0};
    uint8_t *buf = NULL;
    size_t len, n_merges = 0;
    tfc_merge *merges = NULL;
    tfc_status s = tok_read_file(fn, encoder_json_path, &buf, &len);
    if (s == TFC_OK && byte_map_init(&v.index, 1024)) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) s = parse_encoder(fn, encoder_json_path, inv, buf, len, &v);
    free(buf);
    buf = NULL;
    if (s == TFC_OK && !(v.produced = calloc(v.n ? v.n : 1, 1))) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) s = tok_read_file(fn, vocab_bpe_path, &buf, &len);
    if (s == TFC_OK) s = parse_merges(fn, vocab_bpe_path, inv, buf, len, &v, &merges, &n_merges);
    free(buf);
    for (size_t i = 0; s == TFC_OK && i < v.n; i++) {
        const entry *e = &v.entries[i];
        int ordinary = e->len == 1 || v.produced[i];
        if (e->id >= tok_id_limit(v.n))
            s = tfc_err(TFC_ERR_FORMAT,
                        "%s: '%s': id %d is beyond what a file of %zu entries can hold (ids must be below 2 x "
                        "entries + %d)",
                        fn, encoder_json_path, (int)e->id, v.n, TOK_ID_SLACK);
        else if (e->id < t->n_ids && t->tok_kind[e->id] != TOK_UNUSED)
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s': id %d appears twice", fn, encoder_json_path, (int)e->id);
        else if (ordinary)
            s = tok_set_token(fn, t, e->id, v.index.arena + e->off, e->len, TOK_ORDINARY);
        else if (e->len > TFC_SPECIAL_MAX_LEN)
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s': token %d is not made by any merge and too long for a special token",
                        fn, encoder_json_path, (int)e->id);
        else {
            char text[TFC_SPECIAL_MAX_LEN + 1];
            memcpy(text, v.index.arena + e->off, e->len);
            text[e->len] = 0;
            if (memchr(text, 0, e->len))
                s = tfc_err(TFC_ERR_FORMAT, "%s: '%s': token %d has a NUL byte", fn, encoder_json_path, (int)e->id);
            else
                s = tfc_tokenizer_add_special(t, text, e->id);
        }
    }
    for (size_t i = 0; s == TFC_OK && i < n_merges; i++) {
        const tfc_merge *m = &merges[i];
        s = tok_add_merge(fn, t, v.entries[m->left].id, v.entries[m->right].id, v.entries[m->id].id, m->rank);
        if (s == TFC_ERR_FORMAT) /* the pair was listed before: name the file */
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s': merge %zu appears twice", fn, vocab_bpe_path, i + 1);
    }
    free(merges);
    byte_map_free(&v.index);
    free(v.entries);
    free(v.produced);
    t->direct_all = 0;
    if (s == TFC_OK) s = tok_finalize(fn, t);
    if (s != TFC_OK) {
        tfc_tokenizer_release(t);
        return tfc_err_in(fn, s);
    }
    *out = t;
    return TFC_OK;
}
