/*
 * tfcore train's model (train_run.h): where its vocabulary and shape come
 * from (a preset with the shape flags, --init-from's model, a LoRA base, a
 * resumed checkpoint), then the model on its device with its AdamW.
 */
#include <stdlib.h>
#include <string.h>

#include "model_source.h"
#include "train_plan.h"
#include "train_run.h"

static int config_for(const train_opts *o, const vocab *v, tfc_gpt_config *c) {
    *c = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    c->vocab_size = v->size;
    if (tfc_gpt_config_preset(o->preset, c) != TFC_OK)
        return cli_error(EXIT_USAGE, CMD,
                         "unknown preset '%s' (known: char-tiny, char-small, gpt2-mini, gpt2, llama-tiny)", o->preset);
    if (strcmp(o->dtype, "f64") == 0) c->dtype = TFC_DTYPE_F64;
    if (v->size > c->vocab_size)
        return cli_error(EXIT_USAGE, CMD, "the tokenizer has %d tokens but preset %s has a vocabulary of %d", v->size,
                         o->preset, c->vocab_size);
    return 0;
}

int train_model_source(train_run *r, const char *text, size_t len) {
    int rc = 0;
    /* a LoRA run's base: its model, vocabulary and config (a resumed one: the base its checkpoint names) */
    if (!rc && r->o.resume && r->ck.lora) rc = train_ckpt_lora_base(r);
    if (!rc && r->o.resume && !r->ck.lora && r->o.lora.base)
        rc = cli_error(EXIT_USAGE, CMD, "--lora-base: the checkpoint in '%s' is not a LoRA run's (resume it without)",
                       r->o.out);
    if (!rc && r->o.lora.base) {
        vocab bv;
        rc = lora_load_base(CMD, r->o.lora.base, &r->m, r->o.resume ? &bv : &r->v, r->preset);
        if (!rc && r->o.resume) vocab_free(&bv);
        if (!rc && r->preset[0] && !r->o.preset_given) r->o.preset = r->preset;
    } else if (!rc && r->o.init_from) {
        rc = model_source_load(CMD, r->o.init_from, r->o.tokenizer_given ? r->o.tokenizer : NULL, 1, &r->init, &r->v,
                               NULL);
        r->o.preset = INIT_PRESET;
        r->cfg = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
        if (!rc && tfc_gpt_get_config(r->init, &r->cfg) != TFC_OK) rc = cli_lib_error(CMD, "config");
    } else if (!rc && !r->o.resume && !r->m) {
        rc = cli_make_vocab(CMD, r->o.tokenizer_given ? r->o.tokenizer : NULL, text, len, &r->v);
    }
    if (!rc && (r->m || r->init)) {
        r->cfg = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
        if (tfc_gpt_get_config(r->m ? r->m : r->init, &r->cfg) != TFC_OK) rc = cli_lib_error(CMD, "config");
        /* the shape (and dropout) of --init-from's or --lora-base's model is its own */
        if (!rc && train_shape_given(&r->o.shape))
            rc = cli_error(EXIT_USAGE, CMD,
                           "the shape flags (--arch, --n-layer, --n-head, --n-embd, --n-kv-head, --mlp-hidden, "
                           "--block-size, --rope-theta, --sliding-window, --dropout, --bias) do not combine with %s "
                           "(the model's shape is its own)",
                           r->o.lora.base ? "--lora-base or a LoRA run" : "--init-from");
    } else if (!rc && r->o.resume && strcmp(r->o.preset, INIT_PRESET) == 0) {
        /* a resumed --init-from run has the shape of the model it started from, not a preset's */
        r->cfg = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
        if (tfc_gpt_config_from_metadata(r->ck.model, &r->cfg) != TFC_OK)
            rc = cli_lib_error(CMD, "the checkpoint's config");
        if (!rc) rc = train_shape_apply(CMD, &r->o.shape, r->ck.model, 1, &r->cfg);
    } else if (!rc && !r->o.init_from) {
        rc = config_for(&r->o, &r->v, &r->cfg);
        /* --resume keeps the checkpoint's shape unless --preset names one (then checked against it below) */
        if (!rc)
            rc = train_shape_apply(CMD, &r->o.shape, r->o.resume ? r->ck.model : NULL, !r->o.preset_given, &r->cfg);
    }
    return rc;
}

/* ---- build: the model, its optimizer, a resumed run's state ---------------------- */

/*
 * AdamW, weight decay where the model's parameter table says so
 * (tfc_gpt_param_decay: the weight matrices and embeddings, as GPT-2 does).
 * The decayed group comes first: the optimizer state's param.{k} order is
 * part of the checkpoint format.
 */
static int make_optimizer(train_run *r) {
    int32_t np;
    const char *const *pnames;
    tfc_tensor *const *params;
    /* LoRA: the adapters only, all decayed (the base is frozen) */
    if ((r->o.lora.base ? tfc_gpt_lora_params(r->m, &np, &pnames, &params)
                        : tfc_gpt_params(r->m, &np, &pnames, &params)) != TFC_OK)
        np = 0;
    tfc_tensor **decay = malloc((size_t)np * sizeof *decay), **no_decay = malloc((size_t)np * sizeof *no_decay);
    int32_t nd = 0, nn = 0;
    for (int32_t i = 0; i < np && decay && no_decay; i++) {
        int32_t d = 0;
        if (r->o.lora.base)
            d = 1;
        else if (tfc_gpt_param_decay(r->m, i, &d) != TFC_OK)
            break;
        if (d)
            decay[nd++] = params[i];
        else
            no_decay[nn++] = params[i];
    }
    tfc_optim_options oo = TFC_ADAMW_OPTIONS_INIT;
    oo.lr = r->o.lr;
    oo.beta1 = 0.9;
    oo.beta2 = 0.95;
    oo.weight_decay = r->o.weight_decay;
    int rc = 0;
    if (!decay || !no_decay || tfc_optim_adamw(&oo, &r->opt) != TFC_OK ||
        tfc_optim_add_group(r->opt, decay, nd, r->o.lr, r->o.weight_decay, NULL) != TFC_OK ||
        tfc_optim_add_group(r->opt, no_decay, nn, r->o.lr, 0.0, NULL) != TFC_OK)
        rc = cli_lib_error(CMD, "setting up AdamW");
    free(decay);
    free(no_decay);
    return rc;
}

int train_build(train_run *r) {
    int64_t lib_peak, rss_peak;
    /* a model loaded already (--init-from, a LoRA base) is part of what the plan counts */
    if (!r->init && !r->m) train_plan_measure(&lib_peak, &r->mem_base, &rss_peak, &r->rss_base);
    if (r->init) { /* --init-from: its weights, a fresh optimizer from step 0 */
        r->m = r->init;
        r->init = NULL;
    } else if (!r->m && tfc_gpt_new(&r->cfg, (uint64_t)r->o.seed, &r->m) != TFC_OK) {
        return cli_lib_error(CMD, "building the model");
    }
    /* LoRA: the adapters (new, or the resumed checkpoint's) before the optimizer is built on them */
    if (r->o.lora.base) {
        int lrc = lora_attach(CMD, r->m, &r->o.lora, (uint64_t)r->o.seed,
                              r->o.resume ? ckpt_path(&r->ck, "adapter_model.safetensors") : NULL);
        if (lrc) return lrc;
    }
    /* The model moves before the optimizer is built on its parameters. */
    if (r->o.cuda_index >= 0 && tfc_gpt_to_device(r->m, TFC_DEVICE_CUDA, r->o.cuda_index) != TFC_OK)
        return cli_lib_error(CMD, "moving the model to the GPU");
    /* bf16 mixed precision: the parameters (and so the optimizer and the checkpoints) stay f32 */
    if (strcmp(r->o.dtype, "bf16") == 0 && tfc_gpt_set_autocast(r->m, TFC_DTYPE_BF16) != TFC_OK)
        return cli_lib_error(CMD, "turning on bf16 mixed precision");
    int rc = make_optimizer(r);
    if (!rc && r->o.resume) rc = train_ckpt_resume_state(r);
    if (rc) return rc;
    if (tfc_graph_new(&r->g) != TFC_OK) return cli_lib_error(CMD, "graph");
    /* After a resume's state is loaded: sharding keeps this rank's slice of it. */
    if (r->o.zero && tfc_optim_shard(r->opt, r->comm) != TFC_OK) return cli_lib_error(CMD, "sharding the optimizer");
    if (!r->o.zero && r->size > 1) {
        int32_t np;
        const char *const *pnames;
        tfc_tensor *const *params;
        if ((r->o.lora.base ? tfc_gpt_lora_params(r->m, &np, &pnames, &params)
                            : tfc_gpt_params(r->m, &np, &pnames, &params)) != TFC_OK ||
            tfc_ddp_new(r->comm, params, np, r->o.bucket_mb << 20, &r->ddp) != TFC_OK ||
            tfc_ddp_attach(r->ddp, r->g) != TFC_OK)
            return cli_lib_error(CMD, "setting up data-parallel gradient averaging");
    }
    if (r->rank == 0 && r->o.log_json && !(r->jl = fopen(r->o.log_json, r->o.resume ? "a" : "w")))
        return cli_error(EXIT_USAGE, CMD, "cannot write --log-json file '%s'", r->o.log_json);
    /* reading the loss and norm costs a wait on CUDA only; the checks that look at every step need every step */
    r->log_every = r->o.log_every ? r->o.log_every : r->o.cuda_index >= 0 ? 10 : 1;
    if (r->o.fx.skip_nonfinite || r->o.fx.log_grad_norms || r->o.fx.overfit || r->size > 1) r->log_every = 1;
    return fx_setup(&r->fx, &r->o.fx, CMD, r->o.out, r->m);
}
