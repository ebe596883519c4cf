/*
 * Token files of other tools, read in place: llm.c's data shards (a
 * 256 x int32 header, then u16 or u32 tokens) and nanoGPT's headerless u16
 * train.bin / val.bin. Each shard is memory-mapped as one segment of a
 * tfc_token_file, so a corpus of many gigabytes costs address space, not
 * RAM, and batches are drawn exactly as from this library's own format.
 *
 * Every token is checked against the vocabulary here, once, rather than
 * lazily in each batch: a bad id found mid-run would stop training hours
 * in, and the caller could not say which file to fix. The pass is
 * sequential through the page cache (MADV_SEQUENTIAL), then the mapping is
 * told to expect random access for batches.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/tensor_contract.h"
#include "io/token_file.h"
#include "tfcore/io.h"

/* llm.c's dev/data/data_common.py: HEADERS_INFO and write_datafile. */
#define LLMC_HEADER_BYTES (256 * 4)
#define LLMC_MAGIC_GPT2 20240520   /* version 1, u16 tokens */
#define LLMC_MAGIC_LLAMA3 20240801 /* version 7, u32 tokens */

static int32_t get_i32(const unsigned char *p) { return (int32_t)(uint32_t)tfc_tok_get_le(p, 4); }

/* Map path whole (nothing for an empty file); *len its size. */
static tfc_status map_file(const char *fn, const char *path, void **map, size_t *len) {
    *map = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tfc_err(TFC_ERR_IO, "%s: cannot stat '%s': %s", fn, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tfc_err(TFC_ERR_IO, "%s: '%s' is not a regular file", fn, path);
    }
    *len = (size_t)st.st_size;
    if (*len == 0) {
        close(fd);
        return TFC_OK;
    }
    void *m = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) return tfc_err(TFC_ERR_IO, "%s: cannot map '%s': %s", fn, path, strerror(e));
    *map = m;
    return TFC_OK;
}

/* What a shard's header said, for its words when the contract refuses the bytes after it. */
typedef struct shard_claim {
    int64_t count; /* tokens the header claims (headerless: the whole tokens the file holds) */
    int32_t width;
    size_t len, header;
} shard_claim;

/* A shard's words for its one contract fault: tokens that do not tile the bytes after the header. */
static tfc_status shard_explain(void *ctx, const tfc_contract *c, const tfc_fault *f) {
    const shard_claim *sc = ctx;
    if (f->kind != TFC_FAULT_SPAN) return TFC_OK;
    if (!sc->header)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' is %zu bytes, an odd length for u16 tokens", c->fn, c->file, sc->len);
    return tfc_err(TFC_ERR_FORMAT, "%s: '%s' claims %lld tokens of %d bytes but holds %zu bytes after the header",
                   c->fn, c->file, (long long)sc->count, (int)sc->width, sc->len - sc->header);
}

/*
 * The loader contract for a shard (io/tensor_contract.h): its one tensor,
 * the tokens, as the header describes them (count tokens of width bytes
 * after `header` bytes), must fill the file exactly — a count that lies is
 * refused before a token is read.
 */
static tfc_status check_tokens_fill_file(const char *fn, const char *path, shard_claim *sc) {
    tfc_contract *c = NULL;
    TFC_TRY(tfc_contract_new(fn, path, "its header", &c));
    tfc_want w = TFC_WANT_INIT;
    w.name = "tokens";
    w.ndim = -1; /* their width is the format's (the magic), their values checked against the vocabulary below */
    tfc_held h = {.name = "tokens", .dtype = TFC_DTYPE_U8, .ndim = 1, .begin = sc->header};
    const int64_t bytes = sc->count * sc->width; /* |count| < 2^31, width <= 4 */
    h.dims[0] = bytes > 0 ? bytes : 0;
    h.end = (uint64_t)((int64_t)sc->header + bytes);
    tfc_status s = tfc_contract_want(c, &w);
    if (s == TFC_OK) s = tfc_contract_hold(c, &h);
    tfc_contract_set_span(c, sc->header, sc->len);
    tfc_contract_set_explain(c, shard_explain, sc);
    if (s == TFC_OK) s = tfc_contract_check(c);
    tfc_contract_free(c);
    return s;
}

/* Where shard path's tokens start and how many and how wide they are, from its header and size. */
static tfc_status parse_shard(const char *fn, const char *path, tfc_token_format format, tfc_token_seg *g) {
    const unsigned char *p = g->map;
    const size_t len = g->map_len;
    if (format == TFC_TOKENS_U16) {
        shard_claim sc = {.count = (int64_t)(len / 2), .width = 2, .len = len, .header = 0};
        TFC_TRY(check_tokens_fill_file(fn, path, &sc));
        g->ids = p;
        g->count = sc.count;
        g->width = 2;
        return TFC_OK;
    }
    if (len < LLMC_HEADER_BYTES)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' is %zu bytes, shorter than llm.c's 1024-byte header", fn, path, len);
    const int32_t magic = get_i32(p), version = get_i32(p + 4), count = get_i32(p + 8);
    int32_t want_version;
    if (magic == LLMC_MAGIC_GPT2) {
        want_version = 1;
        g->width = 2;
    } else if (magic == LLMC_MAGIC_LLAMA3) {
        want_version = 7;
        g->width = 4;
    } else {
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' is not an llm.c data shard: magic %d, want %d (GPT-2) or %d (Llama 3)",
                       fn, path, magic, LLMC_MAGIC_GPT2, LLMC_MAGIC_LLAMA3);
    }
    if (version != want_version)
        return tfc_err(version > want_version ? TFC_ERR_VERSION : TFC_ERR_FORMAT,
                       "%s: '%s' has llm.c version %d for magic %d, this library reads %d", fn, path, version, magic,
                       want_version);
    shard_claim sc = {.count = count, .width = g->width, .len = len, .header = LLMC_HEADER_BYTES};
    TFC_TRY(check_tokens_fill_file(fn, path, &sc));
    g->ids = p + LLMC_HEADER_BYTES;
    g->count = count;
    return TFC_OK;
}

/* Every token of g below vocab, else TFC_ERR_FORMAT naming the file, the token's index and its byte offset. */
static tfc_status check_ids(const char *fn, const char *path, const tfc_token_seg *g, int32_t vocab) {
    if (g->width == 2 && vocab >= 65536) return TFC_OK; /* every u16 fits */
    if (g->map) madvise(g->map, g->map_len, MADV_SEQUENTIAL);
    tfc_status s = TFC_OK;
    int64_t j = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* u16 on a little-endian host: a max over blocks the compiler vectorizes, then the slow loop finds the id */
    if (g->width == 2)
        for (; j < g->count; j += 4096) {
            const int64_t m = g->count - j < 4096 ? g->count - j : 4096;
            uint16_t block[4096], top = 0;
            memcpy(block, g->ids + (size_t)j * 2, (size_t)m * 2);
            for (int64_t k = 0; k < m; k++) top = block[k] > top ? block[k] : top;
            if (top >= vocab) break;
        }
#endif
    for (; j < g->count; j++) {
        uint64_t v = tfc_tok_get_le(g->ids + (size_t)j * (size_t)g->width, g->width);
        if (v >= (uint64_t)vocab) {
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' token %lld (byte offset %lld) is %llu, not below vocab_size %d", fn,
                        path, (long long)j,
                        (long long)((g->ids - (const unsigned char *)g->map) + j * (int64_t)g->width),
                        (unsigned long long)v, vocab);
            break;
        }
    }
    if (g->map) madvise(g->map, g->map_len, MADV_RANDOM);
    return s;
}

TFC_API tfc_status tfc_token_file_open_shards(const char *const *paths, int32_t n, tfc_token_format format,
                                              int32_t vocab_size, tfc_token_file **out) {
    const char *fn = "tfc_token_file_open_shards";
    TFC_CHECK_NOT_NULL(fn, paths);
    TFC_CHECK_NOT_NULL(fn, out);
    if (n < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d, need at least one shard", fn, n);
    if (format != TFC_TOKENS_LLMC && format != TFC_TOKENS_U16)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: format is %d, need TFC_TOKENS_LLMC (1) or TFC_TOKENS_U16 (2)", fn,
                       (int)format);
    if (vocab_size < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: vocab_size is %d, need >= 1", fn, vocab_size);
    for (int32_t i = 0; i < n; i++)
        if (!paths[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: paths[%d] is NULL", fn, i);
    tfc_token_file *f = calloc(1, sizeof *f);
    if (f && !(f->segs = calloc((size_t)n, sizeof *f->segs))) {
        free(f);
        f = NULL;
    }
    if (!f) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    f->vocab = vocab_size;
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        tfc_token_seg *g = &f->segs[i];
        f->n_segs = i + 1; /* so a failure unmaps what is mapped */
        s = map_file(fn, paths[i], &g->map, &g->map_len);
        if (s == TFC_OK) s = parse_shard(fn, paths[i], format, g);
        if (s == TFC_OK) s = check_ids(fn, paths[i], g, vocab_size);
        g->begin = f->count;
        if (s == TFC_OK) f->count += g->count;
    }
    if (s != TFC_OK) {
        tfc_token_file_free(f);
        return s;
    }
    *out = f;
    return TFC_OK;
}

#define put_le tfc_tok_put_le

TFC_API tfc_status tfc_token_file_write_shard(const char *path, const int32_t *ids, int64_t n,
                                              tfc_token_format format) {
    const char *fn = "tfc_token_file_write_shard";
    TFC_CHECK_NOT_NULL(fn, path);
    if (n < 0 || (n > 0 && !ids))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %lld with ids %p", fn, (long long)n, (const void *)ids);
    if (format != TFC_TOKENS_LLMC && format != TFC_TOKENS_U16)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: format is %d, need TFC_TOKENS_LLMC (1) or TFC_TOKENS_U16 (2)", fn,
                       (int)format);
    int32_t top = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids[%lld] is %d, negative", fn, (long long)i, ids[i]);
        if (ids[i] > top) top = ids[i];
    }
    if (format == TFC_TOKENS_U16 && top > 65535)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: id %d does not fit u16 tokens (at most 65535)", fn, top);
    if (format == TFC_TOKENS_LLMC && n > INT32_MAX)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %lld tokens, an llm.c shard holds at most %d", fn, (long long)n,
                       INT32_MAX);
    const int width = top > 65535 ? 4 : 2;
    tfc_atomic_file af;
    TFC_TRY(tfc_atomic_open(fn, path, &af));
    tfc_status s = TFC_OK;
    if (format == TFC_TOKENS_LLMC) {
        unsigned char h[LLMC_HEADER_BYTES] = {0};
        put_le(h, width == 2 ? LLMC_MAGIC_GPT2 : LLMC_MAGIC_LLAMA3, 4);
        put_le(h + 4, width == 2 ? 1 : 7, 4);
        put_le(h + 8, (uint64_t)n, 4);
        s = tfc_atomic_write(fn, &af, h, sizeof h);
    }
    if (s != TFC_OK) {
        tfc_atomic_abort(&af);
        return s;
    }
    return tfc_tok_write_ids(fn, &af, ids, n, width);
}
