/*
 * The first sanity check of any language model: char-tiny (4 layers, 4
 * heads, 128 dims) trained with AdamW on one fixed batch must memorise it —
 * loss below 0.05 within 300 steps. The batch is 2 sequences of 32 tokens
 * (a fixed batch of any size works; this one keeps the test to seconds on
 * two cores).
 */
#include "tfc_test.h"

TEST(char_tiny_overfits_one_batch) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.vocab_size = 65;
    CHECK_OK(tfc_gpt_config_preset("char-tiny", &c));
    tfc_gpt *m;
    CHECK_OK(tfc_gpt_new(&c, 1337, &m));
    /* a fixed batch: a sentence, as ids of a 65-symbol alphabet */
    const char *text = "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak.";
    int32_t xs[64], ys[64];
    for (int i = 0; i < 64; i++) {
        xs[i] = (unsigned char)text[i] % 65;
        ys[i] = (unsigned char)text[i + 1] % 65;
    }
    const int64_t d[2] = {2, 32};
    tfc_tensor *x, *y;
    CHECK_OK(tfc_tensor_from_data(xs, d, 2, TFC_DTYPE_I32, &x));
    CHECK_OK(tfc_tensor_from_data(ys, d, 2, TFC_DTYPE_I32, &y));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    tfc_optim_options o = TFC_ADAMW_OPTIONS_INIT;
    o.lr = 1e-3;
    o.beta2 = 0.95;
    o.weight_decay = 0.0;
    tfc_optim *opt;
    CHECK_OK(tfc_optim_adamw(&o, &opt));
    CHECK_OK(tfc_optim_add_params(opt, ps, n, NULL));
    tfc_graph *g;
    CHECK_OK(tfc_graph_new(&g));
    double first = 0, l = 99;
    int step = 0;
    for (; step < 300 && l >= 0.05; step++) {
        tfc_tensor *loss;
        CHECK_OK(tfc_gpt_forward(m, g, x, y, NULL, &loss));
        CHECK_OK(tfc_graph_backward(g, loss, NULL));
        CHECK_OK(tfc_tensor_item(loss, &l));
        if (step == 0) first = l;
        CHECK_OK(tfc_graph_clear(g));
        CHECK_OK(tfc_optim_clip_grad_norm(opt, 1.0, NULL));
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_zero_grad(opt, 1));
        tfc_tensor_release(loss);
    }
    printf("loss %.4f -> %.4f after %d steps\n", first, l, step);
    CHECK(first > 3.5); /* ~ln 65 at initialisation */
    CHECK(l < 0.05);
    tfc_graph_release(g);
    tfc_optim_release(opt);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_gpt_release(m);
}

TFC_TEST_MAIN
