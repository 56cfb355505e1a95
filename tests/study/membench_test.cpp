// study/membench: the closed-loop HP masters over the DDR3 engine, UG585's set-up.
#include "study/membench.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "hw/memory/ddr3_timing.h"

namespace bitsim::study {
namespace {

MembenchSetup controller_only() {
  MembenchSetup s;
  s.port_rate = false;
  s.bytes_per_master = 256 << 10;
  return s;
}

double efficiency(MemPattern p, MembenchSetup s = controller_only()) { return run_membench(s, p).efficiency; }

TEST(Membench, SequentialBeatsRandom) {
  EXPECT_GT(efficiency(MemPattern::SeqRead), efficiency(MemPattern::RandRead));
  EXPECT_GT(efficiency(MemPattern::SeqWrite), efficiency(MemPattern::RandWrite));
  EXPECT_GT(efficiency(MemPattern::SeqMixed), efficiency(MemPattern::RandMixed));
}

TEST(Membench, ReadsBeatMixes) {
  EXPECT_GT(efficiency(MemPattern::SeqRead), efficiency(MemPattern::SeqMixed));
  EXPECT_GT(efficiency(MemPattern::RandRead), efficiency(MemPattern::RandMixed));
}

TEST(Membench, NeverAbovePeakNorAboveRefreshCeiling) {
  const hw::Ddr3Config c;
  for (const auto& p : mem_patterns()) {
    const double e = efficiency(p.pattern);
    EXPECT_GT(e, 0.5) << p.name;
    EXPECT_LE(e, 1.0 - double(c.trfc) / c.trefi + 1e-9) << p.name;
  }
}

TEST(Membench, MovesEveryByteAsked) {
  const auto s = controller_only();
  const auto r = run_membench(s, MemPattern::RandMixed);
  EXPECT_EQ(r.bytes, uint64_t(s.masters) * s.bytes_per_master);
}

TEST(Membench, SinglePortIsLimitedByItsOwnRate) {
  MembenchSetup s = controller_only();
  s.port_rate = true;
  s.masters = 1;
  const double gb = run_membench(s, MemPattern::SeqRead).gb_s;
  EXPECT_LE(gb, hp_port_gb_s(s) + 1e-9);
  EXPECT_GT(gb, 0.95 * hp_port_gb_s(s));
}

TEST(Membench, LimitSweepNamesTheHpPortsForOnePortAndNotForFour) {
  MembenchSetup s = controller_only();
  const auto rows = limit_sweep(s);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].binding, "HP ports");
  EXPECT_NE(rows[3].binding, "HP ports");
  for (const auto& r : rows) EXPECT_LE(r.measured_gb_s, std::min(r.hp_gb_s, r.controller_gb_s) * 1.005 + 1e-9);
}

TEST(Membench, SameFiguresTwice) {
  EXPECT_EQ(run_membench(controller_only(), MemPattern::RandRead).device_cycles,
            run_membench(controller_only(), MemPattern::RandRead).device_cycles);
}

// The rows where the model lands within UG585's table by 2 percentage points (docs/ddr3.md
// says which rows miss and why).
TEST(Membench, Ug585RowsWithinTwoPoints) {
  for (auto p : {MemPattern::SeqRead, MemPattern::RandRead, MemPattern::RandWrite})
    EXPECT_NEAR(100 * efficiency(p, MembenchSetup{}), mem_pattern_info(p).ug585_percent, 2.0)
        << mem_pattern_info(p).name;
}

// Where the four sequential buffers lie matters, and more to writes than to reads: with all
// four starting in one bank (page offset 0) the masters' streams meet in the same banks on
// different rows, and a row change after a write waits for write recovery (WR to PRE 18
// device cycles) where after a read it waits RD to PRE (4).
TEST(Membench, BuffersInOneBankCostWritesMoreThanReads) {
  MembenchSetup apart, together;
  together.page_offset = 0;
  const double read_loss = run_membench(apart, MemPattern::SeqRead).efficiency -
                           run_membench(together, MemPattern::SeqRead).efficiency;
  const double write_loss = run_membench(apart, MemPattern::SeqWrite).efficiency -
                            run_membench(together, MemPattern::SeqWrite).efficiency;
  EXPECT_GT(read_loss, 0.01);
  EXPECT_GT(write_loss, read_loss + 0.01);
  // Random addresses do not depend on it.
  EXPECT_EQ(run_membench(apart, MemPattern::RandWrite).device_cycles,
            run_membench(together, MemPattern::RandWrite).device_cycles);
}

TEST(Membench, PageOffsetOutOfRangeNamed) {
  MembenchSetup s;
  s.page_offset = kMaxPageOffset + 1;
  try {
    run_membench(s, MemPattern::SeqRead);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("page offset"), std::string::npos) << e.what();
  }
}

TEST(Membench, UnknownPatternNamed) {
  try {
    parse_mem_pattern("bogus");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bogus"), std::string::npos);
  }
}

TEST(Ddr3Incremental, StepServesWhatRunServes) {
  const hw::Ddr3Config c;
  std::vector<hw::Ddr3Request> reqs;
  for (uint32_t i = 0; i < 40; ++i) reqs.push_back({i * 3, i % 4, i % 3 == 0, uint64_t(i) * 7919 * 64, 128});
  hw::Ddr3Timing a(c), b(c);
  const auto done = a.run(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) b.submit(reqs[i], i);
  std::vector<uint64_t> got(reqs.size(), 0);
  while (const auto s = b.step()) got[s->id] = std::max(got[s->id], s->end);
  EXPECT_EQ(got, done);
  EXPECT_TRUE(b.idle());
}

TEST(Ddr3Incremental, RunRefusedWhileQueued) {
  hw::Ddr3Timing t{hw::Ddr3Config{}};
  t.submit({0, 0, false, 0, 16}, 0);
  EXPECT_THROW(t.run({}), Error);
}

}  // namespace
}  // namespace bitsim::study
