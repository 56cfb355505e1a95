// bitsim bench in quick mode (synthetic:tiny, few tokens): the six figures, their met flags,
// the table, and the CLI's JSON document. The numbers themselves are not checked against
// the goals: they depend on the host.
#include "sim/bench.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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
  ASSERT_EQ(figs.size(), 6u);
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
  // The simulated time per token is the same in both fidelities.
  EXPECT_NE(figs[3].how.find("the same in both fidelities"), std::string::npos) << figs[3].how;
  // The golden check passed on every token of the checked run.
  EXPECT_NE(figs[1].how.find("bit-identical"), std::string::npos);

  const std::string table = bench_table(figs, effective_bench_options(o), 1.0);
  EXPECT_NE(table.find("| figure | measured |"), std::string::npos);
  EXPECT_NE(table.find("measured (this host)"), std::string::npos);
  EXPECT_NE(table.find("simulated"), std::string::npos);
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
  EXPECT_NE(out.find("| figure | measured |"), std::string::npos) << out;
  EXPECT_NE(out.find("goals met"), std::string::npos) << out;

  std::ifstream f(json);
  ASSERT_TRUE(f.good());
  const nlohmann::json j = nlohmann::json::parse(f);
  fs::remove(json);
  EXPECT_EQ(j.at("schema"), "bitsim.bench/1");
  EXPECT_EQ(j.at("model"), "synthetic:tiny");
  ASSERT_TRUE(j.at("figures").is_array());
  ASSERT_EQ(j.at("figures").size(), 6u);
  for (const auto& fig : j.at("figures")) {
    const double v = fig.at("value"), g = fig.at("goal");
    expect_consistent(fig.at("name"), v, g, fig.at("higher_is_better"), fig.at("met"));
    EXPECT_EQ(fig.at("evidence").get<std::string>().rfind("measured (this host)", 0), 0u);
    EXPECT_TRUE(fig.at("how").is_string());
  }
}

TEST(Bench, CliRejectsBadOptions) {
  const std::string cmd = std::string(BITSIM_BINARY) + " bench --tokens 1 >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

}  // namespace
}  // namespace bitsim::sim
