#pragma once
// CyclePlatform: the host's Platform on the clocked SystemC board (cycle fidelity): the
// PS's TLM socket for registers, the DDR backdoor for the CPU's loads and stores.
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "host/platform.h"
#include "host/ps.h"
#include "hw/board.h"
#include "hw/parts/progress_watchdog.h"

namespace bitsim::host {

class CyclePlatform : public Platform {
 public:
  CyclePlatform(Ps& ps, hw::Board& board) : ps_(ps), board_(board), reset_state_(board.state_fingerprints(64)) {}

  // The fast fidelity's assumption, checked: at every start (a LENGTH or TAILDESC write) on
  // a board whose DMA channels are all quiet, every module's timing state equals its state
  // after reset (the DDR wall's bucket refilled). Each start that finds a module otherwise
  // appends a line naming it to `out`.
  void check_idle_board(std::vector<std::string>* out) { idle_violations_ = out; }
  uint32_t read32(uint64_t addr, uint64_t access_ps) override {
    const uint32_t v = ps_.read32(addr, access_ps);
    watchdog_.check(board_.clock().cycle());  // a poll that can never end is an error (hw/parts/progress_watchdog.h)
    // Log transfers as the host observes them complete (a DMASR read).
    seen_.resize(size_t(board_.dma_count()));
    for (int d = 0; d < board_.dma_count(); ++d)
      for (int c = 0; c < 2; ++c) {
        const auto& st = board_.dma(d).stats(hw::DmaChannel(c));
        if (st.transfers > seen_[d][c]) {
          seen_[d][c] = st.transfers;
          log_.push_back({d, c, st.last_start_cycle, st.last_completion_cycle});
        }
      }
    return v;
  }
  const std::vector<TransferRecord>& transfers() const override { return log_; }
  void write32(uint64_t addr, uint32_t v, uint64_t access_ps) override {
    if (idle_violations_) check_idle(addr);
    ps_.write32(addr, v, access_ps);
  }
  void spend(uint64_t ps) override { ps_.spend(ps); }
  uint64_t now_ps() const override { return ps_.now_ps(); }
  void mem_read(uint64_t addr, void* dst, size_t n) override { board_.memory().read(addr, dst, n); }
  void mem_write(uint64_t addr, const void* src, size_t n) override { board_.memory().write(addr, src, n); }
  uint64_t pl_bytes_read() const override {
    uint64_t b = 0;
    for (const auto& p : board_.memory().stats().ports) b += p.bytes_read;
    return b;
  }
  hw::DramActivity dram_activity() override {
    dram_ += board_.memory().close_dram_activity(ps_.now_ps() / board_.clock().period().value());
    return dram_;
  }
  bool dma_has_sg(int id) const override { return board_.dma(id).config().has_sg; }

 private:
  void check_idle(uint64_t addr) {
    const uint32_t off = uint32_t(addr & 0xFFFF) % hw::dma_reg::kS2mmOffset;
    if (off != hw::dma_reg::kMm2sLength && off != hw::dma_reg::kMm2sTaildesc) return;
    for (int d = 0; d < board_.dma_count(); ++d)
      for (int c = 0; c < 2; ++c)
        if (board_.dma(d).active(hw::DmaChannel(c))) return;
    // A write at time t takes effect at the edge after t: the state it meets is that edge's.
    const uint64_t edge = ps_.now_ps() / board_.clock().period().value() + 1;
    const auto now = board_.state_fingerprints(edge);
    for (size_t i = 0; i < now.size(); ++i)
      if (now[i].second != reset_state_[i].second)
        idle_violations_->push_back(fmt::format("start 0x{:08x} at edge {}: {} is not in its state after reset", addr,
                                                edge, now[i].first));
  }

  Ps& ps_;
  hw::Board& board_;
  hw::ProgressWatchdog watchdog_{board_};
  std::vector<std::array<uint64_t, 2>> seen_;  // transfers seen, by DMA and channel
  std::vector<std::pair<std::string, uint64_t>> reset_state_;
  std::vector<std::string>* idle_violations_ = nullptr;
  std::vector<TransferRecord> log_;
  hw::DramActivity dram_;  // the DRAM commands up to the last dram_activity()
};

}  // namespace bitsim::host
