/*
 * GPT-2's byte-level alphabet (bytes_to_unicode() of GPT-2's encoder.py,
 * also Hugging Face's ByteLevel): every byte is written as one printable
 * character. The 188 printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
 * stand for themselves; the other 68 bytes, in increasing order, are
 * U+0100, U+0101, ... GPT-2's encoder.json and vocab.bpe and byte-level
 * tokenizer.json files spell their tokens in it.
 */
#ifndef TFC_TOKENIZER_BYTE_ALPHABET_H
#define TFC_TOKENIZER_BYTE_ALPHABET_H

#include <stddef.h>
#include <stdint.h>

/* The alphabet's code points run below this. */
#define TOK_ALPHABET_END 324

/* inv[cp] = the byte code point cp stands for, -1 for code points outside the alphabet. */
void tok_alphabet_inverse(int32_t inv[TOK_ALPHABET_END]);

/*
 * Alphabet text s[0..n) (UTF-8) -> its bytes into out (room for n); the
 * number of bytes, or -1 when s holds a character outside the alphabet or
 * is not UTF-8.
 */
long tok_alphabet_to_bytes(const int32_t inv[TOK_ALPHABET_END], const uint8_t *s, size_t n, uint8_t *out);

#endif
