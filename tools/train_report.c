/*
 * What tfcore train prints (train_run.h): the header and memory plan, MFU,
 * the progress lines (a bar on a terminal), --log-json records, the
 * measured memory, ZeRO's and DDP's numbers, the final line and a sample.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train_mfu.h"
#include "train_plan.h"
#include "train_run.h"

static void fmt_eta(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e7)
        snprintf(buf, n, "?");
    else if (s >= 3600)
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, n, "%.0fs", s);
}

static void log_json(FILE *jl, const step_stats *st, const forensics *fx) {
    char mfu[32] = "null";                                           /* an MFU not known (train_report_check_mfu) */
    if (!isnan(st->mfu)) snprintf(mfu, sizeof mfu, "%.9g", st->mfu); /* digits enough for the mean to be checked */
    fprintf(
        jl,
        "{\"step\": %lld, \"loss\": %.17g, \"lr\": %.9g, \"grad_norm\": %.17g, \"tokens_per_s\": %.1f, \"mfu\": %s, "
        "\"elapsed_s\": %.3f",
        (long long)st->done, st->loss, st->lr, st->norm, st->tokens_per_s, mfu, st->elapsed_s);
    /* the timing fields stay before elapsed_s: tests compare what follows it between runs */
    if (st->eval) fprintf(jl, ", \"val_loss\": %.17g", st->val);
    fx_log_json(fx, jl, st->done);
    fprintf(jl, "}\n");
    fflush(jl);
}

/* On a terminal a bar redrawn in place (a new line at each eval); otherwise a line every 10 steps and at each eval. */
static void print_progress(const train_run *r, const step_stats *st) {
    char eta[32], mfu[32] = "n/a";
    if (!isnan(st->mfu)) snprintf(mfu, sizeof mfu, "%.1f%%", 100.0 * st->mfu);
    fmt_eta(st->elapsed_s / (double)(st->done - r->start) * (double)(r->end_step - st->done), eta, sizeof eta);
    if (isatty(fileno(stdout))) {
        int width = 24, fill = (int)((double)width * (double)st->done / (double)r->end_step);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        char vs[32] = "-";
        if (!isnan(r->last_val)) snprintf(vs, sizeof vs, "%.4f", r->last_val);
        printf("\r[%s] step %lld/%lld  loss %.4f  val %s  %.0f tok/s  MFU %s  ETA %s   ", bar, (long long)st->done,
               (long long)r->end_step, st->loss, vs, st->tokens_per_s, mfu, eta);
        if (st->eval) printf("\n");
        fflush(stdout);
    } else if (st->eval || st->done % 10 == 0 || st->done == r->start + 1 || r->log_every > 1) {
        printf("step %lld/%lld  loss %.4f", (long long)st->done, (long long)r->end_step, st->loss);
        if (st->eval) printf("  val %.4f", st->val);
        printf("  lr %.2e  %.0f tok/s  elapsed %.0fs  ETA %s  MFU %s\n", st->lr, st->tokens_per_s, st->elapsed_s, eta,
               mfu);
        fflush(stdout);
    }
}

void train_report_step(const train_run *r, const step_stats *st) {
    if (r->jl) log_json(r->jl, st, &r->fx);
    print_progress(r, st);
}

void train_report_header(const train_run *r) {
    const tfc_gpt_config *c = &r->cfg;
    if (c->arch == TFC_GPT_ARCH_GPT2) {
        printf("tfcore train: %s, preset %s (%d layers, %d heads, %d dims, block %d, vocab %d), %lld parameters\n",
               r->data_path, r->o.preset, c->n_layer, c->n_head, c->n_embd, c->block_size, c->vocab_size,
               (long long)tfc_gpt_num_elements(r->m));
    } else { /* the family's own widths too: kv heads, the MLP, the window, rope's theta */
        char window[48] = "";
        if (c->sliding_window) snprintf(window, sizeof window, ", window %d", c->sliding_window);
        printf("tfcore train: %s, preset %s (%s: %d layers, %d heads, %d kv heads, %d dims, MLP %lld, rope theta %g%s, "
               "block %d, %s head, vocab %d), %lld parameters\n",
               r->data_path, r->o.preset, tfc_gpt_arch_name(c->arch), c->n_layer, c->n_head, c->n_kv_head, c->n_embd,
               (long long)c->mlp_hidden, c->rope.theta, window, c->block_size, c->tie_weights ? "tied" : "untied",
               c->vocab_size, (long long)tfc_gpt_num_elements(r->m));
    }
    printf("device: %s, dtype %s\n", r->o.device, r->o.dtype);
    if (r->o.lora.base) {
        printf("lora-base: %s\n", r->o.lora.base);
        lora_print_summary(r->m);
    }
    if (r->size > 1 || r->o.zero || r->o.grad_accum > 1)
        printf("ranks: %d (%s); %lld micro-steps of %lld rows per rank; %s\n", r->size, tfc_comm_backend(r->comm),
               (long long)r->o.grad_accum, (long long)(r->o.batch / (r->size * r->o.grad_accum)),
               r->o.zero         ? "ZeRO-1 sharded optimizer state"
                   : r->size > 1 ? "gradients averaged in buckets during backward"
                                 : "one process");
    if (r->o.data_bin) {
        printf("data-bin: %s, %lld file(s) of %s", r->o.data_bin, (long long)r->bin_files[0], r->bin_format[0]);
        if (r->o.val_bin)
            printf("; val-bin: %s, %lld file(s) of %s", r->o.val_bin, (long long)r->bin_files[1], r->bin_format[1]);
        printf("\n");
    }
    train_plan p;
    train_plan_make(c, r->o.batch / (r->size * r->o.grad_accum), r->o.batch, r->o.grad_accum,
                    strcmp(r->o.dtype, "bf16") == 0, &p);
    train_plan_print(stdout, &p, c);
    if (r->o.lora.base)
        printf("  (the plan is a full run's: a LoRA run's smaller gradients and optimizer state and its adapters'\n"
               "  activations are not modelled yet, so the measured peak is not compared with it)\n");
    printf("data: %lld tokens (%lld train, %lld val); batch %d x %d; steps %lld..%lld of %lld; out %s\n",
           (long long)r->n_tokens, (long long)r->n_train, (long long)(r->n_tokens - r->n_train), (int)r->o.batch,
           c->block_size, (long long)r->start, (long long)r->end_step, (long long)r->o.steps, r->o.out);
    fflush(stdout);
}

void train_report_mfu(train_run *r) {
    /* MFU: every rank its own peak (--peak-flops is per process) */
    int64_t n_lora = 0; /* a LoRA run trains its adapters only */
    int32_t nl = 0;
    const char *const *lnames;
    tfc_tensor *const *lps;
    if (r->o.lora.base && tfc_gpt_lora_params(r->m, &nl, &lnames, &lps) == TFC_OK)
        for (int32_t i = 0; i < nl; i++) n_lora += tfc_tensor_numel(lps[i]);
    r->flops_per_token = r->o.lora.base ? mfu_lora_flops_per_token(&r->cfg, tfc_gpt_num_elements(r->m), n_lora)
                                        : mfu_flops_per_token(&r->cfg, tfc_gpt_num_elements(r->m));
    r->peak_flops = (double)r->size *
        mfu_peak_flops(r->o.peak_flops, r->o.cuda_index,
                       r->cfg.dtype == TFC_DTYPE_F64         ? MFU_F64
                           : strcmp(r->o.dtype, "bf16") == 0 ? MFU_BF16
                                                             : MFU_F32,
                       tfc_get_num_threads(), r->peak_src, sizeof r->peak_src);
    r->peak_measured = r->o.peak_flops <= 0 && r->o.cuda_index < 0;
    /* S: the keys a query sees, T or the sliding window W when it is shorter (train_mfu.h) */
    const int windowed = r->cfg.sliding_window > 0 && r->cfg.sliding_window < r->cfg.block_size;
    printf("MFU: %.4g FLOPs per token (%s%s), peak %.4g FLOP/s (%s)\n", r->flops_per_token,
           r->o.lora.base ? "4N + 6N_lora + " : "6N + ",
           windowed ? (r->o.lora.base ? "12LCW, W the sliding window: no gradients of the frozen weights"
                                      : "12LCW, W the sliding window")
                    : (r->o.lora.base ? "12LCT: no gradients of the frozen weights" : "12LCT"),
           r->peak_flops, r->peak_src);
}

void train_report_check_mfu(train_run *r, step_stats *st) {
    if (!(st->mfu > 1.0) || !r->peak_measured) return;
    if (!r->peak_rechecked) {
        r->peak_rechecked = 1;
        /* r->peak_flops is every rank's f32 peak, halved for f64 */
        const double scale = (double)r->size * (r->cfg.dtype == TFC_DTYPE_F64 ? 0.5 : 1.0), was = r->peak_flops;
        const double again = scale * mfu_measure_again(tfc_get_num_threads(), was / scale);
        if (again > r->peak_flops) r->peak_flops = again;
        const double before = st->mfu;
        st->mfu = mfu_of(r->flops_per_token, st->tokens_per_s, r->peak_flops);
        printf("MFU: step %lld ran at %.1f%% of the peak %.4g FLOP/s, which cannot be: measured again, %.4g FLOP/s; "
               "the peak is now %.4g FLOP/s%s\n",
               (long long)st->done, 100.0 * before, was, again, r->peak_flops,
               st->mfu > 1.0 ? ", still below this step's rate: MFU is not shown (give --peak-flops)" : "");
    }
    if (st->mfu > 1.0) {
        st->mfu = NAN;
        r->mfu_unknown++;
    }
}

/* A short sample from a newline (or token 0), streamed to stdout. */
static int sample(train_run *r) {
    int32_t prompt = 0;
    if (r->v.kind == VOCAB_CHAR && r->v.index['\n'] >= 0) prompt = r->v.index['\n'];
    const int32_t n = (int32_t)r->o.sample_tokens;
    int32_t *out = malloc((size_t)n * sizeof *out);
    /* Generation (KV cache, host sampling) runs on the CPU; the optimizer is not used after this. */
    if (r->o.cuda_index >= 0 && tfc_gpt_to_device(r->m, TFC_DEVICE_CPU, 0) != TFC_OK) {
        free(out);
        return cli_lib_error(CMD, "moving the model back to the CPU for sampling");
    }
    printf("--- sample (temperature 0.8, top-k 40) ---\n");
    fflush(stdout);
    int rc = 0;
    if (!out ||
        tfc_gpt_generate(r->m, &prompt, 1, n, 0.8, 40, 1.0, (uint64_t)r->o.seed, out, n, vocab_print_token, &r->v) !=
            TFC_OK)
        rc = cli_lib_error(CMD, "sampling");
    printf("\n---\n");
    free(out);
    return rc;
}

/* How much of the gradient communication backward hid (tfc_ddp's measurements). */
static void print_dist_stats(const train_run *r) {
    tfc_ddp_stats st = {.struct_size = sizeof st};
    if (!r->ddp || tfc_ddp_get_stats(r->ddp, &st) != TFC_OK || st.syncs == 0) return;
    double hidden = st.comm_s > 0 ? 1.0 - st.exposed_s / st.comm_s : 0;
    printf("ddp: %lld buckets in %lld steps, %.1f MB all-reduced per step, communication %.3f s of which %.0f%% "
           "hidden behind backward\n",
           (long long)st.buckets, (long long)st.syncs, (double)st.bytes / (double)st.syncs / 1e6, st.comm_s,
           100.0 * (hidden > 0 ? hidden : 0));
}

/*
 * The optimizer state each rank holds (the largest over ranks) next to what
 * one process holds: what --zero 1 saves. Collective.
 */
static int print_state_memory(train_run *r) {
    int64_t mine = 0;
    tfc_tensor *t = NULL;
    double most = 0;
    if (tfc_optim_state_bytes(r->opt, &mine) != TFC_OK) return cli_lib_error(CMD, "optimizer state size");
    double v = (double)mine;
    if (tfc_tensor_from_data(&v, NULL, 0, TFC_DTYPE_F64, &t) != TFC_OK) return cli_lib_error(CMD, "state size");
    /* every rank's size, to report the largest */
    tfc_tensor *all = NULL;
    int64_t n = r->size;
    tfc_status s = tfc_tensor_zeros(&n, 1, TFC_DTYPE_F64, &all);
    if (s == TFC_OK) s = tfc_all_gather(r->comm, t, all);
    double *h = malloc(sizeof *h * (size_t)n);
    if (s == TFC_OK && h) s = tfc_tensor_copy_to_host(all, h, sizeof *h * (size_t)n);
    for (int64_t i = 0; s == TFC_OK && h && i < n; i++)
        if (h[i] > most) most = h[i];
    free(h);
    tfc_tensor_release(t);
    tfc_tensor_release(all);
    if (s != TFC_OK) return cli_lib_error(CMD, "gathering the optimizer state sizes");
    const double one = 2.0 * (double)tfc_gpt_num_elements(r->m) * (r->cfg.dtype == TFC_DTYPE_F64 ? 8 : 4);
    printf("optimizer state: %.2f MB on the largest of %d ranks (%.2f MB in one process, %.2fx)\n", most / 1e6, r->size,
           one / 1e6, one / (most > 0 ? most : 1));
    return 0;
}

/* The measured peak next to the plan: the library's allocations above what was live before the model, and RSS. */
static void print_memory(const train_run *r) {
    train_plan p;
    train_plan_make(&r->cfg, r->o.batch / (r->size * r->o.grad_accum), r->o.batch, r->o.grad_accum,
                    strcmp(r->o.dtype, "bf16") == 0, &p);
    int64_t lib_peak, lib_live, rss_peak, rss_now;
    train_plan_measure(&lib_peak, &lib_live, &rss_peak, &rss_now);
    const double measured = (double)(lib_peak - r->mem_base);
    if (r->o.fx.recompute) p.peak = p.peak_recompute; /* the plan of the run that ran */
    if (r->o.lora.base) {
        printf("memory: measured peak %.2f MB (library allocations above the %.2f MB live before the model), peak RSS "
               "%.2f MB above the %.2f MB before it\n",
               measured / 1e6, (double)r->mem_base / 1e6, (double)(rss_peak - r->rss_base) / 1e6,
               (double)r->rss_base / 1e6);
        return;
    }
    printf("memory: planned peak %.2f MB, measured peak %.2f MB (%+.1f%%; library allocations above the %.2f MB live "
           "before the model), peak RSS %.2f MB above the %.2f MB before it\n",
           (double)p.peak / 1e6, measured / 1e6, 100.0 * (measured - (double)p.peak) / (double)p.peak,
           (double)r->mem_base / 1e6, (double)(rss_peak - r->rss_base) / 1e6, (double)r->rss_base / 1e6);
}

int train_report_end(train_run *r) {
    if (r->rank == 0) print_memory(r); /* before the checkpoint and the sample allocate their own */
    int rc = train_ckpt_save(r, r->end_step);
    if (rc) return rc;
    if ((r->size > 1 || r->o.zero) && (rc = print_state_memory(r)) != 0) return rc;
    if (r->rank != 0) return 0;
    print_dist_stats(r);
    const loss_log *c = &r->curve;
    char mean[96];
    if (r->mfu_unknown)
        snprintf(mean, sizeof mean, "n/a (%lld logged steps above the measured peak)", (long long)r->mfu_unknown);
    else
        snprintf(mean, sizeof mean, "%.2f%%", 100.0 * (r->mfu_n ? r->mfu_sum / (double)r->mfu_n : 0));
    printf("final: train loss %.4f, val loss %.4f after %lld steps in %.1fs, mean MFU %s\n",
           c->n ? c->loss[c->n - 1] : NAN, r->last_val, (long long)r->end_step, now_s() - r->t0, mean);
    printf("wrote %s/%s, optimizer.safetensors, config.json, loss.csv, loss.svg, checkpoint.json\n", r->o.out,
           r->o.lora.base ? "adapter_model.safetensors, adapter_config.json" : "model.safetensors");
    return r->o.sample_tokens > 0 ? sample(r) : 0;
}
