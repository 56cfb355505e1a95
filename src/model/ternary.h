#pragma once
// Ternary weight quantization, exactly as the checkpoint's BitLinear weight_quant and
// CIRCUITS.md section 4:
//
//   w_scale = mean|W|, clamped at >= 1e-5
//   t       = clamp(rne(W / w_scale), -1, 1)          (float division, round-half-even)
//
// Summation order of the mean (fixed so every host gets the same bits): |W| is accumulated
// in double, element by element in row-major index order, divided by rows*cols in double,
// then rounded once to float; the clamp at 1e-5f is applied to that float. PyTorch's own
// mean (float32, pairwise) can differ from this in the last bit of w_scale; a weight lying
// within that last bit of a rounding boundary is the only element that could change.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/buffer.h"

namespace bitsim::model {

struct TernaryMatrix {
  int rows = 0, cols = 0;
  float scale = 0;            // w_scale (see above)
  Buffer<int8_t> trits;       // rows*cols values in {-1,0,1}, row-major (owned or a mapped view)
  const int8_t* row(int r) const { return trits.data() + size_t(r) * size_t(cols); }
};

// Ternarize a row-major [rows, cols] float matrix. Throws bitsim::Error for a non-positive
// shape or a non-finite weight (named by its row and column).
TernaryMatrix ternarize(const float* w, int rows, int cols);

// Fraction of the trits that are 0 (0 for an empty matrix).
double zero_fraction(const TernaryMatrix& m);

}  // namespace bitsim::model
