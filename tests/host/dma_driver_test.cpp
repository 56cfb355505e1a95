// DmaDriver (CIRCUITS.md 5): the register accesses of init, a matmul call and an attention
// call (which, in which order, with which values), the SG descriptor chains it writes and
// how its rings wrap, the results it leaves in DDR, and the errors it reports. The driver
// runs on a real FastBoard (host::FastPlatform), whose first batch of every shape runs on the
// clocked board (TimingOracle); host::RecordingPlatform records every access.
#include "host/dma_driver.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "golden/board_reference.h"
#include "host/cycle_platform.h"
#include "host/fast_platform.h"
#include "host/ps.h"
#include "host/mmio_program.h"
#include "hw/board.h"
#include "hw/fast/fast_board.h"
#include "hw/parts/sim_context.h"
#include "hw/parts/sc_kernel.h"
#include "model/attention_stream.h"
#include "base/error.h"
#include "model/packed_image.h"
#include "support/error_of.h"
#include "support/random_model.h"

namespace bitsim::host {
namespace {

// A head of the board's unit (d = 96): 112 bytes of header + q, a result of 392.
HeadWork board_head(HeadWork w) {
  w.header_bytes = uint32_t(model::attention_header_q_bytes(1, model::kBoardHeadDim));
  w.result_bytes = uint32_t(model::attention_result_bytes(model::kBoardHeadDim));
  return w;
}

namespace R = hw::dma_reg;
using Kind = MmioOp::Kind;

uint64_t dma(int d) { return hw::EngineRegistry::board().dma_base(d); }

// A board, a memory map for a model of `heads` heads, and the driver on a recording platform.
struct Rig {
  explicit Rig(int heads, const DriverConfig& dc = DriverConfig{})
      : g(17),
        m(testing::random_model(g, heads, 200, 1, 300)),
        map(m.config, MemoryMapConfig{}),
        board(hw::BoardConfig{}, hw::FastBoardOptions{false, 1}),
        fast(board),
        rec(fast, program),
        driver(rec, map, dc) {}

  // The matmul call `call` of a group of n columns: headers, x and random rows in DDR.
  // Returns the expected results per lane (golden::ternary_matvec).
  std::vector<std::vector<int32_t>> write_matmul(const MatmulCall& call, int n, int rows_total) {
    w = testing::random_ternary(g, rows_total, n);
    x.assign(size_t(n), 0);
    for (auto& v : x) v = int8_t(int(g() % 256) - 128);
    std::vector<std::vector<int32_t>> want(kLanes);
    for (int lane = 0; lane < kLanes; ++lane) {
      const LaneStream& s = call.lane[lane];
      std::vector<uint8_t> head(16 + model::packed_x_bytes(n), 0);
      model::write_group_header({uint32_t(s.rows), uint32_t(n), true}, head.data());
      std::memcpy(head.data() + 16, x.data(), size_t(n));
      fast.mem_write(s.addr, head.data(), head.size());
      const auto rows = model::pack_rows(w, s.row_begin, s.row_begin + s.rows);
      fast.mem_write(s.rows_addr, rows.data(), rows.size());
      want[size_t(lane)].resize(size_t(s.rows));
      golden::ternary_matvec(w, s.row_begin, s.row_begin + s.rows, x.data(), want[size_t(lane)].data());
    }
    return want;
  }

  // After init: the first call of layer 0's o projection, written with write_matmul.
  const MatmulCall& first_o_call() {
    driver.init();
    const MatmulGroup& grp = map.o(0);
    write_matmul(grp.calls[0], grp.n, grp.rows);
    return grp.calls[0];
  }

  // One head of layer 0 at context T on `lane`'s `slot`: header + q, K and V rows in DDR.
  HeadWork write_head(int lane, int slot, int head, int T, bool last, std::vector<int32_t>* want) {
    model::AttentionHeadHeader h;
    h.T = uint32_t(T);
    h.m = 40000 + uint32_t(g() % 1000);
    h.shift = 20;
    h.last = last;
    uint8_t hq[model::attention_header_q_bytes(1, model::kBoardHeadDim)];
    model::write_attention_header(h, hq);
    for (size_t i = 16; i < sizeof hq; ++i) hq[i] = uint8_t(g());
    std::vector<uint8_t> K(size_t(T) * 96), V(size_t(T) * 96);
    for (auto& b : K) b = uint8_t(g() % 64);
    for (auto& b : V) b = uint8_t(g());
    fast.mem_write(map.head_buffer(lane, slot), hq, sizeof hq);
    fast.mem_write(map.k_area(0, head), K.data(), K.size());
    fast.mem_write(map.v_area(0, head), V.data(), V.size());
    if (want) {
      want->assign(98, 0);
      uint32_t sum = 0;
      golden::attention_head(reinterpret_cast<const int8_t*>(hq + 16), reinterpret_cast<const int8_t*>(K.data()),
                             reinterpret_cast<const int8_t*>(V.data()), T, model::kBoardHeadDim, {h.m, int(h.shift), false}, want->data(),
                             &sum);
      (*want)[96] = int32_t(sum);
    }
    return board_head({map.head_buffer(lane, slot), map.k_area(0, head), map.v_area(0, head), uint32_t(T * 96)});
  }

  std::vector<MmioOp> ops_since(size_t first) const {
    return {program.ops.begin() + long(first), program.ops.end()};
  }
  uint32_t mem32(uint64_t addr) {
    uint32_t v = 0;
    fast.mem_read(addr, &v, 4);
    return v;
  }

  std::mt19937 g;
  model::TernaryModel m;
  MemoryMap map;
  hw::FastBoard board;
  FastPlatform fast;
  MmioProgram program;
  RecordingPlatform rec;
  DmaDriver driver;
  model::TernaryMatrix w;
  std::vector<int8_t> x;
};

TEST(DmaDriver, InitResetsEveryChannelPointsTheRingsAndRuns) {
  Rig r(4);
  r.driver.init();
  // Per DMA, per channel (MM2S, then S2MM): DMACR.Reset, CURDESC of its ring (SG DMAs at0,
  // at1 only), DMACR.RS. Simple DMAs: 2 writes a channel; SG: 3.
  std::vector<MmioOp> want;
  for (int d = 0; d < 4; ++d)
    for (uint32_t base : {0u, R::kS2mmOffset}) {
      want.push_back({Kind::kWrite, 0, dma(d) + base + R::kMm2sDmacr, R::kCrReset});
      if (d >= 2) {
        const int lane = d - 2;
        // MM2S ring: 3 descriptors per head slot (2 slots: 6); the S2MM ring follows it.
        const uint64_t first = r.map.descriptors(lane) + (base ? 6 * 64 : 0);
        want.push_back({Kind::kWrite, 0, dma(d) + base + R::kMm2sCurdesc, uint32_t(first)});
      }
      want.push_back({Kind::kWrite, 0, dma(d) + base + R::kMm2sDmacr, R::kCrRunStop});
    }
  ASSERT_EQ(r.program.ops.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r.program.ops[i].kind, Kind::kWrite) << i;
    EXPECT_EQ(r.program.ops[i].addr, want[i].addr) << i << ": " << register_name(r.program.ops[i].addr);
    EXPECT_EQ(r.program.ops[i].value, want[i].value) << i << ": " << register_name(r.program.ops[i].addr);
  }
  // Every channel is running and idle: DMACR = threshold 1 | RS, DMASR = Idle (+ SGIncld).
  for (int d = 0; d < 4; ++d)
    for (uint32_t base : {0u, R::kS2mmOffset}) {
      EXPECT_EQ(r.fast.read32(dma(d) + base + R::kMm2sDmacr, 0), 0x0001'0001u) << d;
      EXPECT_EQ(r.fast.read32(dma(d) + base + R::kMm2sDmasr, 0), R::kSrIdle | (d >= 2 ? R::kSrSgIncld : 0)) << d;
    }
}

TEST(DmaDriver, MatmulCallProgramsBothLanesThenWaitsAndLeavesTheResults) {
  Rig r(4);
  r.driver.init();
  const MatmulGroup& grp = r.map.qkv(0);
  ASSERT_EQ(grp.calls.size(), 1u);
  const MatmulCall& call = grp.calls[0];
  const auto want = r.write_matmul(call, grp.n, grp.rows);
  const size_t first = r.program.ops.size();
  const uint64_t t0 = r.fast.now_ps();
  r.driver.matmul(call, grp.n);
  const auto ops = r.ops_since(first);

  // 1. Per lane: S2MM_DA, S2MM_LENGTH, MM2S_SA, MM2S_LENGTH (S2MM armed before the stream).
  ASSERT_GE(ops.size(), 8u);
  for (int lane = 0; lane < kLanes; ++lane) {
    const LaneStream& s = call.lane[lane];
    const std::pair<uint32_t, uint32_t> regs[4] = {{R::kS2mmDa, uint32_t(r.map.matmul_result(lane))},
                                                   {R::kS2mmLength, uint32_t(s.result_bytes)},
                                                   {R::kMm2sSa, uint32_t(s.addr)},
                                                   {R::kMm2sLength, uint32_t(s.bytes)}};
    for (int k = 0; k < 4; ++k) {
      const MmioOp& op = ops[size_t(lane * 4 + k)];
      EXPECT_EQ(op.kind, Kind::kWrite);
      EXPECT_EQ(op.addr, dma(lane) + regs[k].first) << register_name(op.addr);
      EXPECT_EQ(op.value, regs[k].second) << register_name(op.addr);
    }
  }
  // 2. Then only the wait: DMASR polls (an IOC acknowledged by writing it back) and one
  //    S2MM_LENGTH read per lane, lane 0 wholly before lane 1.
  int lane_seen = 0, length_reads[2] = {0, 0};
  for (size_t i = 8; i < ops.size(); ++i) {
    const MmioOp& op = ops[i];
    ASSERT_TRUE(op.kind == Kind::kRead || op.kind == Kind::kWrite) << i;
    const int d = op.addr >= dma(1) && op.addr < dma(1) + R::kWindowBytes ? 1 : 0;
    ASSERT_EQ(op.addr - dma(d) < R::kWindowBytes, true) << register_name(op.addr);
    EXPECT_GE(d, lane_seen) << "lane 0 after lane 1 at " << i;
    lane_seen = d;
    const uint32_t off = uint32_t(op.addr - dma(d));
    if (off == R::kS2mmLength) {
      ASSERT_EQ(op.kind, Kind::kRead);
      EXPECT_EQ(op.value, call.lane[d].result_bytes);
      // The S2MM channel was seen idle just before.
      ASSERT_GE(i, 1u);
      EXPECT_EQ(ops[i - 1].addr, dma(d) + R::kS2mmDmasr);
      ++length_reads[d];
      continue;
    }
    ASSERT_TRUE(off == R::kS2mmDmasr || off == R::kMm2sDmasr) << register_name(op.addr);
    if (op.kind == Kind::kWrite) {
      // The acknowledge: the IOC bit the read before it saw, written back to the same register.
      ASSERT_GE(i, 1u);
      EXPECT_EQ(ops[i - 1].kind, Kind::kRead);
      EXPECT_EQ(ops[i - 1].addr, op.addr);
      EXPECT_EQ(op.value, ops[i - 1].value & (R::kSrIocIrq | R::kSrErrIrq));
      EXPECT_NE(op.value & R::kSrIocIrq, 0u);
    }
  }
  EXPECT_EQ(length_reads[0], 1);
  EXPECT_EQ(length_reads[1], 1);
  // The last access of each lane's wait is its MM2S side seen idle.
  EXPECT_EQ(ops.back().addr, dma(1) + R::kMm2sDmasr);

  // After the call: every channel idle with its IOC acknowledged; the results in DDR.
  for (int d = 0; d < 2; ++d)
    for (uint32_t sr : {R::kMm2sDmasr, R::kS2mmDmasr}) EXPECT_EQ(r.fast.read32(dma(d) + sr, 0), R::kSrIdle) << d;
  for (int lane = 0; lane < kLanes; ++lane) {
    std::vector<int32_t> got(want[size_t(lane)].size());
    r.fast.mem_read(r.map.matmul_result(lane), got.data(), got.size() * 4);
    EXPECT_EQ(got, want[size_t(lane)]) << "lane " << lane;
  }
  const DriverStats& st = r.driver.stats();
  EXPECT_EQ(st.matmul_calls, 1u);
  EXPECT_EQ(st.transfers, 4u);
  EXPECT_EQ(st.descriptors, 0u);
  // Cache maintenance: each lane's header + x cleaned, each lane's results invalidated.
  const uint64_t x_bytes = model::packed_x_bytes(grp.n);
  EXPECT_EQ(st.flushed_bytes, 2 * (16 + x_bytes));
  EXPECT_EQ(st.invalidated_bytes, call.lane[0].result_bytes + call.lane[1].result_bytes);
  // The call took at least its fixed cost and its 8 programming accesses.
  const DriverConfig dc;
  EXPECT_GE(r.fast.now_ps() - t0, uint64_t((dc.call_overhead_ns + 8 * dc.reg_access_ns) * 1000));
}

// PYNQ's driver (the python profile) makes accesses_per_transfer register accesses per
// transfer and its wait, the protocol's own counted in, and spends transfer_call_ns per
// transfer in its method calls: one matmul call (4 channel starts) at the call's end.
TEST(DmaDriver, PerTransferAccessesAndMethodCallsAreChargedOnTopOfTheProtocol) {
  auto call_cost = [](double accesses, double call_ns) {
    DriverConfig dc = DriverConfig::python();
    dc.accesses_per_transfer = accesses;
    dc.transfer_call_ns = call_ns;
    Rig r(4, dc);
    r.driver.init();
    const MatmulGroup& grp = r.map.qkv(0);
    r.write_matmul(grp.calls[0], grp.n, grp.rows);
    const uint64_t t0 = r.fast.now_ps(), f0 = r.driver.stats().fixed_ps;
    r.driver.matmul(grp.calls[0], grp.n);
    EXPECT_EQ(r.driver.stats().transfers, 4u);
    return std::pair<uint64_t, uint64_t>{r.fast.now_ps() - t0, r.driver.stats().fixed_ps - f0};
  };
  const DriverConfig py = DriverConfig::python();
  const uint64_t access = uint64_t(py.reg_access_ns * 1000);
  const auto none = call_cost(0, 0), one = call_cost(1, 0), nine = call_cost(9, 0), ten = call_cost(10, 0),
             calls = call_cost(9, 1500);
  // The protocol alone makes more than one access per transfer: asking for one adds nothing.
  EXPECT_EQ(one, none);
  // Nine per transfer is more than the protocol makes; each further one costs 4 accesses.
  EXPECT_GT(nine.second, none.second);
  EXPECT_EQ(ten.first - nine.first, 4 * access);
  EXPECT_EQ(ten.second - nine.second, 4 * access);
  EXPECT_EQ(calls.first - nine.first, 4 * 1500 * 1000u);
  EXPECT_EQ(calls.second - nine.second, 4 * 1500 * 1000u);
  // The C driver's defaults charge nothing per transfer.
  EXPECT_EQ(DriverConfig{}.accesses_per_transfer, 0.0);
  EXPECT_EQ(DriverConfig{}.transfer_call_ns, 0.0);
}

TEST(DmaDriver, AttentionCallWritesOneChainPerLaneAndStartsItByTaildesc) {
  Rig r(4);  // two head slots per lane: MM2S ring of 6 descriptors
  r.driver.init();
  const int T = 5;
  std::vector<HeadWork> work[kLanes];
  std::vector<int32_t> want[4];
  for (int hd = 0; hd < 4; ++hd) {
    const int lane = hd / 2, slot = hd % 2;
    work[lane].push_back(r.write_head(lane, slot, hd, T, slot == 1, &want[hd]));
  }
  const size_t first = r.program.ops.size();
  r.driver.attention(work, 0);
  const auto ops = r.ops_since(first);
  // Register writes that start: S2MM_TAILDESC then MM2S_TAILDESC, lane 0 then lane 1.
  std::vector<MmioOp> starts;
  for (const auto& op : ops)
    if (op.kind == Kind::kWrite && (op.addr & 0xFF) != R::kMm2sDmasr && (op.addr & 0xFF) != R::kS2mmDmasr)
      starts.push_back(op);
  ASSERT_EQ(starts.size(), 4u);
  for (int lane = 0; lane < kLanes; ++lane) {
    const uint64_t ring = r.map.descriptors(lane);
    EXPECT_EQ(starts[size_t(2 * lane)].addr, dma(2 + lane) + R::kS2mmTaildesc);
    EXPECT_EQ(starts[size_t(2 * lane)].value, uint32_t(ring + 6 * 64));  // first S2MM descriptor
    EXPECT_EQ(starts[size_t(2 * lane + 1)].addr, dma(2 + lane) + R::kMm2sTaildesc);
    EXPECT_EQ(starts[size_t(2 * lane + 1)].value, uint32_t(ring + 5 * 64));  // 2 heads x 3: the 6th
    // The chain: header+q, K, V per head; SOF on the first, EOF on the last; a ring of 6.
    for (int i = 0; i < 6; ++i) {
      const uint64_t d = ring + uint64_t(i) * 64;
      const HeadWork& h = work[lane][size_t(i / 3)];
      const uint64_t buf[3] = {h.header_q_addr, h.k_addr, h.v_addr};
      const uint32_t len[3] = {112, uint32_t(T * 96), uint32_t(T * 96)};
      EXPECT_EQ(r.mem32(d + R::kDescNxtdesc), uint32_t(ring + uint64_t((i + 1) % 6) * 64)) << i;
      EXPECT_EQ(r.mem32(d + R::kDescBufferAddress), uint32_t(buf[i % 3])) << i;
      EXPECT_EQ(r.mem32(d + R::kDescControl),
                len[i % 3] | (i == 0 ? R::kCtrlSof : 0) | (i == 5 ? R::kCtrlEof : 0)) << i;
      // Written back by the DMA: complete, the whole buffer moved.
      EXPECT_EQ(r.mem32(d + R::kDescStatus), R::kStsCmplt | len[i % 3]) << i;
    }
    const uint64_t s2 = ring + 6 * 64;
    EXPECT_EQ(r.mem32(s2 + R::kDescBufferAddress), uint32_t(r.map.attention_result(lane)));
    EXPECT_EQ(r.mem32(s2 + R::kDescControl), (2u * 49 * 8) | R::kCtrlSof | R::kCtrlEof);
    EXPECT_EQ(r.mem32(s2 + R::kDescStatus) & (R::kStsCmplt | R::kStsLengthMask), R::kStsCmplt | (2u * 49 * 8));
    // The results: 98 words a head (96 accumulators, the sum, padding), equal to golden.
    for (int slot = 0; slot < 2; ++slot) {
      std::vector<int32_t> got(98);
      r.fast.mem_read(r.map.attention_result(lane) + uint64_t(slot) * 392, got.data(), 392);
      for (int k = 0; k < 97; ++k) EXPECT_EQ(got[size_t(k)], want[lane * 2 + slot][size_t(k)]) << "head " << lane * 2 + slot << " word " << k;
    }
  }
  EXPECT_EQ(r.driver.stats().descriptors, 2u * 7);
  EXPECT_EQ(r.driver.stats().transfers, 4u);
  EXPECT_EQ(r.driver.stats().attention_calls, 1u);
}

TEST(DmaDriver, DescriptorRingsWrap) {
  // One head per lane per call on a map with two slots a lane: the MM2S ring (6) holds two
  // calls' chains, so the tail alternates between descriptors 2 and 5; the S2MM ring (the
  // rest of the area: capacity 2 x 3 + 8 = 14, minus 6 = 8) wraps after 8 calls.
  Rig r(4);
  r.driver.init();
  ASSERT_EQ(r.map.descriptor_capacity(), 14);
  const int calls = 10;
  for (int c = 0; c < calls; ++c) {
    std::vector<HeadWork> work[kLanes];
    std::vector<int32_t> want[2];
    for (int lane = 0; lane < kLanes; ++lane)
      work[lane].push_back(r.write_head(lane, 0, 2 * lane, 1 + c % 3, true, &want[lane]));
    const size_t first = r.program.ops.size();
    ASSERT_NO_THROW(r.driver.attention(work, 0)) << "call " << c;
    std::vector<uint32_t> mm2s_tail, s2mm_tail;
    for (const auto& op : r.ops_since(first)) {
      if (op.kind != Kind::kWrite) continue;
      if (op.addr == dma(2) + R::kMm2sTaildesc) mm2s_tail.push_back(op.value);
      if (op.addr == dma(2) + R::kS2mmTaildesc) s2mm_tail.push_back(op.value);
    }
    const uint64_t ring = r.map.descriptors(0);
    ASSERT_EQ(mm2s_tail.size(), 1u);
    ASSERT_EQ(s2mm_tail.size(), 1u);
    EXPECT_EQ(mm2s_tail[0], uint32_t(ring + uint64_t(c % 2 == 0 ? 2 : 5) * 64)) << "call " << c;
    EXPECT_EQ(s2mm_tail[0], uint32_t(ring + uint64_t(6 + c % 8) * 64)) << "call " << c;
    // The wrapped chains still carry the right heads.
    for (int lane = 0; lane < kLanes; ++lane) {
      std::vector<int32_t> got(98);
      r.fast.mem_read(r.map.attention_result(lane), got.data(), 392);
      for (int k = 0; k < 97; ++k) ASSERT_EQ(got[size_t(k)], want[lane][size_t(k)]) << "call " << c << " lane " << lane;
    }
  }
  EXPECT_EQ(r.driver.stats().descriptors, uint64_t(calls) * 2 * 4);
}

// The driver's program for init, a matmul call and an attention call, recorded on `platform`
// (DDR contents written first through it, as the CPU would).
void drive(Platform& platform, MmioProgram& program, const MemoryMap& map) {
  std::mt19937 g(3);
  RecordingPlatform rec(platform, program);
  DmaDriver driver(rec, map, DriverConfig{});
  driver.init();
  const MatmulGroup& grp = map.gate_up(0);
  model::TernaryMatrix w = testing::random_ternary(g, grp.rows, grp.n);
  std::vector<int8_t> x(size_t(grp.n));
  for (auto& v : x) v = int8_t(int(g() % 256) - 128);
  for (const MatmulCall& call : grp.calls) {
    for (int lane = 0; lane < kLanes; ++lane) {
      const LaneStream& s = call.lane[lane];
      std::vector<uint8_t> head(16 + model::packed_x_bytes(grp.n), 0);
      model::write_group_header({uint32_t(s.rows), uint32_t(grp.n), true}, head.data());
      std::memcpy(head.data() + 16, x.data(), x.size());
      rec.mem_write(s.addr, head.data(), head.size());
      const auto rows = model::pack_rows(w, s.row_begin, s.row_begin + s.rows);
      rec.mem_write(s.rows_addr, rows.data(), rows.size());
    }
    driver.matmul(call, grp.n);
    for (int lane = 0; lane < kLanes; ++lane) {
      std::vector<uint8_t> res(call.lane[lane].result_bytes);
      rec.mem_read(map.matmul_result(lane), res.data(), res.size());
    }
  }
  std::vector<HeadWork> work[kLanes];
  for (int hd = 0; hd < 3; ++hd) {
    const int lane = hd / 2, slot = hd % 2, T = 4 + hd;
    model::AttentionHeadHeader h;
    h.T = uint32_t(T);
    h.m = 50000;
    h.shift = 21;
    h.last = slot == 1 || hd == 2;
    uint8_t hq[model::attention_header_q_bytes(1, model::kBoardHeadDim)];
    model::write_attention_header(h, hq);
    for (size_t i = 16; i < sizeof hq; ++i) hq[i] = uint8_t(g());
    std::vector<uint8_t> kv(size_t(T) * 96);
    for (auto& b : kv) b = uint8_t(g() % 50);
    rec.mem_write(map.head_buffer(lane, slot), hq, sizeof hq);
    rec.mem_write(map.k_area(0, hd), kv.data(), kv.size());
    rec.mem_write(map.v_area(0, hd), kv.data(), kv.size());
    work[lane].push_back(board_head({map.head_buffer(lane, slot), map.k_area(0, hd), map.v_area(0, hd), uint32_t(T * 96)}));
  }
  driver.attention(work, 1000);
  for (int lane = 0; lane < kLanes; ++lane) {
    std::vector<uint8_t> res(work[lane].size() * 392);
    rec.mem_read(map.attention_result(lane), res.data(), res.size());
  }
}

TEST(DmaDriver, SameAccessesAtTheSameTimesOnTheClockedAndTheFastBoard) {
  // Every register access of the driver (address, value read or written, simulated time),
  // every CPU load's digest: equal on the clocked board (Ps + CyclePlatform) and the fast
  // board. Three heads: lane 0 a chain of two, lane 1 of one.
  std::mt19937 g(5);
  const model::TernaryModel m = testing::random_model(g, 3, 200, 1, 300);
  const MemoryMap map(m.config, MemoryMapConfig{});
  MmioProgram cycle, fast;
  {
    hw::FreshSimContext context;
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    hw::Board board("board", hw::BoardConfig{});
    Platform* platform = nullptr;
    Ps ps("ps", [&](Ps&) { drive(*platform, cycle, map); });
    ps.bus.bind(board.ps_bus);
    CyclePlatform cp(ps, board);
    platform = &cp;
    hw::start_simulation();
    if (ps.failure()) std::rethrow_exception(ps.failure());
    ASSERT_TRUE(ps.finished());
  }
  {
    hw::FastBoard board(hw::BoardConfig{}, hw::FastBoardOptions{false, 1});
    FastPlatform fp(board);
    drive(fp, fast, map);
  }
  ASSERT_EQ(cycle.ops.size(), fast.ops.size());
  size_t reads = 0;
  for (size_t i = 0; i < cycle.ops.size(); ++i) {
    ASSERT_EQ(cycle.ops[i], fast.ops[i]) << "op " << i << ": " << register_name(cycle.ops[i].addr);
    reads += cycle.ops[i].kind == Kind::kRead;
  }
  EXPECT_GT(reads, 8u);
}

using test::error_of;

TEST(DmaDriver, MisalignedStreamIsADmaErrorNamingTheDmaAndChannel) {
  Rig r(4);
  MatmulCall call = r.first_o_call();
  call.lane[1].addr += 4;  // MM2S_SA not on a beat: the DMA raises DMAIntErr
  const std::string msg = error_of([&] { r.driver.matmul(call, r.map.o(0).n); });
  EXPECT_NE(msg.find("DMA mm1 MM2S"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DMAIntErr"), std::string::npos) << msg;
}

TEST(DmaDriver, ShortResultIsAnErrorNamingTheLane) {
  Rig r(4);
  MatmulCall call = r.first_o_call();
  const uint64_t real = call.lane[0].result_bytes;
  call.lane[0].result_bytes += 8;  // the driver expects a beat more than the engine sends
  const std::string msg = error_of([&] { r.driver.matmul(call, r.map.o(0).n); });
  EXPECT_NE(msg.find("matmul engine lane 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("S2MM received " + std::to_string(real) + " of " + std::to_string(real + 8)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("no engine error latched"), std::string::npos) << msg;
}

TEST(DmaDriver, MalformedStreamIsAnErrorWithTheEnginesDiagnosis) {
  Rig r(4);
  const MatmulCall& call = r.first_o_call();
  // Lane 1's header claims n = 0: the engine latches BadLength for group 0 and ends the
  // result stream with one zero beat, short of what S2MM_LENGTH asked.
  uint8_t hdr[16];
  r.fast.mem_read(call.lane[1].addr, hdr, 16);
  std::memset(hdr + 8, 0, 4);
  r.fast.mem_write(call.lane[1].addr, hdr, 16);
  const std::string msg = error_of([&] { r.driver.matmul(call, r.map.o(0).n); });
  EXPECT_NE(msg.find("matmul engine lane 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find(model::stream_error_name(model::StreamError::BadLength)), std::string::npos) << msg;
  EXPECT_NE(msg.find("in group 0"), std::string::npos) << msg;
}

}  // namespace
}  // namespace bitsim::host
