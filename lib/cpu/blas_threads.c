/*
 * One thread pool for the whole step: OpenBLAS runs single-threaded inside
 * libtfcore's own OpenMP threads.
 *
 * Why: OpenBLAS (pthreads build, Debian's) keeps its own worker threads,
 * which spin for a while after every GEMM; our OpenMP kernels keep theirs,
 * which spin after every parallel region. A training step alternates GEMMs
 * with elementwise kernels dozens of times, so with both pools at 2 threads
 * on 2 cores each pool's spinners steal the other's cores: char-tiny ran
 * 6,100 tokens/s with both at 2 threads against 10,500 with both at 1 and
 * 15,000 with either one alone at 2 (docs/PERFORMANCE.md). So at load time
 * libtfcore sets OpenBLAS to one thread and tfc_cpu_gemm_matrix splits each large
 * product over its OpenMP threads itself (gemm.c).
 *
 * Policy:
 *   - TFC_BLAS_THREADS=keep leaves OpenBLAS's threading alone (and GEMMs are
 *     then not split by us);
 *   - otherwise, when the library exports openblas_set_num_threads, OpenBLAS
 *     gets one thread. Like the kernel-family choice in blas_coretype.c this
 *     is OpenBLAS's process-wide state: other users of the same OpenBLAS in
 *     the process (numpy, PyTorch) see one thread too, which is why it can
 *     be turned off.
 * Another BLAS (no such symbol) is left as it is and GEMMs are not split.
 */
#include "cpu/gemm.h"
#include "tfc_config.h"

#if TFC_HAVE_BLAS && defined(__linux__) && defined(__GNUC__)
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int g_owned;

__attribute__((constructor)) static void tfc_blas_take_threads(void) {
    void (*set_threads)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    if (!set_threads) return;
    const char *req = getenv("TFC_BLAS_THREADS");
    if (req && !strcasecmp(req, "keep")) return;
    set_threads(1);
    g_owned = 1;
}

int tfc_cpu_blas_threads_owned(void) { return g_owned; }
#else
int tfc_cpu_blas_threads_owned(void) { return 0; }
#endif
