/*
 * checkpoint.json: the list of the files of one checkpoint (name, size,
 * FNV-1a 64 hash, training step of the model and optimizer files). It is
 * written last, so its presence commits a save (tools/checkpoint.c).
 */
#ifndef TFCORE_TOOLS_CHECKPOINT_MANIFEST_H
#define TFCORE_TOOLS_CHECKPOINT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

enum { CKPT_MAX_FILES = 8 };

typedef struct ckpt_entry {
    char name[32];
    int64_t size;
    uint64_t hash; /* FNV-1a 64 of the whole file */
    int64_t step;  /* training step the file holds; -1 for files without one */
} ckpt_entry;

typedef struct ckpt_manifest {
    int64_t step; /* steps trained */
    int32_t n;
    ckpt_entry files[CKPT_MAX_FILES];
} ckpt_manifest;

/* FNV-1a 64 and size of an open file, read from its start; 0, or -1 on a read error. */
int file_fnv1a64(int fd, uint64_t *hash, int64_t *size);
/* m as JSON text (one line per file) into buf; the length, or -1 when it does not fit. */
int manifest_format(const ckpt_manifest *m, char *buf, size_t cap);
/*
 * Read path into *m (zeroed first), parsed as JSON. 0 on success; -1 when
 * the file does not exist; -2 when it is unreadable or not what
 * manifest_format writes: other keys, types or values, in any layout (why
 * says what, in a few words, with a line where there is one).
 */
int manifest_read(const char *path, ckpt_manifest *m, char *why, size_t why_cap);
/* The entry for name, or NULL. */
const ckpt_entry *manifest_find(const ckpt_manifest *m, const char *name);

#endif
