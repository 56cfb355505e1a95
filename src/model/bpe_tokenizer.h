#pragma once
// The byte-level BPE tokenizer of a Hugging Face tokenizer.json (BitNet b1.58 2B4T, Llama-3,
// GPT-2): the model's vocab and merges, the pre-tokenizer's split, the added (special) tokens
// matched in the text, the ByteLevel decoder. What is read, what is refused and why:
// docs/tokenizers.md.
//
// Encoding, in HF tokenizers' order:
//   1. the added tokens are cut out of the text (leftmost-longest; those with
//      "normalized": false first, then the others in what remains); each is its own id;
//   2. every other section is split by the pre-tokenizer's patterns (one of the two below,
//      written by hand: no regex library here knows \p{L});
//   3. each piece's bytes become the GPT-2 byte-to-unicode characters (byte_char), whose
//      single-character tokens are the initial symbols;
//   4. with "ignore_merges": true a piece that is a token of the vocabulary as a whole is that
//      token; otherwise the adjacent pair of lowest merge rank (the leftmost of equals) is
//      merged until no adjacent pair has a rank.
// The text need not be UTF-8: a byte that does not begin a well-formed sequence is a
// character of its own that is neither letter, number nor space, and is encoded as its byte
// (HF tokenizers take only UTF-8). decode(encode(x)) == x for every byte string x that holds
// no special token's content (a special token decodes to "", as SentencePiece's control
// pieces do).
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"

namespace bitsim::model {

// The pre-tokenizer split patterns bitsim implements (docs/tokenizers.md gives them verbatim):
// Gpt2: the ByteLevel pre-tokenizer's own ("use_regex": true);
// Llama3: the Split pre-tokenizer's "Regex" of Llama-3 and BitNet b1.58 2B4T.
enum class SplitPattern { Gpt2, Llama3 };

// The pattern's text as tokenizer.json gives it (after JSON unescaping).
std::string_view split_pattern_text(SplitPattern p);

// The pieces that the pattern cuts `text` into (behavior "Isolated": every match is a piece;
// no text lies outside a match with these two patterns). Their concatenation is `text`.
std::vector<std::string_view> split_text(std::string_view text, SplitPattern p);

// The character that byte b stands for in byte-level tokens (GPT-2's bytes_to_unicode:
// '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the other 68 bytes in
// order for U+0100..U+0143), as UTF-8.
std::string byte_char(unsigned char b);

// Loads <file> (a tokenizer.json). Throws bitsim::Error "FILE: FIELD: what is wrong" for a
// file that does not parse, a missing or contradicting field, a merge naming a token that is
// not in the vocabulary, and every setting outside what docs/tokenizers.md lists as read.
// vocab_size() is one more than the highest id of the vocabulary and the added tokens.
std::unique_ptr<Tokenizer> load_bpe_tokenizer(const std::filesystem::path& file);

}  // namespace bitsim::model
