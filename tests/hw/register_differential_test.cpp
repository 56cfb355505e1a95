// The register differential test: the same MMIO programs on the clocked board and the fast
// board, every register read and every DDR load compared. The programs are generated
// (tests/support/mmio_programs.h) and hand-written for the sequences a driver never makes.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "host/mmio_program.h"
#include "hw/board.h"
#include "hw/circuits/engine_regs.h"
#include "sim/board_config.h"
#include "sim/replay.h"
#include "sim/simulation.h"
#include "support/mmio_programs.h"

namespace bitsim {
namespace {

namespace R = hw::dma_reg;

// Runs the program on the clocked board, takes its reads as the expected values, then runs
// it on the fast board and returns the fast board's mismatches.
std::vector<std::string> fast_against_cycle(host::MmioProgram p, const hw::BoardConfig& config,
                                            host::ReplayResult* cycle_out = nullptr) {
  const host::ReplayResult cycle = sim::replay_program(p, config, sim::Fidelity::kCycle);
  size_t r = 0, m = 0;
  for (auto& op : p.ops) {
    if (op.kind == host::MmioOp::Kind::kRead) op.value = cycle.read_values.at(r++);
    if (op.kind == host::MmioOp::Kind::kMemRead) op.digest = cycle.digests.at(m++);
  }
  if (cycle_out) *cycle_out = cycle;
  const host::ReplayResult fast = sim::replay_program(p, config, sim::Fidelity::kFast);
  std::vector<std::string> out;
  for (const auto& mm : fast.mismatches) out.push_back(host::describe(mm));
  return out;
}

host::MmioOp reg(host::MmioOp::Kind k, uint64_t t, uint64_t addr, uint32_t v = 0) {
  host::MmioOp op;
  op.kind = k;
  op.time_ps = t;
  op.addr = addr;
  op.value = v;
  op.access_ps = 200'000;
  return op;
}

TEST(RegisterDifferential, RunStopAndHaltOnAnIdleChannelReadTheSame) {
  // The sequence of the structure issue: RS = 1 and read back; RS = 0 on the idle channel
  // and read DMASR; then a start, which a halted channel must ignore.
  const uint64_t mm0 = hw::EngineRegistry::board().dma_base(0);
  host::MmioProgram p;
  using K = host::MmioOp::Kind;
  uint64_t t = 1'000'000;
  auto add = [&](K k, uint64_t a, uint32_t v = 0) {
    p.ops.push_back(reg(k, t, a, v));
    t += 1'000'000;
  };
  add(K::kWrite, mm0 + R::kMm2sDmacr, R::kCrRunStop);
  add(K::kRead, mm0 + R::kMm2sDmacr);
  add(K::kRead, mm0 + R::kMm2sDmasr);
  add(K::kWrite, mm0 + R::kMm2sDmacr, 0);
  add(K::kRead, mm0 + R::kMm2sDmasr);
  add(K::kWrite, mm0 + R::kMm2sSa, 0x100);
  add(K::kWrite, mm0 + R::kMm2sLength, 64);
  add(K::kRead, mm0 + R::kMm2sDmasr);
  add(K::kRead, mm0 + R::kMm2sLength);
  host::ReplayResult cycle;
  const auto diffs = fast_against_cycle(p, hw::BoardConfig{}, &cycle);
  EXPECT_TRUE(diffs.empty()) << ::testing::PrintToString(diffs);
  ASSERT_EQ(cycle.read_values.size(), 5u);
  EXPECT_EQ(cycle.read_values[0], 0x0001'0001u);            // threshold 1, RS
  EXPECT_EQ(cycle.read_values[1], uint32_t(R::kSrIdle));   // running, idle
  EXPECT_EQ(cycle.read_values[2], uint32_t(R::kSrHalted));
  EXPECT_EQ(cycle.read_values[3], uint32_t(R::kSrHalted));  // the start was ignored
  EXPECT_EQ(cycle.read_values[4], 64u);                     // LENGTH holds what was written
}

TEST(RegisterDifferential, AResetOrStopAfterTheStartBeforeAnyReadReadsTheSame) {
  // Found by fuzz_mmio_replay: a transfer started, then the channel reset (or stopped) with
  // no read in between, while the fast board was still collecting the batch. The transfer
  // had begun on the clocked board (here 1,904 bytes of zeros into matmul lane 0: a header
  // error and its zero beat); the fast board dropped it as if it had never begun and read
  // BEATS_OUT 0 where the clocked board read 1.
  const uint64_t mm0 = hw::EngineRegistry::board().dma_base(0);
  const uint64_t lane0 = hw::EngineRegistry::board()[0].regs;
  using K = host::MmioOp::Kind;
  for (const uint32_t dmacr : {uint32_t(R::kCrReset), 0u})
    for (const uint64_t after : {300'000ull, 2'000'000ull, 6'500'000ull}) {
      SCOPED_TRACE(::testing::Message() << (dmacr ? "reset" : "stop") << " " << after << " ps after the start");
      host::MmioProgram p;
      uint64_t t = 1'000'000;
      p.ops.push_back(reg(K::kWrite, t, mm0 + R::kMm2sDmacr, R::kCrRunStop));
      p.ops.push_back(reg(K::kWrite, t += 1'000'000, mm0 + R::kMm2sLength, 1904));
      p.ops.push_back(reg(K::kWrite, t += after, mm0 + R::kMm2sDmacr, dmacr));
      for (int i = 0; i < 3; ++i)
        for (const uint64_t a : {lane0 + hw::engine_reg::kBeatsIn, lane0 + hw::engine_reg::kBeatsOut,
                                 lane0 + hw::engine_reg::kStatus, mm0 + R::kMm2sDmasr})
          p.ops.push_back(reg(K::kRead, t += 1'000'000, a));
      host::ReplayResult cycle;
      const auto diffs = fast_against_cycle(p, hw::BoardConfig{}, &cycle);
      EXPECT_TRUE(diffs.empty()) << ::testing::PrintToString(diffs);
      // The transfer did begin on the clocked board: the lane took beats of it (the first
      // read is BEATS_IN), and 6.5 us after the start it had pushed its error beat (BEATS_OUT).
      ASSERT_EQ(cycle.read_values.size(), 12u);
      if (after >= 2'000'000) EXPECT_GT(cycle.read_values[0], 0u);
      if (after >= 6'000'000) EXPECT_EQ(cycle.read_values[1], 1u);
    }
}

TEST(RegisterDifferential, AResetOfAQuietChannelDuringABatchReadsTheSame) {
  // Found by fuzz_mmio_replay: while mm0's MM2S transfer ran, a reset written to its S2MM
  // channel, which had nothing on the bus. The clocked board completes such a reset within
  // the write (S2MM_DMACR reads 0x00010000 again); the fast board kept the reset bit set
  // (0x00010004), since the batch's record has no change for a write that undid itself.
  const uint64_t mm0 = hw::EngineRegistry::board().dma_base(0);
  using K = host::MmioOp::Kind;
  for (const bool read_between : {false, true}) {
    SCOPED_TRACE(read_between ? "a read before the reset" : "no read before the reset");
    host::MmioProgram p;
    uint64_t t = 1'000'000;
    p.ops.push_back(reg(K::kWrite, t, mm0 + R::kMm2sDmacr, R::kCrRunStop));
    p.ops.push_back(reg(K::kWrite, t += 1'000'000, mm0 + R::kMm2sLength, 1904));
    if (read_between) p.ops.push_back(reg(K::kRead, t += 400'000, mm0 + R::kMm2sDmasr));
    p.ops.push_back(reg(K::kWrite, t += 800'000, mm0 + R::kS2mmDmacr, R::kCrReset));
    for (const uint64_t a : {mm0 + R::kS2mmDmacr, mm0 + R::kS2mmDmasr, mm0 + R::kMm2sDmacr, mm0 + R::kMm2sDmasr})
      p.ops.push_back(reg(K::kRead, t += 1'000'000, a));
    host::ReplayResult cycle;
    const auto diffs = fast_against_cycle(p, hw::BoardConfig{}, &cycle);
    EXPECT_TRUE(diffs.empty()) << ::testing::PrintToString(diffs);
    ASSERT_GE(cycle.read_values.size(), 4u);
    EXPECT_EQ(cycle.read_values[cycle.read_values.size() - 4], 0x0001'0000u);  // the reset is over
  }
}

TEST(RegisterDifferential, AChainOrBufferOutsideTheDdrReadsTheSame) {
  // Found by fuzz_mmio_replay: an SG channel started with CURDESC 0xFFFFFFC0, outside the
  // 512 MiB DDR. The clocked board's descriptor fetch fails and the channel reports it; the
  // fast board read the descriptor from its own DDR to learn the batch's shape and stopped
  // the program with "ddr: read ... is outside the DDR". The same for a simple-mode buffer
  // at the DDR's end.
  const uint64_t att1 = hw::EngineRegistry::board().dma_base(3), mm0 = hw::EngineRegistry::board().dma_base(0);
  using K = host::MmioOp::Kind;
  for (const bool sg : {true, false}) {
    SCOPED_TRACE(sg ? "descriptor outside" : "buffer outside");
    host::MmioProgram p;
    uint64_t t = 1'000'000;
    const uint64_t dma = sg ? att1 : mm0;
    if (sg) p.ops.push_back(reg(K::kWrite, t, dma + R::kMm2sCurdesc, 0xFFFF'FFFFu));
    p.ops.push_back(reg(K::kWrite, t += 1'000'000, dma + R::kMm2sDmacr, R::kCrRunStop));
    if (sg) {
      p.ops.push_back(reg(K::kWrite, t += 1'000'000, dma + R::kMm2sTaildesc, 0x1000));
    } else {
      p.ops.push_back(reg(K::kWrite, t += 1'000'000, dma + R::kMm2sSa, 0x1FFF'FFC0u));
      p.ops.push_back(reg(K::kWrite, t += 1'000'000, dma + R::kMm2sLength, 0x100));
    }
    for (int i = 0; i < 4; ++i)
      for (const uint64_t a : {dma + R::kMm2sDmasr, dma + R::kMm2sCurdesc})
        p.ops.push_back(reg(K::kRead, t += 1'000'000, a));
    host::ReplayResult cycle;
    const auto diffs = fast_against_cycle(p, hw::BoardConfig{}, &cycle);
    EXPECT_TRUE(diffs.empty()) << ::testing::PrintToString(diffs);
    ASSERT_EQ(cycle.read_values.size(), 8u);
    EXPECT_NE(cycle.read_values[6] & R::kSrErrors, 0u);  // the transfer failed with an error
  }
}

class GeneratedPrograms : public ::testing::TestWithParam<int> {};

TEST_P(GeneratedPrograms, EveryReadEqualOnBothFidelities) {
  testing::MmioProgramGenerator gen(uint64_t(GetParam()) * 7919 + 1);
  const host::MmioProgram p = gen.generate(4);
  host::ReplayResult cycle;
  const auto diffs = fast_against_cycle(p, hw::BoardConfig{}, &cycle);
  EXPECT_GT(cycle.reads, 100u);
  EXPECT_GT(cycle.mem_reads, 0u);
  EXPECT_TRUE(diffs.empty()) << diffs.size() << " reads differ; first: " << (diffs.empty() ? "" : diffs[0]);
}

INSTANTIATE_TEST_SUITE_P(RegisterDifferential, GeneratedPrograms, ::testing::Range(0, 12));

class ChaosPrograms : public ::testing::TestWithParam<int> {};

TEST_P(ChaosPrograms, AccessesDuringTransfersReadTheSame) {
  // Stops, resets, tail moves, engine register reads and loads of results while transfers
  // run: the fast board runs such a batch as a whole on the clocked board.
  testing::MmioProgramGenerator gen(uint64_t(GetParam()) * 104729 + 3, true);
  const host::MmioProgram p = gen.generate(5);
  host::ReplayResult cycle;
  const auto diffs = fast_against_cycle(p, hw::BoardConfig{}, &cycle);
  EXPECT_GT(cycle.reads, 100u);
  EXPECT_TRUE(diffs.empty()) << diffs.size() << " reads differ; first: " << (diffs.empty() ? "" : diffs[0]);
}

INSTANTIATE_TEST_SUITE_P(RegisterDifferential, ChaosPrograms, ::testing::Range(0, 12));

// The same generated programs, plain and chaotic, with the latency-bandwidth memory (ddr.model)
// at a port bandwidth that binds.
class LatencyBandwidthPrograms : public ::testing::TestWithParam<int> {};

TEST_P(LatencyBandwidthPrograms, EveryReadEqualOnBothFidelities) {
  hw::BoardConfig config;
  config.ddr.model = "latency-bandwidth";
  config.ddr.port_bytes_per_s = 0.6e9;
  const bool chaos = GetParam() % 2 == 1;
  testing::MmioProgramGenerator gen(uint64_t(GetParam()) * 7907 + 11, chaos);
  const host::MmioProgram p = gen.generate(4);
  host::ReplayResult cycle;
  const auto diffs = fast_against_cycle(p, config, &cycle);
  EXPECT_GT(cycle.reads, 100u);
  EXPECT_TRUE(diffs.empty()) << diffs.size() << " reads differ; first: " << (diffs.empty() ? "" : diffs[0]);
}

INSTANTIATE_TEST_SUITE_P(RegisterDifferential, LatencyBandwidthPrograms, ::testing::Range(0, 6));

// The same generated programs, plain and chaotic, with the DDR3 device and controller
// (ddr.model = ddr3): its state carried across every idle gap of the fast board.
class Ddr3Programs : public ::testing::TestWithParam<int> {};

TEST_P(Ddr3Programs, EveryReadEqualOnBothFidelities) {
  hw::BoardConfig config;
  config.ddr.model = "ddr3";
  config.ddr.ddr3.ctrl_latency_ns = GetParam() % 3 == 0 ? 0.0 : 150.0;
  const bool chaos = GetParam() % 2 == 1;
  testing::MmioProgramGenerator gen(uint64_t(GetParam()) * 7919 + 5, chaos);
  const host::MmioProgram p = gen.generate(4);
  host::ReplayResult cycle;
  const auto diffs = fast_against_cycle(p, config, &cycle);
  EXPECT_GT(cycle.reads, 100u);
  EXPECT_TRUE(diffs.empty()) << diffs.size() << " reads differ; first: " << (diffs.empty() ? "" : diffs[0]);
}

INSTANTIATE_TEST_SUITE_P(RegisterDifferential, Ddr3Programs, ::testing::Range(0, 6));

// Prefill groups (prefill.tokens_per_pass = 8, docs/prefill.md): groups of 1..8 vectors,
// plain and chaotic programs, every read and load equal on both fidelities.
class PrefillPrograms : public ::testing::TestWithParam<int> {};

TEST_P(PrefillPrograms, EveryReadEqualOnBothFidelities) {
  hw::BoardConfig config;
  config.prefill.tokens_per_pass = 8;
  const bool chaos = GetParam() % 2 == 1;
  testing::MmioProgramGenerator gen(uint64_t(GetParam()) * 6007 + 37, chaos, 8);
  const host::MmioProgram p = gen.generate(4);
  host::ReplayResult cycle;
  const auto diffs = fast_against_cycle(p, config, &cycle);
  EXPECT_GT(cycle.reads, 100u);
  EXPECT_GT(cycle.mem_reads, 0u);
  EXPECT_TRUE(diffs.empty()) << diffs.size() << " reads differ; first: " << (diffs.empty() ? "" : diffs[0]);
}

INSTANTIATE_TEST_SUITE_P(RegisterDifferential, PrefillPrograms, ::testing::Range(0, 6));

// Programs with C records: the keys go through the file and the config as `bitsim replay`
// takes them, and both fidelities give the same reads on the board they describe.
class ConfigLinePrograms : public ::testing::TestWithParam<int> {};

TEST_P(ConfigLinePrograms, EveryReadEqualOnBothFidelities) {
  const std::vector<std::vector<std::pair<std::string, std::string>>> configs = {
      {{"clock.mhz", "100"}},
      {{"clock.mhz", "142.86"}, {"hp.max_outstanding_reads", "2"}},
      {{"ddr.model", "latency-bandwidth"}, {"ddr.port_gb_s", "0.6"}},
      {{"ddr.wall_gb_s", "1.2"}, {"clock.mhz", "150"}},
      {{"ddr.model", "ddr3"}, {"ddr3.address_map", "bank-row-col"}},
  };
  const int seed = GetParam();
  testing::MmioProgramGenerator gen(uint64_t(seed) * 104729 + 3, seed % 2 == 1);
  host::MmioProgram p = gen.generate(3);
  p.config = configs[size_t(seed) % configs.size()];
  std::stringstream file;
  host::write_program(p, file);
  const host::MmioProgram back = host::read_program(file, "generated.mmio");
  ASSERT_EQ(back.config, p.config);
  sim::ParamSet params = sim::load_board_params("");
  for (size_t i = 0; i < back.config.size(); ++i)
    params.set(back.config[i].first + "=" + back.config[i].second, back.config_where(i));
  const hw::BoardConfig board = sim::make_sim_config(params).board;
  host::ReplayResult cycle;
  const auto diffs = fast_against_cycle(back, board, &cycle);
  EXPECT_GT(cycle.reads, 50u);
  EXPECT_TRUE(diffs.empty()) << diffs.size() << " reads differ; first: " << (diffs.empty() ? "" : diffs[0]);
}

INSTANTIATE_TEST_SUITE_P(RegisterDifferential, ConfigLinePrograms, ::testing::Range(0, 8));

TEST(RegisterDifferential, GeneratedProgramsMoveData) {
  // The generated programs really transfer: the engines' result buffers change.
  testing::MmioProgramGenerator gen(5);
  host::MmioProgram p = gen.generate(3);
  const host::ReplayResult cycle = sim::replay_program(p, hw::BoardConfig{}, sim::Fidelity::kCycle);
  size_t nonzero_done = 0;
  for (uint32_t v : cycle.read_values) nonzero_done += v != 0;
  EXPECT_GT(nonzero_done, cycle.read_values.size() / 4);
  std::set<uint64_t> digests(cycle.digests.begin(), cycle.digests.end());
  EXPECT_GT(digests.size(), 1u);
}

// The fast board reuses a batch's clocked timing for later batches of the same shape; a
// stream moved to another page offset (crossing a 4 KB boundary mid-burst, or not) must
// get its own timing: every transfer's start and completion cycle equal on both fidelities.
TEST(RegisterDifferential, RelocatedStreamsOfOneShapeKeepTheirOwnTiming) {
  for (uint64_t seed : {3, 5, 8}) {
    testing::MmioProgramGenerator gen(seed);
    const host::MmioProgram p = gen.relocation_program(6);
    std::vector<host::TransferRecord> transfers[2];
    for (int f = 0; f < 2; ++f) {
      const auto machine = sim::make_machine(hw::BoardConfig{}, sim::SimulationOptions(f ? sim::Fidelity::kFast : sim::Fidelity::kCycle, 1));
      machine->run([&] { host::run_program(p, machine->platform()); });
      transfers[f] = machine->platform().transfers();
    }
    ASSERT_EQ(transfers[0].size(), 12u) << "seed " << seed;
    EXPECT_EQ(transfers[1], transfers[0]) << "seed " << seed;
  }
}

TEST(RegisterDifferential, ProgramFileRoundTripsAndReplays) {
  testing::MmioProgramGenerator gen(11);
  host::MmioProgram p = gen.generate(2);
  const host::ReplayResult cycle = sim::replay_program(p, hw::BoardConfig{}, sim::Fidelity::kCycle);
  size_t r = 0, m = 0;
  for (auto& op : p.ops) {
    if (op.kind == host::MmioOp::Kind::kRead) op.value = cycle.read_values.at(r++);
    if (op.kind == host::MmioOp::Kind::kMemRead) op.digest = cycle.digests.at(m++);
  }
  p.config.emplace_back("clock.mhz", "125");
  std::stringstream file;
  host::write_program(p, file);
  const host::MmioProgram back = host::read_program(file, "memory");
  EXPECT_EQ(back.ops, p.ops);
  EXPECT_EQ(back.config, p.config);
  EXPECT_TRUE(sim::replay_program(back, hw::BoardConfig{}, sim::Fidelity::kCycle).ok());
  EXPECT_TRUE(sim::replay_program(back, hw::BoardConfig{}, sim::Fidelity::kFast).ok());
  // A changed read value is reported with the register's name.
  host::MmioProgram bad = back;
  for (auto& op : bad.ops)
    if (op.kind == host::MmioOp::Kind::kRead) {
      op.value ^= 1;
      break;
    }
  const host::ReplayResult res = sim::replay_program(bad, hw::BoardConfig{}, sim::Fidelity::kFast);
  ASSERT_EQ(res.mismatches.size(), 1u);
  EXPECT_NE(host::describe(res.mismatches[0]).find("DMA"), std::string::npos) << host::describe(res.mismatches[0]);
}

}  // namespace
}  // namespace bitsim

namespace bitsim {
namespace {

// The class "both fidelities give a recorded program the same verdict": generated programs,
// plain and chaotic, under settings a recording's C lines can carry (the length register's
// width, the memory models, the units, the formats, the DMA's and HP ports' limits, a DDR
// smaller than the programs' buffers). On each, either both fidelities refuse the program
// (an error naming it, exit 2) or both run it with every read and DDR load equal (so a
// recording from elsewhere differs on both alike, exit 3). Found: with dma.length_bits = 8
// the fast board computed a transfer the clocked DMA refuses at its start (DMAIntErr),
// then ended in the timing oracle's watchdog or its result check, where the cycle
// fidelity ran on.
TEST(RegisterDifferential, BothFidelitiesGiveTheSameVerdictUnderEveryRecordableSetting) {
  const std::vector<std::vector<std::string>> settings = {
      {"dma.length_bits=8"},
      {"dma.length_bits=12"},
      {"attention.variant=online-softmax"},
      {"attention.variant=online-softmax", "kv.format=int4"},
      {"attention.variant=online-softmax", "kv.format=tip"},
      {"matmul.format=per-call"},
      {"ddr.model=ddr3", "ddr3.page_policy=closed"},
      {"ddr.model=ddr3", "ddr3.rw_policy=fifo", "ddr3.cam_entries=4"},
      {"ddr.model=latency-bandwidth", "ddr.port_gb_s=0.1"},
      {"clock.mhz=200"},
      {"prefill.tokens_per_pass=4"},
      {"host.lanes=1"},
      {"dma.max_burst_beats=4", "dma.mm2s_fifo_beats=4", "dma.s2mm_fifo_beats=4"},
      {"hp.max_outstanding_reads=1", "hp.max_outstanding_writes=1"},
      {"matmul.output_fifo_beats=1"},
      {"driver.c.reg_access_ns=0"},
      {"ddr.size_mib=16", "cma.base=0", "cma.mib=16"},
  };
  int both_ran = 0, both_refused = 0;
  for (const auto& s : settings)
    for (int seed = 0; seed < 4; ++seed)
      for (const bool chaos : {false, true}) {
        sim::ParamSet params = sim::load_board_params("");
        std::string name;
        for (const auto& kv : s) params.set(kv, "test"), name += kv + " ";
        SCOPED_TRACE(fmt::format("{}seed {} chaos {}", name, seed, chaos));
        const hw::BoardConfig board = sim::make_sim_config(params).board;
        testing::MmioProgramGenerator gen(uint64_t(seed) * 104729 + 3, chaos);
        const host::MmioProgram p = gen.generate(3);
        std::string cycle_error, fast_error;
        try {
          (void)sim::replay_program(p, board, sim::Fidelity::kCycle);
        } catch (const Error& e) {
          cycle_error = e.what();
        }
        try {
          (void)sim::replay_program(p, board, sim::Fidelity::kFast);
        } catch (const Error& e) {
          fast_error = e.what();
        }
        EXPECT_EQ(cycle_error.empty(), fast_error.empty()) << "cycle: " << cycle_error << "\nfast: " << fast_error;
        if (!cycle_error.empty() || !fast_error.empty()) {
          ++both_refused;
          continue;
        }
        ++both_ran;
        const auto diffs = fast_against_cycle(p, board);
        EXPECT_TRUE(diffs.empty()) << diffs.size() << " reads differ; first: " << (diffs.empty() ? "" : diffs[0]);
      }
  EXPECT_GT(both_ran, 100);
  EXPECT_GT(both_refused, 0);  // the DDR too small for the buffers: refused alike
}

}  // namespace
}  // namespace bitsim
