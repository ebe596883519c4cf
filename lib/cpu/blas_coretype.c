/*
 * Choosing OpenBLAS's kernel family for this CPU, once, when libtfcore loads.
 *
 * Why: a DYNAMIC_ARCH OpenBLAS (Debian's 0.3.21) picks its kernels from a
 * CPUID table. A CPU newer than the table (or a hypervisor that hides the
 * model) falls back to an old family: on this project's Xeon it picks
 * "Prescott" (SSE3) and SGEMM runs at 7-9 GFLOP/s, against 30-170 with the
 * SkylakeX kernels the CPU supports. The only switch OpenBLAS offers is the
 * OPENBLAS_CORETYPE environment variable, read by gotoblas_dynamic_init()
 * from OpenBLAS's own constructor — before our code can set it. The same
 * library exports gotoblas_dynamic_quit()/gotoblas_dynamic_init(), so we
 * re-run its selection with OPENBLAS_CORETYPE set for the duration of the
 * call: the library's own code chooses and initialises the kernel table.
 *
 * Policy (measured here, docs/PERFORMANCE.md):
 *   - the user's OPENBLAS_CORETYPE is always respected (we do nothing);
 *   - TFC_BLAS_CORETYPE=keep leaves OpenBLAS's choice; TFC_BLAS_CORETYPE=Name
 *     forces that family;
 *   - otherwise, when OpenBLAS picked a family older than what the CPU runs
 *     (Intel with AVX-512 F/BW/DQ/VL -> SkylakeX, other AVX2+FMA -> Haswell,
 *     AMD with AVX2 -> Zen), we switch to that family.
 * A non-DYNAMIC_ARCH OpenBLAS or another BLAS lacks the symbols: nothing
 * happens. The switch is process-wide (it is OpenBLAS's global state), which
 * is why it runs at load time, before any GEMM can be in flight, and why it
 * can be turned off.
 */
#include "cpu/gemm.h"
#include "tfc_config.h"

#if TFC_HAVE_BLAS && defined(__linux__) && (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char g_before[32], g_after[32];

static const char *wanted_family(void) {
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!avx2) return NULL;
    if (__builtin_cpu_is("amd")) return "Zen";
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    return "Haswell";
}

/* Families at least as good as `want` for this CPU: left alone. */
static int good_enough(const char *cur, const char *want) {
    static const char *const avx512_families[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    if (!strcasecmp(cur, want)) return 1;
    if (!strcmp(want, "SkylakeX") || !strcmp(want, "Zen"))
        for (size_t i = 0; i < sizeof avx512_families / sizeof *avx512_families; i++)
            if (!strcasecmp(cur, avx512_families[i])) return 1;
    return 0;
}

static void copy_name(char *dst, const char *src) { snprintf(dst, 32, "%s", src ? src : ""); }

__attribute__((constructor)) static void tfc_blas_choose_coretype(void) {
    char *(*corename)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_corename");
    void (*dyn_init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    void (*dyn_quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
    if (!corename) return;
    copy_name(g_before, corename());
    copy_name(g_after, g_before);
    if (!dyn_init || !dyn_quit || getenv("OPENBLAS_CORETYPE")) return;
    const char *req = getenv("TFC_BLAS_CORETYPE");
    const char *want = req && *req ? req : wanted_family();
    if (!want || !strcasecmp(want, "keep")) return;
    if (!req && good_enough(g_before, want)) return;
    if (!strcasecmp(g_before, want)) return;
    /* gotoblas_dynamic_init falls back to its own CPUID pick on an unknown
     * name, so a typo in TFC_BLAS_CORETYPE degrades to the default. */
    if (setenv("OPENBLAS_CORETYPE", want, 0) != 0) return;
    dyn_quit();
    dyn_init();
    unsetenv("OPENBLAS_CORETYPE");
    copy_name(g_after, corename());
}

const char *tfc_cpu_blas_coretype(int before) { return before ? g_before : g_after; }
#else
const char *tfc_cpu_blas_coretype(int before) {
    (void)before;
    return "";
}
#endif
