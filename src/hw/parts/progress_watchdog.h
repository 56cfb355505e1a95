#pragma once
// ProgressWatchdog: "no data moved for N PL cycles while a DMA channel is busy" becomes a
// bitsim::Error naming the stuck channels and the config keys that shape them, instead of a
// simulation that runs forever. Both fidelities run it on the clocked board: the cycle
// fidelity at every register read of the PS (every status poll), the fast fidelity in the
// timing oracle's wait for a batch to settle (every batch's timing comes from the clocked
// board, so a batch that cannot finish stops there). It only observes: no cycle count moves.
//
// Progress is any byte the DDR returned or stored and any byte a DMA channel moved. The
// limit, 2^24 cycles (134 ms at 125 MHz), is far above the longest quiet stretch of a legal
// transfer (a register access or poll gap of the CPU at the largest accepted value).
#include <cstdint>

#include "hw/board.h"

namespace bitsim::hw {

constexpr uint64_t kWatchdogStallCycles = uint64_t(1) << 24;

class ProgressWatchdog {
 public:
  explicit ProgressWatchdog(const Board& board, uint64_t stall_cycles = kWatchdogStallCycles)
      : board_(board), stall_(stall_cycles) {}
  // At edge `cycle`: throws when a channel has been busy without progress for stall_cycles.
  void check(uint64_t cycle);

 private:
  uint64_t progress() const;
  const Board& board_;
  uint64_t stall_;
  uint64_t last_progress_ = ~uint64_t(0), last_change_ = 0;
};

}  // namespace bitsim::hw
