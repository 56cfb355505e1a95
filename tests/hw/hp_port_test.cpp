// HpPort (CIRCUITS.md 1, docs/hw-timing.md "HP port"): splitting at 16 beats and at 4 KB
// boundaries, in-order routing with `last` per request, B per write request, round-robin
// among masters, DECERR routing, and the outstanding limit seen in the timing.
#include "hw/memory/ddr.h"
#include "hw/interconnect/hp_port.h"

#include <gtest/gtest.h>

#include <deque>
#include <initializer_list>
#include <utility>
#include <vector>

#include "hw/parts/sim_context.h"
#include "base/error.h"
#include "support/clocked_module.h"
#include "support/run_until.h"

namespace bitsim::hw {
namespace {

using test::run_until;

// A PL master for the tests: pushes queued requests (from `start_cycle` on) and write
// beats, pops every read beat and response at once, and records their edges.
class TestMaster : public test::ClockedModule {
 public:
  TestMaster(sc_core::sc_module_name n, Clock& clock) : ClockedModule(n, clock), link(std::string(n)) {}
  AxiMmLink link;
  uint64_t start_cycle = 0;
  std::deque<MemRequest> reads, writes;
  std::deque<WriteBeat> wdata;
  std::vector<ReadBeat> rbeats;
  std::vector<uint64_t> rcycles, ar_cycles, bcycles;
  std::vector<WriteResponse> bresps;

  void write_request(uint64_t addr, const std::vector<uint64_t>& data) {
    writes.push_back(MemRequest{addr, uint32_t(data.size() * 8)});
    for (size_t i = 0; i < data.size(); ++i) {
      WriteBeat w;
      w.data = data[i];
      w.last = i + 1 == data.size();
      wdata.push_back(w);
    }
  }

 private:
  void tick() override {
    const uint64_t now = clock_.cycle();
    if (link.r.valid()) {
      rbeats.push_back(link.r.pop());
      rcycles.push_back(now);
    }
    if (link.b.valid()) {
      bresps.push_back(link.b.pop());
      bcycles.push_back(now);
    }
    if (now < start_cycle) return;
    if (!reads.empty() && link.ar.ready()) {
      link.ar.push(reads.front());
      reads.pop_front();
      ar_cycles.push_back(now);
    }
    if (!writes.empty() && link.aw.ready()) {
      link.aw.push(writes.front());
      writes.pop_front();
    }
    if (!wdata.empty() && link.w.ready()) {
      link.w.push(wdata.front());
      wdata.pop_front();
    }
  }
};

struct Bench {
  explicit Bench(const DdrConfig& dc = {}, const HpPortConfig& hc = {})
      : clock("clock", ClockConfig{}), ddr("ddr", clock, dc), hp("hp0", clock, hc, ddr.port(0)) {}
  Clock clock;
  Ddr ddr;
  HpPort hp;
};

// The bench with one test master attached.
struct MasterBench : Bench {
  explicit MasterBench(const DdrConfig& dc = {}, const HpPortConfig& hc = {}) : Bench(dc, hc), m("m", clock) {
    hp.attach(m.link);
  }
  TestMaster m;
};

// histogram[n] (bursts of n beats) for each n listed.
void expect_bursts(const std::vector<uint64_t>& histogram, std::initializer_list<std::pair<int, uint64_t>> want) {
  for (const auto& [beats, count] : want) EXPECT_EQ(histogram[size_t(beats)], count) << beats << "-beat bursts";
}

void fill(Ddr& ddr, uint64_t addr, size_t beats) {
  for (size_t i = 0; i < beats; ++i) ddr.write64(addr + 8 * i, addr + 8 * i);  // each beat holds its address
}

void expect_request(const TestMaster& m, size_t first, uint64_t addr, size_t beats) {
  ASSERT_GE(m.rbeats.size(), first + beats);
  for (size_t i = 0; i < beats; ++i) {
    const ReadBeat& b = m.rbeats[first + i];
    EXPECT_EQ(b.data, addr + 8 * i) << "beat " << i;
    EXPECT_EQ(b.last, i + 1 == beats) << "beat " << i;
    EXPECT_FALSE(b.error);
  }
}

TEST(HpPort, SplitsAtSixteenBeats) {
  FreshSimContext ctx;
  MasterBench b;
  TestMaster& m = b.m;
  fill(b.ddr, 0x10000, 200);
  m.reads.push_back(MemRequest{0x10000, 200 * 8});
  ASSERT_TRUE(run_until(b.clock, [&] { return m.rbeats.size() == 200; }, 5000));
  expect_request(m, 0, 0x10000, 200);
  const HpPortStats& s = b.hp.stats();
  EXPECT_EQ(s.read_requests, 1u);
  EXPECT_EQ(s.read_bursts, 13u);  // 12 x 16 + 8
  expect_bursts(s.read_burst_beats, {{16, 12}, {8, 1}});
  EXPECT_EQ(s.read_beats, 200u);
}

TEST(HpPort, SplitsAtFourKilobyteBoundaries) {
  FreshSimContext ctx;
  MasterBench b;
  TestMaster& m = b.m;
  fill(b.ddr, 0x0FC0, 16);
  fill(b.ddr, 0x1FF8, 20);
  m.reads.push_back(MemRequest{0x0FC0, 128});     // 8 beats up to 0x1000, then 8
  m.reads.push_back(MemRequest{0x1FF8, 20 * 8});  // 1 beat up to 0x2000, then 16, then 3
  ASSERT_TRUE(run_until(b.clock, [&] { return m.rbeats.size() == 36; }, 5000));
  expect_request(m, 0, 0x0FC0, 16);
  expect_request(m, 16, 0x1FF8, 20);
  const HpPortStats& s = b.hp.stats();
  EXPECT_EQ(s.read_bursts, 5u);
  expect_bursts(s.read_burst_beats, {{8, 2}, {1, 1}, {16, 1}, {3, 1}});
}

// A request pushed at edge m0: the port takes it and issues the burst at m0+1, the DDR
// accepts at m0+2 and returns the first beat at m0+2+read_latency, the port forwards it at
// m0+3+read_latency, and the master sees it at m0+4+read_latency.
TEST(HpPort, ReadLatencyHandWorked) {
  FreshSimContext ctx;
  MasterBench b;
  TestMaster& m = b.m;
  m.start_cycle = 5;
  fill(b.ddr, 0x2000, 4);
  m.reads.push_back(MemRequest{0x2000, 32});
  ASSERT_TRUE(run_until(b.clock, [&] { return m.rbeats.size() == 4; }, 1000));
  const uint64_t m0 = m.ar_cycles.at(0);
  EXPECT_EQ(m0, 5u);
  const uint64_t rl = b.ddr.read_latency_cycles();
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(m.rcycles[i], m0 + 4 + rl + i);
}

// With a long read latency, throughput is max_outstanding_reads x 16 beats per round trip:
// burst k+4 is issued in the edge burst k's last beat returns, so each round of 4 bursts
// takes read_latency + 17 cycles (issue, accept, 16 beats, return), and the master sees the
// last beat of R rounds at m0 + 67 + read_latency + (R-1)(read_latency + 17).
TEST(HpPort, OutstandingLimitShapesThroughput) {
  FreshSimContext ctx;
  DdrConfig dc;
  dc.read_latency_ns = 8000;  // 1000 cycles at 125 MHz
  HpPortConfig hc;
  hc.max_outstanding_reads = 4;
  MasterBench b(dc, hc);
  TestMaster& m = b.m;
  const uint64_t rounds = 8, beats = rounds * 4 * 16;
  fill(b.ddr, 0x40000, beats);
  m.reads.push_back(MemRequest{0x40000, uint32_t(beats * 8)});
  ASSERT_TRUE(run_until(b.clock, [&] { return m.rbeats.size() == beats; }, 20000));
  expect_request(m, 0, 0x40000, beats);
  const uint64_t rl = b.ddr.read_latency_cycles();
  ASSERT_EQ(rl, 1000u);
  const uint64_t m0 = m.ar_cycles.at(0);
  EXPECT_EQ(m.rcycles.back(), m0 + 67 + rl + (rounds - 1) * (rl + 17));
  // Throughput: outstanding x 16 = 64 beats per (latency + 17) cycles, round after round.
  for (uint64_t r = 1; r < rounds; ++r)
    EXPECT_EQ(m.rcycles[64 * r] - m.rcycles[64 * (r - 1)], rl + 17) << "round " << r;
  EXPECT_GT(b.hp.stats().read_stall_cycles, (rounds - 1) * rl);
}

TEST(HpPort, MastersShareRoundRobin) {
  FreshSimContext ctx;
  Bench b;
  TestMaster m0("m0", b.clock), m1("m1", b.clock);
  b.hp.attach(m0.link);
  b.hp.attach(m1.link);
  fill(b.ddr, 0x100000, 512);
  fill(b.ddr, 0x200000, 512);
  m0.reads.push_back(MemRequest{0x100000, 256 * 8});
  m0.reads.push_back(MemRequest{0x100000 + 256 * 8, 256 * 8});
  m1.reads.push_back(MemRequest{0x200000, 512 * 8});
  ASSERT_TRUE(run_until(b.clock, [&] { return m0.rbeats.size() == 512 && m1.rbeats.size() == 512; }, 5000));
  expect_request(m0, 0, 0x100000, 256);
  expect_request(m0, 256, 0x100000 + 256 * 8, 256);
  expect_request(m1, 0, 0x200000, 512);
  // Bursts alternate: the two masters finish within one burst of each other, and the port
  // moves one beat per edge in total.
  const int64_t d = int64_t(m0.rcycles.back()) - int64_t(m1.rcycles.back());
  EXPECT_LE(std::llabs(d), 16);
  const uint64_t first = std::min(m0.rcycles.front(), m1.rcycles.front());
  const uint64_t last = std::max(m0.rcycles.back(), m1.rcycles.back());
  EXPECT_EQ(last - first + 1, 1024u);
}

TEST(HpPort, WritesSplitAndAnswerOncePerRequest) {
  FreshSimContext ctx;
  MasterBench b;
  TestMaster& m = b.m;
  std::vector<uint64_t> a(40), c(3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0xA000 + i;
  for (size_t i = 0; i < c.size(); ++i) c[i] = 0xC000 + i;
  m.write_request(0x0F80, a);  // 16 beats to 0x1000, then 16, then 8
  m.write_request(0x3000, c);
  ASSERT_TRUE(run_until(b.clock, [&] { return m.bresps.size() == 2; }, 5000));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b.ddr.read64(0x0F80 + 8 * i), a[i]);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(b.ddr.read64(0x3000 + 8 * i), c[i]);
  EXPECT_FALSE(m.bresps[0].error);
  EXPECT_FALSE(m.bresps[1].error);
  const HpPortStats& s = b.hp.stats();
  EXPECT_EQ(s.write_requests, 2u);
  EXPECT_EQ(s.write_bursts, 4u);
  expect_bursts(s.write_burst_beats, {{16, 2}, {8, 1}, {3, 1}});
  EXPECT_EQ(s.write_beats, 43u);
}

TEST(HpPort, DecerrReachesTheMaster) {
  FreshSimContext ctx;
  MasterBench b;
  TestMaster& m = b.m;
  m.reads.push_back(MemRequest{0x2000'0000, 24});
  m.write_request(0x1FFF'FFF0, {1, 2, 3, 4});  // second burst half outside: the request answers DECERR
  ASSERT_TRUE(run_until(b.clock, [&] { return m.rbeats.size() == 3 && m.bresps.size() == 1; }, 2000));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(m.rbeats[i].error);
  EXPECT_TRUE(m.rbeats[2].last);
  EXPECT_TRUE(m.bresps[0].error);
  EXPECT_EQ(b.hp.stats().read_errors, 3u);
  EXPECT_EQ(b.hp.stats().write_errors, 1u);
}

TEST(HpPort, ConfigAndAttachErrors) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  Ddr ddr("ddr", clock, DdrConfig{});
  HpPortConfig bad;
  bad.max_burst_beats = 0;
  EXPECT_THROW(HpPort("a", clock, bad, ddr.port(0)), Error);
  bad = {};
  bad.max_outstanding_reads = 0;
  try {
    HpPort p("b", clock, bad, ddr.port(0));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_outstanding_reads"), std::string::npos);
  }
  HpPort hp("hp", clock, HpPortConfig{}, ddr.port(1));
  TestMaster m("m", clock);
  hp.attach(m.link);
  AxiMmLink late("late");
  sc_core::sc_start(clock.period() * 4.0);
  EXPECT_THROW(hp.attach(late), Error);
}

}  // namespace
}  // namespace bitsim::hw
