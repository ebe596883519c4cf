// Writes tiktoken's gpt2 and cl100k_base ranks, as shipped in the npm
// `tiktoken` package (encoders/*.json, "bpe_ranks" in js-tiktoken's
// compressed form: lines of "<marker> <first rank> <base64> <base64> ..."
// with consecutive ranks), to <out>/<name>.tiktoken in tiktoken's own
// file format ("<base64> <rank>" per line), plus <name>.special with
// "<id> <text>" per special token.
// usage: node dump_ranks.mjs <npm prefix> <out dir>
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [npmDir, outDir] = process.argv.slice(2);
for (const name of ["gpt2", "cl100k_base"]) {
  const enc = JSON.parse(readFileSync(join(npmDir, "node_modules/tiktoken/encoders", `${name}.json`), "utf8"));
  const lines = [];
  for (const row of enc.bpe_ranks.split("\n")) {
    if (!row) continue;
    const [, first, ...tokens] = row.split(" ");
    const base = Number.parseInt(first, 10);
    tokens.forEach((t, i) => lines.push(`${t} ${base + i}`));
  }
  writeFileSync(join(outDir, `${name}.tiktoken`), lines.join("\n") + "\n");
  const specials = Object.entries(enc.special_tokens).map(([text, id]) => `${id} ${text}`);
  writeFileSync(join(outDir, `${name}.special`), specials.join("\n") + "\n");
  console.log(`${name}: ${lines.length} ranks, ${specials.length} special tokens`);
}
