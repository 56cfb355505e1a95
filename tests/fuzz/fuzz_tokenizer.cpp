// libFuzzer target: tokenizer input. Arbitrary bytes (not necessarily UTF-8) through the
// SentencePiece tokenizer of the real checkpoint (../shared/data/llama2-tokenizer.model,
// when present), the byte-level BPE of tests/data/bpe/llama3-small.json and the byte-level
// tokenizer of synthetic models: encode, decode, the streaming decoder and piece() of every
// id. The byte-level tokenizer must round-trip exactly, and the BPE for every text that holds
// no special token's content (docs/tokenizers.md); every id must be inside the vocabulary.
#include <filesystem>
#include <memory>

#include "fuzz_common.h"
#include "model/bpe_tokenizer.h"
#include "model/tokenizer.h"

#ifndef BITSIM_SHARED_DATA_DIR
#define BITSIM_SHARED_DATA_DIR ""
#endif
#ifndef BITSIM_SOURCE_DIR
#define BITSIM_SOURCE_DIR "."
#endif

namespace {

// Whether the BPE fixture must give `text` back: it holds none of its special tokens.
bool bpe_round_trips(const std::string& text) {
  for (const char* special : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"})
    if (text.find(special) != std::string::npos) return false;
  return true;
}

void exercise(const bitsim::model::Tokenizer& tok, const std::string& text, bool round_trips) {
  const std::vector<int> ids = tok.encode(text);
  for (int id : ids)
    if (id < 0 || id >= tok.vocab_size()) bitsim::fuzz::fail("encode gave an id outside the vocabulary");
  const std::string decoded = tok.decode(ids);
  bitsim::model::StreamDecoder stream(tok);
  std::string streamed;
  for (int id : ids) {
    streamed += stream.push(id);
    (void)tok.piece(id);
  }
  streamed += stream.flush();
  if (streamed != decoded) bitsim::fuzz::fail("streamed text differs from decode()");
  if (round_trips && decoded != text) bitsim::fuzz::fail("the tokenizer does not round-trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<bitsim::model::Tokenizer> spm = [] {
    const std::filesystem::path model = std::filesystem::path(BITSIM_SHARED_DATA_DIR) / "llama2-tokenizer.model";
    return std::filesystem::is_regular_file(model) ? bitsim::model::load_sentencepiece(model)
                                                   : std::unique_ptr<bitsim::model::Tokenizer>();
  }();
  static const std::unique_ptr<bitsim::model::Tokenizer> bytes = bitsim::model::make_byte_tokenizer(512);
  static const std::unique_ptr<bitsim::model::Tokenizer> bpe =
      bitsim::model::load_bpe_tokenizer(std::filesystem::path(BITSIM_SOURCE_DIR) / "tests/data/bpe/llama3-small.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    if (spm) exercise(*spm, text, false);
    exercise(*bytes, text, true);
    exercise(*bpe, text, bpe_round_trips(text));
  });
  return 0;
}
