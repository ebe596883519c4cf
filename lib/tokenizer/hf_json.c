/*
 * tfc_tokenizer_load_hf_json: a Hugging Face tokenizer.json (the format of
 * the `tokenizers` library) with a BPE model, read with jansson into the
 * tokenizer so that encoding gives the ids Hugging Face's implementation
 * gives (hf.h has the pipeline; docs/TOKENIZER.md what is honoured).
 *
 * The model:
 *   - byte-level (a ByteLevel pre-tokenizer: GPT-2, Llama 3, Qwen2): vocab
 *     keys are spelled in GPT-2's byte alphabet (byte_alphabet.h) and are
 *     read back to the bytes the encoder merges; every byte must have a
 *     token;
 *   - SentencePiece-style (no ByteLevel: Llama 2, Mistral, TinyLlama): keys
 *     are the text the model sees ("▁the"); each character starts as its
 *     own token, and byte_fallback's 256 "<0xNN>" tokens or unk_token
 *     stand for characters outside the vocabulary.
 *   - merges: "a b" strings or ["a", "b"] pairs; rank = position; a pair
 *     listed twice takes its last rank (tokenizers builds a hash map from
 *     the list, later entries replacing earlier ones); "#version" lines are
 *     skipped, as tokenizers does.
 *   - ignore_merges (Llama 3): a word that is itself in the vocabulary maps
 *     to it directly (the tokenizer's direct_all).
 * Added tokens get the ids tokenizers gives them (the vocabulary's id for a
 * content that is in it, else the next id past the vocabulary and the added
 * tokens before it); a file whose "id" differs is refused, since
 * tokenizers would silently use its own.
 * Decoding: each token's decoded bytes are computed here once (ByteLevel:
 * the alphabet read back; Replace/ByteFallback: the replacements, and
 * "<0xNN>" to its byte); decode.c concatenates them and applies Strip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/byte_alphabet.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer_impl.h"

#define ADDED_MAX_LEN 1024 /* bytes of an added token's content */

typedef struct loader {
    hf_ctx c;
    tfc_tokenizer *t;
    tok_hf *h;
    hf_pipeline p;
    int32_t inv[TOK_ALPHABET_END];
    uint8_t *scratch;  /* 4 x TFC_TOKEN_MAX_LEN + 8 bytes */
    const char **text; /* per id: the token as the file spells it (vocab key or added content), in the document */
    uint8_t *in_vocab; /* per id: a model vocabulary id */
    int32_t id_cap;    /* entries of text and in_vocab */
    size_t vocab_entries;
    int ignore_merges, unk_found;
    const char *unk_token;
} loader;

static tfc_status oom(const loader *L) { return tfc_err(TFC_ERR_OOM, "%s: out of memory", L->c.fn); }

void tok_hf_free(tok_hf *h) {
    for (int32_t i = 0; i < h->n_norms; i++) {
        free(h->norms[i].from);
        free(h->norms[i].to);
    }
    free(h->norms);
    byte_map_free(&h->vocab);
    free(h->added);
    free(h->added_text);
    free(h->prefix);
    free(h->suffix);
    free(h->dec_is_byte);
    for (int k = 0; k < 2; k++) free(h->match[k].order);
    memset(h, 0, sizeof *h);
}

/* ---- model.vocab ------------------------------------------------------------------------- */

static tfc_status read_vocab(loader *L, const json_t *vocab, int64_t id_limit) {
    const char *key;
    json_t *x;
    if (byte_map_init(&L->h->vocab, L->vocab_entries)) return oom(L);
    json_object_foreach((json_t *)vocab, key, x) {
        const size_t kl = strlen(key);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= id_limit)
            return hf_bad(&L->c, "model.vocab",
                          "'%.64s': expected an id in [0, %lld) (ids must be below 2 x entries + %d)", key,
                          (long long)id_limit, TOK_ID_SLACK);
        const int32_t id = (int32_t)json_integer_value(x);
        if (kl == 0) return hf_bad(&L->c, "model.vocab", "the empty string is not a token (id %d)", (int)id);
        if (kl > 4 * TFC_TOKEN_MAX_LEN)
            return hf_bad(&L->c, "model.vocab", "'%.32s...' is longer than %d bytes", key, 4 * TFC_TOKEN_MAX_LEN);
        if (L->text[id])
            return hf_bad(&L->c, "model.vocab", "'%.64s' and '%.64s' both have id %d", L->text[id], key, (int)id);
        const uint8_t *bytes = (const uint8_t *)key;
        long n = (long)kl;
        if (!L->h->char_mode) { /* byte-level: the bytes the key spells */
            n = tok_alphabet_to_bytes(L->inv, bytes, kl, L->scratch);
            if (n <= 0)
                return hf_bad(&L->c, "model.vocab",
                              "'%.64s' (id %d) has a character outside the byte-level alphabet of a ByteLevel model",
                              key, (int)id);
            bytes = L->scratch;
        }
        TFC_TRY(tok_set_token(L->c.fn, L->t, id, bytes, (size_t)n, TOK_ORDINARY));
        int added;
        byte_slot *s = byte_map_upsert(&L->h->vocab, (const uint8_t *)key, kl, id, &added);
        if (!s) return oom(L);
        L->text[id] = key;
        L->in_vocab[id] = 1;
    }
    return TFC_OK;
}

/* ---- model.merges ------------------------------------------------------------------------ */

typedef struct merge_in {
    int32_t left, right, id;
} merge_in;

static int vocab_id(const loader *L, const char *s, size_t n, int32_t *id) {
    int64_t v;
    if (!byte_map_get(&L->h->vocab, (const uint8_t *)s, n, &v)) return 0;
    *id = (int32_t)v;
    return 1;
}

/* Entry i of merges as its two token texts: "a b" (legacy) or ["a", "b"]; *skip for a "#version" line. */
static tfc_status merge_texts(const loader *L, const json_t *m, size_t i, int legacy, const char **a, size_t *na,
                              const char **b, size_t *nb, int *skip) {
    char f[48];
    *skip = 0;
    if (legacy) {
        if (!json_is_string(m))
            return hf_bad(&L->c, (snprintf(f, sizeof f, "model.merges[%zu]", i), f),
                          "expected a string \"left right\" like the entries before it");
        const char *s = json_string_value(m);
        const size_t n = json_string_length(m);
        if (n >= 8 && memcmp(s, "#version", 8) == 0) {
            *skip = 1;
            return TFC_OK;
        }
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1))
            return hf_bad(&L->c, (snprintf(f, sizeof f, "model.merges[%zu]", i), f),
                          "'%.64s' is not two tokens separated by one space", s);
        *a = s;
        *na = (size_t)(sp - s);
        *b = sp + 1;
        *nb = n - *na - 1;
        return TFC_OK;
    }
    if (!json_is_array(m) || json_array_size(m) != 2 || !json_is_string(json_array_get(m, 0)) ||
        !json_is_string(json_array_get(m, 1)))
        return hf_bad(&L->c, (snprintf(f, sizeof f, "model.merges[%zu]", i), f),
                      "expected a pair [\"left\", \"right\"] like the entries before it");
    *a = json_string_value(json_array_get(m, 0));
    *na = json_string_length(json_array_get(m, 0));
    *b = json_string_value(json_array_get(m, 1));
    *nb = json_string_length(json_array_get(m, 1));
    return TFC_OK;
}

static tfc_status read_merges(loader *L, const json_t *merges) {
    if (!merges || json_is_null(merges)) return TFC_OK;
    if (!json_is_array(merges)) return hf_bad(&L->c, "model.merges", "expected an array");
    const size_t n = json_array_size(merges);
    if (n == 0) return TFC_OK;
    if (n >= TFC_TOKENIZER_MAX_ID) return hf_bad(&L->c, "model.merges", "more than 2^30 merges");
    const int legacy = json_is_string(json_array_get(merges, 0));
    merge_in *list = malloc(n * sizeof *list);
    tfc_status s = list ? TFC_OK : oom(L);
    size_t count = 0; /* the rank of the next merge: "#version" lines take none */
    for (size_t i = 0; i < n && s == TFC_OK; i++) {
        const char *a, *b;
        size_t na, nb;
        int skip;
        int32_t l, r, id;
        s = merge_texts(L, json_array_get(merges, i), i, legacy, &a, &na, &b, &nb, &skip);
        if (s != TFC_OK || skip) continue;
        char f[48]; /* written only for a message: 280,000 merges make formatting it each time show */
#define FIELD() (snprintf(f, sizeof f, "model.merges[%zu]", i), f)
        if (na + nb > 4 * TFC_TOKEN_MAX_LEN) {
            s = hf_bad(&L->c, FIELD(), "the merged token is longer than %d bytes", 4 * TFC_TOKEN_MAX_LEN);
            break;
        }
        memcpy(L->scratch, a, na);
        memcpy(L->scratch + na, b, nb);
        if (!vocab_id(L, a, na, &l))
            s = hf_bad(&L->c, FIELD(), "'%.*s' is not in model.vocab", (int)(na > 64 ? 64 : na), a);
        else if (!vocab_id(L, b, nb, &r))
            s = hf_bad(&L->c, FIELD(), "'%.*s' is not in model.vocab", (int)(nb > 64 ? 64 : nb), b);
        else if (!vocab_id(L, (const char *)L->scratch, na + nb, &id))
            s = hf_bad(&L->c, FIELD(), "the merged token '%.*s' is not in model.vocab",
                       (int)(na + nb > 64 ? 64 : na + nb), (const char *)L->scratch);
#undef FIELD
        if (s == TFC_OK) list[count++] = (merge_in){l, r, id};
    }
    /* last to first, so that a pair listed twice keeps its later rank, as in tokenizers */
    if (s == TFC_OK && pair_map_init(&L->t->pairs, count)) s = oom(L);
    for (size_t k = count; k-- > 0 && s == TFC_OK;) {
        int32_t rank, id;
        if (!pair_map_get(&L->t->pairs, list[k].left, list[k].right, &rank, &id))
            s = tok_add_merge(L->c.fn, L->t, list[k].left, list[k].right, list[k].id, (int32_t)k);
    }
    free(list);
    return s;
}

/* ---- added_tokens ------------------------------------------------------------------------ */

static int only_nfc_normalizers(const tok_hf *h) {
    for (int32_t i = 0; i < h->n_norms; i++)
        if (h->norms[i].kind != HF_NORM_NFC) return 0;
    return 1;
}

static tfc_status push_added(loader *L, int32_t id, int special, int normalized, const uint8_t *p, size_t n) {
    tok_hf *h = L->h;
    if (h->n_added == h->cap_added) {
        int32_t cap = h->cap_added ? 2 * h->cap_added : 16;
        hf_added *a = realloc(h->added, (size_t)cap * sizeof *a);
        if (!a) return oom(L);
        h->added = a;
        h->cap_added = cap;
    }
    if (h->added_text_len + n > h->added_text_cap) {
        size_t cap = h->added_text_cap ? h->added_text_cap : 1024;
        while (cap < h->added_text_len + n) cap *= 2;
        uint8_t *b = realloc(h->added_text, cap);
        if (!b) return oom(L);
        h->added_text = b;
        h->added_text_cap = cap;
    }
    memcpy(h->added_text + h->added_text_len, p, n);
    h->added[h->n_added++] =
        (hf_added){id, (uint8_t)special, (uint8_t)normalized, (uint32_t)h->added_text_len, (uint32_t)n};
    h->added_text_len += n;
    return TFC_OK;
}

static tfc_status read_added(loader *L, const json_t *added, int64_t id_limit) {
    if (!added || json_is_null(added)) return TFC_OK;
    if (!json_is_array(added)) return hf_bad(&L->c, "added_tokens", "expected an array");
    byte_map seen = {0};
    int64_t max_id = -1; /* the largest id given to an added token so far (tokenizers' added_tokens_map) */
    tfc_status s = TFC_OK;
    for (size_t i = 0; i < json_array_size(added) && s == TFC_OK; i++) {
        char f[64];
        snprintf(f, sizeof f, "added_tokens[%zu]", i);
        const json_t *a = json_array_get(added, i);
        static const char *const keys[] = {"id",     "content",    "single_word", "lstrip",
                                           "rstrip", "normalized", "special",     NULL};
        if ((s = hf_check_keys(&L->c, a, f, keys)) != TFC_OK) break;
        const json_t *jid = json_object_get(a, "id"), *jc = json_object_get(a, "content");
        if (!json_is_string(jc) || json_string_length(jc) == 0 || json_string_length(jc) > ADDED_MAX_LEN) {
            s = hf_bad(&L->c, f, "\"content\" must be a string of 1 to %d bytes", ADDED_MAX_LEN);
            break;
        }
        const char *content = json_string_value(jc);
        const size_t cl = json_string_length(jc);
        if (!json_is_integer(jid) || json_integer_value(jid) < 0 || json_integer_value(jid) >= id_limit) {
            s = hf_bad(&L->c, f, "'%.64s': \"id\" must be an integer in [0, %lld)", content, (long long)id_limit);
            break;
        }
        int single_word = 0, lstrip = 0, rstrip = 0, normalized = -1, special = -1;
        if ((s = hf_bool(&L->c, a, f, "single_word", &single_word)) != TFC_OK ||
            (s = hf_bool(&L->c, a, f, "lstrip", &lstrip)) != TFC_OK ||
            (s = hf_bool(&L->c, a, f, "rstrip", &rstrip)) != TFC_OK ||
            (s = hf_bool(&L->c, a, f, "normalized", &normalized)) != TFC_OK ||
            (s = hf_bool(&L->c, a, f, "special", &special)) != TFC_OK)
            break;
        if (normalized < 0 || special < 0) {
            s = hf_bad(&L->c, f, "'%.64s': \"normalized\" and \"special\" must be given (true or false)", content);
            break;
        }
        if (single_word || lstrip || rstrip) {
            s = hf_bad(&L->c, f, "'%.64s': %s true is not supported", content,
                       single_word  ? "single_word"
                           : lstrip ? "lstrip"
                                    : "rstrip");
            break;
        }
        if (normalized && !only_nfc_normalizers(L->h)) {
            s = hf_bad(&L->c, f,
                       "'%.64s': normalized true is supported only when the normalizer is null or NFC (the content "
                       "would have to be matched in Prepend/Replace-normalized text)",
                       content);
            break;
        }
        int added_new;
        byte_slot *slot = byte_map_upsert(&seen, (const uint8_t *)content, cl, (int64_t)i, &added_new);
        if (!slot) {
            s = oom(L);
            break;
        }
        if (!added_new) {
            s = hf_bad(&L->c, f, "'%.64s' is listed twice (also added_tokens[%lld])", content, (long long)slot->value);
            break;
        }
        /* the id tokenizers gives it (AddedVocabulary::add_tokens) */
        int32_t want;
        const int64_t vocab_size = (int64_t)L->vocab_entries;
        const int in_vocab = vocab_id(L, content, cl, &want);
        if (!in_vocab)
            want = (int32_t)(max_id < 0                                    ? vocab_size
                                 : max_id >= vocab_size || vocab_size == 0 ? max_id + 1
                                                                           : vocab_size);
        const int32_t id = (int32_t)json_integer_value(jid);
        if (id != want) {
            s = hf_bad(&L->c, f,
                       "'%.64s' has id %d, but Hugging Face's tokenizers gives it id %d (%s) and would use that; "
                       "refusing the inconsistent file",
                       content, (int)id, (int)want,
                       in_vocab ? "its id in model.vocab"
                                : "the next id past model.vocab and the added tokens before it");
            break;
        }
        if (id > max_id) max_id = id;
        const int kind = special ? TOK_SPECIAL : TOK_ADDED;
        if (L->in_vocab[id])
            L->t->tok_kind[id] = (uint8_t)kind; /* a vocabulary token, matched as an added token first */
        else if ((s = tok_set_token(L->c.fn, L->t, id, (const uint8_t *)content, cl, kind)) != TFC_OK)
            break;
        L->text[id] = content;
        /* normalized ones are matched in normalized text: NFC their content likewise */
        uint8_t *nfc = NULL;
        size_t nl = cl;
        int r = normalized && L->h->n_norms ? tok_nfc((const uint8_t *)content, cl, &nfc, &nl) : 0;
        if (r < 0) {
            s = oom(L);
            break;
        }
        s = push_added(L, id, special, normalized, r ? nfc : (const uint8_t *)content, r ? nl : cl);
        free(nfc);
    }
    byte_map_free(&seen);
    return s;
}

/* ---- the template's special tokens -------------------------------------------------------- */

static tfc_status template_ids(loader *L, const char *const *names, int32_t n, int32_t **ids, int32_t *n_ids) {
    for (int32_t k = 0; k < n; k++) {
        char f[160];
        snprintf(f, sizeof f, "post_processor special_tokens['%.64s']", names[k]);
        const json_t *e = json_object_get(L->p.special_tokens, names[k]);
        static const char *const keys[] = {"id", "ids", "tokens", NULL};
        TFC_TRY(hf_check_keys(&L->c, e, f, keys));
        const json_t *a = json_object_get(e, "ids");
        if (!json_is_array(a) || json_array_size(a) > 64)
            return hf_bad(&L->c, f, "\"ids\" must be an array of at most 64 ids");
        for (size_t i = 0; i < json_array_size(a); i++) {
            const json_t *x = json_array_get(a, i);
            const json_int_t v = json_is_integer(x) ? json_integer_value(x) : -1;
            if (v < 0 || v >= L->t->n_ids || L->t->tok_kind[v] == TOK_UNUSED)
                return hf_bad(&L->c, f, "ids[%zu] is not a token id", i);
            int32_t *g = realloc(*ids, (size_t)(*n_ids + 1) * sizeof *g);
            if (!g) return oom(L);
            g[(*n_ids)++] = (int32_t)v;
            *ids = g;
        }
    }
    return TFC_OK;
}

/* ---- decoded bytes -------------------------------------------------------------------------- */

/* "<0xNN>" as tokenizers' ByteFallback reads it (u8::from_str_radix of the two characters, a '+' allowed). */
static int fallback_byte(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0'
            : ch >= 'a' && ch <= 'f'   ? ch - 'a' + 10
            : ch >= 'A' && ch <= 'F'   ? ch - 'A' + 10
            : (i == 3 && ch == '+')    ? -2
                                       : -1;
        if (d == -1) return -1;
        if (d >= 0) v = v * 16 + d;
    }
    return v;
}

/* s with every `from` replaced by `to`, into *out (grown as needed). */
static int replace_all(const char *s, size_t n, const char *from, const char *to, char **out, size_t *out_n,
                       size_t *cap) {
    const size_t fl = strlen(from), tl = strlen(to);
    size_t k = 0;
    for (size_t i = 0; i <= n;) {
        const char *hit = i < n ? memmem(s + i, n - i, from, fl) : NULL;
        const size_t upto = hit ? (size_t)(hit - s) : n;
        const size_t need = k + (upto - i) + (hit ? tl : 0) + 1;
        if (need > *cap) {
            size_t c = *cap ? *cap : 64;
            while (c < need) c *= 2;
            char *b = realloc(*out, c);
            if (!b) return -1;
            *out = b;
            *cap = c;
        }
        memcpy(*out + k, s + i, upto - i);
        k += upto - i;
        if (!hit) break;
        memcpy(*out + k, to, tl);
        k += tl;
        i = upto + fl;
    }
    *out_n = k;
    return 0;
}

static tfc_status decoded_bytes(loader *L) {
    tfc_tokenizer *t = L->t;
    tok_hf *h = L->h;
    const size_t ids = t->cap_ids ? (size_t)t->cap_ids : 1; /* an empty vocabulary loads too */
    t->dspan = calloc(ids, sizeof *t->dspan);
    h->dec_is_byte = calloc(ids, 1);
    size_t cap = t->blob_len + TOK_BLOB_SLACK + 64, len = 0;
    t->dblob = malloc(cap);
    char *work[2] = {NULL, NULL};
    size_t work_cap[2] = {0, 0};
    tfc_status s = t->dspan && h->dec_is_byte && t->dblob ? TFC_OK : oom(L);
    h->dec_byte_fallback = L->p.dec_byte_fallback;
    for (int32_t id = 0; id < t->n_ids && s == TFC_OK; id++) {
        if (t->tok_kind[id] == TOK_UNUSED) continue;
        const char *str = L->text[id];
        size_t n = strlen(str);
        const uint8_t *out = (const uint8_t *)str;
        size_t out_n = n;
        if (L->p.dec_byte_level) { /* the alphabet read back; tokens with other characters as they are */
            long b = tok_alphabet_to_bytes(L->inv, (const uint8_t *)str, n, L->scratch);
            if (b >= 0) {
                out = L->scratch;
                out_n = (size_t)b;
            }
        } else {
            int w = 0;
            for (int32_t k = 0; k < L->p.n_dec_replace; k++, w ^= 1) {
                if (replace_all(str, n, L->p.dec_replace[k].from, L->p.dec_replace[k].to, &work[w], &n, &work_cap[w])) {
                    s = oom(L);
                    break;
                }
                str = work[w];
            }
            out = (const uint8_t *)str;
            out_n = n;
            int byte = h->dec_byte_fallback ? fallback_byte(str, n) : -1;
            if (byte >= 0) {
                L->scratch[0] = (uint8_t)byte;
                out = L->scratch;
                out_n = 1;
                h->dec_is_byte[id] = 1;
            }
        }
        if (len + out_n + TOK_BLOB_SLACK > cap) {
            while (len + out_n + TOK_BLOB_SLACK > cap) cap *= 2;
            uint8_t *g = realloc(t->dblob, cap);
            if (!g) {
                s = oom(L);
                break;
            }
            t->dblob = g;
        }
        memcpy(t->dblob + len, out, out_n);
        t->dspan[id] = (tok_span){(uint32_t)len, (uint32_t)out_n};
        len += out_n;
    }
    free(work[0]);
    free(work[1]);
    if (s == TFC_OK) memset(t->dblob + len, 0, TOK_BLOB_SLACK);
    return s;
}

/* ---- the document ------------------------------------------------------------------------------ */

static tfc_status read_model_options(loader *L, const json_t *model) {
    static const char *const keys[] = {"type",
                                       "dropout",
                                       "unk_token",
                                       "continuing_subword_prefix",
                                       "end_of_word_suffix",
                                       "fuse_unk",
                                       "byte_fallback",
                                       "ignore_merges",
                                       "vocab",
                                       "merges",
                                       NULL};
    const char *type;
    TFC_TRY(hf_type(&L->c, model, "model", &type));
    if (strcmp(type, "BPE") != 0)
        return hf_bad(&L->c, "model.type",
                      "'%.64s' is not supported (only BPE; WordPiece, Unigram and WordLevel are not)", type);
    TFC_TRY(hf_check_keys(&L->c, model, "model", keys));
    const json_t *d = json_object_get(model, "dropout");
    if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0))
        return hf_bad(&L->c, "model.dropout", "BPE dropout (random merges) is not supported; expected null");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const json_t *x = json_object_get(model, affixes[k]);
        if (x && !json_is_null(x) && !(json_is_string(x) && json_string_length(x) == 0))
            return hf_bad(&L->c, "model", "\"%s\" is not supported; expected null", affixes[k]);
    }
    const json_t *u = json_object_get(model, "unk_token");
    if (u && !json_is_null(u) && !json_is_string(u))
        return hf_bad(&L->c, "model.unk_token", "expected a string or null");
    L->unk_token = json_is_string(u) ? json_string_value(u) : NULL;
    TFC_TRY(hf_bool(&L->c, model, "model", "fuse_unk", &L->h->fuse_unk));
    TFC_TRY(hf_bool(&L->c, model, "model", "byte_fallback", &L->h->byte_fallback));
    TFC_TRY(hf_bool(&L->c, model, "model", "ignore_merges", &L->ignore_merges));
    if (!json_is_object(json_object_get(model, "vocab")))
        return hf_bad(&L->c, "model.vocab", "expected an object token -> id");
    return TFC_OK;
}

/* Start tokens: byte-level needs every byte; char mode records each ASCII character's and the fallbacks. */
static tfc_status start_tokens(loader *L) {
    tfc_tokenizer *t = L->t;
    tok_hf *h = L->h;
    h->unk_id = -1;
    if (L->unk_token) {
        int32_t id;
        if (!vocab_id(L, L->unk_token, strlen(L->unk_token), &id))
            return hf_bad(&L->c, "model.unk_token", "'%.64s' is not in model.vocab", L->unk_token);
        h->unk_id = id;
    }
    if (!h->char_mode) {
        for (int b = 0; b < 256; b++)
            if (t->byte_id[b] < 0)
                return hf_bad(&L->c, "model.vocab", "no token for byte 0x%02x, which a ByteLevel model needs", b);
        return TFC_OK;
    }
    if (h->byte_fallback)
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            if (!vocab_id(L, name, 6, &h->fallback[b]))
                return hf_bad(&L->c, "model.byte_fallback", "true, but model.vocab has no '%s'", name);
        }
    for (int b = 0x80; b < 256; b++) t->byte_id[b] = -1; /* not characters */
    for (int b = 0; b < 0x80; b++) {
        char ch = (char)b;
        int32_t id = -1;
        h->ascii_unknown[b] = 0;
        if (vocab_id(L, &ch, 1, &id))
            t->byte_id[b] = id;
        else if (h->byte_fallback)
            t->byte_id[b] = h->fallback[b];
        else {
            t->byte_id[b] = h->unk_id; /* -1 without one: tokenizers drops the character */
            h->ascii_unknown[b] = 1;
        }
    }
    return TFC_OK;
}

static tfc_status load(loader *L, const json_t *root, uint32_t flags) {
    static const char *const keys[] = {"version",       "truncation",     "padding", "added_tokens", "normalizer",
                                       "pre_tokenizer", "post_processor", "decoder", "model",        NULL};
    TFC_TRY(hf_check_keys(&L->c, root, "the top level", keys));
    static const char *const off[] = {"truncation", "padding"};
    for (int k = 0; k < 2; k++) {
        const json_t *x = json_object_get(root, off[k]);
        if (x && !json_is_null(x))
            return hf_bad(&L->c, off[k],
                          "is set; it changes the ids encode gives and is not supported (expected null)");
    }
    const json_t *model = json_object_get(root, "model"), *added = json_object_get(root, "added_tokens");
    if (!model) return hf_bad(&L->c, "model", "missing");
    TFC_TRY(read_model_options(L, model));
    TFC_TRY(hf_read_normalizer(&L->c, json_object_get(root, "normalizer"), L->h));
    TFC_TRY(hf_read_pre_tokenizer(&L->c, json_object_get(root, "pre_tokenizer"), &L->p));
    TFC_TRY(hf_read_decoder(&L->c, json_object_get(root, "decoder"), &L->p));
    TFC_TRY(hf_read_post_processor(&L->c, json_object_get(root, "post_processor"), &L->p));
    L->h->char_mode = !L->p.byte_level;
    if (L->p.dec_byte_level != L->p.byte_level)
        return hf_bad(&L->c, "decoder",
                      L->p.byte_level ? "a ByteLevel model needs the ByteLevel decoder"
                                      : "the ByteLevel decoder needs a ByteLevel pre-tokenizer");
    L->h->metaspace = L->p.metaspace;
    L->h->ms_prepend = L->p.ms_prepend;
    L->h->ms_split = L->p.ms_split;
    L->h->strip_char = (uint8_t)L->p.strip_char;
    L->h->strip_start = L->p.strip_start;
    L->h->strip_stop = L->p.strip_stop;
    splitter_free(&L->t->split);
    TFC_TRY(splitter_init(L->c.fn, &L->t->split, L->p.pattern));

    const json_t *vocab = json_object_get(model, "vocab");
    L->vocab_entries = json_object_size(vocab);
    const size_t n_added = json_is_array(added) ? json_array_size(added) : 0;
    const int64_t id_limit = tok_id_limit(L->vocab_entries + n_added);
    L->id_cap = (int32_t)id_limit;
    L->text = calloc((size_t)id_limit, sizeof *L->text);
    L->in_vocab = calloc((size_t)id_limit, 1);
    if (!L->text || !L->in_vocab) return oom(L);
    TFC_TRY(read_vocab(L, vocab, id_limit));
    TFC_TRY(read_merges(L, json_object_get(model, "merges")));
    TFC_TRY(read_added(L, added, id_limit));
    TFC_TRY(start_tokens(L));
    if (flags & TFC_TOKENIZER_ADD_SPECIAL) {
        L->h->add_special = 1;
        TFC_TRY(template_ids(L, L->p.prefix, L->p.n_prefix, &L->h->prefix, &L->h->n_prefix));
        TFC_TRY(template_ids(L, L->p.suffix, L->p.n_suffix, &L->h->suffix, &L->h->n_suffix));
    }
    TFC_TRY(decoded_bytes(L));
    L->t->direct_all = L->ignore_merges;
    TFC_TRY(tok_finalize(L->c.fn, L->t));
    if (L->ignore_merges) /* tokenizers looks words up in the whole model vocabulary, added tokens' ids included */
        for (int32_t id = 0; id < L->t->n_ids; id++) {
            if (!L->in_vocab[id] || L->t->tok_kind[id] == TOK_ORDINARY) continue;
            int a;
            if (!byte_map_upsert(&L->t->direct, tok_bytes(L->t, id), L->t->span[id].len, id, &a)) return oom(L);
        }
    if (hf_build_matchers(L->h)) return oom(L);
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_load_hf_json(const char *path, uint32_t flags, tfc_tokenizer **out) {
    static const char fn[] = "tfc_tokenizer_load_hf_json";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, out);
    if (flags & ~(uint32_t)TFC_TOKENIZER_ADD_SPECIAL)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: flags is 0x%x; only TFC_TOKENIZER_ADD_SPECIAL (0x%x) is defined", fn,
                       (unsigned)flags, (unsigned)TFC_TOKENIZER_ADD_SPECIAL);
    uint8_t *buf;
    size_t len;
    TFC_TRY(tok_read_file(fn, path, &buf, &len));
    json_t *root = NULL;
    tfc_json_problem jp;
    if (tfc_json_load(buf, len, TFC_JSON_REFUSE_DUPLICATES, &root, &jp) != 0) {
        free(buf);
        if (jp.oom) return tfc_err(TFC_ERR_OOM, "%s: out of memory parsing '%s'", fn, path);
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' byte %lld: %s (a tokenizer.json is one JSON object)", fn, path,
                       jp.byte, jp.why);
    }
    free(buf);
    loader L = {.c = {fn, path}};
    tok_alphabet_inverse(L.inv);
    L.scratch = malloc(4 * TFC_TOKEN_MAX_LEN + 8);
    L.h = calloc(1, sizeof *L.h);
    tfc_status s = L.scratch && L.h ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK && !json_is_object(root)) s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' is not a JSON object", fn, path);
    if (s == TFC_OK) s = tok_create(fn, TFC_SPLIT_NONE, &L.t);
    if (s == TFC_OK) {
        L.t->hf = L.h; /* the tokenizer owns it from here */
        s = load(&L, root, flags);
    }
    json_decref(root);
    hf_pipeline_free(&L.p);
    free(L.scratch);
    free(L.text);
    free(L.in_vocab);
    if (s != TFC_OK) {
        if (L.t)
            tfc_tokenizer_release(L.t);
        else
            free(L.h); /* nothing in it yet */
        return tfc_err_in(fn, s);
    }
    *out = L.t;
    return TFC_OK;
}
