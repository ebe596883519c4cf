/*
 * tfcore train's cost arithmetic (tools/train_mfu.c): FLOPs per token
 * against nanoGPT's published numbers, MFU from a known FLOP count and
 * time, the CUDA peak table, and the per-machine peak cache.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/train_mfu.h"
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
