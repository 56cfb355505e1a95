#include "model/bpe_tokenizer.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>

#include "base/error.h"
#include "base/file_io.h"
#include "base/json_parse.h"
#include "model/unicode_classes.h"

namespace bitsim::model {
namespace {

using Json = nlohmann::json;

// Llama-3's tokenizer.json is 9 MB; room for a vocabulary several times larger.
constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t(256) << 20;
// Ids index tables: bounded far above real vocabularies (Llama-3: 128,256; Gemma: 262,144).
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

constexpr std::string_view kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------------------------------------
// The split: the text as characters, and the two patterns' alternatives matched by hand.

constexpr char32_t kNotUtf8 = 0x110000;  // a byte that begins no well-formed sequence

struct Char {
  char32_t cp;
  size_t begin;  // byte offset in the text
};

// The characters of `s`; a byte that begins no well-formed UTF-8 sequence (RFC 3629) is a
// character of its own, kNotUtf8.
std::vector<Char> characters(std::string_view s) {
  std::vector<Char> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = uint8_t(s[i]);
    size_t len = 1;
    uint8_t lo = 0x80, hi = 0xbf;
    char32_t cp = b0;
    if (b0 >= 0xc2 && b0 <= 0xdf) len = 2, cp = b0 & 0x1f;
    else if (b0 >= 0xe0 && b0 <= 0xef) len = 3, cp = b0 & 0x0f, lo = b0 == 0xe0 ? 0xa0 : 0x80, hi = b0 == 0xed ? 0x9f : 0xbf;
    else if (b0 >= 0xf0 && b0 <= 0xf4) len = 4, cp = b0 & 0x07, lo = b0 == 0xf0 ? 0x90 : 0x80, hi = b0 == 0xf4 ? 0x8f : 0xbf;
    else if (b0 >= 0x80) cp = kNotUtf8;
    bool ok = i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto b = uint8_t(s[i + k]);
      ok = k == 1 ? (b >= lo && b <= hi) : (b & 0xc0) == 0x80;
      cp = (cp << 6) | (b & 0x3f);
    }
    if (!ok) len = 1, cp = kNotUtf8;
    out.push_back({cp, i});
    i += len;
  }
  return out;
}

class Splitter {
 public:
  explicit Splitter(std::string_view text) : text_(text), c_(characters(text)), n_(c_.size()) {}

  std::vector<std::string_view> split(SplitPattern p) const {
    std::vector<std::string_view> pieces;
    for (size_t i = 0; i < n_;) {
      const size_t end = p == SplitPattern::Llama3 ? llama3(i) : gpt2(i);
      pieces.push_back(text_.substr(offset(i), offset(end) - offset(i)));
      i = end;
    }
    return pieces;
  }

 private:
  size_t offset(size_t i) const { return i < n_ ? c_[i].begin : text_.size(); }
  char32_t at(size_t i) const { return i < n_ ? c_[i].cp : kNotUtf8; }
  bool letter(size_t i) const { return i < n_ && is_unicode_letter(c_[i].cp); }
  bool number(size_t i) const { return i < n_ && is_unicode_number(c_[i].cp); }
  bool space(size_t i) const { return i < n_ && is_unicode_space(c_[i].cp); }
  bool crlf(size_t i) const { return i < n_ && (c_[i].cp == '\r' || c_[i].cp == '\n'); }
  // [^\s\p{L}\p{N}]: a character that is none of the three (a byte that is not UTF-8 too).
  bool other(size_t i) const { return i < n_ && !space(i) && !letter(i) && !number(i); }

  template <class Pred>
  size_t run(size_t i, Pred pred) const {
    while (pred(i)) ++i;
    return i;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, with (?i:...) when fold: ASCII case and U+017F (long s), the one
  // other character whose simple case folding is one of these letters. The end, or i.
  size_t contraction(size_t i, bool fold) const {
    if (at(i) != '\'') return i;
    const auto lower = [&](size_t k) -> char32_t {
      const char32_t c = at(k);
      if (!fold) return c;
      if (c >= 'A' && c <= 'Z') return c - 'A' + 'a';
      return c == 0x17F ? char32_t('s') : c;
    };
    for (std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      size_t k = 0;
      while (k < suffix.size() && lower(i + 1 + k) == char32_t(suffix[k])) ++k;
      if (k == suffix.size()) return i + 1 + k;
    }
    return i;
  }

  // " ?X+" for the class `pred`: an optional U+0020 before a run of at least one X.
  template <class Pred>
  size_t space_then_run(size_t i, Pred pred) const {
    if (at(i) == ' ' && pred(i + 1)) return run(i + 1, pred);
    return pred(i) ? run(i, pred) : i;
  }

  // \s+(?!\S): the run of spaces, less its last if a non-space follows (nothing, if that
  // leaves none); then \s+ (the run) as the last alternative.
  size_t trailing_spaces(size_t i) const {
    const size_t j = run(i, [&](size_t k) { return space(k); });
    return (j == n_ || j - 1 == i) ? j : j - 1;
  }

  size_t gpt2(size_t i) const {
    size_t e = contraction(i, false);
    if (e == i) e = space_then_run(i, [&](size_t k) { return letter(k); });
    if (e == i) e = space_then_run(i, [&](size_t k) { return number(k); });
    if (e == i) e = space_then_run(i, [&](size_t k) { return other(k); });
    if (e == i) e = trailing_spaces(i);
    return e;
  }

  size_t llama3(size_t i) const {
    const auto is_letter = [&](size_t k) { return letter(k); };
    size_t e = contraction(i, true);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (e == i && letter(i)) e = run(i, is_letter);
    if (e == i && !crlf(i) && !number(i) && letter(i + 1)) e = run(i + 1, is_letter);
    // \p{N}{1,3}
    if (e == i && number(i)) e = std::min(run(i, [&](size_t k) { return number(k); }), i + 3);
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    if (e == i) {
      e = space_then_run(i, [&](size_t k) { return other(k); });
      if (e != i) e = run(e, [&](size_t k) { return crlf(k); });
    }
    // \s*[\r\n]+: the spaces up to and with the last CR or LF of the run.
    if (e == i && space(i)) {
      for (size_t k = i, j = run(i, [&](size_t m) { return space(m); }); k < j; ++k)
        if (crlf(k)) e = k + 1;
    }
    if (e == i) e = trailing_spaces(i);
    return e;
  }

  std::string_view text_;
  std::vector<Char> c_;
  size_t n_;
};

// ---------------------------------------------------------------------------------------
// The byte alphabet.

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += char(cp);
  } else if (cp < 0x800) {
    *out += char(0xc0 | (cp >> 6));
    *out += char(0x80 | (cp & 0x3f));
  } else {
    *out += char(0xe0 | (cp >> 12));
    *out += char(0x80 | ((cp >> 6) & 0x3f));
    *out += char(0x80 | (cp & 0x3f));
  }
}

// GPT-2's bytes_to_unicode: the code point that stands for each byte (all below U+0144).
constexpr size_t kByteCodePoints = 0x144;
std::array<char32_t, 256> byte_code_points() {
  std::array<char32_t, 256> cps{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool itself = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cps[size_t(b)] = itself ? char32_t(b) : next++;
  }
  return cps;
}

// ---------------------------------------------------------------------------------------
// The tokenizer.

struct AddedToken {
  int id;
  std::string content;
  bool special;     // decodes to ""
  bool normalized;  // matched in the second pass
};

// The added tokens of one matching pass, by their first byte, longest first.
class AddedMatcher {
 public:
  void add(const AddedToken* t) { by_first_[uint8_t(t->content[0])].push_back(t); }
  void sort() {
    for (auto& v : by_first_)
      std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->content.size() > b->content.size(); });
  }
  bool empty() const {
    return std::all_of(by_first_.begin(), by_first_.end(), [](const auto& v) { return v.empty(); });
  }
  // The longest token whose content starts `s` at `i`, or nullptr.
  const AddedToken* at(std::string_view s, size_t i) const {
    for (const AddedToken* t : by_first_[uint8_t(s[i])])
      if (s.compare(i, t->content.size(), t->content) == 0) return t;
    return nullptr;
  }

 private:
  std::array<std::vector<const AddedToken*>, 256> by_first_;
};

struct Merge {
  int rank, id;  // the merge's line in model.merges, the id of the merged token
};

// What load_bpe_tokenizer reads: filled by Loader, used by BpeTokenizer.
struct BpeData {
  std::filesystem::path file;
  std::vector<SplitPattern> splits;  // applied in order
  std::unordered_map<std::string, int> vocab;
  std::unordered_map<uint64_t, Merge> merges;  // key: left id << 32 | right id
  std::array<int, 256> byte_id{};              // the token of each byte's character
  bool ignore_merges = false;
  std::vector<AddedToken> added;
  int size = 0;                       // highest id + 1
  std::vector<std::string> id_bytes;  // a vocabulary token's bytes, by id
  std::vector<int> added_of;          // index in `added`, or -1, by id
};

uint64_t pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeData d) : d_(std::move(d)) {
    for (const AddedToken& t : d_.added) (t.normalized ? normalized_ : raw_).add(&t);
    raw_.sort();
    normalized_.sort();
    const auto cps = byte_code_points();
    for (size_t b = 0; b < 256; ++b) append_utf8(cps[b], &byte_text_[b]);
  }

  std::vector<int> encode(const std::string& text) const override {
    std::vector<int> ids;
    cut_added(text, raw_, [&](std::string_view section) {
      cut_added(section, normalized_, [&](std::string_view rest) { encode_section(rest, &ids); }, &ids);
    }, &ids);
    return ids;
  }

  std::string decode(const std::vector<int>& ids) const override {
    std::string out;
    for (int id : ids) out += piece(id);
    return out;
  }

  std::string piece(int id) const override {
    if (id < 0 || id >= d_.size) return fmt::format("<{}>", id);
    if (const int a = d_.added_of[size_t(id)]; a >= 0) {
      const AddedToken& t = d_.added[size_t(a)];
      return t.special ? std::string() : t.content;
    }
    if (d_.id_bytes[size_t(id)].empty()) return fmt::format("<{}>", id);  // an id no token has
    return d_.id_bytes[size_t(id)];
  }

  int vocab_size() const override { return d_.size; }
  std::string describe() const override { return "bpe: " + d_.file.string(); }
  bool is_synthetic() const override { return false; }

 private:
  // Cuts the tokens of `m` out of `text`: each match's id goes to `ids`, the text between
  // matches to `rest`, in order.
  template <class Rest>
  void cut_added(std::string_view text, const AddedMatcher& m, const Rest& rest, std::vector<int>* ids) const {
    if (m.empty()) {
      if (!text.empty()) rest(text);
      return;
    }
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      const AddedToken* t = m.at(text, i);
      if (!t) {
        ++i;
        continue;
      }
      if (i > start) rest(text.substr(start, i - start));
      ids->push_back(t->id);
      i += t->content.size();
      start = i;
    }
    if (start < text.size()) rest(text.substr(start));
  }

  void encode_section(std::string_view section, std::vector<int>* ids) const {
    std::vector<std::string_view> pieces{section};
    for (SplitPattern p : d_.splits) {
      std::vector<std::string_view> next;
      for (std::string_view piece : pieces)
        for (std::string_view sub : split_text(piece, p)) next.push_back(sub);
      pieces = std::move(next);
    }
    for (std::string_view piece : pieces) encode_word(piece, ids);
  }

  void encode_word(std::string_view word, std::vector<int>* ids) const {
    if (word.empty()) return;
    if (d_.ignore_merges) {
      std::string mapped;
      for (unsigned char b : word) mapped += byte_text_[b];
      if (const auto it = d_.vocab.find(mapped); it != d_.vocab.end()) {
        ids->push_back(it->second);
        return;
      }
    }
    merge_all(word, ids);
  }

  // HF tokenizers' Word::merge_all: a queue of the adjacent pairs by (rank, position); the
  // first is merged, the pairs it forms with its neighbours join the queue; a queued pair that
  // a merge has since changed is dropped when it comes up.
  void merge_all(std::string_view word, std::vector<int>* ids) const {
    constexpr int kNone = -1;
    const int n = int(word.size());
    std::vector<int> sym, prev, next;  // by position: the symbol's id (kNone once merged away), its neighbours
    for (int i = 0; i < n; ++i) {
      sym.push_back(d_.byte_id[uint8_t(word[size_t(i)])]);
      prev.push_back(i - 1);
      next.push_back(i + 1 < n ? i + 1 : kNone);
    }
    const auto merge_at = [&](int pos) -> const Merge* {
      if (pos < 0 || sym[size_t(pos)] == kNone || next[size_t(pos)] == kNone) return nullptr;
      const auto it = d_.merges.find(pair_key(sym[size_t(pos)], sym[size_t(next[size_t(pos)])]));
      return it == d_.merges.end() ? nullptr : &it->second;
    };
    using Entry = std::array<int, 3>;  // rank, position, merged id
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    const auto offer = [&](int pos) {
      if (const Merge* m = merge_at(pos)) queue.push({m->rank, pos, m->id});
    };
    for (int i = 0; i + 1 < n; ++i) offer(i);
    while (!queue.empty()) {
      const auto [rank, pos, id] = queue.top();
      queue.pop();
      const Merge* m = merge_at(pos);
      if (!m || m->id != id) continue;  // a merge has changed this pair since it was queued
      const int right = next[size_t(pos)];
      sym[size_t(pos)] = id;
      sym[size_t(right)] = kNone;
      next[size_t(pos)] = next[size_t(right)];
      if (next[size_t(pos)] != kNone) prev[size_t(next[size_t(pos)])] = pos;
      offer(prev[size_t(pos)]);
      offer(pos);
    }
    for (int i = 0; i != kNone; i = next[size_t(i)]) ids->push_back(sym[size_t(i)]);
  }

  BpeData d_;
  AddedMatcher raw_, normalized_;  // "normalized": false (matched first), true
  std::array<std::string, 256> byte_text_;
};

// ---------------------------------------------------------------------------------------
// Reading tokenizer.json.

class Loader {
 public:
  explicit Loader(const std::filesystem::path& file) : file_(file) { d_.file = file; }

  BpeData load() {
    const std::string text = io::read_file(file_, "tokenizer file", kMaxTokenizerJsonBytes);
    Json j;
    try {
      j = io::parse_json_unique_keys(text, file_.string());
    } catch (const Json::exception& e) {
      throw Error(fmt::format("{}: not a JSON document: {}", file_.string(), e.what()));
    }
    if (!j.is_object()) fail("(top level)", "expected an object");
    if (const Json* norm = find(j, "normalizer"); norm && !norm->is_null())
      fail("normalizer", fmt::format("only null is read (found {}): the texts of byte-level BPE go unnormalized",
                                     brief(*norm)));
    read_pre_tokenizer(object(j, "pre_tokenizer", "pre_tokenizer"));
    read_decoder(object(j, "decoder", "decoder"));
    read_model(object(j, "model", "model"));
    read_added(j);
    index_ids();
    return std::move(d_);
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw Error(fmt::format("{}: {}: {}", file_.string(), field, why));
  }

  static std::string brief(const Json& v) {
    std::string s = v.dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  }

  static const Json* find(const Json& j, const char* key) {
    const auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  }

  const Json& object(const Json& j, const char* key, const std::string& field) const {
    const Json* v = find(j, key);
    if (!v) fail(field, "missing (required)");
    if (!v->is_object()) fail(field, fmt::format("expected an object, found {}", brief(*v)));
    return *v;
  }

  std::string string(const Json& j, const char* key, const std::string& field) const {
    const Json* v = find(j, key);
    if (!v) fail(field, "missing (required)");
    if (!v->is_string()) fail(field, fmt::format("expected a string, found {}", brief(*v)));
    return v->get<std::string>();
  }

  // An optional boolean: `otherwise` when absent or null.
  bool flag(const Json& j, const char* key, const std::string& field, bool otherwise) const {
    const Json* v = find(j, key);
    if (!v || v->is_null()) return otherwise;
    if (!v->is_boolean()) fail(field, fmt::format("expected true or false, found {}", brief(*v)));
    return v->get<bool>();
  }

  // A key that must be absent, null or `allowed` (e.g. false, "").
  void only(const Json& j, const char* key, const std::string& field, const Json& allowed, const char* why) const {
    const Json* v = find(j, key);
    if (v && !v->is_null() && *v != allowed) fail(field, fmt::format("{} is not read: {}", brief(*v), why));
  }

  static bool is_id(const Json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId;
  }

  int id_value(const Json& v, const std::string& field) const {
    if (!is_id(v)) fail(field, fmt::format("expected a token id (an integer from 0 to {}), found {}", kMaxTokenId, brief(v)));
    return v.get<int>();
  }

  void read_byte_level(const Json& p, const std::string& field) {
    if (flag(p, "add_prefix_space", field + ".add_prefix_space", false))
      fail(field + ".add_prefix_space", "true is not read (a space put before the text would break decode(encode(x)) == x)");
    if (flag(p, "use_regex", field + ".use_regex", true)) d_.splits.push_back(SplitPattern::Gpt2);
  }

  void read_split(const Json& p, const std::string& field) {
    const Json& pattern = object(p, "pattern", field + ".pattern");
    const std::string regex = string(pattern, "Regex", field + ".pattern.Regex");
    if (regex == kLlama3Pattern) d_.splits.push_back(SplitPattern::Llama3);
    else if (regex == kGpt2Pattern) d_.splits.push_back(SplitPattern::Gpt2);
    else fail(field + ".pattern.Regex", fmt::format("{} is not one of the patterns bitsim implements (Llama-3's, "
                                                    "GPT-2's: docs/tokenizers.md)", brief(Json(regex))));
    if (string(p, "behavior", field + ".behavior") != "Isolated")
      fail(field + ".behavior", fmt::format("{} is not read (only \"Isolated\")", brief(p.at("behavior"))));
    if (flag(p, "invert", field + ".invert", false)) fail(field + ".invert", "true is not read");
  }

  void read_pre_tokenizer(const Json& pre) {
    const std::string type = string(pre, "type", "pre_tokenizer.type");
    std::vector<std::pair<const Json*, std::string>> steps;
    if (type == "Sequence") {
      const Json* list = find(pre, "pretokenizers");
      if (!list || !list->is_array()) fail("pre_tokenizer.pretokenizers", "expected an array");
      for (size_t i = 0; i < list->size(); ++i)
        steps.emplace_back(&(*list)[i], fmt::format("pre_tokenizer.pretokenizers[{}]", i));
    } else {
      steps.emplace_back(&pre, "pre_tokenizer");
    }
    bool byte_level = false;
    for (const auto& [p, field] : steps) {
      if (!p->is_object()) fail(field, fmt::format("expected an object, found {}", brief(*p)));
      const std::string t = string(*p, "type", field + ".type");
      if (t == "ByteLevel" && !byte_level) {
        read_byte_level(*p, field);
        byte_level = true;
      } else if (t == "Split" && !byte_level) {
        read_split(*p, field);
      } else {
        fail(field + ".type", fmt::format("\"{}\" is not read here (read: Split pre-tokenizers, then one ByteLevel)", t));
      }
    }
    if (!byte_level) fail("pre_tokenizer", "has no ByteLevel pre-tokenizer: not a byte-level BPE tokenizer");
  }

  void read_decoder(const Json& dec) {
    const std::string type = string(dec, "type", "decoder.type");
    if (type != "ByteLevel") fail("decoder.type", fmt::format("\"{}\" is not read (only \"ByteLevel\")", type));
  }

  void read_model(const Json& m) {
    const std::string type = string(m, "type", "model.type");
    if (type != "BPE") fail("model.type", fmt::format("\"{}\": only \"BPE\" is read", type));
    only(m, "dropout", "model.dropout", Json(0.0), "BPE dropout makes encoding random");
    only(m, "continuing_subword_prefix", "model.continuing_subword_prefix", Json(""), "byte-level BPE has none");
    only(m, "end_of_word_suffix", "model.end_of_word_suffix", Json(""), "byte-level BPE has none");
    only(m, "byte_fallback", "model.byte_fallback", Json(false), "byte-level BPE has every byte in its vocabulary");
    d_.ignore_merges = flag(m, "ignore_merges", "model.ignore_merges", false);
    read_vocab(object(m, "vocab", "model.vocab"));
    if (const Json* unk = find(m, "unk_token"); unk && !unk->is_null())
      if (!unk->is_string() || !d_.vocab.count(unk->get<std::string>()))
        fail("model.unk_token", fmt::format("{} is not a token of model.vocab", brief(*unk)));
    const Json* merges = find(m, "merges");
    if (!merges) fail("model.merges", "missing (required)");
    if (!merges->is_array()) fail("model.merges", fmt::format("expected an array, found {}", brief(*merges)));
    for (size_t i = 0; i < merges->size(); ++i) read_merge((*merges)[i], int(i));
  }

  void read_vocab(const Json& vocab) {
    // (The field's name is made only for a message: a vocabulary has 10^5 entries.)
    const auto field = [](const std::string& token) { return fmt::format("model.vocab[{}]", Json(token).dump()); };
    d_.vocab.reserve(vocab.size());
    token_of_id_.reserve(vocab.size());
    for (const auto& [token, v] : vocab.items()) {
      const int id = is_id(v) ? v.get<int>() : id_value(v, field(token));
      if (const auto [it, fresh] = token_of_id_.emplace(id, token); !fresh)
        fail(field(token), fmt::format("id {} is also the id of {}", id, Json(it->second).dump()));
      d_.vocab.emplace(token, id);
    }
    const auto cps = byte_code_points();
    for (size_t b = 0; b < 256; ++b) {
      std::string c;
      append_utf8(cps[b], &c);
      const auto it = d_.vocab.find(c);
      if (it == d_.vocab.end())
        fail("model.vocab", fmt::format("has no token {} for byte 0x{:02X}: a byte-level vocabulary holds all 256",
                                        Json(c).dump(), b));
      d_.byte_id[b] = it->second;
    }
  }

  int token_id(const std::string& token, int rank, const char* what) const {
    const auto it = d_.vocab.find(token);
    if (it == d_.vocab.end())
      fail(fmt::format("model.merges[{}]", rank), fmt::format("{} {} is not in model.vocab", what, Json(token).dump()));
    return it->second;
  }

  void read_merge(const Json& m, int rank) {
    const auto field = [&] { return fmt::format("model.merges[{}]", rank); };
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos || sp == 0 || sp + 1 == s.size())
        fail(field(), fmt::format("{} is not two tokens separated by one space", brief(m)));
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    } else {
      fail(field(), fmt::format("expected \"A B\" or [\"A\", \"B\"], found {}", brief(m)));
    }
    const int ia = token_id(a, rank, "the token"), ib = token_id(b, rank, "the token");
    const int merged = token_id(a + b, rank, "the merged token");
    const auto [it, fresh] = d_.merges.emplace(pair_key(ia, ib), Merge{rank, merged});
    if (!fresh)
      fail(field(), fmt::format("the pair {} {} is merged already by model.merges[{}]", Json(a).dump(), Json(b).dump(),
                              it->second.rank));
  }

  void read_added(const Json& j) {
    const Json* list = find(j, "added_tokens");
    if (!list || list->is_null()) return;
    if (!list->is_array()) fail("added_tokens", fmt::format("expected an array, found {}", brief(*list)));
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string field = fmt::format("added_tokens[{}]", i);
      const Json& t = (*list)[i];
      if (!t.is_object()) fail(field, fmt::format("expected an object, found {}", brief(t)));
      const Json* id = find(t, "id");
      if (!id) fail(field + ".id", "missing (required)");
      AddedToken a{id_value(*id, field + ".id"), string(t, "content", field + ".content"),
                   flag(t, "special", field + ".special", false), false};
      if (a.content.empty()) fail(field + ".content", "empty: it would match everywhere");
      for (const char* k : {"single_word", "lstrip", "rstrip"})
        if (flag(t, k, field + "." + k, false)) fail(field + "." + k, "true is not read (docs/tokenizers.md)");
      // "normalized" only orders the two matching passes (HF's default: not for a special
      // token); the text has no normalizer.
      a.normalized = flag(t, "normalized", field + ".normalized", !a.special);
      check_added(a, field);
      d_.added.push_back(std::move(a));
    }
  }

  // An added token must not contradict the vocabulary or another added token: one id, one
  // content.
  void check_added(const AddedToken& a, const std::string& field) const {
    if (const auto it = d_.vocab.find(a.content); it != d_.vocab.end() && it->second != a.id)
      fail(field, fmt::format("content {} is token {} of model.vocab, not {}", Json(a.content).dump(), it->second, a.id));
    if (const auto it = token_of_id_.find(a.id); it != token_of_id_.end() && it->second != a.content)
      fail(field, fmt::format("id {} is {} in model.vocab, not {}", a.id, Json(it->second).dump(), Json(a.content).dump()));
    for (size_t k = 0; k < d_.added.size(); ++k)
      if (d_.added[k].id == a.id || d_.added[k].content == a.content)
        fail(field, fmt::format("id {} / content {} is already added_tokens[{}]'s", a.id, Json(a.content).dump(), k));
  }

  void index_ids() {
    for (const auto& [token, id] : d_.vocab) d_.size = std::max(d_.size, id + 1);
    for (const AddedToken& a : d_.added) d_.size = std::max(d_.size, a.id + 1);
    d_.id_bytes.assign(size_t(d_.size), std::string());
    d_.added_of.assign(size_t(d_.size), -1);
    ByteOf byte_of;
    byte_of.fill(-1);
    const auto cps = byte_code_points();
    for (size_t b = 0; b < 256; ++b) byte_of[cps[b]] = int16_t(b);
    for (const auto& [token, id] : d_.vocab) d_.id_bytes[size_t(id)] = token_bytes(token, byte_of);
    for (size_t k = 0; k < d_.added.size(); ++k) d_.added_of[size_t(d_.added[k].id)] = int(k);
  }

  // A vocabulary token's bytes: its characters through the byte alphabet; a token with a
  // character outside it is its own UTF-8 (as HF's ByteLevel decoder does).
  using ByteOf = std::array<int16_t, kByteCodePoints>;  // the byte a code point stands for, or -1
  static std::string token_bytes(const std::string& token, const ByteOf& byte_of) {
    std::string out;
    for (const Char& c : characters(token)) {
      if (c.cp >= byte_of.size() || byte_of[c.cp] < 0) return token;
      out += char(byte_of[c.cp]);
    }
    return out;
  }

  std::filesystem::path file_;
  BpeData d_;
  std::unordered_map<int, std::string> token_of_id_;  // model.vocab inverted
};

}  // namespace

std::string_view split_pattern_text(SplitPattern p) { return p == SplitPattern::Llama3 ? kLlama3Pattern : kGpt2Pattern; }

std::vector<std::string_view> split_text(std::string_view text, SplitPattern p) { return Splitter(text).split(p); }

std::string byte_char(unsigned char b) {
  std::string out;
  append_utf8(byte_code_points()[b], &out);
  return out;
}

std::unique_ptr<Tokenizer> load_bpe_tokenizer(const std::filesystem::path& file) {
  return std::make_unique<BpeTokenizer>(Loader(file).load());
}

}  // namespace bitsim::model
