/* Fixtures of the generated bad-argument test; see fixtures.h. */
#include "fixtures.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FX_MAX 256

static const char *dir_;
static tfc_tensor *tensors_[FX_MAX];
static int n_tensors_;
static void *mem_[FX_MAX];
static int n_mem_;

enum slot_kind {
    S_COMM,
    S_DDP,
    S_TENSOR,
    S_GRAPH,
    S_OPTIM,
    S_TOK,
    S_GPT,
    S_CACHE,
    S_ST,
    S_TF,
    S_DL,
    S_DLV,
    S_QW,
    S_MEM
};
static struct {
    enum slot_kind kind;
    void **p;
    int n;
} slots_[FX_MAX];
static int n_slots_;

static void fatal(const char *what) {
    fprintf(stderr, "badargs fixture: %s: %s\n", what, tfc_last_error());
    exit(3);
}

static void *keep_mem(void *p) {
    if (!p || n_mem_ == FX_MAX) fatal("out of fixture slots");
    mem_[n_mem_++] = p;
    return p;
}

static tfc_tensor *keep(tfc_tensor *t) {
    if (n_tensors_ == FX_MAX) fatal("out of fixture tensors");
    tensors_[n_tensors_++] = t;
    return t;
}

void fx_set_dir(const char *dir) { dir_ = dir; }

const char *fx_path(const char *name) {
    char *p = keep_mem(malloc(strlen(dir_) + strlen(name) + 2));
    sprintf(p, "%s/%s", dir_, name);
    return p;
}

const char *fx_out_path(const char *name) {
    char *p = keep_mem(malloc(strlen(dir_) + strlen(name) + 32));
    sprintf(p, "%s/out-%ld-%s", dir_, (long)getpid(), name);
    return p;
}

/* ---- tensors ------------------------------------------------------------------ */

tfc_tensor *fx_t(tfc_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t dims[4] = {d0, d1, d2, d3}, n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    tfc_tensor *t = NULL;
    if (tfc_tensor_empty(dims, ndim, dtype, &t) != TFC_OK) fatal("tfc_tensor_empty");
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = dtype == TFC_DTYPE_BOOL ? (double)(i % 2) : (double)(i + 1) * 0.25;
    tfc_tensor *src = NULL;
    if (tfc_tensor_from_data(v, dims, ndim, TFC_DTYPE_F64, &src) != TFC_OK) fatal("tfc_tensor_from_data");
    if (tfc_tensor_copy_from(t, src) != TFC_OK) fatal("tfc_tensor_copy_from");
    tfc_tensor_release(src);
    free(v);
    return keep(t);
}

tfc_tensor *fx_f32(int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    return fx_t(TFC_DTYPE_F32, ndim, d0, d1, d2, d3);
}

tfc_tensor *fx_ids2(int64_t b, int64_t t, int64_t mod) {
    int64_t n = b * t, dims[2] = {b, t};
    int64_t *v = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = i % mod;
    tfc_tensor *r = NULL;
    if (tfc_tensor_from_data(v, dims, 2, TFC_DTYPE_I64, &r) != TFC_OK) fatal("fx_ids2");
    free(v);
    return keep(r);
}

tfc_tensor *fx_ids(int64_t n, int64_t mod) {
    tfc_tensor *r = fx_ids2(1, n, mod), *v = NULL;
    if (tfc_reshape(NULL, r, &n, 1, &v) != TFC_OK) fatal("fx_ids");
    return keep(v);
}

tfc_tensor *fx_leaf(void) {
    tfc_tensor *t = fx_f32(2, 2, 3, 0, 0);
    if (tfc_tensor_set_requires_grad(t, 1) != TFC_OK) fatal("set_requires_grad");
    if (tfc_tensor_set_grad(t, fx_f32(2, 2, 3, 0, 0)) != TFC_OK) fatal("set_grad");
    return t;
}

tfc_tensor *fx_leaf64(void) {
    tfc_tensor *t = fx_t(TFC_DTYPE_F64, 1, 3, 0, 0, 0);
    if (tfc_tensor_set_requires_grad(t, 1) != TFC_OK) fatal("set_requires_grad");
    return t;
}

tfc_tensor *fx_nonleaf(void) {
    tfc_tensor *x = fx_f32(2, 2, 3, 0, 0), *y = NULL;
    if (tfc_tensor_set_requires_grad(x, 1) != TFC_OK) fatal("set_requires_grad");
    if (tfc_mul_scalar(fx_graph(), x, 2.0, &y) != TFC_OK) fatal("fx_nonleaf");
    return keep(y);
}

tfc_tensor *fx_loss(void) {
    tfc_tensor *l = NULL;
    if (tfc_sum(fx_graph(), fx_nonleaf(), NULL, 0, 0, &l) != TFC_OK) fatal("fx_loss");
    return keep(l);
}

/* ---- arrays ----------------------------------------------------------------------- */

void *fx_scratch(size_t bytes) { return keep_mem(calloc(1, bytes < 64 ? 64 : bytes)); }

int64_t *fx_i64s(int n, ...) {
    int64_t *a = fx_scratch(sizeof(int64_t) * (size_t)n);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) a[i] = va_arg(ap, int64_t);
    va_end(ap);
    return a;
}

int32_t *fx_i32s(int n, ...) {
    int32_t *a = fx_scratch(sizeof(int32_t) * (size_t)n);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) a[i] = va_arg(ap, int32_t);
    va_end(ap);
    return a;
}

float *fx_floats(int n) {
    float *a = fx_scratch(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) a[i] = 0.5f * (float)(i + 1);
    return a;
}

tfc_tensor **fx_tensors(int n, ...) {
    tfc_tensor **a = fx_scratch(sizeof(tfc_tensor *) * (size_t)n);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) a[i] = va_arg(ap, tfc_tensor *);
    va_end(ap);
    return a;
}

const char **fx_strs(int n, ...) {
    const char **a = fx_scratch(sizeof(char *) * (size_t)n);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) a[i] = va_arg(ap, const char *);
    va_end(ap);
    return a;
}

size_t *fx_sizes(int n, ...) {
    size_t *a = fx_scratch(sizeof(size_t) * (size_t)n);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) a[i] = va_arg(ap, size_t);
    va_end(ap);
    return a;
}

/* ---- shared handles ------------------------------------------------------------------ */

static tfc_graph *graph_;
static tfc_optim *optim_;
static tfc_optim *optim_sharded_;
static tfc_comm *comm_;
static tfc_ddp *ddp_;
static tfc_tokenizer *tok_, *tok_fresh_, *tok_chat_;
static tfc_gpt *gpt_;
static tfc_gpt *gpt_lora_;
static tfc_lora_config lora_cfg_;
static tfc_gpt_config cfg_;
static tfc_gpt_cache *cache_;
static tfc_safetensors *st_, *gpt_st_;
static void *st_bytes_;
static size_t st_len_;
static tfc_token_file *tf_;
static tfc_qweight *qw_;
static tfc_optim_options opts_;
static tfc_attention_options attn_opts_;
static tfc_hf_save_options hf_save_opts_;

tfc_graph *fx_graph(void) {
    if (!graph_ && tfc_graph_new(&graph_) != TFC_OK) fatal("tfc_graph_new");
    return graph_;
}

tfc_optim *fx_optim(void) {
    if (optim_) return optim_;
    if (tfc_optim_adamw(NULL, &optim_) != TFC_OK) fatal("tfc_optim_adamw");
    tfc_tensor *p[2] = {fx_leaf(), fx_leaf()};
    if (tfc_optim_add_params(optim_, p, 2, NULL) != TFC_OK) fatal("tfc_optim_add_params");
    if (tfc_optim_step(optim_) != TFC_OK) fatal("tfc_optim_step"); /* so state exists */
    return optim_;
}

tfc_comm *fx_comm(void) {
    if (!comm_ && tfc_comm_init_single(&comm_) != TFC_OK) fatal("tfc_comm_init_single");
    return comm_;
}

tfc_optim *fx_optim_sharded(void) {
    if (optim_sharded_) return optim_sharded_;
    if (tfc_optim_adamw(NULL, &optim_sharded_) != TFC_OK) fatal("tfc_optim_adamw");
    tfc_tensor *p[2] = {fx_leaf(), fx_leaf()};
    if (tfc_optim_add_params(optim_sharded_, p, 2, NULL) != TFC_OK) fatal("tfc_optim_add_params");
    if (tfc_optim_shard(optim_sharded_, fx_comm()) != TFC_OK) fatal("tfc_optim_shard");
    if (tfc_optim_step(optim_sharded_) != TFC_OK) fatal("tfc_optim_step (sharded)");
    return optim_sharded_;
}

tfc_ddp *fx_ddp(void) {
    tfc_tensor *p[1] = {fx_leaf()};
    if (!ddp_ && tfc_ddp_new(fx_comm(), p, 1, 0, &ddp_) != TFC_OK) fatal("tfc_ddp_new");
    return ddp_;
}

tfc_spec_stats *fx_spec_stats(void) {
    tfc_spec_stats *st = fx_scratch(sizeof *st);
    st->struct_size = sizeof *st;
    return st;
}

tfc_ddp_stats *fx_ddp_stats(void) {
    tfc_ddp_stats *st = fx_scratch(sizeof *st);
    st->struct_size = sizeof *st;
    return st;
}

static const char train_text[] = "the cat sat on the mat; the cat ate the rat. the end, the end.";

tfc_tokenizer *fx_tok(void) {
    if (tok_) return tok_;
    if (tfc_tokenizer_new(TFC_SPLIT_GPT2, &tok_) != TFC_OK) fatal("tfc_tokenizer_new");
    if (tfc_tokenizer_train(tok_, train_text, sizeof train_text - 1, 270) != TFC_OK) fatal("tfc_tokenizer_train");
    return tok_;
}

tfc_tokenizer *fx_tok_chat(void) {
    if (tok_chat_) return tok_chat_;
    if (tfc_tokenizer_new(TFC_SPLIT_GPT2, &tok_chat_) != TFC_OK) fatal("tfc_tokenizer_new");
    if (tfc_tokenizer_add_special(tok_chat_, "<|im_start|>", 300) != TFC_OK ||
        tfc_tokenizer_add_special(tok_chat_, "<|im_end|>", 301) != TFC_OK)
        fatal("tfc_tokenizer_add_special");
    return tok_chat_;
}

const tfc_chat_message *fx_chat(void) {
    static const tfc_chat_message m[2] = {{"user", "Hello"}, {"assistant", "Hi!"}};
    return m;
}

/* Qwen2-Instruct's chat_template */
const char *fx_chat_template(void) {
    return "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
           "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
           "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
           "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
}

tfc_tokenizer *fx_tok_fresh(void) {
    if (!tok_fresh_ && tfc_tokenizer_new(TFC_SPLIT_GPT2, &tok_fresh_) != TFC_OK) fatal("tfc_tokenizer_new");
    return tok_fresh_;
}

tfc_gpt_config *fx_gpt_config(void) {
    cfg_ = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    cfg_.n_layer = 1;
    cfg_.n_head = 2;
    cfg_.n_embd = 8;
    cfg_.block_size = 8;
    cfg_.vocab_size = 16;
    return &cfg_;
}

tfc_gpt *fx_gpt(void) {
    if (!gpt_ && tfc_gpt_new(fx_gpt_config(), 1, &gpt_) != TFC_OK) fatal("tfc_gpt_new");
    return gpt_;
}

tfc_lora_config *fx_lora_config(void) {
    lora_cfg_ = (tfc_lora_config)TFC_LORA_CONFIG_INIT;
    lora_cfg_.rank = 2;
    lora_cfg_.targets = "c_attn,c_proj";
    return &lora_cfg_;
}

/* Llama 3.1's rope_scaling (llama3, factor 8) on theta 500000. */
const tfc_rope_config *fx_rope_config(void) {
    static tfc_rope_config c = TFC_ROPE_CONFIG_INIT;
    c.rope_type = TFC_ROPE_LLAMA3, c.theta = 500000.0, c.factor = 8.0;
    return &c;
}

tfc_gpt *fx_gpt_lora(void) {
    if (!gpt_lora_ &&
        (tfc_gpt_new(fx_gpt_config(), 1, &gpt_lora_) != TFC_OK ||
         tfc_gpt_add_lora(gpt_lora_, fx_lora_config()) != TFC_OK))
        fatal("tfc_gpt_add_lora");
    return gpt_lora_;
}

tfc_qweight *fx_qweight(void) {
    if (!qw_ && tfc_quantize(fx_f32(2, 4, 64, 0, 0), TFC_QFORMAT_INT8, 0, 0, &qw_) != TFC_OK) fatal("tfc_quantize");
    return qw_;
}

tfc_gpt_cache *fx_cache(void) {
    if (!cache_ && tfc_gpt_cache_new(fx_gpt(), 1, &cache_) != TFC_OK) fatal("tfc_gpt_cache_new");
    return cache_;
}

tfc_safetensors *fx_gpt_st(void) {
    if (!gpt_st_ && tfc_safetensors_load(fx_path("gpt.safetensors"), &gpt_st_) != TFC_OK) fatal("tfc_safetensors_load");
    return gpt_st_;
}

tfc_safetensors *fx_st(void) {
    if (!st_ && tfc_safetensors_load(fx_path("st.safetensors"), &st_) != TFC_OK) fatal("tfc_safetensors_load");
    return st_;
}

static void read_st_bytes(void) {
    if (st_bytes_) return;
    FILE *f = fopen(fx_path("st.safetensors"), "rb");
    if (!f) fatal("open st.safetensors");
    fseek(f, 0, SEEK_END);
    st_len_ = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    st_bytes_ = fx_scratch(st_len_);
    if (fread(st_bytes_, 1, st_len_, f) != st_len_) fatal("read st.safetensors");
    fclose(f);
}

const void *fx_st_bytes(void) {
    read_st_bytes();
    return st_bytes_;
}

size_t fx_st_len(void) {
    read_st_bytes();
    return st_len_;
}

tfc_token_file *fx_tf(void) {
    if (!tf_ && tfc_token_file_open(fx_path("tokens.bin"), &tf_) != TFC_OK) fatal("tfc_token_file_open");
    return tf_;
}

tfc_optim_options *fx_opts(void) {
    opts_ = (tfc_optim_options)TFC_ADAMW_OPTIONS_INIT;
    return &opts_;
}

tfc_attention_options *fx_attn_opts(void) {
    attn_opts_ = (tfc_attention_options)TFC_ATTENTION_OPTIONS_INIT;
    attn_opts_.window = 1;
    return &attn_opts_;
}

tfc_hf_save_options *fx_hf_save_opts(void) {
    hf_save_opts_ = (tfc_hf_save_options)TFC_HF_SAVE_OPTIONS_INIT;
    hf_save_opts_.dtype = TFC_DTYPE_BF16;
    hf_save_opts_.max_shard_bytes = 4096;
    return &hf_save_opts_;
}

DLManagedTensor *fx_dlpack(void) {
    DLManagedTensor *m = NULL;
    if (tfc_tensor_to_dlpack(fx_f32(2, 2, 3, 0, 0), &m) != TFC_OK) fatal("tfc_tensor_to_dlpack");
    return m;
}

DLManagedTensorVersioned *fx_dlpack_v(void) {
    DLManagedTensorVersioned *m = NULL;
    if (tfc_tensor_to_dlpack_versioned(fx_f32(2, 2, 3, 0, 0), &m) != TFC_OK) fatal("tfc_tensor_to_dlpack_versioned");
    return m;
}

void fx_dlpack_done(tfc_status s, DLManagedTensor *m) {
    if (s != TFC_OK && m) m->deleter(m);
}

void fx_dlpack_v_done(tfc_status s, DLManagedTensorVersioned *m) {
    if (s != TFC_OK && m) m->deleter(m);
}

/* ---- callbacks ------------------------------------------------------------------------ */

void fx_deleter(void *data, void *ctx) {
    (void)data;
    (void)ctx;
}

int32_t fx_on_token(int32_t token, void *ctx) {
    (void)token;
    (void)ctx;
    return 0;
}

int32_t fx_on_batch_token(int32_t seq, int32_t token, void *ctx) {
    (void)seq;
    (void)token;
    (void)ctx;
    return 0;
}

const int32_t *const *fx_prompts(void) {
    const int32_t **a = fx_scratch(2 * sizeof *a);
    a[0] = fx_i32s(2, 1, 2);
    a[1] = fx_i32s(1, 3);
    return a;
}

tfc_status fx_gradcheck_fn(tfc_graph *g, tfc_tensor *const *inputs, int32_t n, tfc_tensor **out, void *ctx) {
    (void)n;
    (void)ctx;
    tfc_tensor *sq = NULL;
    tfc_status s = tfc_mul(g, inputs[0], inputs[0], &sq);
    if (s != TFC_OK) return s;
    s = tfc_sum(g, sq, NULL, 0, 0, out);
    tfc_tensor_release(sq);
    return s;
}

tfc_status fx_grad_hook(tfc_tensor *leaf, void *user) {
    (void)leaf;
    (void)user;
    return TFC_OK;
}

/* outputs[0] = inputs[0]² */
tfc_status fx_checkpoint_fn(tfc_graph *g, const tfc_tensor *const *inputs, int32_t n_in, tfc_tensor **outputs,
                            int32_t n_out, void *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    return tfc_mul(g, inputs[0], inputs[0], &outputs[0]);
}

void *fx_ctx(void) { return fx_scratch(16); }

/* y = x * x, saving x; backward dx = 2 x dy. */
static tfc_status fx_custom_forward(void *ctx, const tfc_tensor *const *inputs, int32_t n_in, tfc_tensor **outputs,
                                    int32_t n_out, tfc_tensor **saved) {
    (void)ctx;
    (void)n_in;
    (void)n_out;
    saved[0] = tfc_tensor_retain((tfc_tensor *)inputs[0]);
    return tfc_mul(NULL, inputs[0], inputs[0], &outputs[0]);
}

static tfc_status fx_custom_backward(void *ctx, const tfc_tensor *const *saved, const tfc_tensor *const *grad_outputs,
                                     int32_t n_out, const int32_t *needs_input_grad, tfc_tensor **grad_inputs,
                                     int32_t n_in) {
    (void)ctx;
    (void)n_out;
    (void)n_in;
    tfc_tensor *t = NULL;
    if (!needs_input_grad[0] || !grad_outputs[0]) return TFC_OK;
    tfc_status s = tfc_mul(NULL, saved[0], grad_outputs[0], &t);
    if (s == TFC_OK) s = tfc_mul_scalar(NULL, t, 2.0, &grad_inputs[0]);
    tfc_tensor_release(t);
    return s;
}

const tfc_custom_op_def *fx_custom_def(void) {
    static const tfc_custom_op_def def = {sizeof def, "fx_square", fx_custom_forward, fx_custom_backward, NULL};
    return &def;
}

/* ---- out slots --------------------------------------------------------------------------- */

static void **slot(enum slot_kind kind, int n) {
    if (n_slots_ == FX_MAX) fatal("out of out-slots");
    void **p = fx_scratch(sizeof(void *) * (size_t)n);
    slots_[n_slots_].kind = kind;
    slots_[n_slots_].p = p;
    slots_[n_slots_++].n = n;
    return p;
}

tfc_tensor **fx_out_tensor(void) { return (tfc_tensor **)slot(S_TENSOR, 1); }
tfc_tensor **fx_out_tensors(int n) { return (tfc_tensor **)slot(S_TENSOR, n); }
tfc_graph **fx_out_graph(void) { return (tfc_graph **)slot(S_GRAPH, 1); }
tfc_optim **fx_out_optim(void) { return (tfc_optim **)slot(S_OPTIM, 1); }
tfc_comm **fx_out_comm(void) { return (tfc_comm **)slot(S_COMM, 1); }
tfc_ddp **fx_out_ddp(void) { return (tfc_ddp **)slot(S_DDP, 1); }
tfc_tokenizer **fx_out_tok(void) { return (tfc_tokenizer **)slot(S_TOK, 1); }
tfc_gpt **fx_out_gpt(void) { return (tfc_gpt **)slot(S_GPT, 1); }
tfc_gpt_cache **fx_out_cache(void) { return (tfc_gpt_cache **)slot(S_CACHE, 1); }
tfc_safetensors **fx_out_st(void) { return (tfc_safetensors **)slot(S_ST, 1); }
tfc_token_file **fx_out_tf(void) { return (tfc_token_file **)slot(S_TF, 1); }
DLManagedTensor **fx_out_dlpack(void) { return (DLManagedTensor **)slot(S_DL, 1); }
DLManagedTensorVersioned **fx_out_dlpack_v(void) { return (DLManagedTensorVersioned **)slot(S_DLV, 1); }
tfc_qweight **fx_out_qweight(void) { return (tfc_qweight **)slot(S_QW, 1); }
void *fx_out_mem(void) { return slot(S_MEM, 1); }

int fx_outs_untouched(void) {
    for (int i = 0; i < n_slots_; i++)
        for (int j = 0; j < slots_[i].n; j++)
            if (slots_[i].p[j]) return 0;
    return 1;
}

static void release_slot(enum slot_kind kind, void *p) {
    switch (kind) {
    case S_COMM: tfc_comm_release(p); break;
    case S_DDP: tfc_ddp_release(p); break;
    case S_TENSOR: tfc_tensor_release(p); break;
    case S_GRAPH: tfc_graph_release(p); break;
    case S_OPTIM: tfc_optim_release(p); break;
    case S_TOK: tfc_tokenizer_release(p); break;
    case S_GPT: tfc_gpt_release(p); break;
    case S_CACHE: tfc_gpt_cache_release(p); break;
    case S_ST: tfc_safetensors_release(p); break;
    case S_TF: tfc_token_file_close(p); break;
    case S_DL: ((DLManagedTensor *)p)->deleter(p); break;
    case S_DLV: ((DLManagedTensorVersioned *)p)->deleter(p); break;
    case S_QW: tfc_qweight_release(p); break;
    case S_MEM: tfc_free(p); break;
    }
}

void fx_cleanup(void) {
    for (int i = 0; i < n_slots_; i++)
        for (int j = 0; j < slots_[i].n; j++)
            if (slots_[i].p[j]) release_slot(slots_[i].kind, slots_[i].p[j]);
    n_slots_ = 0;
    tfc_gpt_cache_release(cache_);
    tfc_qweight_release(qw_);
    tfc_gpt_release(gpt_);
    tfc_gpt_release(gpt_lora_);
    gpt_lora_ = NULL;
    tfc_optim_release(optim_);
    tfc_optim_release(optim_sharded_);
    tfc_ddp_release(ddp_);
    tfc_comm_release(comm_);
    optim_sharded_ = NULL, ddp_ = NULL, comm_ = NULL;
    tfc_tokenizer_release(tok_);
    tfc_tokenizer_release(tok_fresh_);
    tfc_tokenizer_release(tok_chat_);
    tfc_safetensors_release(st_);
    tfc_safetensors_release(gpt_st_);
    tfc_token_file_close(tf_);
    for (int i = 0; i < n_tensors_; i++) tfc_tensor_release(tensors_[i]);
    n_tensors_ = 0;
    tfc_graph_release(graph_);
    qw_ = NULL;
    cache_ = NULL, gpt_ = NULL, optim_ = NULL, tok_ = tok_fresh_ = tok_chat_ = NULL, st_ = NULL, gpt_st_ = NULL,
    tf_ = NULL, graph_ = NULL;
    for (int i = 0; i < n_mem_; i++) free(mem_[i]);
    n_mem_ = 0;
}

/* ---- files --------------------------------------------------------------------------------- */

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* GPT-2's byte alphabet: printable Latin-1 as itself, the other bytes from U+0100 in order. */
static char *encoder_json(void) {
    char *s = fx_scratch(256 * 16 + 64), *p = s;
    p += sprintf(p, "{");
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)extra++;
        if (cp == '"' || cp == '\\')
            p += sprintf(p, "\"\\%c\": %d, ", (char)cp, b);
        else if (cp < 0x80)
            p += sprintf(p, "\"%c\": %d, ", (char)cp, b);
        else
            p += sprintf(p, "\"\\u%04x\": %d, ", cp, b);
    }
    sprintf(p, "\"<|endoftext|>\": 256}");
    return s;
}

static char *tiktoken_ranks(void) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = fx_scratch(256 * 16), *p = s;
    for (int b = 0; b < 256; b++) p += sprintf(p, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
    return s;
}

int fx_setup_files(void) {
    int ok = 1;
    /* safetensors: two tensors and one metadata pair */
    const char *names[2] = {"a", "b"}, *mk[1] = {"k"}, *mv[1] = {"v"};
    tfc_tensor *ts[2] = {fx_f32(2, 2, 3, 0, 0), fx_t(TFC_DTYPE_I64, 1, 4, 0, 0, 0)};
    ok &= tfc_safetensors_save(fx_path("st.safetensors"), names, ts, 2, mk, mv, 1) == TFC_OK;
    /* GPT weights of fx_gpt's config */
    ok &= tfc_gpt_save(fx_gpt(), fx_path("gpt.safetensors"), NULL, NULL, 0) == TFC_OK;
    /* the same model as an llm.c checkpoint and a Hugging Face directory */
    ok &= tfc_gpt_save_llmc(fx_gpt(), fx_path("gpt.llmc.bin")) == TFC_OK;
    ok &= tfc_gpt_save_hf(fx_gpt(), fx_path("hf"), -1, -1) == TFC_OK;
    /* LoRA adapters of fx_gpt's config */
    ok &= tfc_gpt_save_lora(fx_gpt_lora(), fx_path("lora.safetensors"), NULL, NULL, 0) == TFC_OK;
    /* tokenizer in the native format, a text to train on */
    ok &= tfc_tokenizer_save(fx_tok(), fx_path("tok.txt")) == TFC_OK;
    ok &= write_file(fx_path("train.txt"), train_text);
    /* 64 tokens of a 16-token vocabulary */
    int32_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = i % 16;
    ok &= tfc_token_file_write(fx_path("tokens.bin"), ids, 64, 16) == TFC_OK;
    ok &= write_file(fx_path("encoder.json"), encoder_json());
    ok &= write_file(fx_path("vocab.bpe"), "#version: 0.2\n");
    ok &= write_file(fx_path("ranks.tiktoken"), tiktoken_ranks());
    /* a Hugging Face tokenizer.json: characters a, b, c, the merge "a b", <s> before every text */
    ok &= write_file(fx_path("tokenizer.json"),
                     "{\"added_tokens\": [{\"id\": 4, \"content\": \"<s>\", \"normalized\": false, \"special\": true}],"
                     " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                     "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
                     "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [4], \"tokens\": [\"<s>\"]}}},"
                     " \"decoder\": {\"type\": \"Fuse\"}, \"model\": {\"type\": \"BPE\", \"unk_token\": \"c\","
                     " \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3}, \"merges\": [\"a b\"]}}");
    /* a tokenizer_config.json with Qwen2-Instruct's chat template */
    char *cfg = malloc(2048);
    if (cfg) {
        snprintf(cfg, 2048, "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"");
        for (const char *c = fx_chat_template(); *c; c++) {
            const size_t l = strlen(cfg);
            if (*c == '\\' || *c == '"')
                cfg[l] = '\\', cfg[l + 1] = *c, cfg[l + 2] = 0;
            else
                cfg[l] = *c, cfg[l + 1] = 0;
        }
        strcat(cfg, "\"}");
        ok &= write_file(fx_path("tokenizer_config.json"), cfg);
        free(cfg);
    } else {
        ok = 0;
    }
    if (!ok) fprintf(stderr, "badargs fixture files: %s\n", tfc_last_error());
    return ok;
}

/* ---- verdicts ------------------------------------------------------------------------------- */

static int names_fn(const char *fn) {
    const char *m = tfc_last_error();
    size_t n = strlen(fn);
    return strncmp(m, fn, n) == 0 && m[n] == ':';
}

/* arg appears in the message as a word (not inside a longer identifier). */
static int names_arg(const char *arg) {
    const char *m = tfc_last_error(), *p = m;
    size_t n = strlen(arg);
    while ((p = strstr(p, arg)) != NULL) {
        int before = p == m || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = !(isalnum((unsigned char)p[n]) || p[n] == '_');
        if (before && after) return 1;
        p += n;
    }
    return 0;
}

int fx_expect_ok(tfc_status s, const char *fn) {
    if (s == TFC_OK) return 0;
    if (fx_oom_injected()) { /* an allocation failed: a clean TFC_ERR_OOM naming fn */
        if (s == TFC_ERR_OOM) return fx_expect_clean(s, fn);
        fprintf(stderr, "    an allocation failed, and the call returned %s: %s\n", tfc_status_name(s),
                tfc_last_error());
        return 1;
    }
    fprintf(stderr, "    valid call failed: %s: %s\n", tfc_status_name(s), tfc_last_error());
    (void)fn;
    return 1;
}

int fx_expect_error(tfc_status s, const char *fn, const char *arg) {
    int bad = 0;
    if (s == TFC_OK) {
        fprintf(stderr, "    accepted (TFC_OK)\n");
        return 1;
    }
    if (!names_fn(fn)) fprintf(stderr, "    message does not start with '%s:': '%s'\n", fn, tfc_last_error()), bad = 1;
    if (arg && !names_arg(arg))
        fprintf(stderr, "    message does not name argument '%s': '%s'\n", arg, tfc_last_error()), bad = 1;
    if (!fx_outs_untouched()) fprintf(stderr, "    an out-parameter was written on error\n"), bad = 1;
    return bad;
}

int fx_expect_clean(tfc_status s, const char *fn) {
    if (s == TFC_OK) return 0;
    int bad = 0;
    if (!names_fn(fn)) fprintf(stderr, "    message does not start with '%s:': '%s'\n", fn, tfc_last_error()), bad = 1;
    if (!fx_outs_untouched()) fprintf(stderr, "    an out-parameter was written on error\n"), bad = 1;
    return bad;
}

int fx_expect_value(int ok, const char *want) {
    if (ok) return 0;
    fprintf(stderr, "    NULL did not give the documented %s\n", want);
    return 1;
}
