/*
 * tfcore tokenizer train|encode|decode: BPE tokenizers in the library's
 * own file format (tfc_tokenizer_save / tfc_tokenizer_load), or GPT-2's
 * (gpt2:DIR).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *CMD = "tokenizer";

static void usage(FILE *f) {
    fprintf(f,
            "usage: tfcore tokenizer train --data FILE --vocab N --out FILE\n"
            "       tfcore tokenizer encode --tokenizer FILE [--text TEXT | --data FILE]   (ids on stdout)\n"
            "       tfcore tokenizer decode --tokenizer FILE ID...                        (text on stdout)\n"
            "--tokenizer gpt2:DIR reads GPT-2's DIR/encoder.json and DIR/vocab.bpe instead of a FILE.\n");
}

int cmd_tokenizer(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? EXIT_USAGE : 0;
    }
    const char *sub = argv[0], *data = NULL, *out = NULL, *tok = NULL, *text = NULL;
    int64_t vocab_n = 0;
    int n_ids = 0;
    char **id_args = calloc((size_t)argc + 1, sizeof *id_args);
    cli_args a = {.argc = argc, .i = 1, .argv = argv}; /* argv[0] is the subcommand */
    const char *name, *val;
    int r, rc = 0;
    while (!rc && (r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) {
            if (strcmp(sub, "decode") == 0 && id_args)
                id_args[n_ids++] = (char *)name;
            else
                rc = cli_error(EXIT_USAGE, CMD, "unexpected argument '%s'", name);
            continue;
        }
        if (!val)
            rc = cli_error(EXIT_USAGE, CMD, "--%s needs a value", name);
        else if (strcmp(name, "data") == 0)
            data = val;
        else if (strcmp(name, "out") == 0)
            out = val;
        else if (strcmp(name, "tokenizer") == 0)
            tok = val;
        else if (strcmp(name, "text") == 0)
            text = val;
        else if (strcmp(name, "vocab") == 0) {
            if (!cli_int(CMD, name, val, 256, 1 << 20, &vocab_n)) rc = EXIT_USAGE;
        } else
            rc = cli_error(EXIT_USAGE, CMD, "unknown flag --%s", name);
    }
    tfc_tokenizer *t = NULL;
    char *buf = NULL;
    size_t len = 0;
    if (rc) {
    } else if (strcmp(sub, "train") == 0) {
        if (!data || !out || !vocab_n)
            rc = cli_error(EXIT_USAGE, CMD, "train needs --data FILE --vocab N --out FILE");
        else if (read_file(data, &buf, &len) != 0)
            rc = cli_error(EXIT_USAGE, CMD, "cannot read '%s'", data);
        else if (tfc_tokenizer_new(TFC_SPLIT_GPT2, &t) != TFC_OK ||
                 tfc_tokenizer_train(t, buf, len, (int32_t)vocab_n) != TFC_OK || tfc_tokenizer_save(t, out) != TFC_OK)
            rc = cli_lib_error(CMD, "training");
        else
            printf("trained a %lld-token BPE tokenizer on %s (%zu bytes) -> %s\n", (long long)vocab_n, data, len, out);
    } else if (strcmp(sub, "encode") == 0 || strcmp(sub, "decode") == 0) {
        if (!tok)
            rc = cli_error(EXIT_USAGE, CMD, "%s needs --tokenizer FILE", sub);
        else if (strncmp(tok, "gpt2:", 5) == 0)
            rc = load_gpt2_tokenizer(CMD, tok + 5, &t);
        else if (tfc_tokenizer_load(tok, &t) != TFC_OK)
            rc = cli_lib_error(CMD, "loading the tokenizer");
        if (rc) {
            /* reported */
        } else if (sub[0] == 'e') {
            if (text)
                buf = strdup(text), len = strlen(text);
            else if (!data || read_file(data, &buf, &len) != 0)
                rc = cli_error(EXIT_USAGE, CMD, "encode needs --text TEXT or a readable --data FILE");
            int32_t *ids = NULL;
            size_t n = 0;
            if (!rc && tfc_tokenizer_encode(t, buf, len, TFC_SPECIAL_AS_TEXT, &ids, &n) != TFC_OK)
                rc = cli_lib_error(CMD, "encoding");
            for (size_t i = 0; !rc && i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
            if (!rc) printf("\n");
            tfc_free(ids);
        } else {
            int32_t *ids = malloc(((size_t)n_ids + 1) * sizeof *ids);
            for (int i = 0; !rc && i < n_ids; i++) {
                int64_t v;
                if (!cli_int(CMD, "decode id", id_args[i], 0, INT32_MAX, &v))
                    rc = EXIT_USAGE;
                else
                    ids[i] = (int32_t)v;
            }
            char *bytes = NULL;
            size_t nb = 0;
            if (!rc && tfc_tokenizer_decode(t, ids, (size_t)n_ids, &bytes, &nb) != TFC_OK)
                rc = cli_lib_error(CMD, "decoding");
            if (!rc) fwrite(bytes, 1, nb, stdout), printf("\n");
            tfc_free(bytes);
            free(ids);
        }
    } else {
        rc = cli_error(EXIT_USAGE, CMD, "unknown subcommand '%s' (train, encode, decode)", sub);
    }
    free(buf);
    free(id_args);
    tfc_tokenizer_release(t);
    return rc;
}
