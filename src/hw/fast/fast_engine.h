#pragma once
// FastEngine: one circuit (an engine behind its DMAs) in fast fidelity. The fast board walks
// each started MM2S chain, hands the stream's buffers to the engine the board's map assigns
// to that DMA (the engine registry, hw/circuits/engine_registry.h), and puts the engine's result bytes where the partner
// S2MM chain writes them. An engine's fast face lives next to its LaneDatapath (the clocked
// face) in the engine's own hw/NAME.h; both read the stream through the same walker of
// model/ (model::next_group, model::next_head), which the fuzz targets also run.
//
// What an engine appends to the batch key is the part of its stream its timing depends on
// (the group and head shapes): two batches whose keys are equal take the same cycles on the
// clocked board (docs/architecture.md, "A transfer through both fidelities").
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hw/fast/fast_kernels.h"
#include "hw/memory/paged_memory.h"

namespace bitsim::hw {

struct BoardConfig;

// A buffer of a DMA chain, in chain order.
struct FastBuffer {
  uint64_t addr = 0;
  uint32_t bytes = 0;
};

// What an engine may use of the fast board while it computes a batch.
struct FastEngineContext {
  const PagedMemory& memory;  // the DDR's contents when the batch opened
  fast::Workers& workers;     // host threads for the kernels
  bool timing_only = false;   // skip the arithmetic: results stay zero, only their size counts
  // Decoded ternary rows at a DDR address (cached by the board, dropped when the DDR bytes
  // change); nullptr for an invalid trit byte.
  std::function<const fast::DecodedRows*(uint64_t addr, int rows, int n)> decoded;
};

class FastEngine {
 public:
  virtual ~FastEngine() = default;
  // Walks the stream the engine's MM2S reads (`stream`: its buffers in chain order), appends
  // the stream's shape to `key` and the results, as the S2MM writes them, to `results`.
  // Returns false for anything the fast path does not model exactly (a malformed stream, a
  // header for another variant): the batch then runs on the clocked board.
  virtual bool compute(FastEngineContext& ctx, const std::vector<FastBuffer>& stream, std::string& key,
                       std::vector<uint8_t>& results) const = 0;
};

}  // namespace bitsim::hw
