-- The Lua 5.4 module of libtfcore, built by LuaRocks against an installed
-- libtfcore (Debian: libtfcore-dev; or meson install):
--   cd bindings/lua && luarocks --lua-version=5.4 make [--tree DIR]
-- LuaRocks finds <tfcore/tfcore.h> and libtfcore.so under /usr, /usr/local
-- (multiarch lib dirs included); elsewhere pass TFCORE_INCDIR=... TFCORE_LIBDIR=...
-- The meson build makes the same module (bindings/lua/meson.build).
rockspec_format = "3.0"
package = "tfcore"
version = "1.0.0-1"
source = {
   url = "file://."  -- built in place by `luarocks make`; set the repository's URL before `luarocks pack`
}
description = {
   summary = "Lua 5.4 binding of libtfcore: tensors, autograd, optimizers, the BPE tokenizer, GPT models",
   detailed = [[
libtfcore is a deep-learning core in C11 with a stable C ABI. This module
(require "tfcore") wraps its tensors, autograd, optimizers, tokenizer and
GPT-2 / Llama-family models (tfcore.load_model).]],
   license = "MIT",
}
dependencies = {
   "lua >= 5.4, < 5.5",
}
external_dependencies = {
   TFCORE = {
      header = "tfcore/tfcore.h",
      library = "tfcore",
   },
}
build = {
   type = "builtin",
   modules = {
      tfcore = {
         sources = { "module.c", "tensor.c", "box.c", "tokenizer.c", "optim.c", "gpt.c", "model_file.c" },
         incdirs = { "$(TFCORE_INCDIR)" },
         libdirs = { "$(TFCORE_LIBDIR)" },
         libraries = { "tfcore" },
         defines = { "_GNU_SOURCE" },
      },
   },
}
