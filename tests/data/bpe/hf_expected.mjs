// The expected ids of tests/model/bpe_tokenizer_test.cpp, made with the independent JS
// implementation of Hugging Face tokenizers (npm @huggingface/tokenizers; not a dependency of
// bitsim). Run where that package is installed:
//   cd /tmp/hf && npm install @huggingface/tokenizers && node /path/to/tests/data/bpe/hf_expected.mjs
// It prints one line per fixture and text: the file, the text (JSON) and the ids.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(join(process.cwd(), "/"));
const { Tokenizer } = require("@huggingface/tokenizers");
const here = dirname(fileURLToPath(import.meta.url));

const texts = JSON.parse(process.argv[2] ?? "null") ?? [
  "Hello, world! \u65e5\u672c\u8a9e \u{1F642}",
  "The capital of France is Paris.",
  "They're here; I'M sure you'LL say it'd BE the best.",
  "1234567 people, 3.14159 and \u0663\u0664\u0665\u0666",
  "line one\r\n\n  indented\ttab   \n",
  "(hello) caf\u00e9 na\u00efve \u03a9mega!!\n\nx",
  "<|begin_of_text|>Hello<|eot_id|><|eot_id|> the<|end_of_text|>",
  "a <tool> b<tool>c",
  " xyz and xyzzy",
  "the  world   is",
  "tab   \nx",
];
for (const name of ["llama3-small.json", "gpt2-small.json"]) {
  const json = JSON.parse(readFileSync(join(here, name), "utf8"));
  const tok = new Tokenizer(json, {});
  for (const t of texts) {
    const ids = tok.encode(t, { add_special_tokens: false }).ids;
    console.log(`${name} ${JSON.stringify(t)} {${ids.join(", ")}}`);
  }
}
