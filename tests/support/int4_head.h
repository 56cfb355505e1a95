#pragma once
// Random heads of the INT4 KV codec (docs/variants-attention.md 8) for the unit and kernel
// tests: q, the bank (random fp16 channel scales, n distinct outlier channels in any order),
// K rows (random nibbles, fp16 lanes, random padding: the unit ignores it) and V rows
// (random nibbles, fp16 group scales in a range of V magnitudes).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "golden/board_reference.h"
#include "model/kv_format.h"

namespace bitsim::int4_test {

struct Int4Head {
  int T = 1, n = 0, d = model::kBoardHeadDim;
  golden::AttentionParams p;
  std::vector<int8_t> q;
  std::vector<uint8_t> bank, K, V;  // K [T][k.total()], V [T][v.total()] (56 at d = 96)
  model::KvStorage st;
  // The rows as the unit's stream holds them: K_t V_t.
  std::vector<uint8_t> interleaved() const {
    std::vector<uint8_t> r;
    for (int t = 0; t < T; ++t) {
      r.insert(r.end(), K.begin() + long(size_t(t) * st.k.total()), K.begin() + long(size_t(t + 1) * st.k.total()));
      r.insert(r.end(), V.begin() + long(size_t(t) * st.v.total()), V.begin() + long(size_t(t + 1) * st.v.total()));
    }
    return r;
  }
};

// Rows of d channels (the unit's attention.head_dim; a multiple of 32).
inline Int4Head random_int4_head(int T, int n, std::mt19937& rng, int d = model::kBoardHeadDim) {
  Int4Head h;
  h.T = T;
  h.n = n;
  h.d = d;
  h.st = model::kv_storage(model::KvFormat::Int4, n, d);
  std::uniform_int_distribution<int> byte(0, 255), i8(-128, 127);
  std::uniform_real_distribution<float> scale(0.002f, 3.0f), lane(-40.0f, 40.0f);
  h.p = {uint32_t(std::uniform_int_distribution<uint32_t>(0, (1u << 18) - 1)(rng)), 16 + int(rng() % 12), false};
  h.q.resize(size_t(d));
  for (auto& x : h.q) x = int8_t(i8(rng));
  h.bank.assign(h.st.bank, 0);
  for (int c = 0; c < d; ++c) {
    const uint16_t s = model::fp16_from_float(scale(rng));
    std::memcpy(&h.bank[size_t(2 * c)], &s, 2);
  }
  std::vector<int> ch(static_cast<size_t>(d));
  std::iota(ch.begin(), ch.end(), 0);
  std::shuffle(ch.begin(), ch.end(), rng);
  for (int j = 0; j < n; ++j) h.bank[size_t(2 * d + j)] = uint8_t(ch[size_t(j)]);
  h.K.resize(size_t(T) * h.st.k.total());
  h.V.resize(size_t(T) * h.st.v.total());
  for (auto& b : h.K) b = uint8_t(byte(rng));
  for (auto& b : h.V) b = uint8_t(byte(rng));
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < n; ++j) {
      const uint16_t v = model::fp16_from_float(lane(rng));
      std::memcpy(&h.K[size_t(t) * h.st.k.total() + size_t(model::kv_nibble_bytes(d)) + 2 * size_t(j)], &v, 2);
    }
    for (int g = 0; g < d / model::kKvVGroup; ++g) {
      const uint16_t v = model::fp16_from_float(scale(rng));
      std::memcpy(&h.V[size_t(t) * h.st.v.total() + size_t(model::kv_nibble_bytes(d)) + 2 * size_t(g)], &v, 2);
    }
  }
  return h;
}

}  // namespace bitsim::int4_test
