/* Reading a whole vocabulary file, with the path in every error message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

tfc_status tok_read_file(const char *fn, const char *path, uint8_t **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            return tfc_err(TFC_ERR_OOM, "%s: out of memory reading '%s'", fn, path);
        }
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1) break;
        uint8_t *b = realloc(buf, cap * 2);
        if (!b) free(buf);
        buf = b;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return tfc_err(TFC_ERR_IO, "%s: error reading '%s'", fn, path);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return TFC_OK;
}

int tok_next_line(const uint8_t *buf, size_t len, size_t *pos, const char **line, size_t *line_len) {
    if (*pos >= len) return 0;
    const uint8_t *start = buf + *pos, *nl = memchr(start, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - start) : len - *pos;
    *pos += n + (nl != NULL);
    if (n && start[n - 1] == '\r') n--;
    *line = (const char *)start;
    *line_len = n;
    return 1;
}

size_t tok_count_lines(const uint8_t *buf, size_t len) {
    size_t n = 0;
    for (const uint8_t *p = buf, *end = buf + len; p < end; n++) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    return n;
}

int tok_parse_int(const char *s, size_t n, int64_t max, int64_t *out) {
    if (n == 0 || n > 12) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) return -1;
    *out = v;
    return 0;
}
