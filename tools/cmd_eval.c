/*
 * tfcore eval: the mean cross-entropy of a checkpoint on a text file, over
 * every non-overlapping window of block_size + 1 tokens (the benchmark's
 * definition of val loss), in nats per token. With --quantize or
 * --quantize-head, the f32 model's loss, then the quantized model's and
 * the difference.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "model_source.h"
#include "lora_cli.h"

static const char *CMD = "eval";

/* The mean loss of m over `windows` windows of T+1 tokens of ids, batch at a time; 0 or an exit code. */
static int mean_loss(tfc_gpt *m, const int32_t *ids, int64_t windows, int64_t T, int64_t batch, double *out) {
    double sum = 0;
    int rc = 0;
    for (int64_t w0 = 0; !rc && w0 < windows; w0 += batch) {
        int64_t B = windows - w0 < batch ? windows - w0 : batch;
        const int64_t dims[2] = {B, T};
        int32_t *xs = malloc((size_t)(B * T) * sizeof *xs), *ys = malloc((size_t)(B * T) * sizeof *ys);
        for (int64_t b = 0; xs && ys && b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                xs[b * T + t] = ids[(w0 + b) * T + t];
                ys[b * T + t] = ids[(w0 + b) * T + t + 1];
            }
        tfc_tensor *x = NULL, *y = NULL, *loss = NULL;
        double l = NAN;
        if (!xs || !ys || tfc_tensor_from_data(xs, dims, 2, TFC_DTYPE_I32, &x) != TFC_OK ||
            tfc_tensor_from_data(ys, dims, 2, TFC_DTYPE_I32, &y) != TFC_OK ||
            tfc_gpt_forward(m, NULL, x, y, NULL, &loss) != TFC_OK || tfc_tensor_item(loss, &l) != TFC_OK)
            rc = cli_lib_error(CMD, "forward");
        sum += l * (double)B;
        free(xs);
        free(ys);
        tfc_tensor_release(x);
        tfc_tensor_release(y);
        tfc_tensor_release(loss);
    }
    *out = sum / (double)windows;
    return rc;
}

int cmd_eval(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL, *tokenizer = NULL, *lora = NULL;
    int64_t batch = 16, group = -1;
    tfc_qformat qformat = (tfc_qformat)0, hformat = (tfc_qformat)0;
    int bf16 = 0;
    cli_args a = {.argc = argc, .argv = argv};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) return cli_error(EXIT_USAGE, CMD, "unexpected argument '%s'", name);
        if (strcmp(name, "help") == 0) {
            printf("usage: tfcore eval --ckpt DIR --data FILE [--batch B (16)]\n"
                   "                   [--quantize int8|int4|none (none)] [--quantize-head int8|int4|none (none)]\n"
                   "                   [--group-size G (every int4 part; 32)] [--dtype f32|bf16 (f32)]\n"
                   "  --quantize: the block Linear layers; --quantize-head: the LM head (tied: a copy of wte)\n"
                   "  with either: the f32 loss, then the quantized model's and the difference\n"
                   "  --dtype bf16: the f32 loss, then the loss in bf16 mixed precision (the Linear and LM-head\n"
                   "  GEMMs on bf16-rounded operands, f32 accumulation) and the difference\n"
                   "  --ckpt (or --model) also reads a Hugging Face directory (GPT-2, Llama, Mistral, Qwen2) or an\n"
                   "  llm.c .bin; one without a vocabulary needs --tokenizer gpt2:DIR|FILE\n"
                   "  --lora FILE|DIR: LoRA adapters on the model, a PEFT adapter directory or file, or the\n"
                   "  output directory of a LoRA run of tfcore train\n");

            return 0;
        }
        if (!val) return cli_error(EXIT_USAGE, CMD, "--%s needs a value", name);
        if (strcmp(name, "ckpt") == 0 || strcmp(name, "model") == 0)
            ckpt = val;
        else if (strcmp(name, "tokenizer") == 0)
            tokenizer = val;
        else if (strcmp(name, "data") == 0)
            data = val;
        else if (strcmp(name, "lora") == 0)
            lora = val;
        else if (strcmp(name, "batch") == 0) {
            if (!cli_int(CMD, name, val, 1, 65536, &batch)) return EXIT_USAGE;
        } else if (strcmp(name, "quantize") == 0) {
            if (!cli_quant_flag(CMD, name, val, &qformat)) return EXIT_USAGE;
        } else if (strcmp(name, "quantize-head") == 0) {
            if (!cli_quant_flag(CMD, name, val, &hformat)) return EXIT_USAGE;
        } else if (strcmp(name, "group-size") == 0) {
            if (!cli_int(CMD, name, val, 1, 1 << 20, &group)) return EXIT_USAGE;
        } else if (strcmp(name, "dtype") == 0) {
            if (!cli_dtype_flag(CMD, val, &bf16)) return EXIT_USAGE;
        } else
            return cli_error(EXIT_USAGE, CMD, "unknown flag --%s (see tfcore eval --help)", name);
    }
    if (!ckpt || !data) return cli_error(EXIT_USAGE, CMD, "--ckpt DIR and --data FILE are required");
    if (bf16 && (qformat || hformat))
        return cli_error(EXIT_USAGE, CMD, "--dtype bf16 does not combine with --quantize or --quantize-head");
    if (!qformat && !hformat && group >= 0)
        return cli_error(EXIT_USAGE, CMD, "--group-size needs --quantize int4 or --quantize-head int4");
    char *text = NULL;
    size_t len = 0;
    if (read_file(data, &text, &len) != 0) return cli_error(EXIT_USAGE, CMD, "cannot read the data file '%s'", data);
    tfc_gpt *m = NULL;
    vocab v;
    int rc = model_source_load(CMD, ckpt, tokenizer, 1, &m, &v, NULL);
    if (!rc && lora && (rc = lora_attach(CMD, m, NULL, 0, lora)) != 0) {
        vocab_free(&v);
        tfc_gpt_release(m);
    }
    if (rc) {
        free(text);
        return rc;
    }
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    if (tfc_gpt_get_config(m, &c) != TFC_OK) rc = cli_lib_error(CMD, "config");
    int32_t *ids = NULL;
    size_t n = 0;
    if (!rc) rc = vocab_encode(CMD, &v, text, len, &ids, &n);
    const int64_t T = c.block_size, windows = rc ? 0 : ((int64_t)n - 1) / T;
    if (!rc && windows < 1)
        rc = cli_error(EXIT_USAGE, CMD, "'%s' has %zu tokens, fewer than one block of %lld+1", data, n, (long long)T);
    double loss = NAN, qloss = NAN;
    if (!rc) rc = mean_loss(m, ids, windows, T, batch, &loss);
    if (!rc)
        printf("eval: %s: loss %.4f nats/token (perplexity %.2f) over %lld windows of %lld tokens (%zu tokens)\n", data,
               loss, exp(loss), (long long)windows, (long long)T, n);
    if (!rc && bf16) {
        double bloss = NAN;
        if (tfc_gpt_set_autocast(m, TFC_DTYPE_BF16) != TFC_OK) rc = cli_lib_error(CMD, "--dtype bf16");
        if (!rc) rc = mean_loss(m, ids, windows, T, batch, &bloss);
        if (!rc)
            printf("eval: %s: bf16 mixed precision loss %.4f nats/token (perplexity %.2f): %+.4f nats/token vs f32\n",
                   data, bloss, exp(bloss), bloss - loss);
    }
    if (!rc && (qformat || hformat)) {
        rc = cli_quantize(CMD, m, qformat, hformat, group);
        if (!rc) rc = mean_loss(m, ids, windows, T, batch, &qloss);
        if (!rc) {
            char how[96];
            printf("eval: %s: %s loss %.4f nats/token (perplexity %.2f): %+.4f nats/token vs f32\n", data,
                   cli_quant_label(m, how, sizeof how), qloss, exp(qloss), qloss - loss);
        }
    }
    fflush(stdout);
    free(ids);
    free(text);
    vocab_free(&v);
    tfc_gpt_release(m);
    return rc;
}
