#include "model/tokenizer.h"

#include "model/bpe_tokenizer.h"
#include "model/safetensors.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include <algorithm>
#include <system_error>

#include "base/error.h"
#include "base/file_io.h"

namespace bitsim::model {
namespace {

constexpr int kBos = 1;
constexpr int kEos = 2;
constexpr int kFirstByteId = 3;  // <0x00>
constexpr int kByteIds = 256;

std::string id_text(int id) { return fmt::format("<{}>", id); }

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::filesystem::path& file) : path_(file) {
    io::check_input_file(file, "tokenizer file");
    const auto status = sp_.Load(file.string());
    if (!status.ok()) {
      // The library's messages carry its own source position ("./src/...cc(1101) [...]"):
      // a reader needs what is wrong with the file, not where the library noticed it.
      const std::string msg(status.message());
      const bool internal = msg.find(".cc(") != std::string::npos;
      throw Error(fmt::format("tokenizer file {}: {}", file.string(),
                              internal ? "not a SentencePiece model (its contents do not parse as one)" : msg));
    }
    pieces_ = sp_.GetPieceSize();
    if (pieces_ <= 0) throw Error(fmt::format("SentencePiece tokenizer {} has no pieces", file.string()));
  }

  std::vector<int> encode(const std::string& text) const override {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok()) throw Error(fmt::format("SentencePiece encode failed ({}): {}", path_.string(), status.ToString()));
    return ids;
  }

  std::string decode(const std::vector<int>& ids) const override {
    bool all_in = true;
    for (int id : ids) all_in = all_in && in_range(id);
    if (all_in) {
      std::string out;
      const auto status = sp_.Decode(ids, &out);
      if (!status.ok()) throw Error(fmt::format("SentencePiece decode failed ({}): {}", path_.string(), status.ToString()));
      return out;
    }
    // libsentencepiece rejects the whole call for one id outside its pieces (bitnet-large's
    // <pad> 32000 and </line> 32001). Decode with <unk> in their place, then put "<id>" in
    // the place of each such <unk>'s surface text; piece surfaces concatenate to the text.
    std::vector<int> safe(ids);
    for (int& id : safe)
      if (!in_range(id)) id = sp_.unk_id();
    const auto proto = sp_.DecodeIdsAsImmutableProto(safe);
    std::string out;
    const int count = proto.pieces_size();
    for (int i = 0; i < count; ++i) {
      if (size_t(i) < ids.size() && !in_range(ids[size_t(i)])) out += id_text(ids[size_t(i)]);
      else out += std::string(proto.pieces(i).surface());
    }
    return out;
  }

  std::string piece(int id) const override {
    if (!in_range(id)) return id_text(id);
    if (sp_.IsControl(id)) return "";
    if (sp_.IsUnknown(id)) return decode({id});
    if (sp_.IsByte(id)) {
      // "<0xAB>"
      const std::string& p = sp_.IdToPiece(id);
      return std::string(1, char(std::stoi(p.substr(3, 2), nullptr, 16)));
    }
    std::string p = sp_.IdToPiece(id);
    static constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581
    std::string out;
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, 3, kSpace) == 0) {
        out += ' ';
        i += 3;
      } else {
        out += p[i++];
      }
    }
    return out;
  }

  int vocab_size() const override { return pieces_; }
  std::string describe() const override { return "sentencepiece: " + path_.string(); }
  bool is_synthetic() const override { return false; }

 private:
  bool in_range(int id) const { return id >= 0 && id < pieces_; }

  std::filesystem::path path_;
  sentencepiece::SentencePieceProcessor sp_;
  int pieces_ = 0;
};

class ByteTokenizer final : public Tokenizer {
 public:
  explicit ByteTokenizer(int vocab) : vocab_(vocab) {
    if (vocab < kFirstByteId + kByteIds)
      throw Error(fmt::format("byte-level tokenizer needs a vocabulary of at least {} ids (got {})",
                              kFirstByteId + kByteIds, vocab));
  }

  std::vector<int> encode(const std::string& text) const override {
    std::vector<int> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(kFirstByteId + int(c));
    return ids;
  }

  std::string decode(const std::vector<int>& ids) const override {
    std::string out;
    for (int id : ids) append(id, &out);
    return out;
  }

  std::string piece(int id) const override {
    std::string out;
    append(id, &out);
    return out;
  }

  int vocab_size() const override { return vocab_; }
  std::string describe() const override { return "byte-level (synthetic model)"; }
  bool is_synthetic() const override { return true; }

 private:
  void append(int id, std::string* out) const {
    if (id < 0 || id >= vocab_)
      throw Error(fmt::format("token id {} outside the vocabulary of {} ids", id, vocab_));
    if (id >= kFirstByteId && id < kFirstByteId + kByteIds) *out += char(id - kFirstByteId);
    else if (id == kBos || id == kEos) return;
    else *out += id_text(id);
  }

  int vocab_;
};

// Length of the tail of s that is an incomplete (but so far well-formed) UTF-8 sequence:
// a lead byte followed by fewer continuation bytes than it announces. 0 if none.
size_t incomplete_utf8_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const unsigned char c = static_cast<unsigned char>(s[n - k]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 0;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return (need > k) ? k : 0;
  }
  return 0;
}

bool ends_in_replacement(const std::string& s) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  return s.size() >= 3 && s.compare(s.size() - 3, 3, kReplacement) == 0;
}

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file) {
  return std::make_unique<SentencePieceTokenizer>(model_file);
}

std::unique_ptr<Tokenizer> make_byte_tokenizer(int vocab_size) {
  return std::make_unique<ByteTokenizer>(vocab_size);
}

std::unique_ptr<Tokenizer> select_tokenizer(const std::optional<std::filesystem::path>& override_file,
                                            const std::optional<std::filesystem::path>& model_folder,
                                            int vocab_size) {
  std::optional<std::filesystem::path> file = override_file;
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    std::error_code ec;
    if (!file && model_folder && std::filesystem::is_regular_file(*model_folder / name, ec)) file = *model_folder / name;
  }
  if (!file && model_folder) {
    // A folder without a tokenizer: the byte tokenizer is the synthetic checkpoints' own
    // (make-model marks them in the safetensors metadata); a trained checkpoint scored or run
    // with it would give numbers that mean nothing.
    const auto weights = *model_folder / "model.safetensors";
    const SafetensorsFile f = SafetensorsFile::open(weights);
    if (!f.metadata().contains("bitsim.synthetic"))
      throw Error(fmt::format("model folder {}: no tokenizer.model or tokenizer.json, and {} is not a synthetic "
                              "checkpoint (its metadata has no bitsim.synthetic): put the checkpoint's tokenizer in "
                              "the folder or give a tokenizer file",
                              model_folder->string(), weights.string()));
  }
  if (!file) return make_byte_tokenizer(vocab_size);
  auto tok = file->extension() == ".json" ? load_bpe_tokenizer(*file) : load_sentencepiece(*file);
  if (tok->vocab_size() > vocab_size)
    throw Error(fmt::format("tokenizer {} has {} tokens, more than the model's vocabulary of {} (its embedding's rows)",
                            file->string(), tok->vocab_size(), vocab_size));
  return tok;
}

StreamDecoder::StreamDecoder(const Tokenizer& tok, std::vector<int> context)
    : tok_(tok), ids_(std::move(context)), prefix_(0), read_(ids_.size()) {}

std::string StreamDecoder::window(size_t begin, size_t end) const {
  return tok_.decode(std::vector<int>(ids_.begin() + std::ptrdiff_t(begin), ids_.begin() + std::ptrdiff_t(end)));
}

const std::string& StreamDecoder::shown() {
  if (!shown_) shown_ = window(prefix_, read_);
  return *shown_;
}

void StreamDecoder::advance() {
  prefix_ = read_;
  read_ = ids_.size();
  shown_.reset();
}

bool StreamDecoder::held(const std::string& now) const {
  if (incomplete_utf8_tail(now) != 0) return true;
  if (!ends_in_replacement(now)) return false;
  // The raw bytes of the window's last ids (piece() gives a byte-fallback id as its byte; an
  // incomplete sequence is at most 3 bytes, all pushed since the last text was shown).
  std::string raw;
  for (size_t i = ids_.size() - std::min<size_t>(3, ids_.size() - prefix_); i < ids_.size(); ++i)
    raw += tok_.piece(ids_[i]);
  return incomplete_utf8_tail(raw) != 0;
}

std::string StreamDecoder::push(int id) {
  ids_.push_back(id);
  const std::string& before = shown();
  const std::string now = window(prefix_, ids_.size());
  if (now.size() <= before.size() || held(now)) return "";
  std::string out = now.substr(before.size());
  advance();
  return out;
}

std::string StreamDecoder::flush() {
  const std::string& before = shown();
  const std::string now = window(prefix_, ids_.size());
  std::string out = now.size() > before.size() ? now.substr(before.size()) : std::string();
  advance();
  return out;
}

}  // namespace bitsim::model
