#pragma once
// The status register block of an engine's lanes (docs/hw-timing.md, last section). Not a
// module: the map, the decode and the register view that the engines' one TLM-2.0 target
// (EngineLanes, engine_lane.h) uses, and that a register model without SystemC can use too.
//
// Map (32-bit registers, 32-bit accesses only; addresses are reg_base + lane * 0x100 + offset):
//   0x00 STATUS       RO  bit 0 busy (a transfer is in progress or result beats are still
//                         inside the engine: pipeline, result bank or output FIFO),
//                         bit 1 error (latched), bit 2 stopped (the error sequence is done:
//                         the lane takes no input until CONTROL.clear)
//   0x04 ERROR_CODE   RO  the engine's error code (0 = none; MatmulEngine: model::StreamError,
//                         AttentionUnit: model::AttentionError)
//   0x08 ERROR_UNIT   RO  group (matmul) or head (attention) index within the transfer,
//                         0xFFFF_FFFF when no error
//   0x0C ERROR_ROW    RO  row within the group (matmul: weight row; attention: position t),
//                         0xFFFF_FFFF when the error is not inside a row (header, x, q)
//   0x10 CONTROL      WO  write bit 0 = 1: clear the latched error (reads 0)
//   0x14 UNITS_DONE   RO  groups (matmul) or heads (attention) completed, low 32 bits
//   0x18 ROWS_DONE    RO  rows completed (matmul: weight rows; attention: K and V rows), low 32
//   0x1C BEATS_IN     RO  input beats taken, low 32 bits
//   0x20 BEATS_OUT    RO  output beats pushed, low 32 bits
// Writes to a read-only register are ignored (OKAY, as an AXI-Lite slave would); an address
// outside the map gets TLM_ADDRESS_ERROR_RESPONSE, a length other than 4 or a streaming
// width other than 4 TLM_BURST_ERROR_RESPONSE, byte enables TLM_BYTE_ENABLE_ERROR_RESPONSE.
// Accesses add no delay: the cost of an AXI-Lite access is the host's driver profile.
#include <cstdint>

#include <tlm>

namespace bitsim::hw {

namespace engine_reg {
constexpr uint64_t kLaneStride = 0x100;
constexpr uint32_t kStatus = 0x00;
constexpr uint32_t kErrorCode = 0x04;
constexpr uint32_t kErrorUnit = 0x08;
constexpr uint32_t kErrorRow = 0x0C;
constexpr uint32_t kControl = 0x10;
constexpr uint32_t kUnitsDone = 0x14;
constexpr uint32_t kRowsDone = 0x18;
constexpr uint32_t kBeatsIn = 0x1C;
constexpr uint32_t kBeatsOut = 0x20;
constexpr uint32_t kStatusBusy = 1u << 0;
constexpr uint32_t kStatusError = 1u << 1;
constexpr uint32_t kStatusStopped = 1u << 2;
constexpr uint32_t kControlClear = 1u << 0;
constexpr uint32_t kNone = 0xFFFF'FFFFu;  // ERROR_UNIT / ERROR_ROW when not applicable
}  // namespace engine_reg

// What one lane shows through its registers (the engine fills it on each read).
struct LaneRegisterView {
  bool busy = false;
  bool error = false;
  bool stopped = false;
  uint32_t error_code = 0;
  uint32_t error_unit = engine_reg::kNone;
  uint32_t error_row = engine_reg::kNone;
  uint64_t units_done = 0;
  uint64_t rows_done = 0;
  uint64_t beats_in = 0;
  uint64_t beats_out = 0;
  bool operator==(const LaneRegisterView&) const = default;
};

// One decoded register access.
struct RegAccess {
  int lane = 0;
  uint32_t offset = 0;  // within the lane block
  bool write = false;
  uint32_t value = 0;   // the written value (writes)
};

// Checks command, length, byte enables and address of a transaction on a block of `lanes`
// lane blocks at `base`. On success fills *a and returns true; otherwise sets the payload's
// error response and returns false.
bool decode_reg_access(tlm::tlm_generic_payload& p, uint64_t base, int lanes, RegAccess* a);

// Value of a read-only register of a lane; false for an offset outside the map. CONTROL
// reads 0.
bool read_lane_register(const LaneRegisterView& v, uint32_t offset, uint32_t* value);

// Completes a read (copies the value, OKAY) or a write (OKAY).
void complete_read(tlm::tlm_generic_payload& p, uint32_t value);
void complete_write(tlm::tlm_generic_payload& p);

// True if `offset` is a register of the lane map (reads or writes).
bool is_lane_register(uint32_t offset);

}  // namespace bitsim::hw
