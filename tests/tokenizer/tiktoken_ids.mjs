// Reference ids from OpenAI's tiktoken (npm `tiktoken`, the Rust core
// compiled to WASM) for a varied corpus, written for
// test_tiktoken_compare.c to check libtfcore against, byte for byte.
//
// usage: node tiktoken_ids.mjs <npm prefix> <tinyshakespeare.txt> <out.bin>
//
// out.bin (little-endian): "TKIDS1\0\0", u32 n_texts, then per text:
//   u32 mode (0 = encode_ordinary, 1 = encode with allowed_special "all"),
//   u32 n_bytes, the UTF-8 bytes, and for gpt2 then cl100k_base:
//   u32 n_ids, n_ids x u32 ids.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const [npmDir, shakespearePath, outPath] = process.argv.slice(2);
const require = createRequire(resolve(npmDir, "node_modules", "x.js"));
const { get_encoding } = require("tiktoken");

// A small deterministic PRNG (mulberry32), so the corpus is the same every run.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(12345);
const pick = (a) => a[Math.floor(rand() * a.length)];

const texts = [];
const shakespeare = readFileSync(shakespearePath, "utf8");
texts.push(shakespeare); // the whole file as one text
for (let i = 0; i < shakespeare.length; i += 20000) texts.push(shakespeare.slice(i, i + 20000));

texts.push(
  "Hello, world! The quick brown fox jumps over the lazy dog.",
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
  "Family: 👨‍👩‍👧 👩‍👩‍👦‍👦, flags 🏴󠁧󠁢󠁳󠁣󠁴󠁿, keycaps 1️⃣#️⃣*️⃣",
  "Numbers: 0 1 12 123 1234 12345 123456 1234567 3.14159 2.71828 1,000,000 1e-10 0x1F ½ ² ³ ①②③ Ⅻ 𝟘𝟙𝟚",
  "Dates 2023-01-15, 12:30:45, phone +1 (555) 123-4567, money $1,234.56 €99,99 ¥1000",
  "Contractions: it's I'm you're we've they'll he'd can't won't IT'S I'M YOU'RE WE'VE THEY'LL HE'D CAN'T",
  "Mixed: It'S I'M You'Re We'Ve They'Ll He'D 'tis 'twas ma'am o'clock rock'n'roll 's 'S 't 'T 're 'rE 'Re 'RE 've 'vE 'Ve 'VE 'm 'M 'll 'lL 'Ll 'LL 'd 'D",
  "Long s: 'ſ 'ſt X'ſ ſ and Kelvin 'K 'k (U+212A)",
  "int main(void) {\n    for (int i = 0; i < 10; i++) {\n        printf(\"%d\\n\", i * i);\n    }\n    return 0;\n}\n",
  "def fib(n):\n\tif n < 2:\n\t\treturn n\n\treturn fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(20)])  # comment\n",
  "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>\r\n{\"key\": [1, 2.5, null, true], \"k2\": \"v\\u00e9\"}",
  "    leading spaces and trailing spaces    ",
  "tabs\t\tand\t\t\tmore\ttabs\t",
  "newlines\n\n\n\nand\r\n\r\nCRLF\r\r\rCR\n \n  \n   \nend",
  "spaces before newline   \n   after newline",
  "a" + " ".repeat(1000) + "b",
  " ".repeat(5000),
  "\n".repeat(3000),
  "x" + "\t \n".repeat(500) + "y",
  "word ".repeat(2000),
  "a".repeat(10000),
  "ab".repeat(5000),
  "1".repeat(3001),
  "!@#$%^&*()_+-=[]{}|;':\",./<>?`~".repeat(100),
  "Unicode spaces: a\u00A0b\u1680c\u2000d\u2001e\u2002f\u2003g\u2009h\u200Ai\u202Fj\u205Fk\u3000l",
  "Line/para separators: a\u2028b\u2029c and NEL: a\u0085b \u0085 \u0085\u0085x \u0085",
  "Not whitespace: a\uFEFFb \uFEFF \uFEFFx \u200B zero-width \u200C\u200D \u180E mongolian \u180Ex",
  "Info separators: a\u001Cb\u001Dc\u001Ed\u001Fe \u001C \u001F\u001F x",
  "Control chars: \u0001\u0002\u0003 \u0007\u0008 \u000B vt \u000C ff \u007F del",
  "Combining: e\u0301 a\u0308 n\u0303 \u0915\u094D\u0937 Z\u0351\u0352\u0353\u0354a\u0355\u0356lgo",
  "<|endoftext|> looks special but is ordinary text here <|fim_prefix|>",
);

// Random strings: code points from blocks assigned by Unicode 14 (PCRE2
// 10.42's tables), so both sides agree on every character's category.
const ranges = [
  [0x20, 0x7e], [0x09, 0x0d], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x5ff], [0x600, 0x6ff],
  [0x900, 0x97f], [0xe00, 0xe5b], [0x1100, 0x11ff], [0x1e00, 0x1eff], [0x2000, 0x206f], [0x2070, 0x209c],
  [0x20a0, 0x20c0], [0x2100, 0x218b], [0x2190, 0x23ff], [0x2460, 0x24ff], [0x2500, 0x27bf], [0x3000, 0x303f],
  [0x3040, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0xff00, 0xffef], [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f],
  [0x1f900, 0x1f9ff], [0x1d400, 0x1d7ff], [0x0085, 0x0085], [0xfeff, 0xfeff], [0x1c, 0x1f], [0x180e, 0x180e],
];
const specialSingles = [" ", " ", "  ", "\n", "'", "'s", "'LL", "\r\n", "\t", "\u0085", "\u00a0", "\u3000"];
function randomText(n) {
  let s = "";
  for (let i = 0; i < n; i++) {
    if (rand() < 0.15) { s += pick(specialSingles); continue; }
    const [lo, hi] = pick(ranges);
    let cp = lo + Math.floor(rand() * (hi - lo + 1));
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x41;
    s += String.fromCodePoint(cp);
  }
  return s;
}
for (let i = 0; i < 300; i++) texts.push(randomText(1 + Math.floor(rand() * 400)));
// Random ASCII word soup, heavy on spaces, digits and apostrophes.
const atoms = ["the", "The", "THE", " ", "  ", "   ", "\n", "\n\n", "'", "'s", "'t", "'re", "123", "4567", "x", ".", ",",
  "!?", "--", "\t", "don't", "I'M", "ok", "¡", "ñ", "€", "😀"];
for (let i = 0; i < 200; i++) {
  let s = "";
  const n = 1 + Math.floor(rand() * 200);
  for (let k = 0; k < n; k++) s += pick(atoms);
  texts.push(s);
}

const special = [
  "Hello<|endoftext|>world",
  "<|endoftext|>",
  "a <|endoftext|><|endoftext|> b <|endoftext|>",
  "x<|fim_prefix|>y<|fim_middle|>z<|fim_suffix|>w<|endofprompt|>",
  "<|endoftext|> <|endoftext|>\n<|endoftext|>",
];

const encs = ["gpt2", "cl100k_base"].map((n) => get_encoding(n));
const chunks = [];
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); chunks.push(b); };
chunks.push(Buffer.from("TKIDS1\0\0", "latin1"));
u32(texts.length + special.length);
const all = texts.map((t) => [0, t]).concat(special.map((t) => [1, t]));
for (const [mode, text] of all) {
  const bytes = Buffer.from(text, "utf8");
  u32(mode);
  u32(bytes.length);
  chunks.push(bytes);
  for (const enc of encs) {
    const ids = mode === 0 ? enc.encode_ordinary(text) : enc.encode(text, "all");
    u32(ids.length);
    const b = Buffer.alloc(4 * ids.length);
    ids.forEach((id, i) => b.writeUInt32LE(id, 4 * i));
    chunks.push(b);
  }
}
for (const enc of encs) enc.free();
writeFileSync(outPath, Buffer.concat(chunks));
console.log(`wrote ${all.length} texts to ${outPath}`);
