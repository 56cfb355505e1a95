// Ddr3Memory (ddr.model = ddr3, docs/ddr3.md "The memory on the board"): read beats leave
// once their DRAM burst has completed, writes are answered once theirs has, DECERR outside
// the device, and the state carried across an idle gap: a memory opened from it times the
// next burst as the memory that idled does, and the fast side's advance() equals the clocked
// memory idling.
#include "hw/memory/ddr3_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "hw/parts/sim_context.h"
#include "support/ddr_port_driver.h"
#include "support/error_of.h"
#include "support/run_until.h"

namespace bitsim::hw {
namespace {

using test::error_of;
using test::PortDriver;
using test::run_until;

// The board's ddr3, without the controller's latency (the hand figures are the device's).
DdrConfig ddr3_config() {
  DdrConfig c;
  c.model = "ddr3";
  c.ddr3.ctrl_latency_ns = 0;
  return c;
}

// Runs the clock to edge `edge` exactly (the driver listens at every edge: no edge is gated).
void run_to(const Clock& clock, uint64_t edge) {
  if (clock.cycle() < edge) sc_core::sc_start(clock.period() * double(edge - clock.cycle()));
}

// The edges at which a read burst's beats leave a ddr3 memory that accepts it at edge `a`
// from an idle, fresh device, computed from the engine and the crossing directly: beat k may
// leave at the PL edge its DRAM burst's completion is seen, and not before the edge after
// the one before it.
std::vector<uint64_t> expected_read_edges(const DdrConfig& c, int port, uint64_t addr, uint32_t beats, uint64_t a) {
  const Ddr3Crossing x = ddr3_board_clock(c.ddr3, 8000);
  Ddr3Timing t = ddr3_board_engine(c.ddr3, x);
  t.submit(Ddr3Request{x.device(a), Ddr3Memory::controller_port(c.ddr3, port), false, addr, beats * 8}, 0);
  std::vector<uint64_t> ends;
  while (const auto s = t.step()) ends.push_back(s->end);
  std::vector<uint64_t> out;
  for (uint32_t k = 0; k < beats; ++k) {
    uint64_t e = std::max(a + 1, x.edge(ends.at((addr % 16 / 8 + k) / 2)));
    if (!out.empty()) e = std::max(e, out.back() + 1);
    out.push_back(e);
  }
  return out;
}

TEST(Ddr3Memory, ReadBeatsLeaveAsTheirDramBurstsComplete) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{125.0});
  const DdrConfig c = ddr3_config();
  const std::unique_ptr<Memory> m = make_memory("ddr", clock, c);
  ASSERT_NE(dynamic_cast<Ddr3Memory*>(m.get()), nullptr);
  PortDriver drv("drv", clock, m->port(0));
  for (uint64_t i = 0; i < 16; ++i) m->write64(0x4008 + 8 * i, 0xD0'0000ull + i);
  drv.reads.push_back(DdrBurst{0x4008, 16, 9});  // starts in a DRAM burst's second half
  ASSERT_TRUE(run_until(clock, [&] { return drv.rbeats.size() == 16; }, 2000));
  const uint64_t a = drv.ar_cycles.at(0) + 1;  // accepted the edge after the push
  const std::vector<uint64_t> want = expected_read_edges(c, 0, 0x4008, 16, a);
  for (size_t k = 0; k < 16; ++k) {
    EXPECT_EQ(drv.rcycles[k], want[k] + 1) << "beat " << k;  // seen one edge after it leaves
    EXPECT_EQ(drv.rbeats[k].data, 0xD0'0000ull + k);
    EXPECT_EQ(drv.rbeats[k].last, k == 15);
    EXPECT_EQ(drv.rbeats[k].tag, 9u);
  }
  // By hand, the first beat: an idle device opens the row at the arrival d, reads at d + tRCD,
  // and the burst's data has left at d + tRCD + CL + BL/2 = d + 18 device cycles, seen at the
  // first PL edge at or after it (x 5 / 21).
  const Ddr3Crossing x = Ddr3Crossing::of(525, 8000);  // origin 0: device(e) = ceil(4.2 e)
  EXPECT_EQ(want[0], (x.device(a) + 18) * 5 / 21 + ((x.device(a) + 18) * 5 % 21 != 0));
  EXPECT_EQ(m->stats().ports[0].bytes_read, 128u);
  EXPECT_EQ(m->stats().ports[0].read_bursts, 1u);
  EXPECT_EQ(m->stats().ports[0].busy_cycles, 16u);
}

TEST(Ddr3Memory, AWriteIsAnsweredWhenItsLastDramBurstCompletes) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{125.0});
  const DdrConfig c = ddr3_config();
  const std::unique_ptr<Memory> m = make_memory("ddr", clock, c);
  std::vector<std::pair<uint64_t, size_t>> heard;
  m->set_write_listener([&](uint64_t a, size_t n) { heard.emplace_back(a, n); });
  PortDriver drv("drv", clock, m->port(1));
  drv.writes.push_back(DdrBurst{0x8000, 4, 3});
  for (uint64_t i = 0; i < 4; ++i) {
    WriteBeat w;
    w.data = 0x1111'1111'1111'1111ull * (i + 1);
    w.strobe = i == 3 ? 0x0F : 0xFF;
    w.last = i == 3;
    drv.wdata.push_back(w);
  }
  ASSERT_TRUE(run_until(clock, [&] { return drv.bresps.size() == 1; }, 2000));
  // Accepted at e + 1, beat i taken at e + 1 + i: the request reaches the controller with its
  // last beat at e + 4; two DRAM bursts (32 B): ACT at d, WR at d + 7 and d + 11, the second's
  // data done at d + 11 + CWL + BL/2 = d + 21.
  const Ddr3Crossing x = Ddr3Crossing::of(525, 8000);
  const uint64_t e = drv.aw_cycles.at(0), d = x.device(e + 4);
  EXPECT_EQ(drv.bcycles[0], x.edge(d + 21) + 1);
  EXPECT_FALSE(drv.bresps[0].error);
  EXPECT_EQ(drv.bresps[0].tag, 3u);
  EXPECT_EQ(m->read64(0x8018), 0x0000'0000'4444'4444ull);  // the strobe kept the upper bytes zero
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], std::make_pair(uint64_t(0x8000), size_t(32)));
  EXPECT_EQ(m->stats().ports[1].write_bursts, 1u);
}

TEST(Ddr3Memory, OutsideTheDeviceIsDecerr) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{125.0});
  const std::unique_ptr<Memory> m = make_memory("ddr", clock, ddr3_config());
  PortDriver drv("drv", clock, m->port(0));
  drv.reads.push_back(DdrBurst{(512ull << 20) - 64, 16, 1});  // runs past the end
  ASSERT_TRUE(run_until(clock, [&] { return drv.rbeats.size() == 16; }, 2000));
  for (const auto& b : drv.rbeats) EXPECT_TRUE(b.error);
  EXPECT_EQ(m->stats().ports[0].decerr_bursts, 1u);
  EXPECT_EQ(m->stats().ports[0].bytes_read, 0u);
}

// One burst, then an idle gap to edge `open`, then a second burst at edge `second`: on the
// memory that idled, and on a fresh one opened at `open` from the state the first carried
// when quiet, advanced over the gap by the fast side. Both see the second burst's beats at
// the same distance from its push.
void expect_carried_state_reproduces(uint64_t first_addr, uint64_t second_addr, uint64_t open, uint64_t second) {
  SCOPED_TRACE(::testing::Message() << std::hex << first_addr << " then " << second_addr << std::dec << ", open "
                                    << open << ", second " << second);
  const DdrConfig c = ddr3_config();
  std::vector<uint64_t> idled, opened;
  MemoryState carried;
  uint64_t quiet = 0;
  {
    FreshSimContext ctx;
    Clock clock("clock", ClockConfig{125.0});
    const std::unique_ptr<Memory> m = make_memory("ddr", clock, c);
    PortDriver drv("drv", clock, m->port(0));
    drv.reads = {DdrBurst{first_addr, 16, 1}, DdrBurst{second_addr, 16, 2}};
    drv.read_edges = {0, second};
    ASSERT_TRUE(run_until(clock, [&] { return drv.rbeats.size() == 16; }, 2000));
    quiet = clock.cycle() + 2;
    ASSERT_LT(quiet, open);
    run_to(clock, quiet);
    carried = m->carried_state(clock.cycle());
    quiet = clock.cycle();
    ASSERT_TRUE(run_until(clock, [&] { return drv.rbeats.size() == 32; }, second + 4000));
    for (size_t k = 16; k < 32; ++k) idled.push_back(drv.rcycles[k] - drv.ar_cycles.at(1));
  }
  {
    FreshSimContext ctx;
    Clock clock("clock", ClockConfig{125.0});
    const std::unique_ptr<Memory> m = make_memory("ddr", clock, c);
    const std::unique_ptr<MemoryTiming> fast = make_memory_timing(c, 8000);
    m->restore_state(fast->advance(carried, open - quiet));
    PortDriver drv("drv", clock, m->port(0));
    drv.reads = {DdrBurst{second_addr, 16, 2}};
    drv.read_edges = {second - open};
    ASSERT_TRUE(run_until(clock, [&] { return drv.rbeats.size() == 16; }, 4000));
    for (size_t k = 0; k < 16; ++k) opened.push_back(drv.rcycles[k] - drv.ar_cycles.at(0));
  }
  EXPECT_EQ(idled, opened);
}

TEST(Ddr3Memory, AMemoryOpenedFromTheCarriedStateTimesTheNextBurstAsTheOneThatIdled) {
  const uint64_t row0 = 0x4000, same_row = 0x4400, other_row = 0x4000 + (1ull << 14) * 3;  // bank 0
  for (const uint64_t second : {uint64_t(300), uint64_t(1003), uint64_t(5000), uint64_t(12345)}) {
    for (const uint64_t gap : {uint64_t(1), uint64_t(7), uint64_t(200)}) {
      expect_carried_state_reproduces(row0, same_row, second - gap, second);   // a row hit
      expect_carried_state_reproduces(row0, other_row, second - gap, second);  // a row conflict
    }
  }
}

TEST(Ddr3Memory, TheFastSideAdvancesTheStateAsTheClockedMemoryIdles) {
  const DdrConfig c = ddr3_config();
  const std::unique_ptr<MemoryTiming> fast = make_memory_timing(c, 8000);
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{125.0});
  const std::unique_ptr<Memory> m = make_memory("ddr", clock, c);
  EXPECT_EQ(fast->initial_state(), m->carried_state(0));
  PortDriver drv("drv", clock, m->port(0));
  drv.reads = {DdrBurst{0x12'3400, 16, 1}};
  ASSERT_TRUE(run_until(clock, [&] { return drv.rbeats.size() == 16; }, 2000));
  uint64_t at = clock.cycle() + 1;
  run_to(clock, at);
  MemoryState s = m->carried_state(at);
  // Gaps across no refresh, one, and many (tREFI is 975 PL edges), ending at every phase.
  for (const uint64_t gap : {uint64_t(1), uint64_t(3), uint64_t(700), uint64_t(976), uint64_t(4001), uint64_t(30002)}) {
    run_to(clock, at + gap);
    const MemoryState idled = m->carried_state(at + gap);
    EXPECT_EQ(fast->advance(s, gap), idled) << "gap " << gap;
    EXPECT_EQ(fast->advance(fast->advance(s, gap / 2), gap - gap / 2), idled) << "gap " << gap << " in two";
    s = idled;
    at += gap;
  }
  // A state carries open rows: the first word after the tag and phase is not all there is.
  EXPECT_NE(s, fast->initial_state());
  // The batch key holds a mark and the clock crossing's phase, not the rest of the state (a
  // record is checked on reuse by replay(): tests/hw/timing_oracle_test.cpp); the mark keeps
  // exact keys apart from approximate ones.
  ASSERT_TRUE(fast->checks_reuse());
  std::string a, b, other_phase, loose_key;
  fast->key_state(s, a);
  const MemoryState later = fast->advance(s, 5 * 2000);  // the same phase, other rows and refresh phase
  ASSERT_NE(later, s);
  fast->key_state(later, b);
  EXPECT_EQ(a, b);
  fast->key_state(fast->advance(s, 2), other_phase);
  EXPECT_NE(a, other_phase);
  DdrConfig approx = ddr3_config();
  approx.ddr3.fast_reuse = "approximate";
  const std::unique_ptr<MemoryTiming> loose = make_memory_timing(approx, 8000);
  EXPECT_FALSE(loose->checks_reuse());
  loose->key_state(s, loose_key);
  EXPECT_NE(a, loose_key);
}

TEST(Ddr3Memory, BufferAddressesEnterTheBatchKey) {
  const std::unique_ptr<MemoryTiming> fast = make_memory_timing(ddr3_config(), 8000);
  std::string a, b;
  fast->key_facts(0x10'0000, 4096, a);
  fast->key_facts(0x10'0800, 4096, b);  // the same page offset, another bank
  EXPECT_NE(a, b);
}

TEST(Ddr3Memory, AStateOfAnotherShapeIsRefusedNamingTheModel) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{125.0});
  const std::unique_ptr<Memory> m = make_memory("ddr", clock, ddr3_config());
  const std::string e = error_of([&] { m->restore_state(MemoryState{{42}}); });
  EXPECT_NE(e.find("ddr3"), std::string::npos) << e;
  const std::unique_ptr<MemoryTiming> fast = make_memory_timing(ddr3_config(), 8000);
  EXPECT_NE(error_of([&] { fast->advance(MemoryState{}, 10); }).find("ddr3"), std::string::npos);
  DdrConfig wall;
  const std::unique_ptr<Memory> w = make_memory("wall", clock, wall);
  EXPECT_NE(error_of([&] { w->restore_state(fast->initial_state()); }).find("carries no state"), std::string::npos);
}

TEST(Ddr3Memory, AClockWithoutAnExactRatioIsRefusedNamingTheKey) {
  DdrConfig c = ddr3_config();
  c.ddr3.clock_mhz = 533.3333333;
  EXPECT_NE(error_of([&] { make_memory_timing(c, 8000); }).find("ddr3.clock_mhz"), std::string::npos);
  const Ddr3Crossing x = Ddr3Crossing::of(525, 8000);
  EXPECT_EQ(x.num, 21u);
  EXPECT_EQ(x.den, 5u);
  EXPECT_EQ(x.device(5), 21u);
  EXPECT_EQ(x.device(1), 5u);   // 4.2 rounded up
  EXPECT_EQ(x.edge(21), 5u);
  EXPECT_EQ(x.edge(22), 6u);
  const Ddr3Crossing o = ddr3_board_clock(Ddr3Config{}, 8000);  // the board's: an origin
  EXPECT_EQ(o.device(5) - o.origin, 21u);
  EXPECT_EQ(o.edge(o.origin + 22), 6u);
}

}  // namespace
}  // namespace bitsim::hw
