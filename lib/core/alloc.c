/*
 * Size classes: 64-byte steps up to 1 KiB, then four classes per power of
 * two (at most 25% slack). Each class keeps a LIFO free list behind one
 * mutex; blocks above TFC_CACHE_MAX_BLOCK go straight to the OS because
 * holding them would pin too much memory for little gain.
 */
#include "core/alloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/tensor.h"

#define TFC_NUM_CLASSES 256
#define TFC_CACHE_MAX_BLOCK ((size_t)1 << 34)

typedef struct free_block {
    struct free_block *next;
} free_block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *g_free[TFC_NUM_CLASSES];
static uint64_t g_os_allocs, g_os_bytes, g_cached_bytes, g_live_bytes, g_peak_bytes;

/* Class index and the rounded size of that class. */
static int size_class(size_t n, size_t *rounded) {
    if (n <= 1024) {
        size_t k = (n + 63) / 64;
        if (k == 0) k = 1;
        *rounded = k * 64;
        return (int)k - 1; /* 0..15 */
    }
    int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
    size_t base = (size_t)1 << p, quarter = base / 4;
    size_t q = (n - base + quarter - 1) / quarter; /* 1..4 */
    *rounded = base + q * quarter;
    return 16 + (p - 10) * 4 + (int)q - 1;
}

void *tfc_host_alloc(size_t nbytes) {
    if (nbytes == 0) nbytes = 1;
    if (nbytes > ((size_t)1 << 46)) return NULL; /* beyond any real machine */
    size_t rounded;
    int c = size_class(nbytes, &rounded);
    int cached = c < TFC_NUM_CLASSES && rounded <= TFC_CACHE_MAX_BLOCK;
    void *p = NULL;
    pthread_mutex_lock(&g_lock);
    if (cached && g_free[c]) {
        p = g_free[c];
        g_free[c] = g_free[c]->next;
        g_cached_bytes -= rounded;
    }
    if (p) {
        g_live_bytes += rounded;
        if (g_live_bytes > g_peak_bytes) g_peak_bytes = g_live_bytes;
    }
    pthread_mutex_unlock(&g_lock);
    if (p) return p;
    p = aligned_alloc(TFC_ALIGN, cached ? rounded : (nbytes + TFC_ALIGN - 1) / TFC_ALIGN * TFC_ALIGN);
    if (!p) return NULL;
    pthread_mutex_lock(&g_lock);
    g_os_allocs++;
    g_os_bytes += rounded;
    g_live_bytes += rounded;
    if (g_live_bytes > g_peak_bytes) g_peak_bytes = g_live_bytes;
    pthread_mutex_unlock(&g_lock);
    return p;
}

void *tfc_host_calloc(size_t nbytes) {
    void *p = tfc_host_alloc(nbytes);
    if (p) memset(p, 0, nbytes);
    return p;
}

void tfc_host_free(void *p, size_t nbytes) {
    if (!p) return;
    if (nbytes == 0) nbytes = 1;
    size_t rounded;
    int c = size_class(nbytes, &rounded);
    int cached = c < TFC_NUM_CLASSES && rounded <= TFC_CACHE_MAX_BLOCK;
    pthread_mutex_lock(&g_lock);
    g_live_bytes -= rounded;
    if (cached) {
        free_block *b = p;
        b->next = g_free[c];
        g_free[c] = b;
        g_cached_bytes += rounded;
        p = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    free(p);
}

TFC_API void tfc_memory_stats(uint64_t *os_allocs, uint64_t *live_bytes, uint64_t *cached_bytes, uint64_t *peak_bytes) {
    pthread_mutex_lock(&g_lock);
    if (os_allocs) *os_allocs = g_os_allocs;
    if (live_bytes) *live_bytes = g_live_bytes;
    if (cached_bytes) *cached_bytes = g_cached_bytes;
    if (peak_bytes) *peak_bytes = g_peak_bytes;
    pthread_mutex_unlock(&g_lock);
}

TFC_API void tfc_memory_empty_cache(void) {
    pthread_mutex_lock(&g_lock);
    for (int c = 0; c < TFC_NUM_CLASSES; c++) {
        while (g_free[c]) {
            free_block *b = g_free[c];
            g_free[c] = b->next;
            free(b);
        }
    }
    g_cached_bytes = 0;
    pthread_mutex_unlock(&g_lock);
}

/* Cached blocks are still reachable memory; hand them back at exit so leak
 * checkers see a clean process. */
__attribute__((destructor)) static void release_cache_at_exit(void) { tfc_memory_empty_cache(); }

TFC_API void tfc_free(void *p) { free(p); }
