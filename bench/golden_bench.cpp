// Figures about the foundation's speed (host wall time; not tests, they never fail on a
// number): synthetic weight generation, model load + ternarization, one golden token.
#include <benchmark/benchmark.h>

#include "golden/board_reference.h"
#include "model/synthetic.h"
#include "model/tokenizer.h"

namespace {

using namespace bitsim;

void BM_SyntheticTensor4096x1536(benchmark::State& state) {
  const model::SyntheticSource s(model::Shape::BitnetLarge, 1);
  std::vector<float> buf(4096 * 1536);
  for (auto _ : state) {
    s.read("model.layers.0.mlp.up_proj.weight", {4096, 1536}, buf.data());
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t(buf.size()));
}
BENCHMARK(BM_SyntheticTensor4096x1536)->Unit(benchmark::kMillisecond);

void BM_LoadTernaryModel(benchmark::State& state) {
  const auto shape = state.range(0) ? model::Shape::BitnetLarge : model::Shape::Tiny;
  for (auto _ : state) {
    model::SyntheticSource s(shape, 1);
    auto m = model::load_ternary_model(s, 2);
    benchmark::DoNotOptimize(m.lm_head.trits.data());
  }
}
BENCHMARK(BM_LoadTernaryModel)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_GoldenTokenStep(benchmark::State& state) {
  const auto shape = state.range(0) ? model::Shape::BitnetLarge : model::Shape::Tiny;
  model::SyntheticSource s(shape, 1);
  const auto m = model::load_ternary_model(s, 2);
  model::KvScales scales;
  const size_t n = size_t(m.config.num_layers) * m.config.num_heads;
  scales.k.assign(n, 0.05f);
  scales.v.assign(n, 0.05f);
  golden::BoardReference ref(m, scales, {.threads = int(state.range(1))});
  int tok = 3;
  for (auto _ : state) {
    if (ref.position() >= golden::kMaxContext) ref.reset();
    auto logits = ref.step(tok);
    tok = 3 + (tok * 7) % 200;
    benchmark::DoNotOptimize(logits.data());
  }
}
BENCHMARK(BM_GoldenTokenStep)->Args({0, 1})->Args({1, 1})->Args({1, 2})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
