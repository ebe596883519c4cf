/* GPT-2's byte-level alphabet, read back to bytes (byte_alphabet.h). */
#include "tokenizer/byte_alphabet.h"

void tok_alphabet_inverse(int32_t inv[TOK_ALPHABET_END]) {
    for (int i = 0; i < TOK_ALPHABET_END; i++) inv[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        inv[printable ? b : 256 + extra++] = b;
    }
}

/* One UTF-8 code point from p[0..n): its length, or 0 when malformed. */
static size_t decode_one(const uint8_t *p, size_t n, uint32_t *cp) {
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    size_t k = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
    if (!k || k > n) return 0;
    uint32_t v = p[0] & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    *cp = v;
    return k;
}

long tok_alphabet_to_bytes(const int32_t inv[TOK_ALPHABET_END], const uint8_t *s, size_t n, uint8_t *out) {
    long k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t step = decode_one(s + i, n - i, &cp);
        if (!step || cp >= TOK_ALPHABET_END || inv[cp] < 0) return -1;
        out[k++] = (uint8_t)inv[cp];
        i += step;
    }
    return k;
}
