#pragma once
// CyclePlatform: the host's Platform on the clocked SystemC board (cycle fidelity): the
// PS's TLM socket for registers, the DDR backdoor for the CPU's loads and stores.
#include "host/platform.h"
#include "host/ps.h"
#include "hw/board.h"

namespace bitsim::host {

class CyclePlatform : public Platform {
 public:
  CyclePlatform(Ps& ps, hw::Board& board) : ps_(ps), board_(board) {}
  uint32_t read32(uint64_t addr, uint64_t access_ps) override {
    const uint32_t v = ps_.read32(addr, access_ps);
    // Log transfers as the host observes them complete (a DMASR read).
    for (int d = 0; d < 4; ++d)
      for (int c = 0; c < 2; ++c) {
        const auto& st = board_.dma(hw::DmaId(d)).stats(hw::DmaChannel(c));
        if (st.transfers > seen_[d][c]) {
          seen_[d][c] = st.transfers;
          log_.push_back({d, c, st.last_start_cycle, st.last_completion_cycle});
        }
      }
    return v;
  }
  const std::vector<TransferRecord>& transfers() const override { return log_; }
  void write32(uint64_t addr, uint32_t v, uint64_t access_ps) override { ps_.write32(addr, v, access_ps); }
  void spend(uint64_t ps) override { ps_.spend(ps); }
  uint64_t now_ps() const override { return ps_.now_ps(); }
  void mem_read(uint64_t addr, void* dst, size_t n) override { board_.ddr().read(addr, dst, n); }
  void mem_write(uint64_t addr, const void* src, size_t n) override { board_.ddr().write(addr, src, n); }
  uint64_t pl_bytes_read() const override {
    uint64_t b = 0;
    for (const auto& p : board_.ddr().stats().ports) b += p.bytes_read;
    return b;
  }
  bool dma_has_sg(int id) const override { return board_.dma(hw::DmaId(id)).config().has_sg; }

 private:
  Ps& ps_;
  hw::Board& board_;
  uint64_t seen_[4][2] = {};
  std::vector<TransferRecord> log_;
};

}  // namespace bitsim::host
