-- Autograd through the implicit per-state graph: gradients against
-- hand-derived formulas and f64 central finite differences.
local tf = require("tfcore")
local C = require("check")

local function map2(t, f)
  local out = {}
  for r = 1, #t do
    out[r] = {}
    for c = 1, #t[r] do out[r][c] = f(t[r][c], r, c) end
  end
  return out
end

-- d/dx sum(x*x + x) = 2x + 1: a tensor used twice gets both contributions
local x = tf.tensor({ { 1, -2, 3 }, { 0.5, 4, -1 } }, { dtype = "f64", requires_grad = true })
C.ok(x.requires_grad, "requires_grad option")
C.ok(x.is_leaf, "a created tensor is a leaf")
C.eq(x:grad(), nil, "no grad before backward")
local loss = (x * x + x):sum()
C.ok(loss.requires_grad and not loss.is_leaf, "op output requires grad and is no leaf")
C.ok(tf.graph_size() > 0, "ops were recorded")
loss:backward()
C.eq(tf.graph_size(), 0, "backward clears the graph")
C.close(x:grad():totable(), map2(x:totable(), function(v) return 2 * v + 1 end), 1e-14, "grad of x*x + x")

-- gradients accumulate until zero_grad
local l2 = (x * 3):sum()
l2:backward()
C.close(x:grad():totable(), map2(x:totable(), function(v) return 2 * v + 4 end), 1e-14, "grads accumulate")
x:zero_grad()
C.eq(x:grad(), nil, "zero_grad() sets to none")

-- retain_graph: a second backward through the same graph accumulates again
local l3 = x:tanh():sum()
l3:backward({ retain_graph = true })
C.ok(tf.graph_size() > 0, "retain_graph keeps the nodes")
l3:backward()
C.close(x:grad():totable(), map2(x:totable(), function(v) return 2 * (1 - math.tanh(v) ^ 2) end), 1e-14,
  "tanh grad twice")
x:zero_grad()

-- no_grad records nothing; requires_grad assignable
local y = tf.no_grad(function() return x * 2 end)
C.ok(not y.requires_grad, "no_grad output does not require grad")
C.eq(tf.graph_size(), 0, "no_grad records nothing")
C.ok(tf.is_grad_enabled(), "grad mode restored after no_grad")
local pcall_ok = pcall(tf.no_grad, function() error("boom") end)
C.ok(not pcall_ok and tf.is_grad_enabled(), "grad mode restored when the function raises")
local w = tf.ones({ 3 }, { dtype = "f64" })
w.requires_grad = true
C.ok(w.requires_grad, "requires_grad assignment")
C.eq(w:detach().requires_grad, false, "detach cuts from the graph")

-- matmul + relu + mean against hand-computed gradients:
-- L = mean(relu(X W)), dL/dW = Xᵀ (1[XW > 0] / n)
local X = tf.randn({ 4, 3 }, { dtype = "f64" })
local W = tf.randn({ 3, 2 }, { dtype = "f64", requires_grad = true })
local H = tf.matmul(X, W)
local L = H:relu():mean()
L:backward()
local Xt, Ht = X:totable(), H:totable()
local expect = {}
for k = 1, 3 do
  expect[k] = {}
  for c = 1, 2 do
    local acc = 0
    for r = 1, 4 do
      if Ht[r][c] > 0 then acc = acc + Xt[r][k] / 8 end
    end
    expect[k][c] = acc
  end
end
C.close(W:grad():totable(), expect, 1e-13, "grad of mean(relu(X W))")

-- a two-layer tanh net, every W1 element against f64 central differences
-- of the loss (evaluated without recording)
local X2 = tf.randn({ 5, 4 }, { dtype = "f64" })
local W1 = tf.randn({ 4, 6 }, { dtype = "f64", requires_grad = true })
local W2 = tf.randn({ 6, 3 }, { dtype = "f64", requires_grad = true })
local T2 = tf.randn({ 5, 3 }, { dtype = "f64" })
local function net() return ((tf.matmul(tf.matmul(X2, W1):tanh(), W2) - T2) ^ 2):mean() end
net():backward()
local analytic = W1:grad():totable()
local base = W1:detach():totable()
local eps, worst = 1e-6, 0
for r = 1, 4 do
  for c = 1, 6 do
    local function at(delta)
      local p = map2(base, function(v, rr, cc) return (rr == r and cc == c) and v + delta or v end)
      W1:detach():copy_(tf.tensor(p, { dtype = "f64" }))
      return tf.no_grad(function() return net():item() end)
    end
    local numeric = (at(eps) - at(-eps)) / (2 * eps)
    local a = analytic[r][c]
    worst = math.max(worst, math.abs(a - numeric) / (math.abs(a) + math.abs(numeric) + 1e-8))
  end
end
C.ok(worst < 1e-6, string.format("tanh MLP grads vs finite differences: worst rel err %.2e", worst))

-- attention: causal softmax(q kᵀ · scale) v against loops, and dq against
-- central differences
local B, H, T, D = 1, 2, 3, 4
local q = tf.randn({ B, H, T, D }, { dtype = "f64", requires_grad = true })
local k = tf.randn({ B, H, T, D }, { dtype = "f64" })
local v = tf.randn({ B, H, T, D }, { dtype = "f64" })
local out = tf.attention(q, k, v, true)
local qt, kt, vt, ot = q:totable(), k:totable(), v:totable(), out:totable()
local scale, max_err = 1 / math.sqrt(D), 0
for h = 1, H do
  for i = 1, T do
    local w, zsum = {}, 0
    for j = 1, i do -- causal: key j visible for query i when j <= i
      local dot = 0
      for d = 1, D do dot = dot + qt[1][h][i][d] * kt[1][h][j][d] end
      w[j] = math.exp(dot * scale)
      zsum = zsum + w[j]
    end
    for d = 1, D do
      local acc = 0
      for j = 1, i do acc = acc + w[j] / zsum * vt[1][h][j][d] end
      max_err = math.max(max_err, math.abs(acc - ot[1][h][i][d]))
    end
  end
end
C.ok(max_err < 1e-12, string.format("causal attention vs loops: max err %.2e", max_err))
local att_w = tf.randn({ B, H, T, D }, { dtype = "f64" })
local function att_loss() return (tf.attention(q, k, v, true) * att_w):sum() end
att_loss():backward()
local dq = q:grad():flatten():totable()
local qflat = q:detach():flatten()
local qbase = qflat:totable()
worst = 0
for idx = 1, #qbase do
  local function at(delta)
    local p = { table.unpack(qbase) }
    p[idx] = p[idx] + delta
    qflat:copy_(tf.tensor(p, { dtype = "f64" }))
    return tf.no_grad(function() return att_loss():item() end)
  end
  local numeric = (at(eps) - at(-eps)) / (2 * eps)
  worst = math.max(worst, math.abs(dq[idx] - numeric) / (math.abs(dq[idx]) + math.abs(numeric) + 1e-8))
end
C.ok(worst < 1e-6, string.format("attention dq vs finite differences: worst rel err %.2e", worst))

-- cross-entropy + gelu + layernorm chain, W against central differences
local Xc = tf.randn({ 4, 5 }, { dtype = "f64" })
local Wc = tf.randn({ 5, 3 }, { dtype = "f64", requires_grad = true })
local tc = tf.tensor({ 0, 2, 1, 2 }, { dtype = "i64" })
local function ce_loss() return tf.cross_entropy(tf.layernorm(tf.matmul(Xc, Wc)):gelu("tanh"), tc) end
ce_loss():backward()
local dW = Wc:grad():totable()
local wbase = Wc:detach():totable()
worst = 0
for r = 1, 5 do
  for c = 1, 3 do
    local function at(delta)
      Wc:detach():copy_(tf.tensor(map2(wbase, function(val, rr, cc) return (rr == r and cc == c) and val + delta or val end),
        { dtype = "f64" }))
      return tf.no_grad(function() return ce_loss():item() end)
    end
    local numeric = (at(eps) - at(-eps)) / (2 * eps)
    worst = math.max(worst, math.abs(dW[r][c] - numeric) / (math.abs(dW[r][c]) + math.abs(numeric) + 1e-8))
  end
end
C.ok(worst < 1e-6, string.format("cross_entropy(gelu(layernorm(X W))) grads vs finite differences: %.2e", worst))

C.done()
