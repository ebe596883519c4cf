/* Fuzz target: tiktoken rank files (tfc_tokenizer_load_tiktoken); the first byte picks the split pattern. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *path = fuzz_file_put(0, data + 1, size - 1);
    tfc_tokenizer *t = NULL;
    if (tfc_tokenizer_load_tiktoken(path, data[0] % 3, &t) != TFC_OK) return 0;
    fuzz_use_tokenizer(t, data + 1, size - 1);
    tfc_tokenizer_release(t);
    return 0;
}
