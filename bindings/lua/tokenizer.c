/*
 * tokenizer.c — tfcore.Tokenizer: byte-level BPE (tokenizer.h) from Lua.
 * Lua strings are byte strings, so encode/decode round-trip any bytes.
 * Token ids are the library's (0-based) numbers.
 */
#include <string.h>

#include "ltfcore.h"

#define LTFC_TOKENIZER_MT "tfcore.Tokenizer"

static tfc_tokenizer **push_tok_slot(lua_State *L) {
    tfc_tokenizer **slot = lua_newuserdatauv(L, sizeof *slot, 0);
    *slot = NULL;
    luaL_setmetatable(L, LTFC_TOKENIZER_MT);
    return slot;
}

static tfc_tokenizer *check_tok(lua_State *L, int idx) {
    tfc_tokenizer **slot = luaL_checkudata(L, idx, LTFC_TOKENIZER_MT);
    if (!*slot) luaL_argerror(L, idx, "tokenizer was closed");
    return *slot;
}

static int tok_gc(lua_State *L) {
    tfc_tokenizer **slot = luaL_checkudata(L, 1, LTFC_TOKENIZER_MT);
    tfc_tokenizer_release(*slot);
    *slot = NULL;
    return 0;
}

static int32_t check_pattern(lua_State *L, int idx) {
    static const char *const names[] = {"none", "gpt2", "cl100k", NULL};
    static const int32_t values[] = {TFC_SPLIT_NONE, TFC_SPLIT_GPT2, TFC_SPLIT_CL100K};
    return values[luaL_checkoption(L, idx, "gpt2", names)];
}

/* tfcore.tokenizer(pattern = "gpt2" | "cl100k" | "none"): untrained, 256 byte tokens */
static int l_tokenizer(lua_State *L) {
    int32_t pattern = check_pattern(L, 1);
    tfc_tokenizer **slot = push_tok_slot(L);
    ltfc_check(L, tfc_tokenizer_new(pattern, slot));
    return 1;
}

/* tfcore.tokenizer_load(path): a file written by tok:save */
static int l_tokenizer_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    tfc_tokenizer **slot = push_tok_slot(L);
    ltfc_check(L, tfc_tokenizer_load(path, slot));
    return 1;
}

/* tfcore.tokenizer_gpt2(encoder_json_path, vocab_bpe_path) */
static int l_tokenizer_gpt2(lua_State *L) {
    const char *enc = luaL_checkstring(L, 1), *bpe = luaL_checkstring(L, 2);
    tfc_tokenizer **slot = push_tok_slot(L);
    ltfc_check(L, tfc_tokenizer_load_gpt2(enc, bpe, slot));
    return 1;
}

/* tfcore.tokenizer_tiktoken(path, pattern = "gpt2") */
static int l_tokenizer_tiktoken(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    int32_t pattern = check_pattern(L, 2);
    tfc_tokenizer **slot = push_tok_slot(L);
    ltfc_check(L, tfc_tokenizer_load_tiktoken(path, pattern, slot));
    return 1;
}

/* tok:train(text, vocab_size) -> tok */
static int m_train(lua_State *L) {
    tfc_tokenizer *tok = check_tok(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 2, &len);
    int32_t vocab = (int32_t)luaL_checkinteger(L, 3);
    ltfc_check(L, tfc_tokenizer_train(tok, text, len, vocab));
    lua_settop(L, 1);
    return 1;
}

/* tok:add_special(text, id) -> tok */
static int m_add_special(lua_State *L) {
    tfc_tokenizer *tok = check_tok(L, 1);
    const char *text = luaL_checkstring(L, 2);
    ltfc_check(L, tfc_tokenizer_add_special(tok, text, (int32_t)luaL_checkinteger(L, 3)));
    lua_settop(L, 1);
    return 1;
}

/* tok:encode(text, special = "text" | "allowed" | "disallowed") -> {ids...} */
static int m_encode(lua_State *L) {
    tfc_tokenizer *tok = check_tok(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 2, &len);
    static const char *const modes[] = {"text", "allowed", "disallowed", NULL};
    static const int32_t values[] = {TFC_SPECIAL_AS_TEXT, TFC_SPECIAL_ALLOWED, TFC_SPECIAL_DISALLOWED};
    int32_t mode = values[luaL_checkoption(L, 3, "text", modes)];
    void **box = ltfc_push_box(L);
    size_t n = 0;
    ltfc_check(L, tfc_tokenizer_encode(tok, text, len, mode, (int32_t **)box, &n));
    const int32_t *ids = *box;
    lua_createtable(L, n > (size_t)INT32_MAX ? 0 : (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, ids[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    ltfc_box_free(box);
    return 1;
}

/* tok:decode(ids, utf8 = false) -> bytes (utf8: ill-formed sequences → U+FFFD) */
static int m_decode(lua_State *L) {
    tfc_tokenizer *tok = check_tok(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int utf8 = lua_toboolean(L, 3);
    lua_Integer n = luaL_len(L, 2);
    int32_t *ids = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *ids, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 2, i);
        int isint = 0;
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (!isint || v < INT32_MIN || v > INT32_MAX)
            luaL_argerror(L, 2, lua_pushfstring(L, "element %d is not a 32-bit integer id", (int)i));
        ids[i - 1] = (int32_t)v;
        lua_pop(L, 1);
    }
    void **box = ltfc_push_box(L);
    size_t len = 0;
    if (utf8)
        ltfc_check(L, tfc_tokenizer_decode_utf8(tok, ids, (size_t)n, (char **)box, &len));
    else
        ltfc_check(L, tfc_tokenizer_decode(tok, ids, (size_t)n, (char **)box, &len));
    lua_pushlstring(L, *box, len);
    ltfc_box_free(box);
    return 1;
}

static int m_vocab_size(lua_State *L) {
    int32_t n = 0;
    ltfc_check(L, tfc_tokenizer_vocab_size(check_tok(L, 1), &n));
    lua_pushinteger(L, n);
    return 1;
}

/* tok:token_bytes(id) -> bytes, is_special */
static int m_token_bytes(lua_State *L) {
    tfc_tokenizer *tok = check_tok(L, 1);
    const char *bytes = NULL;
    size_t len = 0;
    int32_t special = 0;
    ltfc_check(L, tfc_tokenizer_token_bytes(tok, (int32_t)luaL_checkinteger(L, 2), &bytes, &len, &special));
    lua_pushlstring(L, bytes, len);
    lua_pushboolean(L, special);
    return 2;
}

static int m_save(lua_State *L) {
    tfc_tokenizer *tok = check_tok(L, 1);
    ltfc_check(L, tfc_tokenizer_save(tok, luaL_checkstring(L, 2)));
    return 0;
}

static const luaL_Reg tok_methods[] = {
    {"train", m_train},           {"add_special", m_add_special}, {"encode", m_encode}, {"decode", m_decode},
    {"vocab_size", m_vocab_size}, {"token_bytes", m_token_bytes}, {"save", m_save},     {NULL, NULL},
};

static const luaL_Reg tok_fns[] = {
    {"tokenizer", l_tokenizer},
    {"tokenizer_load", l_tokenizer_load},
    {"tokenizer_gpt2", l_tokenizer_gpt2},
    {"tokenizer_tiktoken", l_tokenizer_tiktoken},
    {NULL, NULL},
};

void ltfc_open_tokenizer(lua_State *L) {
    luaL_setfuncs(L, tok_fns, 0);
    if (luaL_newmetatable(L, LTFC_TOKENIZER_MT)) {
        lua_pushcfunction(L, tok_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, tok_gc);
        lua_setfield(L, -2, "__close");
        luaL_newlib(L, tok_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}
