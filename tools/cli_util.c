/* Error reporting, flag parsing and file helpers of the tfcore CLI. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

int cli_error(int code, const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tfcore %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int cli_lib_error(const char *cmd, const char *what) {
    return cli_error(EXIT_RUNTIME, cmd, "%s: %s", what, tfc_last_error());
}

int cli_next(cli_args *a, const char **name, const char **value, int takes_value) {
    (void)takes_value;
    if (a->i >= a->argc) return 0;
    char *arg = a->argv[a->i++];
    if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
        *name = arg;
        return -1;
    }
    static char buf[128];
    char *eq = strchr(arg, '=');
    if (eq) {
        size_t n = (size_t)(eq - arg - 2);
        if (n >= sizeof buf) n = sizeof buf - 1;
        memcpy(buf, arg + 2, n);
        buf[n] = 0;
        *name = buf;
        *value = eq + 1;
        return 1;
    }
    *name = arg + 2;
    *value = NULL;
    /* the value is the next argument unless it is another flag */
    if (a->i < a->argc && !(strncmp(a->argv[a->i], "--", 2) == 0 && a->argv[a->i][2])) *value = a->argv[a->i++];
    return 1;
}

int cli_int(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        cli_error(EXIT_USAGE, cmd, "--%s needs an integer in [%lld, %lld], got '%s'", flag, (long long)lo,
                  (long long)hi, s ? s : "(nothing)");
        return 0;
    }
    *out = v;
    return 1;
}

int cli_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
    char *end = NULL;
    double v = s ? strtod(s, &end) : NAN;
    if (!s || !*s || *end || !(v >= lo && v <= hi)) {
        cli_error(EXIT_USAGE, cmd, "--%s needs a number in [%g, %g], got '%s'", flag, lo, hi, s ? s : "(nothing)");
        return 0;
    }
    *out = v;
    return 1;
}

int cli_quant_flag(const char *cmd, const char *flag, const char *s, tfc_qformat *format) {
    if (s && strcmp(s, "int8") == 0)
        *format = TFC_QFORMAT_INT8;
    else if (s && strcmp(s, "int4") == 0)
        *format = TFC_QFORMAT_INT4;
    else if (s && strcmp(s, "none") == 0)
        *format = (tfc_qformat)0;
    else {
        cli_error(EXIT_USAGE, cmd, "--%s needs int8, int4 or none, got '%s'", flag, s ? s : "(nothing)");
        return 0;
    }
    return 1;
}

int cli_quantize(const char *cmd, tfc_gpt *m, tfc_qformat format, tfc_qformat head, int64_t group_size) {
    if (format != TFC_QFORMAT_INT4 && head != TFC_QFORMAT_INT4 && group_size >= 0)
        return cli_error(EXIT_USAGE, cmd,
                         format || head ? "--group-size is for int4; int8 has one scale per output feature"
                                        : "--group-size needs --quantize int4 or --quantize-head int4");
    const int32_t g4 = group_size < 0 ? 32 : (int32_t)group_size;
    /* the library's messages say why (a group size that does not divide n_embd, ...) */
    if (format && tfc_gpt_quantize(m, format, format == TFC_QFORMAT_INT4 ? g4 : 0) != TFC_OK) {
        cli_lib_error(cmd, "quantizing the model");
        return EXIT_USAGE;
    }
    if (head && tfc_gpt_quantize_head(m, head, head == TFC_QFORMAT_INT4 ? g4 : 0) != TFC_OK) {
        cli_lib_error(cmd, "quantizing the LM head");
        return EXIT_USAGE;
    }
    return 0;
}

static const char *format_label(tfc_qformat f, int32_t group, char *buf, size_t n) {
    if (f == TFC_QFORMAT_INT4)
        snprintf(buf, n, "int4 group %d", (int)group);
    else
        snprintf(buf, n, "%s", f == TFC_QFORMAT_INT8 ? "int8" : "f32");
    return buf;
}

const char *cli_quant_label(const tfc_gpt *m, char *buf, size_t n) {
    char b[32], h[32];
    format_label(tfc_gpt_quant_format(m), tfc_gpt_quant_group_size(m), b, sizeof b);
    if (tfc_gpt_head_quant_format(m))
        snprintf(buf, n, "%s%s, head %s", b, tfc_gpt_quant_format(m) ? "" : " blocks",
                 format_label(tfc_gpt_head_quant_format(m), tfc_gpt_head_quant_group_size(m), h, sizeof h));
    else
        snprintf(buf, n, "%s", b);
    return buf;
}

int read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (!b) break;
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(b, cap + 1);
        if (!nb) {
            free(b);
            b = NULL;
        }
        b = nb;
    }
    int err = ferror(f);
    fclose(f);
    if (!b || err) {
        free(b);
        return -1;
    }
    b[n] = 0;
    *data = b;
    *len = n;
    return 0;
}

int ensure_dir(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) return S_ISDIR(st.st_mode) ? 0 : -1;
    /* create the parents first (mkdir -p) */
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        if (ensure_dir(parent) != 0) return -1;
    }
    return mkdir(path, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

const char *path_join(const char *dir, const char *name) {
    static char bufs[8][4096];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

/* ---- vocabularies -------------------------------------------------------------------- */

void vocab_chars_from_text(vocab *v, const char *text, size_t len) {
    int seen[256] = {0};
    for (size_t i = 0; i < len; i++) seen[(unsigned char)text[i]] = 1;
    memset(v, 0, sizeof *v);
    v->kind = VOCAB_CHAR;
    for (int b = 0; b < 256; b++) {
        v->index[b] = -1;
        if (seen[b]) {
            v->index[b] = (int16_t)v->size;
            v->chars[v->size++] = (unsigned char)b;
        }
    }
}

int vocab_encode(const char *cmd, const vocab *v, const char *text, size_t len, int32_t **ids, size_t *n) {
    if (v->kind == VOCAB_BPE) {
        if (tfc_tokenizer_encode(v->bpe, text, len, TFC_SPECIAL_AS_TEXT, ids, n) != TFC_OK)
            return cli_lib_error(cmd, "encoding the text");
        /* the ids are the library's memory (tfc_free): copy them so every caller just free()s */
        int32_t *c = malloc((*n ? *n : 1) * sizeof *c);
        if (!c) return cli_error(EXIT_RUNTIME, cmd, "out of memory");
        memcpy(c, *ids, *n * sizeof *c);
        tfc_free(*ids);
        *ids = c;
        return 0;
    }
    int32_t *out = malloc((len ? len : 1) * sizeof *out);
    if (!out) return cli_error(EXIT_RUNTIME, cmd, "out of memory");
    for (size_t i = 0; i < len; i++) {
        int id = v->index[(unsigned char)text[i]];
        if (id < 0) {
            free(out);
            return cli_error(EXIT_USAGE, cmd, "byte 0x%02x at offset %zu is not in the model's %d-character vocabulary",
                             (unsigned char)text[i], i, v->size);
        }
        out[i] = id;
    }
    *ids = out;
    *n = len;
    return 0;
}

int vocab_token_bytes(const vocab *v, int32_t id, const char **bytes, size_t *len) {
    if (v->kind == VOCAB_BPE) return tfc_tokenizer_token_bytes(v->bpe, id, bytes, len, NULL) == TFC_OK ? 0 : -1;
    if (id < 0 || id >= v->size) return -1;
    *bytes = (const char *)&v->chars[id];
    *len = 1;
    return 0;
}

int32_t vocab_print_token(int32_t tok, void *ctx) {
    const vocab *v = ctx;
    const char *b;
    size_t n;
    if (vocab_token_bytes(v, tok, &b, &n) == 0) fwrite(b, 1, n, stdout);
    fflush(stdout);
    return 0;
}

int vocab_to_meta(const vocab *v, char **value) {
    char *s = malloc(8 + 2 * 256 + 1);
    if (!s) return -1;
    if (v->kind == VOCAB_BPE) {
        strcpy(s, v->json ? "hf-json" : "bpe");
    } else {
        strcpy(s, "char:");
        for (int i = 0; i < v->size; i++) sprintf(s + 5 + 2 * i, "%02x", v->chars[i]);
        s[5 + 2 * v->size] = 0;
    }
    *value = s;
    return 0;
}

int vocab_write_json(const char *cmd, const vocab *v, const char *path) {
    FILE *f = fopen(path, "wb");
    int bad = !f || !v->json || fwrite(v->json, 1, v->json_len, f) != v->json_len;
    if (f) bad |= fclose(f) != 0;
    return bad ? cli_error(EXIT_RUNTIME, cmd, "cannot write '%s'", path) : 0;
}

int is_json_file(const char *path) {
    FILE *f = fopen(path, "rb");
    int c = ' ';
    while (f && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) c = fgetc(f);
    if (f) fclose(f);
    return f && c == '{';
}

int vocab_load_hf_json(const char *cmd, const char *path, vocab *v) {
    memset(v, 0, sizeof *v);
    if (read_file(path, &v->json, &v->json_len) != 0) return cli_error(EXIT_USAGE, cmd, "cannot read '%s'", path);
    v->kind = VOCAB_BPE;
    if (tfc_tokenizer_load_hf_json(path, TFC_TOKENIZER_ADD_SPECIAL, &v->bpe) != TFC_OK ||
        tfc_tokenizer_vocab_size(v->bpe, &v->size) != TFC_OK) {
        int rc = cli_lib_error(cmd, "reading the tokenizer.json");
        vocab_free(v);
        return rc;
    }
    return 0;
}

int vocab_from_meta(const char *cmd, const char *value, const char *bpe_path, const char *json_path, vocab *v) {
    memset(v, 0, sizeof *v);
    if (!value) return cli_error(EXIT_USAGE, cmd, "the checkpoint names no vocabulary (metadata 'tfc.vocab')");
    if (strcmp(value, "hf-json") == 0) return vocab_load_hf_json(cmd, json_path, v);
    if (strcmp(value, "bpe") == 0) {
        v->kind = VOCAB_BPE;
        if (tfc_tokenizer_load(bpe_path, &v->bpe) != TFC_OK) return cli_lib_error(cmd, "loading the tokenizer");
        if (tfc_tokenizer_vocab_size(v->bpe, &v->size) != TFC_OK) return cli_lib_error(cmd, "tokenizer");
        return 0;
    }
    if (strncmp(value, "char:", 5) != 0 || strlen(value + 5) % 2 || strlen(value + 5) > 512)
        return cli_error(EXIT_USAGE, cmd, "the checkpoint's vocabulary entry is malformed");
    v->kind = VOCAB_CHAR;
    for (int b = 0; b < 256; b++) v->index[b] = -1;
    for (const char *p = value + 5; *p; p += 2) {
        unsigned x;
        if (sscanf(p, "%2x", &x) != 1)
            return cli_error(EXIT_USAGE, cmd, "the checkpoint's vocabulary entry is malformed");
        v->index[x] = (int16_t)v->size;
        v->chars[v->size++] = (unsigned char)x;
    }
    return 0;
}

void vocab_free(vocab *v) {
    tfc_tokenizer_release(v->bpe);
    v->bpe = NULL;
    free(v->json);
    v->json = NULL;
    v->json_len = 0;
}

int load_gpt2_tokenizer(const char *cmd, const char *dir, tfc_tokenizer **out) {
    char enc[4096], bpe[4096];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    struct stat st;
    if (stat(enc, &st) != 0 || stat(bpe, &st) != 0)
        return cli_error(EXIT_USAGE, cmd, "--tokenizer gpt2:%s needs %s and %s", dir, enc, bpe);
    if (tfc_tokenizer_load_gpt2(enc, bpe, out) != TFC_OK) return cli_lib_error(cmd, "loading the GPT-2 tokenizer");
    return 0;
}

int cli_dtype_flag(const char *cmd, const char *s, int *bf16) {
    if (s && (strcmp(s, "f32") == 0 || strcmp(s, "bf16") == 0)) {
        *bf16 = strcmp(s, "bf16") == 0;
        return 1;
    }
    cli_error(EXIT_USAGE, cmd, "--dtype needs f32 or bf16, got '%s'", s ? s : "(nothing)");
    return 0;
}
