#pragma once
// CompactTrits: a ternary matrix in 2 bits per trit, read by the golden reference's matmul
// on every checked token (a quarter of the bytes of the int8 trits: the golden check is
// bound by the bytes it reads). Written independently of the fast fidelity's kernels
// (hw/fast/fast_kernels.h) so that the check still checks them.
//
// Layout: each row is ceil(n / 128) blocks of 32 bytes. In block b, byte k holds the trits
// of columns 128b + k, 128b + k + 32, 128b + k + 64 and 128b + k + 96 in bits 0-1, 2-3,
// 4-5 and 6-7, each as the code t + 1 (0: -1, 1: 0, 2: +1). Columns past n hold code 1 (a
// zero trit). So that a plain loop over the 32 bytes of a block reads four columns per
// byte with the same shift for every byte.
//
// matvec computes the matmul engine's sums (CIRCUITS.md 2), acc_r = sum_j t_rj * x_j,
// exactly as golden::ternary_matvec does on the int8 trits (a test compares the two).
#include <cstdint>
#include <memory>
#include <vector>

#include "base/huge_memory.h"
#include "model/ternary.h"

namespace bitsim::golden {

class CompactTrits {
 public:
  static constexpr int kBlockTrits = 128;
  static constexpr int kBlockBytes = 32;

  CompactTrits() = default;
  explicit CompactTrits(const model::TernaryMatrix& w);
  // The layout of a rows x cols matrix held elsewhere (bytes_for(rows, cols) bytes at
  // `codes`, kept alive by `keep`): a layout built before and read back from the start-up
  // cache (model/derived_store.h).
  CompactTrits(int rows, int cols, const uint8_t* codes, std::shared_ptr<void> keep);
  static size_t bytes_for(int rows, int cols);
  int rows() const { return rows_; }
  int cols() const { return cols_; }
  size_t bytes() const { return size_t(rows_) * size_t(blocks_) * kBlockBytes; }
  const uint8_t* codes() const { return codes_; }
  const std::shared_ptr<void>& keep() const { return keep_; }  // keeps codes() alive
  // The trit of row r, column j (-1, 0 or +1).
  int trit(int r, int j) const;
  // acc[r - row_begin] = sum_j t_rj * x_j for rows [row_begin, row_end); x has cols() values.
  void matvec(const int8_t* x, int row_begin, int row_end, int32_t* acc) const;
  // `count` vectors at once (x: count rows of cols() values): acc[i * acc_stride + r -
  // row_begin] = sum_j t_rj * x[i * cols() + j]. Each row's codes are read once for all the
  // vectors (a prefill chunk's positions); each vector's sum is matvec's.
  void matmul(const int8_t* x, int count, int row_begin, int row_end, int32_t* acc, size_t acc_stride) const;

 private:
  int rows_ = 0, cols_ = 0, blocks_ = 0;
  std::shared_ptr<void> keep_;   // what holds the codes: built here, or a mapping
  const uint8_t* codes_ = nullptr;  // rows * blocks * 32 bytes
};

}  // namespace bitsim::golden
