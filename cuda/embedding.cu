/*
 * Embedding lookup and its deterministic backward, weight [V, C], ids [N]:
 *   out[r, :] = weight[ids[r], :]
 *   dweight[v, :] (+)= sum_{r : ids[r] = v} dout[r, :]   (in increasing r)
 * The backward sorts (id, r) pairs with a stable radix sort (CUB), so each
 * vocabulary row's contributions sit together in increasing r; one block
 * per run of equal ids then adds them in that order, starting from the
 * existing value when accumulating: the same additions, in the same order,
 * as a sequential CPU loop, with no atomics.
 * An id outside [0, V) is an error; finding it costs one stream sync.
 */
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"
#include "entries.h"

template <class T, class I>
__global__ void embedding_forward_kernel(const T *weight, const I *ids, T *out, size_t N, size_t V, size_t C,
                                         unsigned long long *bad_row) {
    size_t total = N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / C, col = i % C;
        long long id = (long long)ids[r];
        if (id < 0 || id >= (long long)V) {
            out[i] = tfcu_from_f<T>(0.0f);
            if (col == 0) atomicMin(bad_row, (unsigned long long)r);
        } else {
            out[i] = weight[(size_t)id * C + col];
        }
    }
}

/* keys[r] = ids[r] (V for a bad id, which sorts last and is skipped), vals[r] = r. */
template <class I>
__global__ void embedding_keys_kernel(const I *ids, int32_t *keys, int32_t *vals, size_t N, size_t V,
                                      unsigned long long *bad_row) {
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < N; r += (size_t)gridDim.x * blockDim.x) {
        long long id = (long long)ids[r];
        bool ok = id >= 0 && id < (long long)V;
        if (!ok) atomicMin(bad_row, (unsigned long long)r);
        keys[r] = ok ? (int32_t)id : (int32_t)V;
        vals[r] = (int32_t)r;
    }
}

/* Block i handles the run of equal keys starting at sorted position i (if one starts there). */
template <class T>
__global__ void embedding_backward_kernel(const T *dout, const int32_t *keys, const int32_t *vals, T *dweight, size_t N,
                                          size_t V, size_t C, bool acc) {
    for (size_t i = blockIdx.x; i < N; i += gridDim.x) {
        int32_t key = keys[i];
        if ((i > 0 && keys[i - 1] == key) || (size_t)key >= V) continue;
        for (size_t col = threadIdx.x; col < C; col += blockDim.x) {
            float s = acc ? tfcu_load(dweight, (size_t)key * C + col) : 0.0f;
            for (size_t j = i; j < N && keys[j] == key; j++) s += tfcu_load(dout, (size_t)vals[j] * C + col);
            dweight[(size_t)key * C + col] = tfcu_from_f<T>(s);
        }
    }
}

/* Wait for the stream and turn a recorded bad id into an error. */
template <class I>
static tfc_status report_bad_id(tfcu_ctx *c, const char *fn, const unsigned long long *bad, const I *ids, size_t V) {
    unsigned long long row = ~0ull;
    TFCU_TRY(tfcu_cuda(cudaMemcpyAsync(&row, bad, 8, cudaMemcpyDeviceToHost, c->stream), fn, "cudaMemcpyAsync"));
    TFCU_TRY(tfcu_cuda(cudaStreamSynchronize(c->stream), fn, "cudaStreamSynchronize"));
    if (row == ~0ull) return TFC_OK;
    I id = 0;
    TFCU_TRY(tfcu_cuda(cudaMemcpy(&id, ids + row, sizeof(I), cudaMemcpyDeviceToHost), fn, "cudaMemcpy"));
    return tfcu_err(TFC_ERR_INVALID_ARG, "%s: ids[%llu] is %lld, outside [0, %zu)", fn, row, (long long)id, V);
}

tfc_status tfcu_embedding_forward(const tfc_embedding_problem *p) {
    const char *fn = "tfcu_embedding_forward";
    const size_t N = (size_t)p->n, V = (size_t)p->v, C = (size_t)p->c;
    const void *weight = p->table, *ids = p->ids;
    void *out = p->out;
    /* ids the library range-checked on the host: the kernel still skips bad ones, nobody waits for its verdict */
    const bool checked = ((uint32_t)p->accumulate & TFC_IDS_CHECKED) != 0;
    tfcu_ctx *c;
    if (!N || !C) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        return tfcu_dispatch_index(fn, p->index_dtype, [&](auto it) -> tfc_status {
            typedef decltype(it) I;
            unsigned long long *bad;
            TFCU_TRY(tfcu_scratch(c, fn, 8, (void **)&bad));
            tfc_status s = tfcu_cuda(cudaMemsetAsync(bad, 0xff, 8, c->stream), fn, "cudaMemsetAsync");
            if (s == TFC_OK) {
                embedding_forward_kernel<T, I><<<tfcu_blocks(c, N * C, 256), 256, 0, c->stream>>>(
                    (const T *)weight, (const I *)ids, (T *)out, N, V, C, bad);
                s = TFCU_LAUNCHED(fn, "embedding_forward_kernel");
            }
            if (s == TFC_OK && !checked) s = report_bad_id(c, fn, bad, (const I *)ids, V);
            tfcu_scratch_free(c, bad);
            return s;
        });
    });
}

tfc_status tfcu_embedding_backward(const tfc_embedding_problem *p) {
    const char *fn = "tfcu_embedding_backward";
    const size_t N = (size_t)p->n, V = (size_t)p->v, C = (size_t)p->c;
    const void *dout = p->dout, *ids = p->ids;
    void *dweight = p->dtable;
    const bool acc = (p->accumulate & 1) != 0, checked = ((uint32_t)p->accumulate & TFC_IDS_CHECKED) != 0;
    tfcu_ctx *c;
    if (!V || !C) return TFC_OK;
    if (N > (size_t)INT32_MAX || V >= (size_t)INT32_MAX) /* the radix sort's int keys and counts */
        return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: N %zu or V %zu is 2^31 or more", fn, N, V);
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        return tfcu_dispatch_index(fn, p->index_dtype, [&](auto it) -> tfc_status {
            typedef decltype(it) I;
            size_t wbytes = V * C * sizeof(T);
            if (!acc) TFCU_TRY(tfcu_cuda(cudaMemsetAsync(dweight, 0, wbytes, c->stream), fn, "cudaMemsetAsync"));
            if (!N) return TFC_OK;
            int end_bit = 1;
            while (end_bit < 31 && ((size_t)1 << end_bit) <= V) end_bit++; /* keys go up to V */
            size_t temp_bytes = 0;
            cudaError_t e =
                cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, (const int32_t *)NULL, (int32_t *)NULL,
                                                (const int32_t *)NULL, (int32_t *)NULL, (int)N, 0, end_bit, c->stream);
            TFCU_TRY(tfcu_cuda(e, fn, "cub::DeviceRadixSort::SortPairs (size query)"));
            size_t keys_bytes = 4 * N * sizeof(int32_t);
            char *scratch;
            TFCU_TRY(tfcu_scratch(c, fn, 8 + keys_bytes + temp_bytes, (void **)&scratch));
            unsigned long long *bad = (unsigned long long *)scratch;
            int32_t *keys_in = (int32_t *)(scratch + 8), *vals_in = keys_in + N, *keys = vals_in + N, *vals = keys + N;
            void *temp = scratch + 8 + keys_bytes;
            tfc_status s = tfcu_cuda(cudaMemsetAsync(bad, 0xff, 8, c->stream), fn, "cudaMemsetAsync");
            if (s == TFC_OK) {
                embedding_keys_kernel<I>
                    <<<tfcu_blocks(c, N, 256), 256, 0, c->stream>>>((const I *)ids, keys_in, vals_in, N, V, bad);
                s = TFCU_LAUNCHED(fn, "embedding_keys_kernel");
            }
            if (s == TFC_OK)
                s = tfcu_cuda(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys, vals_in, vals, (int)N, 0,
                                                              end_bit, c->stream),
                              fn, "cub::DeviceRadixSort::SortPairs");
            if (s == TFC_OK) {
                unsigned threads = C < 256 ? (unsigned)((C + 31) / 32 * 32) : 256u;
                unsigned blocks = N < 65535u * 16 ? (unsigned)N : 65535u * 16;
                embedding_backward_kernel<T>
                    <<<blocks, threads, 0, c->stream>>>((const T *)dout, keys, vals, (T *)dweight, N, V, C, acc);
                s = TFCU_LAUNCHED(fn, "embedding_backward_kernel");
            }
            if (s == TFC_OK && !checked) s = report_bad_id(c, fn, bad, (const I *)ids, V);
            tfcu_scratch_free(c, scratch);
            return s;
        });
    });
}
