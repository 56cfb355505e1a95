// bitsim regress: the suite file, the figures of a scenario, the comparison with a baseline,
// the baseline file, JUnit XML, and the command against the checked-in baselines.
#include "study/regress.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "base/error.h"
#include "sim/board_config.h"
#include "support/run_bitsim.h"
#include "support/temp_dir.h"

namespace bitsim::study {
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

TEST(RegressSuite, ShippedSuiteCoversRunsBothFidelitiesTimingSweepValidateAndEnergy) {
  const RegressSuite s = load_regress_suite(default_regress_suite_path());
  std::set<std::string> kinds, fidelities;
  std::set<int> contexts;
  for (const auto& sc : s.scenarios) {
    kinds.insert(sc.kind);
    if (sc.kind == "run") fidelities.insert(sc.fidelity);
    if (sc.kind == "timing") contexts.insert(sc.context);
    EXPECT_TRUE(fs::exists(s.baseline_dir / (sc.name + ".json"))) << sc.name;
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"run", "timing", "sweep", "validate", "energy"}));
  EXPECT_EQ(fidelities, (std::set<std::string>{"fast", "cycle"}));
  EXPECT_EQ(contexts, (std::set<int>{1, 64, 256, 511}));
  // Grouped-query attention: checked tiny-gqa runs and bitnet-large-gqa4's timing.
  std::set<std::string> gqa;
  for (const auto& sc : s.scenarios)
    if (sc.model.find("gqa") != std::string::npos) gqa.insert(sc.kind + " " + sc.model);
  EXPECT_EQ(gqa, (std::set<std::string>{"run synthetic:tiny-gqa", "timing synthetic:bitnet-large-gqa4"}));
}

// A timing scenario's `model` is the shape it times; one bitsim does not know is refused at
// load naming the file, the line of the field and the valid shapes.
TEST(RegressSuite, TimingModelIsCheckedAtLoad) {
  const std::string e = suite_error("[[scenario]]\nname = \"t\"\nkind = \"timing\"\nmodel = \"synthetic:huge\"\n");
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "suite.toml:4", e);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "unknown model shape 'huge'", e);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "bitnet-large-gqa4", e);
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
  const sim::ParamSet base = sim::load_board_params("");
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
  // Every scenario of the shipped suite file, counted from the file itself.
  std::ifstream suite(std::string(BITSIM_SOURCE_DIR) + "/configs/regress.toml");
  int n = 0;
  for (std::string line; std::getline(suite, line);) n += line == "[[scenario]]";
  ASSERT_GT(n, 10);
  EXPECT_NE(r.out.find(fmt::format("passed: {} of {} scenario(s) as in their baselines", n, n)), std::string::npos)
      << r.out;
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

// The whole suite is checked when it is loaded, every scenario whether it runs or not: the
// second scenario of each suite below is wrong, and `--only a` (which would run the first
// alone) still exits 2 before anything runs, naming FILE:LINE of the field at fault.
TEST(RegressSuite, EveryScenarioIsCheckedAtLoadNamingFileAndLine) {
  const std::string first = "[[scenario]]\nname = \"a\"\nkind = \"timing\"\ntokens = 1\n\n[[scenario]]\nname = \"b\"\n";
  // Line 9 is the field after `name = "b"` and `kind`; line 6 the scenario's own line.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"kind = \"run\"\nmodel = \"synthetic:nope\"\n", "suite.toml:9: scenario 'b' (model): unknown model shape 'nope'"},
      {"kind = \"run\"\nmodel = \"/no/such/folder\"\n", "suite.toml:9: scenario 'b' (model): model folder"},
      {"kind = \"run\"\nprompt = \"\"\n", "suite.toml:9: scenario 'b' (prompt): prompt: the prompt is empty"},
      {"kind = \"run\"\ntokens = 512\n", "suite.toml:6: scenario 'b' (prompt): context: the prompt"},
      {"kind = \"run\"\nset = [\"clock.mhz=abc\"]\n", "suite.toml:9: scenario 'b' (set): "},
      {"kind = \"timing\"\nset = [\"no.key=1\"]\n", "suite.toml:9: scenario 'b' (set): "},
      {"kind = \"validate\"\nset = [\"clock.mhz=0\"]\n", "suite.toml:9: scenario 'b' (set): "},
      {"kind = \"timing\"\nset = [\"dma.mm2s_fifo_beats=2\"]\n", "suite.toml:6: scenario 'b': config key 'dma.mm2s_fifo_beats'"},
      {"kind = \"run\"\nset = [\"kv.format=int4\", \"attention.variant=two-phase\"]\n", "suite.toml:6: scenario 'b': kv.format = int4"},
      {"kind = \"sweep\"\ngrid = [\"clock_mhz=100,abc\"]\n", "suite.toml:9: scenario 'b' (grid): "},
      {"kind = \"sweep\"\ngrid = [\"nokey=1\"]\n", "suite.toml:9: scenario 'b' (grid): "},
  };
  for (const auto& [rest, message] : cases) {
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, message, suite_error(first + rest)) << rest;
    const TempDir dir;
    write(dir.path / "suite.toml", first + rest);
    const auto r = run_bitsim("regress --quiet --only a --suite " + (dir.path / "suite.toml").string() +
                              " --baselines " + (dir.path / "b").string());
    EXPECT_EQ(r.code, 2) << rest << r.out << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.path / "b")) << "ran or wrote before the whole suite was checked";
  }
  // The command's --set is part of the check: a scenario that the changed board refuses.
  const TempDir dir;
  write(dir.path / "suite.toml", first + "kind = \"timing\"\nset = [\"dma.max_burst_beats=64\"]\n");
  const auto r = run_bitsim("regress --quiet --only a --set dma.mm2s_fifo_beats=32 --suite " +
                            (dir.path / "suite.toml").string() + " --baselines " + (dir.path / "b").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("suite.toml:6: scenario 'b'"), std::string::npos) << r.err;
}

// Baselines are checked before anything runs: a damaged one is bad input (exit 2, naming it)
// and `--update` replaces it; a FIFO or a folder in a baseline's place is refused either way.
TEST(RegressCli, ADamagedBaselineExitsTwoAndUpdateReplacesIt) {
  const TempDir dir;
  const fs::path& d = dir.path;
  const fs::path suite = write(d / "suite.toml", "[[scenario]]\nname = \"a\"\nkind = \"timing\"\ntokens = 1\n");
  const std::string cmd = "regress --quiet --suite " + suite.string() + " --baselines " + (d / "b").string();
  ASSERT_EQ(run_bitsim(cmd + " --update").code, 0);
  const std::string good = read(d / "b" / "a.json");
  const std::vector<std::string> damaged = {"", "{\"schema\": 5", "not json", "{\"schema\": \"bitsim.regress-baseline/1\"}",
                                            "{\"schema\": \"bitsim.regress-baseline/1\", \"figures\": [[1, 2]]}",
                                            "{\"schema\": \"bitsim.regress-baseline/1\", \"figures\": [], \"figures\": []}",
                                            "[]"};
  for (const auto& text : damaged) {
    write(d / "b" / "a.json", text);
    auto r = run_bitsim(cmd);
    EXPECT_EQ(r.code, 2) << text << r.out << r.err;
    EXPECT_NE(r.err.find("a.json"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--update` replaces it"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("running"), std::string::npos) << r.out;
    r = run_bitsim(cmd + " --update");
    EXPECT_EQ(r.code, 0) << text << r.out << r.err;
    EXPECT_NE(r.out.find("replaced a damaged baseline"), std::string::npos) << r.out;
    EXPECT_EQ(read(d / "b" / "a.json"), good) << text;
    EXPECT_EQ(run_bitsim(cmd).code, 0) << text;
  }
  for (const bool fifo : {true, false}) {
    fs::remove(d / "b" / "a.json");
    if (fifo) ASSERT_EQ(::mkfifo((d / "b" / "a.json").c_str(), 0644), 0);
    else fs::create_directory(d / "b" / "a.json");
    for (const std::string extra : {"", " --update"}) {
      const auto r = run_bitsim(cmd + extra);
      EXPECT_EQ(r.code, 2) << fifo << extra << r.out << r.err;
      EXPECT_NE(r.err.find("a.json"), std::string::npos) << r.err;
    }
    fs::remove(d / "b" / "a.json");
  }
  // A baseline folder that is a file.
  write(d / "file", "x");
  const auto r = run_bitsim("regress --quiet --suite " + suite.string() + " --baselines " + (d / "file").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("not a folder"), std::string::npos) << r.err;
}

// An energy scenario that names a model prices that model's tokens: a grouped-query sibling's
// token is shorter and cheaper than bitnet-large's, and its time is its own timing
// scenario's token (matmul + attention + CPU, walker 0).
TEST(RegressScenarioRun, AnEnergyScenarioPricesTheModelItNames) {
  const sim::ParamSet base = sim::load_board_params("");
  RegressScenario large;
  large.name = "e";
  large.kind = "energy";
  large.context = 64;
  large.tokens = 1;
  RegressScenario gqa = large;
  gqa.model = "synthetic:bitnet-large-gqa4";
  gqa.field_origin["model"] = "test";
  RegressScenario gqa_timing = gqa;
  gqa_timing.kind = "timing";
  auto figure = [](const std::vector<RegressFigure>& fs, const std::string& name) {
    for (const auto& f : fs)
      if (f.name == name) return f.value;
    ADD_FAILURE() << "no figure " << name;
    return nlohmann::json();
  };
  const auto a = run_regress_scenario(large, base), b = run_regress_scenario(gqa, base);
  const auto t = run_regress_scenario(gqa_timing, base);
  EXPECT_LT(figure(b, "T=64 total_ps").get<uint64_t>(), figure(a, "T=64 total_ps").get<uint64_t>());
  EXPECT_LT(std::stod(figure(b, "T=64 energy_mj").get<std::string>()),
            std::stod(figure(a, "T=64 energy_mj").get<std::string>()));
  EXPECT_EQ(figure(t, "T=64 matmul_ps").get<uint64_t>() + figure(t, "T=64 attention_ps").get<uint64_t>() +
                figure(t, "T=64 cpu_ps").get<uint64_t>(),
            figure(b, "T=64 total_ps").get<uint64_t>());
}

}  // namespace
}  // namespace bitsim::study
