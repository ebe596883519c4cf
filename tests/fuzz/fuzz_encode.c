/*
 * Fuzz target: encoding arbitrary bytes with each split pattern (none,
 * GPT-2, cl100k, Llama 3, Qwen2) and each special-token mode (first byte),
 * checked by decoding back; the rest of
 * the input is the text, also encoded as a two-text batch.
 */
#include "fuzz_util.h"

static const char corpus[] =
    "The quick brown fox jumps over the lazy dog. It's 2024; we've seen 1234567 foxes!\n"
    "  Indented    text\twith tabs\r\nand CRLF. Ünïcödé wörds: naïve café, 日本語のテキスト, emoji 🙂🙂.\n"
    "<|endoftext|>I'm, you're, they'll, she'd -- 'quoted' \"double\" (parens) [brackets] {braces}\n"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbb abababababababab 0000111122223333\n";

static tfc_tokenizer *tokenizer(int pattern) {
    static tfc_tokenizer *t[5];
    if (!t[pattern]) {
        if (tfc_tokenizer_new(pattern, &t[pattern]) != TFC_OK ||
            tfc_tokenizer_train(t[pattern], corpus, sizeof corpus - 1, 600) != TFC_OK ||
            tfc_tokenizer_add_special(t[pattern], "<|endoftext|>", 600) != TFC_OK ||
            tfc_tokenizer_add_special(t[pattern], "<|end", 601) != TFC_OK)
            abort();
    }
    return t[pattern];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int pattern = data[0] % 5, mode = (data[0] / 5) % 3;
    const uint8_t *text = data + 1;
    size_t len = size - 1;
    const tfc_tokenizer *t = tokenizer(pattern);
    fuzz_check_round_trip(t, text, len, mode);
    /* a batch of the two halves gives each half's own ids */
    const char *texts[2] = {(const char *)text, (const char *)text + len / 2};
    size_t lens[2] = {len / 2, len - len / 2};
    int32_t *ids = NULL;
    size_t *offsets = NULL;
    tfc_status s = tfc_tokenizer_encode_batch(t, texts, lens, 2, mode, 1, &ids, &offsets);
    if (s == TFC_OK) {
        for (int k = 0; k < 2; k++) {
            int32_t *one = NULL;
            size_t n = 0;
            FUZZ_REQUIRE(tfc_tokenizer_encode(t, texts[k], lens[k], mode, &one, &n) == TFC_OK);
            FUZZ_REQUIRE(n == offsets[k + 1] - offsets[k] &&
                         (n == 0 || memcmp(one, ids + offsets[k], n * sizeof *one) == 0));
            tfc_free(one);
        }
        tfc_free(ids);
        tfc_free(offsets);
    } else {
        FUZZ_REQUIRE(mode == TFC_SPECIAL_DISALLOWED && s == TFC_ERR_INVALID_ARG);
    }
    return 0;
}
