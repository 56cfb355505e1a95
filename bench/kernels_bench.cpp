// Fast-fidelity kernels (hw/fast/fast_kernels.h): figures only, never a failure on a number.
//
//   BM_DecodeModel         the whole bitnet-large packed image (24 layers + lm_head, 728M
//                          weights) decoded into the cached form
//   BM_TokenMatmuls        every matrix of one bitnet-large token (24 x 7 + lm_head), each
//                          its own cached matrix (the weights stream from DRAM, as in a real
//                          run): ms per token and GMAC/s, per kernel and thread count
//   BM_ReadCachedModel     a plain (prefetched) read of the same 182 MB: the memory-bandwidth
//                          floor
//   BM_LayerMatmuls /      one layer's 7 matrices, the lm_head (hot in the host's caches
//   BM_LmHead              after the first iteration): GMAC/s and the per-token extrapolation
//                          24 x layer + lm_head
//   BM_GoldenLayer /       golden::parallel_matvec (threads 2) on the same layer / lm_head,
//   BM_GoldenLmHead        extrapolated the same way
//   BM_MatvecPackedLmHead  matvec_packed (no cache) on the lm_head rows
//   BM_Attention           attention_head at T = 512 over 384 distinct heads (the K/V of a
//                          full context, 37.7 MB): ms per token, per kernel; and golden's
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "golden/board_reference.h"
#include "hw/fast/fast_kernels.h"
#include "model/packed_image.h"

// libsystemc requires the symbol; this binary never calls it.
extern "C" int sc_main(int, char**) { return 0; }

namespace {

using namespace bitsim;
using hw::fast::DecodedRows;
using hw::fast::Kernel;
using hw::fast::Workers;

constexpr int kHidden = 1536, kFfn = 4096, kLayers = 24, kVocab = 32002, kHeads = 16;
constexpr int kHeadDim = bitsim::model::kBoardHeadDim, kContext = 512;  // the board's unit

struct Shape {
  int rows, n;
};
// One layer in token order: q, k, v, o, gate, up, down.
constexpr Shape kLayerShapes[7] = {{kHidden, kHidden}, {kHidden, kHidden}, {kHidden, kHidden},
                                   {kHidden, kHidden}, {kFfn, kHidden},    {kFfn, kHidden},
                                   {kHidden, kFfn}};
constexpr Shape kLmHead = {kVocab, kHidden};

double layer_macs() {
  double s = 0;
  for (const Shape& sh : kLayerShapes) s += double(sh.rows) * sh.n;
  return s;
}
double token_macs() { return kLayers * layer_macs() + double(kLmHead.rows) * kLmHead.n; }

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Random valid packed rows (data bytes uniform over 0..242, padding bytes 0).
std::vector<uint8_t> random_packed(Shape sh, uint64_t seed) {
  const size_t stride = model::packed_row_bytes(sh.n), data = size_t(sh.n + 4) / 5;
  std::vector<uint8_t> out(stride * size_t(sh.rows), 0);
  uint64_t s = seed;
  for (int r = 0; r < sh.rows; ++r) {
    uint8_t* row = out.data() + size_t(r) * stride;
    for (size_t k = 0; k < data; k += 8) {
      uint64_t v = splitmix(s);
      for (size_t i = k; i < std::min(data, k + 8); ++i, v >>= 8) row[i] = uint8_t(((v & 0xFF) * 243) >> 8);
    }
  }
  return out;
}

model::TernaryMatrix unpack(const std::vector<uint8_t>& packed, Shape sh) {
  model::TernaryMatrix m;
  m.rows = sh.rows;
  m.cols = sh.n;
  m.scale = 1;
  m.trits.resize(size_t(sh.rows) * sh.n);
  const size_t stride = model::packed_row_bytes(sh.n);
  for (int r = 0; r < sh.rows; ++r)
    model::unpack_row(packed.data() + size_t(r) * stride, sh.n, m.trits.data() + size_t(r) * sh.n);
  return m;
}

std::vector<int8_t> random_x(int n, uint64_t seed) {
  std::vector<int8_t> x(static_cast<size_t>(n));
  uint64_t s = seed;
  for (auto& v : x) v = int8_t(splitmix(s) & 0xFF);
  return x;
}

// The whole model: packed images (kept for the decode benchmark) and the cached form.
struct Model {
  std::vector<std::vector<uint8_t>> packed;  // 24 * 7 + 1 matrices
  std::vector<Shape> shapes;
  std::vector<DecodedRows> decoded;
};
const Model& model_instance() {
  static const Model m = [] {
    Model m;
    for (int l = 0; l < kLayers; ++l)
      for (const Shape& sh : kLayerShapes) m.shapes.push_back(sh);
    m.shapes.push_back(kLmHead);
    for (size_t i = 0; i < m.shapes.size(); ++i) {
      m.packed.push_back(random_packed(m.shapes[i], 1000 + i));
      DecodedRows d;
      int bad = -1;
      d.decode(m.packed.back().data(), m.shapes[i].rows, m.shapes[i].n, &bad, 2);
      m.decoded.push_back(std::move(d));
    }
    return m;
  }();
  return m;
}

// One layer and the lm_head as TernaryMatrix, for golden (the first layer of the model).
struct GoldenSet {
  std::vector<model::TernaryMatrix> layer;
  model::TernaryMatrix lm_head;
};
const GoldenSet& golden_set() {
  static const GoldenSet g = [] {
    const Model& m = model_instance();
    GoldenSet g;
    for (int i = 0; i < 7; ++i) g.layer.push_back(unpack(m.packed[size_t(i)], m.shapes[size_t(i)]));
    g.lm_head = unpack(m.packed.back(), kLmHead);
    return g;
  }();
  return g;
}

Kernel kernel_arg(int64_t v) { return static_cast<Kernel>(v); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// GMAC/s of the loop, and the ms per bitnet-large token if every MAC of the token ran at
// that rate (token_fraction = this iteration's share of the token's MACs).
void set_matvec_counters(benchmark::State& state, double seconds, double macs_per_iter,
                         double token_fraction) {
  const double per_iter = seconds / double(std::max<int64_t>(1, state.iterations()));
  state.counters["GMAC/s"] = macs_per_iter / per_iter * 1e-9;
  state.counters["token_ms"] = per_iter / token_fraction * 1e3;
}

// ---- decode ------------------------------------------------------------------------------

void BM_DecodeModel(benchmark::State& state) {
  const Model& m = model_instance();
  const int threads = int(state.range(0));
  std::vector<DecodedRows> out(m.shapes.size());
  for (auto _ : state) {
    for (size_t i = 0; i < m.shapes.size(); ++i) {
      int bad = -1;
      out[i].decode(m.packed[i].data(), m.shapes[i].rows, m.shapes[i].n, &bad, threads);
    }
    benchmark::ClobberMemory();
  }
  size_t packed = 0, cached = 0;
  for (size_t i = 0; i < m.shapes.size(); ++i) {
    packed += m.packed[i].size();
    cached += out[i].bytes();
  }
  state.counters["packed_MB"] = double(packed) / 1e6;
  state.counters["cached_MB"] = double(cached) / 1e6;
  state.counters["bits_per_weight"] = 8.0 * double(cached) / token_macs();
}
BENCHMARK(BM_DecodeModel)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

// ---- a whole token's matmuls -------------------------------------------------------------

void BM_TokenMatmuls(benchmark::State& state) {
  const Model& m = model_instance();
  const Kernel kernel = kernel_arg(state.range(0));
  if (!hw::fast::kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  Workers workers(int(state.range(1)));
  const auto x = random_x(kFfn, 7);
  std::vector<int32_t> acc(kVocab);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (const DecodedRows& d : m.decoded) d.matvec(x.data(), acc.data(), workers, kernel);
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetLabel(hw::fast::kernel_name(hw::fast::resolve_kernel(kernel)));
  set_matvec_counters(state, seconds_since(t0), token_macs(), 1.0);
}
BENCHMARK(BM_TokenMatmuls)
    ->ArgNames({"kernel", "threads"})
    ->Args({int(Kernel::Auto), 1})
    ->Args({int(Kernel::Auto), 2})
    ->Args({int(Kernel::Avx2), 1})
    ->Args({int(Kernel::Avx2), 2})
    ->Args({int(Kernel::Portable), 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

// Per-call thread start (matvec(x, acc, threads)) instead of the pool.
void BM_TokenMatmulsSpawn(benchmark::State& state) {
  const Model& m = model_instance();
  const auto x = random_x(kFfn, 7);
  std::vector<int32_t> acc(kVocab);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (const DecodedRows& d : m.decoded) d.matvec(x.data(), acc.data(), 2);
    benchmark::DoNotOptimize(acc.data());
  }
  set_matvec_counters(state, seconds_since(t0), token_macs(), 1.0);
}
BENCHMARK(BM_TokenMatmulsSpawn)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// The host's read bandwidth over the same bytes (every cached matrix once): the floor of
// BM_TokenMatmuls (its matvec is memory-bandwidth bound).
void BM_ReadCachedModel(benchmark::State& state) {
  const Model& m = model_instance();
  size_t bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    uint64_t acc[8] = {};
    bytes = 0;
    for (const DecodedRows& d : m.decoded) {
      const auto* p = reinterpret_cast<const uint64_t*>(d.data());
      const size_t words = size_t(d.rows()) * d.row_stride() / 8;  // a multiple of 8
      for (size_t i = 0; i < words; i += 8) {
        // The same software prefetch distance as the kernels (the hardware prefetchers alone
        // reach about half the bandwidth on the reference host).
        __builtin_prefetch(p + i + 384);
        for (int j = 0; j < 8; ++j) acc[j] += p[i + size_t(j)];
      }
      bytes += words * 8;
    }
    benchmark::DoNotOptimize(acc);
  }
  const double per_iter = seconds_since(t0) / double(std::max<int64_t>(1, state.iterations()));
  state.counters["GB/s"] = double(bytes) / per_iter * 1e-9;
  state.counters["MB"] = double(bytes) * 1e-6;
}
BENCHMARK(BM_ReadCachedModel)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// ---- one layer / the lm_head, extrapolated ----------------------------------------------

void BM_LayerMatmuls(benchmark::State& state) {
  const Model& m = model_instance();
  Workers workers(int(state.range(0)));
  const auto x = random_x(kFfn, 7);
  std::vector<int32_t> acc(kVocab);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (int i = 0; i < 7; ++i) m.decoded[size_t(i)].matvec(x.data(), acc.data(), workers);
    benchmark::DoNotOptimize(acc.data());
  }
  set_matvec_counters(state, seconds_since(t0), layer_macs(), layer_macs() / token_macs());
}
BENCHMARK(BM_LayerMatmuls)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LmHead(benchmark::State& state) {
  const Model& m = model_instance();
  Workers workers(int(state.range(0)));
  const auto x = random_x(kHidden, 7);
  std::vector<int32_t> acc(kVocab);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    m.decoded.back().matvec(x.data(), acc.data(), workers);
    benchmark::DoNotOptimize(acc.data());
  }
  const double macs = double(kLmHead.rows) * kLmHead.n;
  set_matvec_counters(state, seconds_since(t0), macs, macs / token_macs());
}
BENCHMARK(BM_LmHead)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_MatvecPackedLmHead(benchmark::State& state) {
  const Model& m = model_instance();
  const auto x = random_x(kHidden, 7);
  std::vector<int32_t> acc(kVocab);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    hw::fast::matvec_packed(m.packed.back().data(), kLmHead.rows, kLmHead.n, x.data(), acc.data());
    benchmark::DoNotOptimize(acc.data());
  }
  const double macs = double(kLmHead.rows) * kLmHead.n;
  set_matvec_counters(state, seconds_since(t0), macs, macs / token_macs());
}
BENCHMARK(BM_MatvecPackedLmHead)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GoldenLayer(benchmark::State& state) {
  const GoldenSet& g = golden_set();
  const auto x = random_x(kFfn, 7);
  std::vector<int32_t> acc(kVocab);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (const auto& w : g.layer) golden::parallel_matvec(w, x.data(), acc.data(), 2);
    benchmark::DoNotOptimize(acc.data());
  }
  set_matvec_counters(state, seconds_since(t0), layer_macs(), layer_macs() / token_macs());
}
BENCHMARK(BM_GoldenLayer)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GoldenLmHead(benchmark::State& state) {
  const GoldenSet& g = golden_set();
  const auto x = random_x(kHidden, 7);
  std::vector<int32_t> acc(kVocab);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    golden::parallel_matvec(g.lm_head, x.data(), acc.data(), 2);
    benchmark::DoNotOptimize(acc.data());
  }
  const double macs = double(kLmHead.rows) * kLmHead.n;
  set_matvec_counters(state, seconds_since(t0), macs, macs / token_macs());
}
BENCHMARK(BM_GoldenLmHead)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- attention ---------------------------------------------------------------------------

struct KvCache {
  std::vector<int8_t> q, K, V;  // per head: q[96], K/V [512][96]
};
const KvCache& kv_cache() {
  static const KvCache c = [] {
    const int heads = kLayers * kHeads;
    KvCache c;
    c.q = random_x(heads * kHeadDim, 1);
    c.K = random_x(heads * kContext * kHeadDim, 2);
    c.V = random_x(heads * kContext * kHeadDim, 3);
    // Smaller q so that the scores spread over the exponent table.
    for (auto& v : c.q) v = int8_t(v / 16);
    return c;
  }();
  return c;
}

// One iteration = the 384 heads of a token at T = 512 (arg 1: golden instead of fast).
void BM_Attention(benchmark::State& state) {
  const KvCache& c = kv_cache();
  const Kernel kernel = kernel_arg(state.range(0));
  const bool golden = state.range(1) != 0;
  if (!hw::fast::kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const int heads = kLayers * kHeads;
  const size_t kv = size_t(kContext) * kHeadDim;
  int32_t acc[kHeadDim];
  uint32_t sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (int h = 0; h < heads; ++h) {
      const int8_t* q = c.q.data() + size_t(h) * kHeadDim;
      if (golden)
        golden::attention_head(q, c.K.data() + h * kv, c.V.data() + h * kv, kContext, kHeadDim,
                               {40000, 24, false}, acc, &sum);
      else
        hw::fast::attention_head(q, c.K.data() + h * kv, c.V.data() + h * kv, kContext, kHeadDim, 40000, 24,
                                 false, acc, &sum, kernel);
      benchmark::DoNotOptimize(acc);
    }
  }
  state.SetLabel(golden ? "golden" : hw::fast::kernel_name(hw::fast::resolve_kernel(kernel)));
  const double per_iter = seconds_since(t0) / double(std::max<int64_t>(1, state.iterations()));
  state.counters["us_per_head"] = per_iter / heads * 1e6;
  state.counters["GMAC/s"] = 2.0 * heads * kContext * kHeadDim / per_iter * 1e-9;
}
BENCHMARK(BM_Attention)
    ->ArgNames({"kernel", "golden"})
    ->Args({int(Kernel::Auto), 0})
    ->Args({int(Kernel::Avx2), 0})
    ->Args({int(Kernel::Portable), 0})
    ->Args({int(Kernel::Auto), 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
