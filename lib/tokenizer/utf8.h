/*
 * UTF-8 for the tokenizer: well-formedness by Unicode's definition (table
 * 3-7: no overlongs, no surrogates, nothing above U+10FFFF), the
 * replacement of ill-formed input with U+FFFD, and code points of text
 * already known to be well-formed.
 */
#ifndef TFC_TOKENIZER_UTF8_H
#define TFC_TOKENIZER_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * Length of the well-formed sequence at p[0..n) (1 to 4), or 0 with *bad
 * the length of its maximal ill-formed subpart: a lead byte and the
 * continuation bytes that could still have begun a well-formed sequence
 * (Unicode's "maximal subpart" practice), else 1.
 */
size_t utf8_valid_len(const uint8_t *p, size_t n, size_t *bad);

/*
 * s[0..n) with every maximal ill-formed subpart replaced with U+FFFD, as
 * Python's errors="replace", Node's Buffer.toString and Rust's
 * String::from_utf8_lossy do. 0: s is well-formed (nothing allocated);
 * 1: *out is a new malloc'd copy of *out_n bytes plus a NUL; -1: out of
 * memory.
 */
int utf8_replace_invalid(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n);

/* The code point at p of well-formed text, and its length in *len. */
static inline uint32_t utf8_decode(const uint8_t *p, size_t *len) {
    uint8_t c = p[0];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    if (c < 0xE0) {
        *len = 2;
        return (uint32_t)(c & 0x1F) << 6 | (p[1] & 0x3F);
    }
    if (c < 0xF0) {
        *len = 3;
        return (uint32_t)(c & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    }
    *len = 4;
    return (uint32_t)(c & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 | (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
}

/* Length of the sequence whose lead byte is c (1 to 4), for well-formed text. */
static inline size_t utf8_seq_len(uint8_t c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* cp (a scalar value) as UTF-8 into out (4 bytes of room); returns the length. */
static inline size_t utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

#endif
