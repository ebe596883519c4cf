/*
 * model_file.c — tfcore.load_model(path): which of the library's loaders a
 * path needs, told by content as the CLI's tools/model_source.c and the
 * Python binding's tfcore/model_files.py tell it (docs/BINDINGS.md):
 *
 *   a directory of tfcore train (checkpoint.json)  tfc_gpt_load of its model.safetensors,
 *                                                  or a LoRA run's base + tfc_gpt_load_lora
 *   a directory with config.json (Hugging Face)    tfc_gpt_load_hf
 *   a directory with model.safetensors             tfc_gpt_load
 *   a file starting with llm.c's magic             tfc_gpt_load_llmc
 *   a safetensors file                             tfc_gpt_load
 *
 * A run directory holds config.json too (a GPT2Config), so checkpoint.json
 * is looked for first. The loaders validate the files; this file only
 * chooses one, and says what it looked for when none fits.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ltfcore.h"

#define LLMC_MAGIC 20240326u
#define STAGE ".checkpoint.new" /* tools/checkpoint.c: a committed save not yet moved into place */
#define LOOKED_FOR                                                                                                \
    "a Hugging Face directory (config.json + model.safetensors), a directory of tfcore train (checkpoint.json), " \
    "a safetensors file of tfc_gpt_save or an llm.c GPT-2 checkpoint (magic 20240326)"
/* A LoRA run names its base, which may itself be a LoRA run: a cycle of them must end. */
#define MAX_BASES 8

typedef struct {
    char why[1024]; /* our own message; empty when the library's tfc_last_error() says it */
} load_error;

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

__attribute__((format(printf, 3, 4))) static tfc_status fail(load_error *e, tfc_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
    return s;
}

/* dir + "/" + name into p (PATH_CAP bytes); 0 when it does not fit. */
#define PATH_CAP 4096
static int join(char *p, const char *dir, const char *name) {
    int n = snprintf(p, PATH_CAP, "%s/%s", dir, name);
    return n > 0 && n < PATH_CAP;
}

/* The first bytes of a file: llm.c's magic, or a plausible safetensors header length followed by '{'. */
static void sniff(const char *path, int *llmc, int *safetensors) {
    unsigned char h[9] = {0};
    struct stat st;
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(h, 1, sizeof h, f) : 0;
    if (f) fclose(f);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)h[i] << (8 * i);
    *llmc =
        got >= 4 && ((uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24) == LLMC_MAGIC;
    *safetensors = got == 9 && h[8] == '{' && stat(path, &st) == 0 && n >= 2 && n <= (uint64_t)st.st_size - 8;
}

static tfc_status load_path(const char *path, int depth, tfc_gpt **out, load_error *e);

static tfc_status too_long(load_error *e, const char *path) {
    return fail(e, TFC_ERR_INVALID_ARG, "tfcore.load_model: the path '%.200s...' is too long", path);
}

/* A directory of tfcore train (its files in src): its weights, or a LoRA run's base and adapters. */
static tfc_status load_run(const char *dir, const char *src, int depth, tfc_gpt **out, load_error *e) {
    char p[PATH_CAP];
    if (!join(p, src, "model.safetensors")) return too_long(e, src);
    if (is_file(p)) return tfc_gpt_load(p, out);
    if (!join(p, src, "adapter_model.safetensors")) return too_long(e, src);
    if (!is_file(p))
        return fail(e, TFC_ERR_IO,
                    "tfcore.load_model: '%s' is a directory of tfcore train (checkpoint.json) without "
                    "model.safetensors or adapter_model.safetensors",
                    dir);
    tfc_safetensors *f = NULL;
    tfc_status s = tfc_safetensors_load(p, &f); /* the adapters only: small */
    if (s != TFC_OK) return s;
    const char *base = NULL;
    char copy[PATH_CAP] = "";
    if (tfc_safetensors_metadata(f, "lora.base", &base) == TFC_OK && base) snprintf(copy, sizeof copy, "%s", base);
    tfc_safetensors_release(f);
    if (!copy[0])
        return fail(e, TFC_ERR_FORMAT, "tfcore.load_model: %s names no base model (no lora.base metadata)", p);
    if (depth >= MAX_BASES)
        return fail(e, TFC_ERR_FORMAT, "tfcore.load_model: '%s': LoRA runs name bases more than %d deep (a cycle?)",
                    dir, MAX_BASES);
    tfc_gpt *m = NULL;
    if ((s = load_path(copy, depth + 1, &m, e)) != TFC_OK) return s;
    if ((s = tfc_gpt_load_lora(m, src)) != TFC_OK) {
        tfc_gpt_release(m);
        return s;
    }
    *out = m;
    return TFC_OK;
}

static tfc_status load_path(const char *path, int depth, tfc_gpt **out, load_error *e) {
    struct stat st;
    char p[PATH_CAP], stage[PATH_CAP];
    if (stat(path, &st) != 0)
        return fail(e, TFC_ERR_IO, "tfcore.load_model: '%s' does not exist (looked for %s)", path, LOOKED_FOR);
    if (S_ISDIR(st.st_mode)) {
        if (!join(stage, path, STAGE) || !join(p, stage, "checkpoint.json")) return too_long(e, path);
        const char *src = is_file(p) ? stage : path;
        if (!join(p, src, "checkpoint.json")) return too_long(e, path);
        if (is_file(p)) return load_run(path, src, depth, out, e);
        if (!join(p, path, "config.json")) return too_long(e, path);
        if (is_file(p)) return tfc_gpt_load_hf(path, out);
        if (!join(p, path, "model.safetensors")) return too_long(e, path);
        if (is_file(p)) return tfc_gpt_load(p, out);
        return fail(e, TFC_ERR_IO,
                    "tfcore.load_model: directory '%s' holds no model: it has neither config.json (a Hugging Face "
                    "directory) nor model.safetensors or checkpoint.json (a directory of tfcore train); looked for %s",
                    path, LOOKED_FOR);
    }
    int llmc = 0, safetensors = 0;
    sniff(path, &llmc, &safetensors);
    if (llmc) return tfc_gpt_load_llmc(path, out);
    if (safetensors) return tfc_gpt_load(path, out);
    return fail(e, TFC_ERR_FORMAT,
                "tfcore.load_model: '%s' is not a model file: neither an llm.c checkpoint (its first 4 bytes are not "
                "the magic 20240326) nor a safetensors file (8-byte header length, JSON header); looked for %s",
                path, LOOKED_FOR);
}

/* tfcore.load_model(path) -> model */
int ltfc_load_model(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    tfc_gpt **slot = ltfc_push_gpt_slot(L);
    load_error e = {{0}};
    tfc_status s = load_path(path, 0, slot, &e);
    if (s == TFC_OK) return 1;
    if (!e.why[0]) return ltfc_raise(L, s);
    lua_pushfstring(L, "%s (%s)", e.why, tfc_status_name(s));
    return lua_error(L);
}
