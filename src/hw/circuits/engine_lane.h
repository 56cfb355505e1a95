#pragma once
// EngineLanes: what the matmul engine and the attention unit share, clocked as in
// docs/hw-timing.md (last section): per lane the input and result streams, the result queue,
// busy tracking, the error latch, discard to TLAST and the zero beat, CONTROL.clear, the
// status registers (engine_regs.h) as a TLM-2.0 target on `ctrl`, and the statistics. The
// arithmetic is a LaneDatapath per lane (header parse, per-beat work, result emission): a
// new circuit is a new LaneDatapath and an engine that names it (matmul_engine.h,
// attention_unit.h), nothing else.
//
// Per lane, per edge (cycle c):
//   - at most one input beat is taken, and none while the result stream is full (as seen
//     at c) or the result queue lacks the room the datapath asks for (room_for_next_beat);
//     a beat not taken while one is offered counts as a stall;
//   - the datapath queues result beats with the edge they may leave (queue); the first
//     queued beat is pushed at that edge, or at the first later edge with room (beats leave
//     in order, one per edge);
//   - framing is the lane's: TLAST on a beat that does not end the transfer is the
//     datapath's truncated error, no TLAST on the beat that ends it (end_transfer) its
//     trailing-data error;
//   - an error (fail) latches code, unit (group or head within the transfer), row and edge;
//     the datapath queues what it completed (abort); the lane discards input up to TLAST,
//     queues one zero beat with TLAST `result_delay` edges after the TLAST beat, then takes
//     no input until CONTROL.clear (a clear written while discarding applies at TLAST).
//   - a lane with no input to take and nothing queued sleeps (with the other lane) on its
//     input stream's written event and on register writes.
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include "hw/parts/clock.h"
#include "hw/circuits/engine_regs.h"
#include "hw/parts/reg_fifo.h"
#include "model/board_shape.h"

namespace bitsim::hw {

using model::kLanes;

// The lane settings an engine takes from its own config (MatmulEngineConfig,
// AttentionUnitConfig), which names and validates result_delay.
struct EngineLaneConfig {
  int result_delay = 4;        // edges from a unit's last input beat to its results' queue
                               // time (matmul.pipeline_depth, attention.drain)
  int input_fifo_beats = 2;    // depth of each lane's input stream (beats); >= 1
  int output_fifo_beats = 16;  // depth of each lane's result stream (beats); >= 1
  uint64_t reg_base = 0;       // status register block (lane l at reg_base + l * 0x100),
                               // 0x100-aligned
};

// Statistics of one lane (64-bit; the registers show the low 32 bits of some).
struct EngineLaneStats {
  uint64_t beats_in = 0;      // input beats taken (discarded ones included)
  uint64_t beats_out = 0;     // result beats pushed (the error zero beat included)
  uint64_t transfers = 0;     // transfers ended (result TLAST pushed), errors included
  uint64_t units = 0;         // groups (matmul) or heads (attention) completed
  uint64_t rows = 0;          // rows completed (matmul: weight rows; attention: K and V rows)
  uint64_t busy_cycles = 0;   // edges from taking a transfer's first beat to pushing its
                              // TLAST beat, inclusive, summed over transfers (overlapping
                              // transfers counted once)
  uint64_t stall_cycles = 0;  // edges where an input beat was offered but not taken
  uint64_t errors = 0;        // errors latched
};

// The latched error of a lane.
struct EngineLaneError {
  uint32_t code = 0;   // ERROR_CODE: model::StreamError (matmul), model::AttentionError
  int unit = -1;       // group or head index within the transfer (-1: none)
  int row = -1;        // row within the unit; -1 in a header, x or q (or after the unit)
  uint64_t cycle = 0;  // edge at which it was detected
};

class EngineLane;

// Gathers a vector that arrives as `beats` beats (x, q) into buf: beat `*beat` goes to
// buf[8 * *beat ..]. True when it was the last one (*beat is then 0 again).
inline bool collect_beat(int8_t* buf, int* beat, int beats, uint64_t data) {
  std::memcpy(buf + 8 * *beat, &data, 8);
  if (++*beat < beats) return false;
  *beat = 0;
  return true;
}

// The per-lane arithmetic of an engine. The lane calls it for every input beat it does not
// discard; it calls the lane back to queue results, count rows and units, end a transfer or
// fail.
class LaneDatapath {
 public:
  virtual ~LaneDatapath() = default;
  // ERROR_CODE of a TLAST before the end of the transfer, and of a missing TLAST at its end.
  virtual uint32_t truncated_code() const = 0;
  virtual uint32_t trailing_data_code() const = 0;
  // ERROR_ROW of a framing error found after the beat just taken: the row in progress (or
  // the next one), -1 in a header, x or q.
  virtual int error_row() const = 0;
  // Result queue entries the lane must provide (rounded up to a power of two): enough for
  // everything that can wait result_delay edges plus a unit's results.
  virtual uint32_t queue_entries(int result_delay) const = 0;
  // Free queue entries needed before the next input beat is taken, given the queue's
  // capacity: at least 2 (a beat may queue a result and the error zero beat); the capacity
  // itself means "only when the queue is empty".
  virtual uint32_t room_for_next_beat(uint32_t capacity) const = 0;
  // True while a completed result waits inside the datapath (not yet queued): STATUS.busy.
  virtual bool holds_result() const { return false; }
  // One input beat of a transfer, taken at edge c.
  virtual void take(EngineLane& lane, const StreamBeat& beat, uint64_t c) = 0;
  // The lane latched an error at c: queue the results already complete, expect a header next.
  virtual void abort(EngineLane& lane, uint64_t c) = 0;
  // From now on the results are not computed (they are zeros); every beat is still taken,
  // checked and answered at the same edge: the timing oracle of a timing-only run, whose
  // results nobody reads. A datapath whose arithmetic is cheap may ignore it.
  virtual void skip_arithmetic() {}
};

// One lane: its streams, result queue, error latch and statistics around its datapath.
class EngineLane {
 public:
  EngineLane(int index, const EngineLaneConfig& config, std::unique_ptr<LaneDatapath> datapath);

  // ---- For the datapath ----
  int result_delay() const { return result_delay_; }
  int unit() const { return unit_; }  // group or head index within the transfer
  // Queues a result beat that may leave from edge `ready` on (in order after the others).
  void queue(uint64_t data, bool last, uint64_t ready);
  void row_done() { ++stats_.rows; }
  void unit_done() {
    ++stats_.units;
    ++unit_;
  }
  // The beat just taken ends the transfer: with TLAST (`tlast`) the transfer is done; without
  // it, the trailing-data error.
  void end_transfer(bool tlast, uint64_t c);
  // Latches an error (row -1: none) and discards up to TLAST (`tlast`: this beat had it).
  void fail(uint32_t code, int row, bool tlast, uint64_t c);

  // ---- For the engine ----
  AxiStream& in() { return *in_; }
  const AxiStream& in() const { return *in_; }
  AxiStream& out() { return *out_; }
  const AxiStream& out() const { return *out_; }
  bool step(uint64_t c);  // one edge; true if the lane needs the next edge
  const EngineLaneStats& stats() const { return stats_; }
  const EngineLaneError& error() const { return err_; }
  bool busy() const;
  bool stopped() const { return mode_ == Mode::Stopped; }
  // CONTROL.clear; true if a stopped lane resumes (the engine wakes).
  bool clear_error();
  LaneRegisterView registers() const;
  const LaneDatapath& datapath() const { return *datapath_; }
  void skip_arithmetic() { datapath_->skip_arithmetic(); }  // LaneDatapath::skip_arithmetic
  // Timing state (hw/parts/fingerprint.h): mode, transfer open, unit, result queue, FIFOs.
  uint64_t state_fingerprint() const;

 private:
  enum class Mode : uint8_t { Run, Discard, Stopped };
  struct Item {
    uint64_t data;
    uint64_t ready;  // edge from which it may be pushed
    bool last;
  };
  void take(const StreamBeat& b, uint64_t c);
  void close_transfer();
  void push_result(uint64_t c);
  void end_of_error(uint64_t c);

  std::unique_ptr<AxiStream> in_, out_;
  std::unique_ptr<LaneDatapath> datapath_;
  int result_delay_;
  Mode mode_ = Mode::Run;
  bool in_transfer_ = false;     // a beat of the current transfer was taken
  bool busy_open_ = false;       // a busy interval is open (stats.busy_cycles)
  uint64_t transfer_start_ = 0;  // edge that opened it
  int unit_ = 0;
  EngineLaneError err_;
  bool clear_requested_ = false;
  EngineLaneStats stats_;
  std::vector<Item> queue_;  // a ring; capacity a power of two
  uint32_t head_ = 0, count_ = 0, mask_ = 0;
};

// The engine module: kLanes lanes, their clocked behaviour and their register target.
class EngineLanes : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(EngineLanes);
  using DatapathFactory = std::function<std::unique_ptr<LaneDatapath>()>;
  // Throws std::invalid_argument for a FIFO depth < 1 or a reg_base not 0x100-aligned.
  EngineLanes(sc_core::sc_module_name name, Clock& clock, const EngineLaneConfig& config,
              const DatapathFactory& datapath);

  AxiStream& in(int lane);   // input stream of a lane (the MM2S pushes)
  AxiStream& out(int lane);  // result stream of a lane (the S2MM pops)

  // Status registers (engine_regs.h), 32-bit accesses. Must be bound to an initiator (the
  // host's register path); SystemC refuses to elaborate an unbound target socket.
  tlm_utils::simple_target_socket<EngineLanes> ctrl;

  // The same information for tests and the host (no simulated time).
  static constexpr int lanes() { return kLanes; }
  const EngineLaneConfig& lane_config() const { return config_; }
  const EngineLaneStats& stats(int lane) const { return lane_ref(lane).stats(); }
  EngineLaneError error(int lane) const { return lane_ref(lane).error(); }
  bool busy(int lane) const { return lane_ref(lane).busy(); }        // STATUS.busy
  bool stopped(int lane) const { return lane_ref(lane).stopped(); }  // STATUS.stopped
  void clear_error(int lane);                                        // as CONTROL.clear
  LaneRegisterView registers(int lane) const { return lane_ref(lane).registers(); }
  // Timing state of both lanes (hw/parts/fingerprint.h).
  uint64_t state_fingerprint() const;
  // Both lanes' datapaths skip their arithmetic from now on (LaneDatapath::skip_arithmetic).
  void skip_arithmetic() {
    for (EngineLane& l : lanes_) l.skip_arithmetic();
  }
  // One rising edge `c` of the clocked method, awake (hw/edge_loop.h drives the board with it,
  // without SystemC's scheduler): true when the method then sleeps, until a beat reaches an
  // empty input (input_waiting) or a register write.
  bool edge(uint64_t c);
  bool input_waiting() const;

 protected:
  const LaneDatapath& datapath(int lane) const { return lane_ref(lane).datapath(); }

 private:
  void on_clock();
  void b_transport(tlm::tlm_generic_payload& p, sc_core::sc_time& delay);
  unsigned int transport_dbg(tlm::tlm_generic_payload& p);
  const EngineLane& lane_ref(int lane) const;
  EngineLane& lane_ref(int lane);

  Clock& clock_;
  EngineLaneConfig config_;
  std::vector<EngineLane> lanes_;
  bool sleeping_ = false;
  sc_core::sc_event wake_;  // a register write that may let a stopped lane resume
  sc_core::sc_event_or_list wake_list_;
};

}  // namespace bitsim::hw
