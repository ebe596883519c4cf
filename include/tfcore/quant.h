/*
 * tfcore/quant.h — quantized weights for inference: int8 per output channel
 * and int4 in groups, their packing, and a quantized linear layer
 * y = x · Wᵀ + b on f32 activations. Design notes: docs/ARCHITECTURE.md
 * ("Quantized weights"); measurements: docs/PERFORMANCE.md.
 *
 * A quantized weight is an opaque, immutable, reference-counted handle
 * (tfc_qweight) rather than a tensor of a new dtype: a packed weight has two
 * arrays (the codes and their scales) and a format, and the dtype enum stays
 * for element types that every op can read. The two arrays are ordinary
 * tensors (tfc_qweight_tensors / tfc_qweight_from_tensors), so numpy can view
 * them and a safetensors file can hold them.
 *
 * Orientation. A quantized weight is always W [N, K] = [out_features,
 * in_features] (nn.Linear's layout): quantization runs along K, the axis a
 * dot product reads. tfc_quantize takes either that layout or, with
 * TFC_QUANT_IN_OUT, the transposed [K, N] one that tfc_linear and GPT-2's
 * Conv1D layers use (y = x · W + b, include/tfcore/gpt.h), so a model
 * quantizes its [in, out] weights without a transposed copy.
 *
 * Formats, byte by byte (row n of W is output feature n; k indexes K):
 *
 *  TFC_QFORMAT_INT8 — symmetric, one f32 scale per output row:
 *    scale[n] = max_k |W[n,k]| / 127      (0 for an all-zero row)
 *    q[n,k]   = round_half_even(W[n,k] / scale[n])  in [-127, 127]
 *    packed: N·K bytes, byte n·K + k = q[n,k] as a two's-complement int8
 *            (the tensor's dtype is u8: reinterpret, e.g. numpy .view(int8))
 *    scales: N f32, [N]
 *    dequantized W[n,k] = (float)q[n,k] · scale[n]   (one f32 product)
 *
 *  TFC_QFORMAT_INT4 — symmetric, one f32 scale per group of G consecutive
 *  k in a row (G = group_size, a multiple of 32 that divides K):
 *    scale[n,g] = max_{k in group g} |W[n,k]| / 7
 *    q[n,k]     = round_half_even(W[n,k] / scale[n,g])  in [-7, 7]
 *    nibble     = q + 8, in [1, 15] (0, read as -8, is never written but is
 *                 accepted from tfc_qweight_from_tensors)
 *    packed: N·K/2 bytes, [N, K/2]; byte n·(K/2) + j holds k = 2j in its
 *            low nibble (bits 0-3) and k = 2j+1 in its high nibble (bits 4-7)
 *    scales: N·(K/G) f32, [N, K/G]; scales[n, g] covers k in [g·G, (g+1)·G)
 *    dequantized W[n,k] = (float)(nibble − 8) · scale[n, k/G]
 *
 *  Round trip: |W − dequantize(quantize(W))| ≤ scale/2 per element (plus the
 *  f32 rounding of the product); a W whose values are already q·scale with
 *  the row's (group's) largest |q| at 127 (7) comes back exactly.
 *  Symmetric [-7, 7] rather than [-8, 7] keeps that bound for both signs.
 *
 * Devices: quantized weights are CPU-only for now. A CUDA weight or input
 * is TFC_ERR_UNSUPPORTED naming the entry (docs/CUDA.md).
 *
 * Kernels: tfc_qlinear dequantizes the codes in registers and accumulates in
 * f32 FMA: AVX-512 (avx512f/bw/vl) or AVX2+FMA, chosen from CPUID at run time,
 * with a portable C path. From 16 rows of x (int8) or 6 (int4) on it instead
 * dequantizes W a small tile at a time into f32 and runs the f32 GEMM over
 * all rows (batched decoding: the unpacking is paid once per weight); TFC_QUANT_KERNEL=portable|avx2|avx512 caps the
 * choice (read once, at the first call). Output rows are split over the
 * OpenMP pool; results do not depend on the thread count. The paths differ
 * only in summation order: each equals the dequantize-then-matmul reference
 * to f32 rounding.
 *
 * Thread-safety: a tfc_qweight is immutable after creation (its tensors
 * share its memory: writing them changes the weight and must not race with
 * tfc_qlinear on it); retain/release are atomic; any number of threads may
 * run tfc_qlinear / tfc_qweight_dequantize on one handle concurrently.
 */
#ifndef TFCORE_QUANT_H
#define TFCORE_QUANT_H

#include "tfcore/core.h"
#include "tfcore/graph.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfc_qweight tfc_qweight;

/* Quantized weight formats (layouts above). Values are part of the ABI. */
typedef enum tfc_qformat {
    TFC_QFORMAT_INT8 = 1, /* int8 codes, one f32 scale per output row; group_size 0 */
    TFC_QFORMAT_INT4 = 2, /* int4 codes two a byte, one f32 scale per group of group_size along K */
    TFC_QFORMAT_FORCE_INT32 = 0x7fffffff
} tfc_qformat;

/* flags of tfc_quantize / tfc_qweight_dequantize: the float weight is [K, N] = [in, out] (Conv1D). */
#define TFC_QUANT_IN_OUT 1u

/*
 * Quantize the 2-D f32 weight w into *out (a new handle, release with
 * tfc_qweight_release). w is [N, K] = [out, in], or [K, N] with
 * TFC_QUANT_IN_OUT in flags; any strides. group_size: 0 for INT8 (per output
 * row); for INT4 a multiple of 32 that divides K (32 and 64 are the usual
 * ones). w is read, never kept: the handle owns new memory.
 * Errors (nothing allocated, *out untouched): NULL w/out, an unknown format,
 * unknown flag bits, a bad group_size (with the reason: not 0 for int8, not a
 * multiple of 32, not dividing K) → TFC_ERR_INVALID_ARG; w not 2-D or with
 * a zero dim → TFC_ERR_SHAPE; w not f32 (cast f64/bf16 with tfc_cast
 * first) → TFC_ERR_DTYPE; a NaN or infinite element → TFC_ERR_NONFINITE
 * naming its row; w on CUDA → TFC_ERR_UNSUPPORTED. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_quantize(const tfc_tensor *w, tfc_qformat format, int32_t group_size,
                                              uint32_t flags, tfc_qweight **out);

/*
 * *out = the f32 weight q stands for (the formula of its format above): a new
 * contiguous CPU tensor [N, K], or [K, N] with TFC_QUANT_IN_OUT. Errors: NULL
 * q/out or unknown flag bits → TFC_ERR_INVALID_ARG; OOM. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_qweight_dequantize(const tfc_qweight *q, uint32_t flags, tfc_tensor **out);

/*
 * The quantized linear layer: *out [..., N] = x [..., K] · Wᵀ + b, with W
 * the dequantized weight of w ([N, K]) and b [N] (may be NULL). x and b are
 * f32 CPU tensors of any strides (the leading dims of x fold into the rows
 * of one small-batch GEMM); *out is a new contiguous f32 tensor. Each
 * output is Σ_k x·W accumulated in f32 (per group, then scaled, for int4),
 * plus b: equal to a dequantize-then-matmul to f32 rounding.
 *
 * Inference only: the product has no backward. g may be NULL; when g
 * records and x or b requires grad the call is TFC_ERR_UNSUPPORTED rather
 * than silently cutting the graph (use tfc_linear on tfc_qweight_dequantize's
 * result to train through it). Nothing is recorded on g.
 * Errors (*out untouched): NULL x/w/out → TFC_ERR_INVALID_ARG; x or b not f32
 * → TFC_ERR_DTYPE; x a scalar, x's last dim not K, b not [N] →
 * TFC_ERR_SHAPE; x or b on CUDA → TFC_ERR_UNSUPPORTED (qlinear is not
 * implemented on cuda:0). Thread-safe (see above).
 */
TFC_API TFC_NODISCARD tfc_status tfc_qlinear(tfc_graph *g /* nullable */, const tfc_tensor *x, const tfc_qweight *w,
                                             const tfc_tensor *b /* nullable */, tfc_tensor **out);

/*
 * New references to q's two arrays, in the layouts above: *packed a u8
 * tensor ([N, K] for INT8, [N, K/2] for INT4) and *scales an f32 tensor ([N]
 * for INT8, [N, K/group_size] for INT4), both contiguous on the CPU. They
 * share q's memory (no copy) and keep it alive after q is released. packed
 * or scales may be NULL when that array is not wanted. Errors: NULL q →
 * TFC_ERR_INVALID_ARG. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_qweight_tensors(const tfc_qweight *q, tfc_tensor **packed /* nullable */,
                                                     tfc_tensor **scales /* nullable */);

/*
 * A handle from arrays in the layouts above (the inverse of
 * tfc_qweight_tensors, e.g. for a checkpoint): W is [n, k] = [out_features,
 * in_features] in format `format` with group_size as for tfc_quantize.
 * packed must be u8 of exactly the format's packed shape, scales f32 of its
 * scales shape, both on the CPU; every scale must be finite (a corrupt file
 * is refused here, not read as NaN later). Contiguous tensors are shared
 * (retained, not copied: later writes to them show in the weight);
 * others are copied. Errors (*out untouched): NULL packed/scales/out,
 * unknown format, n or k < 1, a bad group_size → TFC_ERR_INVALID_ARG;
 * wrong dtype → TFC_ERR_DTYPE; wrong shape → TFC_ERR_SHAPE (the message
 * gives the expected one); a non-finite scale → TFC_ERR_NONFINITE naming
 * its index; a CUDA tensor → TFC_ERR_UNSUPPORTED. Thread-safe.
 */
TFC_API TFC_NODISCARD tfc_status tfc_qweight_from_tensors(tfc_qformat format, int64_t n, int64_t k, int32_t group_size,
                                                          const tfc_tensor *packed, const tfc_tensor *scales,
                                                          tfc_qweight **out);

/* Another reference to q (returned; NULL for NULL). Thread-safe. */
TFC_API tfc_qweight *tfc_qweight_retain(tfc_qweight *q /* nullable: NULL */);
/* Drop a reference; the last one frees the handle. NULL is a no-op. Thread-safe. */
TFC_API void tfc_qweight_release(tfc_qweight *q /* nullable */);

/* q's format; 0 for NULL. */
TFC_API tfc_qformat tfc_qweight_format(const tfc_qweight *q /* nullable: 0 */);
/* N, the rows of W (out_features); -1 for NULL. */
TFC_API int64_t tfc_qweight_out_features(const tfc_qweight *q /* nullable: -1 */);
/* K, the columns of W (in_features); -1 for NULL. */
TFC_API int64_t tfc_qweight_in_features(const tfc_qweight *q /* nullable: -1 */);
/* The int4 group size; 0 for INT8; -1 for NULL. */
TFC_API int32_t tfc_qweight_group_size(const tfc_qweight *q /* nullable: -1 */);
/* Bytes of packed codes plus scales: what one pass of tfc_qlinear reads of W; -1 for NULL. */
TFC_API int64_t tfc_qweight_nbytes(const tfc_qweight *q /* nullable: -1 */);

#ifdef __cplusplus
}
#endif

#endif
