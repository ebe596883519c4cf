/* The process-wide CPU thread count used by OpenMP kernels. */
#include "core/error.h"
#include "tfc_config.h"

#if TFC_HAVE_OPENMP
#include <omp.h>
#endif

#include <unistd.h>

static int32_t default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int32_t)n : 1;
}

TFC_API tfc_status tfc_set_num_threads(int32_t n) {
    if (n < 0) return tfc_err(TFC_ERR_INVALID_ARG, "tfc_set_num_threads: n is %d; 0 restores the default", (int)n);
    if (n == 0) n = default_threads();
    if (n > 4096) return tfc_err(TFC_ERR_INVALID_ARG, "tfc_set_num_threads: n is %d, at most 4096", (int)n);
#if TFC_HAVE_OPENMP
    omp_set_num_threads(n);
#endif
    return TFC_OK;
}

TFC_API int32_t tfc_get_num_threads(void) {
#if TFC_HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
