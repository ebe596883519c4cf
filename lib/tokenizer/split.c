/*
 * The split patterns, in PCRE2 syntax, and the chunk iterator.
 *
 * GPT-2's and cl100k's are tiktoken's; Llama 3's and Qwen2's are the Split
 * regexes of their tokenizer.json files (Hugging Face runs them on
 * Oniguruma, whose \s under Unicode is the same White_Space set). One
 * change throughout: tiktoken runs them on Rust's regex engine, whose \s
 * is the Unicode White_Space property.
 * PCRE2's \s under PCRE2_UCP is \p{Z} + \h + \v instead, which also takes
 * U+180E (MONGOLIAN VOWEL SEPARATOR, not White_Space since Unicode 6.3).
 * So \s and \S are spelled \p{White_Space} and \P{White_Space} here,
 * PCRE2's own table of the property. Rust's `$` (end of text) is `\z`.
 * Possessive quantifiers are used where they cannot change the result
 * (nothing after them in their branch) because they save backtracking.
 *
 * PCRE2_MATCH_INVALID_UTF makes invalid UTF-8 safe to scan: such bytes
 * never match, so they come out between matches and the iterator hands
 * them out as chunks of their own.
 */
#include "tokenizer/split.h"

#include "core/error.h"
#include "tfcore/tokenizer.h"

#define WS "\\p{White_Space}"
#define NWS "\\P{White_Space}"

/* tiktoken r50k/p50k/gpt2:
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}++| ?\\p{N}++| ?[^" WS "\\p{L}\\p{N}]++|" WS "+(?!" NWS ")|" WS "++";

/* tiktoken cl100k_base:
 *   '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|
 *   \s*[\r\n]|\s+(?!\S)|\s */
static const char cl100k_pattern[] = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^" WS
                                     "\\p{L}\\p{N}]++[\\r\\n]*+|" WS "++\\z|" WS "*[\\r\\n]|" WS "+(?!" NWS ")|" WS;

/* Llama 3 (tokenizer.json, pre_tokenizer Split):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|
 *   \s+(?!\S)|\s+
 * cl100k's branches less its \s++$: a whitespace run that ends the text is
 * cut after its last newline like any other. Qwen2's differs only in \p{N}
 * (one digit per chunk). \s*[\r\n]+ stays greedy: \s* must give back
 * characters for [\r\n]+ to match. */
#define LLAMA3_HEAD "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|"
#define LLAMA3_TAIL "| ?[^" WS "\\p{L}\\p{N}]++[\\r\\n]*+|" WS "*[\\r\\n]++|" WS "+(?!" NWS ")|" WS "++"
static const char llama3_pattern[] = LLAMA3_HEAD "\\p{N}{1,3}+" LLAMA3_TAIL;
static const char qwen2_pattern[] = LLAMA3_HEAD "\\p{N}" LLAMA3_TAIL;

const char *split_pattern_source(int32_t pattern) {
    switch (pattern) {
    case TFC_SPLIT_GPT2: return gpt2_pattern;
    case TFC_SPLIT_CL100K: return cl100k_pattern;
    case TFC_SPLIT_LLAMA3: return llama3_pattern;
    case TFC_SPLIT_QWEN2: return qwen2_pattern;
    default: return NULL;
    }
}

tfc_status splitter_init(const char *fn, tfc_splitter *sp, int32_t pattern) {
    if (pattern != TFC_SPLIT_NONE && !split_pattern_source(pattern))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: pattern is %d, expected TFC_SPLIT_NONE (0), TFC_SPLIT_GPT2 (1), TFC_SPLIT_CL100K (2), "
                       "TFC_SPLIT_LLAMA3 (3) or TFC_SPLIT_QWEN2 (4)",
                       fn, (int)pattern);
    sp->pattern = pattern;
    sp->re = NULL;
    sp->jit = 0;
    if (pattern == TFC_SPLIT_NONE) return TFC_OK;
    int code;
    PCRE2_SIZE at;
    sp->re = pcre2_compile((PCRE2_SPTR)split_pattern_source(pattern), PCRE2_ZERO_TERMINATED,
                           PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
    if (!sp->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return tfc_err(TFC_ERR_INTERNAL, "%s: PCRE2 rejected split pattern %d at offset %zu: %s", fn, (int)pattern,
                       (size_t)at, (const char *)msg);
    }
    /* Without JIT (a PCRE2 built without it) the interpreter gives the same chunks, slower. */
    sp->jit = pcre2_jit_compile(sp->re, PCRE2_JIT_COMPLETE) == 0;
    return TFC_OK;
}

void splitter_free(tfc_splitter *sp) {
    if (sp->re) pcre2_code_free(sp->re);
    sp->re = NULL;
}

tfc_status split_iter_init(const char *fn, split_iter *it, const tfc_splitter *sp, const uint8_t *text, size_t len) {
    it->sp = sp;
    it->text = text;
    it->len = len;
    it->pos = 0;
    it->has_match = 0;
    it->pcre2_only = 0;
    it->md = NULL;
    it->mctx = NULL;
    it->stack = NULL;
    if (sp->re && len > 0) {
        it->md = pcre2_match_data_create_from_pattern(sp->re, NULL);
        if (!it->md) return tfc_err(TFC_ERR_OOM, "%s: out of memory for regex match data", fn);
    }
    return TFC_OK;
}

void split_iter_free(split_iter *it) {
    if (it->md) pcre2_match_data_free(it->md);
    if (it->mctx) pcre2_match_context_free(it->mctx);
    if (it->stack) pcre2_jit_stack_free(it->stack);
    it->md = NULL;
    it->mctx = NULL;
    it->stack = NULL;
}

static int run_match(const split_iter *it, size_t from) {
    if (it->sp->jit) return pcre2_jit_match(it->sp->re, it->text, it->len, from, 0, it->md, it->mctx);
    return pcre2_match(it->sp->re, it->text, it->len, from, 0, it->md, it->mctx);
}

/* Find the next match at or after pos; 1 found, 0 none, <0 status. */
static int find_match(const char *fn, split_iter *it) {
    int rc = run_match(it, it->pos);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !it->stack) {
        /* Only pathological inputs get here; give the JIT a big stack and retry. */
        it->stack = pcre2_jit_stack_create(64 * 1024, 256 * 1024 * 1024, NULL);
        it->mctx = pcre2_match_context_create(NULL);
        if (!it->stack || !it->mctx) return tfc_err(TFC_ERR_OOM, "%s: out of memory for the regex stack", fn);
        pcre2_jit_stack_assign(it->mctx, NULL, it->stack);
        rc = run_match(it, it->pos);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return tfc_err(TFC_ERR_INTERNAL, "%s: splitting text at byte %zu failed: %s", fn, it->pos, (const char *)msg);
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(it->md);
    if (ov[1] <= ov[0] || ov[0] < it->pos || ov[1] > it->len)
        return tfc_err(TFC_ERR_INTERNAL, "%s: split pattern gave an empty match at byte %zu", fn, (size_t)ov[0]);
    it->m_start = ov[0];
    it->m_end = ov[1];
    it->has_match = 1;
    return 1;
}

/*
 * ASCII fast path. Most text is ASCII, where every character class in the
 * patterns is fixed: letters A-Z a-z, digits 0-9, White_Space \t \n \v
 * \f \r and space, everything else "other". These functions follow the
 * patterns' alternatives in order on ASCII bytes and give the match length
 * at i, or 0 ("ask PCRE2") as soon as the answer would depend on a byte
 * >= 0x80 (which might be a letter, a digit or whitespace). So they never
 * decide anything about non-ASCII text. test_tokenizer.c checks them
 * against PCRE2 alone, and the tiktoken comparison runs both paths.
 */
enum { C_OTHER, C_LETTER, C_DIGIT, C_SPACE, C_NONASCII };

#define L_ C_LETTER
#define D_ C_DIGIT
#define S_ C_SPACE
#define O_ C_OTHER
/* Class of each ASCII byte (bytes >= 0x80: C_NONASCII, see ascii_cls). */
static const uint8_t ascii_table[128] = {
    O_, O_, O_, O_, O_, O_, O_, O_, O_, S_, S_, S_, S_, S_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_,
    O_, O_, O_, O_, O_, O_, S_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, O_, D_, D_, D_, D_,
    D_, D_, D_, D_, D_, D_, O_, O_, O_, O_, O_, O_, O_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_,
    L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, O_, O_, O_, O_, O_, O_, L_, L_, L_, L_, L_, L_, L_,
    L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, L_, O_, O_, O_, O_, O_,
};
#undef L_
#undef D_
#undef S_
#undef O_

static inline int ascii_cls(uint8_t c) { return c < 0x80 ? ascii_table[c] : C_NONASCII; }

/* End of the run of class k from j; *stop gets the class of the byte that ended it (C_SPACE at the end: \S-free). */
static size_t run_of(const uint8_t *s, size_t n, size_t j, int k, int *stop) {
    while (j < n && ascii_cls(s[j]) == k) j++;
    *stop = j < n ? ascii_cls(s[j]) : -1;
    return j;
}

static size_t ascii_gpt2(const uint8_t *s, size_t n, size_t i) {
    int c = ascii_cls(s[i]), stop;
    int next = i + 1 < n ? ascii_cls(s[i + 1]) : -1;
    if (s[i] == '\'' && next != -1) { /* 's|'t|'re|'ve|'m|'ll|'d */
        uint8_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    size_t j = i;
    if (s[i] == ' ') {
        if (next == C_NONASCII) return 0;
        if (next == C_LETTER || next == C_DIGIT || next == C_OTHER) {
            j = i + 1;
            c = next;
        }
    }
    if (c == C_LETTER || c == C_DIGIT || c == C_OTHER) { /* ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+` */
        j = run_of(s, n, j, c, &stop);
        return stop == C_NONASCII ? 0 : j - i;
    }
    /* whitespace: \s+(?!\S) leaves the last space before a non-space, \s+ takes a lone one */
    j = run_of(s, n, i, C_SPACE, &stop);
    if (stop == C_NONASCII) return 0;
    if (stop == -1 || j - i == 1) return j - i;
    return j - i - 1;
}

/*
 * cl100k and its descendants: max_digits is 3 (cl100k, Llama 3) or 1
 * (Qwen2); tail_to_end is 1 for cl100k's \s++$, 0 for Llama 3's and
 * Qwen2's patterns, which have no such branch.
 */
static size_t ascii_cl100k(const uint8_t *s, size_t n, size_t i, size_t max_digits, int tail_to_end) {
    int c = ascii_cls(s[i]), stop;
    int next = i + 1 < n ? ascii_cls(s[i + 1]) : -1;
    if (s[i] == '\'' && next != -1) {     /* '(?i:[sdmt]|ll|ve|re) */
        if (next == C_NONASCII) return 0; /* U+017F folds to s */
        uint8_t a = s[i + 1] | 0x20;
        if (a == 's' || a == 'd' || a == 'm' || a == 't') return 2;
        if (a == 'l' || a == 'v' || a == 'r') {
            if (i + 2 >= n) goto not_contraction;
            if (ascii_cls(s[i + 2]) == C_NONASCII) return 0;
            uint8_t b = s[i + 2] | 0x20;
            if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return 3;
        }
    }
not_contraction:
    /* [^\r\n\p{L}\p{N}]?+\p{L}++ */
    if (c == C_LETTER) {
        size_t j = run_of(s, n, i, C_LETTER, &stop);
        return stop == C_NONASCII ? 0 : j - i;
    }
    if ((c == C_OTHER || c == C_SPACE) && s[i] != '\r' && s[i] != '\n') {
        if (next == C_NONASCII) return 0;
        if (next == C_LETTER) {
            size_t j = run_of(s, n, i + 1, C_LETTER, &stop);
            return stop == C_NONASCII ? 0 : j - i;
        }
    }
    if (c == C_DIGIT) { /* \p{N}{1,3}+ (or \p{N}) */
        size_t j = i;
        while (j < n && j - i < max_digits && ascii_cls(s[j]) == C_DIGIT) j++;
        if (j - i < max_digits && j < n && ascii_cls(s[j]) == C_NONASCII) return 0;
        return j - i;
    }
    /*  ?[^\s\p{L}\p{N}]++[\r\n]*+ */
    if (c == C_OTHER || (s[i] == ' ' && next == C_OTHER)) {
        size_t j = run_of(s, n, s[i] == ' ' ? i + 1 : i, C_OTHER, &stop);
        if (stop == C_NONASCII) return 0;
        while (j < n && (s[j] == '\r' || s[j] == '\n')) j++;
        return j - i;
    }
    /* c is whitespace from here */
    size_t j = run_of(s, n, i, C_SPACE, &stop);
    if (stop == C_NONASCII) return 0;
    if (stop == -1 && tail_to_end) return j - i; /* \s++\z */
    for (size_t k = j; k > i; k--)               /* \s*[\r\n] (or [\r\n]+): up to the run's last newline */
        if (s[k - 1] == '\r' || s[k - 1] == '\n') return k - i;
    if (stop == -1 || j - i >= 2) return stop == -1 ? j - i : j - i - 1; /* \s+(?!\S) */
    return 1;                                                            /* \s (or \s+ of one) */
}

int split_next(const char *fn, split_iter *it, size_t *start, size_t *end) {
    if (it->pos >= it->len) return 0;
    if (!it->sp->re) {
        *start = 0;
        *end = it->pos = it->len;
        return 1;
    }
    if (!it->has_match && it->text[it->pos] < 0x80 && !it->pcre2_only) {
        size_t m;
        switch (it->sp->pattern) {
        case TFC_SPLIT_GPT2: m = ascii_gpt2(it->text, it->len, it->pos); break;
        case TFC_SPLIT_CL100K: m = ascii_cl100k(it->text, it->len, it->pos, 3, 1); break;
        case TFC_SPLIT_LLAMA3: m = ascii_cl100k(it->text, it->len, it->pos, 3, 0); break;
        default: m = ascii_cl100k(it->text, it->len, it->pos, 1, 0); break; /* TFC_SPLIT_QWEN2 */
        }
        if (m) {
            *start = it->pos;
            *end = it->pos += m;
            return 1;
        }
    }
    if (!it->has_match) {
        int rc = find_match(fn, it);
        if (rc < 0) return rc;
        if (rc == 0) { /* only invalid bytes are left */
            *start = it->pos;
            *end = it->pos = it->len;
            return 1;
        }
    }
    if (it->m_start > it->pos) { /* invalid bytes before the match */
        *start = it->pos;
        *end = it->pos = it->m_start;
        return 1;
    }
    *start = it->m_start;
    *end = it->pos = it->m_end;
    it->has_match = 0;
    return 1;
}

size_t split_safe_cut(const uint8_t *p, size_t len) {
    for (size_t c = len ? len - 1 : 0; c >= 2; c--) {
        uint8_t x = p[c] | 0x20; /* ASCII lower case */
        if (p[c - 1] == '\n' && p[c - 2] > 0x20 && p[c - 2] < 0x7f && x >= 'a' && x <= 'z') return c;
    }
    return 0;
}
