/* tfcore sample: generate text from a checkpoint with a KV cache, streaming it to stdout. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"

static const char *CMD = "sample";

int cmd_sample(int argc, char **argv) {
    const char *ckpt = NULL, *prompt = NULL;
    int64_t max_new = 500, top_k = 0, seed = 1, group = -1;
    tfc_qformat qformat = (tfc_qformat)0, hformat = (tfc_qformat)0;
    double temperature = 0.8, top_p = 1.0;
    cli_args a = {.argc = argc, .argv = argv};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) return cli_error(EXIT_USAGE, CMD, "unexpected argument '%s'", name);
        if (strcmp(name, "help") == 0) {
            printf(
                "usage: tfcore sample --ckpt DIR [--prompt TEXT] [--max-new-tokens N (500)] [--temperature T (0.8)]\n"
                "                     [--top-k K (0 = off)] [--top-p P (1 = off)] [--seed S (1)]\n"
                "                     [--quantize int8|int4|none (none)] [--quantize-head int8|int4|none (none)]\n"
                "                     [--group-size G (every int4 part; 32)]\n"
                "  --quantize: the block Linear layers; --quantize-head: the LM head (tied: a copy of wte)\n");
            return 0;
        }
        if (!val) return cli_error(EXIT_USAGE, CMD, "--%s needs a value", name);
        if (strcmp(name, "ckpt") == 0)
            ckpt = val;
        else if (strcmp(name, "prompt") == 0)
            prompt = val;
        else if (strcmp(name, "max-new-tokens") == 0) {
            if (!cli_int(CMD, name, val, 0, 10000000, &max_new)) return EXIT_USAGE;
        } else if (strcmp(name, "top-k") == 0) {
            if (!cli_int(CMD, name, val, 0, INT32_MAX, &top_k)) return EXIT_USAGE;
        } else if (strcmp(name, "seed") == 0) {
            if (!cli_int(CMD, name, val, 0, INT64_MAX, &seed)) return EXIT_USAGE;
        } else if (strcmp(name, "quantize") == 0) {
            if (!cli_quant_flag(CMD, name, val, &qformat)) return EXIT_USAGE;
        } else if (strcmp(name, "quantize-head") == 0) {
            if (!cli_quant_flag(CMD, name, val, &hformat)) return EXIT_USAGE;
        } else if (strcmp(name, "group-size") == 0) {
            if (!cli_int(CMD, name, val, 1, 1 << 20, &group)) return EXIT_USAGE;
        } else if (strcmp(name, "temperature") == 0) {
            if (!cli_double(CMD, name, val, 0, 100, &temperature)) return EXIT_USAGE;
        } else if (strcmp(name, "top-p") == 0) {
            if (!cli_double(CMD, name, val, 0, 1, &top_p)) return EXIT_USAGE;
            if (top_p <= 0) return cli_error(EXIT_USAGE, CMD, "--top-p must be in (0, 1], got '%s'", val);
        } else
            return cli_error(EXIT_USAGE, CMD, "unknown flag --%s (see tfcore sample --help)", name);
    }
    if (!ckpt) return cli_error(EXIT_USAGE, CMD, "--ckpt DIR is required (a directory written by tfcore train)");
    tfc_gpt *m = NULL;
    vocab v;
    ckpt_set ck;
    int rc = ckpt_open(CMD, ckpt, CKPT_VERIFY, &ck);
    if (!rc) rc = ckpt_load_model(CMD, &ck, &m, &v);
    ckpt_close(&ck);
    if (rc) return rc;
    if ((rc = cli_quantize(CMD, m, qformat, hformat, group)) != 0) {
        vocab_free(&v);
        tfc_gpt_release(m);
        return rc;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (prompt && *prompt) {
        rc = vocab_encode(CMD, &v, prompt, strlen(prompt), &ids, &n);
    } else {
        /* no prompt: start from a newline (char models) or token 0 */
        ids = malloc(sizeof *ids);
        n = 1;
        ids[0] = v.kind == VOCAB_CHAR && v.index['\n'] >= 0 ? v.index['\n'] : 0;
    }
    int32_t *out = rc ? NULL : malloc(((size_t)max_new + 1) * sizeof *out);
    if (!rc && !out) rc = cli_error(EXIT_RUNTIME, CMD, "out of memory");
    if (!rc) {
        if (prompt) fputs(prompt, stdout);
        if (tfc_gpt_generate(m, ids, (int32_t)n, (int32_t)max_new, temperature, (int32_t)top_k, top_p, (uint64_t)seed,
                             out, (int32_t)max_new, vocab_print_token, &v) != TFC_OK)
            rc = cli_lib_error(CMD, "generating");
        printf("\n");
    }
    free(out);
    free(ids);
    vocab_free(&v);
    tfc_gpt_release(m);
    return rc;
}
