-- Optimizers from Lua: an AdamW trajectory against AdamW written here in
-- plain Lua (PyTorch's formulas), and an MLP trained with AdamW.
local tf = require("tfcore")
local C = require("check")

-- 1. trajectory: loss = Σ (p − target)², so grad = 2 (p − target)
local p0, target = { 0.5, -1.0, 2.0 }, { 1.0, 0.0, -1.0 }
local lr, b1, b2, eps, wd = 0.05, 0.9, 0.99, 1e-8, 0.1
local p = tf.tensor(p0, { dtype = "f64", requires_grad = true })
local T = tf.tensor(target, { dtype = "f64" })
local opt = tf.optim.adamw({ p }, { lr = lr, betas = { b1, b2 }, eps = eps, weight_decay = wd })
local ref, m, v = { table.unpack(p0) }, { 0, 0, 0 }, { 0, 0, 0 }
for step = 1, 25 do
  ((p - T) ^ 2):sum():backward()
  opt:step()
  opt:zero_grad()
  for i = 1, 3 do
    local g = 2 * (ref[i] - target[i])
    ref[i] = ref[i] - lr * wd * ref[i] -- decoupled decay
    m[i] = b1 * m[i] + (1 - b1) * g
    v[i] = b2 * v[i] + (1 - b2) * g * g
    local mhat, vhat = m[i] / (1 - b1 ^ step), v[i] / (1 - b2 ^ step)
    ref[i] = ref[i] - lr * mhat / (math.sqrt(vhat) + eps)
  end
end
C.close(p:totable(), ref, 1e-12, "AdamW trajectory vs the formulas")
C.eq(opt:step_count(), 25, "step count")
C.close(opt:get_lr(), lr, 0, "get_lr")
opt:set_lr(0.01)
C.close(opt:get_lr(), 0.01, 0, "set_lr")
C.eq(p:grad(), nil, "zero_grad sets grads to none")

-- 2. SGD with momentum, one parameter, by hand: buf = μ buf + g; p -= lr buf
local q = tf.tensor({ 1.0 }, { dtype = "f64", requires_grad = true })
local sgd = tf.optim.sgd({ q }, { lr = 0.1, momentum = 0.9 })
local qr, buf = 1.0, 0
for _ = 1, 5 do
  (q * q):sum():backward()
  sgd:step()
  sgd:zero_grad()
  local g = 2 * qr
  buf = 0.9 * buf + g
  qr = qr - 0.1 * buf
end
C.close(q:totable()[1], qr, 1e-13, "SGD momentum trajectory")

-- 3. an MLP fitting sin(x) with AdamW: the loss falls
tf.manual_seed(99)
local n, hidden = 64, 16
local xs, ys = {}, {}
for i = 1, n do
  local x = -3 + 6 * (i - 1) / (n - 1)
  xs[i], ys[i] = { x }, { math.sin(x) }
end
local X, Y = tf.tensor(xs), tf.tensor(ys)
local W1 = tf.randn({ 1, hidden }, { requires_grad = true })
local b1p = tf.zeros({ hidden }, { requires_grad = true })
local W2 = (tf.randn({ hidden, 1 }) * 0.1):detach():requires_grad_()
local b2p = tf.zeros({ 1 }, { requires_grad = true })
local adamw = tf.optim.adamw({ W1, b1p, W2, b2p }, { lr = 0.02, weight_decay = 0.0 })
local first, last, norms_ok = nil, nil, true
for _ = 1, 300 do
  local loss = ((tf.matmul((tf.matmul(X, W1) + b1p):tanh(), W2) + b2p - Y) ^ 2):mean()
  loss:backward()
  local norm = adamw:clip_grad_norm(10.0)
  norms_ok = norms_ok and norm == norm and norm >= 0
  adamw:step()
  adamw:zero_grad()
  first = first or loss:item()
  last = loss:item()
end
C.ok(norms_ok, "clip_grad_norm returns finite norms")
print(string.format("AdamW MLP loss %.4f -> %.4f", first, last))
C.ok(last < 0.05 * first, string.format("AdamW MLP loss falls (%.4f -> %.4f)", first, last))

-- errors
C.raises(function() return tf.optim.adamw({ p }, { lr = -1 }) end, "negative lr", "lr", "TFC_ERR_INVALID_ARG")
C.raises(function() return tf.optim.adamw({ p * 2 }) end, "non-leaf parameter", "TFC_ERR_INVALID_ARG")
C.raises(function() return tf.optim.sgd({ 1, 2 }) end, "numbers as params", "element 1 is not a tensor")
C.done()
