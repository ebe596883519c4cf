/*
 * module.c — luaopen_tfcore: the module table, the per-lua_State state
 * (implicit autograd graph + RNG stream), error raising, grad mode.
 *
 * One tfc_graph per lua_State, like the Python binding's one tape per
 * thread: every op records on it (the library only records ops whose
 * inputs require grad), and Tensor:backward() clears it afterwards unless
 * asked to retain it. A lua_State is single-threaded, which is exactly the
 * graph's threading contract.
 */
#include <stdio.h>

#include "ltfcore.h"

static const char state_key = 0; /* its address keys the state in the registry */

ltfc_state *ltfc_get_state(lua_State *L) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key);
    ltfc_state *st = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (!st || !st->graph) luaL_error(L, "tfcore: module state missing (was require 'tfcore' called?)");
    return st;
}

tfc_graph *ltfc_graph(lua_State *L) { return ltfc_get_state(L)->graph; }

int ltfc_raise(lua_State *L, tfc_status s) {
    const char *msg = tfc_last_error();
    if (!msg[0]) msg = "tfcore: call failed";
    lua_pushfstring(L, "%s (%s)", msg, tfc_status_name(s));
    return lua_error(L);
}

void ltfc_check(lua_State *L, tfc_status s) {
    if (s != TFC_OK) ltfc_raise(L, s);
}

static int state_gc(lua_State *L) {
    ltfc_state *st = lua_touserdata(L, 1);
    if (st && st->graph) {
        tfc_graph_release(st->graph);
        st->graph = NULL;
    }
    return 0;
}

/* tfcore.manual_seed(seed): restart the RNG stream new random tensors and
 * dropout masks draw from. */
static int l_manual_seed(lua_State *L) {
    ltfc_state *st = ltfc_get_state(L);
    st->seed = (uint64_t)luaL_checkinteger(L, 1);
    st->offset = 0;
    return 0;
}

/* tfcore.set_grad_enabled(bool) -> previous; tfcore.is_grad_enabled() */
static int l_set_grad_enabled(lua_State *L) {
    tfc_graph *g = ltfc_graph(L);
    int prev = tfc_graph_is_grad_enabled(g);
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    ltfc_check(L, tfc_graph_set_grad_enabled(g, lua_toboolean(L, 1)));
    lua_pushboolean(L, prev);
    return 1;
}

static int l_is_grad_enabled(lua_State *L) {
    lua_pushboolean(L, tfc_graph_is_grad_enabled(ltfc_graph(L)));
    return 1;
}

/* tfcore.no_grad(fn, ...) -> fn(...) with recording off; the previous mode
 * is restored whether fn returns or raises. */
static int l_no_grad(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    tfc_graph *g = ltfc_graph(L);
    int prev = tfc_graph_is_grad_enabled(g);
    ltfc_check(L, tfc_graph_set_grad_enabled(g, 0));
    int nargs = lua_gettop(L) - 1;
    int rc = lua_pcall(L, nargs, LUA_MULTRET, 0);
    tfc_status s = tfc_graph_set_grad_enabled(g, prev);
    if (rc != LUA_OK) return lua_error(L); /* rethrow fn's error as is */
    ltfc_check(L, s);
    return lua_gettop(L);
}

/* tfcore.clear_graph(): drop every recorded node (e.g. after a forward
 * pass that will never be backpropagated). */
static int l_clear_graph(lua_State *L) {
    ltfc_check(L, tfc_graph_clear(ltfc_graph(L)));
    return 0;
}

static int l_graph_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)tfc_graph_num_nodes(ltfc_graph(L)));
    return 1;
}

static int l_set_num_threads(lua_State *L) {
    ltfc_check(L, tfc_set_num_threads((int32_t)luaL_checkinteger(L, 1)));
    return 0;
}

/* tfcore.memory_stats() -> {os_allocs=, live_bytes=, cached_bytes=, peak_bytes=} */
static int l_memory_stats(lua_State *L) {
    uint64_t v[4];
    tfc_memory_stats(&v[0], &v[1], &v[2], &v[3]);
    static const char *const names[] = {"os_allocs", "live_bytes", "cached_bytes", "peak_bytes"};
    lua_createtable(L, 0, 4);
    for (int i = 0; i < 4; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_setfield(L, -2, names[i]);
    }
    return 1;
}

/* tfcore.cuda_available() -> bool, and the reason when false */
static int l_cuda_available(lua_State *L) {
    int ok = tfc_cuda_available();
    lua_pushboolean(L, ok);
    if (ok) return 1;
    lua_pushstring(L, tfc_last_error());
    return 2;
}

static const luaL_Reg module_fns[] = {
    {"cuda_available", l_cuda_available},
    {"manual_seed", l_manual_seed},
    {"set_grad_enabled", l_set_grad_enabled},
    {"is_grad_enabled", l_is_grad_enabled},
    {"no_grad", l_no_grad},
    {"clear_graph", l_clear_graph},
    {"graph_size", l_graph_size},
    {"set_num_threads", l_set_num_threads},
    {"memory_stats", l_memory_stats},
    {NULL, NULL},
};

/* Create the per-state userdata once per lua_State (require may run again). */
static void open_state(lua_State *L) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key);
    int have = lua_touserdata(L, -1) != NULL;
    lua_pop(L, 1);
    if (have) return;
    ltfc_state *st = lua_newuserdatauv(L, sizeof *st, 0);
    st->graph = NULL;
    st->seed = 0;
    st->offset = 0;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, state_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    /* __gc is armed before the graph exists, so a failure below leaks nothing. */
    ltfc_check(L, tfc_graph_new(&st->graph));
    lua_rawsetp(L, LUA_REGISTRYINDEX, &state_key);
}

__attribute__((visibility("default"))) int luaopen_tfcore(lua_State *L);

int luaopen_tfcore(lua_State *L) {
    open_state(L);
    luaL_newlib(L, module_fns);
    ltfc_open_tensor(L);
    ltfc_open_tokenizer(L);
    ltfc_open_optim(L);
    ltfc_open_gpt(L);
    lua_pushstring(L, tfc_version_string());
    lua_setfield(L, -2, "version");
    lua_pushstring(L, tfc_build_info());
    lua_setfield(L, -2, "build_info");
    return 1;
}
