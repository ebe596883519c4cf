/*
 * tfcore sample: generate text from a checkpoint with a KV cache, streaming
 * it to stdout; with --prompts FILE, one sample per line of FILE, decoded
 * together (tfc_gpt_generate_batch) and printed when all are done.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "cli.h"
#include "model_source.h"
#include "lora_cli.h"

static const char *CMD = "sample";

/* The draft of --draft: its checkpoint's model, refused unless its vocabulary is the target's, token for token. */
static int load_draft(const char *dir, const vocab *v, tfc_gpt **draft) {
    ckpt_set ck;
    vocab dv;
    int rc = ckpt_open(CMD, dir, CKPT_VERIFY, &ck);
    if (!rc) rc = ckpt_load_model(CMD, &ck, draft, &dv);
    ckpt_close(&ck);
    if (rc) return rc;
    int same = dv.kind == v->kind && dv.size == v->size &&
        (v->kind != VOCAB_CHAR || memcmp(dv.chars, v->chars, (size_t)v->size) == 0);
    vocab_free(&dv);
    if (!same) {
        tfc_gpt_release(*draft);
        *draft = NULL;
        return cli_error(EXIT_USAGE, CMD,
                         "--draft '%s' has another vocabulary than --ckpt (train both on the same "
                         "corpus and tokenizer)",
                         dir);
    }
    return 0;
}

/* The first token of a sample without a prompt: a newline (char models) or token 0. */
static int32_t start_token(const vocab *v) { return v->kind == VOCAB_CHAR && v->index['\n'] >= 0 ? v->index['\n'] : 0; }

/* The lines of a prompts file (a final newline ends the last line; "\r\n" counts as one), split in place. */
static int split_lines(char *text, size_t len, char ***lines, int32_t *n) {
    int32_t cap = 16, k = 0;
    char **l = malloc((size_t)cap * sizeof *l);
    if (!l) return cli_error(EXIT_RUNTIME, CMD, "out of memory");
    size_t i = 0;
    while (i < len) {
        if (k == cap) {
            char **nl = cap < INT32_MAX / 2 ? realloc(l, (size_t)(cap *= 2) * sizeof *l) : NULL;
            if (!nl) {
                free(l);
                return cli_error(EXIT_RUNTIME, CMD, "out of memory");
            }
            l = nl;
        }
        l[k++] = text + i;
        char *end = memchr(text + i, '\n', len - i);
        size_t e = end ? (size_t)(end - text) : len;
        text[e] = '\0';
        if (e > i && text[e - 1] == '\r') text[e - 1] = '\0';
        i = e + 1;
    }
    *lines = l;
    *n = k;
    return 0;
}

/* Each line of path is a prompt; all are decoded together, then printed in order, "---" between samples. */
static int sample_batch(tfc_gpt *m, const vocab *v, const char *path, int64_t max_new, double temperature,
                        int64_t top_k, double top_p, int64_t seed) {
    char *text = NULL, **lines = NULL;
    size_t len = 0;
    int32_t n = 0;
    if (read_file(path, &text, &len) != 0) return cli_error(EXIT_RUNTIME, CMD, "cannot read --prompts '%s'", path);
    int rc = split_lines(text, len, &lines, &n);
    if (!rc && n == 0) rc = cli_error(EXIT_USAGE, CMD, "--prompts '%s' holds no line", path);
    if (!rc && (int64_t)n * max_new > INT32_MAX)
        rc = cli_error(EXIT_USAGE, CMD, "%d prompts x %lld tokens is too many for one run", n, (long long)max_new);
    int32_t **ids = rc ? NULL : calloc((size_t)n, sizeof *ids), *counts = rc ? NULL : calloc((size_t)n, sizeof *counts);
    int32_t *out = rc ? NULL : malloc(((size_t)n * (size_t)max_new + 1) * sizeof *out);
    int32_t *lengths = rc ? NULL : malloc((size_t)n * sizeof *lengths);
    if (!rc && (!ids || !counts || !out || !lengths)) rc = cli_error(EXIT_RUNTIME, CMD, "out of memory");
    for (int32_t i = 0; i < n && !rc; i++) {
        size_t k = 0;
        if (lines[i][0]) {
            char where[64];
            snprintf(where, sizeof where, "%s (--prompts line %d)", CMD, i + 1);
            if ((rc = vocab_encode(where, v, lines[i], strlen(lines[i]), &ids[i], &k)) != 0) break;
        } else if ((ids[i] = malloc(sizeof *ids[i])) != NULL) {
            ids[i][0] = start_token(v);
            k = 1;
        }
        if (!ids[i]) rc = cli_error(EXIT_RUNTIME, CMD, "out of memory");
        counts[i] = (int32_t)k;
    }
    if (!rc) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (tfc_gpt_generate_batch(m, n, (const int32_t *const *)ids, counts, (int32_t)max_new, temperature,
                                   (int32_t)top_k, top_p, (uint64_t)seed, out, (int64_t)n * max_new, lengths, NULL,
                                   NULL) != TFC_OK)
            rc = cli_lib_error(CMD, "generating");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        int64_t total = 0;
        for (int32_t i = 0; i < n && !rc; i++) {
            fputs(lines[i], stdout);
            for (int32_t j = 0; j < lengths[i]; j++) vocab_print_token(out[i * max_new + j], (void *)v);
            printf(i + 1 < n ? "\n---\n" : "\n");
            total += lengths[i];
        }
        if (!rc)
            fprintf(stderr, "tfcore %s: %d samples, %lld tokens in %.2f s (%.1f tokens/s)\n", CMD, n, (long long)total,
                    secs, secs > 0 ? (double)total / secs : 0.0);
    }
    for (int32_t i = 0; ids && i < n; i++) free(ids[i]);
    free(ids);
    free(counts);
    free(out);
    free(lengths);
    free(lines);
    free(text);
    return rc;
}

int cmd_sample(int argc, char **argv) {
    const char *ckpt = NULL, *tokenizer = NULL, *prompt = NULL, *prompts = NULL, *draft_dir = NULL, *lora = NULL;
    int64_t max_new = 500, top_k = 0, seed = 1, group = -1, draft_k = 4;
    tfc_qformat qformat = (tfc_qformat)0, hformat = (tfc_qformat)0;
    double temperature = 0.8, top_p = 1.0;
    int bf16 = 0;
    cli_args a = {.argc = argc, .argv = argv};
    const char *name, *val;
    int r;
    while ((r = cli_next(&a, &name, &val, 1)) != 0) {
        if (r < 0) return cli_error(EXIT_USAGE, CMD, "unexpected argument '%s'", name);
        if (strcmp(name, "help") == 0) {
            printf("usage: tfcore sample --ckpt DIR [--prompt TEXT | --prompts FILE] [--max-new-tokens N (500)]\n"
                   "                     [--temperature T (0.8)]\n"
                   "                     [--top-k K (0 = off)] [--top-p P (1 = off)] [--seed S (1)]\n"
                   "                     [--quantize int8|int4|none (none)] [--quantize-head int8|int4|none (none)]\n"
                   "                     [--group-size G (every int4 part; 32)] [--draft DIR [--draft-k K (4)]]\n"
                   "                     [--dtype f32|bf16 (f32)]\n"
                   "  --dtype bf16: bf16 inference, the Linear and LM-head GEMMs on bf16 copies of the weights\n"
                   "  and bf16-rounded activations with f32 accumulation (the checkpoint stays f32)\n"
                   "  --quantize: the block Linear layers; --quantize-head: the LM head (tied: a copy of wte)\n"
                   "  --draft DIR decodes speculatively: a smaller checkpoint trained on the same corpus and\n"
                   "  tokenizer proposes K tokens a step, which the --ckpt model checks in one pass; the text\n"
                   "  follows the --ckpt model's distribution (greedy: its own tokens).\n"
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
        else if (strcmp(name, "prompt") == 0)
            prompt = val;
        else if (strcmp(name, "prompts") == 0)
            prompts = val;
        else if (strcmp(name, "draft") == 0)
            draft_dir = val;
        else if (strcmp(name, "lora") == 0)
            lora = val;
        else if (strcmp(name, "draft-k") == 0) {
            if (!cli_int(CMD, name, val, 1, 64, &draft_k)) return EXIT_USAGE;
        } else if (strcmp(name, "max-new-tokens") == 0) {
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
        } else if (strcmp(name, "dtype") == 0) {
            if (!cli_dtype_flag(CMD, val, &bf16)) return EXIT_USAGE;
        } else if (strcmp(name, "temperature") == 0) {
            if (!cli_double(CMD, name, val, 0, 100, &temperature)) return EXIT_USAGE;
        } else if (strcmp(name, "top-p") == 0) {
            if (!cli_double(CMD, name, val, 0, 1, &top_p)) return EXIT_USAGE;
            if (top_p <= 0) return cli_error(EXIT_USAGE, CMD, "--top-p must be in (0, 1], got '%s'", val);
        } else
            return cli_error(EXIT_USAGE, CMD, "unknown flag --%s (see tfcore sample --help)", name);
    }
    if (!ckpt) return cli_error(EXIT_USAGE, CMD, "--ckpt DIR is required (a directory written by tfcore train)");
    if (prompt && prompts)
        return cli_error(EXIT_USAGE, CMD, "--prompt and --prompts exclude each other (put the prompt in the file)");
    if (draft_dir && prompts)
        return cli_error(EXIT_USAGE, CMD, "--draft decodes one prompt; it does not combine with --prompts");
    if (bf16 && (qformat || hformat))
        return cli_error(EXIT_USAGE, CMD,
                         "--dtype bf16 runs the f32 weights' bf16 copies; it does not combine "
                         "with --quantize or --quantize-head");
    tfc_gpt *m = NULL;
    vocab v;
    int rc = model_source_load(CMD, ckpt, tokenizer, 1, &m, &v, NULL);
    if (rc) return rc;
    if ((lora && (rc = lora_attach(CMD, m, NULL, 0, lora)) != 0) ||
        (rc = cli_quantize(CMD, m, qformat, hformat, group)) != 0 ||
        (bf16 && tfc_gpt_set_autocast(m, TFC_DTYPE_BF16) != TFC_OK && (rc = cli_lib_error(CMD, "--dtype bf16")) != 0)) {
        vocab_free(&v);
        tfc_gpt_release(m);
        return rc;
    }
    if (prompts) {
        rc = sample_batch(m, &v, prompts, max_new, temperature, top_k, top_p, seed);
        vocab_free(&v);
        tfc_gpt_release(m);
        return rc;
    }
    tfc_gpt *draft = NULL;
    if (draft_dir && (rc = load_draft(draft_dir, &v, &draft)) != 0) {
        vocab_free(&v);
        tfc_gpt_release(m);
        return rc;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (prompt && *prompt) {
        rc = vocab_encode(CMD, &v, prompt, strlen(prompt), &ids, &n);
    } else {
        ids = malloc(sizeof *ids);
        n = 1;
        if (ids)
            ids[0] = start_token(&v);
        else
            rc = cli_error(EXIT_RUNTIME, CMD, "out of memory");
    }
    int32_t *out = rc ? NULL : malloc(((size_t)max_new + 1) * sizeof *out);
    if (!rc && !out) rc = cli_error(EXIT_RUNTIME, CMD, "out of memory");
    if (!rc) {
        if (prompt) fputs(prompt, stdout);
        tfc_spec_stats st = {sizeof st, 0, 0, 0};
        tfc_status gs = draft
            ? tfc_gpt_generate_speculative(m, draft, ids, (int32_t)n, (int32_t)max_new, (int32_t)draft_k, temperature,
                                           (int32_t)top_k, top_p, (uint64_t)seed, out, (int32_t)max_new, &st,
                                           vocab_print_token, &v)
            : tfc_gpt_generate(m, ids, (int32_t)n, (int32_t)max_new, temperature, (int32_t)top_k, top_p, (uint64_t)seed,
                               out, (int32_t)max_new, vocab_print_token, &v);
        if (gs != TFC_OK) rc = cli_lib_error(CMD, "generating");
        printf("\n");
        if (!rc && draft)
            fprintf(stderr,
                    "tfcore %s: speculative, k = %lld: %lld of %lld drafted tokens accepted (%.0f%%), %lld target "
                    "passes for %lld tokens\n",
                    CMD, (long long)draft_k, (long long)st.accepted, (long long)st.drafted,
                    st.drafted ? 100.0 * (double)st.accepted / (double)st.drafted : 0.0, (long long)st.target_passes,
                    (long long)max_new);
    }
    free(out);
    free(ids);
    vocab_free(&v);
    tfc_gpt_release(m);
    tfc_gpt_release(draft);
    return rc;
}
