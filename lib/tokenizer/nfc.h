/*
 * Unicode Normalization Form C (UAX #15) of well-formed UTF-8: the
 * normalizer "NFC" of a Hugging Face tokenizer.json (Qwen2's). Tables:
 * unicode_nfc_table.h (scripts/gen_unicode_nfc.py), Unicode 14.0.
 */
#ifndef TFC_TOKENIZER_NFC_H
#define TFC_TOKENIZER_NFC_H

#include <stddef.h>
#include <stdint.h>

/*
 * NFC of s[0..n) (well-formed UTF-8). 0: s is already NFC (nothing
 * allocated); 1: *out is a new malloc'd buffer of *out_n bytes plus a NUL;
 * -1: out of memory.
 */
int tok_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n);

#endif
