/*
 * Our side of the training-step and AdamW benchmarks (bench/bench.py pairs
 * them with PyTorch). One JSON line per run.
 *
 *   train_bench train PRESET B T STEPS [VOCAB [f32|bf16 [ARCH N_KV_HEAD MLP_HIDDEN]]]
 *       GPT preset (with ARCH "llama": the Llama family at the preset's
 *       sizes, N_KV_HEAD key/value heads, an MLP of MLP_HIDDEN, untied head,
 *       no biases, RoPE theta 10000 — the layout of the llama-tiny preset),
 *       batch B x T random tokens, the recipe of `tfcore train`:
 *       forward + cross-entropy, backward, clear, clip_grad_norm 1.0, AdamW
 *       (weight decay on 2-D weights), zero_grad(set_to_none). Two warm-up
 *       steps, then STEPS timed steps (median reported, with per-phase
 *       medians), the OS allocations the caching allocator made after step 2,
 *       and the process's peak RSS.
 *   train_bench adamw NTENSORS NUMEL
 *       one AdamW step over NUMEL f32 parameters split into NTENSORS tensors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfcore/optim.h"
#if __has_include("tfcore/gpt.h")
#include "tfcore/gpt.h"
#define HAVE_GPT 1
#else
#define HAVE_GPT 0
#endif
#include "tfcore/tfcore.h"
#include "bench_util.h"

#define MAX_STEPS 512

/* CPU time of the whole process (all its threads), seconds: on a shared
 * machine a one-thread step's CPU time is steadier than its wall time. */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0;
}

/* Peak resident set size of this process in MiB (VmHWM). */
static double peak_rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atof(line + 6);
    if (f) fclose(f);
    return kb / 1024;
}

#if HAVE_GPT
static tfc_optim *make_adamw(tfc_tensor *const *params, int32_t np) {
    tfc_tensor **decay = malloc((size_t)np * sizeof *decay), **no_decay = malloc((size_t)np * sizeof *no_decay);
    if (!decay || !no_decay) exit(1);
    int32_t nd = 0, nn = 0;
    for (int32_t i = 0; i < np; i++) {
        if (tfc_tensor_ndim(params[i]) >= 2)
            decay[nd++] = params[i];
        else
            no_decay[nn++] = params[i];
    }
    tfc_optim_options oo = TFC_ADAMW_OPTIONS_INIT;
    oo.lr = 1e-3;
    oo.beta2 = 0.95;
    tfc_optim *opt;
    OK(tfc_optim_adamw(&oo, &opt));
    OK(tfc_optim_add_group(opt, decay, nd, 1e-3, 0.1, NULL));
    OK(tfc_optim_add_group(opt, no_decay, nn, 1e-3, 0.0, NULL));
    free(decay);
    free(no_decay);
    return opt;
}

/* The Llama family at the sizes already in *cfg: what tfc_gpt_config_preset
 * sets for llama-tiny (untied head, no biases, default RoPE), with the
 * given kv heads and MLP width. */
static void make_llama(tfc_gpt_config *cfg, const char *arch, int n_kv_head, int64_t mlp_hidden) {
    const tfc_rope_config rope = TFC_ROPE_CONFIG_INIT;
    OK(tfc_gpt_arch_from_name(arch, &cfg->arch));
    cfg->n_kv_head = n_kv_head;
    cfg->mlp_hidden = mlp_hidden;
    cfg->rope = rope;
    cfg->tie_weights = 0;
    cfg->bias = 0;
    cfg->attention_bias = cfg->mlp_bias = cfg->sliding_window = 0;
}

/* dtype "bf16": the same f32 model with bf16 autocast (tfc_gpt_set_autocast); "f32": plain f32.
 * arch NULL: the preset as it is; else make_llama's family config. */
static int run_train(const char *preset, int B, int T, int steps, int vocab, const char *dtype, const char *arch,
                     int n_kv_head, int64_t mlp_hidden) {
    tfc_gpt_config cfg = TFC_GPT_CONFIG_INIT;
    cfg.vocab_size = vocab;
    OK(tfc_gpt_config_preset(preset, &cfg));
    if (arch) make_llama(&cfg, arch, n_kv_head, mlp_hidden);
    if (T > cfg.block_size) T = cfg.block_size;
    tfc_gpt *m;
    OK(tfc_gpt_new(&cfg, 1337, &m));
    if (!strcmp(dtype, "bf16")) OK(tfc_gpt_set_autocast(m, TFC_DTYPE_BF16));
    int32_t np;
    const char *const *names;
    tfc_tensor *const *params;
    OK(tfc_gpt_params(m, &np, &names, &params));
    tfc_optim *opt = make_adamw(params, np);
    tfc_graph *g;
    OK(tfc_graph_new(&g));
    int64_t dims[2] = {B, T}, n = (int64_t)B * T;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!ids || steps > MAX_STEPS) return 1;
    uint64_t x = 88172645463325252ull;
    for (int64_t i = 0; i <= n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)cfg.vocab_size);
    }
    tfc_tensor *xin, *yin;
    OK(tfc_tensor_from_data(ids, dims, 2, TFC_DTYPE_I32, &xin));
    OK(tfc_tensor_from_data(ids + 1, dims, 2, TFC_DTYPE_I32, &yin));
    free(ids);
    static double t_step[MAX_STEPS], t_fwd[MAX_STEPS], t_bwd[MAX_STEPS], t_clip[MAX_STEPS], t_opt[MAX_STEPS],
        t_cpu[MAX_STEPS];
    uint64_t os_after_warmup = 0, os_end = 0;
    double loss_first = 0, loss_last = 0;
    for (int s = -2; s < steps; s++) {
        if (s == 0) tfc_memory_stats(&os_after_warmup, NULL, NULL, NULL);
        double t0 = now(), c0 = cpu_now();
        tfc_tensor *loss;
        OK(tfc_gpt_forward(m, g, xin, yin, NULL, &loss));
        double t1 = now();
        OK(tfc_graph_backward(g, loss, NULL));
        OK(tfc_graph_clear(g));
        double t2 = now(), norm;
        OK(tfc_optim_clip_grad_norm(opt, 1.0, &norm));
        double t3 = now();
        OK(tfc_optim_step(opt));
        OK(tfc_optim_zero_grad(opt, 1));
        double t4 = now(), c4 = cpu_now(), lv;
        OK(tfc_tensor_item(loss, &lv));
        tfc_tensor_release(loss);
        if (s == -2) loss_first = lv;
        loss_last = lv;
        if (s >= 0) {
            t_step[s] = t4 - t0;
            t_cpu[s] = c4 - c0;
            t_fwd[s] = t1 - t0;
            t_bwd[s] = t2 - t1;
            t_clip[s] = t3 - t2;
            t_opt[s] = t4 - t3;
        }
    }
    tfc_memory_stats(&os_end, NULL, NULL, NULL);
    double step = median(t_step, steps);
    int64_t N = tfc_gpt_num_elements(m);
    tfc_gpt_config got = TFC_GPT_CONFIG_INIT; /* n_kv_head and mlp_hidden resolved */
    OK(tfc_gpt_get_config(m, &got));
    printf("{\"bench\":\"train\",\"preset\":\"%s\",\"arch\":\"%s\",\"n_kv_head\":%d,\"mlp_hidden\":%lld,"
           "\"tied\":%d,\"B\":%d,\"T\":%d,\"vocab\":%d,\"n_layer\":%d,\"n_embd\":%d,"
           "\"params\":%lld,\"steps\":%d,\"step_ms\":%.3f,\"fwd_ms\":%.3f,\"bwd_ms\":%.3f,\"clip_ms\":%.3f,"
           "\"opt_ms\":%.3f,\"cpu_ms\":%.3f,\"tokens_per_s\":%.1f,\"os_allocs_after_step2\":%llu,\"peak_rss_mib\":%.1f,"
           "\"loss_first\":%.4f,\"loss_last\":%.4f,\"threads\":%d,\"dtype\":\"%s\"}\n",
           preset, tfc_gpt_arch_name(got.arch), got.n_kv_head, (long long)got.mlp_hidden, got.tie_weights, B, T,
           cfg.vocab_size, cfg.n_layer, cfg.n_embd, (long long)N, steps, 1e3 * step, 1e3 * median(t_fwd, steps),
           1e3 * median(t_bwd, steps), 1e3 * median(t_clip, steps), 1e3 * median(t_opt, steps),
           1e3 * median(t_cpu, steps), (double)n / step, (unsigned long long)(os_end - os_after_warmup), peak_rss_mib(),
           loss_first, loss_last, tfc_get_num_threads(), dtype);
    tfc_tensor_release(xin);
    tfc_tensor_release(yin);
    tfc_graph_release(g);
    tfc_optim_release(opt);
    tfc_gpt_release(m);
    return 0;
}

#endif

static int run_adamw(int ntensors, int64_t numel) {
    tfc_tensor **p = calloc((size_t)ntensors, sizeof *p);
    if (!p) return 1;
    for (int i = 0; i < ntensors; i++) {
        int64_t d[1] = {numel / ntensors + (i < numel % ntensors)};
        tfc_tensor *gr;
        OK(tfc_tensor_randn(d, 1, TFC_DTYPE_F32, 1, (uint64_t)i << 24, &p[i]));
        OK(tfc_tensor_randn(d, 1, TFC_DTYPE_F32, 2, (uint64_t)i << 24, &gr));
        OK(tfc_tensor_set_requires_grad(p[i], 1));
        OK(tfc_tensor_set_grad(p[i], gr));
        tfc_tensor_release(gr);
    }
    tfc_optim_options oo = TFC_ADAMW_OPTIONS_INIT;
    tfc_optim *opt;
    OK(tfc_optim_adamw(&oo, &opt));
    OK(tfc_optim_add_params(opt, p, ntensors, NULL));
    static double t[MAX_STEPS];
    int n = 0;
    double t_end = now() + 2.0;
    for (int r = -2; r < MAX_STEPS && (r < 5 || now() < t_end); r++) {
        double t0 = now();
        OK(tfc_optim_step(opt));
        if (r >= 0) t[n++] = now() - t0;
    }
    double ms = 1e3 * median(t, n);
    /* p, g read; m, v read and written; p written: 7 floats per parameter. */
    printf("{\"bench\":\"adamw\",\"case\":\"%lld params in %d tensors\",\"ms\":%.4f,\"gbs\":%.2f,\"reps\":%d,"
           "\"peak_rss_mib\":%.1f}\n",
           (long long)numel, ntensors, ms, 7.0 * 4 * (double)numel / ms / 1e6, n, peak_rss_mib());
    tfc_optim_release(opt);
    for (int i = 0; i < ntensors; i++) tfc_tensor_release(p[i]);
    free(p);
    return 0;
}

int main(int argc, char **argv) {
#if HAVE_GPT
    if (argc >= 6 && !strcmp(argv[1], "train"))
        return run_train(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argc > 6 ? atoi(argv[6]) : 65,
                         argc > 7 ? argv[7] : "f32", argc > 10 ? argv[8] : NULL, argc > 10 ? atoi(argv[9]) : 0,
                         argc > 10 ? atoll(argv[10]) : 0);
#endif
    if (argc >= 4 && !strcmp(argv[1], "adamw")) return run_adamw(atoi(argv[2]), atoll(argv[3]));
    fprintf(
        stderr,
        "usage: train_bench train PRESET B T STEPS [VOCAB [f32|bf16 [ARCH N_KV_HEAD MLP_HIDDEN]]] | adamw NTENSORS NUMEL\n");
    return 2;
}
