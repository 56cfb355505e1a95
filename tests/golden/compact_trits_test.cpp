// CompactTrits (golden/compact_trits.h): the 2-bit layout worked by hand, and its sums equal
// to the int8 trits' plain loop (golden::ternary_matvec) on every shape the models have and
// on the edges of the block, at the extremes of the int8 inputs.
#include "golden/compact_trits.h"

#include <gtest/gtest.h>

#include <random>

#include "golden/board_reference.h"

using namespace bitsim;
using namespace bitsim::golden;

namespace {

model::TernaryMatrix random_matrix(int rows, int cols, uint32_t seed) {
  model::TernaryMatrix w;
  w.rows = rows;
  w.cols = cols;
  w.scale = 1;
  std::vector<int8_t> t(size_t(rows) * size_t(cols));
  std::mt19937 g(seed);
  for (auto& v : t) v = int8_t(int(g() % 3) - 1);
  w.trits = std::move(t);
  return w;
}

}  // namespace

TEST(CompactTrits, TheLayoutWorkedByHand) {
  // One row of 130 columns: two blocks. Column 0 = +1, 32 = -1, 64 = 0, 96 = +1 share byte 0
  // of block 0: codes 2, 0, 1, 2 in bits 0-1, 2-3, 4-5, 6-7 = 0b10'01'00'10 = 0x92. Column 128
  // = -1 and 129 = +1 are bytes 0 and 1 of block 1, with code 1 (zero) in the places past n.
  model::TernaryMatrix w;
  w.rows = 1;
  w.cols = 130;
  std::vector<int8_t> t(130, 0);
  t[0] = 1;
  t[32] = -1;
  t[96] = 1;
  t[128] = -1;
  t[129] = 1;
  w.trits = t;
  const CompactTrits c(w);
  EXPECT_EQ(c.bytes(), 64u);
  for (int j = 0; j < 130; ++j) EXPECT_EQ(c.trit(0, j), t[size_t(j)]) << j;
  // Through the sums: x = e_j picks column j's trit.
  std::vector<int8_t> x(130, 0);
  int32_t acc = 99;
  for (int j : {0, 32, 64, 96, 128, 129, 1, 127}) {
    x.assign(130, 0);
    x[size_t(j)] = 5;
    c.matvec(x.data(), 0, 1, &acc);
    EXPECT_EQ(acc, 5 * t[size_t(j)]) << j;
  }
  // x = 1 everywhere: +1 - 1 + 1 - 1 + 1 = 1.
  x.assign(130, 1);
  c.matvec(x.data(), 0, 1, &acc);
  EXPECT_EQ(acc, 1);
}

TEST(CompactTrits, SumsEqualTheInt8TritsOnEveryBlockEdge) {
  std::mt19937 g(7);
  for (int cols : {1, 31, 32, 33, 127, 128, 129, 255, 256, 257, 1536, 4096, 4097}) {
    const model::TernaryMatrix w = random_matrix(37, cols, uint32_t(cols));
    const CompactTrits c(w);
    std::vector<int8_t> x(static_cast<size_t>(cols), 0);
    for (auto& v : x) v = int8_t(g());
    std::vector<int32_t> want(37), got(37, -1);
    ternary_matvec(w, 0, 37, x.data(), want.data());
    c.matvec(x.data(), 0, 37, got.data());
    EXPECT_EQ(got, want) << "cols " << cols;
    // A range of rows lands at the start of acc.
    std::vector<int32_t> part(10, -1);
    c.matvec(x.data(), 20, 30, part.data());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), want.begin() + 20)) << "cols " << cols;
  }
}

// matmul: count vectors at once, each row's codes read once; every vector's sums are
// ternary_matvec's, in the strided layout asked for, over a range of rows.
TEST(CompactTrits, MatmulGivesEachVectorsMatvecSums) {
  std::mt19937 g(11);
  for (int cols : {33, 128, 1536, 4097}) {
    const model::TernaryMatrix w = random_matrix(29, cols, uint32_t(cols) + 1);
    const CompactTrits c(w);
    for (int count : {1, 3, 8}) {
      std::vector<int8_t> x(size_t(count) * size_t(cols));
      for (auto& v : x) v = int8_t(g());
      const size_t stride = 40;  // wider than the 21 rows asked for: the gaps stay untouched
      std::vector<int32_t> got(size_t(count) * stride, -7);
      c.matmul(x.data(), count, 5, 26, got.data(), stride);
      for (int i = 0; i < count; ++i) {
        std::vector<int32_t> want(29);
        ternary_matvec(w, 0, 29, x.data() + size_t(i) * size_t(cols), want.data());
        for (int r = 5; r < 26; ++r)
          EXPECT_EQ(got[size_t(i) * stride + size_t(r - 5)], want[size_t(r)]) << cols << " " << count << " " << i;
        for (size_t k = 21; k < stride; ++k) EXPECT_EQ(got[size_t(i) * stride + k], -7);
      }
    }
  }
}

TEST(CompactTrits, ExtremesReachTheBoundsExactly) {
  // The longest row of the models (11008: the down projection's input) with every trit +1
  // or -1 and x = -128: sums of -/+ 1,409,024.
  for (int8_t t : {int8_t(1), int8_t(-1)}) {
    model::TernaryMatrix w;
    w.rows = 2;
    w.cols = 11008;
    w.trits = std::vector<int8_t>(size_t(2) * 11008, t);
    const std::vector<int8_t> x(11008, -128);
    int32_t acc[2] = {0, 0};
    CompactTrits(w).matvec(x.data(), 0, 2, acc);
    EXPECT_EQ(acc[0], -128 * 11008 * t);
    EXPECT_EQ(acc[1], acc[0]);
  }
}
