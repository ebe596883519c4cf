// tiktoken's side of bench/tokenizer_bench.sh (npm `tiktoken`: OpenAI's
// Rust tokenizer compiled to WASM).
//
//   node tokenizer_bench.mjs make-texts <tinyshakespeare.txt> <out dir>
//       writes english.txt (tinyshakespeare x5, ~5.6 MB) and
//       multilingual.txt (~2 MB: 12 languages, emoji with ZWJ sequences, code)
//   node tokenizer_bench.mjs run <npm prefix> <name>=<file> ...
//       prints "RESULT tiktoken.<encoding>.<name>.<metric> <MB/s>" for
//       encode on one thread (encode_ordinary), on all cores (one WASM
//       instance per worker thread over ~64 KiB pieces), and decode.
import { readFileSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

function loadTiktoken(npmDir) {
  const require = createRequire(resolve(npmDir, "node_modules", "x.js"));
  return require("tiktoken");
}

function pieces(text) { // ~64 KiB pieces cut after a newline, as the C side does
  const out = [];
  for (let i = 0; i < text.length;) {
    let j = Math.min(i + 65536, text.length);
    while (j < text.length && text[j - 1] !== "\n") j++;
    out.push(text.slice(i, j));
    i = j;
  }
  return out;
}

if (!isMainThread) {
  const { get_encoding } = loadTiktoken(workerData.npmDir);
  const enc = get_encoding(workerData.encoding);
  parentPort.on("message", (texts) => {
    for (const t of texts) enc.encode_ordinary(t);
    parentPort.postMessage("done");
  });
  parentPort.postMessage("ready");
} else {
  const [mode, ...args] = process.argv.slice(2);
  if (mode === "make-texts") {
    const [shakespearePath, outDir] = args;
    const s = readFileSync(shakespearePath, "utf8");
    writeFileSync(join(outDir, "english.txt"), s.repeat(5));
    const lines = [
      "Größenwahn und Übermut: Fußgängerübergänge in München, Zürich und Köln sind überfüllt.",
      "Le cœur a ses raisons que la raison ne connaît point. Où est l'hôtel? C'est déjà l'été.",
      "¿Dónde está la biblioteca? Mañana será otro día, señor Núñez; ¡qué alegría!",
      "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва — столица России.",
      "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε, τι κάνεις σήμερα;",
      "日本語のテキストです。東京は日本の首都です。ひらがな、カタカナ、漢字を混ぜて書きます。",
      "中文文本测试：我爱北京天安门。人工智能正在改变世界，机器学习模型越来越大。",
      "한국어 텍스트입니다. 안녕하세요, 세계! 다람쥐 헌 쳇바퀴에 타고파.",
      "مرحبا بالعالم. اللغة العربية جميلة جدا، وهي لغة رسمية في أكثر من عشرين دولة.",
      "नमस्ते दुनिया। हिन्दी एक भारतीय भाषा है जिसे करोड़ों लोग बोलते हैं।",
      "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
      "Tiếng Việt có dấu: Đường phố Hà Nội rất đông đúc vào giờ cao điểm.",
      "Emoji 😀😃😄 👍🏽👍🏿 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸🇯🇵🇩🇪 🧑🏿‍💻 ❤️‍🔥 🫠 👩🏻‍❤️‍💋‍👨🏼 1️⃣#️⃣",
      "for (int i = 0; i < n; i++) { sum += a[i] * b[i]; } // dot product, O(n)",
      "    def forward(self, x):\n        return self.proj(F.gelu(self.fc(x)))",
    ];
    let out = "", k = 0;
    while (out.length < 1_000_000) out += lines[(k++ * 7) % lines.length] + (k % 5 ? " " : "\n");
    writeFileSync(join(outDir, "multilingual.txt"), out);
  } else if (mode === "run") {
    const [npmDir, ...files] = args;
    const { get_encoding } = loadTiktoken(npmDir);
    const nWorkers = availableParallelism();
    for (const encoding of ["gpt2", "cl100k_base"]) {
      const enc = get_encoding(encoding);
      const workers = await Promise.all(Array.from({ length: nWorkers }, () => new Promise((res) => {
        const w = new Worker(new URL(import.meta.url), { workerData: { npmDir, encoding } });
        w.once("message", () => res(w));
      })));
      for (const spec of files) {
        const [name, path] = spec.split("=");
        const text = readFileSync(path, "utf8");
        const bytes = Buffer.byteLength(text, "utf8");
        let best = Infinity, ids;
        for (let r = 0; r < 3; r++) {
          const t0 = performance.now();
          ids = enc.encode_ordinary(text);
          best = Math.min(best, performance.now() - t0);
        }
        console.log(`RESULT tiktoken.${encoding}.${name}.tokens ${ids.length}`);
        console.log(`RESULT tiktoken.${encoding}.${name}.encode_1t ${(bytes / best / 1e3).toFixed(2)}`);
        const ps = pieces(text);
        best = Infinity;
        for (let r = 0; r < 3; r++) {
          const share = workers.map((_, i) => ps.filter((__, k) => k % nWorkers === i));
          const t0 = performance.now();
          await Promise.all(workers.map((w, i) => new Promise((res) => {
            w.once("message", res);
            w.postMessage(share[i]);
          })));
          best = Math.min(best, performance.now() - t0);
        }
        console.log(`RESULT tiktoken.${encoding}.${name}.encode_all ${(bytes / best / 1e3).toFixed(2)}`);
        best = Infinity;
        for (let r = 0; r < 5; r++) {
          const t0 = performance.now();
          enc.decode(ids);
          best = Math.min(best, performance.now() - t0);
        }
        console.log(`RESULT tiktoken.${encoding}.${name}.decode ${(bytes / best / 1e3).toFixed(2)}`);
      }
      for (const w of workers) await w.terminate();
      enc.free();
    }
  } else {
    console.error("usage: tokenizer_bench.mjs make-texts <shakespeare> <dir> | run <npm prefix> <name>=<file> ...");
    process.exit(2);
  }
}
