/* Run-time choice between the portable and the AVX2+FMA f32 kernels. */
#include "cpu/kernels.h"

int tfc_cpu_avx2_disabled;

int tfc_cpu_use_avx2(void) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    if (tfc_cpu_avx2_disabled) return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}
