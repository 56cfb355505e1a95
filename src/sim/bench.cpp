#include "sim/bench.h"
#include "sim/fast_matvec.h"

#include "sim/board_figures.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/tokenizer.h"
#include "sim/board_run.h"
#include "sim/simulation.h"
#include "sim/sweep.h"

namespace bitsim::sim {

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
  SimConfig cfg;
  std::unique_ptr<Simulation> sim;
  double setup_s = 0;
};

FastTokenRunner::FastTokenRunner(const SimConfig& config, const model::TernaryModel& model,
                                 const golden::KvScales& scales, int threads)
    : impl_(std::make_unique<Impl>()) {
  const auto t0 = Clock::now();
  impl_->cfg = config;
  impl_->sim = make_simulation(impl_->cfg, model, scales, SimulationOptions(Fidelity::kFast, threads));
  impl_->sim->loop().load_weights();
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

std::vector<TimedToken> cycle_tokens_timed(const SimConfig& cfg, const model::TernaryModel& m,
                                           const golden::KvScales& scales, const std::vector<int>& tokens) {
  std::vector<TimedToken> out;
  const auto sim = make_simulation(cfg, m, scales, SimulationOptions(Fidelity::kCycle));
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

double peak_rss_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;  // Linux: KiB
}

// ---- The bench -----------------------------------------------------------------------------

BenchOptions effective_bench_options(const BenchOptions& in) {
  BenchOptions o = in;
  if (o.quick) {
    o.model = "synthetic:tiny";
    o.tokens = std::min(o.tokens, 4);
    o.cycle_tokens = 1;
    o.memory_tokens = std::min(o.memory_tokens, 16);
    o.sweep_points = std::min(o.sweep_points, 2);
  }
  if (o.sweep_points < 1 || o.sweep_points > 10000)
    throw Error(fmt::format("bench: {} sweep points, expected 1..10000", o.sweep_points));
  if (o.tokens < 2 || o.tokens > golden::kMaxContext / 2)
    throw Error(fmt::format("bench: {} tokens per window, expected 2..{}", o.tokens, golden::kMaxContext / 2));
  if (o.cycle_tokens < 1 || o.cycle_tokens > o.tokens)
    throw Error(fmt::format("bench: {} cycle-fidelity tokens, expected 1..{} (the tokens per window)", o.cycle_tokens,
                            o.tokens));
  if (o.memory_tokens < 1 || o.memory_tokens > golden::kMaxContext)
    throw Error(fmt::format("bench: {} tokens of the memory run, expected 1..{}", o.memory_tokens, golden::kMaxContext));
  if (o.threads < 1) throw Error(fmt::format("bench: {} host threads, expected at least 1", o.threads));
  return o;
}

namespace {
using Status = std::function<void(const std::string&)>;

// 1. run_board as `bitsim run --prompt A` does it (fast fidelity, golden check on every
//    token): the time to the first generated token, and the checked token rate.
struct CheckedRun {
  BoardRunResult run;
  double ttft = 0, steps_wall_to_first = 0, setup_to_first = 0, rate = 0;
  int steps_to_first = 0, equal = 0;
};

CheckedRun checked_run(const BenchOptions& o, const Status& status) {
  const int N = o.tokens;
  status(fmt::format("[1/5] run_board {} --prompt A --tokens {} (fast, golden check on every token) ...", o.model,
                     N - 1));
  BoardRunRequest req{RunRequest{}, o.params};
  req.run.model = o.model;
  req.run.prompt = "A";
  req.run.tokens = N - 1;  // BOS + "A" + N - 1 generated = N + 1 steps with the byte tokenizer
  req.run.threads = o.threads;
  std::optional<double> ttft;
  CheckedRun c;
  BoardRunCallbacks cb;
  const auto t_run = Clock::now();
  cb.on_token = [&](const TokenRecord& r, const std::string&) {
    if (r.generated && !ttft) {
      ttft = seconds_since(t_run);
      c.steps_to_first = r.index + 1;
    }
  };
  c.run = run_board(req, cb);
  if (!ttft) throw Error("bench: run_board generated no token");
  if (!c.run.mismatch.empty()) throw Error("bench: the golden check failed: " + c.run.mismatch);
  c.ttft = *ttft;
  for (int i = 0; i < c.steps_to_first; ++i) c.steps_wall_to_first += c.run.tokens[size_t(i)].wall_ms / 1e3;
  double checked_wall = 0;
  int checked_tokens = 0;
  for (size_t i = 0; i < c.run.tokens.size(); ++i) {
    c.equal += c.run.tokens[i].logits_equal.value_or(false);
    if (i == 0) continue;  // cold caches: counted in the time to the first token
    checked_wall += c.run.tokens[i].wall_ms / 1e3;
    ++checked_tokens;
  }
  c.rate = checked_wall > 0 ? checked_tokens / checked_wall : 0.0;
  c.setup_to_first = c.ttft - c.run.load_s - c.run.calibration_s - c.steps_wall_to_first;
  return c;
}

// 2. The model loaded and calibrated once more, kept for the remaining measurements.
struct TimingModel {
  model::TernaryModel model;
  golden::KvScales scales;
  std::vector<int> ids;
  double load_s = 0, calib_s = 0;
};

TimingModel load_timing_model(const BenchOptions& o, const Status& status) {
  status(fmt::format("[2/5] loading and calibrating {} for the timing runs ...", o.model));
  auto t0 = Clock::now();
  auto source = model::open_model_source(o.model);
  const model::ModelConfig mc = source->config();
  auto tokenizer = model::select_tokenizer(std::nullopt, model::model_folder(o.model), mc.vocab_size);
  const std::vector<int> calib = golden::calibration_tokens(*tokenizer, mc.bos_token_id);
  TimingModel t{model::load_ternary_model(*source, o.threads), {}, {}, 0, 0};
  source.reset();
  t.load_s = seconds_since(t0);
  t0 = Clock::now();
  t.scales = calibrate_kv_scales_fast(t.model, calib, o.threads);
  t.calib_s = seconds_since(t0);
  t.ids = bench_token_ids(calib, std::max(o.memory_tokens, golden::kMaxContext));
  return t;
}

// 3. Fast fidelity, functional, no check: one warm board; positions 0..N-1 and 512-N..511.
struct FastWindows {
  std::vector<TimedToken> low, high;
  double setup_s = 0, cold_s = 0, rate = 0;
};

FastWindows fast_windows(const SimConfig& cfg, const TimingModel& t, const BenchOptions& o, const Status& status) {
  const int N = o.tokens;
  status(fmt::format("[3/5] fast fidelity, {} + {} tokens at T from 1 and from {} (no check) ...", N, N,
                     golden::kMaxContext - N + 1));
  FastWindows w;
  FastTokenRunner fast(cfg, t.model, t.scales, o.threads);
  w.setup_s = fast.setup_s();
  w.cold_s = fast.step(t.ids[0], 0).wall_s;  // warm-up: decoded weights, timing cache
  for (int i = 0; i < N; ++i) w.low.push_back(fast.step(t.ids[size_t(i)], i));
  const int p0 = golden::kMaxContext - N;
  for (int i = 0; i < N; ++i) w.high.push_back(fast.step(t.ids[size_t(p0 + i)], p0 + i));
  const double wall = sum_wall(w.low) + sum_wall(w.high);
  w.rate = wall > 0 ? 2.0 * N / wall : 0.0;
  return w;
}

// 4. Cycle fidelity (clocked SystemC board): positions 0..cycle_tokens-1, against the same
//    positions of the fast window.
struct CycleWindow {
  double wall = 0, sim_ps = 0, cycles = 0, rate = 0, per_token = 0, fast_per_token = 0, speedup = 0;
  bool same_sim = true;
};

CycleWindow cycle_window(const SimConfig& cfg, const TimingModel& t, const BenchOptions& o,
                         const std::vector<TimedToken>& fast, const Status& status) {
  status(fmt::format("[4/5] cycle fidelity, {} token(s) at T from 1 ...", o.cycle_tokens));
  const std::vector<int> cids(t.ids.begin(), t.ids.begin() + o.cycle_tokens);
  const std::vector<TimedToken> cyc = cycle_tokens_timed(cfg, t.model, t.scales, cids);
  CycleWindow c;
  c.wall = sum_wall(cyc);
  for (const auto& x : cyc) c.sim_ps += double(x.timing.total_ps());
  c.cycles = c.sim_ps * 1e-12 * cfg.board.clock.mhz * 1e6;
  c.rate = c.wall > 0 ? c.cycles / c.wall : 0.0;
  double fast_same = 0;
  for (int i = 0; i < o.cycle_tokens; ++i) {
    fast_same += fast[size_t(i)].wall_s;
    c.same_sim = c.same_sim && cyc[size_t(i)].timing.total_ps() == fast[size_t(i)].timing.total_ps();
  }
  c.per_token = c.wall / o.cycle_tokens;
  c.fast_per_token = fast_same / o.cycle_tokens;
  c.speedup = c.fast_per_token > 0 ? c.per_token / c.fast_per_token : 0.0;
  return c;
}

// 5. Peak memory, last: a real memory_tokens-token fast functional run (simulate_tokens).
struct MemoryRun {
  double peak_before = 0, peak = 0, wall_s = 0, sim_s = 0, decoded_mb = 0;
};

MemoryRun memory_run(const SimConfig& cfg, const TimingModel& t, const BenchOptions& o, const Status& status) {
  status(fmt::format("[5/5] fast fidelity, {} tokens from T=1 (functional, no check) for the peak memory ...",
                     o.memory_tokens));
  MemoryRun r;
  r.peak_before = peak_rss_bytes();
  const auto t0 = Clock::now();
  hw::FastBoardStats stats;
  const std::vector<int> ids(t.ids.begin(), t.ids.begin() + o.memory_tokens);
  SimulateOptions so;
  so.threads = o.threads;
  const auto out = simulate_tokens(cfg, t.model, t.scales, ids, so, &stats);
  r.wall_s = seconds_since(t0);
  for (const auto& x : out) r.sim_s += double(x.timing.total_ps()) * 1e-12;
  r.decoded_mb = stats.decoded_bytes / 1e6;
  r.peak = peak_rss_bytes();
  return r;
}

// The figures of the two token-rate measurements.
void rate_figures(std::vector<BenchFigure>& f, const BenchOptions& o, const FastWindows& w, const CheckedRun& c) {
  const int N = o.tokens, hi0 = golden::kMaxContext - N + 1;
  f.push_back(figure(
      "simulated tok/s per wall second, --no-check, T up to 512", "tok/s", w.rate, 30, true,
      fmt::format(">= 30 (the real board: {} tok/s at T=512)", board_figures::kEndToEndT512.tok_s), "measured (this host); the tokens are simulated",
      fmt::format("fast fidelity, functional (the engines compute), no check, one board warmed by one untimed token; "
                  "{} tokens at {} ({:.2f} tok/s) and {} at {} ({:.2f} tok/s), each timed around "
                  "TokenLoop::step; value = all {} tokens / their summed wall (the mean rate); load, calibration, "
                  "weights image ({:.2f} s) and the cold first token ({:.2f} s) not included",
                  N, t_range(1, N), N / sum_wall(w.low), N, t_range(hi0, golden::kMaxContext), N / sum_wall(w.high),
                  2 * N, w.setup_s, w.cold_s)));
  f.push_back(figure(
      "simulated tok/s per wall second, golden check on every token", "tok/s", c.rate, 15, true, ">= 15",
      "measured (this host); the tokens are simulated",
      fmt::format("run_board as `bitsim run --prompt A --tokens {}` (fast fidelity, golden BoardReference check on "
                  "every token: {} of {} logits bit-identical); value = steps 2..{} ({}) / their summed "
                  "per-token wall incl. the check; the cold first step is in the time to the first token",
                  N - 1, c.equal, c.run.tokens.size(), c.run.tokens.size(), t_range(2, int(c.run.tokens.size())))));
}

// The figures of the cycle fidelity, the first token and the memory.
void cost_figures(std::vector<BenchFigure>& f, const BenchOptions& o, double mhz, const CycleWindow& cy,
                  const CheckedRun& c, const TimingModel& t, const MemoryRun& mem) {
  f.push_back(figure(
      "cycle fidelity, PL cycles per wall second", "cycles/s", cy.rate, 2e6, true, ">= 2 million",
      "measured (this host); the PL cycles are simulated",
      fmt::format("clocked SystemC board, {} token(s) at {}, functional, no check: {:.3f} ms simulated x {} MHz "
                  "= {:.2f} million PL cycles in {:.2f} s wall (timed in the PS thread around each token; "
                  "elaboration and the weights image not included)",
                  o.cycle_tokens, t_range(1, o.cycle_tokens), cy.sim_ps * 1e-9, mhz, cy.cycles / 1e6, cy.wall)));
  f.push_back(figure(
      "fast over cycle, wall time per token", "x", cy.speedup, 100, true, ">= 100x", "measured (this host)",
      fmt::format("cycle {:.3f} s per token / fast {:.4f} s per token, the same {} token(s) at {}, both "
                  "functional, no check, fast board warm (simulated time per token {:.3f} ms, {} in both fidelities)",
                  cy.per_token, cy.fast_per_token, o.cycle_tokens, t_range(1, o.cycle_tokens),
                  cy.sim_ps * 1e-9 / o.cycle_tokens, cy.same_sim ? "the same" : "NOT the same")));
  f.push_back(figure(
      fmt::format("time to the first token, {}", o.model), "s", c.ttft, 3, false, "<= 3 s", "measured (this host)",
      fmt::format("run_board `bitsim run --prompt A` (default fast fidelity, golden check on), from the call to the "
                  "first generated token ({} steps: BOS, the prompt, the first generated): load {:.2f} s + K/V "
                  "calibration {:.2f} s + board and weights image {:.2f} s + {} token steps {:.2f} s",
                  c.steps_to_first, c.run.load_s, c.run.calibration_s, c.setup_to_first, c.steps_to_first,
                  c.steps_wall_to_first)));
  f.push_back(figure(
      fmt::format("peak resident memory, {}, {} tokens", o.model, o.memory_tokens), "GB", mem.peak / 1e9, 1.5, false,
      "<= 1.5 GB", "measured (this host)",
      fmt::format("getrusage ru_maxrss of the whole process (GB = 1e9 bytes), read last, after simulate_tokens over "
                  "{} tokens at {} (fast, functional, no check; {:.1f} s wall for {:.2f} s simulated; decoded "
                  "weights cache {:.0f} MB); peak before that run {:.2f} GB (run_board's model copy, freed, and this "
                  "one, load {:.1f} s + calibration {:.1f} s)",
                  o.memory_tokens, t_range(1, o.memory_tokens), mem.wall_s, mem.sim_s, mem.decoded_mb,
                  mem.peak_before / 1e9, t.load_s, t.calib_s)));
}
}  // namespace

// ---- Sweep throughput ----------------------------------------------------------------------
// A timing-only grid over the PL clock run point after point in this one process (no process
// per point, no functional check: what each worker of `bitsim sweep --jobs N` and each
// campaign shard does), at the sweep's defaults (4 tokens at T=64).
BenchFigure sweep_figure(const BenchOptions& o, const Status& status) {
  SweepOptions so;
  so.check_model.clear();
  so.jobs = 1;
  SweepAxis axis{"clock.mhz", {}};
  for (int i = 0; i < o.sweep_points; ++i) axis.values.push_back(fmt::format("{}", 100 + 150 * i / std::max(1, o.sweep_points - 1)));
  so.grid.push_back(axis);
  status(fmt::format("sweep: {} timing-only points in this process ...", o.sweep_points));
  const SweepResult r = run_sweep(o.params, so);
  const double rate = double(r.points.size()) / r.wall_s;
  constexpr double kGoalPoints = 10000, kGoalHours = 2, kGoalJobs = 2;  // a 10,000-point grid on this 2-core machine
  const double goal = kGoalPoints / (kGoalHours * 3600.0) / kGoalJobs;
  return figure("timing-only sweep points per wall second, one process", "points/s", rate, goal, true,
                fmt::format(">= {:.2f} (10,000 points in {:.0f} h with --jobs {:.0f})", goal, kGoalHours, kGoalJobs),
                "measured (this host); the points are simulated",
                fmt::format("{} points (clock.mhz 100..250, bitnet-large shape, {} tokens at T={}) in {:.2f} s, one after "
                            "the other in one process; 10,000 points: {:.1f} h in one process, {:.1f} h with --jobs 2",
                            r.points.size(), so.tokens, so.context, r.wall_s, kGoalPoints / rate / 3600.0,
                            kGoalPoints / rate / 3600.0 / kGoalJobs));
}

std::vector<BenchFigure> run_bench(const BenchOptions& options, std::function<void(const std::string&)> status_cb) {
  const BenchOptions o = effective_bench_options(options);
  const Status status = [&](const std::string& s) { if (status_cb) status_cb(s); };
  const SimConfig cfg = make_sim_config(o.params);
  const CheckedRun checked = checked_run(o, status);
  const TimingModel t = load_timing_model(o, status);
  const FastWindows fast = fast_windows(cfg, t, o, status);
  const CycleWindow cycle = cycle_window(cfg, t, o, fast.low, status);
  const MemoryRun mem = memory_run(cfg, t, o, status);
  const BenchFigure sweep = sweep_figure(o, status);  // after the memory run: its peak is the process's
  std::vector<BenchFigure> f;
  rate_figures(f, o, fast, checked);
  cost_figures(f, o, cfg.board.clock.mhz, cycle, checked, t, mem);
  f.push_back(sweep);
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

std::string bench_table(const std::vector<BenchFigure>& figs, const BenchOptions& o, double wall_s) {
  std::string s = fmt::format(
      "bitsim bench: {} on this host, {} host thread(s); every value is measured (this host), the tokens and PL "
      "cycles it counts are simulated\n\n",
      o.model, o.threads);
  s += "| figure | measured | evidence | goal | met | how measured |\n";
  s += "|---|---|---|---|---|---|\n";
  for (const auto& f : figs)
    s += fmt::format("| {} | {} | {} | {} | {} | {} |\n", f.name, format_bench_value(f), f.evidence, f.goal_text,
                     f.met ? "met" : "missed", f.how);
  int met = 0;
  for (const auto& f : figs) met += f.met;
  s += fmt::format("\n{} of {} goals met; the bench took {:.1f} s wall\n", met, figs.size(), wall_s);
  return s;
}

std::string bench_json(const std::vector<BenchFigure>& figs, const BenchOptions& o, double wall_s) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& f : figs)
    arr.push_back({{"name", f.name},
                   {"value", f.value},
                   {"unit", f.unit},
                   {"goal", f.goal},
                   {"goal_text", f.goal_text},
                   {"higher_is_better", f.higher_is_better},
                   {"met", f.met},
                   {"evidence", f.evidence},
                   {"how", f.how}});
  nlohmann::json j{{"schema", "bitsim.bench/1"},
                   {"model", o.model},
                   {"options",
                    {{"tokens", o.tokens},
                     {"cycle_tokens", o.cycle_tokens},
                     {"memory_tokens", o.memory_tokens},
                     {"threads", o.threads},
                     {"quick", o.quick}}},
                   {"wall_s", wall_s},
                   {"figures", arr}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace bitsim::sim
