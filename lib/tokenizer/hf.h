/*
 * What a Hugging Face tokenizer.json adds to a tokenizer: the pipeline
 * around the BPE model (docs/TOKENIZER.md, "Hugging Face tokenizer.json"),
 * read by hf_json.c and hf_pipeline_json.c, run by hf_encode.c (encoding)
 * and decode.c (decoding).
 *
 * Encoding, as Hugging Face's tokenizers does it:
 *   0. ill-formed UTF-8 becomes U+FFFD (HF takes only strings);
 *   1. added tokens whose "normalized" is false are cut out of the text,
 *      leftmost-longest (special ones only when the mode asks for them);
 *   2. each piece between them goes through the normalizer steps;
 *   3. added tokens whose "normalized" is true are cut out of the
 *      normalized pieces;
 *   4. each remaining piece is pre-tokenized (the split pattern, or
 *      Metaspace) into words;
 *   5. each word goes through the BPE model: byte-level (a word is bytes,
 *      one start token per byte) or SentencePiece-style (a word is
 *      characters, one start token per character, byte fallback or the
 *      unknown token for characters outside the vocabulary), then merges
 *      by rank;
 *   6. with TFC_TOKENIZER_ADD_SPECIAL, the post-processor template's
 *      tokens go before and after.
 */
#ifndef TFC_TOKENIZER_HF_H
#define TFC_TOKENIZER_HF_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/core.h"
#include "tokenizer/byte_map.h"

/* Normalizer steps, applied in order. */
enum { HF_NORM_NFC = 1, HF_NORM_PREPEND = 2, HF_NORM_REPLACE = 3 };

typedef struct hf_norm {
    int kind;
    uint8_t *from, *to; /* PREPEND: `to`; REPLACE: every `from` becomes `to` */
    size_t from_len, to_len;
} hf_norm;

/* Metaspace's prepend_scheme. */
enum { HF_PREPEND_NEVER = 0, HF_PREPEND_FIRST = 1, HF_PREPEND_ALWAYS = 2 };

/* An added token: its text as matched in the input (not its decoded bytes). */
typedef struct hf_added {
    int32_t id;
    uint8_t special, normalized;
    uint32_t off, len; /* content bytes at tok_hf.added_text + off */
} hf_added;

/* Finds added tokens in text, leftmost-longest (hf_encode.c). */
typedef struct hf_matcher {
    /* indices into tok_hf.added, ordered by first byte, then second byte (one-byte tokens last), longer first */
    int32_t *order;
    int32_t n;
    int32_t first[257]; /* order[first[b] .. first[b + 1]) start with byte b */
} hf_matcher;

typedef struct tok_hf {
    int char_mode; /* 1: SentencePiece-style model (characters, byte fallback); 0: byte-level */
    hf_norm *norms;
    int32_t n_norms;
    /* pre-tokenizer: the split pattern lives in the tokenizer's splitter; or Metaspace */
    int metaspace, ms_prepend, ms_split;
    /* model */
    byte_map vocab;        /* every model vocabulary entry: its text as the model sees it -> id */
    int32_t unk_id;        /* -1: none */
    int fuse_unk;          /* consecutive unknown characters give one unknown token */
    int byte_fallback;     /* unknown characters become their bytes' <0xNN> tokens */
    int32_t fallback[256]; /* <0xNN> token of each byte (byte_fallback) */
    /*
     * char mode: byte_id[c] is ASCII character c's start token; ascii_unknown[c] is 1 when c is outside the
     * vocabulary without byte fallback (byte_id[c] is then the unknown token, or -1: dropped)
     */
    uint8_t ascii_unknown[128];
    /* added tokens, in the file's order */
    hf_added *added;
    int32_t n_added, cap_added;
    uint8_t *added_text;
    size_t added_text_len, added_text_cap;
    hf_matcher match[2]; /* [0]: the added tokens with normalized false, [1]: true */
    /* post-processor template around the ids (TFC_TOKENIZER_ADD_SPECIAL) */
    int add_special;
    int32_t *prefix, *suffix;
    int32_t n_prefix, n_suffix;
    /* decoder */
    int dec_byte_fallback; /* runs of byte tokens that are ill-formed UTF-8 give one U+FFFD per token */
    uint8_t *dec_is_byte;  /* per id: the token decodes to one byte by ByteFallback */
    int32_t strip_start;   /* Strip after Fuse: up to this many leading strip_char removed */
    int32_t strip_stop;    /* ... and trailing */
    uint8_t strip_char;    /* an ASCII character */
} tok_hf;

void tok_hf_free(tok_hf *h);

/* Build h->match from h->added; 0, or -1 when out of memory. */
int hf_build_matchers(tok_hf *h);

/*
 * Steps 0 to 4 and 6 of encoding (top of file) for text[0..len): calls
 * word(ctx, p, n) for every word the model must encode (p valid until the
 * call returns) and id(ctx, id) for every added or template token, in
 * order. mode is a tfc_special_mode: special added tokens are cut out in
 * TFC_SPECIAL_ALLOWED, left as text in TFC_SPECIAL_AS_TEXT, an error in
 * TFC_SPECIAL_DISALLOWED; other added tokens are always cut out. The
 * callbacks return 0, or -1 when out of memory.
 */
struct tfc_tokenizer;
tfc_status hf_encode(const char *fn, const struct tfc_tokenizer *t, const uint8_t *text, size_t len, int32_t mode,
                     int (*word)(void *ctx, const uint8_t *p, size_t n), int (*id)(void *ctx, int32_t id), void *ctx);

#endif
