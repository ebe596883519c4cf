-- Tensors from Lua: creation, data out, metadata, arithmetic, matmul and
-- views, each against values computed here in plain Lua.
local tf = require("tfcore")
local C = require("check")

-- creation and data out
local a = tf.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
C.eq(a:dtype(), "f32", "default dtype")
C.close(a:shape(), { 2, 3 }, 0, "shape")
C.eq(a:ndim(), 2, "ndim")
C.eq(a:numel(), 6, "numel")
C.eq(#a, 2, "#a is the size of dim 0")
C.eq(a:size(-1), 3, "size(-1)")
C.close(a:totable(), { { 1, 2, 3 }, { 4, 5, 6 } }, 0, "totable round-trip")
C.eq(tf.tensor(2.5, { dtype = "f64" }):item(), 2.5, "scalar item")
C.eq(tf.tensor(2.5):ndim(), 0, "number makes a scalar")
local i = tf.tensor({ 1, -2, 3 }, { dtype = "i64" })
C.eq(i:dtype(), "i64", "i64 dtype")
C.eq(math.type(i:totable()[2]), "integer", "integer dtype gives Lua integers")
C.eq(i:totable()[2], -2, "i64 value")
C.eq(tf.tensor({ true, false }, { dtype = "bool" }):totable()[1], true, "bool values")
C.close(tf.zeros({ 2, 2 }):totable(), { { 0, 0 }, { 0, 0 } }, 0, "zeros")
C.close(tf.ones(3):totable(), { 1, 1, 1 }, 0, "ones with a bare number shape")
C.close(tf.full({ 2 }, 7, { dtype = "f64" }):totable(), { 7, 7 }, 0, "full")
C.close(tf.arange(0, 5, 2):totable(), { 0, 2, 4 }, 0, "arange")
C.ok(tostring(a):find("[[1, 2, 3], [4, 5, 6]]", 1, true) ~= nil, "tostring shows values: " .. tostring(a))
C.ok(tostring(a):find("f32", 1, true) ~= nil, "tostring shows dtype")

-- random tensors: reproducible by seed, moments roughly right
tf.manual_seed(7)
local r1 = tf.randn({ 1000 }, { dtype = "f64" }):totable()
tf.manual_seed(7)
local r2 = tf.randn({ 1000 }, { dtype = "f64" }):totable()
local r3 = tf.randn({ 1000 }, { dtype = "f64" }):totable()
C.close(r1, r2, 0, "same seed, same draw")
C.ok(r1[1] ~= r3[1], "the stream advances between draws")
local mean, sq = 0, 0
for _, v in ipairs(r1) do mean, sq = mean + v / #r1, sq + v * v / #r1 end
C.ok(math.abs(mean) < 0.15 and math.abs(sq - 1) < 0.2, string.format("randn moments %.3f %.3f", mean, sq))

-- arithmetic with broadcasting and numbers on either side
local x = tf.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "f64" })
local row = tf.tensor({ 10, 20 }, { dtype = "f64" })
C.close((x + row):totable(), { { 11, 22 }, { 13, 24 } }, 0, "broadcast add")
C.close((x - row):totable(), { { -9, -18 }, { -7, -16 } }, 0, "broadcast sub")
C.close((x * row):totable(), { { 10, 40 }, { 30, 80 } }, 0, "broadcast mul")
C.close((x / row):totable(), { { 0.1, 0.1 }, { 0.3, 0.2 } }, 1e-15, "broadcast div")
C.close((x + 1):totable(), { { 2, 3 }, { 4, 5 } }, 0, "tensor + number")
C.close((1 - x):totable(), { { 0, -1 }, { -2, -3 } }, 0, "number - tensor")
C.close((x - 1):totable(), { { 0, 1 }, { 2, 3 } }, 0, "tensor - number")
C.close((2 * x):totable(), { { 2, 4 }, { 6, 8 } }, 0, "number * tensor")
C.close((x / 2):totable(), { { 0.5, 1 }, { 1.5, 2 } }, 0, "tensor / number")
C.close((12 / x):totable(), { { 12, 6 }, { 4, 3 } }, 1e-15, "number / tensor")
C.close((x ^ 2):totable(), { { 1, 4 }, { 9, 16 } }, 1e-15, "tensor ^ number")
C.close((-x):totable(), { { -1, -2 }, { -3, -4 } }, 0, "unary minus")
C.close(x:exp():totable(), { { math.exp(1), math.exp(2) }, { math.exp(3), math.exp(4) } }, 1e-15, "exp")
C.close(x:tanh():totable()[2], { math.tanh(3), math.tanh(4) }, 1e-15, "tanh")
C.close(tf.tensor({ -1, 2 }):relu():totable(), { 0, 2 }, 0, "relu")
C.close(x:sum():item(), 10, 0, "sum of all")
C.close(x:sum(0):totable(), { 4, 6 }, 0, "sum over dim 0")
C.close(x:sum(1, true):totable(), { { 3 }, { 7 } }, 0, "sum keepdim")
C.close(x:mean():item(), 2.5, 0, "mean")
C.close(x:max(1):totable(), { 2, 4 }, 0, "max over dim 1")
C.close(x:argmax(0):totable(), { 1, 1 }, 0, "argmax is 0-based")

-- softmax against its definition
local s = tf.tensor({ 1, 2, 3 }, { dtype = "f64" }):softmax(0):totable()
local z = math.exp(1) + math.exp(2) + math.exp(3)
C.close(s, { math.exp(1) / z, math.exp(2) / z, math.exp(3) / z }, 1e-14, "softmax")
C.close(tf.tensor({ 1, 2, 3 }, { dtype = "f64" }):log_softmax():totable(),
  { 1 - math.log(z), 2 - math.log(z), 3 - math.log(z) }, 1e-14, "log_softmax over the last dim")

-- layernorm over the last dim against its formula
local ln_in = { { 1, 2, 4 }, { -1, 0, 3 } }
local ln = tf.layernorm(tf.tensor(ln_in, { dtype = "f64" }), nil, nil, 1e-5):totable()
for r = 1, 2 do
  local m = (ln_in[r][1] + ln_in[r][2] + ln_in[r][3]) / 3
  local var = 0
  for c = 1, 3 do var = var + (ln_in[r][c] - m) ^ 2 / 3 end
  for c = 1, 3 do C.close(ln[r][c], (ln_in[r][c] - m) / math.sqrt(var + 1e-5), 1e-12, "layernorm") end
end

-- embedding picks rows (ids 0-based)
local tab = tf.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
C.close(tf.embedding(tab, tf.tensor({ 2, 0 }, { dtype = "i64" })):totable(), { { 5, 6 }, { 1, 2 } }, 0, "embedding")

-- cross-entropy against -log softmax
local logits = { { 1, 2, 0.5 }, { 0.1, -1, 2 } }
local ce = tf.cross_entropy(tf.tensor(logits, { dtype = "f64" }), tf.tensor({ 1, 2 }, { dtype = "i64" })):item()
local function nll(row, t)
  local zz = 0
  for _, v in ipairs(row) do zz = zz + math.exp(v) end
  return math.log(zz) - row[t]
end
C.close(ce, (nll(logits[1], 2) + nll(logits[2], 3)) / 2, 1e-13, "cross_entropy")

-- matmul against naive loops
local function naive_matmul(A, B)
  local out = {}
  for r = 1, #A do
    out[r] = {}
    for c = 1, #B[1] do
      local acc = 0
      for k = 1, #B do acc = acc + A[r][k] * B[k][c] end
      out[r][c] = acc
    end
  end
  return out
end
local A = tf.randn({ 3, 5 }, { dtype = "f64" })
local B = tf.randn({ 5, 4 }, { dtype = "f64" })
C.close(tf.matmul(A, B):totable(), naive_matmul(A:totable(), B:totable()), 1e-12, "matmul")
C.close(A:matmul(B):totable(), naive_matmul(A:totable(), B:totable()), 1e-12, "matmul as method")
C.close(B:transpose(0, 1):matmul(A:transpose()):totable(),
  naive_matmul(B:transpose():contiguous():totable(), A:transpose():contiguous():totable()), 1e-12,
  "matmul of transposed views")

-- views share storage and do not copy
local v = tf.arange(0, 6, 1, { dtype = "f64" }):reshape({ 2, 3 })
local t = v:transpose(0, 1)
C.close(t:shape(), { 3, 2 }, 0, "transpose shape")
C.ok(not t:is_contiguous(), "transpose is a strided view")
C.close(t:totable(), { { 0, 3 }, { 1, 4 }, { 2, 5 } }, 0, "transpose values")
C.close(v:slice(1, 0, 3, 2):totable(), { { 0, 2 }, { 3, 5 } }, 0, "slice with step")
C.close(v:view({ 3, 2 }):totable(), { { 0, 1 }, { 2, 3 }, { 4, 5 } }, 0, "view")
C.close(v:unsqueeze(0):shape(), { 1, 2, 3 }, 0, "unsqueeze")
C.close(v:flatten():totable(), { 0, 1, 2, 3, 4, 5 }, 0, "flatten")
C.close(tf.concat({ v, v }, 0):shape(), { 4, 3 }, 0, "concat")
v:fill_(1)
C.close(t:totable()[1], { 1, 1 }, 0, "in-place fill is seen through the view")
local dst = tf.zeros({ 2, 3 })
dst:copy_(tf.tensor({ 1, 2, 3 }, { dtype = "f64" }))
C.close(dst:totable(), { { 1, 2, 3 }, { 1, 2, 3 } }, 0, "copy_ broadcasts and converts")
C.eq(v:to("f32"):dtype(), "f32", "to(dtype)")

-- devices: a CPU round trip is the tensor itself; CUDA when present
local d, di = a:device()
C.ok(d == "cpu" and di == 0, "a new tensor lives on the CPU")
C.close(a:to_device("cpu"):totable(), a:totable(), 0, "to_device cpu")
local has_cuda, why = tf.cuda_available()
if has_cuda then
  local g = a:to_device("cuda")
  C.eq(g:device(), "cuda", "to_device cuda")
  C.close(g:totable(), a:totable(), 0, "values survive the CUDA round trip")
else
  C.ok(type(why) == "string" and #why > 0, "cuda_available says why not: " .. tostring(why))
  C.raises(function() return a:to_device("cuda") end, "to_device cuda without CUDA", "CUDA", "TFC_ERR_DEVICE")
end

-- to-be-closed variables release their reference at once
do
  local tmp <close> = tf.ones({ 4 })
  C.eq(tmp:numel(), 4, "close variable usable")
end

C.done()
