/*
 * Model FLOPs utilisation for tfcore train: the model's FLOPs per token,
 * the machine's peak (measured once per machine and cached, a table for
 * CUDA cards, or --peak-flops) and the ratio. docs/MODEL.md, "Knowing what
 * a run costs".
 */
#ifndef TFC_TOOLS_TRAIN_MFU_H
#define TFC_TOOLS_TRAIN_MFU_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/gpt.h"

/*
 * Training FLOPs per token, PaLM's appendix B / nanoGPT's estimate_mfu:
 * 6·N + 12·L·C·S (forward 2N + backward 4N for the matmuls against the
 * weights, plus attention's q·kᵀ and p·v, 2·2·S·C per layer forward, ×3
 * with backward; S = T, or the sliding window when it is shorter). N is
 * nanoGPT's count: the parameters minus the lookups, GPT-2's position
 * embedding and, with an untied head, the token embedding (tied, the head
 * multiplies by it and it counts). n_params is tfc_gpt_num_elements. Per
 * architecture, with C = n_embd, Ckv = n_kv_head·C/n_head (k and v's
 * width: grouped-query attention makes them narrower), F = mlp_hidden:
 *   GPT-2:        N = L·(C·3C + C·C + 2·C·4C + biases, LayerNorms) + V·C (head) + C
 *   Llama family: N = L·(C·C [q] + 2·C·Ckv [k, v] + C·C [o] + 3·C·F [gate, up, down]
 *                       + 2C [RMSNorms] + biases) + V·C (head) + C
 * (the norms and biases are not matmuls; counted as nanoGPT counts them,
 * they are below 0.1% of N).
 */
double mfu_flops_per_token(const tfc_gpt_config *c, int64_t n_params);

/*
 * The same for a LoRA run with n_lora adapter elements: the frozen weights
 * still run forward (2N) and pass gradients to their inputs (2N) but get no
 * weight gradient, and each adapter is a Linear pair trained in full:
 * 4·N + 6·n_lora + 12·L·C·S.
 */
double mfu_lora_flops_per_token(const tfc_gpt_config *c, int64_t n_params, int64_t n_lora);

/* flops_per_token · tokens_per_s / peak_flops (a fraction; 0 when peak_flops <= 0). */
double mfu_of(double flops_per_token, double tokens_per_s, double peak_flops);

/*
 * The peak FLOP/s the run is measured against, and where it came from
 * (written into src, n bytes): `given` > 0 (--peak-flops) as is; on CUDA
 * (cuda_index >= 0) the card's dense f32/bf16 peak from a datasheet table
 * by its name (0 when the card is not in the table: MFU is then not
 * shown); on the CPU the FMA microbenchmark (tools/fma_kernels.h) on
 * `threads` threads, run once per machine and cached in
 * $XDG_CACHE_HOME/tfcore/peak_flops (or ~/.cache/tfcore) keyed by the CPU
 * model and thread count; a cached or measured peak below mfu_cpu_floor
 * is measured again (the larger kept; still below: the floor is used, and
 * src says so). f64 runs get half the f32 peak (the same FMA
 * units, half the lanes). `kind`: MFU_F32, MFU_F64, or MFU_BF16 (bf16 mixed
 * precision: the card's bf16 tensor-core peak on CUDA, where its GEMMs run;
 * the f32 peak on the CPU, whose bf16 GEMM widens to f32).
 */
enum { MFU_F32 = 0, MFU_F64 = 1, MFU_BF16 = 2 };
double mfu_peak_flops(double given, int32_t cuda_index, int kind, int threads, char *src, size_t n);

/* The f32 FMA peak of this CPU on `threads` threads, measured now (FLOP/s; 0 without AVX2/FMA). */
double mfu_measure_cpu_peak(int threads, const char **isa);

/*
 * The least f32 FMA peak this CPU can have on `threads` threads, from what
 * it reports: physical cores used (min(threads, cores): SMT siblings share
 * the FMA units) x f32 lanes of its widest FMA (16 avx512, 8 avx2) x 2
 * flops x 1 FMA unit per core (most have 2) x its highest "cpu MHz", halved
 * for clocks that drop under vector load. A cached or measured peak below
 * it was measured on a busy machine: mfu_peak_flops measures again. 0 when
 * the CPU reports no FMA or no clock. The formula, with the numbers, into
 * why (n bytes; may be NULL).
 */
double mfu_cpu_floor(int threads, char *why, size_t n);

/* "model name" of /proc/cpuinfo (tabs and newlines removed), or "unknown-cpu": the CPU a cached peak is for. */
void mfu_cpu_model(char *buf, size_t n);

/*
 * The f32 FMA peak measured now, as mfu_measure_cpu_peak, for a run whose
 * MFU exceeded the peak `was` (f32, one process): cached in its place when
 * higher.
 */
double mfu_measure_again(int threads, double was);

/* A card's dense peak from the datasheet table: FLOP/s for f32 (bf16 = 0) or bf16; 0 when unknown. */
double mfu_cuda_peak(const char *device_name, int bf16);

#endif
