#pragma once
// A random matmul transfer of one group for the fast-board and timing-oracle tests: rows x n
// trits and an int8 x from one seed, its packed stream, the result bytes S2MM receives and
// the golden results. Test scaffolding only.
#include <cstdint>
#include <random>
#include <vector>

#include "golden/board_reference.h"
#include "model/packed_image.h"

namespace bitsim::test {

struct MatmulStream {
  model::TernaryMatrix w;
  std::vector<int8_t> x;
  std::vector<uint8_t> bytes;
  uint32_t result_bytes = 0;
  std::vector<int32_t> want;  // golden results
};

// `vectors` > 1: a prefill group (docs/prefill.md) of that many x vectors, the results
// row-major (golden::prefill_matvec).
inline MatmulStream random_matmul_stream(int rows, int n, uint32_t seed, int vectors = 1) {
  std::mt19937 g(seed);
  MatmulStream s;
  s.w.rows = rows;
  s.w.cols = n;
  s.w.scale = 1;
  for (int i = 0; i < rows * n; ++i) s.w.trits.push_back(int8_t(int(g() % 3) - 1));
  for (int i = 0; i < n * vectors; ++i) s.x.push_back(int8_t(int(g() % 256) - 128));
  s.bytes = model::build_stream({{s.x.data(), n, &s.w, 0, rows, vectors}});
  s.result_bytes = uint32_t((rows * vectors * 4 + 7) / 8 * 8);
  s.want.resize(size_t(rows) * size_t(vectors));
  if (vectors == 1) golden::ternary_matvec(s.w, 0, rows, s.x.data(), s.want.data());
  else golden::prefill_matvec(s.w, 0, rows, s.x.data(), vectors, s.want.data());
  return s;
}

}  // namespace bitsim::test
