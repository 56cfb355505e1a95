#pragma once
// HpPort: one of the Zynq's AXI3 64-bit high-performance ports (HP0 / HP2) between PL
// masters and the DDR (CIRCUITS.md 1; docs/hw-timing.md "HP port"). Any number of masters
// attach through an AxiMmLink each. The port splits each master request into bursts of at
// most `max_burst_beats` beats that never cross a 4 KB boundary, issues at most one read
// and one write burst per edge to its DdrPortLink (masters in round-robin order, within
// the outstanding limits), returns read beats in order to the owning master (`last` on the
// request's final beat) and one B response per master write request.
#include <cstdint>
#include <string>
#include <vector>

#include <systemc>

#include "hw/interconnect/axi_mm.h"
#include "hw/parts/clock.h"
#include "base/config_field.h"
#include "hw/parts/fixed_ring.h"
#include "hw/memory/memory.h"

namespace bitsim::hw {

// The shipped default is the board's HP port as bitsim runs it; visit() gives each field's
// key, range, unit, evidence label and meaning (base/config_field.h).
struct HpPortConfig {
  int max_burst_beats = 16;        // longest burst issued to the DDR, beats of 8 bytes (AXI3 / UG585: 16)
  int max_outstanding_reads = 8;   // read bursts in flight (issued, last beat not yet returned)
  int max_outstanding_writes = 8;  // write bursts in flight (issued, response not yet returned)

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.max_burst_beats, FieldInfo{"hp.max_burst_beats", 1, 16, "beats", Evidence::kBoard,
                                   "longest AXI3 burst on an HP port (UG585: 16 beats of 8 bytes)"});
    v(c.max_outstanding_reads, FieldInfo{"hp.max_outstanding_reads", 1, 64, "bursts", Evidence::kSimulated,
                                         "read bursts in flight per HP port"});
    v(c.max_outstanding_writes, FieldInfo{"hp.max_outstanding_writes", 1, 64, "bursts", Evidence::kSimulated,
                                          "write bursts in flight per HP port"});
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const { check_fields(*this, who); }
};

struct HpPortStats {
  uint64_t read_requests = 0;       // master read requests accepted
  uint64_t write_requests = 0;      // master write requests accepted
  uint64_t read_bursts = 0;         // read bursts issued to the DDR
  uint64_t write_bursts = 0;        // write bursts issued to the DDR
  uint64_t read_beats = 0;          // read beats returned to masters
  uint64_t write_beats = 0;         // write beats forwarded to the DDR
  uint64_t read_stall_cycles = 0;   // edges a read burst was ready to issue but the outstanding limit was reached
  uint64_t write_stall_cycles = 0;  // same for write bursts
  uint64_t read_errors = 0;         // read beats returned with DECERR
  uint64_t write_errors = 0;        // write requests answered with DECERR
  std::vector<uint64_t> read_burst_beats;   // histogram: [n] = read bursts of n beats (size max_burst_beats + 1)
  std::vector<uint64_t> write_burst_beats;  // histogram: [n] = write bursts of n beats
};

class HpPort : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(HpPort);
  // `ddr` is the DDR side of this port (Memory::port(i)); the DdrPortLink must outlive the port.
  HpPort(sc_core::sc_module_name name, Clock& clock, const HpPortConfig& config, DdrPortLink& ddr);

  // Attach a master before the simulation starts (throws bitsim::Error afterwards). The
  // link must outlive the port. Masters are served in round-robin order of attachment.
  void attach(AxiMmLink& master);

  const HpPortConfig& config() const { return config_; }
  int masters() const { return int(masters_.size()); }
  const HpPortStats& stats() const { return stats_; }
  // Timing state (hw/parts/fingerprint.h): bursts in flight, requests being split, arbiters.
  uint64_t state_fingerprint() const;

  // One rising edge of the clocked method, awake (hw/edge_loop.h drives the board with it,
  // without SystemC's scheduler): true when the method then sleeps, until a master's
  // request reaches its empty AR or AW FIFO (request_waiting).
  bool edge(uint64_t now);
  bool request_waiting() const { return (ar_valid_ | aw_valid_) != 0; }

 private:
  struct Master {
    AxiMmLink* link = nullptr;
    // The read request being split: next burst address and beats still to issue.
    uint64_t rd_addr = 0;
    uint32_t rd_left = 0;
    // The write request being split.
    uint64_t wr_addr = 0;
    uint32_t wr_left = 0;
    bool wr_error = false;  // DECERR seen on a burst of the request whose B is pending
  };
  struct ReadInFlight {
    uint32_t master = 0, beats_left = 0;
    bool last_of_request = false;
  };
  struct WriteInFlight {
    uint32_t master = 0, beats_left = 0;
    bool last_of_request = false;
  };

  void tick();
  void end_of_elaboration() override;
  uint32_t burst_beats(uint64_t addr, uint32_t left) const;
  size_t first_master(uint64_t candidates, size_t start) const;
  void check_request(const MemRequest& r, size_t master, const char* dir) const;
  // Per-edge parts of tick(), inlined into it (defined in hp_port.cpp only).
  inline void return_reads();
  inline void return_responses();
  inline void issue_read();
  inline void issue_write();
  inline void forward_write_data();
  bool idle() const;

  Clock& clock_;
  HpPortConfig config_;
  DdrPortLink& ddr_;
  std::vector<Master> masters_;
  detail::FixedRing<ReadInFlight> reads_;        // issued read bursts, in DDR return order
  detail::FixedRing<WriteInFlight> write_data_;  // issued write bursts whose beats are still to forward
  detail::FixedRing<WriteInFlight> writes_;      // issued write bursts awaiting their response
  size_t rd_rr_ = 0, wr_rr_ = 0;                 // master considered first at the next issue
  // Bit i: master i's AR / AW FIFO holds a request (kept by the FIFOs, RegFifo::watch_valid);
  // master i still has bursts of its current read / write request to issue.
  uint64_t ar_valid_ = 0, aw_valid_ = 0, rd_split_ = 0, wr_split_ = 0;
  bool elaborated_ = false;
  sc_core::sc_event_or_list wake_;
  bool sleeping_ = false;
  HpPortStats stats_;
};

}  // namespace bitsim::hw
