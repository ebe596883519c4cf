/*
 * Fuzz target: GPT checkpoints. tfc_gpt_load builds a model from the
 * file's metadata and tensors; tfc_gpt_load_into copies them into a small
 * existing model (the config of the seed checkpoints).
 */
#include "fuzz_util.h"

static tfc_gpt *small_model(void) {
    static tfc_gpt *m;
    if (!m) {
        tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
        c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 8, c.vocab_size = 16;
        if (tfc_gpt_new(&c, 1, &m) != TFC_OK) abort();
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_put(0, data, size);
    tfc_gpt *m = NULL;
    if (tfc_gpt_load(path, &m) == TFC_OK) {
        FUZZ_REQUIRE(m != NULL);
        tfc_gpt_release(m);
    }
    (void)tfc_gpt_load_into(small_model(), path);
    return 0;
}
