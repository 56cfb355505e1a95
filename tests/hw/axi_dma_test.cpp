// AxiDma (CIRCUITS.md 1, docs/hw-timing.md "AXI DMA"), with the real Ddr and HpPort:
// register semantics (reset values, RS / halted / idle, IOC, every error bit, reset),
// simple MM2S and S2MM transfers byte for byte, SG chains of 1, 3 and 100 descriptors with
// their status write-back, the length limit, hand-worked cycle counts computed from the
// documented latencies, and the simulation speed of a long MM2S stream.
#include "hw/memory/ddr.h"
#include "hw/interconnect/axi_dma.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>

#include "hw/interconnect/hp_port.h"
#include "hw/parts/sim_context.h"
#include "base/error.h"
#include "support/clocked_module.h"
#include "support/run_until.h"
#include "support/tlm_access.h"

namespace bitsim::hw {
namespace {

using namespace dma_reg;

// ---- test scaffolding --------------------------------------------------------------------

// The CPU side of AXI-Lite: 32-bit register accesses as TLM transactions.
class RegMaster : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<RegMaster> socket;
  RegMaster(sc_core::sc_module_name n, uint64_t base) : sc_module(n), socket("socket"), base_(base) {}

  tlm::tlm_response_status access(tlm::tlm_command cmd, uint64_t addr, void* data, unsigned len,
                                  unsigned streaming_width = 0) {
    return test::tlm_access(socket, cmd, addr, static_cast<unsigned char*>(data), len,
                            streaming_width ? streaming_width : len);
  }
  uint32_t read(uint32_t offset) {
    uint32_t v = 0;
    EXPECT_EQ(access(tlm::TLM_READ_COMMAND, base_ + offset, &v, 4), tlm::TLM_OK_RESPONSE) << "offset " << offset;
    return v;
  }
  void write(uint32_t offset, uint32_t v) {
    EXPECT_EQ(access(tlm::TLM_WRITE_COMMAND, base_ + offset, &v, 4), tlm::TLM_OK_RESPONSE) << "offset " << offset;
  }

 private:
  uint64_t base_;
};

// Takes MM2S beats: always ready, or when `ready(cycle)` says so; records every beat and the
// edge it was taken (one edge after the DMA pushed it).
class StreamSink : public test::ClockedModule {
 public:
  StreamSink(sc_core::sc_module_name n, Clock& clock, AxiStream& in) : ClockedModule(n, clock), in_(in) {}
  std::function<bool(uint64_t)> ready;
  bool record_cycles = true;
  std::vector<uint64_t> data, cycles;
  std::vector<size_t> tlast_at;  // indices of beats with TLAST

 private:
  void tick() override {
    if (!in_.valid()) return;
    const uint64_t now = clock_.cycle();
    if (ready && !ready(now)) return;
    const StreamBeat b = in_.pop();
    if (b.last) tlast_at.push_back(data.size());
    data.push_back(b.data);
    if (record_cycles) cycles.push_back(now);
  }
  AxiStream& in_;
};

// Produces S2MM beats: pushes the queued beats from `start_cycle` on, one per edge when the
// stream has room; records the edge of every push.
class StreamSource : public test::ClockedModule {
 public:
  StreamSource(sc_core::sc_module_name n, Clock& clock, AxiStream& out) : ClockedModule(n, clock), out_(out) {}
  void packet(const std::vector<uint64_t>& words) {
    for (size_t i = 0; i < words.size(); ++i) beats.push_back(StreamBeat{words[i], i + 1 == words.size()});
  }
  uint64_t start_cycle = 0;
  std::vector<StreamBeat> beats;
  size_t next = 0;
  std::vector<uint64_t> cycles;

 private:
  void tick() override {
    if (next < beats.size() && clock_.cycle() >= start_cycle && out_.ready()) {
      out_.push(beats[next++]);
      cycles.push_back(clock_.cycle());
    }
  }
  AxiStream& out_;
};

AxiDmaConfig simple_config() {
  AxiDmaConfig c;
  c.has_sg = false;
  return c;
}

// The DDR the hand-worked timings of this file assume: a 100 ns read latency (13 cycles at
// 125 MHz) instead of the shipped board's 367.86 ns, so that a read burst's data is back
// before the MM2S FIFO's other bursts have left.
DdrConfig short_latency_ddr() {
  DdrConfig c;
  c.read_latency_ns = 100;
  return c;
}

// Clock, DDR, HP0 with the DMA's three masters, the two streams, a sink, a source and the CPU.
struct Bench {
  explicit Bench(const AxiDmaConfig& dc = simple_config(), const DdrConfig& ddrc = short_latency_ddr())
      : clock("clock", ClockConfig{}),
        ddr("ddr", clock, ddrc),
        hp("hp0", clock, HpPortConfig{}, ddr.port(0)),
        dma("dma", clock, dc),
        mm2s_stream("mm2s_stream", 2),
        s2mm_stream("s2mm_stream", 2),
        sink("sink", clock, mm2s_stream),
        source("source", clock, s2mm_stream),
        cpu("cpu", dc.base_address) {
    hp.attach(dma.m_axi_mm2s);
    hp.attach(dma.m_axi_s2mm);
    hp.attach(dma.m_axi_sg);
    dma.mm2s_out = &mm2s_stream;
    dma.s2mm_in = &s2mm_stream;
    cpu.socket.bind(dma.ctrl);
  }
  // Runs in chunks until pred() holds; fails the test after max_cycles.
  template <typename Pred>
  bool run_until(Pred pred, uint64_t max_cycles) {
    return test::run_until(clock, pred, max_cycles);
  }
  void run_cycles(uint64_t n) { sc_core::sc_start(clock.period() * double(n)); }
  // The edge at which a register write issued now takes effect.
  uint64_t write_edge() const { return sc_core::sc_time_stamp().value() / clock.period().value() + 1; }
  bool idle(uint32_t sr_offset) { return (cpu.read(sr_offset) & kSrIdle) != 0; }
  // A simple-mode MM2S transfer: run, source address, length (the start).
  void start_mm2s(uint32_t src, uint32_t length) {
    cpu.write(kMm2sDmacr, kCrRunStop);
    cpu.write(kMm2sSa, src);
    cpu.write(kMm2sLength, length);
  }

  Clock clock;
  Ddr ddr;
  HpPort hp;
  AxiDma dma;
  AxiStream mm2s_stream, s2mm_stream;
  StreamSink sink;
  StreamSource source;
  RegMaster cpu;
};

std::vector<uint64_t> random_words(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v(n);
  for (auto& w : v) w = rng();
  return v;
}

void put_words(Ddr& ddr, uint64_t addr, const std::vector<uint64_t>& w) { ddr.write(addr, w.data(), w.size() * 8); }

std::vector<uint64_t> get_words(const Ddr& ddr, uint64_t addr, size_t n) {
  std::vector<uint64_t> w(n);
  ddr.read(addr, w.data(), n * 8);
  return w;
}

void put_descriptor(Ddr& ddr, uint64_t at, uint64_t next, uint64_t buffer, uint32_t control, uint32_t status = 0) {
  std::vector<uint64_t> d(8, 0);
  d[0] = next;
  d[1] = buffer;
  d[3] = control | (uint64_t(status) << 32);
  put_words(ddr, at, d);
}

uint32_t descriptor_status(const Ddr& ddr, uint64_t at) {
  uint32_t s = 0;
  ddr.read(at + kDescStatus, &s, 4);
  return s;
}

// ---- register semantics --------------------------------------------------------------------

TEST(AxiDma, ResetValuesAndRegisterAccess) {
  FreshSimContext ctx;
  Bench b;
  for (uint32_t base : {0u, kS2mmOffset}) {
    EXPECT_EQ(b.cpu.read(base + 0x00), 0x0001'0000u);
    EXPECT_EQ(b.cpu.read(base + 0x04), 0x0000'0001u);
    for (uint32_t off : {0x08u, 0x10u, 0x18u, 0x28u}) EXPECT_EQ(b.cpu.read(base + off), 0u);
  }
  // Offsets outside the register map, accesses outside the window, wrong sizes.
  uint32_t v = 0;
  const uint64_t base = b.dma.config().base_address;
  for (uint32_t off : {0x0Cu, 0x14u, 0x1Cu, 0x2Cu, 0x4Cu, 0x5Cu, 0x60u, 0x02u, 0xFFFCu})
    EXPECT_EQ(b.cpu.access(tlm::TLM_READ_COMMAND, base + off, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE) << off;
  EXPECT_EQ(b.cpu.access(tlm::TLM_WRITE_COMMAND, base + 0x2C, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.cpu.access(tlm::TLM_READ_COMMAND, base + 0x10000, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(b.cpu.access(tlm::TLM_READ_COMMAND, base - 4, &v, 4), tlm::TLM_ADDRESS_ERROR_RESPONSE);
  uint64_t wide = 0;
  EXPECT_EQ(b.cpu.access(tlm::TLM_READ_COMMAND, base, &wide, 8), tlm::TLM_BURST_ERROR_RESPONSE);
  EXPECT_EQ(b.cpu.access(tlm::TLM_READ_COMMAND, base, &v, 2), tlm::TLM_BURST_ERROR_RESPONSE);
  EXPECT_EQ(b.cpu.access(tlm::TLM_READ_COMMAND, base, &v, 4, 1), tlm::TLM_BURST_ERROR_RESPONSE);
  // Status bits are read-only; IOC / Err cannot be set by a write.
  b.cpu.write(kMm2sDmasr, 0xFFFF'FFFF);
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), 0x0000'0001u);
}

TEST(AxiDma, SgResetValueShowsSgIncluded) {
  FreshSimContext ctx;
  Bench b(AxiDmaConfig{});
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrHalted | kSrSgIncld);
  EXPECT_EQ(b.cpu.read(kS2mmDmasr), kSrHalted | kSrSgIncld);
  // CURDESC is written while halted (low 6 bits ignored); SA / LENGTH are not part of SG mode.
  b.cpu.write(kMm2sCurdesc, 0x0010'0047);
  EXPECT_EQ(b.cpu.read(kMm2sCurdesc), 0x0010'0040u);
  b.cpu.write(kMm2sLength, 64);
  EXPECT_EQ(b.cpu.read(kMm2sLength), 0u);
  b.cpu.write(kMm2sDmacr, kCrRunStop);
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrIdle | kSrSgIncld);
  b.cpu.write(kMm2sCurdesc, 0x0020'0000);  // ignored while running
  EXPECT_EQ(b.cpu.read(kMm2sCurdesc), 0x0010'0040u);
}

TEST(AxiDma, RunStopHaltedIdleAndReset) {
  FreshSimContext ctx;
  Bench b;
  b.cpu.write(kMm2sDmacr, kCrRunStop | kCrIocIrqEn | (3u << kCrIrqThresholdShift));
  EXPECT_EQ(b.cpu.read(kMm2sDmacr), kCrRunStop | kCrIocIrqEn | (3u << kCrIrqThresholdShift));
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrIdle);  // running: not halted, idle until work arrives
  EXPECT_EQ(b.cpu.read(kS2mmDmasr), kSrHalted);  // the channels are independent
  b.cpu.write(kMm2sDmacr, kCrIocIrqEn);       // RS = 0: halts (nothing in flight)
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrHalted);
  b.cpu.write(kMm2sDmacr, kCrRunStop);
  b.cpu.write(kMm2sSa, 0x1000);
  b.run_cycles(3);
  b.cpu.write(kMm2sDmacr, kCrReset);  // Reset: registers to reset values; self-clears (nothing in flight)
  EXPECT_EQ(b.cpu.read(kMm2sDmacr), kCrResetValue);
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrHalted);
  EXPECT_EQ(b.cpu.read(kMm2sSa), 0u);
  b.run_cycles(3);
  EXPECT_EQ(b.cpu.read(kMm2sDmacr), kCrResetValue);
}

// ---- simple mode ---------------------------------------------------------------------------

// Hand-worked: LENGTH seen at edge c0; the DataMover's first read request at c0 + 8; the HP
// port takes it and issues the burst at +1, the DDR accepts at +2 and returns the first beat
// read_latency later; the HP port forwards it (+1), the DMA takes it (+1) and streams it
// read_to_stream later; then one beat per edge; the sink sees each beat one edge after the
// push; the transfer completes (Idle, IOC) in the edge of the last push.
TEST(AxiDma, SimpleMm2sHandWorkedAndByteExact) {
  FreshSimContext ctx;
  Bench b;
  const uint64_t n = 100, src = 0x0001'1F00;  // crosses a 4 KB boundary after 32 beats
  const auto words = random_words(n, 1);
  put_words(b.ddr, src, words);
  b.cpu.write(kMm2sDmacr, kCrRunStop | kCrIocIrqEn);
  b.cpu.write(kMm2sSa, uint32_t(src));
  b.run_cycles(10);
  const uint64_t c0 = b.write_edge();
  b.cpu.write(kMm2sLength, uint32_t(n * 8));
  EXPECT_EQ(b.cpu.read(kMm2sDmasr) & kSrIdle, 0u);  // busy from the write on
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 2000));

  const AxiDmaConfig& k = b.dma.config();
  const uint64_t rl = b.ddr.read_latency_cycles();
  const uint64_t first_request = c0 + uint64_t(k.datamover_cmd_to_read);
  const uint64_t first_push = first_request + 1 /*port*/ + 1 /*DDR accept*/ + rl + 1 /*port*/ + 1 /*DMA*/ +
                              uint64_t(k.read_to_stream);
  const uint64_t last_push = first_push + n - 1;
  const AxiDmaChannelStats& s = b.dma.stats(DmaChannel::kMm2s);
  EXPECT_EQ(s.last_start_cycle, c0);
  EXPECT_EQ(s.last_first_request_cycle, first_request);
  EXPECT_EQ(s.last_first_beat_cycle, first_push);
  EXPECT_EQ(s.last_completion_cycle, last_push);
  EXPECT_EQ(b.dma.last_completion_cycle(DmaChannel::kMm2s), last_push);
  ASSERT_EQ(b.sink.data.size(), n);
  EXPECT_EQ(b.sink.cycles.front(), first_push + 1);
  EXPECT_EQ(b.sink.cycles.back(), last_push + 1);
  EXPECT_EQ(b.sink.data, words);
  EXPECT_EQ(b.sink.tlast_at, std::vector<size_t>{n - 1});
  EXPECT_EQ(s.transfers, 1u);
  EXPECT_EQ(s.bytes, n * 8);
  EXPECT_EQ(s.busy_cycles, last_push - c0);

  // Idle with IOC; the interrupt line follows IOC_Irq & IOC_IrqEn; IOC is write-1-to-clear.
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrIdle | kSrIocIrq);
  b.run_cycles(2);
  EXPECT_TRUE(b.dma.mm2s_introut.read());
  EXPECT_FALSE(b.dma.s2mm_introut.read());
  b.cpu.write(kMm2sDmasr, kSrIocIrq);
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrIdle);
  b.run_cycles(2);
  EXPECT_FALSE(b.dma.mm2s_introut.read());

  // A second transfer from idle (aligned, 3 beats).
  const auto more = random_words(3, 2);
  put_words(b.ddr, 0x5000, more);
  b.cpu.write(kMm2sSa, 0x5000);
  b.cpu.write(kMm2sLength, 24);
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 2000));
  ASSERT_EQ(b.sink.data.size(), n + 3);
  EXPECT_EQ(std::vector<uint64_t>(b.sink.data.begin() + n, b.sink.data.end()), more);
  EXPECT_EQ(b.dma.stats(DmaChannel::kMm2s).transfers, 2u);
}

TEST(AxiDma, SimpleMm2sUnderBackPressure) {
  FreshSimContext ctx;
  Bench b;
  const uint64_t n = 300;
  const auto words = random_words(n, 3);
  put_words(b.ddr, 0x20000, words);
  b.sink.ready = [](uint64_t c) { return c % 3 == 0; };
  b.start_mm2s(0x20000, uint32_t(n * 8));
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 5000));
  EXPECT_EQ(b.sink.data, words);
  EXPECT_GE(b.sink.cycles.back() - b.sink.cycles.front(), 3 * (n - 1));
}

// Hand-worked S2MM: the stream already holds beats when the DataMover opens it at
// c0 + datamover_cmd_to_read (= p1, the first beat taken); the first write request leaves at
// p1 + s2mm_beat_to_write with its first W beat, then one W beat per edge; the last W beat
// (p1 + 39 + n - 1) reaches the HP port (+1) and the DDR (+1), whose response leaves
// write_latency later, passes the HP port (+1) and reaches the DMA (+1): completion.
TEST(AxiDma, SimpleS2mmHandWorkedAndByteExact) {
  FreshSimContext ctx;
  Bench b;
  const uint64_t n = 37, dst = 0x0003'0000;
  const auto words = random_words(n, 4);
  b.source.packet(words);
  b.cpu.write(kS2mmDmacr, kCrRunStop | kCrIocIrqEn);
  b.cpu.write(kS2mmDa, uint32_t(dst));
  b.run_cycles(10);
  const uint64_t c0 = b.write_edge();
  b.cpu.write(kS2mmLength, 4096);  // buffer larger than the packet
  ASSERT_TRUE(b.run_until([&] { return b.idle(kS2mmDmasr); }, 2000));

  const AxiDmaConfig& k = b.dma.config();
  const uint64_t p1 = c0 + uint64_t(k.datamover_cmd_to_read);
  const uint64_t first_aw = p1 + uint64_t(k.s2mm_beat_to_write);
  const uint64_t last_w = first_aw + n - 1;
  const uint64_t done = last_w + 1 + 1 + b.ddr.write_latency_cycles() + 1 + 1;
  const AxiDmaChannelStats& s = b.dma.stats(DmaChannel::kS2mm);
  EXPECT_EQ(s.last_start_cycle, c0);
  EXPECT_EQ(s.last_first_beat_cycle, p1);
  EXPECT_EQ(s.last_first_request_cycle, first_aw);
  EXPECT_EQ(s.last_completion_cycle, done);
  EXPECT_EQ(get_words(b.ddr, dst, n), words);
  EXPECT_EQ(b.ddr.read64(dst + n * 8), 0u);
  EXPECT_EQ(b.cpu.read(kS2mmLength), n * 8);  // bytes actually received
  EXPECT_EQ(b.cpu.read(kS2mmDmasr), kSrIdle | kSrIocIrq);
  EXPECT_EQ(s.bytes, n * 8);
  b.run_cycles(2);
  EXPECT_TRUE(b.dma.s2mm_introut.read());
}

// S2MM stops at LENGTH when the packet is longer; the rest of the packet stays in the
// stream for the next transfer, which ends at TLAST.
TEST(AxiDma, SimpleS2mmStopsAtLengthThenTakesTheRest) {
  FreshSimContext ctx;
  Bench b;
  const auto words = random_words(16, 5);
  b.source.packet(words);
  b.cpu.write(kS2mmDmacr, kCrRunStop);
  b.cpu.write(kS2mmDa, 0x8000);
  b.cpu.write(kS2mmLength, 80);
  ASSERT_TRUE(b.run_until([&] { return b.idle(kS2mmDmasr); }, 2000));
  EXPECT_EQ(b.cpu.read(kS2mmLength), 80u);
  EXPECT_EQ(get_words(b.ddr, 0x8000, 10), std::vector<uint64_t>(words.begin(), words.begin() + 10));
  EXPECT_EQ(b.ddr.read64(0x8000 + 80), 0u);
  b.cpu.write(kS2mmDa, 0x9000);
  b.cpu.write(kS2mmLength, 4096);
  ASSERT_TRUE(b.run_until([&] { return b.idle(kS2mmDmasr); }, 2000));
  EXPECT_EQ(b.cpu.read(kS2mmLength), 48u);
  EXPECT_EQ(get_words(b.ddr, 0x9000, 6), std::vector<uint64_t>(words.begin() + 10, words.end()));
}

// Both channels at once, through one HP port: a loopback of MM2S into S2MM.
TEST(AxiDma, BothChannelsConcurrently) {
  FreshSimContext ctx;
  Bench b;
  const uint64_t n = 2000;
  const auto words = random_words(n, 6);
  put_words(b.ddr, 0x0010'0000, words);
  b.source.packet(random_words(n, 7));
  b.cpu.write(kMm2sDmacr, kCrRunStop);
  b.cpu.write(kS2mmDmacr, kCrRunStop);
  b.cpu.write(kMm2sSa, 0x0010'0000);
  b.cpu.write(kS2mmDa, 0x0020'0000);
  b.cpu.write(kMm2sLength, uint32_t(n * 8));
  b.cpu.write(kS2mmLength, uint32_t(n * 8));
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr) && b.idle(kS2mmDmasr); }, 10000));
  EXPECT_EQ(b.sink.data, words);
  EXPECT_EQ(get_words(b.ddr, 0x0020'0000, n), random_words(n, 7));
}

// ---- errors in simple mode -------------------------------------------------------------------

struct ErrorCase {
  const char* what;
  bool s2mm;
  uint32_t addr, length;
  uint32_t error_bit;
};

class AxiDmaSimpleError : public ::testing::TestWithParam<ErrorCase> {};

// Each error: the DMASR bit, Err_Irq and Halted (not Idle, no IOC), RS cleared, the error
// interrupt line; RS does not restart the channel, Reset does and clears everything.
TEST_P(AxiDmaSimpleError, SetsTheBitAndHalts) {
  FreshSimContext ctx;
  const ErrorCase& e = GetParam();
  AxiDmaConfig cfg = simple_config();
  cfg.length_bits = 12;  // max 4095 bytes
  Bench b(cfg);
  b.source.packet(random_words(8, 8));
  const uint32_t base = e.s2mm ? kS2mmOffset : 0;
  b.cpu.write(base + kMm2sDmacr, kCrRunStop | kCrIocIrqEn | kCrErrIrqEn);
  b.cpu.write(base + kMm2sSa, e.addr);
  b.cpu.write(base + kMm2sLength, e.length);
  ASSERT_TRUE(b.run_until([&] { return (b.cpu.read(base + kMm2sDmasr) & kSrHalted) != 0; }, 2000));
  b.run_cycles(200);
  EXPECT_EQ(b.cpu.read(base + kMm2sDmasr), kSrHalted | e.error_bit | kSrErrIrq);
  EXPECT_EQ(b.cpu.read(base + kMm2sDmacr) & kCrRunStop, 0u);
  EXPECT_TRUE((e.s2mm ? b.dma.s2mm_introut : b.dma.mm2s_introut).read());
  EXPECT_FALSE((e.s2mm ? b.dma.mm2s_introut : b.dma.s2mm_introut).read());
  EXPECT_EQ(b.dma.stats(e.s2mm ? DmaChannel::kS2mm : DmaChannel::kMm2s).errors, 1u);
  if (!e.s2mm) {
    EXPECT_TRUE(b.sink.tlast_at.empty());
  }
  b.cpu.write(base + kMm2sDmacr, kCrRunStop);
  EXPECT_EQ(b.cpu.read(base + kMm2sDmasr) & kSrHalted, kSrHalted);
  b.cpu.write(base + kMm2sDmacr, kCrReset);
  ASSERT_TRUE(b.run_until([&] { return (b.cpu.read(base + kMm2sDmacr) & kCrReset) == 0; }, 2000));
  EXPECT_EQ(b.cpu.read(base + kMm2sDmasr), kSrHalted);
  EXPECT_FALSE(b.dma.active(e.s2mm ? DmaChannel::kS2mm : DmaChannel::kMm2s));
  b.run_cycles(2);
  EXPECT_FALSE((e.s2mm ? b.dma.s2mm_introut : b.dma.mm2s_introut).read());
}

INSTANTIATE_TEST_SUITE_P(
    AxiDma, AxiDmaSimpleError,
    ::testing::Values(ErrorCase{"Mm2sLengthOverLimit", false, 0x1000, 4096, kSrDmaIntErr},
                      ErrorCase{"S2mmLengthOverLimit", true, 0x1000, 4096, kSrDmaIntErr},
                      ErrorCase{"Mm2sMisalignedSource", false, 0x1004, 64, kSrDmaIntErr},
                      ErrorCase{"S2mmMisalignedDestination", true, 0x1002, 64, kSrDmaIntErr},
                      ErrorCase{"Mm2sLengthNotWholeBeats", false, 0x1000, 60, kSrDmaIntErr},
                      ErrorCase{"Mm2sSourceOutsideDdr", false, 0x2000'0000, 64, kSrDmaDecErr},
                      ErrorCase{"S2mmDestinationOutsideDdr", true, 0x3000'0000, 64, kSrDmaDecErr}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.what); });

// A transfer of exactly the largest whole-beat length passes the 12-bit limit.
TEST(AxiDma, LengthAtTheLimitIsAccepted) {
  FreshSimContext ctx;
  AxiDmaConfig cfg = simple_config();
  cfg.length_bits = 12;
  Bench b(cfg);
  EXPECT_EQ(b.dma.max_length(), 4095u);
  const auto words = random_words(511, 9);
  put_words(b.ddr, 0x4000, words);
  b.start_mm2s(0x4000, 4088);
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 5000));
  EXPECT_EQ(b.sink.data, words);
}

// The DataMover's read requests never cross a 4 KB boundary (AXI), and are otherwise as long
// as dma.max_burst_beats allows: with 256-beat requests, 2 KB from 0x1100 is one request
// (a 2 KB split would make it two), 2 KB from 0x1F00 is two (32 beats to the boundary, then
// 224), and the data arrives whole.
TEST(AxiDma, ReadRequestsSplitAtFourKilobyteBoundariesOnly) {
  for (const auto& [src, requests] : {std::pair<uint64_t, uint64_t>{0x1100, 1}, {0x1F00, 2}, {0x2000, 1}}) {
    FreshSimContext ctx;
    AxiDmaConfig cfg = simple_config();
    cfg.max_burst_beats = 256;
    cfg.mm2s_fifo_beats = 256;
    cfg.s2mm_fifo_beats = 256;
    Bench b(cfg);
    const auto words = random_words(256, src);
    put_words(b.ddr, src, words);
    b.start_mm2s(uint32_t(src), 2048);
    ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 20000));
    EXPECT_EQ(b.hp.stats().read_requests, requests) << "2 KB from " << std::hex << src;
    EXPECT_EQ(b.sink.data, words);
  }
}

// Reset in the middle of a transfer: DMACR.Reset reads 1 until the reads in flight have
// drained, then self-clears; the next transfer is clean.
TEST(AxiDma, ResetDuringTransferDrainsAndRecovers) {
  FreshSimContext ctx;
  Bench b;
  put_words(b.ddr, 0x10000, random_words(4000, 10));
  b.sink.ready = [](uint64_t c) { return c % 4 == 0; };
  b.start_mm2s(0x10000, 4000 * 8);
  b.run_cycles(60);
  b.cpu.write(kMm2sDmacr, kCrReset);
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrHalted);
  EXPECT_EQ(b.cpu.read(kMm2sDmacr), kCrResetValue | kCrReset);  // reads in flight
  ASSERT_TRUE(b.run_until([&] { return (b.cpu.read(kMm2sDmacr) & kCrReset) == 0; }, 2000));
  EXPECT_EQ(b.cpu.read(kMm2sDmacr), kCrResetValue);
  b.run_cycles(50);  // let the sink take what was already in the stream
  const size_t before = b.sink.data.size();
  b.sink.ready = nullptr;
  const auto words = random_words(20, 11);
  put_words(b.ddr, 0x90000, words);
  b.start_mm2s(0x90000, 160);
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 2000));
  ASSERT_EQ(b.sink.data.size(), before + 20);
  EXPECT_EQ(std::vector<uint64_t>(b.sink.data.begin() + long(before), b.sink.data.end()), words);
}

TEST(AxiDma, ConfigErrorsNameTheField) {
  FreshSimContext ctx;
  Clock clock("clock", ClockConfig{});
  for (int bits : {7, 27}) {
    AxiDmaConfig c;
    c.length_bits = bits;
    try {
      AxiDma d("d", clock, c);
      ADD_FAILURE() << bits;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("length_bits"), std::string::npos) << e.what();
    }
  }
  AxiDmaConfig c;
  c.desc_to_data = -1;
  EXPECT_THROW(AxiDma("d2", clock, c), Error);
  c = {};
  c.mm2s_fifo_beats = 8;  // smaller than a burst
  EXPECT_THROW(AxiDma("d3", clock, c), Error);
  // S2MM too: a write waits for its whole burst in the FIFO, so a smaller one would never
  // write (it deadlocked before this check); one burst deep is enough.
  for (int beats : {1, 15}) {
    c = {};
    c.s2mm_fifo_beats = beats;
    try {
      c.validate("dma");
      ADD_FAILURE() << "s2mm_fifo_beats " << beats << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dma.s2mm_fifo_beats' = " + std::to_string(beats)), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("dma.max_burst_beats = 16"), std::string::npos) << e.what();
    }
  }
  c = {};
  c.s2mm_fifo_beats = c.max_burst_beats;
  EXPECT_NO_THROW(c.validate("dma"));
  for (int bits : {8, 26}) {
    c = {};
    c.length_bits = bits;
    AxiDma d(bits == 8 ? "d8" : "d26", clock, c);
    EXPECT_EQ(d.max_length(), (1u << bits) - 1);
  }
}

// ---- scatter-gather ------------------------------------------------------------------------

constexpr uint64_t kDescBase = 0x0010'0000;
constexpr uint64_t kBufBase = 0x0080'0000;

struct Chain {
  std::vector<uint64_t> desc;                 // descriptor addresses
  std::vector<std::vector<uint64_t>> data;  // per descriptor
};

// Builds an MM2S chain of descriptors with the given beat counts (SOF on the first, EOF on
// the last), buffers filled with random data, each buffer in its own 64 KB slot.
Chain mm2s_chain(Ddr& ddr, const std::vector<uint32_t>& beats, uint64_t seed) {
  Chain c;
  for (size_t i = 0; i < beats.size(); ++i) c.desc.push_back(kDescBase + 0x40 * i);
  for (size_t i = 0; i < beats.size(); ++i) {
    const uint64_t buf = kBufBase + 0x10000 * i + 8 * (i % 7);
    c.data.push_back(random_words(beats[i], seed + i));
    put_words(ddr, buf, c.data.back());
    uint32_t control = beats[i] * 8;
    if (i == 0) control |= kCtrlSof;
    if (i + 1 == beats.size()) control |= kCtrlEof;
    put_descriptor(ddr, c.desc[i], i + 1 < beats.size() ? c.desc[i + 1] : c.desc[0], buf, control);
  }
  return c;
}

void run_mm2s_chain(size_t count) {
  Bench b(AxiDmaConfig{});
  std::vector<uint32_t> beats;
  for (size_t i = 0; i < count; ++i) beats.push_back(uint32_t(1 + (i * 37) % 40));
  const Chain c = mm2s_chain(b.ddr, beats, 100);
  b.cpu.write(kMm2sCurdesc, uint32_t(c.desc.front()));
  b.cpu.write(kMm2sDmacr, kCrRunStop | kCrIocIrqEn);
  b.cpu.write(kMm2sTaildesc, uint32_t(c.desc.back()));
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 200 * count + 1000));
  std::vector<uint64_t> expected;
  for (const auto& d : c.data) expected.insert(expected.end(), d.begin(), d.end());
  EXPECT_EQ(b.sink.data, expected);
  EXPECT_EQ(b.sink.tlast_at, std::vector<size_t>{expected.size() - 1});  // EOF only on the last
  for (size_t i = 0; i < count; ++i)
    EXPECT_EQ(descriptor_status(b.ddr, c.desc[i]), kStsCmplt | (beats[i] * 8)) << "descriptor " << i;
  EXPECT_EQ(b.cpu.read(kMm2sCurdesc), uint32_t(c.desc.back()));
  EXPECT_EQ(b.cpu.read(kMm2sDmasr), kSrSgIncld | kSrIdle | kSrIocIrq);
  const AxiDmaChannelStats& s = b.dma.stats(DmaChannel::kMm2s);
  EXPECT_EQ(s.descriptors, count);
  EXPECT_EQ(s.transfers, 1u);
  EXPECT_EQ(s.bytes, expected.size() * 8);
  b.run_cycles(2);
  EXPECT_TRUE(b.dma.mm2s_introut.read());
}

TEST(AxiDma, SgChainOfOne) {
  FreshSimContext ctx;
  run_mm2s_chain(1);
}
TEST(AxiDma, SgChainOfThree) {
  FreshSimContext ctx;
  run_mm2s_chain(3);
}
TEST(AxiDma, SgChainOfHundred) {
  FreshSimContext ctx;
  run_mm2s_chain(100);
}

// Hand-worked SG chain of 3 descriptors (n = 5, 16, 33 beats). Per descriptor i:
//   fetch request f_i (f_1 = c0 + sg_tail_to_fetch; f_{i+1} = b_i, the edge the previous
//   status write-back's response arrives);
//   descriptor (8 beats) arrives a_i = f_i + 1 (port) + 1 (DDR accept) + rl + 7 + 1 (port) + 1 (DMA);
//   first data request d_i = a_i + desc_to_data; first stream push d_i + 4 + rl + read_to_stream,
//   last push x_i = that + n_i - 1;
//   write-back pushed at x_i, the response arrives b_i = x_i + 2 + wl + 2.
TEST(AxiDma, SgChainHandWorked) {
  FreshSimContext ctx;
  Bench b(AxiDmaConfig{});
  const std::vector<uint32_t> beats = {5, 16, 33};
  const Chain c = mm2s_chain(b.ddr, beats, 200);
  b.cpu.write(kMm2sCurdesc, uint32_t(c.desc.front()));
  b.cpu.write(kMm2sDmacr, kCrRunStop);
  b.run_cycles(7);
  const uint64_t c0 = b.write_edge();
  b.cpu.write(kMm2sTaildesc, uint32_t(c.desc.back()));
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 3000));

  const AxiDmaConfig& k = b.dma.config();
  const uint64_t rl = b.ddr.read_latency_cycles(), wl = b.ddr.write_latency_cycles();
  uint64_t f = c0 + uint64_t(k.sg_tail_to_fetch);
  uint64_t first_request = 0, done = 0;
  std::vector<uint64_t> first_push;
  for (size_t i = 0; i < beats.size(); ++i) {
    const uint64_t a = f + 1 + 1 + rl + 7 + 1 + 1;
    const uint64_t d = a + uint64_t(k.desc_to_data);
    if (i == 0) first_request = d;
    const uint64_t p = d + 4 + rl + uint64_t(k.read_to_stream);
    first_push.push_back(p);
    const uint64_t x = p + beats[i] - 1;
    done = x + 2 + wl + 2;
    f = done;
  }
  const AxiDmaChannelStats& s = b.dma.stats(DmaChannel::kMm2s);
  EXPECT_EQ(s.last_start_cycle, c0);
  EXPECT_EQ(s.last_first_request_cycle, first_request);
  EXPECT_EQ(s.last_completion_cycle, done);
  ASSERT_EQ(b.sink.cycles.size(), 54u);
  EXPECT_EQ(b.sink.cycles[0], first_push[0] + 1);
  EXPECT_EQ(b.sink.cycles[5], first_push[1] + 1);
  EXPECT_EQ(b.sink.cycles[21], first_push[2] + 1);
  EXPECT_EQ(b.sink.cycles[53], first_push[2] + 33);
  // The closed form: 10 + sum_i (46 + 2 rl + wl + read_to_stream + n_i) after c0.
  EXPECT_EQ(done, c0 + 10 + 3 * (46 + 2 * rl + wl + 1) + 54);
}

// A chain on a running channel can be extended: a new TAILDESC after idle continues from the
// descriptor after the old tail.
TEST(AxiDma, SgTailExtensionContinuesTheChain) {
  FreshSimContext ctx;
  Bench b(AxiDmaConfig{});
  const Chain c = mm2s_chain(b.ddr, {4, 4, 4, 4}, 300);
  b.cpu.write(kMm2sCurdesc, uint32_t(c.desc[0]));
  b.cpu.write(kMm2sDmacr, kCrRunStop);
  b.cpu.write(kMm2sTaildesc, uint32_t(c.desc[1]));
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 2000));
  EXPECT_EQ(b.sink.data.size(), 8u);
  EXPECT_EQ(descriptor_status(b.ddr, c.desc[2]), 0u);
  b.cpu.write(kMm2sTaildesc, uint32_t(c.desc[3]));
  ASSERT_TRUE(b.run_until([&] { return b.idle(kMm2sDmasr); }, 2000));
  ASSERT_EQ(b.sink.data.size(), 16u);
  EXPECT_EQ(std::vector<uint64_t>(b.sink.data.begin() + 8, b.sink.data.begin() + 12), c.data[2]);
  EXPECT_EQ(descriptor_status(b.ddr, c.desc[3]), kStsCmplt | 32u);
  EXPECT_EQ(b.dma.stats(DmaChannel::kMm2s).transfers, 2u);
}

// S2MM SG: a packet longer than a descriptor's buffer continues into the next one; the
// status words carry the bytes received and RXSOF / RXEOF.
TEST(AxiDma, SgS2mmPacketsIntoDescriptors) {
  FreshSimContext ctx;
  Bench b(AxiDmaConfig{});
  const auto p1 = random_words(12, 400), p2 = random_words(5, 401);
  b.source.packet(p1);
  b.source.packet(p2);
  std::vector<uint64_t> desc = {kDescBase, kDescBase + 0x40, kDescBase + 0x80};
  std::vector<uint64_t> buf = {0x0030'0000, 0x0031'0000, 0x0032'0000};
  for (int i = 0; i < 3; ++i) put_descriptor(b.ddr, desc[i], desc[(i + 1) % 3], buf[i], 64);
  b.cpu.write(kS2mmCurdesc, uint32_t(desc[0]));
  b.cpu.write(kS2mmDmacr, kCrRunStop | kCrIocIrqEn);
  b.cpu.write(kS2mmTaildesc, uint32_t(desc[2]));
  ASSERT_TRUE(b.run_until([&] { return b.idle(kS2mmDmasr); }, 3000));
  EXPECT_EQ(descriptor_status(b.ddr, desc[0]), kStsCmplt | kStsRxSof | 64u);
  EXPECT_EQ(descriptor_status(b.ddr, desc[1]), kStsCmplt | kStsRxEof | 32u);
  EXPECT_EQ(descriptor_status(b.ddr, desc[2]), kStsCmplt | kStsRxSof | kStsRxEof | 40u);
  EXPECT_EQ(get_words(b.ddr, buf[0], 8), std::vector<uint64_t>(p1.begin(), p1.begin() + 8));
  EXPECT_EQ(get_words(b.ddr, buf[1], 4), std::vector<uint64_t>(p1.begin() + 8, p1.end()));
  EXPECT_EQ(get_words(b.ddr, buf[2], 5), p2);
  EXPECT_EQ(b.cpu.read(kS2mmDmasr), kSrSgIncld | kSrIdle | kSrIocIrq);
  EXPECT_EQ(b.dma.stats(DmaChannel::kS2mm).descriptors, 3u);
  EXPECT_EQ(b.dma.stats(DmaChannel::kS2mm).bytes, 17u * 8);
}

// ---- errors in SG mode ---------------------------------------------------------------------

struct SgErrorBench {
  explicit SgErrorBench(int length_bits = 23) : b(make_config(length_bits)) {}
  static AxiDmaConfig make_config(int bits) {
    AxiDmaConfig c;
    c.length_bits = bits;
    return c;
  }
  void start(uint64_t first, uint64_t tail) {
    b.cpu.write(kMm2sCurdesc, uint32_t(first));
    b.cpu.write(kMm2sDmacr, kCrRunStop | kCrErrIrqEn | kCrIocIrqEn);
    b.cpu.write(kMm2sTaildesc, uint32_t(tail));
    EXPECT_TRUE(b.run_until([&] { return (b.cpu.read(kMm2sDmasr) & kSrHalted) != 0; }, 5000));
    b.run_cycles(200);  // the errored descriptor's status write-back
  }
  // A chain of one descriptor at kDescBase (a ring of itself), then start.
  void start_one(uint64_t buffer, uint32_t control, uint32_t status = 0) {
    put_descriptor(b.ddr, kDescBase, kDescBase, buffer, control, status);
    start(kDescBase, kDescBase);
  }
  Bench b;
};

// A descriptor buffer over the length limit (12 bits: 4095 bytes): DMAIntErr, the
// descriptor's STATUS gets the internal-error bit (not Cmplt), the chain stops there.
TEST(AxiDma, SgDescriptorOverTheLengthLimit) {
  FreshSimContext ctx;
  SgErrorBench e(12);
  Ddr& ddr = e.b.ddr;
  const auto words = random_words(4, 500);
  put_words(ddr, 0x0040'0000, words);
  put_descriptor(ddr, kDescBase, kDescBase + 0x40, 0x0040'0000, 32 | kCtrlSof);
  put_descriptor(ddr, kDescBase + 0x40, kDescBase + 0x80, 0x0041'0000, 4096);
  put_descriptor(ddr, kDescBase + 0x80, kDescBase, 0x0042'0000, 64 | kCtrlEof);
  e.start(kDescBase, kDescBase + 0x80);
  EXPECT_EQ(e.b.cpu.read(kMm2sDmasr), kSrSgIncld | kSrHalted | kSrDmaIntErr | kSrErrIrq);
  EXPECT_EQ(descriptor_status(ddr, kDescBase), kStsCmplt | 32u);
  EXPECT_EQ(descriptor_status(ddr, kDescBase + 0x40), kStsIntErr);
  EXPECT_EQ(descriptor_status(ddr, kDescBase + 0x80), 0u);
  EXPECT_EQ(e.b.cpu.read(kMm2sCurdesc), uint32_t(kDescBase + 0x40));
  EXPECT_EQ(e.b.sink.data, words);
  EXPECT_TRUE(e.b.dma.mm2s_introut.read());
  EXPECT_FALSE(e.b.dma.active(DmaChannel::kMm2s));
}

TEST(AxiDma, SgDescriptorFetchOutsideDdrIsSgDecErr) {
  FreshSimContext ctx;
  SgErrorBench e;
  e.start(0x3000'0000, 0x3000'0000);
  EXPECT_EQ(e.b.cpu.read(kMm2sDmasr), kSrSgIncld | kSrHalted | kSrSgDecErr | kSrErrIrq);
  EXPECT_EQ(e.b.cpu.read(kMm2sCurdesc), 0x3000'0000u);
  EXPECT_TRUE(e.b.sink.data.empty());
}

TEST(AxiDma, SgBufferOutsideDdrIsDmaDecErrWithStatus) {
  FreshSimContext ctx;
  SgErrorBench e;
  e.start_one(0x2800'0000, 128 | kCtrlSof | kCtrlEof);
  EXPECT_EQ(e.b.cpu.read(kMm2sDmasr), kSrSgIncld | kSrHalted | kSrDmaDecErr | kSrErrIrq);
  EXPECT_EQ(descriptor_status(e.b.ddr, kDescBase), kStsDecErr);  // decode error, no Cmplt, 0 bytes
  EXPECT_TRUE(e.b.sink.data.empty());
  EXPECT_FALSE(e.b.dma.active(DmaChannel::kMm2s));
}

TEST(AxiDma, SgMisalignedBufferIsDmaIntErr) {
  FreshSimContext ctx;
  SgErrorBench e;
  e.start_one(0x0040'0004, 64 | kCtrlSof | kCtrlEof);
  EXPECT_EQ(e.b.cpu.read(kMm2sDmasr), kSrSgIncld | kSrHalted | kSrDmaIntErr | kSrErrIrq);
  EXPECT_EQ(descriptor_status(e.b.ddr, kDescBase), kStsIntErr);
}

TEST(AxiDma, SgZeroLengthIsDmaIntErr) {
  FreshSimContext ctx;
  SgErrorBench e;
  e.start_one(0x0040'0000, kCtrlSof | kCtrlEof);
  EXPECT_EQ(e.b.cpu.read(kMm2sDmasr), kSrSgIncld | kSrHalted | kSrDmaIntErr | kSrErrIrq);
}

TEST(AxiDma, SgAlreadyCompletedDescriptorIsSgIntErr) {
  FreshSimContext ctx;
  SgErrorBench e;
  e.start_one(0x0040'0000, 64 | kCtrlSof | kCtrlEof, kStsCmplt | 64);
  EXPECT_EQ(e.b.cpu.read(kMm2sDmasr), kSrSgIncld | kSrHalted | kSrSgIntErr | kSrErrIrq);
  EXPECT_TRUE(e.b.sink.data.empty());
}

TEST(AxiDma, SgS2mmBufferOutsideDdrIsDmaDecErr) {
  FreshSimContext ctx;
  Bench b(AxiDmaConfig{});
  b.source.packet(random_words(6, 600));
  put_descriptor(b.ddr, kDescBase, kDescBase, 0x2000'0000, 256);
  b.cpu.write(kS2mmCurdesc, uint32_t(kDescBase));
  b.cpu.write(kS2mmDmacr, kCrRunStop);
  b.cpu.write(kS2mmTaildesc, uint32_t(kDescBase));
  ASSERT_TRUE(b.run_until([&] { return (b.cpu.read(kS2mmDmasr) & kSrHalted) != 0; }, 3000));
  b.run_cycles(200);
  EXPECT_EQ(b.cpu.read(kS2mmDmasr), kSrSgIncld | kSrHalted | kSrDmaDecErr | kSrErrIrq);
  EXPECT_EQ(descriptor_status(b.ddr, kDescBase) & (kStsCmplt | kStsDecErr), kStsDecErr);
  EXPECT_FALSE(b.dma.active(DmaChannel::kS2mm));
}

// ---- two DMAs on two HP ports ---------------------------------------------------------------

// Two simple-mode MM2S DMAs, each on its own HP port of one DDR, stream n beats at once.
// At 125 MHz the two ports (2.000 GB/s) stay under the wall: each finishes exactly as if
// alone. At 200 MHz the wall (2.009 GB/s) binds: together they move 2.009 GB/s.
struct TwoLaneResult {
  uint64_t start = 0, done0 = 0, done1 = 0, rl = 0;
  double gbps = 0;
};

TwoLaneResult two_lanes(double mhz, uint64_t n) {
  Clock clock("clock", ClockConfig{mhz});
  Ddr ddr("ddr", clock, short_latency_ddr());
  HpPort hp0("hp0", clock, HpPortConfig{}, ddr.port(0)), hp2("hp2", clock, HpPortConfig{}, ddr.port(1));
  AxiDmaConfig c0 = simple_config(), c1 = simple_config();
  c1.base_address = c0.base_address + 0x10000;
  AxiDma dma0("dma0", clock, c0), dma1("dma1", clock, c1);
  AxiStream s0("s0", 2), s1("s1", 2), unused0("u0", 2), unused1("u1", 2);
  StreamSink k0("k0", clock, s0), k1("k1", clock, s1);
  RegMaster cpu0("cpu0", c0.base_address), cpu1("cpu1", c1.base_address);
  for (auto [dma, hp, out, in, cpu] : {std::tuple{&dma0, &hp0, &s0, &unused0, &cpu0}, {&dma1, &hp2, &s1, &unused1, &cpu1}}) {
    hp->attach(dma->m_axi_mm2s);
    hp->attach(dma->m_axi_s2mm);
    hp->attach(dma->m_axi_sg);
    dma->mm2s_out = out;
    dma->s2mm_in = in;
    cpu->socket.bind(dma->ctrl);
  }
  const auto w0 = random_words(n, 20), w1 = random_words(n, 21);
  put_words(ddr, 0x0100'0000, w0);
  put_words(ddr, 0x0180'0000, w1);
  cpu0.write(kMm2sDmacr, kCrRunStop);
  cpu1.write(kMm2sDmacr, kCrRunStop);
  cpu0.write(kMm2sSa, 0x0100'0000);
  cpu1.write(kMm2sSa, 0x0180'0000);
  TwoLaneResult r;
  r.start = sc_core::sc_time_stamp().value() / clock.period().value() + 1;
  cpu0.write(kMm2sLength, uint32_t(n * 8));
  cpu1.write(kMm2sLength, uint32_t(n * 8));
  for (uint64_t run = 0; dma0.active(DmaChannel::kMm2s) || dma1.active(DmaChannel::kMm2s); run += 256) {
    if (run > 4 * n) {
      ADD_FAILURE() << "two lanes did not finish";
      break;
    }
    sc_core::sc_start(clock.period() * 256.0);
  }
  EXPECT_EQ(k0.data, w0);
  EXPECT_EQ(k1.data, w1);
  r.done0 = dma0.last_completion_cycle(DmaChannel::kMm2s);
  r.done1 = dma1.last_completion_cycle(DmaChannel::kMm2s);
  r.rl = ddr.read_latency_cycles();
  r.gbps = ddr.achieved_gbps();
  return r;
}

TEST(AxiDma, TwoLanesUnderTheWallRunAsIfAlone) {
  FreshSimContext ctx;
  const uint64_t n = 20000;
  const TwoLaneResult r = two_lanes(125.0, n);
  const uint64_t alone = r.start + 8 + 4 + r.rl + 1 + n - 1;  // as in SimpleMm2sHandWorkedAndByteExact
  EXPECT_EQ(r.done0, alone);
  EXPECT_EQ(r.done1, alone);
  EXPECT_NEAR(r.gbps, 2.000, 0.001);
}

TEST(AxiDma, TwoLanesOverTheWallShareIt) {
  FreshSimContext ctx;
  const uint64_t n = 20000;
  const TwoLaneResult r = two_lanes(200.0, n);
  const double span_s = double(std::max(r.done0, r.done1) - r.start) * 5e-9;
  // 2 x n beats through the wall, within a burst per lane plus the start-up latency.
  EXPECT_NEAR(2.0 * double(n) * 8 / span_s / 1e9, 2.009, 0.01);
  EXPECT_NEAR(r.gbps, 2.009, 0.002);
  EXPECT_LE(std::llabs(int64_t(r.done0) - int64_t(r.done1)), 32);
}

// ---- speed -----------------------------------------------------------------------------------

// The longest whole-beat transfer under the 23-bit limit (8,388,600 bytes), simple MM2S into
// an always-ready sink; prints simulated cycles per wall second.
TEST(AxiDma, LongMm2sStreamSpeed) {
  FreshSimContext ctx;
  Bench b;
  const uint32_t bytes = b.dma.max_length() / 8 * 8;
  ASSERT_EQ(bytes, 8'388'600u);
  const size_t n = bytes / 8;
  std::vector<uint64_t> words(n);
  for (size_t i = 0; i < n; ++i) words[i] = i * 0x9E37'79B9'7F4A'7C15ull;
  put_words(b.ddr, 0x0100'0000, words);
  b.sink.record_cycles = false;
  b.sink.data.reserve(n);
  b.cpu.write(kMm2sDmacr, kCrRunStop);
  b.cpu.write(kMm2sSa, 0x0100'0000);
  const uint64_t c0 = b.write_edge();
  b.cpu.write(kMm2sLength, bytes);
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t cycles0 = b.clock.cycle();
  while (!(b.cpu.read(kMm2sDmasr) & kSrIdle) && b.clock.cycle() < c0 + 2 * n) sc_core::sc_start(b.clock.period() * 65536.0);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t cycles = b.clock.cycle() - cycles0;
  ASSERT_TRUE(b.cpu.read(kMm2sDmasr) & kSrIdle);
  EXPECT_TRUE(b.sink.data == words);
  // One beat per edge after the start-up latency.
  const AxiDmaChannelStats& s = b.dma.stats(DmaChannel::kMm2s);
  EXPECT_EQ(s.last_completion_cycle - s.last_first_beat_cycle, n - 1);
  std::printf("[ speed ] MM2S %zu beats: %llu cycles in %.3f s = %.2f M cycles/s\n", n,
              (unsigned long long)cycles, wall, double(cycles) / wall / 1e6);
}

}  // namespace
}  // namespace bitsim::hw
