/*
 * tfcore train's cost arithmetic (tools/train_mfu.c, tools/train_plan.c):
 * FLOPs per token against nanoGPT's published numbers and, for the Llama
 * family, against counts written out by hand from the config (GQA's
 * narrower k/v, SwiGLU's three matrices, the sliding window); the memory
 * plan's parameter count, KV cache and activations of llama-tiny by hand;
 * MFU from a known FLOP count and time, the CUDA peak table, and the
 * per-machine peak cache.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/train_mfu.h"
#include "../../tools/train_plan.h"
#include "tfc_test.h"

TEST(flops_per_token_matches_nanogpt) {
    /* GPT-2 124M: nanoGPT prints "number of parameters: 123.65M" (wpe left out) and estimate_mfu takes
     * 6N + 12·L·H·Q·T = 6·123,653,376 + 12·12·12·64·1024 */
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    CHECK_OK(tfc_gpt_config_preset("gpt2", &c));
    tfc_gpt *m = NULL;
    c.n_layer = 1; /* the count below is arithmetic on the config; a 1-layer model checks num_elements cheaply */
    CHECK_OK(tfc_gpt_new(&c, 0, &m));
    const int64_t n1 = tfc_gpt_num_elements(m);
    tfc_gpt_release(m);
    const int64_t per_layer = 12 * 768 * 768 + 13 * 768, n12 = n1 + 11 * per_layer;
    CHECK(n12 == 124439808); /* HF's GPT-2: 124,439,808 parameters */
    c.n_layer = 12;
    CHECK(mfu_flops_per_token(&c, n12) == 6.0 * 123653376 + 12.0 * 12 * 768 * 1024);
    /* untied: wte is a lookup, the head [V, C] is counted instead (the same N) */
    c.tie_weights = 0;
    CHECK(mfu_flops_per_token(&c, n12 + 50257LL * 768) == 6.0 * 123653376 + 12.0 * 12 * 768 * 1024);
    /* LoRA, rank 8 on c_attn of 12 layers (A [8,768] + B [2304,8]): frozen 4N, adapters 6N, attention as before */
    c.tie_weights = 1;
    const int64_t nl = 12 * (8 * 768 + 2304 * 8);
    CHECK(nl == 294912);
    CHECK(mfu_lora_flops_per_token(&c, n12, nl) == 4.0 * 123653376 + 6.0 * 294912 + 12.0 * 12 * 768 * 1024);
}

/* llama-tiny at a 65-character vocabulary: the numbers below are written out from its config, not by the tools */
static tfc_gpt_config llama_tiny(void) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.vocab_size = 65;
    CHECK_OK(tfc_gpt_config_preset("llama-tiny", &c));
    return c;
}

TEST(flops_per_token_of_the_llama_family_by_hand) {
    /*
     * llama-tiny: L 4, C 128, H 4, Hkv 2 (D 32, k/v width 64), F 352, T 128, V 65, untied head, no biases.
     * A layer: q 128·128 + k 64·128 + v 64·128 + o 128·128 + gate, up, down 3·352·128 + two RMSNorms 2·128
     *        = 16384 + 8192 + 8192 + 16384 + 135168 + 256 = 184576.
     * The model: 4·184576 + embed_tokens 65·128 + model.norm 128 + lm_head 65·128 = 738304 + 8320 + 128 + 8320
     *          = 755072; N leaves out the embedding (a lookup): 746752 (no position table to leave out).
     */
    tfc_gpt_config c = llama_tiny();
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 0, &m));
    const int64_t n = tfc_gpt_num_elements(m);
    tfc_gpt_release(m);
    CHECK(n == 755072);
    const double attn = 12.0 * 4 * 128 * 128; /* 12·L·C·T: grouped-query heads change nothing here */
    CHECK(mfu_flops_per_token(&c, n) == 6.0 * 746752 + attn);
    /* tied: no lm_head, the embedding is the head's matmul and counts: the same N */
    c.tie_weights = 1;
    CHECK(mfu_flops_per_token(&c, n - 8320) == 6.0 * 746752 + attn);
    /* mistral with a window of 8 < T: attention sees 8 keys a query, 12·L·C·8 */
    c.tie_weights = 0;
    c.arch = TFC_GPT_ARCH_MISTRAL;
    c.sliding_window = 8;
    CHECK(mfu_flops_per_token(&c, n) == 6.0 * 746752 + 12.0 * 4 * 128 * 8);
    c.sliding_window = 128; /* a window as long as the block limits nothing */
    CHECK(mfu_flops_per_token(&c, n) == 6.0 * 746752 + attn);
    /* MHA instead of GQA (k, v 128 wide: +2·64·128 a layer) and a wider MLP (F 512: +3·160·128 a layer) */
    c = llama_tiny();
    c.n_kv_head = 4;
    c.mlp_hidden = 512;
    CHECK_OK(tfc_gpt_new(&c, 0, &m));
    const int64_t n2 = tfc_gpt_num_elements(m);
    tfc_gpt_release(m);
    CHECK(n2 == 755072 + 4 * (2 * 64 * 128 + 3 * 160 * 128));
    CHECK(mfu_flops_per_token(&c, n2) == 6.0 * (746752 + 4 * (2 * 64 * 128 + 3 * 160 * 128)) + attn);
    /* LoRA rank 8 on all-linear: A [8, in] + B [out, 8] per module: q 8·128 + 128·8 = 2048, k and v
       8·128 + 64·8 = 1536, o 2048, gate and up 8·128 + 352·8 = 3840, down 8·352 + 128·8 = 3840; 18688 a layer */
    c = llama_tiny();
    const int64_t nl = 4 * 18688;
    CHECK(mfu_lora_flops_per_token(&c, n, nl) == 4.0 * 746752 + 6.0 * nl + attn);
}

TEST(memory_plan_of_llama_tiny_by_hand) {
    tfc_gpt_config c = llama_tiny();
    train_plan p;
    train_plan_make(&c, 1, 1, 1, 0, &p);
    CHECK(p.n_params == 755072);
    CHECK(p.rows == 128);
    /*
     * The KV cache holds the 2 kv heads only: 2 (k, v) · L 4 · [T 128, 64] f32 = 2·4·32768 bytes (a power of
     * two: the allocator's size class is the size), a half of what 4 heads would take.
     */
    CHECK(p.kv_cache == 2 * 4 * 32768);
    /*
     * Activations per layer at N = 128 rows, as the allocator rounds each (64-byte steps to 1 KiB, then
     * quarters of a power of two): [N,C] 65536 B; [N,64] k and v 32768 B; [N,352] 180224 B -> 196608 B; the
     * stats [N] 512 B; the row log-sum-exp [N,H] 2048 B. Kept: x, h, q, attention's output, its merged copy,
     * x', h2 (7 of [N,C]), k and v, gate, up and SwiGLU's output (3 of [N,F]), two RMSNorm rstd, lse:
     * 7·65536 + 2·32768 + 3·196608 + 2·512 + 2048 = 1117184. After the blocks: the final norm's x and rstd,
     * the head's h and dh: 3·65536 + 512.
     */
    CHECK(p.acts == 4 * 1117184 + 3 * 65536 + 512);
    CHECK(p.acts_recompute == 4 * 65536 + 1117184 + 3 * 65536 + 512);
}

TEST(mfu_from_known_flops_and_time) {
    /* 1e9 FLOPs a token at 2000 tokens/s on a 4e12 FLOP/s machine: 2e12 / 4e12 = 0.5 */
    CHECK(mfu_of(1e9, 2000, 4e12) == 0.5);
    CHECK(fabs(mfu_of(855166464.0, 150000, 312e12) - 0.41113772307692307) < 1e-15); /* by hand */
    CHECK(mfu_of(1e9, 2000, 0) == 0);
}

TEST(cuda_peak_table) {
    CHECK(mfu_cuda_peak("NVIDIA H100 80GB HBM3", 1) == 989.4e12);
    CHECK(mfu_cuda_peak("NVIDIA H100 PCIe", 0) == 51e12);
    CHECK(mfu_cuda_peak("NVIDIA H200", 0) == 67e12);
    CHECK(mfu_cuda_peak("NVIDIA A100-SXM4-80GB", 1) == 312e12);
    CHECK(mfu_cuda_peak("NVIDIA L4", 1) == 121e12);
    CHECK(mfu_cuda_peak("NVIDIA GeForce GTX 1080", 0) == 0);
    CHECK(mfu_cuda_peak(NULL, 0) == 0);
}

TEST(cpu_peak_is_cached_per_machine_and_threads) {
    char dir[] = "/tmp/tfc_peak_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("XDG_CACHE_HOME", dir, 1);
    char src[512];
    CHECK(mfu_peak_flops(5e9, -1, 0, 1, src, sizeof src) == 5e9 && strcmp(src, "--peak-flops") == 0);
    /*
     * Measured now, and cached, unless the machine is too busy for a
     * plausible figure (tests run side by side): then the ISA-and-clock
     * floor, said so, and nothing cached. Either way a number and its reason.
     */
    const double measured = mfu_peak_flops(0, -1, 0, 1, src, sizeof src);
    CHECK(measured > 0 && (strstr(src, "measured now") != NULL || strstr(src, "so that floor is used") != NULL));
    /* the cached value is used from then on: write a known one for this CPU */
    char path[256], model[256];
    mfu_cpu_model(model, sizeof model);
    snprintf(path, sizeof path, "%s/tfcore", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/tfcore/peak_flops", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "%s\t1\tavx2\t1234e9\n", model);
    fclose(f);
    CHECK(mfu_peak_flops(0, -1, 0, 1, src, sizeof src) == 1234e9);
    CHECK(strstr(src, "(cached)") != NULL);
    CHECK(mfu_peak_flops(0, -1, 1, 1, src, sizeof src) == 617e9); /* f64: half */
    /* bf16 mixed precision on the CPU widens to the f32 GEMM: the f32 peak (on CUDA: the card's bf16 column) */
    CHECK(mfu_peak_flops(0, -1, MFU_BF16, 1, src, sizeof src) == 1234e9);
    CHECK(mfu_cuda_peak("NVIDIA H200", 1) == 989.4e12 && mfu_cuda_peak("NVIDIA H200", 0) == 67e12);
    /* another thread count is measured anew */
    const double two = mfu_peak_flops(0, -1, 0, 2, src, sizeof src);
    CHECK(two > 0 && strstr(src, "(cached)") == NULL);
    (void)measured;
    unlink(path);
    snprintf(path, sizeof path, "%s/tfcore", dir);
    rmdir(path);
    rmdir(dir);
}

TFC_TEST_MAIN
