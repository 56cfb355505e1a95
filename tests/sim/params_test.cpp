// ParamSet: the documented, typed, range-checked board config keys.
#include "sim/params.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "support/error_of.h"

namespace bitsim::sim {
namespace {

ParamSet sample() {
  return ParamSet({
      {"clock.mhz", ParamType::Real, 125.0, 1, 1000, {}, "MHz", "board", "PL clock"},
      {"dma.length_bits", ParamType::Integer, int64_t{23}, 8, 26, {}, "bits", "board", "length register width"},
      {"driver.profile", ParamType::Text, std::string("c"), 0, -1, {"c", "python"}, "", "simulated", "driver"},
      {"ddr.lazy", ParamType::Boolean, true, 0, -1, {}, "", "simulated", "lazy pages"},
  });
}

using test::error_of;

TEST(Params, DefaultsAndTypedAccess) {
  const auto p = sample();
  EXPECT_EQ(p.real("clock.mhz"), 125.0);
  EXPECT_EQ(p.integer("dma.length_bits"), 23);
  EXPECT_EQ(p.text("driver.profile"), "c");
  EXPECT_TRUE(p.boolean("ddr.lazy"));
  EXPECT_TRUE(p.changed().empty());
}

TEST(Params, SetOverridesAndRecordsChange) {
  auto p = sample();
  p.set("clock.mhz=142.86");
  p.set("dma.length_bits=26");
  p.set("driver.profile=python");
  EXPECT_DOUBLE_EQ(p.real("clock.mhz"), 142.86);
  EXPECT_EQ(p.integer("dma.length_bits"), 26);
  EXPECT_EQ(p.changed().size(), 3u);
}

TEST(Params, UnknownKeyNamesItAndListsValidOnes) {
  auto p = sample();
  const auto e = error_of([&] { p.set("clock.ghz=1"); });
  EXPECT_NE(e.find("'clock.ghz'"), std::string::npos) << e;
  EXPECT_NE(e.find("clock.mhz"), std::string::npos) << e;
}

TEST(Params, OutOfRangeNamesKeyAndRange) {
  auto p = sample();
  const auto e = error_of([&] { p.set("dma.length_bits=27"); });
  EXPECT_NE(e.find("dma.length_bits"), std::string::npos) << e;
  EXPECT_NE(e.find("[8, 26]"), std::string::npos) << e;
  EXPECT_EQ(p.integer("dma.length_bits"), 23);  // unchanged
}

TEST(Params, WrongTypesAreErrors) {
  auto p = sample();
  EXPECT_NE(error_of([&] { p.set("dma.length_bits=2.5"); }).find("integer"), std::string::npos);
  EXPECT_NE(error_of([&] { p.set("clock.mhz=fast"); }).find("not a number"), std::string::npos);
  EXPECT_NE(error_of([&] { p.set("driver.profile=rust"); }).find("python"), std::string::npos);
  EXPECT_NE(error_of([&] { p.set("ddr.lazy=maybe"); }).find("true or false"), std::string::npos);
  EXPECT_NE(error_of([&] { p.set("novalue"); }).find("KEY=VALUE"), std::string::npos);
}

TEST(Params, TomlTablesAndUnknownKeyWithLine) {
  auto p = sample();
  p.load_toml_string("[clock]\nmhz = 100\n[dma]\nlength_bits = 24\n", "a.toml");
  EXPECT_EQ(p.real("clock.mhz"), 100.0);
  EXPECT_EQ(p.integer("dma.length_bits"), 24);
  const auto e = error_of([&] { p.load_toml_string("[dma]\nlength_bits = 24\nburst = 3\n", "b.toml"); });
  EXPECT_NE(e.find("b.toml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("'dma.burst'"), std::string::npos) << e;
  const auto syntax = error_of([&] { p.load_toml_string("[dma\n", "c.toml"); });
  EXPECT_NE(syntax.find("c.toml"), std::string::npos) << syntax;
}

TEST(Params, DumpRoundTrips) {
  auto p = sample();
  p.set("clock.mhz=150");
  const std::string dumped = p.dump_toml();
  EXPECT_NE(dumped.find("# PL clock [1..1000 MHz; board]"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("# driver [c | python; simulated]"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("# lazy pages [simulated]"), std::string::npos) << dumped;
  auto q = sample();
  q.load_toml_string(dumped, "dump");
  EXPECT_EQ(q.flat(), p.flat());
}

}  // namespace
}  // namespace bitsim::sim
