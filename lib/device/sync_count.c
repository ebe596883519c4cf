/* The count of host waits on a device (sync_count.h) and its optional log. */
#include "device/sync_count.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_llong g_syncs;

/* Whether TFC_CUDA_SYNC_LOG asks for a line per wait; read once per call, it is a debugging aid. */
static int log_on(void) {
    const char *e = getenv("TFC_CUDA_SYNC_LOG");
    return e && *e && !(e[0] == '0' && !e[1]);
}

void tfc_device_note_sync(tfc_device_type dev, int32_t index, const char *what) {
    if (dev == TFC_DEVICE_CPU) return;
    long long n = atomic_fetch_add(&g_syncs, 1) + 1;
    if (log_on()) fprintf(stderr, "tfcore: host waits on cuda:%d (sync %lld): %s\n", (int)index, n, what);
}

int64_t tfc_device_sync_count(void) { return (int64_t)atomic_load(&g_syncs); }
