/*
 * Fuzz target: a Hugging Face shard index, model.safetensors.index.json
 * (lib/io/hf_weights.c, parsed by jansson through lib/io/json.h). The input
 * is the index of a directory holding two small shards,
 * model-00001-of-00002.safetensors (a f32 [2,3], b bf16 [4]) and
 * model-00002-of-00002.safetensors (c f16 [3]), and no model.safetensors;
 * tfc_hf_weights_open reads it as a loader would. Invariants: a refused
 * directory hands out nothing; an opened one names only those shards, each
 * once, and lists exactly their tensors, which a loader contract then loads
 * into f32 destinations with the values the shards hold.
 */
#include "fuzz_json_util.h"
#include "io/hf_weights.h"

static const float a_vals[6] = {0, 1, 2, 3, 4, 5}, b_vals[4] = {1, -2, 0.5f, 3}, c_vals[3] = {-1, 0.25f, 8};

static void setup(void) {
    static int done;
    if (done) return;
    const int64_t da[2] = {2, 3}, db[1] = {4}, dc[1] = {3};
    tfc_tensor *a = NULL, *b32 = NULL, *c32 = NULL, *b = NULL, *c = NULL;
    if (tfc_tensor_from_data(a_vals, da, 2, TFC_DTYPE_F32, &a) != TFC_OK ||
        tfc_tensor_from_data(b_vals, db, 1, TFC_DTYPE_F32, &b32) != TFC_OK ||
        tfc_tensor_from_data(c_vals, dc, 1, TFC_DTYPE_F32, &c32) != TFC_OK ||
        tfc_cast(NULL, b32, TFC_DTYPE_BF16, &b) != TFC_OK || tfc_cast(NULL, c32, TFC_DTYPE_F16, &c) != TFC_OK)
        abort();
    char p1[160], p2[160];
    snprintf(p1, sizeof p1, "%s/model-00001-of-00002.safetensors", fuzz_scratch_dir());
    snprintf(p2, sizeof p2, "%s/model-00002-of-00002.safetensors", fuzz_scratch_dir());
    const char *n1[2] = {"a", "b"}, *n2[1] = {"c"};
    tfc_tensor *t1[2] = {a, b}, *t2[1] = {c};
    if (tfc_safetensors_save(p1, n1, t1, 2, NULL, NULL, 0) != TFC_OK ||
        tfc_safetensors_save(p2, n2, t2, 1, NULL, NULL, 0) != TFC_OK)
        abort();
    tfc_tensor *all[5] = {a, b32, c32, b, c};
    for (int i = 0; i < 5; i++) tfc_tensor_release(all[i]);
    done = 1;
}

/* Load what w holds through a contract that takes a, b and c if present; check the values. */
static void load_and_check(const tfc_hf_weights *w) {
    static const char *names[3] = {"a", "b", "c"};
    static const float *vals[3] = {a_vals, b_vals, c_vals};
    static const int64_t dims[3][2] = {{2, 3}, {4, 0}, {3, 0}};
    tfc_contract *c = NULL;
    FUZZ_REQUIRE(tfc_contract_new("fuzz_hf_index", tfc_hf_weights_path(w), "the fuzz model", &c) == TFC_OK);
    tfc_tensor *dest[3] = {0};
    for (int i = 0; i < 3; i++) {
        const int32_t nd = i == 0 ? 2 : 1;
        FUZZ_REQUIRE(tfc_tensor_zeros(dims[i], nd, TFC_DTYPE_F32, &dest[i]) == TFC_OK);
        tfc_want want = TFC_WANT_INIT;
        want.name = names[i];
        want.ndim = nd;
        memcpy(want.dims, dims[i], sizeof dims[i]);
        want.presence = TFC_WANT_OPTIONAL;
        want.dest = dest[i];
        FUZZ_REQUIRE(tfc_contract_want(c, &want) == TFC_OK);
    }
    FUZZ_REQUIRE(tfc_contract_hold_hf_weights(c, w) == TFC_OK);
    FUZZ_REQUIRE(c->n_held == tfc_hf_weights_count(w));
    FUZZ_REQUIRE(tfc_contract_load(c) == TFC_OK);
    int found = 0;
    for (int i = 0; i < 3; i++) {
        if (!tfc_contract_found(c, i)) continue;
        found++;
        const float *v = tfc_tensor_data(dest[i]);
        for (int64_t k = 0; k < tfc_tensor_numel(dest[i]); k++) FUZZ_REQUIRE(v[k] == vals[i][k]);
    }
    FUZZ_REQUIRE(found == tfc_hf_weights_count(w));
    tfc_contract_free(c);
    for (int i = 0; i < 3; i++) tfc_tensor_release(dest[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    fuzz_scratch_put("model.safetensors.index.json", data, size);
    tfc_hf_weights *w = NULL;
    if (tfc_hf_weights_open("fuzz_hf_index", fuzz_scratch_dir(), &w) != TFC_OK) {
        FUZZ_REQUIRE(w == NULL);
        return 0;
    }
    FUZZ_REQUIRE(w != NULL && tfc_hf_weights_sharded(w) == 1);
    const int32_t nf = tfc_hf_weights_file_count(w);
    FUZZ_REQUIRE(nf >= 0 && nf <= 2);
    int32_t want_count = 0;
    for (int32_t k = 0; k < nf; k++) {
        const char *f = strrchr(tfc_hf_weights_file(w, k), '/');
        FUZZ_REQUIRE(f &&
                     (strcmp(f, "/model-00001-of-00002.safetensors") == 0 ||
                      strcmp(f, "/model-00002-of-00002.safetensors") == 0));
        FUZZ_REQUIRE(k == 0 || strcmp(tfc_hf_weights_file(w, k - 1), tfc_hf_weights_file(w, k)) < 0);
        want_count += tfc_safetensors_count(tfc_hf_weights_shard(w, k));
    }
    FUZZ_REQUIRE(tfc_hf_weights_count(w) == want_count);
    load_and_check(w);
    tfc_hf_weights_free(w);
    return 0;
}
