#include "model/model_file.h"

#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace bitsim::model {

namespace {
constexpr char kMagic[8] = {'B', 'S', 'T', 'M', 'O', 'D', 'E', 'L'};
constexpr size_t kImageHeaderBytes = 64, kTableEntryBytes = 32, kAlign = 64;

struct Header {
  char magic[8];
  uint32_t version, arrays, hidden, ffn, layers, heads, vocab;
};
struct Entry {
  uint64_t offset, count;
  uint32_t elem;
  float scale;
  uint64_t reserved;
};
static_assert(sizeof(Entry) == kTableEntryBytes);

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The arrays of a model in image order: float vectors and ternary matrices.
template <class F>
void visit_arrays(const TernaryModel& m, F&& f) {
  f(m.embed.data(), m.embed.size(), 4u, 0.0f);
  f(m.final_norm.data(), m.final_norm.size(), 4u, 0.0f);
  f(m.lm_head.trits.data(), m.lm_head.trits.size(), 1u, m.lm_head.scale);
  for (const LayerWeights& L : m.layers) {
    for (const std::vector<float>* v : {&L.input_norm, &L.inner_attn_norm, &L.post_attn_norm, &L.ffn_norm})
      f(v->data(), v->size(), 4u, 0.0f);
    for (const TernaryMatrix* w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down})
      f(w->trits.data(), w->trits.size(), 1u, w->scale);
  }
}
}  // namespace

size_t ModelImage::bytes() const {
  size_t n = 0;
  for (const ImagePart& p : parts) n += p.bytes;
  return n;
}

ModelImage model_image(const TernaryModel& m) {
  std::vector<Entry> table;
  std::vector<ImagePart> arrays;
  visit_arrays(m, [&](const void* p, size_t n, uint32_t elem, float scale) {
    table.push_back(Entry{0, n, elem, scale, 0});
    arrays.push_back(ImagePart{p, n * elem});
  });
  const size_t table_end = kImageHeaderBytes + table.size() * kTableEntryBytes;
  size_t at = align_up(table_end);
  for (size_t i = 0; i < table.size(); ++i) {
    table[i].offset = at;
    at = align_up(at + arrays[i].bytes);
  }
  ModelImage img;
  img.head.assign(align_up(table_end), 0);
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kModelFileVersion;
  h.arrays = uint32_t(table.size());
  const auto& c = m.config;
  h.hidden = uint32_t(c.hidden_size);
  h.ffn = uint32_t(c.intermediate_size);
  h.layers = uint32_t(c.num_layers);
  h.heads = uint32_t(c.num_heads);
  h.vocab = uint32_t(c.vocab_size);
  static_assert(sizeof(Header) <= kImageHeaderBytes);
  std::memcpy(img.head.data(), &h, sizeof h);
  std::memcpy(img.head.data() + kImageHeaderBytes, table.data(), table.size() * kTableEntryBytes);
  img.parts.push_back(ImagePart{img.head.data(), img.head.size()});
  size_t pos = img.head.size();
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].offset > pos) img.parts.push_back(ImagePart{nullptr, table[i].offset - pos});
    img.parts.push_back(arrays[i]);
    pos = table[i].offset + arrays[i].bytes;
  }
  if (align_up(pos) > pos) img.parts.push_back(ImagePart{nullptr, align_up(pos) - pos});
  return img;
}

namespace {

Error image_error(const std::string& source, const std::string& what) {
  return Error(fmt::format("cached model image of {}: {}", source, what));
}

// The image's header and table size against the model's shape; the number of arrays.
size_t check_header(const ModelConfig& c, const std::string& source, const uint8_t* image, size_t bytes) {
  auto bad = [&](const std::string& what) { return image_error(source, what); };
  if (bytes < kImageHeaderBytes) throw bad(fmt::format("{} bytes, shorter than its header", bytes));
  if (reinterpret_cast<uintptr_t>(image) % kAlign) throw bad("not 64-byte aligned in memory");
  Header h;
  std::memcpy(&h, image, sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0) throw bad("bad magic");
  if (h.version != kModelFileVersion) throw bad(fmt::format("layout version {}, expected {}", h.version, kModelFileVersion));
  if (h.hidden != uint32_t(c.hidden_size) || h.ffn != uint32_t(c.intermediate_size) ||
      h.layers != uint32_t(c.num_layers) || h.heads != uint32_t(c.num_heads) || h.vocab != uint32_t(c.vocab_size))
    throw bad(fmt::format("shape hidden {}, FFN {}, {} layers, {} heads, vocab {}; the model has {}", h.hidden, h.ffn,
                          h.layers, h.heads, h.vocab, c.shape_string()));
  const size_t arrays = 3 + size_t(c.num_layers) * 11;
  if (h.arrays != arrays) throw bad(fmt::format("{} arrays, expected {}", h.arrays, arrays));
  if (kImageHeaderBytes + arrays * kTableEntryBytes > bytes) throw bad("truncated table");
  return arrays;
}

// The image's arrays in table order, each checked against the shape the caller expects:
// views into the image (which `keep` keeps mapped) or, for the norms, copies.
class ArrayReader {
 public:
  ArrayReader(const std::string& source, std::shared_ptr<void> keep, uint8_t* image, size_t bytes)
      : source_(source), keep_(std::move(keep)), image_(image), bytes_(bytes) {}

  std::vector<float> floats(size_t n) {
    const Entry e = entry(n, 4);
    std::vector<float> v(n);
    std::memcpy(v.data(), image_ + e.offset, n * 4);
    return v;
  }
  Buffer<float> float_view(size_t n) {
    const Entry e = entry(n, 4);
    return Buffer<float>::view(keep_, reinterpret_cast<float*>(image_ + e.offset), e.count);
  }
  TernaryMatrix ternary(int rows, int cols) {
    const Entry e = entry(size_t(rows) * size_t(cols), 1);
    TernaryMatrix t;
    t.rows = rows;
    t.cols = cols;
    t.scale = e.scale;
    t.trits = Buffer<int8_t>::view(keep_, reinterpret_cast<int8_t*>(image_ + e.offset), e.count);
    return t;
  }

 private:
  Entry entry(size_t count, uint32_t elem) {
    Entry e;
    std::memcpy(&e, image_ + kImageHeaderBytes + next_ * kTableEntryBytes, sizeof e);
    if (e.count != count || e.elem != elem || e.offset % kAlign || e.offset > bytes_ ||
        e.count * e.elem > bytes_ - e.offset)
      throw image_error(source_, fmt::format("array {} (offset {}, {} elements of {} bytes) does not fit the shape or "
                                             "the image", next_, e.offset, e.count, e.elem));
    ++next_;
    return e;
  }

  const std::string& source_;
  std::shared_ptr<void> keep_;
  uint8_t* image_;
  size_t bytes_;
  size_t next_ = 0;
};

}  // namespace

TernaryModel model_from_image(const ModelConfig& c, const std::string& source, std::shared_ptr<void> keep,
                              uint8_t* image, size_t bytes) {
  check_header(c, source, image, bytes);
  TernaryModel m;
  m.config = c;
  m.source = source;
  m.layers.resize(size_t(c.num_layers));
  const size_t H = size_t(c.hidden_size), F = size_t(c.intermediate_size), V = size_t(c.vocab_size);
  ArrayReader read(source, std::move(keep), image, bytes);
  m.embed = read.float_view(V * H);
  m.final_norm = read.floats(H);
  m.lm_head = read.ternary(c.vocab_size, c.hidden_size);
  for (LayerWeights& L : m.layers) {
    L.input_norm = read.floats(H);
    L.inner_attn_norm = read.floats(H);
    L.post_attn_norm = read.floats(H);
    L.ffn_norm = read.floats(F);
    L.q = read.ternary(c.hidden_size, c.hidden_size);
    L.k = read.ternary(c.kv_dim(), c.hidden_size);
    L.v = read.ternary(c.kv_dim(), c.hidden_size);
    L.o = read.ternary(c.hidden_size, c.hidden_size);
    L.gate = read.ternary(c.intermediate_size, c.hidden_size);
    L.up = read.ternary(c.intermediate_size, c.hidden_size);
    L.down = read.ternary(c.hidden_size, c.intermediate_size);
  }
  return m;
}

}  // namespace bitsim::model
