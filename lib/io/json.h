/*
 * JSON for the library: every JSON document it reads (the safetensors
 * header, Hugging Face config.json, PEFT adapter_config.json, GPT-2's
 * encoder.json) is parsed by jansson (docs/ARCHITECTURE.md, lib/io) through
 * tfc_json_parse, and read from the resulting tree with the field getters
 * below, whose errors name the key. The writer helpers build the JSON the
 * library writes.
 *
 * Parsing is RFC 8259 as jansson implements it: strict number grammar
 * (integers beyond int64 and reals beyond double are errors), valid UTF-8,
 * no \u0000, nothing after the value; on top of it nesting is refused past
 * TFC_JSON_MAX_DEPTH. A key repeated in one object: the last wins, as JSON
 * says, unless TFC_JSON_REFUSE_DUPLICATES (then it is an error naming the
 * key).
 */
#ifndef TFC_IO_JSON_H
#define TFC_IO_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tfcore/core.h"

/* A growing NUL-terminated string; oom is set (and further puts ignored) when an allocation fails. */
typedef struct tfc_strbuf {
    char *p;
    size_t n, cap;
    int oom;
} tfc_strbuf;

void tfc_sb_put(tfc_strbuf *b, const char *s, size_t len);
void tfc_sb_str(tfc_strbuf *b, const char *s);
/* s as a JSON string literal: quotes, backslash and control characters escaped. */
void tfc_sb_json_string(tfc_strbuf *b, const char *s);

#define TFC_JSON_MAX_DEPTH 64
#define TFC_JSON_REFUSE_DUPLICATES 1 /* flag: a key twice in one object is an error */

/* Why a parse failed, for callers that word their own messages (tfc_json_load). */
typedef struct tfc_json_problem {
    long long byte; /* offset jansson had reached (the error is at or just before it) */
    int oom;        /* out of memory */
    int duplicate;  /* a key appeared twice (TFC_JSON_REFUSE_DUPLICATES); key holds it */
    char key[96];
    char why[224]; /* a phrase, e.g. "expected ':' near '256'" */
} tfc_json_problem;

/* buf[0, len) as a JSON object or array into *out (json_decref it); 0, or -1 with *p filled. */
int tfc_json_load(const void *buf, size_t len, int flags, json_t **out, tfc_json_problem *p);
/*
 * The same, errors as TFC_ERR_FORMAT "fn: malformed <what> at byte N: why"
 * (TFC_ERR_OOM when memory ran out).
 */
tfc_status tfc_json_parse(const char *fn, const char *what, const void *buf, size_t len, int flags, json_t **out);

/*
 * All of the open file f (at most max bytes; f stays open) parsed as
 * tfc_json_parse does. Errors: TFC_ERR_IO "fn: cannot read <what>",
 * TFC_ERR_FORMAT "fn: <what> is over <max> bytes", or tfc_json_parse's.
 * The buffer grows with what is read: a 1 KB file costs about 1 KB.
 */
tfc_status tfc_json_read(const char *fn, const char *what, FILE *f, size_t max, int flags, json_t **out);

/*
 * Field getters of an object: *found (nullable) says whether key is there;
 * an absent key leaves *v alone and is no error. A present key of the wrong
 * type or outside [lo, hi] is TFC_ERR_FORMAT "fn: <what>: \"key\" ...".
 */
/* An integer-valued number (2, 2.0, 2e0). */
tfc_status tfc_json_get_int(const char *fn, const char *what, const json_t *obj, const char *key, int64_t lo,
                            int64_t hi, int64_t *v, int *found);
/* Any number (integer or real). */
tfc_status tfc_json_get_number(const char *fn, const char *what, const json_t *obj, const char *key, double lo,
                               double hi, double *v, int *found);
tfc_status tfc_json_get_bool(const char *fn, const char *what, const json_t *obj, const char *key, int *v, int *found);
/* *v points into obj (valid while obj lives). */
tfc_status tfc_json_get_string(const char *fn, const char *what, const json_t *obj, const char *key, const char **v,
                               int *found);

#endif
