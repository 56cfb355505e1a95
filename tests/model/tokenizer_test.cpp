#include "model/tokenizer.h"
#include "model/synthetic.h"

#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>


#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "support/temp_dir.h"

namespace bitsim::model {
namespace {

namespace fs = std::filesystem;

const std::string kMixed = "Hello, world! \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82";  // "Hello, world! 日本語 🙂"

fs::path shared_tokenizer() { return fs::path(BITSIM_SHARED_DATA_DIR) / "llama2-tokenizer.model"; }

#define REQUIRE_SHARED_TOKENIZER()                                                              \
  if (!fs::exists(shared_tokenizer()))                                                          \
  GTEST_SKIP() << "shared LLaMA-2 tokenizer not found at " << shared_tokenizer().string()       \
               << " (../shared/data beside the project root); SentencePiece checks skipped"

using TempDir = test::MadeTempDir;

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

// Streams ids one by one; checks every chunk is whole UTF-8 and returns the concatenation.
std::string stream_all(const Tokenizer& tok, const std::vector<int>& ids, std::vector<int> context = {}) {
  StreamDecoder sd(tok, std::move(context));
  std::string out;
  for (int id : ids) {
    const std::string chunk = sd.push(id);
    EXPECT_TRUE(valid_utf8(chunk)) << "broken UTF-8 chunk after id " << id;
    out += chunk;
  }
  out += sd.flush();
  return out;
}

TEST(ByteTokenizer, RoundTripUtf8) {
  const auto tok = make_byte_tokenizer(512);
  EXPECT_TRUE(tok->is_synthetic());
  EXPECT_EQ(tok->describe(), "byte-level (synthetic model)");
  EXPECT_EQ(tok->vocab_size(), 512);
  const auto ids = tok->encode(kMixed);
  ASSERT_EQ(ids.size(), kMixed.size());
  EXPECT_EQ(ids[0], 3 + 'H');
  EXPECT_EQ(ids.back(), 3 + 0x82);
  EXPECT_EQ(tok->decode(ids), kMixed);
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(ByteTokenizer, NonByteIdsPrintAsAngleId) {
  const auto tok = make_byte_tokenizer(300);
  EXPECT_EQ(tok->decode({0}), "<0>");
  EXPECT_EQ(tok->decode({1, 3 + 'a', 259, 3 + 'b', 299, 2}), "a<259>b<299>");  // BOS/EOS print ""
  EXPECT_EQ(tok->piece(3 + 'z'), "z");
  EXPECT_EQ(tok->piece(1), "");
  EXPECT_EQ(tok->piece(280), "<280>");
  EXPECT_THROW(tok->decode({300}), bitsim::Error);
  EXPECT_THROW(tok->decode({-1}), bitsim::Error);
  EXPECT_THROW(make_byte_tokenizer(258), bitsim::Error);
  EXPECT_NO_THROW(make_byte_tokenizer(259));
}

TEST(ByteTokenizer, StreamDecoderHoldsPartialUtf8) {
  const auto tok = make_byte_tokenizer(259);
  StreamDecoder sd(*tok);
  EXPECT_EQ(sd.push(3 + 'A'), "A");
  EXPECT_EQ(sd.push(3 + 0xF0), "");  // 🙂 = F0 9F 99 82
  EXPECT_EQ(sd.push(3 + 0x9F), "");
  EXPECT_EQ(sd.push(3 + 0x99), "");
  EXPECT_EQ(sd.push(3 + 0x82), "\xF0\x9F\x99\x82");
  EXPECT_EQ(sd.push(3 + 0xE6), "");
  EXPECT_EQ(sd.flush(), "\xE6");  // an unfinished sequence comes out at the end
  EXPECT_EQ(stream_all(*tok, tok->encode(kMixed)), kMixed);
}

// The real byte-level tokenizer, counting the windows the stream decoder asks it for.
class CountingTokenizer final : public Tokenizer {
 public:
  explicit CountingTokenizer(const Tokenizer& inner) : inner_(inner) {}
  std::vector<int> encode(const std::string& text) const override { return inner_.encode(text); }
  std::string decode(const std::vector<int>& ids) const override {
    ++decodes;
    return inner_.decode(ids);
  }
  std::string piece(int id) const override { return inner_.piece(id); }
  int vocab_size() const override { return inner_.vocab_size(); }
  std::string describe() const override { return inner_.describe(); }
  bool is_synthetic() const override { return inner_.is_synthetic(); }
  mutable int decodes = 0;

 private:
  const Tokenizer& inner_;
};

TEST(ByteTokenizer, StreamDecoderDecodesTheShownTextOncePerStep) {
  const auto bytes = make_byte_tokenizer(259);
  const CountingTokenizer tok(*bytes);
  StreamDecoder sd(tok);
  EXPECT_EQ(sd.push(3 + 'A'), "A");
  EXPECT_EQ(tok.decodes, 2);  // the shown text (empty), then the window with 'A'
  EXPECT_EQ(sd.push(3 + 0xF0), "");
  EXPECT_EQ(tok.decodes, 4);
  // Held: the offsets stay, so the shown text is not decoded again, only the new window.
  EXPECT_EQ(sd.push(3 + 0x9F), "");
  EXPECT_EQ(sd.push(3 + 0x99), "");
  EXPECT_EQ(tok.decodes, 6);
  EXPECT_EQ(sd.push(3 + 0x82), "\xF0\x9F\x99\x82");
  EXPECT_EQ(tok.decodes, 7);
  EXPECT_EQ(sd.flush(), "");
  EXPECT_EQ(tok.decodes, 9);
}

// A tiny SentencePiece model (BPE, byte fallback, LLaMA's special ids) trained in memory, so
// the SentencePiece path is tested even where the shared LLaMA-2 tokenizer is absent.
struct SentenceList : sentencepiece::SentenceIterator {
  std::vector<std::string> lines;
  size_t i = 0;
  bool done() const override { return i >= lines.size(); }
  void Next() override { ++i; }
  const std::string& value() const override { return lines[i]; }
  sentencepiece::util::Status status() const override { return {}; }
};

fs::path train_tiny_model(const fs::path& dir) {
  SentenceList corpus;
  for (int k = 0; k < 4; ++k)
    for (const char* line : {"Hello, world!", "The capital of France is Paris.",
                             "hello there, the world is big", "Paris is the capital"})
      corpus.lines.push_back(line);
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(
      "--model_type=bpe --vocab_size=300 --byte_fallback=true --character_coverage=1.0 "
      "--unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --hard_vocab_limit=false --minloglevel=2",
      &corpus, &proto);
  EXPECT_TRUE(st.ok()) << st.ToString();
  const fs::path file = dir / "tiny.model";
  std::ofstream(file, std::ios::binary) << proto;
  return file;
}

TEST(TinySentencePiece, RoundTripStreamingAndOutOfRangeIds) {
  TempDir dir;
  const fs::path file = train_tiny_model(dir.path);
  const auto tok = load_sentencepiece(file);
  EXPECT_EQ(tok->vocab_size(), 300);
  EXPECT_FALSE(tok->is_synthetic());
  EXPECT_EQ(tok->describe(), "sentencepiece: " + file.string());
  // CJK and the emoji are not pieces of this model: they go through byte fallback (ids 3 + b).
  const auto ids = tok->encode(kMixed);
  EXPECT_EQ(ids.back(), 3 + 0x82);
  EXPECT_EQ(tok->decode(ids), kMixed);
  EXPECT_EQ(stream_all(*tok, ids), kMixed);
  // Leading space after a context.
  const auto prompt = tok->encode("The capital of France is");
  const auto after = tok->encode("The capital of France is Paris.");
  ASSERT_GT(after.size(), prompt.size());
  ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), after.begin()));
  const std::vector<int> tail(after.begin() + std::ptrdiff_t(prompt.size()), after.end());
  EXPECT_EQ(stream_all(*tok, tail, prompt), " Paris.");
  EXPECT_EQ(tok->decode({300}), "<300>");
  EXPECT_EQ(tok->piece(-5), "<-5>");
  EXPECT_EQ(tok->piece(1), "");
  EXPECT_EQ(tok->piece(3 + 'x'), "x");
  // A folder holding tokenizer.model is picked up; the model vocabulary must cover its pieces.
  fs::copy_file(file, dir.path / "tokenizer.model");
  EXPECT_FALSE(select_tokenizer(std::nullopt, dir.path, 300)->is_synthetic());
  EXPECT_THROW(select_tokenizer(std::nullopt, dir.path, 299), bitsim::Error);
}

// A folder without tokenizer.model gets the byte tokenizer only when make-model wrote it; a
// trained checkpoint without its tokenizer is refused, naming the folder.
TEST(SelectTokenizer, OnlyASyntheticCheckpointFallsBackToBytes) {
  TempDir dir;
  const fs::path synthetic = dir.path / "synthetic", trained = dir.path / "trained";
  write_synthetic_checkpoint(Shape::Tiny, 1, synthetic);
  EXPECT_TRUE(select_tokenizer(std::nullopt, synthetic, 300)->is_synthetic());
  fs::create_directories(trained);
  const fs::path kjv = fs::path(BITSIM_SOURCE_DIR) / "models" / "kjv-ternary";
  fs::copy_file(kjv / "model.safetensors", trained / "model.safetensors");
  fs::copy_file(kjv / "config.json", trained / "config.json");
  try {
    select_tokenizer(std::nullopt, trained, 2048);
    ADD_FAILURE() << "a trained checkpoint was given the byte tokenizer";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model folder " + trained.string() + ": no tokenizer.model"),
              std::string::npos)
        << e.what();
  }
  // Given its tokenizer, in the folder or by the option, it runs.
  EXPECT_FALSE(select_tokenizer(kjv / "tokenizer.model", trained, 2048)->is_synthetic());
  fs::copy_file(kjv / "tokenizer.model", trained / "tokenizer.model");
  EXPECT_FALSE(select_tokenizer(std::nullopt, trained, 2048)->is_synthetic());
}

// Byte-fallback ids that no later byte can make valid UTF-8 decode to U+FFFD and are shown
// at once; a sequence that more bytes can complete is held until it is.
TEST(TinySentencePiece, StreamDecoderShowsBytesNoLaterByteCanComplete) {
  TempDir dir;
  const auto tok = load_sentencepiece(train_tiny_model(dir.path));
  const auto byte = [](int b) { return 3 + b; };  // <0xAB> is id 3 + 0xAB
  const std::string fffd = "\xEF\xBF\xBD";
  StreamDecoder sd(*tok);
  EXPECT_EQ(sd.push(byte('a')), "a");
  EXPECT_EQ(sd.push(byte(0x80)), fffd);  // a stray continuation byte
  EXPECT_EQ(sd.push(byte(0xFF)), fffd);  // never valid in UTF-8
  EXPECT_EQ(sd.push(byte(0xF0)), "");    // the start of a 4-byte sequence: held
  EXPECT_EQ(sd.push(byte(0x9F)), "");
  EXPECT_EQ(sd.push(byte(0x99)), "");
  EXPECT_EQ(sd.push(byte(0x82)), "\xF0\x9F\x99\x82");
  EXPECT_EQ(sd.push(byte(0xE6)), "");    // cut short by 'b': what it decodes to, at once
  const std::string cut = sd.push(byte('b'));
  EXPECT_EQ(cut, tok->decode({byte(0xE6), byte('b')}));
  EXPECT_EQ(sd.flush(), "");
  // Whatever the bytes, the stream is decode() of them all, in chunks.
  std::vector<int> ids;
  for (int b : {0x80, 0x80, 0xC3, 0xE6, 0x80, 0x41, 0xF5, 0xE6, 0x80, 0x80, 0xC0, 0xAF, 0xF0, 0x9F})
    ids.push_back(byte(b));
  EXPECT_EQ(stream_all(*tok, ids), tok->decode(ids));
}

TEST(SentencePiece, KnownEncodingsAndDecode) {
  REQUIRE_SHARED_TOKENIZER();
  const auto tok = load_sentencepiece(shared_tokenizer());
  EXPECT_FALSE(tok->is_synthetic());
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->describe(), "sentencepiece: " + shared_tokenizer().string());
  EXPECT_EQ(tok->encode("The capital of France is"), (std::vector<int>{450, 7483, 310, 3444, 338}));
  const std::vector<int> mixed = {15043, 29892, 3186, 29991, 29871, 30325, 30346,
                                  30968, 29871, 243,   162,   156,  133};
  EXPECT_EQ(tok->encode(kMixed), mixed);
  EXPECT_EQ(tok->decode(mixed), kMixed);
  EXPECT_EQ(tok->decode({450, 7483, 310, 3444, 338, 3681, 29889}), "The capital of France is Paris.");
  EXPECT_EQ(tok->decode({1, 450, 7483, 2}), "The capital");  // control ids print nothing
}

TEST(SentencePiece, PiecesAndIdsOutsideTheModel) {
  REQUIRE_SHARED_TOKENIZER();
  const auto tok = load_sentencepiece(shared_tokenizer());
  EXPECT_EQ(tok->piece(3681), " Paris");
  EXPECT_EQ(tok->piece(29889), ".");
  EXPECT_EQ(tok->piece(29871), " ");
  EXPECT_EQ(tok->piece(1), "");
  EXPECT_EQ(tok->piece(3 + 0x41), "A");  // <0x41>
  EXPECT_EQ(tok->piece(243), "\xF0");     // <0xF0>: a raw lead byte
  EXPECT_EQ(tok->piece(32001), "<32001>");
  // bitnet-large's <pad> 32000 and </line> 32001 are not in tokenizer.model.
  EXPECT_EQ(tok->decode({450, 7483, 32001, 310, 3444}), "The capital<32001> of France");
  EXPECT_EQ(tok->decode({32000}), "<32000>");
}

TEST(SentencePiece, StreamDecoderReproducesTextExactly) {
  REQUIRE_SHARED_TOKENIZER();
  const auto tok = load_sentencepiece(shared_tokenizer());
  const auto ids = tok->encode(kMixed);
  EXPECT_EQ(stream_all(*tok, ids), kMixed);
  // The emoji's 4 byte-fallback ids come out as one chunk, once complete.
  StreamDecoder sd(*tok);
  std::vector<std::string> chunks;
  for (int id : ids) chunks.push_back(sd.push(id));
  EXPECT_EQ(chunks.back(), "\xF0\x9F\x99\x82");
  EXPECT_EQ(chunks[chunks.size() - 2], "");
  EXPECT_EQ(chunks[0], "Hello");  // first piece of the stream: leading space dropped, as decode does
  EXPECT_EQ(chunks[2], " world");
}

TEST(SentencePiece, StreamDecoderAfterPromptKeepsLeadingSpace) {
  REQUIRE_SHARED_TOKENIZER();
  const auto tok = load_sentencepiece(shared_tokenizer());
  StreamDecoder sd(*tok, {1, 450, 7483, 310, 3444, 338});  // BOS + "The capital of France is"
  EXPECT_EQ(sd.push(3681), " Paris");
  EXPECT_EQ(sd.push(29889), ".");
  EXPECT_EQ(sd.push(2), "");  // EOS
  EXPECT_EQ(sd.flush(), "");
  // And the whole prompt + continuation streams back to decode(all).
  const std::vector<int> all = {450, 7483, 310, 3444, 338, 3681, 29889};
  EXPECT_EQ(stream_all(*tok, all), "The capital of France is Paris.");
}

TEST(TokenizerFiles, MissingOrGarbageFileIsErrorNamingTheFile) {
  TempDir dir;
  const fs::path missing = dir.path / "no-such-tokenizer.model";
  try {
    load_sentencepiece(missing);
    FAIL() << "missing file accepted";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
  const fs::path garbage = dir.path / "garbage.model";
  {
    std::ofstream f(garbage, std::ios::binary);
    f << "this is not a SentencePiece model \xFF\xFE\x01\x02 at all";
  }
  try {
    load_sentencepiece(garbage);
    FAIL() << "garbage file accepted";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find(garbage.string()), std::string::npos) << e.what();
  }
  // The override must load: a bad override is an error, never a silent fallback.
  EXPECT_THROW(select_tokenizer(garbage, std::nullopt, 32002), bitsim::Error);
}

TEST(TokenizerFiles, SelectFallsBackToByteLevel) {
  TempDir dir;
  auto tok = select_tokenizer(std::nullopt, std::nullopt, 512);
  EXPECT_TRUE(tok->is_synthetic());
  write_synthetic_checkpoint(Shape::Tiny, 1, dir.path / "m");
  tok = select_tokenizer(std::nullopt, dir.path / "m", 512);  // a synthetic folder without tokenizer.model
  EXPECT_TRUE(tok->is_synthetic());
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_THROW(select_tokenizer(std::nullopt, dir.path / "m", 100), bitsim::Error);
}

TEST(TokenizerFiles, SelectPrefersOverrideThenFolder) {
  REQUIRE_SHARED_TOKENIZER();
  TempDir dir;
  fs::copy_file(shared_tokenizer(), dir.path / "tokenizer.model");
  auto tok = select_tokenizer(std::nullopt, dir.path, 32002);
  EXPECT_FALSE(tok->is_synthetic());
  EXPECT_EQ(tok->describe(), "sentencepiece: " + (dir.path / "tokenizer.model").string());
  tok = select_tokenizer(shared_tokenizer(), dir.path, 32002);
  EXPECT_EQ(tok->describe(), "sentencepiece: " + shared_tokenizer().string());
  // 32000 pieces cannot serve a model of 512 ids.
  EXPECT_THROW(select_tokenizer(shared_tokenizer(), std::nullopt, 512), bitsim::Error);
}

}  // namespace
}  // namespace bitsim::model
