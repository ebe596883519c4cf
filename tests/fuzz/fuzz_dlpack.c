/*
 * Fuzz target: DLPack import. The input describes a DLManagedTensor (or
 * the versioned struct): device, dtype, ndim, shape, strides, byte_offset.
 * The harness computes the span those fields address on its own (128-bit
 * arithmetic) and, when it is small, hands the library a buffer of exactly
 * that size, then reads every element through the imported tensor, so a
 * view the library gets wrong reads outside the buffer and ASan stops it.
 * A span beyond 64 bits must be refused; the deleter runs exactly once
 * when, and only when, the import succeeded.
 */
#include "fuzz_util.h"
#include "tfcore/dlpack.h"

#define MAX_BUF (1 << 20)

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static uint8_t byte(input *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

/* Mostly small values, sometimes any 64-bit value (selector byte decides). */
static int64_t value(input *in) {
    uint8_t sel = byte(in);
    if (sel < 0xE0) return (int64_t)(sel % 9) - (sel >= 0xD0 ? 4 : 0);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | byte(in);
    return (int64_t)v;
}

static int deleted;
/* The producer's side: the buffer and the struct go when the consumer is done. */
static void legacy_deleter(DLManagedTensor *m) {
    deleted++;
    free(m->manager_ctx);
    free(m);
}
static void versioned_deleter(DLManagedTensorVersioned *m) {
    deleted++;
    free(m->manager_ctx);
    free(m);
}

static size_t elem_bytes(DLDataType t) {
    static const uint8_t ok_codes[] = {0, 1, 2, 4, 6};
    for (size_t i = 0; i < sizeof ok_codes; i++)
        if (t.code == ok_codes[i] && t.bits % 8 == 0 && t.bits) return t.bits / 8;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    input in = {data, size};
    uint8_t flags = byte(&in);
    DLTensor dl;
    memset(&dl, 0, sizeof dl);
    int64_t shape[12], strides[12];
    static const int32_t devices[] = {1, 3, 2, 0, -1, 1 << 30};
    static const uint8_t bits[] = {8, 16, 32, 64, 1, 0, 128, 24};
    dl.device.device_type = devices[byte(&in) % 6];
    dl.device.device_id = (int32_t)(byte(&in) % 3);
    dl.dtype.code = byte(&in) % 8;
    dl.dtype.bits = bits[byte(&in) % 8];
    dl.dtype.lanes = (uint16_t)(flags & 0x40 ? byte(&in) : 1);
    dl.ndim = (int32_t)(byte(&in) % 12) - 1;
    for (int i = 0; i < 12; i++) shape[i] = value(&in);
    for (int i = 0; i < 12; i++) strides[i] = value(&in);
    dl.shape = (flags & 0x01) ? NULL : shape;
    dl.strides = (flags & 0x02) ? NULL : strides;
    dl.byte_offset = (flags & 0x04) ? (uint64_t)value(&in) : 0;

    /* The span the fields address, in bytes from data, and the element count. */
    size_t es = elem_bytes(dl.dtype);
    int nd = dl.ndim < 0 ? 0 : dl.ndim > 12 ? 12 : dl.ndim;
    /* Saturating at 2^100 keeps every product and sum inside 128 bits. */
    const __int128 cap = (__int128)1 << 100;
    __int128 numel = 1, lo = 0, hi = 0;
    int invalid = 0;
    for (int i = 0; i < nd; i++) {
        if (shape[i] < 0) invalid = 1; /* must be refused */
        __int128 d = shape[i] < 0 ? 0 : shape[i];
        numel = d && numel > cap / d ? cap : numel * d;
    }
    if (dl.strides) {
        for (int i = 0; i < nd && numel > 0; i++) {
            __int128 ext = (__int128)(shape[i] - 1) * strides[i];
            ext = ext > cap ? cap : ext < -cap ? -cap : ext;
            if (ext < 0)
                lo += ext;
            else
                hi += ext;
        }
    } else {
        hi = numel > 0 ? numel - 1 : 0;
    }
    __int128 need = numel > 0 ? (__int128)dl.byte_offset + (hi + 1) * (__int128)es : (__int128)dl.byte_offset;
    int beyond_64 = invalid || hi * (__int128)es > INT64_MAX || numel > INT64_MAX;
    int small = !beyond_64 && lo == 0 && need <= MAX_BUF;

    void *buf = small ? calloc((size_t)need + 1, 1) : NULL;
    dl.data = small ? buf : (flags & 0x08) ? NULL : (void *)(uintptr_t)0x10000; /* never dereferenced */
    tfc_tensor *t = NULL;
    tfc_status s;
    deleted = 0;
    if (flags & 0x10) {
        DLManagedTensorVersioned *m = calloc(1, sizeof *m);
        m->version.major = (flags & 0x20) ? 2 : 1;
        m->dl_tensor = dl;
        m->manager_ctx = buf;
        m->deleter = versioned_deleter;
        s = tfc_tensor_from_dlpack_versioned(m, &t);
        if (s != TFC_OK) {
            free(m);
            free(buf);
        }
    } else {
        DLManagedTensor *m = calloc(1, sizeof *m);
        m->dl_tensor = dl;
        m->manager_ctx = buf;
        m->deleter = legacy_deleter;
        s = tfc_tensor_from_dlpack(m, &t);
        if (s != TFC_OK) {
            free(m);
            free(buf);
        }
    }
    FUZZ_REQUIRE(deleted == 0);
    if (s != TFC_OK) {
        FUZZ_REQUIRE(t == NULL);
        return 0;
    }
    FUZZ_REQUIRE(!beyond_64); /* a negative dim or a span past 64 bits must have been refused */
    FUZZ_REQUIRE(tfc_tensor_numel(t) == (int64_t)numel);
    if (small && numel * (__int128)es <= MAX_BUF) {
        tfc_tensor *c = NULL;
        FUZZ_REQUIRE(tfc_tensor_clone(t, &c) == TFC_OK); /* reads every element of the view */
        tfc_tensor_release(c);
    }
    tfc_tensor_release(t);
    FUZZ_REQUIRE(deleted == 1);
    return 0;
}
