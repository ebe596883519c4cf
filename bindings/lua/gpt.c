/*
 * gpt.c — tfcore.GPT: the decoder models of gpt.h (GPT-2 and the Llama
 * family) from Lua: build one from a config table, load one
 * (tfcore.load_model, model_file.c), forward with loss, generate, save.
 *
 * Token ids are the library's 0-based numbers. A forward records on this
 * lua_State's graph (module.c) when grad mode is on and the model is not
 * quantized, so loss:backward() trains; wrap evaluation in tf.no_grad.
 */
#include <string.h>

#include "ltfcore.h"

#define LTFC_GPT_MT "tfcore.GPT"

tfc_gpt **ltfc_push_gpt_slot(lua_State *L) {
    tfc_gpt **slot = lua_newuserdatauv(L, sizeof *slot, 0);
    *slot = NULL;
    luaL_setmetatable(L, LTFC_GPT_MT);
    return slot;
}

static tfc_gpt *check_gpt(lua_State *L, int idx) {
    tfc_gpt **slot = luaL_checkudata(L, idx, LTFC_GPT_MT);
    if (!*slot) luaL_argerror(L, idx, "model was closed");
    return *slot;
}

static int gpt_gc(lua_State *L) {
    tfc_gpt **slot = luaL_checkudata(L, 1, LTFC_GPT_MT);
    tfc_gpt_release(*slot);
    *slot = NULL;
    return 0;
}

/* ---- config tables ---------------------------------------------------------------------- */

static const char *const INT_FIELDS[] = {"n_layer",    "n_head",    "n_embd",         "block_size",
                                         "vocab_size", "n_kv_head", "sliding_window", NULL};
static const char *const BOOL_FIELDS[] = {"bias", "tie_weights", "attention_bias", "mlp_bias", NULL};
static const char *const ROPE_TYPES[] = {"default", "linear", "dynamic", "llama3", NULL};

static int32_t *int_field(tfc_gpt_config *c, int i) {
    int32_t *f[] = {&c->n_layer,    &c->n_head,    &c->n_embd,        &c->block_size,
                    &c->vocab_size, &c->n_kv_head, &c->sliding_window};
    return f[i];
}

static int32_t *bool_field(tfc_gpt_config *c, int i) {
    int32_t *f[] = {&c->bias, &c->tie_weights, &c->attention_bias, &c->mlp_bias};
    return f[i];
}

static int find(const char *const *names, const char *k) {
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], k) == 0) return i;
    return -1;
}

static int32_t field_int32(lua_State *L, const char *k) {
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < INT32_MIN || v > INT32_MAX)
        luaL_error(L, "tfcore.gpt: config field %s must be a 32-bit integer, got %s", k, luaL_typename(L, -1));
    return (int32_t)v;
}

/* rope_scaling = {rope_type = "linear"|"dynamic"|"llama3", factor =, low_freq_factor =, high_freq_factor =,
 * original_max_position_embeddings =}, as config.json spells it */
static void read_rope_scaling(lua_State *L, tfc_rope_config *r) {
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        if (strcmp(k, "rope_type") == 0 || strcmp(k, "type") == 0) {
            int t = find(ROPE_TYPES, luaL_checkstring(L, -1));
            if (t < 0)
                luaL_error(L, "tfcore.gpt: rope_scaling type '%s' is not one of default, linear, dynamic, llama3",
                           lua_tostring(L, -1));
            r->rope_type = t;
        } else if (strcmp(k, "factor") == 0) {
            r->factor = luaL_checknumber(L, -1);
        } else if (strcmp(k, "low_freq_factor") == 0) {
            r->low_freq_factor = luaL_checknumber(L, -1);
        } else if (strcmp(k, "high_freq_factor") == 0) {
            r->high_freq_factor = luaL_checknumber(L, -1);
        } else if (strcmp(k, "original_max_position_embeddings") == 0) {
            r->original_max_position_embeddings = (int64_t)luaL_checkinteger(L, -1);
        } else {
            luaL_error(L,
                       "tfcore.gpt: rope_scaling key '%s' is not read (rope_type, factor, low_freq_factor, "
                       "high_freq_factor, original_max_position_embeddings)",
                       k);
        }
        lua_pop(L, 1);
    }
}

/* The config table at idx: preset = name first, then every other field over it. */
static void read_config(lua_State *L, int idx, tfc_gpt_config *c) {
    *c = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    if (lua_isnoneornil(L, idx)) return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_getfield(L, idx, "preset");
    if (!lua_isnil(L, -1)) ltfc_check(L, tfc_gpt_config_preset(luaL_checkstring(L, -1), c));
    lua_pop(L, 1);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "tfcore.gpt: config keys must be field names");
        const char *k = lua_tostring(L, -2);
        int i;
        if (strcmp(k, "preset") == 0) {
            /* applied above */
        } else if ((i = find(INT_FIELDS, k)) >= 0) {
            *int_field(c, i) = field_int32(L, k);
        } else if ((i = find(BOOL_FIELDS, k)) >= 0) {
            luaL_checktype(L, -1, LUA_TBOOLEAN);
            *bool_field(c, i) = lua_toboolean(L, -1);
        } else if (strcmp(k, "mlp_hidden") == 0) {
            c->mlp_hidden = (int64_t)luaL_checkinteger(L, -1);
        } else if (strcmp(k, "ln_eps") == 0) {
            c->ln_eps = luaL_checknumber(L, -1);
        } else if (strcmp(k, "dropout") == 0) {
            c->dropout = luaL_checknumber(L, -1);
        } else if (strcmp(k, "rope_theta") == 0) {
            c->rope.theta = luaL_checknumber(L, -1);
        } else if (strcmp(k, "rope_scaling") == 0) {
            read_rope_scaling(L, &c->rope);
        } else if (strcmp(k, "arch") == 0) {
            ltfc_check(L, tfc_gpt_arch_from_name(luaL_checkstring(L, -1), &c->arch));
        } else if (strcmp(k, "dtype") == 0) {
            c->dtype = ltfc_check_dtype(L, lua_gettop(L), TFC_DTYPE_F32);
        } else {
            luaL_error(L,
                       "tfcore.gpt: unknown config field '%s' (preset, arch, n_layer, n_head, n_kv_head, n_embd, "
                       "block_size, vocab_size, mlp_hidden, bias, tie_weights, attention_bias, mlp_bias, "
                       "sliding_window, ln_eps, dropout, dtype, rope_theta, rope_scaling)",
                       k);
        }
        lua_pop(L, 1);
    }
}

/* model:config() -> the table read_config reads (with the defaults resolved: n_kv_head, mlp_hidden) */
static int m_config(lua_State *L) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    ltfc_check(L, tfc_gpt_get_config(check_gpt(L, 1), &c));
    lua_createtable(L, 0, 20);
    for (int i = 0; INT_FIELDS[i]; i++) {
        lua_pushinteger(L, *int_field(&c, i));
        lua_setfield(L, -2, INT_FIELDS[i]);
    }
    for (int i = 0; BOOL_FIELDS[i]; i++) {
        lua_pushboolean(L, *bool_field(&c, i));
        lua_setfield(L, -2, BOOL_FIELDS[i]);
    }
    const char *arch = tfc_gpt_arch_name(c.arch);
    lua_pushstring(L, arch ? arch : "?");
    lua_setfield(L, -2, "arch");
    lua_pushinteger(L, (lua_Integer)c.mlp_hidden);
    lua_setfield(L, -2, "mlp_hidden");
    lua_pushnumber(L, c.ln_eps);
    lua_setfield(L, -2, "ln_eps");
    lua_pushnumber(L, c.dropout);
    lua_setfield(L, -2, "dropout");
    lua_pushstring(L, tfc_dtype_name(c.dtype));
    lua_setfield(L, -2, "dtype");
    lua_pushnumber(L, c.rope.theta);
    lua_setfield(L, -2, "rope_theta");
    if (c.rope.rope_type > 0 && c.rope.rope_type <= 3) {
        lua_createtable(L, 0, 5);
        lua_pushstring(L, ROPE_TYPES[c.rope.rope_type]);
        lua_setfield(L, -2, "rope_type");
        lua_pushnumber(L, c.rope.factor);
        lua_setfield(L, -2, "factor");
        if (c.rope.rope_type == TFC_ROPE_LLAMA3) {
            lua_pushnumber(L, c.rope.low_freq_factor);
            lua_setfield(L, -2, "low_freq_factor");
            lua_pushnumber(L, c.rope.high_freq_factor);
            lua_setfield(L, -2, "high_freq_factor");
            lua_pushinteger(L, (lua_Integer)c.rope.original_max_position_embeddings);
            lua_setfield(L, -2, "original_max_position_embeddings");
        }
        lua_setfield(L, -2, "rope_scaling");
    }
    return 1;
}

/* tfcore.gpt(config, seed = 0): config a table of fields (preset = "llama-tiny" first, then the fields over it) */
static int l_gpt(lua_State *L) {
    tfc_gpt_config c;
    read_config(L, 1, &c);
    uint64_t seed = (uint64_t)luaL_optinteger(L, 2, 0);
    tfc_gpt **slot = ltfc_push_gpt_slot(L);
    ltfc_check(L, tfc_gpt_new(&c, seed, slot));
    return 1;
}

/* ---- forward ------------------------------------------------------------------------------ */

static int64_t check_id(lua_State *L, int arg, const char *name, lua_Integer i, lua_Integer j) {
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint)
        luaL_argerror(
            L, arg,
            lua_pushfstring(L, "%s[%d][%d] is a %s, not an integer id", name, (int)i, (int)j, luaL_typename(L, -1)));
    lua_pop(L, 1);
    return (int64_t)v;
}

/*
 * Token ids at arg: a tensor (used as it is), an array of arrays of
 * integers [B][T], or a flat array (one sequence, [1, T]). A table becomes
 * an i64 tensor pushed on the stack.
 */
static tfc_tensor *ids_arg(lua_State *L, int arg, const char *name) {
    if (ltfc_is_tensor(L, arg)) return ltfc_check_tensor(L, arg);
    if (!lua_istable(L, arg))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a tensor or a table of integer ids", name));
    lua_Integer rows = luaL_len(L, arg), cols;
    lua_geti(L, arg, 1);
    int nested = lua_istable(L, -1);
    cols = nested ? luaL_len(L, -1) : rows;
    lua_pop(L, 1);
    if (!nested) rows = 1;
    if (rows < 1 || cols < 1)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s is empty: need [B][T] ids with B, T >= 1", name));
    int64_t *ids = lua_newuserdatauv(L, (size_t)(rows * cols) * sizeof *ids, 0); /* scratch, GC'd */
    for (lua_Integer i = 1; i <= rows; i++) {
        if (nested) {
            lua_geti(L, arg, i);
            if (!lua_istable(L, -1) || luaL_len(L, -1) != cols)
                luaL_argerror(L, arg,
                              lua_pushfstring(L, "%s row %d is not a row of %d ids (ragged)", name, (int)i, (int)cols));
        }
        for (lua_Integer j = 1; j <= cols; j++) {
            lua_geti(L, nested ? -1 : arg, j);
            ids[(i - 1) * cols + (j - 1)] = check_id(L, arg, name, i, j);
        }
        if (nested) lua_pop(L, 1);
    }
    int64_t dims[2] = {(int64_t)rows, (int64_t)cols};
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_tensor_from_data(ids, dims, 2, TFC_DTYPE_I64, slot));
    return *slot;
}

/*
 * model:forward(idx, targets = nil) -> logits [B, T, vocab], loss (nil
 * without targets): tfc_gpt_forward. Recorded on the state's graph when
 * grad mode is on and the model is not quantized.
 */
static int m_forward(lua_State *L) {
    tfc_gpt *m = check_gpt(L, 1);
    lua_settop(L, 3); /* what ids_arg pushes goes above the arguments */
    tfc_tensor *idx = ids_arg(L, 2, "idx");
    tfc_tensor *tg = lua_isnoneornil(L, 3) ? NULL : ids_arg(L, 3, "targets");
    tfc_graph *g = ltfc_graph(L);
    int quantized = tfc_gpt_quant_format(m) != 0 || tfc_gpt_head_quant_format(m) != 0;
    if (!tfc_graph_is_grad_enabled(g) || quantized) g = NULL;
    tfc_tensor **logits = ltfc_push_slot(L);
    tfc_tensor **loss = tg ? ltfc_push_slot(L) : NULL;
    ltfc_check(L, tfc_gpt_forward(m, g, idx, tg, logits, loss));
    if (!tg) lua_pushnil(L);
    return 2;
}

/* ---- generation ---------------------------------------------------------------------------- */

static double opt_number(lua_State *L, int opts, const char *k, double def) {
    if (!lua_istable(L, opts)) return def;
    lua_getfield(L, opts, k);
    double v = lua_isnil(L, -1) ? def : luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static lua_Integer opt_integer(lua_State *L, int opts, const char *k, lua_Integer def) {
    if (!lua_istable(L, opts)) return def;
    lua_getfield(L, opts, k);
    lua_Integer v = lua_isnil(L, -1) ? def : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    return v;
}

/*
 * model:generate(prompt, max_new, {temperature = 1, top_k = 0, top_p = 1, seed = 0}) -> array of ids:
 * tfc_gpt_generate (a KV cache; temperature 0 is greedy).
 */
static int m_generate(lua_State *L) {
    tfc_gpt *m = check_gpt(L, 1);
    lua_settop(L, 4); /* the options stay at 4 above the scratch buffers */
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 2), max_new = luaL_checkinteger(L, 3);
    if (n < 1 || n > INT32_MAX) luaL_argerror(L, 2, "the prompt needs 1 to 2^31-1 ids");
    if (max_new < 0 || max_new > INT32_MAX) luaL_argerror(L, 3, "max_new must be in [0, 2^31-1]");
    int32_t *prompt = lua_newuserdatauv(L, (size_t)n * sizeof *prompt, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 2, i);
        int isint = 0;
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (!isint || v < INT32_MIN || v > INT32_MAX)
            luaL_argerror(L, 2, lua_pushfstring(L, "prompt element %d is not a 32-bit integer id", (int)i));
        prompt[i - 1] = (int32_t)v;
        lua_pop(L, 1);
    }
    int32_t *out = lua_newuserdatauv(L, (size_t)(max_new > 0 ? max_new : 1) * sizeof *out, 0);
    ltfc_check(L,
               tfc_gpt_generate(m, prompt, (int32_t)n, (int32_t)max_new, opt_number(L, 4, "temperature", 1.0),
                                (int32_t)opt_integer(L, 4, "top_k", 0), opt_number(L, 4, "top_p", 1.0),
                                (uint64_t)opt_integer(L, 4, "seed", 0), out, (int32_t)max_new, NULL, NULL));
    lua_createtable(L, (int)max_new, 0);
    for (lua_Integer i = 0; i < max_new; i++) {
        lua_pushinteger(L, out[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* ---- parameters and files ---------------------------------------------------------------- */

/* model:parameters() -> array of tensors, names: the array of their Hugging Face names (the same order) */
static int m_parameters(lua_State *L) {
    tfc_gpt *m = check_gpt(L, 1);
    int32_t n = 0;
    const char *const *names = NULL;
    tfc_tensor *const *params = NULL;
    ltfc_check(L, tfc_gpt_params(m, &n, &names, &params));
    lua_createtable(L, n, 0);
    lua_createtable(L, n, 0);
    for (int32_t i = 0; i < n; i++) {
        tfc_tensor **slot = ltfc_push_slot(L);
        *slot = tfc_tensor_retain(params[i]); /* the table holds its own reference */
        lua_rawseti(L, -3, i + 1);
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 2;
}

static int m_num_parameters(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)tfc_gpt_num_elements(check_gpt(L, 1)));
    return 1;
}

/* model:save(path): a safetensors file with the config in its metadata (tfc_gpt_save) */
static int m_save(lua_State *L) {
    ltfc_check(L, tfc_gpt_save(check_gpt(L, 1), luaL_checkstring(L, 2), NULL, NULL, 0));
    return 0;
}

/* model:save_hf(dir, bos_token_id = -1, eos_token_id = -1): config.json + model.safetensors (tfc_gpt_save_hf) */
static int m_save_hf(lua_State *L) {
    tfc_gpt *m = check_gpt(L, 1);
    const char *dir = luaL_checkstring(L, 2);
    lua_Integer bos = luaL_optinteger(L, 3, -1), eos = luaL_optinteger(L, 4, -1);
    if (bos < INT32_MIN || bos > INT32_MAX) luaL_argerror(L, 3, "not a 32-bit id");
    if (eos < INT32_MIN || eos > INT32_MAX) luaL_argerror(L, 4, "not a 32-bit id");
    ltfc_check(L, tfc_gpt_save_hf(m, dir, (int32_t)bos, (int32_t)eos));
    return 0;
}

/* model:save_llmc(path): an llm.c GPT-2 checkpoint (tfc_gpt_save_llmc) */
static int m_save_llmc(lua_State *L) {
    ltfc_check(L, tfc_gpt_save_llmc(check_gpt(L, 1), luaL_checkstring(L, 2)));
    return 0;
}

static const luaL_Reg gpt_methods[] = {
    {"forward", m_forward},
    {"generate", m_generate},
    {"config", m_config},
    {"parameters", m_parameters},
    {"num_parameters", m_num_parameters},
    {"save", m_save},
    {"save_hf", m_save_hf},
    {"save_llmc", m_save_llmc},
    {NULL, NULL},
};

static const luaL_Reg gpt_fns[] = {{"gpt", l_gpt}, {"load_model", ltfc_load_model}, {NULL, NULL}};

void ltfc_open_gpt(lua_State *L) {
    luaL_setfuncs(L, gpt_fns, 0);
    if (luaL_newmetatable(L, LTFC_GPT_MT)) {
        lua_pushcfunction(L, gpt_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, gpt_gc);
        lua_setfield(L, -2, "__close");
        lua_pushcfunction(L, m_forward); /* model(idx, targets) */
        lua_setfield(L, -2, "__call");
        luaL_newlib(L, gpt_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}
