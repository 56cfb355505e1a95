// The DDR3 timing engine against docs/ddr3.md: each rule by a request pattern, each expected
// completion derived here from the documented constants (ctrl latency 0).
#include "hw/memory/ddr3_timing.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace bitsim::hw {
namespace {

const Ddr3Config C = [] {
  Ddr3Config c;
  c.ctrl_latency_ns = 0;  // the figures below are the device's alone
  c.rw_policy = "fifo";   // the JEDEC rules alone, in arrival order; UG585's switching is tested below
  return c;
}();
const uint64_t kBurst = C.burst_length / 2;  // data cycles of one BL8 burst
const uint64_t kRowBytes = uint64_t(C.columns) * C.bus_bytes;  // 2 KiB: next bank (row-bank-col)
const uint64_t kRowStride = kRowBytes * C.banks;                  // next row, same bank

Ddr3Request rd(uint64_t t, uint64_t addr, uint32_t port = 0) { return {t, port, false, addr, 16}; }
Ddr3Request wr(uint64_t t, uint64_t addr, uint32_t port = 0) { return {t, port, true, addr, 16}; }

TEST(Ddr3Timing, DefaultsAreTheDocumentedCycles) {
  EXPECT_EQ(C.cl, 7u); EXPECT_EQ(C.cwl, 6u); EXPECT_EQ(C.trcd, 7u); EXPECT_EQ(C.trp, 7u);
  EXPECT_EQ(C.tras, 19u); EXPECT_EQ(C.trc, 26u); EXPECT_EQ(C.tfaw, 21u); EXPECT_EQ(C.trrd, 6u);
  EXPECT_EQ(C.tccd, 4u); EXPECT_EQ(C.twr, 8u); EXPECT_EQ(C.twtr, 4u); EXPECT_EQ(C.trtp, 4u);
  EXPECT_EQ(C.trfc, 158u); EXPECT_EQ(C.trefi, 4064u);
}

TEST(Ddr3Timing, RowMissHitAndConflict) {
  Ddr3Timing t(C);
  EXPECT_EQ(t.run({rd(0, 0)})[0], C.trcd + C.cl + kBurst);                        // miss: ACT, RD
  EXPECT_EQ(t.run({rd(100, 16)})[0], 100 + C.cl + kBurst);                        // hit: RD only
  EXPECT_EQ(t.run({rd(200, kRowStride)})[0], 200 + C.trp + C.trcd + C.cl + kBurst);  // conflict
}

TEST(Ddr3Timing, ConflictWaitsForTras) {
  Ddr3Timing t(C);
  t.run({rd(0, 0)});
  // PRE no earlier than ACT + tRAS, then tRP, tRCD.
  EXPECT_EQ(t.run({rd(1, kRowStride)})[0], C.tras + C.trp + C.trcd + C.cl + kBurst);
}

TEST(Ddr3Timing, Trrd) {
  Ddr3Timing t(C);
  auto d = t.run({rd(0, 0, 0), rd(0, kRowBytes, 1)});
  EXPECT_EQ(d[0], C.trcd + C.cl + kBurst);
  EXPECT_EQ(d[1], C.trrd + C.trcd + C.cl + kBurst);
}

TEST(Ddr3Timing, TfawWithFiveActivates) {
  Ddr3Config c = C;
  c.trrd = 4;  // so that four ACTs fit in tFAW (with the board's 6, 4 x tRRD = 24 > tFAW = 21)
  Ddr3Timing t(c);
  std::vector<Ddr3Request> r;
  for (uint64_t b = 0; b < 5; ++b) r.push_back(rd(0, b * kRowBytes));
  auto d = t.run(r);
  for (uint64_t b = 0; b < 4; ++b) EXPECT_EQ(d[b], b * c.trrd + c.trcd + c.cl + kBurst);
  EXPECT_EQ(d[4], c.tfaw + c.trcd + c.cl + kBurst);
  // The board's timings: tRRD binds, the fifth ACT at 4 x tRRD.
  Ddr3Timing b(C);
  EXPECT_EQ(b.run(r)[4], 4 * C.trrd + C.trcd + C.cl + kBurst);
}

TEST(Ddr3Timing, RefreshEveryTrefiBlocksForTrfc) {
  Ddr3Timing a(C);
  EXPECT_EQ(a.run({rd(C.trefi - 1, 0)})[0], C.trefi - 1 + C.trcd + C.cl + kBurst);
  Ddr3Timing b(C);
  EXPECT_EQ(b.run({rd(C.trefi, 0)})[0], C.trefi + C.trfc + C.trcd + C.cl + kBurst);
  EXPECT_EQ(b.snapshot().next_refresh, 2ull * C.trefi);
  EXPECT_EQ(b.run({rd(2 * C.trefi, 16)})[0], 2 * C.trefi + C.trp + C.trfc + C.trcd + C.cl + kBurst);
}

TEST(Ddr3Timing, WriteToReadAndReadToWrite) {
  Ddr3Timing t(C);
  auto d = t.run({wr(0, 0), rd(0, 16)});
  EXPECT_EQ(d[0], C.trcd + C.cwl + kBurst);
  EXPECT_EQ(d[1], C.trcd + C.cwl + kBurst + C.twtr + C.cl + kBurst);
  Ddr3Timing u(C);
  auto e = u.run({rd(0, 0), wr(0, 16)});
  EXPECT_EQ(e[1], C.trcd + (C.cl + C.tccd + 2 - C.cwl) + C.cwl + kBurst);
}

TEST(Ddr3Timing, BackToBackHitsAtTccd) {
  Ddr3Timing t(C);
  auto d = t.run({{0, 0, false, 0, 128}});  // 8 bursts, one row
  EXPECT_EQ(d[0], C.trcd + 7 * C.tccd + C.cl + kBurst);
}

// A request is served burst by burst in address order, its last burst alone marked last,
// from an unaligned start across a row's end into the next bank; step(limit) serves nothing
// before the decision time.
TEST(Ddr3Timing, ARequestIsServedBurstByBurstInAddressOrder) {
  Ddr3Timing t(C);
  const uint64_t start = kRowBytes - 40;  // 8 bytes into a DRAM burst, 40 bytes before the row ends
  t.submit({100, 1, false, start, 64}, 7);  // [start, start + 64): 5 bursts, 3 in bank 0, 2 in bank 1
  EXPECT_EQ(t.next_decision(), std::optional<uint64_t>(100));
  EXPECT_FALSE(t.step(99).has_value());  // not yet decided
  std::vector<Ddr3Served> got;
  while (const auto s = t.step(100 + 64)) got.push_back(*s);
  ASSERT_EQ(got.size(), 5u);
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].id, 7u);
    EXPECT_EQ(got[k].last, k + 1 == got.size()) << "burst " << k;
  }
  // Bank 0: ACT at 100, column commands tCCD apart; bank 1: its ACT tRRD after bank 0's, its
  // first column command tRCD later (after the third of bank 0).
  const uint64_t col0 = 100 + C.trcd;
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(got[k].end, col0 + k * C.tccd + C.cl + kBurst) << "burst " << k;
  const uint64_t col3 = std::max<uint64_t>(100 + C.trrd + C.trcd, col0 + 3 * C.tccd);
  EXPECT_EQ(got[3].end, col3 + C.cl + kBurst);
  EXPECT_EQ(got[4].end, col3 + C.tccd + C.cl + kBurst);
  const Ddr3Snapshot s = t.snapshot();
  EXPECT_EQ(s.open_row[0], 0);
  EXPECT_EQ(s.open_row[1], 0);
  EXPECT_TRUE(t.idle());
}

TEST(Ddr3Timing, AddressMapping) {
  Ddr3Timing t(C);
  EXPECT_EQ(t.map(1u << 1).column, 1u);
  EXPECT_EQ(t.map(1u << 10).column, 512u);
  EXPECT_EQ(t.map(1u << 11).bank, 1u);
  EXPECT_EQ(t.map(1u << 13).bank, 4u);
  EXPECT_EQ(t.map(1u << 14).row, 1u);
  EXPECT_EQ(t.map(1u << 28).row, 1u << 14);
  Ddr3Config c = C;
  c.address_map = "bank-row-col";
  Ddr3Timing u(c);
  EXPECT_EQ(u.map(1u << 11).row, 1u);
  EXPECT_EQ(u.map(1u << 11).bank, 0u);
  EXPECT_EQ(u.map(1u << 26).bank, 1u);
  EXPECT_EQ(u.map(1u << 28).bank, 4u);
}

TEST(Ddr3Timing, ControllerLatencyInCyclesOfTheDeviceClock) {
  Ddr3Config c = C;
  c.ctrl_latency_ns = 10;  // 5.25 cycles at 525 MHz: 6; 4 at 400 MHz
  EXPECT_EQ(Ddr3Timing(c).run({rd(0, 0)})[0], C.trcd + C.cl + kBurst + 6);
  c.clock_mhz = 400;
  EXPECT_EQ(Ddr3Timing(c).run({rd(0, 0)})[0], C.trcd + C.cl + kBurst + 4);
  EXPECT_EQ(c.cycles(7.5), 3u);
  EXPECT_EQ(c.peak_bytes_per_cycle(), 4u);
}

TEST(Ddr3Timing, RefusesAMapThatIsNotPowersOfTwo) {
  Ddr3Config c = C;
  c.rows = 30000;
  try {
    Ddr3Timing t(c);
    ADD_FAILURE() << "30,000 rows accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ddr3.rows"), std::string::npos) << e.what();
  }
}

// The relations among the timings (docs/ddr3.md, "Relations between the keys"): the engine
// refuses each broken one naming every key in it; at the edge of each the engine serves
// (a refresh one cycle shorter than its interval still lets a request through).
TEST(Ddr3Timing, RefusesTimingsThatBreakTheirRelationsNamingEveryKey) {
  struct Case {
    void (*set)(Ddr3Config&);
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {[](Ddr3Config& c) { c.trc = c.tras + c.trp - 1; }, {"ddr3.trc = 25", "ddr3.tras + ddr3.trp = 19 + 7"}},
      {[](Ddr3Config& c) { c.trp = 8; }, {"ddr3.trc = 26", "ddr3.tras + ddr3.trp = 19 + 8"}},
      {[](Ddr3Config& c) { c.trfc = 4090; }, {"ddr3.trfc = 4090", "ddr3.trefi = 4064"}},
      {[](Ddr3Config& c) { c.trefi = c.trfc; }, {"ddr3.trfc = 158", "ddr3.trefi = 158"}},
      {[](Ddr3Config& c) { c.trfc = 4064 - 32 + 1; }, {"ddr3.trfc = 4033", "row cycle 32", "ddr3.trefi = 4064"}},
  };
  for (const Case& k : cases) {
    Ddr3Config c = C;
    k.set(c);
    try {
      Ddr3Timing t(c);
      ADD_FAILURE() << "accepted: " << k.needles[0];
    } catch (const Error& e) {
      for (const std::string& n : k.needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }
  Ddr3Config edge = C;
  edge.trfc = edge.trefi - 32;  // the row cycle: max(19, 7 + max(4, 6 + 4 + 8)) + 7
  Ddr3Timing t(edge);
  // A request at the refresh waits its tRFC and is served before the next is due.
  EXPECT_EQ(t.run({rd(edge.trefi, 0)})[0], edge.trefi + edge.trfc + C.trcd + C.cl + kBurst);
}

// The class "a memory that can never serve is refused, not run" at the refresh relation
// (docs/ddr3.md, "Relations between the keys"): tREFI >= tRFC + the row cycle, the row cycle
// being max(tRAS, tRCD + max(tRTP, CWL + BL/2 + tWR)) + tRP. Generated timings on both sides of
// the boundary: a refused one names every key of the relation with its value; an accepted one
// serves a stream of reads and writes from four ports over many refresh intervals with every
// request completed, the refreshes in order at least tRFC apart and none more than a row
// cycle late (JEDEC lets a controller owe at most 8).
TEST(Ddr3Timing, TheRefreshRelationSeparatesServingTimingsFromRefusedOnes) {
  uint64_t accepted = 0, refused = 0;
  uint32_t seed = 7;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (const uint32_t trefi : {8u, 33u, 40u, 64u, 200u, 4064u})
    for (const uint32_t tras : {19u, 40u})
      for (const uint32_t twr : {8u, 30u})
        for (const uint32_t tfaw : {21u, 256u})
          for (const int off : {-2, -1, 0, 1, 2}) {
            Ddr3Config c = C;
            c.trefi = trefi, c.tras = tras, c.trc = tras + c.trp, c.twr = twr, c.tfaw = tfaw;
            const int64_t row = std::max<int64_t>(tras, c.trcd + std::max<int64_t>(c.trtp, c.cwl + 4 + twr)) + c.trp;
            const int64_t trfc = int64_t(trefi) - row + off;  // off > 0: past the boundary
            if (trfc < 1) continue;
            c.trfc = uint32_t(trfc);
            const std::string what = fmt::format("trefi {} trfc {} tras {} twr {} tfaw {}", trefi, trfc, tras, twr, tfaw);
            if (off > 0) {
              ++refused;
              try {
                Ddr3Timing t(c);
                ADD_FAILURE() << "accepted: " << what;
              } catch (const Error& e) {
                const std::string m = e.what();
                for (const std::string& n : {fmt::format("ddr3.trfc = {}", trfc), fmt::format("ddr3.trefi = {}", trefi),
                                             fmt::format("ddr3.tras = {}", tras), fmt::format("ddr3.twr = {}", twr),
                                             std::string("ddr3.trcd = 7"), std::string("ddr3.trp = 7")})
                  EXPECT_NE(m.find(n), std::string::npos) << what << ": " << m;
              }
              continue;
            }
            ++accepted;
            Ddr3Timing t(c);
            std::vector<uint64_t> refs;
            t.set_command_listener([&](uint64_t cycle, Ddr3Command k, uint32_t) {
              if (k == Ddr3Command::kRef) refs.push_back(cycle);
            });
            std::vector<Ddr3Request> reqs;
            const uint64_t span = 24 * uint64_t(trefi) + 2000;
            for (int i = 0; i < 400; ++i)
              reqs.push_back({uint64_t(i) * span / 400, next() % 4, (next() & 3) == 0,
                              (uint64_t(next()) % (64 * kRowStride)) / 16 * 16, 16u * (1 + next() % 4)});
            const std::vector<uint64_t> done = t.run(reqs);
            for (size_t i = 0; i < reqs.size(); ++i) ASSERT_GT(done[i], reqs[i].arrival) << what << " request " << i;
            ASSERT_FALSE(refs.empty()) << what;
            for (size_t k = 0; k < refs.size(); ++k) {
              EXPECT_LT(refs[k], (k + 1) * uint64_t(trefi) + uint64_t(row)) << what << ": refresh " << k << " late";
              if (k > 0) {
                EXPECT_GE(refs[k], refs[k - 1] + c.trfc) << what << ": refreshes " << k - 1 << " and " << k;
              }
            }
            // The worst case: a write whose ACT comes one cycle before the refresh is due holds
            // it back a whole row cycle; a read waiting then is served in the same interval
            // (at the relation's edge its ACT comes one cycle before the next refresh is due).
            Ddr3Timing w(c);
            const uint64_t late = trefi - 1 + uint64_t(row);
            const std::vector<uint64_t> d = w.run({{trefi - 1u, 0, true, 0, 16}, {late, 1, false, kRowBytes, 16}});
            EXPECT_EQ(d[1], late + c.trfc + c.trcd + c.cl + kBurst) << what;
          }
  EXPECT_GT(accepted, 50u);
  EXPECT_GT(refused, 40u);
}

// The backstop behind the relation: a burst that waits more refreshes than the timings'
// bounds allow ends with an error naming the burst and the keys, not a loop. No accepted
// config reaches it; a carried state whose bank may activate only 10^12 cycles on (a state
// nobody saved) does.
TEST(Ddr3Timing, ABurstThatCanNeverFitBetweenRefreshesEndsWithAnErrorNamingTheKeys) {
  Ddr3Timing saved(C);
  const uint64_t now = 4 * saved.horizon();
  std::vector<uint64_t> w = saved.save(now);
  w[7 + 1] = 1'000'000'000'000ull;  // bank 0's act_ok (words: 7 heads, then row + 1, act_ok, ... per bank)
  Ddr3Timing t(C, saved.horizon());
  t.load(w.data(), w.size(), now);
  try {
    (void)t.run({rd(now, 0)});
    ADD_FAILURE() << "served";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* n : {"read burst at bank 0 row 0", "waited", "refreshes", "cannot serve", "ddr3.trefi = 4064",
                          "ddr3.trfc = 158", "ddr3.tfaw = 21"})
      EXPECT_NE(m.find(n), std::string::npos) << n << " not in: " << m;
  }
}

TEST(Ddr3Timing, SnapshotHoldsOpenRows) {
  Ddr3Timing t(C);
  t.run({rd(0, 3 * kRowStride + kRowBytes)});
  auto s = t.snapshot();
  EXPECT_EQ(s.open_row[1], 3);
  EXPECT_EQ(s.open_row[0], -1);
}

// An idle gap of many refresh intervals: a request finds every bank precharged and waits for
// the last refresh due by its arrival (the refreshes between are skipped in one step).
TEST(Ddr3Timing, ALongIdleGapEndsInTheLastRefreshDue) {
  Ddr3Timing t(C);
  t.run({rd(0, 0), rd(0, kRowBytes)});  // two rows open
  const uint64_t arrival = 6 * uint64_t(C.trefi) + 10;
  EXPECT_EQ(t.run({rd(arrival, 0)})[0], 6 * uint64_t(C.trefi) + C.trfc + C.trcd + C.cl + kBurst);
  EXPECT_EQ(t.snapshot().next_refresh, 7ull * C.trefi);
  EXPECT_EQ(t.snapshot().open_row[1], -1);  // closed by the refresh, not opened again
}

// The carried state: saved at `now` and loaded at another time, the engine serves what
// follows exactly as the one that went on, shifted by the difference; however long ago its
// commands were (beyond horizon() nothing binds), and with requests still queued refused.
TEST(Ddr3Timing, ASavedStateLoadedElsewhereServesTheSameFuture) {
  const std::vector<Ddr3Request> before = {rd(0, 0), wr(3, kRowBytes, 1), rd(5, kRowStride, 2), wr(9, 32, 3)};
  for (const uint64_t now : {uint64_t(20), uint64_t(60), uint64_t(4100), uint64_t(9000)}) {
    for (const uint64_t delta : {uint64_t(0), uint64_t(2), uint64_t(30)}) {
      Ddr3Timing went_on(C);
      went_on.run(before);
      const std::vector<uint64_t> words = went_on.save(now);
      ASSERT_EQ(words.size(), Ddr3Timing::saved_words(C));
      const uint64_t shift = 1'000'003;
      Ddr3Timing loaded(C);
      loaded.load(words.data(), words.size(), now + shift);
      const std::vector<Ddr3Request> after = {rd(now + delta, 48), wr(now + delta, kRowStride + 16, 1),
                                              rd(now + delta + 1, 2 * kRowBytes, 2)};
      std::vector<Ddr3Request> shifted = after;
      for (auto& r : shifted) r.arrival += shift;
      const std::vector<uint64_t> a = went_on.run(after), b = loaded.run(shifted);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i] + shift, b[i]) << "now " << now << " delta " << delta;
      EXPECT_EQ(loaded.save(b.back() + 5000), went_on.save(a.back() + 5000)) << "the states agree again";
    }
  }
  Ddr3Timing busy(C);
  busy.submit(rd(0, 0), 0);
  EXPECT_THROW(busy.save(10), Error);
}

// UG585's switching (docs/ddr3.md, "Read/write switching"): the controller starts in read
// mode, so a read and a write arriving together on one port go read first (fifo: in arrival
// order, the write first); each direction has its own queue per port.
TEST(Ddr3Timing, Ug585ServesAReadBeforeAWriteThatArrivedWithIt) {
  Ddr3Config c = C;
  c.rw_policy = "ug585";
  Ddr3Timing t(c);
  const auto d = t.run({wr(0, 0), rd(0, 16)});
  EXPECT_EQ(d[1], C.trcd + C.cl + kBurst);
  EXPECT_EQ(d[0], C.trcd + (C.cl + C.tccd + 2 - C.cwl) + C.cwl + kBurst);  // RD to WR turnaround
  Ddr3Timing f(C);
  const auto e = f.run({wr(0, 0), rd(0, 16)});
  EXPECT_LT(e[0], e[1]);
}

// Under fifo a port serves its submissions in order, whatever their arrival: a write
// submitted after a read but arriving before it waits for the read (membench's shared HP
// ports submit so). The engine once decided at the write's arrival and found nothing to
// offer.
TEST(Ddr3Timing, FifoServesALaterSubmissionThatArrivedFirstAfterTheOlderOne) {
  Ddr3Timing t(C);
  const auto d = t.run({rd(100, 0), wr(0, 16), rd(300, kRowStride, 1)});
  const uint64_t read_col = 100 + C.trcd;
  EXPECT_EQ(d[0], read_col + C.cl + kBurst);
  EXPECT_EQ(d[1], read_col + (C.cl + C.tccd + 2 - C.cwl) + C.cwl + kBurst);  // after the read: RD to WR
  EXPECT_GT(d[2], 300u);
  EXPECT_TRUE(t.idle());
  // Under ug585 the write has its own queue and goes at its arrival.
  Ddr3Config c = C;
  c.rw_policy = "ug585";
  Ddr3Timing u(c);
  EXPECT_EQ(u.run({rd(100, 0), wr(0, 16)})[1], C.trcd + C.cwl + kBurst);
}

// A write that arrives with a stream of reads waits in read mode until its store goes
// critical: w_max_starve_x32 pulses of the timer (timer_ncks device cycles each, the first at
// the engine's origin); the first decision from then on serves it, after the RD to WR
// turnaround. With the write store's starvation limit doubled it waits twice as long.
TEST(Ddr3Timing, Ug585WriteWaitsForItsStoreToGoCritical) {
  for (const uint32_t starve : {2u, 4u}) {
    Ddr3Config c = C;
    c.rw_policy = "ug585";
    c.w_max_starve_x32 = starve;
    Ddr3Timing t(c);
    std::vector<Ddr3Request> r = {wr(0, 1600)};
    for (uint64_t i = 0; i < 100; ++i) r.push_back(rd(0, 16 * i));  // one open row: a read every tCCD
    const auto d = t.run(r);
    // Reads take column slots trcd + k tccd; the write is chosen at the first decision (the
    // slot after the previous read) at or after the critical time.
    const uint64_t critical = uint64_t(starve) * c.timer_ncks;
    uint64_t k = 0;
    while (C.trcd + k * C.tccd < critical) ++k;
    const uint64_t last_read_col = C.trcd + (k - 1) * C.tccd;
    const uint64_t write_col = std::max(C.trcd + k * C.tccd, last_read_col + C.cl + C.tccd + 2 - C.cwl);
    EXPECT_EQ(d[0], write_col + C.cwl + kBurst) << "starve " << starve;
    // The k reads before it were served back to back; the one after waits for WR to RD.
    EXPECT_EQ(d[k], last_read_col + C.cl + kBurst) << "starve " << starve;
    EXPECT_EQ(d[k + 1], write_col + C.cwl + kBurst + C.twtr + C.cl + kBurst) << "starve " << starve;
  }
}

// A critical store serves xact_run_length bursts, then is hard non-critical: with writes and
// reads both streaming, the engine alternates between runs of each direction rather than
// turning the bus around for every burst, and a longer run length makes longer runs.
TEST(Ddr3Timing, Ug585AlternatesRunsOfReadsAndWrites) {
  auto switches = [](uint32_t starve) {
    Ddr3Config c = C;
    c.rw_policy = "ug585";
    c.lpr_max_starve_x32 = c.w_max_starve_x32 = starve;
    Ddr3Timing t(c);
    for (uint64_t i = 0; i < 128; ++i) {
      t.submit(rd(0, 16 * i), i);
      t.submit(wr(0, 4096 + 16 * i, 1), 1000 + i);
    }
    int n = 0;
    bool last = false, any = false;
    while (const auto s = t.step()) {
      const bool w = s->id >= 1000;
      n += any && w != last;
      last = w, any = true;
    }
    return n;
  };
  const int fast = switches(1), slow = switches(4);
  EXPECT_GT(fast, 2);
  EXPECT_LT(fast, 128);  // runs, not a turnaround per burst
  EXPECT_LT(slow, fast);
}

}  // namespace
}  // namespace bitsim::hw

namespace bitsim::hw {
namespace {

// UG585's read/write switching carries its state across an idle gap too: generated mixed
// traffic, saved at an idle point and loaded at another time (any phase of the starvation
// timer), serves the same future as the engine that went on, burst by burst.
TEST(Ddr3Timing, SwitchingStateSurvivesSaveAndLoadUnderGeneratedTraffic) {
  Ddr3Config c;
  uint64_t rng = 12345;
  auto next = [&] { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return rng >> 33; };
  for (int round = 0; round < 40; ++round) {
    auto traffic = [&](uint64_t t0, int n) {
      std::vector<Ddr3Request> r;
      for (int i = 0; i < n; ++i)
        r.push_back({t0 + next() % 200, uint32_t(next() % 4), next() % 2 == 0,
                     (next() % 4096) * 128 + (next() % 3 == 0 ? kRowStride * (next() % 5) : 0), 128});
      std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
      return r;
    };
    Ddr3Timing went_on(c, 1000);
    const auto first = traffic(1000, 40);
    const auto d0 = went_on.run(first);
    const uint64_t now = *std::max_element(d0.begin(), d0.end()) + next() % 300;
    const std::vector<uint64_t> words = went_on.save(now);
    const uint64_t shift = 777 + next() % 1000;
    Ddr3Timing loaded(c, 500);
    loaded.load(words.data(), words.size(), now + shift);
    const auto after = traffic(now, 60);
    auto shifted = after;
    for (auto& r : shifted) r.arrival += shift;
    const auto a = went_on.run(after), b = loaded.run(shifted);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i] + shift, b[i]) << "round " << round << " request " << i;
  }
}

// ddr3.cam_entries (docs/ddr3.md, "The CAM"): the scheduler chooses only among the first N
// pending bursts in arrival order. Port 1's row-conflicting read arrives before port 0's
// second read, a row hit: first-ready first-come serves the hit first; with a CAM of one
// entry only the oldest pending burst can be chosen, so the order is the arrival order.
TEST(Ddr3Timing, TheCamLimitsWhatTheSchedulerMayChoose) {
  const std::vector<Ddr3Request> reqs{rd(0, 0, 0), rd(1, kRowStride, 1), rd(2, 16, 0)};
  Ddr3Timing free_choice(C);
  const auto a = free_choice.run(reqs);
  EXPECT_LT(a[2], a[1]);  // the hit overtakes
  Ddr3Config one = C;
  one.cam_entries = 1;
  Ddr3Timing cam(one);
  const auto b = cam.run(reqs);
  EXPECT_LT(b[0], b[1]);
  EXPECT_LT(b[1], b[2]);  // in arrival order
  // A CAM as large as everything pending changes nothing.
  Ddr3Config big = C;
  big.cam_entries = 3;
  Ddr3Timing all(big);
  EXPECT_EQ(all.run(reqs), a);
}

}  // namespace
}  // namespace bitsim::hw
