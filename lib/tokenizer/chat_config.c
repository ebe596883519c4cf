/*
 * Reading a model's tokenizer_config.json for chat: its "chat_template"
 * (a string; a list of named templates, of which "default" is the one
 * Hugging Face renders without tools; or, where the file has none, the
 * chat_template.jinja that newer transformers versions save beside it),
 * recognised by chat_detect, and its bos_token and eos_token (a string or
 * an AddedToken object {"content": ...}). The template writes bos_token and
 * eos_token from the file; the family renders its own, so a file whose
 * tokens differ from the family's is refused rather than rendered with the
 * wrong ones.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer_impl.h"

#define CONFIG_MAX_BYTES ((size_t)64 << 20)

/* root[key] as a token's text: a string, or an AddedToken object's "content"; NULL when absent or null. */
static tfc_status token_text(const char *fn, const char *path, const json_t *root, const char *key, const char **text) {
    const json_t *v = json_object_get(root, key);
    *text = NULL;
    if (!v || json_is_null(v)) return TFC_OK;
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v))
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': %s: expected a string or an object with a \"content\" string", fn,
                       path, key);
    *text = json_string_value(v);
    return TFC_OK;
}

/* *where = "'file': field" (field NULL: "'file'"), malloc'd. */
static tfc_status named(const char *fn, char **where, const char *file, const char *field) {
    const size_t n = strlen(file) + (field ? strlen(field) : 0) + 8;
    *where = malloc(n);
    if (!*where) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    snprintf(*where, n, field ? "'%s': %s" : "'%s'", file, field);
    return TFC_OK;
}

/*
 * The template text: root's "chat_template", else chat_template.jinja
 * beside path (*owned then holds it); *where (malloc'd) names it for
 * messages.
 */
static tfc_status template_text(const char *fn, const char *path, const json_t *root, const char **text, char **owned,
                                char **where) {
    const json_t *t = json_object_get(root, "chat_template");
    *owned = NULL;
    *where = NULL;
    if (json_is_string(t)) {
        *text = json_string_value(t);
        return named(fn, where, path, "chat_template");
    }
    if (json_is_array(t)) {
        for (size_t i = 0; i < json_array_size(t); i++) {
            const json_t *e = json_array_get(t, i), *name = json_object_get(e, "name"),
                         *body = json_object_get(e, "template");
            if (!json_is_string(name) || !json_is_string(body))
                return tfc_err(TFC_ERR_FORMAT,
                               "%s: '%s': chat_template[%zu]: expected an object with \"name\" and \"template\" "
                               "strings",
                               fn, path, i);
            if (strcmp(json_string_value(name), "default") == 0) {
                *text = json_string_value(body);
                return named(fn, where, path, "chat_template \"default\"");
            }
        }
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: '%s': chat_template is a list of named templates without a \"default\" one, the one "
                       "rendered without tools",
                       fn, path);
    }
    if (t && !json_is_null(t))
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': chat_template: expected a string or a list of named templates", fn,
                       path);
    const char *slash = strrchr(path, '/');
    const size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    char *jinja = malloc(dir + sizeof "chat_template.jinja");
    if (!jinja) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    memcpy(jinja, path, dir);
    memcpy(jinja + dir, "chat_template.jinja", sizeof "chat_template.jinja");
    FILE *f = fopen(jinja, "rb");
    if (!f) {
        tfc_status s = tfc_err(TFC_ERR_UNSUPPORTED,
                               "%s: '%s' has no chat_template and there is no '%s' beside it: the model has no chat "
                               "template (a base model?)",
                               fn, path, jinja);
        free(jinja);
        return s;
    }
    fclose(f);
    uint8_t *buf = NULL;
    size_t len = 0;
    tfc_status s = tok_read_file(fn, jinja, &buf, &len);
    if (s == TFC_OK && strlen((const char *)buf) != len)
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds a NUL byte", fn, jinja);
    if (s == TFC_OK) s = named(fn, where, jinja, NULL);
    free(jinja);
    if (s != TFC_OK) {
        free(buf);
        return s;
    }
    *owned = (char *)buf;
    *text = *owned;
    return TFC_OK;
}

/* want is what the family writes for bos_token / eos_token (NULL: it writes none, anything goes). */
static tfc_status check_token(const char *fn, const char *path, const chat_family_def *f, const char *key,
                              const char *want, const char *have) {
    if (!want || (have && strcmp(want, have) == 0)) return TFC_OK;
    return tfc_err(TFC_ERR_UNSUPPORTED,
                   "%s: '%s': %s is %s%.64s%s, and the %s template writes it as \"%s\": the file's template would "
                   "write its own token there, which the library does not render",
                   fn, path, key, have ? "\"" : "", have ? have : "absent", have ? "\"" : "", f->title, want);
}

static tfc_status dup_or_null(const char *fn, const char *s, char **out) {
    if (!out) return TFC_OK;
    *out = NULL;
    if (!s) return TFC_OK;
    *out = strdup(s);
    return *out ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
}

TFC_API tfc_status tfc_chat_config_load(const char *path, int32_t *family, char **bos_token, char **eos_token) {
    static const char fn[] = "tfc_chat_config_load";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, family);
    FILE *f = fopen(path, "rb");
    if (!f) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    json_t *root = NULL;
    tfc_status s = tfc_json_read(fn, path, f, CONFIG_MAX_BYTES, 0, &root);
    fclose(f);
    if (s != TFC_OK) return s;
    const char *tmpl = NULL, *bos = NULL, *eos = NULL;
    char *owned = NULL, *where = NULL, *b = NULL, *e = NULL;
    int32_t fam = 0;
    if (!json_is_object(root)) s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' is not a JSON object", fn, path);
    if (s == TFC_OK) s = token_text(fn, path, root, "bos_token", &bos);
    if (s == TFC_OK) s = token_text(fn, path, root, "eos_token", &eos);
    if (s == TFC_OK) s = template_text(fn, path, root, &tmpl, &owned, &where);
    if (s == TFC_OK) s = chat_detect(fn, where, tmpl, &fam);
    if (s == TFC_OK) s = check_token(fn, path, chat_family(fam), "bos_token", chat_family(fam)->bos, bos);
    if (s == TFC_OK) s = check_token(fn, path, chat_family(fam), "eos_token", chat_family(fam)->eos, eos);
    if (s == TFC_OK) s = dup_or_null(fn, bos, bos_token ? &b : NULL);
    if (s == TFC_OK) s = dup_or_null(fn, eos, eos_token ? &e : NULL);
    json_decref(root);
    free(owned);
    free(where);
    if (s != TFC_OK) {
        free(b);
        free(e);
        return s;
    }
    *family = fam;
    if (bos_token) *bos_token = b;
    if (eos_token) *eos_token = e;
    return TFC_OK;
}
