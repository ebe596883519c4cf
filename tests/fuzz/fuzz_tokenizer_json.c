/*
 * Fuzz target: a Hugging Face tokenizer.json (tfc_tokenizer_load_hf_json),
 * loaded with TFC_TOKENIZER_ADD_SPECIAL when the input's length is odd. A
 * loaded tokenizer encodes a fixed text and the input itself in every
 * special mode; every id it gives is a token, decodes, and decode_utf8
 * gives well-formed UTF-8; a batch gives the single encodes. (encode and
 * decode need not round-trip here: a normalizer or an unknown token
 * changes the text, as in Hugging Face's tokenizers.)
 */
#include "fuzz_util.h"

static int well_formed(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((p[i + j] & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F) || (c == 0xF0 && p[i + 1] < 0x90) ||
            (c == 0xF4 && p[i + 1] > 0x8F))
            return 0;
        i += k;
    }
    return 1;
}

static void use(const tfc_tokenizer *t, int32_t vocab, const uint8_t *text, size_t len) {
    for (int32_t mode = 0; mode < 3; mode++) {
        int32_t *ids = NULL;
        size_t n = 0;
        tfc_status s = tfc_tokenizer_encode(t, (const char *)text, len, mode, &ids, &n);
        if (mode == TFC_SPECIAL_DISALLOWED && s == TFC_ERR_INVALID_ARG) continue;
        FUZZ_REQUIRE(s == TFC_OK);
        for (size_t i = 0; i < n; i++) {
            const char *b;
            size_t bl;
            FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < vocab &&
                         tfc_tokenizer_token_bytes(t, ids[i], &b, &bl, NULL) == TFC_OK);
        }
        char *out = NULL;
        size_t olen = 0;
        FUZZ_REQUIRE(tfc_tokenizer_decode(t, ids, n, &out, &olen) == TFC_OK);
        tfc_free(out);
        FUZZ_REQUIRE(tfc_tokenizer_decode_utf8(t, ids, n, &out, &olen) == TFC_OK);
        FUZZ_REQUIRE(well_formed((const uint8_t *)out, olen) && strlen(out) <= olen);
        tfc_free(out);
        /* the batch encoder: text and its second half */
        const char *texts[2] = {(const char *)text, (const char *)text + len / 2};
        size_t lens[2] = {len, len - len / 2};
        int32_t *all = NULL;
        size_t *offs = NULL;
        FUZZ_REQUIRE(tfc_tokenizer_encode_batch(t, texts, lens, 2, mode, 1, &all, &offs) == TFC_OK);
        FUZZ_REQUIRE(offs[1] == n && (n == 0 || memcmp(all, ids, n * sizeof *ids) == 0));
        tfc_free(all);
        tfc_free(offs);
        tfc_free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char sample[] = "Hello, world! It's 2024:  naïve café — e\xcc\x81 'tis\n\n\tand 12345 digits <s> </s> "
                                 "<|endoftext|>\xe2\x96\x81 \xf0\x9f\x99\x82 \xff\xfe";
    tfc_tokenizer *t = NULL;
    if (tfc_tokenizer_load_hf_json(fuzz_file_put(0, data, size), size & 1 ? TFC_TOKENIZER_ADD_SPECIAL : 0, &t) !=
        TFC_OK) {
        FUZZ_REQUIRE(t == NULL);
        return 0;
    }
    int32_t vocab = 0;
    FUZZ_REQUIRE(tfc_tokenizer_vocab_size(t, &vocab) == TFC_OK && vocab >= 0); /* an empty vocabulary loads */
    for (int32_t id = 0; id < vocab; id++) {
        const char *b;
        size_t len;
        int32_t sp;
        if (tfc_tokenizer_token_bytes(t, id, &b, &len, &sp) == TFC_OK) FUZZ_REQUIRE(b != NULL);
    }
    use(t, vocab, (const uint8_t *)sample, sizeof sample - 1);
    use(t, vocab, data, size > 512 ? 512 : size);
    tfc_tokenizer_release(t);
    return 0;
}
