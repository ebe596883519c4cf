/*
 * MFU (train_mfu.h): FLOPs per token, the peak (CPU: measured and cached;
 * CUDA: a datasheet table; or --peak-flops) and their ratio.
 */
#include "train_mfu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fma_kernels.h"
#include "model_dims.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/*
 * Attention's FLOPs per token, 12·L·C·S: a query row of each head takes
 * q·kᵀ over S keys (2·D·S) and p·v (2·D·S), H heads of D = C/H, so 4·C·S
 * per layer forward, ×3 with backward. Grouped-query heads change nothing
 * here (each query head still meets every key it sees); a sliding window W
 * < T limits S to W (nanoGPT's convention counts S = T for causal
 * attention, the masked half included; the window's S = W likewise).
 */
static double attention_flops(const tfc_gpt_config *c) {
    return 12.0 * c->n_layer * c->n_embd * (double)dims_attended(c, c->block_size);
}

double mfu_flops_per_token(const tfc_gpt_config *c, int64_t n_params) {
    const double C = c->n_embd, T = c->block_size, V = c->vocab_size;
    double n = (double)n_params;
    if (!dims_is_llama(c)) n -= T * C; /* wpe: a lookup (the Llama family has no position table) */
    if (!c->tie_weights) n -= V * C;   /* wte is a lookup; lm_head is the matmul */
    return 6.0 * n + attention_flops(c);
}

double mfu_lora_flops_per_token(const tfc_gpt_config *c, int64_t n_params, int64_t n_lora) {
    const double full = mfu_flops_per_token(c, n_params), attn = attention_flops(c);
    return (full - attn) / 6.0 * 4.0 + 6.0 * (double)n_lora + attn;
}

double mfu_of(double flops_per_token, double tokens_per_s, double peak_flops) {
    return peak_flops > 0 ? flops_per_token * tokens_per_s / peak_flops : 0.0;
}

/*
 * Dense peaks from NVIDIA's datasheets (FLOP/s, without sparsity): f32 is
 * the CUDA-core FP32 rate (tfcore's f32 GEMMs run in full f32, no TF32:
 * cuda/matmul.cu), bf16 the tensor-core rate.
 *   H100 SXM5 / H200 SXM: 67 TF FP32, 989.4 TF BF16 (H100 datasheet; the
 *     H200 datasheet gives the same compute); H100 PCIe: 51 / 756.
 *   A100 (SXM4 and PCIe): 19.5 TF FP32, 312 TF BF16 (A100 datasheet).
 *   L4: 30.3 TF FP32, 121 TF BF16 (L4 datasheet, 242 with sparsity).
 *   L40S: 91.6 TF FP32, 362 TF BF16.  A10: 31.2 / 125.  V100 SXM2: 15.7 / -
 *   (no bf16).  T4: 8.1 / -.
 * More specific names first: "H100 PCIe" before "H100".
 */
static const struct {
    const char *name;
    double f32, bf16;
} cards[] = {
    {"H200", 67e12, 989.4e12}, {"H100 PCIe", 51e12, 756e12}, {"H100", 67e12, 989.4e12},
    {"A100", 19.5e12, 312e12}, {"L40S", 91.6e12, 362e12},    {"L4", 30.3e12, 121e12},
    {"A10", 31.2e12, 125e12},  {"V100", 15.7e12, 0},         {"T4", 8.1e12, 0},
};

double mfu_cuda_peak(const char *device_name, int bf16) {
    if (!device_name) return 0;
    for (size_t i = 0; i < sizeof cards / sizeof cards[0]; i++)
        if (strstr(device_name, cards[i].name)) return bf16 ? cards[i].bf16 : cards[i].f32;
    return 0;
}

static int not_dot(const struct dirent *d) { return d->d_name[0] != '.'; }

/*
 * The name of CUDA device `index` from the driver's /proc entries ("Model:
 * NVIDIA H100 80GB HBM3"), or NULL. The entries are PCI addresses; sorted,
 * they are in bus order, CUDA's default device order.
 */
static const char *cuda_device_name(int32_t index, char *buf, size_t n) {
    struct dirent **e = NULL;
    const int k = scandir("/proc/driver/nvidia/gpus", &e, not_dot, alphasort);
    FILE *f = NULL;
    if (k > index && index >= 0) {
        char path[512];
        snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", e[index]->d_name);
        f = fopen(path, "r");
    }
    for (int i = 0; i < k; i++) free(e[i]);
    free(e);
    if (!f) return NULL;
    const char *r = NULL;
    while (fgets(buf, (int)n, f))
        if (strncmp(buf, "Model:", 6) == 0) {
            char *s = buf + 6;
            while (*s == ' ' || *s == '\t') s++;
            s[strcspn(s, "\n")] = 0;
            memmove(buf, s, strlen(s) + 1);
            r = buf;
            break;
        }
    fclose(f);
    return r;
}

static double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The f32 lanes of the widest FMA this CPU has (16 avx512, 8 avx2 + fma; 0: none) and its name. */
static int fma_lanes(const char **isa) {
    *isa = "none";
#ifdef FMA_KERNELS_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        *isa = "avx512";
        return 16;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *isa = "avx2";
        return 8;
    }
#endif
    return 0;
}

double mfu_measure_cpu_peak(int threads, const char **isa) {
    const int lanes = fma_lanes(isa);
    if (!lanes) return 0;
#ifdef FMA_KERNELS_X86
    const int avx512 = lanes == 16;
    const long iters = 2000000L / lanes * 8; /* ~10 ms a thread */
    double best = 0;
    volatile float sink = 0;
    if (threads < 1) threads = 1;
    /* the best of several runs, each thread's rate by its own CPU time: the cores' peak even on a shared machine */
    for (int rep = 0; rep < 5; rep++) {
        double rate = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : rate)
#endif
        {
            const double c0 = thread_cpu_s();
            float v = avx512 ? fma_chains_avx512(iters, 1.0f) : fma_chains_avx2(iters, 1.0f);
            const double dt = thread_cpu_s() - c0;
            sink += v;
            rate += dt > 0 ? (double)iters * FMA_CHAINS * lanes * 2 / dt : 0;
        }
#ifndef _OPENMP
        rate *= threads; /* one thread measured; the others are assumed alike */
#endif
        if (rate > best) best = rate;
    }
    (void)sink;
    return best;
#else
    (void)threads;
    return 0;
#endif
}

/*
 * The physical cores (distinct "physical id"/"core id" pairs of
 * /proc/cpuinfo, at least 1) and the highest "cpu MHz" it reports (0 when
 * none).
 */
static void cpu_cores_mhz(int *cores, double *mhz) {
    *cores = 0;
    *mhz = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    int phys = 0;
    long seen[1024];
    while (fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (!v) continue;
        double x = atof(v + 1);
        if (strncmp(line, "physical id", 11) == 0) phys = (int)x;
        if (strncmp(line, "cpu MHz", 7) == 0 && x > *mhz) *mhz = x;
        if (strncmp(line, "core id", 7) != 0) continue;
        const long key = (long)phys << 20 | (long)x;
        int i = 0;
        while (i < *cores && seen[i] != key) i++;
        if (i == *cores && *cores < 1024) seen[(*cores)++] = key;
    }
    fclose(f);
    if (*cores < 1) *cores = 1;
}

double mfu_cpu_floor(int threads, char *why, size_t n) {
    const char *isa;
    const int lanes = fma_lanes(&isa);
    int cores;
    double mhz;
    cpu_cores_mhz(&cores, &mhz);
    const int used = threads < cores ? (threads > 0 ? threads : 1) : cores;
    if (why) snprintf(why, n, "%d cores x %d %s lanes x 2 flops x 1 FMA unit x %.0f MHz / 2", used, lanes, isa, mhz);
    return (double)used * lanes * 2.0 * mhz * 1e6 / 2;
}

void mfu_cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown-cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *s = strchr(line, ':');
        if (!s) break;
        s++;
        while (*s == ' ') s++;
        s[strcspn(s, "\n")] = 0;
        for (char *p = s; *p; p++)
            if (*p == '\t') *p = ' ';
        snprintf(buf, n, "%s", s);
        break;
    }
    fclose(f);
}

/* $XDG_CACHE_HOME/tfcore/peak_flops, else ~/.cache/tfcore/peak_flops; the directories made when `make`. */
static int cache_path(char *buf, size_t n, int make) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[4096];
    if (x && *x)
        snprintf(dir, sizeof dir, "%s", x);
    else if (home && *home)
        snprintf(dir, sizeof dir, "%s/.cache", home);
    else
        return -1;
    if (make && mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
    size_t len = strlen(dir);
    if (len + 8 >= sizeof dir) return -1;
    memcpy(dir + len, "/tfcore", 8);
    if (make && mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
    snprintf(buf, n, "%s/peak_flops", dir);
    return 0;
}

/* A cached "model<TAB>threads<TAB>isa<TAB>flops" line for this CPU and thread count, or 0. */
static double cached_peak(const char *model, int threads, char *isa, size_t n) {
    char path[4200], line[1024];
    if (cache_path(path, sizeof path, 0) != 0) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    double r = 0;
    while (fgets(line, sizeof line, f)) {
        char *t1 = strchr(line, '\t');
        if (!t1) continue;
        *t1 = 0;
        int th = 0;
        char is[32];
        double v = 0;
        if (strcmp(line, model) == 0 && sscanf(t1 + 1, "%d\t%31s\t%lf", &th, is, &v) == 3 && th == threads && v > 0) {
            r = v;
            snprintf(isa, n, "%s", is);
        }
    }
    fclose(f);
    return r;
}

/* Append a "model<TAB>threads<TAB>isa<TAB>flops" line (the last line for a CPU and thread count is the one read). */
static void cache_store(const char *model, int threads, const char *isa, double p) {
    char path[4200];
    FILE *f = p > 0 && cache_path(path, sizeof path, 1) == 0 ? fopen(path, "a") : NULL;
    if (!f) return;
    fprintf(f, "%s\t%d\t%s\t%.6g\n", model, threads, isa, p);
    fclose(f);
}

double mfu_measure_again(int threads, double was) {
    const char *isa;
    const double p = mfu_measure_cpu_peak(threads, &isa);
    char model[256];
    mfu_cpu_model(model, sizeof model);
    if (p > was) cache_store(model, threads, isa, p);
    return p;
}

double mfu_peak_flops(double given, int32_t cuda_index, int kind, int threads, char *src, size_t n) {
    const int f64 = kind == MFU_F64;
    if (given > 0) {
        snprintf(src, n, "--peak-flops");
        return given;
    }
    if (cuda_index >= 0) {
        char name[256];
        const char *dev = cuda_device_name(cuda_index, name, sizeof name);
        const double p = mfu_cuda_peak(dev, kind == MFU_BF16);
        snprintf(src, n, "%s %s", dev ? dev : "an unnamed CUDA device",
                 p > 0 ? (kind == MFU_BF16 ? "dense bf16 datasheet peak" : "f32 datasheet peak")
                       : "(not in the table; give --peak-flops)");
        return f64 ? 0 : p; /* f64 rates vary too much between cards for one table column */
    }
    char model[256], isa[32] = "?", why[160];
    mfu_cpu_model(model, sizeof model);
    const double floor = mfu_cpu_floor(threads, why, sizeof why);
    double p = cached_peak(model, threads, isa, sizeof isa);
    if (p > 0 && p >= floor) {
        snprintf(src, n, "%s, %d threads, %s FMA (cached)", model, threads, isa);
        return f64 ? p / 2 : p;
    }
    /* none cached, or one too low to be this CPU's peak (measured on a busy machine): measure (again) */
    const double cached = p;
    const char *measured_isa;
    p = mfu_measure_cpu_peak(threads, &measured_isa);
    if (cached > p) p = cached;
    if (p >= floor && p > cached) cache_store(model, threads, measured_isa, p);
    if (p >= floor && cached > 0)
        snprintf(src, n,
                 "%s, %d threads, %s FMA (measured again: the cached %.4g FLOP/s is below the %.4g FLOP/s its ISA and "
                 "clock make plausible, %s)",
                 model, threads, measured_isa, cached, floor, why);
    else if (p >= floor)
        snprintf(src, n, "%s, %d threads, %s FMA (measured now)", model, threads, measured_isa);
    else { /* still too low: the plausible floor, a bound MFU cannot be understated by */
        snprintf(src, n,
                 "%s, %d threads, %s FMA: measured %.4g FLOP/s, below the %.4g FLOP/s its ISA and clock make "
                 "plausible (%s), so that floor is used (a busy machine? give --peak-flops)",
                 model, threads, measured_isa, p, floor, why);
        p = floor;
    }
    return f64 ? p / 2 : p;
}
