/*
 * Shared by the JSON config targets (fuzz_hf_config.c, fuzz_adapter_config.c,
 * fuzz_hf_index.c):
 * the loaders read a config file beside their weights in a directory, so the
 * targets keep one scratch directory (in /dev/shm when it exists: no disk
 * I/O) whose config file is rewritten with each input; it is removed at
 * exit.
 */
#ifndef TFC_FUZZ_JSON_UTIL_H
#define TFC_FUZZ_JSON_UTIL_H

#include <dirent.h>

#include "fuzz_util.h"

static char fuzz_scratch[64];

/* At exit: the scratch directory's files (the target's own, no subdirectories), then the directory. */
static inline void fuzz_scratch_remove(void) {
    DIR *d = opendir(fuzz_scratch);
    if (!d) return;
    char path[192];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", fuzz_scratch, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(fuzz_scratch);
}

/* The scratch directory, made on first use and removed at exit. */
static inline const char *fuzz_scratch_dir(void) {
    if (!fuzz_scratch[0]) {
        snprintf(fuzz_scratch, sizeof fuzz_scratch, "/dev/shm/tfc-fuzz-XXXXXX");
        if (!mkdtemp(fuzz_scratch)) {
            snprintf(fuzz_scratch, sizeof fuzz_scratch, "/tmp/tfc-fuzz-XXXXXX");
            if (!mkdtemp(fuzz_scratch)) abort();
        }
        atexit(fuzz_scratch_remove);
    }
    return fuzz_scratch;
}

/* dir/name with data as its content; returns the path (static). */
static inline const char *fuzz_scratch_put(const char *name, const void *data, size_t len) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", fuzz_scratch_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) abort();
    return path;
}

#endif
