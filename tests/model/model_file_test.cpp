// The ternary model image (model/model_file.h) and Buffer views (base/buffer.h): a model
// written as an image and read back in place equals the original array for array, and an
// image of another shape or a damaged table is refused with an Error.
#include "model/model_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "model/synthetic.h"

using namespace bitsim::model;

namespace {
// The image's bytes in one 64-byte aligned heap block.
std::shared_ptr<void> flatten(const ModelImage& img, size_t* bytes) {
  *bytes = img.bytes();
  void* p = std::aligned_alloc(64, (*bytes + 63) / 64 * 64);
  auto* at = static_cast<uint8_t*>(p);
  for (const ImagePart& part : img.parts) {
    if (part.data) std::memcpy(at, part.data, part.bytes);
    else std::memset(at, 0, part.bytes);
    at += part.bytes;
  }
  return std::shared_ptr<void>(p, std::free);
}

void expect_same(const TernaryMatrix& a, const TernaryMatrix& b, const char* what) {
  EXPECT_EQ(a.rows, b.rows) << what;
  EXPECT_EQ(a.cols, b.cols) << what;
  EXPECT_EQ(std::memcmp(&a.scale, &b.scale, 4), 0) << what;
  EXPECT_TRUE(a.trits == b.trits) << what;
}
}  // namespace

TEST(ModelFile, ImageReadsBackAsTheSameModelInPlace) {
  SyntheticSource src(Shape::Tiny, 7);
  const TernaryModel m = load_ternary_model(src, 2);
  size_t bytes = 0;
  const auto mem = flatten(model_image(m), &bytes);
  const TernaryModel r = model_from_image(m.config, src.describe(), mem, static_cast<uint8_t*>(mem.get()), bytes);
  EXPECT_EQ(r.config, m.config);
  EXPECT_EQ(r.source, src.describe());
  ASSERT_EQ(r.embed.size(), m.embed.size());
  EXPECT_EQ(std::memcmp(r.embed.data(), m.embed.data(), m.embed.size() * 4), 0);
  EXPECT_TRUE(r.embed.is_view());
  EXPECT_EQ(r.final_norm, m.final_norm);
  expect_same(r.lm_head, m.lm_head, "lm_head");
  EXPECT_TRUE(r.lm_head.trits.is_view());
  ASSERT_EQ(r.layers.size(), m.layers.size());
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const auto &a = r.layers[l], &b = m.layers[l];
    EXPECT_EQ(a.input_norm, b.input_norm);
    EXPECT_EQ(a.inner_attn_norm, b.inner_attn_norm);
    EXPECT_EQ(a.post_attn_norm, b.post_attn_norm);
    EXPECT_EQ(a.ffn_norm, b.ffn_norm);
    expect_same(a.q, b.q, "q");
    expect_same(a.k, b.k, "k");
    expect_same(a.v, b.v, "v");
    expect_same(a.o, b.o, "o");
    expect_same(a.gate, b.gate, "gate");
    expect_same(a.up, b.up, "up");
    expect_same(a.down, b.down, "down");
  }
  // Every array starts on a 64-byte boundary.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(r.layers[1].down.trits.data()) % 64, 0u);
}

TEST(ModelFile, ImageOfAnotherShapeOrWithADamagedTableIsRefused) {
  SyntheticSource src(Shape::Tiny, 7);
  const TernaryModel m = load_ternary_model(src, 2);
  size_t bytes = 0;
  const auto mem = flatten(model_image(m), &bytes);
  auto* p = static_cast<uint8_t*>(mem.get());
  ModelConfig other = m.config;
  other.num_layers += 1;
  EXPECT_THROW(model_from_image(other, "x", mem, p, bytes), bitsim::Error);
  EXPECT_THROW(model_from_image(m.config, "x", mem, p, 32), bitsim::Error);   // shorter than the header
  EXPECT_THROW(model_from_image(m.config, "x", mem, p, bytes / 2), bitsim::Error);  // arrays past the end
  p[0] ^= 1;  // magic
  try {
    model_from_image(m.config, "x", mem, p, bytes);
    FAIL() << "a bad magic was accepted";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos) << e.what();
  }
}

TEST(Buffer, AViewIsWritableInPlaceAndBecomesOwnedWhenResized) {
  auto block = std::make_shared<std::vector<int8_t>>(std::vector<int8_t>{1, 0, -1, 1});
  Buffer<int8_t> v = Buffer<int8_t>::view(block, block->data(), block->size());
  EXPECT_TRUE(v.is_view());
  EXPECT_TRUE(v == std::vector<int8_t>({1, 0, -1, 1}));
  Buffer<int8_t> copy = v;  // shares the view
  EXPECT_EQ(copy.data(), v.data());
  v.push_back(0);           // becomes owned: the block is untouched
  EXPECT_FALSE(v.is_view());
  EXPECT_TRUE(v == std::vector<int8_t>({1, 0, -1, 1, 0}));
  EXPECT_EQ(block->size(), 4u);
  Buffer<int8_t> moved = std::move(v);
  EXPECT_TRUE(moved == std::vector<int8_t>({1, 0, -1, 1, 0}));
  EXPECT_TRUE(v.empty());  // NOLINT: a moved-from buffer is empty
}
