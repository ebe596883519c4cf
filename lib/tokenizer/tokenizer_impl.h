/*
 * The tokenizer object and the internal functions the tokenizer files
 * share. A tokenizer is:
 *   - a table id -> bytes (ordinary tokens and special tokens),
 *   - byte_id[b]: the token of each single byte (every byte has one, so any
 *     input encodes),
 *   - merge rules (left, right) -> (rank, merged id), in `pairs` for lookup
 *     and in `merges` in rank order for listing and saving,
 *   - `direct`: token bytes -> id for chunks that map to one token without
 *     merging (tiktoken's whole-piece lookup),
 *   - the split pattern, compiled once;
 *   - for a tokenizer from a Hugging Face tokenizer.json, the pipeline
 *     around the model (hf.h) and each token's decoded bytes, which differ
 *     from the bytes the model works on ("▁the" decodes to " the").
 */
#ifndef TFC_TOKENIZER_IMPL_H
#define TFC_TOKENIZER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "tfcore/tokenizer.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/hf.h"
#include "tokenizer/pair_map.h"
#include "tokenizer/split.h"

#define TOK_UNUSED 0
#define TOK_ORDINARY 1
#define TOK_SPECIAL 2
#define TOK_ADDED 3 /* an added token of a tokenizer.json that is not special: always matched in the input */

/* Ids and ranks stay below 2^30 so sums and packed keys never overflow. */
#define TFC_TOKENIZER_MAX_ID (1 << 30)
#define TFC_SPECIAL_MAX_LEN 256

typedef struct tfc_merge {
    int32_t left, right, id, rank;
} tfc_merge;

/* Where a token's bytes are: one 8-byte record, so decode touches one cache line per id. */
typedef struct tok_span {
    uint32_t off, len;
} tok_span;

/* The blob keeps this many spare bytes after the last token, so decode may copy 8 bytes at a time. */
#define TOK_BLOB_SLACK 8

typedef struct ids_vec {
    int32_t *v;
    size_t n, cap;
} ids_vec;

struct tfc_tokenizer {
    tfc_splitter split;
    int32_t n_ids, cap_ids; /* n_ids = largest used id + 1 */
    tok_span *span;         /* token id's bytes: blob[span[id].off ..][.. span[id].len]; len 0 = unused */
    uint8_t *tok_kind;      /* TOK_UNUSED / TOK_ORDINARY / TOK_SPECIAL */
    uint8_t *blob;
    size_t blob_len, blob_cap;
    int32_t byte_id[256];
    tfc_merge *merges;
    int32_t n_merges, cap_merges;
    pair_map pairs;
    byte_map direct;
    /*
     * 1: every ordinary token is a whole-chunk match (tiktoken's rule,
     * for rank files); 0: only those the merges themselves rebuild from
     * their bytes (trained and GPT-2 merges files), so direct lookup never
     * changes what merging alone would give.
     */
    int32_t direct_all;
    int32_t *special_ids; /* in the order added */
    int32_t n_special, cap_special;
    tok_hf *hf; /* NULL unless loaded from a tokenizer.json */
    /* what decode gives for each id when it differs from the bytes above (tokenizer.json); else NULL */
    tok_span *dspan;
    uint8_t *dblob;
};

/* Room for `extra` more ids; 0 or -1 when out of memory. */
int tok_ids_reserve(ids_vec *v, size_t extra);

/* Append one id; 0 or -1 when out of memory. */
static inline int tok_ids_push(ids_vec *v, int32_t id) {
    if (v->n == v->cap && tok_ids_reserve(v, 1)) return -1;
    v->v[v->n++] = id;
    return 0;
}

/* A tokenizer with no tokens at all yet (loaders fill it). */
tfc_status tok_create(const char *fn, int32_t pattern, tfc_tokenizer **out);
/* Give id the bytes p[0..len) of the given kind; fails when id is used. */
tfc_status tok_set_token(const char *fn, tfc_tokenizer *t, int32_t id, const uint8_t *p, size_t len, int kind);
/* Append a merge rule; fails on a duplicate pair. */
tfc_status tok_add_merge(const char *fn, tfc_tokenizer *t, int32_t left, int32_t right, int32_t id, int32_t rank);
/*
 * After all tokens and merges are in: check every byte has a token, sort
 * merges by rank and build the direct-lookup map.
 */
tfc_status tok_finalize(const char *fn, tfc_tokenizer *t);

static inline const uint8_t *tok_bytes(const tfc_tokenizer *t, int32_t id) { return t->blob + t->span[id].off; }

/* The bytes decode gives for id: its own, or its decoded bytes when the tokenizer has them. */
static inline const uint8_t *tok_dec_bytes(const tfc_tokenizer *t, int32_t id, size_t *len) {
    if (!t->dspan) {
        *len = t->span[id].len;
        return t->blob + t->span[id].off;
    }
    *len = t->dspan[id].len;
    return t->dblob + t->dspan[id].off;
}

/*
 * Merge one chunk of bytes by rank, appending its ids to out. Uses only
 * byte_id and pairs (and, for a SentencePiece-style tokenizer.json, the
 * vocabulary's characters, byte fallback and unknown token: hf.h), never
 * the direct map or a cache. -1 when out of memory.
 */
int bpe_merge_chunk(const tfc_tokenizer *t, const uint8_t *p, size_t n, ids_vec *out);

/* Read a whole file into a new NUL-terminated buffer (free()). */
tfc_status tok_read_file(const char *fn, const char *path, uint8_t **data, size_t *len);

/*
 * Lines of a buffer: the next line (without "\n" or "\r\n") and 1, or 0 at
 * the end. The line is not NUL-terminated.
 */
int tok_next_line(const uint8_t *buf, size_t len, size_t *pos, const char **line, size_t *line_len);
/* A decimal integer of exactly n digits in [0, max]: 0 and *out, else -1. */
int tok_parse_int(const char *s, size_t n, int64_t max, int64_t *out);

/*
 * The largest id a file may use is below 2 x its entries + TOK_ID_SLACK.
 * The id table is dense (9 bytes per id up to the largest), so an id the
 * file cannot justify would cost memory out of all proportion to the file
 * ("QQ== 536870000", 15 bytes, asked for 9 GiB); with this bound a
 * loader's memory is O(file size). Real files are dense (tiktoken ranks
 * 0..n-1, GPT-2's ids 0..50256); the factor 2 leaves room for gaps and the
 * slack for special tokens placed past the vocabulary (cl100k's at
 * 100257..100276, also in a saved file of a small tokenizer).
 */
#define TOK_ID_SLACK (1 << 17)
static inline int64_t tok_id_limit(size_t entries) {
    int64_t lim = 2 * (int64_t)(entries > TFC_TOKENIZER_MAX_ID ? TFC_TOKENIZER_MAX_ID : entries) + TOK_ID_SLACK;
    return lim < TFC_TOKENIZER_MAX_ID ? lim : TFC_TOKENIZER_MAX_ID;
}
/* Number of lines in buf[0..len) (a last line without "\n" counts). */
size_t tok_count_lines(const uint8_t *buf, size_t len);

/* Longest ordinary token a file may hold. */
#define TFC_TOKEN_MAX_LEN 65536

/* Standard base64 (RFC 4648, with padding). decode: -1 on malformed input. */
long tok_base64_decode(const char *in, size_t n, uint8_t *out);
size_t tok_base64_encode(const uint8_t *in, size_t n, char *out);

#endif
