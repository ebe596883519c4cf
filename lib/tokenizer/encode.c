/*
 * Text -> ids: special tokens (per tfc_special_mode), the split into
 * chunks (for a tokenizer.json, its whole pipeline: hf_encode.c), and per
 * chunk, in order of cost:
 *   1. one byte: its byte token;
 *   2. a chunk of at most 8 bytes met recently: the `hot` table, a small
 *      direct-mapped cache that stays in L1/L2 (word frequencies are
 *      Zipfian, so it answers most chunks of prose);
 *   3. the whole chunk is a token (the `direct` map): that id;
 *   4. the chunk was seen before in this call: the cached ids;
 *   5. otherwise byte-pair merging (bpe_merge.c), then cache the result.
 * Steps 2-4 only remember what steps 3-5 computed, so they never change
 * the result.
 * The cache belongs to one call (or one batch worker), never to the
 * tokenizer, so encoding never writes shared state and is thread-safe.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer/tokenizer_impl.h"

#define CACHE_MAX_LEN 255           /* longer chunks are rare; their ids count fits 8 bits */
#define CACHE_MAX_ENTRIES (1 << 18) /* then start over, bounding memory */

/* A chunk of 1..8 bytes (zero-padded into key) and its ids, when at most 4. */
typedef struct hot_entry {
    uint64_t key;
    uint32_t len; /* 0: empty */
    uint32_t n;
    int32_t ids[4];
} hot_entry;

#define HOT_MAX_BITS 13 /* 8192 entries x 32 bytes = 256 KiB */

typedef struct enc_state {
    hot_entry *hot;
    int hot_shift;  /* index = hash >> hot_shift */
    byte_map cache; /* chunk bytes -> (offset in cache_ids) << 8 | count */
    ids_vec cache_ids;
    size_t *next_at; /* per special token: its next occurrence (SIZE_MAX none) */
} enc_state;

static void enc_state_free(enc_state *st) {
    free(st->hot);
    byte_map_free(&st->cache);
    free(st->cache_ids.v);
    free(st->next_at);
    memset(st, 0, sizeof *st);
}

/* Sized to the text: small calls do not pay for zeroing a big table. */
static int hot_init(enc_state *st, size_t text_len) {
    if (st->hot) return 0;
    int bits = 6;
    while (bits < HOT_MAX_BITS && ((size_t)1 << bits) * 16 < text_len) bits++;
    st->hot = calloc((size_t)1 << bits, sizeof *st->hot);
    st->hot_shift = 64 - bits;
    return st->hot ? 0 : -1;
}

static int encode_chunk_slow(const tfc_tokenizer *t, enc_state *st, const uint8_t *p, size_t n, ids_vec *out);

static inline int encode_chunk(const tfc_tokenizer *t, enc_state *st, const uint8_t *p, size_t n, ids_vec *out) {
    if (n == 1 && t->byte_id[p[0]] >= 0)
        return tok_ids_push(out, t->byte_id[p[0]]); /* < 0: a tokenizer.json drops it */
    if (n > 8) return encode_chunk_slow(t, st, p, n, out);
    uint64_t key = byte_prefix(p, n);
    hot_entry *e = &st->hot[((key + n) * 0x9E3779B97F4A7C15ull) >> st->hot_shift];
    if (e->len == n && e->key == key) {
        if (tok_ids_reserve(out, e->n)) return -1;
        for (uint32_t i = 0; i < e->n; i++) out->v[out->n++] = e->ids[i];
        return 0;
    }
    size_t before = out->n;
    if (encode_chunk_slow(t, st, p, n, out)) return -1;
    size_t got = out->n - before;
    if (got <= 4) {
        e->key = key;
        e->len = (uint32_t)n;
        e->n = (uint32_t)got;
        if (got) memcpy(e->ids, out->v + before, got * sizeof(int32_t));
    }
    return 0;
}

static int encode_chunk_slow(const tfc_tokenizer *t, enc_state *st, const uint8_t *p, size_t n, ids_vec *out) {
    uint64_t h = byte_hash(p, n);
    const byte_slot *s = byte_map_find(&t->direct, p, n, h);
    if (s->hash) return tok_ids_push(out, (int32_t)s->value);
    int cacheable = n <= CACHE_MAX_LEN;
    if (cacheable && st->cache.slots) {
        s = byte_map_find(&st->cache, p, n, h);
        if (s->hash) {
            size_t off = (size_t)(s->value >> 8), cnt = (size_t)(s->value & 255);
            if (tok_ids_reserve(out, cnt)) return -1;
            if (cnt) memcpy(out->v + out->n, st->cache_ids.v + off, cnt * sizeof(int32_t));
            out->n += cnt;
            return 0;
        }
    }
    size_t before = out->n;
    if (bpe_merge_chunk(t, p, n, out)) return -1;
    if (!cacheable) return 0;
    if (st->cache.count >= CACHE_MAX_ENTRIES) {
        byte_map_clear(&st->cache);
        st->cache_ids.n = 0;
    }
    size_t cnt = out->n - before, off = st->cache_ids.n;
    if (tok_ids_reserve(&st->cache_ids, cnt)) return -1;
    if (cnt) memcpy(st->cache_ids.v + off, out->v + before, cnt * sizeof(int32_t)); /* 0: a tokenizer.json dropped it */
    st->cache_ids.n += cnt;
    int added;
    byte_slot *c = byte_map_upsert(&st->cache, p, n, 0, &added);
    if (!c) return -1;
    c->value = (int64_t)off << 8 | (int64_t)cnt;
    return 0;
}

static tfc_status encode_ordinary(const char *fn, const tfc_tokenizer *t, enc_state *st, const uint8_t *text,
                                  size_t len, ids_vec *out) {
    if (hot_init(st, len)) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    split_iter it;
    TFC_TRY(split_iter_init(fn, &it, &t->split, text, len));
    size_t a, b;
    int rc;
    tfc_status s = TFC_OK;
    while ((rc = split_next(fn, &it, &a, &b)) > 0) {
        if (encode_chunk(t, st, text + a, b - a, out)) {
            s = tfc_err(TFC_ERR_OOM, "%s: out of memory encoding %zu bytes", fn, len);
            break;
        }
    }
    if (rc < 0) s = (tfc_status)rc;
    split_iter_free(&it);
    return s;
}

static size_t find_from(const uint8_t *text, size_t len, size_t pos, const uint8_t *needle, size_t n) {
    const uint8_t *f = memmem(text + pos, len - pos, needle, n);
    return f ? (size_t)(f - text) : SIZE_MAX;
}

/* A tokenizer.json's pipeline (hf_encode.c) hands its words to encode_chunk and its added tokens' ids to out. */
typedef struct hf_sink {
    const tfc_tokenizer *t;
    enc_state *st;
    ids_vec *out;
} hf_sink;

static int hf_word(void *ctx, const uint8_t *p, size_t n) {
    hf_sink *k = ctx;
    return encode_chunk(k->t, k->st, p, n, k->out);
}

static int hf_id(void *ctx, int32_t id) { return tok_ids_push(((hf_sink *)ctx)->out, id); }

static tfc_status encode_text(const char *fn, const tfc_tokenizer *t, enc_state *st, const uint8_t *text, size_t len,
                              int32_t mode, ids_vec *out) {
    if (t->hf) {
        if (hot_init(st, len)) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        hf_sink k = {t, st, out};
        return hf_encode(fn, t, text, len, mode, hf_word, hf_id, &k);
    }
    if (mode == TFC_SPECIAL_AS_TEXT || t->n_special == 0) return encode_ordinary(fn, t, st, text, len, out);
    if (!st->next_at) {
        st->next_at = malloc((size_t)t->n_special * sizeof *st->next_at);
        if (!st->next_at) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special_ids[k];
        st->next_at[k] = find_from(text, len, 0, tok_bytes(t, id), t->span[id].len);
    }
    size_t pos = 0;
    while (pos < len) {
        /* the leftmost special token at or after pos, the longest one there */
        size_t at = SIZE_MAX;
        int32_t best = -1;
        for (int32_t k = 0; k < t->n_special; k++) {
            int32_t id = t->special_ids[k];
            if (st->next_at[k] != SIZE_MAX && st->next_at[k] < pos)
                st->next_at[k] = find_from(text, len, pos, tok_bytes(t, id), t->span[id].len);
            if (st->next_at[k] < at ||
                (st->next_at[k] == at && at != SIZE_MAX && t->span[id].len > t->span[best].len)) {
                at = st->next_at[k];
                best = id;
            }
        }
        if (best < 0) return encode_ordinary(fn, t, st, text + pos, len - pos, out);
        if (mode == TFC_SPECIAL_DISALLOWED)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: text contains special token '%.*s' (id %d) at byte %zu and special_mode is "
                           "TFC_SPECIAL_DISALLOWED; use TFC_SPECIAL_ALLOWED or TFC_SPECIAL_AS_TEXT",
                           fn, (int)t->span[best].len, (const char *)tok_bytes(t, best), (int)best, at);
        TFC_TRY(encode_ordinary(fn, t, st, text + pos, at - pos, out));
        if (tok_ids_push(out, best)) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        pos = at + t->span[best].len;
    }
    return TFC_OK;
}

static tfc_status check_mode(const char *fn, int32_t mode) {
    if (mode != TFC_SPECIAL_AS_TEXT && mode != TFC_SPECIAL_ALLOWED && mode != TFC_SPECIAL_DISALLOWED)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: special_mode is %d, expected TFC_SPECIAL_AS_TEXT (0), TFC_SPECIAL_ALLOWED (1) or "
                       "TFC_SPECIAL_DISALLOWED (2)",
                       fn, (int)mode);
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_encode(const tfc_tokenizer *t, const char *text, size_t len, int32_t special_mode,
                                        int32_t **ids, size_t *n_ids) {
    static const char fn[] = "tfc_tokenizer_encode";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, ids);
    TFC_CHECK_NOT_NULL(fn, n_ids);
    if (!text && len > 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: text is NULL and len is %zu", fn, len);
    TFC_TRY(check_mode(fn, special_mode));
    enc_state st = {0};
    ids_vec out = {0};
    tfc_status s = TFC_OK;
    if (len && tok_ids_reserve(&out, len / 4 + 16)) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) s = encode_text(fn, t, &st, (const uint8_t *)text, len, special_mode, &out);
    enc_state_free(&st);
    if (s != TFC_OK) {
        free(out.v);
        return s;
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    } else if (out.n < out.cap) {
        int32_t *p = realloc(out.v, out.n * sizeof *p);
        if (p) out.v = p;
    }
    *ids = out.v;
    *n_ids = out.n;
    return TFC_OK;
}

/* ---- batch encode over threads ------------------------------------------ */

typedef struct batch {
    const tfc_tokenizer *t;
    const char *const *texts;
    const size_t *lens;
    size_t n_texts;
    int32_t mode;
    ids_vec *results;
    size_t next; /* next text to take, shared by the workers (atomic) */
    pthread_mutex_t lock;
    size_t failed_at; /* lowest failing text, SIZE_MAX none */
    tfc_status failed_status;
    char failed_msg[1024]; /* the failing worker's tfc_last_error, copied for the caller's thread */
} batch;

static void *batch_worker(void *arg) {
    static const char fn[] = "tfc_tokenizer_encode_batch";
    batch *b = arg;
    enc_state st = {0};
    for (;;) {
        size_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
        if (i >= b->n_texts) break;
        /* Into a vector of this worker's own: results[i] and results[i+1]
         * share a cache line, and encode_text bumps the count per token, so
         * writing b->results[i] directly made the workers false-share. */
        ids_vec out = {0};
        tfc_status s = encode_text(fn, b->t, &st, (const uint8_t *)b->texts[i], b->lens[i], b->mode, &out);
        b->results[i] = out;
        if (s != TFC_OK) {
            pthread_mutex_lock(&b->lock);
            if (i < b->failed_at) {
                b->failed_at = i;
                b->failed_status = s;
                snprintf(b->failed_msg, sizeof b->failed_msg, "%s", tfc_last_error());
            }
            pthread_mutex_unlock(&b->lock);
        }
    }
    enc_state_free(&st);
    return NULL;
}

TFC_API tfc_status tfc_tokenizer_encode_batch(const tfc_tokenizer *t, const char *const *texts, const size_t *lens,
                                              size_t n_texts, int32_t special_mode, int32_t n_threads, int32_t **ids,
                                              size_t **offsets) {
    static const char fn[] = "tfc_tokenizer_encode_batch";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, ids);
    TFC_CHECK_NOT_NULL(fn, offsets);
    if (n_texts > 0) {
        TFC_CHECK_NOT_NULL(fn, texts);
        TFC_CHECK_NOT_NULL(fn, lens);
    }
    TFC_TRY(check_mode(fn, special_mode));
    for (size_t i = 0; i < n_texts; i++)
        if (!texts[i] && lens[i] > 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: texts[%zu] is NULL and lens[%zu] is %zu", fn, i, i, lens[i]);
    if (n_texts > SIZE_MAX / sizeof(ids_vec) - 1) return tfc_err(TFC_ERR_OOM, "%s: n_texts %zu too large", fn, n_texts);
    size_t *offs = malloc((n_texts + 1) * sizeof *offs);
    batch b = {.t = t, .texts = texts, .lens = lens, .n_texts = n_texts, .mode = special_mode, .failed_at = SIZE_MAX};
    b.results = calloc(n_texts ? n_texts : 1, sizeof *b.results);
    if (!offs || !b.results) {
        free(offs);
        free(b.results);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory for %zu texts", fn, n_texts);
    }
    pthread_mutex_init(&b.lock, NULL);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nt = n_threads > 0 ? (size_t)n_threads : (size_t)(cores > 0 ? cores : 1);
    if (nt > n_texts) nt = n_texts;
    if (nt > 256) nt = 256;
    pthread_t th[256];
    size_t started = 0;
    for (size_t k = 1; k < nt; k++) { /* the calling thread is worker 0 */
        if (pthread_create(&th[started], NULL, batch_worker, &b) != 0) break;
        started++;
    }
    batch_worker(&b);
    for (size_t k = 0; k < started; k++) pthread_join(th[k], NULL);
    pthread_mutex_destroy(&b.lock);

    tfc_status s = TFC_OK;
    int32_t *all = NULL;
    if (b.failed_at != SIZE_MAX) {
        s = tfc_err(b.failed_status, "%s (texts[%zu])", b.failed_msg, b.failed_at);
    } else {
        size_t total = 0;
        for (size_t i = 0; i < n_texts; i++) {
            offs[i] = total;
            total += b.results[i].n;
        }
        offs[n_texts] = total;
        if (total) {
            all = malloc(total * sizeof *all);
            if (!all) s = tfc_err(TFC_ERR_OOM, "%s: out of memory for %zu ids", fn, total);
            for (size_t i = 0; all && i < n_texts; i++)
                if (b.results[i].n) memcpy(all + offs[i], b.results[i].v, b.results[i].n * sizeof *all);
        }
    }
    for (size_t i = 0; i < n_texts; i++) free(b.results[i].v);
    free(b.results);
    if (s != TFC_OK) {
        free(offs);
        return s;
    }
    *ids = all;
    *offsets = offs;
    return TFC_OK;
}
