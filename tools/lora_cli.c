/*
 * LoRA in the CLI (tools/lora_cli.h). A LoRA run trains adapters on a
 * frozen base read from a tfcore checkpoint (--lora-base DIR). Its
 * checkpoint holds only what the run changes — the adapters in PEFT's
 * layout (adapter_model.safetensors + adapter_config.json), their optimizer
 * state, the loss curve — and names the base's directory ("lora.base"), so
 * --resume, eval and sample rebuild base + adapters from the two.
 */
#include "lora_cli.h"
#include "model_source.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

int lora_parse_flag(const char *cmd, const char *name, const char *val, lora_opts *o) {
    if (strncmp(name, "lora-", 5) != 0) return 0;
    const char *f = name + 5;
    if (strcmp(f, "rank") != 0 && strcmp(f, "alpha") != 0 && strcmp(f, "targets") != 0 && strcmp(f, "base") != 0)
        return 0;
    if (!val) {
        cli_error(EXIT_USAGE, cmd, "--%s needs a value", name);
        return -1;
    }
    if (strcmp(f, "rank") == 0) {
        if (!cli_int(cmd, name, val, 1, 1 << 20, &o->rank)) return -1;
        o->given = 1;
    } else if (strcmp(f, "alpha") == 0) {
        if (!cli_double(cmd, name, val, 1e-12, 1e12, &o->alpha)) return -1;
        o->given = 1;
    } else if (strcmp(f, "targets") == 0) {
        o->targets = val;
        o->given = 1;
    } else {
        o->base = val;
    }
    return 1;
}

int lora_check_opts(const char *cmd, const lora_opts *o, int resume) {
    if (resume && o->given)
        return cli_error(EXIT_USAGE, cmd,
                         "--resume continues the checkpoint's adapters with their rank, alpha and targets: drop "
                         "--lora-rank/--lora-alpha/--lora-targets");
    if (resume) return 0;
    if (!o->rank && (o->given || o->base))
        return cli_error(EXIT_USAGE, cmd, "--lora-alpha, --lora-targets and --lora-base need --lora-rank R");
    if (o->rank && !o->base)
        return cli_error(EXIT_USAGE, cmd,
                         "--lora-rank needs the base model to adapt: --lora-base DIR (a checkpoint of tfcore train)");
    return 0;
}

int lora_load_base(const char *cmd, const char *dir, tfc_gpt **m, vocab *v, char *preset) {
    model_kind kind;
    int rc = model_source_kind(cmd, dir, &kind);
    if (rc) return rc;
    if (kind != SRC_CKPT) { /* a Hugging Face directory or an llm.c file: the shape is the model's own */
        if (preset) snprintf(preset, 64, "%s", INIT_PRESET);
        return model_source_load(cmd, dir, NULL, 1, m, v, NULL);
    }
    ckpt_set ck;
    rc = ckpt_open(cmd, dir, CKPT_VERIFY, &ck);
    if (!rc && ck.lora)
        rc = cli_error(EXIT_USAGE, cmd,
                       "--lora-base '%s' holds LoRA adapters itself; merge them into a base first (tfcore lora merge)",
                       dir);
    const char *pr = NULL;
    if (!rc && preset && tfc_safetensors_metadata(ck.model, "train.preset", &pr) == TFC_OK && pr)
        snprintf(preset, 64, "%s", pr);
    if (!rc) rc = ckpt_load_model(cmd, &ck, m, v);
    ckpt_close(&ck);
    return rc;
}

const char *lora_default_targets(const tfc_gpt *m) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    /* PEFT's defaults (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING): gpt2 c_attn; llama, mistral and
       qwen2 q_proj, v_proj */
    return tfc_gpt_get_config(m, &c) == TFC_OK && c.arch != TFC_GPT_ARCH_GPT2 ? "q_proj,v_proj" : "c_attn";
}

int lora_attach(const char *cmd, tfc_gpt *m, const lora_opts *o, uint64_t seed, const char *adapters) {
    if (adapters) {
        if (tfc_gpt_load_lora(m, adapters) != TFC_OK)
            return cli_error(EXIT_USAGE, cmd, "LoRA adapters '%s': %s", adapters, tfc_last_error());
        return 0;
    }
    tfc_lora_config c = TFC_LORA_CONFIG_INIT;
    c.rank = (int32_t)o->rank;
    c.alpha = o->alpha > 0 ? o->alpha : (double)o->rank;
    c.targets = o->targets ? o->targets : lora_default_targets(m);
    c.seed = seed;
    if (tfc_gpt_add_lora(m, &c) != TFC_OK) return cli_error(EXIT_USAGE, cmd, "--lora-*: %s", tfc_last_error());
    return 0;
}

void lora_print_summary(const tfc_gpt *m) {
    tfc_lora_config c = {.struct_size = sizeof c};
    int32_t n = 0;
    const char *const *names;
    tfc_tensor *const *ps;
    if (tfc_gpt_get_lora_config(m, &c) != TFC_OK || tfc_gpt_lora_params(m, &n, &names, &ps) != TFC_OK || !c.rank)
        return;
    int64_t trainable = 0;
    for (int32_t i = 0; i < n; i++) trainable += tfc_tensor_numel(ps[i]);
    tfc_gpt_config g = TFC_GPT_CONFIG_INIT;
    if (tfc_gpt_get_config(m, &g) != TFC_OK) return;
    const int64_t base = tfc_gpt_num_elements(m);
    const double bytes = g.dtype == TFC_DTYPE_F64 ? 8 : 4;
    /* AdamW keeps two moments per trained value */
    printf("lora: rank %d, alpha %g (scale %g), targets %s: %lld trainable parameters in %d tensors, %.3f%% of the "
           "base's %lld (frozen); optimizer state %.2f MB instead of %.2f MB\n",
           (int)c.rank, c.alpha, c.alpha / c.rank, c.targets, (long long)trainable, (int)n,
           100.0 * (double)trainable / (double)(base ? base : 1), (long long)base,
           2.0 * bytes * (double)trainable / 1e6, 2.0 * bytes * (double)base / 1e6);
}

int lora_save(const char *cmd, const char *stage, const tfc_gpt *m, const char *base, const char *const *keys,
              const char *const *vals, int32_t n) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    if (tfc_gpt_get_config(m, &c) != TFC_OK) return cli_lib_error(cmd, "config");
    /*
     * the config keys a later run compares against (tfcore train's check of
     * --out): the shape, and for the Llama family its architecture and widths
     * under tfc_gpt_save's names (a file without tfc.arch is GPT-2's)
     */
    enum { N_SHAPE = 5, N_FAMILY = 8, N_OWN = N_SHAPE + N_FAMILY + 1 };
    const int family = c.arch != TFC_GPT_ARCH_GPT2;
    char bufs[N_SHAPE + N_FAMILY][32];
    const char *own_k[N_SHAPE + N_FAMILY] = {
        "tfc.n_layer",        "tfc.n_head",    "tfc.n_embd",     "tfc.block_size",     "tfc.vocab_size",
        "tfc.arch",           "tfc.n_kv_head", "tfc.mlp_hidden", "tfc.attention_bias", "tfc.mlp_bias",
        "tfc.sliding_window", "tfc.rope.type", "tfc.rope.theta"};
    const long long ints[N_SHAPE + N_FAMILY] = {
        c.n_layer,    c.n_head,         c.n_embd,   c.block_size,     c.vocab_size,     0, c.n_kv_head,
        c.mlp_hidden, c.attention_bias, c.mlp_bias, c.sliding_window, c.rope.rope_type, 0};
    const int n_own = N_SHAPE + (family ? N_FAMILY : 0);
    const char **k = malloc(((size_t)n + N_OWN) * sizeof *k), **v = malloc(((size_t)n + N_OWN) * sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return cli_error(EXIT_RUNTIME, cmd, "out of memory");
    }
    for (int i = 0; i < n_own; i++) {
        if (strcmp(own_k[i], "tfc.arch") == 0)
            snprintf(bufs[i], sizeof bufs[i], "%s", tfc_gpt_arch_name(c.arch));
        else if (strcmp(own_k[i], "tfc.rope.theta") == 0)
            snprintf(bufs[i], sizeof bufs[i], "%.17g", c.rope.theta);
        else
            snprintf(bufs[i], sizeof bufs[i], "%lld", ints[i]);
        k[i] = own_k[i];
        v[i] = bufs[i];
    }
    k[n_own] = "lora.base";
    v[n_own] = base;
    for (int32_t i = 0; i < n; i++) k[n_own + 1 + i] = keys[i], v[n_own + 1 + i] = vals[i];
    int rc = 0;
    if (tfc_gpt_save_lora(m, path_join(stage, "adapter_model.safetensors"), k, v, n + n_own + 1) != TFC_OK)
        rc = cli_lib_error(cmd, "saving the LoRA adapters");
    else if (tfc_gpt_save_lora_config(m, path_join(stage, "adapter_config.json"), base) != TFC_OK)
        rc = cli_lib_error(cmd, "writing adapter_config.json");
    free(k);
    free(v);
    return rc;
}

int lora_load_checkpoint(const char *cmd, const tfc_safetensors *meta, const char *path, tfc_gpt **m) {
    const char *base = NULL;
    if (tfc_safetensors_metadata(meta, "lora.base", &base) != TFC_OK || !base)
        return cli_error(EXIT_USAGE, cmd, "the LoRA checkpoint does not name its base (no lora.base metadata)");
    vocab bv;
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", base); /* meta may go before the base is read */
    int rc = lora_load_base(cmd, copy, m, &bv, NULL);
    if (rc) return cli_error(rc, cmd, "reading the LoRA checkpoint's base '%s' (see above)", copy);
    vocab_free(&bv);
    if (tfc_gpt_load_lora(*m, path) != TFC_OK) {
        rc = cli_error(EXIT_USAGE, cmd, "the LoRA checkpoint's adapters on base '%s': %s", copy, tfc_last_error());
        tfc_gpt_release(*m);
        *m = NULL;
    }
    return rc;
}

/* ---- tfcore lora merge ------------------------------------------------------------------- */

static void lora_usage(FILE *f) {
    fprintf(f,
            "usage: tfcore lora merge BASE_DIR ADAPTER OUT_DIR\n"
            "  BASE_DIR  a checkpoint of tfcore train (the base model)\n"
            "  ADAPTER   LoRA adapters: a tfcore train --lora-* output directory, a PEFT adapter directory\n"
            "            (adapter_model.safetensors + adapter_config.json) or an adapter .safetensors file\n"
            "  OUT_DIR   receives a plain checkpoint of the merged model, W + (alpha/r)(BA)^T per adapted layer\n"
            "            (eval and sample read it; nothing is written when any step fails)\n");
}

int cmd_lora(int argc, char **argv) {
    const char *cmd = "lora";
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "help") == 0)) {
        lora_usage(stdout);
        return 0;
    }
    if (argc < 1 || strcmp(argv[0], "merge") != 0) {
        return cli_error(EXIT_USAGE, cmd, "%s%s%s (the subcommand is merge)",
                         argc < 1 ? "no subcommand" : "unknown subcommand '", argc < 1 ? "" : argv[0],
                         argc < 1 ? "" : "'");
    }
    if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
        lora_usage(stdout);
        return 0;
    }
    if (argc != 4)
        return cli_error(EXIT_USAGE, cmd, "merge takes BASE_DIR ADAPTER OUT_DIR (got %d arguments)", argc - 1);
    const char *base = argv[1], *adapter = argv[2], *out = argv[3];
    tfc_gpt *m = NULL;
    vocab v;
    char preset[64] = "";
    int rc = lora_load_base(cmd, base, &m, &v, preset);
    if (rc) return rc;
    if (tfc_gpt_load_lora(m, adapter) != TFC_OK)
        rc = cli_error(EXIT_USAGE, cmd, "adapters '%s': %s", adapter, tfc_last_error());
    tfc_lora_config c = {.struct_size = sizeof c};
    char desc[256] = "";
    if (!rc && tfc_gpt_get_lora_config(m, &c) == TFC_OK)
        snprintf(desc, sizeof desc, "rank %d, alpha %g, %s", (int)c.rank, c.alpha, c.targets);
    if (!rc && tfc_gpt_merge_lora(m) != TFC_OK) rc = cli_lib_error(cmd, "merging");
    if (!rc) {
        const char *keys[3] = {"train.step", "lora.merged", "train.preset"};
        const char *vals[3] = {"0", adapter, preset};
        const ckpt_contents cc = {.model = m, .v = &v, .keys = keys, .vals = vals, .n_meta = preset[0] ? 3 : 2};
        rc = ckpt_save(cmd, out, &cc);
    }
    if (!rc) printf("lora merge: %s + %s (%s) -> %s/model.safetensors\n", base, adapter, desc, out);
    vocab_free(&v);
    tfc_gpt_release(m);
    return rc;
}
