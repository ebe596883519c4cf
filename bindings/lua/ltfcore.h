/*
 * ltfcore.h — shared pieces of the Lua 5.4 module `tfcore` (a thin layer
 * over the C ABI; no kernel lives here).
 *
 * Memory rule for every binding function: any Lua allocation that may raise
 * (a new userdata, a table) happens BEFORE the C call that hands out a
 * resource, so a Lua error (a longjmp) can never strand a C reference. An
 * output tensor is therefore a userdata created first, holding NULL, and
 * the C op writes its result straight into it.
 */
#ifndef LTFCORE_H
#define LTFCORE_H

#include <lauxlib.h>
#include <lua.h>

#include <tfcore/tfcore.h>

#define LTFC_TENSOR_MT "tfcore.Tensor"

/* Per-lua_State state, kept in the registry: the implicit autograd tape and
 * the RNG stream new random tensors draw from. */
typedef struct ltfc_state {
    tfc_graph *graph;
    uint64_t seed;
    uint64_t offset;
} ltfc_state;

ltfc_state *ltfc_get_state(lua_State *L);
/* The implicit graph of this lua_State (never NULL after luaopen_tfcore). */
tfc_graph *ltfc_graph(lua_State *L);

/* Raise a Lua error "<tfc_last_error()> (<status name>)" when s != TFC_OK. */
void ltfc_check(lua_State *L, tfc_status s);
/* Raise a Lua error for a failed status (never returns). */
int ltfc_raise(lua_State *L, tfc_status s);

/* Tensors as userdata holding one reference. */
tfc_tensor **ltfc_push_slot(lua_State *L);          /* new tensor userdata holding NULL */
tfc_tensor *ltfc_check_tensor(lua_State *L, int idx); /* error when not a live tensor */
tfc_tensor *ltfc_opt_tensor(lua_State *L, int idx);   /* nil -> NULL */
int ltfc_is_tensor(lua_State *L, int idx);
/* Read a Lua array of integers (a shape) into dims; returns ndim. */
int32_t ltfc_check_shape(lua_State *L, int idx, int64_t *dims);
tfc_dtype ltfc_check_dtype(lua_State *L, int idx, tfc_dtype def);

/* A userdata owning library-returned memory (tfc_free on collection). */
void **ltfc_push_box(lua_State *L);
void ltfc_box_free(void **box);

/* Models as userdata holding one tfc_gpt (gpt.c): a new one holding NULL. */
tfc_gpt **ltfc_push_gpt_slot(lua_State *L);
/* tfcore.load_model(path) (model_file.c). */
int ltfc_load_model(lua_State *L);

/* Register the functions of each part into the module table at the top. */
void ltfc_open_tensor(lua_State *L);
void ltfc_open_tokenizer(lua_State *L);
void ltfc_open_optim(lua_State *L);
void ltfc_open_gpt(lua_State *L);

#endif
