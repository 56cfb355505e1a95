#pragma once
// Next-token choice from the logits, as the host does after the lm_head: greedy argmax by
// default (the lowest id wins a tie), or temperature / top-k sampling from a seeded
// generator. Deterministic on every host: the softmax uses the project's exp, the random
// numbers come from splitmix64 and are turned into floats with integer operations.
#include <cstdint>
#include <vector>

namespace bitsim::sim {

struct SamplerConfig {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: all tokens
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerConfig config);
  int next(const std::vector<float>& logits);
  static int argmax(const std::vector<float>& logits);

 private:
  double uniform();  // [0, 1) with 53 random bits
  SamplerConfig config_;
  uint64_t state_;
};

}  // namespace bitsim::sim
