/*
 * Pre-tokenization: cutting text into chunks with the GPT-2 or cl100k
 * pattern (PCRE2, JIT-compiled), so BPE merges never cross a chunk edge.
 */
#ifndef TFC_TOKENIZER_SPLIT_H
#define TFC_TOKENIZER_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/core.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

typedef struct tfc_splitter {
    int32_t pattern; /* tfc_split_pattern */
    pcre2_code *re;  /* NULL for TFC_SPLIT_NONE */
    int jit;         /* 1 when JIT compilation succeeded */
} tfc_splitter;

/* Walks the chunks of one text; per call state, so one splitter serves many threads. */
typedef struct split_iter {
    const tfc_splitter *sp;
    const uint8_t *text;
    size_t len, pos;
    size_t m_start, m_end; /* the next regex match, when has_match */
    int has_match;
    int pcre2_only; /* 1: skip the ASCII fast path (tests compare the two) */
    pcre2_match_data *md;
    pcre2_match_context *mctx; /* only after the JIT's default stack ran out */
    pcre2_jit_stack *stack;
} split_iter;

/* The PCRE2 source of a pattern, or NULL for NONE / unknown values. */
const char *split_pattern_source(int32_t pattern);
/* Compile pattern; `fn` names the public caller in error messages. */
tfc_status splitter_init(const char *fn, tfc_splitter *sp, int32_t pattern);
void splitter_free(tfc_splitter *sp);

tfc_status split_iter_init(const char *fn, split_iter *it, const tfc_splitter *sp, const uint8_t *text, size_t len);
/*
 * The next chunk [*start, *end): 1 when there is one, 0 at the end, or a
 * negative tfc_status (message set). Bytes no pattern branch accepts
 * (invalid UTF-8) come out as chunks of their own, so chunks always tile
 * the text.
 */
int split_next(const char *fn, split_iter *it, size_t *start, size_t *end);
void split_iter_free(split_iter *it);

/*
 * The largest c in (0, len) where the text may be cut without changing
 * its chunks (whatever follows it), or 0 when there is none: just after a
 * lone "\n" that follows a printable non-space ASCII byte and precedes an
 * ASCII letter. Used to stream training files block by block.
 */
size_t split_safe_cut(const uint8_t *p, size_t len);

#endif
