// The energy model against docs/energy.md: the DRAM energy of small command streams (from the
// ddr3 engine itself) equals a hand computation from the IDD values, one test per command
// kind; the components sum to the total; an idle interval draws only static power and
// background; every bad input names its key; both IDD presets load; the ddr3 engine's command
// counting changes no timing; and the first-order per-token figure of docs/energy.md.
#include "energy/energy_model.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "hw/memory/dram_command_trace.h"
#include "hw/memory/ddr3_timing.h"
#include "hw/memory/dram_ledger.h"

namespace bitsim::energy {
namespace {

using hw::Ddr3Command;

// The Alliance set (the shipped default) and the board's ddr3 timings, written out: the hand
// computations below use these literals, not the model's functions.
constexpr double kVdd = 1.5, kIdd0 = 55, kIdd2n = 25, kIdd3n = 32, kIdd4r = 135, kIdd4w = 150, kIdd5b = 160;
constexpr double kTck = 1000.0 / 525;  // ns
constexpr double kTras = 19, kTrc = 26, kTrfc = 158, kTrefi = 4064;
constexpr double kPj = 1e-9;  // pJ in mJ

const hw::Ddr3Config kDdr3 = [] {
  hw::Ddr3Config c;
  c.ctrl_latency_ns = 0;
  c.rw_policy = "fifo";
  return c;
}();
const uint64_t kRowBytes = uint64_t(kDdr3.columns) * kDdr3.bus_bytes;
const uint64_t kRowStride = kRowBytes * kDdr3.banks;  // next row of the same bank

hw::Ddr3Request rd(uint64_t t, uint64_t addr, uint32_t bytes = 16) { return {t, 0, false, addr, bytes}; }
hw::Ddr3Request wr(uint64_t t, uint64_t addr, uint32_t bytes = 16) { return {t, 0, true, addr, bytes}; }

// A stream through the engine, its commands followed by a tracker, closed at device cycle
// `end` (after a catch_up to it): the activity of an interval of that many device cycles
// (525 MHz: 40/21 ns a cycle, so `end` is a multiple of 21 for a whole ps count).
struct Stream {
  hw::Ddr3Timing engine{kDdr3};
  hw::DramLedger ledger{kDdr3.banks, kDdr3.trfc, 0};
  std::vector<std::string> lines;
  Stream() {
    engine.set_command_listener([this](uint64_t t, Ddr3Command c, uint32_t b) {
      ledger.command(t, c, b);
      lines.push_back(hw::drampower_line(t, c, b));
    });
  }
  Activity close(uint64_t end) {
    engine.catch_up(end);
    const hw::DramActivity d = ledger.close(end);
    EXPECT_EQ(d.counts, engine.command_counts());
    Activity a;
    a.duration_ps = end * 40000 / 21;  // exact when end % 21 == 0
    a.dram_model = DramModel::kCommands;
    a.dram = dram_timing(kDdr3);
    const hw::Ddr3CommandCounts& k = engine.command_counts();
    a.commands = {k.act, k.pre, k.prea_banks, k.rd, k.wr, k.ref, d.open_cycles, end - d.open_cycles};
    return a;
  }
};

// The DRAM's energy alone: no PL, PS or board power.
EnergyConfig dram_only() {
  EnergyConfig c;
  c.pl_static_w = 0;
  c.ps_static_w = 0;
  c.ps_active_w = 0;
  return c;
}

double background_mj(double open_cycles, double precharged_cycles) {
  return kVdd * (kIdd3n * open_cycles + kIdd2n * precharged_cycles) * kTck * kPj;
}

TEST(Energy, ActPrePairEqualsHandComputation) {
  Stream s;
  s.engine.run({rd(0, 0)});                // ACT bank 0, RD
  s.engine.run({rd(100, kRowStride)});     // conflict: PRE bank 0, ACT, RD
  const Activity a = s.close(21 * 100);
  EXPECT_EQ(a.commands.act, 2u);
  EXPECT_EQ(a.commands.pre, 1u);
  EXPECT_EQ(a.commands.rd, 2u);
  // DRAMPower / TN-41-01: E_ACT = VDD (IDD0 - IDD3N) tRAS, E_PRE = VDD (IDD0 - IDD2N) (tRC - tRAS).
  const double e_act = kVdd * (kIdd0 - kIdd3n) * kTras * kTck;  // 1,248.6 pJ
  const double e_pre = kVdd * (kIdd0 - kIdd2n) * (kTrc - kTras) * kTck;  // 600.0 pJ
  EXPECT_NEAR(e_act, 1248.57, 0.01);
  EXPECT_NEAR(e_pre, 600.0, 0.01);
  const Breakdown b = energy(dram_only(), a);
  EXPECT_NEAR(b.dram_act_pre, (2 * e_act + e_pre) * kPj, 1e-15);
  // The trace DRAMPower reads: the first burst's ACT at 0, its RD at tRCD.
  ASSERT_GE(s.lines.size(), 2u);
  EXPECT_EQ(s.lines[0], "0,ACT,0");
  EXPECT_EQ(s.lines[1], fmt::format("{},RD,0", kDdr3.trcd));
}

TEST(Energy, ReadBurstsEqualHandComputation) {
  Stream s;
  s.engine.run({rd(0, 0, 64)});  // one ACT, four BL8 reads of 16 B in one row
  const Activity a = s.close(21 * 10);
  EXPECT_EQ(a.commands.rd, 4u);
  EXPECT_EQ(a.commands.wr, 0u);
  const double e_rd = kVdd * (kIdd4r - kIdd3n) * 4 * kTck;  // BL8: 4 device cycles, 1,177.1 pJ
  EXPECT_NEAR(e_rd, 1177.14, 0.01);
  const Breakdown b = energy(dram_only(), a);
  EXPECT_NEAR(b.dram_read, 4 * e_rd * kPj, 1e-15);
  EXPECT_EQ(b.dram_write, 0);
  // I/O: 20 pins x 1.1 mW over the burst's 4 cycles, per read.
  EXPECT_NEAR(b.dram_io, 4 * 1.1 * 20 * 4 * kTck * kPj, 1e-15);
}

TEST(Energy, WriteBurstsEqualHandComputation) {
  Stream s;
  s.engine.run({wr(0, 0, 32)});  // one ACT, two writes
  const Activity a = s.close(21 * 10);
  EXPECT_EQ(a.commands.wr, 2u);
  const double e_wr = kVdd * (kIdd4w - kIdd3n) * 4 * kTck;  // 1,348.6 pJ
  EXPECT_NEAR(e_wr, 1348.57, 0.01);
  const Breakdown b = energy(dram_only(), a);
  EXPECT_NEAR(b.dram_write, 2 * e_wr * kPj, 1e-15);
  EXPECT_NEAR(b.dram_io, 2 * 8.2 * 22 * 4 * kTck * kPj, 1e-15);
}

TEST(Energy, RefreshEqualsHandComputation) {
  // Idle for three tREFI: three REFs with every bank precharged (two performed by the
  // engine's catch-up as one step, counted one by one), then a fourth after an open bank
  // (PREA closing one bank, then REF).
  Stream s;
  s.engine.catch_up(3 * 4064);
  EXPECT_EQ(s.engine.command_counts().ref, 3u);
  EXPECT_EQ(s.engine.command_counts().prea, 0u);
  s.engine.run({rd(3 * 4064 + 500, 0)});
  const Activity a = s.close(21 * 800);  // 16,800 > 4 x 4,064: the fourth refresh is in
  EXPECT_EQ(a.commands.ref, 4u);
  EXPECT_EQ(a.commands.prea_banks, 1u);
  EXPECT_EQ(s.engine.command_counts().prea, 1u);
  const std::vector<std::string> refs = {"4064,REF,0", "8128,REF,0", "12192,REF,0"};
  EXPECT_EQ(std::vector<std::string>(s.lines.begin(), s.lines.begin() + 3), refs);
  const double e_ref = kVdd * (kIdd5b - kIdd3n) * kTrfc * kTck;  // 57,782.9 pJ
  EXPECT_NEAR(e_ref, 57782.86, 0.01);
  const Breakdown b = energy(dram_only(), a);
  EXPECT_NEAR(b.dram_refresh, 4 * e_ref * kPj, 1e-15);
  // The PREA's bank costs one PRE.
  EXPECT_NEAR(b.dram_act_pre,
              (kVdd * (kIdd0 - kIdd3n) * kTras * kTck + kVdd * (kIdd0 - kIdd2n) * (kTrc - kTras) * kTck) * kPj, 1e-15);
}

TEST(Energy, BackgroundByBankStateEqualsHandComputation) {
  // Bank 0 open from its ACT at 0 to the PRE of a conflict; the rest precharged but for the
  // refreshes' tRFC (none before 4,064).
  Stream s;
  s.engine.run({rd(0, 0)});
  s.engine.run({rd(200, kRowStride)});  // PRE at 200 (tRAS long past), ACT at 207, RD at 214
  s.engine.run({rd(1000, kRowBytes)});  // bank 1: ACT at 1000
  const Activity a = s.close(21 * 100);  // 2,100 cycles, before the first refresh
  // Open: bank 0 [0, 200) and [207, 2100), bank 1 [1000, 2100): union [0, 200) + [207, 2100).
  EXPECT_EQ(a.commands.open_cycles, 200u + (2100 - 207));
  EXPECT_EQ(a.commands.precharged_cycles, 7u);
  const Breakdown b = energy(dram_only(), a);
  EXPECT_NEAR(b.dram_background, background_mj(200 + 1893, 7), 1e-15);
  // The ledger's split on its own: a REF is open for tRFC, and a refresh running past the
  // end of an interval carries into the next.
  hw::DramLedger t(8, 158, 0);
  t.command(10, Ddr3Command::kAct, 3);
  t.command(50, Ddr3Command::kPre, 3);
  t.command(100, Ddr3Command::kRef, 0);
  EXPECT_EQ(t.close(200).open_cycles, 40u + 100u);
  EXPECT_EQ(t.close(300).open_cycles, 58u);
  EXPECT_THROW(t.close(250), Error);  // before the interval's start
}

TEST(Energy, CommandCountingChangesNoTiming) {
  // The same requests through an engine with and without a listener: the same completions,
  // the same carried state; save() (which refreshes on a copy) issues nothing.
  std::vector<hw::Ddr3Request> r;
  for (uint64_t i = 0; i < 64; ++i) r.push_back(i % 5 == 0 ? wr(i * 37, i * 4096 + 64, 64) : rd(i * 37, i * 2048, 128));
  hw::Ddr3Timing plain(kDdr3), heard(kDdr3);
  uint64_t heard_commands = 0;
  heard.set_command_listener([&](uint64_t, Ddr3Command, uint32_t) { ++heard_commands; });
  EXPECT_EQ(plain.run(r), heard.run(r));
  const uint64_t before = heard_commands;
  EXPECT_EQ(plain.save(20000), heard.save(20000));
  EXPECT_EQ(heard_commands, before);
  const hw::Ddr3CommandCounts& k = heard.command_counts();
  EXPECT_EQ(k, plain.command_counts());
  EXPECT_EQ(heard_commands, k.act + k.pre + k.prea + k.rd + k.wr + k.ref);
  EXPECT_EQ(k.rd + k.wr, 51u * 8 + 13u * 4);  // 128 B reads: 8 bursts; 64 B writes at +64: 4
}

// A busy interval with every term at work.
Activity busy_activity() {
  Activity a;
  a.duration_ps = 10'000'000;  // 10 us
  a.pl_period_ps = 8000;
  const uint64_t cycles = a.duration_ps / a.pl_period_ps;
  a.circuit(Circuit::kMatmul) = {{11608, std::nullopt, 10, 0}, 1, cycles / 2};
  a.circuit(Circuit::kAttention) = {{480, 700, 2, 17}, 1, cycles / 4};
  a.circuit(Circuit::kDma) = {dma_resources(EnergyConfig{}), 4, cycles};
  a.circuit(Circuit::kWalker) = {{23480, std::nullopt, 4, 190}, 1, cycles / 8};
  a.circuit(Circuit::kPrefill) = {{3000, std::nullopt, 5, 0}, 1, cycles / 2};
  a.dram_bytes_read = 12'000, a.dram_bytes_written = 1'000, a.dram_busy_ps = 6'000'000;
  a.cpu_compute_ps = 3'000'000, a.cpu_wait_ps = 6'000'000;
  return a;
}

// With board_other_w set too, so that every background term is at work.
EnergyConfig with_board_other() {
  EnergyConfig c;
  c.board_other_w = 0.5;
  return c;
}

TEST(Energy, ComponentsSumToTheTotal) {
  for (const DramModel m : {DramModel::kBytes, DramModel::kCommands}) {
    Activity a = busy_activity();
    a.dram_model = m;
    a.commands = {30, 28, 2, 700, 60, 1, 4000, 1250};
    const EnergyConfig c = with_board_other();
    const Breakdown b = energy(c, a);
    const std::vector<Component> parts = components(b, c, m);
    double sum = 0;
    std::set<std::string> names;
    for (const Component& k : parts) {
      sum += k.mj;
      EXPECT_TRUE(names.insert(k.name).second) << k.name;
      EXPECT_GT(k.mj, 0) << k.name << ": every term is at work in this interval";
    }
    EXPECT_EQ(parts.size(), 6u + 1 + 2 * size_t(kCircuits) + 3 + 1);
    EXPECT_NEAR(sum, b.total(), 1e-12 * b.total());
    EXPECT_NEAR(b.dram() + b.pl() + b.ps() + b.board_other, b.total(), 1e-15);
    Breakdown twice = b;
    twice += b;
    EXPECT_NEAR(twice.total(), 2 * b.total(), 1e-12 * b.total());
    EXPECT_NEAR(average_power_w(b, a.duration_ps), b.total() * 1e-3 / 10e-6, 1e-9);
  }
}

TEST(Energy, IdleDrawsOnlyStaticAndBackground) {
  for (const DramModel m : {DramModel::kBytes, DramModel::kCommands}) {
    Activity a = busy_activity();  // the design's circuits are there, but nothing is busy
    for (CircuitActivity& ca : a.circuits) ca.busy_cycles = 0;
    a.dram_bytes_read = a.dram_bytes_written = a.dram_busy_ps = 0;
    a.cpu_compute_ps = a.cpu_wait_ps = 0;
    a.duration_ps = 1'000'000'000;  // 1 ms: 131 refreshes
    a.dram_model = m;
    if (m == DramModel::kCommands) {
      hw::Ddr3Timing idle(kDdr3);
      hw::DramLedger t(kDdr3.banks, kDdr3.trfc, 0);
      idle.set_command_listener([&](uint64_t c, Ddr3Command k, uint32_t bank) { t.command(c, k, bank); });
      idle.catch_up(525000);
      const hw::DramActivity s = t.close(525000);
      const hw::Ddr3CommandCounts& k = idle.command_counts();
      EXPECT_EQ(k.ref, 525000u / 4064);
      EXPECT_EQ(k.act + k.pre + k.prea + k.rd + k.wr, 0u);
      EXPECT_EQ(s.counts, k);
      a.commands = {0, 0, 0, 0, 0, k.ref, s.open_cycles, 525000 - s.open_cycles};
      EXPECT_EQ(s.open_cycles, k.ref * kDdr3.trfc);
    }
    const EnergyConfig c = with_board_other();
    const Breakdown b = energy(c, a);
    EXPECT_NEAR(b.total(), b.background(), 1e-12 * b.total());
    EXPECT_EQ(b.dram_core(), 0);
    EXPECT_EQ(b.dram_io, 0);
    for (const double x : b.pl_dynamic) EXPECT_EQ(x, 0);
    EXPECT_EQ(b.ps_compute, 0);
    EXPECT_EQ(b.ps_wait, 0);
    // Each background term is there, and is what its power says over 1 ms.
    EXPECT_NEAR(b.pl_static, 0.145, 1e-12);
    EXPECT_NEAR(b.ps_static, 0.933, 1e-12);
    EXPECT_NEAR(b.board_other, 0.5, 1e-12);
    EXPECT_GT(b.dram_refresh, 0);
    const double refs = 525000 / 4064;  // whole refreshes in the interval
    EXPECT_NEAR(b.dram_refresh, refs * kVdd * (kIdd5b - kIdd3n) * kTrfc * kTck * kPj, 1e-12);
    EXPECT_NEAR(b.dram_background, background_mj(refs * kTrfc, 525000 - refs * kTrfc), 1e-12);
  }
}

TEST(Energy, TheWallModelsApproximateFromBytes) {
  // 1 MiB read, 64 KiB written, 0.5 ms with traffic in 1 ms: bursts of the bus's 16 B, one
  // ACT/PRE pair a 2 KiB page, a refresh every tREFI, a bank open while the memory moves
  // data and through each refresh.
  Activity a;
  a.duration_ps = 1'000'000'000;
  a.dram_bytes_read = 1 << 20, a.dram_bytes_written = 1 << 16, a.dram_busy_ps = 500'000'000;
  const Breakdown b = energy(dram_only(), a);
  const double reads = (1 << 20) / 16, writes = (1 << 16) / 16, pages = double((1 << 20) + (1 << 16)) / 2048;
  const double refs = 129, open = 262500 + refs * kTrfc;  // 525,000 cycles, half with traffic
  EXPECT_NEAR(b.dram_read, reads * kVdd * (kIdd4r - kIdd3n) * 4 * kTck * kPj, 1e-12);
  EXPECT_NEAR(b.dram_write, writes * kVdd * (kIdd4w - kIdd3n) * 4 * kTck * kPj, 1e-12);
  EXPECT_NEAR(b.dram_act_pre, pages * kVdd * ((kIdd0 - kIdd3n) * kTras + (kIdd0 - kIdd2n) * (kTrc - kTras)) * kTck * kPj,
              1e-12);
  EXPECT_NEAR(b.dram_refresh, refs * kVdd * (kIdd5b - kIdd3n) * kTrfc * kTck * kPj, 1e-12);
  EXPECT_NEAR(b.dram_background, background_mj(open, 525000 - open), 1e-12);
  // A 32-bit bus: two devices, each sees every command of bursts twice as wide.
  Activity w = a;
  w.dram.bus_bytes = 4;
  const Breakdown b2 = energy(dram_only(), w);
  EXPECT_NEAR(b2.dram_read, b.dram_read, 1e-12);  // half the bursts, two devices
  EXPECT_NEAR(b2.dram_background, 2 * b.dram_background, 1e-12);
  EXPECT_NEAR(b2.dram_refresh, 2 * b.dram_refresh, 1e-12);
}

TEST(Energy, BothIddPresetsLoadAndValidate) {
  ASSERT_EQ(dram_idd_presets().size(), 2u);
  for (const char* name : {"alliance-as4c256m16d3b", "samsung-k4b4g1646q"}) {
    EnergyConfig c;
    c.apply(dram_idd_preset(name));
    EXPECT_NO_THROW(c.validate("test")) << name;
    EXPECT_EQ(c.idd_set, name);
  }
  EnergyConfig s;
  s.apply(dram_idd_preset("samsung-k4b4g1646q"));
  EXPECT_EQ(s.idd4r_ma, 412);
  EXPECT_EQ(s.idd3n_ma, 60);
  // ENERGY.md's figure: a BL8 read costs (IDD4R - IDD3N) x VDD x 4 tCK, 3.96 nJ with the
  // Samsung memspec at 1,066 MT/s; 4.02 nJ at the board's 525 MHz.
  hw::Ddr3Config at1066 = kDdr3;
  at1066.clock_mhz = 533.333;
  EXPECT_NEAR(dram_energies(s, dram_timing(at1066)).rd, 3960, 2);
  EXPECT_NEAR(dram_energies(s, dram_timing(kDdr3)).rd, 4022.9, 0.1);
  // The shipped default is the Alliance preset.
  EXPECT_EQ(EnergyConfig{}.idd_set, "alliance-as4c256m16d3b");
  EXPECT_EQ(EnergyConfig{}.idd0_ma, dram_idd_preset("alliance-as4c256m16d3b").idd0_ma);
  try {
    dram_idd_preset("micron");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("energy.dram.idd_set"), std::string::npos) << e.what();
  }
  // custom takes any consistent set.
  EnergyConfig custom;
  custom.idd_set = "custom";
  custom.idd4r_ma = 90;
  EXPECT_NO_THROW(custom.validate("test"));
}

// The message of the Error `c.validate` throws, or "" when it throws none.
std::string refusal(const EnergyConfig& c) {
  try {
    c.validate("energy");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Energy, EachBadInputRefusesNamingItsKey) {
  struct Case {
    const char* what;
    std::function<void(EnergyConfig&)> set;
    std::vector<std::string> keys;  // each named in the message
  };
  const std::vector<Case> cases = {
      {"negative current", [](EnergyConfig& c) { c.idd2n_ma = -1; }, {"energy.dram.idd2n_ma"}},
      {"negative power", [](EnergyConfig& c) { c.pl_static_w = -0.1; }, {"energy.pl.static_w"}},
      {"VDD of 0", [](EnergyConfig& c) { c.vdd_v = 0; }, {"energy.dram.vdd_v"}},
      {"IDD4R < IDD3N", [](EnergyConfig& c) { c.idd4r_ma = 20; }, {"energy.dram.idd4r_ma", "energy.dram.idd3n_ma"}},
      {"IDD4W < IDD3N", [](EnergyConfig& c) { c.idd4w_ma = 20; }, {"energy.dram.idd4w_ma", "energy.dram.idd3n_ma"}},
      {"IDD0 < IDD3N", [](EnergyConfig& c) { c.idd0_ma = 30; }, {"energy.dram.idd0_ma", "energy.dram.idd3n_ma"}},
      {"IDD5B < IDD3N", [](EnergyConfig& c) { c.idd5b_ma = 30; }, {"energy.dram.idd5b_ma", "energy.dram.idd3n_ma"}},
      {"IDD3N < IDD2N", [](EnergyConfig& c) { c.idd3n_ma = 24; }, {"energy.dram.idd3n_ma", "energy.dram.idd2n_ma"}},
      {"a preset's name with another value", [](EnergyConfig& c) { c.idd0_ma = 60; },
       {"energy.dram.idd0_ma", "energy.dram.idd_set"}},
      {"unknown set", [](EnergyConfig& c) { c.idd_set = "micron"; }, {"energy.dram.idd_set"}},
      {"PS static above its total", [](EnergyConfig& c) { c.ps_static_w = 1.6; },
       {"energy.ps.static_w", "energy.ps.active_w"}},
      {"more busy cores than cores", [](EnergyConfig& c) { c.ps_busy_cores = 3; },
       {"energy.ps.busy_cores", "energy.ps.cores"}},
      {"toggle rate above 1", [](EnergyConfig& c) { c.pl_toggle_rate = 1.5; }, {"energy.pl.toggle_rate"}},
      {"unknown wait", [](EnergyConfig& c) { c.ps_wait = "sleep"; }, {"energy.ps.wait"}},
  };
  for (const Case& k : cases) {
    EnergyConfig c;
    if (k.keys.front().rfind("energy.dram.idd", 0) == 0 && k.keys.front() != "energy.dram.idd_set" &&
        std::string(k.what).find("preset") == std::string::npos)
      c.idd_set = "custom";  // a relation, not the preset check
    k.set(c);
    const std::string msg = refusal(c);
    EXPECT_FALSE(msg.empty()) << k.what << " was accepted";
    for (const std::string& key : k.keys) EXPECT_NE(msg.find(key), std::string::npos) << k.what << ": " << msg;
    // energy() refuses the same config.
    EXPECT_THROW(energy(c, Activity{}), Error) << k.what;
  }
  EXPECT_EQ(refusal(EnergyConfig{}), "");
}

TEST(Energy, AnImpossibleActivityRefusesNamingItsField) {
  auto refused = [](const Activity& a, const std::string& field) {
    try {
      energy(EnergyConfig{}, a);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << field << " was accepted";
  };
  Activity a = busy_activity();
  a.cpu_wait_ps = a.duration_ps;
  refused(a, "cpu_compute_ps + cpu_wait_ps");
  a = busy_activity();
  a.circuit(Circuit::kAttention).busy_cycles = a.duration_ps;
  refused(a, "circuits.attention.busy_cycles");
  a = busy_activity();
  a.dram.bus_bytes = 3;
  refused(a, "ddr3.bus_bytes");
  a = busy_activity();
  a.dram_busy_ps = a.duration_ps + 1;
  refused(a, "dram_busy_ps");
  a = busy_activity();
  a.dram_model = DramModel::kCommands;
  a.commands.open_cycles = 100000;
  refused(a, "commands.open_cycles");
  a = busy_activity();
  a.pl_period_ps = 0;
  refused(a, "pl_period_ps");
  EXPECT_THROW(dram_model("ddr4"), Error);
  EXPECT_EQ(dram_model("ddr3"), DramModel::kCommands);
  EXPECT_EQ(dram_model("latency-bandwidth"), DramModel::kBytes);
}

TEST(Energy, NoFigureIsLabelledBoardOrCalibrated) {
  const EnergyConfig c;
  EnergyConfig::visit(c, [](const auto&, const FieldInfo& f) {
    EXPECT_NE(f.evidence, Evidence::kCalibrated) << f.key;
    EXPECT_EQ(f.key.rfind("energy.", 0), 0u) << f.key;
    EXPECT_FALSE(f.doc.empty()) << f.key;
  });
  for (const DramModel m : {DramModel::kBytes, DramModel::kCommands}) {
    for (const Component& k : components(Breakdown{}, c, m)) {
      EXPECT_NE(k.evidence, Evidence::kBoard) << k.name;
      EXPECT_NE(k.evidence, Evidence::kCalibrated) << k.name;
    }
    EXPECT_EQ(total_evidence(c, m), Evidence::kSimulated);
  }
  const auto parts = components(Breakdown{}, c, DramModel::kCommands);
  EXPECT_STREQ(evidence_name(parts[0].evidence), "datasheet");   // dram.act_pre: the IDD set
  EXPECT_STREQ(evidence_name(parts[6].evidence), "vendor-estimate");  // pl.static: the Vivado report
  EXPECT_STREQ(evidence_name(components(Breakdown{}, c, DramModel::kBytes)[0].evidence), "simulated");
}

// docs/energy.md, "A first-order check": one bitnet-large token at T = 64 as the board runs
// it (BOARD.md: 119.2 ms; 26.6 ms of CPU steps, about 7.9 ms of driver work inside the
// circuits' columns), 147.7 MB of weights and 4.7 MB of K/V read at about 1.87 GB/s, DRAM
// under the wall approximation, lands near ENERGY.md's 0.2-0.3 J with either IDD set.
Activity bitnet_large_token() {
  Activity a;
  a.duration_ps = 119'200'000'000;
  a.pl_period_ps = 8000;
  const EnergyConfig c;
  const double bytes_per_cycle = 1.87e9 / 125e6;
  const uint64_t matmul = uint64_t(147.7e6 / bytes_per_cycle), attention = uint64_t(4.7e6 / bytes_per_cycle);
  a.circuit(Circuit::kMatmul) = {{11608, std::nullopt, 10, 0}, 1, matmul};
  a.circuit(Circuit::kAttention) = {{480, std::nullopt, 2, 17}, 1, attention};
  a.circuit(Circuit::kDma) = {dma_resources(c), 4, 2 * (matmul + attention)};  // two DMAs a call
  a.dram_bytes_read = 152'400'000, a.dram_bytes_written = 1'000'000;
  a.dram_busy_ps = (matmul + attention) * a.pl_period_ps;
  a.cpu_compute_ps = 34'500'000'000;
  a.cpu_wait_ps = a.duration_ps - a.cpu_compute_ps;
  return a;
}

TEST(Energy, ABitnetLargeTokenLandsNearTheFirstOrderEstimate) {
  for (const char* set : {"alliance-as4c256m16d3b", "samsung-k4b4g1646q"}) {
    EnergyConfig c;
    c.apply(dram_idd_preset(set));
    const Activity a = bitnet_large_token();
    const Breakdown b = energy(c, a);
    double pl_dynamic = 0, pl_clock = 0;
    for (int i = 0; i < kCircuits; ++i) pl_dynamic += b.pl_dynamic[size_t(i)], pl_clock += b.pl_clock[size_t(i)];
    const std::string line = fmt::format(
        "{}: {:.1f} mJ/token ({:.2f} W): DRAM {:.1f} (read {:.1f}, act/pre {:.2f}, background {:.1f}, refresh {:.2f}, "
        "io {:.2f}), PL static {:.1f}, PL clock {:.1f}, PL dynamic {:.1f}, PS static {:.1f}, PS compute {:.1f}, PS "
        "wait {:.1f}",
        set, b.total(), average_power_w(b, a.duration_ps), b.dram(), b.dram_read, b.dram_act_pre, b.dram_background,
        b.dram_refresh, b.dram_io, b.pl_static, pl_clock, pl_dynamic, b.ps_static, b.ps_compute, b.ps_wait);
    RecordProperty(set, line);
    std::printf("%s\n", line.c_str());
    EXPECT_GT(b.total(), 150) << line;
    EXPECT_LT(b.total(), 300) << line;
  }
}

}  // namespace
}  // namespace bitsim::energy
