// TimingOracle: one batch of DMA transfers on the clocked board from an idle board, and
// what it reports: each transfer's start and completion edges relative to the first start,
// every register change edge by edge, the bytes read and written, the engines' registers.
// These tests build batches by hand (a matmul transfer on mm0 in simple mode) and check
// that the record is the clocked board's (results, final registers, reads at given times),
// that it does not depend on the buffers' addresses beyond their page offsets, and that a
// batch that cannot settle is an error.
#include "hw/fast/timing_oracle.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "golden/board_reference.h"
#include "hw/circuits/engine_regs.h"
#include "base/error.h"
#include "model/packed_image.h"
#include "support/matmul_stream.h"

namespace bitsim::hw {
namespace {

namespace R = dma_reg;

using MatmulShape = test::MatmulStream;

const uint64_t kPeriod = clock_period_ps(BoardConfig{}.clock.mhz);
// The first start (S2MM_LENGTH) is written in the period before edge kOracleFirstEdge, so
// that it takes effect at that edge (a write at t takes effect at edge t / period + 1).
const uint64_t kT0 = (kOracleFirstEdge - 1) * kPeriod + 1;
const uint64_t kAccess = 200'000;  // ps between the two starts

// mm0 running with SA / DA set, every other channel as after reset; then S2MM_LENGTH and
// MM2S_LENGTH written kAccess apart.
OracleBatch matmul_batch(const MatmulShape& s, uint64_t stream_addr, uint64_t result_addr) {
  OracleBatch b;
  b.initial.resize(size_t(EngineRegistry::board().dma_count()));
  for (int d = 0; d < 4; ++d)
    for (int c = 0; c < 2; ++c) b.initial[d][c] = DmaChannelRegisters(c == 1, d >= 2);
  for (int c = 0; c < 2; ++c) {
    DmaChannelRegisters& r = b.initial[0][c];
    r.write(R::kMm2sDmacr, R::kCrRunStop);
    r.write(R::kMm2sSa, uint32_t(c ? result_addr : stream_addr));  // SA (MM2S) or DA (S2MM)
  }
  b.memory.push_back({stream_addr, s.bytes});
  const uint64_t mm0 = EngineRegistry::board().dma_base(0);
  b.actions.push_back({OracleAction::Kind::kWrite, kT0, mm0 + R::kS2mmLength, s.result_bytes, 0, {}});
  b.actions.push_back({OracleAction::Kind::kWrite, kT0 + kAccess, mm0 + R::kMm2sLength, uint32_t(s.bytes.size()), 0, {}});
  return b;
}

OracleAction probe_reg(uint64_t t, uint64_t addr) { return {OracleAction::Kind::kProbeRegister, t, addr, 0, 4, {}}; }
uint32_t probe_value(const OracleResult& r, size_t i) {
  uint32_t v = 0;
  std::memcpy(&v, r.probes.at(i).data(), 4);
  return v;
}

TEST(TimingOracle, MatmulBatchSettlesWithTheEnginesResultsAndIdleChannels) {
  const MatmulShape s = test::random_matmul_stream(37, 300, 1);
  const uint64_t stream = 0x0010'0238, result = 0x0020'0040;
  const OracleResult r = run_timing_oracle(BoardConfig{}, matmul_batch(s, stream, result));
  EXPECT_TRUE(r.settled);
  // One transfer per mm0 channel. S2MM starts at the first start's edge (relative 0); MM2S
  // at the edge after its write: (kT0 + 200 ns) / period + 1 - 64 = 25 at 125 MHz.
  ASSERT_EQ(r.channels[0][0].transfers.size(), 1u);
  ASSERT_EQ(r.channels[0][1].transfers.size(), 1u);
  EXPECT_EQ(r.channels[0][1].transfers[0].first, 0u);
  EXPECT_EQ(r.channels[0][0].transfers[0].first, (kT0 + kAccess) / kPeriod + 1 - kOracleFirstEdge);
  // The stream is 16 + 304 + 37 x 64 = 2688 bytes = 336 beats: MM2S cannot complete sooner.
  ASSERT_EQ(s.bytes.size(), 2688u);
  const auto [mm2s_start, mm2s_done] = r.channels[0][0].transfers[0];
  EXPECT_GE(mm2s_done - mm2s_start, 336u);
  // The results follow the last row: S2MM completes after MM2S.
  EXPECT_GT(r.channels[0][1].transfers[0].second, mm2s_done);
  EXPECT_GE(r.cycles, r.channels[0][1].transfers[0].second);
  // Nothing else moved.
  for (int d = 1; d < 4; ++d)
    for (int c = 0; c < 2; ++c) EXPECT_TRUE(r.channels[d][c].transfers.empty()) << d << c;
  EXPECT_EQ(r.bytes_read, s.bytes.size());
  // The last change of each channel: idle with IOC; S2MM_LENGTH holds the bytes received.
  const DmaChannelRegisters& mm2s = r.channels[0][0].changes.back().regs;
  const DmaChannelRegisters& s2mm = r.channels[0][1].changes.back().regs;
  EXPECT_EQ(mm2s.dmasr(), R::kSrIdle | R::kSrIocIrq);
  EXPECT_EQ(s2mm.dmasr(), R::kSrIdle | R::kSrIocIrq);
  EXPECT_EQ(s2mm.length(), s.result_bytes);
  // The PL wrote the results, equal to golden, at DA.
  std::vector<int32_t> want(37);
  golden::ternary_matvec(s.w, 0, 37, s.x.data(), want.data());
  bool found = false;
  for (const auto& w : r.writes)
    if (w.addr <= result && result + 37 * 4 <= w.addr + w.bytes.size()) {
      std::vector<int32_t> got(37);
      std::memcpy(got.data(), w.bytes.data() + (result - w.addr), 37 * 4);
      EXPECT_EQ(got, want);
      found = true;
    }
  EXPECT_TRUE(found);
  // The matmul engine's lane 0 counted one group of 37 rows and is neither busy nor in error.
  EXPECT_FALSE(r.engines[0][0].busy);
  EXPECT_FALSE(r.engines[0][0].error);
  EXPECT_EQ(r.engines[0][0].units_done, 1u);
  EXPECT_EQ(r.engines[0][0].rows_done, 37u);
  EXPECT_EQ(r.engines[0][0].beats_in, 336u);
  EXPECT_EQ(r.engines[0][1].units_done, 0u);
}

// Every edge of two records: the same transfers, changes (time, DMASR, LENGTH; or, with
// `whole_registers`, whether at a write and the whole register file), cycles, quiet edge,
// bytes read and engine registers.
void expect_same_edges(const OracleResult& a, const OracleResult& b, bool whole_registers = false) {
  EXPECT_EQ(a.cycles, b.cycles);
  EXPECT_EQ(a.quiet_edge, b.quiet_edge);
  EXPECT_EQ(a.bytes_read, b.bytes_read);
  for (int d = 0; d < 4; ++d)
    for (int c = 0; c < 2; ++c) {
      const auto& ca = a.channels[d][c];
      const auto& cb = b.channels[d][c];
      EXPECT_EQ(ca.transfers, cb.transfers) << d << c;
      ASSERT_EQ(ca.changes.size(), cb.changes.size()) << d << c;
      for (size_t i = 0; i < ca.changes.size(); ++i) {
        EXPECT_EQ(ca.changes[i].time_ps, cb.changes[i].time_ps) << d << c << " change " << i;
        EXPECT_EQ(ca.changes[i].regs.dmasr(), cb.changes[i].regs.dmasr()) << d << c << " change " << i;
        EXPECT_EQ(ca.changes[i].regs.length(), cb.changes[i].regs.length()) << d << c << " change " << i;
        if (!whole_registers) continue;
        EXPECT_EQ(ca.changes[i].at_write, cb.changes[i].at_write) << d << c << " change " << i;
        EXPECT_TRUE(ca.changes[i].regs == cb.changes[i].regs) << d << c << " change " << i;
      }
    }
  for (int e = 0; e < 2; ++e)
    for (int l = 0; l < 2; ++l) {
      EXPECT_EQ(a.engines[e][l].error, b.engines[e][l].error) << e << l;
      EXPECT_EQ(a.engines[e][l].error_code, b.engines[e][l].error_code) << e << l;
      EXPECT_EQ(a.engines[e][l].error_row, b.engines[e][l].error_row) << e << l;
      EXPECT_EQ(a.engines[e][l].beats_in, b.engines[e][l].beats_in) << e << l;
      EXPECT_EQ(a.engines[e][l].rows_done, b.engines[e][l].rows_done) << e << l;
    }
}

TEST(TimingOracle, TimingDependsOnPageOffsetsNotOnAddresses) {
  const MatmulShape s = test::random_matmul_stream(50, 777, 2);
  const OracleResult a = run_timing_oracle(BoardConfig{}, matmul_batch(s, 0x0010'0238, 0x0020'0040));
  // The same page offsets, other pages (and another MB of the DDR).
  const uint64_t ds = 0x0053'7000, dr = 0x0101'3000;
  const OracleResult b = run_timing_oracle(BoardConfig{}, matmul_batch(s, 0x0010'0238 + ds, 0x0020'0040 + dr));
  expect_same_edges(a, b);
  // mm0's address registers moved with the buffers.
  for (int c = 0; c < 2; ++c) {
    const auto& ca = a.channels[0][c].changes;
    const auto& cb = b.channels[0][c].changes;
    ASSERT_EQ(ca.size(), cb.size()) << c;
    for (size_t i = 0; i < ca.size(); ++i) EXPECT_EQ(cb[i].regs.addr() - ca[i].regs.addr(), c ? dr : ds) << c << i;
  }
  ASSERT_FALSE(a.channels[0][1].changes.empty());
}

// Checked reuse under ddr3 (MemoryTiming::replay, docs/hw-timing.md): a batch's memory trace,
// replayed from another opening (the same batch after idle gaps of other lengths: other
// refresh and clock-crossing phases, rows open or closed), is accepted only where the clocked
// board from that opening runs the batch with the record's edges, and then it gives that
// run's memory end state and DRAM commands; openings where a refresh falls inside the batch
// are rejected.
TEST(TimingOracle, ADdr3TraceReplaysExactlyWhereItHoldsAndIsRejectedElsewhere) {
  BoardConfig cfg;
  cfg.ddr.model = "ddr3";
  const MatmulShape s = test::random_matmul_stream(40, 300, 4);
  const std::unique_ptr<MemoryTiming> timing = make_memory_timing(cfg.ddr, kPeriod);
  ASSERT_TRUE(timing->checks_reuse());
  OracleBatch b = matmul_batch(s, 0x0010'0238, 0x0020'0040);
  b.memory_trace = true;
  // The record: from a memory at reset (every bank closed, the first refresh a tREFI away).
  b.memory_state = timing->initial_state();
  const OracleResult ref = run_timing_oracle(cfg, b);
  ASSERT_FALSE(ref.memory_trace.empty());
  auto opening = [&](uint64_t gap) { return timing->advance(ref.memory_after, gap); };
  const uint64_t quiet = ref.memory_after_edge + kOracleFirstEdge;
  // From its own opening: the record's own memory side.
  const auto own = timing->replay(timing->initial_state(), ref.memory_trace, quiet);
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->after, ref.memory_after);
  EXPECT_EQ(own->dram.counts, ref.dram.counts);
  EXPECT_EQ(own->dram_tail, ref.dram_tail);
  int accepted = 0, rejected = 0;
  // After the batch, idle gaps of 0 to 2,000 edges: rows still open, a refresh inside the
  // batch, or all closed and the next refresh after it.
  for (uint64_t gap = 0; gap < 2000; gap += 17) {
    b.memory_state = opening(gap);
    const auto replayed = timing->replay(b.memory_state, ref.memory_trace, quiet);
    if (!replayed) {
      ++rejected;
      continue;
    }
    ++accepted;
    const OracleResult clocked = run_timing_oracle(cfg, b);
    SCOPED_TRACE("gap " + std::to_string(gap));
    expect_same_edges(ref, clocked);
    EXPECT_EQ(replayed->after, clocked.memory_after);
    EXPECT_EQ(replayed->dram.counts, clocked.dram.counts);
    EXPECT_EQ(replayed->dram.open_cycles, clocked.dram.open_cycles);
    EXPECT_EQ(replayed->dram_tail, clocked.dram_tail);
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
  // A trace that is not one (another model's words, cut short) is rejected, not read past its end.
  MemoryTrace cut = ref.memory_trace;
  cut.words.resize(3);
  EXPECT_FALSE(timing->replay(opening(0), cut, quiet).has_value());
  EXPECT_FALSE(timing->replay(opening(0), MemoryTrace{}, quiet).has_value());
}

// The bytes of `r`'s writes at [addr, addr + n), or empty if no write holds them.
std::vector<uint8_t> written_at(const OracleResult& r, uint64_t addr, size_t n) {
  for (const auto& w : r.writes)
    if (w.addr <= addr && addr + n <= w.addr + w.bytes.size())
      return std::vector<uint8_t>(w.bytes.begin() + long(addr - w.addr), w.bytes.begin() + long(addr - w.addr + n));
  return {};
}

// The fast board's way of opening the oracle: its own DDR as the clocked board's backing,
// not a copy of the regions, gives the same record and results, and leaves that DDR as it
// was; and a timing-only run's oracle, whose engines skip the arithmetic, has every edge of
// the whole run (an invalid trit byte included) with zeros for results.
TEST(TimingOracle, ABackedDdrAndSkippedArithmeticKeepEveryEdge) {
  const MatmulShape s = test::random_matmul_stream(41, 640, 3);
  const uint64_t stream = 0x0030'0238, result = 0x0040'0040;
  const OracleBatch copied = matmul_batch(s, stream, result);
  const OracleResult a = run_timing_oracle(BoardConfig{}, copied);

  PagedMemory ddr(BoardConfig{}.ddr.size_bytes);
  ddr.write(stream, s.bytes.data(), s.bytes.size());
  const std::vector<uint8_t> stale(41 * 4, 0xEE);  // the result buffer's old contents
  ddr.write(result, stale.data(), stale.size());
  OracleBatch backed = copied;
  backed.memory.clear();
  backed.backing = &ddr;
  const OracleResult b = run_timing_oracle(BoardConfig{}, backed);
  expect_same_edges(a, b);
  const std::vector<uint8_t> results = written_at(a, result, 41 * 4);
  ASSERT_EQ(results.size(), 41u * 4);
  EXPECT_EQ(written_at(b, result, 41 * 4), results);
  std::vector<uint8_t> after(stale.size());
  ddr.read(result, after.data(), after.size());
  EXPECT_EQ(after, stale);  // the clocked board wrote its own copy of the page

  OracleBatch timing_only = copied;
  timing_only.arithmetic = false;
  const OracleResult c = run_timing_oracle(BoardConfig{}, timing_only);
  expect_same_edges(a, c);
  EXPECT_EQ(written_at(c, result, 41 * 4), std::vector<uint8_t>(41 * 4, 0));
  EXPECT_NE(results, std::vector<uint8_t>(41 * 4, 0));

  // An invalid trit byte in row 2: the same error at the same edge, with or without arithmetic.
  OracleBatch bad = copied;
  // The group's header, x (640 bytes, a whole number of beats), then rows of 128 bytes.
  const size_t row2 = model::kHeaderBytes + 640 + 2 * model::packed_row_bytes(640) + 3;
  ASSERT_EQ(model::packed_row_bytes(640), 128u);
  bad.memory[0].bytes.at(row2) = 0xF5;
  // The lane stops at the error and the batch would never settle: it ends at a read of
  // MM2S_DMASR long after.
  bad.actions.push_back(probe_reg(kT0 + 50'000'000, EngineRegistry::board().dma_base(0) + R::kMm2sDmasr));
  OracleBatch bad_timing_only = bad;
  bad_timing_only.arithmetic = false;
  const OracleResult d = run_timing_oracle(BoardConfig{}, bad);
  const OracleResult e = run_timing_oracle(BoardConfig{}, bad_timing_only);
  EXPECT_TRUE(d.engines[0][0].error);
  EXPECT_EQ(d.engines[0][0].error_row, 2u);
  expect_same_edges(d, e);
  EXPECT_EQ(d.probes, e.probes);

  // A live run lasts while the caller's DDR changes: it refuses a backing.
  EXPECT_THROW(LiveOracle(BoardConfig{}, backed), Error);
}

TEST(TimingOracle, RecordedChangesAreWhatTheClockedBoardReadsThen) {
  const MatmulShape s = test::random_matmul_stream(21, 130, 3);
  const OracleBatch batch = matmul_batch(s, 0x0010'0100, 0x0020'0000);
  const OracleResult r = run_timing_oracle(BoardConfig{}, batch);
  ASSERT_TRUE(r.settled);
  // The change that makes MM2S idle (its completion edge): a read one picosecond before it
  // still sees the busy channel, a read at its time sees the change.
  const auto& changes = r.channels[0][0].changes;
  size_t k = changes.size();
  for (size_t i = 0; i < changes.size(); ++i)
    if (!changes[i].at_write && (changes[i].regs.dmasr() & R::kSrIdle)) {
      k = i;
      break;
    }
  ASSERT_LT(k, changes.size());
  ASSERT_GT(k, 0u);
  const uint64_t mm0 = EngineRegistry::board().dma_base(0);
  const uint64_t t = changes[k].time_ps;
  const uint64_t late = (kOracleFirstEdge + r.quiet_edge + 500) * kPeriod;
  OracleBatch probed = batch;
  probed.actions.push_back(probe_reg(t - 1, mm0 + R::kMm2sDmasr));
  probed.actions.push_back(probe_reg(t, mm0 + R::kMm2sDmasr));
  probed.actions.push_back(probe_reg(late, mm0 + R::kMm2sDmasr));
  probed.actions.push_back(probe_reg(late, mm0 + R::kS2mmDmasr));
  probed.actions.push_back(probe_reg(late, mm0 + R::kS2mmLength));
  probed.actions.push_back(probe_reg(late, mm0 + R::kMm2sSa));
  const OracleResult p = run_timing_oracle(BoardConfig{}, probed);
  EXPECT_FALSE(p.settled);  // a batch with probes ends at its last action
  ASSERT_EQ(p.probes.size(), 6u);
  EXPECT_EQ(probe_value(p, 0), changes[k - 1].regs.dmasr());
  EXPECT_EQ(probe_value(p, 0) & R::kSrIdle, 0u);
  EXPECT_EQ(probe_value(p, 1), changes[k].regs.dmasr());
  // Long after: the final recorded registers.
  const DmaChannelRegisters& mm2s = changes.back().regs;
  const DmaChannelRegisters& s2mm = r.channels[0][1].changes.back().regs;
  EXPECT_EQ(probe_value(p, 2), mm2s.read(R::kMm2sDmasr));
  EXPECT_EQ(probe_value(p, 3), s2mm.read(R::kMm2sDmasr));
  EXPECT_EQ(probe_value(p, 4), s2mm.read(R::kMm2sLength));
  EXPECT_EQ(probe_value(p, 5), mm2s.read(R::kMm2sSa));
  EXPECT_EQ(probe_value(p, 4), s.result_bytes);
}

TEST(TimingOracle, ABatchThatCannotSettleIsAnErrorOrStopsAtTheHorizon) {
  // S2MM armed, no stream ever started: the channel waits for results forever.
  const MatmulShape s = test::random_matmul_stream(4, 16, 4);
  OracleBatch b = matmul_batch(s, 0x0010'0000, 0x0020'0000);
  b.actions.pop_back();
  try {
    run_timing_oracle(BoardConfig{}, b, 20'000);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not settle within 20000 cycles"), std::string::npos) << e.what();
  }
}

// Runs `batch` live: its actions up to the first probe given to the LiveOracle's constructor,
// then each later action added and each probe asked for on its own.
struct LiveRun {
  std::unique_ptr<LiveOracle> oracle;
  std::vector<std::vector<uint8_t>> values;  // the probes', in order
};
LiveRun probe_live(const OracleBatch& batch) {
  auto is_probe = [](const OracleAction& a) {
    return a.kind == OracleAction::Kind::kProbeRegister || a.kind == OracleAction::Kind::kProbeMemory;
  };
  OracleBatch opening = batch;
  opening.actions.clear();
  size_t i = 0;
  while (i < batch.actions.size() && !is_probe(batch.actions[i])) opening.actions.push_back(batch.actions[i++]);
  LiveRun run{std::make_unique<LiveOracle>(BoardConfig{}, opening), {}};
  for (; i < batch.actions.size(); ++i) {
    if (is_probe(batch.actions[i])) run.values.push_back(run.oracle->probe(batch.actions[i]));
    else run.oracle->add(batch.actions[i]);
  }
  return run;
}

TEST(TimingOracle, ALiveRunReadsWhatAWholeRunReads) {
  // The matmul batch with reads all along it (a poll of both status registers every 40
  // periods, at a picosecond off the edges and on them, and DDR loads of the results as they
  // come), a write of MM2S_SA between two of them; then, at one edge's time, a DDR load and
  // a register write at that same time (the case a pause would change: the live run starts
  // again from the opening), and more polls.
  const MatmulShape s = test::random_matmul_stream(40, 200, 9);
  OracleBatch batch = matmul_batch(s, 0x0010'0100, 0x0020'0000);
  const uint64_t mm0 = EngineRegistry::board().dma_base(0);
  uint64_t t = batch.actions.back().time_ps;
  for (int i = 0; i < 60; ++i) {
    t += 40 * kPeriod + (i % 3 == 0 ? 0 : 1 + 997 * uint64_t(i));
    batch.actions.push_back(probe_reg(t, mm0 + (i % 2 ? R::kS2mmDmasr : R::kMm2sDmasr)));
    if (i % 7 == 3) batch.actions.push_back({OracleAction::Kind::kProbeMemory, t, 0x0020'0000, 0, 160, {}});
    if (i == 20) batch.actions.push_back({OracleAction::Kind::kWrite, t + 1, mm0 + R::kMm2sSa, 0x0040'0000, 0, {}});
  }
  t = (t / kPeriod + 5) * kPeriod;  // an edge
  batch.actions.push_back({OracleAction::Kind::kProbeMemory, t, 0x0020'0000, 0, 160, {}});
  batch.actions.push_back({OracleAction::Kind::kWrite, t, mm0 + R::kMm2sSa, 0x0050'0000, 0, {}});
  batch.actions.push_back(probe_reg(t + kPeriod + 3, mm0 + R::kMm2sSa));
  batch.actions.push_back(probe_reg(t + 2 * kPeriod, mm0 + R::kS2mmLength));

  const OracleResult whole = run_timing_oracle(BoardConfig{}, batch);
  const LiveRun run = probe_live(batch);
  const std::vector<std::vector<uint8_t>>& values = run.values;
  const LiveOracle* live = run.oracle.get();
  ASSERT_EQ(values.size(), whole.probes.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], whole.probes[i]) << "probe " << i;
  EXPECT_EQ(live->restarts(), 1u);  // the store-and-write at the edge's time, once
  // The transfers completed, and their edges are the whole run's.
  for (int c = 0; c < 2; ++c) {
    ASSERT_EQ(live->channel(0, c).transfers.size(), 1u) << c;
    EXPECT_EQ(live->channel(0, c).transfers, whole.channels[0][c].transfers) << c;
  }
  EXPECT_TRUE(live->quiet());
  EXPECT_EQ(live->registers(0, 0).addr(), 0x0050'0000u);
  EXPECT_EQ(live->bytes_read(), whole.bytes_read);
  // The results in DDR are the engine's (the same as a whole run wrote).
  const std::vector<MemoryRegion> w = live->writes();
  ASSERT_EQ(w.size(), whole.writes.size());
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].addr, whole.writes[i].addr);
    EXPECT_EQ(w[i].bytes, whole.writes[i].bytes);
  }
}

// Everything two records say: every register change (time, the whole register file, at a
// write or an edge), transfer, write, probe, the engines' registers, the memory's end state,
// DRAM commands, ledger tail and trace.
void expect_same_record(const OracleResult& a, const OracleResult& b) {
  ASSERT_EQ(a.channels.size(), b.channels.size());
  expect_same_edges(a, b, true);
  EXPECT_EQ(a.settled, b.settled);
  ASSERT_EQ(a.writes.size(), b.writes.size());
  for (size_t i = 0; i < a.writes.size(); ++i) {
    EXPECT_EQ(a.writes[i].addr, b.writes[i].addr) << i;
    EXPECT_EQ(a.writes[i].bytes, b.writes[i].bytes) << i;
  }
  EXPECT_EQ(a.probes, b.probes);
  EXPECT_EQ(a.engines, b.engines);
  EXPECT_EQ(a.memory_after, b.memory_after);
  EXPECT_EQ(a.memory_after_edge, b.memory_after_edge);
  EXPECT_EQ(a.dram, b.dram);
  EXPECT_EQ(a.dram_tail, b.dram_tail);
  EXPECT_EQ(a.memory_trace.words, b.memory_trace.words);
}

// The oracle's two drivers (docs/hw-timing.md, "Two ways to drive the board"): the edge loop
// gives SystemC's record of every batch, to the register file and the DRAM command: under
// each memory model (ddr3 from several openings, with its trace), at two clocks, on one HP
// port, timing-only, with writes at an edge's very time and a picosecond after it, with
// probes of registers and DDR along the run, and with an engine that stops at an error.
TEST(TimingOracle, TheEdgeLoopGivesSystemCsRecordOfEveryBatch) {
  const MatmulShape s = test::random_matmul_stream(45, 420, 11);
  const uint64_t mm0 = EngineRegistry::board().dma_base(0);
  struct Case {
    std::string name;
    BoardConfig config;
    OracleBatch batch;
  };
  std::vector<Case> cases;
  auto add = [&](std::string name, BoardConfig cfg, OracleBatch b) { cases.push_back({std::move(name), cfg, std::move(b)}); };
  add("wall", BoardConfig{}, matmul_batch(s, 0x0010'0238, 0x0020'0040));
  {
    BoardConfig cfg;
    cfg.ddr.model = "latency-bandwidth";
    add("latency-bandwidth", cfg, matmul_batch(s, 0x0010'0238, 0x0020'0040));
    cfg = BoardConfig{};
    cfg.hp_ports = 1;
    add("one HP port", cfg, matmul_batch(s, 0x0010'0238, 0x0020'0040));
  }
  {
    // 207 MHz: a period of 4,831 ps, and the second start at an edge's very time, then a
    // register write a picosecond after the next edge.
    BoardConfig cfg;
    cfg.clock.mhz = 207;
    const uint64_t p = clock_period_ps(cfg.clock.mhz);
    OracleBatch b = matmul_batch(s, 0x0010'0238, 0x0020'0040);
    b.actions[0].time_ps = (kOracleFirstEdge - 1) * p + 1;
    b.actions[1].time_ps = (kOracleFirstEdge + 30) * p;
    b.actions.push_back({OracleAction::Kind::kWrite, (kOracleFirstEdge + 31) * p + 1, mm0 + R::kMm2sDmacr,
                         R::kCrRunStop | R::kCrIocIrqEn, 0, {}});
    add("207 MHz, writes on edges", cfg, std::move(b));
  }
  {
    OracleBatch b = matmul_batch(s, 0x0010'0238, 0x0020'0040);
    b.arithmetic = false;
    add("timing-only", BoardConfig{}, std::move(b));
  }
  {
    // Polls along the run, on edges and off them, a DDR load of the results, a store.
    OracleBatch b = matmul_batch(s, 0x0010'0100, 0x0020'0000);
    uint64_t t = b.actions.back().time_ps;
    for (int i = 0; i < 30; ++i) {
      t += 37 * kPeriod + (i % 3 == 0 ? 0 : 1 + 991 * uint64_t(i));
      b.actions.push_back(probe_reg(t, mm0 + (i % 2 ? R::kS2mmDmasr : R::kMm2sDmasr)));
      if (i % 5 == 2) b.actions.push_back({OracleAction::Kind::kProbeMemory, t, 0x0020'0000, 0, 180, {}});
      if (i == 9) b.actions.push_back({OracleAction::Kind::kCpuStore, t, 0x0030'0000, 0, 8, std::vector<uint8_t>(8, 7)});
    }
    add("probes", BoardConfig{}, std::move(b));
  }
  {
    // An invalid trit byte in row 2: the lane stops; the batch ends at a late read.
    OracleBatch b = matmul_batch(s, 0x0010'0238, 0x0020'0040);
    b.memory[0].bytes.at(model::kHeaderBytes + 420 + 2 * model::packed_row_bytes(420) + 5) = 0xF5;
    b.actions.push_back(probe_reg(kT0 + 30'000'000, mm0 + R::kMm2sDmasr));
    add("engine error", BoardConfig{}, std::move(b));
  }
  {
    BoardConfig cfg;
    cfg.ddr.model = "ddr3";
    const std::unique_ptr<MemoryTiming> timing = make_memory_timing(cfg.ddr, kPeriod);
    OracleBatch b = matmul_batch(s, 0x0010'0238, 0x0020'0040);
    b.memory_trace = true;
    b.memory_state = timing->initial_state();
    b.driver = OracleDriver::kSystemC;
    const OracleResult first = run_timing_oracle(cfg, b);
    b.driver = OracleDriver::kEdgeLoop;
    for (const uint64_t gap : {0, 5, 300, 900, 1700}) {
      b.memory_state = gap == 0 ? timing->initial_state() : timing->advance(first.memory_after, gap);
      add("ddr3, gap " + std::to_string(gap), cfg, b);
    }
  }
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    c.batch.driver = OracleDriver::kSystemC;
    const OracleResult reference = run_timing_oracle(c.config, c.batch);
    c.batch.driver = OracleDriver::kEdgeLoop;
    const OracleResult loop = run_timing_oracle(c.config, c.batch);
    EXPECT_EQ(reference.driver, OracleDriver::kSystemC);
    EXPECT_EQ(loop.driver, OracleDriver::kEdgeLoop);
    ASSERT_FALSE(loop.channels[0][1].transfers.empty() && loop.probes.empty());
    expect_same_record(reference, loop);
  }
  // A batch that cannot settle: the same error from both.
  OracleBatch never = matmul_batch(s, 0x0010'0000, 0x0020'0000);
  never.actions.pop_back();
  for (const OracleDriver driver : {OracleDriver::kSystemC, OracleDriver::kEdgeLoop}) {
    never.driver = driver;
    try {
      run_timing_oracle(BoardConfig{}, never, 20'000);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("did not settle within 20000 cycles"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bitsim::hw
