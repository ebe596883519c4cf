/*
 * The vocabulary a --tokenizer flag names, shared by `tfcore train` and
 * `tfcore data prepare`: learnt from the text (char, bpe:VOCAB) or read from
 * files (gpt2:DIR, a tokenizer FILE: the library's BPE format, a Hugging
 * Face tokenizer.json, or the "char:<hex bytes>" line `data prepare` writes
 * for a char vocabulary).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* A FILE holding a char vocabulary ("char:" then the bytes in hex), as `tfcore data prepare` writes it. */
static int chars_file(const char *cmd, const char *path, vocab *v, int *is_chars) {
    char *s = NULL;
    size_t n = 0;
    *is_chars = 0;
    if (read_file(path, &s, &n) != 0) return cli_error(EXIT_USAGE, cmd, "--tokenizer %s: cannot read it", path);
    int rc = 0;
    if (n >= 5 && strncmp(s, "char:", 5) == 0) {
        *is_chars = 1;
        while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
        rc = vocab_from_meta(cmd, s, NULL, NULL, v);
    }
    free(s);
    return rc;
}

int cli_make_vocab(const char *cmd, const char *tokenizer, const char *text, size_t len, vocab *v) {
    memset(v, 0, sizeof *v);
    if (!text && (!tokenizer || strcmp(tokenizer, "char") == 0 || strncmp(tokenizer, "bpe:", 4) == 0))
        return cli_error(EXIT_USAGE, cmd,
                         "--data-bin needs --tokenizer gpt2:DIR or a tokenizer FILE: the vocabulary its tokens are in "
                         "(char and bpe:VOCAB are learnt from a text)");
    struct stat st;
    if (!tokenizer || strcmp(tokenizer, "char") == 0) {
        vocab_chars_from_text(v, text, len);
        return 0;
    }
    if (strncmp(tokenizer, "bpe:", 4) == 0) {
        int64_t n;
        if (!cli_int(cmd, "tokenizer bpe:", tokenizer + 4, 256, 65536, &n)) return EXIT_USAGE;
        v->kind = VOCAB_BPE;
        if (tfc_tokenizer_new(TFC_SPLIT_GPT2, &v->bpe) != TFC_OK ||
            tfc_tokenizer_train(v->bpe, text, len, (int32_t)n) != TFC_OK)
            return cli_lib_error(cmd, "training the BPE tokenizer");
    } else if (strncmp(tokenizer, "gpt2:", 5) == 0) {
        int rc = load_gpt2_tokenizer(cmd, tokenizer + 5, &v->bpe);
        if (rc) return rc;
        v->kind = VOCAB_BPE;
    } else if (stat(tokenizer, &st) == 0 && S_ISREG(st.st_mode)) {
        if (is_json_file(tokenizer)) return vocab_load_hf_json(cmd, tokenizer, v); /* a tokenizer.json */
        int is_chars = 0, rc = chars_file(cmd, tokenizer, v, &is_chars);
        if (rc || is_chars) return rc;
        if (tfc_tokenizer_load(tokenizer, &v->bpe) != TFC_OK)
            return cli_error(EXIT_USAGE, cmd, "--tokenizer %s: %s", tokenizer, tfc_last_error());
        v->kind = VOCAB_BPE;
    } else {
        return cli_error(EXIT_USAGE, cmd, "--tokenizer must be char, bpe:VOCAB, gpt2:DIR or a tokenizer FILE, got '%s'",
                         tokenizer);
    }
    if (tfc_tokenizer_vocab_size(v->bpe, &v->size) != TFC_OK) return cli_lib_error(cmd, "tokenizer");
    return 0;
}
