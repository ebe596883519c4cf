/*
 * The inside of a tfc_token_file: one or more memory-mapped segments read
 * as one stream of tokens. A file of this library's format is one segment;
 * tfc_token_file_open_shards maps each shard of another tool's format as
 * a segment, so batches, reads and the CLI's splits work the same on both.
 */
#ifndef TFC_IO_TOKEN_FILE_H
#define TFC_IO_TOKEN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/io.h"

typedef struct tfc_token_seg {
    void *map; /* NULL for an empty headerless file (nothing to map) */
    size_t map_len;
    const unsigned char *ids; /* the first token, little-endian, width bytes each */
    int64_t begin, count;     /* global index of the first token; tokens held */
    int32_t width;            /* 2 or 4 */
} tfc_token_seg;

struct tfc_token_file {
    tfc_token_seg *segs; /* sorted by begin, contiguous */
    int32_t n_segs;
    int64_t count;
    int32_t vocab;
};

/* Little-endian integer of n bytes at p. */
static inline uint64_t tfc_tok_get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* v as n little-endian bytes at p. */
static inline void tfc_tok_put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/*
 * ids[0..n) as little-endian integers of width bytes appended to af (in
 * 4 KiB pieces); on failure af is aborted. Ends with the commit on success.
 */
struct tfc_atomic_file;
tfc_status tfc_tok_write_ids(const char *fn, struct tfc_atomic_file *af, const int32_t *ids, int64_t n, int width);

/* Unmap every segment and free f (NULL accepted). */
void tfc_token_file_free(tfc_token_file *f);

#endif
