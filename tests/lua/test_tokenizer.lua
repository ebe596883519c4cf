-- Byte-level BPE from Lua: training compresses, encode/decode round-trips
-- any bytes, special tokens, save/load, and errors with the message.
local tf = require("tfcore")
local C = require("check")

local corpus = string.rep("the quick brown fox jumps over the lazy dog. ", 40)
  .. string.rep("tokenizers merge frequent pairs of bytes; ", 30)
local tok = tf.tokenizer("gpt2"):train(corpus, 300)
C.eq(tok:vocab_size(), 300, "vocab size after training")

local ids = tok:encode(corpus)
C.ok(#ids < #corpus / 2, string.format("training compresses the corpus (%d ids for %d bytes)", #ids, #corpus))
C.eq(tok:decode(ids), corpus, "round trip of the training text")
for _, id in ipairs(ids) do
  if math.type(id) ~= "integer" or id < 0 or id >= 300 then C.ok(false, "id out of range: " .. tostring(id)) end
end

-- any bytes: NUL, invalid UTF-8, multi-byte characters, the empty string
local samples = { "", "a", "hello world", "caf\xc3\xa9 \xe2\x82\xac 100", "\0\1\2\255\254 bytes", "\xff\xfe\xc3",
  "  leading and trailing spaces  ", "fox fox fox\n\n\ttabs" }
for _, s in ipairs(samples) do
  C.eq(tok:decode(tok:encode(s)), s, string.format("round trip of %q", s))
end
-- untrained: one id per byte, the byte's value
local raw = tf.tokenizer("none")
local bytes = raw:encode("AB\0")
C.close(bytes, { 65, 66, 0 }, 0, "untrained ids are bytes")
C.eq(select(1, tok:token_bytes(65)), "A", "token_bytes of a byte token")

-- decode with utf8 = true replaces ill-formed bytes with U+FFFD
C.eq(tok:decode(tok:encode("a\xffb"), true), "a\xef\xbf\xbdb", "utf8 decode replaces bad bytes")

-- special tokens are only recognised when asked
tok:add_special("<|endoftext|>", 300)
local with = tok:encode("hi<|endoftext|>", "allowed")
C.eq(with[#with], 300, "allowed special maps to its id")
C.ok(#tok:encode("hi<|endoftext|>") > #with, "as text it is ordinary bytes")
C.raises(function() return tok:encode("x<|endoftext|>", "disallowed") end, "disallowed special",
  "<|endoftext|>", "TFC_ERR_INVALID_ARG")
local sb, special = tok:token_bytes(300)
C.ok(sb == "<|endoftext|>" and special, "token_bytes of a special token")

-- save and load give a tokenizer that encodes identically
local path = os.tmpname()
tok:save(path)
local again = tf.tokenizer_load(path)
os.remove(path)
C.close(again:encode(corpus), ids, 0, "loaded tokenizer encodes identically")

-- errors
C.raises(function() return tok:decode({ 1, 99999 }) end, "decode of an unknown id", "tfc_tokenizer_decode", "99999")
C.raises(function() return tok:decode({ 1.5 }) end, "decode of a non-integer", "not a 32-bit integer")
C.raises(function() return tok:train(corpus, 400) end, "training twice", "tfc_tokenizer_train")
C.raises(function() return tf.tokenizer("bpe") end, "unknown pattern", "invalid option 'bpe'")
C.raises(function() return tf.tokenizer_load("/nonexistent/tok.txt") end, "missing file", "TFC_ERR_IO")
C.done()
