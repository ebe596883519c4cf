/*
 * Internal error reporting. Every public entry point that fails calls
 * tfc_err() with the status it returns; the message must name the public
 * function, the offending argument and the shapes involved, e.g.
 *   return tfc_err(TFC_ERR_SHAPE, "tfc_matmul: a is %s, b is %s: inner "
 *                  "dimensions %lld and %lld differ", SHAPE(a), SHAPE(b), ...);
 */
#ifndef TFC_CORE_ERROR_H
#define TFC_CORE_ERROR_H

#include "tfcore/core.h"

#if defined(__GNUC__)
#define TFC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TFC_PRINTF(a, b)
#endif

/* Set this thread's message and return s (so `return tfc_err(...)` reads well). */
tfc_status tfc_err(tfc_status s, const char *fmt, ...) TFC_PRINTF(2, 3);

/*
 * Format dims as "[4,8]" into a thread-local ring of buffers: valid until
 * 8 more calls on this thread, enough for one error message.
 */
const char *tfc_fmt_dims(const int64_t *dims, int32_t ndim);

/* Propagate a failing status unchanged (message already set). */
#define TFC_TRY(expr)                                \
    do {                                             \
        tfc_status tfc_try_s_ = (expr);              \
        if (tfc_try_s_ != TFC_OK) return tfc_try_s_; \
    } while (0)

/* Reject a NULL pointer argument with a message naming fn and arg. */
#define TFC_CHECK_NOT_NULL(fn, arg)                                                         \
    do {                                                                                    \
        if ((arg) == NULL) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, #arg); \
    } while (0)

#endif
