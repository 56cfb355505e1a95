// Board (CIRCUITS.md 1, docs/hw-timing.md): the top level wired end to end. Every register
// access goes through the board's AXI-Lite router (`ps_bus`), every data beat through the
// DMAs, the HP ports and the DDR:
//   - matmul groups through mm0 / mm1 in simple mode land bit-exact results in DDR
//     (golden::ternary_matvec), one lane alone and both lanes at once;
//   - attention SG chains on at0 / at1 (3 descriptors per head) give golden::attention_head
//     bit for bit;
//   - a malformed matmul stream is reported by the engine's status registers read over
//     ps_bus, and the S2MM completes with the engine's 8-byte zero beat (no hang);
//   - an unmapped AXI-Lite address answers TLM_ADDRESS_ERROR_RESPONSE (and the PS sees a
//     bitsim::Error naming it);
//   - the DDR wall at board level (250 MHz: the wall binds; 100 MHz: the ports bind);
//   - a hand-worked cycle count of one matmul transfer through the whole board.
// Each test runs the simulation in bounded chunks: the clock never stops by itself.
#include "hw/memory/ddr.h"
#include "hw/board.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>

#include "golden/board_reference.h"
#include "host/dma_driver.h"
#include "host/memory_map.h"
#include "host/ps.h"
#include "hw/circuits/engine_regs.h"
#include "hw/memory/memory_registry.h"
#include "hw/parts/progress_watchdog.h"
#include "hw/parts/sim_context.h"
#include "hw/parts/sc_kernel.h"
#include "base/error.h"
#include "model/packed_image.h"

// The driver programs the board either directly (DmaDriver(Ps&, Board&, ...)) or through the
// host's Platform interface (host/cycle_platform.h); the tests build against either.
#if __has_include("host/cycle_platform.h")
#include "host/cycle_platform.h"
#define BITSIM_TEST_DRIVER_ON_PLATFORM 1
#else
#define BITSIM_TEST_DRIVER_ON_PLATFORM 0
#endif

namespace bitsim::hw {
namespace {

using namespace dma_reg;

// ---- scaffolding ---------------------------------------------------------------------------

// The CPU's side of GP0: 32-bit register accesses as TLM transactions on Board::ps_bus,
// issued from the test body between simulation chunks (no delay is annotated: the targets
// take effect at the first edge after the current time).
class BusMaster : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<BusMaster> socket;
  explicit BusMaster(sc_core::sc_module_name n) : sc_module(n), socket("socket") {}

  tlm::tlm_response_status access(tlm::tlm_command cmd, uint64_t addr, uint32_t* v) {
    tlm::tlm_generic_payload p;
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    p.set_command(cmd);
    p.set_address(addr);
    p.set_data_ptr(reinterpret_cast<unsigned char*>(v));
    p.set_data_length(4);
    p.set_streaming_width(4);
    p.set_byte_enable_ptr(nullptr);
    p.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    socket->b_transport(p, delay);
    return p.get_response_status();
  }
  uint32_t read(uint64_t addr) {
    uint32_t v = 0;
    EXPECT_EQ(access(tlm::TLM_READ_COMMAND, addr, &v), tlm::TLM_OK_RESPONSE) << std::hex << addr;
    return v;
  }
  void write(uint64_t addr, uint32_t v) {
    EXPECT_EQ(access(tlm::TLM_WRITE_COMMAND, addr, &v), tlm::TLM_OK_RESPONSE) << std::hex << addr;
  }
};

struct Rig {
  explicit Rig(const BoardConfig& cfg = {}) : board("board", cfg), cpu("cpu") { cpu.socket.bind(board.ps_bus); }

  uint32_t rd(DmaId d, uint32_t off) { return cpu.read(board.dma_base(d) + off); }
  void wr(DmaId d, uint32_t off, uint32_t v) { cpu.write(board.dma_base(d) + off, v); }
  uint32_t matmul_reg(int lane, uint32_t off) {
    return cpu.read(EngineRegistry::board()[0].regs + uint64_t(lane) * engine_reg::kLaneStride + off);
  }
  uint32_t attention_reg(int lane, uint32_t off) {
    return cpu.read(EngineRegistry::board()[1].regs + uint64_t(lane) * engine_reg::kLaneStride + off);
  }
  bool idle(DmaId d, uint32_t sr) { return (rd(d, sr) & kSrIdle) != 0; }
  // Runs in chunks of `chunk` cycles until pred() holds; fails the test after max_cycles.
  bool run_until(const std::function<bool()>& pred, uint64_t max_cycles, uint64_t chunk = 256) {
    const uint64_t start = board.clock().cycle();
    while (!pred()) {
      if (board.clock().cycle() - start >= max_cycles) {
        ADD_FAILURE() << "condition not reached within " << max_cycles << " cycles";
        return false;
      }
      start_simulation(board.clock().period() * double(chunk));
    }
    return true;
  }
  void run_cycles(uint64_t n) { start_simulation(board.clock().period() * double(n)); }
  // The edge at which a register write issued now takes effect (docs/hw-timing.md: c0).
  uint64_t write_edge() {
    return sc_core::sc_time_stamp().value() / board.clock().period().value() + 1;
  }

  Board board;
  BusMaster cpu;
};

const DmaId kMm[2] = {DmaId::Mm0, DmaId::Mm1};
const DmaId kAt[2] = {DmaId::At0, DmaId::At1};

// ---- matmul ----------------------------------------------------------------------------------

struct MatmulJob {
  model::TernaryMatrix m;
  std::vector<int8_t> x;
  std::vector<uint8_t> stream;
  std::vector<int32_t> golden;  // R results, zero-padded to a whole beat
  uint64_t src = 0, dst = 0;
  uint32_t result_bytes() const { return uint32_t(golden.size() * 4); }
};

MatmulJob make_matmul(int rows, int n, uint64_t seed, uint64_t src, uint64_t dst) {
  std::mt19937_64 rng(seed);
  MatmulJob j;
  j.m.rows = rows;
  j.m.cols = n;
  j.m.scale = 1.0f;
  j.m.trits.resize(size_t(rows) * size_t(n));
  for (auto& t : j.m.trits) t = int8_t(int(rng() % 3) - 1);
  j.x.resize(size_t(n));
  for (auto& v : j.x) v = int8_t(uint8_t(rng()));
  j.stream = model::build_stream({{j.x.data(), n, &j.m, 0, rows}});
  j.golden.assign(size_t(rows + (rows & 1)), 0);
  golden::ternary_matvec(j.m, 0, rows, j.x.data(), j.golden.data());
  j.src = src;
  j.dst = dst;
  return j;
}

// The CPU's part: the stream into DDR (backdoor), then the driver's register sequence for
// one lane: RS on both channels, S2MM_DA + S2MM_LENGTH, MM2S_SA + MM2S_LENGTH.
void start_matmul(Rig& r, int lane, const MatmulJob& j) {
  r.board.memory().write(j.src, j.stream.data(), j.stream.size());
  const DmaId d = kMm[lane];
  r.wr(d, kMm2sDmacr, kCrRunStop);
  r.wr(d, kS2mmDmacr, kCrRunStop);
  r.wr(d, kS2mmDa, uint32_t(j.dst));
  r.wr(d, kS2mmLength, j.result_bytes());
  r.wr(d, kMm2sSa, uint32_t(j.src));
  r.wr(d, kMm2sLength, uint32_t(j.stream.size()));
}

std::vector<int32_t> read_results(const Memory& ddr, uint64_t addr, size_t words) {
  std::vector<int32_t> v(words);
  ddr.read(addr, v.data(), words * 4);
  return v;
}

// ---- attention -------------------------------------------------------------------------------

struct Head {
  int T = 0;
  golden::AttentionParams p;
  std::vector<int8_t> q, K, V;
  std::vector<int32_t> acc;
  uint32_t sum = 0;
};

// One lane's attention call: heads, their buffers, the descriptor chains.
struct AttentionJob {
  std::vector<Head> heads;
  uint64_t base = 0;
  uint64_t mm2s_desc(size_t i) const { return base + 0x40 * i; }
  uint64_t s2mm_desc() const { return base + 0x800; }
  uint64_t result() const { return base + 0x1000; }
  uint64_t header_q(size_t h) const { return base + 0x2000 + 0x80 * h; }
  uint64_t k_area(size_t h) const { return base + 0x10000 + 0x20000 * h; }
  uint64_t v_area(size_t h) const { return k_area(h) + 0x10000; }
  uint32_t result_bytes() const { return uint32_t(heads.size() * model::attention_result_beats(model::kBoardHeadDim) * 8); }
};

AttentionJob make_attention(int heads, int T, uint64_t seed, uint64_t base) {
  std::mt19937_64 rng(seed);
  AttentionJob j;
  j.base = base;
  for (int h = 0; h < heads; ++h) {
    Head hd;
    hd.T = T;
    hd.p.m = 10818 + uint32_t(rng() % (79505 - 10818));  // the board's range of m
    hd.p.shift = 24;
    auto fill = [&](std::vector<int8_t>& v, size_t n) {
      v.resize(n);
      for (auto& e : v) e = int8_t(uint8_t(rng()));
    };
    fill(hd.q, model::kBoardHeadDim);
    fill(hd.K, size_t(T) * model::kBoardHeadDim);
    fill(hd.V, size_t(T) * model::kBoardHeadDim);
    hd.acc.resize(model::kBoardHeadDim);
    golden::attention_head(hd.q.data(), hd.K.data(), hd.V.data(), T, model::kBoardHeadDim, hd.p, hd.acc.data(), &hd.sum);
    j.heads.push_back(std::move(hd));
  }
  return j;
}

void put_descriptor(Memory& ddr, uint64_t at, uint64_t next, uint64_t buffer, uint32_t control) {
  uint32_t d[16] = {};
  d[kDescNxtdesc / 4] = uint32_t(next);
  d[kDescBufferAddress / 4] = uint32_t(buffer);
  d[kDescControl / 4] = control;
  ddr.write(at, d, sizeof d);
}

uint32_t descriptor_status(const Memory& ddr, uint64_t at) {
  uint32_t s = 0;
  ddr.read(at + kDescStatus, &s, 4);
  return s;
}

// Headers + q, K and V into DDR; the chains (per head: header+q, K rows, V rows; EOF on the
// last descriptor only; the S2MM side one descriptor for all results); CURDESC while halted,
// RS, then TAILDESC (S2MM first, so it is ready for the results).
void start_attention(Rig& r, int lane, const AttentionJob& j) {
  Memory& ddr = r.board.memory();
  const size_t H = j.heads.size();
  for (size_t h = 0; h < H; ++h) {
    const Head& hd = j.heads[h];
    model::AttentionHeadHeader hh;
    hh.T = uint32_t(hd.T);
    hh.m = hd.p.m;
    hh.shift = uint32_t(hd.p.shift);
    hh.last = h + 1 == H;
    const auto words = model::encode_attention_header(hh);
    uint8_t buf[16 + model::kBoardHeadDim];
    std::memcpy(buf, words.data(), 16);
    std::memcpy(buf + 16, hd.q.data(), model::kBoardHeadDim);
    ddr.write(j.header_q(h), buf, sizeof buf);
    ddr.write(j.k_area(h), hd.K.data(), hd.K.size());
    ddr.write(j.v_area(h), hd.V.data(), hd.V.size());
    const uint32_t kv = uint32_t(hd.T * model::kBoardHeadDim);
    put_descriptor(ddr, j.mm2s_desc(3 * h), j.mm2s_desc(3 * h + 1), j.header_q(h), uint32_t(sizeof buf) | (h == 0 ? kCtrlSof : 0));
    put_descriptor(ddr, j.mm2s_desc(3 * h + 1), j.mm2s_desc(3 * h + 2), j.k_area(h), kv);
    put_descriptor(ddr, j.mm2s_desc(3 * h + 2), j.mm2s_desc(3 * h + 3), j.v_area(h), kv | (h + 1 == H ? kCtrlEof : 0));
  }
  put_descriptor(ddr, j.s2mm_desc(), j.s2mm_desc(), j.result(), j.result_bytes() | kCtrlSof | kCtrlEof);
  const DmaId d = kAt[lane];
  r.wr(d, kMm2sCurdesc, uint32_t(j.mm2s_desc(0)));
  r.wr(d, kS2mmCurdesc, uint32_t(j.s2mm_desc()));
  r.wr(d, kMm2sDmacr, kCrRunStop);
  r.wr(d, kS2mmDmacr, kCrRunStop);
  r.wr(d, kS2mmTaildesc, uint32_t(j.s2mm_desc()));
  r.wr(d, kMm2sTaildesc, uint32_t(j.mm2s_desc(3 * H - 1)));
}

void expect_attention_results(const Rig& r, const AttentionJob& j, int lane) {
  const Memory& ddr = r.board.memory();
  for (size_t h = 0; h < j.heads.size(); ++h) {
    const auto got = read_results(ddr, j.result() + h * model::attention_result_beats(model::kBoardHeadDim) * 8, 2 * model::attention_result_beats(model::kBoardHeadDim));
    const Head& hd = j.heads[h];
    for (int d = 0; d < model::kBoardHeadDim; ++d)
      ASSERT_EQ(got[size_t(d)], hd.acc[size_t(d)]) << "lane " << lane << " head " << h << " acc " << d;
    EXPECT_EQ(uint32_t(got[96]), hd.sum) << "lane " << lane << " head " << h;
    EXPECT_EQ(got[97], 0) << "lane " << lane << " head " << h;
  }
}

// ---- the watchdog ----------------------------------------------------------------------------

// A matmul moves data all along: the watchdog, checked every 256 cycles with a short limit,
// stays quiet. An S2MM started with no stream ever coming (its MM2S never started) is busy
// forever: the watchdog names the channel and the keys that shape it.
TEST(Board, WatchdogNamesAChannelThatCanNeverFinish) {
  FreshSimContext ctx;
  Rig r;
  ProgressWatchdog quiet(r.board, 2000);
  const MatmulJob j = make_matmul(37, 1536, 1, 0x0100'0000, 0x0180'0000);
  start_matmul(r, 0, j);
  ASSERT_TRUE(r.run_until([&] {
    quiet.check(r.board.clock().cycle());
    return r.idle(DmaId::Mm0, kS2mmDmasr) && r.idle(DmaId::Mm0, kMm2sDmasr);
  }, 20000));

  ProgressWatchdog watchdog(r.board, 2000);
  r.wr(DmaId::Mm1, kS2mmDmacr, kCrRunStop);
  r.wr(DmaId::Mm1, kS2mmDa, 0x0180'0000);
  r.wr(DmaId::Mm1, kS2mmLength, 64);
  std::string message;
  for (int i = 0; i < 100 && message.empty(); ++i) {
    r.run_cycles(256);
    try {
      watchdog.check(r.board.clock().cycle());
    } catch (const Error& e) {
      message = e.what();
    }
  }
  for (const char* needle : {"watchdog: no data moved for", "mm1 S2MM", "dma.s2mm_fifo_beats = 64",
                             "matmul.output_fifo_beats = 16", "hp.max_outstanding_writes"})
    EXPECT_NE(message.find(needle), std::string::npos) << needle << " not in: " << message;
  EXPECT_EQ(message.find("at0"), std::string::npos) << message;
  EXPECT_EQ(message.find("The memory"), std::string::npos) << message;  // it holds nothing: not blamed
}

// A memory that accepts every request and never completes one (a model whose timing can
// never serve): the watchdog ends the transfer naming the memory, how many requests it holds,
// and the model's keys.
class StuckMemory : public Memory {
 public:
  SC_HAS_PROCESS(StuckMemory);
  StuckMemory(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config) : Memory(name, clock, config) {
    SC_METHOD(tick);
    sensitive << clock_.listen();
    dont_initialize();
  }
  uint64_t state_fingerprint(uint64_t) const override { return 0; }

 private:
  void tick() {
    if (!awake_at_edge()) return;
    for (size_t i = 0; i < links_.size(); ++i) {
      if (links_[i]->ar.valid()) heard(clock_.cycle(), int(i), false, links_[i]->ar.pop());
      if (links_[i]->aw.valid()) heard(clock_.cycle(), int(i), true, links_[i]->aw.pop());
    }
  }
};

TEST(Board, WatchdogNamesAMemoryThatNeverCompletesARequest) {
  FreshSimContext ctx;
  BoardConfig c;
  auto models = std::make_shared<MemoryRegistry>(MemoryRegistry::board());
  MemoryKind k;
  k.name = "stuck";
  k.clocked = [](sc_core::sc_module_name n, Clock& clock, const DdrConfig& d) {
    return std::unique_ptr<Memory>(std::make_unique<StuckMemory>(n, clock, d));
  };
  k.calibration = {"ddr.read_latency_ns", "unused by this model", 1000, 1, true};
  k.watchdog_keys = [](const DdrConfig&) { return std::vector<std::string>{"stuck.latency = forever"}; };
  models->add(k);
  c.ddr.models = models;
  c.ddr.model = "stuck";
  Rig r(c);
  ProgressWatchdog watchdog(r.board, 2000);
  start_matmul(r, 0, make_matmul(37, 1536, 1, 0x0100'0000, 0x0180'0000));
  std::string message;
  for (int i = 0; i < 100 && message.empty(); ++i) {
    r.run_cycles(256);
    try {
      watchdog.check(r.board.clock().cycle());
    } catch (const Error& e) {
      message = e.what();
    }
  }
  for (const char* needle : {"watchdog: no data moved for", "mm0 MM2S", "The memory (ddr.model = stuck) holds",
                             "requests it has not completed (none completed since reset)", "stuck.latency = forever"})
    EXPECT_NE(message.find(needle), std::string::npos) << needle << " not in: " << message;
  EXPECT_GT(r.board.memory().requests().heard, 1u);
  EXPECT_EQ(r.board.memory().requests().completed, 0u);
}

// ---- (i) matmul through the board ----------------------------------------------------------

TEST(Board, MatmulGroupThroughMm0IsBitExact) {
  FreshSimContext ctx;
  Rig r;
  // n = 1536 (a real row length: 39 beats a row), 37 rows (odd: the last result leaves alone).
  const MatmulJob j = make_matmul(37, 1536, 1, 0x0100'0000, 0x0180'0000);
  std::vector<uint8_t> poison(j.result_bytes() + 64, 0xA5);
  r.board.memory().write(j.dst, poison.data(), poison.size());
  start_matmul(r, 0, j);
  ASSERT_TRUE(r.run_until([&] { return r.idle(DmaId::Mm0, kS2mmDmasr) && r.idle(DmaId::Mm0, kMm2sDmasr); }, 20000));
  EXPECT_EQ(r.rd(DmaId::Mm0, kS2mmDmasr), kSrIdle | kSrIocIrq);
  EXPECT_EQ(r.rd(DmaId::Mm0, kMm2sDmasr), kSrIdle | kSrIocIrq);
  EXPECT_EQ(r.rd(DmaId::Mm0, kS2mmLength), j.result_bytes());
  EXPECT_EQ(read_results(r.board.memory(), j.dst, j.golden.size()), j.golden);
  // Nothing written past the result buffer.
  uint8_t after[64];
  r.board.memory().read(j.dst + j.result_bytes(), after, sizeof after);
  EXPECT_TRUE(std::all_of(after, after + 64, [](uint8_t b) { return b == 0xA5; }));
  // The engine's counters over ps_bus; the other lane and the attention unit saw nothing.
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kStatus), 0u);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kUnitsDone), 1u);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kRowsDone), 37u);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kBeatsIn), j.stream.size() / 8);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kBeatsOut), j.result_bytes() / 8);
  EXPECT_EQ(r.matmul_reg(1, engine_reg::kBeatsIn), 0u);
  EXPECT_EQ(r.attention_reg(0, engine_reg::kBeatsIn), 0u);
  EXPECT_EQ(r.board.memory().stats().ports[1].bytes_read, 0u);  // mm0 is on HP0 only
  EXPECT_EQ(r.board.memory().stats().ports[0].bytes_read, j.stream.size());
  EXPECT_EQ(r.board.memory().stats().ports[0].bytes_written, j.result_bytes());
}

TEST(Board, BothMatmulLanesAtOnceAreIndependent) {
  FreshSimContext ctx;
  Rig r;
  // Different shapes per lane: lane 0 n = 1536 x 200 rows, lane 1 n = 333 x 501 rows.
  const MatmulJob j0 = make_matmul(200, 1536, 2, 0x0100'0000, 0x0180'0000);
  const MatmulJob j1 = make_matmul(501, 333, 3, 0x0110'0000, 0x0190'0000);
  start_matmul(r, 0, j0);
  start_matmul(r, 1, j1);
  ASSERT_TRUE(r.run_until([&] { return r.idle(DmaId::Mm0, kS2mmDmasr) && r.idle(DmaId::Mm1, kS2mmDmasr); }, 50000));
  EXPECT_EQ(r.rd(DmaId::Mm0, kS2mmLength), j0.result_bytes());
  EXPECT_EQ(r.rd(DmaId::Mm1, kS2mmLength), j1.result_bytes());
  EXPECT_EQ(read_results(r.board.memory(), j0.dst, j0.golden.size()), j0.golden);
  EXPECT_EQ(read_results(r.board.memory(), j1.dst, j1.golden.size()), j1.golden);
  EXPECT_EQ(r.board.memory().stats().ports[0].bytes_read, j0.stream.size());
  EXPECT_EQ(r.board.memory().stats().ports[1].bytes_read, j1.stream.size());
  EXPECT_EQ(r.matmul_reg(1, engine_reg::kRowsDone), 501u);

  // A second call on the same lanes (the driver's next matmul): new x, results overwrite.
  const MatmulJob k0 = make_matmul(64, 1536, 4, 0x0120'0000, 0x0180'0000);
  const MatmulJob k1 = make_matmul(63, 1536, 5, 0x0130'0000, 0x0190'0000);
  start_matmul(r, 1, k1);
  start_matmul(r, 0, k0);
  ASSERT_TRUE(r.run_until([&] { return r.idle(DmaId::Mm0, kS2mmDmasr) && r.idle(DmaId::Mm1, kS2mmDmasr); }, 20000));
  EXPECT_EQ(read_results(r.board.memory(), k0.dst, k0.golden.size()), k0.golden);
  EXPECT_EQ(read_results(r.board.memory(), k1.dst, k1.golden.size()), k1.golden);
  EXPECT_EQ(r.board.dma(DmaId::Mm0).stats(DmaChannel::kS2mm).transfers, 2u);
  EXPECT_EQ(r.board.dma(DmaId::Mm1).stats(DmaChannel::kMm2s).transfers, 2u);
}

// ---- (ii) attention SG chains ---------------------------------------------------------------

TEST(Board, AttentionChainsOnBothLanesAreBitExact) {
  FreshSimContext ctx;
  Rig r;
  AttentionJob j[2] = {make_attention(2, 3, 10, 0x0200'0000), make_attention(2, 3, 11, 0x0240'0000)};
  for (int lane = 0; lane < 2; ++lane) start_attention(r, lane, j[lane]);
  ASSERT_TRUE(r.run_until(
      [&] {
        for (int lane = 0; lane < 2; ++lane)
          if (!r.idle(kAt[lane], kS2mmDmasr) || !r.idle(kAt[lane], kMm2sDmasr)) return false;
        return true;
      },
      20000));
  for (int lane = 0; lane < 2; ++lane) {
    SCOPED_TRACE("lane " + std::to_string(lane));
    EXPECT_EQ(r.rd(kAt[lane], kS2mmDmasr), kSrIdle | kSrSgIncld | kSrIocIrq);
    EXPECT_EQ(r.rd(kAt[lane], kMm2sDmasr), kSrIdle | kSrSgIncld | kSrIocIrq);
    expect_attention_results(r, j[lane], lane);
    EXPECT_EQ(descriptor_status(r.board.memory(), j[lane].s2mm_desc()),
              kStsCmplt | kStsRxSof | kStsRxEof | j[lane].result_bytes());
    for (size_t h = 0; h < 2; ++h) {
      EXPECT_EQ(descriptor_status(r.board.memory(), j[lane].mm2s_desc(3 * h)), kStsCmplt | 112u);
      EXPECT_EQ(descriptor_status(r.board.memory(), j[lane].mm2s_desc(3 * h + 1)), kStsCmplt | 288u);
      EXPECT_EQ(descriptor_status(r.board.memory(), j[lane].mm2s_desc(3 * h + 2)), kStsCmplt | 288u);
    }
    EXPECT_EQ(r.attention_reg(lane, engine_reg::kStatus), 0u);
    EXPECT_EQ(r.attention_reg(lane, engine_reg::kUnitsDone), 2u);
    EXPECT_EQ(r.attention_reg(lane, engine_reg::kRowsDone), 12u);  // 2 heads x (3 K + 3 V)
    EXPECT_EQ(r.attention_reg(lane, engine_reg::kBeatsIn), 2 * model::attention_head_beats(3, model::kBoardHeadDim));
    EXPECT_EQ(r.attention_reg(lane, engine_reg::kBeatsOut), 2u * model::attention_result_beats(model::kBoardHeadDim));
    EXPECT_EQ(r.board.dma(kAt[lane]).stats(DmaChannel::kMm2s).descriptors, 6u);
  }
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kBeatsIn), 0u);
}

// ---- (iii) a malformed matmul stream ---------------------------------------------------------

TEST(Board, MalformedMatmulStreamIsReportedNotAHang) {
  FreshSimContext ctx;
  Rig r;
  MatmulJob bad = make_matmul(20, 100, 20, 0x0100'0000, 0x0180'0000);
  bad.stream[0] ^= 0x01;  // magic 0x7E45
  std::vector<uint8_t> poison(64, 0xA5);
  r.board.memory().write(bad.dst, poison.data(), poison.size());
  const MatmulJob good1 = make_matmul(20, 100, 21, 0x0110'0000, 0x0190'0000);
  start_matmul(r, 0, bad);
  start_matmul(r, 1, good1);
  ASSERT_TRUE(r.run_until([&] { return r.idle(DmaId::Mm0, kS2mmDmasr) && r.idle(DmaId::Mm0, kMm2sDmasr); }, 20000));
  // The S2MM completes normally with the engine's single zero beat: 8 bytes received.
  EXPECT_EQ(r.rd(DmaId::Mm0, kS2mmDmasr), kSrIdle | kSrIocIrq);
  EXPECT_EQ(r.rd(DmaId::Mm0, kMm2sDmasr), kSrIdle | kSrIocIrq);  // the engine discarded the rest
  EXPECT_EQ(r.rd(DmaId::Mm0, kS2mmLength), 8u);
  EXPECT_EQ(r.board.memory().read64(bad.dst), 0u);
  EXPECT_EQ(r.board.memory().read64(bad.dst + 8), 0xA5A5'A5A5'A5A5'A5A5ull);
  // The engine's registers over ps_bus: error latched and stopped, bad magic in group 0,
  // in the header (no row).
  const uint32_t st = r.matmul_reg(0, engine_reg::kStatus);
  EXPECT_EQ(st, engine_reg::kStatusError | engine_reg::kStatusStopped);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kErrorCode), uint32_t(model::StreamError::BadMagic));
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kErrorUnit), 0u);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kErrorRow), engine_reg::kNone);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kBeatsIn), bad.stream.size() / 8);  // discarded to TLAST
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kBeatsOut), 1u);
  // The other lane is unaffected.
  ASSERT_TRUE(r.run_until([&] { return r.idle(DmaId::Mm1, kS2mmDmasr); }, 20000));
  EXPECT_EQ(read_results(r.board.memory(), good1.dst, good1.golden.size()), good1.golden);
  EXPECT_EQ(r.matmul_reg(1, engine_reg::kStatus), 0u);

  // CONTROL.clear over ps_bus; the lane works again.
  r.cpu.write(EngineRegistry::board()[0].regs + engine_reg::kControl, engine_reg::kControlClear);
  r.run_cycles(2);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kStatus), 0u);
  EXPECT_EQ(r.matmul_reg(0, engine_reg::kErrorCode), 0u);
  const MatmulJob good0 = make_matmul(20, 100, 22, 0x0120'0000, 0x0180'0000);
  start_matmul(r, 0, good0);
  ASSERT_TRUE(r.run_until([&] { return r.idle(DmaId::Mm0, kS2mmDmasr); }, 20000));
  EXPECT_EQ(r.rd(DmaId::Mm0, kS2mmLength), good0.result_bytes());
  EXPECT_EQ(read_results(r.board.memory(), good0.dst, good0.golden.size()), good0.golden);
}

// ---- (iv) the AXI-Lite address map ------------------------------------------------------------

TEST(Board, UnmappedAxiLiteAddressIsAnAddressError) {
  FreshSimContext ctx;
  Rig r;
  uint32_t v = 0x1234;
  // Outside every window, between windows, just past the last window, and below the first.
  for (uint64_t a : {0x0000'0000ull, 0x4044'0000ull, 0x43C2'0000ull, 0x403F'FFFCull, 0x43BF'FFFCull, 0x8000'0000ull}) {
    EXPECT_EQ(r.cpu.access(tlm::TLM_READ_COMMAND, a, &v), tlm::TLM_ADDRESS_ERROR_RESPONSE) << std::hex << a;
    EXPECT_EQ(r.cpu.access(tlm::TLM_WRITE_COMMAND, a, &v), tlm::TLM_ADDRESS_ERROR_RESPONSE) << std::hex << a;
  }
  // Inside a window but not a register: the target itself answers the address error.
  EXPECT_EQ(r.cpu.access(tlm::TLM_READ_COMMAND, EngineRegistry::board().dma_base(2) + 0x0C, &v), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(r.cpu.access(tlm::TLM_READ_COMMAND, EngineRegistry::board()[0].regs + 0x200, &v), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  // Every mapped target answers at its base: the DMAs' reset values, the engines' STATUS.
  for (int i = 0; i < 4; ++i) {
    const bool sg = i >= 2;
    EXPECT_EQ(r.cpu.read(EngineRegistry::board().dma_base(i) + kMm2sDmacr), kCrResetValue) << i;
    EXPECT_EQ(r.cpu.read(EngineRegistry::board().dma_base(i) + kS2mmDmasr), kSrHalted | (sg ? kSrSgIncld : 0u)) << i;
  }
  EXPECT_EQ(r.cpu.read(EngineRegistry::board()[0].regs + 0x100 + engine_reg::kStatus), 0u);
  EXPECT_EQ(r.cpu.read(EngineRegistry::board()[1].regs + 0x100 + engine_reg::kErrorUnit), engine_reg::kNone);
  EXPECT_EQ(r.board.bus_accesses(), 12u + 2 + 8 + 2);
}

// The PS program sees an unmapped access as a bitsim::Error naming the address.
TEST(Board, PsAccessToAnUnmappedAddressFails) {
  FreshSimContext ctx;
  Board board("board", BoardConfig{});
  uint32_t dmacr = 0;
  host::Ps ps("ps", [&](host::Ps& p) {
    dmacr = p.read32(EngineRegistry::board().dma_base(1) + kMm2sDmacr, 200'000);
    p.write32(0x4050'0000, 1, 200'000);
  });
  ps.bus.bind(board.ps_bus);
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  for (int i = 0; i < 100 && !ps.finished(); ++i) start_simulation(board.clock().period() * 100.0);
  ASSERT_TRUE(ps.finished());
  EXPECT_EQ(dmacr, kCrResetValue);
  ASSERT_TRUE(ps.failure());
  try {
    std::rethrow_exception(ps.failure());
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0x40500000"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ps.stats().reg_reads, 1u);
  EXPECT_EQ(ps.stats().reg_writes, 0u);
}

// ---- the host's DMA driver on the board --------------------------------------------------------

// A small model shape with 2 heads per lane (hidden 384 = 4 heads x 96).
model::ModelConfig small_model() {
  model::ModelConfig c = model::ModelConfig::tiny();
  c.hidden_size = 384;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  return c;
}

// The host's DMA driver on the simulated PS and board.
struct DriverOnBoard {
#if BITSIM_TEST_DRIVER_ON_PLATFORM
  DriverOnBoard(host::Ps& ps, Board& board, const host::MemoryMap& map, const host::DriverConfig& cfg)
      : platform(ps, board), driver(platform, map, cfg) {}
  host::CyclePlatform platform;
#else
  DriverOnBoard(host::Ps& ps, Board& board, const host::MemoryMap& map, const host::DriverConfig& cfg)
      : driver(ps, board, map, cfg) {}
#endif
  host::DmaDriver driver;
};

// Runs a PS program on the board in bounded chunks; false if it did not finish.
bool run_program(Board& board, host::Ps& ps, uint64_t max_cycles) {
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  while (!ps.finished() && board.clock().cycle() < max_cycles) start_simulation(board.clock().period() * 4096.0);
  return ps.finished();
}

// host::DmaDriver through host::Ps and ps_bus: one matmul call (layer 0 qkv, both lanes) and
// two attention calls (2 heads per lane, T = 5 then T = 6: the second continues the SG rings
// after the first), all bit-exact; every access a TLM transaction the board counts.
TEST(Board, DmaDriverCallsOnTheBoardAreBitExact) {
  FreshSimContext ctx;
  const model::ModelConfig mc = small_model();
  const host::MemoryMap map(mc, host::MemoryMapConfig{});
  Board board("board", BoardConfig{});
  const host::MatmulGroup& qkv = map.qkv(0);
  ASSERT_EQ(qkv.calls.size(), 1u);
  const host::MatmulCall& call = qkv.calls[0];
  const int n = qkv.n;
  // The matrix and x; each lane's stream (header + x + its rows) at its planned address.
  const MatmulJob whole = make_matmul(qkv.rows, n, 50, 0, 0);
  for (int lane = 0; lane < host::kLanes; ++lane) {
    const host::LaneStream& s = call.lane[lane];
    const auto stream = model::build_stream({{whole.x.data(), n, &whole.m, s.row_begin, s.row_begin + s.rows}});
    ASSERT_EQ(stream.size(), s.bytes);
    board.memory().write(s.addr, stream.data(), stream.size());
  }
  // Attention heads: lane l takes heads 2l, 2l+1 of layer 0 (slots 0 and 1).
  std::vector<AttentionJob> calls[2] = {{}, {}};  // [call][lane]
  for (int c = 0; c < 2; ++c)
    for (int lane = 0; lane < host::kLanes; ++lane) calls[c].push_back(make_attention(2, 5 + c, 60 + 2 * c + lane, 0));
  auto stage_attention = [&](int c, std::vector<host::HeadWork>* work) {
    for (int lane = 0; lane < host::kLanes; ++lane) {
      work[lane].clear();
      for (int slot = 0; slot < 2; ++slot) {
        const Head& hd = calls[c][size_t(lane)].heads[size_t(slot)];
        const int head = 2 * lane + slot;
        model::AttentionHeadHeader hh;
        hh.T = uint32_t(hd.T);
        hh.m = hd.p.m;
        hh.shift = uint32_t(hd.p.shift);
        hh.last = slot == 1;
        const auto words = model::encode_attention_header(hh);
        uint8_t buf[112];
        std::memcpy(buf, words.data(), 16);
        std::memcpy(buf + 16, hd.q.data(), 96);
        board.memory().write(map.head_buffer(lane, slot), buf, sizeof buf);
        board.memory().write(map.k_area(0, head), hd.K.data(), hd.K.size());
        board.memory().write(map.v_area(0, head), hd.V.data(), hd.V.size());
        host::HeadWork w{map.head_buffer(lane, slot), map.k_area(0, head), map.v_area(0, head),
                         uint32_t(hd.T * model::kBoardHeadDim)};
        w.header_bytes = uint32_t(model::attention_header_q_bytes(1, model::kBoardHeadDim));
        w.result_bytes = uint32_t(model::attention_result_bytes(model::kBoardHeadDim));
        work[lane].push_back(w);
      }
    }
  };
  std::vector<int32_t> mm_got[2];
  std::vector<int32_t> att_got[2][2];  // [call][lane]
  host::DmaDriver* drv_ptr = nullptr;
  host::Ps ps("ps", [&](host::Ps&) {
    host::DmaDriver& drv = *drv_ptr;
    drv.init();
    drv.matmul(call, n);
    for (int lane = 0; lane < host::kLanes; ++lane) {
      mm_got[lane].resize(call.lane[lane].result_bytes / 4);
      board.memory().read(map.matmul_result(lane), mm_got[lane].data(), call.lane[lane].result_bytes);
    }
    for (int c = 0; c < 2; ++c) {
      std::vector<host::HeadWork> work[host::kLanes];
      stage_attention(c, work);
      drv.attention(work, 0);
      for (int lane = 0; lane < host::kLanes; ++lane) {
        att_got[c][lane].resize(2 * 2 * model::attention_result_beats(model::kBoardHeadDim));
        board.memory().read(map.attention_result(lane), att_got[c][lane].data(), att_got[c][lane].size() * 4);
      }
    }
  });
  ps.bus.bind(board.ps_bus);
  DriverOnBoard host_side(ps, board, map, host::DriverConfig{});
  host::DmaDriver& drv = host_side.driver;
  drv_ptr = &drv;
  ASSERT_TRUE(run_program(board, ps, 2'000'000));
  if (ps.failure()) {
    try {
      std::rethrow_exception(ps.failure());
    } catch (const std::exception& e) {
      FAIL() << "the driver program failed: " << e.what();
    }
  }
  for (int lane = 0; lane < host::kLanes; ++lane) {
    const host::LaneStream& s = call.lane[lane];
    std::vector<int32_t> want(whole.golden.begin() + s.row_begin, whole.golden.begin() + s.row_begin + s.rows);
    if (want.size() % 2) want.push_back(0);
    EXPECT_EQ(mm_got[lane], want) << "matmul lane " << lane;
    for (int c = 0; c < 2; ++c)
      for (int slot = 0; slot < 2; ++slot) {
        const Head& hd = calls[c][size_t(lane)].heads[size_t(slot)];
        const int32_t* got = att_got[c][lane].data() + slot * 2 * model::attention_result_beats(model::kBoardHeadDim);
        EXPECT_TRUE(std::equal(hd.acc.begin(), hd.acc.end(), got)) << "call " << c << " lane " << lane << " slot " << slot;
        EXPECT_EQ(uint32_t(got[96]), hd.sum);
        EXPECT_EQ(got[97], 0);
      }
  }
  EXPECT_EQ(drv.stats().matmul_calls, 1u);
  EXPECT_EQ(drv.stats().attention_calls, 2u);
  EXPECT_EQ(drv.stats().descriptors, 2u * 2 * (2 * 3 + 1));
  EXPECT_EQ(board.bus_accesses(), ps.stats().reg_reads + ps.stats().reg_writes);
  EXPECT_EQ(board.dma(DmaId::At1).stats(DmaChannel::kMm2s).descriptors, 12u);
  EXPECT_EQ(board.dma(DmaId::At0).stats(DmaChannel::kS2mm).transfers, 2u);
}

// The driver turns a malformed stream into a bitsim::Error naming the lane and, from the
// engine's registers, the error and the group.
TEST(Board, DmaDriverReportsAnEngineError) {
  FreshSimContext ctx;
  const host::MemoryMap map(small_model(), host::MemoryMapConfig{});
  Board board("board", BoardConfig{});
  const host::MatmulCall& call = map.o(0).calls[0];
  const int n = map.o(0).n;
  const MatmulJob whole = make_matmul(map.o(0).rows, n, 70, 0, 0);
  for (int lane = 0; lane < host::kLanes; ++lane) {
    const host::LaneStream& s = call.lane[lane];
    auto stream = model::build_stream({{whole.x.data(), n, &whole.m, s.row_begin, s.row_begin + s.rows}});
    if (lane == 1) stream[16 + 384 + 3 * 80] = 0xF7;  // an invalid trit byte in lane 1, row 3
    board.memory().write(s.addr, stream.data(), stream.size());
  }
  host::DmaDriver* drv_ptr = nullptr;
  host::Ps ps("ps", [&](host::Ps&) {
    drv_ptr->init();
    drv_ptr->matmul(call, n);
  });
  ps.bus.bind(board.ps_bus);
  DriverOnBoard host_side(ps, board, map, host::DriverConfig{});
  host::DmaDriver& drv = host_side.driver;
  drv_ptr = &drv;
  ASSERT_TRUE(run_program(board, ps, 1'000'000));
  ASSERT_TRUE(ps.failure());
  try {
    std::rethrow_exception(ps.failure());
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("matmul engine lane 1"), std::string::npos) << m;
    // Rows 0-2 finished before the error: results (0, 1) and (2, pad), then the zero beat.
    EXPECT_NE(m.find("S2MM received 24 of 768 result bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("group 0, row 3"), std::string::npos) << m;
  }
}

// ---- (v) the DDR wall at board level ---------------------------------------------------------

// Both matmul lanes stream 256 KiB each (n = 1536). The engine takes one beat per edge, so a
// lane asks its HP port for 8 bytes per PL cycle: two ports move at most 2 x 8 B x f, and
// the DDR wall (2.009 GB/s, shared) caps the sum. At 250 MHz the wall binds (4.0 > 2.009);
// at 100 MHz the ports do (1.6 GB/s). achieved_gbps counts reads and the result writes
// (4 bytes per 312-byte row) over the DDR's busy span.
double two_lane_gbps(double mhz, double* port0, double* port1) {
  BoardConfig cfg;
  cfg.clock.mhz = mhz;
  Rig r(cfg);
  const MatmulJob j0 = make_matmul(840, 1536, 30, 0x0100'0000, 0x0180'0000);
  const MatmulJob j1 = make_matmul(840, 1536, 31, 0x0140'0000, 0x0190'0000);
  start_matmul(r, 0, j0);
  start_matmul(r, 1, j1);
  const bool done = r.run_until(
      [&] { return r.idle(DmaId::Mm0, kS2mmDmasr) && r.idle(DmaId::Mm1, kS2mmDmasr); }, 400'000, 4096);
  EXPECT_TRUE(done);
  EXPECT_EQ(read_results(r.board.memory(), j0.dst, j0.golden.size()), j0.golden);
  EXPECT_EQ(read_results(r.board.memory(), j1.dst, j1.golden.size()), j1.golden);
  *port0 = r.board.memory().achieved_gbps(0);
  *port1 = r.board.memory().achieved_gbps(1);
  return r.board.memory().achieved_gbps();
}

TEST(Board, DdrWallBindsAt250MHz) {
  FreshSimContext ctx;
  double p0 = 0, p1 = 0;
  const double gbps = two_lane_gbps(250.0, &p0, &p1);
  const double expect = std::min(2 * 8 * 250e6, 2.009e9) / 1e9;
  EXPECT_DOUBLE_EQ(expect, 2.009);
  EXPECT_NEAR(gbps, expect, 0.03 * expect);
  EXPECT_LE(gbps, 2.009 * 1.001);  // never above the wall
  EXPECT_NEAR(p0, expect / 2, 0.03 * expect / 2);  // shared evenly
  EXPECT_NEAR(p1, expect / 2, 0.03 * expect / 2);
  std::printf("[ wall ] 250 MHz: %.4f GB/s (HP0 %.4f, HP2 %.4f)\n", gbps, p0, p1);
}

TEST(Board, PortsBindAt100MHz) {
  FreshSimContext ctx;
  double p0 = 0, p1 = 0;
  const double gbps = two_lane_gbps(100.0, &p0, &p1);
  const double expect = std::min(2 * 8 * 100e6, 2.009e9) / 1e9;
  EXPECT_DOUBLE_EQ(expect, 1.6);
  EXPECT_NEAR(gbps, expect, 0.03 * expect);
  EXPECT_NEAR(p0, 0.8, 0.03 * 0.8);
  EXPECT_NEAR(p1, 0.8, 0.03 * 0.8);
  std::printf("[ wall ] 100 MHz: %.4f GB/s (HP0 %.4f, HP2 %.4f)\n", gbps, p0, p1);
}

// ---- (vi) a hand-worked cycle count through the whole board ----------------------------------

// One single-group matmul transfer on mm0 (simple mode), n = 100, R = 5, nothing else on
// the board. Stream: header 2 beats, x ceil(100/8) = 13 beats, each row ceil(100/5) = 20
// bytes -> 24 bytes = 3 beats: 30 beats in all; stream beat index of row r's last beat
// b(r) = 2 + 13 + 3 r + 2 = 17 + 3 r. Results: output beat k holds rows 2k, 2k+1 (the
// odd last row alone): 3 output beats, completed by rows 1, 3, 4 (beats 20, 26, 29).
//
// Both LENGTH writes happen at the same time, so both channels start at the same edge c0
// (docs/hw-timing.md, AXI DMA: c0 = floor(t / period) + 1). Then, with rl =
// ddr.read_latency_cycles() and wl = ddr.write_latency_cycles():
//   MM2S (doc "Hand-worked, no contention", as SimpleMm2sHandWorkedAndByteExact):
//     first read request         c0 + datamover_cmd_to_read
//     its burst issued by HP0    +1, accepted by the DDR +1, first beat leaves +rl,
//     HP0 forwards it            +1, the DMA takes it +1, pushes it +read_to_stream:
//     stream beat i pushed at    P(i) = c0 + cmd_to_read + 4 + rl + read_to_stream + i
//     (one beat per edge: 30 beats < the 64-beat MM2S FIFO, 8 outstanding 16-beat bursts
//     cover rl + 17 cycles, and the engine's 2-deep input FIFO takes one beat per edge);
//     MM2S completes at P(29) (the edge of its last push).
//   Engine (doc, matmul results; as MatmulEngine.CyclesSingleGroupHandWorked): beat i is
//     taken at P(i) + 1; output beat k is pushed at P(b) + 1 + pipeline_depth, b the
//     stream index of its completing row's last beat.
//   S2MM (doc, as SimpleS2mmHandWorkedAndByteExact): it takes stream beats from
//     c0 + cmd_to_read on, so the first output beat (pushed at e0) is taken at p1 = e0 + 1
//     (a FIFO item pushed at c is seen at c + 1); its first write request leaves at
//     p1 + s2mm_beat_to_write, and because the TLAST beat (pushed at P(29) + 1 + depth) is
//     already in the S2MM FIFO by then, that one request carries all 3 beats (24 bytes, one
//     burst, no 4 KB crossing); its W beats leave one per edge from the request's edge, the
//     last at p1 + 39 + 3 - 1; HP0 (+1), the DDR (+1), write latency (+wl), HP0 (+1), the
//     DMA (+1): completion (DMASR.Idle, IOC) at last W + 4 + wl.
// Closed form: S2MM done = c0 + cmd_to_read + 4 + rl + read_to_stream + 20 + 1 + depth + 1
//                          + s2mm_beat_to_write + 3 - 1 + 4 + wl.
// At the defaults (125 MHz, rl 13, wl 7, depth 4): c0 + 8 + 18 + 26 + 39 + 2 + 11 = c0 + 104.
// The DDR wall (16.07 bytes per edge at 125 MHz) never holds back one read beat and one
// write beat per edge, so no wall stall enters the count (checked below).
TEST(Board, MatmulTransferHandWorkedCycleCount) {
  FreshSimContext ctx;
  Rig r;
  const int R = 5, n = 100;
  const MatmulJob j = make_matmul(R, n, 40, 0x0100'0000, 0x0180'0000);
  ASSERT_EQ(j.stream.size(), 30u * 8);
  ASSERT_EQ(j.result_bytes(), 24u);
  r.board.memory().write(j.src, j.stream.data(), j.stream.size());
  r.wr(DmaId::Mm0, kMm2sDmacr, kCrRunStop);
  r.wr(DmaId::Mm0, kS2mmDmacr, kCrRunStop);
  r.wr(DmaId::Mm0, kS2mmDa, uint32_t(j.dst));
  r.wr(DmaId::Mm0, kMm2sSa, uint32_t(j.src));
  r.run_cycles(10);
  const uint64_t c0 = r.write_edge();
  r.wr(DmaId::Mm0, kS2mmLength, j.result_bytes());
  r.wr(DmaId::Mm0, kMm2sLength, uint32_t(j.stream.size()));
  ASSERT_TRUE(r.run_until([&] { return r.idle(DmaId::Mm0, kS2mmDmasr); }, 1000, 1));

  const AxiDmaConfig& k = r.board.config().dma;
  const Ddr& ddr = dynamic_cast<const Ddr&>(r.board.memory());
  const uint64_t rl = ddr.read_latency_cycles(), wl = ddr.write_latency_cycles();
  const uint64_t depth = uint64_t(r.board.config().matmul.pipeline_depth);
  const uint64_t cmd = uint64_t(k.datamover_cmd_to_read);
  auto P = [&](uint64_t i) { return c0 + cmd + 1 + 1 + rl + 1 + 1 + uint64_t(k.read_to_stream) + i; };
  const uint64_t rows_last_beat[3] = {20, 26, 29};  // rows 1, 3, 4: b(r) = 17 + 3 r
  for (int rr = 0; rr < R; ++rr) ASSERT_EQ(17u + 3u * uint64_t(rr), 2 + 13 + 3 * uint64_t(rr) + 2);
  const uint64_t e0 = P(rows_last_beat[0]) + 1 + depth;  // first output beat pushed
  const uint64_t e_last = P(rows_last_beat[2]) + 1 + depth;
  const uint64_t p1 = e0 + 1;
  const uint64_t first_aw = p1 + uint64_t(k.s2mm_beat_to_write);
  ASSERT_LE(e_last + 1, first_aw);  // TLAST is in the S2MM FIFO before the first request
  const uint64_t last_w = first_aw + 3 - 1;
  const uint64_t done = last_w + 1 + 1 + wl + 1 + 1;

  const AxiDmaChannelStats& mm2s = r.board.dma(DmaId::Mm0).stats(DmaChannel::kMm2s);
  const AxiDmaChannelStats& s2mm = r.board.dma(DmaId::Mm0).stats(DmaChannel::kS2mm);
  EXPECT_EQ(mm2s.last_start_cycle, c0);
  EXPECT_EQ(mm2s.last_first_request_cycle, c0 + cmd);
  EXPECT_EQ(mm2s.last_first_beat_cycle, P(0));
  EXPECT_EQ(mm2s.last_completion_cycle, P(29));
  EXPECT_EQ(s2mm.last_start_cycle, c0);
  EXPECT_EQ(s2mm.last_first_beat_cycle, p1);
  EXPECT_EQ(s2mm.last_first_request_cycle, first_aw);
  EXPECT_EQ(s2mm.last_completion_cycle, done);
  // The closed form, and its value on the shipped board (BoardConfig{}: DDR read latency
  // 367.86 ns = 46 cycles, write latency 50 ns = 7, pipeline depth 4, PG021 delays 8 / 39 / 1).
  EXPECT_EQ(done, c0 + cmd + 4 + rl + uint64_t(k.read_to_stream) + 20 + 1 + depth + 1 +
                      uint64_t(k.s2mm_beat_to_write) + 3 - 1 + 4 + wl);
  EXPECT_EQ(rl, 46u);
  EXPECT_EQ(wl, 7u);
  EXPECT_EQ(done - c0, 137u);
  // The engine's view: busy from taking beat 0 to pushing the TLAST beat, inclusive.
  EXPECT_EQ(r.board.matmul().stats(0).busy_cycles, e_last - (P(0) + 1) + 1);
  EXPECT_EQ(r.board.matmul().stats(0).stall_cycles, 0u);
  EXPECT_EQ(r.board.memory().stats().ports[0].wall_stall_beats, 0u);
  EXPECT_EQ(read_results(r.board.memory(), j.dst, j.golden.size()), j.golden);
  EXPECT_EQ(r.rd(DmaId::Mm0, kS2mmDmasr), kSrIdle | kSrIocIrq);
}

}  // namespace
}  // namespace bitsim::hw
