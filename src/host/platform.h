#pragma once
// Platform: what the host program (driver and token loop) sees of the machine it runs on:
// AXI-Lite register accesses that cost CPU time, CPU time passing, the CPU's own loads and
// stores to DDR, and the PL's DDR read counter. The cycle fidelity implements it with the
// SystemC PS and Board (CyclePlatform); the fast fidelity with FastBoard. The host code is
// the same for both, so both fidelities run the same driver accesses at the same times.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hw/memory/dram_ledger.h"
#include "model/derived_store.h"
#include "model/packed_image.h"

namespace bitsim::host {

// One completed DMA transfer (a simple transfer or an SG chain), in PL clock edges.
struct TransferRecord {
  int dma = 0, channel = 0;  // 0 mm0 .. 3 at1; 0 MM2S, 1 S2MM
  uint64_t start = 0, completion = 0;
  bool operator==(const TransferRecord&) const = default;
};

class Platform {
 public:
  virtual ~Platform() = default;
  virtual uint32_t read32(uint64_t addr, uint64_t access_ps) = 0;
  virtual void write32(uint64_t addr, uint32_t value, uint64_t access_ps) = 0;
  virtual void spend(uint64_t ps) = 0;
  virtual uint64_t now_ps() const = 0;
  virtual void mem_read(uint64_t addr, void* dst, size_t n) = 0;
  virtual void mem_write(uint64_t addr, const void* src, size_t n) = 0;
  virtual uint64_t pl_bytes_read() const = 0;
  // The DRAM commands from the run's start to now, on a quiet board (ddr.model = ddr3; empty
  // for models without commands): hw/memory/dram_ledger.h. Both fidelities give the same.
  virtual hw::DramActivity dram_activity() = 0;
  // Whether DMA `id` (0 mm0, 1 mm1, 2 at0, 3 at1) was built with the SG engine.
  virtual bool dma_has_sg(int id) const = 0;
  // Every completed transfer so far, in the order the host saw them complete.
  virtual const std::vector<TransferRecord>& transfers() const = 0;
  // A time before which register reads return what they return now, where the platform
  // knows one (the fast board: its next event); 0 = not known (the clocked board: poll).
  virtual uint64_t quiet_until_ps() const { return 0; }
  // Weight rows just written (hw::FastBoard::adopt_weights): the fast board decodes them into
  // its kernels' form now, or maps the form an earlier run kept in `derived` under `name`;
  // the clocked board reads DDR as it is and does nothing.
  virtual void weights_written(const std::vector<model::PackedRowsSpan>& spans, model::DerivedStore* derived,
                               const std::string& name) {
    (void)spans, (void)derived, (void)name;
  }
};

}  // namespace bitsim::host
