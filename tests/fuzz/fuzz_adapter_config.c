/*
 * Fuzz target: PEFT's adapter_config.json (lib/model/gpt_lora.c, parsed by
 * jansson through lib/io/json.h). The input is adapter_config.json of a
 * directory whose adapter_model.safetensors holds rank-2 adapters on every
 * attn.c_attn of a tiny GPT-2 without tfc.lora.* metadata (as PEFT writes
 * them), so lora_alpha, r, use_rslora and the refused settings come from the
 * input; tfc_gpt_load_lora reads it as a user's would be. Invariants: a
 * refused file leaves the model without adapters; loaded adapters have the
 * tensors' rank and a finite alpha > 0.
 */
#include <math.h>

#include "fuzz_json_util.h"

static tfc_gpt *fresh_model(void) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 8, c.vocab_size = 16;
    tfc_gpt *m = NULL;
    if (tfc_gpt_new(&c, 1, &m) != TFC_OK) abort();
    return m;
}

static void setup(void) {
    static int done;
    if (done) return;
    tfc_gpt *m = fresh_model();
    tfc_lora_config lc = TFC_LORA_CONFIG_INIT;
    lc.rank = 2, lc.alpha = 4.0, lc.targets = "c_attn";
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    char path[128];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", fuzz_scratch_dir());
    if (tfc_gpt_add_lora(m, &lc) != TFC_OK || tfc_gpt_lora_params(m, &n, &names, &ps) != TFC_OK ||
        tfc_safetensors_save(path, names, ps, n, NULL, NULL, 0) != TFC_OK)
        abort();
    tfc_gpt_release(m);
    done = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tfc_gpt *m;
    setup();
    if (!m) m = fresh_model();
    fuzz_scratch_put("adapter_config.json", data, size);
    tfc_lora_config got = {.struct_size = sizeof got};
    if (tfc_gpt_load_lora(m, fuzz_scratch_dir()) != TFC_OK) {
        FUZZ_REQUIRE(tfc_gpt_get_lora_config(m, &got) == TFC_OK && got.rank == 0);
        return 0;
    }
    FUZZ_REQUIRE(tfc_gpt_get_lora_config(m, &got) == TFC_OK);
    FUZZ_REQUIRE(got.rank == 2 && isfinite(got.alpha) && got.alpha > 0);
    tfc_gpt_release(m); /* adapters are the model's until merged: a new base for the next input */
    m = NULL;
    return 0;
}
