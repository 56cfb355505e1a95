#include "model/bpe_tokenizer.h"
#include "model/synthetic.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/utf8.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace bitsim::model {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Ids = std::vector<int>;
using Pieces = std::vector<std::string_view>;

// The fixtures (tests/data/bpe/make_fixtures.py): the 256 byte characters as ids 0..255 in
// byte order, 107 merges (ids 256..362), "Ġxyz" 363 that no merge makes, added tokens at
// 400..403. llama3-small: Llama-3's Split then ByteLevel, "a b" merges, ignore_merges, the
// special tokens <|begin_of_text|> 400, <|end_of_text|> 401, <|eot_id|> 402 and the
// non-special <tool> 403. gpt2-small: ByteLevel's own split, [a, b] merges, <|endoftext|> 400.
fs::path fixture(const char* name) { return fs::path(BITSIM_SOURCE_DIR) / "tests" / "data" / "bpe" / name; }
const fs::path kLlama3 = fixture("llama3-small.json");
const fs::path kGpt2 = fixture("gpt2-small.json");

// ---------------------------------------------------------------------------------------
// The split, worked by hand from the patterns (docs/tokenizers.md).

TEST(BpeSplit, Llama3PatternByHand) {
  // "Hello" letters; "," punctuation alone (a space follows); " world" a space before
  // letters; " " the run of one space before a digit; "123" "4" digits by threes; " (" a
  // space and punctuation ("hi" are letters); ")\r\n" punctuation takes the line end; of
  // the two spaces before "x" the last goes with it.
  EXPECT_EQ(split_text("Hello, world! 1234 (hi)\r\n  x", SplitPattern::Llama3),
            (Pieces{"Hello", ",", " world", "!", " ", "123", "4", " (", "hi", ")\r\n", " ", " x"}));
  // GPT-2's: digits in one run with a space before them, ")" alone, the line end's run
  // without its last space.
  EXPECT_EQ(split_text("Hello, world! 1234 (hi)\r\n  x", SplitPattern::Gpt2),
            (Pieces{"Hello", ",", " world", "!", " 1234", " (", "hi", ")", "\r\n ", " x"}));
  // One character that is no letter, number or line end goes with the letters after it; two
  // do not (they are a run of punctuation).
  EXPECT_EQ(split_text("(hello)\"x,y", SplitPattern::Llama3), (Pieces{"(hello", ")\"", "x", ",y"}));
  // \s*[\r\n]+ takes spaces up to the last line end; \s+(?!\S) leaves the last space.
  EXPECT_EQ(split_text("a \n \n  b  ", SplitPattern::Llama3), (Pieces{"a", " \n \n", " ", " b", "  "}));
  EXPECT_EQ(split_text("", SplitPattern::Llama3), Pieces{});
}

TEST(BpeSplit, ContractionsIgnoreCaseOnlyInLlama3) {
  // (?i:...): 'S, 'LL and 'ſ (U+017F, whose case folding is s) are contractions.
  EXPECT_EQ(split_text("it'S'\xC5\xBF'LL", SplitPattern::Llama3), (Pieces{"it", "'S", "'\xC5\xBF", "'LL"}));
  EXPECT_EQ(split_text("it'S'\xC5\xBF'LL", SplitPattern::Gpt2),
            (Pieces{"it", "'", "S", "'", "\xC5\xBF", "'", "LL"}));
  EXPECT_EQ(split_text("we've", SplitPattern::Gpt2), (Pieces{"we", "'ve"}));
}

TEST(BpeSplit, BytesThatAreNotUtf8AreCharactersOfTheirOwn) {
  // 0xFF 0xFE never occur in UTF-8; E6 97 is 日 cut short; 0x80 a stray continuation byte:
  // each is a character that is neither letter, number nor space.
  EXPECT_EQ(split_text("a\xFF\xFE" "b \x80", SplitPattern::Llama3), (Pieces{"a", "\xFF\xFE", "b", " \x80"}));
  EXPECT_EQ(split_text("a\xFF" "b", SplitPattern::Llama3), (Pieces{"a", "\xFF" "b"}));
  EXPECT_EQ(split_text("a\xFF" "b", SplitPattern::Gpt2), (Pieces{"a", "\xFF", "b"}));
  EXPECT_EQ(split_text("\xE6\x97x1", SplitPattern::Llama3), (Pieces{"\xE6\x97", "x", "1"}));
  // Non-ASCII letters and numbers: Ω is a letter, the Arabic-Indic digits ٣٤٥٦ numbers.
  EXPECT_EQ(split_text("\xCE\xA9x \xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6", SplitPattern::Llama3),
            (Pieces{"\xCE\xA9x", " ", "\xD9\xA3\xD9\xA4\xD9\xA5", "\xD9\xA6"}));
}

TEST(BpeSplit, ByteAlphabetIsGpt2s) {
  EXPECT_EQ(byte_char('A'), "A");
  EXPECT_EQ(byte_char(0x00), "\xC4\x80");  // U+0100 Ā: the first byte outside the printable sets
  EXPECT_EQ(byte_char(' '), "\xC4\xA0");   // U+0120 Ġ
  EXPECT_EQ(byte_char('\n'), "\xC4\x8A");  // U+010A Ċ
  EXPECT_EQ(byte_char(0xAD), "\xC5\x83");  // U+0143 Ń: the 68th and last
  EXPECT_EQ(byte_char(0xE9), "\xC3\xA9");  // é stands for itself
}

// ---------------------------------------------------------------------------------------
// Encodings.

struct Expected {
  const char* text;
  Ids llama3, gpt2;
};

// The ids were made with the independent JS implementation of Hugging Face tokenizers (npm
// @huggingface/tokenizers 0.2.0, `new Tokenizer(json, {})`, encode(text, {add_special_tokens:
// false})) by tests/data/bpe/hf_expected.mjs, on the same fixture files.
//
// Worked by hand (gpt2-small, no ignore_merges): "1234567" is one piece; its symbols 1 2 3 4 5
// 6 7 merge by rank: "1 2" (rank 90, id 345) -> 12 3 4 5 6 7; "12 3" (91) -> 123 4 5 6 7;
// "4 5" (92) -> 123 45 6 7; "45 6" (93) -> 123 456 7; "123 456" (94, id 350) -> 123456 7:
// ids {350, 55} ('7' is byte 0x37 = 55). llama3-small cuts it into "123" "456" "7" first:
// {347, 349, 55}. " the": Ġ t h e -> "h e" (rank 0, id 256) -> Ġ t he -> "Ġ t" (1, 257) ->
// Ġt he -> "Ġt he" (2) -> Ġthe, id 258.
const std::vector<Expected> kExpected = {
    {"Hello, world! \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82",
     {293, 44, 266, 33, 306, 158, 32, 240, 159, 153, 130},
     {293, 44, 266, 33, 306, 158, 32, 240, 159, 153, 130}},
    {"The capital of France is Paris.",
     {271, 321, 282, 32, 70, 114, 270, 99, 101, 267, 32, 80, 97, 114, 105, 115, 46},
     {271, 321, 282, 32, 70, 114, 270, 99, 101, 267, 32, 80, 97, 114, 105, 115, 46}},
    {"They're here; I'M sure you'LL say it'd BE the best.",
     {271, 121, 39, 262, 344, 59, 32, 73, 39, 77, 314, 331, 354, 316, 277, 39, 100, 32, 66, 69, 258, 326, 46},
     {271, 121, 39, 262, 344, 59, 32, 73, 39, 77, 314, 331, 39, 76, 76, 316, 277, 39, 100, 32, 66, 69, 258, 326, 46}},
    {"1234567 people, 3.14159 and \xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6",
     {347, 349, 55, 337, 44, 32, 51, 46, 49, 52, 49, 53, 57, 286, 32, 217, 163, 217, 164, 217, 165, 217, 166},
     {350, 55, 337, 44, 32, 51, 46, 49, 52, 49, 53, 57, 286, 32, 217, 163, 217, 164, 217, 165, 217, 166}},
    {"line one\r\n\n  indented\ttab   \n",
     {108, 105, 110, 101, 281, 110, 101, 13, 358, 32, 259, 110, 100, 101, 110, 116, 101, 100, 9, 116, 97, 98, 357},
     {108, 105, 110, 101, 281, 110, 101, 13, 358, 32, 259, 110, 100, 101, 110, 116, 101, 100, 9, 116, 97, 98, 357}},
    {"(hello) caf\xC3\xA9 na\xC3\xAFve \xCE\xA9mega!!\n\nx",
     {352, 41, 324, 342, 32, 206, 169, 109, 101, 103, 97, 362, 120},
     {40, 256, 291, 41, 324, 342, 32, 206, 169, 109, 101, 103, 97, 360, 10, 10, 120}},
    {"<|begin_of_text|>Hello<|eot_id|><|eot_id|> the<|end_of_text|>",
     {400, 293, 402, 402, 258, 401},
     {60,  124, 98,  101, 103, 105, 110, 95,  111, 102, 95,  116, 101, 120, 116, 124, 62, 293,
      60,  124, 101, 111, 116, 95,  105, 100, 124, 62,  60,  124, 101, 111, 116, 95,  105, 100,
      124, 62,  258, 60,  124, 101, 110, 100, 95,  111, 102, 95,  116, 101, 120, 116, 124, 62}},
    {"a <tool> b<tool>c", {97, 32, 403, 268, 403, 99}, {97, 32, 60, 116, 111, 111, 108, 62, 268, 60, 116, 111, 111, 108, 62, 99}},
    {" xyz and xyzzy", {363, 286, 32, 120, 121, 122, 122, 121}, {32, 120, 121, 122, 286, 32, 120, 121, 122, 122, 121}},
    {"the  world   is", {116, 256, 32, 266, 355, 267}, {116, 256, 32, 266, 355, 267}},
    {"tab   \nx", {116, 97, 98, 357, 120}, {116, 97, 98, 356, 10, 120}},
};

TEST(BpeTokenizer, MatchesHuggingFaceTokenizersOnBothFixtures) {
  const auto llama3 = load_bpe_tokenizer(kLlama3);
  const auto gpt2 = load_bpe_tokenizer(kGpt2);
  for (const Expected& e : kExpected) {
    EXPECT_EQ(llama3->encode(e.text), e.llama3) << "llama3-small: " << e.text;
    EXPECT_EQ(gpt2->encode(e.text), e.gpt2) << "gpt2-small: " << e.text;
  }
  EXPECT_EQ(llama3->vocab_size(), 404);
  EXPECT_EQ(gpt2->vocab_size(), 401);
  EXPECT_EQ(llama3->describe(), "bpe: " + kLlama3.string());
  EXPECT_FALSE(llama3->is_synthetic());
  EXPECT_TRUE(llama3->encode("").empty());
}

TEST(BpeTokenizer, IgnoreMergesTakesAWholePieceFromTheVocabulary) {
  // "Ġxyz" (363) is in the vocabulary but no merge makes it: only ignore_merges finds it.
  EXPECT_EQ(load_bpe_tokenizer(kLlama3)->encode(" xyz"), (Ids{363}));
  EXPECT_EQ(load_bpe_tokenizer(kGpt2)->encode(" xyz"), (Ids{32, 120, 121, 122}));
}

TEST(BpeTokenizer, SpecialTokensInThePromptAndTheirText) {
  const auto tok = load_bpe_tokenizer(kLlama3);
  // Matched anywhere, also inside a word and back to back; a special token decodes to ""
  // (as SentencePiece's control pieces), the non-special <tool> to its content.
  EXPECT_EQ(tok->encode("x<|eot_id|><|eot_id|>y"), (Ids{120, 402, 402, 121}));
  EXPECT_EQ(tok->decode({400, 293, 402, 258, 401}), "Hello the");
  EXPECT_EQ(tok->piece(402), "");
  EXPECT_EQ(tok->decode(tok->encode("a <tool> b<tool>c")), "a <tool> b<tool>c");
  // A cut-off special token is plain text.
  EXPECT_EQ(tok->decode(tok->encode("<|eot_id|")), "<|eot_id|");
  EXPECT_EQ(tok->encode("<|eot_id|").size(), 9u);
}

TEST(BpeTokenizer, PiecesOfIdsWithoutATokenAndOutside) {
  const auto tok = load_bpe_tokenizer(kLlama3);
  EXPECT_EQ(tok->piece(258), " the");
  EXPECT_EQ(tok->piece(0xE6), "\xE6");  // a byte token: the raw byte
  EXPECT_EQ(tok->piece(380), "<380>");  // 364..399 have no token
  EXPECT_EQ(tok->piece(404), "<404>");
  EXPECT_EQ(tok->piece(-1), "<-1>");
  EXPECT_EQ(tok->decode({293, 380, 258}), "Hello<380> the");
}

// Random byte strings (most of them not UTF-8) and random texts built from the pieces the
// patterns care about: decode(encode(x)) == x.
TEST(BpeTokenizer, RoundTripsEveryByteString) {
  const auto llama3 = load_bpe_tokenizer(kLlama3);
  const auto gpt2 = load_bpe_tokenizer(kGpt2);
  std::mt19937 rng(58);
  const std::vector<std::string> parts = {"a", "Z", "the", " ", "  ", "\r\n", "\n", "\t", "'s", "'LL", "'\xC5\xBF",
                                          "1", "12345", "\xD9\xA3", "!", "(", "\xE6\x97\xA5", "\xF0\x9F\x99\x82",
                                          "\xCE\xA9", "<tool>", "<|eot", "\xC2\x85", "\xEF\xBB\xBF", "\xFF", "\x80"};
  for (int n = 0; n < 3000; ++n) {
    std::string x;
    const int len = int(rng() % 48);
    for (int k = 0; k < len; ++k)
      x += n % 2 ? std::string(1, char(rng() % 256)) : parts[rng() % parts.size()];
    ASSERT_EQ(llama3->decode(llama3->encode(x)), x) << "llama3-small, case " << n;
    ASSERT_EQ(gpt2->decode(gpt2->encode(x)), x) << "gpt2-small, case " << n;
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  EXPECT_EQ(llama3->decode(llama3->encode(all)), all);
}

// ---------------------------------------------------------------------------------------
// Streaming.

TEST(BpeTokenizer, StreamDecoderPrintsCharactersSplitAcrossIds) {
  const auto tok = load_bpe_tokenizer(kLlama3);
  const std::string text = kExpected[0].text;  // "... 日本語 🙂"
  const Ids ids = tok->encode(text);
  // 306 is " 日本" and the first two bytes of 語 (E8 AA), 158 its last byte (9E): a
  // character across two ids.
  ASSERT_EQ(tok->piece(306), " \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA");
  ASSERT_EQ(tok->piece(158), "\x9E");
  StreamDecoder sd(*tok, {400});
  std::vector<std::string> chunks;
  for (int id : ids) chunks.push_back(sd.push(id));
  chunks.push_back(sd.flush());
  std::string joined;
  for (const std::string& c : chunks) {
    EXPECT_FALSE(first_invalid_utf8(c)) << "a chunk that is not whole UTF-8";
    joined += c;
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(chunks[4], "");                            // held: 語 is not complete
  EXPECT_EQ(chunks[5], " \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E");  // printed whole with its last bytes
  EXPECT_EQ(chunks[10], "\xF0\x9F\x99\x82");           // 🙂: four byte tokens, printed once complete
  // A byte that no later byte can complete is printed at once; a special id prints nothing.
  StreamDecoder sd2(*tok);
  EXPECT_EQ(sd2.push(0xFF), "\xFF");
  EXPECT_EQ(sd2.push(402), "");
  EXPECT_EQ(sd2.push(293), "Hello");
}

// ---------------------------------------------------------------------------------------
// Bad files: exit-2 class errors naming the file and the field.

class BpeBadFile : public ::testing::Test {
 protected:
  // The message of loading llama3-small.json after `edit`.
  std::string error_after(const std::function<void(Json&)>& edit) {
    std::ifstream in(kLlama3);
    Json j = Json::parse(in);
    edit(j);
    const fs::path file = dir_.path / "tokenizer.json";
    std::ofstream(file) << j.dump();
    return error_of_file(file);
  }
  std::string error_of_text(const std::string& text) {
    const fs::path file = dir_.path / "tokenizer.json";
    std::ofstream(file) << text;
    return error_of_file(file);
  }
  static std::string error_of_file(const fs::path& file) {
    const std::string e = test::error_of([&] { load_bpe_tokenizer(file); });
    EXPECT_EQ(e.rfind(file.string() + ": ", 0), 0u) << "the message does not start with the file: " << e;
    return e;
  }
  test::MadeTempDir dir_;
};

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST_F(BpeBadFile, MergesNamingUnknownTokensOrListedTwice) {
  EXPECT_HAS(error_after([](Json& j) { j["model"]["merges"].push_back("q zz"); }),
             "model.merges[107]: the token \"zz\" is not in model.vocab");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["merges"].push_back("x q"); }),
             "model.merges[107]: the merged token \"xq\" is not in model.vocab");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["merges"].push_back("h e"); }),
             "model.merges[107]: the pair \"h\" \"e\" is merged already by model.merges[0]");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["merges"][3] = "he"; }),
             "model.merges[3]: \"he\" is not two tokens separated by one space");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["merges"][3] = Json::array({"h"}); }), "model.merges[3]: expected");
}

TEST_F(BpeBadFile, MissingFields) {
  EXPECT_HAS(error_after([](Json& j) { j["model"].erase("vocab"); }), "model.vocab: missing");
  EXPECT_HAS(error_after([](Json& j) { j["model"].erase("merges"); }), "model.merges: missing");
  EXPECT_HAS(error_after([](Json& j) { j["model"].erase("type"); }), "model.type: missing");
  EXPECT_HAS(error_after([](Json& j) { j.erase("model"); }), "model: missing");
  EXPECT_HAS(error_after([](Json& j) { j.erase("pre_tokenizer"); }), "pre_tokenizer: missing");
  EXPECT_HAS(error_after([](Json& j) { j.erase("decoder"); }), "decoder: missing");
  EXPECT_HAS(error_after([](Json& j) { j["added_tokens"][1].erase("content"); }), "added_tokens[1].content: missing");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["vocab"].erase("\xC4\xA0"); }),
             "model.vocab: has no token \"\xC4\xA0\" for byte 0x20");
}

TEST_F(BpeBadFile, ContradictingFields) {
  EXPECT_HAS(error_after([](Json& j) { j["model"]["vocab"]["zz"] = 5; }), "is also the id of");
  EXPECT_HAS(error_after([](Json& j) { j["added_tokens"][0]["id"] = 65; }),
             "added_tokens[0]: id 65 is \"A\" in model.vocab, not \"<|begin_of_text|>\"");
  EXPECT_HAS(error_after([](Json& j) { j["added_tokens"][1]["content"] = "A"; }),
             "added_tokens[1]: content \"A\" is token 65 of model.vocab, not 401");
  EXPECT_HAS(error_after([](Json& j) { j["added_tokens"][1]["id"] = 400; }), "is already added_tokens[0]'s");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["vocab"]["A"] = -3; }), "model.vocab[\"A\"]: expected a token id");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["unk_token"] = "<unk>"; }), "model.unk_token");
}

TEST_F(BpeBadFile, SettingsOutsideWhatIsRead) {
  EXPECT_HAS(error_after([](Json& j) { j["model"]["type"] = "WordPiece"; }), "model.type: \"WordPiece\"");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["byte_fallback"] = true; }), "model.byte_fallback");
  EXPECT_HAS(error_after([](Json& j) { j["model"]["dropout"] = 0.1; }), "model.dropout");
  EXPECT_HAS(error_after([](Json& j) { j["normalizer"] = Json{{"type", "NFC"}}; }), "normalizer: only null");
  EXPECT_HAS(error_after([](Json& j) { j["decoder"]["type"] = "Metaspace"; }), "decoder.type");
  EXPECT_HAS(error_after([](Json& j) { j["added_tokens"][2]["lstrip"] = true; }), "added_tokens[2].lstrip");
  EXPECT_HAS(error_after([](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+"; }),
             "pre_tokenizer.pretokenizers[0].pattern.Regex: \"\\\\s+\" is not one of the patterns");
  EXPECT_HAS(error_after([](Json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; }),
             "pre_tokenizer.pretokenizers[1].add_prefix_space");
  EXPECT_HAS(error_after([](Json& j) { j["pre_tokenizer"] = Json{{"type", "Whitespace"}}; }),
             "pre_tokenizer.type: \"Whitespace\"");
  EXPECT_HAS(error_after([](Json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }), "has no ByteLevel");
}

TEST_F(BpeBadFile, NotJsonOrAKeyTwice) {
  EXPECT_HAS(error_of_text("{\"model\": "), "not a JSON document");
  EXPECT_HAS(error_of_text("[1, 2]"), "(top level): expected an object");
  EXPECT_HAS(error_of_text("{\"model\": {}, \"model\": {}}"), "appears twice");
  EXPECT_HAS(test::error_of([&] { load_bpe_tokenizer(dir_.path / "absent.json"); }), "absent.json");
}

// ---------------------------------------------------------------------------------------
// Choosing the tokenizer.

TEST(BpeSelect, FolderTokenizerJsonWhenNoTokenizerModel) {
  test::MadeTempDir dir;
  const fs::path folder = dir.path / "m";
  write_synthetic_checkpoint(Shape::Tiny, 1, folder);
  fs::copy_file(kLlama3, folder / "tokenizer.json");
  EXPECT_EQ(select_tokenizer(std::nullopt, folder, 512)->describe(), "bpe: " + (folder / "tokenizer.json").string());
  // tokenizer.model first, as before.
  const fs::path kjv = fs::path(BITSIM_SOURCE_DIR) / "models" / "kjv-ternary" / "tokenizer.model";
  fs::copy_file(kjv, folder / "tokenizer.model");
  EXPECT_EQ(select_tokenizer(std::nullopt, folder, 2048)->describe(), "sentencepiece: " + (folder / "tokenizer.model").string());
  // An override ending in .json is a tokenizer.json.
  EXPECT_EQ(select_tokenizer(kGpt2, folder, 512)->describe(), "bpe: " + kGpt2.string());
}

TEST(BpeSelect, VocabularyLargerThanTheEmbeddingIsRefused) {
  // llama3-small has 404 ids (up to <tool> 403): a model of 403 embedding rows cannot take them.
  EXPECT_HAS(test::error_of([] { select_tokenizer(kLlama3, std::nullopt, 403); }),
             kLlama3.string() + " has 404 tokens, more than the model's vocabulary of 403");
  EXPECT_EQ(select_tokenizer(kLlama3, std::nullopt, 404)->vocab_size(), 404);
}

}  // namespace
}  // namespace bitsim::model
