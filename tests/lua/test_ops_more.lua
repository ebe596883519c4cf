-- The issue #16 ops from Lua, against values worked out by hand.
local tf = require("tfcore")
local C = require("check")

local x = tf.tensor({ -1.5, 0, 0.5, 2.5 }, { dtype = "f64" })
C.close(x:abs():totable(), { 1.5, 0, 0.5, 2.5 }, 0, "abs")
C.close(x:sign():totable(), { -1, 0, 1, 1 }, 0, "sign")
C.close(x:round():totable(), { -2, 0, 0, 2 }, 0, "round half to even")
C.close(x:floor():totable(), { -2, 0, 0, 2 }, 0, "floor")
C.close(x:ceil():totable(), { -1, 0, 1, 3 }, 0, "ceil")
C.close(tf.sin(x):totable(), { math.sin(-1.5), 0, math.sin(0.5), math.sin(2.5) }, 1e-15, "sin")
C.close(x:clamp(0, 1):totable(), { 0, 0, 0.5, 1 }, 0, "clamp")
C.close(x:clamp(nil, 0):totable(), { -1.5, 0, 0, 0 }, 0, "clamp max only")
local y = tf.tensor({ 1, 0, 0.5, 3 }, { dtype = "f64" })
C.close(x:maximum(y):totable(), { 1, 0, 0.5, 3 }, 0, "maximum")
C.close(tf.minimum(x, y):totable(), { -1.5, 0, 0.5, 2.5 }, 0, "minimum")

-- gradient of clamp: 1 inside and at the bounds
local p = tf.tensor({ -1, 0, 0.5, 1, 2 }, { dtype = "f64" })
p.requires_grad = true
p:clamp(0, 1):sum():backward()
C.close(p:grad():totable(), { 0, 1, 1, 1, 0 }, 0, "clamp gradient")

-- comparisons give bool tensors
C.eq(x:lt(y):dtype(), "bool", "lt dtype")
local lt = x:lt(y):totable()
C.ok(lt[1] == true and lt[2] == false and lt[3] == false and lt[4] == true, "lt values")
local ge = x:ge(0.5):totable()
C.ok(ge[1] == false and ge[2] == false and ge[3] == true and ge[4] == true, "ge scalar")
C.eq(x:gt(2):any():item(), true, "any")
C.eq(x:gt(-2):all():item(), true, "all")

-- scans, triangles, sorting
local m = tf.tensor({ { 3, 1 }, { 2, 1 } }, { dtype = "f64" })
C.close(m:cumsum(1):totable(), { { 3, 4 }, { 2, 3 } }, 0, "cumsum")
C.close(m:triu():totable(), { { 3, 1 }, { 0, 1 } }, 0, "triu")
C.close(m:tril(-1):totable(), { { 0, 0 }, { 2, 0 } }, 0, "tril(-1)")
local v, i = m:sort(1)
C.close(v:totable(), { { 1, 3 }, { 1, 2 } }, 0, "sort values")
C.close(i:totable(), { { 1, 0 }, { 1, 0 } }, 0, "sort indices (0-based)")
C.close(m:argsort(0, true):totable(), { { 0, 0 }, { 1, 1 } }, 0, "argsort descending, ties stable")

-- one_hot and multinomial
local ids = tf.tensor({ 2, 0 }, { dtype = "i64" })
C.close(ids:one_hot(3):totable(), { { 0, 0, 1 }, { 1, 0, 0 } }, 0, "one_hot")
local probs = tf.tensor({ 0, 1, 0 }, { dtype = "f64" })
C.close(probs:multinomial(3, true):totable(), { 1, 1, 1 }, 0, "multinomial draws only the positive weight")
local perm = tf.tensor({ 1, 2, 3 }, { dtype = "f64" }):multinomial(3):totable()
table.sort(perm)
C.close(perm, { 0, 1, 2 }, 0, "without replacement: a permutation")

-- bad input
C.raises(function() return m:cumsum(2) end, "cumsum dim", "tfc_cumsum", "dim 2")
C.raises(function() return tf.tensor({ 0.5, -1 }):multinomial(1) end, "negative weight", "tfc_multinomial")
C.raises(function() return ids:one_hot(2) end, "id too large", "tfc_one_hot", "num_classes 2")
C.raises(function() return x:lt("a") end, "compare with a string", "number expected")
C.done()
