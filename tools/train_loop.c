/*
 * tfcore train's steps (train_run.h): batch `step` drawn from (seed, step),
 * split into micro-steps and ranks, forward and backward, the non-finite
 * watch, clipping and AdamW; evaluation on the validation split; --profile.
 */
#include <math.h>
#include <string.h>

#include "train_mfu.h"
#include "train_run.h"

/* Mean loss over eval_batches fixed random batches of the val split, no graph. */
static int val_loss(const train_run *r, double *out) {
    const int32_t B = (int32_t)r->o.batch, T = r->cfg.block_size;
    double sum = 0;
    for (int64_t k = 0; k < r->o.eval_batches; k++) {
        tfc_tensor *x, *y, *loss;
        if (tfc_token_file_batch(r->vf, r->val_begin, r->val_end, B, T, (uint64_t)r->o.seed ^ 0x5eedULL, (uint64_t)k,
                                 &x, &y) != TFC_OK)
            return cli_lib_error(CMD, "val batch");
        tfc_status s = tfc_gpt_forward(r->m, NULL, x, y, NULL, &loss);
        tfc_tensor_release(x);
        tfc_tensor_release(y);
        if (s != TFC_OK) return cli_lib_error(CMD, "val forward");
        double l;
        s = tfc_tensor_item(loss, &l);
        tfc_tensor_release(loss);
        if (s != TFC_OK) return cli_lib_error(CMD, "val loss");
        sum += l;
    }
    *out = sum / (double)r->o.eval_batches;
    return 0;
}

/* The per-op table of steps [begin, end) to stderr. */
static tfc_status print_profile(int64_t begin, int64_t end) {
    char *table = NULL;
    tfc_status s = tfc_profile_report(&table);
    if (s != TFC_OK) return s;
    fflush(stdout);
    if (end - begin == 1)
        fprintf(stderr, "\ntfcore train: profile of step %lld (forward, backward, clip, optimizer):\n", (long long)end);
    else
        fprintf(stderr, "\ntfcore train: profile of steps %lld..%lld (forward, backward, clip, optimizer):\n",
                (long long)begin + 1, (long long)end);
    fputs(table, stderr);
    fputc('\n', stderr);
    fflush(stderr);
    tfc_free(table);
    return TFC_OK;
}

/*
 * Micro-step j of K on this rank: rows [(j·N + rank)·b, +b) of the global
 * batch x, y (b = B/(N·K)), forward and backward with the loss scaled by
 * 1/K (the seed), so K micro-steps add up to the gradient of the batch
 * mean; *l gets the micro-batch's loss.
 */
static tfc_status micro_step(train_run *r, const tfc_tensor *x, const tfc_tensor *y, int64_t j, double *l) {
    /* l NULL: a step that does not log; its loss stays on the device (reading it would wait for the step) */
    const int64_t K = r->o.grad_accum, b = r->o.batch / (r->size * K), first = (j * r->size + r->rank) * b;
    tfc_tensor *xs = NULL, *ys = NULL, *loss = NULL, *seed = NULL;
    tfc_status s = tfc_narrow(NULL, x, 0, first, b, &xs);
    if (s == TFC_OK) s = tfc_narrow(NULL, y, 0, first, b, &ys);
    if (s == TFC_OK && K > 1) s = tfc_tensor_full(NULL, 0, r->cfg.dtype, 1.0 / (double)K, &seed);
    /* the gradients are averaged over ranks once the last micro-step's backward finishes them */
    if (s == TFC_OK && r->ddp) s = tfc_ddp_set_sync(r->ddp, j == K - 1);
    if (s == TFC_OK) s = tfc_gpt_forward(r->m, r->g, xs, ys, NULL, &loss);
    if (s == TFC_OK) s = tfc_graph_backward(r->g, loss, seed);
    if (s == TFC_OK && l) s = tfc_tensor_item(loss, l);
    if (s == TFC_OK) s = tfc_graph_clear(r->g);
    tfc_tensor_release(xs);
    tfc_tensor_release(ys);
    tfc_tensor_release(loss);
    tfc_tensor_release(seed);
    return s;
}

/* The mean of this rank's micro-step losses over all ranks: the loss one process reports for the batch. */
static tfc_status global_loss(train_run *r, double *l) {
    if (r->size == 1) return TFC_OK;
    tfc_tensor *t = NULL;
    tfc_status s = tfc_tensor_from_data(l, NULL, 0, TFC_DTYPE_F64, &t);
    if (s == TFC_OK) s = tfc_all_reduce(r->comm, t, TFC_COMM_AVG);
    if (s == TFC_OK) s = tfc_tensor_item(t, l);
    tfc_tensor_release(t);
    return s;
}

/*
 * One optimizer step on batch `step`: sets its learning rate, and with `logged` its loss and gradient norm (read
 * on the host, which on CUDA waits for the step) and the non-finite watch; without, *l and *norm are NaN and
 * nothing is read back: the loss is left on the device and the clipping runs there (tfc_optim_clip_grad_norm_async).
 */
static tfc_status train_step(train_run *r, int64_t step, int logged, double *lr, double *l, double *norm) {
    const train_opts *o = &r->o;
    tfc_tensor *x = NULL, *y = NULL;
    tfc_status s = tfc_lr_cosine(step, o->lr, o->min_lr, o->warmup, o->steps, lr);
    if (s == TFC_OK) s = tfc_optim_set_lr(r->opt, *lr);
    /* dropout masks: a function of (seed, step, rank, micro-step), so a resumed run repeats them */
    if (s == TFC_OK)
        s = tfc_gpt_set_dropout_stream(r->m, (uint64_t)o->seed,
                                       ((uint64_t)step * (uint64_t)r->size + (uint64_t)r->rank) *
                                           (uint64_t)o->grad_accum);
    if (s == TFC_OK)
        s = tfc_token_file_batch(r->tf, 0, r->n_train, (int32_t)o->batch, r->cfg.block_size, (uint64_t)o->seed,
                                 (uint64_t)fx_batch_index(&r->fx, step), &x, &y);
    /* profiled: forward, backward, clip and the optimizer step (not the batch, eval or logging) */
    const int profiled = step >= r->prof_begin && step < r->prof_end;
    if (s == TFC_OK && profiled && step == r->prof_begin) s = tfc_profile_reset();
    if (s == TFC_OK && profiled) s = tfc_profile_enable(1);
    double sum = 0;
    for (int64_t j = 0; j < o->grad_accum && s == TFC_OK; j++) {
        double lj = 0;
        s = micro_step(r, x, y, j, logged ? &lj : NULL);
        sum += lj;
    }
    *l = logged ? sum / (double)o->grad_accum : NAN;
    *norm = NAN;
    if (s == TFC_OK && r->ddp) s = tfc_ddp_finish(r->ddp);
    if (s == TFC_OK && logged) s = global_loss(r, l);
    /* a non-finite step stops the run or is skipped: no clip, no update, only the gradients dropped */
    r->fx_rc = s == TFC_OK && logged ? fx_after_backward(&r->fx, CMD, step, *lr, *l, x, y, r->comm, r->rank) : 0;
    if (s == TFC_OK && !r->fx_rc)
        s = logged ? tfc_optim_clip_grad_norm(r->opt, o->clip, norm)
                   : tfc_optim_clip_grad_norm_async(r->opt, o->clip, NULL);
    if (s == TFC_OK && !r->fx_rc) s = tfc_optim_step(r->opt);
    if (s == TFC_OK) s = tfc_optim_zero_grad(r->opt, 1);
    if (s == TFC_OK && profiled) s = tfc_profile_enable(0);
    if (s == TFC_OK && profiled && step == r->prof_end - 1 && r->rank == 0)
        s = print_profile(r->prof_begin, r->prof_end);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    return s;
}

int train_loop(train_run *r) {
    train_report_header(r);
    train_report_mfu(r);
    /* --profile: the steps after the first (warm-up: allocator, caches), or the only one */
    r->prof_begin = r->end_step - r->start >= 2 ? r->start + 1 : r->start;
    r->prof_end = r->prof_begin;
    if (r->o.profile_steps)
        r->prof_end =
            r->prof_begin + r->o.profile_steps < r->end_step ? r->prof_begin + r->o.profile_steps : r->end_step;
    r->t0 = now_s();
    r->last_val = NAN;
    const double tokens_per_step = (double)r->o.batch * (double)r->cfg.block_size;
    /* --log-every: the steps since the last logged one, timed together (their work is only queued until then) */
    double t_interval = 0;
    int64_t interval_steps = 0;
    for (int64_t step = r->start; step < r->end_step; step++) {
        const double t_step = now_s();
        if (interval_steps == 0) t_interval = t_step;
        step_stats st = {.done = step + 1, .loss = NAN, .val = NAN};
        st.eval = (st.done % r->o.eval_every == 0 || st.done == r->end_step) && !r->o.fx.overfit;
        const int logged = st.done % r->log_every == 0 || st.done == r->start + 1 || st.done == r->end_step ||
            st.eval || (r->o.save_every && st.done % r->o.save_every == 0);
        if (train_step(r, step, logged, &st.lr, &st.loss, &st.norm) != TFC_OK)
            return cli_lib_error(CMD, "training step");
        interval_steps++;
        if (r->fx_rc == FX_SKIP) {
            interval_steps = 0;
            continue;
        }
        if (r->fx_rc) return r->fx_rc;
        if (!logged) continue;
        const double t1 = now_s();
        st.elapsed_s = t1 - r->t0;
        st.tokens_per_s = tokens_per_step * (double)interval_steps / (t1 - t_interval);
        st.mfu = mfu_of(r->flops_per_token, st.tokens_per_s, r->peak_flops);
        train_report_check_mfu(r, &st);
        r->mfu_sum += isnan(st.mfu) ? 0 : st.mfu * (double)interval_steps;
        r->mfu_n += isnan(st.mfu) ? 0 : interval_steps;
        interval_steps = 0;
        if (st.eval && r->rank == 0) {
            int rc = val_loss(r, &st.val);
            if (rc) return rc;
            r->last_val = st.val;
        }
        loss_log_add(&r->curve, st.done, st.loss, st.val, st.lr);
        train_report_step(r, &st);
        if (fx_overfit_step(&r->fx, st.done, st.loss)) break;
        /* --save-every: the last step's checkpoint is save()'s */
        if (r->o.save_every && st.done % r->o.save_every == 0 && st.done < r->end_step) {
            int rc = train_ckpt_save(r, st.done);
            if (rc) return rc;
        }
    }
    return 0;
}
