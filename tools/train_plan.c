/*
 * The memory plan (train_plan.h). What a training step holds at its peak,
 * the end of backward (the graph keeps every saved tensor until
 * tfc_graph_clear, and every gradient exists by then):
 *
 *   parameters + gradients + AdamW's m and v (from the first step on)
 *   + the activations the forward pass saved + backward's transients.
 *
 * Activations per layer, rows N = B·T, width C (lib/model/gpt.c and what
 * each op of lib/ops keeps for its backward):
 *   ln_1 saves its input x [N,C] and mean/rstd [N] ×2; c_attn saves its
 *   input h [N,C]; attention saves q, k, v (views of qkv [N,3C]), its
 *   output [N,C] and the row log-sum-exp [B,H,T]; the head merge copies to
 *   att2 [N,C], saved by c_proj; ln_2 saves x' [N,C] and stats; c_fc saves
 *   h2 [N,C]; GELU saves its input [N,4C]; mlp.c_proj saves the GELU output
 *   [N,4C]: 17·N·C + 4·N + H·N values (Korthikanti et al.'s 34·s·b·h bytes
 *   at 2 bytes a value, without the s² attention term that the fused
 *   kernel never stores). With dropout the unfused attention also keeps the
 *   probabilities and their dropped copy, 2·B·H·T², and the four dropout
 *   outputs, which feed saved ops, add nothing saved of their own.
 * After the blocks: ln_f saves x [N,C] and stats; the fused head and loss
 * (lib/ops/linear_cross_entropy.c) saves its input [N,C] and computes dh
 * [N,C] and dW [V,C] already in forward (dW becomes wte's gradient, counted
 * with the gradients). Its logits chunk R·V is the forward workspace.
 * Evaluation (the validation loss) runs the whole --batch at once without
 * a graph; the forward keeps each of its temporaries until it returns
 * (gpt.c's scope): per layer the 17 values above plus the two block
 * outputs and the residual sums, 19·N·C + stats, while gradients are
 * freed (zero_grad) and AdamW's state stays: its peak is params + AdamW +
 * that, and the plan's peak is the larger of the two.
 * Backward's transients: the residual gradient and the MLP's two [N,4C]
 * gradients alive at once, and the embedding's dense [V,C] gradient of wte
 * before it is added to the head's. With --grad-accum K > 1, a micro-step
 * after the first makes its gradients beside the sums they are added to:
 * the gradients count twice, except wte's (the head's dW is added where it
 * is; measured: char-small at K = 2 peaks one parameter set higher than at
 * K = 1, gpt2-mini, whose parameters are mostly wte, only by its blocks').
 * bf16 autocast (lib/ops/linear_bf16.c, lib/model/gpt_autocast.c) on the
 * CPU keeps the same activations — each Linear saves its input rounded to
 * bf16 values in f32 storage instead of the input, which dies with its
 * block (lib/model/gpt.c) — and adds the bf16 copies of the four Linear
 * weights a layer and of the head's weight, 2 bytes a value, refreshed
 * once per optimizer step; and to backward's transients the rounded copy
 * of the MLP's [N,4C] gradient. The head's rounded h [N,C] and widened
 * weight [V,C] live only during its forward, before backward's workspace
 * exists (measured: gpt2-mini's bf16 peak is f32's plus the copies).
 *
 * The Llama family (lib/model/gpt.c's RMSNorm / q,k,v,o / RoPE / SwiGLU
 * path), with Ckv = n_kv_head·D the width of k and v and F the MLP's:
 * input_layernorm saves x [N,C] and rstd [N]; q_proj, k_proj and v_proj
 * save h [N,C] (one tensor); RoPE saves only the positions and
 * frequencies, so the projections' own outputs die with the forward except
 * v's; attention saves the rotated q [N,C] and k [N,Ckv], v [N,Ckv], its
 * output [N,C] and lse [B,H,T] (grouped heads read in place: no repeated
 * k/v); o_proj saves the merged copy [N,C]; post_attention_layernorm x'
 * [N,C] and rstd; gate_proj and up_proj h2 [N,C]; SwiGLU its inputs gate
 * and up [N,F]; down_proj their product [N,F]: 7·N·C + 2·N·Ckv + 3·N·F +
 * 2·N + H·N values. After the blocks: model.norm's x and rstd, the head's
 * h and dh. Backward's MLP transients: SwiGLU's three [N,F] gradients (of
 * its output, gate and up). Evaluation keeps per block h, q, k, v, the
 * rotated q and k, the attention output, its merged copy, o_proj's output,
 * x', h2, gate, up, their product, down_proj's output and the block output:
 * 10·N·C + 3·N·Ckv + 3·N·F + stats; outside them the embedding, the block
 * input, the final norm and its stats. bf16 autocast copies q, k, v, o,
 * gate, up, down and the head, and its Linears each keep their own rounded
 * input: q, k and v three copies of h, gate and up two of h2, three [N,C]
 * more a layer than f32 keeps. The KV cache holds the kv heads: 2·L·T·Ckv.
 * (measured: llama-tiny at batch 4 and 16, f32, bf16 and --recompute, peaks
 * within 4% of this plan)
 */
#include "train_plan.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "model_dims.h"

/* The size class lib/core/alloc.c rounds n bytes up to: 64-byte steps to 1 KiB, then quarters of a power of two. */
static int64_t alloc_rounded(int64_t n) {
    if (n <= 0) n = 1;
    if (n <= 1024) return (n + 63) / 64 * 64;
    int p = 63 - __builtin_clzll((unsigned long long)(n - 1));
    int64_t base = (int64_t)1 << p, quarter = base / 4;
    return base + (n - base + quarter - 1) / quarter * quarter;
}

/* bytes of a tensor of `numel` values of `es` bytes, as allocated */
static int64_t tb(int64_t numel, int64_t es) { return alloc_rounded(numel * es); }

/*
 * The widths one layer's activations and weights are made of (C, 3C, 4C
 * for GPT-2; q's C, k and v's Ckv, the MLP's F for the Llama family) and
 * what the architecture keeps per layer beyond them, so one plan serves
 * both (the header comment derives each term).
 */
typedef struct plan_dims {
    int64_t C, Ckv, F, H, V, T, L;
    int llama;
} plan_dims;

/* The parameter table (lib/model/gpt_params.c), tensor by tensor: *bytes as allocated and *n values. */
static void param_sizes(const tfc_gpt_config *c, const plan_dims *d, int64_t es, int64_t *bytes, int64_t *n) {
    const int64_t C = d->C, V = d->V, F = d->F, Ckv = d->Ckv;
    int64_t pb = tb(V * C, es) + (c->tie_weights ? 0 : tb(V * C, es)), pn = V * C + (c->tie_weights ? 0 : V * C);
    int64_t lb, ln;
    if (!d->llama) {
        const int64_t bias = c->bias;
        pb += tb(d->T * C, es) + tb(C, es) * (1 + bias); /* wpe, ln_f */
        pn += d->T * C + C * (1 + bias);
        lb = tb(C, es) * 2 * (1 + bias) + tb(C * 3 * C, es) + tb(C * C, es) + tb(C * 4 * C, es) + tb(4 * C * C, es) +
            bias * (tb(3 * C, es) + tb(C, es) + tb(4 * C, es) + tb(C, es));
        ln = 2 * C * (1 + bias) + 12 * C * C + bias * 9 * C;
    } else {
        /* q, o [C,C]; k, v [Ckv,C]; gate, up [F,C], down [C,F]; two RMSNorm weights; the biases the arch has */
        const int64_t qkv_b = c->attention_bias, o_b = c->attention_bias && c->arch == TFC_GPT_ARCH_LLAMA,
                      mlp_b = c->mlp_bias;
        pb += tb(C, es); /* model.norm */
        pn += C;
        lb = 2 * tb(C, es) + 2 * tb(C * C, es) + 2 * tb(Ckv * C, es) + 3 * tb(F * C, es) +
            qkv_b * (tb(C, es) + 2 * tb(Ckv, es)) + o_b * tb(C, es) + mlp_b * (2 * tb(F, es) + tb(C, es));
        ln = 2 * C + 2 * C * C + 2 * Ckv * C + 3 * F * C + qkv_b * (C + 2 * Ckv) + o_b * C + mlp_b * (2 * F + C);
    }
    *bytes = pb + d->L * lb;
    *n = pn + d->L * ln;
}

void train_plan_make(const tfc_gpt_config *c, int64_t rows, int64_t eval_rows, int64_t grad_accum, int autocast_bf16,
                     train_plan *p) {
    memset(p, 0, sizeof *p);
    const int64_t es = c->dtype == TFC_DTYPE_F64 ? 8 : 4;
    const plan_dims d = {.C = c->n_embd,
                         .Ckv = dims_kv_width(c),
                         .F = dims_mlp_hidden(c),
                         .H = c->n_head,
                         .V = c->vocab_size,
                         .T = c->block_size,
                         .L = c->n_layer,
                         .llama = dims_is_llama(c)};
    const int64_t C = d.C, T = d.T, V = d.V, L = d.L, H = d.H, F = d.F, Ckv = d.Ckv, N = rows * T;
    int64_t pb, n;
    param_sizes(c, &d, es, &pb, &n);
    p->n_params = n;
    p->rows = N;
    p->eval_rows = eval_rows * T;
    p->params = pb;
    /* with accumulation a later micro-step's gradients exist beside the sums they are added to (wte's: no) */
    p->grads = grad_accum > 1 ? 2 * pb - tb(V * C, es) : pb;
    p->optim = 2 * pb;
    /* per layer, as the header comment counts it */
    const int64_t nc = tb(N * C, es), stats = tb(N, es);
    int64_t layer = d.llama ? 6 * nc + nc + 2 * tb(N * Ckv, es) + 3 * tb(N * F, es) + 2 * stats + tb(N * H, es)
                            : 6 * nc + tb(N * 3 * C, es) + 2 * tb(N * 4 * C, es) + 4 * stats + tb(N * H, es);
    if (c->dropout > 0) layer += 2 * tb(rows * H * T * T, es);
    /* bf16 autocast: each Linear keeps its own rounded copy of its input; q, k, v share h and gate, up share h2,
       so the family keeps three [N,C] more than the one h and one h2 of f32 (GPT-2's c_attn and c_fc: no change) */
    if (autocast_bf16 && d.llama) layer += 3 * nc;
    /* the final norm's x and stats (LayerNorm: mean and rstd; RMSNorm: rstd), the head's h, dh */
    const int64_t head = 2 * nc + (d.llama ? 1 : 2) * stats + nc;
    const int64_t lce_rows = (8 << 20) / (V * es) > 256 ? (8 << 20) / (V * es) : 256;
    p->acts = L * layer + head;
    /* --recompute (per-block checkpointing): the block inputs, plus one block's activations during its backward */
    p->acts_recompute = L * nc + layer + head;
    /* the MLP's gradients alive at once: GPT-2's two [N,4C] (around GELU), SwiGLU's three [N,F] (a's, gate's, up's) */
    const int64_t mlp_grads = d.llama ? 3 * tb(N * F, es) : 2 * tb(N * 4 * C, es);
    /* + wte's gradient from the embedding's backward, before it is added to the head's */
    p->workspace = tb((lce_rows < N ? lce_rows : N) * V, es) + nc + mlp_grads + tb(V * C, es);
    if (autocast_bf16) {
        p->copies = d.llama ? L * (2 * tb(C * C, 2) + 2 * tb(Ckv * C, 2) + 3 * tb(F * C, 2)) + tb(V * C, 2)
                            : L * (tb(3 * C * C, 2) + tb(C * C, 2) + 2 * tb(4 * C * C, 2)) + tb(V * C, 2);
        p->workspace += tb(N * F, es);
    }
    /* one sequence's keys and values, the kv heads only */
    p->kv_cache = 2 * L * tb(T * Ckv, es);
    /* evaluation: a forward of the whole batch without a graph, which frees each block's temporaries when the
       block ends: the embeddings, the block input and one block's temporaries, then the final norm and the head's
       chunk */
    const int64_t ne = eval_rows * T, nce = tb(ne * C, es), stats_e = tb(ne, es);
    const int64_t block_e = d.llama
        ? 10 * nce + 3 * tb(ne * Ckv, es) + 3 * tb(ne * F, es) + 2 * stats_e + tb(ne * H, es)
        : 8 * nce + tb(ne * 3 * C, es) + 2 * tb(ne * 4 * C, es) + 4 * stats_e + tb(ne * H, es);
    p->eval =
        block_e + (d.llama ? 4 * nce + stats_e : 5 * nce + 2 * stats_e) + tb((lce_rows < ne ? lce_rows : ne) * V, es);
    const int64_t train = p->params + p->grads + p->optim + p->copies + p->acts + p->workspace,
                  train_rc = p->params + p->grads + p->optim + p->copies + p->acts_recompute + p->workspace,
                  eval = p->params + p->optim + p->copies + p->eval;
    p->peak = train > eval ? train : eval;
    p->peak_recompute = train_rc > eval ? train_rc : eval;
}

static double mb(int64_t b) { return (double)b / 1e6; }

void train_plan_print(FILE *f, const train_plan *p, const tfc_gpt_config *c) {
    fprintf(f, "memory plan (%lld parameters, %s, micro-batch of %lld tokens):\n", (long long)p->n_params,
            c->dtype == TFC_DTYPE_F64 ? "f64" : "f32", (long long)p->rows);
    fprintf(f, "  parameters            %10.2f MB\n", mb(p->params));
    fprintf(f, "  gradients             %10.2f MB\n", mb(p->grads));
    fprintf(f, "  AdamW state (m, v)    %10.2f MB\n", mb(p->optim));
    if (p->copies) fprintf(f, "  bf16 weight copies    %10.2f MB  (autocast's GEMM operands)\n", mb(p->copies));
    fprintf(f, "  activations           %10.2f MB  (%.2f MB with --recompute)\n", mb(p->acts), mb(p->acts_recompute));
    fprintf(f, "  workspace             %10.2f MB  (head logits chunk, backward's activation gradients)\n",
            mb(p->workspace));
    fprintf(f, "  evaluation forward    %10.2f MB  (the whole batch of %lld tokens, no graph)\n", mb(p->eval),
            (long long)p->eval_rows);
    fprintf(f, "  KV cache (sampling)   %10.2f MB  (after training, one sequence of %d positions)\n", mb(p->kv_cache),
            c->block_size);
    fprintf(f, "  planned peak          %10.2f MB  (%.2f MB with --recompute)\n", mb(p->peak), mb(p->peak_recompute));
}

/* VmHWM / VmRSS of /proc/self/status in bytes, -1 when unreadable. */
static int64_t proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    const size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0 && line[k] == ':') {
            v = atoll(line + k + 1) * 1024;
            break;
        }
    fclose(f);
    return v;
}

void train_plan_measure(int64_t *lib_peak, int64_t *lib_live, int64_t *rss_peak, int64_t *rss_now) {
    uint64_t live = 0, peak = 0;
    tfc_memory_stats(NULL, &live, NULL, &peak);
    *lib_peak = (int64_t)peak;
    *lib_live = (int64_t)live;
    *rss_peak = proc_status_kb("VmHWM");
    if (*rss_peak < 0) {
        struct rusage u;
        *rss_peak = getrusage(RUSAGE_SELF, &u) == 0 ? (int64_t)u.ru_maxrss * 1024 : -1;
    }
    *rss_now = proc_status_kb("VmRSS");
}
