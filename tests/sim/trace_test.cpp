// `bitsim run --trace FILE`: the Chrome trace (trace event JSON) of a run, checked against
// the format (required fields, per-track order, proper nesting), against the run's own
// simulated times, and across the two fidelities.
#include "sim/trace.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "sim/board_config.h"
#include "sim/board_run.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace bitsim::sim {
namespace {

fs::path temp_file(const std::string& tag) {
  static int counter = 0;
  return fs::temp_directory_path() /
         ("bitsim_trace_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + tag + ".json");
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  EXPECT_TRUE(f.good()) << p;
  return json::parse(f);
}

// ts/dur (microseconds, 6 decimals) back to integer picoseconds.
int64_t ps(const json& us) { return std::llround(us.get<double>() * 1e6); }

struct Traced {
  BoardRunResult result;
  json trace;
};

Traced run_traced(Fidelity fidelity, const std::string& prompt, int tokens) {
  BoardRunRequest r{RunRequest{}, board_params()};
  r.run.model = "synthetic:tiny";
  r.run.prompt = prompt;
  r.run.tokens = tokens;
  r.fidelity = fidelity;
  const fs::path file = temp_file(fidelity_name(fidelity));
  r.trace_file = file.string();
  Traced t;
  t.result = run_board(std::move(r));
  t.trace = read_json(file);
  fs::remove(file);
  return t;
}

const Traced& fast_run() {
  static const Traced t = run_traced(Fidelity::kFast, "Hi", 3);
  return t;
}

std::vector<json> complete_events(const json& trace) {
  std::vector<json> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") out.push_back(e);
  return out;
}

TEST(Trace, DocumentHasTheChromeTraceShape) {
  const json& j = fast_run().trace;
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("traceEvents"));
  ASSERT_TRUE(j["traceEvents"].is_array());
  EXPECT_EQ(j.value("displayTimeUnit", ""), "ns");
  ASSERT_TRUE(j.contains("otherData"));
  EXPECT_EQ(j["otherData"].value("fidelity", ""), "fast");
  EXPECT_EQ(j["otherData"].value("format", ""), "bitsim.trace/1");
  // Every track that carries events is named by a metadata event.
  std::set<std::pair<int, int>> named_threads;
  std::set<int> named_processes;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph")) << e;
    if (e["ph"] != "M") continue;
    ASSERT_TRUE(e.contains("name") && e.contains("pid") && e.contains("args")) << e;
    if (e["name"] == "process_name") named_processes.insert(e["pid"].get<int>());
    if (e["name"] == "thread_name") {
      ASSERT_TRUE(e["args"]["name"].is_string()) << e;
      named_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
    }
  }
  const auto events = complete_events(j);
  ASSERT_FALSE(events.empty());
  for (const auto& e : events) {
    for (const char* k : {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}) ASSERT_TRUE(e.contains(k)) << k << " in " << e;
    EXPECT_TRUE(e["name"].is_string() && e["cat"].is_string()) << e;
    ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number()) << e;
    EXPECT_GE(e["ts"].get<double>(), 0.0) << e;
    EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
    ASSERT_TRUE(e["args"].is_object()) << e;
    ASSERT_TRUE(e["args"].contains("token")) << e;
    EXPECT_GE(e["args"]["token"].get<int>(), 0) << e;
    const std::string cat = e["cat"];
    if (cat == "layer" || e["name"] == "attention" || e["name"] == "matmul qkv" || e["name"] == "matmul down") {
      EXPECT_TRUE(e["args"].contains("layer")) << e;
    }
    EXPECT_TRUE(named_processes.count(e["pid"].get<int>())) << e;
    EXPECT_TRUE(named_threads.count({e["pid"].get<int>(), e["tid"].get<int>()})) << e;
  }
}

TEST(Trace, TracksAreOrderedAndNestProperly) {
  std::map<std::pair<int, int>, std::vector<json>> tracks;
  for (const auto& e : complete_events(fast_run().trace)) tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(e);
  ASSERT_GE(tracks.size(), 1u + 4u + 8u);  // host program, 4 engine lanes, 8 DMA channels
  for (const auto& [track, evs] : tracks) {
    std::vector<std::pair<int64_t, const json*>> open;  // end, span
    int64_t last_ts = -1;
    for (const auto& e : evs) {
      const int64_t b = ps(e["ts"]), end = b + ps(e["dur"]);
      ASSERT_GE(b, last_ts) << "track " << track.first << "/" << track.second << ": ts goes back at " << e;
      last_ts = b;
      while (!open.empty() && open.back().first <= b) open.pop_back();
      if (!open.empty()) {
        // Overlaps the enclosing span: it must lie entirely inside it, in the same token
        // (and layer, when the parent is a layer).
        const json& parent = *open.back().second;
        ASSERT_LE(end, open.back().first) << e << " overlaps " << parent << " without nesting in it";
        EXPECT_EQ(e["args"]["token"], parent["args"]["token"]) << e << " in " << parent;
        if (parent["cat"] == "layer") {
          EXPECT_EQ(e["args"].value("layer", -1), parent["args"]["layer"].get<int>()) << e;
        }
      }
      open.push_back({end, &e});
    }
  }
}

TEST(Trace, PsLeafSpansAddUpToEachTokensSimulatedTime) {
  const Traced& t = fast_run();
  std::map<int, int64_t> leaf_ps, token_ps;
  std::map<int, int> token_ids;
  for (const auto& e : complete_events(t.trace)) {
    if (e["pid"] != trace::kPsPid) continue;
    const int tok = e["args"]["token"];
    if (e["cat"] == "cpu" || e["cat"] == "driver") leaf_ps[tok] += ps(e["dur"]);
    if (e["cat"] == "token") {
      token_ps[tok] = ps(e["dur"]);
      token_ids[tok] = e["args"]["token_id"];
    }
  }
  ASSERT_EQ(t.result.tokens.size(), 1u + 2u + 3u);  // BOS, "Hi", 3 generated
  ASSERT_EQ(leaf_ps.size(), t.result.tokens.size());
  for (const auto& rec : t.result.tokens) {
    const int64_t total = std::llround(rec.total_ms * 1e9);
    EXPECT_NEAR(double(leaf_ps[rec.index]), double(total), 1000.0) << "token " << rec.index;
    EXPECT_NEAR(double(token_ps[rec.index]), double(total), 1000.0) << "token " << rec.index;
    EXPECT_EQ(token_ids[rec.index], rec.token_id) << "token " << rec.index;
  }
}

TEST(Trace, EveryTokenHasBusySpansOnBothLanesOfBothEngines) {
  const Traced& t = fast_run();
  std::map<std::pair<int, int>, int> busy;  // (token, tid) -> spans
  std::map<int, int> driver_calls[2];       // token -> matmul / attention calls
  std::vector<json> drivers;
  for (const auto& e : complete_events(t.trace)) {
    const int tok = e["args"]["token"];
    if (e["cat"] == "engine") {
      EXPECT_EQ(e["pid"], trace::kPlPid);
      ++busy[{tok, e["tid"].get<int>()}];
    }
    if (e["cat"] == "driver") {
      ++driver_calls[e["name"] == "attention"][tok];
      drivers.push_back(e);
    }
  }
  for (const auto& rec : t.result.tokens) {
    for (int lane = 0; lane < 2; ++lane) {
      EXPECT_EQ((busy[{rec.index, trace::engine_tid(false, lane)}]), driver_calls[0][rec.index])
          << "token " << rec.index << " matmul lane " << lane;
      EXPECT_EQ((busy[{rec.index, trace::engine_tid(true, lane)}]), driver_calls[1][rec.index])
          << "token " << rec.index << " attention lane " << lane;
    }
    EXPECT_GT(driver_calls[0][rec.index], 0);
    EXPECT_GT(driver_calls[1][rec.index], 0);
  }
  // Each engine and DMA span lies inside the driver call it is attributed to.
  for (const auto& e : complete_events(t.trace)) {
    if (e["cat"] != "engine" && e["cat"] != "dma") continue;
    bool inside = false;
    for (const auto& d : drivers)
      if (d["args"]["token"] == e["args"]["token"] && d["args"]["group"] == e["args"]["group"] &&
          d["args"]["part"] == e["args"]["part"] && d["name"] == e["name"])
        inside = inside || (ps(d["ts"]) <= ps(e["ts"]) && ps(e["ts"]) + ps(e["dur"]) <= ps(d["ts"]) + ps(d["dur"]));
    EXPECT_TRUE(inside) << e;
  }
}

// The board power track: one "power W" and one "power by part W" sample at the start of
// each token, its energy in the run over its simulated time; the parts add up to the total.
TEST(Trace, ThePowerTrackHoldsEachTokensEnergyOverItsTime) {
  const Traced& t = fast_run();
  std::map<int64_t, json> total, parts;  // ts (ps) -> args
  bool named = false;
  for (const auto& e : t.trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("pid") == trace::kPowerPid && e.at("name") == "process_name")
      named = e.at("args").at("name") == "board power (simulated)";
    if (e.at("ph") != "C") continue;
    EXPECT_EQ(e.at("pid"), trace::kPowerPid) << e;
    (e.at("name") == "power W" ? total : parts)[ps(e.at("ts"))] = e.at("args");
  }
  EXPECT_TRUE(named);
  const auto& toks = t.result.tokens;
  ASSERT_EQ(total.size(), toks.size()) << "one sample per token (no prompt chunk at P = 1)";
  ASSERT_EQ(parts.size(), toks.size());
  std::map<int, int64_t> begin;  // position -> its token span's start
  for (const auto& e : complete_events(t.trace))
    if (e.at("cat") == "token") begin[e.at("args").at("token").get<int>()] = ps(e.at("ts"));
  for (const auto& tok : toks) {
    const int64_t at = begin.at(tok.index);
    ASSERT_TRUE(total.count(at)) << "token " << tok.index;
    const double want_w = tok.energy_mj * 1e-3 / (tok.total_ms * 1e-3);
    EXPECT_NEAR(total[at].at("total").get<double>(), want_w, 1e-9 * want_w) << "token " << tok.index;
    EXPECT_GT(want_w, 0.0);
    const json& p = parts[at];
    EXPECT_NEAR(p.at("dram").get<double>(), tok.dram_mj / tok.total_ms, 1e-9);
    EXPECT_NEAR(p.at("pl").get<double>(), tok.pl_mj / tok.total_ms, 1e-9);
    EXPECT_NEAR(p.at("dram").get<double>() + p.at("pl").get<double>() + p.at("ps").get<double>() +
                    p.at("other").get<double>(),
                want_w, 1e-9 * want_w);
  }
  EXPECT_EQ(t.trace.at("otherData").value("power", "").rfind("simulated", 0), 0u);
}

TEST(Trace, FastAndCycleFidelitiesGiveTheSameEvents) {
  const Traced cycle = run_traced(Fidelity::kCycle, "Hi", 3);
  const Traced& fast = fast_run();
  EXPECT_EQ(cycle.trace["otherData"].value("fidelity", ""), "cycle");
  const auto a = complete_events(fast.trace), b = complete_events(cycle.trace);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "event " << i;
  EXPECT_EQ(fast.trace["traceEvents"], cycle.trace["traceEvents"]);
}

TEST(Trace, UnwritablePathIsRefusedBeforeTheRun) {
  BoardRunRequest r{RunRequest{}, board_params()};
  r.run.model = "synthetic:tiny";
  r.run.prompt = "Hi";
  r.run.tokens = 1;
  r.trace_file = "/nonexistent-dir/sub/trace.json";
  EXPECT_THROW(run_board(std::move(r)), Error);
}

int run_command(const std::string& args, std::string* err) {
  const fs::path err_file = temp_file("stderr");
  // The build tree's start-up cache, never the user's.
  const std::string cmd = std::string("BITSIM_CACHE_DIR=") + BITSIM_TEST_CACHE_DIR + " " + BITSIM_BINARY + " " + args +
                          " >/dev/null 2>" + err_file.string();
  const int status = std::system(cmd.c_str());
  std::ifstream f(err_file);
  err->assign(std::istreambuf_iterator<char>(f), {});
  fs::remove(err_file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Trace, CommandLineRunWritesTheTrace) {
  const fs::path file = temp_file("cli");
  std::string err;
  const int code = run_command("run --model synthetic:tiny --prompt hi --tokens 2 --quiet --trace " + file.string(), &err);
  ASSERT_EQ(code, 0) << err;
  ASSERT_TRUE(fs::exists(file));
  const json j = read_json(file);
  fs::remove(file);
  const auto events = complete_events(j);
  std::set<int> tokens;
  for (const auto& e : events)
    if (e["cat"] == "token") tokens.insert(e["args"]["token"].get<int>());
  EXPECT_EQ(tokens.size(), 1u + 2u + 2u);  // BOS, "hi", 2 generated

  std::string err2;
  EXPECT_EQ(run_command("run --model synthetic:tiny --prompt hi --tokens 1 --quiet --trace /nonexistent-dir/t.json", &err2), 2);
  EXPECT_NE(err2.find("/nonexistent-dir/t.json"), std::string::npos) << err2;
}

}  // namespace
}  // namespace bitsim::sim
