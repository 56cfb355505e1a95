#pragma once
// AttentionUnit: the integer attention unit of CIRCUITS.md section 3, clocked as in
// docs/hw-timing.md (last section). Two lanes, one head at a time per lane, 8 MACs per lane
// (one 8-byte beat per clock) shared by the K phase and the V phase, and one m multiplier
// shared by the lanes. Per head: header (2 beats), q (12), T K rows (12 each), T V rows (12
// each) in; acc_0..acc_95, sum, 0 (98 words, 49 beats) out, TLAST on the last beat of the
// head flagged last. The arithmetic equals golden::attention_head bit for bit (both modes).
//
// The module owns its streams: per lane an input AxiStream (`in(lane)`, fed by the DMA's
// MM2S) and an output AxiStream (`out(lane)`, drained by the DMA's S2MM). Status registers
// (engine_regs.h) are a TLM-2.0 target on `ctrl`.
//
// Per lane, per edge (cycle c):
//   - at most one input beat is taken, and none while the output FIFO is full (as seen at c);
//   - s_t is complete with row t's last K beat; p_t is computed when row t's first V beat is
//     taken (the shared multiplier is asked once per 12 cycles per lane, at most 2 multiplies
//     per 12 cycles in all: it never stalls, so the model does not arbitrate it);
//   - a head whose last V beat is taken at c loads the lane's result bank (49 beats); its
//     beats are pushed one per edge from c + drain on, as the output FIFO has room. The bank
//     holds one head: a head's last V beat is taken only at an edge where the bank is empty
//     (all its beats pushed at earlier edges); only heads shorter than 49 + drain beats
//     (T = 1) can wait for it when the output is not back-pressured.
//   - TLAST must be on exactly the last beat of the head flagged last (else Truncated, or
//     TrailingData when it is missing there);
//   - errors (AttentionError): the lane latches code, head and row, discards input up to
//     TLAST, pushes one zero beat with TLAST drain edges after the TLAST beat (after the
//     bank's beats), then takes no input until CONTROL.clear (engine_regs.h). Details:
//     docs/hw-timing.md.
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

namespace bitsim::hw {

// The head stream format (CIRCUITS.md 3).
constexpr uint16_t kAttentionMagic = 0xA77E;
constexpr uint8_t kAttentionVersion = 1;
constexpr int kAttentionHeadDim = 96;      // q, K and V rows: 96 int8, 12 beats
constexpr int kAttentionRowBeats = 12;
constexpr int kAttentionMaxT = 512;        // T range 1..512
constexpr int kAttentionResultBeats = 49;  // acc_0..acc_95, sum, 0
constexpr uint32_t kAttentionMaxM = (1u << 18) - 1;
// Input beats of one head: 2 + 12 + 24 T.
constexpr uint64_t attention_head_beats(int T) { return 14 + 24 * uint64_t(T); }

// Header fields; encode_attention_header writes them as given, without validation (so tests
// can build bad headers): beat 0 = magic | version << 16 | flags << 24 | T << 32 (flags
// bit 0 last, bit 1 legacy); beat 1 = m (bits 17:0, wider values spill into 23:18) |
// shift << 24 (bits 29:24; wider values spill into the reserved bits).
struct AttentionHeadHeader {
  uint32_t T = 1;       // context length, 1..512
  uint32_t m = 0;       // multiplier, < 2^18
  uint32_t shift = 24;  // S, 0..63
  bool legacy = false;  // legacy shift mode: z = (s_max - s_t) >> 8
  bool last = false;    // last head of the transfer
  uint16_t magic = kAttentionMagic;
  uint8_t version = kAttentionVersion;
};
std::array<uint64_t, 2> encode_attention_header(const AttentionHeadHeader& h);

// ERROR_CODE values of the attention unit. Header checks in this order: magic and version
// (on beat 0), then reserved bits, T, m (on beat 1).
enum class AttentionError : uint32_t {
  None = 0,
  BadMagic = 1,           // beat 0 bits 15:0 != 0xA77E
  BadVersion = 2,         // beat 0 bits 23:16 != 1
  ReservedBits = 3,       // flags bits 7:2, or beat 1 bits 63:30, set
  BadLength = 4,          // T outside 1..512
  MultiplierTooWide = 5,  // beat 1 bits 23:18 set: m does not fit 18 bits
  Truncated = 6,          // TLAST before the end of the head flagged last
  TrailingData = 7,       // no TLAST on the last beat of the head flagged last
};
const char* attention_error_name(AttentionError e);

// The shipped default is the board's attention unit as bitsim runs it (the board sets
// reg_base); visit() gives each field's key, range, unit, evidence label and meaning
// (hw/config_field.h).
struct AttentionUnitConfig {
  int lanes = 2;               // lanes, one per DMA (CIRCUITS.md 3: two); 1..8
  int drain = 4;               // cycles from a head's last V beat to the push of its first
                               // result beat (model, no board figure). Default 4: the MAC
                               // pipeline's last accumulate plus the output register
  int input_fifo_beats = 2;    // depth of each lane's input stream FIFO (beats)
  int output_fifo_beats = 16;  // depth of each lane's output stream FIFO (beats); when it is
                               // full the lane takes no input
  uint64_t reg_base = 0x43C1'0000;  // byte address of the status register block (lane l at
                                    // reg_base + l * 0x100); transactions on `ctrl` carry
                                    // absolute addresses (0 behind an offset-passing router)

  template <typename Self, typename Visitor>
  static void visit(Self& c, Visitor&& v) {
    v(c.drain, FieldInfo{"attention.drain", 0, 1024, "cycles", Evidence::kSimulated,
                         "attention unit: head's last V beat -> first result beat (CIRCUITS.md 3)"});
    visit_engine_ports(c, "attention", "attention unit", v);
  }
  // Throws bitsim::Error naming `who` and the key of the first field out of range.
  void validate(const std::string& who) const { check_engine_fields(*this, "attention", engine_reg::kLaneStride, who); }
};

// Statistics of one lane (64-bit; the registers show the low 32 bits of some).
struct AttentionLaneStats {
  uint64_t beats_in = 0;      // input beats taken (discarded ones included)
  uint64_t beats_out = 0;     // output beats pushed (the error zero beat included)
  uint64_t transfers = 0;     // transfers ended (output TLAST pushed), errors included
  uint64_t heads = 0;         // heads completed (last V beat taken)
  uint64_t kv_rows = 0;       // K rows + V rows completed
  uint64_t multiplies = 0;    // uses of the shared m multiplier (V rows outside legacy mode)
  uint64_t busy_cycles = 0;   // edges from taking a transfer's first beat to pushing its
                              // TLAST beat, inclusive, summed over transfers
  uint64_t stall_cycles = 0;  // edges where an input beat was valid but not taken (output
                              // FIFO full, or a last V beat waiting for the result bank)
  uint64_t errors = 0;        // errors latched
};

// The latched error of a lane.
struct AttentionLaneError {
  AttentionError code = AttentionError::None;
  int head = -1;       // head index within the transfer (-1: none)
  int row = -1;        // row within the head: K row t is t, V row t is T + t; -1 in the
                       // header or q (or after the head)
  uint64_t cycle = 0;  // edge at which it was detected
};

class AttentionUnit : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(AttentionUnit);
  AttentionUnit(sc_core::sc_module_name name, const Clock& clock, const AttentionUnitConfig& config);

  AxiStream& in(int lane);   // input stream of a lane (the MM2S pushes)
  AxiStream& out(int lane);  // result stream of a lane (the S2MM pops)

  // Status registers (engine_regs.h), 32-bit accesses. Must be bound to an initiator (the
  // host's register path); SystemC refuses to elaborate an unbound target socket.
  tlm_utils::simple_target_socket<AttentionUnit> ctrl;

  int lanes() const { return int(lanes_.size()); }
  const AttentionUnitConfig& config() const { return config_; }
  const AttentionLaneStats& stats(int lane) const;
  AttentionLaneError error(int lane) const;
  bool busy(int lane) const;     // STATUS.busy
  bool stopped(int lane) const;  // STATUS.stopped: error sequence done, waiting for a clear
  void clear_error(int lane);    // as a write of CONTROL.clear
  LaneRegisterView registers(int lane) const;

 private:
  enum class Phase : uint8_t { Header0, Header1, Q, K, V, Discard, Stopped };

  struct Lane {
    std::unique_ptr<AxiStream> in, out;
    Phase phase = Phase::Header0;
    bool in_transfer = false;     // a beat of the current transfer was taken
    bool busy_open = false;       // a busy interval is open (stats.busy_cycles)
    uint64_t transfer_start = 0;  // edge that opened it
    int head = 0;                 // head index within the transfer
    uint64_t header0 = 0;
    int T = 0;
    uint32_t m = 0, shift = 0;
    bool legacy = false, last_head = false;
    int beat = 0;  // beat within q or within the current row (0..11)
    int t = 0;     // current K or V row
    int32_t s_cur = 0, s_max = 0, p = 0;
    uint32_t sum = 0;
    // Result bank: one head's 49 beats, pushed from bank_ready on.
    std::array<uint64_t, kAttentionResultBeats> bank{};
    int bank_next = 0, bank_count = 0;
    uint64_t bank_ready = 0;
    bool bank_last = false;
    bool zero_pending = false;  // the error sequence's zero beat (TLAST), after the bank
    uint64_t zero_ready = 0;
    AttentionLaneError err;
    bool clear_requested = false;
    AttentionLaneStats stats;
    alignas(8) std::array<int8_t, kAttentionHeadDim> q{};
    std::array<int32_t, kAttentionHeadDim> acc{};
    std::array<int32_t, kAttentionMaxT> s{};
  };

  void on_clock();
  inline bool step_lane(Lane& l, uint64_t c);  // inlined into on_clock
  void take_beat(Lane& l, const StreamBeat& b, uint64_t c);
  void finish_head(Lane& l, bool tlast, uint64_t c);
  void fail(Lane& l, AttentionError e, int row, bool tlast, uint64_t c);
  void end_of_error(Lane& l, uint64_t c);
  void close_busy_if_idle(Lane& l, uint64_t c);
  void b_transport(tlm::tlm_generic_payload& p, sc_core::sc_time& delay);
  unsigned int transport_dbg(tlm::tlm_generic_payload& p);
  const Lane& lane_ref(int lane) const;

  const Clock& clock_;
  AttentionUnitConfig config_;
  std::vector<Lane> lanes_;
  const std::array<uint16_t, 256>& exp_;
  bool sleeping_ = false;
  sc_core::sc_event wake_;
  sc_core::sc_event_or_list wake_list_;
};

}  // namespace bitsim::hw
