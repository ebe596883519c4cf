/*
 * NFC (UAX #15): canonical decomposition, canonical ordering, canonical
 * composition.
 *
 *   1. Each code point is replaced by its full canonical decomposition:
 *      the table's one-level mapping applied until it stops, and Hangul
 *      syllables by arithmetic (S = 0xAC00 + (L*21 + V)*28 + T).
 *   2. Every run of non-starters (combining class > 0) is sorted by class,
 *      stably.
 *   3. Left to right, a character C composes with the last starter S when
 *      no character between them blocks it (one of class 0 or of class
 *      >= C's) and (S, C) is a primary composite (the table, or Hangul
 *      L+V and LV+T); the composite replaces S and C is dropped.
 *
 * Most text is already NFC: a text in which no code point is in the
 * quick-check table (class 0 and NFC_Quick_Check Yes throughout) is NFC as
 * it is, so only such texts pay for the three steps.
 */
#include "tokenizer/nfc.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/unicode_nfc_table.h"
#include "tokenizer/utf8.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7 };
enum { L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static int unsafe_cp(uint32_t cp) {
    size_t lo = 0, hi = N_OF(nfc_unsafe_ranges);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < nfc_unsafe_ranges[mid][0])
            hi = mid;
        else if (cp > nfc_unsafe_ranges[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

static uint32_t ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = N_OF(nfc_ccc_ranges);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < nfc_ccc_ranges[mid][0])
            hi = mid;
        else if (cp > nfc_ccc_ranges[mid][1])
            lo = mid + 1;
        else
            return nfc_ccc_ranges[mid][2];
    }
    return 0;
}

/* The table row of cp's one-level decomposition, or NULL. */
static const uint32_t *decomposition(uint32_t cp) {
    size_t lo = 0, hi = N_OF(nfc_decompositions);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < nfc_decompositions[mid][0])
            hi = mid;
        else if (cp > nfc_decompositions[mid][0])
            lo = mid + 1;
        else
            return nfc_decompositions[mid];
    }
    return NULL;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = N_OF(nfc_compositions);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *r = nfc_compositions[mid];
        if (a < r[0] || (a == r[0] && b < r[1]))
            hi = mid;
        else if (a > r[0] || b > r[1])
            lo = mid + 1;
        else
            return r[2];
    }
    return 0;
}

typedef struct cps {
    uint32_t *v;
    size_t n, cap;
} cps;

static int push(cps *c, uint32_t cp) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        uint32_t *v = realloc(c->v, cap * sizeof *v);
        if (!v) return -1;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = cp;
    return 0;
}

/* Step 1 for one code point. Canonical decompositions nest only a few levels deep. */
static int decompose(cps *c, uint32_t cp, int depth) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE, t = s % T_COUNT;
        if (push(c, L_BASE + s / N_COUNT) || push(c, V_BASE + s % N_COUNT / T_COUNT)) return -1;
        return t ? push(c, T_BASE + t) : 0;
    }
    const uint32_t *d = depth < 8 ? decomposition(cp) : NULL;
    if (!d) return push(c, cp);
    if (decompose(c, d[1], depth + 1)) return -1;
    return d[2] ? decompose(c, d[2], depth + 1) : 0;
}

int tok_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n) {
    size_t i = 0, len;
    while (i < n && (s[i] < 0xCC || !unsafe_cp(utf8_decode(s + i, &len)))) /* below U+0300 all is safe */
        i += utf8_seq_len(s[i]);
    if (i == n) return 0;
    cps c = {0};
    for (i = 0; i < n; i += len)
        if (decompose(&c, utf8_decode(s + i, &len), 0)) goto oom;
    /* step 2: insertion sort of each run of non-starters (runs are short) */
    for (size_t k = 1; k < c.n; k++) {
        uint32_t x = c.v[k], cx = ccc(x);
        if (!cx) continue;
        size_t j = k;
        while (j > 0) {
            uint32_t cy = ccc(c.v[j - 1]);
            if (cy <= cx) break; /* stops at a starter too (class 0) */
            c.v[j] = c.v[j - 1];
            j--;
        }
        c.v[j] = x;
    }
    /* step 3, in place: w is the write position, starter the last starter written (or none) */
    size_t w = 0, starter = SIZE_MAX;
    uint32_t last_class = 0;
    for (size_t k = 0; k < c.n; k++) {
        uint32_t x = c.v[k], cx = ccc(x);
        if (starter != SIZE_MAX && (w == starter + 1 || (last_class != 0 && last_class < cx))) {
            uint32_t p = compose(c.v[starter], x);
            if (p) {
                c.v[starter] = p;
                continue;
            }
        }
        if (cx == 0) starter = w;
        c.v[w++] = x;
        last_class = cx;
    }
    uint8_t *o = malloc(4 * w + 1);
    if (!o) goto oom;
    size_t k = 0;
    for (size_t j = 0; j < w; j++) k += utf8_encode(c.v[j], o + k);
    o[k] = 0;
    free(c.v);
    *out = o;
    *out_n = k;
    return 1;
oom:
    free(c.v);
    return -1;
}
