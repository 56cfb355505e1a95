// ContentHash: the same bytes give the same digest however they are split, and any change
// of a byte, of the length or of the order changes it.
#include "base/content_hash.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

using bitsim::model::ContentHash;
using bitsim::model::checksum64;

namespace {
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(g());
  return v;
}
}  // namespace

TEST(ContentHash, SplittingTheInputDoesNotChangeTheDigest) {
  const auto bytes = random_bytes(1000, 1);
  const auto whole = ContentHash().update(bytes.data(), bytes.size()).digest();
  for (size_t a : {0, 1, 7, 31, 32, 33, 64, 500, 999}) {
    for (size_t b : {a, a + 1, a + 40, size_t(1000)}) {
      if (b > 1000) continue;
      ContentHash h;
      h.update(bytes.data(), a).update(bytes.data() + a, b - a).update(bytes.data() + b, 1000 - b);
      EXPECT_EQ(h.digest(), whole) << "split at " << a << ", " << b;
    }
  }
  EXPECT_EQ(checksum64(bytes.data(), bytes.size()), whole[0]);
}

TEST(ContentHash, EveryByteLengthAndOrderMatters) {
  const auto bytes = random_bytes(300, 2);
  std::set<std::array<uint64_t, 2>> seen;
  seen.insert(ContentHash().update(bytes.data(), bytes.size()).digest());
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto c = bytes;
    c[i] ^= uint8_t(1u << (i % 8));
    EXPECT_TRUE(seen.insert(ContentHash().update(c.data(), c.size()).digest()).second) << "byte " << i;
  }
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_TRUE(seen.insert(ContentHash().update(bytes.data(), n).digest()).second) << "length " << n;
  // Zero bytes of different lengths differ (the length is hashed).
  const std::vector<uint8_t> z(64, 0);
  EXPECT_NE(ContentHash().update(z.data(), 32).digest(), ContentHash().update(z.data(), 64).digest());
  // Strings carry their length: ("ab", "c") differs from ("a", "bc").
  EXPECT_NE(ContentHash().add("ab").add("c").hex(), ContentHash().add("a").add("bc").hex());
  // The two halves are not the same function of the input.
  const auto d = ContentHash().update(bytes.data(), bytes.size()).digest();
  EXPECT_NE(d[0], d[1]);
  EXPECT_EQ(ContentHash().hex().size(), 32u);
}
