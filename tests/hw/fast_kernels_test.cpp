// Fast kernels (hw/fast/fast_kernels.h): bit-exact against the golden plain loops
// (golden::ternary_matvec, golden::attention_head) on every kernel this CPU can run, the
// decoder's invalid-trit check, the Workers pool.
#include "hw/fast/fast_kernels.h"

#include <gtest/gtest.h>

#include "support/int4_head.h"
#include "support/tip_head.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <random>
#include <vector>

#include "golden/board_reference.h"
#include "base/error.h"
#include "model/packed_image.h"
#include "numerics/numerics.h"

namespace bitsim::hw::fast {
namespace {

using model::TernaryMatrix;

// The kernels this host runs: Auto, Portable always; AVX2 / AVX-512 where supported (on an
// AVX-512 machine the portable and AVX2 paths are still tested explicitly).
std::vector<Kernel> kernels() {
  std::vector<Kernel> ks{Kernel::Auto, Kernel::Portable};
  for (Kernel k : {Kernel::Avx2, Kernel::Avx512})
    if (kernel_supported(k)) ks.push_back(k);
  return ks;
}

TEST(FastKernels, ReportsKernels) {
  for (Kernel k : kernels()) std::printf("[ info ] kernel %s supported\n", kernel_name(k));
  std::printf("[ info ] auto = %s\n", kernel_name(resolve_kernel(Kernel::Auto)));
  EXPECT_NE(resolve_kernel(Kernel::Auto), Kernel::Auto);
}

// Random ternary matrix; `style` varies the trit mix: 0 uniform, 1 mostly zero,
// 2 all +1, 3 all -1, 4 alternating rows of +1 / -1 with random zeros.
TernaryMatrix random_matrix(int rows, int cols, uint32_t seed, int style = 0) {
  std::mt19937 rng(seed);
  TernaryMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale = 1.0f;
  m.trits.resize(size_t(rows) * cols);
  std::uniform_int_distribution<int> u3(-1, 1), u10(0, 9);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < cols; ++j) {
      int8_t t = 0;
      switch (style) {
        case 0: t = int8_t(u3(rng)); break;
        case 1: t = u10(rng) == 0 ? int8_t(u3(rng)) : 0; break;
        case 2: t = 1; break;
        case 3: t = -1; break;
        default: t = u10(rng) < 2 ? 0 : int8_t(r % 2 ? -1 : 1); break;
      }
      m.trits[size_t(r) * cols + j] = t;
    }
  return m;
}

// x: random int8 with a good share of the extremes -128 and 127; style 1 all -128,
// style 2 all 127.
std::vector<int8_t> random_x(int n, uint32_t seed, int style = 0) {
  std::mt19937 rng(seed);
  std::vector<int8_t> x(static_cast<size_t>(n));
  std::uniform_int_distribution<int> u(-128, 127), pick(0, 7);
  for (auto& v : x) {
    if (style == 1) v = -128;
    else if (style == 2) v = 127;
    else {
      const int p = pick(rng);
      v = int8_t(p == 0 ? -128 : p == 1 ? 127 : u(rng));
    }
  }
  return x;
}

std::vector<int32_t> golden_acc(const TernaryMatrix& m, const int8_t* x) {
  std::vector<int32_t> acc(size_t(m.rows));
  golden::ternary_matvec(m, 0, m.rows, x, acc.data());
  return acc;
}

constexpr int kNs[] = {1, 4, 5, 7, 8, 31, 32, 33, 63, 64, 65, 1536, 4096};
constexpr int kRows[] = {1, 2, 3, 17, 1000};

TEST(FastKernels, DecodedRowsMatvecEqualsGolden) {
  Workers pool1(1), pool2(2);
  uint32_t seed = 1;
  for (int n : kNs)
    for (int rows : kRows) {
      const int style = int(seed % 5);
      const TernaryMatrix m = random_matrix(rows, n, seed++, style);
      const auto packed = model::pack_rows(m, 0, rows);
      DecodedRows d;
      int bad = -7;
      ASSERT_TRUE(d.decode(packed.data(), rows, n, &bad, seed % 2 ? 2 : 1));
      EXPECT_EQ(bad, -7);
      ASSERT_EQ(d.rows(), rows);
      ASSERT_EQ(d.n(), n);
      EXPECT_GE(d.bytes(), size_t(rows) * d.row_stride());
      for (int xs = 0; xs < 3; ++xs) {
        const auto x = random_x(n, seed * 31 + xs, xs);
        const auto want = golden_acc(m, x.data());
        for (Kernel k : kernels()) {
          SCOPED_TRACE(testing::Message() << "n " << n << " rows " << rows << " style " << style
                                          << " x style " << xs << " kernel " << kernel_name(k));
          for (int threads : {1, 2}) {
            std::vector<int32_t> got(size_t(rows), 0x5A5A5A5A);
            d.matvec(x.data(), got.data(), threads, k);
            ASSERT_EQ(got, want) << "threads " << threads;
            std::fill(got.begin(), got.end(), 0x5A5A5A5A);
            d.matvec(x.data(), got.data(), threads == 1 ? pool1 : pool2, k);
            ASSERT_EQ(got, want) << "pool of " << threads;
          }
          // A row range.
          if (rows >= 3) {
            std::vector<int32_t> part(size_t(rows - 2));
            d.matvec_rows(x.data(), 1, rows - 1, part.data(), k);
            ASSERT_TRUE(std::equal(part.begin(), part.end(), want.begin() + 1));
          }
          std::vector<int32_t> got(size_t(rows), 0x5A5A5A5A);
          matvec_packed(packed.data(), rows, n, x.data(), got.data(), k);
          ASSERT_EQ(got, want) << "matvec_packed";
        }
      }
    }
}

TEST(FastKernels, DecodedRowsMatmulEqualsGoldenForEveryVector) {
  Workers pool1(1), pool2(2);
  uint32_t seed = 77;
  for (int n : kNs)
    for (int rows : kRows) {
      const TernaryMatrix m = random_matrix(rows, n, seed++, int(seed % 5));
      const auto packed = model::pack_rows(m, 0, rows);
      DecodedRows d;
      ASSERT_TRUE(d.decode(packed.data(), rows, n, nullptr));
      for (int count : {0, 1, 3, 4, 7, 8, 9}) {
        // count vectors of n values, each of another style, back to back.
        std::vector<int8_t> x;
        std::vector<int32_t> want;
        for (int i = 0; i < count; ++i) {
          const auto xi = random_x(n, seed * 13 + uint32_t(i), i % 3);
          x.insert(x.end(), xi.begin(), xi.end());
          const auto wi = golden_acc(m, xi.data());
          want.insert(want.end(), wi.begin(), wi.end());
        }
        for (Kernel k : kernels())
          for (Workers* pool : {&pool1, &pool2}) {
            SCOPED_TRACE(testing::Message() << "n " << n << " rows " << rows << " count " << count << " kernel "
                                            << kernel_name(k) << " threads " << pool->threads());
            std::vector<int32_t> got(size_t(count) * size_t(rows) + 1, 0x5A5A5A5A);
            d.matmul(x.data(), count, got.data(), *pool, k);
            EXPECT_EQ(got.back(), 0x5A5A5A5A) << "wrote past count * rows";
            got.pop_back();
            ASSERT_EQ(got, want);
          }
      }
    }
  DecodedRows d;
  const TernaryMatrix m = random_matrix(4, 8, 1, 0);
  const auto packed = model::pack_rows(m, 0, 4);
  ASSERT_TRUE(d.decode(packed.data(), 4, 8, nullptr));
  int32_t acc[4];
  EXPECT_THROW(d.matmul(nullptr, -1, acc, pool1), Error);
}

TEST(FastKernels, ExtremesReachTheBound) {
  // |acc| = 128 * 4096: every weight +1 (or -1) and every x = -128.
  const int n = 4096;
  for (int style : {2, 3}) {
    const TernaryMatrix m = random_matrix(5, n, 9, style);
    const auto packed = model::pack_rows(m, 0, 5);
    DecodedRows d;
    ASSERT_TRUE(d.decode(packed.data(), 5, n, nullptr));
    const auto x = random_x(n, 1, 1);
    for (Kernel k : kernels()) {
      std::vector<int32_t> got(5);
      d.matvec(x.data(), got.data(), 2, k);
      for (int32_t v : got) EXPECT_EQ(v, style == 2 ? -128 * n : 128 * n) << kernel_name(k);
    }
  }
}

TEST(FastKernels, PaddingDigitsAndBytesAreIgnored) {
  // The engine sums over j < n: nonzero padding digits in the last data byte and garbage
  // padding bytes up to the beat change nothing (as golden, which never sees them).
  const int n = 33, rows = 4;  // 7 data bytes (35 digits), 8-byte rows
  const TernaryMatrix m = random_matrix(rows, n, 77);
  auto packed = model::pack_rows(m, 0, rows);
  const size_t stride = model::packed_row_bytes(n);
  ASSERT_EQ(stride, 8u);
  for (int r = 0; r < rows; ++r) {
    packed[r * stride + 6] = uint8_t(packed[r * stride + 6] % 27 + 27 * 2 + 81 * 2);  // digits 3, 4: +1
    packed[r * stride + 7] = 0xFF;                                        // padding byte
  }
  DecodedRows d;
  int bad = -1;
  ASSERT_TRUE(d.decode(packed.data(), rows, n, &bad));
  const auto x = random_x(n, 5);
  const auto want = golden_acc(m, x.data());
  for (Kernel k : kernels()) {
    std::vector<int32_t> got(rows);
    d.matvec(x.data(), got.data(), 1, k);
    EXPECT_EQ(got, want) << kernel_name(k);
    matvec_packed(packed.data(), rows, n, x.data(), got.data(), k);
    EXPECT_EQ(got, want) << kernel_name(k);
  }
}

TEST(FastKernels, DecoderRejectsInvalidTritNamingTheRow) {
  const int n = 1536, rows = 300;
  const TernaryMatrix m = random_matrix(rows, n, 3);
  const auto good = model::pack_rows(m, 0, rows);
  const size_t stride = model::packed_row_bytes(n);
  for (int bad_byte : {243, 250, 255})
    for (int row : {0, 1, 150, 299})
      for (int threads : {1, 2}) {
        auto packed = good;
        packed[size_t(row) * stride + (row * 7) % 308] = uint8_t(bad_byte);
        if (row == 150) packed[size_t(299) * stride] = 243;  // a later bad row too
        DecodedRows d;
        int bad = -1;
        EXPECT_FALSE(d.decode(packed.data(), rows, n, &bad, threads));
        EXPECT_EQ(bad, row) << "byte " << bad_byte << " threads " << threads;
        EXPECT_EQ(d.rows(), 0);
      }
  // A valid decode after a failed one works.
  DecodedRows d;
  int bad = -1;
  auto packed = good;
  packed[5 * stride] = 249;
  EXPECT_FALSE(d.decode(packed.data(), rows, n, &bad));
  EXPECT_EQ(bad, 5);
  ASSERT_TRUE(d.decode(good.data(), rows, n, &bad));
  const auto x = random_x(n, 11);
  std::vector<int32_t> got(rows);
  d.matvec(x.data(), got.data());
  EXPECT_EQ(got, golden_acc(m, x.data()));
}

TEST(FastKernels, BadArgumentsThrow) {
  DecodedRows d;
  uint8_t b[8] = {};
  EXPECT_THROW(d.decode(b, 1, 0, nullptr), Error);
  EXPECT_THROW(d.decode(b, 1, 4097, nullptr), Error);
  EXPECT_THROW(d.decode(b, -1, 5, nullptr), Error);
  ASSERT_TRUE(d.decode(b, 0, 5, nullptr));  // zero rows: valid, empty
  EXPECT_EQ(d.rows(), 0);
  int32_t acc[1];
  int8_t x[5] = {};
  EXPECT_THROW(d.matvec_rows(x, 0, 1, acc), Error);
}

// ---- attention ----------------------------------------------------------------------------

constexpr int kD = model::kBoardHeadDim;

struct Head {
  std::vector<int8_t> q, K, V;
};

// style 0: full-range random; 1: small values (scores close together, p_t spread over the
// table); 2: all -128; 3: all 127; 4: q 127, K -128, V mixed extremes. Rows of d values.
Head random_head(int T, uint32_t seed, int style, int d = kD) {
  std::mt19937 rng(seed);
  Head h{std::vector<int8_t>(size_t(d)), std::vector<int8_t>(size_t(T) * size_t(d)),
         std::vector<int8_t>(size_t(T) * size_t(d))};
  std::uniform_int_distribution<int> full(-128, 127), small(-6, 6), coin(0, 1);
  auto fill = [&](std::vector<int8_t>& v, int which) {
    for (auto& e : v) {
      switch (style) {
        case 0: e = int8_t(full(rng)); break;
        case 1: e = int8_t(which == 2 ? full(rng) : small(rng)); break;
        case 2: e = -128; break;
        case 3: e = 127; break;
        default: e = which == 0 ? 127 : which == 1 ? -128 : int8_t(coin(rng) ? 127 : -128); break;
      }
    }
  };
  fill(h.q, 0);
  fill(h.K, 1);
  fill(h.V, 2);
  return h;
}

TEST(FastKernels, AttentionEqualsGolden) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<uint32_t> um(0, (1u << 18) - 1);
  std::uniform_int_distribution<int> us(0, 40);
  int cases = 0;
  for (int T : {1, 2, 3, 7, 8, 9, 15, 16, 17, 64, 511, 512})
    for (int style = 0; style < 5; ++style)
      for (bool legacy : {false, true})
        for (int rep = 0; rep < 2; ++rep) {
          const Head h = random_head(T, uint32_t(T * 100 + style * 10 + rep), style);
          const uint32_t m = rep == 0 ? um(rng) : (1u << 18) - 1;
          const int S = rep == 0 ? us(rng) : (style == 1 ? 24 : 40);
          int32_t want[kD];
          uint32_t want_sum = 0;
          golden::attention_head(h.q.data(), h.K.data(), h.V.data(), T, model::kBoardHeadDim, {m, S, legacy}, want,
                                 &want_sum);
          for (Kernel k : kernels()) {
            SCOPED_TRACE(testing::Message() << "T " << T << " style " << style << " legacy "
                                            << legacy << " m " << m << " S " << S << " kernel "
                                            << kernel_name(k));
            int32_t got[kD];
            std::fill(got, got + kD, 0x5A5A5A5A);
            uint32_t sum = 0xDEADBEEF;
            attention_head(h.q.data(), h.K.data(), h.V.data(), T, model::kBoardHeadDim, m, S, legacy, got, &sum, k);
            ASSERT_EQ(sum, want_sum);
            ASSERT_TRUE(std::equal(got, got + kD, want));
            ++cases;
          }
        }
  EXPECT_GT(cases, 0);
}

TEST(FastKernels, Int4AttentionEqualsGolden) {
  // The INT4 rows' kernel (interleaved as the unit's stream holds them) against
  // golden::attention_head_int4 (K and V rows apart), every outlier count.
  std::mt19937 rng(4004);
  int cases = 0;
  for (int T : {1, 2, 3, 17, 64, 512, 513, 1319, 2048})
    for (int n = 0; n <= model::kKvMaxOutlierChannels; ++n) {
      const int4_test::Int4Head h = int4_test::random_int4_head(T, n, rng);
      SCOPED_TRACE(::testing::Message() << "T " << T << " n " << n);
      int32_t want[kD];
      uint32_t want_sum = 0;
      golden::attention_head_int4(h.q.data(), h.bank.data(), h.K.data(), h.V.data(), T, n, model::kBoardHeadDim, h.p, want, &want_sum);
      int32_t got[kD];
      uint32_t sum = 0xDEADBEEF;
      const std::vector<uint8_t> rows = h.interleaved();
      attention_head_int4(h.q.data(), model::read_kv_bank(h.bank.data(), n, model::kBoardHeadDim), rows.data(), T, h.p.m, h.p.shift, got,
                          &sum);
      ASSERT_EQ(sum, want_sum);
      ASSERT_TRUE(std::equal(got, got + kD, want));
      ++cases;
    }
  EXPECT_EQ(cases, 9 * 9);
}

TEST(FastKernels, TipAttentionEqualsGolden) {
  // TIP's rows packed at their tiers' sizes as the unit's stream holds them, against
  // golden::attention_head_tip (rows in fixed slots): o, sum and every region's mass; mixed
  // tiers at every region size, both lane counts, and each tier alone.
  std::mt19937 rng(4005);
  int cases = 0;
  auto check = [&](const tip_test::TipHead& h) {
    int32_t want[kD];
    uint32_t want_sum = 0;
    std::vector<uint32_t> want_m;
    h.golden(want, &want_sum, &want_m);
    const std::vector<uint8_t> s = h.stream(true);
    const size_t rows_at = model::attention_header_q_bytes(1, model::kBoardHeadDim) + size_t(model::tip_tag_beats(h.regions())) * 8 +
                           model::tip_bank_bytes(h.lanes, model::kBoardHeadDim);
    int32_t got[kD];
    uint32_t sum = 0xDEADBEEF;
    std::vector<uint32_t> masses(size_t(h.regions()), 0xDEADBEEF);
    attention_head_tip(h.q.data(), h.bank, h.tiers.data(), h.region_log2, s.data() + rows_at, h.T, h.p.m, h.p.shift,
                       got, &sum, masses.data());
    ASSERT_EQ(sum, want_sum);
    ASSERT_TRUE(std::equal(got, got + kD, want));
    ASSERT_EQ(masses, want_m);
    ++cases;
  };
  for (int T : {1, 2, 17, 64, 65, 513, 1319, 2048})
    for (int log2r = 4; log2r <= 8; ++log2r)
      for (int lanes : {4, 8}) {
        SCOPED_TRACE(::testing::Message() << "T " << T << " R " << (1 << log2r) << " L " << lanes);
        check(tip_test::random_tip_head(T, log2r, lanes, rng));
      }
  for (model::TipTier t : {model::TipTier::Kvq8, model::TipTier::Kvq4Lanes, model::TipTier::Kvq4}) {
    SCOPED_TRACE(model::tip_tier_name(t));
    check(tip_test::random_tip_head(300, 6, 4, rng, std::vector<model::TipTier>(5, t)));
  }
  EXPECT_EQ(cases, 8 * 5 * 2 + 3);
  // The masses say where the attention went: a head whose q matches one region's keys puts
  // most of its mass there.
  tip_test::TipHead h = tip_test::random_tip_head(128, 5, 4, rng, std::vector<model::TipTier>(4, model::TipTier::Kvq8));
  for (int d = 0; d < kD; ++d) h.q[size_t(d)] = 100;
  for (int t = 0; t < h.T; ++t)
    for (int d = 0; d < kD; ++d) h.slots[size_t(t) * h.slot() + size_t(d)] = uint8_t(int8_t(t / 32 == 2 ? 100 : -100));
  h.p = {60'000, 24, false};
  const std::vector<uint8_t> s = h.stream(true);
  int32_t o[kD];
  uint32_t sum = 0, masses[4] = {};
  attention_head_tip(h.q.data(), h.bank, h.tiers.data(), 5, s.data() + model::attention_header_q_bytes(1, model::kBoardHeadDim) + 8 + 200, h.T,
                     h.p.m, h.p.shift, o, &sum, masses);
  EXPECT_GT(masses[2], 65'000u);
  EXPECT_LT(masses[0] + masses[1] + masses[3], 500u);
}

TEST(FastKernels, OnlineAttentionEqualsGoldenInBothRowLayouts) {
  // The online-softmax unit's kernel against golden::attention_head_online: K and V as
  // separate arrays (stride 96) and interleaved as the unit's stream holds them (stride 192).
  std::mt19937 rng(2025);
  std::uniform_int_distribution<uint32_t> um(0, (1u << 18) - 1);
  std::uniform_int_distribution<int> us(0, 40);
  int cases = 0;
  for (int T : {1, 2, 3, 9, 17, 64, 511, 512})
    for (int style = 0; style < 5; ++style)
      for (int rep = 0; rep < 2; ++rep) {
        const Head h = random_head(T, uint32_t(T * 100 + style * 10 + rep + 7), style);
        const uint32_t m = rep == 0 ? um(rng) : (1u << 18) - 1;
        const int S = rep == 0 ? us(rng) : (style == 1 ? 24 : 40);
        SCOPED_TRACE(testing::Message() << "T " << T << " style " << style << " m " << m << " S " << S);
        int32_t want[kD];
        uint32_t want_sum = 0;
        golden::attention_head_online(h.q.data(), h.K.data(), h.V.data(), T, model::kBoardHeadDim, {m, S, false}, want, &want_sum);
        int32_t got[kD];
        uint32_t sum = 0xDEADBEEF;
        attention_head_online(h.q.data(), h.K.data(), h.V.data(), T, model::kBoardHeadDim, kD, m, S, got, &sum);
        ASSERT_EQ(sum, want_sum);
        ASSERT_TRUE(std::equal(got, got + kD, want));
        std::vector<int8_t> kv(size_t(T) * 2 * kD);
        for (int t = 0; t < T; ++t) {
          std::copy_n(h.K.data() + size_t(t) * kD, kD, kv.data() + size_t(t) * 2 * kD);
          std::copy_n(h.V.data() + size_t(t) * kD, kD, kv.data() + size_t(t) * 2 * kD + kD);
        }
        std::fill(got, got + kD, 0x5A5A5A5A);
        attention_head_online(h.q.data(), kv.data(), kv.data() + kD, T, model::kBoardHeadDim, 2 * kD, m, S, got, &sum);
        ASSERT_EQ(sum, want_sum);
        ASSERT_TRUE(std::equal(got, got + kD, want));
        ++cases;
      }
  EXPECT_EQ(cases, 8 * 5 * 2);
  int32_t o[kD];
  uint32_t sum;
  const int8_t z[kD] = {};
  EXPECT_THROW(attention_head_online(z, z, z, 0, model::kBoardHeadDim, kD, 1, 24, o, &sum), Error);
  EXPECT_THROW(attention_head_online(z, z, z, 1, model::kBoardHeadDim, kD, 1, 64, o, &sum), Error);
}

// A unit built for another head dimension (attention.head_dim != 96) runs the portable
// loops of every kernel (the SIMD paths are written for 96): each equals the golden reference
// bit for bit at d = 8, 64, 128 (BitNet b1.58 2B4T's) and 256, on the board's unit, the
// online-softmax unit, and (d a multiple of 32) the INT4 and TIP read paths.
TEST(FastKernels, GenericHeadDimEqualsGolden) {
  std::mt19937 rng(2026);
  std::uniform_int_distribution<uint32_t> um(0, (1u << 18) - 1);
  std::uniform_int_distribution<int> us(0, 40);
  int cases = 0;
  for (int d : {8, 64, 128, 256})
    for (int T : {1, 2, 9, 17, 512})
      for (int style = 0; style < 5; ++style) {
        const Head h = random_head(T, uint32_t(d * 1000 + T * 10 + style), style, d);
        const uint32_t m = um(rng);
        const int S = us(rng);
        SCOPED_TRACE(testing::Message() << "d " << d << " T " << T << " style " << style);
        std::vector<int32_t> want(static_cast<size_t>(d)), got(static_cast<size_t>(d));
        uint32_t want_sum = 0, sum = 0;
        for (bool legacy : {false, true}) {
          golden::attention_head(h.q.data(), h.K.data(), h.V.data(), T, d, {m, S, legacy}, want.data(), &want_sum);
          for (Kernel k : kernels()) {
            std::fill(got.begin(), got.end(), 0x5A5A5A5A);
            sum = 0xDEADBEEF;
            attention_head(h.q.data(), h.K.data(), h.V.data(), T, d, m, S, legacy, got.data(), &sum, k);
            ASSERT_EQ(sum, want_sum) << kernel_name(k);
            ASSERT_EQ(got, want) << kernel_name(k);
          }
        }
        golden::attention_head_online(h.q.data(), h.K.data(), h.V.data(), T, d, {m, S, false}, want.data(), &want_sum);
        std::vector<int8_t> kv(size_t(T) * 2 * size_t(d));  // interleaved as the unit's stream holds them
        for (int t = 0; t < T; ++t) {
          std::copy_n(h.K.data() + size_t(t) * size_t(d), d, kv.data() + size_t(t) * 2 * size_t(d));
          std::copy_n(h.V.data() + size_t(t) * size_t(d), d, kv.data() + size_t(t) * 2 * size_t(d) + size_t(d));
        }
        std::fill(got.begin(), got.end(), 0x5A5A5A5A);
        attention_head_online(h.q.data(), kv.data(), kv.data() + d, T, d, 2 * size_t(d), m, S, got.data(), &sum);
        ASSERT_EQ(sum, want_sum);
        ASSERT_EQ(got, want);
        ++cases;
      }
  EXPECT_EQ(cases, 4 * 5 * 5);
  // INT4 and TIP rows of 128 channels (4 V groups, nibbles at 64 bytes).
  for (int T : {1, 17, 513})
    for (int n : {0, 3, 8}) {
      SCOPED_TRACE(::testing::Message() << "int4 T " << T << " n " << n);
      const int4_test::Int4Head h = int4_test::random_int4_head(T, n, rng, 128);
      std::vector<int32_t> want(128), got(128, 0x5A5A5A5A);
      uint32_t want_sum = 0, sum = 0xDEADBEEF;
      golden::attention_head_int4(h.q.data(), h.bank.data(), h.K.data(), h.V.data(), T, n, 128, h.p, want.data(),
                                  &want_sum);
      const std::vector<uint8_t> rows = h.interleaved();
      attention_head_int4(h.q.data(), model::read_kv_bank(h.bank.data(), n, 128), rows.data(), T, h.p.m, h.p.shift,
                          got.data(), &sum);
      ASSERT_EQ(sum, want_sum);
      ASSERT_EQ(got, want);
    }
  for (int T : {1, 64, 300}) {
    SCOPED_TRACE(::testing::Message() << "tip T " << T);
    const tip_test::TipHead h = tip_test::random_tip_head(T, 5, 4, rng, {}, 128);
    std::vector<int32_t> want(128), got(128, 0x5A5A5A5A);
    uint32_t want_sum = 0, sum = 0xDEADBEEF;
    std::vector<uint32_t> want_m;
    h.golden(want.data(), &want_sum, &want_m);
    const std::vector<uint8_t> s = h.stream(true);
    const size_t rows_at = model::attention_header_q_bytes(1, 128) + size_t(model::tip_tag_beats(h.regions())) * 8 +
                           model::tip_bank_bytes(h.lanes, 128);
    std::vector<uint32_t> masses(size_t(h.regions()), 0xDEADBEEF);
    attention_head_tip(h.q.data(), h.bank, h.tiers.data(), h.region_log2, s.data() + rows_at, h.T, h.p.m, h.p.shift,
                       got.data(), &sum, masses.data());
    ASSERT_EQ(sum, want_sum);
    ASSERT_EQ(got, want);
    ASSERT_EQ(masses, want_m);
  }
  // A d the unit cannot be built for.
  int32_t o[kD];
  uint32_t sum;
  const int8_t z[kD] = {};
  EXPECT_THROW(attention_head(z, z, z, 1, 100, 1, 24, false, o, &sum, Kernel::Auto), Error);
  EXPECT_THROW(attention_head(z, z, z, 1, 0, 1, 24, false, o, &sum, Kernel::Auto), Error);
}

TEST(FastKernels, AttentionExtremesReachTheBound) {
  // T = 512, all scores equal (p_t = 32767), V all -128: acc_d = -128 * 32767 * 512.
  const int T = 512;
  Head h = random_head(T, 1, 2);
  for (Kernel k : kernels()) {
    int32_t got[kD];
    uint32_t sum = 0;
    attention_head(h.q.data(), h.K.data(), h.V.data(), T, model::kBoardHeadDim, 79505, 24, false, got, &sum, k);
    EXPECT_EQ(sum, 512u * 32767u) << kernel_name(k);
    for (int d = 0; d < kD; ++d) ASSERT_EQ(got[d], -128 * 32767 * 512) << kernel_name(k);
  }
}

// ---- the weight step ------------------------------------------------------------------------

// Every score a head can produce: s_t is a sum of 96 products of int8 values, so s_t lies in
// [96 * -128 * 127, 96 * 128 * 128] and s_max - s_t in [0, kMaxDiff].
constexpr int32_t kMaxScore = kD * 128 * 128, kMinScore = kD * -128 * 127;
constexpr uint32_t kMaxDiff = uint32_t(kMaxScore - kMinScore);

// The score differences where num::attention_exp_index can change for (m, S, legacy): it is
// a non-decreasing step function of the difference (z = (diff * m) >> S, or diff >> 8,
// clamped at 255), so the smallest difference reaching each index k in 1..255 and the one
// just below it bound every step; with 0, 1 and the largest differences, and a few points
// inside the steps, every step is sampled at both ends.
std::vector<uint32_t> step_boundaries(uint32_t m, int S, bool legacy, std::mt19937& rng) {
  std::vector<uint32_t> d = {0, 1, kMaxDiff - 1, kMaxDiff};
  const uint64_t mult = legacy ? 1 : m;
  const int shift = legacy ? num::kAttnLegacyShift : S;
  for (uint64_t k = 1; k <= num::kAttnExpLast && mult != 0; ++k) {
    const unsigned __int128 first = ((unsigned __int128)k << shift) / mult +
                                    (((unsigned __int128)k << shift) % mult != 0);
    if (first > kMaxDiff) break;
    d.push_back(uint32_t(first));
    d.push_back(uint32_t(first) - 1);
  }
  std::uniform_int_distribution<uint32_t> any(0, kMaxDiff);
  for (int i = 0; i < 8; ++i) d.push_back(any(rng));
  return d;
}

// The multipliers: 0..3, every power of two below 2^18 and its neighbours, the largest m,
// the board's range (10,818 to 79,505: CIRCUITS.md 3) and random values.
std::vector<uint32_t> weight_multipliers(std::mt19937& rng) {
  std::vector<uint32_t> ms = {0, 1, 2, 3, num::kAttnExpLast, 10818, 79505, (1u << 18) - 1};
  for (int j = 2; j < 18; ++j)
    for (int64_t delta : {-1, 0, 1}) ms.push_back(uint32_t((int64_t(1) << j) + delta));
  std::uniform_int_distribution<uint32_t> any(0, (1u << 18) - 1);
  for (int i = 0; i < 12; ++i) ms.push_back(any(rng));
  return ms;
}

// Runs the weight step on one kernel over the differences, placed after `offset` scores of
// s_max (so that each difference meets other vector lanes), and checks every p_t and the sum
// against num::attention_weight. Returns the number of weights checked.
size_t check_weights(Kernel k, const std::vector<uint32_t>& diffs, int offset, uint32_t m, int S,
                     bool legacy) {
  std::vector<int32_t> s(size_t(offset), kMaxScore);
  for (uint32_t d : diffs) s.push_back(kMaxScore - int32_t(d));
  std::vector<uint16_t> p(s.size() + 16, 0xBEEF);
  const uint32_t sum = attention_weights(s.data(), int(s.size()), m, S, legacy, p.data(), k);
  uint32_t want_sum = 0;
  for (size_t t = 0; t < s.size(); ++t) {
    const uint16_t want = num::attention_weight(uint32_t(kMaxScore - s[t]), m, S, legacy);
    want_sum += want;
    if (p[t] != want) {
      ADD_FAILURE() << kernel_name(k) << ": m " << m << " S " << S << " legacy " << legacy << " diff "
                    << (kMaxScore - s[t]) << " at t " << t << ": " << p[t] << ", want " << want;
      return 0;
    }
  }
  EXPECT_EQ(sum, want_sum) << kernel_name(k) << ": m " << m << " S " << S << " legacy " << legacy;
  return s.size();
}

TEST(FastKernels, WeightStepEqualsNumericsOnEveryStepBoundary) {
  // Every kernel path against the one definition (num::attention_weight), over every score
  // difference step boundary, for S in 0..63, m from weight_multipliers, legacy off and on.
  std::mt19937 rng(77);
  const std::vector<uint32_t> ms = weight_multipliers(rng);
  size_t checked = 0;
  for (Kernel k : kernels()) {
    if (k == Kernel::Auto) continue;  // one of the others
    for (int S = 0; S <= 63; ++S)
      for (size_t mi = 0; mi < ms.size(); ++mi)
        for (bool legacy : {false, true}) {
          if (legacy && mi % 8 != 0) continue;  // legacy ignores m and S: a sample suffices
          const std::vector<uint32_t> d = step_boundaries(ms[mi], S, legacy, rng);
          for (int offset : {0, 1 + int((mi + size_t(S)) % 15)})
            checked += check_weights(k, d, offset, ms[mi], S, legacy);
          if (testing::Test::HasFailure()) return;
        }
  }
  EXPECT_GT(checked, 1'000'000u);
}

TEST(FastKernels, WeightStepRejectsBadArguments) {
  int32_t s[1] = {0};
  uint16_t p[17];
  EXPECT_THROW(attention_weights(s, 0, 1, 24, false, p, Kernel::Portable), Error);
  EXPECT_THROW(attention_weights(s, 1, 1, 64, false, p, Kernel::Portable), Error);
  EXPECT_EQ(attention_weights(s, 1, 1, 24, false, p, Kernel::Portable), 32767u);
}

// A job that follows a smaller one: a helper still looking at the smaller job's claim word
// must not take a task of the larger job (it once ran task 7 of an 8-task job a second
// time after a 7-task job, about once in a few thousand jobs on a loaded machine).
TEST(FastKernels, WorkersNeverRunATaskOfTheNextJobTwice) {
  Workers w(3);
  for (int job = 0; job < 20000; ++job) {
    const int tasks = 2 + job % 7;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
    w.run(tasks, [&](int task) { hits[size_t(task)].fetch_add(1, std::memory_order_relaxed); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "job " << job << " tasks " << tasks;
  }
  EXPECT_THROW(w.run(0x10000, [](int) {}), Error);
}

TEST(FastKernels, WorkersRunEveryTaskOnce) {
  for (int threads : {1, 2, 3}) {
    Workers w(threads);
    EXPECT_EQ(w.threads(), threads);
    for (int job = 0; job < 300; ++job) {
      const int tasks = job % 20;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      w.run(tasks, [&](int task) { hits[size_t(task)].fetch_add(1); });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "threads " << threads << " tasks " << tasks;
    }
  }
  // Helpers do take tasks: with tasks that sleep, the caller cannot do them all first.
  Workers w(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> by_helper{0};
  for (int job = 0; job < 20 && by_helper.load() == 0; ++job)
    w.run(8, [&](int) {
      if (std::this_thread::get_id() != caller) by_helper.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    });
  EXPECT_GT(by_helper.load(), 0);
}

}  // namespace
}  // namespace bitsim::hw::fast
