/*
 * tfcore train: tokenize a text file (or read tokens made already: llm.c
 * shards, nanoGPT's u16 files, --data-bin), train a GPT with AdamW (decay
 * on 2-D weights only), warmup + cosine learning rate and gradient
 * clipping, evaluate on the held-out last 10% (or --val-bin), then write a
 * checkpoint, the loss curve (CSV + SVG) and a short sample.
 *
 * Reproducibility: the model is initialised from --seed, batch `step` is
 * drawn from (seed, step), the learning rate is a function of the step, and
 * the checkpoint holds the weights and the whole optimizer state — so N
 * steps, save, --resume, M more steps give the same numbers as N+M steps.
 *
 * Under `mpirun -np N`, --batch stays the global batch: each step's B rows
 * are drawn as in one process and split into --grad-accum K micro-steps of
 * N slices of B/(N·K) rows, rank r taking slice r of each micro-step, so N
 * ranks see exactly the tokens one process sees. Gradients are averaged by
 * tfc_ddp during backward (or reduce-scattered by the ZeRO-1 optimizer,
 * --zero 1); rank 0 logs, evaluates, samples and writes the checkpoint,
 * which does not depend on N (docs/DISTRIBUTED.md).
 *
 * This file drives a run (load, build, loop, save); each concern has its
 * file, listed in train_run.h.
 */
#include <stdlib.h>
#include <string.h>

#include "train_plan.h"
#include "train_run.h"

/* Before anything is read or written: is the asked-for device there, does the batch split, is --out's last save
 * finished (rank 0 finishes or discards a save a kill interrupted before any rank reads the checkpoint)? */
static int preflight(train_run *r) {
    if (r->o.cuda_index >= 0 && !tfc_cuda_available())
        return cli_error(EXIT_RUNTIME, CMD, "--device %s: %s", r->o.device, tfc_last_error());
    if (r->o.cuda_index >= 0 && r->size > 1)
        return cli_error(EXIT_USAGE, CMD,
                         "--device %s with %d ranks: multi-GPU training needs NCCL, which this build does not "
                         "provide yet (train on the CPU, or with one rank)",
                         r->o.device, r->size);
    if (r->o.batch % (r->size * r->o.grad_accum) != 0)
        return cli_error(EXIT_USAGE, CMD,
                         "--batch %lld does not split evenly into %d ranks x %lld micro-steps (--grad-accum): use a "
                         "multiple of %lld",
                         (long long)r->o.batch, r->size, (long long)r->o.grad_accum,
                         (long long)(r->size * r->o.grad_accum));
    if (r->rank == 0) {
        int rc = ckpt_recover(CMD, r->o.out);
        if (rc) return rc;
    }
    if (tfc_barrier(r->comm) != TFC_OK) return cli_lib_error(CMD, "waiting for rank 0");
    return 0;
}

/* The corpus, its vocabulary and token file, the config; --resume: the checkpoint, open until build reads it. */
static int load(train_run *r) {
    int rc = preflight(r);
    if (rc) return rc;
    char *text = NULL;
    size_t len = 0;
    /* a resumed --data-bin run learns its shards from the checkpoint */
    if (r->o.resume) rc = train_ckpt_open_resume(r);
    if (!rc && !r->o.data_bin) {
        r->data_path = train_find_data(r->o.data);
        if (read_file(r->data_path, &text, &len) != 0)
            rc = cli_error(EXIT_USAGE, CMD, "cannot read the data file '%s' (give --data FILE or set $TFCORE_DATA)",
                           r->data_path);
    }
    if (r->o.data_bin) r->data_path = r->o.data_bin;
    /* a resume keeps the checkpoint's vocabulary: a --tokenizer naming another is refused, not ignored */
    if (!rc && r->o.resume && r->o.tokenizer_given && r->v.size > 0) rc = train_ckpt_check_tokenizer(r, text, len);
    int64_t lib_peak, rss_peak; /* the baseline of the measured peak, before a model is loaded here */
    train_plan_measure(&lib_peak, &r->mem_base, &rss_peak, &r->rss_base);
    if (!rc) rc = train_model_source(r, text, len);
    if (!rc && r->o.plan) { /* the plan needs the config only: nothing is written */
        free(text);
        return 0;
    }
    if (!rc) rc = train_ckpt_check_existing(r, &r->cfg, &r->start);
    if (!rc) rc = r->o.data_bin ? train_load_bin(r) : train_load_tokens(r, text, len);
    free(text);
    r->end_step = r->o.stop_after && r->o.stop_after < r->o.steps ? r->o.stop_after : r->o.steps;
    return rc;
}

static void run_free(train_run *r) {
    fx_free(&r->fx);
    if (r->jl) fclose(r->jl);
    tfc_ddp_release(r->ddp);
    ckpt_close(&r->ck);
    loss_log_free(&r->curve);
    tfc_graph_release(r->g);
    tfc_optim_release(r->opt);
    /* the last one: finalizes MPI when libtfcore started it */
    tfc_gpt_release(r->m);
    tfc_gpt_release(r->init);
    if (r->vf != r->tf) tfc_token_file_close(r->vf);
    tfc_token_file_close(r->tf);
    vocab_free(&r->v);
    tfc_comm_release(r->comm);
}

/*
 * mpirun's ranks, or this process alone. Ranks other than 0 stay quiet on
 * stdout; their errors still reach stderr.
 */
static int join(train_run *r) {
    if (tfc_comm_init(&r->comm) != TFC_OK) return cli_lib_error(CMD, "joining the other ranks");
    r->rank = tfc_comm_rank(r->comm);
    r->size = tfc_comm_size(r->comm);
    if (r->rank != 0 && !freopen("/dev/null", "w", stdout))
        return cli_error(EXIT_RUNTIME, CMD, "rank %d: cannot silence stdout", r->rank);
    return 0;
}

int cmd_train(int argc, char **argv) {
    train_run r = {0};
    int rc = train_parse(argc, argv, &r.o);
    if (!rc) rc = join(&r);
    if (!rc) rc = load(&r);
    if (!rc && r.o.plan) { /* --plan: the table and nothing else */
        train_plan p;
        train_plan_make(&r.cfg, r.o.batch / (r.size * r.o.grad_accum), r.o.batch, r.o.grad_accum,
                        strcmp(r.o.dtype, "bf16") == 0, &p);
        train_plan_print(stdout, &p, &r.cfg);
        run_free(&r);
        return 0;
    }
    if (!rc) rc = train_build(&r);
    if (!rc) rc = train_loop(&r);
    if (!rc) rc = r.o.fx.overfit ? fx_overfit_report(&r.fx, CMD) : train_report_end(&r);
    /* A rank that failed ends the job, so the others do not wait for it in their next collective. */
    if (rc && r.size > 1) {
        fprintf(stderr, "tfcore train: rank %d of %d failed (exit status %d); ending the job\n", r.rank, r.size, rc);
        tfc_comm_abort(r.comm, rc);
    }
    run_free(&r);
    return rc;
}
