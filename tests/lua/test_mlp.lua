-- A small MLP learns y = sin(x) on [-3, 3] with plain SGD written in Lua
-- on the library's ops: the loss must fall to a fraction of its start.
local tf = require("tfcore")
local C = require("check")

tf.manual_seed(1234)
local n, hidden = 64, 16
local xs, ys = {}, {}
for i = 1, n do
  local v = -3 + 6 * (i - 1) / (n - 1)
  xs[i], ys[i] = { v }, { math.sin(v) }
end
local X, Y = tf.tensor(xs), tf.tensor(ys)

local W1 = (tf.randn({ 1, hidden }) * 1.0):detach():requires_grad_()
local b1 = tf.zeros({ hidden }, { requires_grad = true })
local W2 = (tf.randn({ hidden, 1 }) * (1 / math.sqrt(hidden))):detach():requires_grad_()
local b2 = tf.zeros({ 1 }, { requires_grad = true })
local params = { W1, b1, W2, b2 }

local function forward()
  local h = (tf.matmul(X, W1) + b1):tanh()
  local pred = tf.matmul(h, W2) + b2
  return ((pred - Y) ^ 2):mean()
end

local lr, first, last = 0.05, nil, nil
for step = 1, 300 do
  local loss = forward()
  loss:backward()
  local value = loss:item()
  first = first or value
  last = value
  tf.no_grad(function()
    for _, p in ipairs(params) do
      p:copy_(p - p:grad() * lr)
      p:zero_grad()
    end
  end)
  if step % 100 == 0 then print(string.format("step %d loss %.5f", step, value)) end
end
print(string.format("loss %.4f -> %.4f", first, last))
C.ok(last == last, "loss is a number")
C.ok(last < 0.1 * first, string.format("loss fell to under 10%% of its start (%.4f -> %.4f)", first, last))
C.eq(tf.graph_size(), 0, "no nodes left behind by the training loop")
C.done()
