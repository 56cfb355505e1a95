#pragma once
// VcdProbe: a VCD trace of the clocked board's signals over a window of PL cycles, written
// with SystemC's own tracing (sc_trace into an sc_trace_file). For each of the eight
// AXI-Stream channels (engine inputs and outputs, both engines, both lanes): valid, ready
// and the TLAST of the beat on offer; for each DMA channel: whether a transfer is active;
// for each engine lane: busy. The traced values are shadows that follow the modules only
// inside the window [start, end) and hold still outside it, so the file stays small however
// long the run is.
#include <cstdint>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

#include "hw/board.h"
#include "base/file_io.h"

namespace bitsim::hw {

struct VcdConfig {
  std::string path;          // the .vcd file, written through a temporary file (base/file_io.h)
  uint64_t start = 0;        // first traced cycle
  uint64_t end = 20000;      // first cycle after the window
};

class VcdProbe : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(VcdProbe);
  VcdProbe(sc_core::sc_module_name name, Board& board, const VcdConfig& config);
  ~VcdProbe() override;
  // The run finished: the trace file is complete and moved into place.
  void close();

 private:
  struct Stream {
    const AxiStream* fifo;
    bool valid = false, ready = false, last = false;
  };
  void sample();
  Board& board_;
  VcdConfig config_;
  std::unique_ptr<io::OutputFile> out_;
  sc_core::sc_trace_file* file_ = nullptr;
  std::vector<Stream> streams_;
  std::vector<std::array<bool, 2>> dma_active_;        // by DMA, [MM2S, S2MM]
  std::vector<std::array<bool, kLanes>> engine_busy_;  // by engine, by lane
  bool clk_ = false;
  uint64_t cycle_ = 0;
};

}  // namespace bitsim::hw
