/*
 * Fuzz target: llm.c GPT-2 checkpoints (tfc_gpt_load_llmc). A refused file
 * hands out nothing; a loaded one has the header's shape (V rows of wte,
 * maxT of wpe) and the file held exactly the values that shape needs, so a
 * few header bytes can never ask for more memory than the file is long.
 */
#include "fuzz_util.h"

static int32_t le32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file_put(0, data, size);
    tfc_gpt *m = NULL;
    if (tfc_gpt_load_llmc(path, &m) != TFC_OK) {
        FUZZ_REQUIRE(m == NULL);
        return 0;
    }
    FUZZ_REQUIRE(m != NULL && size >= 1024);
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    FUZZ_REQUIRE(tfc_gpt_get_config(m, &c) == TFC_OK);
    FUZZ_REQUIRE(c.block_size == le32(data + 8) && c.vocab_size == le32(data + 12) && c.n_layer == le32(data + 16) &&
                 c.n_head == le32(data + 20) && c.n_embd == le32(data + 24) && c.bias == 1 && c.tie_weights == 1);
    /* every value came from the file: the model is no larger than it */
    const int64_t esize = le32(data + 4) == 5 ? 2 : 4;
    FUZZ_REQUIRE(tfc_gpt_num_elements(m) * esize <= (int64_t)size - 1024);
    tfc_gpt_release(m);
    return 0;
}
