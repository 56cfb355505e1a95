// `bitsim run --layers-csv FILE`: one row per (token, layer, step), checked against the
// run's own per-token figures, the trace, and across fidelities.
#include "sim/layer_table.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "sim/board_config.h"
#include "sim/board_run.h"
#include "support/run_bitsim.h"

namespace bitsim::sim {
namespace {

namespace fs = std::filesystem;

fs::path temp_file(const std::string& tag) {
  return fs::temp_directory_path() / ("bitsim_layers_" + std::to_string(::getpid()) + "_" + tag);
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct CsvRow {
  std::map<std::string, std::string> f;
  const std::string& operator[](const std::string& k) const { return f.at(k); }
};

std::vector<CsvRow> parse(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  std::stringstream hs(line);
  for (std::string c; std::getline(hs, c, ',');) head.push_back(c);
  std::vector<CsvRow> rows;
  while (std::getline(in, line)) {
    CsvRow r;
    std::stringstream ls(line);
    size_t i = 0;
    for (std::string c; std::getline(ls, c, ',');) r.f[head.at(i++)] = c;
    if (i + 1 == head.size()) r.f[head[i]] = "";  // a trailing empty field
    EXPECT_EQ(r.f.size(), head.size()) << line;
    rows.push_back(std::move(r));
  }
  return rows;
}

// "12.345678" microseconds -> picoseconds, exactly.
uint64_t ps(const std::string& us) {
  const auto dot = us.find('.');
  return std::stoull(us.substr(0, dot)) * 1000000 + std::stoull(us.substr(dot + 1));
}

struct Layered {
  BoardRunResult result;
  std::string csv;
};

Layered run_layered(Fidelity fidelity, int tokens, const std::string& trace = "", const std::string& prompt = "Hi",
                    int tokens_per_pass = 1, const std::vector<std::string>& sets = {}) {
  BoardRunRequest r{RunRequest{}, board_params()};
  r.run.model = "synthetic:tiny";
  r.run.prompt = prompt;
  r.params.set("prefill.tokens_per_pass=" + std::to_string(tokens_per_pass), "test");
  for (const auto& kv : sets) r.params.set(kv, "test");
  r.run.tokens = tokens;
  r.fidelity = fidelity;
  const fs::path file = temp_file(fidelity_name(fidelity));
  r.layers_csv_file = file.string();
  r.trace_file = trace;
  Layered l;
  l.result = run_board(std::move(r));
  l.csv = read(file);
  fs::remove(file);
  return l;
}

TEST(LayerTable, TheRowsOfATokenAddUpToItsTimeDmaCallsAndBytes) {
  const fs::path trace = temp_file("trace.json");
  const Layered l = run_layered(Fidelity::kFast, 3, trace.string());
  EXPECT_EQ(l.csv.rfind("token,token_id,chunk_tokens,layer,step,part,unit,begin_us,time_us,dma_calls,bytes_read,"
                        "cpu_bytes_written,evidence,energy_mj,dram_mj,pl_mj,ps_mj,energy_evidence\n", 0),
            0u);
  std::vector<CsvRow> rows;  // the steps' rows, without their energy remainders
  for (const CsvRow& r : parse(l.csv))
    if (r["step"] != "remainder") rows.push_back(r);
  ASSERT_FALSE(rows.empty());
  const int layers = 2;  // synthetic:tiny
  ASSERT_FALSE(l.result.tokens.empty());
  for (const auto& t : l.result.tokens) {
    uint64_t time = 0, calls = 0, bytes = 0, next_begin = 0;
    std::map<int, std::set<std::string>> steps;  // layer -> driver steps
    int n = 0;
    for (const auto& r : rows) {
      if (std::stoi(r["token"]) != t.context - 1) continue;
      EXPECT_EQ(std::stoi(r["token_id"]), t.token_id);
      EXPECT_EQ(r["chunk_tokens"], "1");
      if (n++ > 0) EXPECT_EQ(ps(r["begin_us"]), next_begin) << "the steps of a token tile its time";
      next_begin = ps(r["begin_us"]) + ps(r["time_us"]);
      time += ps(r["time_us"]);
      calls += std::stoull(r["dma_calls"]);
      bytes += std::stoull(r["bytes_read"]);
      const std::string& unit = r["unit"];
      const std::string& step = r["step"];
      if (unit == "cpu") {
        EXPECT_EQ(r["dma_calls"], "0") << step;
        EXPECT_EQ(r["bytes_read"], "0") << step;
      } else {
        EXPECT_EQ(step.rfind(unit, 0), 0u) << step << " on " << unit;
        EXPECT_EQ(r["dma_calls"], "4") << step;  // MM2S and S2MM of both lanes' DMAs
        EXPECT_GT(std::stoull(r["bytes_read"]), 0u) << step;
        steps[r["layer"].empty() ? -1 : std::stoi(r["layer"])].insert(step);
      }
      EXPECT_EQ(r["evidence"], "simulated");
    }
    ASSERT_GT(n, 0) << "token " << t.index;
    EXPECT_NEAR(double(time) / 1e9, t.total_ms, 1e-9) << "token " << t.index;
    EXPECT_EQ(calls, t.dma_calls) << "token " << t.index;
    EXPECT_EQ(bytes, t.bytes_read) << "token " << t.index;
    for (int layer = 0; layer < layers; ++layer)
      EXPECT_EQ(steps[layer], (std::set<std::string>{"matmul qkv", "attention", "matmul o", "matmul gate_up", "matmul down"}))
          << "layer " << layer;
    EXPECT_EQ(steps[-1], std::set<std::string>{"matmul lm_head"});
  }
  // The trace, written from the same run, has one CPU or driver span per row.
  std::ifstream tf(trace);
  const auto j = nlohmann::json::parse(tf);
  size_t spans = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e.value("cat", "") == "cpu" || e.value("cat", "") == "driver") ++spans;
  EXPECT_EQ(spans, rows.size());
  fs::remove(trace);
}

// Prefill at P = 4: a prompt of 7 tokens runs as chunks of 4 and 3. A chunk's rows carry
// its V; its CPU steps and matmul calls carry its first position and token id, its attention
// calls (one per position and layer) their own; the rows of a chunk tile its time, the sum
// of its positions' shares, and hold its DMA calls and bytes.
TEST(LayerTable, APromptChunksRowsCarryItsSizeAndTheirPositions) {
  const Layered l = run_layered(Fidelity::kFast, 1, "", "Prompt", 4);  // BOS + 6 bytes = 7 tokens
  const auto rows = parse(l.csv);
  const auto& toks = l.result.tokens;
  ASSERT_EQ(toks.size(), 8u);
  const int layers = 2;  // synthetic:tiny
  for (const auto& [first, V] : std::vector<std::pair<int, int>>{{0, 4}, {4, 3}, {7, 1}}) {
    uint64_t time = 0, calls = 0, bytes = 0, want_calls = 0, want_bytes = 0;
    double want_ms = 0;
    std::map<int, int> attention;  // position -> attention rows
    for (int p = first; p < first + V; ++p) {
      want_ms += toks[size_t(p)].total_ms;
      want_calls += toks[size_t(p)].dma_calls;
      want_bytes += toks[size_t(p)].bytes_read;
    }
    for (const auto& r : rows) {
      const int pos = std::stoi(r["token"]);
      if (pos < first || pos >= first + V) continue;
      EXPECT_EQ(r["chunk_tokens"], std::to_string(V)) << pos << " " << r["step"];
      EXPECT_EQ(std::stoi(r["token_id"]), toks[size_t(pos)].token_id) << pos << " " << r["step"];
      if (r["step"] == "attention") ++attention[pos];
      else EXPECT_EQ(pos, first) << r["step"];
      time += ps(r["time_us"]);
      calls += std::stoull(r["dma_calls"]);
      bytes += std::stoull(r["bytes_read"]);
    }
    for (int p = first; p < first + V; ++p) EXPECT_EQ(attention[p], layers) << "position " << p;
    EXPECT_NEAR(double(time) / 1e9, want_ms, 1e-6) << "chunk at " << first;
    EXPECT_EQ(calls, want_calls) << "chunk at " << first;
    EXPECT_EQ(bytes, want_bytes) << "chunk at " << first;
  }
}

double mj(const CsvRow& r, const char* column) { return std::stod(r[column]); }

// Every row's energy is priced (its parts add up to it, labelled simulated); after each step
// a remainder row (no time, no work) makes the step's rows add up to its tokens' energy in
// the run, in total and by part; the rows hold nearly all of the energy of the time they
// tile (under host.walker = pl the cache maintenance and walker starts between rows have no
// row: the remainder holds them too).
void expect_rows_add_up_to_the_tokens_energy(const Layered& l) {
  const auto rows = parse(l.csv);
  std::map<int, double> run[4];  // position -> the run's energy, DRAM, PL, PS(+other) of the token
  for (const auto& t : l.result.tokens) {
    run[0][t.index] = t.energy_mj;
    run[1][t.index] = t.dram_mj;
    run[2][t.index] = t.pl_mj;
    run[3][t.index] = t.ps_mj;
  }
  const char* columns[4] = {"energy_mj", "dram_mj", "pl_mj", "ps_mj"};
  double sums[4] = {0, 0, 0, 0}, remainder = 0, rows_ms = 0;
  int steps = 0, first = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r["energy_evidence"], "simulated");
    EXPECT_NEAR(mj(r, "dram_mj") + mj(r, "pl_mj") + mj(r, "ps_mj"), mj(r, "energy_mj"), 1e-8) << r["step"];
    for (int c = 0; c < 4; ++c) sums[c] += mj(r, columns[c]);
    rows_ms += double(ps(r["time_us"])) / 1e9;
    if (r["step"] != "remainder") {
      EXPECT_GT(mj(r, "energy_mj"), 0.0) << r["step"];
      continue;
    }
    EXPECT_EQ(ps(r["time_us"]), 0u);
    EXPECT_EQ(r["dma_calls"], "0");
    EXPECT_EQ(std::stoi(r["token"]), first) << "a remainder closes the step that began at " << first;
    const int V = std::stoi(r["chunk_tokens"]);
    double want[4] = {0, 0, 0, 0}, step_ms = 0;
    for (int p = first; p < first + V; ++p) {
      for (int c = 0; c < 4; ++c) want[c] += run[c].at(p);
      step_ms += l.result.tokens[size_t(p)].total_ms;
    }
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(sums[c], want[c], 1e-6) << columns[c] << ", step at " << first;
    remainder += std::abs(mj(r, "energy_mj"));
    const double untiled = 1.0 - rows_ms / step_ms;  // the step's time no row covers
    EXPECT_LT(std::abs(mj(r, "energy_mj")), (0.05 + untiled) * want[0]) << "the rows hold the energy of their time, "
                                                                        << "step at " << first;
    for (double& x : sums) x = 0;
    rows_ms = 0;
    first += V;
    ++steps;
  }
  EXPECT_EQ(first, int(l.result.tokens.size())) << "every step closed by its remainder";
  EXPECT_GT(steps, 0);
  EXPECT_GT(remainder, 0.0) << "refreshes and rounded-up bursts are priced per step, not per row";
}

TEST(LayerTable, TheEnergyOfAStepsRowsAndItsRemainderIsItsTokensEnergy) {
  expect_rows_add_up_to_the_tokens_energy(run_layered(Fidelity::kFast, 2));
  expect_rows_add_up_to_the_tokens_energy(run_layered(Fidelity::kFast, 1, "", "Prompt", 4));  // chunks of 4 and 3
  expect_rows_add_up_to_the_tokens_energy(run_layered(Fidelity::kFast, 2, "", "Hi", 1, {"host.walker=pl"}));
}

TEST(LayerTable, CycleAndFastFidelityGiveTheSameTable) {
  const Layered fast = run_layered(Fidelity::kFast, 1);
  const Layered cycle = run_layered(Fidelity::kCycle, 1);
  EXPECT_EQ(cycle.csv, fast.csv);
}

TEST(LayerTable, AnUnwritableFileIsRefusedBeforeTheRun) {
  const auto r = bitsim::testing::run_bitsim(
      "run --model synthetic:tiny --prompt Hi --tokens 1 --layers-csv /nonexistent/dir/layers.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("layers CSV file /nonexistent/dir/layers.csv"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("running on the simulated board"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bitsim::sim
