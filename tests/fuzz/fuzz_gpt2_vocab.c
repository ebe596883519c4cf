/*
 * Fuzz target: GPT-2's encoder.json + vocab.bpe (tfc_tokenizer_load_gpt2).
 * The input is the JSON, a NUL byte, then the merges (a NUL cannot occur
 * in valid JSON, so seeds stay readable); without a NUL the merges are empty.
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_json = nul ? (size_t)(nul - data) : size;
    const char *ej = fuzz_file_put(0, data, n_json);
    const char *vb = nul ? fuzz_file_put(1, nul + 1, size - n_json - 1) : fuzz_file_put(1, "", 0);
    tfc_tokenizer *t = NULL;
    if (tfc_tokenizer_load_gpt2(ej, vb, &t) != TFC_OK) return 0;
    fuzz_use_tokenizer(t, data, n_json);
    tfc_tokenizer_release(t);
    return 0;
}
