/*
 * Rendering a conversation as a model family's chat template does, and
 * encoding it. Each render_* below is the family's Jinja template
 * (tokenizer_config.json "chat_template", quoted in chat_detect.c) written
 * out in C for the messages the library takes: roles "system", "user" and
 * "assistant" with text content, no tools. The comment above each gives
 * the string it writes, with S the first message's content when that
 * message is a system one, (r_i, c_i) the others, and strip() Python's
 * str.strip(), which the templates call (Jinja's `trim` filter and
 * `.strip()`): it removes the characters str.isspace() accepts from both
 * ends. The expected strings in tests/c/test_chat_template.c and
 * tests/python/test_chat_template.py are written from the models'
 * documentation and checked against Jinja2 rendering the templates
 * themselves.
 */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

static const chat_family_def families[] = {
    {TFC_CHAT_CHATML, "chatml", "ChatML (Qwen2-Instruct)", NULL, NULL, "<|im_end|>"},
    {TFC_CHAT_LLAMA3, "llama3", "Llama 3 (Meta-Llama-3-Instruct)", "<|begin_of_text|>", NULL, "<|eot_id|>"},
    {TFC_CHAT_LLAMA2, "llama2", "Llama 2 (Llama-2-chat)", "<s>", "</s>", "</s>"},
    {TFC_CHAT_LLAMA3_1, "llama3.1", "Llama 3.1 (Llama-3.1-Instruct)", "<|begin_of_text|>", NULL, "<|eot_id|>"},
    {TFC_CHAT_QWEN2_5, "qwen2.5", "Qwen2.5 (Qwen2.5-Instruct)", NULL, NULL, "<|im_end|>"},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

const chat_family_def *chat_family(int32_t family) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (families[i].family == family) return &families[i];
    return NULL;
}

const char *chat_family_list(void) {
    return "TFC_CHAT_CHATML (1), TFC_CHAT_LLAMA3 (2), TFC_CHAT_LLAMA2 (3), TFC_CHAT_LLAMA3_1 (4) or "
           "TFC_CHAT_QWEN2_5 (5)";
}

TFC_API tfc_status tfc_chat_family_info(int32_t family, const char **name, const char **end_of_turn) {
    static const char fn[] = "tfc_chat_family_info";
    TFC_CHECK_NOT_NULL(fn, name);
    const chat_family_def *f = chat_family(family);
    if (!f) return tfc_err(TFC_ERR_INVALID_ARG, "%s: family is %d, expected %s", fn, (int)family, chat_family_list());
    *name = f->name;
    if (end_of_turn) *end_of_turn = f->end_of_turn;
    return TFC_OK;
}

TFC_API tfc_status tfc_chat_family_from_name(const char *name, int32_t *family) {
    static const char fn[] = "tfc_chat_family_from_name";
    TFC_CHECK_NOT_NULL(fn, name);
    TFC_CHECK_NOT_NULL(fn, family);
    if (strcmp(name, "qwen2") == 0) name = "chatml"; /* Qwen2-Instruct's template is the ChatML family's */
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strcmp(families[i].name, name) == 0) {
            *family = families[i].family;
            return TFC_OK;
        }
    return tfc_err(TFC_ERR_INVALID_ARG,
                   "%s: name is \"%.64s\", expected \"chatml\" (or \"qwen2\"), \"qwen2.5\", \"llama3\", \"llama3.1\" "
                   "or \"llama2\"",
                   fn, name);
}

/* ---- the messages: validated once, before anything is written ----------- */

enum { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

static tfc_status check_messages(const char *fn, const chat_family_def *f, const tfc_chat_message *m, size_t n,
                                 int *roles) {
    for (size_t i = 0; i < n; i++) {
        if (!m[i].role) return tfc_err(TFC_ERR_INVALID_ARG, "%s: messages[%zu].role is NULL", fn, i);
        if (!m[i].content) return tfc_err(TFC_ERR_INVALID_ARG, "%s: messages[%zu].content is NULL", fn, i);
        if (strcmp(m[i].role, "system") == 0)
            roles[i] = ROLE_SYSTEM;
        else if (strcmp(m[i].role, "user") == 0)
            roles[i] = ROLE_USER;
        else if (strcmp(m[i].role, "assistant") == 0)
            roles[i] = ROLE_ASSISTANT;
        else
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: messages[%zu].role is \"%.64s\": the %s template is rendered for the roles \"system\", "
                           "\"user\" and \"assistant\" only (no tool messages)",
                           fn, i, m[i].role, f->title);
        const uint8_t *p = (const uint8_t *)m[i].content;
        const size_t len = strlen(m[i].content);
        for (size_t k = 0; k < len;) {
            size_t bad, l = utf8_valid_len(p + k, len - k, &bad);
            if (!l)
                return tfc_err(TFC_ERR_INVALID_ARG, "%s: messages[%zu].content is not valid UTF-8 (at byte %zu)", fn, i,
                               k);
            k += l;
        }
    }
    /*
     * Llama 2's template raises "Conversation roles must alternate
     * user/assistant/user/assistant/..." for a wrong role at an even place
     * after the optional system message; a system message at an odd place
     * passes its check and is then dropped without a word. Both are refused
     * here, naming the message.
     */
    if (f->family == TFC_CHAT_LLAMA2) {
        const size_t first = roles[0] == ROLE_SYSTEM;
        for (size_t i = first; i < n; i++) {
            const int want = (i - first) % 2 == 0 ? ROLE_USER : ROLE_ASSISTANT;
            if (roles[i] != want)
                return tfc_err(TFC_ERR_INVALID_ARG,
                               "%s: messages[%zu] is a \"%s\" message where the Llama 2 template takes a \"%s\" one: "
                               "after an optional first system message, roles must alternate user/assistant/user/"
                               "assistant/...",
                               fn, i, m[i].role, want == ROLE_USER ? "user" : "assistant");
        }
    }
    return TFC_OK;
}

/* ---- rendering ---------------------------------------------------------- */

/* Python's str.isspace(): Unicode White_Space, plus U+001C..U+001F (bidi class B or S). */
static int py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
        (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* strip(s[0..n)): s is well-formed UTF-8 (checked above, or built from checked parts). */
static void put_stripped(tfc_strbuf *b, const char *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    size_t lo = 0, hi = 0, l;
    for (size_t k = 0; k < n; k += l) {
        const uint32_t c = utf8_decode(p + k, &l);
        if (!py_space(c)) {
            if (hi == 0) lo = k;
            hi = k + l;
        }
    }
    tfc_sb_put(b, s + lo, hi - lo);
}

static void put_stripped_str(tfc_strbuf *b, const char *s) { put_stripped(b, s, strlen(s)); }

/*
 * ChatML (Qwen2-Instruct), and Qwen2.5-Instruct without tools, which
 * differs only in the default system prompt D:
 *   [if r_0 != system: "<|im_start|>system\n" D "<|im_end|>\n"]
 *   for every message: "<|im_start|>" r_i "\n" c_i "<|im_end|>\n"
 *   [add_generation_prompt: "<|im_start|>assistant\n"]
 * D is "You are a helpful assistant." (Qwen2) or "You are Qwen, created by
 * Alibaba Cloud. You are a helpful assistant." (Qwen2.5). No stripping.
 */
static void render_chatml(tfc_strbuf *b, const char *dflt, const tfc_chat_message *m, const int *roles, size_t n,
                          int gen) {
    if (roles[0] != ROLE_SYSTEM) {
        tfc_sb_str(b, "<|im_start|>system\n");
        tfc_sb_str(b, dflt);
        tfc_sb_str(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        tfc_sb_str(b, "<|im_start|>");
        tfc_sb_str(b, m[i].role);
        tfc_sb_str(b, "\n");
        tfc_sb_str(b, m[i].content);
        tfc_sb_str(b, "<|im_end|>\n");
    }
    if (gen) tfc_sb_str(b, "<|im_start|>assistant\n");
}

static void put_llama3_turn(tfc_strbuf *b, const char *role, const char *content) {
    tfc_sb_str(b, "<|start_header_id|>");
    tfc_sb_str(b, role);
    tfc_sb_str(b, "<|end_header_id|>\n\n");
    put_stripped_str(b, content);
    tfc_sb_str(b, "<|eot_id|>");
}

/*
 * Llama 3 (Meta-Llama-3-Instruct):
 *   "<|begin_of_text|>"
 *   for every message: "<|start_header_id|>" r_i "<|end_header_id|>\n\n" strip(c_i) "<|eot_id|>"
 *   [add_generation_prompt: "<|start_header_id|>assistant<|end_header_id|>\n\n"]
 * A system message is a turn like the others, wherever it is.
 */
static void render_llama3(tfc_strbuf *b, const tfc_chat_message *m, size_t n, int gen) {
    tfc_sb_str(b, "<|begin_of_text|>");
    for (size_t i = 0; i < n; i++) put_llama3_turn(b, m[i].role, m[i].content);
    if (gen) tfc_sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/*
 * Llama 3.1 (Llama-3.1-Instruct, no tools, no date_string given, so the
 * template's default date):
 *   "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
 *   "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" strip(S) "<|eot_id|>"
 *   for every other message: "<|start_header_id|>" r_i "<|end_header_id|>\n\n" strip(c_i) "<|eot_id|>"
 *   [add_generation_prompt: "<|start_header_id|>assistant<|end_header_id|>\n\n"]
 * The system turn is always written; S is empty without a first system message.
 */
static void render_llama3_1(tfc_strbuf *b, const tfc_chat_message *m, const int *roles, size_t n, int gen) {
    const size_t first = roles[0] == ROLE_SYSTEM;
    tfc_sb_str(b,
               "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
               "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    if (first) put_stripped_str(b, m[0].content);
    tfc_sb_str(b, "<|eot_id|>");
    for (size_t i = first; i < n; i++) put_llama3_turn(b, m[i].role, m[i].content);
    if (gen) tfc_sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/*
 * Llama 2 (Llama-2-chat), messages alternating user/assistant after an
 * optional system message (checked above), u_k the k-th of them:
 *   user:      "<s>[INST] " strip(x_k) " [/INST]"
 *   assistant: " " strip(u_k) " </s>"
 * where x_0 = "<<SYS>>\n" S "\n<</SYS>>\n\n" u_0 when there is a system
 * message (even an empty one), else x_k = u_k. The whole of x_0 is
 * stripped, as the template strips its `content`. The template takes no
 * generation prompt: a conversation ending with a user turn already ends
 * with " [/INST]", where the reply starts.
 */
static void render_llama2(tfc_strbuf *b, tfc_strbuf *scratch, const tfc_chat_message *m, const int *roles, size_t n) {
    const size_t first = roles[0] == ROLE_SYSTEM;
    for (size_t i = first; i < n; i++) {
        const char *content = m[i].content;
        size_t len = strlen(content);
        if (i == first && first) {
            scratch->n = 0;
            tfc_sb_str(scratch, "<<SYS>>\n");
            tfc_sb_str(scratch, m[0].content);
            tfc_sb_str(scratch, "\n<</SYS>>\n\n");
            tfc_sb_str(scratch, content);
            if (scratch->oom) return;
            content = scratch->p;
            len = scratch->n;
        }
        if (roles[i] == ROLE_USER) {
            tfc_sb_str(b, "<s>[INST] ");
            put_stripped(b, content, len);
            tfc_sb_str(b, " [/INST]");
        } else {
            tfc_sb_str(b, " ");
            put_stripped(b, content, len);
            tfc_sb_str(b, " </s>");
        }
    }
}

static tfc_status render(const char *fn, int32_t family, const tfc_chat_message *messages, size_t n, int32_t gen,
                         char **text, size_t *len) {
    const chat_family_def *f = chat_family(family);
    if (!f) return tfc_err(TFC_ERR_INVALID_ARG, "%s: family is %d, expected %s", fn, (int)family, chat_family_list());
    if (n == 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_messages is 0: a conversation needs a message", fn);
    TFC_CHECK_NOT_NULL(fn, messages);
    if (gen != 0 && gen != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: add_generation_prompt is %d, expected 0 or 1", fn, (int)gen);
    if (n > ((size_t)1 << 24)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_messages is %zu, above 2^24", fn, n);
    int *roles = malloc(n * sizeof *roles);
    if (!roles) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = check_messages(fn, f, messages, n, roles);
    tfc_strbuf b = {0}, scratch = {0};
    if (s == TFC_OK) {
        switch (family) {
        case TFC_CHAT_CHATML: render_chatml(&b, "You are a helpful assistant.", messages, roles, n, gen); break;
        case TFC_CHAT_QWEN2_5:
            render_chatml(&b, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", messages, roles,
                          n, gen);
            break;
        case TFC_CHAT_LLAMA3: render_llama3(&b, messages, n, gen); break;
        case TFC_CHAT_LLAMA3_1: render_llama3_1(&b, messages, roles, n, gen); break;
        default: render_llama2(&b, &scratch, messages, roles, n); break;
        }
        tfc_sb_put(&b, "", 0); /* a string even when nothing was written (a lone Llama 2 system message) */
        if (b.oom || scratch.oom) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    free(roles);
    free(scratch.p);
    if (s != TFC_OK) {
        free(b.p);
        return s;
    }
    *text = b.p;
    if (len) *len = b.n;
    return TFC_OK;
}

TFC_API tfc_status tfc_chat_render(int32_t family, const tfc_chat_message *messages, size_t n_messages,
                                   int32_t add_generation_prompt, char **text, size_t *len) {
    static const char fn[] = "tfc_chat_render";
    TFC_CHECK_NOT_NULL(fn, text);
    return render(fn, family, messages, n_messages, add_generation_prompt, text, len);
}

/* ---- encoding ----------------------------------------------------------- */

/* tfc_tokenizer_encode without the tokens a tokenizer.json's post-processor puts around every text. */
static tfc_status encode_plain(const char *fn, const tfc_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                               size_t *n_ids) {
    int32_t *v = NULL;
    size_t n = 0;
    TFC_TRY_IN(fn, tfc_tokenizer_encode(tok, text, len, TFC_SPECIAL_ALLOWED, &v, &n));
    const tok_hf *h = tok->hf;
    if (h && h->add_special) {
        const size_t np = (size_t)h->n_prefix, ns = (size_t)h->n_suffix;
        int ok = n >= np + ns;
        for (size_t k = 0; ok && k < np; k++) ok = v[k] == h->prefix[k];
        for (size_t k = 0; ok && k < ns; k++) ok = v[n - ns + k] == h->suffix[k];
        if (!ok) {
            free(v);
            return tfc_err(TFC_ERR_INTERNAL, "%s: the encoding lacks the tokenizer's template tokens", fn);
        }
        if (np) memmove(v, v + np, (n - np - ns) * sizeof *v);
        n -= np + ns;
    }
    *ids = v;
    *n_ids = n;
    return TFC_OK;
}

/* Each token the family's template writes must be one token of tok, or the ids would not be the model's. */
static tfc_status check_markers(const char *fn, const tfc_tokenizer *tok, const chat_family_def *f) {
    static const char *const chatml[] = {"<|im_start|>", "<|im_end|>", NULL};
    static const char *const llama3[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                                         NULL};
    static const char *const llama2[] = {"<s>", "</s>", NULL};
    const char *const *markers = f->family == TFC_CHAT_LLAMA2           ? llama2
        : f->family == TFC_CHAT_CHATML || f->family == TFC_CHAT_QWEN2_5 ? chatml
                                                                        : llama3;
    for (const char *const *mk = markers; *mk; mk++) {
        int32_t *v;
        size_t n;
        TFC_TRY(encode_plain(fn, tok, *mk, strlen(*mk), &v, &n));
        free(v);
        if (n != 1)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: tok has no token \"%s\" (the text encodes to %zu tokens): the %s "
                           "template's special tokens must be tokens of the tokenizer (added or special tokens of "
                           "its tokenizer.json)",
                           fn, *mk, n, f->title);
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_chat_encode(const tfc_tokenizer *tok, int32_t family, const tfc_chat_message *messages,
                                   size_t n_messages, int32_t add_generation_prompt, int32_t **ids, size_t *n_ids) {
    static const char fn[] = "tfc_chat_encode";
    TFC_CHECK_NOT_NULL(fn, tok);
    TFC_CHECK_NOT_NULL(fn, ids);
    TFC_CHECK_NOT_NULL(fn, n_ids);
    char *text;
    size_t len;
    TFC_TRY(render(fn, family, messages, n_messages, add_generation_prompt, &text, &len));
    tfc_status s = check_markers(fn, tok, chat_family(family));
    if (s == TFC_OK) s = encode_plain(fn, tok, text, len, ids, n_ids);
    free(text);
    return s;
}
