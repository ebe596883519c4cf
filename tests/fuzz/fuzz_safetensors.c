/* Fuzz target: tfc_safetensors_load_buffer on arbitrary bytes, then every tensor and metadata pair read back. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tfc_safetensors *f = NULL;
    if (tfc_safetensors_load_buffer(data, size, &f) != TFC_OK) return 0;
    int32_t n = tfc_safetensors_count(f);
    for (int32_t i = 0; i < n; i++) {
        const char *name = NULL;
        tfc_tensor *t = NULL;
        FUZZ_REQUIRE(tfc_safetensors_get(f, i, &name, &t) == TFC_OK && name && t);
        /* a loaded tensor's bytes lie inside the file: its size cannot exceed it */
        size_t bytes = (size_t)tfc_tensor_numel(t) * tfc_dtype_size(tfc_tensor_dtype(t));
        FUZZ_REQUIRE(bytes <= size);
        void *buf = malloc(bytes ? bytes : 1);
        FUZZ_REQUIRE(tfc_tensor_copy_to_host(t, buf, bytes) == TFC_OK);
        free(buf);
        tfc_tensor *again = NULL;
        FUZZ_REQUIRE(tfc_safetensors_find(f, name, &again) == TFC_OK);
        tfc_tensor_release(again);
        tfc_tensor_release(t);
    }
    for (int32_t i = 0; i < tfc_safetensors_metadata_count(f); i++) {
        const char *k = NULL, *v = NULL, *w = NULL;
        FUZZ_REQUIRE(tfc_safetensors_metadata_at(f, i, &k, &v) == TFC_OK && k && v);
        FUZZ_REQUIRE(tfc_safetensors_metadata(f, k, &w) == TFC_OK && w);
    }
    tfc_safetensors_release(f);
    return 0;
}
