#include "study/bench.h"

#include "sim/fast_matvec.h"

#include "study/board_figures.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <csignal>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <limits>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_io.h"
#include "base/stop_signal.h"
#include "model/tokenizer.h"
#include "sim/board_run.h"
#include "sim/cache_store.h"
#include "sim/energy_account.h"
#include "host/memory_map.h"
#include "study/calibrate.h"
#include "sim/startup.h"
#include "sim/simulation.h"
#include "study/sweep.h"

namespace bitsim::study {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double sum_wall(const std::vector<TimedToken>& v) {
  double s = 0;
  for (const auto& t : v) s += t.wall_s;
  return s;
}

// "T=a..b" or "T=a" (T: the context length, position + 1).
std::string t_range(int a, int b) { return a == b ? fmt::format("T={}", a) : fmt::format("T={}..{}", a, b); }

BenchFigure figure(std::string name, std::string unit, double value, double goal, bool higher,
                   std::string goal_text, std::string evidence, std::string how) {
  BenchFigure f;
  f.name = std::move(name);
  f.unit = std::move(unit);
  f.value = value;
  f.goal = goal;
  f.higher_is_better = higher;
  f.met = higher ? value >= goal : value <= goal;
  f.goal_text = std::move(goal_text);
  f.evidence = std::move(evidence);
  f.how = std::move(how);
  return f;
}
}  // namespace

// ---- FastTokenRunner ---------------------------------------------------------------------

struct FastTokenRunner::Impl {
  sim::SimConfig cfg;
  std::unique_ptr<sim::Simulation> sim;
  double setup_s = 0;
};

FastTokenRunner::FastTokenRunner(const sim::SimConfig& config, const model::TernaryModel& model,
                                 const model::KvScales& scales, int threads)
    : impl_(std::make_unique<Impl>()) {
  const auto t0 = Clock::now();
  impl_->cfg = config;
  impl_->sim = sim::make_simulation(impl_->cfg, model, scales, sim::SimulationOptions(sim::Fidelity::kFast, threads));
  impl_->sim->loop().load_weights(threads);
  impl_->sim->run([](host::TokenLoop& loop) { loop.init(); });
  impl_->setup_s = seconds_since(t0);
}

FastTokenRunner::~FastTokenRunner() = default;

TimedToken FastTokenRunner::step(int token, int position) {
  TimedToken r;
  r.position = position;
  impl_->sim->run([&](host::TokenLoop& loop) {
    const auto t0 = Clock::now();
    loop.set_position(position);
    loop.step(token, &r.timing);
    r.wall_s = seconds_since(t0);
  });
  return r;
}

double FastTokenRunner::setup_s() const { return impl_->setup_s; }
hw::FastBoardStats FastTokenRunner::stats() const { return impl_->sim->fast_stats(); }

// ---- Cycle fidelity ----------------------------------------------------------------------

std::vector<TimedToken> cycle_tokens_timed(const sim::SimConfig& cfg, const model::TernaryModel& m,
                                           const model::KvScales& scales, const std::vector<int>& tokens) {
  std::vector<TimedToken> out;
  const auto sim = sim::make_simulation(cfg, m, scales, sim::SimulationOptions(sim::Fidelity::kCycle));
  sim->loop().load_weights();
  sim->run([&](host::TokenLoop& loop) {
    loop.init();
    for (int t : tokens) {
      TimedToken r;
      r.position = loop.position();
      const auto t0 = Clock::now();
      loop.step(t, &r.timing);
      r.wall_s = seconds_since(t0);
      out.push_back(r);
    }
  });
  return out;
}

std::vector<int> bench_token_ids(const std::vector<int>& calibration, int n) {
  if (calibration.empty()) throw Error("bench: no calibration tokens");
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(calibration[size_t(i) % calibration.size()]);
  return ids;
}

// ---- The bench -----------------------------------------------------------------------------

BenchOptions effective_bench_options(const BenchOptions& in) {
  BenchOptions o = in;
  if (o.quick) {
    o.model = "synthetic:tiny";
    o.tokens = std::min(o.tokens, 4);
    o.cycle_tokens = 1;
    o.memory_tokens = std::min(o.memory_tokens, 16);
    o.run_tokens = std::min(o.run_tokens, 8);
    o.sweep_points = std::min(o.sweep_points, 2);
    o.prefill_prompt_tokens = std::min(o.prefill_prompt_tokens, 24);
    o.ddr3_tokens = std::min(o.ddr3_tokens, 3);
  }
  if (o.repeat < 1 || o.repeat > 20) throw Error(fmt::format("bench: repeat {}, expected 1..20", o.repeat));
  if (o.sweep_points < 1 || o.sweep_points > 10000)
    throw Error(fmt::format("bench: {} sweep points, expected 1..10000", o.sweep_points));
  if (o.tokens < 2 || o.tokens > golden::kMaxContext / 2)
    throw Error(fmt::format("bench: {} tokens per window, expected 2..{}", o.tokens, golden::kMaxContext / 2));
  if (o.cycle_tokens < 1 || o.cycle_tokens > o.tokens)
    throw Error(fmt::format("bench: {} cycle-fidelity tokens, expected 1..{} (the tokens per window)", o.cycle_tokens,
                            o.tokens));
  if (o.memory_tokens < 3 || o.memory_tokens > golden::kMaxContext)
    throw Error(fmt::format("bench: {} tokens of the memory run, expected 3..{}", o.memory_tokens, golden::kMaxContext));
  if (o.run_tokens < 1 || o.run_tokens > golden::kMaxContext - 2)
    throw Error(fmt::format("bench: {} tokens of the whole run, expected 1..{}", o.run_tokens, golden::kMaxContext - 2));
  if (o.threads < 1) throw Error(fmt::format("bench: {} host threads, expected at least 1", o.threads));
  if (!o.only.empty() && o.only != "energy")
    throw Error(fmt::format("bench: --only {}: the figure groups are: energy", o.only));
  if (o.prefill_prompt_tokens < 2 || o.prefill_prompt_tokens > golden::kMaxContext - 1)
    throw Error(fmt::format("bench: a prefill prompt of {} tokens, expected 2..{}", o.prefill_prompt_tokens,
                            golden::kMaxContext - 1));
  if (o.prefill_tokens_per_pass < 2 || o.prefill_tokens_per_pass > 64)
    throw Error(fmt::format("bench: prefill at P = {}, expected 2..64 (prefill.tokens_per_pass)",
                            o.prefill_tokens_per_pass));
  if (o.ddr3_tokens < 1 || o.ddr3_tokens > 64)
    throw Error(fmt::format("bench: {} tokens of the approximate DDR3 runs, expected 1..64", o.ddr3_tokens));
  if (!o.run_command || !o.run_text) throw Error("bench: the command line of the process figures is not set");
  return o;
}

namespace {
using Status = std::function<void(const std::string&)>;
namespace fs = std::filesystem;

// The samples' median, min and max into a figure.
BenchFigure figure_of(std::string name, std::string unit, std::vector<double> samples, double goal, bool higher,
                      std::string goal_text, std::string evidence, std::string how) {
  if (samples.empty()) throw Error("bench: no samples for " + name);
  BenchFigure f = figure(std::move(name), std::move(unit), median(samples), goal, higher, std::move(goal_text),
                         std::move(evidence), std::move(how));
  f.min = *std::min_element(samples.begin(), samples.end());
  f.max = *std::max_element(samples.begin(), samples.end());
  f.samples = std::move(samples);
  return f;
}

// "1.23 / 1.25 / 1.31" (in the order measured).
std::string list(const std::vector<double>& v, const char* spec = "{:.2f}") {
  std::string s;
  for (double x : v) s += (s.empty() ? "" : " / ") + fmt::format(fmt::runtime(spec), x);
  return s;
}

// A temporary folder for the bench's start-up caches and the processes' output, removed
// when the bench ends (also on an error or a stop).
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "bitsim-bench-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw Error("bench: cannot create a temporary folder under " +
                                               fs::temp_directory_path().string());
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A run of `tokens` tokens of `model` (in the texts: an empty model is left out).
BenchRunProcess process(std::string model, int tokens, bool check = true, std::string prompt = "A") {
  BenchRunProcess p;
  p.model = std::move(model);
  p.tokens = tokens;
  p.check = check;
  p.prompt = std::move(prompt);
  return p;
}
// An unchecked run of `tokens` tokens on the bench's model (in the texts: without it).
BenchRunProcess no_check(int tokens, std::string prompt = "A") { return process("", tokens, false, std::move(prompt)); }

// One `bitsim run` process (JSON out, quiet) with its own start-up cache folder.
struct RunProcess {
  ProcessRun proc;
  double first_token_s = 0, load_s = 0, calibration_s = 0;
  bool model_cached = false, scales_cached = false;
  int steps = 0;
  std::optional<bool> logits_equal;
};

RunProcess bitsim_run(const BenchOptions& o, const fs::path& cache_dir, const fs::path& scratch, int tokens,
                      bool check) {
  RunProcess r;
  BenchRunProcess run = process(o.model, tokens, check);
  run.threads = o.threads;
  run.cache_dir = cache_dir.string();
  r.proc = run_process(o.run_command(run), scratch);
  if (r.proc.exit_code != 0)
    throw Error(fmt::format("bench: `{}` exited with {}: {}", o.run_text(run), r.proc.exit_code,
                            r.proc.err.substr(0, 2000)));
  try {
    const nlohmann::json j = nlohmann::json::parse(r.proc.out);
    const auto& s = j.at("summary");
    r.first_token_s = s.at("first_token_s").get<double>();
    r.load_s = s.at("load_s").get<double>();
    r.calibration_s = s.at("calibration_s").get<double>();
    r.model_cached = s.at("model_cached").get<bool>();
    r.scales_cached = s.at("scales_cached").get<bool>();
    r.steps = s.at("tokens").get<int>();
    if (check) r.logits_equal = s.at("logits_equal").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("bench: the JSON of `bitsim run` could not be read: {}", e.what()));
  }
  if (r.logits_equal && !*r.logits_equal) throw Error("bench: a `bitsim run` process's golden check failed");
  return r;
}

// 1. The processes: cold and warm time to the first token, the warm 1-token process, the
//    whole warm run, the peak memory. The warm cache folder is left for the in-process part.
struct ProcessFigures {
  std::vector<RunProcess> cold, warm, whole, memory;
};

ProcessFigures process_runs(const BenchOptions& o, const fs::path& scratch, const fs::path& warm_cache,
                            const Status& status) {
  ProcessFigures p;
  for (int i = 0; i < o.repeat; ++i) {
    status(fmt::format("[1/6] cold: `{}` with an empty start-up cache ({} of {}) ...", o.run_text(process(o.model, 1)),
                       i + 1, o.repeat));
    const fs::path dir = i + 1 == o.repeat ? warm_cache : scratch / fmt::format("cold-cache-{}", i);
    p.cold.push_back(bitsim_run(o, dir, scratch, 1, true));
    if (dir != warm_cache) fs::remove_all(dir);
  }
  for (int i = 0; i < o.repeat; ++i) {
    status(fmt::format("[2/6] warm: the same process again ({} of {}) ...", i + 1, o.repeat));
    p.warm.push_back(bitsim_run(o, warm_cache, scratch, 1, true));
  }
  for (int i = 0; i < o.repeat; ++i) {
    status(fmt::format("[3/6] warm: `{}` ({} of {}) ...", o.run_text(no_check(o.run_tokens)), i + 1, o.repeat));
    p.whole.push_back(bitsim_run(o, warm_cache, scratch, o.run_tokens, false));
  }
  for (int i = 0; i < o.repeat; ++i) {
    status(fmt::format("[4/6] warm: `{}` for the peak memory ({} of {}) ...",
                       o.run_text(no_check(o.memory_tokens - 2)), i + 1, o.repeat));
    p.memory.push_back(bitsim_run(o, warm_cache, scratch, o.memory_tokens - 2, false));
  }
  return p;
}

// 2. run_board as `bitsim run --prompt A` does it (fast fidelity, golden check on every
//    token, the warm start-up cache): the checked token rate, steps 2.. of each run.
struct CheckedRuns {
  std::vector<double> rate;
  int equal = 0, steps = 0;
};

CheckedRuns checked_runs(const BenchOptions& o, const fs::path& warm_cache, const Status& status) {
  CheckedRuns c;
  for (int rep = 0; rep < o.repeat; ++rep) {
    status(fmt::format("[5/6] sim::run_board as `{}` (fast, golden check on every token; {} of {}) ...",
                       o.run_text(process(o.model, o.tokens - 1)), rep + 1, o.repeat));
    sim::BoardRunRequest req{.run = sim::RunRequest{}, .params = o.params};
    req.run.model = o.model;
    req.run.prompt = "A";
    req.run.tokens = o.tokens - 1;  // BOS + "A" + N - 1 generated = N + 1 steps with the byte tokenizer
    req.run.threads = o.threads;
    req.run.cache.enabled = true;
    req.run.cache.dir = warm_cache;
    const sim::BoardRunResult run = sim::run_board(req, {});
    if (!run.mismatch.empty()) throw Error("bench: the golden check failed: " + run.mismatch);
    double wall = 0;
    int n = 0;
    for (size_t i = 0; i < run.tokens.size(); ++i) {
      c.equal += run.tokens[i].logits_equal.value_or(false);
      ++c.steps;
      if (i == 0) continue;  // the first step: cold caches, in the time to the first token
      wall += run.tokens[i].wall_ms / 1e3;
      ++n;
    }
    c.rate.push_back(wall > 0 ? n / wall : 0.0);
  }
  return c;
}

// 2b. Prefill (docs/prefill.md): the same prompt at P = 1 and at P = prefill_tokens_per_pass
//     through run_board (fast fidelity, the warm start-up cache), with the golden check on
//     every computed logits vector and without it; the prompt's wall time is the sum of its
//     positions' (the chunks' walls, the check included), load and start-up excluded.
struct PrefillRuns {
  std::vector<double> speedup, speedup_nocheck;  // P = 1's wall / P's, per repetition
  std::vector<double> p1_s, pp_s, p1_nocheck_s, pp_nocheck_s;
  int prompt_tokens = 0, equal = 0, checked = 0;
};

PrefillRuns prefill_runs(const BenchOptions& o, const fs::path& warm_cache, const Status& status) {
  PrefillRuns r;
  // A prompt of N - 1 bytes: N tokens with BOS under the byte tokenizer of the synthetic models.
  std::string prompt;
  for (int i = 0; i + 1 < o.prefill_prompt_tokens; ++i) prompt += char('a' + i % 26);
  const auto prompt_wall = [&](int P, bool check, int rep) {
    status(fmt::format("[5/6] prefill: sim::run_board {} with a {}-token prompt at P = {}{} ({} of {}) ...", o.model,
                       o.prefill_prompt_tokens, P, check ? ", golden check" : ", no check", rep + 1, o.repeat));
    sim::BoardRunRequest req{.run = sim::RunRequest{}, .params = o.params};
    req.params.set(fmt::format("prefill.tokens_per_pass={}", P), "bench");
    req.run.model = o.model;
    req.run.prompt = prompt;
    req.run.tokens = 1;
    req.run.threads = o.threads;
    req.run.cache.enabled = true;
    req.run.cache.dir = warm_cache;
    req.check = check;
    const sim::BoardRunResult run = sim::run_board(req, {});
    if (!run.mismatch.empty()) throw Error("bench: the golden check failed: " + run.mismatch);
    r.prompt_tokens = run.prompt_tokens;
    double wall = 0;
    for (const auto& t : run.tokens) {
      if (t.generated) continue;
      wall += t.wall_ms / 1e3;
      if (check && t.logits_equal) {
        ++r.checked;
        r.equal += *t.logits_equal;
      }
    }
    return wall;
  };
  for (int rep = 0; rep < o.repeat; ++rep) {
    r.p1_s.push_back(prompt_wall(1, true, rep));
    r.pp_s.push_back(prompt_wall(o.prefill_tokens_per_pass, true, rep));
    r.p1_nocheck_s.push_back(prompt_wall(1, false, rep));
    r.pp_nocheck_s.push_back(prompt_wall(o.prefill_tokens_per_pass, false, rep));
    r.speedup.push_back(r.pp_s.back() > 0 ? r.p1_s.back() / r.pp_s.back() : 0.0);
    r.speedup_nocheck.push_back(r.pp_nocheck_s.back() > 0 ? r.p1_nocheck_s.back() / r.pp_nocheck_s.back() : 0.0);
  }
  return r;
}

std::string prefill_text(const BenchOptions& o) {
  BenchRunProcess p = process("", 1, true, "TEXT");
  p.sets = {"prefill.tokens_per_pass=P"};
  return o.run_text(p);
}

void prefill_figure(std::vector<BenchFigure>& f, const BenchOptions& o, const PrefillRuns& r) {
  const int P = o.prefill_tokens_per_pass;
  f.push_back(figure_of(
      fmt::format("prefill speed-up, a {}-token prompt at P = {} over P = 1, golden check", r.prompt_tokens, P), "x",
      r.speedup, 3, true, ">= 3x", "measured (this host); the tokens are simulated",
      fmt::format("run_board as `{}` (fast "
                  "fidelity, warm start-up cache), {} runs of each P; value = the prompt's wall at P = 1 / at P = {} "
                  "(each the sum of its positions' walls incl. the check): P = 1 {} s, P = {} {} s; {} of {} "
                  "computed logits bit-identical. Without the check: P = 1 {} s, P = {} {} s, speed-up {} x",
                  prefill_text(o), o.repeat, P,
                  list(r.p1_s), P, list(r.pp_s), r.equal, r.checked, list(r.p1_nocheck_s), P,
                  list(r.pp_nocheck_s), list(r.speedup_nocheck))));
}

// The model and K/V scales for the in-process timing runs, from the warm start-up cache.
struct TimingModel {
  model::TernaryModel model;
  model::KvScales scales;
  std::vector<int> ids;
  double load_s = 0;
};

TimingModel load_timing_model(const BenchOptions& o, const fs::path& warm_cache, const Status& status) {
  status(fmt::format("[6/6] loading {} from the start-up cache for the timing runs ...", o.model));
  const auto t0 = Clock::now();
  auto source = model::open_model_source(o.model);
  const model::ModelConfig mc = source->config();
  auto tokenizer = model::select_tokenizer(std::nullopt, model::model_folder(o.model), mc.vocab_size);
  const std::vector<int> calib = golden::calibration_tokens(*tokenizer, mc.bos_token_id);
  sim::CacheSettings cs;
  cs.enabled = true;
  cs.dir = warm_cache;
  const auto store = sim::CacheStore::open(cs, {});
  sim::PreparedModel p = sim::prepare_model(*source, calib, o.threads, store.get());
  TimingModel t{std::move(p.model), std::move(p.scales), {}, 0};
  t.load_s = seconds_since(t0);
  t.ids = bench_token_ids(calib, golden::kMaxContext);
  return t;
}

// 3. Fast fidelity, functional, no check: one board, `repeat` passes over positions 0..N-1
//    and 512-N..511. The first pass also clocks each new batch shape once.
struct FastWindows {
  std::vector<double> low_rate, high_rate;
  std::vector<double> energy_pct;      // per pass: the energy accounting's wall / the tokens' wall, %
  double energy_us_per_token = 0;      // the last pass's accounting wall per token
  std::vector<TimedToken> low;  // the last pass's low window (the speed-up's fast side)
  double setup_s = 0, cold_s = 0;
  size_t oracle_runs_first = 0, oracle_runs_later = 0;
};

// The wall of pricing the tokens' energy as a run does (sim::token_energy, one call a token;
// run_chunk's fill_costs), s. The sum is kept so that the calls cannot be left out.
double energy_accounting_s(const sim::EnergyAccount& account, const std::vector<TimedToken>& low,
                           const std::vector<TimedToken>& high) {
  const auto t0 = Clock::now();
  double mj = 0;
  for (const auto* window : {&low, &high})
    for (const TimedToken& t : *window) mj += sim::token_energy(account, t.timing).total();
  const double s = seconds_since(t0);
  if (!(mj > 0)) throw Error("bench: the tokens' energy is not above 0");
  return s;
}

FastWindows fast_windows(const sim::SimConfig& cfg, const TimingModel& t, const BenchOptions& o, const Status& status) {
  const int N = o.tokens;
  const sim::EnergyAccount account =
      sim::energy_account(cfg, t.model.config, std::max(1, host::kv_context_limit(t.model.config, cfg.memory)));
  status(fmt::format("[6/6] fast fidelity, {} passes of {} + {} tokens at T from 1 and from {} (no check) ...",
                     o.repeat, N, N, golden::kMaxContext - N + 1));
  FastWindows w;
  FastTokenRunner fast(cfg, t.model, t.scales, o.threads);
  w.setup_s = fast.setup_s();
  w.cold_s = fast.step(t.ids[0], 0).wall_s;  // warm-up: decoded weights
  const int p0 = golden::kMaxContext - N;
  for (int rep = 0; rep < o.repeat; ++rep) {
    const size_t oracle0 = fast.stats().oracle_runs;
    std::vector<TimedToken> low, high;
    for (int i = 0; i < N; ++i) low.push_back(fast.step(t.ids[size_t(i)], i));
    for (int i = 0; i < N; ++i) high.push_back(fast.step(t.ids[size_t(p0 + i)], p0 + i));
    w.low_rate.push_back(N / sum_wall(low));
    w.high_rate.push_back(N / sum_wall(high));
    const double accounting_s = energy_accounting_s(account, low, high);
    w.energy_pct.push_back(100.0 * accounting_s / (sum_wall(low) + sum_wall(high)));
    w.energy_us_per_token = accounting_s * 1e6 / (2 * N);
    (rep == 0 ? w.oracle_runs_first : w.oracle_runs_later) += fast.stats().oracle_runs - oracle0;
    w.low = std::move(low);
  }
  return w;
}

// 4. Cycle fidelity (the clocked SystemC board), `repeat` runs of positions 0..cycle_tokens-1,
//    against the same positions of the fast board's last pass.
struct CycleRuns {
  std::vector<double> rate, speedup;
  double sim_ps = 0, cycles = 0, fast_per_token = 0;
  bool same_sim = true;
};

CycleRuns cycle_runs(const sim::SimConfig& cfg, const TimingModel& t, const BenchOptions& o,
                     const std::vector<TimedToken>& fast, const Status& status) {
  CycleRuns c;
  for (int i = 0; i < o.cycle_tokens; ++i) c.fast_per_token += fast[size_t(i)].wall_s / o.cycle_tokens;
  const std::vector<int> cids(t.ids.begin(), t.ids.begin() + o.cycle_tokens);
  for (int rep = 0; rep < o.repeat; ++rep) {
    status(fmt::format("[6/6] cycle fidelity, {} token(s) at T from 1 ({} of {}) ...", o.cycle_tokens, rep + 1,
                       o.repeat));
    const std::vector<TimedToken> cyc = cycle_tokens_timed(cfg, t.model, t.scales, cids);
    double wall = 0, sim_ps = 0;
    for (int i = 0; i < o.cycle_tokens; ++i) {
      wall += cyc[size_t(i)].wall_s;
      sim_ps += double(cyc[size_t(i)].timing.total_ps());
      c.same_sim = c.same_sim && cyc[size_t(i)].timing.total_ps() == fast[size_t(i)].timing.total_ps();
    }
    c.sim_ps = sim_ps;
    c.cycles = sim_ps * 1e-12 * cfg.board.clock.mhz * 1e6;
    c.rate.push_back(wall > 0 ? c.cycles / wall : 0.0);
    c.speedup.push_back(c.fast_per_token > 0 ? wall / o.cycle_tokens / c.fast_per_token : 0.0);
  }
  return c;
}

// 5. Timing-only sweep points per wall second: a grid over the PL clock run point after point
//    in this one process (no process per point, no functional check: what each worker of
//    `bitsim sweep --jobs N` and each campaign shard does), at the sweep's defaults.
BenchFigure sweep_figure(const BenchOptions& o, const Status& status) {
  SweepOptions so;
  so.check_model.clear();
  so.jobs = 1;
  SweepAxis axis{"clock.mhz", {}};
  for (int i = 0; i < o.sweep_points; ++i)
    axis.values.push_back(fmt::format("{}", 100 + 150 * i / std::max(1, o.sweep_points - 1)));
  so.grid.push_back(axis);
  std::vector<double> rate, wall;
  for (int rep = 0; rep < o.repeat; ++rep) {
    status(fmt::format("[6/6] sweep: {} timing-only points in this process ({} of {}) ...", o.sweep_points, rep + 1,
                       o.repeat));
    const SweepResult r = run_sweep(o.params, so);
    rate.push_back(double(r.points.size()) / r.wall_s);
    wall.push_back(r.wall_s);
  }
  constexpr double kGoalPoints = 10000, kGoalHours = 2, kGoalJobs = 2;  // a 10,000-point grid on this 2-core machine
  const double goal = kGoalPoints / (kGoalHours * 3600.0) / kGoalJobs;
  const double med = median(rate);
  return figure_of("timing-only sweep points per wall second, one process", "points/s", rate, goal, true,
                   fmt::format(">= {:.2f} (10,000 points in {:.0f} h in {:.0f} processes)", goal, kGoalHours, kGoalJobs),
                   "measured (this host); the points are simulated",
                   fmt::format("{} points (clock.mhz 100..250, the bitnet-large shape, {} tokens at T={}), one after "
                               "the other in one process, {} times: {} s; 10,000 points at the median: {:.1f} h in one "
                               "process, {:.1f} h in 2 processes",
                               o.sweep_points, so.tokens, so.context, o.repeat, list(wall), kGoalPoints / med / 3600.0,
                               kGoalPoints / med / 3600.0 / kGoalJobs));
}

// 6. Approximate DDR3 reuse (ddr3.fast_reuse, docs/ddr3.md): run_board, fast, no check, the
//    prompt "A" and ddr3_tokens tokens under ddr.model = ddr3, exact and then approximate;
//    each repetition in a start-up cache folder of its own, so that no record of an earlier
//    repetition is found (the approximate run finds the model the exact one stored, and no
//    timing record: its keys are marked). Its speed-up is over the token steps after the
//    first (the first clocks every batch in both modes); its error is each token's simulated
//    time (and energy) against the exact run's.
struct Ddr3ReuseRuns {
  std::vector<double> speedup, worst_pct, mean_pct, energy_worst_pct;
  std::vector<double> exact_s, approx_s, first_exact_s, first_approx_s;
  int steps = 0;
};

Ddr3ReuseRuns ddr3_reuse_runs(const BenchOptions& o, const fs::path& scratch, const Status& status) {
  Ddr3ReuseRuns r;
  for (int rep = 0; rep < o.repeat; ++rep) {
    const fs::path dir = scratch / fmt::format("ddr3-cache-{}", rep);
    auto run = [&](bool approximate) {
      status(fmt::format("[6/6] ddr3: sim::run_board {} under ddr.model = ddr3, {} reuse ({} of {}) ...", o.model,
                         approximate ? "approximate" : "exact", rep + 1, o.repeat));
      sim::BoardRunRequest req{.run = sim::RunRequest{}, .params = o.params};
      req.params.set("ddr.model=ddr3", "bench");
      req.params.set(fmt::format("ddr3.fast_reuse={}", approximate ? "approximate" : "exact"), "bench");
      req.run.model = o.model;
      req.run.prompt = "A";
      req.run.tokens = o.ddr3_tokens;
      req.run.threads = o.threads;
      req.run.cache.enabled = true;
      req.run.cache.dir = dir;
      req.check = false;
      return sim::run_board(req, {});
    };
    const sim::BoardRunResult exact = run(false), approx = run(true);
    if (exact.tokens.size() != approx.tokens.size() || exact.tokens.size() < 2 || !approx.approximate)
      throw Error("bench: the exact and approximate DDR3 runs differ in their token steps");
    double ex = 0, ap = 0, worst = 0, sum = 0, energy_worst = 0;
    for (size_t i = 0; i < exact.tokens.size(); ++i) {
      const sim::TokenRecord &e = exact.tokens[i], &a = approx.tokens[i];
      if (i > 0) {
        ex += e.wall_ms / 1e3;
        ap += a.wall_ms / 1e3;
      }
      const double err = 100 * std::abs(a.total_ms / e.total_ms - 1);
      worst = std::max(worst, err);
      sum += err;
      energy_worst = std::max(energy_worst, 100 * std::abs(a.energy_mj / e.energy_mj - 1));
    }
    r.steps = int(exact.tokens.size());
    r.first_exact_s.push_back(exact.tokens[0].wall_ms / 1e3);
    r.first_approx_s.push_back(approx.tokens[0].wall_ms / 1e3);
    r.exact_s.push_back(ex);
    r.approx_s.push_back(ap);
    r.speedup.push_back(ap > 0 ? ex / ap : 0.0);
    r.worst_pct.push_back(worst);
    r.mean_pct.push_back(sum / double(exact.tokens.size()));
    r.energy_worst_pct.push_back(energy_worst);
  }
  return r;
}

void ddr3_reuse_figures(std::vector<BenchFigure>& f, const BenchOptions& o, const Ddr3ReuseRuns& r) {
  const int later = r.steps - 1;
  std::vector<double> exact_rate, approx_rate;
  for (size_t i = 0; i < r.exact_s.size(); ++i) {
    exact_rate.push_back(r.exact_s[i] > 0 ? later / r.exact_s[i] : 0.0);
    approx_rate.push_back(r.approx_s[i] > 0 ? later / r.approx_s[i] : 0.0);
  }
  const std::string runs = fmt::format("sim::run_board {} --prompt A --tokens {} --no-check under ddr.model = ddr3, "
                                       "exact, then ddr3.fast_reuse = approximate ({} token steps)",
                                       o.model, o.ddr3_tokens, r.steps);
  f.push_back(figure_of(
      "approximate DDR3 reuse: wall speed-up over exact after the first token step (fast, no check)", "x", r.speedup,
      10, true, ">= 10x (the approximate mode's reason to exist; it meets none of the exact goals)",
      "measured (this host); the tokens are simulated",
      fmt::format("{}: the {} steps after the first took {} s exact ({} simulated tok/s) and {} s approximate ({} "
                  "tok/s); the first step clocks every batch in both: {} s / {} s",
                  runs, later, list(r.exact_s), list(exact_rate), list(r.approx_s, "{:.3f}"), list(approx_rate),
                  list(r.first_exact_s), list(r.first_approx_s))));
  f.push_back(figure_of("approximate DDR3 reuse: worst token time error against exact", "%", r.worst_pct, 1.0, false,
                        "<= 1% on every token step",
                        "measured (this host): the approximate run's simulated times against the exact run's",
                        fmt::format("{}: |approximate / exact - 1| of each step's simulated time, the worst of the "
                                    "run: {} %; the mean: {} %; the worst energy: {} %",
                                    runs, list(r.worst_pct, "{:.3f}"), list(r.mean_pct, "{:.3f}"),
                                    list(r.energy_worst_pct, "{:.3f}"))));
}

template <class F>
std::vector<double> each(const std::vector<RunProcess>& v, F f) {
  std::vector<double> out;
  for (const auto& r : v) out.push_back(f(r));
  return out;
}

int count_cached(const std::vector<RunProcess>& v) {
  int n = 0;
  for (const auto& r : v) n += r.model_cached && r.scales_cached;
  return n;
}

// The figures of the processes.
void process_figures(std::vector<BenchFigure>& f, const BenchOptions& o, const ProcessFigures& p) {
  const auto ttft = [](const RunProcess& r) { return r.first_token_s; };
  const auto wall = [](const RunProcess& r) { return r.proc.wall_s; };
  f.push_back(figure_of(
      fmt::format("time to the first token, cold (empty start-up cache), {}", o.model), "s", each(p.cold, ttft), 8,
      false, "<= 8 s", "measured (this host)",
      fmt::format("`{}` as a process, each with a new empty start-up cache folder; "
                  "value = the run's summary.first_token_s (its start to the first generated token's step done: "
                  "BOS, the prompt, the first generated; {} checked steps); load {} s, K/V calibration {} s; "
                  "whole processes {} s; model and K/V scales from the cache in {} of {}",
                  o.run_text(process(o.model, 1)), p.cold.front().steps, list(each(p.cold, [](const RunProcess& r) { return r.load_s; })),
                  list(each(p.cold, [](const RunProcess& r) { return r.calibration_s; })), list(each(p.cold, wall)),
                  count_cached(p.cold), p.cold.size())));
  f.push_back(figure_of(
      fmt::format("time to the first token, warm (the same model and config seen before), {}", o.model), "s",
      each(p.warm, ttft), 2, false, "<= 2 s", "measured (this host)",
      fmt::format("the same process again with the cache folder the last cold run filled; value = summary.first_token_s; "
                  "load {} s, K/V calibration {} s; model and K/V scales from the cache in {} of {}",
                  list(each(p.warm, [](const RunProcess& r) { return r.load_s; })),
                  list(each(p.warm, [](const RunProcess& r) { return r.calibration_s; })), count_cached(p.warm),
                  p.warm.size())));
  f.push_back(figure_of(
      "a 1-token `bitsim run` as a process, second time", "s", each(p.warm, wall), 2, false, "<= 2 s",
      "measured (this host)",
      fmt::format("the warm runs above, each process timed from spawn to exit (exec, start-up, {} checked steps, the "
                  "JSON report, exit)", p.warm.front().steps)));
  f.push_back(figure_of(
      fmt::format("a whole {}-token `{}`, start-up included, warm", o.run_tokens, o.run_text(no_check(0, ""))), "tok/s",
      each(p.whole, [&](const RunProcess& r) { return o.run_tokens / r.proc.wall_s; }), 15, true, ">= 15 tok/s",
      "measured (this host); the tokens are simulated",
      fmt::format("`{}` as a process with the warm cache ({} steps); value = "
                  "generated tokens / the process's wall from spawn to exit ({} s)",
                  o.run_text(no_check(o.run_tokens)), p.whole.front().steps, list(each(p.whole, wall)))));
  f.push_back(figure_of(
      fmt::format("peak resident memory, {}, {} tokens", o.model, o.memory_tokens), "GB",
      each(p.memory, [](const RunProcess& r) { return r.proc.maxrss_bytes / 1e9; }), 1.5, false, "<= 1.5 GB",
      "measured (this host)",
      fmt::format("`{}` as a process with the warm cache ({} steps: T = 1..{}); "
                  "value = wait4's ru_maxrss of the process (GB = 1e9 bytes); its wall {} s",
                  o.run_text(no_check(o.memory_tokens - 2)), p.memory.front().steps, p.memory.front().steps, list(each(p.memory, wall)))));
}

// The figures of the in-process token rates.
void rate_figures(std::vector<BenchFigure>& f, const BenchOptions& o, const FastWindows& w, const CheckedRuns& c) {
  const int N = o.tokens, hi0 = golden::kMaxContext - N + 1;
  const std::string common = fmt::format(
      "fast fidelity, functional (the engines compute), no check, one board warmed by one untimed token ({:.2f} s; "
      "weights image and board {:.2f} s not included), {} passes, each token timed around TokenLoop::step; value = "
      "N / the window's summed wall; the first pass also clocked each new batch shape once ({} runs on the clocked "
      "board; {} in the later passes), as a first run at a config does without the start-up cache's timing entry",
      w.cold_s, w.setup_s, o.repeat, w.oracle_runs_first, w.oracle_runs_later);
  f.push_back(figure_of(fmt::format("simulated tok/s per wall second, no check, {}", t_range(1, N)), "tok/s",
                        w.low_rate, 30, true, ">= 30", "measured (this host); the tokens are simulated",
                        fmt::format("{} tokens at {}; {}", N, t_range(1, N), common)));
  f.push_back(figure_of(
      fmt::format("simulated tok/s per wall second, no check, {}", t_range(hi0, golden::kMaxContext)), "tok/s",
      w.high_rate, 30, true,
      fmt::format(">= 30 (the real board: {} tok/s at T=512)", board_figures::kEndToEndT512.tok_s),
      "measured (this host); the tokens are simulated",
      fmt::format("{} tokens at {}; {}", N, t_range(hi0, golden::kMaxContext), common)));
  f.push_back(figure_of(
      "simulated tok/s per wall second, golden check on every token", "tok/s", c.rate, 15, true, ">= 15, stable",
      "measured (this host); the tokens are simulated",
      fmt::format("run_board as `{}` with the warm start-up cache, {} runs (fast "
                  "fidelity, the golden BoardReference beside the board on every token: {} of {} logits "
                  "bit-identical); value = steps 2..{} ({}) / their summed per-token wall incl. the check; the "
                  "first step of each run is in the time to the first token",
                  o.run_text(process("", N - 1)), o.repeat, c.equal, c.steps, N + 1, t_range(2, N + 1))));
}

// The energy accounting's share of a run's host time (docs/energy.md).
BenchFigure energy_figure(const BenchOptions& o, const FastWindows& w) {
  const int N = o.tokens;
  return figure_of(
      "energy accounting's share of a run's host time, fast fidelity, no check", "%", w.energy_pct, 2, false,
      "<= 2%", "measured (this host)",
      fmt::format("each of {} passes of the fast windows' {} tokens ({} and {}, no check: the quickest run, so the "
                  "largest share) priced as `bitsim run` prices them, one sim::token_energy call a token ({:.2f} us a "
                  "token in the last pass), its wall over the passes' summed TokenLoop::step wall",
                  o.repeat, 2 * N, t_range(1, N), t_range(golden::kMaxContext - N + 1, golden::kMaxContext),
                  w.energy_us_per_token));
}

// The figures of the cycle fidelity.
void cycle_figures(std::vector<BenchFigure>& f, const BenchOptions& o, double mhz, const CycleRuns& cy) {
  f.push_back(figure_of(
      "cycle fidelity, PL cycles per wall second", "cycles/s", cy.rate, 2e6, true, ">= 2 million",
      "measured (this host); the PL cycles are simulated",
      fmt::format("clocked SystemC board, {} token(s) at {}, functional, no check, {} runs: {:.3f} ms simulated x {} "
                  "MHz = {:.2f} million PL cycles per run (timed in the PS thread around each token; elaboration and "
                  "the weights image not included); the DMA streaming figure alone is "
                  "build/bench/bitsim_bench_hw's",
                  o.cycle_tokens, t_range(1, o.cycle_tokens), o.repeat, cy.sim_ps * 1e-9, mhz, cy.cycles / 1e6)));
  f.push_back(figure_of(
      "fast over cycle, wall time per token", "x", cy.speedup, 100, true, ">= 100x", "measured (this host)",
      fmt::format("each cycle run's wall per token / fast {:.4f} s per token (the last fast pass, the same {} token(s) "
                  "at {}), both functional, no check (simulated time per token {:.3f} ms, {} in both fidelities)",
                  cy.fast_per_token, o.cycle_tokens, t_range(1, o.cycle_tokens), cy.sim_ps * 1e-9 / o.cycle_tokens,
                  cy.same_sim ? "the same" : "NOT the same")));
}
}  // namespace

// ---- Processes -------------------------------------------------------------------------------

ProcessRun run_process(const std::vector<std::string>& argv, const fs::path& scratch_dir) {
  if (argv.empty()) throw Error("bench: no command to run");
  const fs::path out = scratch_dir / "process.out", err = scratch_dir / "process.err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ProcessRun r;
  const auto t0 = Clock::now();
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error(fmt::format("bench: cannot run {}: {}", argv[0], std::strerror(rc)));
  int st = 0;
  rusage u{};
  bool signalled = false;
  while (::wait4(pid, &st, 0, &u) < 0) {
    if (errno != EINTR) throw Error(fmt::format("bench: waiting for {}: {}", argv[0], std::strerror(errno)));
    if (stop_signal() && !signalled) {  // stop the child, reap it, then stop
      ::kill(pid, SIGTERM);
      signalled = true;
    }
  }
  r.wall_s = seconds_since(t0);
  r.maxrss_bytes = double(u.ru_maxrss) * 1024.0;
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
  check_stop();
  r.out = io::read_file(out, "bench process output", io::kMaxRecordFileBytes);
  r.err = io::read_file(err, "bench process errors", io::kMaxRecordFileBytes);
  return r;
}

std::vector<BenchFigure> run_bench(const BenchOptions& options, std::function<void(const std::string&)> status_cb) {
  const BenchOptions o = effective_bench_options(options);
  const Status status = [&](const std::string& s) { if (status_cb) status_cb(s); };
  const sim::SimConfig cfg = sim::make_sim_config(o.params);
  const ScratchDir scratch;
  const fs::path warm_cache = scratch.path() / "cache";
  if (o.only == "energy") {
    const TimingModel t = load_timing_model(o, warm_cache, status);
    return {energy_figure(o, fast_windows(cfg, t, o, status))};
  }
  const ProcessFigures procs = process_runs(o, scratch.path(), warm_cache, status);
  const CheckedRuns checked = checked_runs(o, warm_cache, status);
  const PrefillRuns prefill = prefill_runs(o, warm_cache, status);
  const TimingModel t = load_timing_model(o, warm_cache, status);
  const FastWindows fast = fast_windows(cfg, t, o, status);
  const CycleRuns cycle = cycle_runs(cfg, t, o, fast.low, status);
  const Ddr3ReuseRuns ddr3 = ddr3_reuse_runs(o, scratch.path(), status);
  std::vector<BenchFigure> f;
  process_figures(f, o, procs);
  rate_figures(f, o, fast, checked);
  prefill_figure(f, o, prefill);
  cycle_figures(f, o, cfg.board.clock.mhz, cycle);
  f.push_back(sweep_figure(o, status));
  ddr3_reuse_figures(f, o, ddr3);
  f.push_back(energy_figure(o, fast));
  return f;
}

// ---- Output ----------------------------------------------------------------------------------

std::string format_bench_value(const BenchFigure& f) {
  if (f.unit == "tok/s") return fmt::format("{:.2f} tok/s", f.value);
  if (f.unit == "cycles/s") return fmt::format("{:.3f} million cycles/s", f.value / 1e6);
  if (f.unit == "x") return fmt::format("{:.1f}x", f.value);
  if (f.unit == "s") return fmt::format("{:.2f} s", f.value);
  if (f.unit == "GB") return fmt::format("{:.3f} GB", f.value);
  return fmt::format("{:.4g} {}", f.value, f.unit);
}

std::vector<double> host_load_average() {
  double l[3];
  if (::getloadavg(l, 3) != 3) return {};
  return {l[0], l[1], l[2]};
}

static std::string load_text(const std::vector<double>& l) {
  return l.size() == 3 ? fmt::format("{:.2f} {:.2f} {:.2f}", l[0], l[1], l[2]) : "unknown";
}

std::string bench_table(const std::vector<BenchFigure>& figs, const BenchOptions& o, double wall_s,
                        const BenchLoad& load) {
  std::string s = fmt::format(
      "bitsim bench: {} on this host, {} host thread(s), {} repetitions of every figure; every value is measured "
      "(this host), the tokens and PL cycles it counts are simulated\n\n",
      o.model, o.threads, o.repeat);
  s += "| figure | median | min .. max | evidence | goal | met | how measured |\n";
  s += "|---|---|---|---|---|---|---|\n";
  for (const auto& f : figs) {
    BenchFigure lo = f, hi = f;
    lo.value = f.min;
    hi.value = f.max;
    s += fmt::format("| {} | {} | {} .. {} | {} | {} | {} | {} |\n", f.name, format_bench_value(f),
                     format_bench_value(lo), format_bench_value(hi), f.evidence, f.goal_text,
                     f.met ? "met" : "missed", f.how);
  }
  int met = 0;
  for (const auto& f : figs) met += f.met;
  s += fmt::format("\n{} of {} goals met (by the median); the bench took {:.1f} s wall\n", met, figs.size(), wall_s);
  s += fmt::format("host load average (1, 5, 15 min): {} at the start, {} at the end (the bench's own threads included)\n",
                   load_text(load.start), load_text(load.end));
  return s;
}

const Fields<BenchFigure>& bench_figure_fields() {
  using F = BenchFigure;
  static const Fields<F> fields{{"name", &F::name},
                                {"unit", &F::unit},
                                {"value", &F::value},
                                {"min", &F::min},
                                {"max", &F::max},
                                {"samples", &F::samples},
                                {"goal", &F::goal},
                                {"goal_text", &F::goal_text},
                                {"higher_is_better", &F::higher_is_better},
                                {"met", &F::met},
                                {"evidence", &F::evidence},
                                {"how", &F::how}};
  return fields;
}

const Fields<BenchOptions>& bench_option_fields() {
  using O = BenchOptions;
  static const Fields<O> fields{{"tokens", &O::tokens},
                                {"cycle_tokens", &O::cycle_tokens},
                                {"memory_tokens", &O::memory_tokens},
                                {"run_tokens", &O::run_tokens},
                                {"repeat", &O::repeat},
                                {"sweep_points", &O::sweep_points},
                                {"prefill_prompt_tokens", &O::prefill_prompt_tokens},
                                {"prefill_tokens_per_pass", &O::prefill_tokens_per_pass},
                                {"ddr3_tokens", &O::ddr3_tokens},
                                {"threads", &O::threads},
                                {"quick", &O::quick},
                                {"only", &O::only}};
  return fields;
}

std::string bench_json(const std::vector<BenchFigure>& figs, const BenchOptions& o, double wall_s,
                       const BenchLoad& load) {
  nlohmann::json j{{"schema", "bitsim.bench/2"},
                   {"model", o.model},
                   {"options", record_json(o, bench_option_fields())},
                   {"wall_s", wall_s},
                   {"load_average", {{"start", load.start}, {"end", load.end}}},
                   {"figures", records_json(figs, bench_figure_fields())}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

BenchStored parse_bench_json(const std::string& text, const std::string& source) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return Error(fmt::format("stored bench {}: {} {}", source, field, why));
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("stored bench {}: not JSON: {}", source, e.what()));
  }
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string())
    throw bad("schema", "is missing (expected \"bitsim.bench/2\", the schema of the bench's JSON)");
  if (j["schema"] != "bitsim.bench/2") throw bad("schema", fmt::format("is {}, expected \"bitsim.bench/2\"", j["schema"].dump()));
  if (!j.contains("figures") || !j["figures"].is_array()) throw bad("figures", "is missing or not an array");
  BenchStored st;
  st.source = source;
  for (size_t i = 0; i < j["figures"].size(); ++i) {
    const auto& f = j["figures"][i];
    const std::string at = fmt::format("figures[{}]", i);
    if (!f.is_object()) throw bad(at, "is not an object");
    if (!f.contains("name") || !f["name"].is_string()) throw bad(at + ".name", "is missing or not a string");
    if (!f.contains("value") || !f["value"].is_number()) throw bad(at + ".value", "is missing or not a number");
    if (!f.contains("higher_is_better") || !f["higher_is_better"].is_boolean())
      throw bad(at + ".higher_is_better", "is missing or not true/false");
    BenchStoredFigure x{f["name"].get<std::string>(), f.value("unit", std::string()), f["value"].get<double>(),
                        f["higher_is_better"].get<bool>()};
    if (!std::isfinite(x.value) || x.value < 0) throw bad(at + ".value", fmt::format("is {}, not a figure", x.value));
    for (const auto& y : st.figures)
      if (y.name == x.name) throw bad(at + ".name", fmt::format("'{}' appears twice", x.name));
    st.figures.push_back(std::move(x));
  }
  if (j.contains("load_average") && j["load_average"].is_object() && j["load_average"].contains("start") &&
      j["load_average"]["start"].is_array())
    for (const auto& v : j["load_average"]["start"])
      if (v.is_number()) st.load_start.push_back(v.get<double>());
  return st;
}

BenchStored read_bench_json(const std::filesystem::path& file) {
  return parse_bench_json(io::read_file(file, "stored bench", io::kMaxRecordFileBytes), file.string());
}

std::vector<BenchComparison> compare_bench(const std::vector<BenchFigure>& now, const BenchStored& stored) {
  std::vector<BenchComparison> rows;
  auto find = [&](const std::string& name) -> const BenchStoredFigure* {
    for (const auto& f : stored.figures)
      if (f.name == name) return &f;
    return nullptr;
  };
  for (const auto& f : now) {
    BenchComparison c{f.name, f.unit, "", f.value, std::nullopt};
    if (const BenchStoredFigure* s = find(f.name)) {
      c.stored = s->value;
      c.stored_unit = s->unit;
      c.comparable = s->unit == f.unit;
      if (!c.comparable) {
        rows.push_back(std::move(c));
        continue;
      }
      const double a = f.higher_is_better ? s->value : f.value, b = f.higher_is_better ? f.value : s->value;
      c.worse_by = b > 0 ? a / b - 1.0 : (a > 0 ? std::numeric_limits<double>::infinity() : 0.0);
      c.worse = c.worse_by > kBenchWorseLimit;
    }
    rows.push_back(std::move(c));
  }
  for (const auto& s : stored.figures) {
    bool seen = false;
    for (const auto& f : now) seen |= f.name == s.name;
    if (!seen) rows.push_back(BenchComparison{s.name, s.unit, s.unit, std::nullopt, s.value});
  }
  return rows;
}

std::string bench_comparison_table(const std::vector<BenchComparison>& rows, const BenchStored& stored) {
  std::string s = fmt::format("\nagainst the stored run {} (host load average at its start: {}); WORSE marks a figure "
                              "more than {:.0f}% worse, in its own direction\n\n",
                              stored.source, load_text(stored.load_start), kBenchWorseLimit * 100);
  s += "| figure | now | stored | change | |\n|---|---|---|---|---|\n";
  int worse = 0;
  auto value = [](const std::optional<double>& v, const std::string& unit) {
    return v ? fmt::format("{:.4g} {}", *v, unit) : std::string("(not in that run)");
  };
  for (const auto& r : rows) {
    const std::string change = r.comparable ? (r.worse_by > 0 ? fmt::format("{:.1f}% worse", r.worse_by * 100)
                                                              : fmt::format("{:.1f}% better", -r.worse_by * 100))
                               : (r.now && r.stored) ? std::string("units differ")
                                                     : std::string("-");
    s += fmt::format("| {} | {} | {} | {} | {} |\n", r.name, value(r.now, r.unit), value(r.stored, r.stored_unit), change,
                     r.worse ? "WORSE" : "");
    worse += r.worse;
  }
  s += fmt::format("\n{} figure(s) more than {:.0f}% worse than the stored run\n", worse, kBenchWorseLimit * 100);
  return s;
}

}  // namespace bitsim::study
