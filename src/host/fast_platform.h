#pragma once
// FastPlatform: the host's Platform on the FastBoard (fast fidelity). Simulated time is a
// plain counter in picoseconds; register accesses reach the FastBoard at the same times as
// the PS's TLM transactions reach the clocked board.
#include "host/platform.h"
#include "hw/fast/fast_board.h"

namespace bitsim::host {

class FastPlatform : public Platform {
 public:
  explicit FastPlatform(hw::FastBoard& board) : board_(board) {}
  uint32_t read32(uint64_t addr, uint64_t access_ps) override {
    const uint32_t v = board_.read32(addr, now_);
    for (const auto& t : board_.take_completed()) log_.push_back({t.dma, t.channel, t.start, t.completion});
    now_ += access_ps;
    return v;
  }
  void write32(uint64_t addr, uint32_t v, uint64_t access_ps) override {
    board_.write32(addr, v, now_);
    now_ += access_ps;
  }
  void spend(uint64_t ps) override { now_ += ps; }
  uint64_t now_ps() const override { return now_; }
  void mem_read(uint64_t addr, void* dst, size_t n) override { board_.cpu_read(addr, dst, n, now_); }
  void mem_write(uint64_t addr, const void* src, size_t n) override { board_.cpu_write(addr, src, n, now_); }
  uint64_t pl_bytes_read() const override { return board_.bytes_read(); }
  hw::DramActivity dram_activity() override { return board_.dram_activity(now_); }
  bool dma_has_sg(int id) const override { return board_.dma_has_sg(id); }
  const std::vector<TransferRecord>& transfers() const override { return log_; }
  uint64_t quiet_until_ps() const override { return board_.quiet_until_ps(); }
  void weights_written(const std::vector<model::PackedRowsSpan>& spans, model::DerivedStore* derived,
                       const std::string& name) override {
    board_.adopt_weights(spans, derived, name);
  }

 private:
  hw::FastBoard& board_;
  uint64_t now_ = 0;
  std::vector<TransferRecord> log_;
};

}  // namespace bitsim::host
