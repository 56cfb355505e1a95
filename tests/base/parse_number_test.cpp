// The one strict number parser (base/parse_number.h): decimal only, the whole text, the
// range; no octal, no wrap, no saturation, no nan.
#include "base/parse_number.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "base/error.h"
#include "support/error_of.h"

namespace bitsim {
namespace {

using test::error_of;

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(ParseNumber, IntegersAreDecimalAndWhole) {
  EXPECT_EQ(parse_integer("0100", "k"), 100);  // not octal 64
  EXPECT_EQ(parse_integer("-12", "k"), -12);
  EXPECT_EQ(parse_integer("0", "k", 0, 0), 0);
  for (const char* bad : {"", "-", "0x10", "1e3", "12abc", " 12", "12 ", "+5", "1.0", "abc"})
    EXPECT_TRUE(has(error_of([&] { parse_integer(bad, "--set k"); }), "--set k: '" + std::string(bad) +
                                                                            "' is not a decimal integer"))
        << bad;
}

TEST(ParseNumber, IntegersOutsideTheRangeAreRefusedWithTheRange) {
  EXPECT_EQ(parse_integer("511", "t", 0, 511), 511);
  const std::string e = error_of([] { parse_integer("512", "--tokens", 0, 511); });
  EXPECT_TRUE(has(e, "--tokens: '512' is out of range: expected an integer 0..511")) << e;
  // Past int64: refused, not saturated.
  EXPECT_TRUE(has(error_of([] { parse_integer("99999999999999999999", "x"); }), "out of range"));
}

TEST(ParseNumber, UnsignedNeverWrapsOrSaturates) {
  EXPECT_EQ(parse_unsigned("18446744073709551615", "s"), std::numeric_limits<uint64_t>::max());
  const std::string neg = error_of([] { parse_unsigned("-1", "--seed"); });
  EXPECT_TRUE(has(neg, "--seed: '-1' is out of range: expected an integer 0..18446744073709551615")) << neg;
  EXPECT_TRUE(has(error_of([] { parse_unsigned("18446744073709551616", "--seed"); }), "out of range"));
  EXPECT_TRUE(has(error_of([] { parse_unsigned("99999999999999999999", "--seed"); }), "out of range"));
  EXPECT_TRUE(has(error_of([] { parse_unsigned("007x", "--seed"); }), "not a decimal integer"));
  EXPECT_EQ(parse_unsigned("007", "s"), 7u);
  // "-0" is no unsigned number, and the range says so.
  const std::string minus_zero = error_of([] { parse_unsigned("-0", "--shard '-0/2'", 0, 100000); });
  EXPECT_TRUE(has(minus_zero, "--shard '-0/2': '-0' is out of range: expected an integer 0..100000")) << minus_zero;
}

TEST(ParseNumber, RealsAreFiniteDecimals) {
  EXPECT_DOUBLE_EQ(parse_real("142.86", "mhz"), 142.86);
  EXPECT_DOUBLE_EQ(parse_real("1e3", "x"), 1000.0);
  EXPECT_DOUBLE_EQ(parse_real("-.5", "x"), -0.5);
  EXPECT_DOUBLE_EQ(parse_real("5.", "x"), 5.0);
  for (const char* bad : {"nan", "inf", "-inf", "0x1p3", "", ".", "1e", "1.2.3", "12mhz", " 1", "+1", "+1.5", "0x10"})
    EXPECT_TRUE(has(error_of([&] { parse_real(bad, "--temperature"); }), "is not a number")) << bad;
  EXPECT_TRUE(has(error_of([] { parse_real("1e400", "x"); }), "out of range"));
  const std::string e = error_of([] { parse_real("101", "--temperature", 0, 100); });
  EXPECT_TRUE(has(e, "--temperature: '101' is out of range: expected a finite number 0..100")) << e;
}

}  // namespace
}  // namespace bitsim
