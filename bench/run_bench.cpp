// The simulator's own speed on a whole model (default synthetic:bitnet-large; the
// environment variable BITSIM_BENCH_MODEL overrides it): figures only, never a failure.
//
//   BM_FastToken    one token in fast fidelity, functional (the engines compute), no golden
//                   check, on a warm board (decoded weights and timing cache filled by one
//                   untimed token); positions walk 0..511. Wall time per token; counters:
//                   simulated ms per token, simulated tok/s per wall second.
//   BM_CycleToken   one token at T=1 on the clocked SystemC board (Iterations(1)): wall time
//                   per token (timed in the PS thread); counter: PL cycles per wall second.
//
// The model is loaded and its K/V scales calibrated once, before the first benchmark (not
// timed). `bitsim bench` reports the same quantities with the goals.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <optional>

#include "golden/board_reference.h"
#include "model/model_loader.h"
#include "model/tokenizer.h"
#include "study/bench.h"
#include "sim/board_config.h"

// libsystemc requires the symbol; main() below is Google Benchmark's.
extern "C" int sc_main(int, char**) { return 0; }

namespace {

using namespace bitsim;

struct Loaded {
  sim::SimConfig cfg;
  model::TernaryModel model;
  model::KvScales scales;
  std::vector<int> ids;
};

const Loaded& loaded() {
  static const std::unique_ptr<Loaded> l = [] {
    const char* env = std::getenv("BITSIM_BENCH_MODEL");
    const std::string spec = env && *env ? env : "synthetic:bitnet-large";
    sim::ParamSet p = sim::board_params();
    const std::string file = sim::default_config_path();
    if (!file.empty()) p.load_toml(file);
    auto source = model::open_model_source(spec);
    const auto mc = source->config();
    auto tok = model::select_tokenizer(std::nullopt, model::model_folder(spec), mc.vocab_size);
    const auto calib = golden::calibration_tokens(*tok, mc.bos_token_id);
    auto r = std::make_unique<Loaded>(Loaded{sim::make_sim_config(p), model::load_ternary_model(*source, 2), {}, {}});
    r->scales = golden::calibrate_kv_scales(r->model, calib, 2);
    r->ids = study::bench_token_ids(calib, golden::kMaxContext);
    return r;
  }();
  return *l;
}

void BM_FastToken(benchmark::State& state) {
  const Loaded& l = loaded();
  study::FastTokenRunner runner(l.cfg, l.model, l.scales, int(state.range(0)));
  runner.step(l.ids[0], 0);  // warm-up, untimed
  int pos = 0;
  double sim_s = 0, wall_s = 0;
  for (auto _ : state) {
    const study::TimedToken t = runner.step(l.ids[size_t(pos)], pos);
    state.SetIterationTime(t.wall_s);
    sim_s += double(t.timing.total_ps()) * 1e-12;
    wall_s += t.wall_s;
    pos = (pos + 1) % golden::kMaxContext;
  }
  const double n = double(state.iterations());
  state.counters["simulated_ms"] = benchmark::Counter(1e3 * sim_s / n);
  state.counters["sim_tok_per_wall_s"] = benchmark::Counter(wall_s > 0 ? n / wall_s : 0.0);
  state.counters["wall_ms_per_token"] = benchmark::Counter(1e3 * wall_s / n);
}
BENCHMARK(BM_FastToken)->Arg(2)->ArgName("threads")->UseManualTime()->Unit(benchmark::kMillisecond)
    ->MinTime(5.0);

void BM_CycleToken(benchmark::State& state) {
  const Loaded& l = loaded();
  for (auto _ : state) {
    const auto toks = study::cycle_tokens_timed(l.cfg, l.model, l.scales, {l.ids[0]});
    const study::TimedToken& t = toks.at(0);
    state.SetIterationTime(t.wall_s);
    const double cycles = double(t.timing.total_ps()) * 1e-12 * l.cfg.board.clock.mhz * 1e6;
    state.counters["simulated_ms"] = benchmark::Counter(double(t.timing.total_ps()) * 1e-9);
    state.counters["pl_cycles_per_wall_s"] = benchmark::Counter(t.wall_s > 0 ? cycles / t.wall_s : 0.0);
    state.counters["wall_ms_per_token"] = benchmark::Counter(1e3 * t.wall_s);
  }
}
BENCHMARK(BM_CycleToken)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
