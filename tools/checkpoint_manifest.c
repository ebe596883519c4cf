/*
 * checkpoint.json, as tools/checkpoint.c writes it:
 *
 *   {
 *     "format": "tfcore-checkpoint",
 *     "version": 1,
 *     "step": 12,
 *     "files": [
 *       {"name": "optimizer.safetensors", "size": 6628128, "fnv1a64": "9d0c...", "step": 12},
 *       {"name": "config.json", "size": 321, "fnv1a64": "51f3..."}
 *     ]
 *   }
 *
 * Any JSON reader can read it; this one parses it with jansson and accepts
 * exactly these keys (a file's "step" optional), in any layout.
 */
#include "checkpoint_manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int file_fnv1a64(int fd, uint64_t *hash, int64_t *size) {
    static unsigned char buf[1 << 16];
    uint64_t h = 0xcbf29ce484222325ULL;
    int64_t n = 0;
    if (lseek(fd, 0, SEEK_SET) != 0) return -1;
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) break;
        for (ssize_t i = 0; i < got; i++) h = (h ^ buf[i]) * 0x100000001b3ULL;
        n += got;
    }
    *hash = h;
    *size = n;
    return 0;
}

int manifest_format(const ckpt_manifest *m, char *buf, size_t cap) {
    size_t len = 0;
#define PUT(...)                                                              \
    do {                                                                      \
        int k_ = snprintf(buf + len, len < cap ? cap - len : 0, __VA_ARGS__); \
        if (k_ < 0 || (size_t)k_ >= (len < cap ? cap - len : 0)) return -1;   \
        len += (size_t)k_;                                                    \
    } while (0)
    PUT("{\n  \"format\": \"tfcore-checkpoint\",\n  \"version\": 1,\n  \"step\": %" PRId64 ",\n  \"files\": [\n",
        m->step);
    for (int32_t i = 0; i < m->n; i++) {
        const ckpt_entry *e = &m->files[i];
        PUT("    {\"name\": \"%s\", \"size\": %" PRId64 ", \"fnv1a64\": \"%016" PRIx64 "\"", e->name, e->size, e->hash);
        if (e->step >= 0) PUT(", \"step\": %" PRId64, e->step);
        PUT("}%s\n", i + 1 < m->n ? "," : "");
    }
    PUT("  ]\n}\n");
#undef PUT
    return (int)len;
}

/* A file name tfcore writes: letters, digits, '.', '_', '-'. */
static int plain_name(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return 0;
    return 1;
}

/* The line (1-based) of buf[0, at). */
static int line_of(const char *buf, size_t at) {
    int line = 1;
    for (size_t i = 0; i < at; i++) line += buf[i] == '\n';
    return line;
}

/* The line of files[i] in buf: where its name string first appears after "files"; 0 when not found. */
static int entry_line(const char *buf, size_t len, const json_t *e) {
    const char *name = json_string_value(json_object_get(e, "name")), *files = memmem(buf, len, "\"files\"", 7);
    char quoted[80];
    if (!name || !files || snprintf(quoted, sizeof quoted, "\"%s\"", name) >= (int)sizeof quoted) return 0;
    const char *at = memmem(files, len - (size_t)(files - buf), quoted, strlen(quoted));
    return at ? line_of(buf, (size_t)(at - buf)) : 0;
}

/* files[i] into e; 0, or -1 when it is not an entry manifest_format writes. */
static int read_entry(const json_t *x, const ckpt_manifest *m, ckpt_entry *e) {
    const json_t *name = json_object_get(x, "name"), *size = json_object_get(x, "size"),
                 *hash = json_object_get(x, "fnv1a64"), *step = json_object_get(x, "step");
    const char *hex = json_string_value(hash);
    if (!json_is_object(x) || json_object_size(x) != 3u + (step != NULL) || !json_is_string(name) ||
        !plain_name(json_string_value(name)) || strlen(json_string_value(name)) >= sizeof e->name ||
        manifest_find(m, json_string_value(name)) || !json_is_integer(size) || json_integer_value(size) < 0 || !hex ||
        strlen(hex) != 16 || strspn(hex, "0123456789abcdef") != 16 ||
        (step && (!json_is_integer(step) || json_integer_value(step) < 0)))
        return -1;
    snprintf(e->name, sizeof e->name, "%s", json_string_value(name));
    e->size = json_integer_value(size);
    e->hash = strtoull(hex, NULL, 16);
    e->step = step ? json_integer_value(step) : -1;
    return 0;
}

/*
 * Parsed by jansson (a key twice is damage: tfcore never writes one), then
 * held to what manifest_format writes: these keys and no others, in any
 * layout. Errors name a line: of the parse error, of the file entry, or
 * the last one when the text ends early.
 */
int manifest_read(const char *path, ckpt_manifest *m, char *why, size_t why_cap) {
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return -1;
        snprintf(why, why_cap, "cannot open it: %s", strerror(errno));
        return -2;
    }
    static char buf[1 << 16]; /* tfcore writes about 600 bytes */
    const size_t len = fread(buf, 1, sizeof buf, f);
    const int err = ferror(f) != 0, big = len == sizeof buf;
    fclose(f);
    if (err || big) {
        snprintf(why, why_cap, err ? "reading it failed" : "it is over %zu bytes", sizeof buf - 1);
        return -2;
    }
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (json_error_code(&je) == json_error_premature_end_of_input)
            snprintf(why, why_cap, "it ends early, after line %d", line_of(buf, len) - (len && buf[len - 1] == '\n'));
        else
            snprintf(why, why_cap, "line %d is not what tfcore writes (%s)", je.line, je.text);
        return -2;
    }
    const json_t *files = json_object_get(root, "files"), *step = json_object_get(root, "step");
    const char *format = json_string_value(json_object_get(root, "format"));
    const json_t *version = json_object_get(root, "version");
    int bad = json_object_size(root) != 4 || !format || strcmp(format, "tfcore-checkpoint") != 0 ||
        !json_is_integer(version) || json_integer_value(version) != 1 || !json_is_integer(step) ||
        json_integer_value(step) < 0 || !json_is_array(files) || json_array_size(files) > CKPT_MAX_FILES;
    m->step = bad ? 0 : json_integer_value(step);
    int line = 0;
    for (size_t i = 0; !bad && i < json_array_size(files); i++) {
        const json_t *x = json_array_get(files, i);
        if (read_entry(x, m, &m->files[m->n]) != 0) {
            bad = 1;
            line = entry_line(buf, len, x);
        } else {
            m->n++;
        }
    }
    json_decref(root);
    if (bad && line)
        snprintf(why, why_cap, "line %d is not what tfcore writes", line);
    else if (bad)
        snprintf(why, why_cap, "it is not what tfcore writes (format, version, step, files)");
    return bad ? -2 : 0;
}

const ckpt_entry *manifest_find(const ckpt_manifest *m, const char *name) {
    for (int32_t i = 0; i < m->n; i++)
        if (strcmp(m->files[i].name, name) == 0) return &m->files[i];
    return NULL;
}
