// FastBoard: the fast fidelity's board, driven here by register accesses at chosen times
// (no driver): a batch of a shape seen before reuses the recorded timing (a cache hit, the
// same relative edges) while its results are computed afresh; a batch whose stream header
// differs is a new shape; register reads see a change from the picosecond after its edge;
// a write into a decoded weight area drops the decoded copy; the timing-only mode moves no
// results but keeps the timing.
#include "hw/fast/fast_board.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "golden/board_reference.h"
#include "hw/circuits/engine_regs.h"
#include "base/error.h"
#include "model/packed_image.h"
#include "support/matmul_stream.h"

namespace bitsim::hw {
namespace {

namespace R = dma_reg;

// A random one-group matmul stream with its golden results (tests/support/matmul_stream.h).
using Stream = test::MatmulStream;
Stream make_stream(int rows, int n, uint32_t seed) { return test::random_matmul_stream(rows, n, seed); }

const uint64_t kMm0 = EngineRegistry::board().dma_base(0);
constexpr uint64_t kAccess = 200'000;  // ps per register access

struct Outcome {
  std::vector<FastBoard::Completed> done;  // absolute edges
  uint64_t end_ps = 0;
};

// Resets and runs mm0 at t, then one matmul transfer (DA, S2MM_LENGTH, SA, MM2S_LENGTH),
// polls S2MM then MM2S until idle, and acknowledges both IOCs. Every access at a time
// relative to t, so that two calls whose t differ by whole clock periods are alike. `gap`
// (ps) delays the stream's writes (SA, MM2S_LENGTH) after the result channel has started.
Outcome run_matmul(FastBoard& b, uint64_t t, const Stream& s, uint64_t stream_addr, uint64_t result_addr,
                   uint64_t gap = 0) {
  b.memory().write(stream_addr, s.bytes.data(), s.bytes.size());
  Outcome o;
  for (uint32_t base : {0u, R::kS2mmOffset}) {
    b.write32(kMm0 + base + R::kMm2sDmacr, R::kCrReset, t);
    t += kAccess;
    b.write32(kMm0 + base + R::kMm2sDmacr, R::kCrRunStop, t);
    t += kAccess;
  }
  b.write32(kMm0 + R::kS2mmDa, uint32_t(result_addr), t);
  b.write32(kMm0 + R::kS2mmLength, s.result_bytes, t += kAccess);
  t += gap;
  b.write32(kMm0 + R::kMm2sSa, uint32_t(stream_addr), t += kAccess);
  b.write32(kMm0 + R::kMm2sLength, uint32_t(s.bytes.size()), t += kAccess);
  for (uint32_t sr : {R::kS2mmDmasr, R::kMm2sDmasr}) {
    for (int i = 0; !(b.read32(kMm0 + sr, t += kAccess) & R::kSrIdle); ++i)
      if (i > 1'000'000) throw std::runtime_error("the transfer did not complete");
  }
  t += 100'000'000;  // long after: the batch is over
  for (uint32_t sr : {R::kS2mmDmasr, R::kMm2sDmasr}) b.write32(kMm0 + sr, R::kSrIocIrq, t += kAccess);
  o.done = b.take_completed();
  o.end_ps = t;
  return o;
}

std::vector<int32_t> results(FastBoard& b, uint64_t addr, int rows) {
  std::vector<int32_t> v(static_cast<size_t>(rows));
  b.memory().read(addr, v.data(), v.size() * 4);
  return v;
}

// (channel, completion - start) of each completed transfer.
std::vector<std::pair<int, uint64_t>> durations(const Outcome& o) {
  std::vector<std::pair<int, uint64_t>> out;
  for (const auto& c : o.done) out.emplace_back(c.dma * 2 + c.channel, c.completion - c.start);
  return out;
}

TEST(FastBoard, ASecondBatchOfTheSameShapeIsACacheHitWithTheSameTiming) {
  FastBoard b(BoardConfig{}, FastBoardOptions{false, 1});
  const uint64_t P = b.period_ps();
  const Stream s1 = make_stream(37, 300, 1), s2 = make_stream(37, 300, 2);  // other trits and x
  const Outcome o1 = run_matmul(b, 1'000'000, s1, 0x0010'0238, 0x0020'0040);
  EXPECT_EQ(b.stats().batches, 1u);
  EXPECT_EQ(b.stats().oracle_runs, 1u);
  EXPECT_EQ(b.stats().cache_hits, 0u);
  EXPECT_EQ(results(b, 0x0020'0040, 37), s1.want);
  // Later by whole periods, on other pages at the same page offsets.
  const uint64_t t2 = (o1.end_ps / P + 1000) * P + 1'000'000 % P;
  const Outcome o2 = run_matmul(b, t2, s2, 0x0061'3238, 0x0070'5040);
  EXPECT_EQ(b.stats().batches, 2u);
  EXPECT_EQ(b.stats().oracle_runs, 1u);
  EXPECT_EQ(b.stats().cache_hits, 1u);
  ASSERT_EQ(o1.done.size(), 2u);
  EXPECT_EQ(durations(o1), durations(o2));
  // The same edges, shifted by the start.
  const uint64_t shift = (t2 - 1'000'000) / P;
  for (size_t i = 0; i < o1.done.size(); ++i) {
    EXPECT_EQ(o2.done[i].start, o1.done[i].start + shift);
    EXPECT_EQ(o2.done[i].completion, o1.done[i].completion + shift);
  }
  // The results are the second stream's, computed, not the first batch's replayed.
  EXPECT_EQ(results(b, 0x0070'5040, 37), s2.want);
  EXPECT_NE(s1.want, s2.want);
}

TEST(FastBoard, APrefillGroupGivesEachPositionsGoldenSumsAndItsShapeIsItsOwn) {
  // prefill.tokens_per_pass = 8 (docs/prefill.md): a group of 8 vectors returns per row the
  // 8 positions' sums (golden::prefill_matvec, plain loops per position); its timing comes
  // from the clocked board (the oracle) and a second batch of the shape reuses it; a group
  // of 1 vector is another shape, the board's.
  BoardConfig cfg;
  cfg.prefill.tokens_per_pass = 8;
  FastBoard b(cfg, FastBoardOptions{false, 1});
  const uint64_t P = b.period_ps();
  const Stream s1 = test::random_matmul_stream(37, 300, 1, 8), s2 = test::random_matmul_stream(37, 300, 2, 8);
  const Outcome o1 = run_matmul(b, 1'000'000, s1, 0x0010'0238, 0x0020'0040);
  EXPECT_EQ(b.stats().oracle_runs, 1u);
  EXPECT_EQ(results(b, 0x0020'0040, 37 * 8), s1.want);
  const uint64_t t2 = (o1.end_ps / P + 1000) * P + 1'000'000 % P;
  const Outcome o2 = run_matmul(b, t2, s2, 0x0061'3238, 0x0070'5040);
  EXPECT_EQ(b.stats().cache_hits, 1u);
  EXPECT_EQ(durations(o1), durations(o2));
  EXPECT_EQ(results(b, 0x0070'5040, 37 * 8), s2.want);
  const Outcome o3 = run_matmul(b, (o2.end_ps / P + 1000) * P, make_stream(37, 300, 3), 0x0010'0238, 0x0020'0040);
  EXPECT_EQ(b.stats().oracle_runs, 2u);
  EXPECT_LT(durations(o3)[0].second, durations(o1)[0].second);  // 1 x vector and 37 results against 8 and 296
}

TEST(FastBoard, AWriteAtAnotherEdgeOfTheBatchIsANewShape) {
  // The same writes with the same values, but the stream starts 50 periods after the result
  // channel instead of right after it: the key holds each write's edge within the batch, so
  // this is a new shape with its own timing, not the first batch's timing reused.
  FastBoard b(BoardConfig{}, FastBoardOptions{false, 1});
  const uint64_t P = b.period_ps();
  const Stream s1 = make_stream(37, 300, 5), s2 = make_stream(37, 300, 6);
  const Outcome o1 = run_matmul(b, 1'000'000, s1, 0x0010'0238, 0x0020'0040);
  const uint64_t t2 = (o1.end_ps / P + 1000) * P + 1'000'000 % P;
  const Outcome o2 = run_matmul(b, t2, s2, 0x0061'3238, 0x0070'5040, 50 * P);
  EXPECT_EQ(b.stats().batches, 2u);
  EXPECT_EQ(b.stats().cache_hits, 0u);
  EXPECT_EQ(b.stats().oracle_runs, 2u);
  ASSERT_EQ(o2.done.size(), 2u);
  EXPECT_NE(durations(o1), durations(o2));
  // Its edges are those of a board that never saw the first batch.
  FastBoard fresh(BoardConfig{}, FastBoardOptions{false, 1});
  const Outcome o3 = run_matmul(fresh, t2, s2, 0x0061'3238, 0x0070'5040, 50 * P);
  ASSERT_EQ(o3.done.size(), o2.done.size());
  for (size_t i = 0; i < o2.done.size(); ++i) {
    EXPECT_EQ(o2.done[i].start, o3.done[i].start);
    EXPECT_EQ(o2.done[i].completion, o3.done[i].completion);
  }
  EXPECT_EQ(results(b, 0x0070'5040, 37), s2.want);
}

TEST(FastBoard, AStreamHeaderThatDiffersIsANewShape) {
  FastBoard b(BoardConfig{}, FastBoardOptions{false, 1});
  const uint64_t P = b.period_ps();
  // n = 300 and n = 297 give streams of the same length (x padded to 304, rows of 64
  // bytes): only the header's n differs.
  const Stream a = make_stream(37, 300, 3), c = make_stream(37, 297, 4);
  ASSERT_EQ(a.bytes.size(), c.bytes.size());
  const Outcome o1 = run_matmul(b, 1'000'000, a, 0x0010'0238, 0x0020'0040);
  const uint64_t t2 = (o1.end_ps / P + 1000) * P + 1'000'000 % P;
  run_matmul(b, t2, c, 0x0010'0238, 0x0020'0040);
  EXPECT_EQ(b.stats().cache_hits, 0u);
  EXPECT_EQ(b.stats().oracle_runs, 2u);
  EXPECT_EQ(results(b, 0x0020'0040, 37), c.want);
}

TEST(FastBoard, ReadsSeeAnEdgesChangeFromThePicosecondAfterIt) {
  const Stream s = make_stream(20, 96, 5);
  Outcome o;
  {
    FastBoard b(BoardConfig{}, FastBoardOptions{false, 1});
    o = run_matmul(b, 1'000'000, s, 0x0010'0000, 0x0020'0000);
  }
  ASSERT_EQ(o.done.size(), 2u);
  // The same accesses on a fresh board, but the waits replaced by reads at the edges.
  FastBoard b(BoardConfig{}, FastBoardOptions{false, 1});
  const uint64_t P = b.period_ps();
  b.memory().write(0x0010'0000, s.bytes.data(), s.bytes.size());
  uint64_t t = 1'000'000;
  for (uint32_t base : {0u, R::kS2mmOffset}) {
    b.write32(kMm0 + base + R::kMm2sDmacr, R::kCrReset, t);
    b.write32(kMm0 + base + R::kMm2sDmacr, R::kCrRunStop, t += kAccess);
    t += kAccess;
  }
  b.write32(kMm0 + R::kS2mmDa, 0x0020'0000, t);
  b.write32(kMm0 + R::kS2mmLength, s.result_bytes, t += kAccess);
  b.write32(kMm0 + R::kMm2sSa, 0x0010'0000, t += kAccess);
  b.write32(kMm0 + R::kMm2sLength, uint32_t(s.bytes.size()), t += kAccess);
  for (const auto& c : o.done) {
    const uint64_t sr = kMm0 + (c.channel ? R::kS2mmDmasr : R::kMm2sDmasr);
    const uint64_t edge_ps = c.completion * P;  // edge c happens at c x period
    const uint32_t before = b.read32(sr, edge_ps), after = b.read32(sr, edge_ps + 1);
    EXPECT_EQ(before & R::kSrIdle, 0u) << "channel " << c.channel << " at edge " << c.completion;
    EXPECT_EQ(after, R::kSrIdle | R::kSrIocIrq) << "channel " << c.channel << " at edge " << c.completion;
  }
  // S2MM_LENGTH: the bytes received once the S2MM side is done.
  EXPECT_EQ(b.read32(kMm0 + R::kS2mmLength, (o.done.back().completion + 1) * P), s.result_bytes);
}

TEST(FastBoard, AWriteIntoADecodedWeightAreaDropsIt) {
  FastBoard b(BoardConfig{}, FastBoardOptions{false, 1});
  const uint64_t P = b.period_ps();
  Stream s = make_stream(40, 200, 6);
  const uint64_t stream = 0x0010'0000, result = 0x0020'0000;
  const Outcome o1 = run_matmul(b, 1'000'000, s, stream, result);
  // 40 rows of 200 trits decoded; a write elsewhere keeps them.
  const uint64_t held = b.stats().decoded_bytes;
  EXPECT_GT(held, 0u);
  const uint8_t z[8] = {};
  b.memory().write(stream - 64, z, 8);
  b.memory().write(stream + s.bytes.size(), z, 8);
  EXPECT_EQ(b.stats().decoded_bytes, held);
  // New trits for row 7 written into the rows' area: the decoded copy goes, and the next
  // batch (the same shape: a cache hit) computes with the new row.
  const size_t row_bytes = model::packed_row_bytes(200);
  const uint64_t rows_at = stream + 16 + model::packed_x_bytes(200);
  for (int i = 0; i < 200; ++i) s.w.trits[size_t(7 * 200 + i)] = int8_t(1 - std::abs(s.w.trits[size_t(7 * 200 + i)]));
  std::vector<uint8_t> packed(row_bytes);
  model::pack_row(s.w.row(7), 200, packed.data());
  std::memcpy(s.bytes.data() + (rows_at - stream) + 7 * row_bytes, packed.data(), row_bytes);
  b.memory().write(rows_at + 7 * row_bytes, packed.data(), row_bytes);
  EXPECT_EQ(b.stats().decoded_bytes, 0u);
  std::vector<int32_t> want(40);
  golden::ternary_matvec(s.w, 0, 40, s.x.data(), want.data());
  ASSERT_NE(want, s.want);
  const uint64_t t2 = (o1.end_ps / P + 1000) * P + 1'000'000 % P;
  run_matmul(b, t2, s, stream, result);
  EXPECT_EQ(b.stats().cache_hits, 1u);
  EXPECT_EQ(results(b, result, 40), want);
  EXPECT_EQ(b.stats().decoded_bytes, held);
}

TEST(FastBoard, TimingOnlyMovesNoResultsAndKeepsTheTiming) {
  const Stream s = make_stream(33, 500, 7);
  FastBoard functional(BoardConfig{}, FastBoardOptions{false, 1});
  FastBoard timing(BoardConfig{}, FastBoardOptions{true, 1});
  const Outcome a = run_matmul(functional, 1'000'000, s, 0x0010'0000, 0x0020'0000);
  const Outcome b = run_matmul(timing, 1'000'000, s, 0x0010'0000, 0x0020'0000);
  ASSERT_EQ(a.done.size(), b.done.size());
  for (size_t i = 0; i < a.done.size(); ++i) {
    EXPECT_EQ(a.done[i].start, b.done[i].start);
    EXPECT_EQ(a.done[i].completion, b.done[i].completion);
  }
  EXPECT_EQ(functional.bytes_read(), timing.bytes_read());
  EXPECT_EQ(results(functional, 0x0020'0000, 33), s.want);
  EXPECT_EQ(timing.stats().decoded_bytes, 0u);
}

TEST(FastBoard, EngineCountersAddUpOverBatches) {
  FastBoard b(BoardConfig{}, FastBoardOptions{false, 1});
  const uint64_t P = b.period_ps();
  const Stream s = make_stream(11, 64, 8);
  const uint64_t lane0 = EngineRegistry::board()[0].regs;
  uint64_t t = 1'000'000;
  for (int k = 1; k <= 3; ++k) {
    const Outcome o = run_matmul(b, t, s, 0x0010'0000, 0x0020'0000);
    t = (o.end_ps / P + 1000) * P + 1'000'000 % P;
    EXPECT_EQ(b.read32(lane0 + engine_reg::kStatus, t), 0u);
    EXPECT_EQ(b.read32(lane0 + engine_reg::kUnitsDone, t), uint32_t(k));
    EXPECT_EQ(b.read32(lane0 + engine_reg::kRowsDone, t), uint32_t(11 * k));
    // 16 + 64 + 11 x 16 = 256 bytes = 32 beats in, ceil(11 / 2) = 6 beats out per batch.
    EXPECT_EQ(b.read32(lane0 + engine_reg::kBeatsIn, t), uint32_t(32 * k));
    EXPECT_EQ(b.read32(lane0 + engine_reg::kBeatsOut, t), uint32_t(6 * k));
    EXPECT_EQ(b.read32(lane0 + engine_reg::kLaneStride + engine_reg::kUnitsDone, t), 0u);
  }
  EXPECT_EQ(b.stats().cache_hits, 2u);
}

TEST(FastBoard, AGeneralBatchRunsOnceOnTheClockedBoardHoweverManyReads) {
  // A batch made general by a write during it (to the engine's CONTROL: only the clocked
  // board can place it) and then polled: the
  // engine's counters and both status registers every 8 periods and a load of the results,
  // until both channels are idle. The clocked board runs once for the shape and once, live,
  // for the general batch: not once per read. Its counters move as the clocked board's do,
  // and the results are the engine's.
  FastBoard b(BoardConfig{}, FastBoardOptions{false, 1});
  const uint64_t P = b.period_ps();
  const Stream s = make_stream(48, 256, 11);
  const uint64_t lane0 = EngineRegistry::board()[0].regs;
  const uint64_t stream_addr = 0x0010'0000, result_addr = 0x0020'0000;
  b.memory().write(stream_addr, s.bytes.data(), s.bytes.size());
  uint64_t t = 1'000'000;
  for (uint32_t base : {0u, R::kS2mmOffset}) b.write32(kMm0 + base + R::kMm2sDmacr, R::kCrRunStop, t += kAccess);
  b.write32(kMm0 + R::kS2mmDa, uint32_t(result_addr), t += kAccess);
  b.write32(kMm0 + R::kS2mmLength, s.result_bytes, t += kAccess);
  b.write32(kMm0 + R::kMm2sSa, uint32_t(stream_addr), t += kAccess);
  b.write32(kMm0 + R::kMm2sLength, uint32_t(s.bytes.size()), t += kAccess);
  EXPECT_NE(b.read32(kMm0 + R::kMm2sDmasr, t += kAccess) & R::kSrIdle, R::kSrIdle);  // resolves: a reusable shape
  EXPECT_EQ(b.stats().oracle_runs, 1u);
  b.write32(lane0 + engine_reg::kControl, 0, t += 3);  // clears nothing, but only the clocked board knows
  uint32_t beats_in = 0, polls = 0;
  std::vector<int32_t> got(48);
  for (;;) {
    t += 8 * P + 3;
    const uint32_t in = b.read32(lane0 + engine_reg::kBeatsIn, t);
    EXPECT_GE(in, beats_in);
    beats_in = in;
    b.cpu_read(result_addr, got.data(), got.size() * 4, t + 1);
    const uint32_t mm2s = b.read32(kMm0 + R::kMm2sDmasr, t + 2), s2mm = b.read32(kMm0 + R::kS2mmDmasr, t + 3);
    ++polls;
    if ((mm2s & s2mm & R::kSrIdle) || polls > 10'000) break;
  }
  EXPECT_GT(polls, 20u);
  const uint32_t beats = uint32_t(s.bytes.size() / 8);  // the whole stream, 8 bytes a beat
  EXPECT_EQ(beats_in, beats);
  b.cpu_read(result_addr, got.data(), got.size() * 4, t + 4);
  EXPECT_EQ(got, s.want);
  EXPECT_EQ(b.stats().oracle_runs, 2u);
  // The batch closes at a quiet read off an edge; then the board answers on its own.
  t = (t / P + 100) * P + 5;
  EXPECT_EQ(b.read32(lane0 + engine_reg::kBeatsIn, t), beats);
  EXPECT_EQ(results(b, result_addr, 48), s.want);
  EXPECT_EQ(b.read32(lane0 + engine_reg::kUnitsDone, t + kAccess), 1u);
  EXPECT_EQ(b.stats().oracle_runs, 2u);
  EXPECT_EQ(b.take_completed().size(), 2u);  // both transfers, each reported once
}

TEST(FastBoard, UnmappedRegisterIsAnError) {
  FastBoard b(BoardConfig{});
  EXPECT_THROW(b.read32(kMm0 + 0x2C, 0), Error);         // between MM2S_LENGTH and S2MM_DMACR
  EXPECT_THROW(b.write32(kMm0 + 0x60, 1, 0), Error);      // past the S2MM registers
  EXPECT_THROW(b.read32(0x4000'0000 + 0x0F00'0000, 0), Error);
}

}  // namespace
}  // namespace bitsim::hw
