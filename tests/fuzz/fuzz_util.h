/*
 * Shared by the libFuzzer targets: loaders that take a path read the fuzz
 * input from an in-memory file (memfd, named /proc/self/fd/N), so a run does
 * no disk I/O; FUZZ_REQUIRE turns a broken invariant into a crash the fuzzer
 * records.
 */
#ifndef TFC_FUZZ_UTIL_H
#define TFC_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tfcore/tfcore.h"

#define FUZZ_REQUIRE(cond)                                                                               \
    do {                                                                                                 \
        if (!(cond)) {                                                                                   \
            fprintf(stderr, "%s:%d: invariant broken: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    tfc_last_error());                                                                   \
            abort();                                                                                     \
        }                                                                                                \
    } while (0)

typedef struct fuzz_file {
    int fd;
    char path[64];
} fuzz_file;

/* Replace the content of in-memory file number `slot` (0 or 1) with data; returns its path. */
static inline const char *fuzz_file_put(int slot, const void *data, size_t len) {
    static fuzz_file files[2] = {{-1, ""}, {-1, ""}};
    fuzz_file *f = &files[slot];
    if (f->fd < 0) {
        f->fd = memfd_create("tfc-fuzz", 0);
        if (f->fd < 0) abort();
        snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
    }
    if (ftruncate(f->fd, 0) != 0) abort();
    size_t off = 0;
    while (off < len) {
        ssize_t w = pwrite(f->fd, (const char *)data + off, len - off, (off_t)off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    return f->path;
}

/* encode then decode must give back the text (special tokens decode to their text). */
static inline void fuzz_check_round_trip(const tfc_tokenizer *t, const uint8_t *text, size_t len, int32_t mode) {
    int32_t *ids = NULL;
    size_t n = 0;
    tfc_status s = tfc_tokenizer_encode(t, (const char *)text, len, mode, &ids, &n);
    if (mode == TFC_SPECIAL_DISALLOWED && s == TFC_ERR_INVALID_ARG) return;
    FUZZ_REQUIRE(s == TFC_OK);
    char *back = NULL;
    size_t blen = 0;
    FUZZ_REQUIRE(tfc_tokenizer_decode(t, ids, n, &back, &blen) == TFC_OK);
    FUZZ_REQUIRE(blen == len && (len == 0 || memcmp(back, text, len) == 0));
    tfc_free(back);
    char *utf8 = NULL;
    FUZZ_REQUIRE(tfc_tokenizer_decode_utf8(t, ids, n, &utf8, &blen) == TFC_OK);
    tfc_free(utf8);
    tfc_free(ids);
}

/* Exercise a loaded tokenizer: every token's bytes, then round trips of a fixed text and of `extra`. */
static inline void fuzz_use_tokenizer(const tfc_tokenizer *t, const uint8_t *extra, size_t n_extra) {
    static const char sample[] =
        "Hello, world! It's 2024: naïve café — 'tis   spaces\n\n\tand 12345 digits <|endoftext|>";
    int32_t vocab = 0;
    FUZZ_REQUIRE(tfc_tokenizer_vocab_size(t, &vocab) == TFC_OK && vocab >= 256);
    for (int32_t id = 0; id < vocab; id++) {
        const char *b;
        size_t len;
        int32_t sp;
        if (tfc_tokenizer_token_bytes(t, id, &b, &len, &sp) == TFC_OK) FUZZ_REQUIRE(len > 0 && b != NULL);
    }
    fuzz_check_round_trip(t, (const uint8_t *)sample, sizeof sample - 1, TFC_SPECIAL_AS_TEXT);
    fuzz_check_round_trip(t, (const uint8_t *)sample, sizeof sample - 1, TFC_SPECIAL_ALLOWED);
    fuzz_check_round_trip(t, extra, n_extra > 512 ? 512 : n_extra, TFC_SPECIAL_AS_TEXT);
}

#endif
