/*
 * The loader contract (lib/io/tensor_contract.h) on its own, a case per
 * rule: files made up in the test as lists of held tensors with
 * hand-written names, dtypes, shapes, spans and values; the oracle is the
 * rule as the header states it (a clean error naming the function, the file
 * and the tensor, or a load whose values are the hand-written ones), and,
 * for every refusal, destinations left exactly as they were.
 */
#include <math.h>
#include <unistd.h>

#include "core/error.h"
#include "io/tensor_contract.h"
#include "tfc_test.h"

static const char *FN = "tfc_test_load";

static tfc_contract *contract(void) {
    tfc_contract *c = NULL;
    CHECK_OK(tfc_contract_new(FN, "f.bin", "the test model", &c));
    return c;
}

/* A held f32 tensor of the given dims filled with base, base+1, ...; values kept. */
static void hold_f32(tfc_contract *c, const char *name, const int64_t *dims, int32_t nd, float base) {
    int64_t n = 1;
    for (int32_t i = 0; i < nd; i++) n *= dims[i];
    float v[64];
    for (int64_t i = 0; i < n && i < 64; i++) v[i] = base + (float)i;
    tfc_held h = {.name = name, .dtype = TFC_DTYPE_F32, .ndim = nd};
    memcpy(h.dims, dims, (size_t)nd * sizeof *dims);
    CHECK_OK(tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_F32, &h.values));
    CHECK_OK(tfc_contract_hold(c, &h));
}

/* A held tensor of dtype dt (values in that dtype, zeros). */
static void hold_dt(tfc_contract *c, const char *name, tfc_dtype dt, const int64_t *dims, int32_t nd) {
    tfc_held h = {.name = name, .dtype = dt, .ndim = nd};
    memcpy(h.dims, dims, (size_t)nd * sizeof *dims);
    CHECK_OK(tfc_tensor_zeros(dims, nd, dt, &h.values));
    CHECK_OK(tfc_contract_hold(c, &h));
}

static tfc_want want(const char *name, const int64_t *dims, int32_t nd, tfc_tensor *dest) {
    tfc_want w = TFC_WANT_INIT;
    w.name = name;
    w.ndim = nd;
    memcpy(w.dims, dims, (size_t)nd * sizeof *dims);
    w.dtypes = TFC_DTYPES_FLOAT;
    w.dest = dest;
    return w;
}

static tfc_tensor *filled(const int64_t *dims, int32_t nd, tfc_dtype dt, double v) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_empty(dims, nd, dt, &t));
    CHECK_OK(tfc_tensor_fill(t, v));
    return t;
}

/* Every element of t (f32 or f64) equals v. */
static int all_equal(const tfc_tensor *t, double v) {
    double buf[64];
    tfc_tensor *d = NULL;
    if (tfc_cast(NULL, t, TFC_DTYPE_F64, &d) != TFC_OK) return 0;
    int64_t n = tfc_tensor_numel(d);
    int ok = tfc_tensor_copy_to_host(d, buf, (size_t)n * sizeof *buf) == TFC_OK;
    for (int64_t i = 0; ok && i < n; i++) ok = buf[i] == v;
    tfc_tensor_release(d);
    return ok;
}

static const int64_t D23[2] = {2, 3}, D3[1] = {3}, D4[1] = {4}, D32[2] = {3, 2};

TEST(a_matching_file_loads_its_values_converted) {
    tfc_contract *c = contract();
    tfc_tensor *a = filled(D23, 2, TFC_DTYPE_F64, -1.0), *b = filled(D3, 1, TFC_DTYPE_F32, -1.0);
    tfc_want wa = want("a", D23, 2, a), wb = want("b", D3, 1, b);
    CHECK_OK(tfc_contract_want(c, &wa));
    CHECK_OK(tfc_contract_want(c, &wb));
    hold_f32(c, "b", D3, 1, 10.0f); /* file order differs from the wanted order */
    hold_f32(c, "a", D23, 2, 0.5f);
    CHECK_OK(tfc_contract_load(c));
    double av[6];
    float bv[3];
    CHECK_OK(tfc_tensor_copy_to_host(a, av, sizeof av));
    CHECK_OK(tfc_tensor_copy_to_host(b, bv, sizeof bv));
    for (int i = 0; i < 6; i++) CHECK(av[i] == 0.5 + i); /* f32 -> f64 exactly */
    CHECK(bv[0] == 10.0f && bv[1] == 11.0f && bv[2] == 12.0f);
    CHECK(tfc_contract_found(c, 0) == &c->held[1] && tfc_contract_found(c, 1) == &c->held[0]);
    tfc_contract_free(c);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
}

TEST(rule1_a_tensor_nothing_wants_is_refused_by_name) {
    tfc_contract *c = contract();
    tfc_tensor *a = filled(D3, 1, TFC_DTYPE_F32, -1.0);
    tfc_want wa = want("a", D3, 1, a);
    CHECK_OK(tfc_contract_want(c, &wa));
    hold_f32(c, "a", D3, 1, 1.0f);
    hold_f32(c, "zz.unused", D3, 1, 1.0f);
    CHECK_ERR(tfc_contract_load(c), TFC_ERR_FORMAT,
              "tfc_test_load: 'f.bin' holds a tensor 'zz.unused' that the test model does not have");
    CHECK(all_equal(a, -1.0)); /* nothing half-loaded: a matched, but is not written */
    tfc_contract_free(c);
    tfc_tensor_release(a);
}

TEST(rule1_one_tensor_under_both_its_names_is_refused) {
    tfc_contract *c = contract();
    tfc_want w = want("transformer.x", D3, 1, NULL);
    w.alias = "x";
    CHECK_OK(tfc_contract_want(c, &w));
    hold_f32(c, "x", D3, 1, 1.0f);
    CHECK_OK(tfc_contract_check(c)); /* either name alone */
    hold_f32(c, "transformer.x", D3, 1, 2.0f);
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "holds tensor transformer.x twice, as 'x' and as 'transformer.x'");
    tfc_contract_free(c);
}

TEST(rule2_required_present_optional_and_ignored_may_be_absent) {
    tfc_contract *c = contract();
    tfc_tensor *o = filled(D3, 1, TFC_DTYPE_F32, -1.0);
    tfc_want r = want("req", D3, 1, NULL), opt = want("opt", D3, 1, o), ign = TFC_WANT_INIT;
    r.hint = " (the config says so)";
    opt.presence = TFC_WANT_OPTIONAL;
    ign.name = "buf";
    ign.ndim = -1;
    ign.presence = TFC_WANT_IGNORED;
    CHECK_OK(tfc_contract_want(c, &r));
    CHECK_OK(tfc_contract_want(c, &opt));
    CHECK_OK(tfc_contract_want(c, &ign));
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "'f.bin' has no tensor 'req' (the config says so)");
    hold_f32(c, "req", D3, 1, 1.0f);
    CHECK_OK(tfc_contract_load(c)); /* optional and ignored absent */
    CHECK(tfc_contract_found(c, 1) == NULL && all_equal(o, -1.0));
    /* an ignored buffer of any dtype and shape is consumed and never read */
    const int64_t d4[4] = {1, 1, 2, 2};
    hold_dt(c, "buf", TFC_DTYPE_U8, d4, 4);
    CHECK_OK(tfc_contract_load(c));
    CHECK(tfc_contract_found(c, 2) != NULL);
    tfc_contract_free(c);
    tfc_tensor_release(o);
}

TEST(rule2_a_group_is_all_present_or_all_absent) {
    tfc_contract *c = contract();
    tfc_want a = want("l0.A", D3, 1, NULL), b = want("l0.B", D3, 1, NULL);
    a.presence = b.presence = TFC_WANT_OPTIONAL;
    a.group = b.group = 1;
    CHECK_OK(tfc_contract_want(c, &a));
    CHECK_OK(tfc_contract_want(c, &b));
    CHECK_OK(tfc_contract_check(c)); /* neither */
    hold_f32(c, "l0.A", D3, 1, 1.0f);
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "'f.bin' has l0.A but not l0.B");
    hold_f32(c, "l0.B", D3, 1, 1.0f);
    CHECK_OK(tfc_contract_check(c)); /* both */
    tfc_contract_free(c);
}

TEST(rule3_dtypes_are_checked_before_any_conversion) {
    tfc_contract *c = contract();
    tfc_tensor *a = filled(D3, 1, TFC_DTYPE_F32, -1.0), *b = filled(D3, 1, TFC_DTYPE_F32, -1.0);
    tfc_want wa = want("a", D3, 1, a), wb = want("b", D3, 1, b);
    CHECK_OK(tfc_contract_want(c, &wa));
    CHECK_OK(tfc_contract_want(c, &wb));
    hold_f32(c, "a", D3, 1, 1.0f);
    hold_dt(c, "b", TFC_DTYPE_I32, D3, 1); /* integers relabelled where floats belong */
    CHECK_ERR(tfc_contract_load(c), TFC_ERR_FORMAT, "'f.bin': tensor 'b' is i32, need a float dtype");
    CHECK(all_equal(a, -1.0) && all_equal(b, -1.0));
    tfc_contract_free(c);
    /* a narrower set is listed */
    c = contract();
    tfc_want u = want("codes", D3, 1, NULL);
    u.dtypes = TFC_DTYPE_BIT(TFC_DTYPE_U8);
    CHECK_OK(tfc_contract_want(c, &u));
    hold_f32(c, "codes", D3, 1, 0.0f);
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "tensor 'codes' is f32, need u8");
    tfc_contract_free(c);
    c = contract();
    u.dtypes = TFC_DTYPE_BIT(TFC_DTYPE_F32) | TFC_DTYPE_BIT(TFC_DTYPE_F64);
    CHECK_OK(tfc_contract_want(c, &u));
    hold_dt(c, "codes", TFC_DTYPE_BF16, D3, 1);
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "tensor 'codes' is bf16, need f32 or f64");
    tfc_contract_free(c);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
}

TEST(rule4_shapes_must_be_the_wanted_ones) {
    tfc_contract *c = contract();
    tfc_want w = want("w", D23, 2, NULL);
    CHECK_OK(tfc_contract_want(c, &w));
    hold_f32(c, "w", D32, 2, 0.0f);
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "'f.bin' holds w as [3,2], the test model needs [2,3]");
    tfc_contract_free(c);
    c = contract();
    CHECK_OK(tfc_contract_want(c, &w));
    const int64_t d6[1] = {6};
    hold_f32(c, "w", d6, 1, 0.0f); /* the same count of values in another rank */
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "holds w as [6], the test model needs [2,3]");
    tfc_contract_free(c);
}

TEST(rule4_a_symbol_takes_one_value_within_its_bounds) {
    tfc_contract *c = contract();
    int32_t r;
    CHECK_OK(tfc_contract_add_symbol(c, "r", 1, 3, &r));
    tfc_want a = want("A", D23, 2, NULL), b = want("B", D23, 2, NULL);
    a.dims[0] = TFC_DIM_SYM(r), a.dims[1] = 4; /* [r, 4] */
    b.dims[0] = 5, b.dims[1] = TFC_DIM_SYM(r); /* [5, r] */
    CHECK_OK(tfc_contract_want(c, &a));
    CHECK_OK(tfc_contract_want(c, &b));
    CHECK(strcmp(tfc_contract_fmt_want(c, &c->want[0]), "[r,4]") == 0);
    const int64_t a2[2] = {2, 4}, b2[2] = {5, 2}, b3[2] = {5, 3};
    hold_f32(c, "A", a2, 2, 0.0f);
    hold_f32(c, "B", b2, 2, 0.0f);
    CHECK_OK(tfc_contract_check(c));
    CHECK(tfc_contract_sym_value(c, r) == 2);
    tfc_contract_free(c);
    /* B's r differs from A's */
    c = contract();
    CHECK_OK(tfc_contract_add_symbol(c, "r", 1, 3, &r));
    CHECK_OK(tfc_contract_want(c, &a));
    CHECK_OK(tfc_contract_want(c, &b));
    hold_f32(c, "A", a2, 2, 0.0f);
    hold_f32(c, "B", b3, 2, 0.0f);
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "holds B as [5,3] (r = 3) where earlier tensors have r = 2");
    CHECK(tfc_contract_sym_value(c, r) == -1); /* no passing check */
    tfc_contract_free(c);
    /* outside [1, 3] */
    c = contract();
    CHECK_OK(tfc_contract_add_symbol(c, "r", 1, 3, &r));
    CHECK_OK(tfc_contract_want(c, &a));
    const int64_t a9[2] = {9, 4};
    hold_f32(c, "A", a9, 2, 0.0f);
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "holds A as [9,4], the test model needs [r,4] with 1 <= r <= 3");
    tfc_contract_free(c);
}

TEST(rule5_a_twin_must_repeat_the_bytes) {
    for (int k = 0; k < 3; k++) {
        tfc_contract *c = contract();
        tfc_want e = want("wte", D3, 1, NULL), h = want("lm_head", D3, 1, NULL);
        h.presence = TFC_WANT_OPTIONAL;
        h.same_as = 0;
        h.hint = ": set tied false";
        CHECK_OK(tfc_contract_want(c, &e));
        CHECK_OK(tfc_contract_want(c, &h));
        hold_f32(c, "wte", D3, 1, 1.0f);
        if (k == 0) hold_f32(c, "lm_head", D3, 1, 1.0f); /* the very bytes */
        if (k == 1) hold_f32(c, "lm_head", D3, 1, 1.5f); /* other values */
        if (k == 2) hold_dt(c, "lm_head", TFC_DTYPE_F64, D3, 1);
        if (k == 0)
            CHECK_OK(tfc_contract_check(c));
        else
            CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT,
                      "'f.bin' holds a tensor 'lm_head' that is not a copy of 'wte': set tied false");
        tfc_contract_free(c);
    }
}

TEST(rule6_metadata_claims_are_held_against_the_tensors) {
    for (int k = 0; k < 2; k++) {
        tfc_contract *c = contract();
        int32_t r;
        CHECK_OK(tfc_contract_add_symbol(c, "rank", 1, 8, &r));
        CHECK_OK(tfc_contract_add_claim(c, r, k ? 3 : 2, "metadata x.rank"));
        tfc_want a = want("A", D23, 2, NULL);
        a.dims[0] = TFC_DIM_SYM(r), a.dims[1] = 4;
        CHECK_OK(tfc_contract_want(c, &a));
        const int64_t a2[2] = {2, 4};
        hold_f32(c, "A", a2, 2, 0.0f);
        if (k == 0)
            CHECK_OK(tfc_contract_check(c));
        else
            CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT,
                      "'f.bin': metadata x.rank says rank = 3 but the tensors have rank = 2");
        tfc_contract_free(c);
    }
}

/* A file of three tensors laid from byte 16, the third's end moved by `end_shift`, the second's start by `gap`. */
static tfc_status spans(int64_t gap, int64_t end_shift, uint64_t file_end) {
    tfc_contract *c = contract();
    const char *names[3] = {"a", "b", "c"};
    uint64_t at = 16;
    for (int i = 0; i < 3; i++) {
        tfc_want w = want(names[i], D4, 1, NULL);
        w.dtypes = 0;
        CHECK_OK(tfc_contract_want(c, &w));
        tfc_held h = {.name = names[i], .dtype = TFC_DTYPE_F32, .ndim = 1, .dims = {4}};
        h.begin = (uint64_t)((int64_t)at + (i == 1 ? gap : 0));
        h.end = (uint64_t)((int64_t)h.begin + 16 + (i == 2 ? end_shift : 0));
        at = h.end;
        CHECK_OK(tfc_contract_hold(c, &h));
    }
    tfc_contract_set_span(c, 16, file_end);
    tfc_status s = tfc_contract_check(c);
    tfc_contract_free(c);
    return s;
}

TEST(rule7_the_tensors_tile_the_data_exactly) {
    CHECK_OK(spans(0, 0, 64));
    CHECK_ERR(spans(0, 0, 60), TFC_ERR_FORMAT,
              "'f.bin' is 60 bytes but the test model needs 64 (truncated parameters)");
    CHECK_ERR(spans(0, 0, 65), TFC_ERR_FORMAT, "'f.bin' is 65 bytes but the test model needs 64 (trailing bytes)");
    CHECK_ERR(spans(4, 0, 68), TFC_ERR_FORMAT, "tensor 'b' starts at byte 36 where the bytes before end at 32 (gap)");
    CHECK_ERR(spans(-4, 0, 60), TFC_ERR_FORMAT,
              "tensor 'b' starts at byte 28 where the bytes before end at 32 (overlap)");
    CHECK_ERR(spans(0, -20, 64), TFC_ERR_FORMAT, "tensor 'c' ends at byte 44, before it starts at 48");
}

/* A reader's words: the stranger named its own way, everything else the contract's. */
static tfc_status words(void *ctx, const tfc_contract *c, const tfc_fault *f) {
    ++*(int *)ctx;
    if (f->kind != TFC_FAULT_STRANGER) return TFC_OK;
    return tfc_err(TFC_ERR_SHAPE, "%s: '%s': '%s' is for a block the model lacks", c->fn, c->file,
                   c->held[f->held].name);
}

TEST(a_reader_may_word_a_fault_itself) {
    int calls = 0;
    tfc_contract *c = contract();
    tfc_contract_set_explain(c, words, &calls);
    tfc_want w = want("a", D3, 1, NULL);
    CHECK_OK(tfc_contract_want(c, &w));
    hold_f32(c, "h.9.a", D3, 1, 0.0f);
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_SHAPE, "tfc_test_load: 'f.bin': 'h.9.a' is for a block the model lacks");
    tfc_contract_free(c);
    c = contract();
    tfc_contract_set_explain(c, words, &calls);
    CHECK_OK(tfc_contract_want(c, &w));
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, "tfc_test_load: 'f.bin' has no tensor 'a'");
    CHECK(calls == 2);
    tfc_contract_free(c);
}

TEST(copy_needs_a_passing_check_and_values_that_fit) {
    tfc_contract *c = contract();
    tfc_tensor *a = filled(D3, 1, TFC_DTYPE_F32, -1.0);
    tfc_want w = want("a", D3, 1, a);
    CHECK_OK(tfc_contract_want(c, &w));
    hold_f32(c, "a", D3, 1, 2.0f);
    CHECK_ERR(tfc_contract_copy(c), TFC_ERR_INTERNAL, "copied before its contract was checked");
    CHECK(all_equal(a, -1.0));
    /* values a reader built wrong (held as [3], values of 4) are its bug, not the file's */
    tfc_tensor_release(c->held[0].values);
    CHECK_OK(tfc_tensor_zeros(D4, 1, TFC_DTYPE_F32, &c->held[0].values));
    CHECK_OK(tfc_contract_check(c));
    CHECK_ERR(tfc_contract_copy(c), TFC_ERR_INTERNAL, "do not fit their destination");
    tfc_contract_free(c);
    /* a malformed want */
    c = contract();
    tfc_want bad = want("a", D3, 1, NULL);
    bad.dims[0] = TFC_DIM_SYM(2); /* no such symbol */
    CHECK_ERR(tfc_contract_want(c, &bad), TFC_ERR_INTERNAL, "undeclared symbol");
    tfc_contract_free(c);
    tfc_tensor_release(a);
}

TEST(a_safetensors_file_is_held_as_it_is) {
    tfc_tensor *t[2] = {filled(D23, 2, TFC_DTYPE_F32, 3.0), filled(D4, 1, TFC_DTYPE_BF16, 1.0)};
    const char *names[2] = {"x.weight", "y.bias"};
    char path[] = "/tmp/tfc_test_contract_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(tfc_safetensors_save(path, names, t, 2, NULL, NULL, 0));
    tfc_safetensors *f = NULL;
    CHECK_OK(tfc_safetensors_load(path, &f));
    tfc_contract *c = contract();
    CHECK_OK(tfc_contract_hold_safetensors(c, f));
    tfc_safetensors_release(f); /* the held values keep their own references */
    CHECK(c->n_held == 2);
    for (int32_t i = 0; i < c->n_held; i++) {
        const int k = strcmp(c->held[i].name, "x.weight") == 0 ? 0 : 1;
        CHECK(strcmp(c->held[i].name, names[k]) == 0);
        CHECK(c->held[i].dtype == (k ? TFC_DTYPE_BF16 : TFC_DTYPE_F32));
        CHECK(c->held[i].ndim == (k ? 1 : 2) && c->held[i].dims[0] == (k ? 4 : 2));
        CHECK(all_equal(c->held[i].values, k ? 1.0 : 3.0));
    }
    tfc_contract_free(c);
    unlink(path);
    tfc_tensor_release(t[0]);
    tfc_tensor_release(t[1]);
}

TFC_TEST_MAIN
