// libFuzzer target: tokenizer input. Arbitrary bytes (not necessarily UTF-8) through the
// SentencePiece tokenizer of the real checkpoint (../shared/data/llama2-tokenizer.model,
// when present) and the byte-level tokenizer of synthetic models: encode, decode, the
// streaming decoder and piece() of every id. The byte-level tokenizer must round-trip
// exactly; every SentencePiece id must be inside its vocabulary.
#include <filesystem>
#include <memory>

#include "fuzz_common.h"
#include "model/tokenizer.h"

#ifndef BITSIM_SHARED_DATA_DIR
#define BITSIM_SHARED_DATA_DIR ""
#endif

namespace {

void exercise(const bitsim::model::Tokenizer& tok, const std::string& text) {
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
  if (tok.is_synthetic() && decoded != text) bitsim::fuzz::fail("byte-level tokenizer does not round-trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<bitsim::model::Tokenizer> spm = [] {
    const std::filesystem::path model = std::filesystem::path(BITSIM_SHARED_DATA_DIR) / "llama2-tokenizer.model";
    return std::filesystem::is_regular_file(model) ? bitsim::model::load_sentencepiece(model)
                                                   : std::unique_ptr<bitsim::model::Tokenizer>();
  }();
  static const std::unique_ptr<bitsim::model::Tokenizer> bytes = bitsim::model::make_byte_tokenizer(512);
  const std::string text(reinterpret_cast<const char*>(data), size);
  bitsim::fuzz::expect_only_bitsim_errors([&] {
    if (spm) exercise(*spm, text);
    exercise(*bytes, text);
  });
  return 0;
}
