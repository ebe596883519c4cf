/*
 * Shared by the JSON config targets (fuzz_hf_config.c, fuzz_adapter_config.c):
 * the loaders read a config file beside their weights in a directory, so the
 * targets keep one scratch directory (in /dev/shm when it exists: no disk
 * I/O) whose config file is rewritten with each input.
 */
#ifndef TFC_FUZZ_JSON_UTIL_H
#define TFC_FUZZ_JSON_UTIL_H

#include "fuzz_util.h"

/* The scratch directory, made on first use. */
static inline const char *fuzz_scratch_dir(void) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/dev/shm/tfc-fuzz-XXXXXX");
        if (!mkdtemp(dir)) {
            snprintf(dir, sizeof dir, "/tmp/tfc-fuzz-XXXXXX");
            if (!mkdtemp(dir)) abort();
        }
    }
    return dir;
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
