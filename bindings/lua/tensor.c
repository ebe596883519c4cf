/*
 * tensor.c — tfcore.Tensor: a userdata holding one tfc_tensor reference,
 * its creation from Lua tables, data back out, metamethods and ops.
 *
 * Dimensions are numbered like the C API (0 = outermost, negative counts
 * from the end), not Lua-style from 1: the same numbers as in every
 * tfcore document and error message. Shapes are Lua arrays, e.g. {2, 3}.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ltfcore.h"

/* ---- the userdata ---------------------------------------------------------- */

tfc_tensor **ltfc_push_slot(lua_State *L) {
    tfc_tensor **slot = lua_newuserdatauv(L, sizeof *slot, 0);
    *slot = NULL;
    luaL_setmetatable(L, LTFC_TENSOR_MT);
    return slot;
}

int ltfc_is_tensor(lua_State *L, int idx) { return luaL_testudata(L, idx, LTFC_TENSOR_MT) != NULL; }

tfc_tensor *ltfc_check_tensor(lua_State *L, int idx) {
    tfc_tensor **slot = luaL_checkudata(L, idx, LTFC_TENSOR_MT);
    if (!*slot) luaL_argerror(L, idx, "tensor was closed or never created");
    return *slot;
}

tfc_tensor *ltfc_opt_tensor(lua_State *L, int idx) {
    return lua_isnoneornil(L, idx) ? NULL : ltfc_check_tensor(L, idx);
}

static int t_gc(lua_State *L) {
    tfc_tensor **slot = luaL_checkudata(L, 1, LTFC_TENSOR_MT);
    tfc_tensor_release(*slot);
    *slot = NULL;
    return 0;
}

/* ---- argument helpers ------------------------------------------------------ */

int32_t ltfc_check_shape(lua_State *L, int idx, int64_t *dims) {
    if (lua_type(L, idx) == LUA_TNUMBER) { /* a bare number n means shape {n} */
        dims[0] = (int64_t)luaL_checkinteger(L, idx);
        return 1;
    }
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer n = luaL_len(L, idx);
    if (n > TFC_MAX_DIMS)
        luaL_argerror(L, idx, lua_pushfstring(L, "shape has %d dims, at most %d", (int)n, TFC_MAX_DIMS));
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, idx, i);
        int isint = 0;
        lua_Integer d = lua_tointegerx(L, -1, &isint);
        if (!isint) luaL_argerror(L, idx, lua_pushfstring(L, "shape entry %d is not an integer", (int)i));
        dims[i - 1] = (int64_t)d;
        lua_pop(L, 1);
    }
    return (int32_t)n;
}

tfc_dtype ltfc_check_dtype(lua_State *L, int idx, tfc_dtype def) {
    if (lua_isnoneornil(L, idx)) return def;
    const char *name = luaL_checkstring(L, idx);
    for (int d = TFC_DTYPE_F32; d <= TFC_DTYPE_BOOL; d++)
        if (strcmp(name, tfc_dtype_name((tfc_dtype)d)) == 0) return (tfc_dtype)d;
    luaL_argerror(L, idx, lua_pushfstring(L, "unknown dtype '%s' (f32, f64, bf16, f16, i32, i64, u8, bool)", name));
    return def;
}

/* Reduction dims: nil = all, a number = one dim, an array = those dims. */
static int32_t check_dims(lua_State *L, int idx, int32_t *dims) {
    if (lua_isnoneornil(L, idx)) return 0;
    if (lua_type(L, idx) == LUA_TNUMBER) {
        dims[0] = (int32_t)luaL_checkinteger(L, idx);
        return 1;
    }
    int64_t d64[TFC_MAX_DIMS];
    int32_t n = ltfc_check_shape(L, idx, d64);
    for (int32_t i = 0; i < n; i++) dims[i] = (int32_t)d64[i];
    return n;
}

/* Options table at idx (or nil): field name, as boolean / dtype. */
static int opt_bool(lua_State *L, int idx, const char *field, int def) {
    if (!lua_istable(L, idx)) return def;
    lua_getfield(L, idx, field);
    int v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

static tfc_dtype opt_dtype(lua_State *L, int idx, tfc_dtype def) {
    if (!lua_istable(L, idx)) return def;
    lua_getfield(L, idx, "dtype");
    tfc_dtype d = ltfc_check_dtype(L, -1, def);
    lua_pop(L, 1);
    return d;
}

/* Apply {requires_grad = true} from an options table to a fresh tensor. */
static void apply_requires_grad(lua_State *L, int opts, tfc_tensor *t) {
    if (opt_bool(L, opts, "requires_grad", 0)) ltfc_check(L, tfc_tensor_set_requires_grad(t, 1));
}

/* Next (seed, offset) of this state's RNG stream for a draw of n elements:
 * Philox hands out 4 numbers per counter. opts.seed/opts.offset override. */
static void next_rng(lua_State *L, int opts, int64_t n, uint64_t *seed, uint64_t *offset) {
    ltfc_state *st = ltfc_get_state(L);
    *seed = st->seed;
    *offset = st->offset;
    st->offset += (uint64_t)((n + 3) / 4);
    if (lua_istable(L, opts)) {
        lua_getfield(L, opts, "seed");
        if (!lua_isnil(L, -1)) *seed = (uint64_t)luaL_checkinteger(L, -1);
        lua_getfield(L, opts, "offset");
        if (!lua_isnil(L, -1)) *offset = (uint64_t)luaL_checkinteger(L, -1);
        lua_pop(L, 2);
    }
}

static int64_t shape_numel(const int64_t *dims, int32_t ndim) {
    int64_t n = 1;
    for (int32_t i = 0; i < ndim; i++) n *= dims[i] > 0 ? dims[i] : 0;
    return n;
}

/* ---- creation ---------------------------------------------------------------- */

/* Walk a nested Lua table of numbers; shape inferred from the first
 * elements, then every row checked against it. */
static void infer_shape(lua_State *L, int idx, int64_t *dims, int32_t *ndim) {
    *ndim = 0;
    lua_pushvalue(L, idx);
    while (lua_istable(L, -1)) {
        if (*ndim == TFC_MAX_DIMS) luaL_error(L, "tfcore.tensor: data nests deeper than %d dims", TFC_MAX_DIMS);
        dims[(*ndim)++] = (int64_t)luaL_len(L, -1);
        lua_geti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
}

static void fill_values(lua_State *L, int32_t dim, const int64_t *dims, int32_t ndim, double *buf, int64_t *pos) {
    if (dim == ndim) {
        int ok = 0;
        double v = lua_isboolean(L, -1) ? (double)lua_toboolean(L, -1) : (double)lua_tonumberx(L, -1, &ok);
        if (!ok && !lua_isboolean(L, -1))
            luaL_error(L, "tfcore.tensor: element %d is a %s, not a number", (int)(*pos + 1), luaL_typename(L, -1));
        buf[(*pos)++] = v;
        return;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "tfcore.tensor: ragged data: a %s where a row of %d elements was expected at depth %d",
                   luaL_typename(L, -1), (int)dims[dim], (int)dim + 1);
    if (luaL_len(L, -1) != dims[dim])
        luaL_error(L, "tfcore.tensor: ragged data: a row at depth %d has %d elements where %d were expected",
                   (int)dim + 1, (int)luaL_len(L, -1), (int)dims[dim]);
    for (int64_t i = 1; i <= dims[dim]; i++) {
        lua_geti(L, -1, i);
        fill_values(L, dim + 1, dims, ndim, buf, pos);
        lua_pop(L, 1);
    }
}

/* Copy a host buffer of f64 values into the tensor in slot (already
 * created with its final dtype), converting. */
static void copy_in_f64(lua_State *L, tfc_tensor *dst, double *buf, const int64_t *dims, int32_t ndim) {
    tfc_tensor *src = NULL;
    ltfc_check(L, tfc_tensor_wrap(buf, dims, NULL, ndim, TFC_DTYPE_F64, NULL, NULL, &src));
    tfc_status s = tfc_tensor_copy_from(dst, src);
    tfc_tensor_release(src);
    ltfc_check(L, s);
}

/* tfcore.tensor(data, {dtype = "f32", requires_grad = false}): data is a
 * number (a scalar) or a nested array of numbers. Copies. */
static int l_tensor(lua_State *L) {
    int64_t dims[TFC_MAX_DIMS];
    int32_t ndim = 0;
    tfc_dtype dtype = opt_dtype(L, 2, TFC_DTYPE_F32);
    if (lua_type(L, 1) != LUA_TNUMBER) {
        luaL_checktype(L, 1, LUA_TTABLE);
        infer_shape(L, 1, dims, &ndim);
    }
    int64_t n = shape_numel(dims, ndim);
    double *buf = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(double), 0); /* scratch, GC'd */
    int64_t pos = 0;
    lua_pushvalue(L, 1);
    fill_values(L, 0, dims, ndim, buf, &pos);
    lua_pop(L, 1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_tensor_empty(dims, ndim, dtype, slot));
    copy_in_f64(L, *slot, buf, dims, ndim);
    apply_requires_grad(L, 2, *slot);
    return 1;
}

/* tfcore.zeros/ones/empty(shape, opts), tfcore.full(shape, value, opts) */
static int make_filled(lua_State *L, int kind) {
    int64_t dims[TFC_MAX_DIMS];
    int32_t ndim = ltfc_check_shape(L, 1, dims);
    int opts = kind == 3 ? 3 : 2;
    double value = kind == 3 ? luaL_checknumber(L, 2) : 0.0;
    tfc_dtype dtype = opt_dtype(L, opts, TFC_DTYPE_F32);
    tfc_tensor **slot = ltfc_push_slot(L);
    switch (kind) {
    case 0: ltfc_check(L, tfc_tensor_zeros(dims, ndim, dtype, slot)); break;
    case 1: ltfc_check(L, tfc_tensor_ones(dims, ndim, dtype, slot)); break;
    case 2: ltfc_check(L, tfc_tensor_empty(dims, ndim, dtype, slot)); break;
    default: ltfc_check(L, tfc_tensor_full(dims, ndim, dtype, value, slot)); break;
    }
    apply_requires_grad(L, opts, *slot);
    return 1;
}
static int l_zeros(lua_State *L) { return make_filled(L, 0); }
static int l_ones(lua_State *L) { return make_filled(L, 1); }
static int l_empty(lua_State *L) { return make_filled(L, 2); }
static int l_full(lua_State *L) { return make_filled(L, 3); }

/* tfcore.arange(start, end, step=1, opts) */
static int l_arange(lua_State *L) {
    double start = luaL_checknumber(L, 1), end = luaL_checknumber(L, 2), step = luaL_optnumber(L, 3, 1.0);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_tensor_arange(start, end, step, opt_dtype(L, 4, TFC_DTYPE_F32), slot));
    return 1;
}

/* tfcore.randn(shape, opts) / tfcore.rand(shape, opts): from this state's
 * RNG stream (tfcore.manual_seed), or opts.seed / opts.offset. */
static int make_random(lua_State *L, int normal) {
    int64_t dims[TFC_MAX_DIMS];
    int32_t ndim = ltfc_check_shape(L, 1, dims);
    tfc_dtype dtype = opt_dtype(L, 2, TFC_DTYPE_F32);
    uint64_t seed, offset;
    next_rng(L, 2, shape_numel(dims, ndim), &seed, &offset);
    tfc_tensor **slot = ltfc_push_slot(L);
    if (normal)
        ltfc_check(L, tfc_tensor_randn(dims, ndim, dtype, seed, offset, slot));
    else
        ltfc_check(L, tfc_tensor_rand(dims, ndim, dtype, seed, offset, slot));
    apply_requires_grad(L, 2, *slot);
    return 1;
}
static int l_randn(lua_State *L) { return make_random(L, 1); }
static int l_rand(lua_State *L) { return make_random(L, 0); }

/* ---- data out ------------------------------------------------------------------- */

static int is_integer_dtype(tfc_dtype d) { return d == TFC_DTYPE_I32 || d == TFC_DTYPE_I64 || d == TFC_DTYPE_U8; }

static void push_value(lua_State *L, tfc_dtype d, const void *buf, int64_t i) {
    if (d == TFC_DTYPE_BOOL)
        lua_pushboolean(L, ((const double *)buf)[i] != 0.0);
    else if (is_integer_dtype(d))
        lua_pushinteger(L, (lua_Integer)((const int64_t *)buf)[i]);
    else
        lua_pushnumber(L, ((const double *)buf)[i]);
}

static void push_nested(lua_State *L, tfc_dtype d, const void *buf, const int64_t *dims, int32_t ndim, int32_t dim,
                        int64_t *pos) {
    if (dim == ndim) {
        push_value(L, d, buf, (*pos)++);
        return;
    }
    lua_createtable(L, (int)dims[dim], 0);
    for (int64_t i = 1; i <= dims[dim]; i++) {
        push_nested(L, d, buf, dims, ndim, dim + 1, pos);
        lua_rawseti(L, -2, i);
    }
}

/* All values of t as a host array of f64 (i64 for integer dtypes), in a
 * GC'd scratch userdata left on the stack. */
static void *host_values(lua_State *L, tfc_tensor *t, int64_t *dims, int32_t *ndim) {
    *ndim = tfc_tensor_ndim(t);
    ltfc_check(L, tfc_tensor_shape(t, dims, TFC_MAX_DIMS));
    int64_t n = tfc_tensor_numel(t);
    tfc_dtype d = tfc_tensor_dtype(t);
    tfc_dtype host = is_integer_dtype(d) ? TFC_DTYPE_I64 : TFC_DTYPE_F64;
    void *buf = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * 8, 0);
    int moved = tfc_tensor_device_type(t) != TFC_DEVICE_CPU;
    if (moved) {
        tfc_tensor **cpu = ltfc_push_slot(L);
        ltfc_check(L, tfc_tensor_to_device(t, TFC_DEVICE_CPU, 0, cpu));
        t = *cpu; /* the slot stays on the stack until the copy is done */
    }
    tfc_tensor *dst = NULL;
    tfc_status s = tfc_tensor_wrap(buf, dims, NULL, *ndim, host, NULL, NULL, &dst);
    if (s == TFC_OK) s = tfc_tensor_copy_from(dst, t);
    tfc_tensor_release(dst);
    ltfc_check(L, s);
    if (moved) lua_pop(L, 1); /* the CPU copy's slot */
    return buf;
}

/* t:totable() -> nested arrays of numbers (a number for a scalar);
 * integers for integer dtypes, booleans for bool. */
static int m_totable(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    int64_t dims[TFC_MAX_DIMS];
    int32_t ndim;
    void *buf = host_values(L, t, dims, &ndim);
    int64_t pos = 0;
    push_nested(L, tfc_tensor_dtype(t), buf, dims, ndim, 0, &pos);
    return 1;
}

/* t:item() -> the value of a 1-element tensor. */
static int m_item(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    double v = 0;
    ltfc_check(L, tfc_tensor_item(t, &v));
    tfc_dtype d = tfc_tensor_dtype(t);
    if (d == TFC_DTYPE_BOOL)
        lua_pushboolean(L, v != 0.0);
    else if (is_integer_dtype(d))
        lua_pushinteger(L, (lua_Integer)v);
    else
        lua_pushnumber(L, v);
    return 1;
}

static int m_shape(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    int64_t dims[TFC_MAX_DIMS];
    ltfc_check(L, tfc_tensor_shape(t, dims, TFC_MAX_DIMS));
    int32_t n = tfc_tensor_ndim(t);
    lua_createtable(L, n, 0);
    for (int32_t i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)dims[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* t:size(dim) -> size of one dim (0-based, negative from the end). */
static int m_size(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_checkinteger(L, 2);
    int64_t n = tfc_tensor_dim(t, dim);
    if (n < 0)
        luaL_argerror(L, 2,
                      lua_pushfstring(L, "dim %d out of range for a %d-dim tensor", (int)dim, (int)tfc_tensor_ndim(t)));
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

static int m_ndim(lua_State *L) {
    lua_pushinteger(L, tfc_tensor_ndim(ltfc_check_tensor(L, 1)));
    return 1;
}

static int m_numel(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)tfc_tensor_numel(ltfc_check_tensor(L, 1)));
    return 1;
}

static int m_dtype(lua_State *L) {
    lua_pushstring(L, tfc_dtype_name(tfc_tensor_dtype(ltfc_check_tensor(L, 1))));
    return 1;
}

static int m_is_contiguous(lua_State *L) {
    lua_pushboolean(L, tfc_tensor_is_contiguous(ltfc_check_tensor(L, 1)));
    return 1;
}

/* Append up to 6 values per dim, numpy-style nesting, "..." beyond. */
static void add_values(luaL_Buffer *b, tfc_dtype d, const void *buf, const int64_t *dims, const int64_t *strides,
                       int32_t ndim, int32_t dim, int64_t base) {
    lua_State *L = b->L;
    if (dim == ndim) {
        if (d == TFC_DTYPE_BOOL)
            luaL_addstring(b, ((const double *)buf)[base] != 0.0 ? "true" : "false");
        else if (is_integer_dtype(d)) {
            lua_pushfstring(L, "%I", (lua_Integer)((const int64_t *)buf)[base]);
            luaL_addvalue(b);
        } else {
            char s[32];
            snprintf(s, sizeof s, "%.6g", ((const double *)buf)[base]);
            luaL_addstring(b, s);
        }
        return;
    }
    luaL_addchar(b, '[');
    for (int64_t i = 0; i < dims[dim]; i++) {
        if (i) luaL_addstring(b, ", ");
        if (i == 6 && dims[dim] > 7) {
            luaL_addstring(b, "...");
            i = dims[dim] - 1;
            luaL_addstring(b, ", ");
        }
        add_values(b, d, buf, dims, strides, ndim, dim + 1, base + i * strides[dim]);
    }
    luaL_addchar(b, ']');
}

/* tostring(t): "tensor f32 [2,3] ... \n[[1, 2, 3], [4, 5, 6]]" */
static int t_tostring(lua_State *L) {
    tfc_tensor **slot = luaL_checkudata(L, 1, LTFC_TENSOR_MT);
    if (!*slot) {
        lua_pushliteral(L, "tensor (closed)");
        return 1;
    }
    char *desc = NULL;
    ltfc_check(L, tfc_tensor_describe(*slot, &desc));
    lua_pushstring(L, desc); /* may raise on OOM: desc leaks then, acceptably rare */
    tfc_free(desc);
    if (tfc_tensor_numel(*slot) > 100000) { /* values of big tensors: use totable() */
        lua_pushfstring(L, "\n[%I values]", (lua_Integer)tfc_tensor_numel(*slot));
        lua_concat(L, 2);
        return 1;
    }
    int64_t dims[TFC_MAX_DIMS], strides[TFC_MAX_DIMS];
    int32_t ndim;
    const void *buf = host_values(L, *slot, dims, &ndim);
    int64_t acc = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) {
        strides[i] = acc;
        acc *= dims[i];
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addchar(&b, '\n');
    add_values(&b, tfc_tensor_dtype(*slot), buf, dims, strides, ndim, 0, 0);
    luaL_pushresult(&b);
    lua_remove(L, -2); /* the scratch buffer */
    lua_concat(L, 2);
    return 1;
}

/* ---- autograd -------------------------------------------------------------------- */

/* loss:backward(seed_or_opts): backpropagate on this state's graph, then
 * clear it unless opts.retain_graph. seed: tensor of loss's shape (default
 * 1 for a 1-element loss); as opts.seed or the argument itself. */
static int m_backward(lua_State *L) {
    tfc_tensor *loss = ltfc_check_tensor(L, 1);
    const tfc_tensor *seed = NULL;
    int retain = 0;
    if (ltfc_is_tensor(L, 2)) {
        seed = ltfc_check_tensor(L, 2);
    } else if (lua_istable(L, 2)) {
        retain = opt_bool(L, 2, "retain_graph", 0);
        lua_getfield(L, 2, "seed");
        seed = ltfc_opt_tensor(L, -1); /* stays referenced by the opts table */
        lua_pop(L, 1);
    } else if (!lua_isnoneornil(L, 2)) {
        luaL_argerror(L, 2, "expected a seed tensor or an options table");
    }
    tfc_graph *g = ltfc_graph(L);
    ltfc_check(L, tfc_graph_backward(g, loss, seed));
    if (!retain) ltfc_check(L, tfc_graph_clear(g));
    return 0;
}

/* t:grad() -> the accumulated gradient tensor, or nil */
static int m_grad(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_tensor_grad(t, slot));
    if (!*slot) lua_pushnil(L);
    return 1;
}

/* t:zero_grad(set_to_none = true) */
static int m_zero_grad(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    int to_none = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
    ltfc_check(L, tfc_tensor_zero_grad(t, to_none));
    return 0;
}

/* t:requires_grad_(on = true) -> t */
static int m_requires_grad_(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    int on = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
    ltfc_check(L, tfc_tensor_set_requires_grad(t, on));
    lua_settop(L, 1);
    return 1;
}

static int m_retain_grad(lua_State *L) {
    ltfc_check(L, tfc_tensor_retain_grad(ltfc_check_tensor(L, 1)));
    lua_settop(L, 1);
    return 1;
}

/* ---- in place (not recorded) ------------------------------------------------------ */

/* dst:copy_(src) -> dst (src broadcast and converted to dst's dtype) */
static int m_copy_(lua_State *L) {
    tfc_tensor *dst = ltfc_check_tensor(L, 1);
    ltfc_check(L, tfc_tensor_copy_from(dst, ltfc_check_tensor(L, 2)));
    lua_settop(L, 1);
    return 1;
}

static int m_fill_(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    ltfc_check(L, tfc_tensor_fill(t, luaL_checknumber(L, 2)));
    lua_settop(L, 1);
    return 1;
}

/* ---- ops ----------------------------------------------------------------------------- */

typedef tfc_status (*unary_fn)(tfc_graph *, const tfc_tensor *, tfc_tensor **);
typedef tfc_status (*binary_fn)(tfc_graph *, const tfc_tensor *, const tfc_tensor *, tfc_tensor **);
typedef tfc_status (*scalar_fn)(tfc_graph *, const tfc_tensor *, double, tfc_tensor **);
typedef tfc_status (*reduce_fn)(tfc_graph *, const tfc_tensor *, const int32_t *, int32_t, int32_t, tfc_tensor **);

static int do_unary(lua_State *L, unary_fn f, int idx) {
    tfc_tensor *x = ltfc_check_tensor(L, idx);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, f(ltfc_graph(L), x, slot));
    return 1;
}

static int do_scalar(lua_State *L, scalar_fn f, tfc_tensor *x, double s) {
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, f(ltfc_graph(L), x, s, slot));
    return 1;
}

static int do_binary(lua_State *L, binary_fn f) {
    tfc_tensor *a = ltfc_check_tensor(L, 1), *b = ltfc_check_tensor(L, 2);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, f(ltfc_graph(L), a, b, slot));
    return 1;
}

static tfc_status sub_scalar(tfc_graph *g, const tfc_tensor *x, double s, tfc_tensor **out) {
    return tfc_add_scalar(g, x, -s, out);
}
static tfc_status div_scalar(tfc_graph *g, const tfc_tensor *x, double s, tfc_tensor **out) {
    return tfc_mul_scalar(g, x, 1.0 / s, out);
}

/* Arithmetic where either side may be a number: tensor ∘ tensor uses tt,
 * tensor ∘ s uses ts, s ∘ tensor uses st (the reflected form). */
static int arith(lua_State *L, binary_fn tt, scalar_fn ts, scalar_fn st) {
    int ta = ltfc_is_tensor(L, 1), tb = ltfc_is_tensor(L, 2);
    if (ta && tb) return do_binary(L, tt);
    if (ta) return do_scalar(L, ts, ltfc_check_tensor(L, 1), luaL_checknumber(L, 2));
    if (tb) return do_scalar(L, st, ltfc_check_tensor(L, 2), luaL_checknumber(L, 1));
    return luaL_error(L, "tfcore: arithmetic needs a tensor operand");
}

static int l_add(lua_State *L) { return arith(L, tfc_add, tfc_add_scalar, tfc_add_scalar); }
static int l_sub(lua_State *L) { return arith(L, tfc_sub, sub_scalar, tfc_rsub_scalar); }
static int l_mul(lua_State *L) { return arith(L, tfc_mul, tfc_mul_scalar, tfc_mul_scalar); }
static int l_div(lua_State *L) { return arith(L, tfc_div, div_scalar, tfc_rdiv_scalar); }
static int l_pow(lua_State *L) { return do_scalar(L, tfc_pow_scalar, ltfc_check_tensor(L, 1), luaL_checknumber(L, 2)); }
static int l_unm(lua_State *L) { return do_unary(L, tfc_neg, 1); }
static int l_matmul(lua_State *L) { return do_binary(L, tfc_matmul); }

/* Unary ops share one closure body; the upvalue indexes this table. */
static const struct {
    const char *name;
    unary_fn fn;
} unary_ops[] = {
    {"neg", tfc_neg},         {"exp", tfc_exp},     {"log", tfc_log},
    {"sqrt", tfc_sqrt},       {"rsqrt", tfc_rsqrt}, {"tanh", tfc_tanh},
    {"sigmoid", tfc_sigmoid}, {"relu", tfc_relu},   {"contiguous", tfc_contiguous},
    {"abs", tfc_abs},         {"sign", tfc_sign},   {"sin", tfc_sin},
    {"cos", tfc_cos},         {"floor", tfc_floor}, {"ceil", tfc_ceil},
    {"round", tfc_round},
};

static int l_unary(lua_State *L) { return do_unary(L, unary_ops[lua_tointeger(L, lua_upvalueindex(1))].fn, 1); }

/* x:sum(dims = all, keepdim = false), and mean/max/min alike. */
static const struct {
    const char *name;
    reduce_fn fn;
} reduce_ops[] = {{"sum", tfc_sum}, {"mean", tfc_mean}, {"max", tfc_max}, {"min", tfc_min}};

static int l_reduce(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dims[TFC_MAX_DIMS];
    int32_t n = check_dims(L, 2, dims);
    int keep = lua_toboolean(L, 3);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L,
               reduce_ops[lua_tointeger(L, lua_upvalueindex(1))].fn(ltfc_graph(L), x, n ? dims : NULL, n, keep, slot));
    return 1;
}

/* x:var(dims = all, correction = 1, keepdim = false) */
static int l_var(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dims[TFC_MAX_DIMS];
    int32_t n = check_dims(L, 2, dims);
    int32_t correction = (int32_t)luaL_optinteger(L, 3, 1);
    int keep = lua_toboolean(L, 4);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_var(ltfc_graph(L), x, n ? dims : NULL, n, correction, keep, slot));
    return 1;
}

/* x:argmax(dim, keepdim = false) -> i64 indices (0-based) */
static int l_argmax(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_checkinteger(L, 2);
    int keep = lua_toboolean(L, 3);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_argmax(x, dim, keep, slot));
    return 1;
}

static int softmax_like(lua_State *L, tfc_status (*f)(tfc_graph *, const tfc_tensor *, int32_t, tfc_tensor **)) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_optinteger(L, 2, -1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, f(ltfc_graph(L), x, dim, slot));
    return 1;
}
static int l_softmax(lua_State *L) { return softmax_like(L, tfc_softmax); }
static int l_log_softmax(lua_State *L) { return softmax_like(L, tfc_log_softmax); }

/* x:gelu(approximate = "tanh" | "erf"; default "erf" like torch) */
static int l_gelu(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    static const char *const modes[] = {"erf", "tanh", NULL};
    int mode = luaL_checkoption(L, 2, "erf", modes);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_gelu(ltfc_graph(L), x, mode == 1 ? TFC_GELU_TANH : TFC_GELU_ERF, slot));
    return 1;
}

/* x:silu(): x·σ(x) */
static int l_silu(lua_State *L) { return do_unary(L, tfc_silu, 1); }

/* gate:swiglu(up): silu(gate)·up; gate_up:swiglu(): the same of the two halves of the last dim, gate first */
static int l_swiglu(lua_State *L) {
    if (!lua_isnoneornil(L, 2)) return do_binary(L, tfc_swiglu);
    return do_unary(L, tfc_swiglu_fused, 1);
}

/* tfcore.layernorm(x, weight = nil, bias = nil, eps = 1e-5) */
static int l_layernorm(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    tfc_tensor *w = ltfc_opt_tensor(L, 2), *b = ltfc_opt_tensor(L, 3);
    double eps = luaL_optnumber(L, 4, 1e-5);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_layernorm(ltfc_graph(L), x, w, b, eps, slot));
    return 1;
}

/* tfcore.embedding(table, ids) */
static int l_embedding(lua_State *L) { return do_binary(L, tfc_embedding); }

/* tfcore.cross_entropy(logits, targets, ignore_index = -100) */
static int l_cross_entropy(lua_State *L) {
    tfc_tensor *logits = ltfc_check_tensor(L, 1), *targets = ltfc_check_tensor(L, 2);
    int64_t ignore = (int64_t)luaL_optinteger(L, 3, -100);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_cross_entropy(ltfc_graph(L), logits, targets, ignore, slot));
    return 1;
}

/* tfcore.attention(q, k, v, causal = false, scale = 1/sqrt(D)) */
static int l_attention(lua_State *L) {
    tfc_tensor *q = ltfc_check_tensor(L, 1), *k = ltfc_check_tensor(L, 2), *v = ltfc_check_tensor(L, 3);
    int causal = lua_toboolean(L, 4);
    int64_t d = tfc_tensor_dim(q, -1);
    double scale = luaL_optnumber(L, 5, d > 0 ? 1.0 / sqrt((double)d) : 1.0);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_attention(ltfc_graph(L), q, k, v, causal, scale, slot));
    return 1;
}

/* x:dropout(p, opts): mask from this state's RNG stream (or opts.seed/offset) */
static int l_dropout(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    double p = luaL_checknumber(L, 2);
    uint64_t seed, offset;
    next_rng(L, 3, tfc_tensor_numel(x), &seed, &offset);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_dropout(ltfc_graph(L), x, p, seed, offset, slot));
    return 1;
}

/* x:masked_fill(mask, value) */
static int l_masked_fill(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1), *mask = ltfc_check_tensor(L, 2);
    double value = luaL_checknumber(L, 3);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_masked_fill(ltfc_graph(L), x, mask, value, slot));
    return 1;
}

/* x:index_select(dim, index) / x:gather(dim, index): indices 0-based, in range (as torch) */
static int index_like(lua_State *L,
                      tfc_status (*f)(tfc_graph *, const tfc_tensor *, int32_t, const tfc_tensor *, tfc_tensor **)) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_checkinteger(L, 2);
    tfc_tensor *index = ltfc_check_tensor(L, 3);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, f(ltfc_graph(L), x, dim, index, slot));
    return 1;
}
static int l_index_select(lua_State *L) { return index_like(L, tfc_index_select); }
static int l_gather(lua_State *L) { return index_like(L, tfc_gather); }

/* x:scatter_add(dim, index, src): out of place */
static int l_scatter_add(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_checkinteger(L, 2);
    tfc_tensor *index = ltfc_check_tensor(L, 3), *src = ltfc_check_tensor(L, 4);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_scatter_add(ltfc_graph(L), x, dim, index, src, slot));
    return 1;
}

/* x:masked_select(mask) -> 1-D */
static int l_masked_select(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1), *mask = ltfc_check_tensor(L, 2);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_masked_select(ltfc_graph(L), x, mask, slot));
    return 1;
}

/* x:nonzero() -> i64 [N, ndim], 0-based positions */
static int l_nonzero(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_nonzero(x, slot));
    return 1;
}

/* x:index_put(index, values, accumulate = false): in place at x's flat (0-based) positions; returns x */
static int l_index_put(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1), *index = ltfc_check_tensor(L, 2), *values = ltfc_check_tensor(L, 3);
    int acc = lua_toboolean(L, 4);
    ltfc_check(L, tfc_index_put(ltfc_graph(L), x, index, values, acc));
    lua_settop(L, 1);
    return 1;
}

/* tfcore.where(cond, a, b) */
static int l_where(lua_State *L) {
    tfc_tensor *c = ltfc_check_tensor(L, 1), *a = ltfc_check_tensor(L, 2), *b = ltfc_check_tensor(L, 3);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_where(ltfc_graph(L), c, a, b, slot));
    return 1;
}

/* tfcore.concat({t1, t2, ...}, dim = 0) */
static int l_concat(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    int32_t dim = (int32_t)luaL_optinteger(L, 2, 0);
    lua_Integer n = luaL_len(L, 1);
    const tfc_tensor **xs = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *xs, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i); /* stays referenced by the argument table */
        if (!ltfc_is_tensor(L, -1)) luaL_argerror(L, 1, lua_pushfstring(L, "element %d is not a tensor", (int)i));
        xs[i - 1] = ltfc_check_tensor(L, -1);
        lua_pop(L, 1);
    }
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_concat(ltfc_graph(L), xs, (int32_t)n, dim, slot));
    return 1;
}

static int shaped(lua_State *L,
                  tfc_status (*f)(tfc_graph *, const tfc_tensor *, const int64_t *, int32_t, tfc_tensor **)) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int64_t dims[TFC_MAX_DIMS];
    int32_t n = ltfc_check_shape(L, 2, dims);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, f(ltfc_graph(L), x, dims, n, slot));
    return 1;
}
static int l_view(lua_State *L) { return shaped(L, tfc_view); }
static int l_reshape(lua_State *L) { return shaped(L, tfc_reshape); }
static int l_expand(lua_State *L) { return shaped(L, tfc_expand); }

static int l_permute(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t perm[TFC_MAX_DIMS];
    int32_t n = check_dims(L, 2, perm);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_permute(ltfc_graph(L), x, perm, n, slot));
    return 1;
}

static int l_transpose(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t d0 = (int32_t)luaL_optinteger(L, 2, -2), d1 = (int32_t)luaL_optinteger(L, 3, -1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_transpose(ltfc_graph(L), x, d0, d1, slot));
    return 1;
}

/* x:slice(dim, start, end = huge, step = 1): python-style slicing (0-based, end exclusive) */
static int l_slice(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_checkinteger(L, 2);
    int64_t start = (int64_t)luaL_optinteger(L, 3, 0);
    int64_t end = (int64_t)luaL_optinteger(L, 4, INT64_MAX);
    int64_t step = (int64_t)luaL_optinteger(L, 5, 1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_slice(ltfc_graph(L), x, dim, start, end, step, slot));
    return 1;
}

static int l_narrow(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_checkinteger(L, 2);
    int64_t start = (int64_t)luaL_checkinteger(L, 3), len = (int64_t)luaL_checkinteger(L, 4);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_narrow(ltfc_graph(L), x, dim, start, len, slot));
    return 1;
}

static int dim_op(lua_State *L, tfc_status (*f)(tfc_graph *, const tfc_tensor *, int32_t, tfc_tensor **)) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_checkinteger(L, 2);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, f(ltfc_graph(L), x, dim, slot));
    return 1;
}
static int l_squeeze(lua_State *L) { return dim_op(L, tfc_squeeze); }
static int l_unsqueeze(lua_State *L) { return dim_op(L, tfc_unsqueeze); }

static int l_flatten(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t s = (int32_t)luaL_optinteger(L, 2, 0), e = (int32_t)luaL_optinteger(L, 3, -1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_flatten(ltfc_graph(L), x, s, e, slot));
    return 1;
}

/* x:to(dtype) -> converted copy (recorded: gradients convert back) */
static int l_to(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    tfc_dtype d = ltfc_check_dtype(L, 2, TFC_DTYPE_F32);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_cast(ltfc_graph(L), x, d, slot));
    return 1;
}

/* t:to_device("cpu" | "cuda", index = 0) -> a copy there (t itself when already there) */
static int l_to_device(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    static const char *const names[] = {"cpu", "cuda", NULL};
    tfc_device_type dev = luaL_checkoption(L, 2, NULL, names) == 1 ? TFC_DEVICE_CUDA : TFC_DEVICE_CPU;
    int32_t index = (int32_t)luaL_optinteger(L, 3, 0);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_tensor_to_device(x, dev, index, slot));
    return 1;
}

/* t:device() -> "cpu" | "cuda", index */
static int m_device(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    lua_pushstring(L, tfc_tensor_device_type(x) == TFC_DEVICE_CUDA ? "cuda" : "cpu");
    lua_pushinteger(L, tfc_tensor_device_index(x));
    return 2;
}

static int l_detach(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_tensor_detach(x, slot));
    return 1;
}

static int l_clone(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_tensor_clone(x, slot));
    return 1;
}

/* ---- issue #16: clamp, minimum/maximum, comparisons, scans, sorting, sampling ---------- */

/* x:clamp(min, max): either may be nil (no bound) */
static int l_clamp(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    double lo = luaL_optnumber(L, 2, -HUGE_VAL), hi = luaL_optnumber(L, 3, HUGE_VAL);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_clamp(ltfc_graph(L), x, lo, hi, slot));
    return 1;
}
static int l_maximum(lua_State *L) { return do_binary(L, tfc_maximum); }
static int l_minimum(lua_State *L) { return do_binary(L, tfc_minimum); }

/* x:lt(y) with y a tensor or a number -> bool tensor (Lua's < must give a boolean, so no operators) */
typedef tfc_status (*compare_fn)(const tfc_tensor *, const tfc_tensor *, tfc_tensor **);
typedef tfc_status (*compare_scalar_fn)(const tfc_tensor *, double, tfc_tensor **);
static const struct {
    const char *name;
    compare_fn tt;
    compare_scalar_fn ts;
} compare_ops[] = {{"lt", tfc_lt, tfc_lt_scalar}, {"le", tfc_le, tfc_le_scalar}, {"gt", tfc_gt, tfc_gt_scalar},
                   {"ge", tfc_ge, tfc_ge_scalar}, {"eq", tfc_eq, tfc_eq_scalar}, {"ne", tfc_ne, tfc_ne_scalar}};

static int l_compare(lua_State *L) {
    lua_Integer k = lua_tointeger(L, lua_upvalueindex(1));
    tfc_tensor *a = ltfc_check_tensor(L, 1);
    if (ltfc_is_tensor(L, 2)) {
        tfc_tensor *b = ltfc_check_tensor(L, 2);
        tfc_tensor **slot = ltfc_push_slot(L);
        ltfc_check(L, compare_ops[k].tt(a, b, slot));
    } else {
        double s = luaL_checknumber(L, 2);
        tfc_tensor **slot = ltfc_push_slot(L);
        ltfc_check(L, compare_ops[k].ts(a, s, slot));
    }
    return 1;
}

/* x:any(dims = all, keepdim = false), x:all(...) -> bool */
static int any_all(lua_State *L, int is_all) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dims[TFC_MAX_DIMS];
    int32_t n = check_dims(L, 2, dims);
    int keep = lua_toboolean(L, 3);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, (is_all ? tfc_all : tfc_any)(x, n ? dims : NULL, n, keep, slot));
    return 1;
}
static int l_any(lua_State *L) { return any_all(L, 0); }
static int l_all(lua_State *L) { return any_all(L, 1); }

/* x:cumsum(dim) */
static int l_cumsum(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_checkinteger(L, 2);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_cumsum(ltfc_graph(L), x, dim, slot));
    return 1;
}

/* x:triu(k = 0), x:tril(k = 0) */
static int triangle(lua_State *L, int upper) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int64_t k = (int64_t)luaL_optinteger(L, 2, 0);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, (upper ? tfc_triu : tfc_tril)(ltfc_graph(L), x, k, slot));
    return 1;
}
static int l_triu(lua_State *L) { return triangle(L, 1); }
static int l_tril(lua_State *L) { return triangle(L, 0); }

/* x:sort(dim = -1, descending = false) -> values, indices (0-based i64); x:argsort(...) -> indices */
static int l_sort(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_optinteger(L, 2, -1);
    int desc = lua_toboolean(L, 3);
    tfc_tensor **values = ltfc_push_slot(L), **indices = ltfc_push_slot(L);
    tfc_tensor *v = NULL, *i = NULL;
    ltfc_check(L, tfc_sort(ltfc_graph(L), x, dim, desc, &v, &i));
    *values = v;
    *indices = i;
    return 2;
}
static int l_argsort(lua_State *L) {
    tfc_tensor *x = ltfc_check_tensor(L, 1);
    int32_t dim = (int32_t)luaL_optinteger(L, 2, -1);
    int desc = lua_toboolean(L, 3);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_argsort(x, dim, desc, slot));
    return 1;
}

/* ids:one_hot(num_classes = -1) -> i64 */
static int l_one_hot(lua_State *L) {
    tfc_tensor *ids = ltfc_check_tensor(L, 1);
    int64_t n = (int64_t)luaL_optinteger(L, 2, -1);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_one_hot(ids, n, slot));
    return 1;
}

/* probs:multinomial(n, replacement = false, {seed=, offset=}) -> i64 category ids (0-based) */
static int l_multinomial(lua_State *L) {
    tfc_tensor *p = ltfc_check_tensor(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    int repl = lua_toboolean(L, 3);
    int64_t rows = tfc_tensor_ndim(p) == 2 ? tfc_tensor_dim(p, 0) : 1;
    uint64_t seed, offset;
    /* one Philox block per draw; next_rng counts values, four to a block */
    next_rng(L, 4, 4 * rows * (n > 0 ? (int64_t)n : 0), &seed, &offset);
    tfc_tensor **slot = ltfc_push_slot(L);
    ltfc_check(L, tfc_multinomial(p, (int64_t)n, repl, seed, offset, slot));
    return 1;
}

/* ---- metatable ----------------------------------------------------------------------- */

/* Functions that are both tfcore.name(t, ...) and t:name(...). */
static const luaL_Reg tensor_methods[] = {
    {"totable", m_totable},
    {"item", m_item},
    {"shape", m_shape},
    {"size", m_size},
    {"ndim", m_ndim},
    {"numel", m_numel},
    {"dtype", m_dtype},
    {"is_contiguous", m_is_contiguous},
    {"backward", m_backward},
    {"grad", m_grad},
    {"zero_grad", m_zero_grad},
    {"requires_grad_", m_requires_grad_},
    {"retain_grad", m_retain_grad},
    {"copy_", m_copy_},
    {"fill_", m_fill_},
    {"add", l_add},
    {"sub", l_sub},
    {"mul", l_mul},
    {"div", l_div},
    {"pow", l_pow},
    {"matmul", l_matmul},
    {"var", l_var},
    {"argmax", l_argmax},
    {"softmax", l_softmax},
    {"log_softmax", l_log_softmax},
    {"gelu", l_gelu},
    {"silu", l_silu},
    {"swiglu", l_swiglu},
    {"layernorm", l_layernorm},
    {"cross_entropy", l_cross_entropy},
    {"dropout", l_dropout},
    {"masked_fill", l_masked_fill},
    {"view", l_view},
    {"reshape", l_reshape},
    {"expand", l_expand},
    {"permute", l_permute},
    {"transpose", l_transpose},
    {"slice", l_slice},
    {"narrow", l_narrow},
    {"squeeze", l_squeeze},
    {"unsqueeze", l_unsqueeze},
    {"flatten", l_flatten},
    {"to", l_to},
    {"to_device", l_to_device},
    {"device", m_device},
    {"detach", l_detach},
    {"clone", l_clone},
    {"index_select", l_index_select},
    {"gather", l_gather},
    {"scatter_add", l_scatter_add},
    {"masked_select", l_masked_select},
    {"nonzero", l_nonzero},
    {"index_put", l_index_put},
    {"clamp", l_clamp},
    {"maximum", l_maximum},
    {"minimum", l_minimum},
    {"any", l_any},
    {"all", l_all},
    {"cumsum", l_cumsum},
    {"triu", l_triu},
    {"tril", l_tril},
    {"sort", l_sort},
    {"argsort", l_argsort},
    {"one_hot", l_one_hot},
    {"multinomial", l_multinomial},
    {NULL, NULL},
};

/* Module-only functions. */
static const luaL_Reg module_fns[] = {
    {"tensor", l_tensor},
    {"zeros", l_zeros},
    {"ones", l_ones},
    {"empty", l_empty},
    {"full", l_full},
    {"arange", l_arange},
    {"randn", l_randn},
    {"rand", l_rand},
    {"embedding", l_embedding},
    {"attention", l_attention},
    {"where", l_where},
    {"concat", l_concat},
    {NULL, NULL},
};

/* t.requires_grad / t.is_leaf read as fields; anything else is a method. */
static int t_index(lua_State *L) {
    const char *key = lua_tostring(L, 2);
    if (key && strcmp(key, "requires_grad") == 0) {
        lua_pushboolean(L, tfc_tensor_requires_grad(ltfc_check_tensor(L, 1)));
        return 1;
    }
    if (key && strcmp(key, "is_leaf") == 0) {
        lua_pushboolean(L, tfc_tensor_is_leaf(ltfc_check_tensor(L, 1)));
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_gettable(L, lua_upvalueindex(1)); /* the methods table */
    return 1;
}

/* t.requires_grad = bool is the only assignable field. */
static int t_newindex(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "requires_grad") != 0)
        return luaL_error(L, "tfcore.Tensor: cannot assign field '%s' (only requires_grad)", key);
    ltfc_check(L, tfc_tensor_set_requires_grad(t, lua_toboolean(L, 3)));
    return 0;
}

static int t_len(lua_State *L) {
    tfc_tensor *t = ltfc_check_tensor(L, 1);
    if (tfc_tensor_ndim(t) == 0) return luaL_error(L, "tfcore.Tensor: # of a scalar tensor");
    lua_pushinteger(L, (lua_Integer)tfc_tensor_dim(t, 0));
    return 1;
}

static const luaL_Reg tensor_meta[] = {
    {"__gc", t_gc},   {"__close", t_gc}, {"__tostring", t_tostring}, {"__add", l_add},
    {"__sub", l_sub}, {"__mul", l_mul},  {"__div", l_div},           {"__pow", l_pow},
    {"__unm", l_unm}, {"__len", t_len},  {"__newindex", t_newindex}, {NULL, NULL},
};

void ltfc_open_tensor(lua_State *L) {
    int mod = lua_gettop(L);
    luaL_setfuncs(L, module_fns, 0);
    /* methods table: named entries, unary and reduction closures */
    lua_newtable(L);
    int methods = lua_gettop(L);
    luaL_setfuncs(L, tensor_methods, 0);
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++) {
        lua_pushinteger(L, (lua_Integer)i);
        lua_pushcclosure(L, l_unary, 1);
        lua_setfield(L, methods, unary_ops[i].name);
    }
    for (size_t i = 0; i < sizeof reduce_ops / sizeof reduce_ops[0]; i++) {
        lua_pushinteger(L, (lua_Integer)i);
        lua_pushcclosure(L, l_reduce, 1);
        lua_setfield(L, methods, reduce_ops[i].name);
    }
    for (size_t i = 0; i < sizeof compare_ops / sizeof compare_ops[0]; i++) {
        lua_pushinteger(L, (lua_Integer)i);
        lua_pushcclosure(L, l_compare, 1);
        lua_setfield(L, methods, compare_ops[i].name);
    }
    /* every method is a module function too: tfcore.relu(x) == x:relu() */
    lua_pushnil(L);
    while (lua_next(L, methods)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, mod);
    }
    if (luaL_newmetatable(L, LTFC_TENSOR_MT)) {
        luaL_setfuncs(L, tensor_meta, 0);
        lua_pushvalue(L, methods);
        lua_pushcclosure(L, t_index, 1);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);                  /* metatable */
    lua_setfield(L, mod, "Tensor"); /* the methods table, for extension */
}
