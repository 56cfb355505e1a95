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
  uint32_t read32(uint64_t addr, uint64_t access_ps) override { return ps_.read32(addr, access_ps); }
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
};

}  // namespace bitsim::host
