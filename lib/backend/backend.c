/*
 * The table's shared code: messages of a missing or failed entry, the
 * module version check, and the answers to the questions ops ask the table
 * (backend.h, "asking the table").
 */
#include "backend/backend.h"

#include <stdint.h>
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
    return tfc_dtype_mask_list(b->caps.float_dtypes, conj);
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

tfc_status tfc_backend_check_module(tfc_backend_module_get_fn get, const char *path, const tfc_backend **out, char *why,
                                    size_t n) {
    if (!get) {
        snprintf(why, n, "the CUDA module %s exports no tfc_backend_module_get", path);
        return TFC_ERR_DEVICE;
    }
    const tfc_backend *b = get(TFC_BACKEND_ABI);
    /* A module answers only its own version: ask for the earlier ones (and a few later) to name it. */
    for (uint32_t v = 1; !b && v <= TFC_BACKEND_ABI + 16; v++)
        if (v != TFC_BACKEND_ABI) b = get(v);
    if (!b) {
        snprintf(why, n, "the CUDA module %s speaks no backend ABI from 1 to %d; this libtfcore speaks %d", path,
                 TFC_BACKEND_ABI + 16, TFC_BACKEND_ABI);
        return TFC_ERR_DEVICE;
    }
    if (b->abi_version != TFC_BACKEND_ABI || b->struct_size != sizeof(tfc_backend)) {
        snprintf(why, n,
                 "the CUDA module %s speaks backend ABI %u (a table of %u bytes), this libtfcore ABI %d (%zu bytes): "
                 "build both from one source tree",
                 path, (unsigned)b->abi_version, (unsigned)b->struct_size, TFC_BACKEND_ABI, sizeof(tfc_backend));
        return TFC_ERR_DEVICE;
    }
    *out = b;
    return TFC_OK;
}

int32_t tfc_backend_bf16_operands(const tfc_backend *b, int64_t m) {
    const int64_t w = b->caps.gemm_bf16_widen_rows;
    if (w > 0 && m >= w) return TFC_DTYPE_F32;
    return tfc_backend_gemm_takes(b, TFC_DTYPE_BF16) ? TFC_DTYPE_BF16 : -1;
}

tfc_dtype tfc_backend_autocast_dtype(const tfc_backend *b, tfc_dtype dt) {
    return dt == TFC_DTYPE_F32 && b->caps.autocast_attention == TFC_DTYPE_BF16 ? TFC_DTYPE_BF16 : dt;
}

int64_t tfc_backend_pad_cols(const tfc_backend *b, int64_t n) {
    const int64_t q = b->caps.gemm_pad_cols;
    return q > 1 ? (n + q - 1) / q * q : n;
}
