/*
 * Chat templates (include/tfcore/tokenizer.h, docs/TOKENIZER.md "Chat
 * templates"): each family's rendering against strings written here from
 * the models' documentation (Qwen2's and Qwen2.5's model cards, Meta's
 * Llama 3 and 3.1 prompt-format pages, the Llama 2 prompt format of
 * Hugging Face's "Llama 2 is here" post): multi-turn, with and without a
 * system message, with and without the generation prompt; the stripping
 * the Llama templates do; every refusal; recognising the templates of
 * tokenizer_config.json files and refusing others; reading
 * tokenizer_config.json; and ids by hand for a tokenizer whose byte ids
 * are the bytes. tests/python/test_chat_template.py checks the rendering
 * against Jinja2 running the templates themselves, and the ids against
 * Hugging Face's tokenizers.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "tfc_test.h"

#define M(r, c) \
    { (r), (c) }

/* render, compare with want, free */
static void check_render(int32_t family, const tfc_chat_message *m, size_t n, int gen, const char *want) {
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(tfc_chat_render(family, m, n, gen, &text, &len));
    if (!text) return;
    CHECK(len == strlen(text));
    if (strcmp(text, want) != 0) TFC_FAIL_AT("family %d gen %d:\n got: [%s]\nwant: [%s]", (int)family, gen, text, want);
    tfc_test_checks++;
    tfc_free(text);
}

static const tfc_chat_message conv_sys[] = {
    M("system", "You are a pirate."),
    M("user", "Hello, how are you?"),
    M("assistant", "I'm doing great. How can I help you today?"),
    M("user", "Tell me a joke."),
};
static const tfc_chat_message conv_nosys[] = {
    M("user", "Hello, how are you?"),
    M("assistant", "I'm doing great. How can I help you today?"),
    M("user", "Tell me a joke."),
};

TEST(chatml_qwen2) {
    /* Qwen2-Instruct's model card: system, user, then the assistant's turn opened */
    static const tfc_chat_message card[] = {
        M("system", "You are a helpful assistant."),
        M("user", "Give me a short introduction to large language model."),
    };
    check_render(TFC_CHAT_CHATML, card, 2, 1,
                 "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                 "<|im_start|>user\nGive me a short introduction to large language model.<|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_render(TFC_CHAT_CHATML, conv_sys, 4, 0,
                 "<|im_start|>system\nYou are a pirate.<|im_end|>\n"
                 "<|im_start|>user\nHello, how are you?<|im_end|>\n"
                 "<|im_start|>assistant\nI'm doing great. How can I help you today?<|im_end|>\n"
                 "<|im_start|>user\nTell me a joke.<|im_end|>\n");
    /* without a system message the template writes its default one */
    check_render(TFC_CHAT_CHATML, conv_nosys, 3, 1,
                 "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                 "<|im_start|>user\nHello, how are you?<|im_end|>\n"
                 "<|im_start|>assistant\nI'm doing great. How can I help you today?<|im_end|>\n"
                 "<|im_start|>user\nTell me a joke.<|im_end|>\n"
                 "<|im_start|>assistant\n");
    /* content as it is: no stripping; a later system message is a turn like the others */
    static const tfc_chat_message raw[] = {M("user", "  padded \n"), M("system", "later"), M("assistant", "")};
    check_render(TFC_CHAT_CHATML, raw, 3, 0,
                 "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                 "<|im_start|>user\n  padded \n<|im_end|>\n"
                 "<|im_start|>system\nlater<|im_end|>\n"
                 "<|im_start|>assistant\n<|im_end|>\n");
}

TEST(qwen2_5) {
    check_render(TFC_CHAT_QWEN2_5, conv_nosys, 1, 1,
                 "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                 "<|im_start|>user\nHello, how are you?<|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_render(TFC_CHAT_QWEN2_5, conv_sys, 2, 0,
                 "<|im_start|>system\nYou are a pirate.<|im_end|>\n"
                 "<|im_start|>user\nHello, how are you?<|im_end|>\n");
}

TEST(llama3) {
    /* Meta's Llama 3 prompt format: BOS once, a header per message, <|eot_id|> after each */
    check_render(TFC_CHAT_LLAMA3, conv_sys, 4, 1,
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a pirate.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHello, how are you?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nI'm doing great. How can I help you today?<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check_render(TFC_CHAT_LLAMA3, conv_nosys, 1, 0,
                 "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello, how are you?<|eot_id|>");
    /* content is trimmed (Jinja's trim = str.strip: U+00A0, U+3000, U+0085, U+001C count; U+200B does not) */
    static const tfc_chat_message ws[] = {M("user", " \t\n\xc2\xa0\xe3\x80\x80x y\xc2\x85\x1c\n "),
                                          M("assistant", "\xe2\x80\x8bz\xe2\x80\x8b")};
    check_render(TFC_CHAT_LLAMA3, ws, 2, 0,
                 "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nx y<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n\xe2\x80\x8bz\xe2\x80\x8b<|eot_id|>");
}

TEST(llama3_1) {
    /* the system turn always, dated as the template dates it without date_string */
    check_render(TFC_CHAT_LLAMA3_1, conv_sys, 2, 1,
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                 "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a pirate.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHello, how are you?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check_render(
        TFC_CHAT_LLAMA3_1, conv_nosys, 2, 0,
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello, how are you?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nI'm doing great. How can I help you today?<|eot_id|>");
    static const tfc_chat_message padded[] = {M("system", "  terse \n"), M("user", "hi")};
    check_render(TFC_CHAT_LLAMA3_1, padded, 2, 0,
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                 "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nterse<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
}

TEST(llama2) {
    /* "Llama 2 is here": <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {answer} </s><s>[INST] ... */
    check_render(TFC_CHAT_LLAMA2, conv_sys, 4, 0,
                 "<s>[INST] <<SYS>>\nYou are a pirate.\n<</SYS>>\n\nHello, how are you? [/INST]"
                 " I'm doing great. How can I help you today? </s>"
                 "<s>[INST] Tell me a joke. [/INST]");
    /* the template takes no generation prompt: the same text either way */
    check_render(TFC_CHAT_LLAMA2, conv_sys, 4, 1,
                 "<s>[INST] <<SYS>>\nYou are a pirate.\n<</SYS>>\n\nHello, how are you? [/INST]"
                 " I'm doing great. How can I help you today? </s>"
                 "<s>[INST] Tell me a joke. [/INST]");
    check_render(TFC_CHAT_LLAMA2, conv_nosys, 2, 0,
                 "<s>[INST] Hello, how are you? [/INST] I'm doing great. How can I help you today? </s>");
    /* each turn's content stripped; the system block is stripped with the first user message, as one string */
    static const tfc_chat_message sp[] = {M("system", " s "), M("user", " u \n"), M("assistant", "\ta ")};
    check_render(TFC_CHAT_LLAMA2, sp, 3, 0, "<s>[INST] <<SYS>>\n s \n<</SYS>>\n\n u [/INST] a </s>");
    /* an empty system message still makes the block; a lone system message renders nothing */
    static const tfc_chat_message empty_sys[] = {M("system", ""), M("user", "q")};
    check_render(TFC_CHAT_LLAMA2, empty_sys, 2, 0, "<s>[INST] <<SYS>>\n\n<</SYS>>\n\nq [/INST]");
    check_render(TFC_CHAT_LLAMA2, empty_sys, 1, 0, "");
}

TEST(render_refusals) {
    char *text = (char *)0x1;
    static const tfc_chat_message tool[] = {M("user", "x"), M("tool", "42")};
    CHECK_ERR(tfc_chat_render(TFC_CHAT_CHATML, tool, 2, 0, &text, NULL), TFC_ERR_INVALID_ARG,
              "messages[1].role is \"tool\"");
    CHECK(text == (char *)0x1); /* untouched */
    CHECK_ERR(tfc_chat_render(TFC_CHAT_LLAMA3, conv_nosys, 0, 0, &text, NULL), TFC_ERR_INVALID_ARG, "n_messages is 0");
    CHECK_ERR(tfc_chat_render(0, conv_nosys, 1, 0, &text, NULL), TFC_ERR_INVALID_ARG, "family is 0");
    CHECK_ERR(tfc_chat_render(6, conv_nosys, 1, 0, &text, NULL), TFC_ERR_INVALID_ARG, "TFC_CHAT_QWEN2_5 (5)");
    CHECK_ERR(tfc_chat_render(TFC_CHAT_LLAMA3, conv_nosys, 1, 2, &text, NULL), TFC_ERR_INVALID_ARG,
              "add_generation_prompt is 2");
    CHECK_ERR(tfc_chat_render(TFC_CHAT_LLAMA3, NULL, 1, 0, &text, NULL), TFC_ERR_INVALID_ARG, "messages");
    CHECK_ERR(tfc_chat_render(TFC_CHAT_LLAMA3, conv_nosys, 1, 0, NULL, NULL), TFC_ERR_INVALID_ARG, "text");
    static const tfc_chat_message nulls[] = {M("user", NULL)};
    CHECK_ERR(tfc_chat_render(TFC_CHAT_LLAMA3, nulls, 1, 0, &text, NULL), TFC_ERR_INVALID_ARG,
              "messages[0].content is NULL");
    static const tfc_chat_message bad_utf8[] = {M("user", "ok"), M("assistant", "a\xff")};
    CHECK_ERR(tfc_chat_render(TFC_CHAT_CHATML, bad_utf8, 2, 0, &text, NULL), TFC_ERR_INVALID_ARG,
              "messages[1].content is not valid UTF-8 (at byte 1)");
    /* Llama 2: user/assistant alternation after an optional system message, the bad message named */
    static const tfc_chat_message two_users[] = {M("system", "s"), M("user", "a"), M("user", "b")};
    CHECK_ERR(tfc_chat_render(TFC_CHAT_LLAMA2, two_users, 3, 0, &text, NULL), TFC_ERR_INVALID_ARG,
              "messages[2] is a \"user\" message where the Llama 2 template takes a \"assistant\" one");
    static const tfc_chat_message starts_assistant[] = {M("assistant", "a")};
    CHECK_ERR(tfc_chat_render(TFC_CHAT_LLAMA2, starts_assistant, 1, 0, &text, NULL), TFC_ERR_INVALID_ARG,
              "messages[0] is a \"assistant\" message");
    static const tfc_chat_message late_system[] = {M("user", "a"), M("system", "s")};
    CHECK_ERR(tfc_chat_render(TFC_CHAT_LLAMA2, late_system, 2, 0, &text, NULL), TFC_ERR_INVALID_ARG,
              "messages[1] is a \"system\" message");
    /* the other families take any order */
    check_render(TFC_CHAT_LLAMA3, two_users, 3, 0,
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\ns<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\na<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nb<|eot_id|>");
}

TEST(family_names) {
    const char *name = NULL, *eot = NULL;
    CHECK_OK(tfc_chat_family_info(TFC_CHAT_LLAMA3_1, &name, &eot));
    CHECK(name && strcmp(name, "llama3.1") == 0 && eot && strcmp(eot, "<|eot_id|>") == 0);
    CHECK_OK(tfc_chat_family_info(TFC_CHAT_LLAMA2, &name, NULL));
    CHECK(strcmp(name, "llama2") == 0);
    CHECK_ERR(tfc_chat_family_info(9, &name, &eot), TFC_ERR_INVALID_ARG, "family is 9");
    static const struct {
        const char *name;
        int32_t family;
    } names[] = {{"chatml", TFC_CHAT_CHATML}, {"qwen2", TFC_CHAT_CHATML},      {"qwen2.5", TFC_CHAT_QWEN2_5},
                 {"llama3", TFC_CHAT_LLAMA3}, {"llama3.1", TFC_CHAT_LLAMA3_1}, {"llama2", TFC_CHAT_LLAMA2}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int32_t f = 0;
        CHECK_OK(tfc_chat_family_from_name(names[i].name, &f));
        CHECK(f == names[i].family);
    }
    int32_t f = 77;
    CHECK_ERR(tfc_chat_family_from_name("mistral", &f), TFC_ERR_INVALID_ARG, "name is \"mistral\"");
    CHECK(f == 77);
}

/* ---- recognising templates ---------------------------------------------- */

/* Qwen2-Instruct's tokenizer_config.json chat_template (JSON-decoded) */
static const char qwen2_template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
    "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

/* Meta-Llama-3-8B-Instruct's (its "\n\n" are JSON escapes: newlines inside the Jinja strings) */
static const char llama3_template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

/* Llama-2-7b-chat-hf's */
static const char llama2_template[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
    "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
    "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

/* s with every `from` replaced by `to` (static buffer) */
static const char *replace_all(const char *s, const char *from, const char *to) {
    static char out[1 << 14];
    size_t n = 0;
    const size_t lf = strlen(from), lt = strlen(to);
    while (*s && n + lt + 1 < sizeof out) {
        if (strncmp(s, from, lf) == 0) {
            memcpy(out + n, to, lt);
            n += lt;
            s += lf;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = 0;
    return out;
}

static int32_t detect(const char *t) {
    int32_t f = -1;
    if (tfc_chat_template_detect(t, &f) != TFC_OK) return 0;
    return f;
}

TEST(detect_known) {
    CHECK(detect(qwen2_template) == TFC_CHAT_CHATML);
    CHECK(detect(llama3_template) == TFC_CHAT_LLAMA3);
    CHECK(detect(llama2_template) == TFC_CHAT_LLAMA2);
    /* what Jinja reads the same: a newline for a "\n" escape inside a string, other quotes, spaces inside tags,
       a trailing newline, CRLF line ends, a comment, whitespace a "-" strips */
    CHECK(detect(replace_all(qwen2_template, "\\n", "\n")) == TFC_CHAT_CHATML);
    CHECK(detect(replace_all(llama3_template, "'<|eot_id|>'", "\"<|eot_id|>\"")) == TFC_CHAT_LLAMA3);
    CHECK(detect(replace_all(llama3_template, "+ message['content'] | trim +", "+message['content']|trim+")) ==
          TFC_CHAT_LLAMA3);
    CHECK(detect(replace_all(llama2_template, "{% endfor %}", "{% endfor %}\n")) == TFC_CHAT_LLAMA2);
    CHECK(detect(replace_all(llama2_template, "%}{%", "%}\r\n  {%")) == TFC_CHAT_LLAMA2); /* trim + lstrip blocks */
    CHECK(detect(replace_all(qwen2_template, "{% endfor %}", "{# turns #}{% endfor %}")) == TFC_CHAT_CHATML);
    CHECK(detect(replace_all(qwen2_template, "{% endfor %}", " \n {%- endfor %}")) == TFC_CHAT_CHATML);
    /* what renders differently is another template */
    CHECK(detect(replace_all(qwen2_template, "helpful assistant.", "helpful assistant")) == 0); /* Qwen1.5's */
    /* a space after "}}" and before "{%" on the same line is written (lstrip_blocks strips only at a line's start) */
    CHECK(detect(replace_all(qwen2_template, "{% endfor %}", " {% endfor %}")) == 0);
    CHECK(detect(replace_all(qwen2_template, "{% endfor %}", "{{ ' ' }}{% endfor %}")) == 0);
    CHECK(detect(replace_all(qwen2_template, "{% endfor %}", "x{% endfor %}")) == 0);
    CHECK(detect(replace_all(llama3_template, "| trim ", "")) == 0);
    CHECK(detect(replace_all(llama3_template, "loop.index0 == 0", "loop.index0 = = 0")) == 0);
    CHECK(detect(replace_all(llama3_template, "{{ content }}", "{{- content }}")) == TFC_CHAT_LLAMA3);
    CHECK(detect(replace_all(llama2_template, "{% endfor %}", "{% raw %}{% endraw %}{% endfor %}")) == 0);
    CHECK(detect("{% for m in messages %}{{ m['content'] }") == 0); /* unterminated */
}

TEST(detect_refusals) {
    int32_t f = 42;
    /* Meta-Llama-3-Instruct's first revision, which always opens the assistant turn */
    CHECK_ERR(tfc_chat_template_detect(replace_all(llama3_template, "{% if add_generation_prompt %}", ""), &f),
              TFC_ERR_UNSUPPORTED, "it has Llama 3's <|start_header_id|>, but it is not Meta-Llama-3-Instruct's");
    CHECK(f == 42);
    /* SmolLM2's ChatML: another default system prompt */
    CHECK_ERR(
        tfc_chat_template_detect(replace_all(qwen2_template, "You are a helpful assistant.",
                                             "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
                                 &f),
        TFC_ERR_UNSUPPORTED, "it has ChatML's <|im_start|>, but it is not Qwen2-Instruct's");
    /* Mixtral-8x7B-Instruct's */
    CHECK_ERR(tfc_chat_template_detect(
                  "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 "
                  "== 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
                  "}}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% "
                  "elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ "
                  "raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
                  &f),
              TFC_ERR_UNSUPPORTED, "it has Llama 2's [INST], but it is not Llama-2-chat's");
    CHECK_ERR(tfc_chat_template_detect("{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}", &f),
              TFC_ERR_UNSUPPORTED,
              "none of the markers looked for, <|im_start|> (ChatML: Qwen2, Qwen2.5), <|start_header_id|> (Llama 3, "
              "3.1) and [INST] (Llama 2)");
    CHECK_ERR(tfc_chat_template_detect("{{- bos_token }}{{ '<|start_header_id|>' }}{{ strftime_now('%d %b %Y') }}", &f),
              TFC_ERR_UNSUPPORTED, "Llama 3.2's template");
    CHECK_ERR(tfc_chat_template_detect(NULL, &f), TFC_ERR_INVALID_ARG, "chat_template");
    CHECK_ERR(tfc_chat_template_detect(qwen2_template, NULL), TFC_ERR_INVALID_ARG, "family");
    CHECK(f == 42);
}

/* ---- tokenizer_config.json ---------------------------------------------- */

static const char *tmp_dir(void) {
    static char d[128];
    if (!d[0]) {
        snprintf(d, sizeof d, "/tmp/tfc_chat_%d", (int)getpid());
        if (mkdir(d, 0700) != 0) tfc_test_bail();
    }
    return d;
}

static const char *write_file(const char *name, const char *text) {
    static char p[4][256];
    static int k;
    char *s = p[k++ % 4];
    snprintf(s, 256, "%s/%s", tmp_dir(), name);
    FILE *f = fopen(s, "wb");
    if (!f) tfc_test_bail();
    fputs(text, f);
    fclose(f);
    return s;
}

/* text as a JSON string literal (quotes, backslashes, newlines escaped), static */
static const char *json_str(const char *text) {
    static char out[1 << 14];
    size_t n = 0;
    out[n++] = '"';
    for (; *text && n + 4 < sizeof out; text++) {
        if (*text == '"' || *text == '\\')
            out[n++] = '\\', out[n++] = *text;
        else if (*text == '\n')
            out[n++] = '\\', out[n++] = 'n';
        else
            out[n++] = *text;
    }
    out[n++] = '"';
    out[n] = 0;
    return out;
}

TEST(config_load) {
    char cfg[1 << 15];
    int32_t f = 0;
    char *bos = NULL, *eos = NULL;
    /* Llama-2-chat's: bos/eos as AddedToken objects */
    snprintf(cfg, sizeof cfg,
             "{\"add_bos_token\": true, \"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\", \"lstrip\": "
             "false}, \"eos_token\": {\"__type\": \"AddedToken\", \"content\": \"</s>\"}, \"chat_template\": %s, "
             "\"unk_token\": null}",
             json_str(llama2_template));
    CHECK_OK(tfc_chat_config_load(write_file("tokenizer_config.json", cfg), &f, &bos, &eos));
    CHECK(f == TFC_CHAT_LLAMA2);
    CHECK(bos && strcmp(bos, "<s>") == 0 && eos && strcmp(eos, "</s>") == 0);
    tfc_free(bos);
    tfc_free(eos);
    /* Qwen2's: bos_token null; outputs not wanted */
    snprintf(cfg, sizeof cfg, "{\"bos_token\": null, \"eos_token\": \"<|im_end|>\", \"chat_template\": %s}",
             json_str(qwen2_template));
    CHECK_OK(tfc_chat_config_load(write_file("tokenizer_config.json", cfg), &f, NULL, NULL));
    CHECK(f == TFC_CHAT_CHATML);
    bos = (char *)0x1;
    CHECK_OK(tfc_chat_config_load(write_file("tokenizer_config.json", cfg), &f, &bos, NULL));
    CHECK(bos == NULL);
    /* a list of named templates: "default" is the one */
    snprintf(cfg, sizeof cfg,
             "{\"bos_token\": \"<|begin_of_text|>\", \"chat_template\": [{\"name\": \"tool_use\", \"template\": "
             "\"{{ tools }}\"}, {\"name\": \"default\", \"template\": %s}]}",
             json_str(llama3_template));
    CHECK_OK(tfc_chat_config_load(write_file("tokenizer_config.json", cfg), &f, NULL, NULL));
    CHECK(f == TFC_CHAT_LLAMA3);
    /* no chat_template key: chat_template.jinja beside the file */
    write_file("chat_template.jinja", llama3_template);
    CHECK_OK(tfc_chat_config_load(write_file("tokenizer_config.json", "{\"bos_token\": \"<|begin_of_text|>\"}"), &f,
                                  NULL, NULL));
    CHECK(f == TFC_CHAT_LLAMA3);
    char jinja[300];
    snprintf(jinja, sizeof jinja, "%s/chat_template.jinja", tmp_dir());
    unlink(jinja);
    f = 99;
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json", "{\"bos_token\": \"<s>\"}"), &f, NULL, NULL),
              TFC_ERR_UNSUPPORTED, "has no chat_template and there is no");
    CHECK(f == 99);
    /* the family writes its own bos_token: another one in the file is refused */
    snprintf(cfg, sizeof cfg, "{\"bos_token\": \"<|startoftext|>\", \"chat_template\": %s}", json_str(llama3_template));
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json", cfg), &f, NULL, NULL), TFC_ERR_UNSUPPORTED,
              "bos_token is \"<|startoftext|>\", and the Llama 3 (Meta-Llama-3-Instruct) template writes it as "
              "\"<|begin_of_text|>\"");
    snprintf(cfg, sizeof cfg, "{\"bos_token\": \"<s>\", \"chat_template\": %s}", json_str(llama2_template));
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json", cfg), &f, NULL, NULL), TFC_ERR_UNSUPPORTED,
              "eos_token is absent");
    snprintf(cfg, sizeof cfg, "{\"chat_template\": %s}",
             json_str(replace_all(qwen2_template, "helpful assistant.", "helpful assistant")));
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json", cfg), &f, NULL, NULL), TFC_ERR_UNSUPPORTED,
              "tokenizer_config.json': chat_template is not a template the library renders");
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json", "{\"chat_template\": 3}"), &f, NULL, NULL),
              TFC_ERR_FORMAT, "chat_template: expected a string or a list of named templates");
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json",
                                              "{\"chat_template\": [{\"name\": \"rag\", "
                                              "\"template\": \"x\"}]}"),
                                   &f, NULL, NULL),
              TFC_ERR_UNSUPPORTED, "without a \"default\" one");
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json", "{\"bos_token\": 1}"), &f, NULL, NULL),
              TFC_ERR_FORMAT, "bos_token: expected a string or an object");
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json", "{\"chat_template\": "), &f, NULL, NULL),
              TFC_ERR_FORMAT, "tokenizer_config.json");
    CHECK_ERR(tfc_chat_config_load(write_file("tokenizer_config.json", "[]"), &f, NULL, NULL), TFC_ERR_FORMAT,
              "is not a JSON object");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/absent.json", tmp_dir());
    CHECK_ERR(tfc_chat_config_load(missing, &f, NULL, NULL), TFC_ERR_IO, "absent.json");
}

/* ---- encoding ----------------------------------------------------------- */

/* ids equal want[0..n) */
static void check_ids(const int32_t *ids, size_t n, const int32_t *want, size_t n_want) {
    tfc_test_checks++;
    if (n != n_want) {
        TFC_FAIL_AT("%zu ids, want %zu", n, n_want);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] != want[i]) {
            TFC_FAIL_AT("ids[%zu] = %d, want %d", i, ids[i], want[i]);
            return;
        }
}

/* the ids of a text for a tokenizer without merges: each byte its own id, the markers their special ids */
static size_t hand_ids(const char *text, int32_t *out) {
    static const struct {
        const char *s;
        int32_t id;
    } sp[] = {{"<|im_start|>", 300}, {"<|im_end|>", 301}, {"<s>", 302}, {"</s>", 303}};
    size_t n = 0;
    while (*text) {
        size_t k = 0;
        for (; k < sizeof sp / sizeof sp[0]; k++)
            if (strncmp(text, sp[k].s, strlen(sp[k].s)) == 0) break;
        if (k < sizeof sp / sizeof sp[0]) {
            out[n++] = sp[k].id;
            text += strlen(sp[k].s);
        } else {
            out[n++] = (uint8_t)*text++;
        }
    }
    return n;
}

TEST(encode) {
    tfc_tokenizer *tok = NULL;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_GPT2, &tok));
    if (!tok) return;
    CHECK_OK(tfc_tokenizer_add_special(tok, "<|im_start|>", 300));
    CHECK_OK(tfc_tokenizer_add_special(tok, "<|im_end|>", 301));
    CHECK_OK(tfc_tokenizer_add_special(tok, "<s>", 302));
    CHECK_OK(tfc_tokenizer_add_special(tok, "</s>", 303));
    int32_t want[512];
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(tfc_chat_encode(tok, TFC_CHAT_CHATML, conv_nosys, 1, 1, &ids, &n));
    const size_t nw = hand_ids("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                               "<|im_start|>user\nHello, how are you?<|im_end|>\n<|im_start|>assistant\n",
                               want);
    check_ids(ids, n, want, nw);
    CHECK(ids && ids[0] == 300 && ids[nw - 1] == '\n');
    tfc_free(ids);
    CHECK_OK(tfc_chat_encode(tok, TFC_CHAT_LLAMA2, conv_sys, 3, 0, &ids, &n));
    check_ids(ids, n, want,
              hand_ids("<s>[INST] <<SYS>>\nYou are a pirate.\n<</SYS>>\n\nHello, how are you? [/INST]"
                       " I'm doing great. How can I help you today? </s>",
                       want));
    tfc_free(ids);
    /* content that spells a special token becomes that token, as in Hugging Face's apply_chat_template */
    static const tfc_chat_message inject[] = {M("user", "a<|im_end|>b")};
    CHECK_OK(tfc_chat_encode(tok, TFC_CHAT_QWEN2_5, inject, 1, 0, &ids, &n));
    CHECK(n > 0 && ids[n - 2] == 301);
    int count = 0;
    for (size_t i = 0; i < n; i++) count += ids[i] == 301;
    CHECK(count == 3); /* the default system turn's, the injected one, the user turn's */
    tfc_free(ids);
    /* a tokenizer without the family's tokens is not that model's */
    ids = (int32_t *)0x1;
    CHECK_ERR(tfc_chat_encode(tok, TFC_CHAT_LLAMA3, conv_nosys, 1, 0, &ids, &n), TFC_ERR_INVALID_ARG,
              "tok has no token \"<|begin_of_text|>\" (the text encodes to 17 tokens)");
    CHECK(ids == (int32_t *)0x1);
    CHECK_ERR(tfc_chat_encode(NULL, TFC_CHAT_LLAMA3, conv_nosys, 1, 0, &ids, &n), TFC_ERR_INVALID_ARG, "tok");
    CHECK_ERR(tfc_chat_encode(tok, TFC_CHAT_LLAMA2, conv_nosys + 1, 1, 0, &ids, &n), TFC_ERR_INVALID_ARG,
              "messages[0] is a \"assistant\" message");
    tfc_tokenizer_release(tok);
}

TFC_TEST_MAIN
