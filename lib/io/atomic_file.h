/*
 * Atomic file replacement: write to a temporary file next to the target,
 * fsync it, rename it over the target, fsync the directory. Readers see the
 * old file or the new one, never a torn mix, even across a crash.
 */
#ifndef TFC_IO_ATOMIC_FILE_H
#define TFC_IO_ATOMIC_FILE_H

#include <stdio.h>

#include "tfcore/core.h"

typedef struct tfc_atomic_file {
    FILE *fp;
    char *tmp_path;
    const char *path;
} tfc_atomic_file;

/* Open a temporary file beside path for writing. fn names the caller in errors. */
tfc_status tfc_atomic_open(const char *fn, const char *path, tfc_atomic_file *af);
/* Write len bytes; TFC_ERR_IO on failure. */
tfc_status tfc_atomic_write(const char *fn, tfc_atomic_file *af, const void *data, size_t len);
/* Flush, fsync, rename over the target. On failure the temporary file is removed. */
tfc_status tfc_atomic_commit(const char *fn, tfc_atomic_file *af);
/* Give up: close and remove the temporary file. */
void tfc_atomic_abort(tfc_atomic_file *af);

#endif
