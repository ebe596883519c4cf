/*
 * box.c — a userdata that owns memory the library returned (tfc_free on
 * collection), pushed before the C call that fills it: if building the Lua
 * result then raises, the collector still frees the memory.
 */
#include "ltfcore.h"

#define LTFC_BOX_MT "tfcore.Box"

static int box_gc(lua_State *L) {
    void **box = luaL_checkudata(L, 1, LTFC_BOX_MT);
    tfc_free(*box);
    *box = NULL;
    return 0;
}

void **ltfc_push_box(lua_State *L) {
    void **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    if (luaL_newmetatable(L, LTFC_BOX_MT)) {
        lua_pushcfunction(L, box_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return box;
}

void ltfc_box_free(void **box) {
    tfc_free(*box);
    *box = NULL;
}
