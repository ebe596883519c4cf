/*
 * Recognising a chat template: which family's template a tokenizer_config.json
 * "chat_template" (Jinja source) is, so that tfc_chat_render can write what
 * the template would. Recognising means equality with one of the templates
 * the models ship (known[] below), compared in a canonical form, so that no
 * template is rendered by a family it merely resembles: two ChatML
 * templates with different default system prompts, or a Llama 3 template
 * that always appends the generation prompt, render differently, and a
 * template that is not one of those listed is refused, its family named
 * from its markers.
 *
 * The canonical form is what Jinja's lexer makes of the source under the
 * options Hugging Face renders chat templates with (trim_blocks and
 * lstrip_blocks on, keep_trailing_newline off; jinja2/lexer.py, 3.1):
 *   - "\r\n" and "\r" are "\n"; one "\n" at the very end is dropped;
 *   - the text between tags after whitespace control: "-" beside a tag
 *     strips all whitespace on that side; else a block or comment tag
 *     ("{% %}", "{# #}") eats the one "\n" right after it (trim_blocks,
 *     unless "+%}") and the spaces and tabs between the start of its line
 *     and itself (lstrip_blocks, unless "{%+");
 *   - comments are dropped (after their whitespace control);
 *   - inside "{{ }}" and "{% %}", string literals are compared by value
 *     ('\n', "\n" and a newline inside the quotes are one string) and
 *     whitespace only where it separates two tokens that would otherwise
 *     read as one (space_matters).
 * Two templates with equal canonical forms give the same lexer tokens, so
 * they render the same. Anything the comparison does not take ({% raw %},
 * an unterminated tag or string, a string escape other than \n \t \r \\
 * \' \") makes the template unequal to every known one, hence refused.
 */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer_impl.h"

/*
 * The templates recognised: the "chat_template" of each model's
 * tokenizer_config.json, as the file holds it (JSON-decoded).
 */
static const struct known_template {
    int32_t family;
    const char *model;
    const char *text;
} known[] = {
    {TFC_CHAT_CHATML, "Qwen2-Instruct",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {TFC_CHAT_QWEN2_5, "Qwen2.5-Instruct",
     "{%- if tools %}\n"
     "    {{- '<|im_start|>system\\n' }}\n"
     "    {%- if messages[0]['role'] == 'system' %}\n"
     "        {{- messages[0]['content'] }}\n"
     "    {%- else %}\n"
     "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
     "    {%- endif %}\n"
     "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
     "    {%- for tool in tools %}\n"
     "        {{- \"\\n\" }}\n"
     "        {{- tool | tojson }}\n"
     "    {%- endfor %}\n"
     "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
     "{%- else %}\n"
     "    {%- if messages[0]['role'] == 'system' %}\n"
     "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
     "    {%- else %}\n"
     "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
     "    {%- endif %}\n"
     "{%- endif %}\n"
     "{%- for message in messages %}\n"
     "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n"
     "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
     "    {%- elif message.role == \"assistant\" %}\n"
     "        {{- '<|im_start|>' + message.role }}\n"
     "        {%- if message.content %}\n"
     "            {{- '\\n' + message.content }}\n"
     "        {%- endif %}\n"
     "        {%- for tool_call in message.tool_calls %}\n"
     "            {%- if tool_call.function is defined %}\n"
     "                {%- set tool_call = tool_call.function %}\n"
     "            {%- endif %}\n"
     "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
     "            {{- tool_call.name }}\n"
     "            {{- '\", \"arguments\": ' }}\n"
     "            {{- tool_call.arguments | tojson }}\n"
     "            {{- '}\\n</tool_call>' }}\n"
     "        {%- endfor %}\n"
     "        {{- '<|im_end|>\\n' }}\n"
     "    {%- elif message.role == \"tool\" %}\n"
     "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
     "            {{- '<|im_start|>user' }}\n"
     "        {%- endif %}\n"
     "        {{- '\\n<tool_response>\\n' }}\n"
     "        {{- message.content }}\n"
     "        {{- '\\n</tool_response>' }}\n"
     "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
     "            {{- '<|im_end|>\\n' }}\n"
     "        {%- endif %}\n"
     "    {%- endif %}\n"
     "{%- endfor %}\n"
     "{%- if add_generation_prompt %}\n"
     "    {{- '<|im_start|>assistant\\n' }}\n"
     "{%- endif %}\n"},
    {TFC_CHAT_LLAMA3, "Meta-Llama-3-Instruct",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    {TFC_CHAT_LLAMA3_1, "Llama-3.1-Instruct",
     "{{- bos_token }}\n"
     "{%- if custom_tools is defined %}\n"
     "    {%- set tools = custom_tools %}\n"
     "{%- endif %}\n"
     "{%- if not tools_in_user_message is defined %}\n"
     "    {%- set tools_in_user_message = true %}\n"
     "{%- endif %}\n"
     "{%- if not date_string is defined %}\n"
     "    {%- set date_string = \"26 Jul 2024\" %}\n"
     "{%- endif %}\n"
     "{%- if not tools is defined %}\n"
     "    {%- set tools = none %}\n"
     "{%- endif %}\n"
     "\n"
     "{#- This block extracts the system message, so we can slot it into the right place. #}\n"
     "{%- if messages[0]['role'] == 'system' %}\n"
     "    {%- set system_message = messages[0]['content']|trim %}\n"
     "    {%- set messages = messages[1:] %}\n"
     "{%- else %}\n"
     "    {%- set system_message = \"\" %}\n"
     "{%- endif %}\n"
     "\n"
     "{#- System message + builtin tools #}\n"
     "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
     "{%- if builtin_tools is defined or tools is not none %}\n"
     "    {{- \"Environment: ipython\\n\" }}\n"
     "{%- endif %}\n"
     "{%- if builtin_tools is defined %}\n"
     "    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") + \"\\n\\n\"}}\n"
     "{%- endif %}\n"
     "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
     "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
     "{%- if tools is not none and not tools_in_user_message %}\n"
     "    {{- \"You have access to the following functions. To call a function, please respond with JSON for a function call.\" }}\n"
     "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n"
     "    {{- \"Do not use variables.\\n\\n\" }}\n"
     "    {%- for t in tools %}\n"
     "        {{- t | tojson(indent=4) }}\n"
     "        {{- \"\\n\\n\" }}\n"
     "    {%- endfor %}\n"
     "{%- endif %}\n"
     "{{- system_message }}\n"
     "{{- \"<|eot_id|>\" }}\n"
     "\n"
     "{#- Custom tools are passed in a user message with some extra guidance #}\n"
     "{%- if tools_in_user_message and not tools is none %}\n"
     "    {#- Extract the first user message so we can plug it in here #}\n"
     "    {%- if messages | length != 0 %}\n"
     "        {%- set first_user_message = messages[0]['content']|trim %}\n"
     "        {%- set messages = messages[1:] %}\n"
     "    {%- else %}\n"
     "        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n"
     "{%- endif %}\n"
     "    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
     "    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n"
     "    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n"
     "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n"
     "    {{- \"Do not use variables.\\n\\n\" }}\n"
     "    {%- for t in tools %}\n"
     "        {{- t | tojson(indent=4) }}\n"
     "        {{- \"\\n\\n\" }}\n"
     "    {%- endfor %}\n"
     "    {{- first_user_message + \"<|eot_id|>\"}}\n"
     "{%- endif %}\n"
     "\n"
     "{%- for message in messages %}\n"
     "    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n"
     "        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n"
     "    {%- elif 'tool_calls' in message %}\n"
     "        {%- if not message.tool_calls|length == 1 %}\n"
     "            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n"
     "        {%- endif %}\n"
     "        {%- set tool_call = message.tool_calls[0].function %}\n"
     "        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}\n"
     "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
     "            {{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}\n"
     "            {%- for arg_name, arg_val in tool_call.arguments | items %}\n"
     "                {{- arg_name + '=\"' + arg_val + '\"' }}\n"
     "                {%- if not loop.last %}\n"
     "                    {{- \", \" }}\n"
     "                {%- endif %}\n"
     "                {%- endfor %}\n"
     "            {{- \")\" }}\n"
     "        {%- else  %}\n"
     "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
     "            {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n"
     "            {{- '\"parameters\": ' }}\n"
     "            {{- tool_call.arguments | tojson }}\n"
     "            {{- \"}\" }}\n"
     "        {%- endif %}\n"
     "        {%- if builtin_tools is defined %}\n"
     "            {#- This means we're in ipython mode #}\n"
     "            {{- \"<|eom_id|>\" }}\n"
     "        {%- else %}\n"
     "            {{- \"<|eot_id|>\" }}\n"
     "        {%- endif %}\n"
     "    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n"
     "        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n"
     "        {%- if message.content is mapping or message.content is iterable %}\n"
     "            {{- message.content | tojson }}\n"
     "        {%- else %}\n"
     "            {{- message.content }}\n"
     "        {%- endif %}\n"
     "        {{- \"<|eot_id|>\" }}\n"
     "    {%- endif %}\n"
     "{%- endfor %}\n"
     "{%- if add_generation_prompt %}\n"
     "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
     "{%- endif %}\n"},
    {TFC_CHAT_LLAMA2, "Llama-2-chat",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
};
#define N_KNOWN (sizeof known / sizeof known[0])

/* ---- the lexer ---------------------------------------------------------- */

typedef struct item {
    char type;         /* 'D' text, '{' variable, '%' block, '#' comment */
    size_t a, b;       /* the text, or the tag's inside without its delimiters and flags */
    char open, close;  /* whitespace control beside the tag: '-', '+' or 0 */
    int ends_new_line; /* the tag's end took a "\n" with it (trim_blocks, or a "-" closer's whitespace) */
} item;

typedef struct items {
    item *v;
    size_t n, cap;
} items;

static int push(items *it, item x) {
    if (it->n == it->cap) {
        size_t cap = it->cap ? 2 * it->cap : 64;
        item *p = realloc(it->v, cap * sizeof *p);
        if (!p) return -1;
        it->v = p;
        it->cap = cap;
    }
    it->v[it->n++] = x;
    return 0;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static int is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/*
 * Whether whitespace between a and b is a token boundary Jinja sees: two
 * names or numbers ("not x"), a number and a dot ("1 .5" is not 1.5), or
 * two characters that would otherwise make one operator ("= =" is not
 * "==", "* *" not "**").
 */
static int space_matters(char a, char b) {
    const int word_a = is_ident(a) || a == '.', word_b = is_ident(b) || b == '.';
    if (word_a && word_b) return 1;
    return a && b && strchr("*/=!<>", a) && strchr("*/=!<>", b);
}

/* End of the string literal starting at s[i] (a quote): the index after its closing quote, or 0. */
static size_t string_end(const char *s, size_t n, size_t i) {
    const char q = s[i];
    for (size_t k = i + 1; k < n; k++) {
        if (s[k] == '\\') {
            k++;
            continue;
        }
        if (s[k] == q) return k + 1;
    }
    return 0;
}

/*
 * The tag opened at s[p] ("{{", "{%" or "{#") into *t and *end (past its
 * closer). 1 on success, 0 when it is not closed (or its brackets do not
 * balance): the template is then no known one.
 */
static int lex_tag(const char *s, size_t n, size_t p, item *t, size_t *end) {
    t->type = s[p + 1];
    size_t q = p + 2;
    t->open = q < n && (s[q] == '-' || s[q] == '+') ? s[q++] : 0;
    t->close = 0;
    t->ends_new_line = 0;
    if (t->type == '#') {
        const char *e = strstr(s + q, "#}");
        if (!e) return 0;
        size_t k = (size_t)(e - s);
        t->a = q;
        t->b = k;
        if (k > q && (s[k - 1] == '-' || s[k - 1] == '+')) t->close = s[--t->b];
        *end = k + 2;
        return 1;
    }
    const char closer = t->type == '{' ? '}' : '%';
    int depth = 0;
    for (size_t i = q; i < n;) {
        if (depth == 0) {
            size_t k = i;
            char flag = 0;
            if ((s[k] == '-' || (s[k] == '+' && closer == '%')) && k + 1 < n && s[k + 1] == closer) flag = s[k++];
            if (s[k] == closer && k + 1 < n && s[k + 1] == '}') {
                t->a = q;
                t->b = i;
                t->close = flag;
                *end = k + 2;
                return 1;
            }
        }
        const char c = s[i];
        if (c == '\'' || c == '"') {
            i = string_end(s, n, i);
            if (!i) return 0;
            continue;
        }
        if (c == '{' || c == '(' || c == '[') depth++;
        if (c == '}' || c == ')' || c == ']') {
            if (depth == 0) return 0;
            depth--;
        }
        i++;
    }
    return 0;
}

/* ---- the canonical form ------------------------------------------------- */

/* Append "<kind><len>:<bytes>" so that no two sequences of parts give one string. */
static void put_part(tfc_strbuf *out, char kind, const char *p, size_t n) {
    char head[32];
    const int hl = snprintf(head, sizeof head, "%c%zu:", kind, n);
    tfc_sb_put(out, head, (size_t)hl);
    tfc_sb_put(out, p, n);
}

/* A tag's inside: string literals by value, whitespace only where it separates tokens. 0, or -1 (refused). */
static int put_tag(tfc_strbuf *out, tfc_strbuf *tmp, char kind, const char *s, size_t a, size_t b) {
    tmp->n = 0;
    int space = 0;
    char last = 0;
    for (size_t i = a; i < b;) {
        const char c = s[i];
        if (is_ws(c)) {
            space = 1;
            i++;
            continue;
        }
        if (space && space_matters(last, c)) tfc_sb_put(tmp, " ", 1);
        space = 0;
        if (c != '\'' && c != '"') {
            tfc_sb_put(tmp, &c, 1);
            last = c;
            i++;
            continue;
        }
        const size_t e = string_end(s, b, i);
        if (!e) return -1;
        tfc_sb_put(tmp, "'", 1);
        for (size_t k = i + 1; k < e - 1; k++) {
            char v = s[k];
            if (v == '\\') {
                const char x = s[++k];
                v = x == 'n' ? '\n' : x == 't' ? '\t' : x == 'r' ? '\r' : x == '\\' || x == '\'' || x == '"' ? x : 0;
                if (!v) return -1; /* \x, \u, \N{...}, \0 ... : Python escapes the comparison does not decode */
            }
            if (v == '\\' || v == '\'') tfc_sb_put(tmp, "\\", 1);
            tfc_sb_put(tmp, &v, 1);
        }
        tfc_sb_put(tmp, "'", 1);
        last = '\'';
        i = e;
    }
    if (tmp->n == 3 && memcmp(tmp->p, "raw", 3) == 0 && kind == '%') return -1;
    put_part(out, kind, tmp->p ? tmp->p : "", tmp->n);
    return 0;
}

/*
 * The text of data item d that Jinja keeps: its start already follows what
 * the tag before it took (lex loop below); lstrip_blocks and a "-" on the
 * tag after it act here. next is NULL at the end of the template;
 * line_starting says whether d starts a line (the template's start, or a
 * tag whose end took a "\n").
 */
static void data_out(const char *s, const item *d, int line_starting, const item *next, size_t *a, size_t *b) {
    size_t lo = d->a, hi = d->b;
    if (next && next->open == '-') {
        while (hi > lo && is_ws(s[hi - 1])) hi--;
    } else if (next && next->type != '{' && next->open != '+') {
        size_t l = hi;
        while (l > lo && s[l - 1] != '\n') l--;
        int blank = l < hi;
        for (size_t k = l; k < hi && blank; k++) blank = s[k] == ' ' || s[k] == '\t' || s[k] == '\f' || s[k] == '\v';
        if (blank && (l > lo || line_starting)) hi = l;
    }
    *a = lo;
    *b = hi;
}

/*
 * src's canonical form into out. 0, -1 when the template uses something
 * the comparison does not take (then it matches no known template), -2
 * when out of memory.
 */
static int canonical(const char *src, tfc_strbuf *out) {
    const size_t n0 = strlen(src);
    char *s = malloc(n0 + 1);
    if (!s) return -2;
    size_t n = 0;
    for (size_t i = 0; i < n0; i++) { /* Jinja's newline normalisation */
        if (src[i] == '\r') {
            if (i + 1 < n0 && src[i + 1] == '\n') i++;
            s[n++] = '\n';
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--; /* keep_trailing_newline off */
    s[n] = 0;
    items it = {0};
    int rc = 0;
    for (size_t p = 0; p < n && rc == 0;) {
        size_t q = p;
        while (q + 1 < n && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#'))) q++;
        if (q + 1 >= n) q = n;
        if (q > p && push(&it, (item){.type = 'D', .a = p, .b = q})) rc = -2;
        if (q == n || rc) break;
        item t;
        size_t end;
        if (!lex_tag(s, n, q, &t, &end)) {
            rc = -1;
            break;
        }
        /* the end of a block or comment takes one "\n" (trim_blocks); a "-" closer all whitespace */
        if (t.close == '-') {
            while (end < n && is_ws(s[end])) t.ends_new_line = s[end++] == '\n';
        } else if (t.type != '{' && t.close != '+' && end < n && s[end] == '\n') {
            end++;
            t.ends_new_line = 1;
        }
        if (push(&it, t)) rc = -2;
        p = end;
    }
    tfc_strbuf text = {0}, tmp = {0};
    for (size_t i = 0; i < it.n && rc == 0; i++) {
        const item *x = &it.v[i];
        if (x->type == 'D') {
            /* items alternate: a text's neighbours are tags */
            const int line_starting = i == 0 || it.v[i - 1].ends_new_line;
            size_t a, b;
            data_out(s, x, line_starting, i + 1 < it.n ? &it.v[i + 1] : NULL, &a, &b);
            tfc_sb_put(&text, s + a, b - a);
            continue;
        }
        if (x->type == '#') continue; /* its whitespace control was applied to its neighbours */
        if (text.n) {
            put_part(out, 'D', text.p, text.n);
            text.n = 0;
        }
        rc = put_tag(out, &tmp, x->type, s, x->a, x->b);
    }
    if (rc == 0 && text.n) put_part(out, 'D', text.p, text.n);
    if (rc == 0 && (out->oom || text.oom || tmp.oom)) rc = -2;
    free(text.p);
    free(tmp.p);
    free(it.v);
    free(s);
    return rc;
}

/* ---- recognising ---------------------------------------------------------- */

/* The family a template's markers point to, for the refusal; NULL when none. */
static const char *family_hint(const char *t) {
    if (strstr(t, "<|im_start|>"))
        return "it has ChatML's <|im_start|>, but it is not Qwen2-Instruct's or Qwen2.5-Instruct's ChatML template "
               "(another default system prompt, tool or <think> handling ... renders differently)";
    if (strstr(t, "<|start_header_id|>")) {
        if (strstr(t, "strftime_now"))
            return "it has Llama 3's <|start_header_id|> and dates its system prompt with today's date (strftime_now, "
                   "Llama 3.2's template), which is not rendered";
        return "it has Llama 3's <|start_header_id|>, but it is not Meta-Llama-3-Instruct's or Llama-3.1-Instruct's "
               "template";
    }
    if (strstr(t, "[INST]"))
        return "it has Llama 2's [INST], but it is not Llama-2-chat's template (Mistral's and other [INST] templates "
               "space and mark turns differently)";
    return NULL;
}

tfc_status chat_detect(const char *fn, const char *where, const char *chat_template, int32_t *family) {
    tfc_strbuf mine = {0}, ref = {0};
    int rc = canonical(chat_template, &mine);
    int32_t found = 0;
    for (size_t k = 0; k < N_KNOWN && rc == 0 && !found; k++) {
        ref.n = 0;
        const int r = canonical(known[k].text, &ref);
        if (r == -2) rc = -2;
        if (r == 0 && ref.n == mine.n && memcmp(ref.p, mine.p, mine.n) == 0) found = known[k].family;
    }
    free(mine.p);
    free(ref.p);
    if (rc == -2) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (found) {
        *family = found;
        return TFC_OK;
    }
    const char *hint = family_hint(chat_template);
    if (hint)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: %s is not a template the library renders: %s; it is refused rather than rendered as a "
                       "family it resembles (name a family explicitly to render it as that one; docs/TOKENIZER.md, "
                       "\"Chat templates\")",
                       fn, where, hint);
    return tfc_err(TFC_ERR_UNSUPPORTED,
                   "%s: %s is of no family the library renders: it has none of the markers looked for, <|im_start|> "
                   "(ChatML: Qwen2, Qwen2.5), <|start_header_id|> (Llama 3, 3.1) and [INST] (Llama 2)",
                   fn, where);
}

TFC_API tfc_status tfc_chat_template_detect(const char *chat_template, int32_t *family) {
    static const char fn[] = "tfc_chat_template_detect";
    TFC_CHECK_NOT_NULL(fn, chat_template);
    TFC_CHECK_NOT_NULL(fn, family);
    return chat_detect(fn, "the chat_template", chat_template, family);
}
