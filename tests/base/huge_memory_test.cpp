// HugeMemory (base/huge_memory.h): a zero-filled anonymous mapping for the big arrays.
#include "base/huge_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

namespace bitsim::model {
namespace {

bool all_zero(const HugeMemory& m) {
  for (size_t i = 0; i < m.size(); ++i)
    if (m.data()[i] != 0) return false;
  return true;
}

TEST(HugeMemory, SmallAndHugeArraysAreZeroAndWritableToTheLastByte) {
  for (size_t bytes : {size_t(1), size_t(4095), size_t(4097), size_t(3) << 20, (size_t(5) << 20) + 7}) {
    HugeMemory m(bytes, "test array");
    ASSERT_EQ(m.size(), bytes);
    ASSERT_NE(m.data(), nullptr);
    EXPECT_TRUE(all_zero(m)) << bytes;
    std::memset(m.data(), 0xA5, bytes);
    EXPECT_EQ(m.data()[0], 0xA5);
    EXPECT_EQ(m.data()[bytes - 1], 0xA5);
  }
}

TEST(HugeMemory, ZeroBytesMapsNothing) {
  const HugeMemory m(0, "empty");
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.data(), nullptr);
}

TEST(HugeMemory, MovesOwnershipAndLeavesTheSourceEmpty) {
  HugeMemory a(size_t(3) << 20, "a");
  a.data()[12345] = 7;
  HugeMemory b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  ASSERT_EQ(b.size(), size_t(3) << 20);
  EXPECT_EQ(b.data()[12345], 7);
  HugeMemory c(100, "c");
  c = std::move(b);
  EXPECT_EQ(c.size(), size_t(3) << 20);
  EXPECT_EQ(c.data()[12345], 7);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(HugeMemory, AnImpossibleSizeIsAnErrorNamingTheArray) {
  try {
    const HugeMemory m(size_t(1) << 62, "the simulated DDR");
    FAIL() << "mapped 2^62 bytes";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the simulated DDR"), std::string::npos) << e.what();
  }
}

// An array written sparsely maps small pages and takes huge-page advice for ranges; the
// advice (anywhere: inside, across the end, past it, empty) changes no byte: zeros stay
// zeros, written bytes stay written.
TEST(HugeMemory, OnDemandPagesTakeAdviceAndKeepTheirContents) {
  const size_t n = (size_t(5) << 20) + 12345;
  HugeMemory m(n, "sparse", HugeMemory::Pages::kOnDemand);
  ASSERT_EQ(m.size(), n);
  m.data()[100] = 1;
  m.data()[n - 1] = 2;
  m.advise_huge(0, 64 << 10);
  m.advise_huge((size_t(3) << 20) + 7, size_t(4) << 20);  // across the end
  m.advise_huge(n, 100);                                   // past it
  m.advise_huge(12, 0);                                    // empty
  std::memset(m.data() + (size_t(2) << 20), 3, size_t(1) << 20);
  EXPECT_EQ(m.data()[100], 1);
  EXPECT_EQ(m.data()[n - 1], 2);
  EXPECT_EQ(m.data()[(size_t(2) << 20) - 1], 0);
  EXPECT_EQ(m.data()[size_t(2) << 20], 3);
  EXPECT_EQ(m.data()[(size_t(3) << 20) - 1], 3);
  EXPECT_EQ(m.data()[size_t(3) << 20], 0);
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) nonzero += m.data()[i] != 0;
  EXPECT_EQ(nonzero, (size_t(1) << 20) + 2);
  HugeMemory empty;
  empty.advise_huge(0, 10);  // no memory: nothing to advise
}

}  // namespace
}  // namespace bitsim::model
