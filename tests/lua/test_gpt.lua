-- GPT models from Lua: tfcore.gpt(config), model:forward with loss (against
-- a cross-entropy written here in Lua), greedy generate (against argmax over
-- uncached forwards), training through the state's graph, and
-- tfcore.load_model on every kind of file: a checkpoint of model:save, a
-- Hugging Face directory of model:save_hf (Llama, f32), an llm.c file of
-- model:save_llmc (GPT-2), directories of tfcore train (checkpoint.json,
-- when TFCORE_CLI names the CLI: a real run and a LoRA run on it), and the
-- errors for what is none of these.
local tf = require("tfcore")
local C = require("check")

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -p '" .. p .. "'"))
  return p
end
local work = tmpdir()

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function forward(m, idx, tg)
  return tf.no_grad(function() return m:forward(idx, tg) end)
end

-- mean over positions of logsumexp(logits) - logits[target], in plain Lua doubles
local function cross_entropy(rows, targets)
  local total, n = 0, 0
  for b = 1, #rows do
    for t = 1, #rows[b] do
      local row, mx = rows[b][t], -math.huge
      for _, v in ipairs(row) do mx = math.max(mx, v) end
      local s = 0
      for _, v in ipairs(row) do s = s + math.exp(v - mx) end
      total = total + (mx + math.log(s)) - row[targets[b][t] + 1]
      n = n + 1
    end
  end
  return total / n
end

local function argmax(row)
  local best = 1
  for i = 2, #row do if row[i] > row[best] then best = i end end
  return best - 1
end

-- ---- a Llama built from a config table ------------------------------------------------------
local m = tf.gpt({ preset = "llama-tiny", vocab_size = 50, n_layer = 2 }, 7)
local cfg = m:config()
C.eq(cfg.arch, "llama", "arch")
C.eq(cfg.n_kv_head, 2, "llama-tiny's kv heads")
C.eq(cfg.mlp_hidden, 352, "llama-tiny's MLP width")
C.eq(cfg.n_layer, 2, "field over the preset")
C.eq(cfg.tie_weights, false, "llama-tiny is untied")

local idx = { { 1, 2, 3, 4, 5, 6 }, { 7, 8, 9, 10, 11, 12 } }
local tg = { { 2, 3, 4, 5, 6, 7 }, { 8, 9, 10, 11, 12, 13 } }
local logits, loss = forward(m, idx, tg)
local shape = logits:shape()
C.ok(shape[1] == 2 and shape[2] == 6 and shape[3] == 50, "logits [B, T, vocab]")
local rows = logits:totable()
C.close(loss:item(), cross_entropy(rows, tg), 1e-5, "loss is the mean cross-entropy of the logits")
local alone, none = forward(m, idx)
C.ok(none == nil, "no targets: no loss")
C.close(alone:totable(), rows, 0, "logits without targets are the same")
C.close(forward(m, tf.tensor(idx, { dtype = "i64" })):totable(), rows, 0, "ids as an i64 tensor")
C.close(forward(m, idx[1]):totable(), { rows[1] }, 0, "a flat array is one sequence [1, T]")
C.close(forward(m, { { 1, 2, 3 } }):totable()[1], { rows[1][1], rows[1][2], rows[1][3] }, 1e-5,
  "a causal model: a prefix's logits do not see what follows")

-- greedy generation with the KV cache = argmax of full forwards, token by token
local prompt, want = { 3, 1, 4 }, {}
local seq = { 3, 1, 4 }
for _ = 1, 5 do
  local l = forward(m, { seq }):totable()[1]
  local nxt = argmax(l[#l])
  want[#want + 1] = nxt
  seq[#seq + 1] = nxt
end
C.close(m:generate(prompt, 5, { temperature = 0 }), want, 0, "greedy generate")
C.eq(#m:generate(prompt, 4, { temperature = 0.8, top_k = 10, seed = 3 }), 4, "sampled generate")
C.close(m:generate(prompt, 4, { temperature = 0.8, seed = 3 }), m:generate(prompt, 4, { temperature = 0.8, seed = 3 }),
  0, "the same seed, the same tokens")

-- training: forward records on the state's graph, backward fills the parameters' grads
do
  local params, names = m:parameters()
  C.eq(#params, #names, "a name per parameter")
  C.eq(names[1], "model.embed_tokens.weight", "Hugging Face names")
  local opt = tf.optim.adamw(params, { lr = 1e-2 })
  local _, l0 = m:forward(idx, tg)
  l0:backward()
  C.ok(params[1]:grad() ~= nil, "the embedding has a gradient")
  opt:step()
  local _, l1 = forward(m, idx, tg)
  C.ok(l1:item() < l0:item(), string.format("one AdamW step lowers the loss (%.4f -> %.4f)", l0:item(), l1:item()))
  logits, loss = forward(m, idx, tg)
  rows = logits:totable()
end

-- ---- load_model: a checkpoint file, a directory holding one, a Hugging Face directory -----
local ckpt = work .. "/llama.safetensors"
m:save(ckpt)
local back = tf.load_model(ckpt)
C.eq(back:config().arch, "llama", "checkpoint: arch")
C.close(forward(back, idx):totable(), rows, 0, "checkpoint file: the same logits")

local hf = work .. "/hf"
m:save_hf(hf, 1, 2)
local cj = read(hf .. "/config.json")
C.ok(cj:find('"model_type": *"llama"') ~= nil, "config.json of a Llama")
C.ok(cj:find('"bos_token_id": *1') and cj:find('"eos_token_id": *2'), "the ids in config.json")
local h = tf.load_model(hf)
C.eq(h:config().n_kv_head, 2, "Hugging Face directory: kv heads")
local hl, hloss = forward(h, idx, tg)
C.close(hl:totable(), rows, 0, "Hugging Face directory: the same logits")
C.close(hloss:item(), loss:item(), 0, "and loss")
C.eq(h:num_parameters(), m:num_parameters(), "the same parameter count")

-- a directory of tfcore train is told from a Hugging Face one by checkpoint.json, though it has config.json too:
-- an f64 model shows which loader ran (tfc_gpt_load keeps f64, the Hugging Face loader gives f32)
do
  local m64 = tf.gpt({ preset = "llama-tiny", vocab_size = 50, n_layer = 1, dtype = "f64" }, 1)
  local run = work .. "/run"
  m64:save_hf(run)
  m64:save(run .. "/model.safetensors")
  write(run .. "/checkpoint.json", '{"files": []}')
  C.eq(tf.load_model(run):config().dtype, "f64", "checkpoint.json: the run's own weights and config")
  os.remove(run .. "/checkpoint.json")
  C.eq(tf.load_model(run):config().dtype, "f32", "without it: a Hugging Face directory")
  local only = work .. "/only"
  assert(os.execute("mkdir -p '" .. only .. "'"))
  m64:save(only .. "/model.safetensors")
  C.eq(tf.load_model(only):config().dtype, "f64", "a directory holding model.safetensors alone")
end

-- ---- GPT-2 as an llm.c file ------------------------------------------------------------------
do
  local g = tf.gpt({ preset = "char-tiny", vocab_size = 40, n_layer = 1, n_head = 2, n_embd = 32, block_size = 16 }, 2)
  C.eq(g:config().arch, "gpt2", "char-tiny is GPT-2")
  local bin = work .. "/gpt2.bin"
  g:save_llmc(bin)
  local lg = tf.load_model(bin)
  C.eq(lg:config().block_size, 16, "llm.c: block size")
  C.close(forward(lg, idx):totable(), forward(g, idx):totable(), 0, "llm.c file: the same logits")
end

-- ---- real run directories of tfcore train, when the CLI is at hand ------------------------------
local cli = os.getenv("TFCORE_CLI")
if cli and cli ~= "" then
  local corpus = work .. "/corpus.txt"
  write(corpus, string.rep("the quick brown fox jumps over the lazy dog. ", 200))
  local fast = " --data '" .. corpus .. "' --batch 2 --steps 2 --eval-every 100 --eval-batches 1 --sample-tokens 0 "
  local base = work .. "/base"
  C.ok(os.execute("'" .. cli .. "' train" .. fast .. "--n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --out '"
    .. base .. "' >/dev/null 2>&1"), "tfcore train")
  local direct = tf.load_model(base .. "/model.safetensors")
  local small = { { 1, 2, 3, 4 } }
  C.close(forward(tf.load_model(base), small):totable(), forward(direct, small):totable(), 0,
    "a run directory: its model.safetensors")
  local lora = work .. "/lora"
  C.ok(os.execute("'" .. cli .. "' train" .. fast .. "--lora-rank 2 --lr 1e-2 --lora-base '" .. base .. "' --out '"
    .. lora .. "' >/dev/null 2>&1"), "tfcore train --lora-base")
  local adapted = forward(tf.load_model(lora), small):totable()
  C.ok(math.abs(adapted[1][1][1] - forward(direct, small):totable()[1][1][1]) > 0, "a LoRA run: base + adapters")
else
  print("TFCORE_CLI unset: the tfcore train directories are not checked")
end

-- ---- errors ------------------------------------------------------------------------------------
C.raises(function() return tf.load_model(work .. "/absent") end, "missing path", "absent", "does not exist",
  "config.json", "TFC_ERR_IO")
local empty = work .. "/empty"
assert(os.execute("mkdir -p '" .. empty .. "'"))
write(empty .. "/notes.txt", "hello")
C.raises(function() return tf.load_model(empty) end, "directory without a model", "neither config.json",
  "model.safetensors", "TFC_ERR_IO")
write(work .. "/random.bin", string.rep("\x13\x37\xfe\x01", 1000))
C.raises(function() return tf.load_model(work .. "/random.bin") end, "random file", "random.bin",
  "is not a model file", "llm.c", "TFC_ERR_FORMAT")
write(work .. "/short.bin", "ab")
C.raises(function() return tf.load_model(work .. "/short.bin") end, "two bytes", "is not a model file")
C.raises(function() return tf.gpt({ n_layers = 2 }) end, "unknown field", "unknown config field 'n_layers'")
C.raises(function() return tf.gpt({ arch = "gptj" }) end, "unknown arch", "tfc_gpt_arch_from_name", "gptj")
C.raises(function() return tf.gpt({ n_layer = 1.5 }) end, "non-integer field", "n_layer must be a 32-bit integer")
C.raises(function() return m:forward({ { 1, 2.5 } }) end, "float id", "idx[1][2] is a number, not an integer id")
C.raises(function() return m:forward({ { 1, 2 }, { 3 } }) end, "ragged ids", "row 2 is not a row of 2 ids")
C.raises(function() return m:forward({ { 1, 50 } }) end, "id out of range", "tfc_gpt_forward", "50")
C.raises(function() return m:forward({}) end, "no ids", "idx is empty")
C.raises(function() return m:generate({}, 3) end, "empty prompt", "the prompt needs")
C.raises(function() return m:save_hf(hf, 60) end, "bos outside the vocabulary", "tfc_gpt_save_hf", "60")

os.execute("rm -rf '" .. work .. "'")
C.done()
