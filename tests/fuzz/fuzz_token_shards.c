/*
 * Fuzz target: other tools' token files (tfc_token_file_open_shards), then
 * every token read and a batch drawn. Byte 0: bit 0 = format (0 llm.c,
 * 1 headerless u16), bit 1 = two shards (the rest split in half, so a
 * window can cross a boundary); byte 1 picks vocab_size (1 + 257·b, or
 * Llama 3's 128256 for 255). The rest is the file(s).
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const tfc_token_format fmt = data[0] & 1 ? TFC_TOKENS_U16 : TFC_TOKENS_LLMC;
    const int two = (data[0] >> 1) & 1;
    const int32_t vocab = data[1] == 255 ? 128256 : 1 + 257 * (int32_t)data[1];
    data += 2;
    size -= 2;
    const size_t half = two ? size / 2 : size;
    const char *paths[2];
    paths[0] = fuzz_file_put(0, data, half);
    if (two) paths[1] = fuzz_file_put(1, data + half, size - half);
    tfc_token_file *f = NULL;
    if (tfc_token_file_open_shards(paths, two ? 2 : 1, fmt, vocab, &f) != TFC_OK) {
        FUZZ_REQUIRE(f == NULL);
        return 0;
    }
    int64_t n = tfc_token_file_count(f);
    FUZZ_REQUIRE(n >= 0 && (uint64_t)n * 2 <= size && tfc_token_file_vocab_size(f) == vocab);
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    /* every token was checked at open: reading them all cannot fail */
    FUZZ_REQUIRE(tfc_token_file_read(f, 0, n, ids) == TFC_OK);
    for (int64_t i = 0; i < n; i++) FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < vocab);
    int32_t one;
    FUZZ_REQUIRE(tfc_token_file_read(f, n, 1, &one) != TFC_OK); /* one past the end */
    if (n >= 2) {
        tfc_tensor *x = NULL, *y = NULL;
        int32_t T = n - 1 < 4 ? (int32_t)(n - 1) : 4;
        FUZZ_REQUIRE(tfc_token_file_batch(f, 0, n, 2, T, 7, 1, &x, &y) == TFC_OK);
        const int32_t *xv = tfc_tensor_data(x), *yv = tfc_tensor_data(y);
        for (int32_t b = 0; b < 2; b++) /* y is x shifted by one within the window */
            for (int32_t t = 0; t + 1 < T; t++) FUZZ_REQUIRE(yv[b * T + t] == xv[b * T + t + 1]);
        tfc_tensor_release(x);
        tfc_tensor_release(y);
    }
    free(ids);
    tfc_token_file_close(f);
    return 0;
}
