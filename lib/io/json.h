/*
 * The library's one JSON reader and writer helpers, shared by the
 * safetensors header (lib/io/safetensors.c) and Hugging Face config.json
 * files (lib/model/gpt_hf.c). The reader is strict (RFC 8259 strings with
 * escapes and surrogate pairs, no NUL characters) and works over a byte
 * range it never reads past; errors are TFC_ERR_FORMAT naming the caller's
 * function, what is being read and the byte offset.
 */
#ifndef TFC_IO_JSON_H
#define TFC_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

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

/* A reader over [start, end): p is where it is; fn and what name the caller and the document in errors. */
typedef struct tfc_json {
    const char *p, *end, *start;
    const char *fn;   /* the public function reading, for messages */
    const char *what; /* "safetensors header", "config.json", ... */
} tfc_json;

/* TFC_ERR_FORMAT "fn: malformed <what> at byte N: why". */
tfc_status tfc_json_error(tfc_json *j, const char *why);
void tfc_json_skip_ws(tfc_json *j);
/* Consume c (after white space) and return 1, or return 0 leaving the position. */
int tfc_json_accept(tfc_json *j, char c);
/* A string into a new NUL-terminated buffer (*out, owned by the caller). */
tfc_status tfc_json_string(tfc_json *j, char **out);
/* A non-negative integer below 2^63 (no fraction or exponent). */
tfc_status tfc_json_uint(tfc_json *j, uint64_t *v);
/* Any JSON number, as a double. */
tfc_status tfc_json_number(tfc_json *j, double *v);
/* true / false / null: *v 1, 0, -1. Errors when the next value is none of them. */
tfc_status tfc_json_literal(tfc_json *j, int *v);
/* Skip one value of any kind (objects and arrays nested at most 64 deep). */
tfc_status tfc_json_skip(tfc_json *j);

#endif
