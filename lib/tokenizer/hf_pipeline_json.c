/*
 * The pipeline sections of a tokenizer.json: normalizer, pre_tokenizer,
 * decoder, post_processor. Each kind Hugging Face's tokenizers defines is
 * either read into the settings the encoder and decoder follow or refused
 * by name; so is every key of a section this file does not know, and every
 * value of a known key it cannot honour. What is honoured
 * (docs/TOKENIZER.md):
 *
 *   normalizer      NFC, Prepend, Replace (String pattern), Sequence of them
 *   pre_tokenizer   ByteLevel (no prefix space), Split (Llama 3's or Qwen2's
 *                   regex, Isolated, not inverted), Metaspace ("▁"),
 *                   Sequence of a Split then a ByteLevel
 *   decoder         ByteLevel; or Replace (String) steps, ByteFallback, Fuse,
 *                   Strip, in that order (Sequence), Strip after Fuse
 *   post_processor  TemplateProcessing (its single-sequence template),
 *                   ByteLevel (offsets only: the ids are unchanged), Sequence
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/hf_json.h"
#include "tokenizer/split.h"
#include "tokenizer/tokenizer_impl.h"

#define MAX_STEPS 64 /* steps of a Sequence: real files have 1 to 4 */

tfc_status hf_bad(const hf_ctx *c, const char *field, const char *fmt, ...) {
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tfc_err(TFC_ERR_FORMAT, "%s: '%s': %s: %s", c->fn, c->path, field, msg);
}

tfc_status hf_check_keys(const hf_ctx *c, const json_t *obj, const char *field, const char *const *allowed) {
    if (!json_is_object(obj)) return hf_bad(c, field, "expected a JSON object");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++) known = strcmp(*a, key) == 0;
        if (!known) return hf_bad(c, field, "key \"%.64s\" is not one this library knows how to honour", key);
    }
    return TFC_OK;
}

tfc_status hf_type(const hf_ctx *c, const json_t *obj, const char *field, const char **type) {
    if (!json_is_object(obj)) return hf_bad(c, field, "expected a JSON object or null");
    const json_t *t = json_object_get(obj, "type");
    if (!json_is_string(t)) return hf_bad(c, field, "\"type\" is missing or not a string");
    *type = json_string_value(t);
    return TFC_OK;
}

tfc_status hf_bool(const hf_ctx *c, const json_t *obj, const char *field, const char *key, int *v) {
    const json_t *x = json_object_get(obj, key);
    if (!x || json_is_null(x)) return TFC_OK;
    if (!json_is_boolean(x)) return hf_bad(c, field, "\"%s\" must be true or false", key);
    *v = json_is_true(x);
    return TFC_OK;
}

/* obj[key] as a non-null string, or a refusal. */
static tfc_status str_field(const hf_ctx *c, const json_t *obj, const char *field, const char *key, const char **v) {
    const json_t *x = json_object_get(obj, key);
    if (!json_is_string(x)) return hf_bad(c, field, "\"%s\" must be a string", key);
    *v = json_string_value(x);
    return TFC_OK;
}

/* obj[key] as an integer in [0, 2^20], or a refusal. */
static tfc_status int_field(const hf_ctx *c, const json_t *obj, const char *field, const char *key, int32_t *v) {
    const json_t *x = json_object_get(obj, key);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1 << 20))
        return hf_bad(c, field, "\"%s\" must be an integer in [0, 2^20]", key);
    *v = (int32_t)json_integer_value(x);
    return TFC_OK;
}

/* A {"String": s} pattern (Replace); {"Regex": ...} is refused. */
static tfc_status string_pattern(const hf_ctx *c, const json_t *obj, const char *field, const char **s) {
    char f[160];
    snprintf(f, sizeof f, "%s.pattern", field);
    const json_t *p = json_object_get(obj, "pattern");
    if (json_is_object(p) && json_object_get(p, "Regex"))
        return hf_bad(c, f, "a Regex pattern is not supported here (only {\"String\": ...})");
    static const char *const keys[] = {"String", NULL};
    TFC_TRY(hf_check_keys(c, p, f, keys));
    TFC_TRY(str_field(c, p, f, "String", s));
    if (!**s) return hf_bad(c, f, "the String is empty");
    return TFC_OK;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

void hf_pipeline_free(hf_pipeline *p) {
    for (int32_t i = 0; i < p->n_dec_replace; i++) {
        free(p->dec_replace[i].from);
        free(p->dec_replace[i].to);
    }
    free(p->dec_replace);
    free(p->prefix);
    free(p->suffix);
    memset(p, 0, sizeof *p);
}

/* ---- normalizer ---------------------------------------------------------------- */

static tfc_status add_norm(const hf_ctx *c, tok_hf *h, int kind, const char *from, const char *to) {
    hf_norm *n = realloc(h->norms, (size_t)(h->n_norms + 1) * sizeof *n);
    if (!n) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    h->norms = n;
    hf_norm *x = &n[h->n_norms];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    if (from) {
        x->from_len = strlen(from);
        x->from = (uint8_t *)dup_str(from);
    }
    if (to) {
        x->to_len = strlen(to);
        x->to = (uint8_t *)dup_str(to);
    }
    h->n_norms++; /* counted before the check so tok_hf_free releases what was copied */
    if ((from && !x->from) || (to && !x->to)) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    return TFC_OK;
}

static tfc_status normalizer(const hf_ctx *c, const json_t *v, const char *field, tok_hf *h, int depth) {
    const char *type;
    TFC_TRY(hf_type(c, v, field, &type));
    if (strcmp(type, "Sequence") == 0 && depth == 0) {
        static const char *const keys[] = {"type", "normalizers", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        const json_t *a = json_object_get(v, "normalizers");
        if (!json_is_array(a) || json_array_size(a) > MAX_STEPS)
            return hf_bad(c, field, "\"normalizers\" must be an array of at most %d normalizers", MAX_STEPS);
        for (size_t i = 0; i < json_array_size(a); i++) {
            char f[96];
            snprintf(f, sizeof f, "%s.normalizers[%zu]", field, i);
            TFC_TRY(normalizer(c, json_array_get(a, i), f, h, depth + 1));
        }
        return TFC_OK;
    }
    if (strcmp(type, "NFC") == 0) {
        static const char *const keys[] = {"type", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        return add_norm(c, h, HF_NORM_NFC, NULL, NULL);
    }
    if (strcmp(type, "Prepend") == 0) {
        static const char *const keys[] = {"type", "prepend", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        const char *s;
        TFC_TRY(str_field(c, v, field, "prepend", &s));
        return add_norm(c, h, HF_NORM_PREPEND, NULL, s);
    }
    if (strcmp(type, "Replace") == 0) {
        static const char *const keys[] = {"type", "pattern", "content", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        const char *from, *to;
        TFC_TRY(string_pattern(c, v, field, &from));
        TFC_TRY(str_field(c, v, field, "content", &to));
        return add_norm(c, h, HF_NORM_REPLACE, from, to);
    }
    return hf_bad(c, field,
                  "normalizer type '%.64s' is not supported (supported: NFC, Prepend, Replace with a String pattern, "
                  "a Sequence of them)",
                  type);
}

tfc_status hf_read_normalizer(const hf_ctx *c, const json_t *v, tok_hf *h) {
    if (!v || json_is_null(v)) return TFC_OK;
    return normalizer(c, v, "normalizer", h, 0);
}

/* ---- pre_tokenizer -------------------------------------------------------------------- */

/* The Split regexes this library has (split.c), as tokenizer.json spells them. */
static const struct {
    const char *regex;
    int32_t pattern;
} KNOWN_SPLITS[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     TFC_SPLIT_LLAMA3},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     TFC_SPLIT_QWEN2},
};

static tfc_status split_step(const hf_ctx *c, const json_t *v, const char *field, hf_pipeline *p) {
    static const char *const keys[] = {"type", "pattern", "behavior", "invert", NULL};
    TFC_TRY(hf_check_keys(c, v, field, keys));
    char f[160];
    snprintf(f, sizeof f, "%s.pattern", field);
    const json_t *pat = json_object_get(v, "pattern");
    if (json_is_object(pat) && json_object_get(pat, "String"))
        return hf_bad(c, f, "a String pattern is not supported (only the Regex of Llama 3 or Qwen2)");
    static const char *const pkeys[] = {"Regex", NULL};
    TFC_TRY(hf_check_keys(c, pat, f, pkeys));
    const char *re;
    TFC_TRY(str_field(c, pat, f, "Regex", &re));
    int32_t pattern = -1;
    for (size_t i = 0; i < sizeof KNOWN_SPLITS / sizeof *KNOWN_SPLITS; i++)
        if (strcmp(re, KNOWN_SPLITS[i].regex) == 0) pattern = KNOWN_SPLITS[i].pattern;
    if (pattern < 0)
        return hf_bad(c, f,
                      "regex '%.200s' is not one this library has (it has Llama 3's and Qwen2's, exactly as their "
                      "tokenizer.json files write them)",
                      re);
    const char *behavior;
    TFC_TRY(str_field(c, v, field, "behavior", &behavior));
    if (strcmp(behavior, "Isolated") != 0)
        return hf_bad(c, field, "behavior '%.64s' is not supported (only Isolated)", behavior);
    int invert = 0;
    TFC_TRY(hf_bool(c, v, field, "invert", &invert));
    if (invert) return hf_bad(c, field, "invert true is not supported");
    if (p->byte_level) return hf_bad(c, field, "a Split after ByteLevel is not supported (it would split mapped text)");
    if (p->pattern != TFC_SPLIT_NONE) return hf_bad(c, field, "a second Split is not supported");
    if (p->metaspace) return hf_bad(c, field, "Split together with Metaspace is not supported");
    p->pattern = pattern;
    return TFC_OK;
}

static tfc_status byte_level_step(const hf_ctx *c, const json_t *v, const char *field, hf_pipeline *p) {
    static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
    TFC_TRY(hf_check_keys(c, v, field, keys));
    int prefix = 1, trim = 1, regex = 1; /* tokenizers' defaults */
    TFC_TRY(hf_bool(c, v, field, "add_prefix_space", &prefix));
    TFC_TRY(hf_bool(c, v, field, "trim_offsets", &trim)); /* offsets only */
    TFC_TRY(hf_bool(c, v, field, "use_regex", &regex));
    if (prefix) return hf_bad(c, field, "add_prefix_space true is not supported");
    if (p->byte_level) return hf_bad(c, field, "a second ByteLevel is not supported");
    if (p->metaspace) return hf_bad(c, field, "ByteLevel together with Metaspace is not supported");
    if (regex) {
        if (p->pattern != TFC_SPLIT_NONE) return hf_bad(c, field, "use_regex true after a Split is not supported");
        p->pattern = TFC_SPLIT_GPT2; /* ByteLevel's own regex is GPT-2's */
    }
    p->byte_level = 1;
    return TFC_OK;
}

static tfc_status metaspace_step(const hf_ctx *c, const json_t *v, const char *field, hf_pipeline *p) {
    static const char *const keys[] = {"type",    "replacement", "prepend_scheme", "split", "add_prefix_space",
                                       "str_rep", NULL};
    TFC_TRY(hf_check_keys(c, v, field, keys));
    const char *rep;
    TFC_TRY(str_field(c, v, field, "replacement", &rep));
    if (strcmp(rep, "\xE2\x96\x81") != 0)
        return hf_bad(c, field, "replacement '%.16s' is not supported (only U+2581 '\xE2\x96\x81')", rep);
    const json_t *sr = json_object_get(v, "str_rep");
    if (sr && !(json_is_string(sr) && strcmp(json_string_value(sr), rep) == 0))
        return hf_bad(c, field, "\"str_rep\" differs from \"replacement\"");
    int scheme = HF_PREPEND_ALWAYS, legacy = 1, split = 1; /* tokenizers' defaults */
    const json_t *ps = json_object_get(v, "prepend_scheme");
    if (ps && !json_is_null(ps)) {
        const char *s = json_is_string(ps) ? json_string_value(ps) : "";
        if (strcmp(s, "always") == 0)
            scheme = HF_PREPEND_ALWAYS;
        else if (strcmp(s, "first") == 0)
            scheme = HF_PREPEND_FIRST;
        else if (strcmp(s, "never") == 0)
            scheme = HF_PREPEND_NEVER;
        else
            return hf_bad(c, field, "prepend_scheme must be \"always\", \"first\" or \"never\"");
    } else {
        TFC_TRY(hf_bool(c, v, field, "add_prefix_space", &legacy)); /* files before prepend_scheme */
        scheme = legacy ? HF_PREPEND_ALWAYS : HF_PREPEND_NEVER;
    }
    TFC_TRY(hf_bool(c, v, field, "split", &split));
    if (p->byte_level || p->pattern != TFC_SPLIT_NONE || p->metaspace)
        return hf_bad(c, field, "Metaspace together with another pre-tokenizer is not supported");
    p->metaspace = 1;
    p->ms_prepend = scheme;
    p->ms_split = split;
    return TFC_OK;
}

static tfc_status pre_tokenizer(const hf_ctx *c, const json_t *v, const char *field, hf_pipeline *p, int depth) {
    const char *type;
    TFC_TRY(hf_type(c, v, field, &type));
    if (strcmp(type, "Sequence") == 0 && depth == 0) {
        static const char *const keys[] = {"type", "pretokenizers", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        const json_t *a = json_object_get(v, "pretokenizers");
        if (!json_is_array(a) || json_array_size(a) > MAX_STEPS)
            return hf_bad(c, field, "\"pretokenizers\" must be an array of at most %d pre-tokenizers", MAX_STEPS);
        for (size_t i = 0; i < json_array_size(a); i++) {
            char f[96];
            snprintf(f, sizeof f, "%s.pretokenizers[%zu]", field, i);
            TFC_TRY(pre_tokenizer(c, json_array_get(a, i), f, p, depth + 1));
        }
        return TFC_OK;
    }
    if (strcmp(type, "Split") == 0) return split_step(c, v, field, p);
    if (strcmp(type, "ByteLevel") == 0) return byte_level_step(c, v, field, p);
    if (strcmp(type, "Metaspace") == 0) return metaspace_step(c, v, field, p);
    return hf_bad(c, field,
                  "pre-tokenizer type '%.64s' is not supported (supported: ByteLevel, Split, Metaspace, a Sequence "
                  "of them)",
                  type);
}

tfc_status hf_read_pre_tokenizer(const hf_ctx *c, const json_t *v, hf_pipeline *p) {
    if (!v || json_is_null(v)) return TFC_OK;
    return pre_tokenizer(c, v, "pre_tokenizer", p, 0);
}

/* ---- decoder ---------------------------------------------------------------------------- */

/* Where a decoder step may stand: each stage after the ones before it. */
enum { ST_REPLACE = 1, ST_BYTE_FALLBACK = 2, ST_FUSE = 3, ST_STRIP = 4, ST_BYTE_LEVEL = 5 };

static tfc_status decoder_step(const hf_ctx *c, const json_t *v, const char *field, hf_pipeline *p, int *stage) {
    const char *type;
    TFC_TRY(hf_type(c, v, field, &type));
    int st = strcmp(type, "ByteLevel") == 0 ? ST_BYTE_LEVEL
        : strcmp(type, "Replace") == 0      ? ST_REPLACE
        : strcmp(type, "ByteFallback") == 0 ? ST_BYTE_FALLBACK
        : strcmp(type, "Fuse") == 0         ? ST_FUSE
        : strcmp(type, "Strip") == 0        ? ST_STRIP
                                            : 0;
    if (!st)
        return hf_bad(c, field,
                      "decoder type '%.64s' is not supported (supported: ByteLevel; Replace, ByteFallback, Fuse, "
                      "Strip in a Sequence)",
                      type);
    if (st == ST_BYTE_LEVEL ? *stage != 0 : *stage == ST_BYTE_LEVEL)
        return hf_bad(c, field, "ByteLevel together with other decoders is not supported");
    if (st < *stage || (st == *stage && st != ST_REPLACE))
        return hf_bad(c, field,
                      "'%s' is out of order: this library supports Replace steps, then ByteFallback, Fuse and Strip, "
                      "each at most once and in that order",
                      type);
    if (st == ST_STRIP && *stage != ST_FUSE)
        return hf_bad(c, field, "Strip is supported only right after Fuse (it then strips the whole text)");
    *stage = st;
    if (st == ST_BYTE_LEVEL) {
        static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        int x = 0; /* these three change offsets only, never the decoded text */
        TFC_TRY(hf_bool(c, v, field, "add_prefix_space", &x));
        TFC_TRY(hf_bool(c, v, field, "trim_offsets", &x));
        TFC_TRY(hf_bool(c, v, field, "use_regex", &x));
        p->dec_byte_level = 1;
    } else if (st == ST_REPLACE) {
        static const char *const keys[] = {"type", "pattern", "content", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        const char *from, *to;
        TFC_TRY(string_pattern(c, v, field, &from));
        TFC_TRY(str_field(c, v, field, "content", &to));
        hf_replace *r = realloc(p->dec_replace, (size_t)(p->n_dec_replace + 1) * sizeof *r);
        if (!r) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
        p->dec_replace = r;
        r += p->n_dec_replace++;
        r->from = dup_str(from);
        r->to = dup_str(to);
        if (!r->from || !r->to) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    } else if (st == ST_STRIP) {
        static const char *const keys[] = {"type", "content", "start", "stop", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        const char *s;
        TFC_TRY(str_field(c, v, field, "content", &s));
        if (strlen(s) != 1 || (unsigned char)s[0] >= 0x80)
            return hf_bad(c, field, "content must be one ASCII character");
        TFC_TRY(int_field(c, v, field, "start", &p->strip_start));
        TFC_TRY(int_field(c, v, field, "stop", &p->strip_stop));
        p->strip_char = s[0];
    } else {
        static const char *const keys[] = {"type", NULL}; /* ByteFallback, Fuse */
        TFC_TRY(hf_check_keys(c, v, field, keys));
        if (st == ST_BYTE_FALLBACK) p->dec_byte_fallback = 1;
    }
    return TFC_OK;
}

tfc_status hf_read_decoder(const hf_ctx *c, const json_t *v, hf_pipeline *p) {
    if (!v || json_is_null(v))
        return hf_bad(c, "decoder",
                      "null is not supported (Hugging Face then joins the tokens' strings with spaces); a ByteLevel "
                      "or a Replace/ByteFallback/Fuse/Strip decoder is needed");
    const char *type;
    TFC_TRY(hf_type(c, v, "decoder", &type));
    int stage = 0;
    if (strcmp(type, "Sequence") != 0) return decoder_step(c, v, "decoder", p, &stage);
    static const char *const keys[] = {"type", "decoders", NULL};
    TFC_TRY(hf_check_keys(c, v, "decoder", keys));
    const json_t *a = json_object_get(v, "decoders");
    if (!json_is_array(a) || json_array_size(a) > MAX_STEPS)
        return hf_bad(c, "decoder", "\"decoders\" must be an array of at most %d decoders", MAX_STEPS);
    for (size_t i = 0; i < json_array_size(a); i++) {
        char f[64];
        snprintf(f, sizeof f, "decoder.decoders[%zu]", i);
        TFC_TRY(decoder_step(c, json_array_get(a, i), f, p, &stage));
    }
    return TFC_OK;
}

/* ---- post_processor -------------------------------------------------------------------- */

static tfc_status push_name(const hf_ctx *c, const char ***a, int32_t *n, const char *name) {
    const char **x = realloc(*a, (size_t)(*n + 1) * sizeof *x);
    if (!x) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    x[(*n)++] = name;
    *a = x;
    return TFC_OK;
}

static tfc_status template_step(const hf_ctx *c, const json_t *v, const char *field, hf_pipeline *p) {
    static const char *const keys[] = {"type", "single", "pair", "special_tokens", NULL};
    TFC_TRY(hf_check_keys(c, v, field, keys));
    if (p->special_tokens) return hf_bad(c, field, "a second TemplateProcessing is not supported");
    const json_t *single = json_object_get(v, "single"), *pair = json_object_get(v, "pair"),
                 *sp = json_object_get(v, "special_tokens");
    if (!json_is_array(single) || json_array_size(single) > MAX_STEPS)
        return hf_bad(c, field, "\"single\" must be an array of at most %d pieces", MAX_STEPS);
    if (pair && !json_is_array(pair)) return hf_bad(c, field, "\"pair\" must be an array");
    if (!json_is_object(sp)) return hf_bad(c, field, "\"special_tokens\" must be an object");
    int seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        char f[128];
        snprintf(f, sizeof f, "%s.single[%zu]", field, i);
        const json_t *item = json_array_get(single, i);
        static const char *const ikeys[] = {"SpecialToken", "Sequence", NULL};
        TFC_TRY(hf_check_keys(c, item, f, ikeys));
        if (json_object_size(item) != 1) return hf_bad(c, f, "expected one of SpecialToken or Sequence");
        const json_t *st = json_object_get(item, "SpecialToken"), *sq = json_object_get(item, "Sequence");
        static const char *const skeys[] = {"id", "type_id", NULL};
        const char *id;
        TFC_TRY(hf_check_keys(c, st ? st : sq, f, skeys));
        TFC_TRY(str_field(c, st ? st : sq, f, "id", &id));
        if (sq) {
            if (strcmp(id, "A") != 0 || seen_a) return hf_bad(c, f, "the single template must hold sequence A once");
            seen_a = 1;
        } else {
            if (!json_object_get(sp, id))
                return hf_bad(c, f, "special token '%.64s' is not in the template's special_tokens", id);
            TFC_TRY(push_name(c, seen_a ? &p->suffix : &p->prefix, seen_a ? &p->n_suffix : &p->n_prefix, id));
        }
    }
    if (!seen_a) return hf_bad(c, field, "the single template has no sequence A");
    p->special_tokens = sp;
    return TFC_OK;
}

static tfc_status post_processor(const hf_ctx *c, const json_t *v, const char *field, hf_pipeline *p, int depth) {
    const char *type;
    TFC_TRY(hf_type(c, v, field, &type));
    if (strcmp(type, "Sequence") == 0 && depth == 0) {
        static const char *const keys[] = {"type", "processors", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        const json_t *a = json_object_get(v, "processors");
        if (!json_is_array(a) || json_array_size(a) > MAX_STEPS)
            return hf_bad(c, field, "\"processors\" must be an array of at most %d processors", MAX_STEPS);
        for (size_t i = 0; i < json_array_size(a); i++) {
            char f[96];
            snprintf(f, sizeof f, "%s.processors[%zu]", field, i);
            TFC_TRY(post_processor(c, json_array_get(a, i), f, p, depth + 1));
        }
        return TFC_OK;
    }
    if (strcmp(type, "TemplateProcessing") == 0) return template_step(c, v, field, p);
    if (strcmp(type, "ByteLevel") == 0) {
        static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
        TFC_TRY(hf_check_keys(c, v, field, keys));
        int x = 0; /* offsets only */
        TFC_TRY(hf_bool(c, v, field, "add_prefix_space", &x));
        TFC_TRY(hf_bool(c, v, field, "trim_offsets", &x));
        TFC_TRY(hf_bool(c, v, field, "use_regex", &x));
        return TFC_OK;
    }
    return hf_bad(c, field,
                  "post-processor type '%.64s' is not supported (supported: TemplateProcessing, ByteLevel, a "
                  "Sequence of them)",
                  type);
}

tfc_status hf_read_post_processor(const hf_ctx *c, const json_t *v, hf_pipeline *p) {
    if (!v || json_is_null(v)) return TFC_OK;
    return post_processor(c, v, "post_processor", p, 0);
}
