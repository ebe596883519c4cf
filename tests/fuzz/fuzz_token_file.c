/* Fuzz target: token files (tfc_token_file_open), then every token read and a batch drawn. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_put(0, data, size);
    tfc_token_file *f = NULL;
    if (tfc_token_file_open(path, &f) != TFC_OK) return 0;
    int64_t n = tfc_token_file_count(f);
    int32_t vocab = tfc_token_file_vocab_size(f);
    FUZZ_REQUIRE(n >= 0 && (uint64_t)n * 2 <= size && vocab >= 1);
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (tfc_token_file_read(f, 0, n, ids) == TFC_OK)
        for (int64_t i = 0; i < n; i++) FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < vocab);
    free(ids);
    FUZZ_REQUIRE(tfc_token_file_read(f, n, 1, &vocab) != TFC_OK); /* one past the end */
    if (n >= 2) {
        tfc_tensor *x = NULL, *y = NULL;
        int32_t T = n - 1 < 4 ? (int32_t)(n - 1) : 4;
        if (tfc_token_file_batch(f, 0, n, 2, T, 7, 1, &x, &y) == TFC_OK) {
            FUZZ_REQUIRE(tfc_tensor_numel(x) == 2 * T && tfc_tensor_numel(y) == 2 * T);
            tfc_tensor_release(x);
            tfc_tensor_release(y);
        }
    }
    tfc_token_file_close(f);
    return 0;
}
