#pragma once
// Generated MMIO programs: random but reproducible host programs for the register
// differential test. A program sets up streams and SG rings in DDR, then runs rounds of:
// channel resets and run/stop, register pokes that the DMA must ignore or reject
// (LENGTH and TAILDESC while halted, CURDESC while running, reserved and threshold bits,
// write-1-to-clear of DMASR), a start that fails (misaligned address, a length over the
// length register, an SG descriptor already complete), matmul transfers in simple mode and
// attention chains in SG mode on one or both lanes, with reads of random registers while
// they run, and after each round reads of every DMA and engine register and digests of the
// result buffers. Every access is at a fixed simulated time, so the same program runs on
// both fidelities and every read can be compared.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "host/mmio_program.h"
#include "hw/circuits/attention_unit.h"
#include "hw/board.h"
#include "hw/circuits/engine_regs.h"
#include "model/packed_image.h"
#include "model/ternary.h"

namespace bitsim::testing {

class MmioProgramGenerator {
 public:
  // `chaos`: also accesses while transfers run that a driver never makes: stops, resets,
  // tail moves, engine register reads, loads of half-written results.
  // `vectors` > 1: matmul groups carry 1..vectors activation vectors (prefill groups,
  // docs/prefill.md; the board config's prefill.tokens_per_pass must allow them).
  explicit MmioProgramGenerator(uint64_t seed, bool chaos = false, int vectors = 1)
      : rng_(seed), chaos_(chaos), vectors_(vectors) {}

  host::MmioProgram generate(int rounds) {
    host::MmioProgram p;
    ops_ = &p.ops;
    t_ = 1'000'000;
    for (int lane = 0; lane < 2; ++lane) {
      make_matmul(lane);
      make_attention(lane);
    }
    for (int r = 0; r < rounds; ++r) round();
    return p;
  }

  // One matmul stream of one shape, moved to `placements` page offsets in turn (every
  // 8-byte offset is possible, so some placements make the stream cross a 4 KB boundary in
  // the middle of a burst) and run from each: the same batch shape at other offsets.
  host::MmioProgram relocation_program(int placements) {
    host::MmioProgram p;
    ops_ = &p.ops;
    t_ = 1'000'000;
    make_matmul(0);
    std::vector<uint8_t> stream(mm_[0].stream_bytes);
    std::copy(ops_->back().bytes.begin(), ops_->back().bytes.end(), stream.begin());
    for (int i = 0; i < placements; ++i) {
      init(0);
      mm_[0].stream = 0x0100'0000 + uint64_t(i + 1) * 0x2000 + (i == 0 ? 0 : 4096 - uint64_t(pick(1, 200)) * 8);
      mem_write(mm_[0].stream, stream);
      matmul_start(0);
      wait(kSettle);
      read_dma(0);
      mem_read(mm_[0].result, mm_[0].result_bytes);
    }
    return p;
  }

 private:
  static constexpr uint64_t kAccess = 200'000;  // ps per register access
  static constexpr uint64_t kSettle = 300'000'000;  // ps: every transfer of a round is done by then
  struct Matmul {
    uint64_t stream = 0, result = 0;
    uint32_t stream_bytes = 0, result_bytes = 0;
  };
  struct Attention {
    uint64_t ring = 0, s2mm_desc = 0, result = 0;
    int descs = 0;
    uint32_t result_bytes = 0;
  };

  uint64_t dma(int d) const { return hw::EngineRegistry::board().dma_base(d); }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  // A new access of `kind` to `addr` at the current time, appended to the program.
  host::MmioOp& append(host::MmioOp::Kind kind, uint64_t addr) {
    host::MmioOp op;
    op.kind = kind;
    op.time_ps = t_;
    op.addr = addr;
    ops_->push_back(op);
    return ops_->back();
  }
  void write(uint64_t addr, uint32_t v) {
    host::MmioOp& op = append(host::MmioOp::Kind::kWrite, addr);
    op.value = v;
    op.access_ps = kAccess;
    t_ += kAccess + uint64_t(pick(0, 3)) * 8'000 + uint64_t(pick(0, 7));
  }
  // A read whose expected value is filled in by the run on the clocked board.
  void read(uint64_t addr) {
    append(host::MmioOp::Kind::kRead, addr).access_ps = kAccess;
    t_ += kAccess + uint64_t(pick(0, 5)) * 8'000 + uint64_t(pick(0, 7));
  }
  void mem_write(uint64_t addr, const std::vector<uint8_t>& bytes) {
    host::MmioOp& op = append(host::MmioOp::Kind::kMemWrite, addr);
    op.size = bytes.size();
    op.bytes = bytes;
  }
  void mem_read(uint64_t addr, uint64_t size) { append(host::MmioOp::Kind::kMemRead, addr).size = size; }
  void wait(uint64_t ps) { t_ += ps; }

  static uint32_t pad8(uint32_t b) { return (b + 7) / 8 * 8; }
  uint64_t page_offset() { return uint64_t(pick(0, 511)) * 8; }

  void make_matmul(int lane) {
    Matmul& m = mm_[lane];
    const int groups = pick(1, 2);
    std::vector<model::TernaryMatrix> mats{size_t(groups)};
    std::vector<std::vector<int8_t>> xs{size_t(groups)};
    std::vector<model::GroupSpec> specs;
    uint32_t result_bytes = 0;
    for (int g = 0; g < groups; ++g) {
      auto& w = mats[size_t(g)];
      w.rows = pick(1, 40);
      w.cols = pick(1, 160);
      w.scale = 1;
      for (int i = 0; i < w.rows * w.cols; ++i) w.trits.push_back(int8_t(pick(-1, 1)));
      const int V = vectors_ > 1 ? pick(1, vectors_) : 1;
      for (int i = 0; i < w.cols * V; ++i) xs[size_t(g)].push_back(int8_t(pick(-128, 127)));
      specs.push_back({xs[size_t(g)].data(), w.cols, &w, 0, w.rows, V});
      result_bytes += pad8(uint32_t(w.rows * V) * 4);  // each group's results fill whole beats
    }
    const std::vector<uint8_t> stream = model::build_stream(specs);
    m.stream = 0x0100'0000 + uint64_t(lane) * 0x20'0000 + page_offset();
    m.stream_bytes = uint32_t(stream.size());
    m.result = 0x0180'0000 + uint64_t(lane) * 0x1'0000 + page_offset();
    m.result_bytes = result_bytes;
    mem_write(m.stream, stream);
  }

  void make_attention(int lane) {
    Attention& a = at_[lane];
    const int heads = pick(1, 3);
    uint64_t buf = 0x0300'0000 + uint64_t(lane) * 0x20'0000 + page_offset();
    a.ring = 0x0200'0000 + uint64_t(lane) * 0x1'0000;
    a.descs = 3 * heads;
    std::vector<uint32_t> ring(size_t(a.descs) * 16, 0);
    for (int h = 0; h < heads; ++h) {
      const int T = pick(1, 24);
      model::AttentionHeadHeader hd;
      hd.T = uint32_t(T);
      hd.m = uint32_t(pick(1, (1 << 18) - 1));
      hd.shift = uint32_t(pick(16, 30));
      hd.legacy = chance(0.2);
      hd.last = h == heads - 1;
      const auto beats = model::encode_attention_header(hd);
      std::vector<uint8_t> hq(112);
      std::memcpy(hq.data(), beats.data(), 16);
      for (int i = 16; i < 112; ++i) hq[size_t(i)] = uint8_t(pick(0, 255));
      std::vector<uint8_t> kv(size_t(T) * 96);
      const uint64_t addrs[3] = {buf, buf + 112, buf + 112 + kv.size()};
      const uint32_t lens[3] = {112, uint32_t(kv.size()), uint32_t(kv.size())};
      mem_write(addrs[0], hq);
      for (int k = 1; k < 3; ++k) {
        for (auto& b : kv) b = uint8_t(pick(0, 255));
        mem_write(addrs[k], kv);
      }
      buf += pad8(112 + 2 * uint32_t(kv.size()));
      for (int k = 0; k < 3; ++k) {
        const int i = 3 * h + k;
        uint32_t* d = &ring[size_t(i) * 16];
        d[0] = uint32_t(a.ring + uint64_t((i + 1) % a.descs) * 64);
        d[2] = uint32_t(addrs[k]);
        d[6] = lens[k] | (i == 0 ? hw::dma_reg::kCtrlSof : 0) | (i == a.descs - 1 ? hw::dma_reg::kCtrlEof : 0);
      }
    }
    a.result = 0x0380'0000 + uint64_t(lane) * 0x1'0000 + page_offset();
    a.result_bytes = uint32_t(heads) * 49 * 8;
    a.s2mm_desc = a.ring + 0x8000;
    rings_[lane] = ring;
    write_s2mm_desc(a);
  }

  void write_s2mm_desc(const Attention& a) {
    std::vector<uint32_t> d(16, 0);
    d[0] = uint32_t(a.s2mm_desc);
    d[2] = uint32_t(a.result);
    d[6] = a.result_bytes | hw::dma_reg::kCtrlSof | hw::dma_reg::kCtrlEof;
    mem_write(a.s2mm_desc, bytes_of(d));
  }
  static std::vector<uint8_t> bytes_of(const std::vector<uint32_t>& w) {
    std::vector<uint8_t> b(w.size() * 4);
    std::memcpy(b.data(), w.data(), b.size());
    return b;
  }
  // Fresh descriptors (status 0) for the next chain of a lane.
  void refresh_descriptors(int lane) {
    mem_write(at_[lane].ring, bytes_of(rings_[lane]));
    write_s2mm_desc(at_[lane]);
  }

  void init(int d) {
    namespace R = hw::dma_reg;
    for (int c = 0; c < 2; ++c) {
      const uint32_t base = c ? R::kS2mmOffset : 0;
      write(dma(d) + base + R::kMm2sDmacr, R::kCrReset);
      if (chance(0.3)) read(dma(d) + base + R::kMm2sDmacr);
      if (d >= 2) {
        const Attention& a = at_[d - 2];
        write(dma(d) + base + R::kMm2sCurdesc, uint32_t(c ? a.s2mm_desc : a.ring));
      }
      uint32_t cr = R::kCrRunStop;
      if (chance(0.3)) cr |= R::kCrIocIrqEn | R::kCrErrIrqEn;
      if (chance(0.2)) cr |= uint32_t(pick(0, 3)) << R::kCrIrqThresholdShift;
      write(dma(d) + base + R::kMm2sDmacr, cr);
      if (chance(0.5)) read(dma(d) + base + R::kMm2sDmacr);
      if (chance(0.5)) read(dma(d) + base + R::kMm2sDmasr);
    }
  }

  void read_dma(int d) {
    namespace R = hw::dma_reg;
    for (uint32_t off : {R::kMm2sDmacr, R::kMm2sDmasr, R::kMm2sCurdesc, R::kMm2sTaildesc, R::kMm2sSa, R::kMm2sLength,
                         R::kS2mmDmacr, R::kS2mmDmasr, R::kS2mmCurdesc, R::kS2mmTaildesc, R::kS2mmDa, R::kS2mmLength})
      read(dma(d) + off);
  }
  void read_engines() {
    for (uint64_t base : {hw::EngineRegistry::board()[0].regs, hw::EngineRegistry::board()[1].regs})
      for (int lane = 0; lane < 2; ++lane)
        for (uint32_t off = 0; off <= hw::engine_reg::kBeatsOut; off += 4)
          read(base + uint64_t(lane) * hw::engine_reg::kLaneStride + off);
  }
  void random_reads(int n) {
    namespace R = hw::dma_reg;
    static constexpr uint32_t kOffsets[] = {R::kMm2sDmacr, R::kMm2sDmasr, R::kMm2sCurdesc, R::kMm2sTaildesc,
                                            R::kMm2sSa,    R::kMm2sLength, R::kS2mmDmacr, R::kS2mmDmasr,
                                            R::kS2mmCurdesc, R::kS2mmTaildesc, R::kS2mmDa, R::kS2mmLength};
    for (int i = 0; i < n; ++i) {
      read(dma(pick(0, 3)) + kOffsets[pick(0, 11)]);
      if (chance(0.3)) wait(uint64_t(pick(1, 400)) * 8'000);
    }
  }

  // Writes a DMA must ignore or reject, on channels that are re-initialized afterwards.
  void pokes(int d) {
    namespace R = hw::dma_reg;
    const uint32_t base = chance(0.5) ? R::kS2mmOffset : 0;
    switch (pick(0, 6)) {
      case 0:  // RS = 0 on an idle channel, then a start that must not start
        write(dma(d) + base + R::kMm2sDmacr, 0);
        write(dma(d) + base + (d < 2 ? R::kMm2sLength : R::kMm2sTaildesc), d < 2 ? 64 : uint32_t(at_[d - 2].ring));
        break;
      case 1:  // reserved and threshold bits
        write(dma(d) + base + R::kMm2sDmacr, uint32_t(rng_()) & ~R::kCrReset);
        break;
      case 2:  // write-1-to-clear of every DMASR bit
        write(dma(d) + base + R::kMm2sDmasr, 0xFFFF'FFFF);
        break;
      case 3:  // CURDESC while running (ignored), TAILDESC of a halted channel after a reset
        write(dma(d) + base + R::kMm2sCurdesc, 0x40);
        write(dma(d) + base + R::kMm2sDmacr, R::kCrReset);
        write(dma(d) + base + R::kMm2sTaildesc, 0x1000);
        break;
      case 4:  // SA / DA and LENGTH of an SG channel, CURDESC / TAILDESC of a simple one
        write(dma(d) + base + R::kMm2sSa, 0x1234'5678);
        write(dma(d) + base + R::kMm2sCurdesc, 0x0400'0040);
        break;
      case 5:  // a start that fails at once: misaligned, over the length register, or complete SG
        fail_start(d);
        break;
      default:  // a reset of a running, idle channel
        write(dma(d) + base + R::kMm2sDmacr, R::kCrReset);
        break;
    }
    read_dma(d);
    wait(uint64_t(pick(1, 20)) * 80'000);
    read_dma(d);
  }

  void fail_start(int d) {
    namespace R = hw::dma_reg;
    if (d < 2) {
      write(dma(d) + R::kMm2sSa, chance(0.5) ? uint32_t(mm_[d].stream + 4) : uint32_t(mm_[d].stream));
      write(dma(d) + R::kMm2sLength, chance(0.5) ? (1u << 23) + 8 : mm_[d].stream_bytes + 3);
    } else {
      std::vector<uint32_t> done(16, 0);
      done[0] = uint32_t(at_[d - 2].ring + 0x4000);
      done[2] = 0x0100'0000;
      done[6] = 64 | R::kCtrlSof | R::kCtrlEof;
      done[7] = R::kStsCmplt;
      mem_write(at_[d - 2].ring + 0x4000, bytes_of(done));
      write(dma(d) + R::kMm2sDmacr, R::kCrReset);
      write(dma(d) + R::kMm2sCurdesc, uint32_t(at_[d - 2].ring + 0x4000));
      write(dma(d) + R::kMm2sDmacr, R::kCrRunStop);
      write(dma(d) + R::kMm2sTaildesc, uint32_t(at_[d - 2].ring + 0x4000));
    }
  }

  void matmul_start(int lane) {
    namespace R = hw::dma_reg;
    const Matmul& m = mm_[lane];
    write(dma(lane) + R::kS2mmDa, uint32_t(m.result));
    write(dma(lane) + R::kS2mmLength, m.result_bytes + uint32_t(pick(0, 4)) * 8);
    write(dma(lane) + R::kMm2sSa, uint32_t(m.stream));
    write(dma(lane) + R::kMm2sLength, m.stream_bytes);
  }
  void attention_start(int lane) {
    namespace R = hw::dma_reg;
    const Attention& a = at_[lane];
    write(dma(2 + lane) + R::kS2mmTaildesc, uint32_t(a.s2mm_desc));
    write(dma(2 + lane) + R::kMm2sTaildesc, uint32_t(a.ring + uint64_t(a.descs - 1) * 64));
  }

  void chaos(bool attention, int lanes) {
    namespace R = hw::dma_reg;
    const int n = pick(1, 3);
    for (int i = 0; i < n; ++i) {
      const int lane = (lanes & 1) ? 0 : 1;
      const int d = (attention ? 2 : 0) + lane;
      const uint32_t base = chance(0.5) ? R::kS2mmOffset : 0;
      switch (pick(0, 6)) {
        case 0: write(dma(d) + base + R::kMm2sDmacr, 0); break;             // stop while busy
        case 1: write(dma(d) + base + R::kMm2sDmacr, R::kCrReset); break;   // reset mid-transfer
        case 2: write(dma(d) + base + R::kMm2sDmasr, 0xFFFF'FFFF); break;   // W1C while busy
        case 3: write(dma(d) + base + R::kMm2sDmacr, R::kCrRunStop | (2u << R::kCrIrqThresholdShift)); break;
        case 4:
          if (attention) write(dma(d) + R::kMm2sTaildesc, uint32_t(at_[lane].ring + uint64_t(at_[lane].descs - 1) * 64));
          break;
        case 5:
          for (uint32_t off = 0; off <= hw::engine_reg::kBeatsOut; off += 4)
            read((attention ? hw::EngineRegistry::board()[1].regs : hw::EngineRegistry::board()[0].regs) +
                 uint64_t(lane) * hw::engine_reg::kLaneStride + off);
          break;
        default:
          if (attention) mem_read(at_[lane].result, at_[lane].result_bytes);
          else mem_read(mm_[lane].result, mm_[lane].result_bytes);
          break;
      }
      random_reads(pick(1, 10));
    }
  }

  void round() {
    for (int d = 0; d < 4; ++d) init(d);
    const int pokes_n = pick(0, 3);
    for (int i = 0; i < pokes_n; ++i) pokes(pick(0, 3));
    for (int d = 0; d < 4; ++d) init(d);
    for (int lane = 0; lane < 2; ++lane) refresh_descriptors(lane);
    // One call: both matmul lanes, or both attention lanes, or one of either.
    const bool attention = chance(0.5);
    const int lanes = pick(1, 3);
    for (int lane = 0; lane < 2; ++lane)
      if (lanes & (1 << lane)) attention ? attention_start(lane) : matmul_start(lane);
    random_reads(pick(5, 60));
    if (chaos_ && chance(0.5)) chaos(attention, lanes);
    wait(kSettle);
    for (int d = 0; d < 4; ++d) read_dma(d);
    read_engines();
    for (int lane = 0; lane < 2; ++lane) {
      if (!(lanes & (1 << lane))) continue;
      if (attention) mem_read(at_[lane].result, at_[lane].result_bytes);
      else mem_read(mm_[lane].result, mm_[lane].result_bytes);
    }
    if (chance(0.5)) write(hw::EngineRegistry::board()[0].regs + hw::engine_reg::kControl, hw::engine_reg::kControlClear);
  }

  std::mt19937_64 rng_;
  bool chaos_ = false;
  int vectors_ = 1;
  std::vector<host::MmioOp>* ops_ = nullptr;
  uint64_t t_ = 0;
  Matmul mm_[2];
  Attention at_[2];
  std::vector<uint32_t> rings_[2];
};

}  // namespace bitsim::testing
