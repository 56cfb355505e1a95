#include "golden/compact_trits.h"

#include <cstring>

#include "golden/loop_clones.h"

namespace bitsim::golden {

CompactTrits::CompactTrits(const model::TernaryMatrix& w)
    : rows_(w.rows),
      cols_(w.cols),
      blocks_((w.cols + kBlockTrits - 1) / kBlockTrits),
      keep_(std::make_shared<model::HugeMemory>(bytes_for(w.rows, w.cols), "golden compact trits")),
      codes_(static_cast<model::HugeMemory*>(keep_.get())->data()) {
  const size_t row_bytes = size_t(blocks_) * kBlockBytes;
  for (int r = 0; r < rows_; ++r) {
    const int8_t* t = w.row(r);
    uint8_t* out = static_cast<model::HugeMemory*>(keep_.get())->data() + size_t(r) * row_bytes;
    for (int block = 0; block < blocks_; ++block) {
      const int8_t* tb = t + size_t(block) * kBlockTrits;
      uint8_t* ob = out + size_t(block) * kBlockBytes;
      if ((block + 1) * kBlockTrits <= cols_) {  // a whole block: the four columns of each byte
        for (int k = 0; k < kBlockBytes; ++k)
          ob[k] = uint8_t((tb[k] + 1) | (tb[k + 32] + 1) << 2 | (tb[k + 64] + 1) << 4 | (tb[k + 96] + 1) << 6);
        continue;
      }
      for (int k = 0; k < kBlockBytes; ++k) {  // the last, partial block: code 1 past column n
        unsigned b = 0;
        for (int place = 0; place < 4; ++place) {
          const int j = block * kBlockTrits + place * kBlockBytes + k;
          const unsigned code = j < cols_ ? unsigned(t[j] + 1) : 1u;
          b |= code << (2 * place);
        }
        ob[k] = uint8_t(b);
      }
    }
  }
}

CompactTrits::CompactTrits(int rows, int cols, const uint8_t* codes, std::shared_ptr<void> keep)
    : rows_(rows), cols_(cols), blocks_((cols + kBlockTrits - 1) / kBlockTrits), keep_(std::move(keep)), codes_(codes) {}

size_t CompactTrits::bytes_for(int rows, int cols) {
  return size_t(rows) * size_t((cols + kBlockTrits - 1) / kBlockTrits) * kBlockBytes;
}

int CompactTrits::trit(int r, int j) const {
  const int block = j / kBlockTrits, within = j % kBlockTrits;
  const uint8_t b = codes_[size_t(r) * size_t(blocks_) * kBlockBytes + size_t(block) * kBlockBytes +
                           size_t(within % kBlockBytes)];
  return int((b >> (2 * (within / kBlockBytes))) & 3) - 1;
}

void CompactTrits::matvec(const int8_t* x, int row_begin, int row_end, int32_t* acc) const {
  matmul(x, 1, row_begin, row_end, acc, 0);
}

// The loops are plain C++, compiled for AVX-512, AVX2 and the baseline (golden/loop_clones.h).
// The rows are taken four at a time: each row's codes are decoded once into its trits (int8,
// the padding columns' trits 0), and then every vector meets the four rows in one pass, each
// x_j read once for the four sums (the pass is bound by the loads). Each sum is
// sum_j t_rj * x_j over the padded row in int32, which the compiler turns into multiply-adds
// of int16 pairs (|t_j x_j| <= 128 and the row's sum is within 4096 x 128: no overflow in any
// order, the same integer sum). A group of fewer than four rows (the last) meets the vectors
// with zero trits in the rows it lacks, whose sums are not kept.
BITSIM_GOLDEN_CLONES
void CompactTrits::matmul(const int8_t* x, int count, int row_begin, int row_end, int32_t* acc,
                          size_t acc_stride) const {
  constexpr int kRows = 4;
  // Each x padded with zeros to whole blocks, widened to int16 once for all the rows.
  const size_t padded = size_t(blocks_) * kBlockTrits;
  std::vector<int16_t> xp(padded * size_t(count), 0);
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < cols_; ++j) xp[size_t(i) * padded + size_t(j)] = x[size_t(i) * size_t(cols_) + size_t(j)];
  std::vector<int8_t> t(padded * kRows, 0);  // the four rows' trits, row after row
  const size_t row_bytes = size_t(blocks_) * kBlockBytes;
  for (int r0 = row_begin; r0 < row_end; r0 += kRows) {
    const int rows = std::min(kRows, row_end - r0);
    for (int k = 0; k < rows; ++k) {
      const uint8_t* row = codes_ + size_t(r0 + k) * row_bytes;
      for (int block = 0; block < blocks_; ++block) {
        const uint8_t* c = row + size_t(block) * kBlockBytes;
        int8_t* tb = t.data() + size_t(k) * padded + size_t(block) * kBlockTrits;
        for (int b = 0; b < kBlockBytes; ++b) {
          const uint8_t v = c[b];
          tb[b] = int8_t((v & 3) - 1);               // column 128 block + b
          tb[b + 32] = int8_t(((v >> 2) & 3) - 1);   // + 32
          tb[b + 64] = int8_t(((v >> 4) & 3) - 1);   // + 64
          tb[b + 96] = int8_t((v >> 6) - 1);         // + 96
        }
      }
    }
    if (rows < kRows) std::fill(t.begin() + ptrdiff_t(size_t(rows) * padded), t.end(), int8_t(0));
    const int8_t* t0 = t.data();
    const int8_t* t1 = t0 + padded;
    const int8_t* t2 = t1 + padded;
    const int8_t* t3 = t2 + padded;
    for (int i = 0; i < count; ++i) {
      const int16_t* xi = xp.data() + size_t(i) * padded;
      int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t j = 0; j < padded; ++j) {
        const int32_t xj = xi[j];
        s0 += int32_t(t0[j]) * xj;
        s1 += int32_t(t1[j]) * xj;
        s2 += int32_t(t2[j]) * xj;
        s3 += int32_t(t3[j]) * xj;
      }
      const int32_t sums[kRows] = {s0, s1, s2, s3};
      for (int k = 0; k < rows; ++k) acc[size_t(i) * acc_stride + size_t(r0 + k - row_begin)] = sums[k];
    }
  }
}

}  // namespace bitsim::golden
