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

// One spelling rule for a value, whether --set or a TOML file gives it (the Python module
// passes --set's text): each spelling is accepted by both with the same value, or refused by
// both naming the key.
TEST(Params, EverySpellingIsAcceptedOrRefusedAlikeBySetAndToml) {
  struct Spelling {
    const char* key;
    const char* text;
    bool accepted;
  };
  const Spelling spellings[] = {
      {"ddr.lazy", "true", true},        {"ddr.lazy", "false", true},         {"ddr.lazy", "1", true},
      {"ddr.lazy", "0", true},           {"ddr.lazy", "2", false},            {"ddr.lazy", "1.0", false},
      {"ddr.lazy", "-1", false},         {"dma.length_bits", "24", true},     {"dma.length_bits", "24.0", false},
      {"dma.length_bits", "24.5", false}, {"dma.length_bits", "true", false}, {"clock.mhz", "100", true},
      {"clock.mhz", "100.5", true},      {"clock.mhz", "true", false},
  };
  for (const Spelling& s : spellings) {
    SCOPED_TRACE(std::string(s.key) + " = " + s.text);
    const std::string key = s.key, table = key.substr(0, key.find('.')), leaf = key.substr(key.find('.') + 1);
    auto by_set = sample(), by_toml = sample();
    const std::string set_error = error_of([&] { by_set.set(key + "=" + s.text); });
    const std::string toml_error =
        error_of([&] { by_toml.load_toml_string("[" + table + "]\n" + leaf + " = " + s.text + "\n", "a.toml"); });
    EXPECT_EQ(set_error.empty(), s.accepted) << set_error;
    EXPECT_EQ(toml_error.empty(), s.accepted) << toml_error;
    if (s.accepted) {
      EXPECT_EQ(by_set.to_string(key), by_toml.to_string(key));
    } else {
      EXPECT_NE(toml_error.find(key), std::string::npos) << toml_error;
    }
  }
}

// calibrate --write's edit: the keys' values replaced in the author's text, every other line
// (comments, order, other keys, blank lines) as it was; a missing key added to its table.
TEST(Params, WithValuesInReplacesOnlyTheKeysValues) {
  auto p = sample();
  p.set("clock.mhz=100");
  p.set("dma.length_bits=25");  // not among the keys written: stays out of the file
  const std::string text = "# my board\n[clock]\nmhz = 125  # the PL clock\n\n[dma]\n# width\nlength_bits = 23\n";
  EXPECT_EQ(p.with_values_in(text, {"clock.mhz", "ddr.lazy"}, "a.toml"),
            "# my board\n[clock]\nmhz = 100.0  # the PL clock\n\n[dma]\n# width\nlength_bits = 23\n\n[ddr]\nlazy = true\n");
  EXPECT_EQ(p.with_values_in("[clock]\n# c\n[dma]\nlength_bits = 24\n", {"clock.mhz"}, "a.toml"),
            "[clock]\nmhz = 100.0\n# c\n[dma]\nlength_bits = 24\n");
  EXPECT_EQ(p.with_values_in("\"clock.mhz\" = 125 # q\n", {"clock.mhz"}, "a.toml"), "\"clock.mhz\" = 100.0 # q\n");
  const std::string inline_table = error_of([&] { p.with_values_in("clock = { mhz = 125 }\n", {"clock.mhz"}, "a.toml"); });
  EXPECT_NE(inline_table.find("a.toml"), std::string::npos) << inline_table;
  EXPECT_NE(inline_table.find("by hand"), std::string::npos) << inline_table;
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
