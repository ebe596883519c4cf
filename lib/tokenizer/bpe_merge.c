/*
 * Byte-pair merging of one chunk: start with one token per byte, then
 * repeatedly merge the adjacent pair whose merge rule has the lowest rank,
 * the leftmost one among equal ranks, until no adjacent pair has a rule.
 * This is tiktoken's byte_pair_merge and, for ranks in training order,
 * minbpe's encode (which merges every occurrence of the lowest pair left
 * to right; one at a time leftmost-first gives the same result because a
 * pair made by a merge always ranks after the merge that made it).
 *
 * Short chunks (almost all) use flat arrays and a linear scan for the
 * minimum: O(n^2) but n is a word. Long chunks (a megabyte of one letter,
 * a long run of spaces) use a linked list and a min-heap of (rank, position)
 * with stale entries skipped when popped, O(n log n), so no input can make
 * encoding quadratic.
 *
 * The start tokens: one per byte (byte_id), or, for a SentencePiece-style
 * tokenizer.json (hf.h, char_mode), one per character, as Hugging Face's
 * BPE model (merge_word) makes them: the character's vocabulary token;
 * else, with byte_fallback, the <0xNN> token of each of its bytes; else the
 * unknown token (consecutive unknown characters sharing one with
 * fuse_unk). Merging is the same from there, lowest rank then leftmost
 * (Hugging Face's Word::merge_all orders its queue the same way).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

#define BPE_SHORT 64
#define NO_RANK INT32_MAX

/*
 * The start tokens of p[0..n) into ids (room for n); returns their count.
 * p is well-formed UTF-8 in char mode (hf_encode made it so).
 */
static size_t start_tokens(const tfc_tokenizer *t, const uint8_t *p, size_t n, int32_t *ids) {
    if (!t->hf || !t->hf->char_mode) {
        for (size_t i = 0; i < n; i++) ids[i] = t->byte_id[p[i]];
        return n;
    }
    const tok_hf *h = t->hf;
    size_t m = 0;
    int prev_unknown = 0;
    for (size_t i = 0, len; i < n; i += len) {
        len = utf8_seq_len(p[i]);
        if (len > n - i) len = n - i; /* only for text that is not UTF-8: each byte its own character */
        int64_t v;
        if (len == 1 && p[i] < 0x80) { /* byte_id holds each ASCII character's start token */
            if (!h->ascii_unknown[p[i]]) {
                ids[m++] = t->byte_id[p[i]];
                prev_unknown = 0;
                continue;
            }
        } else if (byte_map_get(&h->vocab, p + i, len, &v)) {
            ids[m++] = (int32_t)v;
            prev_unknown = 0;
            continue;
        } else if (h->byte_fallback) {
            for (size_t k = 0; k < len; k++) ids[m++] = h->fallback[p[i + k]];
            prev_unknown = 0;
            continue;
        }
        /* an unknown character: the unknown token, or nothing (tokenizers drops it when there is none) */
        if (h->unk_id >= 0 && !(prev_unknown && h->fuse_unk)) ids[m++] = h->unk_id;
        prev_unknown = 1;
    }
    return m;
}

static int merge_short(const tfc_tokenizer *t, const uint8_t *p, size_t n, ids_vec *out) {
    int32_t ids[BPE_SHORT], rank[BPE_SHORT], merged[BPE_SHORT];
    size_t m = start_tokens(t, p, n, ids);
    /* rank[i], merged[i]: the rule for the pair (ids[i], ids[i+1]) */
    for (size_t i = 0; i + 1 < m; i++)
        if (!pair_map_get(&t->pairs, ids[i], ids[i + 1], &rank[i], &merged[i])) rank[i] = NO_RANK;
    while (m > 1) {
        int32_t best = NO_RANK;
        size_t b = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] < best) {
                best = rank[i];
                b = i;
            }
        if (best == NO_RANK) break;
        ids[b] = merged[b];
        memmove(&ids[b + 1], &ids[b + 2], (m - b - 2) * sizeof ids[0]);
        if (b + 2 < m - 1) { /* pairs after the merged one shift left by one */
            memmove(&rank[b + 1], &rank[b + 2], (m - b - 3) * sizeof rank[0]);
            memmove(&merged[b + 1], &merged[b + 2], (m - b - 3) * sizeof merged[0]);
        }
        m--;
        if (b + 1 < m && !pair_map_get(&t->pairs, ids[b], ids[b + 1], &rank[b], &merged[b])) rank[b] = NO_RANK;
        if (b > 0 && !pair_map_get(&t->pairs, ids[b - 1], ids[b], &rank[b - 1], &merged[b - 1])) rank[b - 1] = NO_RANK;
    }
    if (tok_ids_reserve(out, m)) return -1;
    memcpy(out->v + out->n, ids, m * sizeof ids[0]);
    out->n += m;
    return 0;
}

/* Binary min-heap of (rank << 32 | position): lowest rank, then leftmost. */
static void heap_push(uint64_t *h, size_t *n, uint64_t x) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], x = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
    return top;
}

static int merge_long(const tfc_tokenizer *t, const uint8_t *p, size_t n_bytes, ids_vec *out) {
    if (n_bytes > INT32_MAX) return -1;
    int32_t *ids = malloc(n_bytes * sizeof *ids), *next = malloc(n_bytes * sizeof *next),
            *prev = malloc(n_bytes * sizeof *prev);
    uint64_t *heap = malloc(3 * n_bytes * sizeof *heap); /* n-1 pairs + at most 2 per merge */
    int rc = -1;
    if (!ids || !next || !prev || !heap) goto done;
    size_t hn = 0, n = start_tokens(t, p, n_bytes, ids);
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
    }
    int32_t r, m;
    for (size_t i = 0; i + 1 < n; i++)
        if (pair_map_get(&t->pairs, ids[i], ids[i + 1], &r, &m)) heap_push(heap, &hn, (uint64_t)r << 32 | i);
    while (hn > 0) {
        uint64_t top = heap_pop(heap, &hn);
        int32_t rank = (int32_t)(top >> 32), i = (int32_t)(uint32_t)top;
        int32_t j = ids[i] >= 0 ? next[i] : -1;
        /* stale: the left token was merged away, or the pair there changed */
        if (j < 0 || !pair_map_get(&t->pairs, ids[i], ids[j], &r, &m) || r != rank) continue;
        ids[i] = m;
        ids[j] = -1;
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        if (prev[i] >= 0 && pair_map_get(&t->pairs, ids[prev[i]], ids[i], &r, &m))
            heap_push(heap, &hn, (uint64_t)r << 32 | (uint32_t)prev[i]);
        if (next[i] >= 0 && pair_map_get(&t->pairs, ids[i], ids[next[i]], &r, &m))
            heap_push(heap, &hn, (uint64_t)r << 32 | (uint32_t)i);
    }
    size_t count = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) count++;
    if (tok_ids_reserve(out, count)) goto done;
    for (int32_t i = 0; i >= 0; i = next[i]) out->v[out->n++] = ids[i];
    rc = 0;
done:
    free(ids);
    free(next);
    free(prev);
    free(heap);
    return rc;
}

int bpe_merge_chunk(const tfc_tokenizer *t, const uint8_t *p, size_t n, ids_vec *out) {
    if (n == 0) return 0;
    return n <= BPE_SHORT ? merge_short(t, p, n, out) : merge_long(t, p, n, out);
}
