#include "golden/compact_trits.h"

#include <cstring>

namespace bitsim::golden {

CompactTrits::CompactTrits(const model::TernaryMatrix& w)
    : rows_(w.rows),
      cols_(w.cols),
      blocks_((w.cols + kBlockTrits - 1) / kBlockTrits),
      codes_(size_t(rows_) * size_t(blocks_) * kBlockBytes, "golden compact trits") {
  const size_t row_bytes = size_t(blocks_) * kBlockBytes;
  for (int r = 0; r < rows_; ++r) {
    const int8_t* t = w.row(r);
    uint8_t* out = codes_.data() + size_t(r) * row_bytes;
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

int CompactTrits::trit(int r, int j) const {
  const int block = j / kBlockTrits, within = j % kBlockTrits;
  const uint8_t b = codes_.data()[size_t(r) * size_t(blocks_) * kBlockBytes + size_t(block) * kBlockBytes +
                           size_t(within % kBlockBytes)];
  return int((b >> (2 * (within / kBlockBytes))) & 3) - 1;
}

// The loop is plain C++; target_clones lets the compiler also emit an AVX2 version of it
// (chosen at run time). A block's four columns per byte give a partial sum of at most
// 4 x 128 in magnitude, so each byte position's block sum fits in 16 bits (part[k]); each
// byte position then keeps its own 32-bit running sum over the row's blocks (lane[k]), and
// the lanes are added once at the row's end. It is the same integer sum in another order,
// written so that the compiler keeps it in vector registers.
// Clang 14 emits the clones of a member function but not its dispatcher, so a clang build
// (the fuzz preset) failed to link; there the loop is compiled once, for the default target.
#if !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void CompactTrits::matvec(const int8_t* x, int row_begin, int row_end, int32_t* acc) const {
  // x padded with zeros to whole blocks (the padding columns' trits are 0 as well), widened
  // to int16 once for all the rows.
  std::vector<int16_t> xp(size_t(blocks_) * kBlockTrits, 0);
  for (int j = 0; j < cols_; ++j) xp[size_t(j)] = x[j];
  const size_t row_bytes = size_t(blocks_) * kBlockBytes;
  for (int r = row_begin; r < row_end; ++r) {
    const uint8_t* row = codes_.data() + size_t(r) * row_bytes;
    int32_t lane[kBlockBytes] = {};
    for (int block = 0; block < blocks_; ++block) {
      const uint8_t* c = row + size_t(block) * kBlockBytes;
      const int16_t* xb = xp.data() + size_t(block) * kBlockTrits;
      int16_t part[kBlockBytes];
      for (int k = 0; k < kBlockBytes; ++k) {
        const int v = c[k];
        part[k] = int16_t(((v & 3) - 1) * xb[k]                // column 128 block + k
                          + (((v >> 2) & 3) - 1) * xb[k + 32]  // + 32
                          + (((v >> 4) & 3) - 1) * xb[k + 64]  // + 64
                          + ((v >> 6) - 1) * xb[k + 96]);      // + 96
      }
      for (int k = 0; k < kBlockBytes; ++k) lane[k] += part[k];
    }
    int32_t s = 0;
    for (int k = 0; k < kBlockBytes; ++k) s += lane[k];
    acc[r - row_begin] = s;
  }
}

}  // namespace bitsim::golden
