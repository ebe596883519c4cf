/*
 * tfcore chat: a conversation with a model on stdin and stdout. Each line
 * read is a user message; the conversation so far is rendered with the
 * model's chat template (tfc_chat_encode: ChatML/Qwen2, Qwen2.5, Llama 3,
 * Llama 3.1, Llama 2 — from --template, or recognised in the directory's
 * tokenizer_config.json, never guessed), the model's reply is generated
 * with the KV cache until the template's end-of-turn token (or the model's
 * eos, or --max-new-tokens), decoded by the tokenizer's own decoder, printed
 * and appended to the conversation. EOF ends the chat.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model_source.h"

static const char *CMD = "chat";

/* The conversation: roles and contents, owned. */
typedef struct convo {
    tfc_chat_message *m;
    char **owned; /* the contents, freed at the end */
    size_t n, cap;
} convo;

static int convo_add(convo *c, const char *role, const char *text, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        tfc_chat_message *m = realloc(c->m, cap * sizeof *m);
        if (m) c->m = m;
        char **o = m ? realloc(c->owned, cap * sizeof *o) : NULL;
        if (!m || !o) return cli_error(EXIT_RUNTIME, CMD, "out of memory");
        c->owned = o;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return cli_error(EXIT_RUNTIME, CMD, "out of memory");
    memcpy(copy, text, len);
    copy[len] = 0;
    c->owned[c->n] = copy;
    c->m[c->n++] = (tfc_chat_message){.role = role, .content = copy};
    return 0;
}

static void convo_free(convo *c) {
    for (size_t i = 0; i < c->n; i++) free(c->owned[i]);
    free(c->owned);
    free(c->m);
}

/* Where a reply stops: the callback counts its tokens and ends the turn at the end-of-turn or eos token. */
typedef struct reply {
    int32_t stop[2]; /* the end-of-turn and eos ids, -1 when none */
    int32_t n;       /* tokens of the reply's text so far */
} reply;

static int32_t on_token(int32_t tok, void *ctx) {
    reply *r = ctx;
    if (tok == r->stop[0] || tok == r->stop[1]) return 1; /* the turn ends; the token is not text */
    r->n++;
    return 0;
}

/* The id of the token whose text is `text` (a special token: the tokenizer's own BOS rules do not apply), or -1. */
static int32_t special_id(const tfc_tokenizer *tok, const char *text) {
    int32_t n = 0;
    if (!text || tfc_tokenizer_vocab_size(tok, &n) != TFC_OK) return -1;
    const size_t want = strlen(text);
    for (int32_t id = 0; id < n; id++) {
        const char *b;
        size_t len;
        if (tfc_tokenizer_token_bytes(tok, id, &b, &len, NULL) == TFC_OK && len == want && memcmp(b, text, len) == 0)
            return id;
    }
    return -1;
}

/* The template family: --template, else the directory's tokenizer_config.json. */
static int find_family(const char *ckpt, const char *name, int32_t *family, char **eos) {
    if (name) {
        if (tfc_chat_family_from_name(name, family) != TFC_OK) return cli_lib_error(CMD, "--template");
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", ckpt);
    FILE *f = fopen(path, "rb");
    if (!f)
        return cli_error(EXIT_USAGE, CMD,
                         "'%s' has no tokenizer_config.json to read a chat template from: pass --template "
                         "chatml|qwen2.5|llama3|llama3.1|llama2",
                         ckpt);
    fclose(f);
    if (tfc_chat_config_load(path, family, NULL, eos) != TFC_OK) return cli_lib_error(CMD, "the chat template");
    return 0;
}

static int usage(void) {
    printf("usage: tfcore chat --ckpt DIR [--template chatml|qwen2.5|llama3|llama3.1|llama2] [--system TEXT]\n"
           "                   [--max-new-tokens N (256)] [--temperature T (0.7)] [--top-k K (0 = off)]\n"
           "                   [--top-p P (1 = off)] [--seed S (1)] [--show-prompt]\n"
           "  Each line of stdin is a user message; the reply follows on stdout, ending at the template's\n"
           "  end of turn. The template is --template, else the one in DIR/tokenizer_config.json (a\n"
           "  template that is none of these families is refused, never guessed). --show-prompt writes\n"
           "  each rendered conversation to stderr.\n");
    return 0;
}

int cmd_chat(int argc, char **argv) {
    const char *ckpt = NULL, *tname = NULL, *system = NULL;
    int64_t max_new = 256, top_k = 0, seed = 1;
    double temperature = 0.7, top_p = 1.0;
    int show = 0;
    cli_args a = {.argc = argc, .argv = argv};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) return cli_error(EXIT_USAGE, CMD, "unexpected argument '%s'", name);
        if (strcmp(name, "help") == 0) return usage();
        if (strcmp(name, "show-prompt") == 0) {
            show = 1;
            continue;
        }
        if (!val) return cli_error(EXIT_USAGE, CMD, "--%s needs a value", name);
        if (strcmp(name, "ckpt") == 0 || strcmp(name, "model") == 0)
            ckpt = val;
        else if (strcmp(name, "template") == 0)
            tname = val;
        else if (strcmp(name, "system") == 0)
            system = val;
        else if (strcmp(name, "max-new-tokens") == 0) {
            if (!cli_int(CMD, name, val, 1, 1 << 20, &max_new)) return EXIT_USAGE;
        } else if (strcmp(name, "top-k") == 0) {
            if (!cli_int(CMD, name, val, 0, INT32_MAX, &top_k)) return EXIT_USAGE;
        } else if (strcmp(name, "seed") == 0) {
            if (!cli_int(CMD, name, val, 0, INT64_MAX, &seed)) return EXIT_USAGE;
        } else if (strcmp(name, "temperature") == 0) {
            if (!cli_double(CMD, name, val, 0, 100, &temperature)) return EXIT_USAGE;
        } else if (strcmp(name, "top-p") == 0) {
            if (!cli_double(CMD, name, val, 1e-9, 1, &top_p)) return EXIT_USAGE;
        } else
            return cli_error(EXIT_USAGE, CMD, "unknown flag --%s (see tfcore chat --help)", name);
    }
    if (!ckpt) return cli_error(EXIT_USAGE, CMD, "--ckpt DIR is required");
    int32_t family = 0;
    char *eos_text = NULL;
    int rc = find_family(ckpt, tname, &family, &eos_text);
    tfc_gpt *m = NULL;
    vocab v = {0};
    if (!rc) rc = model_source_load(CMD, ckpt, NULL, 1, &m, &v, NULL);
    if (!rc && v.kind != VOCAB_BPE)
        rc = cli_error(EXIT_USAGE, CMD, "'%s' has a character vocabulary; a chat template needs the model's tokenizer",
                       ckpt);
    const char *eot = NULL, *fname = NULL;
    reply rep = {.stop = {-1, -1}};
    if (!rc && tfc_chat_family_info(family, &fname, &eot) != TFC_OK) rc = cli_lib_error(CMD, "the chat template");
    if (!rc) {
        rep.stop[0] = special_id(v.bpe, eot);
        rep.stop[1] = special_id(v.bpe, eos_text);
        if (rep.stop[0] < 0)
            rc = cli_error(EXIT_USAGE, CMD, "the tokenizer has no token '%s' (%s's end of turn): not a %s model", eot,
                           fname, fname);
    }
    convo c = {0};
    if (!rc && system) rc = convo_add(&c, "system", system, strlen(system));
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    int turn = 0;
    while (!rc && (got = getline(&line, &lcap, stdin)) > 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) got--;
        if ((rc = convo_add(&c, "user", line, (size_t)got)) != 0) break;
        int32_t *ids = NULL;
        size_t n = 0;
        if (tfc_chat_encode(v.bpe, family, c.m, c.n, 1, &ids, &n) != TFC_OK) {
            rc = cli_lib_error(CMD, "the conversation");
            break;
        }
        if (show) {
            char *text = NULL;
            if (tfc_chat_render(family, c.m, c.n, 1, &text, NULL) == TFC_OK) fprintf(stderr, "%s", text);
            tfc_free(text);
        }
        int32_t *out = malloc((size_t)max_new * sizeof *out);
        rep.n = 0;
        tfc_status s = out ? TFC_OK : TFC_ERR_OOM;
        if (s == TFC_OK)
            s = tfc_gpt_generate(m, ids, (int32_t)n, (int32_t)max_new, temperature, (int32_t)top_k, top_p,
                                 (uint64_t)seed + (uint64_t)turn, out, (int32_t)max_new, on_token, &rep);
        tfc_free(ids);
        char *text = NULL;
        size_t len = 0;
        if (s == TFC_OK || s == TFC_ERR_CANCELLED)
            s = tfc_tokenizer_decode_utf8(v.bpe, out, (size_t)rep.n, &text, &len);
        free(out);
        if (s != TFC_OK) {
            rc = s == TFC_ERR_OOM ? cli_error(EXIT_RUNTIME, CMD, "out of memory") : cli_lib_error(CMD, "generation");
            break;
        }
        fwrite(text, 1, len, stdout);
        printf("\n");
        fflush(stdout);
        rc = convo_add(&c, "assistant", text, len);
        tfc_free(text);
        turn++;
    }
    free(line);
    convo_free(&c);
    tfc_free(eos_text);
    if (m) vocab_free(&v);
    tfc_gpt_release(m);
    return rc;
}
