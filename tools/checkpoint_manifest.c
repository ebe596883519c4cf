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
 * Any JSON reader can read it; this reader accepts exactly this layout (one
 * line per field and per file), which is all tfcore writes.
 */
#include "checkpoint_manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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

int manifest_read(const char *path, ckpt_manifest *m, char *why, size_t why_cap) {
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return -1;
        snprintf(why, why_cap, "cannot open it: %s", strerror(errno));
        return -2;
    }
    static const char *const fixed[] = {"{\n",
                                        "  \"format\": \"tfcore-checkpoint\",\n",
                                        "  \"version\": 1,\n",
                                        NULL /* step */,
                                        "  \"files\": [\n",
                                        "  ]\n",
                                        "}\n"};
    char line[512];
    int line_no = 0, state = 0, bad = 0; /* state: the index in fixed[] of the next line; 5 also takes entries */
    int more = 1;                        /* the previous entry ended with ',': another must follow */
    while (!bad && fgets(line, sizeof line, f)) {
        line_no++;
        if (state == 5 && more) {
            ckpt_entry *e = &m->files[m->n];
            char name[64], hex[32];
            long long size = 0, step = -1;
            int used = 0, k = 0;
            bad = m->n == CKPT_MAX_FILES ||
                sscanf(line, "    {\"name\": \"%63[^\"]\", \"size\": %lld, \"fnv1a64\": \"%16[0-9a-f]\"%n", name, &size,
                       hex, &used) != 3 ||
                used == 0 || strlen(hex) != 16 || size < 0 || !plain_name(name) || strlen(name) >= sizeof e->name ||
                manifest_find(m, name) != NULL;
            const char *p = bad ? line : line + used;
            if (!bad && sscanf(p, ", \"step\": %lld%n", &step, &k) == 1 && k > 0) p += k;
            bad = bad || (strcmp(p, "},\n") != 0 && strcmp(p, "}\n") != 0) || (k > 0 && step < 0);
            if (bad) break;
            more = p[1] == ',';
            snprintf(e->name, sizeof e->name, "%s", name);
            e->size = size;
            e->step = k > 0 ? step : -1;
            sscanf(hex, "%" SCNx64, &e->hash);
            m->n++;
            continue;
        }
        if (state == 3) {
            long long step = -1;
            char nl[2];
            bad = sscanf(line, "  \"step\": %lld,%1[\n]", &step, nl) != 2 || step < 0;
            m->step = step;
        } else {
            bad = state > 6 || strcmp(line, fixed[state]) != 0;
        }
        state++;
    }
    int rc = 0;
    if (bad) {
        snprintf(why, why_cap, "line %d is not what tfcore writes", line_no);
        rc = -2;
    } else if (state != 7) {
        snprintf(why, why_cap, "it ends early, after line %d", line_no);
        rc = -2;
    }
    if (ferror(f)) {
        snprintf(why, why_cap, "reading it failed");
        rc = -2;
    }
    fclose(f);
    return rc;
}

const ckpt_entry *manifest_find(const ckpt_manifest *m, const char *name) {
    for (int32_t i = 0; i < m->n; i++)
        if (strcmp(m->files[i].name, name) == 0) return &m->files[i];
    return NULL;
}
