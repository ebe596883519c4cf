/*
 * Checkpoint directories of the CLI:
 *   model.safetensors      weights under Hugging Face GPT-2 names + config,
 *                          vocabulary and training position in the metadata
 *   optimizer.safetensors  AdamW state (tfc_optim_state_get names)
 *   tokenizer.tfctok       the BPE tokenizer (BPE runs only)
 *   config.json            a transformers GPT2Config for the same model
 * Each file is written atomically; model.safetensors is written last, so a
 * directory whose model file is new has a matching optimizer file.
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

int ckpt_save(const char *cmd, const char *dir, const tfc_gpt *m, tfc_optim *opt, const vocab *v,
              const char *const *keys, const char *const *vals, int32_t n) {
    if (ensure_dir(dir) != 0) return cli_error(EXIT_RUNTIME, cmd, "cannot create the directory '%s'", dir);
    /* optimizer state */
    if (opt) {
        int64_t ns = 0;
        if (tfc_optim_state_count(opt, &ns) != TFC_OK) return cli_lib_error(cmd, "optimizer state");
        char **names = calloc((size_t)ns + 1, sizeof *names);
        tfc_tensor **ts = calloc((size_t)ns + 1, sizeof *ts);
        int rc = (!names || !ts) ? cli_error(EXIT_RUNTIME, cmd, "out of memory") : 0;
        for (int64_t i = 0; i < ns && !rc; i++)
            if (tfc_optim_state_get(opt, i, &names[i], &ts[i]) != TFC_OK) rc = cli_lib_error(cmd, "optimizer state");
        if (!rc &&
            tfc_safetensors_save(path_join(dir, "optimizer.safetensors"), (const char *const *)names, ts, (int32_t)ns,
                                 NULL, NULL, 0) != TFC_OK)
            rc = cli_lib_error(cmd, "saving the optimizer state");
        for (int64_t i = 0; i < ns && names && ts; i++) {
            tfc_free(names[i]);
            tfc_tensor_release(ts[i]);
        }
        free(names);
        free(ts);
        if (rc) return rc;
    }
    if (v->kind == VOCAB_BPE && tfc_tokenizer_save(v->bpe, path_join(dir, "tokenizer.tfctok")) != TFC_OK)
        return cli_lib_error(cmd, "saving the tokenizer");
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    if (tfc_gpt_get_config(m, &c) != TFC_OK) return cli_lib_error(cmd, "config");
    FILE *f = fopen(path_join(dir, "config.json"), "w");
    if (f) {
        fprintf(
            f,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": %d,\n"
            "  \"n_positions\": %d,\n  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n"
            "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": %g,\n"
            "  \"tie_word_embeddings\": %s,\n  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0\n}\n",
            c.vocab_size, c.block_size, c.n_embd, c.n_layer, c.n_head, c.ln_eps, c.tie_weights ? "true" : "false");
        fclose(f);
    }
    char *vmeta = NULL;
    if (vocab_to_meta(v, &vmeta) != 0) return cli_error(EXIT_RUNTIME, cmd, "out of memory");
    const char **k = malloc(((size_t)n + 1) * sizeof *k), **val = malloc(((size_t)n + 1) * sizeof *val);
    int rc = 0;
    if (!k || !val)
        rc = cli_error(EXIT_RUNTIME, cmd, "out of memory");
    else {
        k[0] = "tfc.vocab";
        val[0] = vmeta;
        for (int32_t i = 0; i < n; i++) k[i + 1] = keys[i], val[i + 1] = vals[i];
        if (tfc_gpt_save(m, path_join(dir, "model.safetensors"), k, val, n + 1) != TFC_OK)
            rc = cli_lib_error(cmd, "saving the model");
    }
    free(k);
    free(val);
    free(vmeta);
    return rc;
}

int ckpt_open(const char *cmd, const char *dir, tfc_safetensors **file) {
    const char *p = path_join(dir, "model.safetensors");
    FILE *f = fopen(p, "rb");
    if (!f) return cli_error(EXIT_USAGE, cmd, "no checkpoint in '%s' (missing %s)", dir, p);
    fclose(f);
    if (tfc_safetensors_load(p, file) != TFC_OK) return cli_lib_error(cmd, "reading the checkpoint");
    return 0;
}

int ckpt_load_model(const char *cmd, const char *dir, tfc_gpt **m, vocab *v) {
    tfc_safetensors *f = NULL;
    int rc = ckpt_open(cmd, dir, &f);
    if (rc) return rc;
    const char *vm = NULL;
    if (tfc_safetensors_metadata(f, "tfc.vocab", &vm) != TFC_OK) vm = NULL;
    rc = vocab_from_meta(cmd, vm, path_join(dir, "tokenizer.tfctok"), v);
    tfc_safetensors_release(f);
    if (rc) return rc;
    if (tfc_gpt_load(path_join(dir, "model.safetensors"), m) != TFC_OK) {
        vocab_free(v);
        return cli_lib_error(cmd, "loading the model");
    }
    return 0;
}

int ckpt_load_optim(const char *cmd, const char *dir, tfc_optim *opt) {
    tfc_safetensors *f = NULL;
    if (tfc_safetensors_load(path_join(dir, "optimizer.safetensors"), &f) != TFC_OK)
        return cli_lib_error(cmd, "reading the optimizer state");
    int32_t n = tfc_safetensors_count(f);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    tfc_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
    int rc = (!names || !ts) ? cli_error(EXIT_RUNTIME, cmd, "out of memory") : 0;
    for (int32_t i = 0; i < n && !rc; i++)
        if (tfc_safetensors_get(f, i, &names[i], &ts[i]) != TFC_OK) rc = cli_lib_error(cmd, "optimizer state");
    if (!rc && tfc_optim_state_load(opt, names, (const tfc_tensor *const *)ts, n) != TFC_OK)
        rc = cli_lib_error(cmd, "restoring the optimizer state");
    for (int32_t i = 0; i < n && ts; i++) tfc_tensor_release(ts[i]);
    free(names);
    free(ts);
    tfc_safetensors_release(f);
    return rc;
}
