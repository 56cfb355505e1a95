#include "model/ternary.h"

#include <cmath>
#include <string>

#include "model/error.h"
#include "numerics/numerics.h"

namespace bitsim::model {

// rne is bitsim::num::rne (round half to even, CIRCUITS.md section 4). Its argument is first
// clamped to [-2, 2]: clamp(rne(v), -1, 1) == clamp(rne(clamp(v, -2, 2)), -1, 1) for every
// finite v (rne is monotonic and rne(+-2) = +-2), and the clamp keeps an outlier weight of a
// near-zero-scale matrix (W/s up to rows*cols) well inside the rounding trick's exact range.

TernaryMatrix ternarize(const float* w, int rows, int cols) {
  if (rows <= 0 || cols <= 0)
    throw Error("ternarize: bad matrix shape [" + std::to_string(rows) + ", " +
                std::to_string(cols) + "]");
  const size_t count = size_t(rows) * size_t(cols);

  double sum = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const float v = w[i];
    if (!std::isfinite(v))
      throw Error("ternarize: non-finite weight at row " + std::to_string(i / size_t(cols)) +
                  ", column " + std::to_string(i % size_t(cols)));
    sum += std::fabs(double(v));
  }
  float scale = float(sum / double(count));
  if (!(scale >= 1e-5f)) scale = 1e-5f;

  TernaryMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale = scale;
  m.trits.resize(count);
  for (size_t i = 0; i < count; ++i) {
    float q = w[i] / scale;  // float division, as the spec says
    if (q > 2.0f) q = 2.0f;
    if (q < -2.0f) q = -2.0f;
    const float r = num::rne(q);
    m.trits[i] = r > 0.0f ? int8_t(1) : (r < 0.0f ? int8_t(-1) : int8_t(0));
  }
  return m;
}

double zero_fraction(const TernaryMatrix& m) {
  if (m.trits.empty()) return 0.0;
  size_t zeros = 0;
  for (int8_t t : m.trits) zeros += (t == 0);
  return double(zeros) / double(m.trits.size());
}

}  // namespace bitsim::model
