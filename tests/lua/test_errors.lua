-- Bad input raises Lua errors carrying tfc_last_error()'s message (the
-- function, the argument, the shapes) and the status name.
local tf = require("tfcore")
local C = require("check")

local a, b = tf.zeros({ 4, 8 }), tf.zeros({ 7, 3 })
C.raises(function() return tf.matmul(a, b) end, "matmul shape mismatch", "tfc_matmul", "[4,8]", "[7,3]",
  "TFC_ERR_SHAPE")
C.raises(function() return a + tf.zeros({ 3 }) end, "broadcast mismatch", "tfc_add", "TFC_ERR_SHAPE")
C.raises(function() return a + tf.zeros({ 4, 8 }, { dtype = "f64" }) end, "dtype mismatch", "tfc_add",
  "TFC_ERR_DTYPE")
C.raises(function() return a:view({ 5, 7 }) end, "view to a wrong numel", "[4,8]", "[5,7]", "TFC_ERR_SHAPE")
C.raises(function() return a:sum(5) end, "reduce over a missing dim", "tfc_sum", "TFC_ERR")
C.raises(function() return tf.zeros({ -1, 2 }) end, "negative dim", "tfc_tensor_zeros", "TFC_ERR_INVALID_ARG")
C.raises(function() return tf.zeros({ 2 }, { dtype = "f8" }) end, "unknown dtype", "unknown dtype 'f8'")
C.raises(function() return tf.tensor({ { 1, 2 }, { 3 } }) end, "ragged table", "ragged", "2 were expected")
C.raises(function() return tf.tensor({ 1, "x" }) end, "non-number element", "is a string")
C.raises(function() return tf.zeros({ 1, 2, 3, 4, 5, 6, 7, 8, 9 }) end, "too many dims", "at most 8")
C.raises(function() return tf.matmul(a, 3) end, "number where a tensor is needed", "tfcore.Tensor expected")
C.raises(function() return tf.zeros({ 3 }):item() end, "item of 3 elements", "tfc_tensor_item")
C.raises(function() a.foo = 1 end, "assigning an unknown field", "cannot assign field 'foo'")
C.raises(function() return tf.zeros({ 2 }):backward() end, "backward of an unrecorded tensor", "tfc_graph_backward")
C.raises(function()
  local x = tf.ones({ 2 }, { requires_grad = true })
  local y = (x * x):sum()
  y:backward()
  y:backward() -- the graph was cleared by the first call
end, "second backward without retain_graph", "tfc_graph_backward")
C.raises(function()
  local x = tf.ones({ 2 }, { requires_grad = true })
  return (x * 2):requires_grad_(false)
end, "requires_grad on a non-leaf", "tfc_tensor_set_requires_grad")
local closed
do
  local t <close> = tf.ones({ 2 })
  closed = t
end
C.raises(function() return closed + 1 end, "use after close", "closed")
C.ok(tostring(closed):find("closed", 1, true) ~= nil, "tostring of a closed tensor")
-- an error leaves the module usable
C.close((tf.ones({ 2 }) + 1):totable(), { 2, 2 }, 0, "usable after errors")
C.done()
