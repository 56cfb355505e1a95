#pragma once
// Fingerprint: a hash of a clocked module's timing state (queues, FIFO occupancy, arbiter
// positions, the DDR wall's bucket), not of its statistics, registers or data. The fast
// fidelity reuses a batch's timing because every call starts on an idle board in the state
// it has after reset (docs/hw-timing.md, "idle board"); the idle-board test compares the
// board's fingerprint at every batch start with the one after reset, so a module that gains
// memory across batches fails a named test instead of quietly breaking the reuse.
#include <cstdint>

namespace bitsim::hw {

class Fingerprint {
 public:
  Fingerprint& add(uint64_t v) {
    for (int i = 0; i < 8; ++i) h_ = (h_ ^ ((v >> (8 * i)) & 0xFF)) * 0x100000001b3ull;
    return *this;
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace bitsim::hw
