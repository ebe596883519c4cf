/*
 * Peak memory while loading Hugging Face weights (issue 35): loading an f32
 * model from f32 or bf16 files must raise the process's peak RSS (VmHWM in
 * /proc/self/status) by at most 1.2x the loaded model, plus a fixed slack
 * (SLACK_MB below: the library's first-use costs, the thread pool's stacks,
 * the index and headers parsed).
 *
 * The model here is 41 f32 tensors, 192 MiB: an embedding [8192, 1024]
 * (32 MiB, more than one copy step of the loader contract) and 40 matrices
 * [1024, 1024]. Its files are written by this test byte by byte (not by
 * the library's writer): a directory of three f32 shards of 64 MiB and an
 * index, and a directory with one bf16 model.safetensors (96 MiB). Every
 * value is k/64 for an integer k in [-128, 128), exact in bf16, so the
 * loaded values are checked for equality.
 *
 * Each load runs in a child process (fork before the library runs anything,
 * so the child's peak starts at its RSS; /proc/self/clear_refs resets it
 * where the kernel allows), which allocates the destination tensors, opens
 * the directory, holds it through a contract and copies, then reads VmHWM.
 * What the bound rules out: reading a file into memory (the reader before
 * mapping held file + tensor copies + model: 3x for f32, 2x for bf16) and
 * mapping without giving pages back (file + model: 2x for f32, 1.5x for
 * bf16): each is over 1.2x + SLACK_MB at this size (the numbers are in
 * docs/ARCHITECTURE.md, lib/io, "Mapped files"). Under AddressSanitizer the
 * peak counts the sanitizer's shadow and quarantine, so there the loads are
 * checked for their values only.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/hf_weights.h"
#include "tfc_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define N_LAYERS 40
#define ROWS 1024
#define COLS 1024
#define EMBED_ROWS 8192
#define N_TENSORS (N_LAYERS + 1)
#define SLACK_MB 16.0

static char dir_[64];

/* Tensor t: its name, rows (all have COLS columns). t = 0 is the embedding. */
static void tensor_name(int t, char *buf, size_t cap) {
    if (t == 0)
        snprintf(buf, cap, "model.embed_tokens.weight");
    else
        snprintf(buf, cap, "model.layers.%d.mlp.weight", t - 1);
}

static int64_t tensor_rows(int t) { return t == 0 ? EMBED_ROWS : ROWS; }

/* Element i of tensor t: k/64 with k in [-128, 128), exact in bf16 and f32. */
static float value(int t, int64_t i) { return (float)((int)((i * 7 + (int64_t)t * 13) % 256) - 128) / 64.0f; }

static void path_of(const char *sub, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s/%s", dir_, sub, name);
}

/*
 * A safetensors file of tensors [t0, t1) in `bytes_per` (4: f32, 2: bf16),
 * header and data streamed from value().
 */
static void write_file(const char *path, int t0, int t1, int bytes_per) {
    char *hdr = malloc(1 << 16);
    size_t n = (size_t)snprintf(hdr, 1 << 16, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int t = t0; t < t1; t++) {
        char name[96];
        tensor_name(t, name, sizeof name);
        const uint64_t bytes = (uint64_t)tensor_rows(t) * COLS * (uint64_t)bytes_per;
        n += (size_t)snprintf(hdr + n, (1 << 16) - n,
                              ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%d],\"data_offsets\":[%llu,%llu]}", name,
                              bytes_per == 4 ? "F32" : "BF16", (long long)tensor_rows(t), COLS, (unsigned long long)off,
                              (unsigned long long)(off + bytes));
        off += bytes;
    }
    n += (size_t)snprintf(hdr + n, (1 << 16) - n, "}");
    while (n % 8) hdr[n++] = ' ';
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) {
        free(hdr);
        return;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)n >> (8 * i));
    CHECK(fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, n, f) == n);
    unsigned char *row = malloc((size_t)COLS * 4);
    for (int t = t0; t < t1; t++)
        for (int64_t r = 0; r < tensor_rows(t); r++) {
            for (int64_t c = 0; c < COLS; c++) {
                const float v = value(t, r * COLS + c);
                uint32_t bits;
                memcpy(&bits, &v, 4);
                if (bytes_per == 4)
                    for (int b = 0; b < 4; b++) row[4 * c + b] = (unsigned char)(bits >> (8 * b));
                else /* k/64 is exact in bf16: its top 16 bits, no rounding to do */
                    for (int b = 0; b < 2; b++) row[2 * c + b] = (unsigned char)(bits >> (16 + 8 * b));
            }
            CHECK(fwrite(row, 1, (size_t)COLS * (size_t)bytes_per, f) == (size_t)COLS * (size_t)bytes_per);
        }
    CHECK(fclose(f) == 0);
    free(row);
    free(hdr);
}

/* f32/: three 64 MiB shards (embedding + 8 layers, 16 layers, 16 layers) and the index; bf16/: model.safetensors. */
static void write_dirs(void) {
    snprintf(dir_, sizeof dir_, "/tmp/tfc_test_hf_rss_XXXXXX");
    CHECK(mkdtemp(dir_) != NULL);
    char p[256];
    path_of("f32", "", p, sizeof p);
    CHECK(mkdir(p, 0700) == 0);
    path_of("bf16", "", p, sizeof p);
    CHECK(mkdir(p, 0700) == 0);
    const int first[4] = {0, 9, 25, N_TENSORS};
    char *index = malloc(1 << 16);
    size_t n = (size_t)snprintf(index, 1 << 16, "{\"metadata\": {\"total_size\": %llu}, \"weight_map\": {",
                                (unsigned long long)((uint64_t)(EMBED_ROWS + N_LAYERS * ROWS) * COLS * 4));
    for (int s = 0; s < 3; s++) {
        char shard[64], name[96];
        snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", s + 1, 3);
        path_of("f32", shard, p, sizeof p);
        write_file(p, first[s], first[s + 1], 4);
        for (int t = first[s]; t < first[s + 1]; t++) {
            tensor_name(t, name, sizeof name);
            n += (size_t)snprintf(index + n, (1 << 16) - n, "%s\"%s\": \"%s\"", t ? ", " : "", name, shard);
        }
    }
    snprintf(index + n, (1 << 16) - n, "}}");
    path_of("f32", "model.safetensors.index.json", p, sizeof p);
    FILE *f = fopen(p, "wb");
    CHECK(f && fputs(index, f) >= 0 && fclose(f) == 0);
    free(index);
    path_of("bf16", "model.safetensors", p, sizeof p);
    write_file(p, 0, N_TENSORS, 2);
}

static void remove_dirs(void) {
    char p[256];
    for (int s = 0; s < 3; s++) {
        char shard[64];
        snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", s + 1, 3);
        path_of("f32", shard, p, sizeof p);
        unlink(p);
    }
    path_of("f32", "model.safetensors.index.json", p, sizeof p);
    unlink(p);
    path_of("bf16", "model.safetensors", p, sizeof p);
    unlink(p);
    path_of("f32", "", p, sizeof p);
    rmdir(p);
    path_of("bf16", "", p, sizeof p);
    rmdir(p);
    rmdir(dir_);
}

/* A field of /proc/self/status in MiB ("VmHWM", "VmRSS"); -1 when unreadable. */
static double status_mb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    const size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0 && line[k] == ':') v = atof(line + k + 1) / 1024.0;
    fclose(f);
    return v;
}

/*
 * The child: load sub/ into new f32 destinations through a contract, then
 * report. Exit status 0: values right and (outside ASan) within the bound;
 * 1: over the bound; 2: a failed call or a wrong value.
 */
static int child_load(const char *sub) {
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    const int reset = fd >= 0 && write(fd, "5", 1) == 1; /* VmHWM := VmRSS */
    if (fd >= 0) close(fd);
    const double rss0 = status_mb("VmRSS"), hwm0 = status_mb("VmHWM");
    char dir[256];
    path_of(sub, "", dir, sizeof dir);
    tfc_tensor *dest[N_TENSORS] = {0};
    tfc_contract *c = NULL;
    tfc_hf_weights *w = NULL;
    tfc_status s = tfc_contract_new("test_rss", dir, "the test model", &c);
    for (int t = 0; t < N_TENSORS && s == TFC_OK; t++) {
        const int64_t dims[2] = {tensor_rows(t), COLS};
        s = tfc_tensor_empty(dims, 2, TFC_DTYPE_F32, &dest[t]);
        char name[96];
        tensor_name(t, name, sizeof name);
        tfc_want want = TFC_WANT_INIT;
        want.name = name;
        want.ndim = 2;
        want.dims[0] = dims[0];
        want.dims[1] = dims[1];
        want.dtypes = TFC_DTYPES_FLOAT;
        want.dest = dest[t];
        if (s == TFC_OK) s = tfc_contract_want(c, &want);
    }
    if (s == TFC_OK) s = tfc_hf_weights_open("test_rss", dir, &w);
    if (s == TFC_OK) s = tfc_contract_hold_hf_weights(c, w);
    tfc_hf_weights_free(w);
    if (s == TFC_OK) s = tfc_contract_load(c);
    tfc_contract_free(c);
    const double hwm1 = status_mb("VmHWM");
    int bad = s != TFC_OK;
    if (bad) fprintf(stderr, "load of %s failed: %s\n", sub, tfc_last_error());
    for (int t = 0; t < N_TENSORS && !bad; t++) {
        const float *v = tfc_tensor_data(dest[t]);
        for (int64_t i = 0; i < tensor_rows(t) * COLS && !bad; i++)
            if (v[i] != value(t, i)) {
                fprintf(stderr, "%s: tensor %d element %lld is %g, wrote %g\n", sub, t, (long long)i, (double)v[i],
                        (double)value(t, i));
                bad = 1;
            }
    }
    for (int t = 0; t < N_TENSORS; t++) tfc_tensor_release(dest[t]);
    if (bad) return 2;
    const double model = (double)(EMBED_ROWS + N_LAYERS * ROWS) * COLS * 4 / (1024.0 * 1024.0);
    const double rise = hwm1 - rss0, bound = 1.2 * model + SLACK_MB;
    printf("%s: model %.1f MiB; VmRSS before %.1f MiB (VmHWM %.1f, reset %s), VmHWM after %.1f MiB: peak rise "
           "%.1f MiB = %.3fx the model (bound %.1f MiB)%s\n",
           sub, model, rss0, hwm0, reset ? "yes" : "no", hwm1, rise, rise / model, bound,
           UNDER_ASAN ? " [ASan: not checked]" : "");
    fflush(stdout);
    return !UNDER_ASAN && !(rise <= bound);
}

static void load_in_child(const char *sub) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) _exit(child_load(sub));
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TFC_FAIL_AT("loading %s: the child %s %d", sub, WIFEXITED(st) ? "exited with" : "died of signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

TEST(loading_f32_shards_and_a_bf16_file_peaks_within_1_2x_the_model) {
    write_dirs();
    load_in_child("f32");
    load_in_child("bf16");
    remove_dirs();
}

TFC_TEST_MAIN
