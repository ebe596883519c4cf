/*
 * GPT-2's encoder.json + vocab.bpe. GPT-2 writes token bytes as printable
 * characters: bytes_to_unicode() keeps the 188 printable Latin-1 bytes
 * ('!'..'~', '¡'..'¬', '®'..'ÿ') as themselves and maps the other 68 bytes,
 * in increasing order, to U+0100, U+0101, ... Here every string is decoded
 * (JSON escapes by jansson, then UTF-8, then that map inverted) back to raw
 * bytes.
 * vocab.bpe lists merges "left right", rank = order in the file; merging
 * follows them exactly (as GPT-2's encoder.py does). encoder.json entries
 * that are neither one byte nor the result of a merge become special tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/byte_alphabet.h"
#include "tokenizer/tokenizer_impl.h"

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

/* One encoder.json entry (key: the token in GPT-2's alphabet, x: its id) appended to v. */
static tfc_status add_entry(const char *fn, const char *path, const int32_t inv[TOK_ALPHABET_END], const char *key,
                            const json_t *x, uint8_t *bytes, gpt2_vocab *v) {
    const size_t kl = strlen(key);
    if (kl > 4 * TFC_TOKEN_MAX_LEN)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': key '%.32s...' is longer than %d bytes", fn, path, key,
                       4 * TFC_TOKEN_MAX_LEN);
    const long bl = tok_alphabet_to_bytes(inv, (const uint8_t *)key, kl, bytes);
    if (bl <= 0)
        return tfc_err(TFC_ERR_FORMAT,
                       "%s: '%s': key '%.64s' is empty or has a character outside GPT-2's byte alphabet", fn, path,
                       key);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= TFC_TOKENIZER_MAX_ID)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': key '%.64s': expected an id in [0, 2^30)", fn, path, key);
    int added;
    byte_slot *slot = byte_map_upsert(&v->index, bytes, (size_t)bl, (int64_t)v->n, &added);
    if (!slot) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (!added) return tfc_err(TFC_ERR_FORMAT, "%s: '%s': key '%.64s': token appears twice", fn, path, key);
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 1024;
        entry *e = realloc(v->entries, cap * sizeof *e);
        if (!e) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        v->entries = e;
        v->cap = cap;
    }
    v->entries[v->n++] = (entry){(int32_t)json_integer_value(x), (uint32_t)bl, slot->off};
    return TFC_OK;
}

/*
 * encoder.json: one JSON object, token -> id, parsed by jansson (io/json.h).
 * A key twice is refused (a JSON reader would keep the last; a vocabulary
 * that lists a token twice is broken either way).
 */
static tfc_status parse_encoder(const char *fn, const char *path, const int32_t inv[TOK_ALPHABET_END],
                                const uint8_t *buf, size_t len, gpt2_vocab *v) {
    json_t *root = NULL;
    tfc_json_problem p;
    if (tfc_json_load(buf, len, TFC_JSON_REFUSE_DUPLICATES, &root, &p) != 0) {
        if (p.oom) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        if (p.duplicate) return tfc_err(TFC_ERR_FORMAT, "%s: '%s' byte %lld: token appears twice", fn, path, p.byte);
        return tfc_err(TFC_ERR_FORMAT,
                       "%s: '%s' byte %lld: %s (encoder.json is one object: in each entry expected a JSON string key, "
                       "':' and an integer id)",
                       fn, path, p.byte, p.why);
    }
    uint8_t *bytes = malloc(4 * TFC_TOKEN_MAX_LEN + 8);
    tfc_status st = bytes ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (st == TFC_OK && !json_is_object(root))
        st = tfc_err(TFC_ERR_FORMAT, "%s: '%s' does not start with a JSON object", fn, path);
    const char *key;
    json_t *x;
    json_object_foreach(root, key, x) {
        if (st != TFC_OK) break;
        st = add_entry(fn, path, inv, key, x, bytes, v);
    }
    free(bytes);
    json_decref(root);
    return st;
}

static tfc_status parse_merges(const char *fn, const char *path, const int32_t inv[TOK_ALPHABET_END],
                               const uint8_t *buf, size_t len, gpt2_vocab *v, tfc_merge **merges, size_t *n_merges) {
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
        } else if ((a = tok_alphabet_to_bytes(inv, (const uint8_t *)line, (size_t)(sp - line), both)) <= 0 ||
                   (b = tok_alphabet_to_bytes(inv, (const uint8_t *)sp + 1, ll - (size_t)(sp - line) - 1, both + a)) <=
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
    int32_t inv[TOK_ALPHABET_END];
    tok_alphabet_inverse(inv);
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
