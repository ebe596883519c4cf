/* Fuzz target: libtfcore's own tokenizer files (tfc_tokenizer_load). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_put(0, data, size);
    tfc_tokenizer *t = NULL;
    if (tfc_tokenizer_load(path, &t) != TFC_OK) return 0;
    fuzz_use_tokenizer(t, data, size);
    tfc_tokenizer_release(t);
    return 0;
}
