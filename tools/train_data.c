/*
 * tfcore train's tokens (train_run.h): a text corpus encoded with the run's
 * vocabulary into OUT/data.tokens, or --data-bin's shards read in place,
 * and the validation split of either.
 */
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "train_run.h"

static int file_exists(const char *p) {
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/*
 * --data, else $TFCORE_DATA, else the corpus that ships with the project:
 * the source tree's data/ (a build-tree binary), else the installed copy.
 * The last candidate is returned even when missing, so the error names it.
 */
const char *train_find_data(const char *given) {
    if (given) return given;
    const char *env = getenv("TFCORE_DATA");
    if (env && *env) return env;
    static const char *const candidates[] = {TFC_SOURCE_ROOT "/data/tinyshakespeare.txt",
                                             TFC_DATA_DIR "/tinyshakespeare.txt"};
    for (size_t i = 0; i + 1 < sizeof candidates / sizeof candidates[0]; i++)
        if (file_exists(candidates[i])) return candidates[i];
    return candidates[sizeof candidates / sizeof candidates[0] - 1];
}

/* Encode the corpus into OUT/data.tokens and open it; the last 10% is the validation split. */
int train_load_tokens(train_run *r, const char *text, size_t len) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = vocab_encode(CMD, &r->v, text, len, &ids, &n_ids);
    if (rc) return rc;
    const int64_t T = r->cfg.block_size, n_val = (int64_t)n_ids / 10;
    r->n_tokens = (int64_t)n_ids;
    r->n_train = r->n_tokens - n_val;
    const char *tok_path = path_join(r->o.out, "data.tokens");
    if (n_val < T + 1)
        rc = cli_error(EXIT_USAGE, CMD,
                       "the corpus '%s' is too small: %zu tokens, but its last 10%% (validation) must hold one block "
                       "of %lld+1 tokens, so at least %lld tokens are needed",
                       r->data_path, n_ids, (long long)T, (long long)(10 * (T + 1)));
    else if (r->rank == 0 && ensure_dir(r->o.out) != 0)
        rc = cli_error(EXIT_USAGE, CMD, "cannot create the output directory '%s'", r->o.out);
    else if (r->rank == 0 && tfc_token_file_write(tok_path, ids, r->n_tokens, r->v.size) != TFC_OK)
        rc = cli_lib_error(CMD, "writing the token file");
    /* the other ranks open the file rank 0 wrote (a rank 0 failure ends the job instead) */
    else if (tfc_barrier(r->comm) != TFC_OK)
        rc = cli_lib_error(CMD, "waiting for rank 0's token file");
    else if (tfc_token_file_open(tok_path, &r->tf) != TFC_OK)
        rc = cli_lib_error(CMD, "opening the token file");
    r->vf = r->tf;
    r->val_begin = r->n_train;
    r->val_end = r->n_tokens;
    free(ids);
    return rc;
}

/* The files a --data-bin / --val-bin pattern names, sorted (glob's order); 0 or the exit code. */
static int expand_glob(const char *flag, const char *pattern, glob_t *g) {
    memset(g, 0, sizeof *g);
    int e = glob(pattern, 0, NULL, g);
    if (e == GLOB_NOMATCH) return cli_error(EXIT_USAGE, CMD, "--%s '%s' matches no file", flag, pattern);
    if (e != 0) return cli_error(EXIT_USAGE, CMD, "--%s '%s': cannot read the directories it names", flag, pattern);
    if (g->gl_pathc > INT32_MAX) {
        globfree(g);
        return cli_error(EXIT_USAGE, CMD, "--%s '%s' matches too many files", flag, pattern);
    }
    return 0;
}

/* --data-format auto: an llm.c shard starts with one of its magics; anything else is read as headerless u16. */
static tfc_token_format detect_format(const char *flag_format, const char *first) {
    if (strcmp(flag_format, "llmc") == 0) return TFC_TOKENS_LLMC;
    if (strcmp(flag_format, "u16") == 0) return TFC_TOKENS_U16;
    unsigned char h[4] = {0};
    FILE *fp = fopen(first, "rb");
    size_t got = fp ? fread(h, 1, 4, fp) : 0;
    if (fp) fclose(fp);
    const uint32_t magic = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    return got == 4 && (magic == 20240520u || magic == 20240801u) ? TFC_TOKENS_LLMC : TFC_TOKENS_U16;
}

/* Open the shards pattern names, every token checked against the model's vocabulary (which = 0: train, 1: val). */
static int open_bin(train_run *r, int which, const char *flag, const char *pattern, tfc_token_file **f) {
    glob_t g;
    int rc = expand_glob(flag, pattern, &g);
    if (rc) return rc;
    const tfc_token_format fmt = detect_format(r->o.data_format, g.gl_pathv[0]);
    if (tfc_token_file_open_shards((const char *const *)g.gl_pathv, (int32_t)g.gl_pathc, fmt, r->cfg.vocab_size, f) !=
        TFC_OK)
        rc = cli_error(EXIT_USAGE, CMD, "--%s: %s", flag, tfc_last_error());
    r->bin_format[which] = fmt == TFC_TOKENS_LLMC ? "llm.c shards" : "headerless u16";
    r->bin_files[which] = (int64_t)g.gl_pathc;
    globfree(&g);
    return rc;
}

/*
 * --data-bin: the shards read in place (nothing converted or written); the
 * validation split is --val-bin's files, else the last 10%.
 */
int train_load_bin(train_run *r) {
    int rc = open_bin(r, 0, "data-bin", r->o.data_bin, &r->tf);
    if (!rc && r->o.val_bin) rc = open_bin(r, 1, "val-bin", r->o.val_bin, &r->vf);
    if (rc) return rc;
    const int64_t T = r->cfg.block_size, n = tfc_token_file_count(r->tf);
    if (r->vf) {
        r->n_train = n;
        r->val_begin = 0;
        r->val_end = tfc_token_file_count(r->vf);
    } else {
        r->vf = r->tf;
        r->n_train = n - n / 10;
        r->val_begin = r->n_train;
        r->val_end = n;
    }
    r->n_tokens = r->n_train + (r->val_end - r->val_begin);
    if (r->n_train < T + 1)
        return cli_error(EXIT_USAGE, CMD, "--data-bin '%s' is too small: %lld training tokens, one block needs %lld+1",
                         r->o.data_bin, (long long)r->n_train, (long long)T);
    if (r->val_end - r->val_begin < T + 1)
        return cli_error(EXIT_USAGE, CMD,
                         "the validation split of %s is too small: %lld tokens, one block needs %lld+1%s",
                         r->o.val_bin ? r->o.val_bin : r->o.data_bin, (long long)(r->val_end - r->val_begin),
                         (long long)T, r->o.val_bin ? "" : " (the last 10%; or give --val-bin)");
    return 0;
}
