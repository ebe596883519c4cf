/*
 * A differential mutation test for every reader of model and token files
 * (issue 41's loader contract): take a valid file the library wrote, apply
 * a fixed, seeded set of mutations — truncations, header bit flips and byte
 * edits, metadata edits, dtype relabels, extra, missing and duplicated
 * entries, JSON whitespace and member-order variants, shape and offset
 * edits, payload bit flips — and load each. The oracle, per mutation:
 *
 *   - a clean error: a tfc_status other than TFC_OK with a message, *out
 *     untouched (and, under ASan, nothing leaked or overrun); or
 *   - a model bit-identical to the original's: the same config and every
 *     parameter byte the same; or
 *   - for a flip of one payload byte by XOR x: a model that differs from
 *     the original in at most that one parameter byte, and by exactly x
 *     (the payload was copied, in whatever layout, not reinterpreted).
 *
 * Some mutations must be refused outright whatever else holds: a tensor the
 * model does not use, a missing tensor, a float tensor relabelled as an
 * integer type, metadata that contradicts the tensors. Variants that change
 * nothing a JSON reader may see (whitespace, member order, a key repeated
 * with its own value) must load bit-identically.
 *
 * The reference is the model that wrote the file, held in memory: nothing
 * here is computed by the readers under test.
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfc_test.h"
#include "tfc_test_util.h"

/* ---- files and spans --------------------------------------------------------------- */

typedef struct buf {
    unsigned char *p;
    size_t n;
} buf;

static char dir[64];

static const char *at(const char *name) {
    static char bufs[4][160];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

static buf slurp(const char *path) {
    buf b = {0};
    b.p = t_slurp(path, &b.n);
    return b;
}

static void spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    if (n) CHECK(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* A tiny deterministic generator (splitmix64): the mutation set is fixed by the seed. */
static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* ---- the oracle's reference: a model or token stream as bytes ---------------------- */

typedef struct snap {
    tfc_gpt_config cfg;
    int32_t n, n_lora;
    char *names[64];
    buf bytes[64];
    tfc_lora_config lora;
} snap;

static void snap_tensors(snap *s, int32_t n, const char *const *names, tfc_tensor *const *ts) {
    for (int32_t i = 0; i < n && s->n < 64; i++, s->n++) {
        s->names[s->n] = strdup(names[i]);
        size_t nb = (size_t)tfc_tensor_numel(ts[i]) * tfc_dtype_size(tfc_tensor_dtype(ts[i]));
        s->bytes[s->n].p = malloc(nb ? nb : 1);
        s->bytes[s->n].n = nb;
        CHECK_OK(tfc_tensor_copy_to_host(ts[i], s->bytes[s->n].p, nb));
    }
}

static void snap_take(snap *s, const tfc_gpt *m) {
    memset(s, 0, sizeof *s);
    s->cfg.struct_size = sizeof s->cfg;
    CHECK_OK(tfc_gpt_get_config(m, &s->cfg));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ts;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ts));
    snap_tensors(s, n, names, ts);
    s->lora.struct_size = sizeof s->lora;
    if (tfc_gpt_lora_params(m, &n, &names, &ts) == TFC_OK && n > 0) {
        s->n_lora = n;
        snap_tensors(s, n, names, ts);
        CHECK_OK(tfc_gpt_get_lora_config(m, &s->lora));
    }
}

static void snap_free(snap *s) {
    for (int32_t i = 0; i < s->n; i++) free(s->names[i]), free(s->bytes[i].p);
    s->n = 0;
}

/*
 * How b differs from a: -1 when the config, the tensor names or sizes
 * differ; else the number of differing bytes, with the XOR of the last one
 * in *x.
 */
static long snap_diff(const snap *a, const snap *b, int free_fields, unsigned *x) {
    const tfc_gpt_config *p = &a->cfg, *q = &b->cfg;
    if (p->n_layer != q->n_layer || (p->n_head != q->n_head && !free_fields) || p->n_embd != q->n_embd ||
        p->block_size != q->block_size || p->vocab_size != q->vocab_size || p->bias != q->bias ||
        p->tie_weights != q->tie_weights || p->dtype != q->dtype || (p->ln_eps != q->ln_eps && !free_fields))
        return -1;
    if (a->n != b->n || a->n_lora != b->n_lora) return -1;
    if (a->n_lora && (a->lora.rank != b->lora.rank || a->lora.alpha != b->lora.alpha)) return -1;
    long d = 0;
    for (int32_t i = 0; i < a->n; i++) {
        if (strcmp(a->names[i], b->names[i]) || a->bytes[i].n != b->bytes[i].n) return -1;
        for (size_t k = 0; k < a->bytes[i].n; k++)
            if (a->bytes[i].p[k] != b->bytes[i].p[k]) d++, *x = a->bytes[i].p[k] ^ b->bytes[i].p[k];
    }
    return d;
}

/* What a mutation may lead to. */
typedef enum {
    MAY_FAIL,    /* a clean error or the same model */
    MUST_LOAD,   /* the same model, no error allowed (JSON-invisible variants) */
    MUST_FAIL,   /* a clean error (a contract violation the reader must catch) */
    PAYLOAD_XOR, /* a clean error, the same model, or one byte differing by xor */
    FREE_EDIT,   /* a clean error, or the same tensors under the file's n_head or LayerNorm epsilon (fields no
                    tensor shape describes), which must be valid: n_head dividing n_embd, eps in (0, 1] */
} expect;

static int cases, refused, loaded;

/* Judge one load: s its status, got the loaded model (or NULL), xo the payload flip. */
static void judge(const char *reader, const char *what, expect e, unsigned xo, tfc_status s, const snap *orig,
                  const tfc_gpt *got) {
    cases++;
    if (s != TFC_OK) {
        refused++;
        if (e == MUST_LOAD) TFC_FAIL_AT("%s, %s: refused a JSON-invisible variant: %s", reader, what, tfc_last_error());
        if (!tfc_last_error()[0]) TFC_FAIL_AT("%s, %s: refused without a message", reader, what);
        return;
    }
    loaded++;
    if (e == MUST_FAIL) {
        TFC_FAIL_AT("%s, %s: loaded, but must be refused", reader, what);
        return;
    }
    snap b;
    snap_take(&b, got);
    unsigned x = 0;
    long d = snap_diff(orig, &b, e == FREE_EDIT, &x);
    if (e == FREE_EDIT && !(b.cfg.ln_eps > 0 && b.cfg.ln_eps <= 1))
        TFC_FAIL_AT("%s, %s: loaded with LayerNorm epsilon %g", reader, what, b.cfg.ln_eps);
    if (e == FREE_EDIT && !(b.cfg.n_head > 0 && b.cfg.n_embd % b.cfg.n_head == 0))
        TFC_FAIL_AT("%s, %s: loaded with %d heads for %d dims", reader, what, b.cfg.n_head, b.cfg.n_embd);
    if (d < 0)
        TFC_FAIL_AT("%s, %s: loaded a model of another config or tensor set", reader, what);
    else if (d > 0 && !(e == PAYLOAD_XOR && d == 1 && x == xo))
        TFC_FAIL_AT("%s, %s: loaded a silently different model (%ld bytes differ)", reader, what, d);
    snap_free(&b);
}

/* ---- JSON members, for edits of safetensors headers and config files ---------------- */

typedef struct span {
    size_t at, len;
} span;

/* The top-level members of the JSON object js (our writers' output: valid JSON), into m; their count. */
static int members(const char *js, span *m, int max) {
    size_t i = 0, n = strlen(js);
    while (i < n && js[i] != '{') i++;
    int k = 0, depth = 0, in_str = 0;
    size_t start = i + 1;
    for (; i < n; i++) {
        char c = js[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1;
        if (c == '{' || c == '[') depth++;
        if (c == '}' || c == ']') depth--;
        if ((c == ',' && depth == 1) || depth == 0) {
            size_t a = start, b = i;
            while (a < b && strchr(" \t\r\n", js[a])) a++;
            while (b > a && strchr(" \t\r\n", js[b - 1])) b--;
            if (b > a && k < max) m[k++] = (span){a, b - a};
            start = i + 1;
            if (depth == 0) break;
        }
    }
    return k;
}

/* "{" + the members in the order idx (n of them) + "}". */
static char *join(const char *js, const span *m, const int *idx, int n) {
    size_t len = 3;
    for (int i = 0; i < n; i++) len += m[idx[i]].len + 1;
    char *o = malloc(len), *w = o;
    *w++ = '{';
    for (int i = 0; i < n; i++) {
        if (i) *w++ = ',';
        memcpy(w, js + m[idx[i]].at, m[idx[i]].len);
        w += m[idx[i]].len;
    }
    *w++ = '}';
    *w = 0;
    return o;
}

/* js with every ':' and ',' outside strings followed by ws. */
static char *spaced(const char *js, const char *ws) {
    size_t n = strlen(js), wl = strlen(ws);
    char *o = malloc(n * (wl + 1) + 1), *w = o;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = js[i];
        *w++ = c;
        if (in_str) {
            if (c == '\\' && i + 1 < n) *w++ = js[++i];
            if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1;
        if (c == ':' || c == ',') memcpy(w, ws, wl), w += wl;
    }
    *w = 0;
    return o;
}

/* js with the first occurrence of `from` at or after member m replaced by `to` (NULL when absent). */
static char *replace_in(const char *js, span m, const char *from, const char *to) {
    const char *hit = strstr(js + m.at, from);
    if (!hit || (size_t)(hit - js) >= m.at + m.len) return NULL;
    size_t pre = (size_t)(hit - js), fl = strlen(from), tl = strlen(to), n = strlen(js);
    char *o = malloc(n - fl + tl + 1);
    memcpy(o, js, pre);
    memcpy(o + pre, to, tl);
    memcpy(o + pre + tl, hit + fl, n - pre - fl + 1);
    return o;
}

/* ---- safetensors files: header text + payload ---------------------------------------- */

/* The header JSON of a safetensors file (malloc'd, NUL-terminated) and where the payload starts. */
static char *st_header(const buf *f, size_t *data_at) {
    if (f->n < 8) return NULL;
    uint64_t h = 0;
    for (int k = 0; k < 8; k++) h |= (uint64_t)f->p[k] << (8 * k);
    if (h > f->n - 8) return NULL;
    char *js = malloc((size_t)h + 1);
    memcpy(js, f->p + 8, (size_t)h);
    js[h] = 0;
    *data_at = 8 + (size_t)h;
    return js;
}

/* Write a safetensors file of header js (its length recomputed) and payload data[0..dn) + extra. */
static void st_write(const char *path, const char *js, const unsigned char *data, size_t dn, size_t extra) {
    size_t h = strlen(js), n = 8 + h + dn + extra;
    unsigned char *o = calloc(1, n);
    for (int k = 0; k < 8; k++) o[k] = (unsigned char)((uint64_t)h >> (8 * k));
    memcpy(o + 8, js, h);
    memcpy(o + 8 + h, data, dn);
    for (size_t k = 0; k < extra; k++) o[8 + h + dn + k] = (unsigned char)(0x3c + k);
    spit(path, o, n);
    free(o);
}

/* ---- the readers --------------------------------------------------------------------- */

/*
 * A reader under test: writes its valid files into dir (original bytes
 * kept by the caller), loads them into a fresh model (*out) or fails.
 */
typedef struct reader {
    const char *name;
    const char *file; /* the file mutated, relative to dir */
    tfc_status (*load)(tfc_gpt **out);
} reader;

static tfc_gpt *base_for_lora;

static tfc_status load_ckpt(tfc_gpt **out) { return tfc_gpt_load(at("m.safetensors"), out); }
static tfc_status load_hf(tfc_gpt **out) { return tfc_gpt_load_hf(at("hf"), out); }
static tfc_status load_llmc(tfc_gpt **out) { return tfc_gpt_load_llmc(at("m.bin"), out); }

/* LoRA: the adapters of lora/ on a fresh copy of the base; the copy is the loaded model. */
static tfc_status load_lora(tfc_gpt **out) {
    tfc_gpt *m = NULL;
    tfc_status s = tfc_gpt_load(at("base.safetensors"), &m);
    if (s != TFC_OK) return s;
    s = tfc_gpt_load_lora(m, at("lora"));
    if (s != TFC_OK) {
        tfc_gpt_release(m);
        return s;
    }
    *out = m;
    return TFC_OK;
}

static void load_and_judge(const reader *r, const char *what, expect e, unsigned xo, const snap *orig) {
    tfc_gpt *got = NULL;
    tfc_clear_error();
    tfc_status s = r->load(&got);
    if (s != TFC_OK && got) TFC_FAIL_AT("%s, %s: failed but set *out", r->name, what);
    judge(r->name, what, e, xo, s, orig, s == TFC_OK ? got : NULL);
    tfc_gpt_release(got);
}

/* Byte-level mutations of any file: truncations, header flips and edits, payload flips. */
static void byte_mutations(const reader *r, const buf *orig, size_t header_end, const snap *ref, int n_each) {
    char path[192];
    snprintf(path, sizeof path, "%s", at(r->file)); /* at()'s buffers rotate: the loads call it too */
    char what[96];
    size_t cuts[] = {0, 1, 7, 8, 9, header_end - 1, header_end, header_end + 1, orig->n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        if (cuts[i] >= orig->n) continue;
        spit(path, orig->p, cuts[i]);
        snprintf(what, sizeof what, "truncated to %zu of %zu bytes", cuts[i], orig->n);
        load_and_judge(r, what, MAY_FAIL, 0, ref);
    }
    for (int i = 0; i < n_each; i++) {
        size_t c = below(orig->n);
        spit(path, orig->p, c);
        snprintf(what, sizeof what, "truncated to %zu bytes", c);
        load_and_judge(r, what, MAY_FAIL, 0, ref);
    }
    unsigned char *m = malloc(orig->n);
    for (int i = 0; i < 3 * n_each; i++) {
        memcpy(m, orig->p, orig->n);
        size_t k = below(header_end);
        int kind = (int)below(3);
        if (kind == 0)
            m[k] ^= (unsigned char)(1u << below(8));
        else if (kind == 1)
            m[k] = (unsigned char)" {}[]:,\"0123456789-.eE\\Ftrue"[below(28)];
        else
            m[k] = (unsigned char)below(256);
        spit(path, m, orig->n);
        snprintf(what, sizeof what, "header byte %zu 0x%02x -> 0x%02x", k, orig->p[k], m[k]);
        load_and_judge(r, what, MAY_FAIL, 0, ref);
    }
    for (int i = 0; i < n_each && orig->n > header_end; i++) {
        memcpy(m, orig->p, orig->n);
        size_t k = header_end + below(orig->n - header_end);
        unsigned x = (unsigned)(1 + below(255));
        m[k] ^= (unsigned char)x;
        spit(path, m, orig->n);
        snprintf(what, sizeof what, "payload byte %zu ^ 0x%02x", k, x);
        load_and_judge(r, what, PAYLOAD_XOR, x, ref);
    }
    /* one byte appended: trailing data no header accounts for */
    unsigned char *longer = malloc(orig->n + 1);
    memcpy(longer, orig->p, orig->n);
    longer[orig->n] = 0;
    spit(path, longer, orig->n + 1);
    load_and_judge(r, "one trailing byte", MAY_FAIL, 0, ref);
    free(longer);
    free(m);
    spit(path, orig->p, orig->n);
}

/* The metadata member of a safetensors header, as its own members (count in *nm); -1 when absent. */
static int meta_member(const char *js, const span *m, int n) {
    for (int i = 0; i < n; i++)
        if (!strncmp(js + m[i].at, "\"__metadata__\"", 14)) return i;
    return -1;
}

/* Every edit of a safetensors header a JSON reader can see, or not see, judged. */
static void header_mutations(const reader *r, const buf *orig, const snap *ref, int float_payload) {
    char path[192];
    snprintf(path, sizeof path, "%s", at(r->file));
    size_t data_at = 0;
    char *js = st_header(orig, &data_at);
    CHECK(js != NULL);
    if (!js) return;
    const unsigned char *data = orig->p + data_at;
    const size_t dn = orig->n - data_at;
    span m[80];
    int n = members(js, m, 80), idx[82];
    const int meta = meta_member(js, m, n);
    char what[160];
    /* JSON-invisible: whitespace, member order, a member repeated with its own value */
    const char *ws[] = {" ", "\n", "\t", "\r\n  "};
    for (int w = 0; w < 4; w++) {
        char *v = spaced(js, ws[w]);
        st_write(path, v, data, dn, 0);
        snprintf(what, sizeof what, "whitespace variant %d", w);
        load_and_judge(r, what, MUST_LOAD, 0, ref);
        free(v);
    }
    for (int i = 0; i < n; i++) idx[i] = n - 1 - i;
    char *v = join(js, m, idx, n);
    st_write(path, v, data, dn, 0);
    load_and_judge(r, "members in reverse order", MUST_LOAD, 0, ref);
    free(v);
    for (int k = 0; k < n; k++) {
        /* a member twice with the same value: last-wins and first-wins agree */
        for (int i = 0; i < n; i++) idx[i] = i;
        idx[n] = k;
        v = join(js, m, idx, n + 1);
        st_write(path, v, data, dn, 0);
        snprintf(what, sizeof what, "member %.40s repeated", js + m[k].at);
        load_and_judge(r, what, MAY_FAIL, 0, ref);
        free(v);
        /* a member left out: a tensor missing (or the metadata) */
        int j = 0;
        for (int i = 0; i < n; i++)
            if (i != k) idx[j++] = i;
        v = join(js, m, idx, n - 1);
        st_write(path, v, data, dn, 0);
        snprintf(what, sizeof what, "member %.40s removed", js + m[k].at);
        load_and_judge(r, what, k == meta ? MAY_FAIL : MUST_FAIL, 0, ref);
        free(v);
        if (k == meta) continue;
        /* dtype relabels: integer types must be refused before any conversion */
        const char *dts[] = {"\"I32\"", "\"U8\"", "\"I64\"", "\"BOOL\"", "\"F16\"", "\"BF16\"", "\"F64\"", "\"I8\""};
        for (int d = 0; d < 8; d++) {
            char *e = replace_in(js, m[k], float_payload ? "\"F32\"" : "\"", dts[d]);
            if (!e || !float_payload) {
                free(e);
                break;
            }
            st_write(path, e, data, dn, 0);
            snprintf(what, sizeof what, "member %.40s relabelled %s", js + m[k].at, dts[d]);
            load_and_judge(r, what, d < 4 || d == 7 ? MUST_FAIL : MAY_FAIL, 0, ref);
            free(e);
        }
        /* shape and offset edits */
        const char *from[] = {"\"shape\":[", "\"data_offsets\":[", "\"data_offsets\":[0,"};
        const char *to[] = {"\"shape\":[1,", "\"data_offsets\":[4", "\"data_offsets\":[4,"};
        for (int e2 = 0; e2 < 3; e2++) {
            char *e = replace_in(js, m[k], from[e2], to[e2]);
            if (!e) continue;
            st_write(path, e, data, dn, 0);
            snprintf(what, sizeof what, "member %.40s: %s -> %s", js + m[k].at, from[e2], to[e2]);
            load_and_judge(r, what, MAY_FAIL, 0, ref);
            free(e);
        }
    }
    /* a tensor the model has no use for, with its 4 bytes */
    {
        char extra[160];
        snprintf(extra, sizeof extra,
                 "\"zz.unused.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}", dn, dn + 4);
        size_t L = strlen(js);
        char *e = malloc(L + strlen(extra) + 2);
        memcpy(e, js, L);
        size_t close = L;
        while (close > 0 && e[close - 1] != '}') close--;
        sprintf(e + close - 1, ",%s}", extra);
        st_write(path, e, data, dn, 4);
        load_and_judge(r, "an extra tensor", MUST_FAIL, 0, ref);
        free(e);
    }
    /* metadata values edited: each to values that contradict the tensors, or say nothing new */
    if (meta >= 0) {
        const char *mj = js + m[meta].at;
        const char *colon = strchr(mj, ':');
        size_t off = (size_t)(colon + 1 - js);
        char *inner = strndup(js + off, m[meta].len - (off - m[meta].at));
        span mm[40];
        int nm = members(inner, mm, 40);
        const char *vals[] = {"\"1\"",   "\"0\"", "\"2\"",     "\"-1\"",  "\"99999\"",
                              "\"abc\"", "\"\"",  "\"1e308\"", "\"nan\"", "3"};
        for (int k = 0; k < nm; k++) {
            const char *key = inner + mm[k].at;
            if (strncmp(key, "\"tfc.", 5) && strncmp(key, "\"lora", 5)) continue;
            const char *kc = strchr(key, ':');
            for (int vv = 0; vv < 10; vv++) {
                size_t klen = (size_t)(kc + 1 - key);
                size_t L = strlen(js);
                char *e = malloc(L + 64);
                /* the member's value replaced in place */
                size_t vat = off + mm[k].at + klen, vend = off + mm[k].at + mm[k].len;
                memcpy(e, js, vat);
                strcpy(e + vat, vals[vv]);
                strcat(e, js + vend);
                st_write(path, e, data, dn, 0);
                snprintf(what, sizeof what, "metadata %.*s = %s", (int)klen - 1, key, vals[vv]);
                load_and_judge(r, what, strstr(key, "ln_eps") || strstr(key, "n_head") ? FREE_EDIT : MAY_FAIL, 0, ref);
                free(e);
            }
        }
        free(inner);
    }
    free(js);
    spit(path, orig->p, orig->n);
}

/* JSON config files (config.json, adapter_config.json): JSON-invisible variants and edits. */
static void config_mutations(const reader *r, const char *file, const snap *ref, const char *const *must_fail_edits,
                             int n_must) {
    char path[192];
    snprintf(path, sizeof path, "%s", at(file));
    buf orig = slurp(path);
    char *js = strndup((const char *)orig.p, orig.n);
    span m[64];
    int n = members(js, m, 64), idx[66];
    char what[160];
    const char *ws[] = {" ", "\n", "\t", "\r\n  "};
    for (int w = 0; w < 4; w++) {
        char *v = spaced(js, ws[w]);
        spit(path, v, strlen(v));
        snprintf(what, sizeof what, "%s whitespace variant %d", file, w);
        load_and_judge(r, what, MUST_LOAD, 0, ref);
        free(v);
    }
    for (int i = 0; i < n; i++) idx[i] = n - 1 - i;
    char *v = join(js, m, idx, n);
    spit(path, v, strlen(v));
    snprintf(what, sizeof what, "%s members reversed", file);
    load_and_judge(r, what, MUST_LOAD, 0, ref);
    free(v);
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < n; i++) idx[i + 1] = i;
        idx[0] = k; /* the same member first and again later: the same value either way */
        v = join(js, m, idx, n + 1);
        spit(path, v, strlen(v));
        snprintf(what, sizeof what, "%s: %.30s twice", file, js + m[k].at);
        load_and_judge(r, what, MUST_LOAD, 0, ref);
        free(v);
        int j = 0;
        for (int i = 0; i < n; i++)
            if (i != k) idx[j++] = i;
        v = join(js, m, idx, n - 1);
        spit(path, v, strlen(v));
        snprintf(what, sizeof what, "%s: %.30s removed", file, js + m[k].at);
        load_and_judge(r, what, MAY_FAIL, 0, ref);
        free(v);
    }
    /* edits that name something the reader cannot honour, or contradict the tensors */
    for (int e = 0; e < n_must; e++) {
        size_t L = strlen(js);
        char *t = malloc(L + strlen(must_fail_edits[e]) + 4);
        memcpy(t, js, L);
        size_t close = L;
        while (close > 0 && t[close - 1] != '}') close--;
        sprintf(t + close - 1, ",%s}", must_fail_edits[e]);
        spit(path, t, strlen(t));
        snprintf(what, sizeof what, "%s: %s added last", file, must_fail_edits[e]);
        load_and_judge(r, what, MUST_FAIL, 0, ref);
        free(t);
    }
    spit(path, orig.p, orig.n);
    free(js);
    free(orig.p);
}

/* ---- the models ---------------------------------------------------------------------- */

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/tfc_test_mutations_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    rng_state = 20261207;
}

/* The file as written, then its byte-level mutations (header_end: where the payload starts). */
static void run_reader(const reader *r, const buf *orig, const snap *ref, size_t header_end, int n_each) {
    CHECK(orig->n > 0);
    load_and_judge(r, "the file as written", MUST_LOAD, 0, ref);
    byte_mutations(r, orig, header_end, ref, n_each);
}

/* A safetensors reader: the byte-level mutations, then the header's (JSON edits, relabels, extra tensors). */
static void run_safetensors_reader(const reader *r, const snap *ref) {
    buf orig = slurp(at(r->file));
    size_t data_at = 0;
    free(st_header(&orig, &data_at));
    run_reader(r, &orig, ref, data_at, 60);
    header_mutations(r, &orig, ref, 1);
    free(orig.p);
}

TEST(tfcore_checkpoint_mutations) {
    setup();
    for (int v = 0; v < 2; v++) {
        tfc_gpt *m = t_gpt_small(v, v);
        CHECK_OK(tfc_gpt_save(m, at("m.safetensors"), NULL, NULL, 0));
        snap ref;
        snap_take(&ref, m);
        reader r = {"tfc_gpt_load", "m.safetensors", load_ckpt};
        run_safetensors_reader(&r, &ref);
        snap_free(&ref);
        tfc_gpt_release(m);
    }
    printf("tfcore checkpoints: %d cases so far, %d refused, %d loaded\n", cases, refused, loaded);
}

TEST(hf_directory_mutations) {
    setup();
    for (int v = 0; v < 2; v++) {
        tfc_gpt *m = t_gpt_small(1, v);
        CHECK_OK(tfc_gpt_save_hf(m, at("hf"), -1, -1));
        snap ref;
        snap_take(&ref, m);
        reader r = {"tfc_gpt_load_hf", "hf/model.safetensors", load_hf};
        run_safetensors_reader(&r, &ref);
        const char *must_fail[] = {"\"n_layer\":1",     "\"n_embd\":4",
                                   "\"vocab_size\":10", "\"layer_norm_epsilon\":1e308",
                                   "\"n_positions\":3", "\"n_inner\":7"};
        config_mutations(&r, "hf/config.json", &ref, must_fail, 6);
        snap_free(&ref);
        tfc_gpt_release(m);
    }
    printf("HF directories: %d cases so far, %d refused, %d loaded\n", cases, refused, loaded);
}

TEST(llmc_checkpoint_mutations) {
    setup();
    tfc_gpt *m = t_gpt_small(1, 1);
    CHECK_OK(tfc_gpt_save_llmc(m, at("m.bin")));
    snap ref;
    snap_take(&ref, m);
    reader r = {"tfc_gpt_load_llmc", "m.bin", load_llmc};
    buf orig = slurp(at(r.file));
    run_reader(&r, &orig, &ref, 1024, 120);
    free(orig.p);
    snap_free(&ref);
    tfc_gpt_release(m);
    printf("llm.c checkpoints: %d cases so far, %d refused, %d loaded\n", cases, refused, loaded);
}

TEST(lora_adapter_mutations) {
    setup();
    base_for_lora = t_gpt_small(1, 1);
    CHECK_OK(tfc_gpt_save(base_for_lora, at("base.safetensors"), NULL, NULL, 0));
    tfc_lora_config lc = TFC_LORA_CONFIG_INIT;
    lc.rank = 2, lc.alpha = 4, lc.targets = "all-linear";
    CHECK_OK(tfc_gpt_add_lora(base_for_lora, &lc));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_lora_params(base_for_lora, &n, &names, &ps));
    for (int32_t i = 0; i < n; i++) CHECK_OK(tfc_tensor_fill_normal(ps[i], 0.0, 0.1, 5, (uint64_t)i * 77));
    mkdir(at("lora"), 0700);
    CHECK_OK(tfc_gpt_save_lora(base_for_lora, at("lora/adapter_model.safetensors"), NULL, NULL, 0));
    CHECK_OK(tfc_gpt_save_lora_config(base_for_lora, at("lora/adapter_config.json"), "base"));
    snap ref;
    snap_take(&ref, base_for_lora);
    reader r = {"tfc_gpt_load_lora", "lora/adapter_model.safetensors", load_lora};
    run_safetensors_reader(&r, &ref);
    const char *must_fail[] = {"\"r\":3",
                               "\"alpha_pattern\":{\"c_attn\":8}",
                               "\"rank_pattern\":{\"c_attn\":4}",
                               "\"layers_to_transform\":[0]",
                               "\"modules_to_save\":[\"lm_head\"]",
                               "\"bias\":\"all\"",
                               "\"use_rslora\":\ttrue"};
    config_mutations(&r, "lora/adapter_config.json", &ref, must_fail, 7);
    snap_free(&ref);
    tfc_gpt_release(base_for_lora);
    printf("LoRA adapters: %d cases so far, %d refused, %d loaded\n", cases, refused, loaded);
}

/* Token files: the "model" is the token stream; a payload flip may change one token, or be refused. */
static void judge_tokens(const char *what, const int32_t *want, int64_t n, int vocab, int payload, tfc_status s,
                         tfc_token_file *f) {
    cases++;
    if (s != TFC_OK) {
        refused++;
        if (!tfc_last_error()[0]) TFC_FAIL_AT("tokens, %s: refused without a message", what);
        return;
    }
    loaded++;
    int64_t got_n = tfc_token_file_count(f);
    if (got_n != n) {
        TFC_FAIL_AT("tokens, %s: %lld tokens loaded, %lld written", what, (long long)got_n, (long long)n);
        return;
    }
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    tfc_clear_error();
    if (tfc_token_file_read(f, 0, n, ids) != TFC_OK) { /* ids are checked as they are read: a clean refusal too */
        if (!tfc_last_error()[0]) TFC_FAIL_AT("tokens, %s: a read refused without a message", what);
        free(ids);
        return;
    }
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) {
        d += ids[i] != want[i];
        if (ids[i] < 0 || ids[i] >= vocab) TFC_FAIL_AT("tokens, %s: id %d outside the vocabulary", what, ids[i]);
    }
    if (d > (payload ? 1 : 0)) TFC_FAIL_AT("tokens, %s: %lld tokens differ", what, (long long)d);
    free(ids);
}

TEST(token_file_mutations) {
    setup();
    enum { N = 300, V = 50257 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 7919) % V);
    char file[192];
    snprintf(file, sizeof file, "%s", at("t.bin"));
    for (int fmt = 0; fmt < 2; fmt++) {
        if (fmt == 0)
            CHECK_OK(tfc_token_file_write_shard(file, ids, N, TFC_TOKENS_LLMC));
        else
            CHECK_OK(tfc_token_file_write(file, ids, N, V));
        buf orig = slurp(file);
        const size_t header_end = fmt == 0 ? 1024 : 32;
        unsigned char *m = malloc(orig.n + 1);
        char what[96];
        for (int i = 0; i < 400; i++) {
            memcpy(m, orig.p, orig.n);
            size_t len = orig.n;
            int kind = (int)below(4), payload = 0;
            if (kind == 0)
                len = below(orig.n);
            else if (kind == 1)
                m[below(header_end)] ^= (unsigned char)(1u << below(8));
            else if (kind == 2)
                m[below(header_end < 64 ? header_end : 64)] = (unsigned char)below(256);
            else {
                m[header_end + below(orig.n - header_end)] ^= (unsigned char)(1 + below(255));
                payload = 1;
            }
            spit(file, m, len);
            snprintf(what, sizeof what, "%s, mutation %d (kind %d)", fmt ? "tfcore tokens" : "llm.c shard", i, kind);
            tfc_token_file *f = NULL;
            tfc_clear_error();
            tfc_status s = fmt == 0 ? tfc_token_file_open_shards((const char *const[]){file}, 1, TFC_TOKENS_LLMC, V, &f)
                                    : tfc_token_file_open(file, &f);
            judge_tokens(what, ids, N, V, payload, s, s == TFC_OK ? f : NULL);
            tfc_token_file_close(f);
        }
        free(m);
        free(orig.p);
    }
    printf("all readers: %d cases, %d refused, %d loaded\n", cases, refused, loaded);
}

TFC_TEST_MAIN
