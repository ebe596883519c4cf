/*
 * Sums over the trailing dims of a strided view in = [kept..., reduced...]
 * (the backend's reduce entry; the other reductions are the CPU's only):
 *   out[o] (+)= scale · Σ_k in[o, k]        o over the kept dims, contiguous
 * f32 accumulation in an order fixed by the shape alone (deterministic:
 * the same bits on every run and every device, no float atomics).
 *   column sums (the kept dims merge into one unit-stride run, the reduced
 *   dims into one stride: a bias gradient, a sum over the batch): a
 *   row-chunked two-pass reduction, colsum_* below, which is also the
 *   backend's bias_grad (db [n] (+)= column sums of dy [rows, n]);
 *   few other outputs: one block per output, a block reduction over k;
 *   many other outputs: one thread per output walking k.
 */
#include "common.cuh"
#include "entries.h"
#include "strided.cuh"

template <class T>
__global__ void sum_block_kernel(tfc_sview in, int32_t nkeep, T *out, int64_t nout, int64_t n, float scale,
                                 bool accumulate) {
    __shared__ float shared[32];
    for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
        const int64_t base = tfcu_offset_dims(in, 0, nkeep, o);
        float acc = 0.0f;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            acc += tfcu_load((const T *)in.data, (size_t)(base + tfcu_offset_dims(in, nkeep, in.ndim, k)));
        acc = tfcu_block_reduce<false>(acc, shared);
        if (threadIdx.x == 0) out[o] = tfcu_from_f<T>(scale * acc + (accumulate ? tfcu_load(out, o) : 0.0f));
    }
}

/*
 * Few outputs over long reductions (a sum of everything, a loss's mean, a
 * per-row sum of a handful of rows): one block per output left an H200's
 * 132 SMs all but idle and latency-bound (the clip norm's Σg² over GPT-2's
 * 124M gradient elements took ~0.25 s of the first GPU run's 0.64 s step).
 * Block (o, s) adds elements [s·chunk, (s+1)·chunk) of output o's k range
 * into partial[o·splits + s]; partials_final_kernel then adds each output's
 * splits in order. Chunk and splits depend on the shape only, so the order
 * (and the bits) do too. `run` > 0: the reduced dims are one run of that
 * element stride, so k's offset is k·run and needs no per-dim division.
 */
template <class T>
__global__ void sum_split_kernel(tfc_sview in, int32_t nkeep, int64_t nout, int64_t n, int64_t run, int64_t chunk,
                                 int64_t splits, float *partial) {
    __shared__ float shared[32];
    const int64_t o = blockIdx.x, s = blockIdx.y;
    const int64_t base = tfcu_offset_dims(in, 0, nkeep, o);
    const int64_t k0 = s * chunk, k1 = k0 + chunk < n ? k0 + chunk : n;
    const T *x = (const T *)in.data;
    float acc = 0.0f;
    if (run > 0)
        for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) acc += tfcu_load(x, (size_t)(base + k * run));
    else
        for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x)
            acc += tfcu_load(x, (size_t)(base + tfcu_offset_dims(in, nkeep, in.ndim, k)));
    acc = tfcu_block_reduce<false>(acc, shared);
    if (threadIdx.x == 0) partial[(size_t)o * (size_t)splits + (size_t)s] = acc;
}

/*
 * The second pass of both split sums: out[o] = scale · Σ_p partial[o·os + p·ps] (+ out[o]), the parts added in
 * order p = 0, 1, … — sum_split_kernel's partials are output-major (os = splits, ps = 1), colsum's chunk-major
 * (os = 1, ps = n).
 */
template <class T>
__global__ void partials_final_kernel(const float *partial, int64_t nout, int64_t parts, int64_t os, int64_t ps, T *out,
                                      float scale, bool accumulate) {
    TFCU_GRID_STRIDE(o, nout) {
        float acc = 0.0f;
        for (int64_t p = 0; p < parts; p++) acc += partial[(size_t)o * (size_t)os + (size_t)p * (size_t)ps];
        out[o] = tfcu_from_f<T>(scale * acc + (accumulate ? tfcu_load(out, o) : 0.0f));
    }
}

#define SPLIT_MIN_CHUNK 8192 /* elements per block at least: below, one block per output is as quick */

template <class T>
__global__ void sum_thread_kernel(tfc_sview in, int32_t nkeep, T *out, int64_t nout, int64_t n, float scale,
                                  bool accumulate) {
    TFCU_GRID_STRIDE(o, nout) {
        const int64_t base = tfcu_offset_dims(in, 0, nkeep, o);
        float acc = 0.0f;
        for (int64_t k = 0; k < n; k++)
            acc += tfcu_load((const T *)in.data, (size_t)(base + tfcu_offset_dims(in, nkeep, in.ndim, k)));
        out[o] = tfcu_from_f<T>(scale * acc + (accumulate ? tfcu_load(out, o) : 0.0f));
    }
}

/*
 * Column sums of x [rows, n] (element (r, j) at r·ld + j). The old walk of
 * one thread per column down all B·T rows gave n/256 blocks (3 for n = 768)
 * on 132 SMs. Here block (tile, chunk) covers COLSUM_W columns × one chunk
 * of rows: a warp reads COLSUM_W neighbouring columns of a row (coalesced),
 * COLSUM_H warps take every COLSUM_H-th row of the chunk, then the warps'
 * sums are added in warp order into partial[chunk, j]; a second kernel adds
 * the chunks in chunk order. Every order depends on the shape only.
 */
#define COLSUM_W 32
#define COLSUM_H 8
#define COLSUM_CHUNK_ROWS 256        /* rows per chunk, at least */
#define COLSUM_MAX_CHUNKS 1024       /* more rows: longer chunks */
#define COLSUM_MAX_PARTIAL (1 << 22) /* f32 partials (16 MiB of scratch) at most */

template <class T>
__global__ void colsum_partial_kernel(const T *x, int64_t rows, int64_t n, int64_t ld, int64_t chunk_rows,
                                      float *partial) {
    __shared__ float sums[COLSUM_H][COLSUM_W + 1];
    const int64_t j = (int64_t)blockIdx.x * COLSUM_W + threadIdx.x;
    const int64_t r0 = (int64_t)blockIdx.y * chunk_rows;
    const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    float acc = 0.0f;
    if (j < n)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += COLSUM_H) acc += tfcu_load(x, (size_t)(r * ld + j));
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
        float s = 0.0f;
        for (int w = 0; w < COLSUM_H; w++) s += sums[w][threadIdx.x];
        partial[(size_t)blockIdx.y * (size_t)n + (size_t)j] = s;
    }
}

/* Rows per chunk for x [rows, n]: a function of the shape only, so the sum's order is too. */
static int64_t colsum_chunk_rows(int64_t rows, int64_t n) {
    int64_t max_chunks = COLSUM_MAX_PARTIAL / (n > 0 ? n : 1);
    if (max_chunks > COLSUM_MAX_CHUNKS) max_chunks = COLSUM_MAX_CHUNKS;
    if (max_chunks < 1) max_chunks = 1;
    int64_t cr = (rows + max_chunks - 1) / max_chunks;
    if (cr < COLSUM_CHUNK_ROWS) cr = COLSUM_CHUNK_ROWS;
    return (cr + COLSUM_H - 1) / COLSUM_H * COLSUM_H;
}

/*
 * out[j] (+)= scale · Σ_r x[r·ld + j] for x [rows, n]: row chunks summed in
 * parallel, then the chunks in order; deterministic. fn names the entry in
 * messages.
 */
static tfc_status colsum(const char *fn, int32_t device, int32_t dtype, const void *x, int64_t rows, int64_t n,
                         int64_t ld, void *out, double scale, bool accumulate) {
    tfcu_ctx *c;
    if (n <= 0) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    const int64_t chunk_rows = colsum_chunk_rows(rows, n);
    const int64_t chunks = rows > 0 ? (rows + chunk_rows - 1) / chunk_rows : 0;
    const int64_t tiles = (n + COLSUM_W - 1) / COLSUM_W;
    if (tiles > INT32_MAX) return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: %lld columns", fn, (long long)n);
    float *partial = NULL;
    if (chunks) TFCU_TRY(tfcu_scratch(c, fn, (size_t)chunks * (size_t)n * sizeof(float), (void **)&partial));
    tfc_status s = tfcu_dispatch_float(fn, dtype, [&](auto t) -> tfc_status {
        typedef decltype(t) T;
        if (chunks) {
            colsum_partial_kernel<T>
                <<<dim3((unsigned)tiles, (unsigned)chunks), dim3(COLSUM_W, COLSUM_H), 0, c->stream>>>(
                    (const T *)x, rows, n, ld, chunk_rows, partial);
            TFCU_TRY(TFCU_LAUNCHED(fn, "colsum_partial_kernel"));
        }
        partials_final_kernel<T><<<tfcu_blocks(c, (size_t)n, 256), 256, 0, c->stream>>>(
            partial, n, chunks, 1, n, (T *)out, (float)scale, accumulate);
        return TFCU_LAUNCHED(fn, "partials_final_kernel");
    });
    tfcu_scratch_free(c, partial);
    return s;
}

/* Dims [first, last) of v as one run of *size elements with one stride (size-1 dims skipped); false if not. */
static bool merge_run(const tfc_sview *v, int32_t first, int32_t last, int64_t *size, int64_t *stride) {
    *size = 1, *stride = 1;
    bool any = false;
    for (int32_t d = last - 1; d >= first; d--) {
        if (v->shape[d] == 1) continue;
        if (!any)
            *stride = v->strides[d], any = true;
        else if (v->strides[d] != *stride * *size)
            return false;
        *size *= v->shape[d];
    }
    return true;
}

/* out[o] (+)= scale · Σ over the reduced trailing dims of `in` (the head comment's three cases). */
static tfc_status sum_trailing(int32_t device, const tfc_sview *in, int32_t nkeep, void *out, double scale,
                               bool accumulate) {
    const char *fn = "reduce";
    tfcu_ctx *c;
    int64_t nout = 1, n = 1;
    for (int32_t d = 0; d < in->ndim; d++) (d < nkeep ? nout : n) *= in->shape[d];
    if (!nout) return TFC_OK;
    int64_t ks, ns, rs, kst;
    if (nout > 1 && merge_run(in, 0, nkeep, &ks, &kst) && kst == 1 && merge_run(in, nkeep, in->ndim, &ns, &rs))
        return colsum(fn, device, in->dtype, in->data, n, nout, rs, out, scale, accumulate);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    /* Splits: enough blocks to fill the SMs eight deep, none shorter than SPLIT_MIN_CHUNK elements. */
    const int64_t want_blocks = (int64_t)c->sm_count * 8;
    int64_t splits = nout < want_blocks ? (want_blocks + nout - 1) / nout : 1;
    if (splits > n / SPLIT_MIN_CHUNK) splits = n / SPLIT_MIN_CHUNK;
    if (splits > 1) {
        const int64_t chunk = (n + splits - 1) / splits;
        splits = (n + chunk - 1) / chunk;
        int64_t ns, rs;
        const int64_t run = merge_run(in, nkeep, in->ndim, &ns, &rs) ? rs : 0;
        float *partial = NULL;
        TFCU_TRY(tfcu_scratch(c, fn, (size_t)nout * (size_t)splits * sizeof(float), (void **)&partial));
        tfc_status s = tfcu_dispatch_float(fn, in->dtype, [&](auto t) -> tfc_status {
            typedef decltype(t) T;
            sum_split_kernel<T><<<dim3((unsigned)nout, (unsigned)splits), 256, 0, c->stream>>>(
                *in, nkeep, nout, n, run > 0 ? run : 0, chunk, splits, partial);
            TFCU_TRY(TFCU_LAUNCHED(fn, "sum_split_kernel"));
            partials_final_kernel<T><<<tfcu_blocks(c, (size_t)nout, 256), 256, 0, c->stream>>>(
                partial, nout, splits, splits, 1, (T *)out, (float)scale, accumulate);
            return TFCU_LAUNCHED(fn, "partials_final_kernel");
        });
        tfcu_scratch_free(c, partial);
        return s;
    }
    return tfcu_dispatch_float(fn, in->dtype, [&](auto t) {
        typedef decltype(t) T;
        if (nout < (int64_t)c->sm_count * 64) {
            sum_block_kernel<T>
                <<<(unsigned)nout, 256, 0, c->stream>>>(*in, nkeep, (T *)out, nout, n, (float)scale, accumulate);
            return TFCU_LAUNCHED(fn, "sum_block_kernel");
        }
        sum_thread_kernel<T><<<tfcu_blocks(c, (size_t)nout, 256), 256, 0, c->stream>>>(*in, nkeep, (T *)out, nout, n,
                                                                                       (float)scale, accumulate);
        return TFCU_LAUNCHED(fn, "sum_thread_kernel");
    });
}

tfc_status tfcu_reduce(const tfc_reduce_problem *p) {
    if (p->op != TFC_REDUCE_SUM)
        return tfcu_err(TFC_ERR_UNSUPPORTED,
                        "reduce: only sums and means run on CUDA (max, min, arg and var are "
                        "CPU-only)");
    return sum_trailing(p->device, &p->in, p->nkeep, p->out, p->scale, false);
}

/* db [n] (+)= column sums of dy [rows, n] (row stride ld), each column's rows in the order colsum fixes. */
tfc_status tfcu_bias_grad(const tfc_bias_problem *p) {
    return colsum("tfcu_bias_grad", p->device, p->dtype, p->dy, p->rows, p->n, p->ld, p->db, 1.0, p->accumulate != 0);
}
