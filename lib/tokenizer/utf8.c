/* UTF-8 well-formedness and the U+FFFD replacement of ill-formed input (utf8.h). */
#include "tokenizer/utf8.h"

#include <stdlib.h>
#include <string.h>

size_t utf8_valid_len(const uint8_t *p, size_t n, size_t *bad) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    size_t k = 1;
    for (; k <= need; k++) {
        if (k >= n) break;
        uint8_t x = p[k];
        uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (x < l || x > h) break;
    }
    if (k == need + 1) return need + 1;
    *bad = k; /* lead byte plus the continuation bytes that were still acceptable */
    return 0;
}

int utf8_replace_invalid(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n) {
    size_t i = 0, bad = 0;
    while (i < n) { /* most text is well-formed: find the first ill-formed byte without allocating */
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t v = utf8_valid_len(s + i, n - i, &bad);
        if (!v) break;
        i += v;
    }
    if (i == n) return 0;
    if (n > (SIZE_MAX - 1) / 3) return -1;
    uint8_t *o = malloc(3 * n + 1); /* each ill-formed byte becomes at most 3 bytes */
    if (!o) return -1;
    memcpy(o, s, i);
    size_t k = i;
    while (i < n) {
        size_t v = utf8_valid_len(s + i, n - i, &bad);
        if (v) {
            memcpy(o + k, s + i, v);
            k += v;
            i += v;
        } else {
            memcpy(o + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i += bad;
        }
    }
    o[k] = 0;
    *out = o;
    *out_n = k;
    return 1;
}
