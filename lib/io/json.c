/*
 * JSON reading (over jansson) and writing helpers (json.h). A document is
 * untrusted input: jansson's parse is strict, nesting is bounded and every
 * getter checks the type and range of what it returns.
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

/* jansson's messages (load.c) in the words the library's errors use; jansson's " near '...'" context follows. */
static const char *const PHRASES[][2] = {
    {"string or '}' expected", "expected a string key or '}'"},
    {"'}' expected", "expected '}'"},
    {"']' expected", "expected ']'"},
    {"':' expected", "expected ':'"},
    {"'[' or '{' expected", "expected a JSON object or array"},
    {"invalid escape", "bad escape in a string"},
    {"invalid Unicode escape", "bad \\u escape in a string"},
    {"invalid Unicode", "unpaired surrogate in a string"},
    {"premature end of input", "unterminated string"},
    {"unexpected newline", "control character in a string"},
    {"control character", "control character in a string"},
    {"\\u0000", "NUL character in a string"},
    {"NUL byte", "NUL character in a string"},
    {"unable to decode byte", "invalid UTF-8"},
    {"too big", "number out of range"},
    {"real number overflow", "number out of range"},
    {"end of file expected", "trailing bytes after the JSON value"},
    {"maximum parsing depth", "nested too deep"},
    {"invalid token", "invalid token"},
    {"unexpected token", "unexpected token"},
};

static void describe(const json_error_t *e, tfc_json_problem *p) {
    const char *t = e->text, *near = strstr(t, " near ");
    const char *phrase = NULL;
    for (size_t i = 0; i < sizeof PHRASES / sizeof PHRASES[0] && !phrase; i++)
        if (strncmp(t, PHRASES[i][0], strlen(PHRASES[i][0])) == 0) phrase = PHRASES[i][1];
    if (phrase)
        snprintf(p->why, sizeof p->why, "%s%s", phrase, near ? near : "");
    else
        snprintf(p->why, sizeof p->why, "%s", t);
}

/*
 * The key of a duplicate-key error: jansson stops just past the key's
 * closing quote, so its opening quote is the nearest one before that is not
 * escaped (preceded by an even number of backslashes); the key is decoded by
 * jansson again.
 */
static void duplicate_key(const char *buf, size_t len, size_t end, tfc_json_problem *p) {
    snprintf(p->key, sizeof p->key, "?");
    if (end < 2 || end > len || buf[end - 1] != '"') return;
    for (size_t q = end - 1; q-- > 0;) {
        if (buf[q] != '"') continue;
        size_t bs = 0;
        while (bs < q && buf[q - 1 - bs] == '\\') bs++;
        if (bs % 2) continue;
        json_error_t e;
        json_t *k = json_loadb(buf + q, end - q, JSON_DECODE_ANY, &e);
        if (json_is_string(k)) snprintf(p->key, sizeof p->key, "%s", json_string_value(k));
        json_decref(k);
        return;
    }
}

/*
 * The byte where buf first nests objects and arrays deeper than max, or -1:
 * a lexical scan (brackets outside strings) run before jansson, so jansson
 * itself never recurses deeper than max (its own limit is 2048).
 */
static long long too_deep_at(const char *buf, size_t len, int max) {
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = buf[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max) return (long long)i;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return -1;
}

int tfc_json_load(const void *buf, size_t len, int flags, json_t **out, tfc_json_problem *p) {
    memset(p, 0, sizeof *p);
    json_error_t e;
    memset(&e, 0, sizeof e);
    const long long deep = buf ? too_deep_at(buf, len, TFC_JSON_MAX_DEPTH) : -1;
    if (deep >= 0) {
        p->byte = deep;
        snprintf(p->why, sizeof p->why, "nested more than %d deep", TFC_JSON_MAX_DEPTH);
        return -1;
    }
    const size_t jf = flags & TFC_JSON_REFUSE_DUPLICATES ? JSON_REJECT_DUPLICATES : 0;
    json_t *v = json_loadb(buf ? buf : "", len, jf, &e);
    if (!v && json_error_code(&e) == json_error_duplicate_key) {
        /* a malformed document is reported as such first: parse again, duplicates allowed */
        const long long at = e.position;
        memset(&e, 0, sizeof e);
        json_t *again = json_loadb(buf, len, 0, &e);
        if (again) {
            json_decref(again);
            p->byte = at;
            p->duplicate = 1;
            duplicate_key(buf, len, (size_t)at, p);
            snprintf(p->why, sizeof p->why, "key '%s' appears twice", p->key);
            return -1;
        }
    }
    if (!v) {
        p->byte = e.position;
        p->oom = json_error_code(&e) == json_error_out_of_memory || !e.text[0];
        if (p->oom)
            snprintf(p->why, sizeof p->why, "out of memory");
        else
            describe(&e, p);
        return -1;
    }
    *out = v;
    return 0;
}

tfc_status tfc_json_parse(const char *fn, const char *what, const void *buf, size_t len, int flags, json_t **out) {
    tfc_json_problem p;
    if (tfc_json_load(buf, len, flags, out, &p) == 0) return TFC_OK;
    if (p.oom) return tfc_err(TFC_ERR_OOM, "%s: out of memory parsing %s", fn, what);
    return tfc_err(TFC_ERR_FORMAT, "%s: malformed %s at byte %lld: %s", fn, what, p.byte, p.why);
}

tfc_status tfc_json_read(const char *fn, const char *what, FILE *f, size_t max, int flags, json_t **out) {
    size_t n = 0, cap = 0;
    char *buf = NULL;
    for (;;) {
        if (n == cap) {
            if (cap > max) break;
            const size_t want = cap ? (cap > max / 2 ? max + 1 : 2 * cap) : (max < 4096 ? max + 1 : 4096);
            char *nb = realloc(buf, want);
            if (!nb) {
                free(buf);
                return tfc_err(TFC_ERR_OOM, "%s: out of memory reading %s", fn, what);
            }
            buf = nb;
            cap = want;
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0 || n < cap) {
            if (!feof(f) && ferror(f)) {
                free(buf);
                return tfc_err(TFC_ERR_IO, "%s: cannot read %s", fn, what);
            }
            if (feof(f)) break;
        }
    }
    tfc_status s = n > max ? tfc_err(TFC_ERR_FORMAT, "%s: %s is over %zu bytes", fn, what, max)
                           : tfc_json_parse(fn, what, buf, n, flags, out);
    free(buf);
    return s;
}

/* obj[key], or NULL (and *found 0) when absent. */
static const json_t *field(const json_t *obj, const char *key, int *found) {
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (found) *found = v != NULL;
    return v;
}

tfc_status tfc_json_get_int(const char *fn, const char *what, const json_t *obj, const char *key, int64_t lo,
                            int64_t hi, int64_t *v, int *found) {
    const json_t *x = field(obj, key, found);
    if (!x) return TFC_OK;
    if (!json_is_number(x)) return tfc_err(TFC_ERR_FORMAT, "%s: %s: \"%s\" must be an integer", fn, what, key);
    if (json_is_integer(x)) {
        const json_int_t i = json_integer_value(x);
        if (i < lo || i > hi)
            return tfc_err(TFC_ERR_FORMAT, "%s: %s: \"%s\" is %lld, outside [%lld, %lld]", fn, what, key, (long long)i,
                           (long long)lo, (long long)hi);
        *v = i;
        return TFC_OK;
    }
    const double d = json_real_value(x);
    if (d != floor(d) || !(d >= (double)lo && d <= (double)hi))
        return tfc_err(TFC_ERR_FORMAT, "%s: %s: \"%s\" is %g, not an integer in [%lld, %lld]", fn, what, key, d,
                       (long long)lo, (long long)hi);
    *v = (int64_t)d;
    return TFC_OK;
}

tfc_status tfc_json_get_number(const char *fn, const char *what, const json_t *obj, const char *key, double lo,
                               double hi, double *v, int *found) {
    const json_t *x = field(obj, key, found);
    if (!x) return TFC_OK;
    if (!json_is_number(x)) return tfc_err(TFC_ERR_FORMAT, "%s: %s: \"%s\" must be a number", fn, what, key);
    const double d = json_number_value(x);
    if (!(d >= lo && d <= hi))
        return tfc_err(TFC_ERR_FORMAT, "%s: %s: \"%s\" is %g, outside [%g, %g]", fn, what, key, d, lo, hi);
    *v = d;
    return TFC_OK;
}

tfc_status tfc_json_get_bool(const char *fn, const char *what, const json_t *obj, const char *key, int *v, int *found) {
    const json_t *x = field(obj, key, found);
    if (!x) return TFC_OK;
    if (!json_is_boolean(x)) return tfc_err(TFC_ERR_FORMAT, "%s: %s: \"%s\" must be true or false", fn, what, key);
    *v = json_is_true(x);
    return TFC_OK;
}

tfc_status tfc_json_get_string(const char *fn, const char *what, const json_t *obj, const char *key, const char **v,
                               int *found) {
    const json_t *x = field(obj, key, found);
    if (!x) return TFC_OK;
    if (!json_is_string(x)) return tfc_err(TFC_ERR_FORMAT, "%s: %s: \"%s\" must be a string", fn, what, key);
    *v = json_string_value(x);
    return TFC_OK;
}
