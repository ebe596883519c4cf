/* Messages of the backend table: a missing entry, a failed one. */
#include "backend/backend.h"

#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"

const char *tfc_dtype_mask_list(uint32_t mask, const char *conj) {
    /* One buffer per thread is enough: callers format it into a message at once. */
    static _Thread_local char buf[96];
    size_t len = 0;
    buf[0] = '\0';
    int n = 0, total = 0;
    for (int32_t dt = 0; dt < 32; dt++) total += (mask >> dt) & 1u;
    for (int32_t dt = 0; dt < 32 && len < sizeof buf; dt++) {
        if (!((mask >> dt) & 1u)) continue;
        n++;
        char sep[16];
        snprintf(sep, sizeof sep, "%s", n == 1 ? "" : n == total ? " " : ", ");
        if (n > 1 && n == total) snprintf(sep, sizeof sep, " %s ", conj);
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", sep, tfc_dtype_name((tfc_dtype)dt));
    }
    return buf;
}

const char *tfc_backend_dtype_list(const tfc_backend *b, const char *conj) {
    return tfc_dtype_mask_list(b->float_dtypes, conj);
}

tfc_status tfc_backend_missing(const char *fn, const tfc_backend *b, int32_t device, const char *entry, int32_t dtype) {
    if (dtype < 0)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %s is not implemented on %s:%d", fn, entry, b->name, (int)device);
    return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %s is not implemented on %s:%d for %s", fn, entry, b->name, (int)device,
                   tfc_dtype_name((tfc_dtype)dtype));
}

tfc_status tfc_backend_done(const char *fn, const tfc_backend *b, int32_t device, const char *entry, tfc_status s) {
    if (s == TFC_OK) return TFC_OK;
    char msg[800];
    snprintf(msg, sizeof msg, "%s", b->last_error ? b->last_error() : "");
    if (strcmp(b->name, "cpu") == 0) return tfc_err(s, "%s: %s", fn, msg);
    return tfc_err(s, "%s: %s:%d %s: %s", fn, b->name, (int)device, entry, msg);
}

int tfc_gemm_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans, int64_t *ld) {
    if (cs == 1 || cols == 1) {
        int64_t l = rows == 1 ? (cols > rs ? cols : rs) : rs;
        if (l >= (cols > 1 ? cols : 1)) {
            *trans = 0;
            *ld = l < 1 ? 1 : l;
            return 1;
        }
    }
    if (rs == 1 || rows == 1) {
        int64_t l = cols == 1 ? (rows > cs ? rows : cs) : cs;
        if (l >= (rows > 1 ? rows : 1)) {
            *trans = 1;
            *ld = l < 1 ? 1 : l;
            return 1;
        }
    }
    return 0;
}
