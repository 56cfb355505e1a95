#include "model/ternary.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "base/stop_signal.h"
#include "numerics/numerics.h"

namespace bitsim::model {


TernaryMatrix ternarize(const float* w, int rows, int cols) {
  if (rows <= 0 || cols <= 0)
    throw Error("ternarize: bad matrix shape [" + std::to_string(rows) + ", " +
                std::to_string(cols) + "]");
  const size_t count = size_t(rows) * size_t(cols);

  // The sum in double, in index order. A NaN or an infinity makes the sum non-finite (a
  // finite sum of floats cannot overflow a double), so the loop carries no test and the
  // offending weight is looked for only then.
  // SIGINT / SIGTERM are looked at every 16 M weights (the embedding of bitnet-large is 49 M).
  constexpr size_t kPiece = size_t(1) << 24;
  double sum = 0.0;
  for (size_t at = 0; at < count; at += kPiece) {
    check_stop();
    for (size_t i = at, end = std::min(count, at + kPiece); i < end; ++i) sum += std::fabs(double(w[i]));
  }
  if (!std::isfinite(sum)) {
    for (size_t i = 0; i < count; ++i)
      if (!std::isfinite(w[i]))
        throw Error("ternarize: non-finite weight at row " + std::to_string(i / size_t(cols)) + ", column " +
                    std::to_string(i % size_t(cols)));
  }
  float scale = float(sum / double(count));
  if (!(scale >= 1e-5f)) scale = 1e-5f;

  TernaryMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.scale = scale;
  m.trits.resize(count);
  // clamp(rne(q), -1, 1) is +1 for q > 0.5, -1 for q < -0.5 and 0 otherwise: rne sends
  // [-0.5, 0.5] to 0 (the halves round to the even 0) and everything beyond to at least 1
  // in magnitude, which the clamp keeps as +-1. The comparison form is exactly that
  // function; written without branches through a local pointer, the compiler vectorizes
  // the loop (a test checks it against rne).
  int8_t* out = m.trits.data();
  for (size_t at = 0; at < count; at += kPiece) {
    check_stop();
    for (size_t i = at, end = std::min(count, at + kPiece); i < end; ++i) {
      const float q = w[i] / scale;  // float division, as the spec says
      out[i] = int8_t(int8_t(q > 0.5f) - int8_t(q < -0.5f));
    }
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
