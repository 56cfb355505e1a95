// bitsim bench in quick mode (synthetic:tiny, few tokens): the fifteen figures, each the median
// of its repetitions, their met flags against their goals, cold and warm start-up told apart
// by the start-up cache, the table and the CLI's JSON document agreeing with them, the child
// process runner, and the premise of the speed-up figure (both fidelities simulate the same
// time per token). The measured values are not checked against the goals: they depend on
// the host.
#include "study/bench.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <utility>
#include <vector>
#include <functional>
#include <algorithm>

#include "base/error.h"
#include "cli/bench_command.h"

namespace bitsim::study {
namespace {

namespace fs = std::filesystem;

// The process figures run the built bitsim with the command line the CLI gives them.
std::function<std::vector<std::string>(const BenchRunProcess&)> run_command(const cli::BoardArgs& board = {}) {
  return [board](const BenchRunProcess& p) { return cli::bench_run_command(BITSIM_BINARY, board, p); };
}

void expect_consistent(const std::string& name, double value, double goal, bool higher, bool met) {
  EXPECT_GT(value, 0.0) << name;
  EXPECT_GT(goal, 0.0) << name;
  EXPECT_EQ(met, higher ? value >= goal : value <= goal) << name << ": " << value << " vs " << goal;
}

// Every figure is the median of its samples, one per repetition, between their min and max.
void expect_median_of_samples(const std::string& name, double value, double lo, double hi,
                              std::vector<double> samples, size_t repeat) {
  ASSERT_EQ(samples.size(), repeat) << name;
  std::sort(samples.begin(), samples.end());
  EXPECT_DOUBLE_EQ(lo, samples.front()) << name;
  EXPECT_DOUBLE_EQ(hi, samples.back()) << name;
  const size_t n = samples.size();
  const double med = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  EXPECT_DOUBLE_EQ(value, med) << name;
}

constexpr size_t kFigures = 15;

// The energy accounting's share: a share of the host time (below 100%, in %), lower is
// better, goal 2%, from the fast windows' 2 x 4 tokens (quick mode) priced by
// sim::token_energy.
void expect_energy_figure(const BenchFigure& f) {
  EXPECT_EQ(f.unit, "%");
  EXPECT_FALSE(f.higher_is_better);
  EXPECT_LT(f.max, 100.0) << "a share of the tokens' wall";
  EXPECT_EQ(f.goal, 2.0);
  EXPECT_NE(f.name.find("energy accounting"), std::string::npos) << f.name;
  EXPECT_NE(f.how.find("of the fast windows' 8 tokens"), std::string::npos) << f.how;
  EXPECT_NE(f.how.find("sim::token_energy"), std::string::npos) << f.how;
}

TEST(Bench, QuickRunReturnsThirteenFiguresEachAMedianOfItsRepetitions) {
  BenchOptions o;
  o.quick = true;
  o.repeat = 3;
  o.run_command = run_command();
  o.run_text = cli::bench_run_text;
  // The bench's temporary folder goes under a TMPDIR of this test's own, which must be empty
  // again afterwards.
  const fs::path tmp = fs::temp_directory_path() / ("bitsim_bench_tmp_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  ASSERT_EQ(::setenv("TMPDIR", tmp.c_str(), 1), 0);
  std::vector<std::string> lines;
  const auto figs = run_bench(o, [&](const std::string& s) { lines.push_back(s); });
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
  ASSERT_EQ(figs.size(), kFigures);
  EXPECT_FALSE(lines.empty());
  for (const auto& f : figs) {
    expect_consistent(f.name, f.value, f.goal, f.higher_is_better, f.met);
    expect_median_of_samples(f.name, f.value, f.min, f.max, f.samples, 3);
    EXPECT_FALSE(f.how.empty()) << f.name;
    EXPECT_FALSE(f.goal_text.empty()) << f.name;
    EXPECT_NE(f.evidence.find("measured (this host)"), std::string::npos) << f.name;
  }
  const std::vector<std::string> units{"s",     "s",        "s", "tok/s", "GB", "tok/s", "tok/s", "tok/s", "x",
                                       "cycles/s", "x", "points/s", "x", "%", "%"};
  for (size_t i = 0; i < kFigures; ++i) EXPECT_EQ(figs[i].unit, units[i]) << figs[i].name;
  // Cold and warm time to the first token are separate figures: the cold processes started
  // from an empty start-up cache each, the warm ones took the model and the K/V scales from
  // the cache the last cold one filled.
  EXPECT_NE(figs[0].name.find("cold"), std::string::npos);
  EXPECT_NE(figs[0].how.find("from the cache in 0 of 3"), std::string::npos) << figs[0].how;
  EXPECT_NE(figs[1].name.find("warm"), std::string::npos);
  EXPECT_NE(figs[1].how.find("from the cache in 3 of 3"), std::string::npos) << figs[1].how;
  // A whole process takes longer than its own time to the first token.
  EXPECT_GT(figs[2].min, 0.0);
  EXPECT_GT(figs[2].value, figs[1].value);
  EXPECT_FALSE(figs[4].higher_is_better);
  EXPECT_NE(figs[4].name.find("synthetic:tiny, 16 tokens"), std::string::npos) << figs[4].name;
  // The two T windows are separate figures.
  EXPECT_NE(figs[5].name.find("T=1..4"), std::string::npos) << figs[5].name;
  EXPECT_NE(figs[6].name.find("T=509..512"), std::string::npos) << figs[6].name;
  // The sweep figure: points run one after the other in this process (2 in quick mode).
  EXPECT_NE(figs[11].how.find("2 points"), std::string::npos) << figs[11].how;
  EXPECT_NE(figs[11].how.find("in one process"), std::string::npos) << figs[11].how;
  expect_energy_figure(figs[14]);
  // Approximate DDR3 reuse (docs/ddr3.md): its speed-up over exact after the first step, and
  // its worst token time error, from runs under ddr.model = ddr3 of 'A' and 3 tokens.
  EXPECT_NE(figs[12].name.find("approximate DDR3 reuse: wall speed-up"), std::string::npos) << figs[12].name;
  EXPECT_EQ(figs[12].goal, 10.0);
  EXPECT_NE(figs[12].how.find("under ddr.model = ddr3"), std::string::npos) << figs[12].how;
  EXPECT_NE(figs[12].how.find("(5 token steps)"), std::string::npos) << figs[12].how;
  EXPECT_GT(figs[12].min, 1.0) << figs[12].how;  // approximate reuse clocks fewer batches
  EXPECT_NE(figs[13].name.find("worst token time error"), std::string::npos) << figs[13].name;
  EXPECT_FALSE(figs[13].higher_is_better);
  EXPECT_EQ(figs[13].goal, 1.0);
  EXPECT_GE(figs[13].min, 0.0);
  EXPECT_LT(figs[13].max, 5.0) << figs[13].how;
  // The prefill figure: a 24-token prompt (quick mode) at P = 8 against P = 1, its computed
  // logits checked (the last of each chunk of 8 at P = 8, every position at P = 1: 3 x 27).
  EXPECT_NE(figs[8].name.find("a 24-token prompt at P = 8 over P = 1, golden check"), std::string::npos)
      << figs[8].name;
  std::smatch pre;
  ASSERT_TRUE(std::regex_search(figs[8].how, pre, std::regex(R"((\d+) of (\d+) computed logits bit-identical)")))
      << figs[8].how;
  EXPECT_EQ(pre[1].str(), pre[2].str()) << figs[8].how;
  EXPECT_EQ(std::stoi(pre[2].str()), 3 * (24 + 3)) << figs[8].how;
  EXPECT_NE(figs[8].how.find("Without the check"), std::string::npos) << figs[8].how;
  // The checked runs compared every token's logits with the golden reference, and all were
  // equal: "E of N logits bit-identical" (run_bench throws on a mismatch; this catches runs
  // that did not check at all: E = 0). 3 runs of 5 steps.
  std::smatch eq;
  ASSERT_TRUE(std::regex_search(figs[7].how, eq, std::regex(R"((\d+) of (\d+) logits bit-identical)"))) << figs[7].how;
  EXPECT_EQ(eq[1].str(), eq[2].str()) << figs[7].how;
  EXPECT_EQ(std::stoi(eq[2].str()), 15) << figs[7].how;

  // The table: one row per figure with its name, median, range and met flag, and a count
  // of the goals met that agrees with the flags.
  const std::string table = bench_table(figs, effective_bench_options(o), 1.0);
  int met = 0;
  for (const auto& f : figs) {
    met += f.met;
    BenchFigure lo = f, hi = f;
    lo.value = f.min;
    hi.value = f.max;
    const std::string row = "| " + f.name + " | " + format_bench_value(f) + " | " + format_bench_value(lo) + " .. " +
                            format_bench_value(hi) + " | " + f.evidence + " | " + f.goal_text + " | " +
                            (f.met ? "met" : "missed") + " |";
    EXPECT_NE(table.find(row), std::string::npos) << row;
  }
  EXPECT_NE(table.find(std::to_string(met) + " of 15 goals met"), std::string::npos) << table;
  EXPECT_NE(table.find("3 repetitions"), std::string::npos) << table;
}

// bench --only energy: the energy accounting's share alone, a median of its repetitions,
// without the process figures (no `bitsim run` process is started).
TEST(Bench, OnlyEnergyMeasuresTheAccountingsShareAlone) {
  BenchOptions o;
  o.quick = true;
  o.repeat = 3;
  o.only = "energy";
  o.run_command = [](const BenchRunProcess&) -> std::vector<std::string> {
    ADD_FAILURE() << "a process was started";
    return {};
  };
  o.run_text = cli::bench_run_text;
  const auto figs = run_bench(o);
  ASSERT_EQ(figs.size(), 1u);
  const BenchFigure& f = figs[0];
  expect_energy_figure(f);
  expect_consistent(f.name, f.value, f.goal, f.higher_is_better, f.met);
  expect_median_of_samples(f.name, f.value, f.min, f.max, f.samples, 3);
}

TEST(Bench, AProcessIsTimedAndItsExitCodeAndOutputKept) {
  const fs::path dir = fs::temp_directory_path() / ("bitsim_bench_proc_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const ProcessRun ok = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 0"}, dir);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.out, "out\n");
  EXPECT_EQ(ok.err, "err\n");
  EXPECT_GT(ok.wall_s, 0.0);
  EXPECT_GT(ok.maxrss_bytes, 0.0);
  EXPECT_EQ(run_process({"/bin/sh", "-c", "exit 7"}, dir).exit_code, 7);
  EXPECT_EQ(run_process({"/bin/sh", "-c", "kill -TERM $$"}, dir).exit_code, 128 + 15);
  // A child that holds memory: its own peak, not the parent's.
  const ProcessRun big =
      run_process({"/bin/sh", "-c", "exec dd if=/dev/zero of=/dev/null bs=300M count=1 status=none"}, dir);
  EXPECT_EQ(big.exit_code, 0);
  EXPECT_GT(big.maxrss_bytes, 250e6);
  EXPECT_THROW(run_process({"/nonexistent/bitsim"}, dir), Error);
  fs::remove_all(dir);
}

TEST(Bench, FastAndCycleRunnersGiveTheSameSimulatedTimePerToken) {
  // The speed-up figure compares the two fidelities' wall time on the same tokens, which is
  // fair only if they simulate the same thing: the same time per token, to the picosecond,
  // with the fast board warmed by one untimed token as run_bench does it.
  auto source = model::open_model_source("synthetic:tiny");
  const model::TernaryModel m = model::load_ternary_model(*source, 1);
  model::KvScales scales;
  scales.k.assign(size_t(m.config.num_layers) * size_t(m.config.num_heads), 0.05f);
  scales.v.assign(scales.k.size(), 0.05f);
  const sim::SimConfig cfg = sim::make_sim_config(sim::board_params());
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

BenchRunProcess run_of(const std::string& model, int tokens, bool check) {
  BenchRunProcess p;
  p.model = model;
  p.tokens = tokens;
  p.threads = 2;
  p.cache_dir = "/tmp/c";
  p.check = check;
  return p;
}

TEST(Bench, ARunProcessCarriesTheBoardConfig) {
  const cli::BoardArgs board{"configs/pynq-z2.toml", {"clock.mhz=100", "ddr.wall_gb_s=1.5"}};
  const auto argv = cli::bench_run_command("/bin/bitsim", board, run_of("synthetic:tiny", 3, false));
  const auto at = [&](const std::string& flag) { return std::find(argv.begin(), argv.end(), flag) - argv.begin(); };
  ASSERT_GE(argv.size(), 2u);
  EXPECT_EQ(argv[0], "/bin/bitsim");
  EXPECT_EQ(argv[1], "run");
  EXPECT_EQ(argv[size_t(at("--tokens")) + 1], "3");
  EXPECT_EQ(argv[size_t(at("--cache-dir")) + 1], "/tmp/c");
  EXPECT_LT(size_t(at("--no-check")), argv.size());
  EXPECT_EQ(argv[size_t(at("--config")) + 1], fs::absolute("configs/pynq-z2.toml").string());
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--set"), 2);
  EXPECT_EQ(argv.back(), "ddr.wall_gb_s=1.5");
  const auto checked = cli::bench_run_command("/bin/bitsim", {}, run_of("synthetic:tiny", 1, true));
  EXPECT_EQ(std::count(checked.begin(), checked.end(), "--no-check"), 0);
  EXPECT_EQ(std::count(checked.begin(), checked.end(), "--config"), 0);
  // The texts spell the same run as a user types it.
  EXPECT_EQ(cli::bench_run_text(run_of("synthetic:tiny", 3, false)),
            "bitsim run --model synthetic:tiny --prompt A --tokens 3 --no-check");
  BenchRunProcess prefill = run_of("", 1, true);
  prefill.prompt = "TEXT";
  prefill.sets = {"prefill.tokens_per_pass=P"};
  EXPECT_EQ(cli::bench_run_text(prefill),
            "bitsim run --prompt TEXT --tokens 1 --set prefill.tokens_per_pass=P");
  BenchRunProcess with_set = run_of("m", 1, true);
  with_set.sets = {"a=1"};
  const auto with_sets = cli::bench_run_command("/bin/bitsim", {}, with_set);
  EXPECT_EQ(with_sets.back(), "a=1");
}

TEST(Bench, OptionsAreChecked) {
  BenchOptions o;
  EXPECT_THROW(effective_bench_options(o), Error);  // no command line for the process figures
  o.run_command = run_command();
  EXPECT_THROW(effective_bench_options(o), Error);  // no text of it
  o.run_text = cli::bench_run_text;
  EXPECT_NO_THROW(effective_bench_options(o));
  // Each of these changes to valid options is refused.
  const std::vector<std::pair<const char*, std::function<void(BenchOptions&)>>> refused{
      {"repeat 0", [](BenchOptions& b) { b.repeat = 0; }},
      {"1 token per window", [](BenchOptions& b) { b.tokens = 1; }},
      {"more cycle tokens than tokens", [](BenchOptions& b) { b.tokens = 8, b.cycle_tokens = 9; }},
      {"memory tokens 513", [](BenchOptions& b) { b.memory_tokens = 513; }},
      {"memory tokens 2", [](BenchOptions& b) { b.memory_tokens = 2; }},
      {"run tokens 511", [](BenchOptions& b) { b.run_tokens = 511; }},
      {"a prefill prompt of 512 tokens", [](BenchOptions& b) { b.prefill_prompt_tokens = 512; }},
      {"a prefill prompt of 1 token", [](BenchOptions& b) { b.prefill_prompt_tokens = 1; }},
      {"prefill at P = 1", [](BenchOptions& b) { b.prefill_tokens_per_pass = 1; }},
      {"only an unknown figure group", [](BenchOptions& b) { b.only = "speed"; }},
      {"approximate DDR3 runs of 0 tokens", [](BenchOptions& b) { b.ddr3_tokens = 0; }}};
  for (const auto& [what, change] : refused) {
    BenchOptions b = o;
    change(b);
    EXPECT_THROW(effective_bench_options(b), Error) << what;
  }
  o.quick = true;
  const BenchOptions q = effective_bench_options(o);
  EXPECT_EQ(q.model, "synthetic:tiny");
  EXPECT_LE(q.tokens, 4);
  EXPECT_LE(q.memory_tokens, 16);
  EXPECT_LE(q.run_tokens, 8);
  EXPECT_EQ(q.repeat, 3);
}

TEST(Bench, CliQuickWritesJson) {
  const fs::path json = fs::temp_directory_path() / ("bitsim_bench_" + std::to_string(::getpid()) + ".json");
  const std::string cmd = std::string(BITSIM_BINARY) + " bench --quick --repeat 3 --quiet --json " + json.string();
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
  EXPECT_EQ(j.at("schema"), "bitsim.bench/2");
  EXPECT_EQ(j.at("options").at("repeat"), 3);
  EXPECT_EQ(j.at("model"), "synthetic:tiny");
  ASSERT_TRUE(j.at("figures").is_array());
  ASSERT_EQ(j.at("figures").size(), kFigures);
  int met = 0;
  for (const auto& fig : j.at("figures")) {
    met += fig.at("met").get<bool>();
    // The printed table carries the same figure and verdict as the JSON document.
    EXPECT_NE(out.find("| " + fig.at("name").get<std::string>() + " | "), std::string::npos) << fig.at("name");
    const double v = fig.at("value"), g = fig.at("goal");
    expect_consistent(fig.at("name"), v, g, fig.at("higher_is_better"), fig.at("met"));
    expect_median_of_samples(fig.at("name"), v, fig.at("min"), fig.at("max"), fig.at("samples"), 3);
    EXPECT_EQ(fig.at("evidence").get<std::string>().rfind("measured (this host)", 0), 0u);
    EXPECT_TRUE(fig.at("how").is_string());
  }
  EXPECT_NE(out.find(std::to_string(met) + " of 15 goals met"), std::string::npos) << out;
}

// A stored run of two figures, one where higher is better and one where lower is.
std::string stored_json(double rate, double seconds) {
  return nlohmann::json{{"schema", "bitsim.bench/2"},
                        {"load_average", {{"start", {0.5, 0.6, 0.7}}}},
                        {"figures",
                         {{{"name", "rate"}, {"unit", "tok/s"}, {"value", rate}, {"higher_is_better", true}},
                          {{"name", "time"}, {"unit", "s"}, {"value", seconds}, {"higher_is_better", false}},
                          {{"name", "gone"}, {"unit", "s"}, {"value", 1.0}, {"higher_is_better", false}}}}}
      .dump();
}

BenchFigure now_figure(const std::string& name, double value, bool higher, const std::string& unit) {
  BenchFigure f;
  f.name = name;
  f.unit = unit;
  f.value = value;
  f.higher_is_better = higher;
  return f;
}

TEST(Bench, CompareMarksAFigureMoreThanAQuarterWorseInItsOwnDirection) {
  // rate 100 -> 79 is 26.6% worse (100/79 - 1), time 2.0 -> 2.4 is 20% worse: only the rate is marked.
  const BenchStored st = parse_bench_json(stored_json(100, 2.0), "stored.json");
  ASSERT_EQ(st.figures.size(), 3u);
  EXPECT_EQ(st.load_start, (std::vector<double>{0.5, 0.6, 0.7}));
  const auto rows = compare_bench({now_figure("rate", 79, true, "tok/s"), now_figure("time", 2.4, false, "s"),
                                   now_figure("new", 1, true, "u")},
                                  st);
  ASSERT_EQ(rows.size(), 4u);  // the three of this run, then the stored one this run lacks
  EXPECT_NEAR(rows[0].worse_by, 100.0 / 79 - 1, 1e-12);
  EXPECT_TRUE(rows[0].worse);
  EXPECT_NEAR(rows[1].worse_by, 0.2, 1e-12);
  EXPECT_FALSE(rows[1].worse);
  EXPECT_FALSE(rows[2].stored.has_value());
  EXPECT_FALSE(rows[2].worse);
  EXPECT_EQ(rows[3].name, "gone");
  EXPECT_FALSE(rows[3].now.has_value());
  // Better in its own direction: negative, never marked.
  const auto better = compare_bench({now_figure("rate", 200, true, "tok/s"), now_figure("time", 1.0, false, "s")}, st);
  EXPECT_NEAR(better[0].worse_by, -0.5, 1e-12);
  EXPECT_NEAR(better[1].worse_by, -0.5, 1e-12);
  EXPECT_FALSE(better[0].worse || better[1].worse);
  const std::string table = bench_comparison_table(rows, st);
  EXPECT_NE(table.find("| rate | 79 tok/s | 100 tok/s | 26.6% worse | WORSE |"), std::string::npos) << table;
  EXPECT_NE(table.find("| time | 2.4 s | 2 s | 20.0% worse |  |"), std::string::npos) << table;
  // A figure of the same name in another unit is not compared.
  const auto other = compare_bench({now_figure("rate", 1, true, "points/s")}, st);
  EXPECT_FALSE(other[0].comparable || other[0].worse);
  EXPECT_NE(bench_comparison_table(other, st).find("units differ"), std::string::npos);
  EXPECT_NE(table.find("1 figure(s) more than 25% worse"), std::string::npos) << table;
  EXPECT_NE(table.find("stored.json (host load average at its start: 0.50 0.60 0.70)"), std::string::npos);
}

TEST(Bench, AStoredRunIsReadOrRefusedNamingTheField) {
  // The stored runs in docs/data read as they are.
  for (const char* f : {"docs/data/bench-ddr3.json"}) {
    const BenchStored st = read_bench_json(fs::path(BITSIM_SOURCE_DIR) / f);
    EXPECT_GT(st.figures.size(), 5u) << f;
  }
  const std::vector<std::pair<std::string, std::string>> bad{
      {"not json", "not JSON"},
      {R"({"figures": []})", "schema is missing"},
      {R"({"schema": "bitsim.bench/1", "figures": []})", "schema is \"bitsim.bench/1\""},
      {R"({"schema": "bitsim.bench/2"})", "figures is missing"},
      {R"({"schema": "bitsim.bench/2", "figures": [{"name": "a", "higher_is_better": true}]})", "figures[0].value"},
      {R"({"schema": "bitsim.bench/2", "figures": [{"value": 1, "higher_is_better": true}]})", "figures[0].name"},
      {R"({"schema": "bitsim.bench/2", "figures": [{"name": "a", "value": 1}]})", "figures[0].higher_is_better"},
      {R"({"schema": "bitsim.bench/2", "figures": [{"name": "a", "value": -1, "higher_is_better": true}]})",
       "figures[0].value is -1"},
      {R"({"schema": "bitsim.bench/2", "figures": [{"name": "a", "value": 1, "higher_is_better": true},
          {"name": "a", "value": 2, "higher_is_better": true}]})",
       "figures[1].name 'a' appears twice"},
  };
  for (const auto& [text, want] : bad) {
    try {
      (void)parse_bench_json(text, "s.json");
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stored bench s.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

TEST(Bench, CliComparesWithAStoredRun) {
  const fs::path dir = fs::temp_directory_path() / ("bitsim_bench_cmp_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // A bad stored file is refused before the bench runs.
  std::ofstream(dir / "bad.json") << "{}";
  const std::string bad = std::string(BITSIM_BINARY) + " bench --quick --repeat 1 --quiet --compare " +
                          (dir / "bad.json").string() + " 2>" + (dir / "err").string() + " >/dev/null";
  int st = std::system(bad.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
  std::ifstream e(dir / "err");
  const std::string err((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find((dir / "bad.json").string()), std::string::npos) << err;
  // A stored run far better than any host: every figure it shares is marked, exit 3.
  nlohmann::json j{{"schema", "bitsim.bench/2"}, {"figures", nlohmann::json::array()}};
  j["figures"].push_back({{"name", "simulated tok/s per wall second, golden check on every token"},
                          {"unit", "tok/s"}, {"value", 1e9}, {"higher_is_better", true}});
  std::ofstream(dir / "fast.json") << j.dump();
  const std::string cmd = std::string(BITSIM_BINARY) + " bench --quick --repeat 1 --quiet --compare " +
                          (dir / "fast.json").string() + " >" + (dir / "out").string();
  st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
  std::ifstream o(dir / "out");
  const std::string out((std::istreambuf_iterator<char>(o)), std::istreambuf_iterator<char>());
  EXPECT_NE(out.find("| simulated tok/s per wall second, golden check on every token |"), std::string::npos) << out;
  EXPECT_NE(out.find("| WORSE |"), std::string::npos) << out;
  EXPECT_NE(out.find("1 figure(s) more than 25% worse"), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(Bench, CliRejectsBadOptions) {
  const std::string cmd = std::string(BITSIM_BINARY) + " bench --tokens 1 >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

}  // namespace
}  // namespace bitsim::study
