/*
 * Chat templates, shared by the files that implement them:
 * chat_template.c renders a conversation as a family's template does,
 * chat_detect.c recognises a family's template text (a tokenizer_config.json
 * "chat_template"), chat_config.c reads tokenizer_config.json. The families
 * and what each renders are written out in docs/TOKENIZER.md, "Chat
 * templates".
 */
#ifndef TFC_TOKENIZER_CHAT_H
#define TFC_TOKENIZER_CHAT_H

#include <stdint.h>

#include "tfcore/tokenizer.h"

/* What the library knows of one family. */
typedef struct chat_family_def {
    int32_t family;          /* a tfc_chat_family */
    const char *name;        /* the short name tfc_chat_family_from_name takes: "chatml", "llama3" ... */
    const char *title;       /* for messages: "ChatML (Qwen2-Instruct)" */
    const char *bos, *eos;   /* the bos_token / eos_token its template writes, NULL where it writes none */
    const char *end_of_turn; /* the token that closes an assistant turn */
} chat_family_def;

/* The family's entry, or NULL when family is not a tfc_chat_family. */
const chat_family_def *chat_family(int32_t family);

/* "TFC_CHAT_CHATML (1), ... or TFC_CHAT_QWEN2_5 (5)" for messages about a bad family value. */
const char *chat_family_list(void);

/*
 * The family whose template chat_template is (chat_detect.c); a refusal is
 * TFC_ERR_UNSUPPORTED "fn: <where> is not a template the library renders:
 * ..." (where: "the chat_template", "'path': chat_template").
 */
tfc_status chat_detect(const char *fn, const char *where, const char *chat_template, int32_t *family);

#endif
