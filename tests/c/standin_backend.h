/*
 * A stand-in for the CUDA backend in tests of the dispatch itself: the
 * CPU's own table under the name "cuda", installed for device type CUDA.
 * Tensors created on "cuda:0" then live in host memory and every op on
 * them runs through this table, so a test can show that the table alone
 * decides where an op runs (and what a missing entry does) on any machine,
 * GPU or not. It tests the dispatch, never CUDA: the device check
 * (tests/cuda) runs the real module.
 */
#ifndef TFC_TEST_STANDIN_BACKEND_H
#define TFC_TEST_STANDIN_BACKEND_H

#include "cpu/kernels.h"
#include "device/device.h"

static tfc_backend tfc_standin;

/* Install the stand-in (a fresh copy of the CPU table each call) and return it for editing. */
static inline tfc_backend *standin_install(void) {
    tfc_standin = *tfc_cpu_backend_table();
    tfc_standin.name = "cuda";
    tfc_device_override_backend(TFC_DEVICE_CUDA, &tfc_standin);
    return &tfc_standin;
}

/* The real CUDA backend again (after every stand-in tensor is released). */
static inline void standin_remove(void) { tfc_device_override_backend(TFC_DEVICE_CUDA, NULL); }

#endif
