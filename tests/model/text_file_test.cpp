// A text read only as far as its tokens take (model/text_file.h): the ids of the prefix are
// the whole text's first ids, the bytes are UTF-8, and nothing grows with the file's size.
#include "model/text_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "base/file_io.h"
#include "base/sha256.h"
#include "support/run_argv.h"
#include "support/temp_dir.h"

namespace {

using namespace bitsim;
namespace fs = std::filesystem;

const fs::path kModel = fs::path(BITSIM_SOURCE_DIR) / "models" / "kjv-ternary";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TextFile, APrefixGivesTheWholeTextsFirstIds) {
  const auto tok = model::load_sentencepiece(kModel / "tokenizer.model");
  const fs::path text = kModel / "test.txt";
  const std::string all = io::read_file(text, "text", model::kMaxTextBytes);
  const std::vector<int> whole = tok->encode(all);
  for (size_t n : {1u, 17u, 256u, 1000u, 5000u, 20000u}) {
    for (size_t block : {64u, 4096u, 65536u}) {
      const model::EncodedText t = model::encode_text_file(*tok, text, "text file", n, block);
      ASSERT_EQ(t.ids.size(), n);
      EXPECT_TRUE(std::equal(t.ids.begin(), t.ids.end(), whole.begin())) << n << " tokens, blocks of " << block;
      if (n <= 1000) EXPECT_FALSE(t.whole) << n << " tokens read the whole text";
      EXPECT_EQ(t.whole, t.bytes == all.size());
      EXPECT_EQ(t.sha256, sha256_hex(std::string_view(all).substr(0, t.bytes)));
    }
  }
  // More tokens than the text has, or none asked for: the whole text.
  for (size_t n : {size_t(0), whole.size() + 1}) {
    const model::EncodedText t = model::encode_text_file(*tok, text, "text file", n, 4096);
    EXPECT_EQ(t.ids, whole);
    EXPECT_TRUE(t.whole);
    EXPECT_EQ(t.bytes, all.size());
    EXPECT_EQ(t.sha256, sha256_hex(all));
  }
}

TEST(TextFile, BytesThatAreNotUtf8AreNamedByTheirOffset) {
  test::MadeTempDir d;
  const auto tok = model::make_byte_tokenizer(512);
  const fs::path f = d.path / "t.txt";
  // A two-byte character across the first block's end is one character, not an error.
  std::ofstream(f, std::ios::binary) << "abc\xc3\xa9 de";
  EXPECT_EQ(model::encode_text_file(*tok, f, "text file", 0, 4).ids.size(), 8u);
  EXPECT_EQ(model::encode_text_file(*tok, f, "text file", 3, 4).ids.size(), 3u);
  std::ofstream(f, std::ios::binary) << std::string(5000, 'a') + " b\xff";
  for (size_t n : {0u, 2u, 10000u})
    EXPECT_EQ(error_of([&] { model::encode_text_file(*tok, f, "text file", n, 64); }),
              "text file " + f.string() + ": byte offset 5002 (0xff) is not UTF-8")
        << n;
  std::ofstream(f, std::ios::binary) << "ok \xe2\x82";  // cut short by the end of the file
  EXPECT_NE(error_of([&] { model::encode_text_file(*tok, f, "text file", 0); }).find("byte offset 3 (0xe2)"),
            std::string::npos);
}

// A gigabyte without a space, and 70 MB of prose asked for 10 tokens, then for all of it.
TEST(TextFile, EvalReadsOnlyWhatItsTokensTakeInBoundedMemory) {
  test::MadeTempDir d;
  {
    std::ofstream(d.path / "nul.txt") << "";
    fs::resize_file(d.path / "nul.txt", uintmax_t(1) << 30);
    const std::string prose = io::read_file(kModel / "test.txt", "text", model::kMaxTextBytes);
    std::ofstream big(d.path / "big.txt", std::ios::binary);
    for (size_t n = 0; n < (size_t(70) << 20); n += prose.size()) big << prose;
  }
  const auto nul = bitsim::testing::run_argv(
      {BITSIM_BINARY, "eval", "--model", kModel.string(), "--text", "nul.txt", "--tokens", "10"}, d.path, d.path);
  EXPECT_EQ(nul.code, 2) << nul.err;
  EXPECT_NE(nul.err.find("nul.txt: 1048577 bytes from byte offset 0 hold no space"), std::string::npos) << nul.err;
  EXPECT_LT(nul.peak_kb, 256 * 1024) << "peak " << nul.peak_kb << " KiB";
  const auto big = bitsim::testing::run_argv(
      {BITSIM_BINARY, "eval", "--model", kModel.string(), "--text", "big.txt", "--tokens", "10", "--window", "10", "--json"}, d.path,
      d.path);
  EXPECT_EQ(big.code, 0) << big.err;
  EXPECT_NE(big.out.find("\"text_bytes\": 65"), std::string::npos) << big.out.substr(0, 800);
  EXPECT_LT(big.peak_kb, 256 * 1024) << "peak " << big.peak_kb << " KiB";
  // The whole of it is more than eval reads without --tokens.
  const auto all = bitsim::testing::run_argv(
      {BITSIM_BINARY, "eval", "--model", kModel.string(), "--text", "big.txt"}, d.path, d.path);
  EXPECT_EQ(all.code, 2) << all.err;
  EXPECT_NE(all.err.find("more than 67108864 bytes; give a number of tokens"), std::string::npos) << all.err;
}

}  // namespace
