-- SiLU and SwiGLU from Lua, against hand-derived values:
-- silu(1) = 1/(1 + e^-1), silu'(1) = s(1 + 1 - s) with s = silu(1) (20 digits from mpmath).
local tf = require("tfcore")
local C = require("check")

local SILU1, DSILU1 = 0.73105857863000487925, 0.92767051187148673179

local x = tf.tensor({ 1, 0, -1 }, { dtype = "f64" })
x.requires_grad = true
local y = x:silu()
C.close(y:totable(), { SILU1, 0, SILU1 - 1 }, 1e-15, "silu")
y:sum():backward()
C.close(x:grad():totable(), { DSILU1, 0.5, 1 - DSILU1 }, 1e-15, "silu gradient")

-- gate_up [1, 4] = [gate | up] = [1, 0 | 2, 3]
local gu = tf.tensor({ { 1, 0, 2, 3 } }, { dtype = "f64" })
gu.requires_grad = true
local out = gu:swiglu()
C.close(out:totable(), { { 2 * SILU1, 0 } }, 1e-15, "swiglu of the halves")
out:sum():backward()
C.close(gu:grad():totable(), { { 2 * DSILU1, 1.5, SILU1, 0 } }, 1e-15, "swiglu gradient into [dgate | dup]")

local g = tf.tensor({ 1 }, { dtype = "f64" })
local u = tf.tensor({ -2 }, { dtype = "f64" })
C.close(tf.swiglu(g, u):totable(), { -2 * SILU1 }, 1e-15, "swiglu(gate, up)")
C.raises(function() return tf.tensor({ 1, 2, 3 }, { dtype = "f64" }):swiglu() end, "odd last dim", "must be even")
C.done()
