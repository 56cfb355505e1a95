#pragma once
// Next-token choice from the logits, as the host does after the lm_head: greedy argmax by
// default (the lowest id wins a tie), or temperature / top-k sampling from a seeded
// generator. Deterministic on every host: the softmax uses the project's exp, the random
// numbers come from splitmix64 and are turned into floats with integer operations.
#include <cstdint>
#include <string>
#include <vector>

#include "base/config_field.h"

namespace bitsim::sim {

// The run's sampling (`bitsim run --temperature --top-k --seed`, not board keys); visit()
// gives each field's name, range and meaning (base/config_field.h).
struct SamplerConfig {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: all tokens
  uint64_t seed = 0;

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    using bitsim::Evidence;
    using bitsim::FieldInfo;
    v(c.temperature, FieldInfo{"sampler.temperature", 0, 100, "", Evidence::kSimulated,
                               "softmax temperature of the next-token choice; 0 is greedy", 1, false});
    v(c.top_k, FieldInfo{"sampler.top_k", 0, 2147483647.0, "tokens", Evidence::kSimulated,
                         "sample among the k most likely tokens; 0 is all", 1, false});
    v(c.seed, FieldInfo{"sampler.seed", 0, 18446744073709551615.0, "", Evidence::kSimulated,
                        "seed of the sampler's splitmix64 generator", 1, false});
  }
  // Throws bitsim::Error naming `who` and the field out of range.
  void validate(const std::string& who) const { bitsim::check_fields(*this, who); }
};

class Sampler {
 public:
  explicit Sampler(SamplerConfig config);
  int next(const std::vector<float>& logits);
  // A position whose logits were not computed (a prefill chunk's earlier positions): the
  // random state moves as next() would move it, so the generated tokens do not depend on P.
  void skip();
  static int argmax(const std::vector<float>& logits);

 private:
  double uniform();  // [0, 1) with 53 random bits
  SamplerConfig config_;
  uint64_t state_;
};

}  // namespace bitsim::sim
