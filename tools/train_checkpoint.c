/*
 * tfcore train and the checkpoint in --out (train_run.h): what a resumed
 * run takes from it (vocabulary, preset, shards, the step, weights,
 * optimizer state, loss history), the checks that refuse one that does not
 * fit the run, and the saves (tools/checkpoint.c writes them as one unit).
 */
#include <stdlib.h>
#include <string.h>

#include "train_run.h"

/* --resume: the vocabulary (so token ids mean the same) and, unless --preset is given, the preset. */
int train_ckpt_open_resume(train_run *r) {
    /* first finish or discard a save a kill interrupted */
    int rc = ckpt_recover(CMD, r->o.out);
    if (rc) return rc;
    if (!ckpt_exists(r->o.out)) return cli_error(EXIT_USAGE, CMD, "--resume: no checkpoint in '%s'", r->o.out);
    /* model and optimizer checked against checkpoint.json and against each other before anything is written */
    rc = ckpt_open(CMD, r->o.out, CKPT_VERIFY | CKPT_OPTIMIZER, &r->ck);
    if (rc) return rc;
    const char *vm = NULL, *pr = NULL;
    if (tfc_safetensors_metadata(r->ck.model, "tfc.vocab", &vm) != TFC_OK) vm = NULL;
    /* a --data-bin run resumes on the same shards unless told otherwise */
    const char *db = NULL, *vb = NULL, *df = NULL;
    if (!r->o.data_bin && !r->o.data && tfc_safetensors_metadata(r->ck.model, "train.data_bin", &db) == TFC_OK && db) {
        snprintf(r->data_bin, sizeof r->data_bin, "%s", db);
        r->o.data_bin = r->data_bin;
        if (!r->o.val_bin && tfc_safetensors_metadata(r->ck.model, "train.val_bin", &vb) == TFC_OK && vb) {
            snprintf(r->val_bin, sizeof r->val_bin, "%s", vb);
            r->o.val_bin = r->val_bin;
        }
        if (tfc_safetensors_metadata(r->ck.model, "train.data_format", &df) == TFC_OK && df) {
            snprintf(r->data_format, sizeof r->data_format, "%s", df);
            r->o.data_format = r->data_format;
        }
    }
    if (!r->o.preset_given && tfc_safetensors_metadata(r->ck.model, "train.preset", &pr) == TFC_OK && pr) {
        snprintf(r->preset, sizeof r->preset, "%s", pr);
        r->o.preset = r->preset;
    }
    return vocab_from_meta(CMD, vm, ckpt_path(&r->ck, "tokenizer.tfctok"), ckpt_path(&r->ck, "tokenizer.json"), &r->v);
}

/*
 * The first entry of the checkpoint's config (model file f) that differs
 * from c: its key, the checkpoint's value (NULL when absent) and c's, into
 * *key, *theirs, want (n bytes); 0 when none differs. The shape and the
 * vocabulary size must be there; tfc.bias, tfc.tie_weights and tfc.dtype
 * are compared where present (a LoRA run's adapter file records the shape
 * only). A file without tfc.arch holds GPT-2; the Llama family's own keys
 * (tfc_gpt_save's tfc.n_kv_head ... tfc.rope.theta) are compared when c is
 * of the family, which a checkpoint of it has.
 */
static int config_differs(const tfc_safetensors *f, const tfc_gpt_config *c, const char **key, const char **theirs,
                          char *want, size_t n) {
    enum { REQUIRED, OPTIONAL, FAMILY };
    enum { INT, REAL, ARCH, DTYPE };
    const int family = c->arch != TFC_GPT_ARCH_GPT2;
    const struct {
        const char *key;
        double v;
        int when, kind;
    } keys[] = {{"tfc.arch", 0, REQUIRED, ARCH},
                {"tfc.n_layer", c->n_layer, REQUIRED, INT},
                {"tfc.n_head", c->n_head, REQUIRED, INT},
                {"tfc.n_embd", c->n_embd, REQUIRED, INT},
                {"tfc.block_size", c->block_size, REQUIRED, INT},
                {"tfc.vocab_size", c->vocab_size, REQUIRED, INT},
                {"tfc.bias", c->bias, OPTIONAL, INT},
                {"tfc.tie_weights", c->tie_weights, OPTIONAL, INT},
                {"tfc.dtype", 0, OPTIONAL, DTYPE},
                {"tfc.n_kv_head", c->n_kv_head, FAMILY, INT},
                {"tfc.mlp_hidden", (double)c->mlp_hidden, FAMILY, INT},
                {"tfc.attention_bias", c->attention_bias, FAMILY, INT},
                {"tfc.mlp_bias", c->mlp_bias, FAMILY, INT},
                {"tfc.sliding_window", c->sliding_window, FAMILY, INT},
                {"tfc.rope.type", c->rope.rope_type, FAMILY, INT},
                {"tfc.rope.theta", c->rope.theta, FAMILY, REAL}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (keys[i].when == FAMILY && !family) continue;
        const char *s = NULL;
        if (tfc_safetensors_metadata(f, keys[i].key, &s) != TFC_OK) s = NULL;
        if (!s && keys[i].kind == ARCH) s = "gpt2"; /* written before the Llama family, or a GPT-2 model */
        if (!s && keys[i].when == OPTIONAL) continue;
        int same = 0;
        switch (keys[i].kind) {
        case INT:
            snprintf(want, n, "%.0f", keys[i].v);
            same = s && strtod(s, NULL) == keys[i].v;
            break;
        case REAL:
            snprintf(want, n, "%.15g", keys[i].v);
            same = s && strtod(s, NULL) == keys[i].v;
            break;
        case ARCH: /* tfc_gpt_arch_name: the name tfc_gpt_save writes */
            snprintf(want, n, "%s", tfc_gpt_arch_name(c->arch) ? tfc_gpt_arch_name(c->arch) : "?");
            same = strcmp(s, want) == 0;
            break;
        default: /* the run's weights: f64, or f32 (a bf16 run's too) */
            snprintf(want, n, "%s", c->dtype == TFC_DTYPE_F64 ? "f64" : "f32");
            same = s && strcmp(s, want) == 0;
        }
        if (!same) {
            *key = keys[i].key;
            *theirs = s;
            return 1;
        }
    }
    return 0;
}

/*
 * Refuse a checkpoint in --out whose config differs from c (checked before
 * anything is written); --resume: the step to start from, refusing a run
 * that would end at or before it (--steps, --stop-after): it would train
 * nothing and write the model back at an earlier step than its optimizer.
 * A --resume run's checkpoint is open already (train_ckpt_open_resume).
 */
int train_ckpt_check_existing(train_run *r, const tfc_gpt_config *c, int64_t *start_step) {
    const train_opts *o = &r->o;
    ckpt_set fresh;
    memset(&fresh, 0, sizeof fresh);
    ckpt_set *ck = o->resume ? &r->ck : &fresh;
    int rc = 0;
    if (!o->resume) {
        if ((rc = ckpt_recover(CMD, o->out)) != 0) return rc;
        if (!ckpt_exists(o->out)) return 0;
        if ((rc = ckpt_open(CMD, o->out, 0, ck)) != 0) return rc;
    }
    const char *key = NULL, *theirs = NULL;
    char want[32];
    if (config_differs(ck->model, c, &key, &theirs, want, sizeof want) && !(o->force && !o->resume))
        rc = cli_error(EXIT_USAGE, CMD,
                       "'%s' holds a checkpoint of another config (%s %s, this run %s); use another --out%s", o->out,
                       key + 4, theirs ? theirs : "?", want, o->resume ? "" : " or --force");
    if (!rc && o->resume) {
        *start_step = ck->step; /* ckpt_open refused a checkpoint without one */
        if (*start_step >= o->steps)
            rc = cli_error(EXIT_USAGE, CMD, "the checkpoint is at step %lld, --steps is %lld: nothing to do",
                           (long long)*start_step, (long long)o->steps);
        else if (o->stop_after && o->stop_after <= *start_step)
            rc = cli_error(EXIT_USAGE, CMD,
                           "--stop-after %lld on --resume: the checkpoint in '%s' is at step %lld already; stop "
                           "after a later step (the checkpoint is left as it is)",
                           (long long)o->stop_after, o->out, (long long)*start_step);
    }
    ckpt_close(&fresh);
    return rc;
}

/* Whether two vocabularies give every token id the same bytes. */
static int same_vocab(const vocab *a, const vocab *b) {
    if (a->kind != b->kind || a->size != b->size) return 0;
    for (int32_t id = 0; id < a->size; id++) {
        const char *x, *y;
        size_t nx, ny;
        if (vocab_token_bytes(a, id, &x, &nx) != 0 || vocab_token_bytes(b, id, &y, &ny) != 0 || nx != ny ||
            memcmp(x, y, nx) != 0)
            return 0;
    }
    return 1;
}

int train_ckpt_check_tokenizer(const train_run *r, const char *text, size_t len) {
    vocab given;
    memset(&given, 0, sizeof given);
    int rc = cli_make_vocab(CMD, r->o.tokenizer, text, len, &given);
    if (!rc && !same_vocab(&given, &r->v))
        rc = cli_error(EXIT_USAGE, CMD,
                       "--tokenizer %s on --resume: the checkpoint in '%s' was trained with another vocabulary (%d "
                       "tokens, this one %d%s); resume without --tokenizer (the checkpoint's is used)",
                       r->o.tokenizer, r->o.out, r->v.size, given.size, given.size == r->v.size ? ", other ones" : "");
    vocab_free(&given);
    return rc;
}

/* --resume of a LoRA run: its base is the directory the checkpoint names, unless --lora-base moves it. */
int train_ckpt_lora_base(train_run *r) {
    const char *b = NULL;
    if (!r->o.lora.base && (tfc_safetensors_metadata(r->ck.model, "lora.base", &b) != TFC_OK || !b))
        return cli_error(EXIT_USAGE, CMD,
                         "--resume: the LoRA checkpoint in '%s' does not name its base; give --lora-base DIR",
                         r->o.out);
    if (!r->o.lora.base) {
        snprintf(r->lora_base, sizeof r->lora_base, "%s", b);
        r->o.lora.base = r->lora_base;
    }
    return 0;
}

/*
 * A resumed run's loss curve starts with the rows of the previous runs'
 * loss.csv up to the checkpoint's step, so the CSV and SVG cover the whole
 * run. A missing or damaged file costs only the history (a warning).
 */
static void load_history(const train_opts *o, int64_t start, loss_log *curve) {
    char csv[4096];
    snprintf(csv, sizeof csv, "%s", path_join(o->out, "loss.csv"));
    int64_t bad = 0;
    int r = loss_log_read_csv(curve, csv, start, &bad);
    if (r == -1)
        fprintf(stderr, "tfcore train: warning: cannot read %s; the loss curve will cover steps %lld.. only\n", csv,
                (long long)start);
    else if (r == -2)
        fprintf(stderr,
                "tfcore train: warning: %s line %lld is not a 'step,loss,val_loss,lr' row in step order; the loss "
                "curve will cover steps %lld.. only\n",
                csv, (long long)bad, (long long)start);
    else if (curve->n == 0 || curve->step[curve->n - 1] != start)
        fprintf(stderr, "tfcore train: warning: %s ends at step %lld, the checkpoint is at step %lld\n", csv,
                curve->n ? (long long)curve->step[curve->n - 1] : 0LL, (long long)start);
}

/* --resume: weights, optimizer state and loss history from the checkpoint in --out. */
int train_ckpt_resume_state(train_run *r) {
    if (!r->ck.lora && tfc_gpt_load_into(r->m, ckpt_path(&r->ck, "model.safetensors")) != TFC_OK)
        return cli_lib_error(CMD, "resuming");
    int rc = ckpt_load_optim(CMD, &r->ck, r->opt);
    ckpt_close(&r->ck);
    if (rc) return rc;
    load_history(&r->o, r->start, &r->curve);
    return 0;
}

/* Weights, optimizer state, the position to resume from (`done` steps trained) and the loss curve so far. */
int train_ckpt_save(const train_run *r, int64_t done) {
    char step[32], seed[32], batch[32], steps[32], title[256];
    snprintf(step, sizeof step, "%lld", (long long)done);
    snprintf(seed, sizeof seed, "%lld", (long long)r->o.seed);
    snprintf(batch, sizeof batch, "%lld", (long long)r->o.batch);
    snprintf(steps, sizeof steps, "%lld", (long long)r->o.steps);
    snprintf(title, sizeof title, "tfcore train: %s, %s, batch %d, steps %lld-%lld", r->o.preset, r->o.tokenizer,
             (int)r->o.batch, (long long)(r->curve.n ? r->curve.step[0] - 1 : r->start), (long long)done);
    /* a --data-bin run also records its shards (as given: a relative pattern resumes from the same directory) */
    const char *keys[] = {"train.step",   "train.seed",     "train.batch",       "train.steps",
                          "train.preset", "train.data_bin", "train.data_format", "train.val_bin"};
    const char *vals[] = {step, seed, batch, steps, r->o.preset, r->o.data_bin, r->o.data_format, r->o.val_bin};
    const int32_t n_meta = !r->o.data_bin ? 5 : !r->o.val_bin ? 7 : 8;
    /* a sharded optimizer's state is gathered on rank 0 (every rank takes part) */
    tfc_optim *full = NULL;
    if (tfc_optim_is_sharded(r->opt) && tfc_optim_gather(r->opt, 0, &full) != TFC_OK)
        return cli_lib_error(CMD, "gathering the sharded optimizer state");
    if (r->rank != 0) return 0;
    const ckpt_contents c = {.model = r->m,
                             .opt = full ? full : r->opt,
                             .v = &r->v,
                             .keys = keys,
                             .vals = vals,
                             .n_meta = n_meta,
                             .step = done,
                             .curve = &r->curve,
                             .curve_title = title,
                             .lora_base = r->o.lora.base};
    int rc = ckpt_save(CMD, r->o.out, &c);
    tfc_optim_release(full);
    return rc;
}
