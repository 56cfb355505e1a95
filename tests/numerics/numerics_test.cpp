// Tests of the numerics contract (CIRCUITS.md section 4): exactness where the contract is
// exact, measured worst errors against long-double references where it approximates, and
// bit-level determinism. Worst errors are printed as "[numerics] <what> worst <value>" and
// recorded as GoogleTest properties.

#include "numerics/numerics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <cstring>
#include <vector>

namespace bitsim::num {
namespace {

using ld = long double;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

// Deterministic generator (std distributions are implementation-defined; this is not).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi) with 24 random bits, float operations only.
  float uniform(float lo, float hi) {
    const float u = static_cast<float>(next() >> 40) * 5.9604644775390625e-8f;  // 2^-24
    return lo + (hi - lo) * u;
  }
};

// Size of one float ulp at the magnitude of ref (ref a normal float value).
ld float_ulp(ld ref) {
  int e = 0;
  std::frexp(std::fabs(ref), &e);  // |ref| = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0L, e - 24);
}
ld ulp_error(float y, ld ref) { return std::fabs(static_cast<ld>(y) - ref) / float_ulp(ref); }

ld double_ulp(ld ref) {
  int e = 0;
  std::frexp(std::fabs(ref), &e);
  return std::ldexp(1.0L, e - 53);
}

void report(const std::string& what, double value, const char* unit) {
  char line[160];
  std::snprintf(line, sizeof line, "[numerics] %s worst %.3g %s", what.c_str(), value, unit);
  std::cout << line << std::endl;
  ::testing::Test::RecordProperty(what, std::to_string(value) + " " + unit);
}

uint64_t fnv1a(uint64_t h, uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    h ^= (v >> (8 * i)) & 0xffu;
    h *= 0x100000001b3ull;
  }
  return h;
}
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;

// ---------------------------------------------------------------------------------------

TEST(Contraction, MulSubIsTwoRoundings) {
  // a*b = 1 + 2^-11 + 2^-24 is not a float: rounded (tie, to even) it is 1 + 2^-11.
  volatile float va = 1.0f + 0x1p-12f;
  volatile float vb = 1.0f + 0x1p-12f;
  volatile float vc = 1.0f + 0x1p-11f;
  const float a = va, b = vb, c = vc;
  const float fused = std::fma(a, b, -c);
  const float unfused = mul_sub(a, b, c);
  EXPECT_EQ(fused, 0x1p-24f);
  EXPECT_EQ(unfused, 0.0f);
  EXPECT_NE(bits(fused), bits(unfused));
  // A non-tie case too: a*b = 1 + 3*2^-12 + 2*2^-24 + ..., rounding error non-zero.
  volatile float vd = 1.0f + 3.0f * 0x1p-12f, ve = 1.0f + 5.0f * 0x1p-13f;
  const float d = vd, e = ve;
  const float p = d * e;
  EXPECT_NE(std::fma(d, e, -p), 0.0f) << "operands must have an inexact product";
  EXPECT_EQ(mul_sub(d, e, p), 0.0f);
}

TEST(Rne, EdgeCasesMatchNearbyint) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const float cases[] = {0.0f, -0.0f, 0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f, 0.49999997f,
                         -0.49999997f, 0.50000006f, 1.0f, -1.0f, 0.3f, -0.3f, 127.5f, -128.5f,
                         4194303.5f, -4194303.5f, 4194304.0f, 4194304.5f, 4194305.5f, -4194305.5f,
                         8388607.5f, -8388607.5f, 8388608.0f, 16777216.0f, 3.0e38f, -3.0e38f,
                         1e-30f, -1e-30f, 1e-45f, -1e-45f, 1.1754942e-38f, 1.17549435e-38f,
                         std::numeric_limits<float>::max(), kInf, -kInf};
  for (float x : cases) {
    const float want = std::nearbyint(x);
    EXPECT_EQ(bits(rne(x)), bits(want)) << "x = " << x;
  }
  EXPECT_EQ(rne(0.5f), 0.0f);
  EXPECT_EQ(rne(1.5f), 2.0f);
  EXPECT_EQ(rne(2.5f), 2.0f);
  EXPECT_EQ(rne(-2.5f), -2.0f);
  EXPECT_EQ(rne(4194303.5f), 4194304.0f);  // 2^22 - 0.5 -> even
  EXPECT_TRUE(std::signbit(rne(-0.5f)));
  EXPECT_TRUE(std::isnan(rne(kNaN)));
  EXPECT_TRUE(std::isnan(rne(-kNaN)));
}

TEST(Rne, RandomSweepMatchesNearbyintBitForBit) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  SplitMix64 rng{12345};
  int checked = 0;
  for (int i = 0; i < 2000000; ++i) {
    const uint64_t r = rng.next();
    // Half the samples are arbitrary bit patterns, half are near small integers/halves.
    const float x = (i & 1) ? from_bits(static_cast<uint32_t>(r))
                            : static_cast<float>(static_cast<int32_t>(r % 20001) - 10000) * 0.25f +
                                  rng.uniform(-1e-3f, 1e-3f) * static_cast<float>(r >> 63);
    const float got = rne(x);
    const float want = std::nearbyint(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(got));
      continue;
    }
    ASSERT_EQ(bits(got), bits(want)) << "x = " << x << " (bits " << bits(x) << ")";
    ++checked;
  }
  EXPECT_GT(checked, 1900000);
}

TEST(FlushDenormal, DenormalsBecomeSignedZero) {
  EXPECT_EQ(bits(flush_denormal(1e-40f)), bits(0.0f));
  EXPECT_EQ(bits(flush_denormal(-1e-40f)), bits(-0.0f));
  EXPECT_EQ(bits(flush_denormal(from_bits(0x00000001u))), 0x00000000u);
  EXPECT_EQ(bits(flush_denormal(from_bits(0x807fffffu))), 0x80000000u);
  EXPECT_EQ(bits(flush_denormal(0.0f)), bits(0.0f));
  EXPECT_EQ(bits(flush_denormal(-0.0f)), bits(-0.0f));
  // Normals, inf and NaN untouched.
  for (float x : {std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(), 1.0f,
                  -3.5f, std::numeric_limits<float>::max(), kInf, -kInf}) {
    EXPECT_EQ(bits(flush_denormal(x)), bits(x));
  }
  EXPECT_TRUE(std::isnan(flush_denormal(kNaN)));
}

TEST(ExpApprox, AccuracyOnDenseGrid) {
  // 4M evenly spaced points over [-87, 88], 1M points in [-1, 1], 1M random magnitudes.
  ld worst = 0;
  float worst_x = 0;
  auto check = [&](float x) {
    const ld ref = std::exp(static_cast<ld>(x));
    const ld err = ulp_error(exp_approx(x), ref);
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  };
  const int n = 4000000;
  for (int i = 0; i <= n; ++i) check(-87.0f + static_cast<float>(static_cast<double>(i) * 175.0 / n));
  for (int i = 0; i <= 1000000; ++i) check(-1.0f + static_cast<float>(i) * 2e-6f);
  // 1M random floats with random exponents (|x| from 2^-40 to 2^6), both signs.
  SplitMix64 rng{2024};
  for (int i = 0; i < 1000000; ++i) {
    const float m = rng.uniform(1.0f, 2.0f);
    const int e = static_cast<int>(rng.next() % 47) - 40;
    const float x = std::ldexp(m, e) * ((rng.next() & 1) ? -1.0f : 1.0f);
    if (x > -87.0f && x < 88.0f) check(x);
  }
  report("exp_approx (vs long double exp, [-87,88])", static_cast<double>(worst), "ulp");
  std::cout << "[numerics] exp_approx worst at x = " << worst_x << std::endl;
  EXPECT_LE(worst, 1.25L);
}

TEST(ExpApprox, EdgeCases) {
  EXPECT_EQ(bits(exp_approx(0.0f)), bits(1.0f));
  EXPECT_EQ(bits(exp_approx(-0.0f)), bits(1.0f));
  EXPECT_EQ(exp_approx(-87.5f), 0.0f);
  EXPECT_EQ(exp_approx(-100.0f), 0.0f);
  EXPECT_EQ(exp_approx(-1e30f), 0.0f);
  EXPECT_EQ(exp_approx(-kInf), 0.0f);
  EXPECT_EQ(exp_approx(89.0f), kInf);
  EXPECT_EQ(exp_approx(1e30f), kInf);
  EXPECT_EQ(exp_approx(kInf), kInf);
  EXPECT_EQ(exp_approx(88.72283935546875f), kInf);  // smallest float whose e^x overflows
  const float top = exp_approx(88.72283172607421875f);  // largest float whose e^x is finite
  EXPECT_TRUE(std::isfinite(top));
  EXPECT_LE(ulp_error(top, std::exp(static_cast<ld>(88.72283172607421875f))), 2.0L);
  EXPECT_TRUE(std::isnan(exp_approx(kNaN)));
  // Results that would be denormal are flushed: e^-87.4 < 2^-126.
  EXPECT_EQ(bits(exp_approx(-87.4f)), bits(0.0f));
  EXPECT_GE(exp_approx(-87.3f), std::numeric_limits<float>::min());
  // No denormal output anywhere in the underflow region.
  for (float x = -88.0f; x < -86.0f; x += 1e-4f) {
    const float y = exp_approx(x);
    EXPECT_TRUE(y == 0.0f || y >= std::numeric_limits<float>::min()) << x;
  }
  // Monotonic non-decreasing across the k boundaries near 0 (spot check).
  float prev = 0.0f;
  for (float x = -3.0f; x < 3.0f; x += 1e-3f) {
    const float y = exp_approx(x);
    EXPECT_GE(y, prev) << x;
    prev = y;
  }
}

TEST(Recip, CorrectlyRoundedDivision) {
  SplitMix64 rng{7};
  ld worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    // Magnitudes from 2^-60 to 2^60, both signs.
    const float m = rng.uniform(1.0f, 2.0f);
    const int e = static_cast<int>(rng.next() % 121) - 60;
    const float x = std::ldexp(m, e) * ((rng.next() & 1) ? -1.0f : 1.0f);
    const float y = recip(x);
    ASSERT_EQ(bits(y), bits(1.0f / x));
    worst = std::max(worst, ulp_error(y, 1.0L / static_cast<ld>(x)));
  }
  report("recip (vs long double)", static_cast<double>(worst), "ulp");
  EXPECT_LE(worst, 0.5L);
  EXPECT_EQ(recip(0.0f), kInf);
  EXPECT_EQ(recip(-0.0f), -kInf);
  EXPECT_EQ(bits(recip(kInf)), bits(0.0f));
  EXPECT_EQ(bits(recip(3.0e38f)), bits(0.0f));  // 1/3e38 is denormal: flushed
}

TEST(Rsqrt, AccuracyExhaustiveOverTwoBinades) {
  // rsqrt(4x) = rsqrt(x)/2 exactly (seed and steps scale by powers of two), so [1, 4)
  // covers every normal input whose result is normal. Exhaustive: 2^24 inputs.
  ld worst = 0;
  float worst_x = 0;
  for (uint32_t b = bits(1.0f); b < bits(4.0f); ++b) {
    const float x = from_bits(b);
    const ld err = ulp_error(rsqrt(x), 1.0L / std::sqrt(static_cast<ld>(x)));
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  }
  report("rsqrt (vs long double, all floats in [1,4))", static_cast<double>(worst), "ulp");
  std::cout << "[numerics] rsqrt worst at x = " << worst_x << std::endl;
  EXPECT_LE(worst, 1.5L);
  // The scaling argument, checked on samples across the whole range.
  SplitMix64 rng{99};
  for (int i = 0; i < 10000; ++i) {
    const float x = rng.uniform(1.0f, 4.0f);
    const float y = rsqrt(x);
    for (int e = -62; e <= 63; ++e) {
      ASSERT_EQ(bits(rsqrt(std::ldexp(x, 2 * e))), bits(std::ldexp(y, -e))) << x << " e " << e;
    }
  }
  EXPECT_EQ(rsqrt(1.0f), 1.0f);
  EXPECT_EQ(rsqrt(4.0f), 0.5f);
  EXPECT_EQ(rsqrt(0.0f), kInf);
  EXPECT_EQ(rsqrt(1e-40f), kInf);
  EXPECT_EQ(bits(rsqrt(kInf)), bits(0.0f));
  EXPECT_TRUE(std::isnan(rsqrt(-1.0f)));
  EXPECT_TRUE(std::isnan(rsqrt(kNaN)));
  EXPECT_LE(ulp_error(rsqrt(std::numeric_limits<float>::min()),
                      1.0L / std::sqrt(static_cast<ld>(std::numeric_limits<float>::min()))),
            2.0L);
}

TEST(DoubleHelpers, ExpAndLogAgainstLibm) {
  ld worst_exp = 0, worst_log = 0;
  for (int i = 0; i <= 200000; ++i) {
    const double x = -700.0 + 1400.0 * i / 200000.0;
    worst_exp = std::max(worst_exp, std::fabs(detail::exp_d(x) - std::exp(static_cast<ld>(x))) /
                                        double_ulp(std::exp(static_cast<ld>(x))));
  }
  SplitMix64 rng{3};
  for (int i = 0; i < 200000; ++i) {
    const double m = 0.5 + static_cast<double>(rng.next() >> 11) * 0x1p-53 * 1.5;  // [0.5, 2)
    const int e = static_cast<int>(rng.next() % 2001) - 1000;
    const double x = std::ldexp(m, e);
    const ld ref = std::log(static_cast<ld>(x));
    if (ref == 0) continue;
    worst_log = std::max(worst_log, std::fabs(detail::log_d(x) - ref) / double_ulp(ref));
  }
  for (double x : {10000.0, 2.0, 0.5, 1.0 + 1e-9, 1.0 - 1e-9, 1.4142135623730951, 1e-310}) {
    const ld ref = std::log(static_cast<ld>(x));
    worst_log = std::max(worst_log, std::fabs(detail::log_d(x) - ref) / double_ulp(ref));
  }
  report("exp_d (vs long double, [-700,700])", static_cast<double>(worst_exp), "double ulp");
  report("log_d (vs long double, 2^-1000..2^1000)", static_cast<double>(worst_log), "double ulp");
  EXPECT_LE(worst_exp, 2.0L);
  EXPECT_LE(worst_log, 2.0L);
  EXPECT_EQ(detail::exp_d(0.0), 1.0);
  EXPECT_EQ(detail::log_d(1.0), 0.0);
  EXPECT_EQ(detail::exp_d(710.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(detail::exp_d(-710.0), 0.0);
  EXPECT_TRUE(std::isfinite(detail::exp_d(709.78)));
  EXPECT_EQ(detail::log_d(0.0), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(detail::log_d(-1.0)));
}

TEST(DoubleHelpers, SinCosAgainstLibm) {
  // Absolute error over the RoPE domain (angles up to 2048 rad) and beyond.
  ld worst = 0;
  SplitMix64 rng{11};
  for (int i = 0; i < 400000; ++i) {
    const double x = (static_cast<double>(rng.next() >> 11) * 0x1p-53 - 0.5) * 2.0 *
                     ((i % 4 == 0) ? 1e5 : (i % 4 == 1) ? 2048.0 : (i % 4 == 2) ? 10.0 : 1.0);
    worst = std::max(worst, std::fabs(detail::sin_d(x) - std::sin(static_cast<ld>(x))));
    worst = std::max(worst, std::fabs(detail::cos_d(x) - std::cos(static_cast<ld>(x))));
  }
  // Relative error for small arguments and near the zeros of sin/cos (float angles).
  ld worst_rel = 0;
  for (int k = 1; k < 1300; ++k) {
    const float x = static_cast<float>(k * 1.5707963267948966);  // near k*pi/2
    const ld s = std::sin(static_cast<ld>(x)), c = std::cos(static_cast<ld>(x));
    worst_rel = std::max(worst_rel, std::fabs(detail::sin_d(x) - s) / double_ulp(s));
    worst_rel = std::max(worst_rel, std::fabs(detail::cos_d(x) - c) / double_ulp(c));
  }
  for (double x : {1e-8, 1e-4, 0.1, 0.7853981633974483}) {
    const ld s = std::sin(static_cast<ld>(x));
    worst_rel = std::max(worst_rel, std::fabs(detail::sin_d(x) - s) / double_ulp(s));
  }
  report("sin_d/cos_d (vs long double, |x|<=1e5)", static_cast<double>(worst), "abs");
  report("sin_d/cos_d near zeros and small x", static_cast<double>(worst_rel), "double ulp");
  EXPECT_LE(worst, 3e-16L);
  EXPECT_LE(worst_rel, 4.0L);
  EXPECT_EQ(detail::sin_d(0.0), 0.0);
  EXPECT_EQ(detail::cos_d(0.0), 1.0);
  EXPECT_TRUE(std::isnan(detail::sin_d(std::numeric_limits<double>::infinity())));
  EXPECT_TRUE(std::isnan(detail::cos_d(1e300)));
}

TEST(Silu, AccuracyAndEdges) {
  ld worst = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -20.0f + static_cast<float>(i) * 2e-5f;
    const ld xl = x;
    const ld ref = xl / (1.0L + std::exp(-xl));
    if (ref == 0) continue;
    worst = std::max(worst, ulp_error(silu(x), ref));
  }
  report("silu (vs long double, [-20,20])", static_cast<double>(worst), "ulp");
  EXPECT_LE(worst, 3.0L);
  EXPECT_EQ(bits(silu(0.0f)), bits(0.0f));
  EXPECT_EQ(silu(100.0f), 100.0f);
  EXPECT_EQ(bits(silu(-100.0f)), bits(-0.0f));
  EXPECT_EQ(silu(kInf), kInf);
  EXPECT_TRUE(std::isnan(silu(kNaN)));
  // The documented sequence, reproduced from the header.
  for (float x : {-3.25f, -0.5f, 0.1f, 1.0f, 7.5f}) {
    const float d = 1.0f + exp_approx(-x);
    EXPECT_EQ(bits(silu(x)), bits(flush_denormal(x / d)));
  }
}

// The 8-lane sum of squares of the header, reproduced independently.
float documented_sum_squares(const std::vector<float>& x) {
  float lane[8] = {};
  for (size_t i = 0; i < x.size(); ++i) {
    const float p = x[i] * x[i];
    lane[i % 8] = lane[i % 8] + p;
  }
  const float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5], s2 = lane[2] + lane[6],
              s3 = lane[3] + lane[7];
  const float t0 = s0 + s2, t1 = s1 + s3;
  return t0 + t1;
}

TEST(RmsNorm, FollowsTheDocumentedSequenceBitForBit) {
  SplitMix64 rng{21};
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 96, 1536, 4096, 4099}) {
    std::vector<float> x(n), w(n), y(n);
    for (int i = 0; i < n; ++i) {
      // Wide dynamic range so that the summation order matters.
      x[i] = rng.uniform(-1.0f, 1.0f) * ((i % 13 == 0) ? 1000.0f : 1.0f);
      w[i] = rng.uniform(0.5f, 2.0f);
    }
    const float sumsq = documented_sum_squares(x);
    ASSERT_EQ(bits(sum_squares(x.data(), n)), bits(sumsq)) << "n = " << n;
    const float mean = sumsq / static_cast<float>(n);
    const float r = rsqrt(mean + 1e-5f);
    rmsnorm(x.data(), w.data(), n, 1e-5f, y.data());
    for (int i = 0; i < n; ++i) {
      const float p = x[i] * r;
      ASSERT_EQ(bits(y[i]), bits(flush_denormal(p * w[i]))) << "n = " << n << " i = " << i;
    }
    // In place gives the same result.
    std::vector<float> z = x;
    rmsnorm(z.data(), w.data(), n, 1e-5f, z.data());
    EXPECT_EQ(z, y);
  }
  // The order really is lane-wise: a sequential sum differs on this input.
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = (i % 8 == 0) ? 4096.0f : 1.0f + static_cast<float>(i) * 1e-3f;
  float seq = 0.0f;
  for (float v : x) seq += v * v;
  EXPECT_NE(bits(seq), bits(sum_squares(x.data(), 64)));
  EXPECT_EQ(bits(documented_sum_squares(x)), bits(sum_squares(x.data(), 64)));
}

TEST(RmsNorm, AccuracyAgainstLongDouble) {
  SplitMix64 rng{5};
  ld worst = 0;
  for (int trial = 0; trial < 50; ++trial) {
    const int n = (trial % 2) ? 1536 : 4096;
    std::vector<float> x(n), w(n), y(n);
    for (int i = 0; i < n; ++i) {
      x[i] = rng.uniform(-4.0f, 4.0f);
      w[i] = rng.uniform(-2.0f, 2.0f);
    }
    rmsnorm(x.data(), w.data(), n, 1e-5f, y.data());
    ld sumsq = 0;
    for (float v : x) sumsq += static_cast<ld>(v) * v;
    const ld r = 1.0L / std::sqrt(sumsq / n + static_cast<ld>(1e-5f));
    for (int i = 0; i < n; ++i) {
      const ld ref = static_cast<ld>(x[i]) * r * w[i];
      if (std::fabs(ref) < 1e-30L) continue;
      worst = std::max(worst, std::fabs(y[i] - ref) / std::fabs(ref));
    }
  }
  report("rmsnorm (vs long double, n=1536/4096, rel)", static_cast<double>(worst), "rel");
  EXPECT_LE(worst, 1e-6L);
}

TEST(QuantizeActivations, ScaleZerosTiesAndClamp) {
  // All zero: a is clamped to 1e-5 and every q is 0.
  std::vector<float> zeros(100, 0.0f);
  std::vector<int8_t> q(100, 55);
  EXPECT_EQ(quantize_activations(zeros.data(), 100, q.data()), 1e-5f);
  for (int8_t v : q) EXPECT_EQ(v, 0);

  // max|x| = 127 gives s = 1, so q = rne(x): ties go to even.
  const std::vector<float> x = {127.0f, 2.5f, -2.5f, 0.5f, 1.5f, -0.5f, 3.5f, -1.5f, 0.49f, -126.5f};
  const std::vector<int8_t> want = {127, 2, -2, 0, 2, 0, 4, -2, 0, -126};
  q.assign(x.size(), 0);
  EXPECT_EQ(quantize_activations(x.data(), static_cast<int>(x.size()), q.data()), 127.0f);
  EXPECT_EQ(q, std::vector<int8_t>(want));

  // The max element maps to +-127 for any scale.
  SplitMix64 rng{77};
  for (int trial = 0; trial < 1000; ++trial) {
    std::vector<float> v(1536);
    // Magnitudes 2^-10 .. 2^29, all above the 1e-5 floor.
    for (float& e : v) e = rng.uniform(-1.0f, 1.0f) * std::ldexp(1.0f, trial % 40 - 10);
    const int imax = static_cast<int>(rng.next() % 1536);
    v[imax] = std::ldexp(1.5f, trial % 40 - 10) * ((trial & 1) ? -1.0f : 1.0f) * rng.uniform(1.0f, 1.3f);
    std::vector<int8_t> qv(1536);
    const float a = quantize_activations(v.data(), 1536, qv.data());
    ASSERT_EQ(a, std::fabs(v[imax]));
    ASSERT_EQ(qv[imax], (trial & 1) ? -127 : 127);
    const float s = 127.0f / a;
    for (int i = 0; i < 1536; i += 97) ASSERT_EQ(qv[i], static_cast<int8_t>(std::nearbyint(v[i] * s)));
  }
}

TEST(QuantizeSymmetric, ReturnsMaxOver127) {
  std::vector<float> x = {0.25f, -3.0f, 1.0f, 2.9f};
  std::vector<int8_t> q(4);
  const float sq = quantize_symmetric(x.data(), 4, q.data());
  EXPECT_EQ(bits(sq), bits(3.0f / 127.0f));
  const float s = 127.0f / 3.0f;
  EXPECT_EQ(q, (std::vector<int8_t>{static_cast<int8_t>(std::nearbyint(0.25f * s)), -127, 42,
                                    static_cast<int8_t>(std::nearbyint(2.9f * s))}));
  EXPECT_EQ(q[3], 123);
  std::vector<float> z(96, 0.0f);
  std::vector<int8_t> qz(96, 9);
  EXPECT_EQ(bits(quantize_symmetric(z.data(), 96, qz.data())), bits(1e-5f / 127.0f));
  for (int8_t v : qz) EXPECT_EQ(v, 0);
}

TEST(QuantizeFixed, RoundsAndClamps) {
  const std::vector<float> x = {0.0f, 0.05f, 0.15f, -0.25f, 12.7f, 12.8f, 100.0f, -12.8f, -12.9f,
                                -1e30f, kNaN};
  std::vector<int8_t> q(x.size());
  quantize_fixed(x.data(), static_cast<int>(x.size()), 0.1f, q.data());
  const float inv = 1.0f / 0.1f;
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[1], static_cast<int8_t>(std::nearbyint(0.05f * inv)));
  EXPECT_EQ(q[2], static_cast<int8_t>(std::nearbyint(0.15f * inv)));
  EXPECT_EQ(q[3], static_cast<int8_t>(std::nearbyint(-0.25f * inv)));
  EXPECT_EQ(q[4], 127);
  EXPECT_EQ(q[5], 127);  // 128 clamps
  EXPECT_EQ(q[6], 127);
  EXPECT_EQ(q[7], -128);
  EXPECT_EQ(q[8], -128);  // -129 clamps
  EXPECT_EQ(q[9], -128);
  EXPECT_EQ(q[10], 0);  // NaN -> 0 (documented)
}

TEST(Dequantize, FactorSequenceAndAccuracy) {
  const std::vector<int32_t> acc = {0, 1, -1, 1000, -524288, 524287, 123457};
  std::vector<float> y(acc.size());
  const float w_scale = 0.0371f, a = 3.7f;
  dequantize(acc.data(), static_cast<int>(acc.size()), w_scale, a, y.data());
  const float factor = (w_scale * a) / 127.0f;
  for (size_t i = 0; i < acc.size(); ++i) {
    EXPECT_EQ(bits(y[i]), bits(static_cast<float>(acc[i]) * factor)) << i;
    if (acc[i] != 0) {
      const ld ref = static_cast<ld>(acc[i]) * w_scale * a / 127.0L;
      EXPECT_LE(std::fabs(y[i] - ref) / std::fabs(ref), 3.0L * 0x1p-24L) << i;
    }
  }
  EXPECT_EQ(bits(y[0]), bits(0.0f));
  // Tiny results are flushed, keeping the sign.
  std::vector<int32_t> one = {1, -1};
  std::vector<float> t(2);
  dequantize(one.data(), 2, 1e-20f, 1e-20f, t.data());
  EXPECT_EQ(bits(t[0]), bits(0.0f));
  EXPECT_EQ(bits(t[1]), bits(-0.0f));
}

TEST(Rope, TableMatchesLongDouble) {
  const RopeTable table(96, 10000.0f, 2048);
  ASSERT_EQ(table.head_dim(), 96);
  ASSERT_EQ(table.max_positions(), 2048);
  ld worst_freq = 0, worst_tab = 0;
  for (int i = 0; i < 48; ++i) {
    const ld ref = std::pow(10000.0L, -static_cast<ld>(2 * i) / 96.0L);
    worst_freq = std::max(worst_freq, ulp_error(table.inv_freq(i), ref));
  }
  EXPECT_EQ(table.inv_freq(0), 1.0f);
  for (int pos = 0; pos < 2048; ++pos) {
    const float* c = table.cos_row(pos);
    const float* s = table.sin_row(pos);
    for (int i = 0; i < 48; ++i) {
      const float angle = static_cast<float>(pos) * table.inv_freq(i);
      const ld cr = std::cos(static_cast<ld>(angle)), sr = std::sin(static_cast<ld>(angle));
      // Absolute error in units of 2^-24 (float ulp at magnitude 0.5..1).
      worst_tab = std::max(worst_tab, std::fabs(c[i] - cr) * 0x1p24L);
      worst_tab = std::max(worst_tab, std::fabs(s[i] - sr) * 0x1p24L);
      // Values of magnitude >= 2^-8 are the correctly rounded floats.
      if (std::fabs(cr) > 0x1p-8L) {
        ASSERT_LE(ulp_error(c[i], cr), 0.5L + 1e-6L) << pos << "," << i;
      }
      if (std::fabs(sr) > 0x1p-8L) {
        ASSERT_LE(ulp_error(s[i], sr), 0.5L + 1e-6L) << pos << "," << i;
      }
    }
  }
  report("rope inv_freq (vs long double pow)", static_cast<double>(worst_freq), "ulp");
  report("rope cos/sin table (vs long double of the float angle)", static_cast<double>(worst_tab),
         "x 2^-24 abs");
  EXPECT_LE(worst_freq, 0.5L + 1e-6L);
  EXPECT_LE(worst_tab, 0.5L + 1e-6L);
  EXPECT_EQ(table.cos_row(0)[5], 1.0f);
  EXPECT_EQ(table.sin_row(0)[5], 0.0f);
  EXPECT_THROW(table.cos_row(2048), std::out_of_range);
  EXPECT_THROW(table.sin_row(-1), std::out_of_range);
  EXPECT_THROW(RopeTable(95, 10000.0f, 8), std::invalid_argument);
  EXPECT_THROW(RopeTable(96, 0.0f, 8), std::invalid_argument);
  EXPECT_THROW(RopeTable(96, 10000.0f, 0), std::invalid_argument);
}

TEST(Rope, PairsDimensionIWithIPlusHalf) {
  const RopeTable table(96, 10000.0f, 64);
  for (int i : {0, 5, 47}) {
    for (int pos : {1, 17, 63}) {
      const float c = table.cos_row(pos)[i], s = table.sin_row(pos)[i];
      // One-hot at i: y_i = x_i*c, y_{i+48} = x_i*s, everything else 0.
      std::vector<float> v(96, 0.0f);
      v[i] = 1.0f;
      rope_apply(v.data(), pos, table);
      for (int d = 0; d < 96; ++d) {
        const float want = d == i ? c : d == i + 48 ? s : 0.0f;
        ASSERT_EQ(v[d], want) << "i " << i << " pos " << pos << " d " << d;
      }
      // One-hot at i+48: y_i = -s, y_{i+48} = c.
      std::vector<float> u(96, 0.0f);
      u[i + 48] = 1.0f;
      rope_apply(u.data(), pos, table);
      for (int d = 0; d < 96; ++d) {
        const float want = d == i ? -s : d == i + 48 ? c : 0.0f;
        ASSERT_EQ(u[d], want) << "i " << i << " pos " << pos << " d " << d;
      }
    }
  }
  // Position 0 is the identity.
  std::vector<float> x(96);
  for (int d = 0; d < 96; ++d) x[d] = static_cast<float>(d) - 40.5f;
  std::vector<float> y = x;
  rope_apply(y.data(), 0, table);
  EXPECT_EQ(x, y);
}

TEST(Rope, ApplyMatchesLongDoubleAndDocumentedSequence) {
  const RopeTable table(96, 10000.0f, 512);
  SplitMix64 rng{31};
  ld worst = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int pos = static_cast<int>(rng.next() % 512);
    std::vector<float> x(96);
    for (float& v : x) v = rng.uniform(-3.0f, 3.0f);
    std::vector<float> y = x;
    rope_apply(y.data(), pos, table);
    ld norm = 0;
    for (float v : x) norm = std::max(norm, static_cast<ld>(std::fabs(v)));
    for (int i = 0; i < 48; ++i) {
      const float c = table.cos_row(pos)[i], s = table.sin_row(pos)[i];
      ASSERT_EQ(bits(y[i]), bits(flush_denormal(x[i] * c - x[i + 48] * s)));
      ASSERT_EQ(bits(y[i + 48]), bits(flush_denormal(x[i + 48] * c + x[i] * s)));
      const ld angle = static_cast<ld>(static_cast<float>(pos) * table.inv_freq(i));
      const ld cr = std::cos(angle), sr = std::sin(angle);
      const ld r0 = x[i] * cr - x[i + 48] * sr, r1 = x[i + 48] * cr + x[i] * sr;
      worst = std::max(worst, std::fabs(y[i] - r0) / norm);
      worst = std::max(worst, std::fabs(y[i + 48] - r1) / norm);
    }
  }
  report("rope_apply (vs long double, |err| / max|x|)", static_cast<double>(worst), "rel");
  EXPECT_LE(worst, 4.0L * 0x1p-24L);
  // Several heads at once equal head by head.
  std::vector<float> heads(96 * 3);
  for (float& v : heads) v = rng.uniform(-1.0f, 1.0f);
  std::vector<float> one_by_one = heads;
  rope_apply_heads(heads.data(), 3, 100, table);
  for (int h = 0; h < 3; ++h) rope_apply(one_by_one.data() + 96 * h, 100, table);
  EXPECT_EQ(heads, one_by_one);
}

TEST(SiluGate, MatchesLongDouble) {
  SplitMix64 rng{41};
  const int n = 4096;
  ld worst = 0;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> g(n), u(n), y(n);
    for (int i = 0; i < n; ++i) {
      g[i] = rng.uniform(-12.0f, 12.0f);
      u[i] = rng.uniform(-5.0f, 5.0f);
    }
    silu_gate(g.data(), u.data(), n, y.data());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(bits(y[i]), bits(flush_denormal(silu(g[i]) * u[i])));
      const ld gl = g[i];
      const ld ref = gl / (1.0L + std::exp(-gl)) * u[i];
      if (ref == 0) continue;
      worst = std::max(worst, ulp_error(y[i], ref));
    }
  }
  report("silu_gate (vs long double)", static_cast<double>(worst), "ulp");
  EXPECT_LE(worst, 3.5L);
}

TEST(AttentionFinish, FactorSequence) {
  std::vector<int32_t> acc(96);
  for (int d = 0; d < 96; ++d) acc[d] = (d - 48) * 123457;
  const uint32_t sum = 512u * 32767u;  // the largest possible sum, < 2^24
  std::vector<float> o(96);
  const float s_v = 0.0213f;
  attention_finish(acc.data(), sum, s_v, 96, o.data());
  const float factor = s_v / static_cast<float>(sum);
  EXPECT_EQ(static_cast<uint32_t>(static_cast<float>(sum)), sum);  // exact conversion
  for (int d = 0; d < 96; ++d) {
    ASSERT_EQ(bits(o[d]), bits(flush_denormal(static_cast<float>(acc[d]) * factor)));
    if (acc[d] != 0) {
      const ld ref = static_cast<ld>(acc[d]) * s_v / sum;
      EXPECT_LE(std::fabs(o[d] - ref) / std::fabs(ref), 2.0L * 0x1p-24L);
    }
  }
  // Only n outputs are written.
  std::vector<float> small(4, -7.0f);
  attention_finish(acc.data(), 1u, 1.0f, 2, small.data());
  EXPECT_EQ(small, (std::vector<float>{-48.0f * 123457, -47.0f * 123457, -7.0f, -7.0f}));
}

TEST(AttentionMultiplier, KnownValuesLoweringAndSaturation) {
  // The constant is the float nearest to 16/sqrt(96).
  const ld c = 16.0L / std::sqrt(96.0L);
  EXPECT_LE(ulp_error(kAttnScale96, c), 0.5L);
  EXPECT_EQ(bits(kAttnScale96), 0x3fd105ecu);

  // By hand: s_q = s_k = 2^-8 gives v = c * 2^-16, m = rne(c * 2^8) = rne(418.046...) = 418.
  AttnMultiplier am = attention_multiplier(0x1p-8f, 0x1p-8f, 96);
  EXPECT_EQ(am.m, 418u);
  EXPECT_EQ(am.shift, 24);
  EXPECT_EQ(am.lowered, 0);
  EXPECT_FALSE(am.saturated);

  // Typical board values: s_q ~ 0.03, s_k ~ 0.04: m ~ 2^24 * 0.0012 * 1.633 ~ 32,900.
  am = attention_multiplier(0.03f, 0.04f, 96);
  const float v = (0.03f * 0.04f) * kAttnScale96;
  EXPECT_EQ(am.m, static_cast<uint32_t>(std::nearbyint(v * 16777216.0f)));
  EXPECT_EQ(am.shift, 24);

  // The board's range 10,818..79,505 is representable at S = 24 (no lowering).
  for (uint32_t target : {10818u, 79505u}) {
    const float s = std::sqrt(static_cast<float>(target) / 16777216.0f / kAttnScale96);
    am = attention_multiplier(s, s, 96);
    EXPECT_EQ(am.shift, 24);
    EXPECT_FALSE(am.saturated);
    EXPECT_NEAR(static_cast<double>(am.m), target, 1.0);
  }

  // m would be 2^24 * 0.02 = 335,544 >= 2^18: S drops to 23, m = rne(0.02 * 2^23).
  const float s = std::sqrt(0.02f / kAttnScale96);
  const float vv = (s * s) * kAttnScale96;
  am = attention_multiplier(s, s, 96);
  EXPECT_EQ(am.shift, 23);
  EXPECT_EQ(am.lowered, 1);
  EXPECT_EQ(am.m, static_cast<uint32_t>(std::nearbyint(vv * 8388608.0f)));
  EXPECT_LT(am.m, 262144u);
  // The edge: walk s_q up one float at a time from just below m = 2^18 - 1 at S = 24; the
  // first s_q whose rne(v * 2^24) reaches 2^18 must be the first with S = 23.
  float sq = (262142.0f / 16777216.0f) / kAttnScale96;
  AttnMultiplier prev = attention_multiplier(sq, 1.0f, 96);
  ASSERT_EQ(prev.shift, 24);
  int steps = 0;
  for (; steps < 100000; ++steps) {
    const float next = std::nextafter(sq, 1.0f);
    const AttnMultiplier cur = attention_multiplier(next, 1.0f, 96);
    const float vn = (next * 1.0f) * kAttnScale96;
    const bool fits24 = std::nearbyint(vn * 16777216.0f) < 262144.0f;
    ASSERT_EQ(cur.shift, fits24 ? 24 : 23) << next;
    if (cur.shift == 23) {
      EXPECT_EQ(prev.m, 262143u);
      EXPECT_EQ(cur.m, static_cast<uint32_t>(std::nearbyint(vn * 8388608.0f)));
      EXPECT_EQ(cur.m, 131072u);
      break;
    }
    sq = next;
    prev = cur;
  }
  EXPECT_LT(steps, 100000);
  // Saturation: v >= 2^18 even at S = 0.
  am = attention_multiplier(1000.0f, 1000.0f, 96);
  EXPECT_TRUE(am.saturated);
  EXPECT_EQ(am.m, 262143u);
  EXPECT_EQ(am.shift, 0);
  EXPECT_EQ(am.lowered, 24);
  // Zero scale: m = 0, fits.
  am = attention_multiplier(0.0f, 0.5f, 96);
  EXPECT_EQ(am.m, 0u);
  EXPECT_EQ(am.shift, 24);
  // Other head_dim: c = 16 * rsqrt(head_dim).
  am = attention_multiplier(0x1p-8f, 0x1p-8f, 64);
  EXPECT_EQ(am.m, static_cast<uint32_t>(std::nearbyint((0x1p-16f * (16.0f * rsqrt(64.0f))) * 16777216.0f)));
  EXPECT_EQ(am.m, 512u);  // 16/8 * 2^-16 * 2^24
  EXPECT_THROW(attention_multiplier(-0.1f, 0.1f, 96), std::invalid_argument);
  EXPECT_THROW(attention_multiplier(kNaN, 0.1f, 96), std::invalid_argument);
  EXPECT_THROW(attention_multiplier(0.1f, 0.1f, 0), std::invalid_argument);
}

TEST(ExpTable, EqualsLongDoubleRoundingAndIsMonotonic) {
  const auto& table = exp_table();
  EXPECT_EQ(table[0], 32767);
  for (int i = 0; i < 256; ++i) {
    const ld v = 32767.0L * std::exp(-static_cast<ld>(i) / 16.0L);
    const ld frac = v - std::floor(v);
    ASSERT_GT(std::fabs(frac - 0.5L), 1e-6L) << "too close to a tie to check with long double";
    ASSERT_EQ(table[i], static_cast<uint16_t>(std::nearbyint(v))) << "i = " << i;
    if (i > 0) {
      ASSERT_LE(table[i], table[i - 1]) << "i = " << i;
    }
  }
  EXPECT_EQ(table[16], 12054);  // 32767 / e
  EXPECT_EQ(table[177], 1);
  EXPECT_EQ(table[178], 0);
  EXPECT_EQ(&exp_table(), &table);  // one constant table
}

// One pass of the CPU steps of a layer over fixed inputs, hashed bit by bit.
uint64_t pipeline_hash() {
  SplitMix64 rng{55};
  const int n = 1536;
  std::vector<float> x(n), w(n), g(n);
  for (int i = 0; i < n; ++i) {
    x[i] = rng.uniform(-3.0f, 3.0f);
    w[i] = rng.uniform(0.5f, 1.5f);
    g[i] = rng.uniform(-8.0f, 8.0f);
  }
  std::vector<float> y(n), s(n), h = x, dq(n), o(96);
  std::vector<int8_t> q(n), qk(n);
  std::vector<int32_t> acc(n);
  rmsnorm(x.data(), w.data(), n, 1e-5f, y.data());
  const float a = quantize_activations(y.data(), n, q.data());
  for (int i = 0; i < n; ++i) acc[i] = q[i] * (i % 7 - 3) * 311;
  dequantize(acc.data(), n, 0.0372f, a, dq.data());
  silu_gate(g.data(), dq.data(), n, s.data());
  add_inplace(h.data(), s.data(), n);
  const RopeTable table(96, 10000.0f, 256);
  rope_apply_heads(h.data(), n / 96, 200, table);
  const float sq = quantize_symmetric(h.data(), 96, q.data());
  quantize_fixed(h.data(), n, 0.021f, qk.data());
  attention_finish(acc.data(), 123456u, 0.017f, 96, o.data());
  const AttnMultiplier am = attention_multiplier(sq, 0.021f, 96);
  uint64_t hash = fnv1a(kFnvBasis, bits(a));
  hash = fnv1a(hash, bits(sq));
  hash = fnv1a(hash, am.m);
  hash = fnv1a(hash, static_cast<uint32_t>(am.shift));
  for (int i = 0; i < n; ++i) {
    hash = fnv1a(hash, bits(y[i]));
    hash = fnv1a(hash, static_cast<uint8_t>(q[i]));
    hash = fnv1a(hash, static_cast<uint8_t>(qk[i]));
    hash = fnv1a(hash, bits(dq[i]));
    hash = fnv1a(hash, bits(s[i]));
    hash = fnv1a(hash, bits(h[i]));
  }
  for (float v : o) hash = fnv1a(hash, bits(v));
  return hash;
}

// The outputs that numerics.h lets alias an input (rmsnorm's y = x; silu_gate's y = gate or
// y = up, as the token loop calls it) give the same bits as a separate output. (The
// pipeline's bits themselves are pinned by GoldenChecksums below.)
TEST(Determinism, AliasedOutputsGiveTheSameBits) {
  SplitMix64 rng{91};
  const int n = 4096;
  std::vector<float> x(n), w(n), gate(n), up(n);
  for (int i = 0; i < n; ++i) {
    x[i] = rng.uniform(-3.0f, 3.0f);
    w[i] = rng.uniform(0.5f, 1.5f);
    gate[i] = rng.uniform(-9.0f, 9.0f);
    up[i] = rng.uniform(-2.0f, 2.0f);
  }
  std::vector<float> y(n);
  rmsnorm(x.data(), w.data(), n, 1e-5f, y.data());
  std::vector<float> in_place = x;
  rmsnorm(in_place.data(), w.data(), n, 1e-5f, in_place.data());
  EXPECT_EQ(0, std::memcmp(y.data(), in_place.data(), sizeof(float) * n));

  silu_gate(gate.data(), up.data(), n, y.data());
  std::vector<float> on_gate = gate, on_up = up;
  silu_gate(on_gate.data(), up.data(), n, on_gate.data());
  silu_gate(gate.data(), on_up.data(), n, on_up.data());
  EXPECT_EQ(0, std::memcmp(y.data(), on_gate.data(), sizeof(float) * n));
  EXPECT_EQ(0, std::memcmp(y.data(), on_up.data(), sizeof(float) * n));
  // Not vacuous: the outputs differ from the inputs they replaced.
  EXPECT_NE(0, std::memcmp(y.data(), gate.data(), sizeof(float) * n));
}

// ReLU^2-gate (hidden_act relu2): hand-worked values, the sequence's two roundings, NaN and
// negative gates to zero, the flush of a denormal product, and aliasing as silu_gate's.
TEST(Relu2Gate, HandWorkedValuesAndEdges) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float gate[] = {3.0f, -2.0f, 0.5f, nan, -0.0f, 1e-20f, 1.0f + 0x1p-23f};
  const float up[] = {2.0f, 5.0f, -4.0f, 1.0f, 1.0f, 1.0f, 3.0f};
  float y[7];
  relu2_gate(gate, up, 7, y);
  EXPECT_EQ(y[0], 18.0f);   // 3^2 * 2
  EXPECT_EQ(bits(y[1]), 0u);  // negative gate: +0 * 5 = +0
  EXPECT_EQ(y[2], -1.0f);   // 0.25 * -4
  EXPECT_EQ(bits(y[3]), 0u);  // NaN gate: +0
  EXPECT_EQ(bits(y[4]), 0u);  // -0 gate: +0
  EXPECT_EQ(bits(y[5]), 0u);  // 1e-40 is denormal: flushed
  // (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46 rounds to 1 + 2^-22 before the multiply by 3.
  EXPECT_EQ(y[6], (1.0f + 0x1p-22f) * 3.0f);
  // ffn_gate chooses by the activation; y may alias gate.
  float g2[7], z[7];
  std::copy(gate, gate + 7, g2);
  ffn_gate(true, g2, up, 7, g2);
  EXPECT_EQ(0, std::memcmp(g2, y, sizeof y));
  ffn_gate(false, gate, up, 7, z);
  EXPECT_NE(bits(z[0]), bits(y[0]));  // silu(3) * 2, not 18
}

// Checksums of the primitives over fixed inputs. They pin the exact bits: any host or
// compiler that disagrees (FMA contraction, x87 excess precision, a changed constant)
// fails here. Recorded on x86-64 with GCC 12 and Clang 14 at -O0..-O3 (also -march=native);
// must hold on every IEEE-754 host. With -ffp-contract=fast every one but rope changes.
TEST(Determinism, GoldenChecksums) {
  uint64_t h_exp = kFnvBasis, h_rsqrt = kFnvBasis, h_silu = kFnvBasis, h_rne = kFnvBasis;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -90.0f + static_cast<float>(i) * 0.0009f;
    h_exp = fnv1a(h_exp, bits(exp_approx(x)));
    h_silu = fnv1a(h_silu, bits(silu(x * 0.25f)));
    h_rne = fnv1a(h_rne, bits(rne(x * 3.3f)));
    h_rsqrt = fnv1a(h_rsqrt, bits(rsqrt(static_cast<float>(i + 1) * 0.0123f)));
  }
  const RopeTable table(96, 10000.0f, 2048);
  uint64_t h_rope = kFnvBasis;
  for (int pos = 0; pos < 2048; ++pos) {
    for (int i = 0; i < 48; ++i) {
      h_rope = fnv1a(h_rope, bits(table.cos_row(pos)[i]));
      h_rope = fnv1a(h_rope, bits(table.sin_row(pos)[i]));
    }
  }
  const uint64_t h_pipe = pipeline_hash();
  std::printf("[numerics] checksums exp %016llx rsqrt %016llx silu %016llx rne %016llx rope %016llx "
              "pipeline %016llx\n",
              static_cast<unsigned long long>(h_exp), static_cast<unsigned long long>(h_rsqrt),
              static_cast<unsigned long long>(h_silu), static_cast<unsigned long long>(h_rne),
              static_cast<unsigned long long>(h_rope), static_cast<unsigned long long>(h_pipe));
  EXPECT_EQ(h_exp, 0x3435a855b2b418b9ull);
  EXPECT_EQ(h_rsqrt, 0xaf777c567dd77fc2ull);
  EXPECT_EQ(h_silu, 0x97ee76d20fcd4a6aull);
  EXPECT_EQ(h_rne, 0x5dded89854dcf230ull);
  EXPECT_EQ(h_rope, 0x2e3a98bffff1dc00ull);
  EXPECT_EQ(h_pipe, 0x7db9c3e7f9f2609dull);
}

TEST(AttentionWeight, TheWeightStepOfCircuitsSection3) {
  const auto& EXP = exp_table();
  // z = (diff * m) >> S, exact in 64 bits, clamped at 255.
  EXPECT_EQ(attention_exp_index(0, 79505, 24, false), 0u);
  EXPECT_EQ(attention_exp_index(211, 79505, 24, false), 0u);   // 211 * 79505 < 2^24
  EXPECT_EQ(attention_exp_index(212, 79505, 24, false), 1u);   // 212 * 79505 >= 2^24
  EXPECT_EQ(attention_exp_index(3133440, 262143, 0, false), 255u);
  EXPECT_EQ(attention_exp_index(3133440, 262143, 63, false), 0u);
  EXPECT_EQ(attention_exp_index(4194303, 262143, 28, false), 255u);  // z = 4095, clamped
  EXPECT_EQ(attention_exp_index(4194303, 262143, 32, false), 255u);  // z = 255
  EXPECT_EQ(attention_exp_index(4194303, 262143, 33, false), 127u);
  EXPECT_EQ(attention_exp_index(1000, 0, 0, false), 0u);
  // Legacy shift mode: z = diff >> 8, m and S unused.
  EXPECT_EQ(attention_exp_index(255, 1, 0, true), 0u);
  EXPECT_EQ(attention_exp_index(256, 1, 0, true), 1u);
  EXPECT_EQ(attention_exp_index(65535, 0, 63, true), 255u);
  EXPECT_EQ(attention_exp_index(65536, 0, 63, true), 255u);
  // p = EXP[index].
  for (uint32_t diff : {0u, 212u, 5000u, 100000u, 3133440u})
    for (bool legacy : {false, true})
      EXPECT_EQ(attention_weight(diff, 79505, 24, legacy), EXP[attention_exp_index(diff, 79505, 24, legacy)]);
  EXPECT_EQ(attention_weight(0, 79505, 24, false), 32767);
  EXPECT_EQ(attention_weight(3133440, 79505, 24, false), 0);
}

}  // namespace
}  // namespace bitsim::num

// ---- The online-softmax unit's steps (docs/variants-attention.md section 3) -------------
namespace bitsim::num {
namespace {

TEST(OnlineSoftmaxSteps, InterpolatedExpHandWorked) {
  // EXP[0..2] = 32767, 30782, 28917 (round(32767 e^(-i/16))).
  EXPECT_EQ(exp_interp(0), 32767);
  EXPECT_EQ(exp_interp(256), 30782);  // f = 0: the board's EXP[1]
  // i = 0, f = 128: 32767 - ((32767 - 30782) * 128 + 128 >> 8) = 32767 - (254208 >> 8) = 31774.
  EXPECT_EQ(exp_interp(128), 31774);
  // i = 1, f = 1: 30782 - ((1865 + 128) >> 8) = 30782 - 7.
  EXPECT_EQ(exp_interp(257), 30775);
  // Past the table: EXP[255] = 0; the last interval interpolates between two zeros.
  EXPECT_EQ(exp_interp(255u * 256), 0);
  EXPECT_EQ(exp_interp(254u * 256 + 255), 0);
  EXPECT_EQ(exp_interp(uint64_t(1) << 48), 0);
  // At every entry (f = 0) the table itself; between entries non-increasing.
  for (uint64_t z = 0; z < 256 * 256; ++z) {
    if ((z & 255) == 0) ASSERT_EQ(exp_interp(z), exp_table()[z >> 8]) << z;
    if (z > 0) ASSERT_LE(exp_interp(z), exp_interp(z - 1)) << z;
  }
}

TEST(OnlineSoftmaxSteps, IndexRescaleAndNormalizeHandWorked) {
  // z8 = ((diff * m) << 8) >> S.
  EXPECT_EQ(online_index8(3, 1u << 16, 16), 768u);  // 3 whole steps
  EXPECT_EQ(online_index8(5, 3, 4), 240u);          // 15/16 of a step: index 0, fraction 240
  EXPECT_EQ(online_index8(5, 3, 4) >> 8, attention_exp_index(5, 3, 4, false));
  // (x * alpha + 2^14) >> 15: exact halves round up.
  EXPECT_EQ(online_rescale(1000, 16384), 500);
  EXPECT_EQ(online_rescale(3, 16384), 2);    // 1.5 -> 2
  EXPECT_EQ(online_rescale(-3, 16384), -1);  // -1.5 -> -1
  EXPECT_EQ(online_rescale(32767, 30782), 30781);  // (1008633794 + 16384) >> 15
  // sum = 2^15: r = 2^31, o = 2 acc exactly.
  const int32_t acc[4] = {5, -7, 0, 1 << 20};
  int32_t o[4];
  online_normalize(acc, 1u << 15, 4, o);
  EXPECT_EQ(o[0], 10);
  EXPECT_EQ(o[1], -14);
  EXPECT_EQ(o[2], 0);
  EXPECT_EQ(o[3], 1 << 21);
  // sum = 3 * 2^15: r = floor(2^31 / 3) = 715827882; acc = sum gives
  // (2^46 - 2^16 + 2^29) >> 30 = 65536 (1.0 in Q15.16).
  const int32_t one[1] = {98304};
  online_normalize(one, 98304, 1, o);
  EXPECT_EQ(o[0], 65536);
  // The CPU finish: o_q * (s_v * 2^-16).
  const int32_t q16[2] = {65536, -32768};
  float f[2];
  attention_finish_online(q16, 0.25f, 2, f);
  EXPECT_EQ(f[0], 0.25f);
  EXPECT_EQ(f[1], -0.125f);
}

}  // namespace
}  // namespace bitsim::num
