// bitsim regress: the suite file, the figures of a scenario, the comparison with a baseline,
// the baseline file, JUnit XML, and the command against the checked-in baselines.
#include "study/regress.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "base/error.h"
#include "sim/board_config.h"
#include "support/run_bitsim.h"
#include "support/temp_dir.h"

namespace bitsim::sim {
namespace {

namespace fs = std::filesystem;
using testing::run_bitsim;

// A folder for the test, created at once (tests/support/temp_dir.h names and removes it).
struct TempDir : ::bitsim::test::TempDir {
  TempDir() { std::filesystem::create_directories(path); }
};

fs::path write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
  return p;
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::string suite_error(const std::string& text) {
  const TempDir dir;
  const fs::path& d = dir.path;
  const fs::path f = write(d / "suite.toml", text);
  try {
    load_regress_suite(f);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RegressSuite, ShippedSuiteCoversRunsBothFidelitiesTimingSweepAndValidate) {
  const RegressSuite s = load_regress_suite(default_regress_suite_path());
  std::set<std::string> kinds, fidelities;
  std::set<int> contexts;
  for (const auto& sc : s.scenarios) {
    kinds.insert(sc.kind);
    if (sc.kind == "run") fidelities.insert(sc.fidelity);
    if (sc.kind == "timing") contexts.insert(sc.context);
    EXPECT_TRUE(fs::exists(s.baseline_dir / (sc.name + ".json"))) << sc.name;
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"run", "timing", "sweep", "validate"}));
  EXPECT_EQ(fidelities, (std::set<std::string>{"fast", "cycle"}));
  EXPECT_EQ(contexts, (std::set<int>{1, 64, 256, 511}));
}

TEST(RegressSuite, ErrorsNameTheFileLineAndField) {
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "suite.toml:3: unknown scenario field 'tokenz'",
                      suite_error("[[scenario]]\nname = \"a\"\ntokenz = 3\nkind = \"run\"\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "kind 'runn' is not one of",
                      suite_error("[[scenario]]\nname = \"a\"\nkind = \"runn\"\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "scenario name 'a' is used twice",
                      suite_error("[[scenario]]\nname = \"a\"\nkind = \"validate\"\n[[scenario]]\nname = \"a\"\n"
                                  "kind = \"validate\"\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "a sweep needs a grid",
                      suite_error("[[scenario]]\nname = \"s\"\nkind = \"sweep\"\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "field 'context' must be an integer in 1..512",
                      suite_error("[[scenario]]\nname = \"t\"\nkind = \"timing\"\ncontext = 0\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "runs past the 512 positions",
                      suite_error("[[scenario]]\nname = \"t\"\nkind = \"timing\"\ncontext = 512\ntokens = 2\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "scenario name '../x' must be",
                      suite_error("[[scenario]]\nname = \"../x\"\nkind = \"validate\"\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "unknown suite field 'baseline'", suite_error("baseline = \"x\"\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "no [[scenario]]", suite_error("baselines = \"x\"\n"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "is a folder",
                      [] { try { load_regress_suite(fs::temp_directory_path()); } catch (const Error& e) { return std::string(e.what()); } return std::string(); }());
}

TEST(RegressCompare, ReportsMovedMissingAndNewFiguresWithTheirDelta) {
  const std::vector<RegressFigure> base{{"a", 1000}, {"b", "x"}, {"c", "2.5"}, {"gone", 7}};
  const std::vector<RegressFigure> now{{"a", 1010}, {"b", "x"}, {"c", "2"}, {"new", 3}};
  const auto moved = compare_regress_figures(base, now);
  ASSERT_EQ(moved.size(), 4u);
  EXPECT_EQ(moved[0].figure, "a");
  EXPECT_EQ(moved[0].before, "1000");
  EXPECT_EQ(moved[0].after, "1010");
  EXPECT_EQ(moved[0].delta, "+10 (+1%)");
  EXPECT_EQ(moved[1].figure, "c");
  EXPECT_EQ(moved[1].delta, "-0.5 (-20%)");
  EXPECT_EQ(moved[2].figure, "gone");
  EXPECT_EQ(moved[2].after, "(none)");
  EXPECT_EQ(moved[3].figure, "new");
  EXPECT_EQ(moved[3].before, "(none)");
  EXPECT_TRUE(compare_regress_figures(base, base).empty());
}

TEST(RegressBaseline, RoundTripsExactlyAndRejectsMalformedFiles) {
  const TempDir dir;
  const fs::path& d = dir.path;
  const std::vector<RegressFigure> figs{{"token 0 matmul_ps", uint64_t(87350037696)}, {"x", "0.10000000000000001"}};
  write_regress_baseline(d / "s.json", "s", figs);
  EXPECT_EQ(read_regress_baseline(d / "s.json"), figs);
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);  // no temporary file left
  write(d / "bad.json", "{\"schema\": \"other\"}");
  EXPECT_THROW(read_regress_baseline(d / "bad.json"), Error);
  write(d / "trunc.json", read(d / "s.json").substr(0, 40));
  EXPECT_THROW(read_regress_baseline(d / "trunc.json"), Error);
  EXPECT_THROW(write_regress_baseline(d / "no" / "such" / "x.json", "x", figs), Error);
}

TEST(RegressJUnit, OneTestcasePerScenarioAndAFailureNamingTheFirstMovedFigure) {
  RegressOutcome ok{"tiny", "run", RegressOutcome::Status::kPassed, 10, {}, "", 0.5};
  RegressOutcome moved{"t<64>", "timing", RegressOutcome::Status::kMoved, 20, {{"T=64 attention_ps", "5", "6", "+1 (+20%)"}}, "", 1};
  RegressOutcome err{"v", "validate", RegressOutcome::Status::kError, 0, {}, "boom & co", 0};
  const std::string x = regress_junit_xml({ok, moved, err}, 2.0);
  EXPECT_NE(x.find("tests=\"3\" failures=\"1\" errors=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("<testcase classname=\"regress.run\" name=\"tiny\" time=\"0.500\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"t&lt;64&gt;\""), std::string::npos) << x;
  EXPECT_NE(x.find("<failure message=\"1 of 20 figures moved; first: T=64 attention_ps: 5 -&gt; 6 +1 (+20%)\">"),
            std::string::npos) << x;
  EXPECT_NE(x.find("<error message=\"boom &amp; co\"/>"), std::string::npos) << x;
}

TEST(RegressScenarioRun, TimingFiguresAreDeterministicAndFollowTheBoard) {
  RegressScenario s;
  s.name = "t";
  s.kind = "timing";
  s.context = 64;
  s.tokens = 1;
  const ParamSet base = load_board_params("");
  const auto a = run_regress_scenario(s, base);
  EXPECT_EQ(a, run_regress_scenario(s, base));
  s.sets = {"ddr.wall_gb_s=1.0"};
  const auto moved = compare_regress_figures(a, run_regress_scenario(s, base));
  ASSERT_FALSE(moved.empty());
  EXPECT_EQ(moved[0].figure, "T=64 matmul_ps");
  EXPECT_EQ(moved[0].delta.substr(0, 1), "+");  // a lower wall makes the matmuls slower
}

TEST(RegressCli, ShippedSuitePassesAgainstItsCheckedInBaselines) {
  const auto r = run_bitsim("regress --quiet");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("passed: 9 of 9 scenario(s) as in their baselines"), std::string::npos) << r.out;
}

TEST(RegressCli, AChangedBoardExitsOneNamesTheFirstMovedFigureAndWritesJUnit) {
  const TempDir dir;
  const fs::path& d = dir.path;
  const auto r = run_bitsim("regress --quiet --only large-T64 --set ddr.wall_gb_s=1.0 --junit " + (d / "j.xml").string());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(first: T=64 matmul_ps: \d+ -> \d+ \+\d+ \(\+[0-9.]+%\))"))) << r.out;
  const std::string x = read(d / "j.xml");
  EXPECT_NE(x.find("<failure message=\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"large-T64\""), std::string::npos) << x;
}

TEST(RegressCli, UpdateWritesBaselinesThatThenPassAndAnEditedFigureIsNamed) {
  const TempDir dir;
  const fs::path& d = dir.path;
  auto r = run_bitsim("regress --quiet --only tiny-fast-len16 --update --baselines " + d.string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = run_bitsim("regress --quiet --only tiny-fast-len16 --baselines " + d.string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  std::string text = read(d / "tiny-fast-len16.json");
  const std::regex cpu(R"(\["token 1 cpu_ps", (\d+)\])");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, cpu)) << text;
  const std::string edited = "[\"token 1 cpu_ps\", " + std::to_string(std::stoull(m[1]) - 5) + "]";
  write(d / "tiny-fast-len16.json", std::regex_replace(text, cpu, edited));
  r = run_bitsim("regress --quiet --only tiny-fast-len16 --baselines " + d.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("1 of 88 figures moved"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first: token 1 cpu_ps: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" +5 ("), std::string::npos) << r.out;
}

TEST(RegressCli, MissingBaselineFailsAndBadRequestsExitTwo) {
  const TempDir dir;
  const fs::path& d = dir.path;
  auto r = run_bitsim("regress --quiet --only large-T1 --baselines " + d.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("no baseline"), std::string::npos) << r.out;
  r = run_bitsim("regress --quiet --update --set clock.mhz=100");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--update"), std::string::npos) << r.err;
  r = run_bitsim("regress --quiet --only nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--only nope: no such scenario"), std::string::npos) << r.err;
  r = run_bitsim("regress --quiet --only large-T1 --junit " + d.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--junit"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bitsim::sim
