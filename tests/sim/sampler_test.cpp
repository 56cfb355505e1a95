// The next-token choice (sim/sampler.h): greedy argmax with the lowest id winning a tie,
// and seeded sampling that is reproducible and stays within top-k.
#include "sim/sampler.h"

#include <gtest/gtest.h>

#include <set>

namespace bitsim::sim {
namespace {

TEST(Sampler, GreedyTakesTheLargestLogitAndTheLowestIdOnATie) {
  EXPECT_EQ(Sampler::argmax({0.f, 3.f, 1.f}), 1);
  EXPECT_EQ(Sampler::argmax({2.f, 5.f, 5.f, 5.f}), 1);
  EXPECT_EQ(Sampler::argmax({-1.f, -1.f}), 0);
  Sampler greedy(SamplerConfig{});
  EXPECT_EQ(greedy.next({4.f, 7.f, 7.f}), 1);
}

TEST(Sampler, SeededSamplingIsReproducibleAndStaysInTopK) {
  const std::vector<float> logits{1.f, 4.f, 3.9f, 0.5f, 3.8f, -2.f};
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 3;
  c.seed = 42;
  Sampler a(c), b(c);
  std::set<int> seen;
  for (int i = 0; i < 200; ++i) {
    const int x = a.next(logits);
    EXPECT_EQ(x, b.next(logits));
    seen.insert(x);
  }
  EXPECT_EQ(seen, (std::set<int>{1, 2, 4}));  // the three largest, each drawn at least once in 200
}

}  // namespace
}  // namespace bitsim::sim
