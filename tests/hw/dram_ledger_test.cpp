// hw::DramLedger (hw/memory/dram_ledger.h): a run's DRAM activity is a function of its command
// schedule alone, whatever points its intervals close at; it counts what the engine counts;
// its carried part survives save and load at another origin; a close that would miscount is
// refused.
#include "hw/memory/dram_ledger.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/error.h"
#include "hw/memory/ddr3_timing.h"

namespace bitsim::hw {
namespace {

// Closed-page, so that PREs fall after their burst's completion and past a close point.
Ddr3Config config(bool closed_page) {
  Ddr3Config c;
  if (closed_page) c.page_policy = "closed";
  return c;
}

// A stream of request batches with idle gaps (some longer than tREFI, so that refreshes find
// open rows and the gaps' refreshes are performed by catch_up), the same for every engine.
std::vector<std::vector<Ddr3Request>> batches(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<Ddr3Request>> out;
  uint64_t t = 100;  // arrivals after the last batch's end
  for (int b = 0; b < 40; ++b) {
    std::vector<Ddr3Request> r;
    const int n = 1 + int(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const uint64_t addr = (rng() % (64u << 20)) & ~uint64_t(15);
      r.push_back({t + rng() % 50, uint32_t(rng() % 2), rng() % 4 == 0, addr, uint32_t(16 * (1 + rng() % 16))});
    }
    out.push_back(r);
    t = 100 + rng() % 9000;  // the gap after the last batch's end
  }
  return out;
}

struct Engine {
  Ddr3Timing timing;
  DramLedger ledger;
  explicit Engine(const Ddr3Config& c) : timing(c), ledger(c.banks, c.trfc, 0) {
    timing.set_command_listener([this](uint64_t t, Ddr3Command k, uint32_t b) { ledger.command(t, k, b); });
  }
};

TEST(DramLedger, TheActivityIsTheSameWhereverTheIntervalsClose) {
  for (const bool closed : {false, true}) {
    const Ddr3Config c = config(closed);
    const auto stream = batches(closed ? 7 : 3);
    Engine once(c), often(c);
    DramActivity summed;
    uint64_t end = 0;
    for (auto b : stream) {
      // A batch arrives after the last one is done (a close is at a quiet point).
      for (Ddr3Request& r : b) r.arrival += end;
      const std::vector<uint64_t> done = once.timing.run(b);
      EXPECT_EQ(often.timing.run(b), done);  // catching up at each close changes no timing
      for (const uint64_t d : done) end = std::max(end, d);
      // Close `often` at the batch's last completion (a quiet point), after catching up.
      often.timing.catch_up(end);
      summed += often.ledger.close(end);
    }
    end += 10000;
    once.timing.catch_up(end);
    often.timing.catch_up(end);
    summed += often.ledger.close(end);
    const DramActivity whole = once.ledger.close(end);
    EXPECT_EQ(summed, whole) << (closed ? "closed page" : "open page");
    EXPECT_EQ(whole.counts, once.timing.command_counts());
    EXPECT_GT(whole.counts.ref, 10u);
    EXPECT_GT(whole.counts.act, 40u);
    EXPECT_GT(whole.open_cycles, 0u);
    EXPECT_LT(whole.open_cycles, end);
    if (!closed) EXPECT_GT(whole.counts.prea_banks, 0u) << "refreshes find open rows";
  }
}

TEST(DramLedger, WhatItCarriesSurvivesSaveAndLoadAtAnotherOrigin) {
  // A PRE decided past the close point, a refresh running across it and an open bank: the
  // part past the close is counted in the next interval, in the ledger it was loaded into.
  DramLedger a(8, 158, 0);
  a.command(10, Ddr3Command::kAct, 2);
  a.command(20, Ddr3Command::kAct, 5);
  a.command(30, Ddr3Command::kRd, 2);
  a.command(120, Ddr3Command::kPre, 2);  // decided before the close at 100
  a.command(60, Ddr3Command::kRef, 0);   // hypothetical overlap: union, not sum
  const DramActivity first = a.close(100);
  EXPECT_EQ(first.open_cycles, 90u);  // [10, 100)
  EXPECT_EQ(first.counts.act, 2u);
  EXPECT_EQ(first.counts.pre, 0u) << "the PRE at 120 belongs to the next interval";
  EXPECT_EQ(first.counts.ref, 1u);
  DramLedger b(8, 158, 0);
  b.load(a.save(0), 5000);  // the same ledger, 5,000 cycles later
  const DramActivity next_a = a.close(400), next_b = b.close(5400);
  EXPECT_EQ(next_a, next_b);
  EXPECT_EQ(next_a.counts.pre, 1u);
  EXPECT_EQ(next_a.open_cycles, 300u);  // bank 5 open throughout; the refresh to 218 inside it
  EXPECT_THROW(b.load({1, 2, 3}, 0), Error);
}

TEST(DramLedger, AnOracleOpeningMidRunMissesNothingTheRunCarriesIntoIt) {
  // The run's ledger has a refresh running across the oracle's opening at 1,000 and a bank
  // that a PRE decided for 1,030 closes; the oracle opens there with bank 1 open (the
  // carried state) and closes at 2,000. The run's activity over [0, 2000) is what one ledger
  // that saw everything counts.
  auto run_part = [](DramLedger& l) {
    l.command(100, Ddr3Command::kAct, 4);
    l.command(990, Ddr3Command::kRef, 0);    // to 1,148
    l.command(1030, Ddr3Command::kPre, 4);   // decided before the opening
  };
  auto oracle_part = [](DramLedger& l) {
    l.command(1100, Ddr3Command::kAct, 2);
    l.command(1110, Ddr3Command::kRd, 2);
    l.command(1500, Ddr3Command::kPre, 2);
  };
  DramLedger whole(8, 158, 0);
  run_part(whole);
  whole.command(900, Ddr3Command::kAct, 1);  // bank 1: open at the opening
  oracle_part(whole);
  const DramActivity expected = whole.close(2000);

  DramLedger run(8, 158, 0);
  run_part(run);
  run.command(900, Ddr3Command::kAct, 1);
  DramActivity got = run.close(1000);
  // The oracle, in its own device cycles (its opening at 50), sees bank 1 open and its own commands.
  DramLedger oracle(8, 158, 50);
  oracle.open_at_start({-1, 7, -1, -1, -1, -1, -1, -1});
  oracle.keep_head(400);
  oracle.command(150, Ddr3Command::kAct, 2);
  oracle.command(160, Ddr3Command::kRd, 2);
  oracle.command(550, Ddr3Command::kPre, 2);
  got += oracle.close(1050);
  got.open_cycles += run.continue_with(oracle.record(50), 1000);
  got += run.close(2000);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(expected.open_cycles, 2000u - 100u);  // bank 4, the refresh and bank 1 cover [100, 2000)
  EXPECT_EQ(expected.counts.pre, 2u);
}

TEST(DramLedger, ACloseThatWouldMiscountIsRefused) {
  DramLedger l(8, 158, 0);
  l.command(50, Ddr3Command::kRd, 1);
  EXPECT_THROW(l.close(40), Error);  // a read at 50 counted before 40
  l.close(60);
  EXPECT_THROW(l.command(55, Ddr3Command::kAct, 0), Error);  // a command before the interval's start
  EXPECT_THROW(l.command(70, Ddr3Command::kAct, 8), Error);  // bank 8 of 8
  EXPECT_THROW(l.close(59), Error);                          // before the start
}

}  // namespace
}  // namespace bitsim::hw
