#pragma once
// MatmulEngine: the ternary matrix x INT8 vector engine of CIRCUITS.md section 2, clocked as
// in docs/hw-timing.md (last section). Two identical lanes; each takes a stream of groups
// (header, x, R packed ternary rows) from its MM2S DMA and returns, per group, R int32 dot
// products acc_r = sum_j t_rj * x_j, two per beat, zero-padded per group, TLAST on the last
// beat of the transfer. The arithmetic equals golden::ternary_matvec bit for bit.
//
// The module owns its streams: per lane an input AxiStream (`in(lane)`, fed by the DMA's
// MM2S) and an output AxiStream (`out(lane)`, drained by the DMA's S2MM), with the depths of
// the config. Status registers (engine_regs.h) are a TLM-2.0 target on `ctrl`.
//
// Per lane, per edge (cycle c):
//   - at most one input beat is taken, and none while the output FIFO is full (as seen at c);
//   - a row whose last beat is taken at c has its result ready at c + pipeline_depth: the
//     output beat holding it is pushed at that edge (or, if the FIFO is full then, at the
//     first edge with room; beats leave in order). A beat holds two results; it leaves when
//     its second result is ready, or with the group's last result when R is odd (high word 0).
//   - TLAST must be on exactly the last beat of the group flagged last (else Truncated, or
//     TrailingData when it is missing there);
//   - errors (ERROR_CODE = model::StreamError: 1 bad magic, 2 bad version, 3 reserved bits,
//     4 n outside 1..4096, 5 R = 0, 6 data byte >= 243, 7 truncated, 9 trailing data; padding
//     digits and bytes are not checked and never count): the lane latches code, group and
//     row, discards input up to TLAST, pushes one zero beat with TLAST pipeline_depth edges
//     after the TLAST beat (after every earlier result), then takes no input until
//     CONTROL.clear (engine_regs.h). Details: docs/hw-timing.md.
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include "hw/clock.h"
#include "hw/engine_regs.h"
#include "hw/reg_fifo.h"
#include "model/packed_image.h"

namespace bitsim::hw {

// The shipped default is the board's matmul engine as bitsim runs it (the board sets
// reg_base); visit() gives each field's key, range, unit, evidence label and meaning
// (hw/config_field.h).
struct MatmulEngineConfig {
  int lanes = 2;               // lanes, one per DMA (CIRCUITS.md 2: two); 1..8
  int pipeline_depth = 4;      // cycles from a row's last input beat to the push of its result
                               // into the output FIFO (model, no board figure). Default 4, a
                               // plausible decode -> MAC -> adder tree -> output register
                               // pipeline
  int input_fifo_beats = 2;    // depth of each lane's input stream FIFO (beats); 2 sustains one
                               // beat per clock (reg_fifo.h)
  int output_fifo_beats = 16;  // depth of each lane's output stream FIFO (beats); when it is
                               // full the lane takes no input
  uint64_t reg_base = 0x43C0'0000;  // byte address of the status register block (lane l at
                                    // reg_base + l * 0x100); transactions on `ctrl` carry
                                    // absolute addresses (set 0 behind a router that passes
                                    // offsets)

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.pipeline_depth, FieldInfo{"matmul.pipeline_depth", 0, 1024, "cycles", Evidence::kSimulated,
                                  "matmul engine: row's last beat -> its result (CIRCUITS.md 2)"});
    visit_engine_ports(c, "matmul", "matmul engine", v);
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const { check_engine_fields(*this, "matmul", engine_reg::kLaneStride, who); }
};

// Statistics of one lane (64-bit; the registers show the low 32 bits of some).
struct MatmulLaneStats {
  uint64_t beats_in = 0;      // input beats taken (discarded ones included)
  uint64_t beats_out = 0;     // output beats pushed (the error zero beat included)
  uint64_t transfers = 0;     // transfers ended (output TLAST pushed), errors included
  uint64_t groups = 0;        // groups completed (all rows taken)
  uint64_t rows = 0;          // rows completed
  uint64_t busy_cycles = 0;   // edges from taking a transfer's first beat to pushing its
                              // TLAST beat, inclusive, summed over transfers
  uint64_t stall_cycles = 0;  // edges where an input beat was valid but not taken because the
                              // output FIFO was full (or the pipeline buffer was)
  uint64_t errors = 0;        // errors latched
};

// The latched error of a lane.
struct MatmulLaneError {
  model::StreamError code = model::StreamError::None;
  int group = -1;      // group index within the transfer (-1: none)
  int row = -1;        // row within the group; -1 when in the header or x (or after the group)
  uint64_t cycle = 0;  // edge at which it was detected
};

class MatmulEngine : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(MatmulEngine);
  MatmulEngine(sc_core::sc_module_name name, const Clock& clock, const MatmulEngineConfig& config);

  AxiStream& in(int lane);   // input stream of a lane (the MM2S pushes)
  AxiStream& out(int lane);  // result stream of a lane (the S2MM pops)

  // Status registers (engine_regs.h), 32-bit accesses. Must be bound to an initiator (the
  // host's register path); SystemC refuses to elaborate an unbound target socket.
  tlm_utils::simple_target_socket<MatmulEngine> ctrl;

  // The same information for tests and the host (no simulated time).
  int lanes() const { return int(lanes_.size()); }
  const MatmulEngineConfig& config() const { return config_; }
  const MatmulLaneStats& stats(int lane) const;
  MatmulLaneError error(int lane) const;
  bool busy(int lane) const;     // STATUS.busy
  bool stopped(int lane) const;  // STATUS.stopped: error sequence done, waiting for a clear
  void clear_error(int lane);    // as a write of CONTROL.clear
  LaneRegisterView registers(int lane) const;

 private:
  enum class Phase : uint8_t { Header0, Header1, X, Rows, Discard, Stopped };

  struct OutItem {
    uint64_t data;
    uint64_t ready;  // edge at which it may be pushed
    bool last;
  };

  struct Lane {
    std::unique_ptr<AxiStream> in, out;
    Phase phase = Phase::Header0;
    bool in_transfer = false;    // a beat of the current transfer was taken
    bool busy_open = false;      // a busy interval is open (stats.busy_cycles)
    uint64_t transfer_start = 0; // edge that opened it
    int group = 0;               // group index within the transfer
    uint64_t header0 = 0;        // beat 0 of the current header
    uint32_t n = 0, rows = 0;    // current group
    bool last_group = false;
    int x_beats = 0, row_beats = 0, data_bytes = 0;
    int beat = 0;                // beat index within x or within the current row
    uint32_t row = 0;            // row index within the group
    int32_t acc = 0;
    bool half_valid = false;     // first result of an output beat waiting for its pair
    int32_t half = 0;
    // Results on their way to the output FIFO (a ring; capacity a power of two).
    std::vector<OutItem> pending;
    uint32_t pend_head = 0, pend_count = 0;
    MatmulLaneError err;
    bool clear_requested = false;
    MatmulLaneStats stats;
    // x, zero beyond n (up to the last data byte's 5 elements).
    std::array<int8_t, model::kMaxRowLength + 16> x{};
    // x by byte position of a row: x[5k .. 5k+4] and 3 zeros at [8k .. 8k+7], built once per
    // group when x is complete, zero past the last data byte (a row's padding bytes meet
    // zeros); allocated once.
    std::vector<int16_t> x_by_byte;
  };

  void on_clock();
  inline bool step_lane(Lane& l, uint64_t c);  // true if the lane needs the next edge; inlined into on_clock
  void take_beat(Lane& l, const StreamBeat& b, uint64_t c);
  static constexpr int kMaxDataBytes = (model::kMaxRowLength + 4) / 5;  // 820
  void spread_x(Lane& l);
  void row_beat(Lane& l, uint64_t data, bool tlast, uint64_t c);
  void finish_row(Lane& l, bool tlast, uint64_t c);
  void fail(Lane& l, model::StreamError e, int row, bool tlast, uint64_t c);
  void end_of_error(Lane& l, uint64_t c);
  void queue(Lane& l, uint64_t data, bool last, uint64_t ready);
  void b_transport(tlm::tlm_generic_payload& p, sc_core::sc_time& delay);
  unsigned int transport_dbg(tlm::tlm_generic_payload& p);
  const Lane& lane_ref(int lane) const;

  const Clock& clock_;
  MatmulEngineConfig config_;
  std::vector<Lane> lanes_;
  // Packed byte -> its 5 trits (-1, 0, 1) and 3 zeros, from model/packed_image's decode
  // table; bytes >= 243 are rejected before their (zero) entries could count.
  alignas(16) int16_t trits_[256][8];
  uint32_t pend_mask_ = 0;
  bool sleeping_ = false;
  sc_core::sc_event wake_;  // a register write that may let a stopped lane resume
  sc_core::sc_event_or_list wake_list_;
};

}  // namespace bitsim::hw
