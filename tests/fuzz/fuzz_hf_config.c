/*
 * Fuzz target: Hugging Face config.json (lib/model/gpt_hf.c, and
 * gpt_hf_llama.c for the Llama family, parsed by jansson through
 * lib/io/json.h). The input is config.json of two directories read by
 * tfc_gpt_load_hf as a user's would be: one whose model.safetensors is a
 * tiny GPT-2's (n_layer 1, n_head 2, n_embd 8, n_positions 8, vocab_size 16)
 * and one whose model.safetensors is a tiny Llama's (1 layer, 2 heads, 1 kv
 * head, 8 wide, MLP 12, vocab 16, untied), so a config of either schema
 * reaches the tensors. Invariants: a refused directory hands out nothing; a
 * loaded model has a config tfc_gpt_check_config accepts, with an epsilon
 * in (0, 1], of the shape its tensors have.
 */
#include <sys/stat.h>

#include "fuzz_json_util.h"

static char llama_dir[64];

static void llama_remove(void) {
    char path[128];
    static const char *const files[2] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", llama_dir, files[i]);
        unlink(path);
    }
    rmdir(llama_dir);
}

static void setup(void) {
    static int done;
    if (done) return;
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 8, c.vocab_size = 16;
    tfc_gpt *m = NULL;
    if (tfc_gpt_new(&c, 1, &m) != TFC_OK || tfc_gpt_save_hf(m, fuzz_scratch_dir(), -1, -1) != TFC_OK) abort();
    tfc_gpt_release(m);
    snprintf(llama_dir, sizeof llama_dir, "%s-llama", fuzz_scratch_dir());
    if (mkdir(llama_dir, 0700) != 0) abort();
    atexit(llama_remove);
    c.arch = TFC_GPT_ARCH_LLAMA, c.n_kv_head = 1, c.mlp_hidden = 12, c.tie_weights = 0;
    if (tfc_gpt_new(&c, 1, &m) != TFC_OK || tfc_gpt_save_hf(m, llama_dir, -1, -1) != TFC_OK) abort();
    tfc_gpt_release(m);
    done = 1;
}

static void load(const char *dir, const uint8_t *data, size_t size) {
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
    tfc_gpt *m = NULL;
    if (tfc_gpt_load_hf(dir, &m) != TFC_OK) {
        FUZZ_REQUIRE(m == NULL);
        return;
    }
    FUZZ_REQUIRE(m != NULL);
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    FUZZ_REQUIRE(tfc_gpt_get_config(m, &c) == TFC_OK);
    FUZZ_REQUIRE(c.n_layer == 1 && c.n_embd == 8 && c.vocab_size == 16 && c.ln_eps > 0 && c.ln_eps <= 1);
    tfc_gpt_release(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    load(fuzz_scratch_dir(), data, size);
    load(llama_dir, data, size);
    return 0;
}
