#include "sim/sampler.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "numerics/numerics.h"

namespace bitsim::sim {

Sampler::Sampler(SamplerConfig config) : config_(config), state_(config.seed) {
  config_.validate("sampler");
}

int Sampler::argmax(const std::vector<float>& logits) {
  int best = 0;
  for (int i = 1; i < int(logits.size()); ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

double Sampler::uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * (1.0 / 9007199254740992.0);
}

void Sampler::skip() {
  if (config_.temperature != 0.0f) (void)uniform();
}

int Sampler::next(const std::vector<float>& logits) {
  if (logits.empty()) throw Error("sampler: empty logits");
  if (config_.temperature == 0.0f) return argmax(logits);
  std::vector<int> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const int k = config_.top_k > 0 ? std::min<int>(config_.top_k, int(ids.size())) : int(ids.size());
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ids.resize(k);
  const float top = logits[ids[0]];
  std::vector<double> p(k);
  double total = 0.0;
  for (int i = 0; i < k; ++i) {
    p[i] = num::exp_approx((logits[ids[i]] - top) / config_.temperature);
    total += p[i];
  }
  double u = uniform() * total;
  for (int i = 0; i < k; ++i) {
    if (u < p[i]) return ids[i];
    u -= p[i];
  }
  return ids[k - 1];
}

}  // namespace bitsim::sim
