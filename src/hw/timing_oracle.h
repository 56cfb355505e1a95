#pragma once
// TimingOracle: runs one batch of DMA transfers on the clocked Board (cycle fidelity) from
// an idle board, and reports what the fast fidelity needs to reproduce it exactly: each
// channel's completion cycle relative to the batch's first start, the final DMASR and
// S2MM_LENGTH values, the bytes the PL read from DDR, and every byte the PL wrote.
//
// A batch is what the host starts between two quiescent points: the DMA channels whose
// start registers (LENGTH or TAILDESC) it wrote, at known clock edges. Every call of the
// token loop starts on an idle board (the driver waits for all of its channels), and an
// idle board is always in the same state (empty FIFOs, a full DDR bucket, arbiters at slot
// 0: docs/hw-timing.md), so the batch's timing depends only on its configuration, the
// start offsets, the buffers' page offsets and lengths, and the stream headers' shapes:
// exactly what the fast fidelity's cache key holds.
#include <cstdint>
#include <vector>

#include "hw/board.h"

namespace bitsim::hw {

struct OracleStart {
  int dma = 0;            // 0 mm0, 1 mm1, 2 at0, 3 at1
  int channel = 0;        // 0 MM2S, 1 S2MM
  uint64_t offset = 0;    // start edge - the batch's first start edge
  // Simple mode: address and length; SG mode: first descriptor and tail descriptor.
  uint32_t addr = 0, length = 0;
  uint32_t curdesc = 0, taildesc = 0;
};

struct MemoryRegion {
  uint64_t addr = 0;
  std::vector<uint8_t> bytes;
};

struct OracleChannelResult {
  bool completed = false;       // Idle reached (false: halted on an error, or never)
  uint64_t completion = 0;      // completion edge - first start edge
  uint32_t dmasr = 0;           // DMASR when the batch ended
  uint32_t s2mm_length = 0;     // S2MM_LENGTH (simple mode): bytes received
};

struct OracleResult {
  std::vector<OracleChannelResult> channels;  // in the order of the starts
  uint64_t bytes_read = 0;      // DDR bytes read by the PL during the batch
  uint64_t cycles = 0;          // cycles simulated from the first start to the end
  std::vector<MemoryRegion> writes;  // every byte range the PL wrote, with its final contents
  uint32_t engine_regs[2][2][9] = {};  // [matmul, attention][lane][register / 4], after the batch
};

// `memory`: every region the batch reads (streams, descriptors and their buffers).
// Throws bitsim::Error if the batch does not settle within `max_cycles`.
OracleResult run_timing_oracle(const BoardConfig& config, const std::vector<MemoryRegion>& memory,
                               const std::vector<OracleStart>& starts, uint64_t max_cycles = uint64_t(1) << 28);

}  // namespace bitsim::hw
