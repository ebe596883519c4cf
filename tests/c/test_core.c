/* Core: versions, status names, errors, dtype conversions, Philox, allocator. */
#include "tfc_test.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/rng.h"

TFC_TEST_MAIN

TEST(version_numbers) {
    CHECK(tfc_version() == TFC_VERSION_NUMBER);
    CHECK(strcmp(tfc_version_string(), "1.0.0") == 0);
    CHECK(strstr(tfc_build_info(), "cpu") != NULL);
}

TEST(status_names_are_static_and_distinct) {
    CHECK(strcmp(tfc_status_name(TFC_OK), "TFC_OK") == 0);
    CHECK(strcmp(tfc_status_name(TFC_ERR_SHAPE), "TFC_ERR_SHAPE") == 0);
    CHECK(strcmp(tfc_status_name(TFC_ERR_NONFINITE), "TFC_ERR_NONFINITE") == 0);
    CHECK(strcmp(tfc_status_name((tfc_status)-999), "TFC_ERR_UNKNOWN") == 0);
    CHECK(sizeof(tfc_status) == 4);
}

TEST(last_error_is_never_null) {
    tfc_clear_error();
    CHECK(tfc_last_error() != NULL && tfc_last_error()[0] == '\0');
}

/* Known-answer vectors from the Random123 distribution (kat_vectors). */
TEST(philox_known_answers) {
    uint32_t w[4];
    tfc_philox4x32_10(0, 0, w);
    CHECK(w[0] == 0x6627e8d5u && w[1] == 0xe169c58du && w[2] == 0xbc57ac4cu && w[3] == 0x9b00dbd8u);
}

TEST(bf16_and_f16_round_trip) {
    CHECK(tfc_bf16_to_f32(tfc_f32_to_bf16(1.0f)) == 1.0f);
    CHECK(tfc_bf16_to_f32(tfc_f32_to_bf16(-2.5f)) == -2.5f);
    /* 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1+2^-7: ties to even gives 1. */
    CHECK(tfc_bf16_to_f32(tfc_f32_to_bf16(1.00390625f)) == 1.0f);
    CHECK(isnan(tfc_bf16_to_f32(tfc_f32_to_bf16(NAN))));
    CHECK(tfc_f16_to_f32(tfc_f32_to_f16(1.0f)) == 1.0f);
    CHECK(tfc_f16_to_f32(tfc_f32_to_f16(65504.0f)) == 65504.0f);
    CHECK(isinf(tfc_f16_to_f32(tfc_f32_to_f16(70000.0f))));
    CHECK(tfc_f32_to_f16(1.0f) == 0x3c00);
    CHECK(tfc_f32_to_f16(-2.0f) == 0xc000);
    CHECK(tfc_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    CHECK(tfc_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001);
    CHECK(isnan(tfc_f16_to_f32(tfc_f32_to_f16(NAN))));
}

TEST(allocator_reuses_blocks) {
    void *a = tfc_host_alloc(1000);
    CHECK(a != NULL && ((uintptr_t)a % 64) == 0);
    uint64_t before;
    tfc_memory_stats(&before, NULL, NULL, NULL);
    tfc_host_free(a, 1000);
    void *b = tfc_host_alloc(1000);
    uint64_t after;
    tfc_memory_stats(&after, NULL, NULL, NULL);
    CHECK(b == a);
    CHECK(after == before);
    tfc_host_free(b, 1000);
    CHECK(tfc_host_alloc((size_t)1 << 60) == NULL);
}

TEST(num_threads) {
    CHECK_OK(tfc_set_num_threads(1));
    CHECK(tfc_get_num_threads() == 1);
    CHECK_OK(tfc_set_num_threads(0));
    CHECK(tfc_get_num_threads() >= 1);
    CHECK_ERR(tfc_set_num_threads(100000), TFC_ERR_INVALID_ARG, "tfc_set_num_threads");
}
