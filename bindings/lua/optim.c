/*
 * optim.c — tfcore.optim.sgd/adam/adamw(params, opts): the library's
 * optimizers (optim.h) from Lua. The optimizer keeps a reference to each
 * parameter; opt:step() updates in place every parameter that has a grad.
 */
#include "ltfcore.h"

#define LTFC_OPTIM_MT "tfcore.Optimizer"

static tfc_optim *check_opt(lua_State *L, int idx) {
    tfc_optim **slot = luaL_checkudata(L, idx, LTFC_OPTIM_MT);
    if (!*slot) luaL_argerror(L, idx, "optimizer was closed");
    return *slot;
}

static int opt_gc(lua_State *L) {
    tfc_optim **slot = luaL_checkudata(L, 1, LTFC_OPTIM_MT);
    tfc_optim_release(*slot);
    *slot = NULL;
    return 0;
}

static void opt_number(lua_State *L, int opts, const char *field, double *dst) {
    lua_getfield(L, opts, field);
    if (!lua_isnil(L, -1)) *dst = luaL_checknumber(L, -1);
    lua_pop(L, 1);
}

static void opt_flag(lua_State *L, int opts, const char *field, int32_t *dst) {
    lua_getfield(L, opts, field);
    if (!lua_isnil(L, -1)) *dst = lua_toboolean(L, -1);
    lua_pop(L, 1);
}

/* make(params, {lr=, weight_decay=, betas={b1, b2}, eps=, momentum=,
 * dampening=, nesterov=, amsgrad=, maximize=}); unset fields keep the
 * kind's PyTorch defaults. */
static int make_optim(lua_State *L, tfc_optim_kind kind) {
    luaL_checktype(L, 1, LUA_TTABLE);
    tfc_optim_options o;
    ltfc_check(L, tfc_optim_options_default(kind, &o));
    if (lua_istable(L, 2)) {
        opt_number(L, 2, "lr", &o.lr);
        opt_number(L, 2, "weight_decay", &o.weight_decay);
        opt_number(L, 2, "eps", &o.eps);
        opt_number(L, 2, "momentum", &o.momentum);
        opt_number(L, 2, "dampening", &o.dampening);
        opt_flag(L, 2, "nesterov", &o.nesterov);
        opt_flag(L, 2, "amsgrad", &o.amsgrad);
        opt_flag(L, 2, "maximize", &o.maximize);
        lua_getfield(L, 2, "betas");
        if (lua_istable(L, -1)) {
            lua_geti(L, -1, 1);
            lua_geti(L, -2, 2);
            o.beta1 = luaL_checknumber(L, -2);
            o.beta2 = luaL_checknumber(L, -1);
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
    }
    lua_Integer n = luaL_len(L, 1);
    tfc_tensor **params = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *params, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i); /* stays referenced by the params table */
        if (!ltfc_is_tensor(L, -1)) luaL_argerror(L, 1, lua_pushfstring(L, "element %d is not a tensor", (int)i));
        params[i - 1] = ltfc_check_tensor(L, -1);
        lua_pop(L, 1);
    }
    tfc_optim **slot = lua_newuserdatauv(L, sizeof *slot, 0);
    *slot = NULL;
    luaL_setmetatable(L, LTFC_OPTIM_MT);
    ltfc_check(L, tfc_optim_new(kind, &o, slot));
    ltfc_check(L, tfc_optim_add_params(*slot, params, (int32_t)n, NULL));
    return 1;
}

static int l_sgd(lua_State *L) { return make_optim(L, TFC_OPTIM_SGD); }
static int l_adam(lua_State *L) { return make_optim(L, TFC_OPTIM_ADAM); }
static int l_adamw(lua_State *L) { return make_optim(L, TFC_OPTIM_ADAMW); }

static int m_step(lua_State *L) {
    ltfc_check(L, tfc_optim_step(check_opt(L, 1)));
    return 0;
}

/* opt:zero_grad(set_to_none = true) */
static int m_zero_grad(lua_State *L) {
    tfc_optim *o = check_opt(L, 1);
    ltfc_check(L, tfc_optim_zero_grad(o, lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2)));
    return 0;
}

static int m_set_lr(lua_State *L) {
    tfc_optim *o = check_opt(L, 1);
    ltfc_check(L, tfc_optim_set_lr(o, luaL_checknumber(L, 2)));
    return 0;
}

static int m_get_lr(lua_State *L) {
    double lr = 0;
    ltfc_check(L, tfc_optim_get_lr(check_opt(L, 1), &lr));
    lua_pushnumber(L, lr);
    return 1;
}

static int m_step_count(lua_State *L) {
    int64_t n = 0;
    ltfc_check(L, tfc_optim_step_count(check_opt(L, 1), &n));
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

/* opt:clip_grad_norm(max_norm) -> total norm before clipping */
static int m_clip_grad_norm(lua_State *L) {
    tfc_optim *o = check_opt(L, 1);
    double total = 0;
    ltfc_check(L, tfc_optim_clip_grad_norm(o, luaL_checknumber(L, 2), &total));
    lua_pushnumber(L, total);
    return 1;
}

static const luaL_Reg opt_methods[] = {
    {"step", m_step},     {"zero_grad", m_zero_grad},   {"set_lr", m_set_lr},
    {"get_lr", m_get_lr}, {"step_count", m_step_count}, {"clip_grad_norm", m_clip_grad_norm},
    {NULL, NULL},
};

static const luaL_Reg optim_fns[] = {{"sgd", l_sgd}, {"adam", l_adam}, {"adamw", l_adamw}, {NULL, NULL}};

void ltfc_open_optim(lua_State *L) {
    luaL_newlib(L, optim_fns);
    lua_setfield(L, -2, "optim");
    if (luaL_newmetatable(L, LTFC_OPTIM_MT)) {
        lua_pushcfunction(L, opt_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, opt_gc);
        lua_setfield(L, -2, "__close");
        luaL_newlib(L, opt_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}
