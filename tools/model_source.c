/* Reading a model from whichever of the formats the CLI takes (model_source.h). */
#include "model_source.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"

#define LLMC_MAGIC 20240326

const char *model_kind_name(model_kind k) {
    return k == SRC_HF ? "Hugging Face directory" : k == SRC_LLMC ? "llm.c checkpoint" : "tfcore checkpoint";
}

/* Whether dir/model.safetensors's header names our vocabulary metadata (tfc.vocab): read the header only. */
static int weights_name_a_vocab(const char *dir) {
    FILE *f = fopen(path_join(dir, "model.safetensors"), "rb");
    if (!f) return 0;
    unsigned char len8[8];
    uint64_t n = 0;
    int found = 0;
    if (fread(len8, 1, 8, f) == 8) {
        for (int i = 0; i < 8; i++) n |= (uint64_t)len8[i] << (8 * i);
        char *h = n > 0 && n <= 100000000u ? malloc((size_t)n + 1) : NULL;
        if (h && fread(h, 1, (size_t)n, f) == (size_t)n) {
            /* parsed (jansson): a tensor or a metadata value that merely mentions tfc.vocab does not count */
            json_t *root = json_loadb(h, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
            found = json_object_get(json_object_get(root, "__metadata__"), "tfc.vocab") != NULL;
            json_decref(root);
        }
        free(h);
    }
    fclose(f);
    return found;
}

int model_source_kind(const char *cmd, const char *path, model_kind *kind) {
    struct stat st;
    if (stat(path, &st) != 0)
        return cli_error(EXIT_USAGE, cmd,
                         "no checkpoint in '%s' (%s): give a tfcore checkpoint, a Hugging Face directory "
                         "(GPT-2, Llama, Mistral, Qwen2) or an llm.c file",
                         path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        /*
         * Ours and Hugging Face's both hold model.safetensors and config.json (ours writes a transformers config too):
         * ours has checkpoint.json, or, from before it, the vocabulary in the weights' metadata
         */
        if (stat(path_join(path, "checkpoint.json"), &st) == 0 || weights_name_a_vocab(path))
            *kind = SRC_CKPT;
        else if (stat(path_join(path, "config.json"), &st) == 0)
            *kind = SRC_HF;
        else if (ckpt_exists(path))
            *kind = SRC_CKPT;
        else
            return cli_error(EXIT_USAGE, cmd,
                             "'%s' is neither a tfcore checkpoint (model.safetensors) nor a Hugging Face "
                             "directory (config.json)",
                             path);
        return 0;
    }
    FILE *f = fopen(path, "rb");
    unsigned char h[4] = {0};
    const size_t got = f ? fread(h, 1, 4, f) : 0;
    if (f) fclose(f);
    const uint32_t magic = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    if (got != 4 || magic != LLMC_MAGIC)
        return cli_error(EXIT_USAGE, cmd,
                         "'%s' is not a model: a file must be an llm.c GPT-2 checkpoint (magic %d); a directory a "
                         "tfcore checkpoint or a Hugging Face directory",
                         path, LLMC_MAGIC);
    *kind = SRC_LLMC;
    return 0;
}

/*
 * A Hugging Face directory's own tokenizer: tfcore export's char line, else
 * vocab.json + merges.txt (GPT-2's encoder.json + vocab.bpe), else
 * tokenizer.json (the Llama family's).
 */
static int hf_vocab(const char *cmd, const char *dir, vocab *v, int *found) {
    char enc[4096], bpe[4096], own[4096];
    struct stat st;
    /* tfcore export's char vocabulary line, which vocab.json cannot carry for our reader (it lacks bytes) */
    snprintf(own, sizeof own, "%s", path_join(dir, "tfcore.vocab"));
    if (stat(own, &st) == 0) {
        *found = 1;
        return cli_make_vocab(cmd, own, NULL, 0, v);
    }
    snprintf(enc, sizeof enc, "%s", path_join(dir, "vocab.json"));
    snprintf(bpe, sizeof bpe, "%s", path_join(dir, "merges.txt"));
    *found = stat(enc, &st) == 0 && stat(bpe, &st) == 0;
    if (!*found) {
        char json[4096];
        snprintf(json, sizeof json, "%s", path_join(dir, "tokenizer.json"));
        *found = stat(json, &st) == 0;
        return *found ? vocab_load_hf_json(cmd, json, v) : 0;
    }
    memset(v, 0, sizeof *v);
    if (tfc_tokenizer_load_gpt2(enc, bpe, &v->bpe) != TFC_OK)
        return cli_lib_error(cmd, "reading the directory's vocab.json / merges.txt");
    v->kind = VOCAB_BPE;
    if (tfc_tokenizer_vocab_size(v->bpe, &v->size) != TFC_OK) return cli_lib_error(cmd, "tokenizer");
    return 0;
}

int model_source_load(const char *cmd, const char *path, const char *tokenizer, int need_vocab, tfc_gpt **m, vocab *v,
                      model_kind *kind) {
    model_kind k;
    int rc = model_source_kind(cmd, path, &k);
    if (rc) return rc;
    if (kind) *kind = k;
    tfc_gpt *model = NULL;
    int have_vocab = 0;
    memset(v, 0, sizeof *v);
    if (k == SRC_CKPT) {
        ckpt_set ck;
        rc = ckpt_open(cmd, path, CKPT_VERIFY, &ck);
        if (!rc) rc = ckpt_load_model(cmd, &ck, &model, v);
        ckpt_close(&ck);
        if (rc) return rc;
        have_vocab = 1;
    } else if (k == SRC_HF) {
        if (tfc_gpt_load_hf(path, &model) != TFC_OK) return cli_lib_error(cmd, "reading the Hugging Face directory");
        if (!tokenizer) rc = hf_vocab(cmd, path, v, &have_vocab);
    } else {
        if (tfc_gpt_load_llmc(path, &model) != TFC_OK) return cli_lib_error(cmd, "reading the llm.c checkpoint");
    }
    if (!rc && tokenizer) {
        vocab_free(v);
        rc = cli_make_vocab(cmd, tokenizer, NULL, 0, v);
        have_vocab = !rc;
    }
    if (!rc && !have_vocab && need_vocab)
        rc = cli_error(EXIT_USAGE, cmd,
                       "%s '%s' carries no vocabulary: give --tokenizer gpt2:DIR (GPT-2's encoder.json + vocab.bpe) "
                       "or a tokenizer FILE",
                       model_kind_name(k), path);
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    if (!rc && tfc_gpt_get_config(model, &c) != TFC_OK) rc = cli_lib_error(cmd, "config");
    if (!rc && v->size > c.vocab_size)
        rc = cli_error(
            EXIT_USAGE, cmd, "the tokenizer has %d tokens but the model's %s has %d rows (vocab_size) in '%s'", v->size,
            c.arch == TFC_GPT_ARCH_GPT2 ? "transformer.wte.weight" : "model.embed_tokens.weight", c.vocab_size, path);
    if (rc) {
        if (have_vocab) vocab_free(v);
        tfc_gpt_release(model);
        return rc;
    }
    *m = model;
    return 0;
}
