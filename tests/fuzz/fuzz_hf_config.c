/*
 * Fuzz target: Hugging Face config.json (lib/model/gpt_hf.c, parsed by
 * jansson through lib/io/json.h). The input is config.json of a directory
 * whose model.safetensors is a tiny GPT-2's (n_layer 1, n_head 2, n_embd 8,
 * n_positions 8, vocab_size 16), read by tfc_gpt_load_hf as a user's would
 * be. Invariants: a refused directory hands out nothing; a loaded model has
 * a config tfc_gpt_check_config accepts, with an epsilon in (0, 1].
 */
#include "fuzz_json_util.h"

static void setup(void) {
    static int done;
    if (done) return;
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 8, c.vocab_size = 16;
    tfc_gpt *m = NULL;
    if (tfc_gpt_new(&c, 1, &m) != TFC_OK || tfc_gpt_save_hf(m, fuzz_scratch_dir(), -1, -1) != TFC_OK) abort();
    tfc_gpt_release(m);
    done = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    fuzz_scratch_put("config.json", data, size);
    tfc_gpt *m = NULL;
    if (tfc_gpt_load_hf(fuzz_scratch_dir(), &m) != TFC_OK) {
        FUZZ_REQUIRE(m == NULL);
        return 0;
    }
    FUZZ_REQUIRE(m != NULL);
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    FUZZ_REQUIRE(tfc_gpt_get_config(m, &c) == TFC_OK);
    FUZZ_REQUIRE(c.n_layer == 1 && c.n_embd == 8 && c.vocab_size == 16 && c.ln_eps > 0 && c.ln_eps <= 1);
    tfc_gpt_release(m);
    return 0;
}
