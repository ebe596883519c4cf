/* Version numbers and the build description. */
#include "tfc_config.h"
#include "tfcore/core.h"

TFC_API int32_t tfc_version(void) { return TFC_VERSION_MAJOR * 10000 + TFC_VERSION_MINOR * 100 + TFC_VERSION_PATCH; }

TFC_API const char *tfc_version_string(void) { return TFC_VERSION_STRING; }

#define TFC_STR_(x) #x
#define TFC_STR(x) TFC_STR_(x)

TFC_API const char *tfc_build_info(void) {
    return "libtfcore " TFC_VERSION_STRING "; backends: cpu"
#if TFC_HAVE_CUDA_MODULE
           ", cuda (module " TFC_CUDA_MODULE_NAME ", sm " TFC_CUDA_ARCHS ", NCCL collectives when libnccl.so.2 loads)"
#endif
           "; processes: "
#if TFC_HAVE_MPI_MODULE
           "mpi (module " TFC_MPI_MODULE_NAME ")"
#else
           "one (built without the MPI module)"
#endif
           "; blas: "
#if TFC_HAVE_BLAS
           "openblas"
#else
           "none (blocked C GEMM)"
#endif
           "; openmp: "
#if TFC_HAVE_OPENMP
           "yes"
#else
           "no"
#endif
#if defined(__AVX2__) || defined(TFC_HAVE_AVX2_DISPATCH)
           "; simd: avx2+fma"
#endif
           "; compiler: " __VERSION__;
}
