/*
 * Messages name the public function the caller called (issue #21, defect 5):
 * a failure inside another public function or an internal helper reaches the
 * caller as "fn: <inner message>", a message is never written over itself,
 * and the values found accepted silently are refused. The whole header is
 * covered by tests/badargs (NULL, sizes, every allocation failing); these
 * are the reproducers of the issue, each checked in full.
 */
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "tfc_test.h"

TFC_TEST_MAIN

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

#define CHECK_PREFIX(prefix)                                                                  \
    do {                                                                                      \
        tfc_test_checks++;                                                                    \
        if (!starts_with(tfc_last_error(), prefix))                                           \
            TFC_FAIL_AT("message '%s' does not start with '%s'", tfc_last_error(), (prefix)); \
    } while (0)

TEST(a_message_built_from_the_last_message_is_not_written_over_itself) {
    /* What the optimizer's state allocation does: wrap the inner failure. */
    tfc_err(TFC_ERR_OOM, "out of memory allocating a storage header");
    tfc_err(TFC_ERR_OOM, "%s: cannot allocate %s: %s", "tfc_optim_step", "exp_avg", tfc_last_error());
    CHECK(strcmp(tfc_last_error(),
                 "tfc_optim_step: cannot allocate exp_avg: out of memory allocating a storage "
                 "header") == 0);
}

TEST(err_in_names_the_function_once) {
    tfc_err(TFC_ERR_OOM, "out of memory allocating a view handle");
    CHECK(tfc_err_in("tfc_view", TFC_ERR_OOM) == TFC_ERR_OOM);
    CHECK(strcmp(tfc_last_error(), "tfc_view: out of memory allocating a view handle") == 0);
    CHECK(tfc_err_in("tfc_view", TFC_ERR_OOM) == TFC_ERR_OOM); /* already named: unchanged */
    CHECK(strcmp(tfc_last_error(), "tfc_view: out of memory allocating a view handle") == 0);
    CHECK(tfc_err_in("tfc_flatten", TFC_ERR_OOM) == TFC_ERR_OOM); /* a public function calling another */
    CHECK(strcmp(tfc_last_error(), "tfc_flatten: tfc_view: out of memory allocating a view handle") == 0);
    tfc_err(TFC_ERR_SHAPE, "tfc_view_x: y"); /* a longer name with fn as its prefix is another function */
    tfc_err_in("tfc_view", TFC_ERR_SHAPE);
    CHECK(strcmp(tfc_last_error(), "tfc_view: tfc_view_x: y") == 0);
    tfc_clear_error();
    CHECK(tfc_err_in("tfc_view", TFC_OK) == TFC_OK && tfc_last_error()[0] == 0);
}

TEST(gpt_new_names_itself_when_a_parameter_cannot_be_allocated) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1;
    c.n_head = 1;
    c.n_embd = 1 << 16;
    c.block_size = 1;
    c.vocab_size = INT32_MAX; /* wte alone is 2^49 bytes */
    tfc_gpt *m = NULL;
    CHECK_ERR(tfc_gpt_new(&c, 1, &m), TFC_ERR_OOM, "cannot allocate f32 [2147483647,65536]");
    CHECK_PREFIX("tfc_gpt_new: ");
    CHECK(m == NULL);
}

TEST(cache_new_names_itself_when_the_cache_cannot_be_allocated) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1;
    c.n_head = 1;
    c.n_embd = 64;
    c.block_size = 1 << 12;
    c.vocab_size = 16;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 1, &m));
    tfc_gpt_cache *kc = NULL;
    /* [2^31 - 1, 1, 2^12, 64] f32 is 2^51 bytes */
    CHECK_ERR(tfc_gpt_cache_new(m, INT32_MAX, &kc), TFC_ERR_OOM, "cannot allocate");
    CHECK_PREFIX("tfc_gpt_cache_new: ");
    CHECK(kc == NULL);
    tfc_gpt_release(m);
}

TEST(generate_names_itself_for_a_bad_sampling_argument) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1;
    c.n_head = 1;
    c.n_embd = 8;
    c.block_size = 8;
    c.vocab_size = 16;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 1, &m));
    int32_t prompt[1] = {1}, out[4];
    CHECK_ERR(tfc_gpt_generate(m, prompt, 1, 4, 1.0, -1, 1.0, 0, out, 4, NULL, NULL), TFC_ERR_INVALID_ARG,
              "top_k is -1");
    CHECK_PREFIX("tfc_gpt_generate: ");
    tfc_gpt_release(m);
}

TEST(random_tensors_name_themselves) {
    tfc_tensor *t = NULL;
    CHECK_ERR(tfc_tensor_randn(NULL, -1, TFC_DTYPE_F32, 0, 0, &t), TFC_ERR_INVALID_ARG, "ndim is -1");
    CHECK_PREFIX("tfc_tensor_randn: ");
    CHECK_ERR(tfc_tensor_uniform((int64_t[]){2}, 1 << 20, TFC_DTYPE_F32, 0, 1, 0, 0, &t), TFC_ERR_INVALID_ARG, "ndim");
    CHECK_PREFIX("tfc_tensor_uniform: ");
    CHECK(t == NULL);
}

TEST(softmax_names_itself_for_a_bad_dim) {
    tfc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tfc_tensor_zeros((int64_t[]){2, 3}, 2, TFC_DTYPE_F32, &x));
    CHECK_ERR(tfc_softmax(NULL, x, 5, &y), TFC_ERR_INVALID_ARG, "dim 5");
    CHECK_PREFIX("tfc_softmax: ");
    CHECK_ERR(tfc_log_softmax(NULL, x, INT32_MIN, &y), TFC_ERR_INVALID_ARG, "dim -2147483648");
    CHECK_PREFIX("tfc_log_softmax: ");
    CHECK(y == NULL);
    tfc_tensor_release(x);
}

TEST(arguments_are_named_as_the_header_names_them) {
    int32_t n = 0;
    CHECK_ERR(tfc_tokenizer_vocab_size(NULL, &n), TFC_ERR_INVALID_ARG, "tfc_tokenizer_vocab_size: tok is NULL");
    tfc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tfc_tensor_zeros((int64_t[]){2, 3}, 2, TFC_DTYPE_F32, &x));
    CHECK_ERR(tfc_where(NULL, NULL, x, x, &y), TFC_ERR_INVALID_ARG, "tfc_where: cond is NULL");
    CHECK_ERR(tfc_masked_fill(NULL, x, NULL, 0, &y), TFC_ERR_INVALID_ARG, "tfc_masked_fill: mask is NULL");
    CHECK_ERR(tfc_reshape(NULL, x, NULL, 2, &y), TFC_ERR_INVALID_ARG, "tfc_reshape: dims is NULL with ndim 2");
    CHECK_ERR(tfc_permute(NULL, x, NULL, 2, &y), TFC_ERR_INVALID_ARG, "tfc_permute: perm is NULL with ndim 2");
    CHECK_ERR(tfc_expand(NULL, x, NULL, 2, &y), TFC_ERR_INVALID_ARG, "tfc_expand: dims is NULL with ndim 2");
    CHECK(y == NULL);
    tfc_tensor_release(x);
}

static int gradcheck_calls;
static tfc_status count_calls(tfc_graph *g, tfc_tensor *const *inputs, int32_t n, tfc_tensor **out, void *ctx) {
    (void)g, (void)inputs, (void)n, (void)out, (void)ctx;
    gradcheck_calls++;
    return tfc_err(TFC_ERR_INVALID_ARG, "count_calls: called");
}

TEST(values_accepted_silently_before_are_refused_or_computed) {
    double lr = -1;
    /* warmup + 1 overflowed int64 (UBSan: signed overflow) */
    CHECK_OK(tfc_lr_constant(0, 1.0, INT64_MAX, &lr));
    CHECK(lr > 0 && lr < 1e-18);
    CHECK_OK(tfc_lr_inverse_sqrt(INT64_MAX - 1, 1.0, INT64_MAX, &lr));
    CHECK_CLOSE(lr, 1.0, 1e-12);
    double err = 0;
    CHECK_ERR(tfc_gradcheck(count_calls, NULL, -1, NULL, 1e-6, &err, NULL, NULL), TFC_ERR_INVALID_ARG,
              "tfc_gradcheck: n is -1");
    CHECK(gradcheck_calls == 0);
}
