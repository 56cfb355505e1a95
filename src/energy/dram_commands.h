#pragma once
// The DRAM commands of ddr.model = ddr3 as the energy model and other tools read them
// (docs/energy.md, "DRAM commands"): the bank state over time (BankStateTracker: the device
// cycles with a bank open or all banks precharged, which the background energy needs) and
// DRAMPower's command-trace line. Both take what hw::Ddr3Timing's command listener gives.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hw/memory/ddr3_timing.h"

namespace bitsim::energy {

// Follows the commands of one device (one rank: the devices of a wider bus share them) and
// splits an interval of device cycles into cycles with any bank open and cycles with all
// banks precharged, as DRAMPower does: a bank is open from its ACT to its PRE (or the PREA
// that closes it); a REF counts as open for its tRFC (the refresh energy is charged above
// IDD3N). Commands may come in any order across banks (the engine's decision order), in
// cycle order per bank. A command before the current interval's start counts from the start.
class BankStateTracker {
 public:
  // `banks` banks all precharged at device cycle `start`; `trfc` the refresh's cycles.
  BankStateTracker(uint32_t banks, uint64_t trfc, uint64_t start = 0);
  void command(uint64_t cycle, hw::Ddr3Command command, uint32_t bank);

  struct Split {
    uint64_t open = 0, precharged = 0;  // open + precharged = end - start
  };
  // The split of [start, end); then a new interval starts at `end`, the open banks and a
  // refresh still running carried into it. `end` must be at or after the start and after
  // every command given (close an interval once the engine has caught up to `end`:
  // hw::Ddr3Timing::catch_up, so that its refreshes are in it); otherwise bitsim::Error.
  Split close(uint64_t end);
  uint64_t start() const { return start_; }

 private:
  uint64_t trfc_, start_, last_command_ = 0;
  std::vector<int64_t> open_since_;                   // per bank, -1: precharged
  std::vector<std::pair<uint64_t, uint64_t>> spans_;  // [from, to) with a bank open, this interval
};

// One line of DRAMPower's command trace: "<cycle>,<command>,<bank>" (for example
// "500,ACT,2"), the cycle in device clocks. DRAMPower reads the lines in cycle order: a
// writer sorts the listener's commands by cycle (stable) before writing them, holding back
// those within hw::Ddr3Timing::horizon() cycles of the engine's latest decision (docs/energy.md).
std::string drampower_line(uint64_t cycle, hw::Ddr3Command command, uint32_t bank);

}  // namespace bitsim::energy
