/* Standard base64 (RFC 4648 alphabet, '=' padding), as tiktoken files use. */
#include "tokenizer/tokenizer_impl.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int digit(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

long tok_base64_decode(const char *in, size_t n, uint8_t *out) {
    if (n == 0 || n % 4) return -1;
    size_t pad = in[n - 1] == '=' ? (in[n - 2] == '=' ? 2 : 1) : 0;
    long k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int d[4];
        for (int j = 0; j < 4; j++) {
            int last_group = i + 4 == n;
            if (last_group && j >= 4 - (int)pad)
                d[j] = 0;
            else if ((d[j] = digit(in[i + j])) < 0)
                return -1;
        }
        uint32_t v = (uint32_t)d[0] << 18 | (uint32_t)d[1] << 12 | (uint32_t)d[2] << 6 | (uint32_t)d[3];
        size_t bytes = i + 4 == n ? 3 - pad : 3;
        if (i + 4 == n && pad && (v & (pad == 1 ? 0xFFu : 0xFFFFu))) return -1; /* non-canonical bits */
        for (size_t j = 0; j < bytes; j++) out[k++] = (uint8_t)(v >> (16 - 8 * j));
    }
    return k;
}

size_t tok_base64_encode(const uint8_t *in, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        out[k++] = alphabet[v >> 18 & 63];
        out[k++] = alphabet[v >> 12 & 63];
        out[k++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        out[k++] = i + 2 < n ? alphabet[v & 63] : '=';
    }
    out[k] = 0;
    return k;
}
