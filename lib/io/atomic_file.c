#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

/*
 * The temporary file is created next to path with O_EXCL and mode 0666, so
 * the umask applies as for any file the caller creates (0644 under the
 * usual 022): mkstemp's 0600 would be kept by the rename. Its name is
 * path.tmp.<pid>.<n>, n counting up until a name is free.
 */
tfc_status tfc_atomic_open(const char *fn, const char *path, tfc_atomic_file *af) {
    static _Atomic unsigned counter;
    size_t n = strlen(path);
    af->fp = NULL;
    af->path = path;
    af->tmp_path = malloc(n + 48);
    if (!af->tmp_path) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(af->tmp_path, n + 48, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
        fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        tfc_status s =
            tfc_err(TFC_ERR_IO, "%s: cannot create a temporary file for '%s': %s", fn, path, strerror(errno));
        free(af->tmp_path);
        af->tmp_path = NULL;
        return s;
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        close(fd);
        unlink(af->tmp_path);
        free(af->tmp_path);
        af->tmp_path = NULL;
        return tfc_err(TFC_ERR_IO, "%s: cannot open a temporary file for '%s'", fn, path);
    }
    return TFC_OK;
}

tfc_status tfc_atomic_write(const char *fn, tfc_atomic_file *af, const void *data, size_t len) {
    if (len && fwrite(data, 1, len, af->fp) != len)
        return tfc_err(TFC_ERR_IO, "%s: writing '%s' failed: %s", fn, af->path, strerror(errno));
    return TFC_OK;
}

void tfc_atomic_abort(tfc_atomic_file *af) {
    if (af->fp) fclose(af->fp);
    if (af->tmp_path) {
        unlink(af->tmp_path);
        free(af->tmp_path);
    }
    af->fp = NULL;
    af->tmp_path = NULL;
}

tfc_status tfc_atomic_commit(const char *fn, tfc_atomic_file *af) {
    int bad = fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0;
    int err = errno;
    bad |= fclose(af->fp) != 0;
    af->fp = NULL;
    if (bad || rename(af->tmp_path, af->path) != 0) {
        if (!bad) err = errno;
        tfc_atomic_abort(af);
        return tfc_err(TFC_ERR_IO, "%s: saving '%s' failed: %s", fn, af->path, strerror(err));
    }
    free(af->tmp_path);
    af->tmp_path = NULL;
    /* make the rename itself durable */
    char *dir = strdup(af->path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        const char *d = ".";
        if (slash) {
            *slash = 0;
            d = slash == dir ? "/" : dir;
        }
        int fd = open(d, O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
            (void)fsync(fd);
            close(fd);
        }
        free(dir);
    }
    return TFC_OK;
}
