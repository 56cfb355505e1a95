// Simulation speed of the full Board (cycle fidelity): simulated PL cycles per wall second
// of working runs. Each iteration builds a fresh simulation (FreshSimContext, hw::Board and a
// host::Ps whose program performs the driver's real register accesses over GP0), writes the
// inputs into the simulated DDR through the backdoor, runs the simulation in bounded chunks
// until the program has seen both lanes' S2MM idle, and checks every result word against the
// golden model (a wrong result aborts the benchmark with SkipWithError, so a figure is always
// of a working run). Only the simulation itself is timed (manual time).
//
//   BM_BoardMatmul1MiB     a 1 MiB matmul stream per lane (n = 1536, 3,356 rows, one group),
//                          simple-mode MM2S on mm0 and mm1, S2MM into a result buffer
//   BM_BoardAttentionT512  one attention call at T = 512: per lane 8 heads, SG chains of 3
//                          descriptors per head (header+q, K rows, V rows; EOF on the last
//                          one), S2MM SG one descriptor of 8 x 49 x 8 bytes
//
// Counters: sim_cycles (PL cycles of one iteration), cycles_per_s (simulated cycles per wall
// second of simulation), cycles_per_cpu_s (per second of this thread's CPU time: the same
// figure without the other processes of a shared machine). The speed issue's goal is >= 3
// million cycles per second. A summary (median of the repetitions, 3 unless
// --benchmark_repetitions says otherwise, with min-max) is printed after the table.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <systemc>

#include "golden/board_reference.h"
#include "host/ps.h"
#include "hw/circuits/attention_unit.h"
#include "hw/board.h"
#include "hw/parts/sim_context.h"
#include "hw/parts/sc_kernel.h"
#include "base/error.h"
#include "model/packed_image.h"

// libsystemc requires the symbol; this binary never calls it.
extern "C" int sc_main(int, char**) { return 0; }

namespace {

using namespace bitsim;
namespace R = hw::dma_reg;

constexpr uint64_t kAccessPs = 200'000;  // CPU time of one AXI-Lite access (the driver's default)
constexpr uint64_t kPollGapPs = 1'000'000;  // CPU time between two status polls
constexpr uint64_t kChunkCycles = 65'536;    // simulation chunk
constexpr uint64_t kMaxCycles = 20'000'000;  // a run that needs more is broken

struct Figure {
  std::string name;
  uint64_t cycles = 0;
  double seconds = 0;      // wall
  double cpu_seconds = 0;  // this thread's CPU time (robust to a shared machine)
  int64_t iterations = 0;
};
std::vector<Figure> g_figures;

// The simulated CPU's program: 32-bit register accesses with their CPU cost.
uint64_t dma_base(hw::DmaId d) { return hw::EngineRegistry::board().dma_base(int(d)); }
void wr(host::Ps& ps, hw::DmaId d, uint32_t off, uint32_t v) { ps.write32(dma_base(d) + off, v, kAccessPs); }
uint32_t rd(host::Ps& ps, hw::DmaId d, uint32_t off) { return ps.read32(dma_base(d) + off, kAccessPs); }

// Polls both S2MM channels until idle, as the driver does; an error bit or a halted channel
// ends the program (the benchmark then reports it).
void wait_both_idle(host::Ps& ps, hw::DmaId d0, hw::DmaId d1) {
  for (hw::DmaId d : {d0, d1}) {
    for (;;) {
      const uint32_t sr = rd(ps, d, R::kS2mmDmasr);
      if (sr & (R::kSrErrors | R::kSrHalted)) throw Error("S2MM DMASR reports an error or halt");
      if (sr & R::kSrIdle) break;
      ps.spend(kPollGapPs);
    }
  }
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Runs the simulation in bounded chunks until the PS program has finished; returns the
// wall seconds spent in the simulation and adds its CPU seconds to *cpu.
double run_to_completion(hw::Board& board, host::Ps& ps, double* cpu) {
  const double c0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  while (!ps.finished() && board.clock().cycle() < kMaxCycles)
    bitsim::hw::start_simulation(board.clock().period() * double(kChunkCycles));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *cpu += thread_cpu_seconds() - c0;
  return wall;
}

void report(benchmark::State& state, const char* name, uint64_t cycles, double seconds, double cpu_seconds) {
  const double it = double(state.iterations());
  state.counters["sim_cycles"] = benchmark::Counter(double(cycles) / it);
  state.counters["cycles_per_s"] = benchmark::Counter(seconds > 0 ? double(cycles) / seconds : 0.0);
  state.counters["cycles_per_cpu_s"] = benchmark::Counter(cpu_seconds > 0 ? double(cycles) / cpu_seconds : 0.0);
  g_figures.push_back({name, cycles, seconds, cpu_seconds, state.iterations()});
}

// ---- (a) matmul, 1 MiB per lane ----------------------------------------------------------------

struct MatmulLane {
  model::TernaryMatrix m;
  std::vector<int8_t> x;
  std::vector<uint8_t> stream;
  std::vector<int32_t> golden;  // R results, zero-padded to a whole beat
  uint64_t src = 0, dst = 0;
};

const std::vector<MatmulLane>& matmul_lanes() {
  static const std::vector<MatmulLane> lanes = [] {
    constexpr int n = 1536;
    // 16 + 1536 + R x 312 bytes ~ 1 MiB: R = 3,356 (1,048,624 bytes).
    const int rows = int(((1u << 20) - 16 - n) / model::packed_row_bytes(n)) + 1;
    std::vector<MatmulLane> v(2);
    std::mt19937_64 rng(2024);
    for (int l = 0; l < 2; ++l) {
      MatmulLane& s = v[size_t(l)];
      s.m.rows = rows;
      s.m.cols = n;
      s.m.scale = 1.0f;
      s.m.trits.resize(size_t(rows) * n);
      for (auto& t : s.m.trits) t = int8_t(int(rng() % 3) - 1);
      s.x.resize(n);
      for (auto& e : s.x) e = int8_t(uint8_t(rng()));
      s.stream = model::build_stream({{s.x.data(), n, &s.m, 0, rows}});
      s.golden.assign(size_t(rows + (rows & 1)), 0);
      golden::ternary_matvec(s.m, 0, rows, s.x.data(), s.golden.data());
      s.src = 0x0100'0000 + uint64_t(l) * 0x0020'0000;
      s.dst = 0x0180'0000 + uint64_t(l) * 0x0010'0000;
    }
    return v;
  }();
  return lanes;
}

void BM_BoardMatmul1MiB(benchmark::State& state) {
  const auto& lanes = matmul_lanes();
  uint64_t total_cycles = 0;
  double total_s = 0, total_cpu = 0;
  for (auto _ : state) {
    hw::FreshSimContext ctx;
    hw::Board board("board", hw::BoardConfig{});
    for (const auto& s : lanes) board.memory().write(s.src, s.stream.data(), s.stream.size());
    const hw::DmaId dmas[2] = {hw::DmaId::Mm0, hw::DmaId::Mm1};
    host::Ps ps("ps", [&](host::Ps& p) {
      for (int l = 0; l < 2; ++l) {
        const MatmulLane& s = lanes[size_t(l)];
        wr(p, dmas[l], R::kMm2sDmacr, R::kCrRunStop);
        wr(p, dmas[l], R::kS2mmDmacr, R::kCrRunStop);
        wr(p, dmas[l], R::kS2mmDa, uint32_t(s.dst));
        wr(p, dmas[l], R::kS2mmLength, uint32_t(s.golden.size() * 4));
        wr(p, dmas[l], R::kMm2sSa, uint32_t(s.src));
        wr(p, dmas[l], R::kMm2sLength, uint32_t(s.stream.size()));
      }
      wait_both_idle(p, dmas[0], dmas[1]);
    });
    ps.bus.bind(board.ps_bus);
    const double s = run_to_completion(board, ps, &total_cpu);
    state.SetIterationTime(s);
    total_s += s;
    total_cycles += board.clock().cycle();

    state.PauseTiming();
    std::string err;
    if (!ps.finished())
      err = "the program did not finish within the cycle limit";
    else if (ps.failure())
      err = "the program failed";
    for (int l = 0; l < 2 && err.empty(); ++l) {
      const MatmulLane& ln = lanes[size_t(l)];
      const auto& st = board.dma(dmas[l]).stats();
      if (st.s2mm.errors || st.mm2s.errors || st.s2mm.bytes != ln.golden.size() * 4 || st.mm2s.bytes != ln.stream.size())
        err = "lane " + std::to_string(l) + ": DMA error or short transfer";
      std::vector<int32_t> got(ln.golden.size());
      board.memory().read(ln.dst, got.data(), got.size() * 4);
      if (err.empty() && got != ln.golden) err = "lane " + std::to_string(l) + ": results differ from golden::ternary_matvec";
    }
    state.ResumeTiming();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
  }
  state.SetBytesProcessed(state.iterations() * int64_t(lanes[0].stream.size() + lanes[1].stream.size()));
  report(state, "matmul 1 MiB per lane, both lanes", total_cycles, total_s, total_cpu);
}
BENCHMARK(BM_BoardMatmul1MiB)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- (b) attention at T = 512 -------------------------------------------------------------------

constexpr int kHeadsPerLane = 8;
constexpr int kT = 512;

struct AttentionHead {
  golden::AttentionParams p;
  std::vector<int8_t> q, K, V;
  std::vector<int32_t> result;  // 98 words: acc_0..acc_95, sum, 0
};

struct AttentionLane {
  std::vector<AttentionHead> heads;
  uint64_t base = 0;
  uint64_t mm2s_desc(int i) const { return base + 0x40 * uint64_t(i); }
  uint64_t s2mm_desc() const { return base + 0x800; }
  uint64_t result() const { return base + 0x1000; }
  uint64_t header_q(int h) const { return base + 0x2000 + 0x80 * uint64_t(h); }
  uint64_t k_area(int h) const { return base + 0x10000 + 0x20000 * uint64_t(h); }
  uint64_t v_area(int h) const { return k_area(h) + 0x10000; }
};
constexpr uint32_t kResultBytes = kHeadsPerLane * model::attention_result_beats(model::kBoardHeadDim) * 8;  // 3,136

const std::vector<AttentionLane>& attention_lanes() {
  static const std::vector<AttentionLane> lanes = [] {
    std::vector<AttentionLane> v(2);
    std::mt19937_64 rng(512);
    for (int l = 0; l < 2; ++l) {
      AttentionLane& ln = v[size_t(l)];
      ln.base = 0x0200'0000 + uint64_t(l) * 0x0040'0000;
      for (int h = 0; h < kHeadsPerLane; ++h) {
        AttentionHead hd;
        hd.p.m = 10818 + uint32_t(rng() % (79505 - 10818));
        hd.p.shift = 24;
        auto fill = [&](std::vector<int8_t>& x, size_t n) {
          x.resize(n);
          for (auto& e : x) e = int8_t(uint8_t(rng()));
        };
        fill(hd.q, 96);
        fill(hd.K, size_t(kT) * 96);
        fill(hd.V, size_t(kT) * 96);
        hd.result.assign(98, 0);
        uint32_t sum = 0;
        golden::attention_head(hd.q.data(), hd.K.data(), hd.V.data(), kT, model::kBoardHeadDim, hd.p, hd.result.data(), &sum);
        hd.result[96] = int32_t(sum);
        ln.heads.push_back(std::move(hd));
      }
    }
    return v;
  }();
  return lanes;
}

void put_descriptor(hw::Memory& ddr, uint64_t at, uint64_t next, uint64_t buffer, uint32_t control) {
  uint32_t d[16] = {};
  d[R::kDescNxtdesc / 4] = uint32_t(next);
  d[R::kDescBufferAddress / 4] = uint32_t(buffer);
  d[R::kDescControl / 4] = control;
  ddr.write(at, d, sizeof d);
}

// The CPU's stores before the call: headers + q, K and V rows, the descriptor chains.
void write_attention_inputs(hw::Memory& ddr, const AttentionLane& ln) {
  const int H = kHeadsPerLane;
  for (int h = 0; h < H; ++h) {
    const AttentionHead& hd = ln.heads[size_t(h)];
    model::AttentionHeadHeader hh;
    hh.T = kT;
    hh.m = hd.p.m;
    hh.shift = uint32_t(hd.p.shift);
    hh.last = h + 1 == H;
    const auto words = model::encode_attention_header(hh);
    uint8_t buf[112];
    std::memcpy(buf, words.data(), 16);
    std::memcpy(buf + 16, hd.q.data(), 96);
    ddr.write(ln.header_q(h), buf, sizeof buf);
    ddr.write(ln.k_area(h), hd.K.data(), hd.K.size());
    ddr.write(ln.v_area(h), hd.V.data(), hd.V.size());
    const uint32_t kv = kT * 96;
    put_descriptor(ddr, ln.mm2s_desc(3 * h), ln.mm2s_desc(3 * h + 1), ln.header_q(h), 112u | (h == 0 ? R::kCtrlSof : 0));
    put_descriptor(ddr, ln.mm2s_desc(3 * h + 1), ln.mm2s_desc(3 * h + 2), ln.k_area(h), kv);
    put_descriptor(ddr, ln.mm2s_desc(3 * h + 2), ln.mm2s_desc(3 * h + 3), ln.v_area(h), kv | (h + 1 == H ? R::kCtrlEof : 0));
  }
  put_descriptor(ddr, ln.s2mm_desc(), ln.s2mm_desc(), ln.result(), kResultBytes | R::kCtrlSof | R::kCtrlEof);
}

void BM_BoardAttentionT512(benchmark::State& state) {
  const auto& lanes = attention_lanes();
  uint64_t total_cycles = 0;
  double total_s = 0, total_cpu = 0;
  for (auto _ : state) {
    hw::FreshSimContext ctx;
    hw::Board board("board", hw::BoardConfig{});
    for (const auto& ln : lanes) write_attention_inputs(board.memory(), ln);
    const hw::DmaId dmas[2] = {hw::DmaId::At0, hw::DmaId::At1};
    host::Ps ps("ps", [&](host::Ps& p) {
      for (int l = 0; l < 2; ++l) {
        const AttentionLane& ln = lanes[size_t(l)];
        wr(p, dmas[l], R::kMm2sCurdesc, uint32_t(ln.mm2s_desc(0)));
        wr(p, dmas[l], R::kS2mmCurdesc, uint32_t(ln.s2mm_desc()));
        wr(p, dmas[l], R::kMm2sDmacr, R::kCrRunStop);
        wr(p, dmas[l], R::kS2mmDmacr, R::kCrRunStop);
      }
      for (int l = 0; l < 2; ++l) {
        const AttentionLane& ln = lanes[size_t(l)];
        wr(p, dmas[l], R::kS2mmTaildesc, uint32_t(ln.s2mm_desc()));
        wr(p, dmas[l], R::kMm2sTaildesc, uint32_t(ln.mm2s_desc(3 * kHeadsPerLane - 1)));
      }
      wait_both_idle(p, dmas[0], dmas[1]);
    });
    ps.bus.bind(board.ps_bus);
    const double s = run_to_completion(board, ps, &total_cpu);
    state.SetIterationTime(s);
    total_s += s;
    total_cycles += board.clock().cycle();

    state.PauseTiming();
    std::string err;
    if (!ps.finished())
      err = "the program did not finish within the cycle limit";
    else if (ps.failure())
      err = "the program failed";
    for (int l = 0; l < 2 && err.empty(); ++l) {
      const AttentionLane& ln = lanes[size_t(l)];
      uint32_t status = 0;
      board.memory().read(ln.s2mm_desc() + R::kDescStatus, &status, 4);
      if (!(status & R::kStsCmplt) || (status & R::kStsLengthMask) != kResultBytes)
        err = "lane " + std::to_string(l) + ": S2MM descriptor incomplete or short";
      std::vector<int32_t> got(98);
      for (int h = 0; h < kHeadsPerLane && err.empty(); ++h) {
        board.memory().read(ln.result() + uint64_t(h) * 49 * 8, got.data(), 98 * 4);
        if (got != ln.heads[size_t(h)].result)
          err = "lane " + std::to_string(l) + " head " + std::to_string(h) + ": results differ from golden::attention_head";
      }
    }
    state.ResumeTiming();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
  }
  state.SetBytesProcessed(state.iterations() * int64_t(2 * kHeadsPerLane * model::attention_head_beats(kT, model::kBoardHeadDim) * 8));
  report(state, "attention T=512, 8 heads per lane, both lanes", total_cycles, total_s, total_cpu);
}
BENCHMARK(BM_BoardAttentionT512)->UseManualTime()->Unit(benchmark::kMillisecond);

// The repetitions to summarize: --benchmark_repetitions=N when given, else kDefaultRepetitions
// (added to the arguments through `injected`, so that the table shows the median, spread and
// each run).
constexpr int kDefaultRepetitions = 3;
constexpr double kGoalCyclesPerSecond = 3e6;  // the speed issue's goal for the clocked board

int repetitions_flag(std::vector<char*>& args, std::string& injected) {
  constexpr const char* kFlag = "--benchmark_repetitions=";
  for (char* a : args)
    if (std::strncmp(a, kFlag, std::strlen(kFlag)) == 0) return std::max(1, std::atoi(a + std::strlen(kFlag)));
  injected = std::string(kFlag) + std::to_string(kDefaultRepetitions);
  args.insert(args.begin() + 1, injected.data());
  return kDefaultRepetitions;
}

}  // namespace

int main(int argc, char** argv) {
  ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  sc_core::sc_report_handler::set_actions("/IEEE_Std_1666/deprecated", sc_core::SC_DO_NOTHING);
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  std::vector<char*> args(argv, argv + argc);
  std::string injected;
  const int reps = repetitions_flag(args, injected);
  int n = int(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Google Benchmark runs a benchmark more than once before its repetitions (to find the
  // iteration count): the last `reps` runs of each name are the repetitions.
  std::printf("\nBoard simulation speed (cycle fidelity, simulated PL cycles per wall second; median of %d "
              "repetitions, min-max; goal >= %.0f M/s). Evidence: measured (this host); the PL cycles are "
              "simulated:\n",
              reps, kGoalCyclesPerSecond / 1e6);
  std::vector<std::string> names;
  for (const Figure& f : g_figures)
    if (std::find(names.begin(), names.end(), f.name) == names.end()) names.push_back(f.name);
  for (const std::string& name : names) {
    std::vector<const Figure*> runs;
    for (const Figure& f : g_figures)
      if (f.name == name) runs.push_back(&f);
    if (int(runs.size()) > reps) runs.erase(runs.begin(), runs.end() - reps);
    auto median_of = [&](auto rate_of) {
      std::vector<double> r;
      for (const Figure* f : runs) r.push_back(rate_of(*f));
      std::sort(r.begin(), r.end());
      const size_t k = r.size();
      return std::array<double, 3>{k % 2 ? r[k / 2] : 0.5 * (r[k / 2 - 1] + r[k / 2]), r.front(), r.back()};
    };
    const auto wall = median_of([](const Figure& f) { return f.seconds > 0 ? double(f.cycles) / f.seconds : 0.0; });
    const auto cpu = median_of([](const Figure& f) { return f.cpu_seconds > 0 ? double(f.cycles) / f.cpu_seconds : 0.0; });
    const Figure& last = *runs.back();
    std::printf("  %-46s %7.0f cycles/iteration: %5.2f M cycles per wall s (%.2f-%.2f; per CPU s %.2f M, %.2f-%.2f)  %s\n",
                name.c_str(), double(last.cycles) / double(last.iterations), wall[0] / 1e6, wall[1] / 1e6,
                wall[2] / 1e6, cpu[0] / 1e6, cpu[1] / 1e6, cpu[2] / 1e6,
                wall[0] >= kGoalCyclesPerSecond ? "meets the goal" : "BELOW the goal");
  }
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) == 3) std::printf("  load average after the runs: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  return 0;
}
