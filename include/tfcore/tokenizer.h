/*
 * tfcore/tokenizer.h — BPE tokenizer: train, encode, decode, GPT-2 /
 * tiktoken / Hugging Face tokenizer.json / own file formats. Guide:
 * docs/TOKENIZER.md.
 *
 * A tokenizer maps any byte string to token ids and back exactly. Text is
 * first split into chunks by a pre-tokenizer pattern (none, GPT-2's,
 * cl100k's, Llama 3's or Qwen2's), then each chunk starts as one token per
 * byte and adjacent tokens are merged, lowest merge rank first (leftmost
 * among equal ranks), until no adjacent pair has a merge. Special tokens
 * (e.g. "<|endoftext|>") have fixed ids and are only recognised when the
 * caller asks for it (see tfc_special_mode). A tokenizer loaded from a
 * tokenizer.json follows that file's pipeline instead, as Hugging Face's
 * tokenizers does (tfc_tokenizer_load_hf_json): its encode and decode need
 * not be exact inverses.
 *
 * The patterns follow tiktoken's: \s in them means the Unicode White_Space
 * property (as in the Rust and Python regex engines): U+0085 is
 * whitespace; U+FEFF, U+180E and U+001C..U+001F are not. Letters and
 * numbers (\p{L}, \p{N}) come from PCRE2's Unicode tables.
 *
 * Thread-safety: a tokenizer that is no longer being modified (trained,
 * loaded, special tokens added) may be used by any number of threads at
 * once: encode, encode_batch, decode, token_bytes, vocab_size and save only
 * read it. Train and add_special modify it and must not run concurrently
 * with any other call on the same tokenizer.
 *
 * Memory: arrays the library returns (ids, bytes, offsets) are freed with
 * tfc_free(). Pointers returned as "borrowed" stay valid until the
 * tokenizer is modified or released.
 */
#ifndef TFCORE_TOKENIZER_H
#define TFCORE_TOKENIZER_H

#include "tfcore/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfc_tokenizer tfc_tokenizer;

/* Pre-tokenizer split patterns. Values are part of the ABI. */
typedef enum tfc_split_pattern {
    TFC_SPLIT_NONE = 0,   /* the whole text is one chunk */
    TFC_SPLIT_GPT2 = 1,   /* GPT-2 / r50k / p50k pattern */
    TFC_SPLIT_CL100K = 2, /* GPT-4 cl100k_base pattern */
    TFC_SPLIT_LLAMA3 = 3, /* Llama 3's tokenizer.json pattern (cl100k's without its end-of-text rule) */
    TFC_SPLIT_QWEN2 = 4,  /* Qwen2's: Llama 3's with one digit per chunk */
    TFC_SPLIT_FORCE_INT32 = 0x7fffffff
} tfc_split_pattern;

/* How encode treats text equal to a registered special token. */
typedef enum tfc_special_mode {
    TFC_SPECIAL_AS_TEXT = 0,    /* encoded as ordinary text (tiktoken encode_ordinary) */
    TFC_SPECIAL_ALLOWED = 1,    /* mapped to the special token's id (allowed_special="all") */
    TFC_SPECIAL_DISALLOWED = 2, /* its appearance is an error (TFC_ERR_INVALID_ARG) */
    TFC_SPECIAL_FORCE_INT32 = 0x7fffffff
} tfc_special_mode;

/*
 * A new untrained tokenizer with the 256 byte tokens (id b is byte b) and
 * no merges, splitting text with `pattern` (a tfc_split_pattern).
 * Errors: NULL out, unknown pattern (TFC_ERR_INVALID_ARG), TFC_ERR_OOM.
 * Release with tfc_tokenizer_release().
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_new(int32_t pattern, tfc_tokenizer **out);

/* Free a tokenizer. NULL is accepted. Not concurrently with other calls on it. */
TFC_API void tfc_tokenizer_release(tfc_tokenizer *tok /* nullable */);

/*
 * Train merges on len bytes of text (any bytes; NUL and invalid UTF-8 are
 * fine) until the tokenizer has vocab_size ordinary tokens (256 byte tokens
 * + vocab_size - 256 merges; id of merge k is 256 + k). The text is split
 * with the tokenizer's pattern; pairs never cross chunk boundaries. Each
 * step merges the most frequent adjacent pair; ties go to the pair with
 * the smallest (left id, right id). Stops early when no pair is left.
 * Only a fresh tokenizer (from tfc_tokenizer_new, no merges) can be
 * trained; special tokens already added must have ids >= vocab_size.
 * Errors: NULL tok / NULL text with len > 0, vocab_size < 256 or above
 * 2^30, already trained, special id collision (TFC_ERR_INVALID_ARG),
 * TFC_ERR_OOM. On error the tokenizer is unchanged.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_train(tfc_tokenizer *tok, const char *text /* nullable when len == 0 */,
                                                     size_t len, int32_t vocab_size);

/*
 * As tfc_tokenizer_train, over the contents of n_paths files, each split
 * on its own and streamed in 1 MiB blocks so the files never need to fit
 * in memory at once (only their distinct chunks and counts do). Blocks are
 * cut only where the split is provably the same as on the whole file
 * (after a lone "\n" between printable ASCII and a letter), so one file
 * gives the same merges as tfc_tokenizer_train on its bytes. With
 * TFC_SPLIT_NONE each file is one chunk and is read whole. Errors: as
 * train, plus unreadable files (TFC_ERR_IO, naming the path).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_train_files(tfc_tokenizer *tok, const char *const *paths,
                                                           int32_t n_paths, int32_t vocab_size);

/*
 * Register special token `text` (NUL-terminated, non-empty, at most 256
 * bytes) with a fixed id in [0, 2^30). The id must not be an ordinary
 * token's and neither id nor text may already be a special token's.
 * Errors: TFC_ERR_INVALID_ARG naming the conflict, TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_add_special(tfc_tokenizer *tok, const char *text, int32_t id);

/*
 * Encode len bytes of text (any bytes) to ids. *ids is a new array of *n_ids
 * ids (freed with tfc_free; may be NULL when *n_ids is 0).
 * special_mode is a tfc_special_mode; with TFC_SPECIAL_ALLOWED the leftmost
 * special token found is taken (the longest one when several start there).
 * Errors: NULL arguments, unknown mode, a special token's text in
 * TFC_SPECIAL_DISALLOWED mode (TFC_ERR_INVALID_ARG, naming the token and
 * its byte offset), TFC_ERR_OOM. Thread-safe (see top of file).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_encode(const tfc_tokenizer *tok,
                                                      const char *text /* nullable when len == 0 */, size_t len,
                                                      int32_t special_mode, int32_t **ids, size_t *n_ids);

/*
 * Encode n_texts texts (texts[i] of lens[i] bytes) on n_threads threads
 * (<= 0: one per CPU core). The ids of text i are
 * (*ids)[(*offsets)[i] .. (*offsets)[i+1]); *offsets has n_texts + 1
 * entries. Both arrays are new (tfc_free). Results equal encoding each
 * text alone. Errors: as tfc_tokenizer_encode (the first failing text is
 * named); TFC_ERR_INVALID_ARG for NULL texts[i] with lens[i] > 0.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_encode_batch(const tfc_tokenizer *tok,
                                                            const char *const *texts /* nullable when n_texts == 0 */,
                                                            const size_t *lens /* nullable when n_texts == 0 */,
                                                            size_t n_texts, int32_t special_mode, int32_t n_threads,
                                                            int32_t **ids, size_t **offsets);

/*
 * Decode ids to the exact bytes they stand for (special tokens give their
 * text). *bytes is a new array of *len bytes plus a terminating NUL (not
 * counted), freed with tfc_free. Errors: NULL arguments (ids may be NULL
 * when n_ids is 0), an id that is not a token (TFC_ERR_INVALID_ARG naming
 * its index and value), TFC_ERR_OOM. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_decode(const tfc_tokenizer *tok,
                                                      const int32_t *ids /* nullable when n_ids == 0 */, size_t n_ids,
                                                      char **bytes, size_t *len);

/*
 * As tfc_tokenizer_decode, but the result is always valid UTF-8: every
 * maximal ill-formed subsequence is replaced with U+FFFD (the Unicode
 * "maximal subpart" practice, as Python's errors="replace").
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_decode_utf8(const tfc_tokenizer *tok,
                                                           const int32_t *ids /* nullable when n_ids == 0 */,
                                                           size_t n_ids, char **text, size_t *len);

/*
 * One more than the largest token id (ordinary or special), like tiktoken's
 * n_vocab. Some ids below it may be unused (cl100k has gaps).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_vocab_size(const tfc_tokenizer *tok, int32_t *out);

/*
 * The bytes of token id (borrowed, not NUL-terminated) and whether it is a
 * special token (*is_special 1, else 0; is_special may be NULL).
 * Errors: NULL arguments, id out of range or unused (TFC_ERR_INVALID_ARG).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_token_bytes(const tfc_tokenizer *tok, int32_t id, const char **bytes,
                                                           size_t *len, int32_t *is_special /* nullable */);

/* Number of merge rules (pairs that merge into a token). */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_n_merges(const tfc_tokenizer *tok, int32_t *out);

/*
 * Merge rule i in rank order (i in [0, n_merges)): adjacent tokens left and
 * right merge into token id, with priority *rank (lower merges first).
 * For a trained tokenizer merge i is the i-th merge learned, rank 256 + i.
 * Errors: NULL arguments, i out of range (TFC_ERR_INVALID_ARG).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_get_merge(const tfc_tokenizer *tok, int32_t i, int32_t *left,
                                                         int32_t *right, int32_t *id, int32_t *rank);

/*
 * Load GPT-2's encoder.json (token string -> id, in GPT-2's byte-to-unicode
 * alphabet) and vocab.bpe (merges, one "left right" per line, rank = line
 * order). Entries of encoder.json that are neither a byte nor produced by a
 * merge (e.g. "<|endoftext|>") become special tokens. The tokenizer uses
 * the GPT-2 split pattern. Errors: unreadable files (TFC_ERR_IO),
 * malformed JSON, unknown characters, duplicate ids or merges, a merge
 * naming an unknown token or producing a token not in encoder.json, a
 * missing byte token (TFC_ERR_FORMAT naming file and line), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_load_gpt2(const char *encoder_json_path, const char *vocab_bpe_path,
                                                         tfc_tokenizer **out);

/*
 * Load a tiktoken rank file ("<base64 token> <rank>" per line; gpt2,
 * r50k_base, p50k_base, cl100k_base ...) with split pattern `pattern`.
 * Rank is the token id; tokens merge with tiktoken's rule (two adjacent
 * parts merge when their concatenation is a token, lowest rank first).
 * Special tokens are added afterwards with tfc_tokenizer_add_special.
 * Errors: TFC_ERR_IO, malformed lines, bad base64, duplicate ranks or
 * tokens, ranks >= 2^30, a missing byte token (TFC_ERR_FORMAT naming the
 * line), unknown pattern (TFC_ERR_INVALID_ARG), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_load_tiktoken(const char *path, int32_t pattern, tfc_tokenizer **out);

/* Flags of tfc_tokenizer_load_hf_json. */
#define TFC_TOKENIZER_ADD_SPECIAL 1u /* encode adds the post_processor template's tokens (e.g. BOS) around every text */

/*
 * Load a Hugging Face tokenizer.json with a BPE model: byte-level (GPT-2,
 * Llama 3, Qwen2) or SentencePiece-style with byte fallback (Llama 2,
 * Mistral, TinyLlama), its added and special tokens, normalizer,
 * pre-tokenizer, post-processor template and decoder, so that encode gives
 * the ids Hugging Face's tokenizers gives for the same file and text and
 * decode_utf8 the text its decode gives (docs/TOKENIZER.md lists what is
 * honoured). Differences from tokenizers: encode takes bytes, and
 * ill-formed UTF-8 is read as U+FFFD per maximal ill-formed subpart (what
 * Python's errors="replace" or Node's Buffer.toString hands tokenizers);
 * special_mode TFC_SPECIAL_ALLOWED is tokenizers' default, AS_TEXT its
 * encode_special_tokens (added tokens that are not special are matched in
 * every mode); decode refuses ids that are not tokens, which tokenizers
 * skips. decode gives the decoded bytes (the decoder's per-token output
 * and Strip), not necessarily the encoded text: the normalizer and a
 * prepended "▁" are not undone, and unknown characters come back as the
 * unknown token. flags: 0 or TFC_TOKENIZER_ADD_SPECIAL (the template's
 * tokens, "with BOS"). The tokenizer cannot be saved (tfc_tokenizer_save)
 * or be given special tokens (tfc_tokenizer_add_special): the file holds
 * them. Errors: NULL arguments, unknown flags (TFC_ERR_INVALID_ARG),
 * TFC_ERR_IO, TFC_ERR_FORMAT naming the file and the field for malformed
 * JSON and for anything the file asks that the library cannot honour (a
 * model type other than BPE, an unknown normalizer, pre-tokenizer,
 * decoder or post-processor type or key, a Split regex other than Llama
 * 3's or Qwen2's, merges naming tokens not in the vocabulary, an added
 * token whose id tokenizers would not give it, ...), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_load_hf_json(const char *path, uint32_t flags, tfc_tokenizer **out);

/*
 * Save to our own versioned text format (docs/TOKENIZER.md), which
 * tfc_tokenizer_load reads back to a tokenizer that encodes and decodes
 * identically. The file is written to path + ".tmp" and renamed.
 * Errors: NULL arguments, TFC_ERR_IO, TFC_ERR_UNSUPPORTED for a tokenizer
 * from a tokenizer.json (the format cannot hold its pipeline: keep the
 * tokenizer.json).
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_save(const tfc_tokenizer *tok, const char *path);

/*
 * Load a file written by tfc_tokenizer_save. Errors: TFC_ERR_IO,
 * TFC_ERR_VERSION (a newer format version), TFC_ERR_FORMAT (malformed or
 * inconsistent content, naming the line), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_tokenizer_load(const char *path, tfc_tokenizer **out);

/*
 * ---- Chat templates (docs/TOKENIZER.md, "Chat templates") ----
 *
 * A chat model is prompted with its conversation written the way its
 * chat template (the Jinja "chat_template" of its tokenizer_config.json)
 * writes it. The library renders the templates of the families below,
 * each written out in C from the model's own template and checked
 * against Jinja rendering that template, for messages with the roles
 * "system", "user" and "assistant" and text content (no tools, no tool
 * messages). A template it does not render is refused, never rendered as
 * a family it resembles. These functions keep no state: any number of
 * threads may call them at once (tfc_chat_encode only reads tok).
 */

/* Template families. Values are part of the ABI. */
typedef enum tfc_chat_family {
    /* ChatML as Qwen2-Instruct's template writes it: "<|im_start|>role\ncontent<|im_end|>\n" per message, after a
       default "You are a helpful assistant." system message when the first message is not a system one */
    TFC_CHAT_CHATML = 1,
    /* Meta-Llama-3-Instruct: "<|begin_of_text|>", then "<|start_header_id|>role<|end_header_id|>\n\n" +
       strip(content) + "<|eot_id|>" per message */
    TFC_CHAT_LLAMA3 = 2,
    /* Llama-2-chat: "<s>[INST] " + strip(user) + " [/INST]" and " " + strip(assistant) + " </s>" per turn, the system
       message inside the first user turn as "<<SYS>>\n...\n<</SYS>>\n\n"; roles alternate user/assistant */
    TFC_CHAT_LLAMA2 = 3,
    /* Llama-3.1-Instruct without tools: Llama 3's turns after an always-present system turn opening with "Cutting
       Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" (the template's date when given none) */
    TFC_CHAT_LLAMA3_1 = 4,
    /* Qwen2.5-Instruct without tools: ChatML with the default system message "You are Qwen, created by Alibaba
       Cloud. You are a helpful assistant." */
    TFC_CHAT_QWEN2_5 = 5,
    TFC_CHAT_FORCE_INT32 = 0x7fffffff
} tfc_chat_family;

/* One message of a conversation; both strings NUL-terminated, borrowed for the call. */
typedef struct tfc_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* well-formed UTF-8, inserted as it is (a special token's text in it stays that text) */
} tfc_chat_message;

/*
 * The conversation messages[0 .. n_messages) as the family's template
 * writes it, ending with the opening of an assistant turn when
 * add_generation_prompt is 1 (Llama 2's template takes none: its text
 * after a user turn already ends where the reply starts). *text is a new
 * NUL-terminated UTF-8 string of *len bytes (len may be NULL), freed with
 * tfc_free. Errors (TFC_ERR_INVALID_ARG, naming the message index): NULL
 * arguments, n_messages 0, an unknown family, add_generation_prompt not 0
 * or 1, a role other than the three, content that is not well-formed
 * UTF-8, and for Llama 2 a role order its template refuses (after an
 * optional first system message, user and assistant must alternate
 * starting with user; a later system message, which its template drops
 * silently, is refused too); TFC_ERR_OOM. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_chat_render(int32_t family, const tfc_chat_message *messages, size_t n_messages,
                                                 int32_t add_generation_prompt, char **text,
                                                 size_t *len /* nullable */);

/*
 * tfc_chat_render, then tok's ids of the text as Hugging Face's
 * apply_chat_template(tokenize=True) gives them: special tokens in the
 * text are recognised (TFC_SPECIAL_ALLOWED) and the tokens a
 * tokenizer.json loaded with TFC_TOKENIZER_ADD_SPECIAL puts around every
 * text are not added (the template already writes its BOS). *ids is a new
 * array of *n_ids ids (tfc_free). Errors: as tfc_chat_render; NULL tok,
 * ids or n_ids; TFC_ERR_INVALID_ARG when a special token the family's
 * template writes ("<|im_start|>", "<|eot_id|>", "<s>" ...) is not one
 * token of tok (it is not that model's tokenizer); TFC_ERR_OOM.
 * Thread-safe (tok is only read).
 */
TFC_API TFC_NODISCARD tfc_status tfc_chat_encode(const tfc_tokenizer *tok, int32_t family,
                                                 const tfc_chat_message *messages, size_t n_messages,
                                                 int32_t add_generation_prompt, int32_t **ids, size_t *n_ids);

/*
 * The family whose template chat_template (Jinja source, as a
 * tokenizer_config.json holds it after JSON decoding) is: the templates
 * of Qwen2-Instruct, Qwen2.5-Instruct, Meta-Llama-3-Instruct,
 * Llama-3.1-Instruct and Llama-2-chat, compared after the whitespace
 * control Jinja applies and with cosmetic differences inside tags
 * ignored. Anything else is refused with TFC_ERR_UNSUPPORTED: the message
 * names the family its markers suggest (<|im_start|>, <|start_header_id|>,
 * [INST]) and why it is not rendered, or says that none of those markers
 * was found. Errors: NULL arguments (TFC_ERR_INVALID_ARG), TFC_ERR_OOM.
 * *family is untouched on error. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_chat_template_detect(const char *chat_template, int32_t *family);

/*
 * Read a model's tokenizer_config.json at path: its chat template's family
 * (its "chat_template": a string, or the "default" entry of a list of
 * named templates; without one, chat_template.jinja in the same
 * directory), recognised as tfc_chat_template_detect does, and its
 * bos_token and eos_token texts (a string or an AddedToken object's
 * "content"; NULL when absent or null). *bos_token and *eos_token are new
 * strings freed with tfc_free; either pointer may be NULL when not
 * wanted. Errors: NULL path or family (TFC_ERR_INVALID_ARG); TFC_ERR_IO
 * (unreadable file, naming it); TFC_ERR_FORMAT (malformed JSON, a field of
 * the wrong type, naming it); TFC_ERR_UNSUPPORTED (no chat template, a
 * template not recognised, or a bos_token / eos_token other than the one
 * the family's rendering writes, e.g. a Llama 2 template with a bos_token
 * that is not "<s>"); TFC_ERR_OOM. Outputs are untouched on error.
 * Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_chat_config_load(const char *path, int32_t *family,
                                                      char **bos_token /* nullable */, char **eos_token /* nullable */);

/*
 * The short name of family ("chatml", "llama3", "llama2", "llama3.1",
 * "qwen2.5") and the token that ends one of its turns, where generation
 * stops ("<|im_end|>", "<|eot_id|>", "</s>"): static strings. end_of_turn
 * may be NULL. Errors: NULL name, unknown family (TFC_ERR_INVALID_ARG).
 */
TFC_API TFC_NODISCARD tfc_status tfc_chat_family_info(int32_t family, const char **name,
                                                      const char **end_of_turn /* nullable */);

/*
 * The family named name: one of tfc_chat_family_info's names, or "qwen2"
 * (Qwen2-Instruct's template, the ChatML family). Errors: NULL arguments,
 * an unknown name (TFC_ERR_INVALID_ARG, listing the names).
 */
TFC_API TFC_NODISCARD tfc_status tfc_chat_family_from_name(const char *name, int32_t *family);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_TOKENIZER_H */
