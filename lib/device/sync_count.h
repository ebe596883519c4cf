/*
 * Counting the host's waits on a device (issue #19: no host syncs in a
 * training step). Every time the library makes the host wait for a
 * device's queue — a device→host copy, or an entry that returns a value in
 * host memory or checks data on the device before it returns — it notes it
 * here, so a test can prove how many a step costs and a run can list them
 * (TFC_CUDA_SYNC_LOG=1 prints each one to stderr with what caused it).
 * CPU memory and CPU entries never count: nothing waits there.
 */
#ifndef TFC_DEVICE_SYNC_COUNT_H
#define TFC_DEVICE_SYNC_COUNT_H

#include <stdint.h>

#include "tfcore/core.h"

/*
 * One wait of the host on device (dev, index), caused by `what` (a short
 * phrase naming the function, for the log). Nothing for TFC_DEVICE_CPU.
 * Thread-safe (an atomic counter).
 */
void tfc_device_note_sync(tfc_device_type dev, int32_t index, const char *what);

/* The waits noted since the process started (tests take differences). Thread-safe. */
int64_t tfc_device_sync_count(void);

#endif
