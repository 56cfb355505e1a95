#pragma once
// Ddr3Memory: ddr.model = ddr3, the board's DDR3 device and the Zynq DDR controller clocked
// with the PL (docs/ddr3.md, "The memory on the board"). Each HP port's bursts enter the
// controller port it is wired to (board port i -> controller port min(ddr3.ports - 1, 2 + i):
// HP0 -> 2, HP2 -> 3); hw::Ddr3Timing chooses and times every DRAM burst; read beats leave
// once the DRAM burst that holds them has completed, one beat per port and edge, in order;
// a write enters the controller when its last data beat is taken and is answered once its
// last DRAM burst has completed. Open rows, the refresh phase and the clock crossing's phase
// survive an idle gap (carried_state / restore_state; the fast side is in
// hw/memory/memory_model.cpp).
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

#include "hw/memory/ddr3_timing.h"
#include "hw/memory/memory.h"
#include "hw/memory/memory_registry.h"

namespace bitsim::hw {

// The trace of a run (MemoryTrace's words for ddr.model = ddr3): every request the engine
// took, with its PL edge, and every DRAM burst it served, in the order served, with the edge
// its answer became due (Ddr3Memory::schedule). Words: a tag, the number of requests, then
// two words per request (edge; address | bytes << 34 | write << 47 | controller port << 48),
// then one per burst served (request index << 32 | due edge - the request's edge).
//
// A run with a refresh among its answers (performed at a decision, from the first request to
// the last answer) gives no trace: its answers hold only for openings whose refresh falls at
// the same point, which a later batch almost never meets (tREFI x the crossing's phases), so
// keeping it would cost memory and replays for nothing. Its batch is clocked whenever it comes.
struct Ddr3TraceBuilder {
  std::vector<uint64_t> requests, answers;
  uint64_t refreshes_before = 0;  // the engine's REF count when recording began
  bool spoiled = false;           // a refresh fell among the answers: nothing more is kept
  uint32_t request(uint64_t edge, uint32_t port, bool write, uint64_t addr, uint32_t bytes);
  void answer(uint32_t request, uint64_t due_edge, uint64_t refreshes);
  MemoryTrace take();
};

class Ddr3Memory : public Memory {
 public:
  SC_HAS_PROCESS(Ddr3Memory);
  Ddr3Memory(sc_core::sc_module_name name, Clock& clock, const DdrConfig& config);

  // Bursts held per port and direction: zero on a quiet memory.
  uint64_t state_fingerprint(uint64_t cycle) const override;
  MemoryState carried_state(uint64_t cycle) const override;
  void restore_state(const MemoryState& state) override;
  DramActivity close_dram_activity(uint64_t cycle, std::vector<uint64_t>* tail = nullptr) override;
  void set_command_listener(Ddr3CommandListener listener) override { command_listener_ = std::move(listener); }
  void record_trace() override {
    tracing_ = true;
    trace_.refreshes_before = timing_.command_counts().ref;
    trace_.spoiled = false;
  }
  MemoryTrace take_trace() override;
  const Ddr3Crossing& crossing() const { return crossing_; }
  // The controller port board port `i` is wired to.
  static uint32_t controller_port(const Ddr3Config& c, int i);

  bool has_edge() const override { return true; }
  bool edge(uint64_t now) override;

 private:
  // What a read and a write burst share: where, how long, its tag and order, DECERR.
  struct Burst {
    uint64_t addr = 0, seq = 0;
    uint32_t beats = 0, done = 0, tag = 0;
    uint32_t trace = 0;  // its request's index in the trace (record_trace)
    bool error = false;
  };
  struct Read : Burst {
    uint32_t known = 0, served = 0;
    std::vector<uint64_t> due;  // per beat: the edge it may leave (the first `known`)
  };
  struct Write : Burst {
    uint64_t response_due = UINT64_MAX;
  };
  struct PortState {
    DdrPortLink* link = nullptr;  // the base's links_[i]
    std::deque<Read> reads;
    std::deque<Write> writes;
    size_t data_next = 0;              // writes before this index have all their data
    uint64_t read_seq = 0, write_seq = 0;  // sequence numbers of the next read / write
  };

  void tick();
  bool idle() const;
  bool outside(uint64_t addr, uint64_t n) const { return addr >= config_.size_bytes || n > config_.size_bytes - addr; }
  DdrBurst take_burst(RegFifo<DdrBurst>& channel, int index, bool write, uint64_t now);
  void accept(PortState& p, int index, uint64_t now);
  bool take_write_beat(PortState& p, int index, uint64_t now);  // true when a beat moved
  void schedule(uint64_t now);  // lets the controller choose every burst it can by `now`
  // Submits a burst to the engine at edge `now` (and to the trace, when recording).
  void submit(Burst& b, size_t port, bool write, uint64_t now);

  Ddr3Crossing crossing_;
  Ddr3Timing timing_;
  DramLedger ledger_;                      // every command since reset or the last restore
  Ddr3CommandListener command_listener_;   // --dram-commands
  void listen();                           // the engine's commands to the ledger and the listener
  std::vector<PortState> ports_;
  size_t in_flight_ = 0;  // bursts held over all ports
  bool tracing_ = false;
  Ddr3TraceBuilder trace_;
};

// ddr.model = ddr3's registration (hw/memory/memory_registry.h): this clocked half and its
// fast half (the carried state: open rows, refresh and crossing phase; every buffer's
// address in the batch key).
MemoryKind ddr3_memory_kind();

}  // namespace bitsim::hw
