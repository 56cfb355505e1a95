#include "study/calibrate.h"

#include "hw/memory/memory_registry.h"

#include "study/board_figures.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "host/memory_map.h"
#include "host/platform.h"
#include "model/board_shape.h"
#include "base/error.h"
#include "sim/board_config.h"
#include "sim/board_run.h"
#include "sim/energy_account.h"
#include "sim/simulation.h"

namespace bitsim::study {

namespace {

using board_figures::kAttentionAloneGbS;
using board_figures::kAttentionAloneMs;
using BoardRow = board_figures::EndToEnd;
constexpr const auto& kBoard = board_figures::kEndToEnd;  // BOARD.md, "Measurements to calibrate against"

const model::TernaryModel& shape_model() {
  static const model::TernaryModel m = model::shape_only_model(model::ModelConfig::bitnet_large());
  return m;
}

model::KvScales any_scales(const model::ModelConfig& c) {
  model::KvScales s;
  s.k.assign(size_t(c.num_layers) * c.num_kv_heads, 0.05f);  // per (layer, K/V head)
  s.v = s.k;
  s.k_channel.assign(s.k.size() * size_t(c.head_dim()), 0.05f * 127.0f);  // max|K_d| of the same scale
  return s;
}

ValidationRow row(const std::string& scenario, int T, const std::string& figure, double sim,
                  std::optional<double> board, const std::string& profile = "c") {
  ValidationRow r{scenario, T, figure, sim, board, std::nullopt, profile};
  if (board) r.error_pct = (sim - *board) / *board * 100.0;
  return r;
}

}  // namespace

std::vector<sim::TokenOutcome> timing_tokens(const sim::ParamSet& p, int first_context, int count,
                                        std::vector<host::TransferRecord>* transfers, const model::ModelConfig* shape) {
  sim::SimConfig cfg = sim::make_sim_config(p);
  const model::TernaryModel other = shape ? model::shape_only_model(*shape) : model::TernaryModel{};
  const auto& m = shape ? other : shape_model();
  // The KV areas hold the config's context limit, as in bitsim run (host::kv_context_limit).
  const int capacity = host::kv_context_limit(m.config, cfg.memory);
  if (capacity > 0) cfg.memory.kv_positions = capacity;
  if (first_context < 1 || first_context + count - 1 > cfg.memory.kv_positions)
    throw Error(fmt::format("context {}..{}: the KV cache holds {} positions with kv.format = {}: {}", first_context,
                            first_context + count - 1, cfg.memory.kv_positions, p.to_string("kv.format"),
                            host::memory_account(m.config, cfg.memory, std::max(1, capacity))
                                .room_text(first_context + count - 1)));
  const std::vector<int> toks(size_t(count), m.config.bos_token_id);
  sim::SimulateOptions o;
  o.fidelity = sim::Fidelity::kTimingOnly;
  o.start_position = first_context - 1;
  return sim::simulate_tokens(cfg, m, any_scales(m.config), toks, o, nullptr, transfers);
}

sim::EnergyAccount shape_energy_account(const sim::ParamSet& p, const model::ModelConfig* shape) {
  const sim::SimConfig cfg = sim::make_sim_config(p);
  const model::ModelConfig mc = shape ? *shape : model::ModelConfig::bitnet_large();
  return sim::energy_account(cfg, mc, std::max(1, host::kv_context_limit(mc, cfg.memory)));
}

PrefillMeasured measure_prefill(const sim::ParamSet& p, int prompt_tokens, const model::ModelConfig* shape) {
  sim::SimConfig cfg = sim::make_sim_config(p);
  const model::TernaryModel other = shape ? model::shape_only_model(*shape) : model::TernaryModel{};
  const auto& m = shape ? other : shape_model();
  const int capacity = host::kv_context_limit(m.config, cfg.memory);
  if (capacity > 0) cfg.memory.kv_positions = capacity;
  if (prompt_tokens < 1 || prompt_tokens > cfg.memory.kv_positions)
    throw Error(fmt::format("prompt tokens {}: the KV cache holds {} positions with kv.format = {}: {}", prompt_tokens,
                            cfg.memory.kv_positions, p.to_string("kv.format"),
                            host::memory_account(m.config, cfg.memory, std::max(1, capacity)).room_text(prompt_tokens)));
  const model::KvScales scales = any_scales(m.config);  // the token loop keeps a reference
  const auto sim = sim::make_simulation(cfg, m, scales, sim::SimulationOptions(sim::Fidelity::kTimingOnly, 1));
  sim->loop().load_weights(1);
  uint64_t total = 0, lead = 0;
  const sim::EnergyAccount account = shape_energy_account(p, shape);
  double energy_mj = 0;
  sim->run([&](host::TokenLoop& loop) {
    loop.init();
    for (int first = 0; first < prompt_tokens;) {
      const std::vector<int> toks(size_t(host::prompt_chunk(first, prompt_tokens, cfg.board.prefill.tokens_per_pass)),
                                  m.config.bos_token_id);
      first += int(toks.size());
      host::TokenTiming t;
      loop.chunk(toks, &t, false);
      if (first == 0) lead = t.lead_ps;
      total += t.total_ps();
      energy_mj += sim::token_energy(account, t, int(toks.size())).total();
    }
  });
  PrefillMeasured r;
  const uint64_t ttft = total - std::min(total, lead);
  r.ttft_ms = double(ttft) / 1e9;
  r.prefill_tok_s = ttft > 0 ? double(prompt_tokens) / (double(ttft) / 1e12) : 0.0;
  r.prompt_j = energy_mj * 1e-3;
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Measured measure_window(const sim::ParamSet& p, int first_context, int tokens, const model::ModelConfig* shape) {
  const auto out = timing_tokens(p, first_context, tokens, nullptr, shape);
  std::vector<double> mm, at, cpu, wk, tot, gbs;
  Measured r;
  const sim::EnergyAccount account = shape_energy_account(p, shape);
  sim::EnergyFigures energy;
  for (const auto& o : out) {
    const auto& t = o.timing;
    energy.add(sim::token_energy(account, t), 1, t.total_ps());
    mm.push_back(double(t.matmul_ps) / 1e9);
    at.push_back(double(t.attention_ps) / 1e9);
    cpu.push_back(double(t.cpu_ps) / 1e9);
    wk.push_back(double(t.walker_ps) / 1e9);
    tot.push_back(double(t.total_ps()) / 1e9);
    gbs.push_back(double(t.bytes_read) / (double(t.matmul_ps + t.attention_ps) / 1e12) / 1e9);
    r.dma_calls = t.dma_transfers;
  }
  r.matmul_ms = median(mm);
  r.attention_ms = median(at);
  r.cpu_ms = median(cpu);
  r.walker_ms = median(wk);
  r.total_ms = median(tot);
  r.tok_s = 1e3 / r.total_ms;
  r.read_gb_s = median(gbs);
  r.energy_mj = energy.mj_per_token();
  r.avg_power_w = energy.avg_power_w();
  r.tokens_per_j = energy.tokens_per_j();
  // Timing-only windows: approximate under ddr3.fast_reuse = approximate (sim::approximate_timing).
  r.energy_evidence = sim::energy_evidence(
      account.config, sim::approximate_timing(sim::make_sim_config(p).board, sim::Fidelity::kTimingOnly));
  return r;
}

Measured measure_end_to_end(const sim::ParamSet& p, int T) {
  if (T < 8 || T > model::kKvPositions)
    throw Error(fmt::format("end-to-end context {} must be in 8..{}", T, model::kKvPositions));
  return measure_window(p, T - 7, 8);
}

std::pair<double, double> measure_attention_alone(const sim::ParamSet& p, int T) {
  std::vector<host::TransferRecord> tr;
  const auto out = timing_tokens(p, T, 1, &tr);
  // Group the attention DMAs' transfers (at0, at1) into calls: a call's transfers overlap.
  std::vector<host::TransferRecord> at;
  for (const auto& t : tr)
    if (t.dma >= 2) at.push_back(t);
  std::sort(at.begin(), at.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  uint64_t cycles = 0, begin = 0, end = 0;
  bool open = false;
  for (const auto& t : at) {
    if (open && t.start > end) {
      cycles += end - begin;
      open = false;
    }
    if (!open) {
      begin = t.start;
      end = t.completion;
      open = true;
    }
    end = std::max(end, t.completion);
  }
  if (open) cycles += end - begin;
  const double ms = double(cycles) * 1e3 / (p.real("clock.mhz") * 1e6);
  const double gbs = double(out.at(0).timing.attention_bytes) / (ms * 1e-3) / 1e9;
  return {ms, gbs};
}

double python_transfer_overhead_us(const sim::ParamSet& params) {
  // A token's time at T = 64 with the python driver less its time with a driver that costs
  // nothing (the transfers at their theoretical time), per channel start.
  sim::ParamSet py = params, theory = params;
  py.set("driver.profile=python");
  theory.set("driver.profile=c");
  for (const char* k : {"reg_access_ns", "call_overhead_ns", "flush_fixed_ns", "flush_ns_per_byte",
                        "invalidate_fixed_ns", "invalidate_ns_per_byte", "poll_gap_ns", "accesses_per_transfer",
                        "transfer_call_ns"})
    theory.set_value(std::string("driver.c.") + k, 0.0, "validate");
  const Measured mp = measure_end_to_end(py, 64), mt = measure_end_to_end(theory, 64);
  return (mp.total_ms - mt.total_ms) * 1e3 / double(std::max<uint64_t>(mp.dma_calls, 1));
}

std::vector<ValidationRow> validate(const sim::ParamSet& params, bool with_python,
                                    const std::function<void(const std::string&)>& status) {
  std::vector<ValidationRow> rows;
  auto add_e2e = [&](const sim::ParamSet& p, const std::string& scenario, const std::string& profile, bool board) {
    for (int T : {64, 128, 256, 384, 512}) {
      if (status) status(fmt::format("{} ({} driver) at T={} ...", scenario, profile, T));
      const Measured m = measure_end_to_end(p, T);
      const BoardRow* b = nullptr;
      for (const auto& k : kBoard)
        if (board && k.T == T) b = &k;
      auto bv = [&](double BoardRow::*f) { return b ? std::optional<double>(b->*f) : std::nullopt; };
      rows.push_back(row(scenario, T, "matmul_ms", m.matmul_ms, bv(&BoardRow::matmul_ms), profile));
      rows.push_back(row(scenario, T, "attention_ms", m.attention_ms, bv(&BoardRow::attention_ms), profile));
      rows.push_back(row(scenario, T, "cpu_ms", m.cpu_ms, bv(&BoardRow::cpu_ms), profile));
      rows.push_back(row(scenario, T, "total_ms", m.total_ms, bv(&BoardRow::total_ms), profile));
      rows.push_back(row(scenario, T, "tok_s", m.tok_s, bv(&BoardRow::tok_s), profile));
    }
  };
  add_e2e(params, "end_to_end", "c", true);
  if (status) status("attention alone at T=512 ...");
  const auto [ms, gbs] = measure_attention_alone(params, 512);
  rows.push_back(row("attention_alone", 512, "attention_ms", ms, kAttentionAloneMs));
  rows.push_back(row("attention_alone", 512, "read_gb_s", gbs, kAttentionAloneGbS));
  if (with_python) {
    sim::ParamSet py = params;
    py.set("driver.profile=python");
    add_e2e(py, "end_to_end_python", "python", false);
    if (status) status("python driver: time per transfer beyond theory at T=64 ...");
    rows.push_back(row("end_to_end_python", 64, "transfer_overhead_us", python_transfer_overhead_us(params),
                       board_figures::kPythonTransferOverheadUs, "python"));
  }
  return rows;
}

namespace {
using Status = std::function<void(const std::string&)>;

// The calibration the memory model's registration names (hw/memory/memory_registry.h).
const hw::MemoryKind::Calibration& memory_calibration(const sim::ParamSet& p) {
  return hw::MemoryRegistry::board().at(p.text("ddr.model"), "calibrate").calibration;
}

// 1. The memory's latency <- the attention unit alone at T=512 (monotonic: bisection): the
//    key the memory model names (the wall's read latency; under ddr.model = ddr3 the
//    controller's latency, docs/ddr3.md, the one figure the DRAM model does not take from
//    the device's data).
void fit_read_latency(sim::ParamSet& p, CalibrationResult& res, const Status& status) {
  const hw::MemoryKind::Calibration& cal = memory_calibration(p);
  const std::string& key = cal.key;
  const double before = p.real(key);
  double lo = 0, hi = cal.bracket_ns;
  for (int it = 0; it < cal.steps; ++it) {
    const double mid = 0.5 * (lo + hi);
    p.set_value(key, mid, "calibrate");
    const double ms = measure_attention_alone(p, 512).first;
    if (status) status(fmt::format("  {} = {:8.2f} ns -> attention alone {:.3f} ms (board {})", key, mid, ms, kAttentionAloneMs));
    (ms < kAttentionAloneMs ? lo : hi) = mid;
  }
  // Whole cycles are what the model uses: keep the latency that lands closest.
  double best = lo, best_err = 1e9;
  for (double cand : {lo, hi}) {
    p.set_value(key, cand, "calibrate");
    const double err = std::fabs(measure_attention_alone(p, 512).first - kAttentionAloneMs);
    if (err < best_err) best = cand, best_err = err;
  }
  const double rounded = std::round(best * 100.0) / 100.0;
  p.set_value(key, rounded, "calibrate");
  res.parameters.push_back({key, "ns", cal.meaning, before, rounded});
}

// 2. The C driver's fixed cost per call and its cache-maintenance cost per byte <- the
//    matmul column and the attention column (both linear in the two; the matmul calls
//    clean x and invalidate large result buffers, the attention calls mostly small ones).
void fit_driver(sim::ParamSet& p, CalibrationResult& res, const sim::ParamSet& input, const Status& status) {
  const double c_before = p.real("driver.c.call_overhead_ns");
  const double b_before = p.real("driver.c.flush_ns_per_byte");
  const double target_mm = 0.5 * (kBoard[0].matmul_ms + kBoard[1].matmul_ms);
  auto set = [&](double c, double b) {
    p.set_value("driver.c.call_overhead_ns", c, "calibrate");
    p.set_value("driver.c.flush_ns_per_byte", b, "calibrate");
    p.set_value("driver.c.invalidate_ns_per_byte", b, "calibrate");
  };
  // Residuals, relative: the matmul column (T=64 and 512 agree), the attention column
  // at T=64 and at T=512. Two parameters, three figures: Gauss-Newton least squares.
  auto eval = [&](double c, double b) {
    set(c, b);
    const Measured lo = measure_end_to_end(p, 64), hi = measure_end_to_end(p, 512);
    return std::array<double, 3>{0.5 * (lo.matmul_ms + hi.matmul_ms) / target_mm - 1.0,
                                 lo.attention_ms / kBoard[0].attention_ms - 1.0,
                                 hi.attention_ms / kBoard[1].attention_ms - 1.0};
  };
  double c = c_before, b = b_before;
  for (int it = 0; it < 4; ++it) {
    const auto f0 = eval(c, b);
    const double dc = 10000, db = 1.0;
    const auto fc = eval(c + dc, b), fb = eval(c, b + db);
    double a11 = 0, a12 = 0, a22 = 0, g1 = 0, g2 = 0;
    for (int k = 0; k < 3; ++k) {
      const double jc = (fc[k] - f0[k]) / dc, jb = (fb[k] - f0[k]) / db;
      a11 += jc * jc;
      a12 += jc * jb;
      a22 += jb * jb;
      g1 -= jc * f0[k];
      g2 -= jb * f0[k];
    }
    const double det = a11 * a22 - a12 * a12;
    if (std::fabs(det) < 1e-30) break;
    c = std::max(0.0, c + (g1 * a22 - g2 * a12) / det);
    b = std::max(0.0, b + (a11 * g2 - a12 * g1) / det);
    if (status)
      status(fmt::format("  driver: matmul {:+.2f}%, attention T=64 {:+.2f}%, T=512 {:+.2f}% -> call {:.0f} ns, "
                         "cache {:.4f} ns/B", 100 * f0[0], 100 * f0[1], 100 * f0[2], c, b));
  }
  set(std::round(c), std::round(b * 1e4) / 1e4);
  res.parameters.push_back({"driver.c.call_overhead_ns", "ns", "C driver's fixed CPU time per call (both lanes)", c_before, p.real("driver.c.call_overhead_ns")});
  res.parameters.push_back({"driver.c.flush_ns_per_byte", "ns/B", "cache clean per byte of a CPU-written buffer", b_before, p.real("driver.c.flush_ns_per_byte")});
  res.parameters.push_back({"driver.c.invalidate_ns_per_byte", "ns/B", "cache invalidate per byte of a buffer the CPU reads (the same fitted value)", input.real("driver.c.invalidate_ns_per_byte"), p.real("driver.c.invalidate_ns_per_byte")});
}

// 3. One factor on every CPU coefficient <- the CPU column (linear in it).
void fit_cpu_scale(sim::ParamSet& p, CalibrationResult& res, const sim::ParamSet& input, const Status& status) {
  const double target = 0.5 * (kBoard[0].cpu_ms + kBoard[1].cpu_ms);
  for (int it = 0; it < 2; ++it) {
    const double cpu = 0.5 * (measure_end_to_end(p, 64).cpu_ms + measure_end_to_end(p, 512).cpu_ms);
    const double k = target / cpu;
    if (status) status(fmt::format("  cpu scale: CPU column {:.3f} ms (board {:.2f}) -> x{:.5f}", cpu, target, k));
    for (const auto& key : p.keys())
      if (key.rfind("cpu.", 0) == 0) {
        const double before = p.real(key);
        p.set_value(key, std::round(before * k * 1e4) / 1e4, "calibrate");
        if (it == 1) res.parameters.push_back({key, p.spec(key).unit, p.spec(key).doc, input.real(key), p.real(key)});
      }
  }
}
}  // namespace

CalibrationResult calibrate(const sim::ParamSet& input, const std::function<void(const std::string&)>& status) {
  CalibrationResult res{{}, {}, input};
  sim::ParamSet& p = res.params;
  p.set("driver.profile=c");
  fit_read_latency(p, res, status);
  // A model may fit only its own latency (ddr3): the driver's and the CPU's costs are then the
  // wall calibration's (docs/ddr3.md, "Validated without refitting").
  if (memory_calibration(p).fits_host) {
    fit_driver(p, res, input, status);
    fit_cpu_scale(p, res, input, status);
  }
  // Residuals: the calibration rows after the fit.
  for (const auto& r : validate(p, false))
    if (r.board) res.residuals.push_back(r);
  return res;
}

std::optional<std::string> residual_beyond_tolerance(const CalibrationResult& r) {
  for (const ValidationRow& row : r.residuals)
    if (row.error_pct && std::fabs(*row.error_pct) > kCalibrationTolerancePct)
      return fmt::format("{} T={} {}: {:+.2f}% against the board", row.scenario, row.context, row.figure,
                         *row.error_pct);
  return std::nullopt;
}

const Fields<ValidationRow>& validation_row_fields() {
  using R = ValidationRow;
  static const Fields<R> fields{{"scenario", &R::scenario}, {"context", &R::context},   {"figure", &R::figure},
                                {"simulated", &R::simulated}, {"board", &R::board},     {"error_pct", &R::error_pct},
                                {"driver", &R::profile}};
  return fields;
}

const Fields<CalibrationResult::Fitted>& fitted_parameter_fields() {
  using F = CalibrationResult::Fitted;
  static const Fields<F> fields{{"key", &F::key},         {"unit", &F::unit}, {"meaning", &F::meaning},
                                {"before", &F::before},   {"after", &F::after}};
  return fields;
}

}  // namespace bitsim::study
