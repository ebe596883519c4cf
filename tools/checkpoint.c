/*
 * Checkpoint directories of the CLI:
 *   model.safetensors      weights under Hugging Face names + config,
 *                          vocabulary and training position in the metadata
 *   adapter_model.safetensors, adapter_config.json
 *                          a LoRA run's instead: the adapters (PEFT names) with
 *                          that metadata, the base's directory as "lora.base"
 *   optimizer.safetensors  AdamW state (tfc_optim_state_get names)
 *   tokenizer.tfctok       the BPE tokenizer (BPE runs only)
 *   tokenizer.json         instead, a Hugging Face tokenizer.json the run read (a copy)
 *   config.json            the transformers config of the same model (GPT2Config,
 *                          LlamaConfig, MistralConfig or Qwen2Config)
 *   loss.csv, loss.svg     the loss curve up to the checkpoint's step
 *   checkpoint.json        the list of the files above: size, FNV-1a 64, step
 *
 * The files are one unit. Renaming each file into place is atomic per file
 * only: a kill between two renames leaves a model and an optimizer from
 * different steps. So a save writes everything into dir/.checkpoint.new
 * (fsync'd), then checkpoint.json there, atomically: that commits it. Only
 * then are the files renamed into dir, checkpoint.json last, and the staging
 * directory removed. The one writer (tfcore train) starts with
 * ckpt_recover: a committed staging directory is moved in (redo), an
 * uncommitted one is deleted; readers take a committed staging directory's
 * files first, so they see the old set or the new one, never a mix. Readers
 * check the files they read against checkpoint.json and keep them open
 * (reading through /proc/self/fd), so a save running meanwhile cannot swap
 * a file between the check and the read.
 */
#include "checkpoint.h"
#include "lora_cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STAGE ".checkpoint.new"
#define MANIFEST "checkpoint.json"
#define LORA_FILE "adapter_model.safetensors"

/* Every name a checkpoint directory's files have; temporaries are these + ".tmp[.PID.N]". */
static const char *const KNOWN[] = {"model.safetensors",  "optimizer.safetensors",
                                    "tokenizer.tfctok",   "tokenizer.json",
                                    "config.json",        "loss.csv",
                                    "loss.svg",           MANIFEST,
                                    "data.tokens",        LORA_FILE,
                                    "adapter_config.json"};

static int known_name(const char *s, size_t len) {
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (strlen(KNOWN[i]) == len && strncmp(s, KNOWN[i], len) == 0) return 1;
    return 0;
}

static int all_digits(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/*
 * A temporary file of ours: K.tmp.PID.N (lib/io/atomic_file.c, this file)
 * or K.tmp (tfc_tokenizer_save), K a checkpoint file's name. *pid is 0 for
 * K.tmp.
 */
static int temp_name(const char *name, long *pid) {
    const char *t = strstr(name, ".tmp");
    if (!t || !known_name(name, (size_t)(t - name))) return 0;
    const char *p = t + 4;
    *pid = 0;
    if (!*p) return 1;
    const char *dot = *p == '.' ? strchr(p + 1, '.') : NULL;
    if (!dot || !all_digits(p + 1, (size_t)(dot - p - 1)) || !all_digits(dot + 1, strlen(dot + 1))) return 0;
    *pid = strtol(p + 1, NULL, 10);
    return *pid > 0;
}

static void fsync_dir(const char *d) {
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static void join(char *buf, size_t cap, const char *a, const char *b) { snprintf(buf, cap, "%s/%s", a, b); }

/* Remove dir's temporaries whose process is gone (and tfc_tokenizer_save's, which name none). */
static void remove_orphans(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4200];
    while ((e = readdir(d)) != NULL) {
        long pid;
        if (!temp_name(e->d_name, &pid)) continue;
        if (pid != 0 && (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)) continue;
        join(p, sizeof p, dir, e->d_name);
        (void)unlink(p);
    }
    closedir(d);
}

/* Delete the staging directory: our files and temporaries in it, then it. */
static int discard_stage(const char *cmd, const char *dir) {
    char stage[4200], p[4300], other[256] = "";
    join(stage, sizeof stage, dir, STAGE);
    DIR *d = opendir(stage);
    if (!d) return errno == ENOENT ? 0 : cli_error(EXIT_RUNTIME, cmd, "cannot read '%s': %s", stage, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (known_name(e->d_name, strlen(e->d_name)) || temp_name(e->d_name, &pid)) {
            join(p, sizeof p, stage, e->d_name);
            (void)unlink(p);
        } else {
            snprintf(other, sizeof other, "%s", e->d_name);
        }
    }
    closedir(d);
    if (rmdir(stage) != 0) {
        if (*other)
            return cli_error(EXIT_RUNTIME, cmd, "'%s' holds '%s', which tfcore did not write; move it away", stage,
                             other);
        return cli_error(EXIT_RUNTIME, cmd, "cannot remove '%s': %s", stage, strerror(errno));
    }
    fsync_dir(dir);
    return 0;
}

/* Move a committed save's files into dir, checkpoint.json last. Safe to repeat after a kill. */
static int roll_forward(const char *cmd, const char *dir, const ckpt_manifest *m) {
    char stage[4200], src[4300], dst[4300];
    join(stage, sizeof stage, dir, STAGE);
    for (int32_t i = 0; i < m->n; i++) {
        join(src, sizeof src, stage, m->files[i].name);
        join(dst, sizeof dst, dir, m->files[i].name);
        /* ENOENT: moved in before a kill */
        if (rename(src, dst) != 0 && errno != ENOENT)
            return cli_error(EXIT_RUNTIME, cmd, "cannot move '%s' to '%s': %s", src, dst, strerror(errno));
    }
    fsync_dir(stage);
    fsync_dir(dir);
    join(src, sizeof src, stage, MANIFEST);
    join(dst, sizeof dst, dir, MANIFEST);
    if (rename(src, dst) != 0)
        return cli_error(EXIT_RUNTIME, cmd, "cannot move '%s' to '%s': %s", src, dst, strerror(errno));
    fsync_dir(dir);
    return discard_stage(cmd, dir);
}

int ckpt_recover(const char *cmd, const char *dir) {
    char stage[4200], man[4300], why[128];
    join(stage, sizeof stage, dir, STAGE);
    join(man, sizeof man, stage, MANIFEST);
    struct stat st;
    if (stat(stage, &st) == 0 && S_ISDIR(st.st_mode)) {
        ckpt_manifest m;
        /* a manifest exists only once every file it names is complete (it is renamed in last) */
        int rc = manifest_read(man, &m, why, sizeof why) == 0 ? roll_forward(cmd, dir, &m) : discard_stage(cmd, dir);
        if (rc) return rc;
    }
    remove_orphans(dir);
    return 0;
}

int ckpt_exists(const char *dir) {
    char p[4300];
    struct stat st;
    join(p, sizeof p, dir, "model.safetensors");
    if (stat(p, &st) == 0) return 1;
    join(p, sizeof p, dir, LORA_FILE);
    if (stat(p, &st) == 0) return 1;
    join(p, sizeof p, dir, STAGE "/" MANIFEST);
    return stat(p, &st) == 0;
}

/* ---- save ------------------------------------------------------------------------------ */

/* data to path through path.tmp.PID.0, fsync'd, renamed; the directory fsync'd. */
static int write_atomic(const char *cmd, const char *dir, const char *name, const char *data, size_t len) {
    char path[4300], tmp[4400];
    join(path, sizeof path, dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.0", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return cli_error(EXIT_RUNTIME, cmd, "cannot create '%s': %s", tmp, strerror(errno));
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    int bad = off != len || fsync(fd) != 0;
    int err = errno;
    bad |= close(fd) != 0;
    if (bad || rename(tmp, path) != 0) {
        if (!bad) err = errno;
        (void)unlink(tmp);
        return cli_error(EXIT_RUNTIME, cmd, "cannot write '%s': %s", path, strerror(err));
    }
    fsync_dir(dir);
    return 0;
}

static void add_entry(ckpt_manifest *m, const char *name, int64_t step) {
    ckpt_entry *e = &m->files[m->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->step = step;
}

/* The AdamW state into stage/optimizer.safetensors; *step: its step count. */
static int save_optim(const char *cmd, const char *stage, tfc_optim *opt, int64_t *step) {
    int64_t ns = 0;
    if (tfc_optim_state_count(opt, &ns) != TFC_OK) return cli_lib_error(cmd, "optimizer state");
    char **names = calloc((size_t)ns + 1, sizeof *names);
    tfc_tensor **ts = calloc((size_t)ns + 1, sizeof *ts);
    int rc = (!names || !ts) ? cli_error(EXIT_RUNTIME, cmd, "out of memory") : 0;
    *step = -1;
    for (int64_t i = 0; i < ns && !rc; i++) {
        if (tfc_optim_state_get(opt, i, &names[i], &ts[i]) != TFC_OK) rc = cli_lib_error(cmd, "optimizer state");
        double v;
        if (!rc && strcmp(names[i], "step") == 0 && tfc_tensor_item(ts[i], &v) == TFC_OK) *step = (int64_t)v;
    }
    char path[4300];
    join(path, sizeof path, stage, "optimizer.safetensors");
    if (!rc && tfc_safetensors_save(path, (const char *const *)names, ts, (int32_t)ns, NULL, NULL, 0) != TFC_OK)
        rc = cli_lib_error(cmd, "saving the optimizer state");
    for (int64_t i = 0; i < ns && names && ts; i++) {
        tfc_free(names[i]);
        tfc_tensor_release(ts[i]);
    }
    free(names);
    free(ts);
    return rc;
}

/* d as JSON the way Python (transformers) writes a float: the shortest digits that read back, 1e-06, 10000.0. */
static void put_real(FILE *f, double d) {
    char num[64];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, d);
        if (strtod(num, NULL) == d) break;
    }
    fprintf(f, "%s%s", num, strpbrk(num, ".eEn") ? "" : ".0");
}

/*
 * The Llama family's config.json: transformers' LlamaConfig, MistralConfig
 * or Qwen2Config with the keys and values tfcore export's (tfc_gpt_save_hf)
 * has, less the token ids (a checkpoint's vocabulary may have none);
 * tests/cli/test_cli_llama.sh checks the two are the same.
 */
static void family_config(FILE *f, const tfc_gpt_config *c) {
    static const char *const classes[4] = {NULL, "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"};
    const int llama = c->arch == TFC_GPT_ARCH_LLAMA, qwen2 = c->arch == TFC_GPT_ARCH_QWEN2;
    const tfc_rope_config *r = &c->rope;
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n", classes[c->arch]);
    if (llama) fprintf(f, "  \"attention_bias\": %s,\n", c->attention_bias ? "true" : "false");
    fprintf(f,
            "  \"attention_dropout\": 0.0,\n  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n"
            "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %lld,\n  \"max_position_embeddings\": %d,\n",
            c->n_embd / c->n_head, c->n_embd, (long long)c->mlp_hidden, c->block_size);
    if (qwen2) fprintf(f, "  \"max_window_layers\": %d,\n", c->sliding_window ? 0 : c->n_layer);
    if (llama) fprintf(f, "  \"mlp_bias\": %s,\n", c->mlp_bias ? "true" : "false");
    fprintf(f,
            "  \"model_type\": \"%s\",\n  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n"
            "  \"num_key_value_heads\": %d,\n",
            tfc_gpt_arch_name(c->arch), c->n_head, c->n_layer, c->n_kv_head ? c->n_kv_head : c->n_head);
    if (llama) fprintf(f, "  \"pretraining_tp\": 1,\n");
    fprintf(f, "  \"rms_norm_eps\": ");
    put_real(f, c->ln_eps);
    fprintf(f, ",\n  \"rope_scaling\": ");
    static const char *const types[4] = {"default", "linear", "dynamic", "llama3"};
    if (r->rope_type == TFC_ROPE_DEFAULT || r->rope_type < 0 || r->rope_type > 3) {
        fprintf(f, "null");
    } else {
        fprintf(f, "{\"factor\": ");
        put_real(f, r->factor);
        if (r->rope_type == TFC_ROPE_LLAMA3) {
            fprintf(f, ", \"high_freq_factor\": ");
            put_real(f, r->high_freq_factor);
            fprintf(f, ", \"low_freq_factor\": ");
            put_real(f, r->low_freq_factor);
            fprintf(f, ", \"original_max_position_embeddings\": %lld", (long long)r->original_max_position_embeddings);
        }
        fprintf(f, ", \"rope_type\": \"%s\"}", types[r->rope_type]);
    }
    fprintf(f, ",\n  \"rope_theta\": ");
    put_real(f, r->theta);
    fprintf(f, ",\n");
    if (!llama && c->sliding_window) fprintf(f, "  \"sliding_window\": %d,\n", c->sliding_window);
    if (!llama && !c->sliding_window) fprintf(f, "  \"sliding_window\": null,\n");
    fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"float32\",\n  \"use_cache\": true,\n",
            c->tie_weights ? "true" : "false");
    if (qwen2) fprintf(f, "  \"use_sliding_window\": %s,\n", c->sliding_window ? "true" : "false");
    fprintf(f, "  \"vocab_size\": %d\n}\n", c->vocab_size);
}

/* config.json: the transformers config of the model's architecture (GPT2Config, or the Llama family's). */
static int save_config(const char *cmd, const char *stage, const tfc_gpt *m) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    if (tfc_gpt_get_config(m, &c) != TFC_OK) return cli_lib_error(cmd, "config");
    char path[4300];
    join(path, sizeof path, stage, "config.json");
    FILE *f = fopen(path, "w");
    if (!f) return cli_error(EXIT_RUNTIME, cmd, "cannot write '%s': %s", path, strerror(errno));
    if (c.arch != TFC_GPT_ARCH_GPT2 && tfc_gpt_arch_name(c.arch))
        family_config(f, &c);
    else
        fprintf(f,
                "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": %d,\n"
                "  \"n_positions\": %d,\n  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n"
                "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": %g,\n"
                "  \"tie_word_embeddings\": %s,\n  \"resid_pdrop\": %.15g,\n  \"embd_pdrop\": %.15g,\n"
                "  \"attn_pdrop\": %.15g,\n  \"bias\": %s,\n  \"dropout\": %.15g\n}\n",
                c.vocab_size, c.block_size, c.n_embd, c.n_layer, c.n_head, c.ln_eps, c.tie_weights ? "true" : "false",
                c.dropout, c.dropout, c.dropout, c.bias ? "true" : "false", c.dropout);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    return bad ? cli_error(EXIT_RUNTIME, cmd, "cannot write '%s'", path) : 0;
}

static int save_model(const char *cmd, const char *stage, const ckpt_contents *c) {
    char *vmeta = NULL;
    if (vocab_to_meta(c->v, &vmeta) != 0) return cli_error(EXIT_RUNTIME, cmd, "out of memory");
    const char **k = malloc(((size_t)c->n_meta + 1) * sizeof *k), **val = malloc(((size_t)c->n_meta + 1) * sizeof *val);
    int rc = 0;
    char path[4300];
    join(path, sizeof path, stage, "model.safetensors");
    if (!k || !val) {
        rc = cli_error(EXIT_RUNTIME, cmd, "out of memory");
    } else {
        k[0] = "tfc.vocab";
        val[0] = vmeta;
        for (int32_t i = 0; i < c->n_meta; i++) k[i + 1] = c->keys[i], val[i + 1] = c->vals[i];
        if (c->lora_base)
            rc = lora_save(cmd, stage, c->model, c->lora_base, k, val, c->n_meta + 1);
        else if (tfc_gpt_save(c->model, path, k, val, c->n_meta + 1) != TFC_OK)
            rc = cli_lib_error(cmd, "saving the model");
    }
    free(k);
    free(val);
    free(vmeta);
    return rc;
}

/* The files of c into the staging directory, listed in m (sizes and hashes still to fill in). */
static int write_stage(const char *cmd, const char *stage, const ckpt_contents *c, ckpt_manifest *m) {
    int rc = 0;
    if (c->opt) {
        int64_t opt_step = -1;
        if ((rc = save_optim(cmd, stage, c->opt, &opt_step)) != 0) return rc;
        add_entry(m, "optimizer.safetensors", opt_step);
    }
    if (c->v->kind == VOCAB_BPE && c->v->json) { /* a tokenizer.json: its bytes, as read */
        char path[4300];
        join(path, sizeof path, stage, "tokenizer.json");
        if ((rc = vocab_write_json(cmd, c->v, path)) != 0) return rc;
        add_entry(m, "tokenizer.json", -1);
    } else if (c->v->kind == VOCAB_BPE) {
        char path[4300];
        join(path, sizeof path, stage, "tokenizer.tfctok");
        if (tfc_tokenizer_save(c->v->bpe, path) != TFC_OK) return cli_lib_error(cmd, "saving the tokenizer");
        add_entry(m, "tokenizer.tfctok", -1);
    }
    if ((rc = save_config(cmd, stage, c->model)) != 0) return rc;
    add_entry(m, "config.json", -1);
    if ((rc = save_model(cmd, stage, c)) != 0) return rc;
    add_entry(m, c->lora_base ? LORA_FILE : "model.safetensors", c->step);
    if (c->lora_base) add_entry(m, "adapter_config.json", -1);
    if (c->curve) {
        char csv[4300], svg[4300];
        join(csv, sizeof csv, stage, "loss.csv");
        join(svg, sizeof svg, stage, "loss.svg");
        /* the curve is a by-product: failing to write it costs a warning, not the checkpoint */
        if (loss_log_write_csv(c->curve, csv) == 0 && loss_log_write_svg(c->curve, svg, c->curve_title) == 0) {
            add_entry(m, "loss.csv", -1);
            add_entry(m, "loss.svg", -1);
        } else {
            fprintf(stderr, "tfcore %s: warning: could not write %s / %s\n", cmd, csv, svg);
            (void)unlink(csv);
            (void)unlink(svg);
        }
    }
    /* durable before checkpoint.json names them */
    for (int32_t i = 0; i < m->n; i++) {
        char path[4300];
        join(path, sizeof path, stage, m->files[i].name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        int bad = fd < 0 || fsync(fd) != 0 || file_fnv1a64(fd, &m->files[i].hash, &m->files[i].size) != 0;
        int err = errno;
        if (fd >= 0) close(fd);
        if (bad) return cli_error(EXIT_RUNTIME, cmd, "cannot read back '%s': %s", path, strerror(err));
    }
    fsync_dir(stage);
    return 0;
}

int ckpt_save(const char *cmd, const char *dir, const ckpt_contents *c) {
    if (ensure_dir(dir) != 0) return cli_error(EXIT_RUNTIME, cmd, "cannot create the directory '%s'", dir);
    int rc = ckpt_recover(cmd, dir);
    if (rc) return rc;
    char stage[4200];
    join(stage, sizeof stage, dir, STAGE);
    if (mkdir(stage, 0777) != 0) return cli_error(EXIT_RUNTIME, cmd, "cannot create '%s': %s", stage, strerror(errno));
    ckpt_manifest m;
    memset(&m, 0, sizeof m);
    m.step = c->step;
    rc = write_stage(cmd, stage, c, &m);
    char text[4096];
    int len = rc ? 0 : manifest_format(&m, text, sizeof text);
    if (!rc && len < 0) rc = cli_error(EXIT_RUNTIME, cmd, "checkpoint.json: too long");
    /* the commit point: from here a kill leaves the new checkpoint (ckpt_recover moves it in) */
    if (!rc) rc = write_atomic(cmd, stage, MANIFEST, text, (size_t)len);
    if (rc) {
        (void)discard_stage(cmd, dir);
        return rc;
    }
    return roll_forward(cmd, dir, &m);
}

/* ---- load ------------------------------------------------------------------------------ */

/* Why opening failed, printed once the retries are over. */
typedef struct open_error {
    int code;
    char msg[1536];
} open_error;

static int set_error(open_error *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_error(open_error *e, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return code;
}

/* The manifest in force: a committed staging directory's, else dir's. 0, -1 none, -2 damaged. */
static int current_manifest(const char *dir, ckpt_manifest *m, int *staged, char *where, size_t cap, char *why,
                            size_t why_cap) {
    join(where, cap, dir, STAGE "/" MANIFEST);
    int r = manifest_read(where, m, why, why_cap);
    *staged = r != -1;
    if (r != -1) return r;
    join(where, cap, dir, MANIFEST);
    return manifest_read(where, m, why, why_cap);
}

/* Open name (the staging directory's copy first when staged) into the set; its index or -1 (errno). */
static int open_member(ckpt_set *s, const char *name, int staged) {
    int i = s->n;
    if (i == CKPT_MAX_FILES) return -1;
    int fd = -1;
    if (staged) {
        join(s->files[i].path, sizeof s->files[i].path, s->dir, STAGE);
        size_t l = strlen(s->files[i].path);
        snprintf(s->files[i].path + l, sizeof s->files[i].path - l, "/%s", name);
        fd = open(s->files[i].path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT) return -1;
    }
    if (fd < 0) {
        join(s->files[i].path, sizeof s->files[i].path, s->dir, name);
        fd = open(s->files[i].path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) return -1;
    s->files[i].name = name;
    s->files[i].fd = fd;
    s->n++;
    return i;
}

/* Check member i against its checkpoint.json entry. */
static int verify_member(ckpt_set *s, int i, open_error *err) {
    const char *name = s->files[i].name;
    const ckpt_entry *e = manifest_find(&s->man, name);
    if (!e)
        return set_error(err, EXIT_USAGE, "the checkpoint in '%s' is not one set: its checkpoint.json does not list %s",
                         s->dir, name);
    uint64_t h = 0;
    int64_t size = 0;
    if (file_fnv1a64(s->files[i].fd, &h, &size) != 0)
        return set_error(err, EXIT_RUNTIME, "cannot read '%s': %s", s->files[i].path, strerror(errno));
    if (size != e->size || h != e->hash)
        return set_error(err, EXIT_USAGE,
                         "the checkpoint in '%s' is not one set: %s does not match checkpoint.json (%lld bytes, "
                         "FNV-1a %016llx; listed: %lld bytes, %016llx, step %lld): a file was replaced or a save did "
                         "not finish; put back the files of one save, or delete %s/%s to use the files as they are",
                         s->dir, name, (long long)size, (unsigned long long)h, (long long)e->size,
                         (unsigned long long)e->hash, (long long)s->man.step, s->dir, MANIFEST);
    return 0;
}

/* Open (and with CKPT_VERIFY check) one member; a missing one is an error naming it. */
static int member(ckpt_set *s, const char *name, int staged, int flags, open_error *err) {
    int i = open_member(s, name, staged);
    if (i < 0) {
        if (errno == ENOENT && s->has_manifest)
            return set_error(err, EXIT_USAGE, "the checkpoint in '%s' is not one set: %s/%s, listed in %s, is missing",
                             s->dir, s->dir, name, MANIFEST);
        return set_error(err, errno == ENOENT ? EXIT_USAGE : EXIT_RUNTIME, "cannot read '%s/%s': %s", s->dir, name,
                         strerror(errno));
    }
    return (flags & CKPT_VERIFY) && s->has_manifest ? verify_member(s, i, err) : 0;
}

static int open_once(const char *dir, int flags, ckpt_set *s, open_error *err) {
    char where[4300], why[128];
    int staged = 0;
    int r = current_manifest(dir, &s->man, &staged, where, sizeof where, why, sizeof why);
    /* unchecked reads (a fresh run looking at the config it will overwrite) do without a damaged manifest */
    if (r == -2 && !(flags & CKPT_VERIFY)) r = -1, staged = 0;
    if (r == -2)
        return set_error(err, EXIT_USAGE,
                         "the checkpoint in '%s' is damaged: %s: %s (delete it to use the files as they are)", dir,
                         where, why);
    s->has_manifest = r == 0;
    if (!s->has_manifest && !ckpt_exists(dir))
        return set_error(err, EXIT_USAGE, "no checkpoint in '%s' (missing %s/model.safetensors)", dir, dir);
    /* a LoRA run's set: its manifest lists the adapters (without one: only the adapters are there) */
    char mpath[4300];
    join(mpath, sizeof mpath, dir, "model.safetensors");
    s->lora = s->has_manifest ? manifest_find(&s->man, LORA_FILE) != NULL : access(mpath, F_OK) != 0;
    const char *mfile = s->lora ? LORA_FILE : "model.safetensors";
    int rc = member(s, mfile, staged, flags, err);
    if (rc) return rc;
    if (tfc_safetensors_load(ckpt_path(s, mfile), &s->model) != TFC_OK)
        return set_error(err, EXIT_RUNTIME, "reading the checkpoint: %s", tfc_last_error());
    const char *st = NULL, *vm = NULL;
    s->step = tfc_safetensors_metadata(s->model, "train.step", &st) == TFC_OK && st ? atoll(st) : -1;
    if ((flags & CKPT_VERIFY) && s->has_manifest && s->step != s->man.step)
        return set_error(err, EXIT_USAGE,
                         "the checkpoint in '%s' is not one set: %s is at step %lld, checkpoint.json "
                         "at step %lld",
                         dir, mfile, (long long)s->step, (long long)s->man.step);
    if (tfc_safetensors_metadata(s->model, "tfc.vocab", &vm) == TFC_OK && vm &&
        (strcmp(vm, "bpe") == 0 || strcmp(vm, "hf-json") == 0) &&
        (rc = member(s, strcmp(vm, "bpe") == 0 ? "tokenizer.tfctok" : "tokenizer.json", staged, flags, err)) != 0)
        return rc;
    if (!(flags & CKPT_OPTIMIZER)) return 0;
    if ((rc = member(s, "optimizer.safetensors", staged, flags, err)) != 0) return rc;
    if (tfc_safetensors_load(ckpt_path(s, "optimizer.safetensors"), &s->optim) != TFC_OK)
        return set_error(err, EXIT_RUNTIME, "reading the optimizer state: %s", tfc_last_error());
    tfc_tensor *t = NULL;
    double v = -1;
    if (tfc_safetensors_find(s->optim, "step", &t) != TFC_OK || tfc_tensor_item(t, &v) != TFC_OK) v = -1;
    tfc_tensor_release(t);
    if (s->step < 0) return set_error(err, EXIT_USAGE, "the checkpoint in '%s' has no training position", dir);
    if ((int64_t)v != s->step)
        return set_error(err, EXIT_USAGE,
                         "the checkpoint in '%s' is not one set: model.safetensors is at step %lld but "
                         "optimizer.safetensors is at step %lld, so resuming would not continue the run exactly; put "
                         "back the files of one save, or train again without --resume",
                         dir, (long long)s->step, (long long)v);
    return 0;
}

int ckpt_open(const char *cmd, const char *dir, int flags, ckpt_set *s) {
    open_error err = {0, ""};
    for (int attempt = 0;; attempt++) {
        memset(s, 0, sizeof *s);
        s->dir = dir;
        if (open_once(dir, flags, s, &err) == 0) return 0;
        /*
         * A save running meanwhile (its staging directory exists, or the
         * manifest changed under us) can explain a mismatch: look again.
         */
        ckpt_manifest used = s->man, now;
        int had = s->has_manifest, staged = 0;
        ckpt_close(s);
        char where[4300], why[128], stage[4200];
        join(stage, sizeof stage, dir, STAGE);
        struct stat st;
        int r = current_manifest(dir, &now, &staged, where, sizeof where, why, sizeof why);
        int changed = stat(stage, &st) == 0 || (r == 0) != had || (r == 0 && memcmp(&used, &now, sizeof now) != 0);
        if (!changed || attempt == 4) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return cli_error(err.code, cmd, "%s", err.msg);
}

const char *ckpt_path(const ckpt_set *s, const char *name) {
    static char bufs[4][64];
    static int k;
    for (int32_t i = 0; i < s->n; i++) {
        if (strcmp(s->files[i].name, name) != 0) continue;
        /* a checked file is read through its descriptor: the very file that was checked */
        if (s->has_manifest && access("/proc/self/fd", X_OK) == 0) {
            char *b = bufs[k++ % 4];
            snprintf(b, sizeof bufs[0], "/proc/self/fd/%d", s->files[i].fd);
            return b;
        }
        return s->files[i].path;
    }
    return path_join(s->dir, name);
}

void ckpt_close(ckpt_set *s) {
    for (int32_t i = 0; i < s->n; i++) close(s->files[i].fd);
    s->n = 0;
    tfc_safetensors_release(s->model);
    tfc_safetensors_release(s->optim);
    s->model = s->optim = NULL;
}

int ckpt_load_model(const char *cmd, const ckpt_set *s, tfc_gpt **m, vocab *v) {
    const char *vm = NULL;
    if (tfc_safetensors_metadata(s->model, "tfc.vocab", &vm) != TFC_OK) vm = NULL;
    int rc = vocab_from_meta(cmd, vm, ckpt_path(s, "tokenizer.tfctok"), ckpt_path(s, "tokenizer.json"), v);
    if (rc) return rc;
    if (s->lora) {
        rc = lora_load_checkpoint(cmd, s->model, ckpt_path(s, LORA_FILE), m);
        if (rc) vocab_free(v);
        return rc;
    }
    if (tfc_gpt_load(ckpt_path(s, "model.safetensors"), m) != TFC_OK) {
        vocab_free(v);
        return cli_lib_error(cmd, "loading the model");
    }
    return 0;
}

int ckpt_load_optim(const char *cmd, ckpt_set *s, tfc_optim *opt) {
    tfc_safetensors *f = s->optim;
    if (!f) return cli_error(EXIT_RUNTIME, cmd, "the optimizer state was not read");
    int32_t n = tfc_safetensors_count(f);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    tfc_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
    int rc = (!names || !ts) ? cli_error(EXIT_RUNTIME, cmd, "out of memory") : 0;
    for (int32_t i = 0; i < n && !rc; i++)
        if (tfc_safetensors_get(f, i, &names[i], &ts[i]) != TFC_OK) rc = cli_lib_error(cmd, "optimizer state");
    if (!rc && tfc_optim_state_load(opt, names, (const tfc_tensor *const *)ts, n) != TFC_OK)
        rc = cli_lib_error(cmd, "restoring the optimizer state");
    for (int32_t i = 0; i < n && ts; i++) tfc_tensor_release(ts[i]);
    free(names);
    free(ts);
    tfc_safetensors_release(f);
    s->optim = NULL;
    return rc;
}
