#pragma once
// Tokenizers: SentencePiece (the LLaMA-2 tokenizer.model of the real checkpoint), the
// byte-level BPE of a Hugging Face tokenizer.json (bpe_tokenizer.h) and a byte-level
// tokenizer for synthetic models, plus StreamDecoder for printing generated tokens one at a
// time.
//
// Id conventions (LLaMA-2): 0 <unk>, 1 <s> (BOS), 2 </s> (EOS), 3..258 the byte-fallback
// pieces <0x00>..<0xFF>. bitnet-large adds 32000 <pad> and 32001 </line>, which are not in
// tokenizer.model: the SentencePiece tokenizer prints every id outside its own pieces as
// "<id>" (e.g. "<32001>") instead of failing.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bitsim::model {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text -> ids, no BOS added (the caller prepends BOS = 1).
  virtual std::vector<int> encode(const std::string& text) const = 0;
  // Ids -> text. Control ids (BOS, EOS) decode to "".
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  // The text of one id on its own, for listings (not for streaming: use StreamDecoder).
  // SentencePiece: the piece with every U+2581 '▁' replaced by ' ' (the leading space is
  // kept), a byte-fallback piece as its single raw byte (possibly an incomplete UTF-8
  // sequence), control ids "", <unk> " ⁇ " (as SentencePiece decodes it), ids outside the
  // pieces "<id>".
  virtual std::string piece(int id) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::string describe() const = 0;  // "sentencepiece: <path>", "bpe: <path>" or "byte-level (synthetic model)"
  virtual bool is_synthetic() const = 0;
};

// SentencePiece via libsentencepiece. vocab_size() is the number of pieces (32000 for
// LLaMA-2). Throws bitsim::Error naming the file if it is missing or cannot be loaded.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file);

// Byte-level tokenizer on the LLaMA byte-fallback ids: byte b <-> id 3 + b. encode maps each
// byte of the (UTF-8) text to its id. decode concatenates the bytes of ids 3..258; BOS (1)
// and EOS (2) decode to "" (as SentencePiece's control pieces do); every other id in
// [0, vocab_size) (<unk> 0, ids 259 and up) decodes to "<id>", e.g. "<0>", "<300>"; an id
// outside [0, vocab_size) is a bitsim::Error. piece(id) is decode({id}). Throws bitsim::Error if vocab_size < 259.
std::unique_ptr<Tokenizer> make_byte_tokenizer(int vocab_size);

// The explicit override file if given (it must load: a name ending in .json is a Hugging Face
// tokenizer.json, read by load_bpe_tokenizer in bpe_tokenizer.h, any other a SentencePiece
// model); else <model_folder>/tokenizer.model if the folder has one; else
// <model_folder>/tokenizer.json; else the byte-level tokenizer of vocab_size ids: for a
// synthetic model (no folder), or a folder whose model.safetensors carries make-model's
// `bitsim.synthetic` metadata; a folder of a trained checkpoint without its tokenizer is a
// bitsim::Error. A tokenizer with more ids than vocab_size (the model's vocabulary) is a
// bitsim::Error naming the file: its ids would index past the embedding table.
std::unique_ptr<Tokenizer> select_tokenizer(const std::optional<std::filesystem::path>& override_file,
                                            const std::optional<std::filesystem::path>& model_folder,
                                            int vocab_size);

// Incremental detokenization for streaming output. push(id) returns the text that id
// completes, so that the concatenation of every push() and the final flush() equals
// decode(context + ids) minus decode(context).
//
// How: the decoder keeps all ids and two offsets (prefix, read). On push it decodes the
// window ids[prefix..) and ids[prefix..read) and returns the difference, then moves
// prefix = read, read = end. Decoding a window rather than a single id is what keeps
// SentencePiece's leading '▁' right: SentencePiece drops the space of the first piece of a
// decode, so decode({▁Paris}) is "Paris" but the difference between decode({▁is, ▁Paris})
// and decode({▁is}) is " Paris". Text is held back (push returns "" and the offsets stay)
// while the window's text ends in an incomplete UTF-8 sequence (byte tokenizer, BPE) or in
// U+FFFD (what SentencePiece makes of an incomplete byte-fallback sequence) while the raw
// bytes of its last ids are the start of a sequence that more bytes can complete, so a
// multi-byte character split across byte-fallback ids is printed whole, once complete. A
// U+FFFD that no later byte can change (a stray continuation byte, a byte never valid in
// UTF-8) is printed at once: a run of such bytes does not hold the stream back, nor make
// every push decode a longer window.
//
// context: ids already shown (the prompt); they are decoded, never returned. Without it the
// first generated piece loses its leading space, exactly as decode() of the ids alone does.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, std::vector<int> context = {});
  std::string push(int id);
  // Everything still held back (an incomplete or invalid sequence at the end of generation).
  std::string flush();
  const std::vector<int>& ids() const { return ids_; }

 private:
  std::string window(size_t begin, size_t end) const;
  // The text of ids[prefix..read), decoded once per (prefix, read): a push that is held
  // back leaves both offsets alone, so the next push needs no second decode of it.
  const std::string& shown();
  void advance();  // prefix = read, read = end
  // Whether the window's text `now` is held back (see above).
  bool held(const std::string& now) const;
  const Tokenizer& tok_;
  std::vector<int> ids_;
  size_t prefix_ = 0, read_ = 0;
  std::optional<std::string> shown_;
};

}  // namespace bitsim::model
