#include "model/ternary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"
#include "numerics/numerics.h"
#include <algorithm>

namespace bitsim::model {
namespace {

TEST(Ternary, HandMatrixKnownScaleAndTrits) {
  // mean|W| = (0.5 + 1 + 0 + 2 + 0.25 + 0.75) / 6 = 0.75
  const std::vector<float> w = {0.5f, -1.0f, 0.0f, 2.0f, -0.25f, 0.75f};
  const TernaryMatrix m = ternarize(w.data(), 2, 3);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.scale, 0.75f);
  // W/s = 0.667, -1.333, 0, 2.667, -0.333, 1
  const std::vector<int8_t> want = {1, -1, 0, 1, 0, 1};
  EXPECT_EQ(m.trits, want);
  EXPECT_EQ(m.row(1)[0], 1);
  EXPECT_EQ(m.row(1)[1], 0);
}

TEST(Ternary, TiesRoundHalfToEven) {
  // mean|W| = (0.5 + 1.5 + 0.5 + 1.5 + 1 + 1) / 6 = 1, so W/s = W exactly.
  const std::vector<float> w = {0.5f, 1.5f, -0.5f, -1.5f, 1.0f, -1.0f};
  const TernaryMatrix m = ternarize(w.data(), 1, 6);
  ASSERT_EQ(m.scale, 1.0f);
  // 0.5 -> 0 (even), 1.5 -> 2 -> clamp 1, -0.5 -> -0 = 0, -1.5 -> -2 -> clamp -1
  const std::vector<int8_t> want = {0, 1, 0, -1, 1, -1};
  EXPECT_EQ(m.trits, want);
}

TEST(Ternary, JustAroundHalf) {
  // Sum of |W| is exactly 8 over 8 elements, so the scale is 1 and W/s = W: the float just
  // above 0.5 rounds to 1, the one just below to 0.
  const float above = std::nextafter(0.5f, 1.0f);  // 0.5 + 2^-24
  const float below = std::nextafter(0.5f, 0.0f);  // 0.5 - 2^-25
  const float rest = 0.75f - std::ldexp(1.0f, -24);
  const std::vector<float> w = {above, -above, below, -below, 1.75f, 1.75f, -1.75f, rest};
  const TernaryMatrix m = ternarize(w.data(), 2, 4);
  ASSERT_EQ(m.scale, 1.0f);
  const std::vector<int8_t> want = {1, -1, 0, 0, 1, 1, -1, 1};
  EXPECT_EQ(m.trits, want);
}

TEST(Ternary, AllZeroMatrixClampsScale) {
  const std::vector<float> w(12, 0.0f);
  const TernaryMatrix m = ternarize(w.data(), 3, 4);
  EXPECT_EQ(m.scale, 1e-5f);
  for (int8_t t : m.trits) EXPECT_EQ(t, 0);
  EXPECT_DOUBLE_EQ(zero_fraction(m), 1.0);
}

TEST(Ternary, TinyWeightsUseClampedScale) {
  // mean|W| = 2e-6 < 1e-5: scale 1e-5, W/s = +-0.2 and 0.6 -> 0, 0, 1
  const std::vector<float> w = {2e-6f, -2e-6f, 0.0f, 6e-6f};
  const TernaryMatrix m = ternarize(w.data(), 1, 4);
  EXPECT_EQ(m.scale, 1e-5f);
  const std::vector<int8_t> want = {0, 0, 0, 1};
  EXPECT_EQ(m.trits, want);
}

TEST(Ternary, MeanAccumulatedInDoubleIndexOrder) {
  // One large value followed by many small ones: a float running sum would lose the small
  // ones; the double sum keeps them. 1 + 1000 * 1e-4 = 1.1 over 1001 elements.
  std::vector<float> w(1001, 1e-4f);
  w[0] = 1.0f;
  const TernaryMatrix m = ternarize(w.data(), 1, 1001);
  double sum = 0;
  for (float v : w) sum += std::fabs(double(v));
  EXPECT_EQ(m.scale, float(sum / 1001.0));
}

TEST(Ternary, GaussianZeroFractionNearPointThreeOne) {
  // For W ~ N(0, s^2): mean|W| = s*sqrt(2/pi); a trit is 0 when |W| <= mean|W|/2, i.e.
  // P(|z| < sqrt(2/pi)/2 = 0.399) = 0.310.
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> w(256 * 512);
  for (float& v : w) v = nd(rng);
  const TernaryMatrix m = ternarize(w.data(), 256, 512);
  EXPECT_NEAR(m.scale, 0.02 * std::sqrt(2.0 / M_PI), 2e-4);
  const double z = zero_fraction(m);
  EXPECT_NEAR(z, 0.310, 0.01);
  int plus = 0, minus = 0;
  for (int8_t t : m.trits) {
    ASSERT_TRUE(t >= -1 && t <= 1);
    plus += t == 1;
    minus += t == -1;
  }
  EXPECT_NEAR(double(plus) / double(minus), 1.0, 0.03);
}

TEST(Ternary, RejectsBadShapeAndNonFiniteWeights) {
  const std::vector<float> w = {1.0f, std::numeric_limits<float>::quiet_NaN(), 0.5f, 0.25f};
  EXPECT_THROW(ternarize(w.data(), 0, 4), bitsim::Error);
  EXPECT_THROW(ternarize(w.data(), 2, -1), bitsim::Error);
  try {
    ternarize(w.data(), 2, 2);
    FAIL() << "NaN accepted";
  } catch (const bitsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 0, column 1"), std::string::npos) << e.what();
  }
  const std::vector<float> inf = {1.0f, 2.0f, -std::numeric_limits<float>::infinity()};
  EXPECT_THROW(ternarize(inf.data(), 1, 3), bitsim::Error);
}

TEST(Ternary, HugeOutlierStillTernary) {
  // One huge weight among zeros: W/s = rows*cols for it, far beyond the rounding trick's
  // exact range; it must still map to +-1 and the rest to 0.
  std::vector<float> w(1 << 20, 0.0f);
  w[7] = -3.0e30f;
  const TernaryMatrix m = ternarize(w.data(), 1024, 1024);
  EXPECT_EQ(m.trits[7], -1);
  EXPECT_EQ(zero_fraction(m), 1.0 - 1.0 / double(1 << 20));
}

}  // namespace
}  // namespace bitsim::model

namespace bitsim::model {
namespace {
// ternarize's comparison form against the spec's clamp(rne(W / w_scale), -1, 1), at every
// rounding boundary (pairs chosen so that mean|W| is exactly 1) and on random values.
TEST(Ternarize, ComparisonFormEqualsClampOfRne) {
  std::vector<float> w;
  for (float s : {1.0f, -1.0f})
    for (float b : {0.5f, 1.5f})
      for (float d : {0.0f, 1.0f, -1.0f}) {
        const float v = d == 0.0f ? b : std::nextafter(b, b + d);
        w.push_back(s * v);
        w.push_back(s * (2.0f - v));  // |v| + |2 - v| = 2: the pair's mean is 1
      }
  w.push_back(0.0f);
  w.push_back(2.0f);
  const TernaryMatrix m = ternarize(w.data(), 1, int(w.size()));
  ASSERT_EQ(m.scale, 1.0f);
  for (size_t i = 0; i < w.size(); ++i) {
    const float r = std::clamp(bitsim::num::rne(w[i] / m.scale), -1.0f, 1.0f);
    ASSERT_EQ(float(m.trits[i]), r) << "w = " << w[i];
  }
  EXPECT_EQ(m.trits[0], 0);   // 0.5 rounds to the even 0
  EXPECT_EQ(m.trits[1], 1);   // 1.5 rounds to 2, clamped to 1
  std::vector<float> rnd;
  uint32_t st = 12345;
  for (int i = 0; i < 20000; ++i) {
    st = st * 1664525u + 1013904223u;
    rnd.push_back((float(st >> 8) / float(1 << 24) - 0.5f) * 6.0f);
  }
  const TernaryMatrix r = ternarize(rnd.data(), 1, int(rnd.size()));
  for (size_t i = 0; i < rnd.size(); ++i)
    ASSERT_EQ(float(r.trits[i]), std::clamp(bitsim::num::rne(rnd[i] / r.scale), -1.0f, 1.0f)) << rnd[i];
}
}  // namespace
}  // namespace bitsim::model
