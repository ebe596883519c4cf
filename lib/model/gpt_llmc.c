/*
 * llm.c's GPT-2 checkpoints (github.com/karpathy/llm.c, train_gpt2.py
 * write_model / train_gpt2.c gpt2_build_from_checkpoint), read and written:
 *
 *   256 x int32 header: [0] magic 20240326, [1] version (3: fp32 values,
 *   5: bf16), [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp (V padded),
 *   the rest 0
 *   then the parameters, each tensor whole, stacked over layers:
 *   wte [Vp,C], wpe [maxT,C], ln1w [L,C], ln1b [L,C], qkvw [L,3C,C],
 *   qkvb [L,3C], attprojw [L,C,C], attprojb [L,C], ln2w [L,C], ln2b [L,C],
 *   fcw [L,4C,C], fcb [L,4C], fcprojw [L,C,4C], fcprojb [L,C], lnfw [C],
 *   lnfb [C]
 *
 * llm.c's Linear weights are nn.Linear's [out, in]; ours are Conv1D's
 * [in, out] (gpt.h), so they are transposed on the way. Rows V..Vp of wte
 * are padding llm.c never reads as tokens; the model keeps V rows and the
 * writer pads with zeros. The head is always tied to wte and every layer
 * has biases.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "model/gpt_impl.h"
#include "model/gpt_want.h"
#include "tfcore/io.h"

#define LLMC_MAGIC 20240326
#define LLMC_V_F32 3
#define LLMC_V_BF16 5
#define LLMC_HEADER_INTS 256

/*
 * llm.c's tensors are the parameter table's rows with an llm.c position
 * (gpt_params.c), in that order; each row says whether llm.c holds it
 * transposed. A file always holds all of them (biases, no lm_head).
 */
enum { LLMC_MAX = 32 };
typedef struct llmc_order {
    const gpt_param_row *row[LLMC_MAX];
    int32_t n;
} llmc_order;

static void llmc_order_of(llmc_order *o) { o->n = tfc_gpt_llmc_rows(o->row, LLMC_MAX); }

static tfc_tensor *tensor_of(const tfc_gpt *m, const gpt_param_row *r, int32_t layer) {
    const char *base = r->per_block ? (const char *)&m->blocks[layer] : (const char *)m;
    return *(tfc_tensor *const *)(base + r->field);
}

/*
 * Values of one tensor (one layer's) in the file: rows x cols, the file's
 * [out, in] for a transposed row, wte's rows padded to vp (gpt_want.c's
 * llm.c layout, less the layer dimension).
 */
static void shape_of(const tfc_gpt_config *c, int32_t vp, const gpt_param_row *r, int64_t *rows, int64_t *cols) {
    int64_t d[3];
    const int32_t nd = tfc_gpt_llmc_dims(c, vp, r, d), first = r->per_block ? 1 : 0;
    *rows = d[first];
    *cols = nd > first + 1 ? d[first + 1] : 1;
}

static int32_t le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/*
 * What the file holds by its header (config c, wte padded to vp, values of
 * dtype): llm.c's tensors in its order, each whole, one after the other
 * from the end of the header, as held tensors of ct. A header whose sizes
 * overflow is refused here.
 */
static tfc_status hold_llmc(tfc_contract *ct, const tfc_gpt_config *c, int32_t vp, tfc_dtype dtype,
                            const char *header) {
    llmc_order o;
    llmc_order_of(&o);
    int64_t at = LLMC_HEADER_INTS * 4;
    for (int i = 0; i < o.n; i++) {
        tfc_held h = {.name = o.row[i]->llmc, .dtype = dtype};
        h.ndim = tfc_gpt_llmc_dims(c, vp, o.row[i], h.dims);
        int64_t n = 0, bytes = 0;
        if (!tfc_dims_numel(h.dims, h.ndim, INT64_MAX, &n) || !tfc_mul_i64(n, (int64_t)tfc_dtype_size(dtype), &bytes) ||
            !tfc_add_i64(at, bytes, &bytes))
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s': the header's sizes (%s) overflow", ct->fn, ct->file, header);
        h.begin = (uint64_t)at;
        h.end = (uint64_t)bytes;
        at = bytes;
        TFC_TRY(tfc_contract_hold(ct, &h));
    }
    return TFC_OK;
}

/* llm.c's words for a padded vocabulary below the vocabulary (the symbol Vp out of its bounds). */
static tfc_status llmc_explain(void *ctx, const tfc_contract *c, const tfc_fault *f) {
    (void)ctx;
    if (f->kind != TFC_FAULT_SYM_RANGE) return TFC_OK;
    return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has padded vocabulary Vp %lld below V %lld", c->fn, c->file,
                   (long long)f->value, (long long)c->sym[f->other].lo);
}

/*
 * The contract of an llm.c file of st_size bytes whose header gave config
 * c, vp and the values' dtype: its tensors (by the header) against the
 * table's (gpt_want.c), and their bytes against the file's, before the
 * model is built.
 */
static tfc_status llmc_contract(const char *fn, const char *path, const tfc_gpt_config *c, int32_t vp, int bf16,
                                int64_t st_size) {
    char header[160], model[200];
    snprintf(header, sizeof header, "maxT %d, V %d, L %d, NH %d, C %d, Vp %d, %s", (int)c->block_size,
             (int)c->vocab_size, (int)c->n_layer, (int)c->n_head, (int)c->n_embd, (int)vp, bf16 ? "bf16" : "fp32");
    snprintf(model, sizeof model, "its header (%s)", header);
    const tfc_dtype dtype = bf16 ? TFC_DTYPE_BF16 : TFC_DTYPE_F32;
    tfc_contract *ct = NULL;
    TFC_TRY(tfc_contract_new(fn, path, model, &ct));
    tfc_status s = tfc_gpt_want_llmc(c, ct, dtype);
    if (s == TFC_OK) s = hold_llmc(ct, c, vp, dtype, header);
    tfc_contract_set_span(ct, LLMC_HEADER_INTS * 4, (uint64_t)st_size);
    tfc_contract_set_explain(ct, llmc_explain, NULL);
    if (s == TFC_OK) s = tfc_contract_check(ct);
    tfc_contract_free(ct);
    return s;
}

/* Read one tensor's values (all layers) from fp into the model, converting and transposing. */
static tfc_status read_tensor(const char *fn, const char *path, FILE *fp, tfc_gpt *m, const gpt_param_row *r,
                              int32_t vp, int bf16, float *vals, uint16_t *raw) {
    const tfc_gpt_config *c = &m->cfg;
    int64_t rows, cols;
    shape_of(c, vp, r, &rows, &cols);
    const int32_t layers = r->per_block ? c->n_layer : 1;
    const size_t n = (size_t)(rows * cols), esize = bf16 ? 2 : 4;
    for (int32_t l = 0; l < layers; l++) {
        void *dst = bf16 ? (void *)raw : (void *)vals;
        if (fread(dst, esize, n, fp) != n)
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s' ends inside tensor %s (layer %d)", fn, path, r->llmc, (int)l);
        if (bf16)
            for (size_t i = 0; i < n; i++) vals[i] = tfc_bf16_to_f32(raw[i]);
        tfc_tensor *t = tensor_of(m, r, l);
        const int64_t keep_rows = r->shape[0] == GPT_D_VOCAB ? c->vocab_size : rows; /* wte's padding rows dropped */
        tfc_tensor *src = NULL;
        int64_t dims[2] = {keep_rows, cols}, strides[2] = {cols, 1};
        int32_t nd = cols == 1 ? 1 : 2;
        if (r->transpose) { /* our [in, out] = theirs [out, in] transposed: a strided view */
            dims[0] = cols;
            dims[1] = rows;
            strides[0] = 1;
            strides[1] = cols;
        }
        TFC_TRY(tfc_tensor_wrap(vals, dims, strides, nd, TFC_DTYPE_F32, NULL, NULL, &src));
        tfc_status s = tfc_tensor_copy_from(t, src);
        tfc_tensor_release(src);
        TFC_TRY(s);
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_load_llmc(const char *path, tfc_gpt **out) {
    const char *fn = "tfc_gpt_load_llmc";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, out);
    FILE *fp = fopen(path, "rb");
    if (!fp) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    struct stat st;
    unsigned char hb[4 * LLMC_HEADER_INTS];
    tfc_status s = TFC_OK;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode))
        s = tfc_err(TFC_ERR_IO, "%s: '%s' is not a regular file", fn, path);
    else if (fread(hb, 1, sizeof hb, fp) != sizeof hb)
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' is %lld bytes, shorter than llm.c's 1024-byte header", fn, path,
                    (long long)st.st_size);
    int32_t h[8] = {0};
    for (int i = 0; s == TFC_OK && i < 8; i++) h[i] = le32(hb + 4 * i);
    if (s == TFC_OK && h[0] != LLMC_MAGIC)
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' has magic %d, not llm.c's GPT-2 checkpoint magic %d", fn, path, (int)h[0],
                    LLMC_MAGIC);
    if (s == TFC_OK && h[1] != LLMC_V_F32 && h[1] != LLMC_V_BF16)
        s = tfc_err(TFC_ERR_VERSION, "%s: '%s' has version %d; need 3 (fp32) or 5 (bf16)", fn, path, (int)h[1]);
    static const char *const field[8] = {"magic", "version", "maxT", "V", "L", "NH", "C", "Vp"};
    for (int i = 2; s == TFC_OK && i < 8; i++)
        if (h[i] < 1)
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' has header field %s (int %d) = %d, must be >= 1", fn, path, field[i],
                        i, (int)h[i]);
    if (s == TFC_OK && h[6] % h[5])
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' has C %d not a multiple of NH %d", fn, path, (int)h[6], (int)h[5]);
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.block_size = h[2];
    c.vocab_size = h[3];
    c.n_layer = h[4];
    c.n_head = h[5];
    c.n_embd = h[6];
    c.bias = 1;
    c.tie_weights = 1;
    const int bf16 = h[1] == LLMC_V_BF16;
    /* the file must hold exactly what the header describes before anything is allocated for it */
    if (s == TFC_OK) s = llmc_contract(fn, path, &c, h[7], bf16, (int64_t)st.st_size);
    if (s == TFC_OK) s = tfc_gpt_check_config(fn, &c);
    tfc_gpt *m = NULL;
    if (s == TFC_OK) s = tfc_gpt_alloc(fn, &c, &m); /* every value comes from the file */
    /* one buffer for the largest tensor of one layer */
    llmc_order o;
    llmc_order_of(&o);
    int64_t largest = 0;
    for (int i = 0; s == TFC_OK && i < o.n; i++) {
        int64_t r, k;
        shape_of(&c, h[7], o.row[i], &r, &k);
        if (r * k > largest) largest = r * k;
    }
    float *vals = s == TFC_OK ? malloc((size_t)largest * sizeof *vals) : NULL;
    uint16_t *raw = s == TFC_OK && bf16 ? malloc((size_t)largest * sizeof *raw) : NULL;
    if (s == TFC_OK && (!vals || (bf16 && !raw))) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int i = 0; s == TFC_OK && i < o.n; i++) s = read_tensor(fn, path, fp, m, o.row[i], h[7], bf16, vals, raw);
    free(vals);
    free(raw);
    fclose(fp);
    if (s != TFC_OK) {
        tfc_gpt_release(m);
        return tfc_err_in(fn, s);
    }
    *out = m;
    return TFC_OK;
}

/* Write one tensor (all layers) as f32 in llm.c's layout. */
static tfc_status write_tensor(const char *fn, tfc_atomic_file *af, const tfc_gpt *m, const gpt_param_row *r,
                               int32_t vp, float *vals, float *tmp) {
    const tfc_gpt_config *c = &m->cfg;
    int64_t rows, cols;
    shape_of(c, vp, r, &rows, &cols);
    const int32_t layers = r->per_block ? c->n_layer : 1;
    const size_t n = (size_t)(rows * cols);
    for (int32_t l = 0; l < layers; l++) {
        const tfc_tensor *t = tensor_of(m, r, l);
        memset(vals, 0, n * sizeof *vals); /* wte's padding rows; a model without biases writes zero biases */
        if (t) {
            tfc_tensor *f = NULL;
            TFC_TRY(tfc_cast(NULL, t, TFC_DTYPE_F32, &f));
            const size_t have = (size_t)tfc_tensor_numel(f);
            tfc_status s = tfc_tensor_copy_to_host(f, r->transpose ? tmp : vals, have * sizeof *vals);
            tfc_tensor_release(f);
            TFC_TRY(s);
            if (r->transpose) /* ours [in = cols, out = rows] -> theirs [rows, cols] */
                for (int64_t i = 0; i < cols; i++)
                    for (int64_t o = 0; o < rows; o++) vals[o * cols + i] = tmp[i * rows + o];
        }
        TFC_TRY(tfc_atomic_write(fn, af, vals, n * sizeof *vals));
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_save_llmc(const tfc_gpt *m, const char *path) {
    const char *fn = "tfc_gpt_save_llmc";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, path);
    const tfc_gpt_config *c = &m->cfg;
    if (tfc_gpt_is_quantized(m))
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: the model is quantized; llm.c files hold fp32 weights", fn);
    if (c->arch != TFC_GPT_ARCH_GPT2)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the model is %s; llm.c's files hold GPT-2 only (save it as a "
                       "tfcore checkpoint or a Hugging Face directory)",
                       fn, tfc_gpt_arch_name(c->arch));
    if (!c->tie_weights)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the model has its own lm_head.weight (tie_weights 0); llm.c's GPT-2 ties the head to wte",
                       fn);
    if (c->ln_eps != 1e-5)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: the model's ln_eps is %g; llm.c's GPT-2 uses 1e-5", fn, c->ln_eps);
    /* llm.c pads the vocabulary to a multiple of 128 */
    const int64_t vp64 = ((int64_t)c->vocab_size + 127) / 128 * 128;
    if (vp64 > INT32_MAX) return tfc_err(TFC_ERR_INVALID_ARG, "%s: vocab_size %d too large", fn, c->vocab_size);
    const int32_t vp = (int32_t)vp64;
    int32_t h[LLMC_HEADER_INTS] = {0};
    h[0] = LLMC_MAGIC;
    h[1] = LLMC_V_F32;
    h[2] = c->block_size;
    h[3] = c->vocab_size;
    h[4] = c->n_layer;
    h[5] = c->n_head;
    h[6] = c->n_embd;
    h[7] = vp;
    unsigned char hb[4 * LLMC_HEADER_INTS];
    for (int i = 0; i < LLMC_HEADER_INTS; i++)
        for (int k = 0; k < 4; k++) hb[4 * i + k] = (unsigned char)((uint32_t)h[i] >> (8 * k));
    llmc_order o;
    llmc_order_of(&o);
    int64_t largest = 0;
    for (int i = 0; i < o.n; i++) {
        int64_t r, k;
        shape_of(c, vp, o.row[i], &r, &k);
        if (r * k > largest) largest = r * k;
    }
    float *vals = malloc((size_t)largest * sizeof *vals), *tmp = malloc((size_t)largest * sizeof *tmp);
    tfc_status s = vals && tmp ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_atomic_file af = {0};
    if (s == TFC_OK) s = tfc_atomic_open(fn, path, &af);
    if (s == TFC_OK) {
        s = tfc_atomic_write(fn, &af, hb, sizeof hb);
        for (int i = 0; s == TFC_OK && i < o.n; i++) s = write_tensor(fn, &af, m, o.row[i], vp, vals, tmp);
        if (s == TFC_OK)
            s = tfc_atomic_commit(fn, &af);
        else
            tfc_atomic_abort(&af);
    }
    free(vals);
    free(tmp);
    return tfc_err_in(fn, s);
}
