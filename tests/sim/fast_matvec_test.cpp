// The host-side passes on the fast kernels (sim/fast_matvec.h): the K/V calibration pass
// with its matmuls on the decoded kernels over two threads gives the plain loop's scales bit
// for bit, on the synthetic tiny model and on random models of other shapes.
#include "sim/fast_matvec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/error.h"
#include "model/synthetic.h"
#include "model/tokenizer.h"
#include "support/random_model.h"

using namespace bitsim;

namespace {
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}
std::vector<int> calibration(const model::TernaryModel& m) {
  auto tok = model::make_byte_tokenizer(m.config.vocab_size);
  return golden::calibration_tokens(*tok, m.config.bos_token_id);
}
}  // namespace

TEST(FastMatvec, CalibrationGivesThePlainLoopsScales) {
  const model::TernaryModel m = model::load_ternary_model(model::SyntheticSource(model::Shape::Tiny, 11), 2);
  const auto tokens = calibration(m);
  ASSERT_EQ(tokens.size(), size_t(golden::kCalibrationTokens));
  const model::KvScales plain = golden::calibrate_kv_scales(m, tokens, 1);
  for (int threads : {1, 2, 3})
    for (int batch : {1, 7, sim::kCalibrationBatch, 144}) {
      const model::KvScales fast = sim::calibrate_kv_scales_fast(m, tokens, threads, batch);
      EXPECT_TRUE(same_bits(fast.k, plain.k)) << threads << " threads, batch " << batch;
      EXPECT_TRUE(same_bits(fast.v, plain.v)) << threads << " threads, batch " << batch;
      EXPECT_TRUE(same_bits(fast.k_channel, plain.k_channel)) << threads << " threads, batch " << batch;
    }
  EXPECT_EQ(plain.k.size(), size_t(m.config.num_layers) * size_t(m.config.num_heads));
}

TEST(FastMatvec, CalibrationGivesThePlainLoopsScalesOnRandomModels) {
  // Rows not a multiple of the kernels' blocks, FFN widths past one 256-element block.
  std::mt19937 g(5);
  for (auto [heads, ffn, layers] : {std::tuple{1, 300, 2}, std::tuple{3, 1000, 1}}) {
    const model::TernaryModel m = bitsim::testing::random_model(g, heads, ffn, layers, 300);
    std::vector<int> tokens;
    for (int i = 0; i < 40; ++i) tokens.push_back(int(g() % 300));
    const model::KvScales plain = golden::calibrate_kv_scales(m, tokens, 1);
    const model::KvScales fast = sim::calibrate_kv_scales_fast(m, tokens, 2);
    EXPECT_TRUE(same_bits(fast.k, plain.k)) << heads << " heads, FFN " << ffn;
    EXPECT_TRUE(same_bits(fast.v, plain.v)) << heads << " heads, FFN " << ffn;
  }
}

TEST(FastMatvec, EveryMatrixGivesThePlainLoopsSums) {
  std::mt19937 g(9);
  const model::TernaryModel m = bitsim::testing::random_model(g, 2, 700, 2, 250);
  const sim::FastMatvec fast(m, /*with_lm_head=*/true, 2);
  bitsim::hw::fast::Workers workers(2);
  const auto one = fast.fn(), two = fast.fn(workers);
  for (const model::TernaryMatrix* w : {&m.layers[0].q, &m.layers[1].gate, &m.layers[1].down, &m.lm_head}) {
    std::vector<int8_t> x(size_t(w->cols));
    for (auto& v : x) v = int8_t(int(g() % 256) - 128);
    std::vector<int32_t> want(size_t(w->rows)), a(want.size()), b(want.size());
    golden::ternary_matvec(*w, 0, w->rows, x.data(), want.data());
    one(*w, x.data(), a.data());
    two(*w, x.data(), b.data());
    EXPECT_EQ(a, want);
    EXPECT_EQ(b, want);
  }
  // A matrix that is not the model's is refused, not read.
  model::TernaryMatrix other = m.layers[0].q;
  std::vector<int32_t> acc(size_t(other.rows));
  std::vector<int8_t> x(size_t(other.cols), 1);
  EXPECT_THROW(one(other, x.data(), acc.data()), bitsim::Error);
}

// A down projection whose rows are longer than the engine's 4096 (FFN 4500: two segments of
// 2250; 8193: three of 2731) gives the plain loop's sums through every entry: one vector on the
// calling thread and over workers, and several vectors at once; the calibration's scales stay
// the plain loop's.
TEST(FastMatvec, RowsLongerThanTheEngineTakesGiveThePlainLoopsSums) {
  std::mt19937 g(13);
  for (const int ffn : {4500, 8193}) {
    SCOPED_TRACE(ffn);
    const model::TernaryModel m = bitsim::testing::random_model(g, 1, ffn, 1, 200);
    const sim::FastMatvec fast(m, /*with_lm_head=*/false, 2);
    bitsim::hw::fast::Workers workers(2);
    const auto one = fast.fn(), two = fast.fn(workers);
    const auto many = fast.matmul_fn(workers);
    const model::TernaryMatrix& w = m.layers[0].down;
    ASSERT_EQ(w.cols, ffn);
    constexpr int kCount = 3;
    std::vector<int8_t> x(size_t(kCount) * size_t(w.cols));
    for (auto& v : x) v = int8_t(int(g() % 256) - 128);
    std::vector<int32_t> want(size_t(kCount) * size_t(w.rows)), got(want.size());
    for (int i = 0; i < kCount; ++i)
      golden::ternary_matvec(w, 0, w.rows, x.data() + size_t(i) * size_t(w.cols), want.data() + size_t(i) * size_t(w.rows));
    many(w, x.data(), kCount, got.data());
    EXPECT_EQ(got, want);
    std::vector<int32_t> a(size_t(w.rows)), b(a.size());
    one(w, x.data() + size_t(w.cols), a.data());
    two(w, x.data() + size_t(w.cols), b.data());
    EXPECT_EQ(a, std::vector<int32_t>(want.begin() + w.rows, want.begin() + 2 * w.rows));
    EXPECT_EQ(b, a);
    std::vector<int> tokens;
    for (int i = 0; i < 20; ++i) tokens.push_back(int(g() % 200));
    const model::KvScales plain = golden::calibrate_kv_scales(m, tokens, 1);
    const model::KvScales quick = sim::calibrate_kv_scales_fast(m, tokens, 2);
    EXPECT_TRUE(same_bits(quick.k, plain.k));
    EXPECT_TRUE(same_bits(quick.v, plain.v));
  }
}
