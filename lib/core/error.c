/* Thread-local last-error message and static status names. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TFC_ERROR_CAP 1024

static _Thread_local char tl_message[TFC_ERROR_CAP];

tfc_status tfc_err(tfc_status s, const char *fmt, ...) {
    /* Formatted aside first: callers may pass tfc_last_error() itself as an argument. */
    char msg[TFC_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(tl_message, msg, sizeof tl_message);
    return s;
}

tfc_status tfc_err_in(const char *fn, tfc_status s) {
    if (s == TFC_OK || !fn) return s;
    size_t n = strlen(fn);
    if (strncmp(tl_message, fn, n) == 0 && tl_message[n] == ':') return s;
    return tfc_err(s, "%s: %s", fn, tl_message[0] ? tl_message : tfc_status_name(s));
}

const char *tfc_fmt_dims(const int64_t *dims, int32_t ndim) {
    static _Thread_local char ring[8][160];
    static _Thread_local unsigned next;
    char *buf = ring[next++ % 8];
    size_t n = 0, cap = sizeof ring[0];
    buf[n++] = '[';
    for (int32_t i = 0; i < ndim && n < cap - 24; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (ndim > 0 && dims == NULL) n += (size_t)snprintf(buf + n, cap - n, "?");
    snprintf(buf + n, cap - n, "]");
    return buf;
}

TFC_API const char *tfc_last_error(void) { return tl_message; }

TFC_API void tfc_clear_error(void) { tl_message[0] = '\0'; }

TFC_API const char *tfc_status_name(tfc_status s) {
    switch (s) {
    case TFC_OK: return "TFC_OK";
    case TFC_ERR_INVALID_ARG: return "TFC_ERR_INVALID_ARG";
    case TFC_ERR_SHAPE: return "TFC_ERR_SHAPE";
    case TFC_ERR_DTYPE: return "TFC_ERR_DTYPE";
    case TFC_ERR_DEVICE: return "TFC_ERR_DEVICE";
    case TFC_ERR_OOM: return "TFC_ERR_OOM";
    case TFC_ERR_IO: return "TFC_ERR_IO";
    case TFC_ERR_FORMAT: return "TFC_ERR_FORMAT";
    case TFC_ERR_UNSUPPORTED: return "TFC_ERR_UNSUPPORTED";
    case TFC_ERR_BUFFER_TOO_SMALL: return "TFC_ERR_BUFFER_TOO_SMALL";
    case TFC_ERR_CANCELLED: return "TFC_ERR_CANCELLED";
    case TFC_ERR_VERSION: return "TFC_ERR_VERSION";
    case TFC_ERR_INTERNAL: return "TFC_ERR_INTERNAL";
    case TFC_ERR_NONFINITE: return "TFC_ERR_NONFINITE";
    default: return "TFC_ERR_UNKNOWN";
    }
}
