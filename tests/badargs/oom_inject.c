/*
 * Allocation-failure injection for the bad-argument test's OOM mode: this
 * executable's malloc/calloc/realloc/aligned_alloc/posix_memalign take
 * precedence over libc's (and ASan's) for every shared object, and while a
 * case is armed (fx_arm), the n-th allocation that libtfcore itself asks for
 * returns NULL. Allocations made by other libraries (libc internals,
 * OpenMP, PCRE2, BLAS) are never failed: their own failure behaviour is not
 * this library's. The real allocator is the next definition (RTLD_NEXT):
 * libc's, or ASan's in the sanitizer build, so ASan still sees every block.
 * This file is built without sanitizers (meson.build): ld.so calls malloc
 * before ASan's runtime is initialised.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fixtures.h"

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);

static int armed, injected;
static long fail_at, count;
static void *tfcore_base;

/* dlsym may itself calloc before real_calloc is known: serve that from here. */
static _Alignas(16) char boot[4096];
static size_t boot_used;
static int resolving;

static void resolve(void) {
    if (real_malloc || resolving) return;
    resolving = 1;
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    resolving = 0;
}

static int fail_now(void *caller) {
    if (!armed) return 0;
    Dl_info info;
    if (!dladdr(caller, &info) || info.dli_fbase != tfcore_base) return 0;
    if (++count != fail_at) return 0;
    injected = 1;
    return 1;
}

static void *boot_alloc(size_t n) {
    size_t bytes = (n + 15) & ~(size_t)15;
    if (boot_used + bytes > sizeof boot) return NULL;
    void *p = boot + boot_used;
    boot_used += bytes;
    memset(p, 0, bytes);
    return p;
}

void *malloc(size_t n) {
    resolve();
    if (!real_malloc) return boot_alloc(n); /* inside dlsym */
    if (fail_now(__builtin_return_address(0))) return NULL;
    return real_malloc(n);
}

void *calloc(size_t k, size_t n) {
    resolve();
    if (!real_calloc) return boot_alloc(k * n); /* inside dlsym */
    if (fail_now(__builtin_return_address(0))) return NULL;
    return real_calloc(k, n);
}

void *realloc(void *p, size_t n) {
    resolve();
    if (fail_now(__builtin_return_address(0))) return NULL;
    return real_realloc(p, n);
}

void *aligned_alloc(size_t a, size_t n) {
    resolve();
    if (fail_now(__builtin_return_address(0))) return NULL;
    return real_aligned_alloc(a, n);
}

int posix_memalign(void **out, size_t a, size_t n) {
    resolve();
    if (fail_now(__builtin_return_address(0))) return 12; /* ENOMEM */
    return real_posix_memalign(out, a, n);
}

void fx_oom_set(long n) { fail_at = n; }

void fx_arm(void) {
    if (fail_at <= 0) return;
    if (!tfcore_base) {
        Dl_info info;
        if (dladdr((void *)&tfc_version, &info)) tfcore_base = info.dli_fbase;
    }
    tfc_memory_empty_cache(); /* so the caching allocator asks malloc again */
    count = 0;
    armed = 1;
}

void fx_disarm(void) { armed = 0; }

int fx_oom_injected(void) { return injected; }
