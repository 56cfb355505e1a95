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
                    int tokens_per_pass = 1) {
  BoardRunRequest r{RunRequest{}, board_params()};
  r.run.model = "synthetic:tiny";
  r.run.prompt = prompt;
  r.params.set("prefill.tokens_per_pass=" + std::to_string(tokens_per_pass), "test");
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
                        "cpu_bytes_written,evidence\n", 0),
            0u);
  const auto rows = parse(l.csv);
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
