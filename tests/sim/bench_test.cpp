// bitsim bench in quick mode (synthetic:tiny, few tokens): the seven figures, their met flags
// against their goals, the table and the CLI's JSON document agreeing with them, and the
// premise of the speed-up figure (both fidelities simulate the same time per token). The
// measured values are not checked against the goals: they depend on the host.
#include "sim/bench.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "model/error.h"

namespace bitsim::sim {
namespace {

namespace fs = std::filesystem;

void expect_consistent(const std::string& name, double value, double goal, bool higher, bool met) {
  EXPECT_GT(value, 0.0) << name;
  EXPECT_GT(goal, 0.0) << name;
  EXPECT_EQ(met, higher ? value >= goal : value <= goal) << name << ": " << value << " vs " << goal;
}

TEST(Bench, QuickRunReturnsSixConsistentFigures) {
  BenchOptions o;
  o.quick = true;
  std::vector<std::string> lines;
  const auto figs = run_bench(o, [&](const std::string& s) { lines.push_back(s); });
  ASSERT_EQ(figs.size(), 7u);
  EXPECT_FALSE(lines.empty());
  for (const auto& f : figs) {
    expect_consistent(f.name, f.value, f.goal, f.higher_is_better, f.met);
    EXPECT_FALSE(f.how.empty()) << f.name;
    EXPECT_FALSE(f.goal_text.empty()) << f.name;
    EXPECT_NE(f.evidence.find("measured (this host)"), std::string::npos) << f.name;
  }
  EXPECT_EQ(figs[0].unit, "tok/s");
  EXPECT_EQ(figs[1].unit, "tok/s");
  EXPECT_EQ(figs[2].unit, "cycles/s");
  EXPECT_EQ(figs[3].unit, "x");
  EXPECT_EQ(figs[4].unit, "s");
  EXPECT_FALSE(figs[4].higher_is_better);
  EXPECT_EQ(figs[5].unit, "GB");
  EXPECT_FALSE(figs[5].higher_is_better);
  EXPECT_NE(figs[5].name.find("synthetic:tiny"), std::string::npos);
  // The sweep figure: points run one after the other in this process (2 in quick mode).
  EXPECT_EQ(figs[6].unit, "points/s");
  EXPECT_NE(figs[6].how.find("2 points"), std::string::npos) << figs[6].how;
  EXPECT_NE(figs[6].how.find("in one process"), std::string::npos) << figs[6].how;
  // The checked run compared every token's logits with the golden reference, and all were
  // equal: the figure's raw numbers "E of N logits bit-identical" (run_bench throws on a
  // mismatch; this catches a run that did not check at all: E = 0).
  std::smatch eq;
  ASSERT_TRUE(std::regex_search(figs[1].how, eq, std::regex(R"((\d+) of (\d+) logits bit-identical)"))) << figs[1].how;
  EXPECT_EQ(eq[1].str(), eq[2].str()) << figs[1].how;
  EXPECT_GT(std::stoi(eq[2].str()), 1) << figs[1].how;

  // The table: one row per figure with its name, formatted value and met flag, and a count
  // of the goals met that agrees with the flags.
  const std::string table = bench_table(figs, effective_bench_options(o), 1.0);
  int met = 0;
  for (const auto& f : figs) {
    met += f.met;
    const std::string row = "| " + f.name + " | " + format_bench_value(f) + " | " + f.evidence + " | " + f.goal_text +
                            " | " + (f.met ? "met" : "missed") + " |";
    EXPECT_NE(table.find(row), std::string::npos) << row;
  }
  EXPECT_NE(table.find(std::to_string(met) + " of 7 goals met"), std::string::npos) << table;
}

TEST(Bench, FastAndCycleRunnersGiveTheSameSimulatedTimePerToken) {
  // The speed-up figure compares the two fidelities' wall time on the same tokens, which is
  // fair only if they simulate the same thing: the same time per token, to the picosecond,
  // with the fast board warmed by one untimed token as run_bench does it.
  auto source = model::open_model_source("synthetic:tiny");
  const model::TernaryModel m = model::load_ternary_model(*source, 1);
  golden::KvScales scales;
  scales.k.assign(size_t(m.config.num_layers) * size_t(m.config.num_heads), 0.05f);
  scales.v.assign(scales.k.size(), 0.05f);
  const SimConfig cfg = make_sim_config(board_params());
  const std::vector<int> ids{1, 7, 300};
  FastTokenRunner fast(cfg, m, scales, 1);
  fast.step(ids[0], 0);  // warm-up
  const std::vector<TimedToken> cyc = cycle_tokens_timed(cfg, m, scales, ids);
  ASSERT_EQ(cyc.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const TimedToken f = fast.step(ids[i], int(i));
    EXPECT_EQ(cyc[i].position, int(i));
    EXPECT_EQ(f.timing.total_ps(), cyc[i].timing.total_ps()) << "token " << i;
    EXPECT_EQ(f.timing.matmul_ps, cyc[i].timing.matmul_ps) << "token " << i;
    EXPECT_EQ(f.timing.attention_ps, cyc[i].timing.attention_ps) << "token " << i;
    EXPECT_EQ(f.timing.bytes_read, cyc[i].timing.bytes_read) << "token " << i;
    EXPECT_GT(f.timing.total_ps(), 0u);
  }
  EXPECT_GT(fast.stats().cache_hits, 0u);
}

TEST(Bench, OptionsAreChecked) {
  BenchOptions o;
  o.tokens = 1;
  EXPECT_THROW(effective_bench_options(o), Error);
  o.tokens = 8;
  o.cycle_tokens = 9;
  EXPECT_THROW(effective_bench_options(o), Error);
  o.cycle_tokens = 1;
  o.memory_tokens = 513;
  EXPECT_THROW(effective_bench_options(o), Error);
  o.memory_tokens = 512;
  o.quick = true;
  const BenchOptions q = effective_bench_options(o);
  EXPECT_EQ(q.model, "synthetic:tiny");
  EXPECT_LE(q.tokens, 4);
  EXPECT_LE(q.memory_tokens, 16);
}

TEST(Bench, CliQuickWritesJson) {
  const fs::path json = fs::temp_directory_path() / ("bitsim_bench_" + std::to_string(::getpid()) + ".json");
  const std::string cmd = std::string(BITSIM_BINARY) + " bench --quick --quiet --json " + json.string();
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << out;

  std::ifstream f(json);
  ASSERT_TRUE(f.good());
  const nlohmann::json j = nlohmann::json::parse(f);
  fs::remove(json);
  EXPECT_EQ(j.at("schema"), "bitsim.bench/1");
  EXPECT_EQ(j.at("model"), "synthetic:tiny");
  ASSERT_TRUE(j.at("figures").is_array());
  ASSERT_EQ(j.at("figures").size(), 7u);
  int met = 0;
  for (const auto& fig : j.at("figures")) {
    met += fig.at("met").get<bool>();
    // The printed table carries the same figure and verdict as the JSON document.
    EXPECT_NE(out.find("| " + fig.at("name").get<std::string>() + " | "), std::string::npos) << fig.at("name");
    const double v = fig.at("value"), g = fig.at("goal");
    expect_consistent(fig.at("name"), v, g, fig.at("higher_is_better"), fig.at("met"));
    EXPECT_EQ(fig.at("evidence").get<std::string>().rfind("measured (this host)", 0), 0u);
    EXPECT_TRUE(fig.at("how").is_string());
  }
  EXPECT_NE(out.find(std::to_string(met) + " of 7 goals met"), std::string::npos) << out;
}

TEST(Bench, CliRejectsBadOptions) {
  const std::string cmd = std::string(BITSIM_BINARY) + " bench --tokens 1 >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

}  // namespace
}  // namespace bitsim::sim
