// EngineLanes (hw/circuits/engine_lane.h): the lane machinery both engines share, driven by a small
// test datapath: result timing and order, back-pressure and stalls, a datapath asking for an
// empty queue, busy, framing (truncated, trailing data), the error sequence (latch, abort,
// discard to TLAST, zero beat, stop, clear, clear while discarding), the status registers
// and the config checks.
#include "support/stream_bench.h"
#include "hw/circuits/engine_lane.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "hw/parts/sim_context.h"

namespace bitsim::hw {
namespace {

using test_bench::RegMaster;
using test_bench::Sink;
using test_bench::Source;

constexpr uint64_t kBase = 0x4000'0000;
constexpr uint64_t kFail = 0xFA11;    // a beat with this data fails with code 5 at row 7
constexpr uint32_t kCode = 5;
constexpr int kRow = 7;
constexpr uint32_t kTruncated = 6, kTrailing = 9;
constexpr uint64_t kEnd = 1ull << 62;  // data bit: this beat ends the transfer

// Each beat is one row: its result is data + 1, queued result_delay edges later, TLAST with
// the beat's; a beat with the kEnd bit ends the unit and the transfer. Beat `empty_at` of a
// transfer (counting from 0) asks for an empty queue.
class TestDatapath final : public LaneDatapath {
 public:
  uint32_t truncated_code() const override { return kTruncated; }
  uint32_t trailing_data_code() const override { return kTrailing; }
  int error_row() const override { return beat; }
  uint32_t queue_entries(int result_delay) const override { return uint32_t(result_delay) + 3; }
  uint32_t room_for_next_beat(uint32_t capacity) const override {
    seen_capacity = capacity;
    return beat == empty_at ? capacity : 2;
  }
  bool holds_result() const override { return holding; }
  void take(EngineLane& lane, const StreamBeat& b, uint64_t c) override {
    ++beat;
    if (b.data == kFail) return lane.fail(kCode, kRow, b.last, c);
    lane.queue(b.data + 1, b.last && (b.data & kEnd), c + uint64_t(lane.result_delay()));
    lane.row_done();
    if (!(b.data & kEnd)) return;
    lane.unit_done();
    beat = 0;
    lane.end_transfer(b.last, c);
  }
  void abort(EngineLane&, uint64_t) override {
    ++aborts;
    beat = 0;
  }

  int beat = 0, empty_at = -1, aborts = 0;
  bool holding = false;
  mutable uint32_t seen_capacity = 0;
};

struct Bench {
  explicit Bench(EngineLaneConfig cfg = {3, 2, 16, kBase})
      : clock("clock", ClockConfig{}),
        engine("engine", clock, cfg,
               [this] {
                 auto d = std::make_unique<TestDatapath>();
                 dp.push_back(d.get());
                 return d;
               }),
        regs("regs") {
    for (int l = 0; l < kLanes; ++l) {
      src.push_back(std::make_unique<Source>(("src" + std::to_string(l)).c_str(), clock, engine.in(l)));
      sink.push_back(std::make_unique<Sink>(("sink" + std::to_string(l)).c_str(), clock, engine.out(l)));
    }
    regs.sock.bind(engine.ctrl);
  }
  void run(int cycles) { sc_core::sc_start(clock.period() * double(cycles)); }
  uint32_t reg(int lane, uint32_t off) { return regs.read(kBase + uint64_t(lane) * engine_reg::kLaneStride + off); }

  std::vector<TestDatapath*> dp;
  Clock clock;
  EngineLanes engine;
  RegMaster regs;
  std::vector<std::unique_ptr<Source>> src;
  std::vector<std::unique_ptr<Sink>> sink;
};

// A transfer: the beats' data, the last one flagged kEnd and TLAST.
std::vector<StreamBeat> transfer(std::vector<uint64_t> data) {
  std::vector<StreamBeat> b;
  for (uint64_t d : data) b.push_back({d, false});
  b.back().last = true;
  b.back().data |= kEnd;
  return b;
}

TEST(EngineLane, ResultsLeaveResultDelayAfterTheirBeatInOrder) {
  FreshSimContext ctx;
  Bench b;
  b.src[0]->append(transfer({10, 20, 30, 40, 50}));
  b.run(40);
  ASSERT_EQ(b.sink[0]->beats.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(b.sink[0]->beats[i].data, (10 * (i + 1) + 1) | (i == 4 ? kEnd : 0));
    EXPECT_EQ(b.sink[0]->beats[i].last, i == 4);
    // pushed at e, taken at e + 1, queued for e + 1 + 3, popped one edge later.
    EXPECT_EQ(b.sink[0]->pop_cycle[i], b.src[0]->push_cycle[i] + 1 + 3 + 1);
  }
  const EngineLaneStats& s = b.engine.stats(0);
  EXPECT_EQ(s.beats_in, 5u);
  EXPECT_EQ(s.beats_out, 5u);
  EXPECT_EQ(s.rows, 5u);
  EXPECT_EQ(s.units, 1u);
  EXPECT_EQ(s.transfers, 1u);
  EXPECT_EQ(s.stall_cycles, 0u);
  EXPECT_EQ(s.busy_cycles, (b.src[0]->push_cycle[4] + 4) - (b.src[0]->push_cycle[0] + 1) + 1);
  EXPECT_EQ(b.engine.stats(1).beats_in, 0u);
  EXPECT_FALSE(b.engine.busy(0));
  EXPECT_EQ(b.dp[0]->seen_capacity, 8u);  // 3 + 3 entries, rounded up to a power of two
}

TEST(EngineLane, FullResultStreamStopsInputAndCountsStalls) {
  FreshSimContext ctx;
  Bench b(EngineLaneConfig{3, 2, 1, kBase});
  b.sink[0]->ready = [](uint64_t) { return false; };
  b.src[0]->append(transfer({1, 2, 3, 4, 5, 6, 7, 8}));
  b.run(30);
  // Beats are taken while the one-beat result stream has room as seen at the edge: the
  // first beat's edge and the 3 after it.
  EXPECT_EQ(b.engine.stats(0).beats_in, 4u);
  EXPECT_GT(b.engine.stats(0).stall_cycles, 0u);
  EXPECT_TRUE(b.engine.busy(0));
  EXPECT_EQ(b.reg(0, engine_reg::kStatus), engine_reg::kStatusBusy);
  b.sink[0]->ready = {};
  b.run(60);
  ASSERT_EQ(b.sink[0]->beats.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(b.sink[0]->beats[i].data, (i + 2) | (i == 7 ? kEnd : 0));
  EXPECT_EQ(b.sink[0]->tlasts, 1);
  EXPECT_FALSE(b.engine.busy(0));
}

TEST(EngineLane, DatapathAskingForAnEmptyQueueWaitsForIt) {
  FreshSimContext ctx;
  Bench b;
  b.dp[0]->empty_at = 2;
  b.src[0]->append(transfer({1, 2, 3}));
  b.run(40);
  ASSERT_EQ(b.sink[0]->beats.size(), 3u);
  const uint64_t c0 = b.src[0]->push_cycle[0] + 1;  // beat 0 taken
  // Beat 1's result leaves the queue at c0 + 1 + 3; beat 2 is taken at the next edge.
  EXPECT_EQ(b.sink[0]->pop_cycle[2], c0 + 5 + 3 + 1);
  EXPECT_EQ(b.engine.stats(0).stall_cycles, 3u);  // edges c0 + 2 .. c0 + 4
}

TEST(EngineLane, DatapathHoldingAResultKeepsTheLaneBusy) {
  FreshSimContext ctx;
  Bench b;
  EXPECT_FALSE(b.engine.busy(1));
  b.dp[1]->holding = true;
  EXPECT_TRUE(b.engine.busy(1));
  EXPECT_EQ(b.reg(1, engine_reg::kStatus), engine_reg::kStatusBusy);
}

TEST(EngineLane, ErrorDiscardsToTlastSendsOneZeroBeatAndStops) {
  FreshSimContext ctx;
  Bench b;
  b.src[0]->append(transfer({1, kFail, 3, 4}));
  b.src[1]->append(transfer({7, 8}));
  b.run(40);
  const auto& out = b.sink[0]->beats;
  ASSERT_EQ(out.size(), 2u);  // beat 0's result, then the zero beat
  EXPECT_EQ(out[0].data, 2u);
  EXPECT_FALSE(out[0].last);
  EXPECT_EQ(out[1].data, 0u);
  EXPECT_TRUE(out[1].last);
  EXPECT_EQ(b.sink[0]->pop_cycle[1], b.src[0]->push_cycle[3] + 1 + 3 + 1);  // TLAST beat + delay
  EXPECT_EQ(b.dp[0]->aborts, 1);
  const EngineLaneError e = b.engine.error(0);
  EXPECT_EQ(e.code, kCode);
  EXPECT_EQ(e.unit, 0);
  EXPECT_EQ(e.row, kRow);
  EXPECT_EQ(e.cycle, b.src[0]->push_cycle[1] + 1);
  EXPECT_TRUE(b.engine.stopped(0));
  EXPECT_EQ(b.engine.stats(0).errors, 1u);
  EXPECT_EQ(b.engine.stats(0).beats_in, 4u);
  EXPECT_EQ(b.engine.stats(0).transfers, 1u);
  EXPECT_EQ(b.reg(0, engine_reg::kStatus), engine_reg::kStatusError | engine_reg::kStatusStopped);
  EXPECT_EQ(b.reg(0, engine_reg::kErrorCode), kCode);
  EXPECT_EQ(b.reg(0, engine_reg::kErrorUnit), 0u);
  EXPECT_EQ(b.reg(0, engine_reg::kErrorRow), uint32_t(kRow));
  // The other lane ran as usual.
  EXPECT_EQ(b.sink[1]->tlasts, 1);
  EXPECT_EQ(b.reg(1, engine_reg::kStatus), 0u);
  EXPECT_EQ(b.reg(1, engine_reg::kErrorRow), engine_reg::kNone);

  // Stopped: nothing is taken until CONTROL.clear; then the next transfer runs.
  b.src[0]->append(transfer({100, 200}));
  b.run(30);
  EXPECT_EQ(b.engine.stats(0).beats_in, 4u);
  b.regs.write(kBase + engine_reg::kControl, engine_reg::kControlClear);
  EXPECT_FALSE(b.engine.stopped(0));
  EXPECT_EQ(b.reg(0, engine_reg::kStatus) & engine_reg::kStatusError, 0u);
  EXPECT_EQ(b.reg(0, engine_reg::kErrorUnit), engine_reg::kNone);
  b.run(30);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[2].data, 101u);
  EXPECT_EQ(out[3].data, 201u | kEnd);
  EXPECT_TRUE(out[3].last);
}

TEST(EngineLane, TlastBeforeTheEndIsTruncatedAndNoTlastAtTheEndIsTrailingData) {
  FreshSimContext ctx;
  Bench b;
  // Lane 0: TLAST on the third beat, which does not end the transfer.
  b.src[0]->append({{1, false}, {2, false}, {3, true}});
  // Lane 1: the second beat ends the transfer without TLAST; the rest is discarded.
  b.src[1]->append({{1, false}, {2 | kEnd, false}, {3, false}, {4, true}});
  b.run(40);
  EXPECT_EQ(b.engine.error(0).code, kTruncated);
  EXPECT_EQ(b.engine.error(0).row, 3);  // the datapath's error_row after the beat
  EXPECT_EQ(b.engine.error(0).unit, 0);
  EXPECT_EQ(b.engine.error(1).code, kTrailing);
  EXPECT_EQ(b.engine.error(1).row, -1);
  EXPECT_EQ(b.engine.error(1).unit, 1);  // units done
  EXPECT_EQ(b.engine.error(1).cycle, b.src[1]->push_cycle[1] + 1);
  for (int l = 0; l < kLanes; ++l) {
    EXPECT_TRUE(b.engine.stopped(l));
    EXPECT_EQ(b.engine.stats(l).errors, 1u);
    EXPECT_EQ(b.sink[size_t(l)]->tlasts, 1);
    EXPECT_EQ(b.sink[size_t(l)]->beats.back().data, 0u);  // the zero beat ends the output
  }
  EXPECT_EQ(b.sink[0]->beats.size(), 4u);  // three results and the zero beat
  EXPECT_EQ(b.sink[1]->beats.size(), 3u);  // two results (no TLAST) and the zero beat
  EXPECT_FALSE(b.sink[1]->beats[1].last);
  EXPECT_EQ(b.sink[1]->pop_cycle[2], b.src[1]->push_cycle[3] + 1 + 3 + 1);
}

TEST(EngineLane, ClearWhileDiscardingAppliesAtTlast) {
  FreshSimContext ctx;
  Bench b;
  b.src[0]->allow = [](uint64_t c) { return c < 3 || c > 20; };  // a gap inside the discard
  b.src[0]->append(transfer({kFail, 2, 3, 4, 5}));
  b.run(10);
  EXPECT_EQ(b.reg(0, engine_reg::kStatus) & engine_reg::kStatusError, engine_reg::kStatusError);
  b.regs.write(kBase + engine_reg::kControl, engine_reg::kControlClear);
  EXPECT_EQ(b.engine.error(0).code, kCode);  // still discarding
  EXPECT_FALSE(b.engine.stopped(0));
  b.run(30);
  EXPECT_EQ(b.sink[0]->tlasts, 1);
  EXPECT_EQ(b.engine.error(0).code, 0u);
  EXPECT_FALSE(b.engine.stopped(0));
  b.src[0]->append(transfer({41}));
  b.run(20);
  ASSERT_EQ(b.sink[0]->tlasts, 2);
  EXPECT_EQ(b.sink[0]->beats.back().data, 42u | kEnd);
}

TEST(EngineLane, RegisterDecode) {
  FreshSimContext ctx;
  Bench b;
  uint32_t v = 0;
  EXPECT_EQ(b.regs.access(tlm::TLM_READ_COMMAND, kBase + kLanes * engine_reg::kLaneStride, &v),
            tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.regs.access(tlm::TLM_READ_COMMAND, kBase + 0x24, &v), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.regs.access(tlm::TLM_READ_COMMAND, kBase, &v, 8), tlm::TLM_BURST_ERROR_RESPONSE);
  v = 0xFFFF'FFFF;
  EXPECT_EQ(b.regs.access(tlm::TLM_WRITE_COMMAND, kBase + engine_reg::kBeatsIn, &v), tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(b.reg(0, engine_reg::kBeatsIn), 0u);  // read-only: ignored
  b.src[1]->append(transfer({1, 2, 3}));
  b.run(20);
  EXPECT_EQ(b.reg(1, engine_reg::kBeatsIn), 3u);
  EXPECT_EQ(b.reg(1, engine_reg::kBeatsOut), 3u);
  EXPECT_EQ(b.reg(1, engine_reg::kRowsDone), 3u);
  EXPECT_EQ(b.reg(1, engine_reg::kUnitsDone), 1u);
  EXPECT_EQ(b.reg(1, engine_reg::kControl), 0u);
}

TEST(EngineLane, ConfigValidation) {
  FreshSimContext ctx;
  Clock clk("clock", ClockConfig{});
  auto dp = [] { return std::make_unique<TestDatapath>(); };
  EXPECT_THROW(EngineLanes("a", clk, EngineLaneConfig{3, 0, 16, kBase}, dp), std::invalid_argument);
  EXPECT_THROW(EngineLanes("b", clk, EngineLaneConfig{3, 2, 0, kBase}, dp), std::invalid_argument);
  EXPECT_THROW(EngineLanes("c", clk, EngineLaneConfig{3, 2, 16, kBase + 0x10}, dp), std::invalid_argument);
  EngineLanes ok("d", clk, EngineLaneConfig{3, 2, 16, kBase}, dp);
  EXPECT_EQ(ok.lanes(), 2);
  EXPECT_THROW(ok.in(kLanes), std::out_of_range);
  EXPECT_THROW(ok.stats(-1), std::out_of_range);
}

}  // namespace
}  // namespace bitsim::hw
