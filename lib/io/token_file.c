/*
 * Token files: a 32-byte header then the ids as u16 (vocab <= 65536) or
 * u32, little-endian, memory-mapped for training so a corpus of any size
 * costs no RAM; random batches are drawn from the Philox stream so a
 * (seed, step) pair always names the same batch — which is what makes a
 * resumed run continue exactly.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/rng.h"
#include "io/atomic_file.h"
#include "io/token_file.h"
#include "tfcore/io.h"

#define TOK_MAGIC "TFCTOKS"
#define TOK_VERSION 1u
#define TOK_HEADER 32

#define put_le tfc_tok_put_le
#define get_le tfc_tok_get_le

tfc_status tfc_tok_write_ids(const char *fn, struct tfc_atomic_file *af, const int32_t *ids, int64_t n, int width) {
    unsigned char buf[4096];
    tfc_status s = TFC_OK;
    for (int64_t i = 0; i < n && s == TFC_OK;) {
        size_t k = 0;
        for (; k + (size_t)width <= sizeof buf && i < n; k += (size_t)width, i++)
            put_le(buf + k, (uint64_t)ids[i], width);
        s = tfc_atomic_write(fn, af, buf, k);
    }
    if (s == TFC_OK) return tfc_atomic_commit(fn, af);
    tfc_atomic_abort(af);
    return s;
}

TFC_API tfc_status tfc_token_file_write(const char *path, const int32_t *ids, int64_t n, int32_t vocab_size) {
    const char *fn = "tfc_token_file_write";
    TFC_CHECK_NOT_NULL(fn, path);
    if (n < 0 || (n > 0 && !ids))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %lld with ids %p", fn, (long long)n, (const void *)ids);
    if (vocab_size < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: vocab_size is %d, need >= 1", fn, vocab_size);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab_size)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids[%lld] is %d, outside [0, %d)", fn, (long long)i, ids[i],
                           vocab_size);
    const int width = vocab_size <= 65536 ? 2 : 4;
    unsigned char h[TOK_HEADER] = {0};
    memcpy(h, TOK_MAGIC, 8);
    put_le(h + 8, TOK_VERSION, 4);
    put_le(h + 12, (uint64_t)width, 4);
    put_le(h + 16, (uint64_t)n, 8);
    put_le(h + 24, (uint64_t)vocab_size, 4);
    tfc_atomic_file af;
    TFC_TRY(tfc_atomic_open(fn, path, &af));
    tfc_status s = tfc_atomic_write(fn, &af, h, sizeof h);
    if (s != TFC_OK) {
        tfc_atomic_abort(&af);
        return s;
    }
    return tfc_tok_write_ids(fn, &af, ids, n, width);
}

TFC_API tfc_status tfc_token_file_open(const char *path, tfc_token_file **out) {
    const char *fn = "tfc_token_file_open";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, out);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return tfc_err(TFC_ERR_IO, "%s: cannot stat '%s': %s", fn, path, strerror(errno));
    }
    size_t len = (size_t)st.st_size;
    if (len < TOK_HEADER) {
        close(fd);
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' is %zu bytes, shorter than the 32-byte header", fn, path, len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return tfc_err(TFC_ERR_IO, "%s: cannot map '%s': %s", fn, path, strerror(errno));
    const unsigned char *h = map;
    tfc_status s = TFC_OK;
    uint64_t version = get_le(h + 8, 4), width = get_le(h + 12, 4), count = get_le(h + 16, 8),
             vocab = get_le(h + 24, 4);
    if (memcmp(h, TOK_MAGIC, 8) != 0)
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' is not a token file (bad magic)", fn, path);
    else if (version != TOK_VERSION)
        s = tfc_err(version > TOK_VERSION ? TFC_ERR_VERSION : TFC_ERR_FORMAT,
                    "%s: '%s' has version %llu, this library reads %u", fn, path, (unsigned long long)version,
                    TOK_VERSION);
    else if (width != 2 && width != 4)
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' has token width %llu, need 2 or 4", fn, path, (unsigned long long)width);
    else if (vocab < 1 || vocab > INT32_MAX || (width == 2 && vocab > 65536))
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' has vocab_size %llu with width %llu", fn, path, (unsigned long long)vocab,
                    (unsigned long long)width);
    else if (count > (len - TOK_HEADER) / width || count * width != len - TOK_HEADER)
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' claims %llu tokens but holds %zu bytes of data", fn, path,
                    (unsigned long long)count, len - TOK_HEADER);
    tfc_token_file *f = s == TFC_OK ? calloc(1, sizeof *f) : NULL;
    if (f && !(f->segs = calloc(1, sizeof *f->segs))) {
        free(f);
        f = NULL;
    }
    if (s == TFC_OK && !f) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s != TFC_OK) {
        munmap(map, len);
        return s;
    }
    f->segs[0] = (tfc_token_seg){
        .map = map, .map_len = len, .ids = h + TOK_HEADER, .count = (int64_t)count, .width = (int32_t)width};
    f->n_segs = 1;
    f->count = (int64_t)count;
    f->vocab = (int32_t)vocab;
    *out = f;
    return TFC_OK;
}

void tfc_token_file_free(tfc_token_file *f) {
    if (!f) return;
    for (int32_t i = 0; i < f->n_segs; i++)
        if (f->segs[i].map) munmap(f->segs[i].map, f->segs[i].map_len);
    free(f->segs);
    free(f);
}

TFC_API void tfc_token_file_close(tfc_token_file *f) { tfc_token_file_free(f); }

TFC_API int64_t tfc_token_file_count(const tfc_token_file *f) { return f ? f->count : 0; }
TFC_API int32_t tfc_token_file_vocab_size(const tfc_token_file *f) { return f ? f->vocab : 0; }

/* The segment holding global token i (0 <= i < f->count). */
static int32_t seg_of(const tfc_token_file *f, int64_t i) {
    int32_t lo = 0, hi = f->n_segs - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (f->segs[mid].begin <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Tokens [start, start + n), in range; runs across segment boundaries (shards read as one stream). */
static tfc_status read_ids(const char *fn, const tfc_token_file *f, int64_t start, int64_t n, int32_t *ids) {
    int32_t k = n > 0 ? seg_of(f, start) : 0;
    for (int64_t i = 0; i < n; k++) {
        const tfc_token_seg *g = &f->segs[k];
        for (int64_t j = start + i - g->begin; j < g->count && i < n; j++, i++) {
            uint64_t v = get_le(g->ids + (size_t)j * (size_t)g->width, g->width);
            if (v >= (uint64_t)f->vocab)
                return tfc_err(TFC_ERR_FORMAT, "%s: token %lld is %llu, not below vocab_size %d", fn,
                               (long long)(start + i), (unsigned long long)v, f->vocab);
            ids[i] = (int32_t)v;
        }
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_token_file_read(const tfc_token_file *f, int64_t start, int64_t n, int32_t *ids) {
    const char *fn = "tfc_token_file_read";
    TFC_CHECK_NOT_NULL(fn, f);
    if (n > 0) TFC_CHECK_NOT_NULL(fn, ids);
    if (start < 0 || n < 0 || start > f->count || n > f->count - start)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: start %lld, n %lld is outside the file's %lld tokens", fn,
                       (long long)start, (long long)n, (long long)f->count);
    return read_ids(fn, f, start, n, ids);
}

TFC_API tfc_status tfc_token_file_batch(const tfc_token_file *f, int64_t begin, int64_t end, int32_t B, int32_t T,
                                        uint64_t seed, uint64_t step, tfc_tensor **x, tfc_tensor **y) {
    const char *fn = "tfc_token_file_batch";
    TFC_CHECK_NOT_NULL(fn, f);
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_CHECK_NOT_NULL(fn, y);
    if (B < 1 || T < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: B is %d and T is %d, need >= 1", fn, B, T);
    if (begin < 0 || end > f->count || end < begin || end - begin < (int64_t)T + 1)
        return tfc_err(
            TFC_ERR_INVALID_ARG,
            "%s: range [begin %lld, end %lld) of a %lld-token file cannot hold a window of T+1 = %lld tokens", fn,
            (long long)begin, (long long)end, (long long)f->count, (long long)T + 1);
    const uint64_t choices = (uint64_t)(end - begin - T); /* window starts begin .. end-T-1 */
    int32_t *win = malloc(((size_t)T + 1) * sizeof *win);
    int32_t *xs = malloc((size_t)B * (size_t)T * sizeof *xs), *ys = malloc((size_t)B * (size_t)T * sizeof *ys);
    tfc_status s = (!win || !xs || !ys) ? tfc_err(TFC_ERR_OOM, "%s: out of memory", fn) : TFC_OK;
    for (int32_t b = 0; b < B && s == TFC_OK; b++) {
        uint32_t w[4];
        tfc_philox4x32_10(seed, step * (uint64_t)B + (uint64_t)b, w);
        uint64_t r = ((uint64_t)w[0] << 32 | w[1]) % choices;
        s = read_ids(fn, f, begin + (int64_t)r, (int64_t)T + 1, win);
        if (s == TFC_OK) {
            memcpy(xs + (size_t)b * (size_t)T, win, (size_t)T * sizeof *win);
            memcpy(ys + (size_t)b * (size_t)T, win + 1, (size_t)T * sizeof *win);
        }
    }
    tfc_tensor *tx = NULL, *ty = NULL;
    const int64_t dims[2] = {B, T};
    if (s == TFC_OK) s = tfc_tensor_from_data(xs, dims, 2, TFC_DTYPE_I32, &tx);
    if (s == TFC_OK) s = tfc_tensor_from_data(ys, dims, 2, TFC_DTYPE_I32, &ty);
    free(win);
    free(xs);
    free(ys);
    if (s != TFC_OK) {
        tfc_tensor_release(tx);
        return tfc_err_in(fn, s);
    }
    *x = tx;
    *y = ty;
    return TFC_OK;
}
