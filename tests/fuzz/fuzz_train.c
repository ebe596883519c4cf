/*
 * Fuzz target: tokenizer training on arbitrary bytes. Byte 0 picks the
 * split pattern and whether a special token is registered first; bytes
 * 1..4 the vocab size (mostly 256..1279, sometimes any int32); the rest is
 * the text. A trained tokenizer must round-trip the text it learnt from.
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5) return 0;
    int pattern = data[0] % 3;
    int32_t vocab = 256 + (int32_t)((data[1] << 8 | data[2]) % 1024);
    if (data[0] & 0x80) vocab = (int32_t)((uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | data[3] << 8 | data[4]);
    const uint8_t *text = data + 5;
    size_t len = size - 5;
    tfc_tokenizer *t = NULL;
    FUZZ_REQUIRE(tfc_tokenizer_new(pattern, &t) == TFC_OK);
    if (data[0] & 0x40) FUZZ_REQUIRE(tfc_tokenizer_add_special(t, "<|sp|>", 2000) == TFC_OK);
    if (tfc_tokenizer_train(t, (const char *)text, len, vocab) == TFC_OK) {
        int32_t n = 0;
        FUZZ_REQUIRE(tfc_tokenizer_vocab_size(t, &n) == TFC_OK && n >= 256);
        fuzz_check_round_trip(t, text, len, TFC_SPECIAL_AS_TEXT);
    }
    tfc_tokenizer_release(t);
    return 0;
}
