#pragma once
// The AXI3 memory-mapped link between one master (a DMA's MM2S, S2MM or SG interface) and
// an HP port: five RegFifo channels, AR/R for reads and AW/W/B for writes.
//
// A master issues a request of any length (bytes, a multiple of 8, 8-byte aligned); the
// HP port splits it into AXI3 bursts (at most 16 beats, never crossing a 4 KB boundary),
// issues them to the DDR within its outstanding limit, and returns the read beats in order
// on R (last set on the final beat of the request) or one B response per write request.
#include <cstdint>
#include <string>

#include "hw/parts/reg_fifo.h"

namespace bitsim::hw {

// AXI: a burst never crosses a 4 KB boundary (the DMA's DataMover and the HP port split their
// bursts there). Of a buffer's address, a transfer's timing on the wall depends only on its
// offset within that boundary: the fast fidelity's batch key holds this offset and, from the
// memory model, whatever else of the address that model's timing depends on (hw/memory/memory.h).
constexpr uint64_t kAxiBoundaryBytes = 4096;
constexpr uint64_t axi_boundary_offset(uint64_t addr) { return addr % kAxiBoundaryBytes; }

struct MemRequest {
  uint64_t addr = 0;
  uint32_t bytes = 0;  // multiple of 8
};

struct ReadBeat {
  uint64_t data = 0;
  bool last = false;   // final beat of the MemRequest
  bool error = false;  // DECERR/SLVERR: address outside DDR
};

struct WriteBeat {
  uint64_t data = 0;
  uint8_t strobe = 0xFF;  // byte enables
  bool last = false;      // final beat of the MemRequest
};

struct WriteResponse {
  bool error = false;     // DECERR: address outside DDR
};

class AxiMmLink {
 public:
  AxiMmLink(const std::string& name, int request_depth = 2, int data_depth = 2)
      : ar((name + "_ar").c_str(), request_depth),
        r((name + "_r").c_str(), data_depth),
        aw((name + "_aw").c_str(), request_depth),
        w((name + "_w").c_str(), data_depth),
        b((name + "_b").c_str(), request_depth),
        name_(name) {}
  RegFifo<MemRequest> ar;
  RegFifo<ReadBeat> r;
  RegFifo<MemRequest> aw;
  RegFifo<WriteBeat> w;
  RegFifo<WriteResponse> b;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

}  // namespace bitsim::hw
