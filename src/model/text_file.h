#pragma once
// A text file as a tokenizer's ids, read only as far as the tokens asked for take.
//
// SentencePiece splits its input at spaces before it segments it (a piece never runs across a
// space: '▁' only begins a piece), so the ids of a prefix of the text that ends just before a
// space are exactly the first ids of the whole text's; the byte tokenizer has one id per
// byte. With max_tokens N > 0 the file is read in growing blocks, each prefix cut before its
// last space and encoded, until it gives at least N ids; the ids are cut to N. With N = 0
// the whole file is read, which may hold at most kMaxTextBytes.
//
// The bytes read must be UTF-8 (the error names the byte offset), and a run of more than
// kMaxWordBytes without a space is refused: SentencePiece segments it as one word, in memory
// that grows with its length.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/tokenizer.h"

namespace bitsim::model {

inline constexpr uint64_t kMaxTextBytes = uint64_t(64) << 20;
inline constexpr uint64_t kMaxWordBytes = uint64_t(1) << 20;

struct EncodedText {
  std::vector<int> ids;  // the text's ids (no BOS), at most max_tokens of them when it is given
  size_t read_tokens = 0;  // ids the bytes read encode to, before the cut to max_tokens
  uint64_t bytes = 0;    // bytes of the file the ids come from: a prefix, or the whole file
  bool whole = false;    // the whole file was read
  std::string sha256;    // of those bytes
};

// `what` names the file in errors ("text file"); `first_block` is the first read's size (the
// next ones double it): a parameter for the tests, which try small blocks.
EncodedText encode_text_file(const Tokenizer& tokenizer, const std::filesystem::path& path, const std::string& what,
                             size_t max_tokens, size_t first_block = size_t(1) << 16);

}  // namespace bitsim::model
