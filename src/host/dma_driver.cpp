#include "host/dma_driver.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "hw/circuits/engine_registry.h"

#include "hw/interconnect/axi_dma.h"
#include "hw/board.h"
#include "hw/circuits/engine_regs.h"
#include "base/error.h"
#include "base/stop_signal.h"
#include "model/attention_stream.h"
#include "model/packed_image.h"

namespace bitsim::host {

namespace R = hw::dma_reg;

namespace {
constexpr uint32_t kIocAndErrors = R::kSrIocIrq | R::kSrErrIrq;
// The driver drives the shipped board's engines (hw::EngineRegistry::board()): DMA d feeds
// lane d % 2 of engine d / 2.
const char* dma_name(int d) { return hw::EngineRegistry::board().dma_name(d).c_str(); }
int engine_index(const char* name) { return hw::EngineRegistry::board().find(name); }
std::string sr_errors(uint32_t sr) {
  std::string s;
  auto add = [&](uint32_t bit, const char* name) {
    if (sr & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  };
  add(R::kSrDmaIntErr, "DMAIntErr");
  add(R::kSrDmaSlvErr, "DMASlvErr");
  add(R::kSrDmaDecErr, "DMADecErr");
  add(R::kSrSgIntErr, "SGIntErr");
  add(R::kSrSgSlvErr, "SGSlvErr");
  add(R::kSrSgDecErr, "SGDecErr");
  return s;
}
}  // namespace

DmaDriver::DmaDriver(Platform& platform, const MemoryMap& map, const DriverConfig& config)
    : ps_(platform), map_(map), config_(config) {
  config_.validate("dma driver");
  access_ps_ = ps_of(config_.reg_access_ns);
  mm2s_ring_ = map_.heads_per_lane() * std::max(3, map_.descriptors_per_head());
  s2mm_ring_ = map_.descriptor_capacity() - mm2s_ring_;
  if (s2mm_ring_ < 1) throw Error("dma driver: descriptor area too small");
  matmul_ = engine_index("matmul");
  attention_ = engine_index("attention");
}

uint64_t DmaDriver::ps_of(double ns) const { return uint64_t(std::llround(ns * 1000.0)); }

uint32_t DmaDriver::rd(int d, uint32_t off) {
  if (!polling_) {
    stats_.fixed_ps += access_ps_;
    ++call_accesses_;
  }
  return ps_.read32(hw::EngineRegistry::board().dma_base(d) + off, access_ps_);
}
void DmaDriver::wr(int d, uint32_t off, uint32_t v) {
  stats_.fixed_ps += access_ps_;
  ++call_accesses_;
  ps_.write32(hw::EngineRegistry::board().dma_base(d) + off, v, access_ps_);
}

void DmaDriver::flush(uint64_t bytes) {
  stats_.flushed_bytes += bytes;
  stats_.fixed_ps += ps_of(config_.flush_fixed_ns);
  ps_.spend(ps_of(config_.flush_fixed_ns + double(bytes) * config_.flush_ns_per_byte));
}

void DmaDriver::invalidate(uint64_t bytes) {
  stats_.invalidated_bytes += bytes;
  stats_.fixed_ps += ps_of(config_.invalidate_fixed_ns);
  ps_.spend(ps_of(config_.invalidate_fixed_ns + double(bytes) * config_.invalidate_ns_per_byte));
}

void DmaDriver::charge_per_transfer(uint64_t transfers) {
  const double owed = config_.accesses_per_transfer * double(transfers);
  const double extra = config_.accesses_per_transfer > 0 ? std::max(0.0, owed - double(call_accesses_)) : 0.0;
  const uint64_t ps = uint64_t(std::llround(extra * double(access_ps_))) +
                      ps_of(config_.transfer_call_ns * double(transfers));
  call_accesses_ = 0;
  if (ps == 0) return;
  stats_.fixed_ps += ps;
  ps_.spend(ps);
}

void DmaDriver::init() {
  for (int d = 0; d < hw::EngineRegistry::board().dma_count(); ++d) {
    const bool sg = ps_.dma_has_sg(d);
    for (uint32_t base : {0u, R::kS2mmOffset}) {
      wr(d, base + R::kMm2sDmacr, R::kCrReset);
      if (sg) {
        const int lane = int(d) % 2;
        const bool s2mm = base != 0;
        const uint64_t first = map_.descriptors(lane) + (s2mm ? uint64_t(mm2s_ring_) * 64 : 0);
        wr(d, base + R::kMm2sCurdesc, uint32_t(first));
      }
      wr(d, base + R::kMm2sDmacr, R::kCrRunStop);
    }
  }
}

void DmaDriver::wait_idle(int d, uint32_t sr_offset, const char* what) {
  // Polls one channel's DMASR until Idle. While an S2MM channel is busy, each poll also
  // reads the same DMA's MM2S DMASR: an error on the read side leaves the result stream
  // unfinished, and only that register says so (a driver that polled S2MM alone would spin
  // forever).
  // A poll always takes simulated time: with free register accesses and no gap the loop
  // would spin at one instant and the board would never reach Idle (kMinPollStepPs).
  const uint64_t gap = std::max(ps_of(config_.poll_gap_ns), access_ps_ == 0 ? kMinPollStepPs : uint64_t(0));
  const bool s2mm = sr_offset == R::kS2mmDmasr;
  auto check = [&](uint32_t sr, const char* which) {
    if (sr & R::kSrErrors)
      throw Error(fmt::format("DMA {} {}: DMASR 0x{:08x} reports {}", dma_name(d), which, sr, sr_errors(sr)));
    if (sr & R::kSrHalted)
      throw Error(fmt::format("DMA {} {}: channel halted (DMASR 0x{:08x})", dma_name(d), which, sr));
  };
  stats_.fixed_ps += access_ps_;  // the poll that sees Idle; the others wait for the transfer
  ++call_accesses_;
  polling_ = true;
  struct Done {
    bool& p;
    ~Done() { p = false; }
  } done{polling_};
  for (;;) {
    check_stop();  // SIGINT / SIGTERM: every wait of both fidelities passes here
    const uint32_t sr = rd(d, sr_offset);
    // Nothing the reads show changes before `quiet` (0: the platform does not know).
    const uint64_t quiet = ps_.quiet_until_ps();
    ++stats_.polls;
    check(sr, what);
    if (sr & R::kSrIdle) {
      if (sr & kIocAndErrors) wr(d, sr_offset, sr & kIocAndErrors);  // acknowledge
      return;
    }
    if (s2mm) check(rd(d, R::kMm2sDmasr), "MM2S");
    ps_.spend(gap);
    // Where the platform knows that no register changes before `quiet` (the fast board: its
    // next event, taken just after this poll's DMASR read), the next polls read what this
    // one read: they are counted and their time spent at once, exactly as making them would
    // (iteration j reads at now + j * period and, for S2MM, MM2S one access later; those
    // wholly before `quiet` are skipped; now > this poll's reads, so they too were before it).
    const uint64_t now = ps_.now_ps();
    const uint64_t last_read = s2mm ? access_ps_ : 0;  // an iteration's last read, after its first
    if (quiet > now + last_read) {
      const uint64_t period = (s2mm ? 2 : 1) * access_ps_ + gap;
      const uint64_t k = (quiet - 1 - last_read - now) / period + 1;
      stats_.polls += k;
      ps_.spend(k * period);
    }
  }
}

void DmaDriver::engine_failure(int engine, int lane, const std::string& what) {
  const hw::EngineKind& kind = hw::EngineRegistry::board()[engine];
  const uint64_t base = kind.regs + uint64_t(lane) * hw::engine_reg::kLaneStride;
  const uint32_t status = ps_.read32(base + hw::engine_reg::kStatus, access_ps_);
  const uint32_t code = ps_.read32(base + hw::engine_reg::kErrorCode, access_ps_);
  const uint32_t unit = ps_.read32(base + hw::engine_reg::kErrorUnit, access_ps_);
  const uint32_t row = ps_.read32(base + hw::engine_reg::kErrorRow, access_ps_);
  std::string detail;
  if (status & hw::engine_reg::kStatusError) {
    detail = fmt::format("{} in {} {}", kind.error_name(code), kind.unit, unit);
    if (row != hw::engine_reg::kNone) detail += fmt::format(", row {}", row);
  } else {
    detail = "no engine error latched";
  }
  throw Error(fmt::format("{} engine lane {}: {} ({})", kind.name, lane, what, detail));
}

DmaDriver::Call DmaDriver::open_call(int e, uint64_t& calls) {
  ++calls;
  call_accesses_ = 0;
  ps_.spend(ps_of(config_.call_overhead_ns));
  stats_.fixed_ps += ps_of(config_.call_overhead_ns);
  return Call{e, {hw::EngineRegistry::dma_of(e, 0), hw::EngineRegistry::dma_of(e, 1)}, stats_.transfers};
}

void DmaDriver::matmul(const MatmulCall& call, int /*n*/) {
  const Call c = open_call(matmul_, stats_.matmul_calls);
  const int mm = c.engine;
  const int* dmas = c.dmas;
  const uint64_t transfers_before = c.transfers_before;
  // A lane without rows (host.lanes = 1) is not programmed.
  for (int lane = 0; lane < kLanes; ++lane)
    if (call.lane[lane].rows) flush(call.lane[lane].rows_addr - call.lane[lane].addr);
  for (int lane = 0; lane < kLanes; ++lane) {
    const LaneStream& s = call.lane[lane];
    if (s.rows == 0) continue;
    wr(dmas[lane], R::kS2mmDa, uint32_t(map_.matmul_result(lane)));
    wr(dmas[lane], R::kS2mmLength, uint32_t(s.result_bytes));
    wr(dmas[lane], R::kMm2sSa, uint32_t(s.addr));
    wr(dmas[lane], R::kMm2sLength, uint32_t(s.bytes));
    stats_.transfers += 2;
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    if (call.lane[lane].rows == 0) continue;
    wait_idle(dmas[lane], R::kS2mmDmasr, "S2MM");
    const uint32_t got = rd(dmas[lane], R::kS2mmLength);
    if (got != call.lane[lane].result_bytes)
      engine_failure(mm, lane, fmt::format("S2MM received {} of {} result bytes", got, call.lane[lane].result_bytes));
    wait_idle(dmas[lane], R::kMm2sDmasr, "MM2S");
  }
  for (int lane = 0; lane < kLanes; ++lane)
    if (call.lane[lane].rows) invalidate(call.lane[lane].result_bytes);
  charge_per_transfer(stats_.transfers - transfers_before);
}

uint64_t DmaDriver::write_descriptor(int lane, bool s2mm, uint64_t buffer, uint32_t bytes, bool sof, bool eof) {
  const uint64_t ring = map_.descriptors(lane) + (s2mm ? uint64_t(mm2s_ring_) * 64 : 0);
  const int size = s2mm ? s2mm_ring_ : mm2s_ring_;
  int& next = s2mm ? s2mm_next_[lane] : mm2s_next_[lane];
  const uint64_t addr = ring + uint64_t(next) * 64;
  next = (next + 1) % size;
  const uint64_t nxt = ring + uint64_t(next) * 64;
  uint32_t d[16] = {};
  d[R::kDescNxtdesc / 4] = uint32_t(nxt);
  d[R::kDescBufferAddress / 4] = uint32_t(buffer);
  d[R::kDescControl / 4] = (bytes & R::kCtrlLengthMask) | (sof ? R::kCtrlSof : 0) | (eof ? R::kCtrlEof : 0);
  d[R::kDescStatus / 4] = 0;
  ps_.mem_write(addr, d, sizeof d);
  ++stats_.descriptors;
  return addr;
}

void DmaDriver::attention(const std::vector<HeadWork> heads[kLanes], uint64_t cpu_written_bytes) {
  const Call c = open_call(attention_, stats_.attention_calls);
  const int at = c.engine;
  const int* dmas = c.dmas;
  const uint64_t transfers_before = c.transfers_before;
  uint64_t tail[kLanes] = {}, s2mm_desc[kLanes] = {};
  uint64_t desc_bytes = 0, result_bytes[kLanes] = {};
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto& hs = heads[lane];
    if (hs.empty()) continue;
    for (size_t i = 0; i < hs.size(); ++i) {
      const bool last = i + 1 == hs.size();
      result_bytes[lane] += hs[i].head_result_bytes();
      write_descriptor(lane, false, hs[i].header_q_addr, hs[i].header_q_bytes(), i == 0, false);
      if (!hs[i].segments.empty()) {
        for (size_t s = 0; s < hs[i].segments.size(); ++s)
          tail[lane] = write_descriptor(lane, false, hs[i].segments[s].addr, hs[i].segments[s].bytes, false,
                                        last && s + 1 == hs[i].segments.size());
        desc_bytes += (1 + hs[i].segments.size()) * 64;
        continue;
      }
      if (hs[i].interleaved) {
        const uint32_t bytes = hs[i].stream_bytes ? hs[i].stream_bytes : 2 * hs[i].kv_bytes;
        tail[lane] = write_descriptor(lane, false, hs[i].k_addr, bytes, false, last);
        desc_bytes += 2 * 64;
        continue;
      }
      write_descriptor(lane, false, hs[i].k_addr, hs[i].kv_bytes, false, false);
      tail[lane] = write_descriptor(lane, false, hs[i].v_addr, hs[i].kv_bytes, false, last);
      desc_bytes += 3 * 64;
    }
    s2mm_desc[lane] = write_descriptor(lane, true, map_.attention_result(lane), uint32_t(result_bytes[lane]), true, true);
    desc_bytes += 64;
  }
  flush(cpu_written_bytes);
  flush(desc_bytes);
  for (int lane = 0; lane < kLanes; ++lane) {
    if (heads[lane].empty()) continue;
    wr(dmas[lane], R::kS2mmTaildesc, uint32_t(s2mm_desc[lane]));
    wr(dmas[lane], R::kMm2sTaildesc, uint32_t(tail[lane]));
    stats_.transfers += 2;
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    if (heads[lane].empty()) continue;
    wait_idle(dmas[lane], R::kS2mmDmasr, "S2MM");
    invalidate(64);
    uint32_t status = 0;
    ps_.mem_read(s2mm_desc[lane] + R::kDescStatus, &status, 4);
    const uint32_t want = uint32_t(result_bytes[lane]);
    if (!(status & R::kStsCmplt) || (status & R::kStsLengthMask) != want)
      engine_failure(at, lane, fmt::format("S2MM descriptor status 0x{:08x}: {} of {} result bytes",
                                              status, status & R::kStsLengthMask, want));
    wait_idle(dmas[lane], R::kMm2sDmasr, "MM2S");
  }
  for (int lane = 0; lane < kLanes; ++lane)
    if (!heads[lane].empty()) invalidate(result_bytes[lane]);
  charge_per_transfer(stats_.transfers - transfers_before);
}

}  // namespace bitsim::host
