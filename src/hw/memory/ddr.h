#pragma once
// Ddr: the board's 512 MB DDR3 as the PL sees it through the HP ports (CIRCUITS.md 1;
// docs/hw-timing.md "DDR"), a hw::Memory for ddr.model = wall and latency-bandwidth. Each
// HP port reaches the DDR through a DdrPortLink (AR/R/AW/W/B registered FIFOs): read bursts
// return their first beat `read_latency` cycles after acceptance, write responses leave
// `write_latency` cycles after a burst's last beat, and every beat pays into a token bucket:
// with the wall, one bucket shared by every port and direction (the DDR bandwidth wall);
// with latency-bandwidth, one bucket per port at ddr.port_gb_s. Addresses outside the DDR
// answer DECERR. Neither model carries state across an idle gap.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

#include "hw/parts/fixed_ring.h"
#include "hw/memory/memory.h"
#include "hw/memory/memory_registry.h"

namespace bitsim::hw {

class Ddr : public Memory {
 public:
  SC_HAS_PROCESS(Ddr);
  Ddr(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config);

  uint64_t read_latency_cycles() const { return read_latency_; }
  uint64_t write_latency_cycles() const { return write_latency_; }
  // Bursts held, arbiter slot, and the buckets as they would be refilled by `cycle`.
  uint64_t state_fingerprint(uint64_t cycle) const override;

  bool has_edge() const override { return true; }
  bool edge(uint64_t now) override;

 private:
  struct PendingRead {
    uint64_t addr = 0;
    uint64_t due = 0;  // edge at which the next beat may leave
    uint32_t beats = 0, done = 0, tag = 0;
    bool error = false;
  };
  struct PendingWrite {
    uint64_t addr = 0;
    uint32_t beats = 0, done = 0, tag = 0;
    bool error = false;
  };
  struct PendingResponse {
    uint64_t due = 0;
    uint32_t tag = 0;
    bool error = false;
  };
  struct PortState {
    DdrPortLink* link = nullptr;  // the base's links_[i]
    detail::FixedRing<PendingRead> reads;
    detail::FixedRing<PendingWrite> writes;
    detail::FixedRing<PendingResponse> responses;
  };

  void tick();
  bool idle() const;
  bool outside(uint64_t addr, uint64_t n) const { return addr >= config_.size_bytes || n > config_.size_bytes - addr; }
  void accept(PortState& p, int index, uint64_t now);
  // One beat of a slot (tick), inlined into it (defined in ddr.cpp only).
  inline bool move_read(PortState& p, DdrPortStats& ps, size_t pi, uint64_t now);
  inline bool move_write(PortState& p, DdrPortStats& ps, size_t pi, uint64_t now);
  inline void refill(uint64_t now);  // the buckets, at each tick (inlined into it)

  uint64_t read_latency_ = 0, write_latency_ = 0;  // cycles
  // The buckets, in units of 1e-12 byte: each edge adds the bandwidth x period_ps, a beat
  // costs 8e12. One (the wall) or one per port (latency-bandwidth: port i pays into bucket i).
  uint64_t gain_ = 0, cost_ = 0, cap_ = 0;
  std::vector<uint64_t> buckets_;
  bool per_port_ = false;
  uint64_t last_refill_cycle_ = 0;
  bool refilled_once_ = false;
  int rr_start_ = 0;  // slot visited first at the next edge
  size_t in_flight_ = 0;  // bursts held over all ports (reads, writes, responses to send)
  std::vector<PortState> ports_;
};

// The registrations of the two models this class times (hw/memory/memory_registry.h):
// wall (one bandwidth bucket shared by the ports, fitted to the board) and latency-bandwidth
// (a bucket per port). Neither carries state across an idle gap.
MemoryKind wall_memory_kind();
MemoryKind latency_bandwidth_memory_kind();

}  // namespace bitsim::hw
