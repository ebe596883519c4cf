-- The index ops on tensors: values against loops written here, gradients
-- of repeated indices by hand, and out-of-range indices as Lua errors.
local tf = require("tfcore")
local C = require("check")

local x = tf.tensor({ { 0, 1, 2 }, { 3, 4, 5 } }, { dtype = "f64", requires_grad = true })
local idx = tf.tensor({ 2, 2, 0 }, { dtype = "i64" })
local y = x:index_select(1, idx)
C.close(y:totable(), { { 2, 2, 0 }, { 5, 5, 3 } }, 0, "index_select along dim 1")
y:sum():backward()
C.close(x:grad():totable(), { { 1, 0, 2 }, { 1, 0, 2 } }, 0, "repeated indices accumulate")
x:zero_grad()

local gi = tf.tensor({ { 1, 0, 0 }, { 0, 1, 1 } }, { dtype = "i64" })
local xt = x:detach():totable()
local want = {}
for r = 1, 2 do
  want[r] = {}
  for c = 1, 3 do want[r][c] = xt[gi:totable()[r][c] + 1][c] end
end
C.close(x:gather(0, gi):totable(), want, 0, "gather along dim 0")
local src = tf.tensor({ { 10, 20, 30 }, { 40, 50, 60 } }, { dtype = "f64" })
C.close(tf.no_grad(function() return x:scatter_add(0, gi, src) end):totable(),
  { { 40, 21, 32 }, { 13, 54, 65 } }, 0, "scatter_add along dim 0")

local mask = tf.tensor({ { true, false, true }, { false, false, true } }, { dtype = "bool" })
C.close(tf.no_grad(function() return x:masked_select(mask) end):totable(), { 0, 2, 5 }, 0, "masked_select")
C.close(mask:nonzero():totable(), { { 0, 0 }, { 0, 2 }, { 1, 2 } }, 0, "nonzero")

local z = tf.zeros({ 2, 3 }, { dtype = "f64" })
z:index_put(tf.tensor({ 4, 0 }, { dtype = "i64" }), tf.tensor({ 7, 8 }, { dtype = "f64" }))
C.close(z:totable(), { { 8, 0, 0 }, { 0, 7, 0 } }, 0, "index_put at flat positions")

C.raises(function() return x:index_select(0, tf.tensor({ 2 }, { dtype = "i64" })) end, "out of range",
  "tfc_index_select")
C.raises(function() return x:gather(0, tf.tensor({ -1 }, { dtype = "i64" })) end, "gather of a 1-D index",
  "tfc_gather")
C.done()
