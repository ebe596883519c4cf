/*
 * tfcore train's checks for a run that goes wrong (train_forensics.h): the
 * one-batch overfit check, the non-finite watch with its report, per-layer
 * gradient norms in the log, and --recompute.
 */
#include "train_forensics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int fx_parse_flag(forensics_opts *o, const char *cmd, const char *name, const char *val, int *rc) {
    int64_t iv;
    *rc = 0;
    if (strcmp(name, "overfit-batch") == 0 || strcmp(name, "recompute") == 0) {
        if (val) *rc = cli_error(EXIT_USAGE, cmd, "--%s takes no value", name);
        if (name[0] == 'o')
            o->overfit = 1;
        else
            o->recompute = 1;
        return 1;
    }
    if (strcmp(name, "skip-nonfinite") == 0 || strcmp(name, "log-grad-norms") == 0) {
        if (!val) {
            *rc = cli_error(EXIT_USAGE, cmd, "--%s needs a value", name);
        } else if (!cli_int(cmd, name, val, name[0] == 's' ? 0 : 1, 100000000, &iv)) {
            *rc = EXIT_USAGE;
        } else if (name[0] == 's') {
            o->skip_nonfinite = iv;
        } else {
            o->log_grad_norms = iv;
        }
        return 1;
    }
    return 0;
}

void fx_usage(FILE *f) {
    fprintf(f,
            "--overfit-batch trains --steps steps on one fixed batch (no evaluation, no checkpoint) and says whether\n"
            "the loss got below %.2f: the first check before a real run (it stops as soon as it does).\n"
            "A non-finite (NaN/Inf) loss or gradient stops the run with a non-zero status before the update, leaving\n"
            "the checkpoint in --out as it was, and writes OUT/nonfinite-stepN.json (the first non-finite gradient\n"
            "in backward order, non-finite weights, per-layer gradient and weight norms of the last %d steps, the\n"
            "learning rate) and the batch's token ids to OUT/nonfinite-stepN.batch.safetensors; --skip-nonfinite N\n"
            "instead skips up to N such steps (no update, Adam's state untouched) and stops at the next one.\n"
            "--log-grad-norms K adds per-layer gradient norms to the --log-json line every K steps.\n"
            "--recompute keeps only each block's input for backward and recomputes the block there (activation\n"
            "checkpointing: less memory, about one more forward per step, bitwise the same gradients).\n",
            FX_OVERFIT_LOSS, FX_RING);
}

int fx_check_opts(const forensics_opts *o, const char *cmd, int resume, int64_t save_every) {
    if (o->overfit && resume)
        return cli_error(EXIT_USAGE, cmd, "--overfit-batch is a check of a fresh model: it does not take --resume");
    if (o->overfit && save_every)
        return cli_error(EXIT_USAGE, cmd, "--overfit-batch writes no checkpoint: it does not take --save-every");
    return 0;
}

/* The group of a parameter name: "transformer.h.N" for a block's, else the name without ".weight"/".bias". */
static void group_of(const char *name, char *buf, size_t n) {
    const char *h = "transformer.h.";
    if (strncmp(name, h, strlen(h)) == 0) {
        const char *dot = strchr(name + strlen(h), '.');
        size_t len = dot ? (size_t)(dot - name) : strlen(name);
        snprintf(buf, n, "%.*s", (int)len, name);
        return;
    }
    snprintf(buf, n, "%s", name);
    char *last = strrchr(buf, '.');
    if (last && (strcmp(last, ".weight") == 0 || strcmp(last, ".bias") == 0)) *last = 0;
}

int fx_setup(forensics *f, const forensics_opts *o, const char *cmd, const char *out, tfc_gpt *m) {
    memset(f, 0, sizeof *f);
    f->o = *o;
    f->out = out;
    f->head = -1;
    f->first_loss = f->last_loss = NAN;
    if (o->recompute && tfc_gpt_set_recompute(m, 1) != TFC_OK) return cli_lib_error(cmd, "--recompute");
    if (tfc_gpt_params(m, &f->n, &f->names, &f->params) != TFC_OK) return cli_lib_error(cmd, "parameters");
    f->group = calloc((size_t)f->n, sizeof *f->group);
    f->group_names = calloc((size_t)f->n, sizeof *f->group_names);
    int bad = !f->group || !f->group_names;
    for (int k = 0; k < FX_RING && !bad; k++) {
        f->ring[k].grad = calloc((size_t)f->n, sizeof(double));
        f->ring[k].weight = calloc((size_t)f->n, sizeof(double));
        bad = !f->ring[k].grad || !f->ring[k].weight;
    }
    for (int32_t i = 0; i < f->n && !bad; i++) {
        char g[256];
        group_of(f->names[i], g, sizeof g);
        int32_t j = 0;
        while (j < f->n_groups && strcmp(f->group_names[j], g) != 0) j++;
        if (j == f->n_groups && !(f->group_names[f->n_groups++] = strdup(g))) bad = 1;
        f->group[i] = j;
    }
    if (bad) return cli_error(EXIT_RUNTIME, cmd, "out of memory");
    return 0;
}

void fx_free(forensics *f) {
    for (int k = 0; k < FX_RING; k++) {
        free(f->ring[k].grad);
        free(f->ring[k].weight);
    }
    for (int32_t j = 0; j < f->n_groups && f->group_names; j++) free(f->group_names[j]);
    free(f->group_names);
    free(f->group);
}

int64_t fx_batch_index(const forensics *f, int64_t step) { return f->o.overfit ? 0 : step; }

/*
 * ‖t‖₂, summed in f64 on the CPU (a huge but finite gradient must not read as
 * Inf); NaN or Inf exactly when t holds one (or, on a GPU, when the f32 sum
 * of squares overflows). 0 for t NULL (no gradient).
 */
/* Whether t is a contiguous (row-major) CPU f32/f64 tensor: its elements then lie in one run at tfc_tensor_data. */
static int dense_cpu(const tfc_tensor *t) {
    const tfc_dtype dt = tfc_tensor_dtype(t);
    const int32_t nd = tfc_tensor_ndim(t);
    int64_t st[16];
    if (tfc_tensor_device_type(t) != TFC_DEVICE_CPU || (dt != TFC_DTYPE_F32 && dt != TFC_DTYPE_F64) || nd < 0 ||
        nd > 16 || tfc_tensor_strides(t, st, 16) != TFC_OK)
        return 0;
    int64_t want = 1;
    for (int32_t d = nd - 1; d >= 0; d--) {
        if (tfc_tensor_dim(t, d) != 1 && st[d] != want) return 0;
        want *= tfc_tensor_dim(t, d);
    }
    return 1;
}

static tfc_status l2(const tfc_tensor *t, double *out) {
    *out = 0;
    if (!t) return TFC_OK;
    if (dense_cpu(t)) { /* in place: an f64 copy of a GPT-2 wte gradient would be 309 MB, twice, every step */
        const int64_t n = tfc_tensor_numel(t);
        double acc = 0;
        if (tfc_tensor_dtype(t) == TFC_DTYPE_F32) {
            const float *x = tfc_tensor_data(t);
            for (int64_t i = 0; i < n; i++) acc += (double)x[i] * (double)x[i];
        } else {
            const double *x = tfc_tensor_data(t);
            for (int64_t i = 0; i < n; i++) acc += x[i] * x[i];
        }
        *out = sqrt(acc);
        return TFC_OK;
    }
    tfc_tensor *c = NULL, *sq = NULL, *s = NULL;
    const int cpu = tfc_tensor_device_type(t) == TFC_DEVICE_CPU;
    tfc_status st = cpu ? tfc_cast(NULL, t, TFC_DTYPE_F64, &c) : TFC_OK;
    const tfc_tensor *v = cpu ? c : t;
    if (st == TFC_OK) st = tfc_mul(NULL, v, v, &sq);
    if (st == TFC_OK) st = tfc_sum(NULL, sq, NULL, 0, 0, &s);
    if (st == TFC_OK) st = tfc_tensor_item(s, out);
    if (st == TFC_OK) *out = sqrt(*out);
    tfc_tensor_release(c);
    tfc_tensor_release(sq);
    tfc_tensor_release(s);
    return st;
}

/* A JSON number, or the strings "nan", "inf", "-inf" (JSON has no such numbers). */
static void jnum(FILE *fp, double v) {
    if (isnan(v))
        fputs("\"nan\"", fp);
    else if (isinf(v))
        fputs(v > 0 ? "\"inf\"" : "\"-inf\"", fp);
    else
        fprintf(fp, "%.9g", v);
}

/* {"group": norm, ...} of one ring entry's per-parameter norms v (groups add in quadrature). */
static void group_norms(const forensics *f, FILE *fp, const double *v) {
    fputc('{', fp);
    for (int32_t j = 0; j < f->n_groups; j++) {
        double s = 0;
        for (int32_t i = 0; i < f->n; i++)
            if (f->group[i] == j) s += v[i] * v[i];
        fprintf(fp, "%s\"%s\": ", j ? ", " : "", f->group_names[j]);
        jnum(fp, sqrt(s));
    }
    fputc('}', fp);
}

/* Measure step's norms into the next ring entry. */
/*
 * The norms of tensors on a device, every sum of squares gathered into one tensor read back once: one host wait
 * for all of them instead of one per tensor (issue #19; a GPT-2 has 148 parameters and as many gradients).
 * ts[k] may be NULL (norm 0). Returns TFC_ERR_UNSUPPORTED when a tensor is on the CPU (l2 reads those in place).
 */
static tfc_status l2_device(tfc_tensor *const *ts, int32_t n, double *out) {
    tfc_tensor **sums = calloc((size_t)n + 1, sizeof *sums), *all = NULL;
    double *h = malloc(((size_t)n + 1) * sizeof *h);
    tfc_status s = sums && h ? TFC_OK : TFC_ERR_OOM;
    int32_t m = 0;
    for (int32_t k = 0; k < n && s == TFC_OK; k++) {
        out[k] = 0;
        if (!ts[k]) continue;
        if (tfc_tensor_device_type(ts[k]) == TFC_DEVICE_CPU) s = TFC_ERR_UNSUPPORTED;
        tfc_tensor *sq = NULL, *t = NULL;
        const int64_t d1[1] = {1};
        if (s == TFC_OK) s = tfc_mul(NULL, ts[k], ts[k], &sq);
        if (s == TFC_OK) s = tfc_sum(NULL, sq, NULL, 0, 0, &t);
        if (s == TFC_OK) s = tfc_reshape(NULL, t, d1, 1, &sums[m]);
        if (s == TFC_OK) m++;
        tfc_tensor_release(sq);
        tfc_tensor_release(t);
    }
    tfc_tensor *f64 = NULL;
    if (s == TFC_OK && m) s = tfc_concat(NULL, (const tfc_tensor *const *)sums, m, 0, &all);
    if (s == TFC_OK && m && tfc_tensor_dtype(all) != TFC_DTYPE_F64) {
        tfc_tensor *cpu = NULL; /* the device may not cast to f64: read its dtype, widen on the host */
        s = tfc_tensor_to_device(all, TFC_DEVICE_CPU, 0, &cpu);
        if (s == TFC_OK) s = tfc_cast(NULL, cpu, TFC_DTYPE_F64, &f64);
        tfc_tensor_release(cpu);
    } else if (s == TFC_OK && m) {
        s = tfc_tensor_to_device(all, TFC_DEVICE_CPU, 0, &f64);
    }
    if (s == TFC_OK && m) s = tfc_tensor_copy_to_host(f64, h, (size_t)m * sizeof *h);
    for (int32_t k = 0, j = 0; k < n && s == TFC_OK; k++)
        if (ts[k]) out[k] = sqrt(h[j++]);
    for (int32_t k = 0; sums && k < m; k++) tfc_tensor_release(sums[k]);
    tfc_tensor_release(all);
    tfc_tensor_release(f64);
    free(sums);
    free(h);
    return s;
}

static tfc_status measure(forensics *f, int64_t done, double lr, double loss) {
    f->head = (f->head + 1) % FX_RING;
    fx_ring_entry *e = &f->ring[f->head];
    e->step = done;
    e->lr = lr;
    e->loss = loss;
    if (f->n > 0 && tfc_tensor_device_type(f->params[0]) != TFC_DEVICE_CPU) {
        tfc_tensor **gs = calloc((size_t)f->n, sizeof *gs);
        tfc_status s = gs ? TFC_OK : TFC_ERR_OOM;
        for (int32_t i = 0; i < f->n && s == TFC_OK; i++) s = tfc_tensor_grad(f->params[i], &gs[i]);
        if (s == TFC_OK) s = l2_device(gs, f->n, e->grad);
        for (int32_t i = 0; gs && i < f->n; i++) tfc_tensor_release(gs[i]);
        free(gs);
        if (s == TFC_OK) s = l2_device(f->params, f->n, e->weight);
        if (s != TFC_ERR_UNSUPPORTED) return s; /* else some parameter is on the CPU: one at a time below */
    }
    for (int32_t i = 0; i < f->n; i++) {
        tfc_tensor *g = NULL;
        tfc_status s = tfc_tensor_grad(f->params[i], &g);
        if (s == TFC_OK) s = l2(g, &e->grad[i]);
        tfc_tensor_release(g);
        if (s == TFC_OK) s = l2(f->params[i], &e->weight[i]);
        if (s != TFC_OK) return s;
    }
    return TFC_OK;
}

/* The report's name for step done: OUT/nonfinite-step<done><suffix>. */
static const char *report_path(const forensics *f, int64_t done, const char *suffix) {
    char name[96];
    snprintf(name, sizeof name, "nonfinite-step%lld%s", (long long)done, suffix);
    return path_join(f->out, name);
}

/* The first parameter, in backward order (the reverse of the parameter table), whose gradient is not finite. */
static int32_t first_bad_grad(const forensics *f) {
    const fx_ring_entry *e = &f->ring[f->head];
    for (int32_t i = f->n - 1; i >= 0; i--)
        if (!isfinite(e->grad[i])) return i;
    return -1;
}

static void name_list(const forensics *f, FILE *fp, const double *v) {
    fputc('[', fp);
    int first = 1;
    for (int32_t i = 0; i < f->n; i++)
        if (!isfinite(v[i])) {
            fprintf(fp, "%s\"%s\"", first ? "" : ", ", f->names[i]);
            first = 0;
        }
    fputc(']', fp);
}

/* s as a JSON string (quotes and backslashes escaped, control bytes as \\u00XX). */
static void jstr(FILE *fp, const char *s) {
    fputc('"', fp);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(fp, "\\%c", c);
        else if (c < 0x20)
            fprintf(fp, "\\u%04x", c);
        else
            fputc(c, fp);
    }
    fputc('"', fp);
}

/* OUT/nonfinite-stepN.json and the batch beside it; 0 or the exit code. */
static int write_report(const forensics *f, const char *cmd, const char *action, const tfc_tensor *x,
                        const tfc_tensor *y) {
    const fx_ring_entry *e = &f->ring[f->head];
    char batch_path[4096], json_path[4096];
    snprintf(batch_path, sizeof batch_path, "%s", report_path(f, e->step, ".batch.safetensors"));
    snprintf(json_path, sizeof json_path, "%s", report_path(f, e->step, ".json"));
    if (ensure_dir(f->out) != 0) return cli_error(EXIT_RUNTIME, cmd, "cannot create '%s' for the report", f->out);
    const char *names[2] = {"x", "y"};
    tfc_tensor *ts[2] = {(tfc_tensor *)x, (tfc_tensor *)y};
    if (tfc_safetensors_save(batch_path, names, ts, 2, NULL, NULL, 0) != TFC_OK)
        return cli_lib_error(cmd, "writing the non-finite step's batch");
    FILE *fp = fopen(json_path, "w");
    if (!fp) return cli_error(EXIT_RUNTIME, cmd, "cannot write the report '%s'", json_path);
    const int32_t g = first_bad_grad(f);
    int32_t w = -1;
    for (int32_t i = 0; i < f->n && w < 0; i++)
        if (!isfinite(e->weight[i])) w = i;
    fprintf(fp, "{\n  \"step\": %lld,\n  \"action\": \"%s\",\n  \"reason\": \"%s\",\n  \"loss\": ", (long long)e->step,
            action, isfinite(e->loss) ? "non-finite gradient" : "non-finite loss");
    jnum(fp, e->loss);
    fprintf(fp, ",\n  \"lr\": ");
    jnum(fp, e->lr);
    /* the weights say where a NaN came from when it was already in them (the loss then poisons every gradient) */
    fprintf(fp, ",\n  \"suspect\": ");
    if (w >= 0 || g >= 0)
        fprintf(fp, "\"%s\"", f->names[w >= 0 ? w : g]);
    else
        fprintf(fp, "null");
    fprintf(fp, ",\n  \"first_nonfinite_grad\": ");
    if (g >= 0)
        fprintf(fp, "\"%s\"", f->names[g]);
    else
        fprintf(fp, "null");
    fprintf(fp, ",\n  \"nonfinite_grads\": ");
    name_list(f, fp, e->grad);
    fprintf(fp, ",\n  \"nonfinite_weights\": ");
    name_list(f, fp, e->weight);
    fprintf(fp, ",\n  \"batch_file\": ");
    jstr(fp, batch_path);
    fprintf(fp, ",\n  \"batch_shape\": [%lld, %lld],\n  \"params\": {", (long long)tfc_tensor_dim(x, 0),
            (long long)tfc_tensor_dim(x, 1));
    for (int32_t i = 0; i < f->n; i++) {
        fprintf(fp, "%s\n    \"%s\": {\"grad_norm\": ", i ? "," : "", f->names[i]);
        jnum(fp, e->grad[i]);
        fprintf(fp, ", \"weight_norm\": ");
        jnum(fp, e->weight[i]);
        fputc('}', fp);
    }
    fprintf(fp, "\n  },\n  \"history\": [");
    /* oldest first */
    int first = 1;
    for (int k = 1; k <= FX_RING; k++) {
        const fx_ring_entry *h = &f->ring[(f->head + k) % FX_RING];
        if (!h->step) continue;
        fprintf(fp, "%s\n    {\"step\": %lld, \"loss\": ", first ? "" : ",", (long long)h->step);
        jnum(fp, h->loss);
        fprintf(fp, ", \"lr\": ");
        jnum(fp, h->lr);
        fprintf(fp, ",\n     \"grad_norms\": ");
        group_norms(f, fp, h->grad);
        fprintf(fp, ",\n     \"weight_norms\": ");
        group_norms(f, fp, h->weight);
        fputc('}', fp);
        first = 0;
    }
    fprintf(fp, "\n  ]\n}\n");
    if (fclose(fp) != 0) return cli_error(EXIT_RUNTIME, cmd, "cannot write the report '%s'", json_path);
    return 0;
}

/* Any rank saw a non-finite value: every rank takes the same branch. */
static tfc_status agree(tfc_comm *comm, int *bad) {
    if (!comm || tfc_comm_size(comm) == 1) return TFC_OK;
    double v = *bad;
    tfc_tensor *t = NULL;
    tfc_status s = tfc_tensor_from_data(&v, NULL, 0, TFC_DTYPE_F64, &t);
    if (s == TFC_OK) s = tfc_all_reduce(comm, t, TFC_COMM_SUM);
    if (s == TFC_OK) s = tfc_tensor_item(t, &v);
    tfc_tensor_release(t);
    *bad = v != 0;
    return s;
}

/*
 * Test hook (tests/cli/test_cli_forensics.sh): TFCORE_TEST_NAN_GRAD=
 * "STEP[,STEP...]:PARAM" makes the first element of PARAM's gradient NaN
 * after backward at those 1-based steps: a transient non-finite gradient,
 * which no file a user can edit produces, to test --skip-nonfinite going on.
 */
static tfc_status inject_nan(const forensics *f, int64_t done) {
    const char *spec = getenv("TFCORE_TEST_NAN_GRAD"), *colon = spec ? strchr(spec, ':') : NULL;
    if (!colon) return TFC_OK;
    int hit = 0;
    for (const char *p = spec; p < colon && !hit; p = strchr(p, ',') ? strchr(p, ',') + 1 : colon)
        hit = strtoll(p, NULL, 10) == done;
    for (int32_t i = 0; i < f->n && hit; i++) {
        if (strcmp(f->names[i], colon + 1) != 0) continue;
        tfc_tensor *g = NULL;
        tfc_status s = tfc_tensor_grad(f->params[i], &g);
        size_t bytes = g ? (size_t)tfc_tensor_numel(g) * tfc_dtype_size(tfc_tensor_dtype(g)) : 0;
        unsigned char *buf = bytes ? malloc(bytes) : NULL;
        if (s == TFC_OK && buf && tfc_tensor_dtype(g) == TFC_DTYPE_F32) {
            s = tfc_tensor_copy_to_host(g, buf, bytes);
            const float nan = NAN;
            memcpy(buf, &nan, sizeof nan);
            if (s == TFC_OK) s = tfc_tensor_copy_from_host(g, buf, bytes);
        }
        free(buf);
        tfc_tensor_release(g);
        return s;
    }
    return TFC_OK;
}

int fx_after_backward(forensics *f, const char *cmd, int64_t step, double lr, double loss, const tfc_tensor *x,
                      const tfc_tensor *y, tfc_comm *comm, int rank) {
    if (inject_nan(f, step + 1) != TFC_OK) return cli_lib_error(cmd, "TFCORE_TEST_NAN_GRAD");
    if (measure(f, step + 1, lr, loss) != TFC_OK) return cli_lib_error(cmd, "measuring the gradient norms");
    const fx_ring_entry *e = &f->ring[f->head];
    int bad = !isfinite(loss);
    for (int32_t i = 0; i < f->n && !bad; i++) bad = !isfinite(e->grad[i]);
    if (agree(comm, &bad) != TFC_OK) return cli_lib_error(cmd, "agreeing on a non-finite step");
    if (!bad) return 0;
    const int skip = f->skipped < f->o.skip_nonfinite;
    char action[96];
    if (skip)
        snprintf(action, sizeof action, "skipped (%lld of --skip-nonfinite %lld)", (long long)f->skipped + 1,
                 (long long)f->o.skip_nonfinite);
    else
        snprintf(action, sizeof action, "stopped");
    int rc = rank == 0 ? write_report(f, cmd, action, x, y) : 0;
    if (rc) return rc;
    const int32_t g = first_bad_grad(f);
    char what[64];
    snprintf(what, sizeof what, isfinite(loss) ? "gradient" : isnan(loss) ? "loss (nan)" : "loss (%g)", loss);
    const char *json = report_path(f, step + 1, ".json");
    if (skip) {
        f->skipped++;
        if (rank == 0)
            fprintf(stderr,
                    "tfcore %s: warning: non-finite %s at step %lld: update skipped (%lld of %lld allowed); first "
                    "non-finite gradient in backward order: %s; report: %s\n",
                    cmd, what, (long long)(step + 1), (long long)f->skipped, (long long)f->o.skip_nonfinite,
                    g >= 0 ? f->names[g] : "none", json);
        return FX_SKIP;
    }
    int32_t w = -1, n_w = 0;
    for (int32_t i = 0; i < f->n; i++)
        if (!isfinite(e->weight[i]) && n_w++ == 0) w = i;
    char gave_up[96] = "";
    if (f->o.skip_nonfinite)
        snprintf(gave_up, sizeof gave_up, " after skipping %lld step(s) (--skip-nonfinite %lld)", (long long)f->skipped,
                 (long long)f->o.skip_nonfinite);
    return cli_error(EXIT_RUNTIME, cmd,
                     "non-finite %s at step %lld; stopping%s before the update (the checkpoint in '%s' is left as "
                     "it was). First non-finite gradient in backward order: %s; non-finite weights: %s%s. Report: "
                     "%s (batch token ids beside it)",
                     what, (long long)(step + 1), gave_up, f->out, g >= 0 ? f->names[g] : "none",
                     w >= 0 ? f->names[w] : "none", n_w > 1 ? " and more (see the report)" : "", json);
}

void fx_log_json(const forensics *f, FILE *jl, int64_t done) {
    if (!f->o.log_grad_norms || done % f->o.log_grad_norms != 0 || f->head < 0 || f->ring[f->head].step != done) return;
    fprintf(jl, ", \"grad_norms\": ");
    group_norms(f, jl, f->ring[f->head].grad);
}

int fx_overfit_step(forensics *f, int64_t done, double loss) {
    if (!f->o.overfit) return 0;
    if (isnan(f->first_loss)) f->first_loss = loss;
    f->last_loss = loss;
    f->last_step = done;
    return loss < FX_OVERFIT_LOSS;
}

int fx_overfit_report(const forensics *f, const char *cmd) {
    const int ok = f->last_loss < FX_OVERFIT_LOSS;
    printf("overfit-batch: loss %.4f -> %.4f after %lld steps on one batch: %s\n", f->first_loss, f->last_loss,
           (long long)f->last_step,
           ok ? "below "
                "0.05, the model can learn (PASS)"
              : "not below 0.05 (FAIL: a bug in the model, the data or the learning rate; or more --steps)");
    fflush(stdout);
    if (!ok)
        return cli_error(EXIT_RUNTIME, cmd, "--overfit-batch: the loss did not get below %.2f in %lld steps",
                         FX_OVERFIT_LOSS, (long long)f->last_step);
    return 0;
}
