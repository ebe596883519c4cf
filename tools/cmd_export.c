/*
 * tfcore export: a model (a tfcore checkpoint, a Hugging Face directory or
 * an llm.c file) written in another tool's format: llm.c's GPT-2 checkpoint
 * (tfc_gpt_save_llmc; GPT-2 only), or a Hugging Face directory of its
 * architecture (tfc_gpt_save_hf: GPT2LMHeadModel, LlamaForCausalLM,
 * MistralForCausalLM or Qwen2ForCausalLM) with the vocabulary as GPT-2's
 * tokenizer files, vocab.json + merges.txt.
 */
#include <stdlib.h>
#include <string.h>

#include "model_source.h"

static const char *CMD = "export";

/*
 * GPT-2's bytes_to_unicode: the printable Latin-1 bytes stand for
 * themselves, the other 68 bytes, in order, for U+0100, U+0101, ...
 * Appends byte b's character (UTF-8) to out.
 */
static size_t gpt2_char(unsigned char b, char *out) {
    static int32_t map[256];
    static int ready;
    if (!ready) {
        int extra = 0;
        for (int i = 0; i < 256; i++) {
            const int printable = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
            map[i] = printable ? i : 256 + extra++;
        }
        ready = 1;
    }
    const int32_t cp = map[b];
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 63));
    return 2;
}

/* A token's bytes as a JSON string literal in GPT-2's alphabet (special tokens verbatim). */
static void put_token(FILE *f, const char *bytes, size_t len, int special) {
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        char u[2];
        size_t n = special ? 1 : gpt2_char((unsigned char)bytes[i], u);
        const char *p = special ? &bytes[i] : u;
        for (size_t k = 0; k < n; k++) {
            const unsigned char c = (unsigned char)p[k];
            if (c == '"' || c == '\\')
                fprintf(f, "\\%c", c);
            else if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

/* A token's bytes in GPT-2's alphabet, for merges.txt (the alphabet has no space or newline). */
static void put_merge_side(FILE *f, const char *bytes, size_t len) {
    for (size_t i = 0; i < len; i++) {
        char u[2];
        fwrite(u, 1, gpt2_char((unsigned char)bytes[i], u), f);
    }
}

/*
 * vocab.json + merges.txt for transformers' GPT2Tokenizer (a vocabulary read
 * from a tokenizer.json: a copy of it instead). A BPE vocabulary
 * writes its tokens and merges; a char (byte) vocabulary writes its bytes
 * as tokens and no merges, which GPT2Tokenizer reads as one token per byte,
 * the ids of our char vocabulary. *eos receives <|endoftext|>'s id (-1: none).
 */
static int write_tokenizer(const char *dir, const vocab *v, int32_t *eos) {
    *eos = -1;
    /* read from a tokenizer.json: that file, as it was (GPT-2's files cannot hold its pipeline) */
    if (v->json) return vocab_write_json(CMD, v, path_join(dir, "tokenizer.json"));
    char vpath[4096], mpath[4096];
    snprintf(vpath, sizeof vpath, "%s", path_join(dir, "vocab.json"));
    snprintf(mpath, sizeof mpath, "%s", path_join(dir, "merges.txt"));
    FILE *vf = fopen(vpath, "wb"), *mf = fopen(mpath, "wb");
    int rc = vf && mf ? 0 : cli_error(EXIT_RUNTIME, CMD, "cannot write '%s'", vf ? mpath : vpath);
    if (!rc) {
        fputs("{", vf);
        fputs("#version: 0.2\n", mf);
        int first = 1;
        for (int32_t id = 0; id < v->size && !rc; id++) {
            const char *b;
            size_t len;
            int32_t special = 0;
            char one;
            if (v->kind == VOCAB_CHAR) {
                one = (char)v->chars[id];
                b = &one;
                len = 1;
            } else if (tfc_tokenizer_token_bytes(v->bpe, id, &b, &len, &special) != TFC_OK) {
                continue; /* an unused id (tiktoken vocabularies have gaps) */
            }
            if (special && len == 13 && memcmp(b, "<|endoftext|>", 13) == 0) *eos = id;
            fputs(first ? "" : ", ", vf);
            put_token(vf, b, len, special);
            fprintf(vf, ": %d", (int)id);
            first = 0;
        }
        fputs("}\n", vf);
        int32_t nm = 0;
        if (v->kind == VOCAB_BPE && tfc_tokenizer_n_merges(v->bpe, &nm) != TFC_OK) rc = cli_lib_error(CMD, "tokenizer");
        for (int32_t i = 0; i < nm && !rc; i++) {
            int32_t l, r, id, rank;
            const char *lb, *rb;
            size_t ll, rl;
            if (tfc_tokenizer_get_merge(v->bpe, i, &l, &r, &id, &rank) != TFC_OK ||
                tfc_tokenizer_token_bytes(v->bpe, l, &lb, &ll, NULL) != TFC_OK ||
                tfc_tokenizer_token_bytes(v->bpe, r, &rb, &rl, NULL) != TFC_OK) {
                rc = cli_lib_error(CMD, "tokenizer merges");
                break;
            }
            put_merge_side(mf, lb, ll);
            fputc(' ', mf);
            put_merge_side(mf, rb, rl);
            fputc('\n', mf);
        }
    }
    /* GPT2Tokenizer reads a char vocabulary from the two files; ours needs every byte in them, so also its own line */
    if (!rc && v->kind == VOCAB_CHAR) {
        char *line = NULL;
        const char *cpath = path_join(dir, "tfcore.vocab");
        FILE *cf = fopen(cpath, "wb");
        if (!cf || vocab_to_meta(v, &line) != 0 || fprintf(cf, "%s\n", line) < 0)
            rc = cli_error(EXIT_RUNTIME, CMD, "cannot write '%s'", cpath);
        if (cf && fclose(cf) != 0 && !rc) rc = cli_error(EXIT_RUNTIME, CMD, "cannot write '%s'", cpath);
        free(line);
    }
    if (vf && fclose(vf) != 0 && !rc) rc = cli_error(EXIT_RUNTIME, CMD, "cannot write '%s'", vpath);
    if (mf && fclose(mf) != 0 && !rc) rc = cli_error(EXIT_RUNTIME, CMD, "cannot write '%s'", mpath);
    return rc;
}

int cmd_export(int argc, char **argv) {
    const char *format = NULL, *tokenizer = NULL, *pos[2] = {NULL, NULL};
    int npos = 0;
    cli_args a = {.argc = argc, .argv = argv};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) {
            if (npos == 2) return cli_error(EXIT_USAGE, CMD, "unexpected argument '%s'", name);
            pos[npos++] = name;
            continue;
        }
        if (strcmp(name, "help") == 0) {
            printf("usage: tfcore export --format llmc|hf [--tokenizer gpt2:DIR|FILE] MODEL OUT\n"
                   "  MODEL: a tfcore checkpoint directory, a Hugging Face directory (GPT-2, Llama, Mistral, Qwen2)\n"
                   "         or an llm.c .bin\n"
                   "  --format llmc: OUT is an llm.c GPT-2 checkpoint (version 3, fp32) llm.c's train_gpt2 reads\n"
                   "                 (GPT-2 models only)\n"
                   "  --format hf:   OUT is a directory transformers' from_pretrained reads (GPT2LMHeadModel,\n"
                   "                 LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM by the model's\n"
                   "                 architecture): config.json, model.safetensors, and the vocabulary as\n"
                   "                 vocab.json + merges.txt (GPT-2's tokenizer files), or the tokenizer.json\n"
                   "                 the model's vocabulary came from\n"
                   "  --tokenizer: the vocabulary of a MODEL that carries none (an llm.c file)\n");
            return 0;
        }
        if (!val) return cli_error(EXIT_USAGE, CMD, "--%s needs a value", name);
        if (strcmp(name, "format") == 0)
            format = val;
        else if (strcmp(name, "tokenizer") == 0)
            tokenizer = val;
        else
            return cli_error(EXIT_USAGE, CMD, "unknown flag --%s (see tfcore export --help)", name);
    }
    if (!format || (strcmp(format, "llmc") != 0 && strcmp(format, "hf") != 0))
        return cli_error(EXIT_USAGE, CMD, "--format llmc or --format hf is required");
    if (npos != 2) return cli_error(EXIT_USAGE, CMD, "give the MODEL to read and the OUT path to write");
    const int hf = strcmp(format, "hf") == 0;
    tfc_gpt *m = NULL;
    vocab v;
    model_kind kind;
    /* llm.c's file holds no vocabulary: the model alone will do */
    int rc = model_source_load(CMD, pos[0], tokenizer, hf, &m, &v, &kind);
    if (rc) return rc;
    int32_t eos = -1;
    tfc_gpt_config mc = TFC_GPT_CONFIG_INIT;
    if (tfc_gpt_get_config(m, &mc) != TFC_OK) rc = cli_lib_error(CMD, "config");
    if (!rc && !hf && mc.arch != TFC_GPT_ARCH_GPT2)
        rc = cli_error(EXIT_USAGE, CMD,
                       "--format llmc: '%s' is a %s model and llm.c's checkpoint format holds GPT-2 only (use "
                       "--format hf)",
                       pos[0], tfc_gpt_arch_name(mc.arch));
    if (!rc && hf) {
        if (ensure_dir(pos[1]) != 0) rc = cli_error(EXIT_RUNTIME, CMD, "cannot create the directory '%s'", pos[1]);
        if (!rc) rc = write_tokenizer(pos[1], &v, &eos);
        if (!rc && tfc_gpt_save_hf(m, pos[1], eos, eos) != TFC_OK) rc = cli_lib_error(CMD, "writing the directory");
    } else if (!rc && tfc_gpt_save_llmc(m, pos[1]) != TFC_OK) {
        rc = cli_lib_error(CMD, "writing the llm.c checkpoint");
    }
    if (!rc)
        printf("export: %s '%s' (%s, %d layers, %d heads, %d dims, block %d, vocab %d) -> %s %s%s\n",
               model_kind_name(kind), pos[0], tfc_gpt_arch_name(mc.arch), mc.n_layer, mc.n_head, mc.n_embd,
               mc.block_size, mc.vocab_size, hf ? "Hugging Face directory" : "llm.c checkpoint", pos[1],
               !hf          ? ""
                   : v.json ? " (config.json, model.safetensors, tokenizer.json)"
                            : " (config.json, model.safetensors, vocab.json, merges.txt)");
    vocab_free(&v);
    tfc_gpt_release(m);
    return rc;
}
