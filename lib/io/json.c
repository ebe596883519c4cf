/*
 * JSON reading and writing helpers (json.h). One strict reader for the
 * library: a document is untrusted input, so every step checks the end of
 * the range and nesting is bounded.
 */
#include "io/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* ---- writing ----------------------------------------------------------------------- */

void tfc_sb_put(tfc_strbuf *b, const char *s, size_t len) {
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

void tfc_sb_str(tfc_strbuf *b, const char *s) { tfc_sb_put(b, s, strlen(s)); }

void tfc_sb_json_string(tfc_strbuf *b, const char *s) {
    tfc_sb_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            tfc_sb_put(b, esc, 2);
        } else if (*c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *c);
            tfc_sb_put(b, esc, 6);
        } else {
            tfc_sb_put(b, (const char *)c, 1);
        }
    }
    tfc_sb_put(b, "\"", 1);
}

/* ---- reading ----------------------------------------------------------------------- */

tfc_status tfc_json_error(tfc_json *j, const char *why) {
    return tfc_err(TFC_ERR_FORMAT, "%s: malformed %s at byte %lld: %s", j->fn, j->what, (long long)(j->p - j->start),
                   why);
}

void tfc_json_skip_ws(tfc_json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

int tfc_json_accept(tfc_json *j, char c) {
    tfc_json_skip_ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

static void put_utf8(tfc_strbuf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 63));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 63));
        u[2] = (char)(0x80 | (cp & 63));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 63));
        u[2] = (char)(0x80 | (cp >> 6 & 63));
        u[3] = (char)(0x80 | (cp & 63));
        n = 4;
    }
    tfc_sb_put(b, u, n);
}

static int hex4(const char *p, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0'
            : c >= 'a' && c <= 'f'   ? c - 'a' + 10
            : c >= 'A' && c <= 'F'   ? c - 'A' + 10
                                     : -1;
        if (d < 0) return 0;
        *v = *v * 16 + (uint32_t)d;
    }
    return 1;
}

tfc_status tfc_json_string(tfc_json *j, char **out) {
    if (!tfc_json_accept(j, '"')) return tfc_json_error(j, "expected a string");
    tfc_strbuf b = {0};
    tfc_sb_put(&b, "", 0);
    for (;;) {
        if (j->p >= j->end) {
            free(b.p);
            return tfc_json_error(j, "unterminated string");
        }
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"') break;
        if (c < 0x20) {
            free(b.p);
            return tfc_json_error(j, "control character in a string");
        }
        if (c != '\\') {
            tfc_sb_put(&b, (const char *)&c, 1);
            continue;
        }
        if (j->p >= j->end) break;
        char e = *j->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            tfc_sb_put(&b, &map[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || j->end - j->p < 4 || !hex4(j->p, &cp)) {
            free(b.p);
            return tfc_json_error(j, "bad escape in a string");
        }
        j->p += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {
            if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || !hex4(j->p + 2, &lo) || lo < 0xDC00 ||
                lo > 0xDFFF) {
                free(b.p);
                return tfc_json_error(j, "unpaired surrogate in a string");
            }
            j->p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
            free(b.p);
            return tfc_json_error(j, "unpaired surrogate in a string");
        }
        if (cp == 0) {
            free(b.p);
            return tfc_json_error(j, "NUL character in a string");
        }
        put_utf8(&b, cp);
    }
    if (b.oom) {
        free(b.p);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", j->fn);
    }
    *out = b.p;
    return TFC_OK;
}

tfc_status tfc_json_uint(tfc_json *j, uint64_t *v) {
    tfc_json_skip_ws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return tfc_json_error(j, "expected a non-negative integer");
    if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return tfc_json_error(j, "leading zero in a number");
    uint64_t x = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (x > (UINT64_C(1) << 62) / 5) return tfc_json_error(j, "integer too large");
        x = x * 10 + (uint64_t)(*j->p++ - '0');
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return tfc_json_error(j, "expected an integer");
    *v = x;
    return TFC_OK;
}

static int is_digit(const tfc_json *j) { return j->p < j->end && *j->p >= '0' && *j->p <= '9'; }

tfc_status tfc_json_number(tfc_json *j, double *v) {
    tfc_json_skip_ws(j);
    /* JSON's grammar checked here, then strtod on a bounded copy (the range is not NUL-terminated) */
    const char *b = j->p;
    if (j->p < j->end && *j->p == '-') j->p++;
    if (!is_digit(j)) return tfc_json_error(j, "expected a number");
    if (*j->p == '0') {
        j->p++;
        if (is_digit(j)) return tfc_json_error(j, "leading zero in a number");
    }
    while (is_digit(j)) j->p++;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!is_digit(j)) return tfc_json_error(j, "expected digits after '.'");
        while (is_digit(j)) j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        if (!is_digit(j)) return tfc_json_error(j, "expected digits in an exponent");
        while (is_digit(j)) j->p++;
    }
    char buf[64];
    const size_t n = (size_t)(j->p - b);
    if (n >= sizeof buf) return tfc_json_error(j, "number too long");
    memcpy(buf, b, n);
    buf[n] = 0;
    *v = strtod(buf, NULL);
    if (!isfinite(*v)) return tfc_json_error(j, "number out of range");
    return TFC_OK;
}

static int word(tfc_json *j, const char *w) {
    const size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0) return 0;
    j->p += n;
    return 1;
}

tfc_status tfc_json_literal(tfc_json *j, int *v) {
    tfc_json_skip_ws(j);
    if (word(j, "true"))
        *v = 1;
    else if (word(j, "false"))
        *v = 0;
    else if (word(j, "null"))
        *v = -1;
    else
        return tfc_json_error(j, "expected true, false or null");
    return TFC_OK;
}

static tfc_status skip_at(tfc_json *j, int depth) {
    if (depth > 64) return tfc_json_error(j, "nested more than 64 deep");
    tfc_json_skip_ws(j);
    if (j->p >= j->end) return tfc_json_error(j, "expected a value");
    const char c = *j->p;
    if (c == '"') {
        char *s = NULL;
        TFC_TRY(tfc_json_string(j, &s));
        free(s);
        return TFC_OK;
    }
    if (c == '{' || c == '[') {
        const char close = c == '{' ? '}' : ']';
        j->p++;
        if (tfc_json_accept(j, close)) return TFC_OK;
        do {
            if (c == '{') {
                char *k = NULL;
                TFC_TRY(tfc_json_string(j, &k));
                free(k);
                if (!tfc_json_accept(j, ':')) return tfc_json_error(j, "expected ':'");
            }
            TFC_TRY(skip_at(j, depth + 1));
        } while (tfc_json_accept(j, ','));
        if (!tfc_json_accept(j, close)) return tfc_json_error(j, c == '{' ? "expected '}'" : "expected ']'");
        return TFC_OK;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        double d;
        return tfc_json_number(j, &d);
    }
    int v;
    return tfc_json_literal(j, &v);
}

tfc_status tfc_json_skip(tfc_json *j) { return skip_at(j, 0); }
