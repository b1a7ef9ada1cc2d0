// Exact o200k_base token counts for benchmarks/tokens.py, offline.
//
// Usage: node benchmarks/count_tokens.mjs <node_modules directory>  (stdin: a JSON array of strings)
// Prints one JSON object: {"tokenizer", "version", "encoding", "node", "counts": [one count per string, in order]}.
//
// The tokenizer is the npm package gpt-tokenizer, pinned in tests/node/package.json and installed by
// scripts/setup-node.sh; its o200k_base merge ranks ship inside the package, so nothing is downloaded here.
// Every string is counted as ordinary text: a special-token spelling such as "<|endoftext|>" inside it counts
// as the ordinary tokens of those characters (tiktoken's encode_ordinary), never as one special token and
// never as an error.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const modules = process.argv[2];
if (!modules) {
  process.stderr.write("usage: count_tokens.mjs <node_modules directory> < texts.json\n");
  process.exit(2);
}
// Resolve the package from the given node_modules, as code in that directory's package would.
const require = createRequire(join(resolve(modules), "..", "package.json"));
let tokenizer;
let version;
try {
  tokenizer = require("gpt-tokenizer/encoding/o200k_base");
  version = require("gpt-tokenizer/package.json").version;
} catch (error) {
  process.stderr.write(`count_tokens.mjs: cannot load gpt-tokenizer from ${modules}: ${error.message}\n`);
  process.exit(3);
}

const texts = JSON.parse(readFileSync(0, "utf8"));
if (!Array.isArray(texts) || !texts.every((text) => typeof text === "string")) {
  process.stderr.write("count_tokens.mjs: stdin must be a JSON array of strings\n");
  process.exit(2);
}
const ordinary = { disallowedSpecial: new Set() };
const counts = texts.map((text) => tokenizer.countTokens(text, ordinary));
const reply = { tokenizer: "gpt-tokenizer", version, encoding: "o200k_base", node: process.version, counts };
process.stdout.write(JSON.stringify(reply) + "\n");
