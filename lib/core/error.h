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
/* As TFC_CHECK_NOT_NULL for a variable whose name differs from the header's (name). */
#define TFC_CHECK_NOT_NULL_AS(fn, arg, name)                                                \
    do {                                                                                    \
        if ((arg) == NULL) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, name); \
    } while (0)

#endif

/* Set this thread's message and return s (so `return tfc_err(...)` reads well). */
tfc_status tfc_err(tfc_status s, const char *fmt, ...) TFC_PRINTF(2, 3);

/*
 * Name the public function fn in the failure s that a call it made returned
 * (an internal helper's message, or another public function's): the message
 * becomes "fn: <message>" unless it already starts with "fn:". Returns s
 * (TFC_OK untouched), so `return tfc_err_in(fn, s);` and
 * TFC_TRY_IN(fn, expr) read well. fn NULL leaves the message as it is.
 */
tfc_status tfc_err_in(const char *fn, tfc_status s);

/*
 * Format dims as "[4,8]" into a thread-local ring of buffers: valid until
 * 8 more calls on this thread, enough for one error message.
 */
const char *tfc_fmt_dims(const int64_t *dims, int32_t ndim);

/*
 * The public function a failure is reported under. Every public entry point
 * and every helper that reports for one has a `const char *fn` (a local or
 * a parameter: the public function's name), which hides this file-scope
 * NULL; TFC_TRY reads whichever `fn` is in scope, so a failure an internal
 * helper reported without a function name (an allocation of a tensor
 * handle, say) still reaches the caller as "fn: ...", and where no `fn` is
 * in scope it passes unchanged.
 */
static const char *const fn = NULL;

/* Propagate a failing status, its message named for fn (tfc_err_in; unchanged where fn is NULL). */
#define TFC_TRY(expr)                                                \
    do {                                                             \
        tfc_status tfc_try_s_ = (expr);                              \
        if (tfc_try_s_ != TFC_OK) return tfc_err_in(fn, tfc_try_s_); \
    } while (0)

/* As TFC_TRY, naming fn in the message of a failure (tfc_err_in). */
#define TFC_TRY_IN(fn, expr)                                         \
    do {                                                             \
        tfc_status tfc_try_s_ = (expr);                              \
        if (tfc_try_s_ != TFC_OK) return tfc_err_in(fn, tfc_try_s_); \
    } while (0)

/* Reject a NULL pointer argument with a message naming fn and arg. */
#define TFC_CHECK_NOT_NULL(fn, arg)                                                         \
    do {                                                                                    \
        if ((arg) == NULL) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, #arg); \
    } while (0)

/* As TFC_CHECK_NOT_NULL for a variable whose name differs from the header's (name). */
#define TFC_CHECK_NOT_NULL_AS(fn, arg, name)                                                \
    do {                                                                                    \
        if ((arg) == NULL) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, name); \
    } while (0)

#endif
