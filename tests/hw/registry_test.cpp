// The registries of engines and memory models (hw/circuits/engine_registry.h,
// hw/memory/memory_registry.h): a toy engine and a toy memory model, written here in the test
// tree only, added through the registries alone and run in both fidelities with the same
// cycle counts and the same results.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "hw/board.h"
#include "hw/circuits/engine_lane.h"
#include "hw/circuits/engine_registry.h"
#include "hw/fast/fast_engine.h"
#include "hw/interconnect/dma_registers.h"
#include "hw/memory/memory.h"
#include "hw/memory/memory_registry.h"
#include "hw/parts/fingerprint.h"
#include "sim/simulation.h"

namespace bitsim::hw {
namespace {

// ---- The toy engine: each 8-byte input beat comes back inverted, one result beat per beat.

class InvertDatapath : public LaneDatapath {
 public:
  uint32_t truncated_code() const override { return 1; }
  uint32_t trailing_data_code() const override { return 2; }
  int error_row() const override { return -1; }
  uint32_t queue_entries(int result_delay) const override { return uint32_t(result_delay + 4); }
  uint32_t room_for_next_beat(uint32_t) const override { return 2; }
  void take(EngineLane& lane, const StreamBeat& beat, uint64_t c) override {
    lane.queue(~beat.data, beat.last, c + uint64_t(lane.result_delay()));
    lane.row_done();
    if (beat.last) {
      lane.unit_done();
      lane.end_transfer(true, c);
    }
  }
  void abort(EngineLane&, uint64_t) override {}
};

class InvertEngine : public EngineLanes {
 public:
  InvertEngine(sc_core::sc_module_name name, Clock& clock, uint64_t regs)
      : EngineLanes(name, clock, EngineLaneConfig{3, 2, 8, regs}, [] { return std::make_unique<InvertDatapath>(); }) {}
};

class InvertFastEngine : public FastEngine {
 public:
  bool compute(FastEngineContext& ctx, const std::vector<FastBuffer>& stream, std::string& key,
               std::vector<uint8_t>& results) const override {
    uint64_t total = 0;
    for (const FastBuffer& b : stream) total += b.bytes;
    if (total % 8 != 0) return false;  // the clocked board's framing decides
    key += fmt::format("inv{};", total);
    for (const FastBuffer& b : stream) {
      std::vector<uint8_t> bytes(b.bytes);
      ctx.memory.read(b.addr, bytes.data(), bytes.size());
      for (uint8_t& v : bytes) v = uint8_t(~v);
      results.insert(results.end(), bytes.begin(), bytes.end());
    }
    if (ctx.timing_only) std::fill(results.begin(), results.end(), 0);
    return true;
  }
};

EngineKind invert_kind() {
  EngineKind k;
  k.name = "invert";
  k.regs = 0x43C2'0000;
  k.dma_names = {"inv0", "inv1"};
  k.dma_bases = {0x4044'0000, 0x4045'0000};
  k.stream = "raw 64-bit words";
  k.unit = "transfer";
  k.dma_sg = [](const BoardConfig&) { return false; };
  k.clocked = [](sc_core::sc_module_name name, Clock& clock, const BoardConfig&, uint64_t regs) {
    return std::unique_ptr<EngineLanes>(std::make_unique<InvertEngine>(name, clock, regs));
  };
  k.fast = [](const BoardConfig&) { return std::unique_ptr<FastEngine>(std::make_unique<InvertFastEngine>()); };
  k.error_name = [](uint32_t code) { return fmt::format("invert error {}", code); };
  return k;
}

// ---- The toy memory: a fixed latency, one beat per port and direction per edge, no wall.

class FixedLatencyMemory : public Memory {
 public:
  SC_HAS_PROCESS(FixedLatencyMemory);
  static constexpr uint64_t kLatency = 30;  // edges from AR to the first read beat
  FixedLatencyMemory(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config)
      : Memory(name, clock, config), ports_(size_t(config.ports)) {
    SC_METHOD(tick);
    sensitive << clock_.listen();
    dont_initialize();
  }
  uint64_t state_fingerprint(uint64_t) const override {
    Fingerprint f;
    for (const Port& p : ports_) f.add(p.reads.size()).add(p.writes.size()).add(p.responses.size());
    return f.value();
  }

 private:
  struct Read {
    uint64_t addr, due;
    uint32_t beats, done, tag;
    bool error;
  };
  struct Write {
    uint64_t addr;
    uint32_t beats, done, tag;
  };
  struct Port {
    std::deque<Read> reads;
    std::deque<Write> writes;
    std::deque<uint32_t> responses;
  };
  bool idle() const {
    for (size_t i = 0; i < ports_.size(); ++i)
      if (!ports_[i].reads.empty() || !ports_[i].writes.empty() || !ports_[i].responses.empty() ||
          links_[i]->ar.valid() || links_[i]->aw.valid())
        return false;
    return true;
  }
  void tick() {
    if (!awake_at_edge()) return;
    const uint64_t now = clock_.cycle();
    for (size_t i = 0; i < ports_.size(); ++i) {
      Port& p = ports_[i];
      DdrPortLink& l = *links_[i];
      DdrPortStats& ps = stats_.ports[i];
      if (l.ar.valid()) {
        const DdrBurst b = l.ar.pop();
        heard(now, int(i), false, b);
        p.reads.push_back(Read{b.addr, now + kLatency, b.beats, 0, b.tag, b.addr + b.beats * 8ull > config_.size_bytes});
      }
      if (l.aw.valid()) {
        const DdrBurst b = l.aw.pop();
        heard(now, int(i), true, b);
        p.writes.push_back(Write{b.addr, b.beats, 0, b.tag});
      }
      if (!p.responses.empty() && l.b.ready()) {
        l.b.push(DdrWriteResponse{p.responses.front(), false});
        p.responses.pop_front();
        completed(now, int(i), true);
      }
      if (!p.reads.empty() && p.reads.front().due <= now && l.r.ready()) {
        note_busy(ps, now);
        if (emit_read_beat(*this, p.reads.front(), l, ps)) p.reads.pop_front(), completed(now, int(i), false);
      }
      if (!p.writes.empty() && l.w.valid()) {
        Write& w = p.writes.front();
        const WriteBeat beat = l.w.pop();
        bus_write_beat(w.addr + uint64_t(w.done) * 8, beat.data, beat.strobe);
        ps.bytes_written += 8;
        if (++w.done == w.beats) {
          ++ps.write_bursts;
          mem_.notify(w.addr, size_t(w.beats) * 8);
          p.responses.push_back(w.tag);
          p.writes.pop_front();
        }
      }
    }
    if (idle()) sleep_until_request();
  }
  std::vector<Port> ports_;
};

MemoryKind fixed_latency_kind() {
  MemoryKind k;
  k.name = "fixed-latency";
  k.clocked = [](sc_core::sc_module_name name, Clock& clock, const DdrConfig& c) {
    return std::unique_ptr<Memory>(std::make_unique<FixedLatencyMemory>(name, clock, c));
  };
  k.calibration = {"ddr.read_latency_ns", "unused by this model", 1000, 1, true};
  return k;
}

BoardConfig toy_board(bool toy_memory) {
  BoardConfig c;
  auto engines = std::make_shared<EngineRegistry>(EngineRegistry::board());
  engines->add(invert_kind());
  c.engines = engines;
  if (toy_memory) {
    auto models = std::make_shared<MemoryRegistry>(MemoryRegistry::board());
    models->add(fixed_latency_kind());
    c.ddr.models = models;
    c.ddr.model = "fixed-latency";
  }
  return c;
}

constexpr int kCalls = 3;

struct Outcome {
  std::vector<uint8_t> results;
  std::vector<host::TransferRecord> transfers;
  uint64_t end_ps = 0;
  hw::FastBoardStats fast;
};

// Three transfers of `words` words through the invert engine's lane 0 (simple mode), each
// polled to completion, each on other buffers: the second and third the same batch shape
// (the first opens on channels that have not run yet).
Outcome run_invert(const BoardConfig& board, sim::Fidelity f, int words) {
  namespace R = dma_reg;
  const EngineRegistry& reg = *board.engines;
  const int d = EngineRegistry::dma_of(reg.find("invert"), 0);
  const uint64_t dma = reg.dma_base(d);
  const auto machine = sim::make_machine(board, sim::SimulationOptions(f, 1));
  Outcome out;
  machine->run([&] {
    host::Platform& p = machine->platform();
    constexpr uint64_t kAccess = 200'000;
    for (uint32_t base : {0u, R::kS2mmOffset}) p.write32(dma + base + R::kMm2sDmacr, R::kCrRunStop, kAccess);
    for (int call = 0; call < kCalls; ++call) {
      const uint64_t src = 0x0100'0000 + uint64_t(call) * 0x10'0000, dst = src + 0x8'0000;
      std::vector<uint8_t> in(size_t(words) * 8);
      for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 7 + call);
      p.mem_write(src, in.data(), in.size());
      p.write32(dma + R::kS2mmDa, uint32_t(dst), kAccess);
      p.write32(dma + R::kS2mmLength, uint32_t(in.size()), kAccess);
      p.write32(dma + R::kMm2sSa, uint32_t(src), kAccess);
      p.write32(dma + R::kMm2sLength, uint32_t(in.size()), kAccess);
      for (;;) {
        const uint32_t sr = p.read32(dma + R::kS2mmDmasr, kAccess);
        ASSERT_EQ(sr & R::kSrErrors, 0u) << fmt::format("S2MM DMASR 0x{:08x}", sr);
        if (sr & R::kSrIdle) break;
        p.spend(1'000'000);
      }
      std::vector<uint8_t> got(in.size());
      p.mem_read(dst, got.data(), got.size());
      out.results.insert(out.results.end(), got.begin(), got.end());
    }
    out.transfers = p.transfers();
    out.end_ps = p.now_ps();
  });
  out.fast = machine->fast_stats();
  return out;
}

void expect_inverted(const Outcome& o, int words) {
  ASSERT_EQ(o.results.size(), size_t(words) * 8 * kCalls);
  for (int call = 0; call < kCalls; ++call)
    for (size_t i = 0; i < size_t(words) * 8; ++i)
      ASSERT_EQ(o.results[size_t(call) * words * 8 + i], uint8_t(~uint8_t(i * 7 + call))) << call << " " << i;
}

// The fast fidelity gave the clocked board's transfers: every start and completion edge.
void expect_same_transfers(const Outcome& cycle, const Outcome& fast) {
  ASSERT_EQ(fast.transfers.size(), cycle.transfers.size());
  for (size_t i = 0; i < cycle.transfers.size(); ++i) {
    EXPECT_EQ(fast.transfers[i].dma, cycle.transfers[i].dma) << i;
    EXPECT_EQ(fast.transfers[i].start, cycle.transfers[i].start) << i;
    EXPECT_EQ(fast.transfers[i].completion, cycle.transfers[i].completion) << i;
  }
  EXPECT_EQ(fast.end_ps, cycle.end_ps);
}

// The transfers on both fidelities, each result checked, the two compared.
std::pair<Outcome, Outcome> run_both(const BoardConfig& board, int words) {
  Outcome cycle = run_invert(board, sim::Fidelity::kCycle, words);
  Outcome fast = run_invert(board, sim::Fidelity::kFast, words);
  expect_inverted(cycle, words);
  expect_inverted(fast, words);
  expect_same_transfers(cycle, fast);
  return {std::move(cycle), std::move(fast)};
}

TEST(Registry, TheShippedBoardIsMatmulThenAttentionOnFourDmas) {
  const EngineRegistry& r = EngineRegistry::board();
  ASSERT_EQ(r.count(), 2);
  EXPECT_EQ(r[0].name, "matmul");
  EXPECT_EQ(r[1].name, "attention");
  EXPECT_EQ(r.dma_count(), 4);
  EXPECT_EQ(r.dma_name(0), "mm0");
  EXPECT_EQ(r.dma_name(3), "at1");
  EXPECT_EQ(r.dma_at(r.dma_base(2) + 0x30), 2);
  EXPECT_EQ(r.engine_at(r[1].regs + 0x104), 1);
  EXPECT_EQ(r.dma_at(0x1234), -1);
  EXPECT_EQ(MemoryRegistry::board().names(), (std::vector<std::string>{"wall", "latency-bandwidth", "ddr3"}));
}

TEST(Registry, AToyEngineAddedThroughTheRegistryAloneRunsInBothFidelitiesWithTheSameCycles) {
  const auto [cycle, fast] = run_both(toy_board(false), 96);
  ASSERT_EQ(cycle.transfers.size(), size_t(2 * kCalls));  // MM2S and S2MM of each call
  for (const auto& t : cycle.transfers) EXPECT_EQ(t.dma, 4) << "the toy's lane 0 DMA follows the shipped four";
  EXPECT_EQ(fast.fast.oracle_runs, 2u) << "the third call is the second's shape";
  EXPECT_EQ(fast.fast.cache_hits, 1u);
}

TEST(Registry, AToyMemoryModelAddedThroughTheRegistryAloneRunsInBothFidelitiesWithTheSameCycles) {
  const auto [cycle, fast] = run_both(toy_board(true), 64);
  // The toy's timing differs from the wall's: the model the registry named did run.
  const Outcome wall = run_invert(toy_board(false), sim::Fidelity::kCycle, 64);
  EXPECT_NE(wall.transfers.back().completion, cycle.transfers.back().completion);
}

TEST(Registry, ANameOutsideTheRegistryIsRefusedNamingTheChoices) {
  BoardConfig c;
  c.ddr.model = "fixed-latency";
  try {
    c.validate("board");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ddr.model = 'fixed-latency' is not one of: wall, latency-bandwidth, ddr3"),
              std::string::npos)
        << e.what();
  }
  EngineRegistry r = EngineRegistry::board();
  EngineKind clash = invert_kind();
  clash.dma_bases[1] = r.dma_base(1) + 0x100;
  EXPECT_THROW(r.add(clash), Error);
  EXPECT_THROW(r.add(matmul_engine_kind()), Error);
}

}  // namespace
}  // namespace bitsim::hw
