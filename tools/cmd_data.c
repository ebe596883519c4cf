/*
 * tfcore data prepare: a text file to token files other tools train on, as
 * nanoGPT's data/shakespeare/prepare.py does — the first 90% of the text's
 * bytes to train.bin, the rest to val.bin, each encoded on its own — in
 * nanoGPT's headerless u16 (the default) or as llm.c data shards (--format
 * llmc), plus the vocabulary (tokenizer.tfctok, or tokenizer.chars for a
 * char vocabulary) that `tfcore train --data-bin --tokenizer` reads back.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *CMD = "data";

static void usage(FILE *f) {
    fprintf(f,
            "usage: tfcore data prepare --tokenizer char|bpe:VOCAB|gpt2:DIR|FILE [--format u16|llmc] IN.txt OUT_DIR\n"
            "Writes OUT_DIR/train.bin (the first 90%% of IN's bytes) and OUT_DIR/val.bin (the rest), each\n"
            "encoded on its own: u16 tokens without a header (nanoGPT's prepare.py; a vocabulary of at most\n"
            "65536), or llm.c data shards with their 1024-byte header (--format llmc); and the vocabulary,\n"
            "OUT_DIR/tokenizer.tfctok (BPE) or OUT_DIR/tokenizer.chars (char). Then:\n"
            "  tfcore train --data-bin OUT_DIR/train.bin --val-bin OUT_DIR/val.bin --tokenizer OUT_DIR/tokenizer.*\n");
}

/* Encode text and write it as one file of format; *n gets the token count. */
static int write_split(const vocab *v, const char *text, size_t len, const char *path, tfc_token_format format,
                       size_t *n) {
    int32_t *ids = NULL;
    int rc = vocab_encode(CMD, v, text, len, &ids, n);
    if (!rc && tfc_token_file_write_shard(path, ids, (int64_t)*n, format) != TFC_OK)
        rc = cli_lib_error(CMD, "writing the tokens");
    free(ids);
    return rc;
}

/*
 * The vocabulary next to the tokens: a BPE tokenizer file, the
 * tokenizer.json it was read from, or a char vocabulary's "char:<hex>" line.
 */
static int write_vocab(const vocab *v, const char *dir, const char **written) {
    if (v->json) {
        *written = path_join(dir, "tokenizer.json");
        return vocab_write_json(CMD, v, *written);
    }
    if (v->kind == VOCAB_BPE) {
        *written = path_join(dir, "tokenizer.tfctok");
        return tfc_tokenizer_save(v->bpe, *written) == TFC_OK ? 0 : cli_lib_error(CMD, "saving the tokenizer");
    }
    *written = path_join(dir, "tokenizer.chars");
    char *line = NULL;
    FILE *f = NULL;
    int rc = vocab_to_meta(v, &line) != 0 || !(f = fopen(*written, "wb")) || fprintf(f, "%s\n", line) < 0
        ? cli_error(EXIT_RUNTIME, CMD, "cannot write '%s'", *written)
        : 0;
    if (f && fclose(f) != 0 && !rc) rc = cli_error(EXIT_RUNTIME, CMD, "cannot write '%s'", *written);
    free(line);
    return rc;
}

static int prepare(int argc, char **argv) {
    const char *tokenizer = NULL, *format = "u16", *pos[2] = {NULL, NULL};
    int n_pos = 0;
    cli_args a = {.argc = argc, .argv = argv};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) {
            if (n_pos == 2) return cli_error(EXIT_USAGE, CMD, "prepare: unexpected argument '%s'", name);
            pos[n_pos++] = name;
            continue;
        }
        if (strcmp(name, "help") == 0) {
            usage(stdout);
            return 0;
        }
        if (!val) return cli_error(EXIT_USAGE, CMD, "--%s needs a value", name);
        if (strcmp(name, "tokenizer") == 0)
            tokenizer = val;
        else if (strcmp(name, "format") == 0)
            format = val;
        else
            return cli_error(EXIT_USAGE, CMD, "unknown flag --%s (see tfcore data --help)", name);
    }
    if (n_pos != 2) return cli_error(EXIT_USAGE, CMD, "prepare needs IN.txt and OUT_DIR (see tfcore data --help)");
    if (!tokenizer) return cli_error(EXIT_USAGE, CMD, "prepare needs --tokenizer char|bpe:VOCAB|gpt2:DIR|FILE");
    tfc_token_format fmt;
    if (strcmp(format, "u16") == 0)
        fmt = TFC_TOKENS_U16;
    else if (strcmp(format, "llmc") == 0)
        fmt = TFC_TOKENS_LLMC;
    else
        return cli_error(EXIT_USAGE, CMD, "--format must be u16 or llmc, got '%s'", format);
    char *text = NULL;
    size_t len = 0;
    if (read_file(pos[0], &text, &len) != 0) return cli_error(EXIT_USAGE, CMD, "cannot read '%s'", pos[0]);
    vocab v;
    int rc = cli_make_vocab(CMD, tokenizer, text, len, &v);
    if (!rc && fmt == TFC_TOKENS_U16 && v.size > 65536)
        rc = cli_error(EXIT_USAGE, CMD,
                       "--format u16 holds ids up to 65535, but the vocabulary has %d tokens (use --format llmc)",
                       v.size);
    const char *dir = pos[1], *vocab_path = NULL;
    if (!rc && ensure_dir(dir) != 0) rc = cli_error(EXIT_USAGE, CMD, "cannot create the output directory '%s'", dir);
    /* nanoGPT: train = data[:int(n*0.9)], val = the rest, encoded apart */
    const size_t cut = (size_t)((double)len * 0.9);
    size_t n_train = 0, n_val = 0;
    if (!rc) rc = write_split(&v, text, cut, path_join(dir, "train.bin"), fmt, &n_train);
    if (!rc) rc = write_split(&v, text + cut, len - cut, path_join(dir, "val.bin"), fmt, &n_val);
    if (!rc) rc = write_vocab(&v, dir, &vocab_path);
    if (!rc)
        printf("%s: %zu bytes -> %s/train.bin %zu tokens, %s/val.bin %zu tokens (%s, vocabulary %d: %s)\n", pos[0], len,
               dir, n_train, dir, n_val, fmt == TFC_TOKENS_U16 ? "u16, no header" : "llm.c shards", v.size, vocab_path);
    free(text);
    vocab_free(&v);
    return rc;
}

int cmd_data(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? EXIT_USAGE : 0;
    }
    if (strcmp(argv[0], "prepare") == 0) return prepare(argc - 1, argv + 1);
    return cli_error(EXIT_USAGE, CMD, "unknown subcommand '%s' (prepare; see tfcore data --help)", argv[0]);
}
