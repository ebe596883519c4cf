/*
 * The thread-safety statements of the public headers, exercised from
 * several threads at once. Each test runs the same work on NTHREADS threads
 * released together by a barrier and compares every thread's result with
 * the one a single thread computed before: concurrent use must neither
 * crash nor change a bit. Under ThreadSanitizer (scripts/tsan.sh) the same
 * program proves the absence of data races on these paths.
 *
 * Statements covered (header: statement):
 *   core.h      last error is per thread; version/build info thread-safe
 *   tensor.h    a handle may be read from several threads; retain/release
 *               atomic; the caching allocator serves every thread
 *   ops.h       ops on distinct graphs may run concurrently (forward and
 *               backward, sharing read-only inputs)
 *   graph.h     the profile calls are thread-safe
 *   gpt.h       a model may be read (forward without a graph, generate with
 *               distinct caches) from several threads; tfc_sample
 *   tokenizer.h a finished tokenizer: encode/encode_batch/decode from many
 *   io.h        a loaded safetensors file / an open token file read from
 *               several threads
 */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "tfc_test.h"

#define NTHREADS 4

static pthread_barrier_t barrier;

typedef void *(*thread_fn)(void *);

/* Runs fn(&args[i]) on NTHREADS threads that start together. */
static void run_threads(thread_fn fn, void *args, size_t arg_size) {
    pthread_t th[NTHREADS];
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) CHECK(pthread_create(&th[i], NULL, fn, (char *)args + i * arg_size) == 0);
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
}

/* Per-thread verdicts are collected here and checked on the main thread (the harness's counters are not atomic). */
typedef struct {
    int id;
    int ok;
    char why[256];
} verdict;

static void fail(verdict *v, const char *what) {
    if (v->ok) snprintf(v->why, sizeof v->why, "thread %d: %s (%s)", v->id, what, tfc_last_error());
    v->ok = 0;
}

static void check_verdicts(verdict *v, size_t stride) {
    for (int i = 0; i < NTHREADS; i++) {
        verdict *t = (verdict *)((char *)v + i * stride);
        tfc_test_checks++;
        if (!t->ok) TFC_FAIL_AT("%s", t->why);
    }
}

static int same_bytes(const tfc_tensor *a, const tfc_tensor *b) {
    int64_t n = tfc_tensor_numel(a);
    if (n != tfc_tensor_numel(b) || tfc_tensor_dtype(a) != tfc_tensor_dtype(b)) return 0;
    return memcmp(tfc_tensor_data(a), tfc_tensor_data(b), (size_t)n * tfc_dtype_size(tfc_tensor_dtype(a))) == 0;
}

/* ---- core.h: the last error belongs to the thread that failed ---------- */

static void *last_error_thread(void *arg) {
    verdict *v = arg;
    char want[64];
    snprintf(want, sizeof want, "'cfg'");
    for (int round = 0; round < 200; round++) {
        pthread_barrier_wait(&barrier);
        /* Each thread fails differently at the same moment: a NULL config, or a bad dtype. */
        tfc_status s;
        if (v->id % 2) {
            s = tfc_gpt_new(NULL, 0, NULL);
        } else {
            int64_t dims[1] = {v->id + 1};
            tfc_tensor *t = NULL;
            s = tfc_tensor_empty(dims, 1, (tfc_dtype)99, &t);
        }
        pthread_barrier_wait(&barrier);
        const char *msg = tfc_last_error();
        const char *fn = v->id % 2 ? "tfc_gpt_new" : "tfc_tensor_empty";
        if (s == TFC_OK || !strstr(msg, fn)) fail(v, "last error is not this thread's");
        if (!strcmp(tfc_version_string(), "") || !tfc_build_info()[0] || tfc_version() <= 0) fail(v, "version");
    }
    (void)want;
    return NULL;
}

TEST(last_error_is_per_thread) {
    verdict v[NTHREADS] = {0};
    for (int i = 0; i < NTHREADS; i++) v[i] = (verdict){.id = i, .ok = 1};
    run_threads(last_error_thread, v, sizeof v[0]);
    check_verdicts(v, sizeof v[0]);
}

/* ---- tensor.h: shared handles, atomic retain/release, allocator -------- */

typedef struct {
    verdict v;
    tfc_tensor *shared;
    const float *want;
} shared_tensor_arg;

static void *shared_tensor_thread(void *arg) {
    shared_tensor_arg *a = arg;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 2000; i++) {
        tfc_tensor *r = tfc_tensor_retain(a->shared);
        if (r != a->shared) fail(&a->v, "retain");
        /* Allocations of every size class from every thread at once. */
        int64_t dims[1] = {1 + (i * 37 + a->v.id * 11) % 3000};
        tfc_tensor *tmp = NULL;
        if (tfc_tensor_full(dims, 1, TFC_DTYPE_F32, (double)a->v.id, &tmp) != TFC_OK) {
            fail(&a->v, "full");
        } else {
            float x = ((const float *)tfc_tensor_data(tmp))[dims[0] - 1];
            if (x != (float)a->v.id) fail(&a->v, "allocator handed out memory another thread writes");
            tfc_tensor_release(tmp);
        }
        float got[8];
        if (tfc_tensor_copy_to_host(r, got, sizeof got) != TFC_OK || memcmp(got, a->want, sizeof got))
            fail(&a->v, "shared read");
        tfc_tensor_release(r);
    }
    return NULL;
}

TEST(tensor_handles_and_allocator) {
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t dims[1] = {8};
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_from_data(data, dims, 1, TFC_DTYPE_F32, &t));
    shared_tensor_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) a[i] = (shared_tensor_arg){.v = {.id = i, .ok = 1}, .shared = t, .want = data};
    run_threads(shared_tensor_thread, a, sizeof a[0]);
    check_verdicts(&a[0].v, sizeof a[0]);
    /* Every retain was matched by a release: one reference is left, ours. */
    float got[8];
    CHECK_OK(tfc_tensor_copy_to_host(t, got, sizeof got));
    CHECK(!memcmp(got, data, sizeof got));
    tfc_tensor_release(t);
}

/* ---- ops.h: distinct graphs, forward and backward, shared inputs -------- */

/* loss = sum(gelu(softmax(x @ w, -1) ⊙ 3)); returns loss and dL/dw for a private copy of w. */
static tfc_status graph_step(const tfc_tensor *x, const tfc_tensor *w, tfc_tensor **loss, tfc_tensor **grad) {
    tfc_graph *g = NULL;
    tfc_tensor *wl = NULL, *h = NULL, *s = NULL, *a = NULL;
    tfc_status st = tfc_graph_new(&g);
    if (!st) st = tfc_tensor_clone(w, &wl);
    if (!st) st = tfc_tensor_set_requires_grad(wl, 1);
    if (!st) st = tfc_matmul(g, x, wl, &h);
    if (!st) st = tfc_softmax(g, h, -1, &s);
    if (!st) st = tfc_gelu(g, s, 0, &a);
    if (!st) st = tfc_sum(g, a, NULL, 0, 0, loss);
    if (!st) st = tfc_graph_backward(g, *loss, NULL);
    if (!st) st = tfc_tensor_grad(wl, grad);
    tfc_tensor_release(a);
    tfc_tensor_release(s);
    tfc_tensor_release(h);
    tfc_tensor_release(wl);
    tfc_graph_release(g);
    return st;
}

typedef struct {
    verdict v;
    const tfc_tensor *x, *w, *want_loss, *want_grad;
} graph_arg;

static void *graph_thread(void *arg) {
    graph_arg *a = arg;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 20; i++) {
        /* One thread also flips the (thread-safe) profile while the others record. */
        if (a->v.id == 0 && tfc_profile_enable(i % 2) != TFC_OK) fail(&a->v, "profile_enable");
        tfc_tensor *loss = NULL, *grad = NULL;
        if (graph_step(a->x, a->w, &loss, &grad) != TFC_OK)
            fail(&a->v, "graph step");
        else if (!same_bytes(loss, a->want_loss) || !same_bytes(grad, a->want_grad))
            fail(&a->v, "a concurrent graph computed other bits");
        tfc_tensor_release(loss);
        tfc_tensor_release(grad);
    }
    return NULL;
}

TEST(distinct_graphs_concurrently) {
    int64_t xd[2] = {64, 48}, wd[2] = {48, 40};
    tfc_tensor *x = NULL, *w = NULL, *loss = NULL, *grad = NULL;
    CHECK_OK(tfc_tensor_randn(xd, 2, TFC_DTYPE_F32, 1, 0, &x));
    CHECK_OK(tfc_tensor_randn(wd, 2, TFC_DTYPE_F32, 2, 0, &w));
    CHECK_OK(graph_step(x, w, &loss, &grad));
    graph_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        a[i] = (graph_arg){.v = {.id = i, .ok = 1}, .x = x, .w = w, .want_loss = loss, .want_grad = grad};
    run_threads(graph_thread, a, sizeof a[0]);
    check_verdicts(&a[0].v, sizeof a[0]);
    CHECK_OK(tfc_profile_enable(0));
    CHECK_OK(tfc_profile_reset());
    tfc_tensor_release(loss);
    tfc_tensor_release(grad);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
}

/* ---- gpt.h: one model read by several threads --------------------------- */

#define GEN_NEW 12

typedef struct {
    verdict v;
    tfc_gpt *m;
    const tfc_tensor *idx, *targets, *want_logits, *want_loss;
    const int32_t *want_tokens;
} gpt_arg;

static void *gpt_thread(void *arg) {
    gpt_arg *a = arg;
    const int32_t prompt[3] = {1, 2, 3};
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 3; i++) {
        tfc_tensor *logits = NULL, *loss = NULL;
        if (tfc_gpt_forward(a->m, NULL, a->idx, a->targets, &logits, &loss) != TFC_OK)
            fail(&a->v, "forward");
        else if (!same_bytes(logits, a->want_logits) || !same_bytes(loss, a->want_loss))
            fail(&a->v, "concurrent forward computed other bits");
        tfc_tensor_release(logits);
        tfc_tensor_release(loss);
        int32_t out[GEN_NEW];
        if (tfc_gpt_generate(a->m, prompt, 3, GEN_NEW, 0.8, 20, 0.95, 7, out, GEN_NEW, NULL, NULL) != TFC_OK)
            fail(&a->v, "generate");
        else if (memcmp(out, a->want_tokens, sizeof out))
            fail(&a->v, "concurrent generate drew other tokens");
    }
    return NULL;
}

TEST(gpt_read_by_several_threads) {
    tfc_gpt_config cfg = TFC_GPT_CONFIG_INIT;
    cfg.n_layer = 2;
    cfg.n_head = 2;
    cfg.n_embd = 32;
    cfg.block_size = 16;
    cfg.vocab_size = 50;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&cfg, 3, &m));
    int32_t ids[2 * 16], tg[2 * 16];
    for (int i = 0; i < 32; i++) ids[i] = (i * 7) % 50, tg[i] = (i * 11 + 3) % 50;
    int64_t dims[2] = {2, 16};
    tfc_tensor *idx = NULL, *targets = NULL, *logits = NULL, *loss = NULL;
    CHECK_OK(tfc_tensor_from_data(ids, dims, 2, TFC_DTYPE_I32, &idx));
    CHECK_OK(tfc_tensor_from_data(tg, dims, 2, TFC_DTYPE_I32, &targets));
    CHECK_OK(tfc_gpt_forward(m, NULL, idx, targets, &logits, &loss));
    int32_t want[GEN_NEW];
    const int32_t prompt[3] = {1, 2, 3};
    CHECK_OK(tfc_gpt_generate(m, prompt, 3, GEN_NEW, 0.8, 20, 0.95, 7, want, GEN_NEW, NULL, NULL));
    gpt_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        a[i] = (gpt_arg){.v = {.id = i, .ok = 1},
                         .m = m,
                         .idx = idx,
                         .targets = targets,
                         .want_logits = logits,
                         .want_loss = loss,
                         .want_tokens = want};
    run_threads(gpt_thread, a, sizeof a[0]);
    check_verdicts(&a[0].v, sizeof a[0]);
    tfc_tensor_release(logits);
    tfc_tensor_release(loss);
    tfc_tensor_release(idx);
    tfc_tensor_release(targets);
    tfc_gpt_release(m);
}

/* ---- tokenizer.h: a finished tokenizer used by many threads ------------- */

static const char corpus[] =
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n"
    "First Citizen:\nFirst, you know Caius Marcius is chief enemy to the people.\n";

typedef struct {
    verdict v;
    const tfc_tensor *unused;
    const tfc_tokenizer *tok;
    const int32_t *want_ids;
    size_t want_n;
} tok_arg;

static void *tokenizer_thread(void *arg) {
    tok_arg *a = arg;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 50; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tfc_tokenizer_encode(a->tok, corpus, sizeof corpus - 1, TFC_SPECIAL_ALLOWED, &ids, &n) != TFC_OK ||
            n != a->want_n || memcmp(ids, a->want_ids, n * sizeof *ids))
            fail(&a->v, "encode");
        char *text = NULL;
        size_t len = 0;
        if (tfc_tokenizer_decode(a->tok, ids, n, &text, &len) != TFC_OK || len != sizeof corpus - 1 ||
            memcmp(text, corpus, len))
            fail(&a->v, "decode");
        tfc_free(text);
        tfc_free(ids);
        /* encode_batch starts its own threads from inside this one. */
        const char *texts[2] = {corpus, corpus + 15};
        size_t lens[2] = {15, sizeof corpus - 16};
        size_t *offs = NULL;
        if (tfc_tokenizer_encode_batch(a->tok, texts, lens, 2, TFC_SPECIAL_ALLOWED, 2, &ids, &offs) != TFC_OK)
            fail(&a->v, "encode_batch");
        tfc_free(ids);
        tfc_free(offs);
    }
    return NULL;
}

TEST(tokenizer_used_by_many_threads) {
    tfc_tokenizer *tok = NULL;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_CL100K, &tok));
    CHECK_OK(tfc_tokenizer_train(tok, corpus, sizeof corpus - 1, 300));
    CHECK_OK(tfc_tokenizer_add_special(tok, "<|endoftext|>", 300));
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(tfc_tokenizer_encode(tok, corpus, sizeof corpus - 1, TFC_SPECIAL_ALLOWED, &ids, &n));
    tok_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        a[i] = (tok_arg){.v = {.id = i, .ok = 1}, .tok = tok, .want_ids = ids, .want_n = n};
    run_threads(tokenizer_thread, a, sizeof a[0]);
    check_verdicts(&a[0].v, sizeof a[0]);
    tfc_free(ids);
    tfc_tokenizer_release(tok);
}

/* ---- io.h: one safetensors file and one token file, many readers -------- */

typedef struct {
    verdict v;
    const tfc_safetensors *st;
    const tfc_token_file *tf;
    const tfc_tensor *want_w;
    const tfc_tensor *want_x;
} io_arg;

static void *io_thread(void *arg) {
    io_arg *a = arg;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 100; i++) {
        tfc_tensor *w = NULL;
        if (tfc_safetensors_find(a->st, "w", &w) != TFC_OK || !same_bytes(w, a->want_w)) fail(&a->v, "find");
        tfc_tensor_release(w);
        const char *val = NULL;
        if (tfc_safetensors_metadata(a->st, "step", &val) != TFC_OK || strcmp(val, "42")) fail(&a->v, "metadata");
        tfc_tensor *x = NULL, *y = NULL;
        if (tfc_token_file_batch(a->tf, 0, 1000, 4, 8, 5, 9, &x, &y) != TFC_OK || !same_bytes(x, a->want_x))
            fail(&a->v, "token batch");
        tfc_tensor_release(x);
        tfc_tensor_release(y);
    }
    return NULL;
}

TEST(io_handles_read_by_many_threads) {
    char dir[] = "/tmp/tfc_threads_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char st_path[64], tf_path[64];
    snprintf(st_path, sizeof st_path, "%s/w.safetensors", dir);
    snprintf(tf_path, sizeof tf_path, "%s/t.bin", dir);
    int64_t wd[2] = {7, 9};
    tfc_tensor *w = NULL;
    CHECK_OK(tfc_tensor_randn(wd, 2, TFC_DTYPE_F32, 4, 0, &w));
    const char *names[1] = {"w"}, *keys[1] = {"step"}, *vals[1] = {"42"};
    CHECK_OK(tfc_safetensors_save(st_path, names, &w, 1, keys, vals, 1));
    int32_t ids[1000];
    for (int i = 0; i < 1000; i++) ids[i] = (i * 31) % 97;
    CHECK_OK(tfc_token_file_write(tf_path, ids, 1000, 97));
    tfc_safetensors *st = NULL;
    tfc_token_file *tf = NULL;
    tfc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tfc_safetensors_load(st_path, &st));
    CHECK_OK(tfc_token_file_open(tf_path, &tf));
    CHECK_OK(tfc_token_file_batch(tf, 0, 1000, 4, 8, 5, 9, &x, &y));
    io_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        a[i] = (io_arg){.v = {.id = i, .ok = 1}, .st = st, .tf = tf, .want_w = w, .want_x = x};
    run_threads(io_thread, a, sizeof a[0]);
    check_verdicts(&a[0].v, sizeof a[0]);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_tensor_release(w);
    tfc_safetensors_release(st);
    tfc_token_file_close(tf);
    unlink(st_path);
    unlink(tf_path);
    rmdir(dir);
}

TFC_TEST_MAIN
